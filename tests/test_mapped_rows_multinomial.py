"""Multinomial DP-SGD reads the estimators' mapped rows without a copy (issue 20 item 3).

A :class:`fastdp._mapped_rows.MappedRows` (X, one factor per row, an appended
constant) read on the fly by ``_multinomial.run_multinomial_sgd`` must give
the bits of the same kernel run on the matrix written out once, for every
value and index dtype, row bound and intercept.  The written-out matrix is
itself checked against a plain-numpy reference of the map
(``tests/test_mapped_rows.py: _reference``), so the comparison does not rest
on ``MappedRows.tocsr`` alone.  The same holds one level up (the solver
function, the estimator with and without the copy) and for the data-parallel
engine's kernel ``clipped_gradient_sum``.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from fastdp._kernels import _multinomial, _scd
from fastdp._mapped_rows import MappedRows
from fastdp._validation import check_X
from fastdp.exceptions import ValidationError
from fastdp.preprocessing import RowMap
from fastdp.solvers import multinomial
from fastdp.solvers.multinomial import dp_multinomial_sgd

from test_mapped_rows import _reference, _same_bits  # noqa: E402  (tests/ is on sys.path)
from test_mapped_rows_products import fit_both_ways  # noqa: E402

K = 4


def _data(dtype, index_dtype, n=300, d=50, seed=0, scale=3.0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.2, random_state=seed, format="csr", dtype=np.float64)
    X.data = rng.normal(size=X.nnz) * scale
    X = X.astype(dtype)
    X.sort_indices()
    X.indices = X.indices.astype(index_dtype)
    X.indptr = X.indptr.astype(index_dtype)
    return X, rng.integers(0, K, size=n).astype(np.int64)


def _mapped(dtype, index_dtype, bound, fit_intercept):
    X, y = _data(dtype, index_dtype, scale=0.05 if bound == "reject" else 3.0)
    X = check_X(X)
    assert X.indices.dtype == index_dtype
    mapped = check_X(RowMap(bound=bound, fit_intercept=fit_intercept).map_rows(X),
                     max_row_norm=1.0)              # float32: a second factor on some rows
    assert isinstance(mapped, MappedRows)
    return X, y, mapped


def _batches(n, count=25, size=48, seed=5):
    rng = np.random.default_rng(seed)
    batch_idx = np.concatenate([rng.choice(n, size=size, replace=False)
                                for _ in range(count)]).astype(np.int64)
    return np.arange(0, batch_idx.size + 1, size, dtype=np.int64), batch_idx


def _kernel_run(data, indices, indptr, m, y, sq, *, threads=1, lazy=True, clip=0.5, **row_map):
    w = np.zeros((m, K))
    batch_ptr, batch_idx = _batches(y.shape[0])
    bitgen = np.random.PCG64(11)
    with bitgen.lock:
        draws = _multinomial.run_multinomial_sgd(
            data, indices, indptr, y, sq, w, batch_ptr, batch_idx, np.zeros(48 * K),
            np.zeros(m, np.int32), clip, 0.98, 0.2, 0.7, lazy, bitgen, threads, 1,
            **row_map)
    return w, draws


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("bound, fit_intercept", [
    ("normalize", True), ("normalize", False), ("clip", True), ("reject", True),
    ("reject", False),
])
def test_kernel_reads_mapped_rows_as_the_written_out_matrix(dtype, index_dtype, bound,
                                                            fit_intercept):
    X, y, mapped = _mapped(dtype, index_dtype, bound, fit_intercept)
    copy = mapped.tocsr()
    if mapped.row_shrink is None:   # the copy is the independent reference map
        ref = _reference(X, mapped.row_scale, mapped.tail_value)
        assert _same_bits(copy.data, ref.data) and np.array_equal(copy.indices, ref.indices)
    m = mapped.shape[1]
    sq = _scd.row_squared_norms(copy.data, copy.indptr)
    assert _same_bits(mapped.kernel_sq_norms(), sq)
    for threads, lazy in ((1, True), (2, True), (1, False)):
        got = _kernel_run(X.data, X.indices, X.indptr, m, y, sq, threads=threads, lazy=lazy,
                          **mapped.kernel_map())
        want = _kernel_run(copy.data, copy.indices, copy.indptr, m, y, sq, threads=threads,
                           lazy=lazy)
        assert got[1] == want[1]
        assert _same_bits(got[0], want[0])
        assert np.any(got[0] != 0.0)


def test_float32_rows_with_a_second_factor_are_read_as_written():
    X, y, mapped = _mapped(np.float32, np.int32, "normalize", True)
    assert mapped.row_shrink is not None and np.any(mapped.row_shrink < 1.0)
    copy = mapped.tocsr()
    sq = mapped.kernel_sq_norms()
    got = _kernel_run(X.data, X.indices, X.indptr, mapped.shape[1], y, sq, clip=np.inf,
                      **mapped.kernel_map())
    want = _kernel_run(copy.data, copy.indices, copy.indptr, mapped.shape[1], y, sq,
                       clip=np.inf)
    assert _same_bits(got[0], want[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_clipped_gradient_sum_reads_mapped_rows_as_the_written_out_matrix(dtype, index_dtype):
    X, y, mapped = _mapped(dtype, index_dtype, "normalize", True)
    copy = mapped.tocsr()
    sq = mapped.kernel_sq_norms()
    m = mapped.shape[1]
    w = np.random.default_rng(3).normal(size=(m, K))
    rows = np.array([5, 0, 17, 17, 250, 3], dtype=np.int64)
    got, want = np.zeros((m, K)), np.zeros((m, K))
    _multinomial.clipped_gradient_sum(X.data, X.indices, X.indptr, y, sq, rows, w, 0.4, got,
                                      **mapped.kernel_map())
    _multinomial.clipped_gradient_sum(copy.data, copy.indices, copy.indptr, y, sq, rows, w,
                                      0.4, want)
    assert _same_bits(got, want)
    assert np.any(got[X.shape[1]] != 0.0)               # the constant column is updated


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", [1, 2])
def test_solver_function_gives_the_bits_of_the_written_out_matrix(dtype, threads):
    X, y, mapped = _mapped(dtype, np.int32, "normalize", True)
    kwargs = dict(n_classes=K, lam=1e-3, epochs=2, batch_size=40, clip=0.5,
                  noise_multiplier=0.8, num_threads=threads, random_state=4)
    got = dp_multinomial_sgd(mapped, y, **kwargs)
    want = dp_multinomial_sgd(mapped.tocsr(), y, **kwargs)
    assert _same_bits(got.coef, want.coef)
    assert got.event == want.event and got.n_iter == want.n_iter
    assert got.diagnostics == want.diagnostics


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("normalize, fit_intercept", [
    ("auto", True), (True, False), ("clip", True),
])
@pytest.mark.parametrize("solver", ["auto", "dpsgd"])
def test_estimator_fit_reads_mapped_rows_without_a_copy(monkeypatch, dtype, normalize,
                                                        fit_intercept, solver):
    X, y = _data(dtype, np.int32)
    got, want = fit_both_ways(monkeypatch, multinomial.MultinomialDPSGDEstimatorSolver, X, y,
                              epsilon=2.0, epochs=2, batch_size=50, random_state=0,
                              normalize=normalize, fit_intercept=fit_intercept, solver=solver)
    assert got.coef_.shape == (K, X.shape[1])
    assert np.array_equal(got.predict(X), want.predict(X))


def test_kernel_refuses_a_malformed_row_map():
    X, y, mapped = _mapped(np.float64, np.int32, "normalize", True)
    good = mapped.kernel_map()
    sq = mapped.kernel_sq_norms()
    args = (X.data, X.indices, X.indptr, mapped.shape[1], y, sq)
    with pytest.raises(ValidationError, match="row_scale has length"):
        _kernel_run(*args, **dict(good, row_scale=good["row_scale"][:-1]))
    with pytest.raises(ValidationError, match="row_shrink has length"):
        _kernel_run(*args, **dict(good, row_shrink=np.ones(3)))
    with pytest.raises(ValidationError, match="tail_column"):
        _kernel_run(*args, **dict(good, tail_column=mapped.shape[1]))
    with pytest.raises(ValidationError, match="column index"):   # stored columns reach the tail
        _kernel_run(*args, **dict(good, tail_column=X.shape[1] - 1))
    m = mapped.shape[1]
    with pytest.raises(ValidationError, match="tail_column"):
        _multinomial.clipped_gradient_sum(X.data, X.indices, X.indptr, y, sq,
                                          np.array([0], np.int64), np.zeros((m, K)), 1.0,
                                          np.zeros((m, K)), **dict(good, tail_column=m))
