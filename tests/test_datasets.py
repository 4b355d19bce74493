"""Tests of fastdp/datasets.py.

The loader's reference is ``sklearn.datasets.load_svmlight_file`` on the same
bytes: shape, index arrays, bit-identical values and labels. Synthetic data is
checked against its definition (anchors-perf.md section 4.1) and the
reference generator written out there.
"""

import bz2
import gzip
import io
import lzma
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

from fastdp.datasets import (
    DATASETS,
    dataset_search_paths,
    load_dataset,
    load_libsvm,
    make_sparse_classification,
    make_sparse_regression,
)
from fastdp.exceptions import DatasetNotFoundError, LibsvmParseError, ValidationError

LIBSVM_FILES = {
    "phishing": ("phishing/phishing.bz2", None),
    "a9a": ("a9a/a9a.bz2", None),
    "a9a.t": ("a9a/a9a.t.bz2", 123),
    "w8a": ("w8a/w8a.bz2", None),
    "mushrooms": ("mushrooms/mushrooms.bz2", None),
    "cpusmall": ("cpusmall/cpusmall.bz2", None),
    "news20": ("news20/news20.bz2", None),
}


def assert_same_as_sklearn(ours, reference, qid=False):
    X, y = ours[0], ours[1]
    X_ref, y_ref = reference[0], reference[1]
    assert sp.isspmatrix_csr(X) and X.has_canonical_format
    assert X.shape == X_ref.shape
    assert X.dtype == X_ref.dtype and y.dtype == y_ref.dtype
    np.testing.assert_array_equal(X.indptr, X_ref.indptr)
    np.testing.assert_array_equal(X.indices, X_ref.indices)
    unsigned = np.uint32 if X.dtype == np.float32 else np.uint64
    np.testing.assert_array_equal(X.data.view(unsigned), X_ref.data.view(unsigned))  # bit-identical
    np.testing.assert_array_equal(y.view(np.uint64), y_ref.view(np.uint64))
    if qid:
        np.testing.assert_array_equal(ours[2], reference[2])


def compare_bytes(content, **kwargs):
    """Load the same bytes with both loaders and compare."""
    sk_kwargs = dict(kwargs)
    sk_kwargs.pop("index_dtype", None)
    if "return_qid" in sk_kwargs:
        sk_kwargs["query_id"] = sk_kwargs.pop("return_qid")
    reference = load_svmlight_file(io.BytesIO(content), **sk_kwargs)
    ours = load_libsvm(io.BytesIO(content), **kwargs)
    assert_same_as_sklearn(ours, reference, qid=kwargs.get("return_qid", False))
    return ours


# ----------------------------------------------------------------------------- real files


@pytest.mark.parametrize("name", sorted(LIBSVM_FILES))
def test_real_libsvm_file_equals_sklearn(name, data_dir):
    relative, n_features = LIBSVM_FILES[name]
    path = data_dir / relative
    if not path.exists():
        pytest.skip(f"{path} not present")
    ours = load_libsvm(path, n_features=n_features)
    reference = load_svmlight_file(str(path), n_features=n_features)
    assert_same_as_sklearn(ours, reference)


def test_every_libsvm_dataset_in_manifest_is_covered():
    libsvm = {info["files"][s] for info in DATASETS.values() if info["kind"] == "libsvm" for s in info["files"]}
    assert libsvm == {relative for relative, _ in LIBSVM_FILES.values()}


# ----------------------------------------------------------------------------- format quirks

