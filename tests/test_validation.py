"""Tests for fastdp._validation: every kind of bad input, no-copy and canonical CSR."""

import json
import os
import pathlib
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from fastdp._validation import (
    check_batch_size,
    check_in_interval,
    check_in_open_interval,
    check_labels,
    check_positive,
    check_real,
    check_real_array,
    check_privacy_params,
    check_random_state,
    check_X,
    check_X_y,
    check_sparse_structure,
    row_norms,
    structure_token,
)
from fastdp.exceptions import ValidationError

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]

FLOATS = [np.float32, np.float64]
INDEX = [np.int32, np.int64]


def _csr(data, indices, indptr, shape, value_dtype=np.float64, index_dtype=np.int32, cls=sp.csr_matrix):
    """CSR object holding exactly these arrays (no sorting, no index downcasting)."""
    X = cls(shape, dtype=value_dtype)
    X.data = np.asarray(data, dtype=value_dtype)
    X.indices = np.asarray(indices, dtype=index_dtype)
    X.indptr = np.asarray(indptr, dtype=index_dtype)
    return X


def _arrays(X):
    return X.data.copy(), X.indices.copy(), X.indptr.copy()


def _assert_unchanged(X, saved):
    for now, before in zip((X.data, X.indices, X.indptr), saved):
        np.testing.assert_array_equal(now, before)
        assert now.dtype == before.dtype


def _assert_canonical(X):
    assert X.format == "csr"
    assert X.indices.dtype == X.indptr.dtype
    assert len(X.data) == len(X.indices) == X.indptr[-1]
    for i in range(X.shape[0]):
        row = X.indices[X.indptr[i]:X.indptr[i + 1]]
        assert np.all(np.diff(row) > 0)


# ---------------------------------------------------------------------------
# check_X: dense
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
def test_dense_float_c_contiguous_is_not_copied(dtype):
    X = np.arange(12, dtype=dtype).reshape(3, 4)
    out = check_X(X)
    assert out is X
    out = check_X(X, copy=True)
    assert out.dtype == dtype and not np.shares_memory(out, X)
    np.testing.assert_array_equal(out, X)


def test_dense_conversions():
    out = check_X([[1, 2], [3, 4]])
    assert out.dtype == np.float64 and out.flags.c_contiguous
    X_f = np.asfortranarray(np.ones((4, 3)))
    out = check_X(X_f)
    assert out.flags.c_contiguous and out.dtype == np.float64
    np.testing.assert_array_equal(out, X_f)
    assert check_X(np.ones((2, 2), dtype=np.float16)).dtype == np.float64
    assert check_X(np.ones((2, 2), dtype=bool)).dtype == np.float64
    assert check_X(np.ones((2, 2), dtype=np.int32), dtype=np.float32).dtype == np.float32


@pytest.mark.parametrize(
    "bad, match",
    [
        (np.ones(3), "2-D"),
        (np.ones((2, 2, 2)), "2-D"),
        (np.ones((2, 2), dtype=complex), "complex"),
        (np.array([["a", "b"], ["c", "d"]]), "could not be converted"),
        (np.ones((0, 3)), "no examples"),
        (np.ones((3, 0)), "no features"),
    ],
)
def test_dense_bad_shapes_and_types(bad, match):
    with pytest.raises(ValidationError, match=match):
        check_X(bad)


@pytest.mark.parametrize("value, word", [(np.nan, "NaN"), (np.inf, "infinity"), (-np.inf, "infinity")])
@pytest.mark.parametrize("sparse", [False, True])
def test_non_finite_rejected_naming_the_row(value, word, sparse):
    X = np.ones((6, 3))
    X[4, 1] = value
    X[5, 2] = value
    if sparse:
        X = sp.csr_matrix(X)
    with pytest.raises(ValidationError, match=rf"{word} in 2 row\(s\) \(first: row 4\)"):
        check_X(X)


