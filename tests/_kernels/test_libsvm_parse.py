"""Tests of the compiled LIBSVM byte parser (fastdp/_kernels/_libsvm_parse.pyx).

The reference for every float is Python's own ``float()`` (correctly rounded,
like the ``strtod`` scikit-learn relies on); the reference for the power-of-five
table is exact integer arithmetic.
"""

import numpy as np
import pytest

from fastdp._kernels import _libsvm_parse as kernel


def _run_kernel(content, zero_based=True):
    """count + fill on raw bytes; returns the kernel's outputs, trimmed."""
    buf = np.frombuffer(content, dtype=np.uint8)
    max_rows, max_entries = kernel.count_rows_and_tokens(buf)
    indptr = np.empty(max_rows + 1, np.int64)
    indices = np.empty(max_entries, np.int64)
    data = np.empty(max_entries, np.float64)
    labels = np.empty(max_rows, np.float64)
    qids = np.empty(max_rows, np.int64)
    has_qid = np.empty(max_rows, np.uint8)
    err, line, n_rows, nnz, hard, qid_line, lo, hi = kernel.fill_csr(
        buf, zero_based, indptr, indices, data, labels, qids, has_qid
    )
    return dict(
        err=err, line=line, n_rows=n_rows, nnz=nnz, hard=hard, qid_line=qid_line,
        indptr=indptr[: n_rows + 1], indices=indices[:nnz], data=data[:nnz], labels=labels[:n_rows],
        min_index=lo, max_index=hi, max_rows=max_rows, max_entries=max_entries,
    )


def _parse_values(tokens):
    """Kernel value of each token (NaN where it defers to Python float())."""
    content = b"".join(b"0 1:" + t + b"\n" for t in tokens)
    out = _run_kernel(content)
    assert out["err"] == kernel.ERR_NONE and out["nnz"] == len(tokens)
    return out["data"]


def _assert_bit_identical_or_deferred(tokens):
    values = _parse_values(tokens)
    reference = np.array([float(t) for t in tokens])
    deferred = np.isnan(values)
    same = values.view(np.uint64) == reference.view(np.uint64)
    wrong = ~deferred & ~same
    assert not wrong.any(), [tokens[i] for i in np.flatnonzero(wrong)[:5]]
    return deferred.mean()


def test_random_doubles_repr_and_printf_bit_identical():
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2**64 - 1, size=40_000, dtype=np.uint64, endpoint=True)
    doubles = bits.view(np.float64)
    doubles = doubles[np.isfinite(doubles)]
    tokens = [repr(float(x)).encode() for x in doubles]
    tokens += [b"%.17g" % x for x in doubles[:10_000]]
    tokens += [b"%.16g" % x for x in doubles[:10_000]]
    tokens += [b"%.15e" % x for x in doubles[:10_000]]
    deferred = _assert_bit_identical_or_deferred(tokens)
    assert deferred < 0.05  # only subnormal / extreme magnitudes defer


def test_typical_magnitudes_never_defer():
    rng = np.random.default_rng(1)
    values = rng.random(30_000) * rng.choice([1e-4, 1e-2, 1.0, 1e3, 1e9], size=30_000)
    tokens = [repr(float(x)).encode() for x in values] + [b"%.6f" % x for x in values]
    assert _assert_bit_identical_or_deferred(tokens) == 0.0


def test_nineteen_digit_mantissas_with_any_exponent():
    rng = np.random.default_rng(2)
    mantissas = rng.integers(10**18, 10**19 - 1, size=20_000, dtype=np.uint64)
    exponents = rng.integers(-340, 310, size=20_000)
    tokens = [b"%de%d" % (int(m), int(e)) for m, e in zip(mantissas, exponents)]
    small = rng.integers(-25, 25, size=20_000)
    tokens += [b"%de%d" % (int(m), int(e)) for m, e in zip(mantissas, small)]
    _assert_bit_identical_or_deferred(tokens)


