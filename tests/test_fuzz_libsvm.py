"""Hostile files for the LIBSVM loader (hypothesis): garbage, truncation, extreme numbers.

tests/test_datasets.py already checks that well-formed and mildly malformed
text gets scikit-learn's verdict.  Here the input is hostile: arbitrary bytes
(NUL, high bytes, lone CR), valid files truncated at every byte (plain and
compressed), numbers at and beyond the float64 range, huge and negative
indices.  Each file must give a canonical, finite CSR matrix, or a
:class:`~fastdp.exceptions.LibsvmParseError` with a line number inside the
file, or a :class:`~fastdp.exceptions.ValidationError`; nothing else.
"""
import bz2
import gzip
import io
import lzma
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_svmlight_file

from fastdp.datasets import load_libsvm
from fastdp.exceptions import LibsvmParseError, ValidationError

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

VALID = (b"# a comment\n+1 1:0.5 3:-2e-3 7:1e10\n-1 qid:3 2:1\n\n"
         b"0.25 1:4 2:5 10:6 # trailing comment\n-1\n+1 5:inf\n")
VALID_FINITE = VALID.replace(b"5:inf", b"5:1.5")


def _load(raw, **kwargs):
    """(X, y) or the fastdp error; any other exception fails the test."""
    try:
        return load_libsvm(io.BytesIO(raw), **kwargs)
    except LibsvmParseError as exc:
        lines = raw.count(b"\n") + 1
        assert 1 <= exc.line_number <= lines, (exc.line_number, lines)
        return exc
    except ValidationError as exc:
        return exc


def _check_result(result, raw):
    if isinstance(result, Exception):
        return
    X, y = result
    assert X.format == "csr" and X.shape[0] == y.shape[0]
    assert X.indices.dtype == X.indptr.dtype == np.int32  # small files: int32 (issue 20)
    assert X.indptr[0] == 0 and np.all(np.diff(X.indptr) >= 0) and X.indptr[-1] == X.nnz
    for i in range(X.shape[0]):
        row = X.indices[X.indptr[i]:X.indptr[i + 1]]
        assert np.all(np.diff(row) > 0)
    assert X.nnz == 0 or (X.indices.min() >= 0 and X.indices.max() < X.shape[1])


def _sklearn(raw):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return load_svmlight_file(io.BytesIO(raw))
    except Exception:  # noqa: BLE001 - any refusal counts as a refusal
        return None


COMPRESSION_MAGIC = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")


@FUZZ
@given(st.binary(max_size=200))
def test_arbitrary_bytes(raw):
    # corrupt compressed files: see test_truncated_compressed_files_are_fastdp_errors
    assume(not raw.startswith(COMPRESSION_MAGIC))
    _check_result(_load(raw), raw)


ALPHABET = st.sampled_from(list(b"0123456789+-.:eE \t\n\r#qidnaf") + [0, 0xFF, 0x80, ord("x")])


@FUZZ
@given(st.lists(ALPHABET, max_size=120).map(bytes), st.sampled_from([True, False, "auto"]))
def test_near_miss_text(raw, zero_based):
    result = _load(raw, zero_based=zero_based)
    _check_result(result, raw)
    if zero_based == "auto" and not isinstance(result, Exception):
        reference = _sklearn(raw)
        if reference is not None and np.all(np.isfinite(reference[0].data)):
            X, y = result
            assert X.shape == reference[0].shape
            assert np.array_equal(X.toarray(), reference[0].toarray(), equal_nan=True)
            assert np.array_equal(y, reference[1], equal_nan=True)


@pytest.mark.parametrize("cut", range(len(VALID) + 1))
def test_every_truncation_of_a_valid_file(cut):
    raw = VALID[:cut]
    result = _load(raw)
    _check_result(result, raw)
    reference = _sklearn(raw)
    if reference is not None:  # scikit-learn accepts: so must fastdp, with the same numbers
        assert not isinstance(result, Exception), (raw, result)
        assert np.array_equal(result[0].toarray(), reference[0].toarray())


@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress, lzma.compress])
def test_truncated_compressed_files_are_fastdp_errors(compress):
    blob = compress(VALID_FINITE)
    whole = load_libsvm(io.BytesIO(blob))
    assert np.array_equal(whole[0].toarray(), load_libsvm(io.BytesIO(VALID_FINITE))[0].toarray())
    for cut in sorted(set(np.linspace(1, len(blob) - 1, 12).astype(int))):
        result = _load(blob[:cut])
        _check_result(result, blob[:cut])


@pytest.mark.parametrize("text", [
    b"1 1:1e308 2:1.7976931348623157e308",
    b"1 1:1e309",
    b"1 1:-1e99999",
    b"1 1:1e-400 2:4.9e-324 3:2e-324",
    b"1e400 1:1",
    b"nan 1:1",
    b"1 1:nan",
    b"1 9223372036854775807:1",
    b"1 9223372036854775808:1",
    b"1 99999999999999999999999:1",
    b"1 -5:1",
    b"1 0:1 0:2",
    b"1 2:1 1:2",
    b"1 1:1:1",
    b"1 :1",
    b"1 1:",
    b"\x00",
    b"1 1:1\x00 2:2",
    b"1 1:1\r\n-1 2:2\r\n",
    b"1 1:1\r-1 2:2",
    b"+ 1:1",
    b"1 1:0x10",
    b"1 1:1_000",
])
def test_extreme_and_malformed_tokens(text):
    for zero_based in (True, False, "auto"):
        for dtype in (np.float64, np.float32):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # float32 casts of huge values overflow
                result = _load(text, zero_based=zero_based, dtype=dtype)
            _check_result(result, text)