# ---------------------------------------------------------------------------
# check_X: sparse
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("value_dtype", FLOATS)
@pytest.mark.parametrize("index_dtype", INDEX)
@pytest.mark.parametrize("cls", [sp.csr_matrix, sp.csr_array])
def test_canonical_csr_is_not_copied(value_dtype, index_dtype, cls):
    ref = sp.random(20, 15, density=0.3, format="csr", random_state=0)
    X = _csr(ref.data, ref.indices, ref.indptr, ref.shape, value_dtype, index_dtype, cls)
    X.data[0] = 0.0  # an explicit zero is allowed in canonical form
    out = check_X(X)
    assert out is X
    for a, b in [(out.data, X.data), (out.indices, X.indices), (out.indptr, X.indptr)]:
        assert np.shares_memory(a, b)
    assert out.data.dtype == value_dtype and out.indices.dtype == index_dtype
    copied = check_X(X, copy=True)
    assert not any(np.shares_memory(a, b) for a, b in [(copied.data, X.data), (copied.indices, X.indices),
                                                         (copied.indptr, X.indptr)])
    assert isinstance(copied, cls) and (copied != X).nnz == 0


def test_mixed_index_dtypes_are_unified_without_touching_input():
    ref = sp.random(10, 8, density=0.4, format="csr", random_state=1)
    X = _csr(ref.data, ref.indices, ref.indptr, ref.shape, index_dtype=np.int32)
    X.indptr = X.indptr.astype(np.int64)
    saved = _arrays(X)
    out = check_X(X)
    _assert_unchanged(X, saved)
    assert out.indices.dtype == out.indptr.dtype == np.int64
    np.testing.assert_array_equal(out.toarray(), ref.toarray())


def _random_messy_csr(draw_rows, n_cols):
    data, indices, indptr = [], [], [0]
    for row in draw_rows:
        for col, val in row:
            indices.append(col % n_cols)
            data.append(val)
        indptr.append(len(indices))
    return np.array(data, dtype=np.float64), np.array(indices), np.array(indptr)


messy_rows = st.lists(
    st.lists(st.tuples(st.integers(0, 9), st.floats(-5, 5, allow_nan=False)), max_size=12),
    min_size=1, max_size=8,
)


@settings(max_examples=150, deadline=None)
@given(rows=messy_rows, index_dtype=st.sampled_from(INDEX), value_dtype=st.sampled_from(FLOATS))
def test_unsorted_and_duplicate_indices_match_scipy_sum_duplicates(rows, index_dtype, value_dtype):
    data, indices, indptr = _random_messy_csr(rows, 10)
    X = _csr(data, indices, indptr, (len(rows), 10), value_dtype, index_dtype)
    saved = _arrays(X)
    out = check_X(X)
    _assert_unchanged(X, saved)
    _assert_canonical(out)
    ref = _csr(data, indices, indptr, (len(rows), 10), value_dtype, index_dtype)
    ref.has_canonical_format = False
    ref.sum_duplicates()
    np.testing.assert_array_equal(out.indptr, ref.indptr)
    np.testing.assert_array_equal(out.indices, ref.indices)
    np.testing.assert_array_equal(out.data, ref.data)
    assert out.data.dtype == value_dtype and out.indices.dtype == index_dtype
    if out is not X:
        assert not np.shares_memory(out.data, X.data)


def test_unsorted_csr_is_copied_and_canonicalised():
    # row 0: columns 3, 1, 3 (unsorted, duplicate); row 1 empty; row 2: 0
    X = _csr([1.0, 2.0, 4.0, 5.0], [3, 1, 3, 0], [0, 3, 3, 4], (3, 4))
    saved = _arrays(X)
    out = check_X(X)
    _assert_unchanged(X, saved)
    np.testing.assert_array_equal(out.indices, [1, 3, 0])
    np.testing.assert_array_equal(out.data, [2.0, 5.0, 5.0])
    np.testing.assert_array_equal(out.indptr, [0, 2, 2, 3])


def test_stale_scipy_flag_is_not_trusted():
    X = _csr([1.0, 2.0], [2, 0], [0, 2], (1, 3))
    X.has_sorted_indices = True  # a lie: check_X must look at the arrays
    X._has_canonical_format = True
    out = check_X(X)
    np.testing.assert_array_equal(out.indices, [0, 2])
    np.testing.assert_array_equal(X.indices, [2, 0])


