"""Products of mapped rows without a copy of X, and ``record_history`` on them (issue 20 item 3).

``MappedRows @ w`` and ``MappedRows.T @ a`` are what the per-epoch objectives
of ``record_history=True`` compute (``fastdp.losses``,
``multinomial_objective``).  They must equal, bit for bit, scipy's products
with the written-out mapped matrix, whose values are themselves checked
against the plain-numpy reference map of ``tests/test_mapped_rows.py``; and a
fit with ``record_history=True`` must then give the history and the
coefficients of the fit that wrote the rows out, without writing them out.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from fastdp._mapped_rows import MappedRows
from fastdp._validation import check_X
from fastdp.exceptions import ValidationError
from fastdp.linear_model import DPLogisticRegression
from fastdp.preprocessing import RowMap
from fastdp.solvers.multinomial import MultinomialDPSGDEstimatorSolver
from fastdp.solvers.scd import _DualScdEstimatorSolver
from fastdp.solvers.sgd import DPSGDEstimatorSolver

from test_mapped_rows import _reference, _same_bits  # noqa: E402  (tests/ is on sys.path)


def _data(dtype, index_dtype, n=500, d=70, seed=0, classes=2):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.15, random_state=seed, format="csr", dtype=np.float64)
    X.data = rng.normal(size=X.nnz) * 3.0
    X = X.astype(dtype)
    X.sort_indices()
    X.indices = X.indices.astype(index_dtype)
    X.indptr = X.indptr.astype(index_dtype)
    y = rng.integers(0, classes, size=n)
    return X, (np.where(y == 1, 1.0, -1.0) if classes == 2 else y)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("bound, fit_intercept", [
    ("normalize", True), ("normalize", False), ("clip", True),
])
def test_products_equal_those_of_the_written_out_matrix(dtype, index_dtype, bound,
                                                        fit_intercept):
    X, _ = _data(dtype, index_dtype)
    X = check_X(X)
    mapped = check_X(RowMap(bound=bound, fit_intercept=fit_intercept).map_rows(X),
                     max_row_norm=1.0)
    copy = mapped.tocsr()
    if mapped.row_shrink is None:
        assert _same_bits(copy.data, _reference(X, mapped.row_scale, mapped.tail_value).data)
    rng = np.random.default_rng(1)
    w = rng.normal(size=mapped.shape[1])
    W = rng.normal(size=(4, mapped.shape[1])).T               # not C-contiguous, as coef.T
    for a in (rng.normal(size=mapped.shape[0]), rng.normal(size=mapped.shape[0]).astype(dtype)):
        assert _same_bits(mapped.T @ a, copy.T @ a)
    assert _same_bits(mapped @ w, copy @ w)
    assert _same_bits(mapped @ W, np.asarray(copy @ W))
    assert mapped.T.shape == copy.T.shape
    with pytest.raises(ValueError, match="dimension mismatch"):
        mapped @ w[:-1]
    with pytest.raises(ValueError, match="dimension mismatch"):
        mapped.T @ w


def fit_both_ways(monkeypatch, solver_class, X, y, **params):
    """``(on the fly, written out)``: two ``DPLogisticRegression(**params)`` fits, the second
    with ``solver_class.reads_row_map`` off (the rows written out once, as before), the
    first with ``MappedRows.tocsr`` failing (no copy at all)."""
    with monkeypatch.context() as patch:
        patch.setattr(solver_class, "reads_row_map", False)
        want = DPLogisticRegression(**params).fit(X, y)

    def no_copy(self):
        raise AssertionError("the mapped rows were written out")

    with monkeypatch.context() as patch:
        patch.setattr(MappedRows, "tocsr", no_copy)
        got = DPLogisticRegression(**params).fit(X, y)
    assert got.solver_ == want.solver_ and got.epsilon_ == want.epsilon_
    assert _same_bits(got.coef_, want.coef_) and _same_bits(got.intercept_, want.intercept_)
    return got, want


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("classes, solver, solver_class", [
    (2, "dpsgd", DPSGDEstimatorSolver),
    (4, "dpsgd", MultinomialDPSGDEstimatorSolver),
    (2, "dpscd", _DualScdEstimatorSolver),
    (3, "dpscd", _DualScdEstimatorSolver),                  # one-vs-rest
])
def test_record_history_reads_mapped_rows_without_a_copy(monkeypatch, dtype, classes, solver,
                                                         solver_class):
    X, y = _data(dtype, np.int32, classes=classes)
    got, want = fit_both_ways(monkeypatch, solver_class, X, y, epsilon=2.0, epochs=3,
                              batch_size=50, random_state=0, solver=solver,
                              record_history=True)
    assert got.history_ == want.history_
    assert len(got.history_) > 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("threads", [1, 2])
def test_glm_products_read_mapped_rows_as_the_written_out_matrix(dtype, index_dtype, threads):
    from fastdp._kernels import _glm

    X, _ = _data(dtype, index_dtype, n=1200)
    X = check_X(X)
    mapped = check_X(RowMap(bound="normalize").map_rows(X), max_row_norm=1.0)
    copy = mapped.tocsr()
    rng = np.random.default_rng(2)
    theta = rng.normal(size=mapped.shape[1])
    weights = rng.normal(size=mapped.shape[0])
    rows = np.arange(mapped.shape[0], dtype=np.int64)
    got, want = np.empty(rows.size), np.empty(rows.size)
    _glm.margins(X.data, X.indices, X.indptr, rows, theta, got, threads, **mapped.kernel_map())
    _glm.margins(copy.data, copy.indices, copy.indptr, rows, theta, want, threads)
    assert _same_bits(got, want)
    got, want = np.zeros(mapped.shape[1]), np.zeros(mapped.shape[1])
    _glm.weighted_row_sum(X.data, X.indices, X.indptr, rows, weights, got, threads,
                          **mapped.kernel_map())
    _glm.weighted_row_sum(copy.data, copy.indices, copy.indptr, rows, weights, want, threads)
    assert _same_bits(got, want) and got[X.shape[1]] != 0.0
    out = np.empty(rows.size)
    with pytest.raises(ValidationError, match="tail_column"):
        _glm.margins(X.data, X.indices, X.indptr, rows, theta, out, 1,
                     **dict(mapped.kernel_map(), tail_column=mapped.shape[1]))
    with pytest.raises(ValidationError, match="column index"):  # stored columns reach the tail
        _glm.weighted_row_sum(X.data, X.indices, X.indptr, rows, weights,
                              np.zeros(mapped.shape[1]), 1,
                              **dict(mapped.kernel_map(), tail_column=X.shape[1] - 1))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("solver", ["output", "objective"])
@pytest.mark.parametrize("normalize, fit_intercept", [("auto", True), (True, False)])
def test_perturbation_fits_read_mapped_rows_without_a_copy(monkeypatch, dtype, solver,
                                                           normalize, fit_intercept):
    from fastdp.solvers.perturbation import _PerturbationEstimatorSolver

    X, y = _data(dtype, np.int32)
    fit_both_ways(monkeypatch, _PerturbationEstimatorSolver, X, y, epsilon=1.0, random_state=0,
                  solver=solver, normalize=normalize, fit_intercept=fit_intercept)