QUIRKS = {
    "comments": b"# header\n1 1:2 3:4 # trailing\n#only\n-1 2:0.5#glued\n",
    "hash_inside_token": b"1 1:2#3:4\n-1 2:1\n",
    "blank_lines": b"\n\n1 1:2\n\n   \n-1 2:1\n\n",
    "empty_rows": b"-1 \n1\n-1 3:1\n+1 \n",
    "explicit_zeros": b"1 1:0 2:0.0 3:-0\n0 1:1\n",
    "no_trailing_newline": b"1 1:2\n-1 2:1",
    "crlf": b"1 1:2 3:1\r\n-1 2:1\r\n\r\n",
    "tabs_and_spaces": b"1\t1:2  \t 3:1\n-1    2:1\x0b4:1\x0c5:1\n",
    "scientific": b"1e0 1:1e-5 2:1E+3 3:-2.5e-300 4:6.02214076e23\n-1 1:.5 2:5. 3:+7\n",
    "special_values": b"1 1:inf 2:-inf 3:nan 4:Infinity\ninf 1:1\n-nan 2:1\n",
    "underscores": b"1_0 1_0:2_5 20:1_000.5\n-1 3:1\n",
    "long_mantissas": b"1 1:0.18257418583505536 2:1.000000000000000000000001 3:123456789012345678901234\n",
    "subnormal_and_huge": b"1 1:4.9e-324 2:1e-400 3:1e400 4:1.7976931348623157e308\n",
    "leading_zeros_and_signs": b"+1 001:1 +2:2 03:-3\n-0 4:0004\n",
    "labels": b"1.5 1:1\n-2e3 1:1\n3 1:1\n",
    "only_comments": b"# nothing\n#\n",
    "empty": b"",
}


@pytest.mark.parametrize("name", sorted(QUIRKS))
def test_quirk_equals_sklearn(name):
    compare_bytes(QUIRKS[name])


@pytest.mark.parametrize("name", ["comments", "scientific", "special_values", "long_mantissas"])
def test_quirk_float32_equals_sklearn(name):
    X, y = compare_bytes(QUIRKS[name], dtype=np.float32)
    assert X.dtype == np.float32 and y.dtype == np.float64


def test_empty_file_shape_like_sklearn():
    X, y = compare_bytes(b"")
    assert X.shape == (0, 1) and y.shape == (0,)


@pytest.mark.parametrize("zero_based", ["auto", True, False])
def test_one_based_file(zero_based):
    X, _ = compare_bytes(b"1 1:1 4:2\n-1 2:1\n", zero_based=zero_based)
    assert X.shape[1] == (5 if zero_based is True else 4)


@pytest.mark.parametrize("zero_based", ["auto", True])
def test_zero_based_file(zero_based):
    X, _ = compare_bytes(b"1 0:1 4:2\n-1 2:1\n", zero_based=zero_based)
    assert X.shape[1] == 5 and X[0, 0] == 1.0


def test_auto_rule_looks_at_the_whole_file():
    # index 0 only on the last line: the whole file is zero-based
    X, _ = compare_bytes(b"1 1:1\n" * 5 + b"1 0:3\n")
    assert X[5, 0] == 3.0 and X[0, 1] == 1.0


def test_n_features_larger_than_max_index():
    X, _ = compare_bytes(b"1 1:1 3:1\n", n_features=10)
    assert X.shape == (1, 10)


def test_n_features_too_small_is_an_error():
    with pytest.raises(ValueError):
        load_svmlight_file(io.BytesIO(b"1 1:1 9:1\n"), n_features=3)
    with pytest.raises(ValidationError, match="n_features=3 is too small"):
        load_libsvm(io.BytesIO(b"1 1:1 9:1\n"), n_features=3)


def test_qid_equals_sklearn():
    X, y, qid = compare_bytes(b"3 qid:1 1:1\n2 qid:1 2:1\n1 qid:-7 1:0.5 # c\n", return_qid=True)
    np.testing.assert_array_equal(qid, [1, 1, -7])
    assert X.nnz == 3


def test_qid_ignored_by_default_even_when_malformed():
    compare_bytes(b"3 qid:abc 1:1\n2 qidfoo:1 2:1\n")


def test_rows_without_qid_get_minus_one():
    _, _, qid = load_libsvm(io.BytesIO(b"1 qid:4 1:1\n2 1:1\n"), return_qid=True)
    np.testing.assert_array_equal(qid, [4, -1])


def test_index_dtype_int32_when_it_fits_int64_on_request():
    # issue 20: int32 indices when the sizes allow (scikit-learn: always int64)
    X, _ = compare_bytes(QUIRKS["comments"])
    assert X.indices.dtype == np.int32 and X.indptr.dtype == np.int32
    X, _ = compare_bytes(QUIRKS["comments"], index_dtype=np.int64)
    assert X.indices.dtype == np.int64 and X.indptr.dtype == np.int64