@pytest.mark.parametrize("fmt", ["coo", "csc", "lil", "dok", "bsr", "dia"])
@pytest.mark.parametrize("array_api", [False, True])
def test_other_sparse_formats_become_csr(fmt, array_api):
    ref = sp.random(12, 7, density=0.3, format="csr", random_state=2)
    X = (sp.csr_array(ref) if array_api else ref).asformat(fmt)
    assert check_sparse_structure(X) is X
    out = check_X(X)
    _assert_canonical(out)
    np.testing.assert_array_equal(out.toarray(), ref.toarray())


def test_valid_unusual_sparse_input_is_accepted():
    # COO with duplicates and unsorted entries, CSC with unsorted row indices, BSR 2x2
    coo = sp.coo_matrix(([1.0, 2.0, 3.0], ([2, 0, 2], [1, 1, 1])), shape=(3, 2))
    np.testing.assert_array_equal(check_X(coo).toarray(), [[0, 2], [0, 0], [0, 4]])
    csc = sp.csc_matrix(([1.0, 2.0], [2, 0], [0, 2, 2]), shape=(3, 2))
    np.testing.assert_array_equal(check_X(csc).toarray(), [[2, 0], [0, 0], [1, 0]])
    bsr = sp.bsr_matrix(np.arange(16.0).reshape(4, 4), blocksize=(2, 2))
    np.testing.assert_array_equal(check_X(bsr).toarray(), np.arange(16.0).reshape(4, 4))
    dia = sp.dia_matrix((np.array([[1.0, 2.0, 3.0]]), [1]), shape=(3, 3))
    np.testing.assert_array_equal(check_X(dia).toarray(), [[0, 2, 0], [0, 0, 3], [0, 0, 0]])
    assert check_sparse_structure("not sparse") == "not sparse"


# Matrices whose index arrays were edited after construction.  Converting them to
# CSR (scipy's tocsr, also inside scikit-learn's validate_data) wrote out of bounds:
# the process died with SIGSEGV (-11) or its heap was silently corrupted.
HOSTILE_SPARSE = {
    "coo_row_huge": "X = base.tocoo(); X.row[0] = 10**6",
    "coo_row_negative": "X = base.tocoo(); X.row[0] = -5",
    "coo_col_huge": "X = base.tocoo(); X.col[0] = 10**6",
    "coo_col_negative": "X = base.tocoo(); X.col[-1] = -1",
    "coo_short_row": "X = base.tocoo(); X.coords = (X.row[:-1], X.col)",
    "coo_float_row": "X = base.tocoo(); X.coords = (X.row.astype(float), X.col)",
    "coo_array_row_huge": "X = sp.coo_array(base); X.row[0] = 10**6",
    "csc_index_huge": "X = base.tocsc(); X.indices[0] = 10**6",
    "csc_index_negative": "X = base.tocsc(); X.indices[3] = -1",
    "csc_indptr_huge": "X = base.tocsc(); X.indptr[3] = 10**6",
    "csc_indptr_decreasing": "X = base.tocsc(); X.indptr[2] = X.indptr[4] + 1",
    "csc_indptr_short": "X = base.tocsc(); X.indptr = X.indptr[:-1].copy()",
    "csc_indptr_past_data": "X = base.tocsc(); X.indptr[-1] += 5",
    "csc_array_index_huge": "X = sp.csc_array(base); X.indices[0] = 10**6",
    "csr_index_huge": "X = base.copy(); X.indices[0] = 10**6",
    "csr_indptr_huge": "X = base.copy(); X.indptr[2] = 10**6",
    "bsr_index_huge": "X = base.tobsr(blocksize=(2, 2)); X.indices[0] = 10**6",
    "bsr_indptr_huge": "X = base.tobsr(blocksize=(2, 2)); X.indptr[1] = 10**6",
    "bsr_too_few_blocks": "X = base.tobsr(blocksize=(2, 2)); X.data = X.data[:-1].copy()",
    "bsr_blocks_not_tiling": "X = base.tobsr(blocksize=(2, 2)); X.data = X.data[:, :, :1].repeat(7, 2)",
    "dia_offsets_short": "X = base.todia(); X.offsets = X.offsets[:-1].copy()",
    "dia_offset_huge": "X = base.todia(); X.offsets[0] = 10**6",
    "lil_column_huge": "X = base.tolil(); X.rows[0].append(10**6); X.data[0].append(1.0)",
    "lil_lengths_differ": "X = base.tolil(); X.rows[1].extend([1, 2, 3, 4, 5, 6])",
    "lil_rows_short": "X = base.tolil(); X.rows = X.rows[:-1]",
    "lil_column_not_int": "X = base.tolil(); X.rows[0].append('x'); X.data[0].append(1.0)",
    "dok_key_huge": "X = base.todok(); dict.__setitem__(X, (10**6, 0), 1.0)",
    "dok_key_negative": "X = base.todok(); dict.__setitem__(X, (-1, 0), 1.0)",
    "dok_key_not_int": "X = base.todok(); dict.__setitem__(X, ('a', 0), 1.0)",
    "dok_array_key_huge": "X = sp.dok_array(base); dict.__setitem__(X, (0, 10**9), 1.0)",
    "one_dimensional": "X = sp.coo_array(np.ones(3))",
}

