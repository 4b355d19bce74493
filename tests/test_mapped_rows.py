"""Mapped rows read without a copy of X (fastdp._mapped_rows, issue 20 item 3).

The reference is the materialised row map written with plain numpy below
(every stored value times its row's factor rounded to the dtype, the
constant appended to every row): the kernels reading a :class:`MappedRows`
must give the bits they give on that matrix, and validation must run once.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from fastdp import _validation
from fastdp._kernels import _scd, _sgd
from fastdp._mapped_rows import MappedRows
from fastdp._validation import check_X, structure_token
from fastdp.exceptions import ValidationError
from fastdp.linear_model import DPLogisticRegression, DPRidge
from fastdp.preprocessing import RowMap

from _validation_lookups import patch_validation


def _data(dtype, n=400, d=60, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.15, random_state=seed, format="csr", dtype=np.float64)
    X.data = rng.normal(size=X.nnz) * 3.0
    X = X.astype(dtype)
    X.sort_indices()
    return X, np.where(rng.random(n) < 0.5, -1.0, 1.0)


def _reference(X, factors, constant):
    """The materialised map, written independently of fastdp: ``r(x * r(f_i))``, then ``r(c)``."""
    dtype = X.dtype
    rows = []
    for i in range(X.shape[0]):
        k0, k1 = X.indptr[i], X.indptr[i + 1]
        values = list(X.data[k0:k1] * dtype.type(factors[i]))
        columns = list(X.indices[k0:k1])
        if constant is not None:
            values.append(dtype.type(constant))
            columns.append(X.shape[1])
        rows.append((values, columns))
    indptr = np.cumsum([0] + [len(v) for v, _ in rows])
    data = np.array([x for v, _ in rows for x in v], dtype=dtype)
    indices = np.array([c for _, c in rows for c in c], dtype=np.int64)
    width = X.shape[1] + (constant is not None)
    return sp.csr_matrix((data, indices, indptr), shape=(X.shape[0], width))


def _same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bound", ["normalize", "clip", "reject"])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_written_out_rows_equal_the_reference_map(dtype, bound, fit_intercept):
    X, _ = _data(dtype)
    X = check_X(X * (0.1 if bound == "reject" else 1.0))
    row_map = RowMap(bound=bound, fit_intercept=fit_intercept)
    mapped = row_map.map_rows(X)
    assert isinstance(mapped, MappedRows) and mapped.csr is X
    ref = _reference(X, row_map._row_factors(X), mapped.tail_value)
    out = mapped.tocsr()
    assert out.shape == ref.shape == mapped.shape
    assert _same_bits(out.data, ref.data)
    assert np.array_equal(out.indices, ref.indices) and np.array_equal(out.indptr, ref.indptr)
    assert _same_bits(row_map.transform(X).data, ref.data)
    # the squared norms check_X sums equal those of the written-out matrix
    assert _same_bits(mapped.scaled_sq_norms(), _validation._csr_sq_norms(ref))
    assert _same_bits(mapped.kernel_sq_norms(), _scd.row_squared_norms(ref.data, ref.indptr))


def _batches(n, count=20, size=64):
    rng = np.random.default_rng(5)
    batch_idx = np.concatenate([np.sort(rng.choice(n, size=size, replace=False))
                                for _ in range(count)]).astype(np.int64)
    return np.arange(0, batch_idx.size + 1, size, dtype=np.int64), batch_idx


def _sgd_run(data, indices, indptr, m, y, sq, threads, **row_map):
    w = np.zeros(m)
    batch_ptr, batch_idx = _batches(y.shape[0])
    bitgen = np.random.PCG64(7)
    with bitgen.lock:
        _sgd.run_sgd(data, indices, indptr, y, sq, w, batch_ptr, batch_idx,
                     np.zeros(64), np.zeros(m, np.int32), 1, 1.0, 0.99, 0.1, 0.5, True, bitgen,
                     threads, 1, **row_map)
    return w


def _scd_run(data, indices, indptr, m, y, sq, threads, sequential, **row_map):
    dtype = np.asarray(data).dtype
    alpha, v = np.zeros(y.shape[0], dtype), np.zeros(m, dtype)
    batch_ptr, batch_idx = _batches(y.shape[0])
    bitgen = np.random.PCG64(7)
    with bitgen.lock:
        _scd.run_dual_scd(data, indices, indptr, y, sq, alpha, v, batch_ptr,
                          batch_idx, np.zeros(64), np.zeros(m, np.int32), 1,
                          0.01 * y.shape[0], 64.0, 0.05, 1e-4, sequential, 0.0, 0.3, True,
                          bitgen, threads, 1, **row_map)
    return alpha, v


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", [1, 2])
def test_kernels_read_mapped_rows_as_the_written_out_matrix(dtype, threads):
    X, y = _data(dtype)
    X = check_X(X)
    mapped = RowMap(bound="normalize").map_rows(X)
    mapped = check_X(mapped, max_row_norm=1.0)       # float32: a second factor on some rows
    if dtype == np.float32:
        assert mapped.row_shrink is not None and np.any(mapped.row_shrink < 1.0)
    ref = mapped.tocsr()
    m = mapped.shape[1]
    sq_ref = _scd.row_squared_norms(ref.data, ref.indptr)
    assert _same_bits(mapped.kernel_sq_norms(), sq_ref)
    on_the_fly = dict(row_map=mapped.kernel_map())
    args = (X.data, X.indices, X.indptr, m, y, sq_ref, threads)
    ref_args = (ref.data, ref.indices, ref.indptr, m, y, sq_ref, threads)
    assert _same_bits(_sgd_run(*args, **on_the_fly["row_map"]), _sgd_run(*ref_args))
    for sequential in (False, True):
        got = _scd_run(*args, sequential, **on_the_fly["row_map"])
        want = _scd_run(*ref_args, sequential)
        assert _same_bits(got[0], want[0]) and _same_bits(got[1], want[1])


def test_shrunk_rows_equal_check_X_of_the_written_out_matrix():
    X, _ = _data(np.float32)
    mapped = RowMap(bound="normalize").map_rows(check_X(X))
    shrunk = check_X(mapped, max_row_norm=1.0)
    want = check_X(MappedRows(mapped.csr, mapped.row_scale, mapped.tail_value).tocsr(),
                   max_row_norm=1.0)
    assert _same_bits(shrunk.tocsr().data, want.data)
    assert np.all(_validation._csr_sq_norms(want) <= 1.0)


def test_kernels_refuse_a_malformed_row_map():
    X, y = _data(np.float64)
    X = check_X(X)
    mapped = RowMap().map_rows(X)
    good = mapped.kernel_map()
    sq = mapped.kernel_sq_norms()
    args = (X.data, X.indices, X.indptr, mapped.shape[1], y, sq, 1)
    with pytest.raises(ValidationError, match="row_scale has length"):
        _sgd_run(*args, **dict(good, row_scale=good["row_scale"][:-1]))
    with pytest.raises(ValidationError, match="tail_column"):
        _sgd_run(*args, **dict(good, tail_column=mapped.shape[1]))
    with pytest.raises(ValidationError, match="column index"):   # stored columns reach the tail
        _sgd_run(*args, **dict(good, tail_column=X.shape[1] - 1))
    with pytest.raises(ValidationError, match="row_shrink has length"):
        _scd.row_squared_norms(X.data, X.indptr, row_shrink=np.ones(3))


def _count_calls(monkeypatch, name):
    calls = []
    original = getattr(_validation, name)

    def counted(*args, **kwargs):
        calls.append(name)
        return original(*args, **kwargs)

    patch_validation(monkeypatch, name, counted)
    return calls


@pytest.mark.parametrize("estimator, solver", [(DPLogisticRegression, "auto"),
                                               (DPLogisticRegression, "dpscd"),
                                               (DPRidge, "dpsgd"),
                                               (DPLogisticRegression, "output")])
def test_a_fit_scans_X_once(monkeypatch, estimator, solver):
    # float64: with float32 rows, output perturbation's check_X scales the rows a few ulp
    # above 1 in a new copy, which its optimiser checks again (the written-out fallback)
    X, y = _data(np.float64 if solver == "output" else np.float32, n=3000)
    scans = _count_calls(monkeypatch, "_csr_is_canonical")
    finite = _count_calls(monkeypatch, "_reject_non_finite_csr")
    structure = _count_calls(monkeypatch, "_check_csr_arrays")
    estimator(solver=solver, epochs=1, random_state=0).fit(X, y)
    assert len(scans) == 1 and len(finite) == 1     # the estimator's check_X, not the solver's
    assert len(structure) <= 2                      # before scikit-learn, and in check_X


def test_structure_token_of_mapped_rows_is_that_of_their_matrix():
    X, _ = _data(np.float64)
    X = check_X(X)
    token = structure_token(RowMap().map_rows(X))
    assert token.indices is X.indices and token.n_features == X.shape[1]