@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress, lzma.compress], ids=["gz", "bz2", "xz"])
def test_compressed_files(tmp_path, compress):
    content = b"# c\n1 1:0.25 3:1e-3\n-1 2:7\n"
    path = tmp_path / "data.svm"  # the compression is recognised by content, not by suffix
    path.write_bytes(compress(content))
    ours = load_libsvm(path)
    reference = load_svmlight_file(io.BytesIO(content))
    assert_same_as_sklearn(ours, reference)
    if compress is not lzma.compress:  # scikit-learn itself reads .gz and .bz2
        suffixed = tmp_path / ("data.gz" if compress is gzip.compress else "data.bz2")
        suffixed.write_bytes(compress(content))
        assert_same_as_sklearn(load_libsvm(str(suffixed)), load_svmlight_file(str(suffixed)))


# ----------------------------------------------------------------------------- malformed files


@pytest.mark.parametrize(
    "content, line, kwargs",
    [
        (b"1 1:1\n1 abc\n", 2, {}),  # bad token
        (b"1 1:1\n\n# c\n1 3\n", 4, {}),  # missing colon
        (b"1 1:1\n1 3:abc\n", 2, {}),  # non-numeric value
        (b"x 1:1\n", 1, {}),  # non-numeric label
        (b"1 1:1\n1 2:1\n1 0:1\n", 3, {"zero_based": False}),  # index 0, one-based
        (b"1 1:1\n1 3:\n", 2, {}),  # truncated line
        (b"1 1:1\n1 -3:1\n", 2, {}),  # negative index
        (b"1 1:1 1:2\n", 1, {}),  # duplicate index
        (b"1 1:1\n1 3:1 2:1\n", 2, {}),  # unsorted indices
        (b"1 1:1\n1 x:1\n", 2, {}),  # non-integer index
        (b"1 1:1 2:3:4\n", 1, {}),  # two colons
        (b"1 qid 1:1\n", 1, {}),  # qid without a value
        (b"1 1:1\r-1 2:1\r", 1, {}),  # old Mac line ends: one line, label-like token
        (b"1 1:1\n1 2:1 qid:3\n", 2, {}),  # qid not first
    ],
)
def test_malformed_files_raise_with_line_number(content, line, kwargs):
    with pytest.raises(ValueError):  # scikit-learn rejects the same files
        load_svmlight_file(io.BytesIO(content), **kwargs)
    with pytest.raises(LibsvmParseError) as info:
        load_libsvm(io.BytesIO(content), **kwargs)
    assert info.value.line_number == line
    assert f"line {line}" in str(info.value)


def test_index_overflow_is_a_parse_error():
    with pytest.raises(OverflowError):
        load_svmlight_file(io.BytesIO(b"1 3000000000:1\n"))
    with pytest.raises(LibsvmParseError, match="2\\*\\*31"):
        load_libsvm(io.BytesIO(b"1 3000000000:1\n"))


def test_files_on_disk(tmp_path):
    # plain files are read from disk: results, errors and empty files as with bytes
    path = tmp_path / "plain.svm"
    path.write_bytes(QUIRKS["special_values"])
    assert_same_as_sklearn(load_libsvm(path), load_svmlight_file(str(path)))
    path.write_bytes(b"1 1:1\n1 1:inf 2:zz\n")
    for _ in range(2):  # the map of the failed load does not block a later one
        with pytest.raises(LibsvmParseError) as info:
            load_libsvm(path)
        assert info.value.line_number == 2
    path.write_bytes(b"")
    assert load_libsvm(path)[0].shape == (0, 1)


# ---------------------------------------------------------------------------
# a file that changes while it is loaded: an error, never a crash (SIGBUS)
# ---------------------------------------------------------------------------
REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run_child(script, *args, timeout=600):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script), *map(str, args)],
                          capture_output=True, text=True, env=env, cwd=str(REPO_ROOT),
                          timeout=timeout)


def _write_big_file(path, n_rows=20000):
    rng = np.random.default_rng(0)
    X = sp.random(n_rows, 500, density=0.05, format="csr", random_state=rng)
    dump_svmlight_file(X, rng.choice([-1.0, 1.0], n_rows), str(path))
    return n_rows