SPARSE_CHILD = r"""
import json, sys
import numpy as np
import scipy.sparse as sp
from fastdp._validation import check_sparse_structure, check_X, row_norms
from fastdp.exceptions import ValidationError

results = {}
for name, setup in json.loads(sys.argv[1]).items():
    # a fresh matrix each time: tocoo() and friends share arrays with their source
    base = sp.random(40, 30, density=0.3, format="csr", random_state=0)
    scope = {"np": np, "sp": sp, "base": base}
    exec(setup, scope)
    outcome = []
    for check in (check_sparse_structure, check_X, row_norms):
        try:
            check(scope["X"])
            outcome.append("accepted")
        except ValidationError:
            outcome.append("refused")
        except Exception as exc:
            outcome.append(f"{type(exc).__name__}: {exc}")
    results[name] = outcome
print(json.dumps(results))
"""


def _python_child(script, *args, timeout=300):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script), *args],
                          capture_output=True, text=True, env=env, cwd=str(REPO_ROOT),
                          timeout=timeout)


@pytest.fixture(scope="module")
def hostile_sparse_outcomes():
    out = _python_child(SPARSE_CHILD, json.dumps(HOSTILE_SPARSE))
    # a crash inside scipy's converters shows as a negative return code (-11: SIGSEGV)
    assert out.returncode == 0, f"child died with {out.returncode}: {out.stderr[-2000:]}"
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", sorted(HOSTILE_SPARSE))
def test_edited_sparse_index_arrays_are_refused_before_conversion(hostile_sparse_outcomes, name):
    assert hostile_sparse_outcomes[name] == ["refused"] * 3, hostile_sparse_outcomes[name]


def test_sparse_structure_is_checked_before_scikit_learn_converts():
    """The estimators call validate_data (which converts to CSR) before check_X: the
    call they must make first is check_sparse_structure."""
    script = """
        import numpy as np, scipy.sparse as sp
        from sklearn.utils.validation import check_array
        from fastdp._validation import check_sparse_structure
        from fastdp.exceptions import ValidationError
        X = sp.random(40, 30, density=0.3, format="coo", random_state=0)
        X.row[0] = 10**6
        try:
            check_array(check_sparse_structure(X), accept_sparse="csr")
        except ValidationError as exc:
            print("refused:", exc)
    """
    out = _python_child(script)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "refused: Malformed COO matrix: row indices must lie in [0, 40)" in out.stdout


# ---------------------------------------------------------------------------
# structure tokens (proof for the kernels that the CSR structure was checked)
# ---------------------------------------------------------------------------


def test_structure_token_of_check_X_output():
    X = check_X(sp.random(30, 9, density=0.3, format="coo", random_state=5))
    token = structure_token(X)
    assert token.indices is X.indices and token.indptr is X.indptr and token.n_features == 9
    with pytest.raises(TypeError, match="this process only"):
        pickle.dumps(token)
    with pytest.raises(ValidationError, match="CSR"):
        structure_token(X.tocsc())
    with pytest.raises(ValidationError, match="CSR"):
        structure_token(X.toarray())


