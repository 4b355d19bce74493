"""The compiled (Cython) LIBSVM parser: no just-in-time compilation, safe outputs,
float32 rounding, exponents read in the kernel.

References: Python's ``float()`` and numpy's float64 -> float32 cast for the
numbers; the lengths of the arrays handed in for the bounds.  The grammar and
error codes are tested in ``test_libsvm_parse.py`` and, against scikit-learn,
in ``tests/test_io.py`` and ``tests/test_fuzz_libsvm.py``.
"""

import importlib.machinery
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from fastdp._kernels import _libsvm_parse as kernel


def _outputs(max_rows, max_entries, index_dtype=np.int64, value_dtype=np.float64):
    return [np.empty(max_rows + 1, index_dtype), np.empty(max_entries, index_dtype),
            np.empty(max_entries, value_dtype), np.empty(max_rows), np.empty(max_rows, np.int64),
            np.empty(max_rows, np.uint8)]


def _fill(content, index_dtype=np.int64, value_dtype=np.float64):
    buf = np.frombuffer(content, dtype=np.uint8)
    rows, entries = kernel.count_rows_and_tokens(buf)
    out = _outputs(rows, entries, index_dtype, value_dtype)
    result = kernel.fill_csr(buf, True, *out)
    return result, out


def test_parser_is_compiled_ahead_of_time_and_loading_imports_no_numba(tmp_path):
    """A first load_libsvm must not compile anything: the parser is an extension
    module, and loading a file does not even import numba (the numba parser cost
    about 40 CPU seconds of compilation on a fresh install)."""
    assert kernel.__file__.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
    path = tmp_path / "small.svm"
    path.write_bytes(b"1 1:0.5 3:2.5e-3\n-1 2:1e30\n")
    code = textwrap.dedent(f"""
        import sys
        from fastdp.io import load_libsvm
        X, y = load_libsvm({str(path)!r})
        assert X.shape == (2, 3) and X.nnz == 3, X.shape
        print("numba" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stdout + out.stderr


@pytest.mark.parametrize("short", ["indptr", "indices", "data", "labels", "qids", "has_qid"])
def test_short_output_arrays_raise_and_nothing_is_written_past_them(short):
    """Output arrays shorter than the bounds of count_rows_and_tokens: ValueError,
    and no byte after the end of the short array changes."""
    content = b"1 1:1 2:2\n2 qid:3 1:1 3:3\n3 4:4\n"
    buf = np.frombuffer(content, dtype=np.uint8)
    rows, entries = kernel.count_rows_and_tokens(buf)
    assert (rows, entries) == (4, 6)  # bounds: newlines + 1, colons
    names = ["indptr", "indices", "data", "labels", "qids", "has_qid"]
    out = _outputs(rows, entries)
    k = names.index(short)
    # the kernel needs 3 rows and 5 entries here: leave one less than that
    needed = {"indptr": 4, "indices": 5, "data": 5, "labels": 3, "qids": 3, "has_qid": 3}[short]
    backing = np.zeros(needed + 8, out[k].dtype)
    backing[needed - 1:] = 77
    out[k] = backing[: needed - 1]
    with pytest.raises(ValueError, match="too short"):
        kernel.fill_csr(buf, True, *out)
    assert (backing[needed - 1:] == 77).all()


def test_read_only_empty_and_blank_buffers():
    assert kernel.count_rows_and_tokens(np.frombuffer(b"", dtype=np.uint8)) == (1, 0)
    for content in [b"", b"\n\n", b"# only a comment\n", b"   \t\r\n"]:
        (err, line, rows, nnz, hard, *_), _ = _fill(content)
        assert (err, line, rows, nnz, hard.shape) == (kernel.ERR_NONE, 0, 0, 0, (0, 4))
    buf = np.frombuffer(b"1 1:2\n", dtype=np.uint8)
    assert not buf.flags.writeable
    (err, _, rows, nnz, *_), out = _fill(buf.tobytes())
    assert (err, rows, nnz, out[2][0]) == (kernel.ERR_NONE, 1, 1, 2.0)


def test_index_arrays_of_different_dtypes_are_refused():
    buf = np.frombuffer(b"1 1:2\n", dtype=np.uint8)
    out = _outputs(2, 1)
    out[0] = out[0].astype(np.int32)
    with pytest.raises(ValueError, match="dtype mismatch"):
        kernel.fill_csr(buf, True, *out)


def test_float32_values_are_the_double_rounded_once():
    """A float32 value is float(token) rounded to float32 (as scikit-learn stores it),
    including tokens whose direct decimal -> float32 rounding would differ."""
    rng = np.random.default_rng(11)
    doubles = rng.standard_normal(5000) * 10.0 ** rng.integers(-20, 20, 5000)
    tokens = [repr(float(x)).encode() for x in doubles]
    # halfway between two float32 (plus a hair): double rounding sensitive
    f32 = rng.standard_normal(2000).astype(np.float32)
    above = np.nextafter(f32, np.float32(np.inf))
    mid = (f32.astype(np.float64) + above.astype(np.float64)) / 2
    tokens += [b"%.17g" % np.nextafter(m, np.inf) for m in mid]
    tokens += [b"%.17g" % np.nextafter(m, -np.inf) for m in mid]
    content = b"".join(b"0 1:" + t + b"\n" for t in tokens)
    (err, _, rows, nnz, hard, *_), out = _fill(content, np.int32, np.float32)
    assert err == kernel.ERR_NONE and nnz == len(tokens) and hard.shape[0] == 0
    expected = np.array([float(t) for t in tokens]).astype(np.float32)
    np.testing.assert_array_equal(out[2][:nnz].view(np.uint32), expected.view(np.uint32))


def test_exponent_tokens_are_converted_in_the_kernel():
    """Tokens with an exponent and at most 19 digits are read by the kernel (no
    deferral to Python) and are bit-identical to float(); malformed exponents are
    deferred (float() then decides)."""
    rng = np.random.default_rng(12)
    lengths = rng.integers(1, 20, size=4000)  # 1 to 19 digits
    exponents = rng.integers(-300, 281, size=4000)  # normal results (no deferral range)
    dots = rng.integers(0, 6, size=4000)
    tokens = []
    for n, e, d in zip(lengths.tolist(), exponents.tolist(), dots.tolist()):
        digits = "".join(rng.choice(list("0123456789"), n))
        if 0 < d < len(digits):
            digits = digits[:-d] + "." + digits[-d:]
        sign = ["", "-", "+"][len(tokens) % 3]
        tokens.append(f"{sign}{digits}{'eE'[len(tokens) % 2]}{e:+d}".encode())
    tokens += [b"1e5", b"1.e5", b".5e-5", b"-0e9", b"7E0", b"1e-0", b"1e+00000000000000000000002"]
    content = b"".join(b"0 1:" + t + b"\n" for t in tokens)
    (err, _, _, nnz, hard, *_), out = _fill(content)
    assert err == kernel.ERR_NONE and nnz == len(tokens)
    assert hard.shape[0] == 0, [content[s:e] for s, e, *_ in hard[:5]]
    expected = np.array([float(t) for t in tokens])
    np.testing.assert_array_equal(out[2][:nnz].view(np.uint64), expected.view(np.uint64))
    bad = [b"1e", b"1e+", b"1e5.", b"1e5e5", b"1e-5x", b"e5", b"1.5f3", b"1e--3", b"1e3.0"]
    content = b"".join(b"0 1:" + t + b"\n" for t in bad)
    (err, _, _, nnz, hard, *_), out = _fill(content)
    assert err == kernel.ERR_NONE and hard.shape[0] == nnz == len(bad)
    assert np.isnan(out[2][:nnz]).all()