TRUNCATED_WHILE_PARSED = """
    import os, sys
    import fastdp.datasets as datasets
    import fastdp.io._parse as parse
    import fastdp.io._source as source
    from fastdp.exceptions import ValidationError

    path = sys.argv[1]
    real_fill = parse._kernel.fill_csr

    def truncate_then_fill(buf, *args):  # between the parser's two passes
        os.truncate(path, 0)
        return real_fill(buf, *args)

    parse._kernel.fill_csr = truncate_then_fill
    try:
        X, y = datasets.load_libsvm(path)
        print("loaded", X.shape[0], flush=True)
    except ValidationError as exc:
        print("refused:", exc, flush=True)
"""


@pytest.mark.parametrize("chunk_bytes", [None, 4096])
def test_file_truncated_between_the_parser_passes_does_not_crash(tmp_path, chunk_bytes):
    """The loader memory-mapped plain files: a truncation under it killed the process
    with SIGBUS (return code -7).  Now the file is read (in chunks), and a change
    while it is read is an error."""
    path = tmp_path / "big.svm"
    n_rows = _write_big_file(path)
    script = TRUNCATED_WHILE_PARSED
    if chunk_bytes:
        script = script.replace("path = sys.argv[1]",
                                f"path = sys.argv[1]; source.CHUNK_BYTES = {chunk_bytes}")
    out = _run_child(script, path)
    assert out.returncode == 0, f"child died with {out.returncode}: {out.stderr[-2000:]}"
    assert out.stdout.startswith("refused:") and "changed while it was being read" in out.stdout
    assert n_rows == 20000


class _ChangingFile(io.FileIO):
    """A file whose content changes (via another handle) when it is first read."""

    def __init__(self, path, change):
        super().__init__(path, "rb")
        self._path, self._change = path, change

    def _maybe_change(self):
        if self._change is not None:
            change, self._change = self._change, None
            change(self._path)

    def read(self, size=-1):
        self._maybe_change()
        return super().read(size)

    def readinto(self, buffer):
        self._maybe_change()
        return super().readinto(buffer)


@pytest.mark.parametrize("reader", ["plain", "gzip"])
@pytest.mark.parametrize("change", ["truncate", "append", "rewrite_same_size"])
def test_file_changed_while_read_is_an_error(tmp_path, change, reader, monkeypatch):
    import fastdp.io._source as source

    monkeypatch.setattr(source, "CHUNK_BYTES", 1024)
    path = tmp_path / "data.svm"
    text = b"1 1:0.5 3:2\n-1 2:1\n" * 1000
    path.write_bytes(text if reader == "plain" else gzip.compress(text))
    size = path.stat().st_size

    def edit(p):
        if change == "truncate":
            os.truncate(p, size // 2)
        elif change == "append":
            with open(p, "ab") as handle:
                handle.write(b"1 1:1\n")
        else:
            os.utime(p, ns=(0, 0))  # same size, other content (mtime changes)

    # the loader opens the path itself: hand it a file that changes when first read
    monkeypatch.setattr(source, "open", lambda p, mode: _ChangingFile(p, edit), raising=False)
    with pytest.raises(ValidationError, match="changed while it was being read"):
        load_libsvm(path)
    monkeypatch.setattr(source, "open", lambda p, mode: _ChangingFile(p, None), raising=False)

    def outcome(source):  # the matrix, or the error (a cut gzip stream is corrupt)
        try:
            X, y = load_libsvm(source)
        except ValidationError as exc:
            return str(exc).split(":")[-1]
        return X.toarray().tolist(), y.tolist()

    # unchanged: what the file holds now
    assert outcome(path) == outcome(io.BytesIO(path.read_bytes()))


@pytest.mark.parametrize("chunk_bytes", [7, 64, 1024])
def test_chunked_reading_gives_the_same_result(tmp_path, monkeypatch, chunk_bytes):
    """Chunk boundaries (and lines longer than a chunk) change nothing, errors included."""
    import fastdp.io._source as source

    rng = np.random.default_rng(1)
    X = sp.random(300, 40, density=0.2, format="csr", random_state=rng)
    path = tmp_path / "data.svm"
    dump_svmlight_file(X, rng.choice([-1.0, 1.0], 300), str(path), query_id=np.arange(300))
    text = path.read_bytes().replace(b"\n", b"  # a comment\n\n", 5) + b"1 5:nan 7:1e400"
    path.write_bytes(text)
    expected = load_libsvm(io.BytesIO(text), return_qid=True)
    monkeypatch.setattr(source, "CHUNK_BYTES", chunk_bytes)
    got = load_libsvm(path, return_qid=True)
    assert got[0].shape == expected[0].shape
    for name in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(got[0], name), getattr(expected[0], name))
    np.testing.assert_array_equal(got[1], expected[1])
    np.testing.assert_array_equal(got[2], expected[2])
    bad = text.replace(b"\n", b"\n1 3:1 2:1\n", 1) if chunk_bytes == 7 else (
        text + b"\n1 1:1\n2 4:zz\n")
    path.write_bytes(bad)
    with pytest.raises(LibsvmParseError) as from_file:
        load_libsvm(path)
    with pytest.raises(LibsvmParseError) as from_bytes:
        load_libsvm(io.BytesIO(bad))
    assert from_file.value.line_number == from_bytes.value.line_number
    assert str(from_file.value) == str(from_bytes.value)