def test_structure_token_checks_matrices_check_X_did_not_return():
    X = _csr([1.0, 2.0, 3.0], [0, 2, 1], [0, 2, 3], (2, 3))
    assert structure_token(X).n_features == 3
    unsorted = _csr([1.0, 2.0], [2, 0], [0, 2, 2], (2, 3))
    with pytest.raises(ValidationError, match="canonical"):
        structure_token(unsorted)
    bad = _csr([1.0, 2.0], [0, 7], [0, 1, 2], (2, 3))
    with pytest.raises(ValidationError, match="column indices"):
        structure_token(bad)
    # a registered matrix whose index array is replaced is checked again
    Y = check_X(sp.random(5, 4, density=0.5, format="csr", random_state=0))
    Y.indices = Y.indices.copy()
    Y.indices[:] = 9
    with pytest.raises(ValidationError):
        structure_token(Y)



def test_sparse_dtype_conversion():
    X = sp.csr_matrix(np.array([[1, 0, 2], [0, 3, 0]], dtype=np.int64))
    out = check_X(X)
    assert out.dtype == np.float64 and X.dtype == np.int64
    with pytest.raises(ValidationError, match="complex"):
        check_X(sp.csr_matrix(np.ones((2, 2), dtype=complex)))


@pytest.mark.parametrize(
    "indices, indptr, match",
    [
        ([0, 5], [0, 1, 2], "column indices"),
        ([0, -1], [0, 1, 2], "column indices"),
        ([0, 1], [0, 2, 1], "never decrease"),
        ([0, 1], [1, 1, 2], "start at 0"),
        ([0, 1], [0, 1, 3], "indptr"),
    ],
)
def test_malformed_csr_rejected(indices, indptr, match):
    X = _csr([1.0, 1.0], indices, indptr, (2, 3))
    with pytest.raises(ValidationError, match=match):
        check_X(X)


def test_sparse_rejected_when_not_accepted_and_empty_sparse():
    with pytest.raises(ValidationError, match="toarray"):
        check_X(sp.eye(3, format="csr"), accept_sparse=False)
    with pytest.raises(ValidationError, match="no examples"):
        check_X(sp.csr_matrix((0, 4)))
    with pytest.raises(ValidationError, match="no features"):
        check_X(sp.csr_matrix((4, 0)))


def test_huge_sparse_matrix_is_never_densified():
    n_cols = 10**12  # dense would need 8 TB per row
    X = _csr([3.0, 4.0, 1.0], [5, n_cols - 1, 7], [0, 2, 2, 3], (3, n_cols), index_dtype=np.int64)
    assert check_X(X, max_row_norm=5.0) is X
    np.testing.assert_array_equal(row_norms(X), [5.0, 0.0, 1.0])


# ---------------------------------------------------------------------------
# row norms and the row-norm bound
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("value_dtype", FLOATS)
@pytest.mark.parametrize("index_dtype", INDEX)
def test_row_norms_match_numpy(value_dtype, index_dtype):
    ref = sp.random(30, 9, density=0.2, format="csr", random_state=3)
    X = _csr(ref.data, ref.indices, ref.indptr, ref.shape, value_dtype, index_dtype)
    dense = X.toarray().astype(np.float64)
    expected = np.linalg.norm(dense, axis=1)
    np.testing.assert_allclose(row_norms(X), expected, rtol=1e-12)
    np.testing.assert_allclose(row_norms(X, squared=True), expected**2, rtol=1e-12)
    np.testing.assert_allclose(row_norms(X.toarray()), expected, rtol=1e-6 if value_dtype == np.float32 else 1e-12)
    np.testing.assert_allclose(row_norms(X.tocoo()), expected, rtol=1e-12)
    assert row_norms(X).dtype == np.float64