def test_exact_ties_round_half_to_even():
    # odd integers between 2**53 and 2**63 are ties or near-ties of doubles
    rng = np.random.default_rng(3)
    ints = rng.integers(2**53, 2**62, size=20_000) | 1
    tokens = [b"%d" % int(v) for v in ints]
    tokens += [b"9007199254740993", b"9007199254740995", b"18014398509481986", b"18014398509481990"]
    tokens += [b"%d.%de3" % (int(v) // 1000, int(v) % 1000) for v in ints[:5000]]
    assert _assert_bit_identical_or_deferred(tokens) == 0.0


def test_special_and_edge_tokens():
    tokens = [b"0", b"-0", b"+0.0", b"-0.0e5", b"1.", b".5", b"-.5e-3", b"1E+3", b"1e-0", b"00001.500",
              b"1.7976931348623157e308", b"2.2250738585072014e-308", b"4.9e-324", b"1e-400", b"1e400",
              b"0.000000000000000000000000000001234", b"123456789012345678901234567890",
              b"1.0000000000000000000000000001", b"inf", b"-Infinity", b"nan", b"1_000.5"]
    _assert_bit_identical_or_deferred(tokens)
    values = _parse_values(tokens)
    assert np.signbit(values[1]) and np.signbit(values[3]) and not np.signbit(values[2])
    for token in [b"inf", b"nan", b"1_000.5", b"1e400", b"4.9e-324"]:
        assert np.isnan(values[tokens.index(token)])  # left to Python float()


def test_invalid_value_tokens_are_deferred_to_python():
    tokens = [b"abc", b"1.2.3", b"1e", b"e5", b".", b"-", b"+", b"1e+", b"0x10", b"1:2", b"--1", b"1..2"]
    assert np.isnan(_parse_values(tokens)).all()


def test_powers_of_five_table_matches_exact_arithmetic():
    for q in [-342, -300, -28, -27, -1, 0, 1, 27, 28, 55, 56, 200, 308]:
        value = (int(kernel.POW5_HI[q + 342]) << 64) | int(kernel.POW5_LO[q + 342])
        assert value >> 127 == 1  # normalised: top bit set
        if q >= 0:
            exact = 5**q
            shift = exact.bit_length() - 128
            expected = exact >> shift if shift >= 0 else exact << -shift
            assert value == expected  # truncated 128-bit 5**q
        else:
            # value approximates 2**k / 5**-q (normalised to 128 bits) within one unit
            k = 127 + (5**-q).bit_length()
            assert 0 <= value - (1 << k) // 5**-q <= 1


def test_rows_labels_and_indices():
    out = _run_kernel(b"1 1:0.5 3:2\n\n# comment\n-1\n+2 2:1e1 # trailing\n")
    assert out["n_rows"] == 3 and out["nnz"] == 3
    np.testing.assert_array_equal(out["indptr"], [0, 2, 2, 3])
    np.testing.assert_array_equal(out["indices"], [1, 3, 2])
    np.testing.assert_array_equal(out["data"], [0.5, 2.0, 10.0])
    np.testing.assert_array_equal(out["labels"], [1.0, -1.0, 2.0])
    assert (out["min_index"], out["max_index"]) == (1, 3)
    assert out["max_rows"] >= out["n_rows"] and out["max_entries"] >= out["nnz"]


def test_index_grammar_follows_python_int():
    out = _run_kernel(b"1 +1:1 0_2:1 007:1 1_0:1\n")
    assert out["err"] == kernel.ERR_NONE
    np.testing.assert_array_equal(out["indices"], [1, 2, 7, 10])


@pytest.mark.parametrize(
    "content, code, line",
    [
        (b"1 1:1\n1 3\n", kernel.ERR_MISSING_COLON, 2),
        (b"1 1:1\n\n1 x:1\n", kernel.ERR_BAD_INDEX, 3),
        (b"1 1__0:1\n", kernel.ERR_BAD_INDEX, 1),
        (b"1 _1:1\n", kernel.ERR_BAD_INDEX, 1),
        (b"1 :1\n", kernel.ERR_BAD_INDEX, 1),
        (b"# c\n1 -3:1\n", kernel.ERR_NEGATIVE_INDEX, 2),
        (b"1 3:1 2:1\n", kernel.ERR_INDEX_ORDER, 1),
        (b"1 2:1 2:1\n", kernel.ERR_INDEX_ORDER, 1),
        (b"1 3000000000:1\n", kernel.ERR_INDEX_OVERFLOW, 1),
        (b"1 99999999999999999999999:1\n", kernel.ERR_INDEX_OVERFLOW, 1),
        (b"1 qid 1:1\n", kernel.ERR_BAD_QID, 1),
    ],
)
def test_structural_errors_carry_the_line(content, code, line):
    out = _run_kernel(content)
    assert (out["err"], out["line"]) == (code, line)


def test_zero_index_rejected_only_when_one_based():
    assert _run_kernel(b"1 0:1\n", zero_based=True)["err"] == kernel.ERR_NONE
    out = _run_kernel(b"1 1:1\n2 0:1\n", zero_based=False)
    assert (out["err"], out["line"]) == (kernel.ERR_ZERO_INDEX, 2)


def test_hard_tokens_report_slot_and_line():
    out = _run_kernel(b"1 1:inf\nnan 2:3\n")
    hard = out["hard"]
    assert hard.shape == (2, 4)
    start, end, slot, line = hard[0]
    assert (slot, line) == (0, 1) and end - start == 3
    assert (hard[1, 2], hard[1, 3]) == (-2, 2)  # label of row 1


def test_many_hard_tokens_grow_the_buffer():
    out = _run_kernel(b"".join(b"1 %d:inf\n" % (k + 1) for k in range(100)))
    assert out["hard"].shape == (100, 4)
    np.testing.assert_array_equal(out["hard"][:, 3], np.arange(1, 101))


def test_qid_values_and_bad_qid_line():
    out = _run_kernel(b"1 qid:7 1:1\n2 qid:x 1:1\n")
    assert out["err"] == kernel.ERR_NONE and out["qid_line"] == 2


def test_exact_ties_with_decimal_exponents():
    """Exact midpoints between two doubles written with <= 19 digits and q != 0.

    m odd with 2**53 < m < 2**54 is a midpoint of doubles; m * 2**k with m a
    multiple of 5**q has q trailing decimal zeros (q > 0 exponents), and
    m / 2**k = m * 5**k / 10**k gives the negative exponents -4..-1.
    """
    rng = np.random.default_rng(6)
    tokens = []
    for q in range(1, 8):
        for _ in range(300):
            s = int(rng.integers(2**53 // 5**q + 1, 2**54 // 5**q - 1)) | 1
            m = s * 5**q
            if not (2**53 < m < 2**54) or m % 2 == 0:
                continue
            k = int(rng.integers(q, 20))
            value = m << k
            mantissa = value // 10**q
            if value % 10**q == 0 and mantissa < 10**19:
                tokens.append(b"%de%d" % (mantissa, q))
    for k in range(1, 5):
        for _ in range(300):
            m = int(rng.integers(2**53, 2**54)) | 1
            digits = m * 5**k
            if digits < 10**19:
                tokens.append(b"%de-%d" % (digits, k))
    assert len(tokens) > 500
    assert _assert_bit_identical_or_deferred(tokens) == 0.0