REWRITTEN_WHILE_LOADED = """
    import os, sys, threading, time
    import numpy as np
    from fastdp.datasets import load_libsvm
    from fastdp.exceptions import ValidationError

    path, rows = sys.argv[1], int(sys.argv[2])
    original = open(path, "rb").read()
    stop = threading.Event()

    def vandal():  # truncates and restores the file as fast as it can
        with open(path, "r+b") as handle:
            while not stop.is_set():
                handle.truncate(len(original) // 3)
                handle.seek(0)
                handle.write(original)
                handle.flush()

    thread = threading.Thread(target=vandal)
    thread.start()
    outcomes = {"loaded": 0, "refused": 0}
    try:
        for _ in range(int(sys.argv[3])):
            try:
                X, y = load_libsvm(path)
            except ValidationError:  # "changed while it was being read" or a cut line
                outcomes["refused"] += 1
            else:
                assert X.shape[0] <= rows
                outcomes["loaded"] += 1
    finally:
        stop.set()
        thread.join()
    print(outcomes, flush=True)
"""


def test_file_rewritten_while_loaded_never_crashes(tmp_path):
    path = tmp_path / "big.svm"
    n_rows = _write_big_file(path, n_rows=5000)
    out = _run_child(REWRITTEN_WHILE_LOADED, path, n_rows, 40)
    assert out.returncode == 0, f"child died with {out.returncode}: {out.stderr[-2000:]}"
    assert "loaded" in out.stdout


def test_first_error_in_file_order_wins():
    # a bad value (resolved in Python) on line 2 before a structural error on line 3
    with pytest.raises(LibsvmParseError) as info:
        load_libsvm(io.BytesIO(b"1 1:1\n1 1:zz\n1 3 2\n"))
    assert info.value.line_number == 2
    with pytest.raises(LibsvmParseError) as info:
        load_libsvm(io.BytesIO(b"1 1:1\n1 2\n1 1:zz\n"))
    assert info.value.line_number == 2


def test_bad_qid_value_only_an_error_when_asked():
    content = b"1 qid:1 1:1\n1 qid:zz 1:1\n"
    load_libsvm(io.BytesIO(content))
    with pytest.raises(LibsvmParseError) as info:
        load_libsvm(io.BytesIO(content), return_qid=True)
    assert info.value.line_number == 2


@pytest.mark.parametrize(
    "kwargs", [{"n_features": 0}, {"n_features": 2.5}, {"zero_based": "yes"}, {"dtype": "not-a-dtype"}]
)
def test_bad_arguments(kwargs):
    with pytest.raises(ValidationError):
        load_libsvm(io.BytesIO(b"1 1:1\n"), **kwargs)


def test_text_mode_file_rejected():
    with pytest.raises(ValidationError, match="binary"):
        load_libsvm(io.StringIO("1 1:1\n"))


# ----------------------------------------------------------------------------- property tests