@pytest.mark.parametrize("sparse", [False, True])
def test_row_norm_bound(sparse):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(10, 4))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    X[3] *= 1 + 1e-9  # rounding-level excess: scaled onto the bound, not refused
    as_input = sp.csr_matrix if sparse else np.asarray
    check_X(as_input(X), max_row_norm=1.0)
    X[2] *= 1.5
    X[7] *= 1.01
    with pytest.raises(ValidationError) as info:
        check_X(as_input(X), max_row_norm=1.0)
    message = str(info.value)
    assert "2 of 10 rows" in message and "row 2" in message and "1.5" in message
    assert "normalize_rows" in message and "clip_rows" in message and "normalize" in message
    check_X(as_input(X), max_row_norm=1.5 * (1 + 1e-12))
    with pytest.raises(ValidationError, match="row 1 with norm 1.01"):
        check_X(as_input(X[[0, 7]]), max_row_norm=1.0, row_norm_tol=1e-3)
    with pytest.raises(ValidationError, match="max_row_norm"):
        check_X(as_input(X), max_row_norm=0.0)
    for bad in (-1e-9, 0.5, np.nan, "1e-6"):
        with pytest.raises(ValidationError, match="row_norm_tol"):
            check_X(as_input(X), max_row_norm=2.0, row_norm_tol=bad)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("dtype, bound", [(np.float64, 1.0), (np.float64, 3.0),
                                          (np.float64, 1e-200), (np.float32, 1.0),
                                          (np.float32, 1e-20)])
def test_row_norm_bound_is_exact_after_check_X(sparse, dtype, bound):
    """Rows above the bound by rounding only come out with norm <= bound up to the
    rounding of the norm's own computation (the old check let 1 + 1e-6 through
    unchanged while DP-SCD's sensitivity needs <= 1)."""
    from fractions import Fraction

    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 7))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    X[::3] *= 1 + 5e-7  # inside the default row_norm_tol
    X = (X * bound).astype(dtype)
    original = X.copy()
    Xin = sp.csr_matrix(X) if sparse else X
    out = check_X(Xin, max_row_norm=bound)
    dense_out = out.toarray() if sparse else out
    np.testing.assert_array_equal(X, original)  # the user's data is untouched
    assert dense_out.dtype == dtype
    # exact rational arithmetic: the squared norms exceed bound**2 by at most the
    # rounding of a float64 sum of 7 squares, (7 + 2) * 2**-53 relative
    limit = Fraction(bound) ** 2 * (1 + Fraction(9, 2**53))
    exact = [sum(Fraction(float(v)) ** 2 for v in row) for row in dense_out]
    assert max(exact) <= limit
    scaled = np.asarray(dense_out, dtype=np.float64) / bound
    assert np.all(np.einsum("ij,ij->i", scaled, scaled) <= 1.0 + 9 * 2.0**-53)
    # rows only move by a rounding-level amount, and the result is a fixed point
    np.testing.assert_allclose(dense_out, X, rtol=2e-6, atol=0)
    assert check_X(out, max_row_norm=bound) is out
    with pytest.raises(ValidationError, match="L2 norm above"):
        check_X(Xin, max_row_norm=bound, row_norm_tol=0.0)


@pytest.mark.parametrize("dtype", FLOATS)
def test_normalized_rows_pass_the_exact_bound(dtype):
    from fastdp.preprocessing import normalize_rows

    X = sp.random(2000, 50, density=0.2, format="csr", random_state=4, dtype=dtype)
    unit = normalize_rows(X)
    out = check_X(unit, max_row_norm=1.0)
    assert np.all(row_norms(out, squared=True) <= 1.0)
    np.testing.assert_allclose(out.toarray(), unit.toarray(), rtol=4 * np.finfo(dtype).eps)
    assert check_X(out, max_row_norm=1.0) is out


# ---------------------------------------------------------------------------
# labels
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "y, classes",
    [
        ([0, 1, 1, 0], [0, 1]),
        ([-1, 1, 1, -1], [-1, 1]),
        ([1.0, 2.0, 2.0, 1.0], [1.0, 2.0]),
        (["no", "yes", "yes", "no"], ["no", "yes"]),
        ([False, True, True, False], [False, True]),
    ],
)
def test_binary_labels_map_to_pm1(y, classes):
    y_pm, found = check_labels(y, "binary")
    assert y_pm.dtype == np.float64
    np.testing.assert_array_equal(y_pm, [-1.0, 1.0, 1.0, -1.0])
    np.testing.assert_array_equal(found, classes)