@settings(max_examples=60, deadline=None)
@given(
    n_rows=st.integers(1, 12),
    n_cols=st.integers(1, 15),
    density=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**32 - 1),
    zero_based=st.booleans(),
    with_qid=st.booleans(),
    comment=st.sampled_from([None, "made by hypothesis", "two\nlines"]),
    dtype=st.sampled_from([np.float64, np.float32]),
)
def test_round_trip_of_sklearn_dump(n_rows, n_cols, density, seed, zero_based, with_qid, comment, dtype):
    rng = np.random.default_rng(seed)
    X = sp.random(n_rows, n_cols, density=density, format="csr", random_state=rng)
    X.data = rng.standard_normal(X.nnz) * 10.0 ** rng.integers(-30, 30, X.nnz)
    y = rng.integers(-3, 3, n_rows).astype(float)
    buffer = io.BytesIO()
    qid = rng.integers(0, 5, n_rows) if with_qid else None
    dump_svmlight_file(X, y, buffer, zero_based=zero_based, comment=comment, query_id=qid)
    content = buffer.getvalue()
    kwargs = {"dtype": dtype, "n_features": n_cols}
    if with_qid:
        kwargs["return_qid"] = True
    ours = compare_bytes(content, **kwargs)
    if zero_based:  # the auto rule recovers the layout exactly when index 0 occurs
        loaded = load_libsvm(io.BytesIO(content), zero_based=True, n_features=n_cols)[0]
    else:
        loaded = load_libsvm(io.BytesIO(content), zero_based=False, n_features=n_cols)[0]
    np.testing.assert_allclose(loaded.toarray(), X.toarray(), rtol=1e-15)
    assert ours[0].shape == (n_rows, n_cols)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(allow_nan=False, width=64), min_size=1, max_size=40),
       st.sampled_from(["repr", "%.17g", "%.12e", "%.6f"]))
def test_any_float_text_is_bit_identical_to_sklearn(values, fmt):
    render = repr if fmt == "repr" else (lambda v: fmt % v)
    line = "1 " + " ".join(f"{k + 1}:{render(v)}" for k, v in enumerate(values))
    compare_bytes((line + "\n").encode())


# ----------------------------------------------------------------------------- synthetic data


def _reference_synth(n, d, k, seed):
    """The generator of anchors-perf.md section 7 (reference implementation)."""
    rng = np.random.default_rng(seed)
    p = 1.0 / (np.arange(d) + 20.0)
    p /= p.sum()
    perm = rng.permutation(d)
    row_nnz = 1 + rng.poisson(k - 1, size=n)
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(row_nnz, out=indptr[1:])
    cols = perm[rng.choice(d, size=indptr[-1], p=p)].astype(np.int32)
    vals = rng.lognormal(0.0, 0.7, size=indptr[-1])
    X = sp.csr_matrix((vals, cols, indptr), shape=(n, d))
    X.sum_duplicates()
    X.sort_indices()
    X = (sp.diags(1 / np.sqrt(np.asarray(X.multiply(X).sum(1)).ravel())) @ X).tocsr()
    wstar = rng.standard_normal(d)
    m = X @ wstar
    m /= m.std()
    noise = rng.standard_normal(n)
    return X, np.where(m + 0.5 * noise > 0, 1.0, -1.0), m + 0.5 * noise


def test_synthetic_matches_reference_generator():
    X_ref, y_clf_ref, y_reg_ref = _reference_synth(2000, 3000, 30, seed=0)
    X, y = make_sparse_classification(2000, 3000, nnz_per_row=30, random_state=0)
    X_r, y_r = make_sparse_regression(2000, 3000, nnz_per_row=30, random_state=0)
    assert (X != X_ref).nnz == 0 or abs(X - X_ref).max() < 1e-15
    assert abs(X_r - X_ref).max() < 1e-15
    np.testing.assert_array_equal(y, y_clf_ref)
    np.testing.assert_allclose(y_r, y_reg_ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("make", [make_sparse_classification, make_sparse_regression])
def test_synthetic_shape_norms_and_density(make):
    X, y = make(3000, 5000, nnz_per_row=40, random_state=1)
    assert sp.isspmatrix_csr(X) and X.shape == (3000, 5000) and y.shape == (3000,)
    assert X.has_canonical_format
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    np.testing.assert_allclose(norms, 1.0, rtol=1e-12)
    mean_nnz = X.nnz / X.shape[0]
    # 1 + Poisson(39) draws per row, a few merged duplicates: mean in (37, 40.3) with overwhelming probability
    assert 37.0 < mean_nnz < 40.3
    assert np.all(np.diff(X.indptr) >= 1)


def test_classification_labels_and_balance():
    _, y = make_sparse_classification(4000, 2000, random_state=3)
    assert set(np.unique(y)) == {-1.0, 1.0}
    assert 0.4 < (y > 0).mean() < 0.6  # symmetric planted model; 4000 draws


def test_planted_model_explains_the_labels():
    X, y, coef = make_sparse_regression(4000, 500, nnz_per_row=20, noise=0.1, random_state=4, return_coef=True)
    residual = y - X @ coef
    assert abs(residual.std() - 0.1) < 0.01  # y = X coef + 0.1 N(0, 1)


@pytest.mark.parametrize("make", [make_sparse_classification, make_sparse_regression])
def test_same_seed_same_bits(make):
    a = make(500, 800, random_state=7)
    b = make(500, 800, random_state=7)
    c = make(500, 800, random_state=8)
    np.testing.assert_array_equal(a[0].data, b[0].data)
    np.testing.assert_array_equal(a[0].indices, b[0].indices)
    np.testing.assert_array_equal(a[1], b[1])
    assert a[0].nnz != c[0].nnz or not np.array_equal(a[0].data, c[0].data)


@pytest.mark.parametrize("kwargs", [{"n_samples": 0}, {"n_features": -1}, {"nnz_per_row": 0}, {"noise": -1.0}])
def test_synthetic_bad_arguments(kwargs):
    params = dict(n_samples=10, n_features=10, random_state=0)
    params.update(kwargs)
    with pytest.raises(ValidationError):
        make_sparse_classification(**params)


# ----------------------------------------------------------------------------- load_dataset

EXPECTED_SHAPES = {
    ("phishing", "train"): (11055, 68),
    ("phishing_uci", "train"): (11055, 30),
    ("a9a", "train"): (32561, 123),
    ("a9a", "test"): (16281, 123),
    ("w8a", "train"): (49749, 300),
    ("mushrooms", "train"): (8124, 112),
    ("news20", "train"): (15935, 62061),
    ("cpusmall", "train"): (8192, 12),
    ("bank", "train"): (45211, 32),
    ("ipums_br", "train"): (38000, 52),
    ("adult", "train"): (32561, 105),
    ("adult", "test"): (16281, 105),
    ("bank_full", "train"): (45211, 51),
    ("abalone", "train"): (4177, 10),
    ("cal_housing", "train"): (20640, 8),
}

# label counts from MANIFEST.md
POSITIVE_COUNTS = {
    ("phishing", "train"): 6157, ("phishing_uci", "train"): 6157, ("a9a", "train"): 7841,
    ("a9a", "test"): 3846, ("w8a", "train"): 1479, ("mushrooms", "train"): 3916,
    ("bank", "train"): 5289, ("ipums_br", "train"): 19240, ("adult", "train"): 7841,
    ("adult", "test"): 3846, ("bank_full", "train"): 5289,
}


def test_every_registered_dataset_has_expectations():
    registered = {(name, s) for name, info in DATASETS.items() for s in info["files"] if s in ("train", "test")}
    assert registered == set(EXPECTED_SHAPES)


@pytest.mark.parametrize("name, subset", sorted(EXPECTED_SHAPES))
def test_load_dataset(name, subset, data_dir):
    X, y = load_dataset(name, data_home=data_dir, subset=subset)
    assert X.shape == EXPECTED_SHAPES[(name, subset)] and y.shape == (X.shape[0],)
    assert y.dtype == np.float64
    if (name, subset) in POSITIVE_COUNTS:
        assert set(np.unique(y)) == {-1.0, 1.0}
        assert int((y > 0).sum()) == POSITIVE_COUNTS[(name, subset)]
    values = X.data if sp.issparse(X) else X
    assert np.all(np.isfinite(values))


def test_dataset_contents_spot_checks(data_dir):
    X, y = load_dataset("cal_housing", data_home=data_dir)
    assert abs(y.mean() - 206855.82) < 0.01 and abs(X[:, 7].mean() - 3.8707) < 1e-4
    X, y = load_dataset("abalone", data_home=data_dir)
    assert abs(y.mean() - 9.934) < 1e-3
    np.testing.assert_array_equal(X[:, :3].sum(axis=0), [1528, 1307, 1342])  # Sex M, F, I
    X, _ = load_dataset("adult", data_home=data_dir)
    assert np.all(np.isin(X[:, 1:9], [0.0, 1.0]))  # workclass one-hot (missing -> all zero)
    X, _ = load_dataset("phishing", data_home=data_dir)
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    np.testing.assert_allclose(norms, 1.0, rtol=1e-4)  # LIBSVM unit rows, printed with 6 digits
    assert norms.max() <= 1.0


def test_missing_dataset_error_says_where_it_looked(tmp_path):
    with pytest.raises(DatasetNotFoundError) as info:
        load_dataset("a9a", data_home=tmp_path)
    assert str(tmp_path / "a9a" / "a9a.bz2") in str(info.value)
    assert isinstance(info.value, FileNotFoundError)


def test_fastdp_data_environment_variable(tmp_path, monkeypatch):
    (tmp_path / "mushrooms").mkdir()
    (tmp_path / "mushrooms" / "mushrooms.bz2").write_bytes(bz2.compress(b"1 1:1\n2 112:1\n"))
    monkeypatch.setenv("FASTDP_DATA", str(tmp_path))
    assert dataset_search_paths()[0] == tmp_path
    X, y = load_dataset("mushrooms")
    assert X.shape == (2, 112)
    np.testing.assert_array_equal(y, [1.0, -1.0])


@pytest.mark.parametrize("name, subset", [("nope", "train"), ("w8a", "test"), ("a9a", "validation")])
def test_unknown_dataset_or_subset(name, subset):
    with pytest.raises(ValidationError):
        load_dataset(name, subset=subset)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="0123456789:.-+eE #\n\t\r\x0bqidnaf_x", max_size=60))