def test_binary_label_order_is_sorted_classes():
    y_pm, classes = check_labels([5, 3, 5], "binary")
    np.testing.assert_array_equal(classes, [3, 5])
    np.testing.assert_array_equal(y_pm, [1.0, -1.0, 1.0])


@pytest.mark.parametrize(
    "y, match",
    [
        ([1, 1, 1], "found 1"),
        ([0, 1, 2], "found 3"),
        ([0.0, np.nan, 1.0], "NaN"),
        ([0.0, np.inf, 1.0], "NaN or infinity"),
        (np.zeros((3, 1)), "ravel"),
        ([], "empty"),
    ],
)
def test_bad_binary_labels(y, match):
    with pytest.raises(ValidationError, match=match):
        check_labels(y, "binary")


def test_regression_labels():
    y = np.array([1, 2, 3], dtype=np.int32)
    out, classes = check_labels(y, "regression")
    assert classes is None and out.dtype == np.float64 and not np.shares_memory(out, y)
    for bad, match in [([1.0, np.nan], "NaN"), ([1.0, -np.inf], "infinity"), (["a", "b"], "numbers"),
                       (np.ones((2, 2)), "1-D")]:
        with pytest.raises(ValidationError, match=match):
            check_labels(bad, "regression")
    with pytest.raises(ValidationError, match="task"):
        check_labels([1.0], "multiclass")
    with pytest.raises(ValidationError, match="3 examples but y has 2"):
        check_labels([1.0, 2.0], "regression", n_samples=3)


def test_check_X_y():
    X = np.eye(4)
    Xc, y, classes = check_X_y(X, [0, 1, 0, 1], "binary", max_row_norm=1.0)
    assert Xc is X
    np.testing.assert_array_equal(y, [-1, 1, -1, 1])
    np.testing.assert_array_equal(classes, [0, 1])
    with pytest.raises(ValidationError, match="4 examples but y has 3"):
        check_X_y(X, [0, 1, 0], "binary")
    with pytest.raises(ValidationError, match="norm"):
        check_X_y(2 * X, [0.0, 1.0, 0.0, 1.0], "regression", max_row_norm=1.0)


# ---------------------------------------------------------------------------
# scalar parameters
# ---------------------------------------------------------------------------


def test_check_positive():
    assert check_positive("lam", 2) == 2.0 and isinstance(check_positive("lam", np.float32(0.5)), float)
    assert check_positive("C", np.inf, allow_inf=True) == np.inf
    for bad, match in [(0, "> 0"), (-1.0, "> 0"), (np.nan, "NaN"), (np.inf, "finite"),
                       (True, "real number"), ("1", "real number"), (None, "real number")]:
        with pytest.raises(ValidationError, match=match):
            check_positive("lam", bad)


def test_check_real():
    assert check_real("x", np.int8(-3)) == -3.0 and check_real("x", np.inf) == np.inf
    for bad, match in [(np.nan, "NaN"), (True, "real number"), ("1", "str"), (None, "NoneType")]:
        with pytest.raises(ValidationError, match=match):
            check_real("x", bad)


def test_check_in_interval():
    assert check_in_interval("b", 0.0, 0.0, 0.5, include_low=True) == 0.0
    assert check_in_interval("b", 0.25, 0.0, 0.5) == 0.25
    for bad, include_low, match in [(0.0, False, r"b must lie in \(0, 0.5\); got 0.0\. Fix\.$"),
                                    (0.5, True, r"\[0, 0.5\)"), (-1, True, r"\[0, 0.5\)"),
                                    (np.nan, True, "NaN"), (True, False, "real number")]:
        with pytest.raises(ValidationError, match=match):
            check_in_interval("b", bad, 0.0, 0.5, include_low=include_low, advice="Fix.")


def test_check_real_array():
    arr = [[1, 2], [3, 4]]
    out = check_real_array("A", arr, 2)
    assert out.dtype == np.float64 and out.tolist() == arr
    assert check_real_array("v", [], 1).shape == (0,)
    for value, kwargs, match in [([1.0], {"ndim": 2}, "2-dimensional"),
                                 ([], {"ndim": 1, "allow_empty": False}, "empty"),
                                 ([1.0, np.inf], {"ndim": 1}, "NaN or infinity"),
                                 (["a"], {"ndim": 1}, "real array")]:
        with pytest.raises(ValidationError, match=match):
            check_real_array("v", value, **kwargs)