def test_fuzz_same_verdict_as_sklearn(text):
    """Random byte soup: both loaders accept it with identical results, or both reject it."""
    content = text.encode()
    try:
        reference = load_svmlight_file(io.BytesIO(content))
    except (ValueError, OverflowError):
        with pytest.raises(LibsvmParseError):
            load_libsvm(io.BytesIO(content))
        return
    assert_same_as_sklearn(load_libsvm(io.BytesIO(content)), reference)


_NUMBER = st.one_of(
    st.integers(-(10**25), 10**25).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.from_regex(r"[+-]?[0-9_]{0,4}\.?[0-9]{0,3}([eE][+-]?[0-9]{0,4})?", fullmatch=True),
)
_TOKEN = st.one_of(
    st.tuples(st.integers(-2, 40).map(str) | st.sampled_from(["", "x", "1_0", "+3", "qid"]), _NUMBER).map(":".join),
    _NUMBER,
    st.sampled_from(["#", "# c", "qid:3", "qid:x", "\r", ""]),
)
_LINE = st.tuples(_NUMBER, st.lists(_TOKEN, max_size=5)).map(lambda t: " ".join([t[0], *t[1]]))


@settings(max_examples=150, deadline=None)
@given(st.lists(_LINE, max_size=6), st.sampled_from(["\n", "\r\n"]), st.sampled_from(["auto", True, False]))
def test_fuzz_structured_lines_same_verdict_as_sklearn(lines, newline, zero_based):
    content = newline.join(lines).encode()
    try:
        reference = load_svmlight_file(io.BytesIO(content), zero_based=zero_based)
    except (ValueError, OverflowError):
        with pytest.raises(LibsvmParseError):
            load_libsvm(io.BytesIO(content), zero_based=zero_based)
        return
    assert_same_as_sklearn(load_libsvm(io.BytesIO(content), zero_based=zero_based), reference)


def test_load_dataset_dtype_float32_matches_float64():
    import numpy as np
    from fastdp.datasets import dataset_search_paths, load_dataset
    from fastdp.exceptions import ValidationError

    if not any((p / "phishing").is_dir() for p in dataset_search_paths()):
        import pytest
        pytest.skip("real datasets not found (set FASTDP_DATA)")
    X64, y64 = load_dataset("phishing")
    X32, y32 = load_dataset("phishing", dtype=np.float32)
    assert X32.dtype == np.float32 and X64.dtype == np.float64
    np.testing.assert_array_equal(X32.toarray(), X64.toarray().astype(np.float32))
    np.testing.assert_array_equal(y32, y64)
    import pytest
    with pytest.raises(ValidationError, match="float32 or float64"):
        load_dataset("phishing", dtype=np.int32)