def test_check_in_open_interval():
    assert check_in_open_interval("q", 0.5, 0, 1) == 0.5
    for bad in [0, 1, -0.1, 1.1, np.nan]:
        with pytest.raises(ValidationError, match="q"):
            check_in_open_interval("q", bad, 0, 1)


def test_check_privacy_params():
    assert check_privacy_params(1, 1e-5) == (1.0, 1e-5)
    assert check_privacy_params(np.inf, 1e-5, allow_inf_epsilon=True) == (np.inf, 1e-5)
    assert check_privacy_params(0.5, 0, allow_zero_delta=True) == (0.5, 0.0)
    bad_cases = [((0, 1e-5), "epsilon"), ((-1, 1e-5), "epsilon"), ((np.nan, 1e-5), "epsilon"),
                 ((np.inf, 1e-5), "no privacy"), ((1, 0), r"\(0, 1\)"), ((1, 1), "delta"),
                 ((1, -1e-3), "delta"), ((1, 1.5), "delta"), ((1, np.nan), "delta")]
    for args, match in bad_cases:
        with pytest.raises(ValidationError, match=match):
            check_privacy_params(*args)
    with pytest.raises(ValidationError, match=r"\[0, 1\)"):
        check_privacy_params(1, 1, allow_zero_delta=True)


def test_check_random_state():
    assert isinstance(check_random_state(None), np.random.Generator)
    np.testing.assert_array_equal(check_random_state(7).random(5), np.random.default_rng(7).random(5))
    np.testing.assert_array_equal(check_random_state(np.int64(7)).random(5), np.random.default_rng(7).random(5))
    gen = np.random.default_rng(1)
    assert check_random_state(gen) is gen
    ss = np.random.SeedSequence(11)
    np.testing.assert_array_equal(check_random_state(ss).random(3),
                                  np.random.default_rng(np.random.SeedSequence(11)).random(3))
    assert isinstance(check_random_state(np.random.PCG64(3)), np.random.Generator)
    for bad, match in [(-1, "non-negative"), (np.random.RandomState(0), "RandomState"), (1.5, "float"),
                       (True, "random_state"), ("seed", "str")]:
        with pytest.raises(ValidationError, match=match):
            check_random_state(bad)


def test_check_batch_size():
    assert check_batch_size(10, 10) == 10 and check_batch_size(np.int64(1), 10) == 1
    for bad, match in [(0, "between"), (11, "between"), (2.0, "int"), (True, "int"), (None, "int")]:
        with pytest.raises(ValidationError, match=match):
            check_batch_size(bad, 10)
    # without n_samples (a solver argument checked before the data are seen)
    assert check_batch_size(10**9) == 10**9
    for bad, match in [(0, ">= 1"), (2.0, "int"), (None, "int")]:
        with pytest.raises(ValidationError, match=match):
            check_batch_size(bad)


def test_errors_are_value_errors():
    with pytest.raises(ValueError):
        check_X(np.full((2, 2), np.nan))


def test_row_norms_with_empty_rows_and_untrimmed_storage():
    # rows 0, 2 and 4 empty; storage holds one unused trailing entry
    X = _csr([3.0, 4.0, 2.0, 99.0], [0, 2, 1, 0], [0, 0, 2, 2, 3, 3], (5, 3))
    np.testing.assert_array_equal(row_norms(X), [0.0, 5.0, 0.0, 2.0, 0.0])
    out = check_X(X)
    _assert_canonical(out)
    np.testing.assert_array_equal(out.data, [3.0, 4.0, 2.0])
    assert len(X.data) == 4  # input untouched
    np.testing.assert_array_equal(row_norms(sp.csr_matrix((3, 4))), np.zeros(3))


def test_row_norm_message_prints_enough_digits():
    import numpy as np
    import pytest

    from fastdp._validation import check_X
    from fastdp.exceptions import ValidationError

    with pytest.raises(ValidationError, match=r"norm 1\.000002"):
        check_X(np.array([[1.000002, 0.0], [0.5, 0.5]]), max_row_norm=1.0)
