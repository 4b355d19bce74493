"""The exact, accelerated and line-search solvers read the estimators' mapped rows without a
copy of X (issue 20, leftovers item 1).

References: the same estimator fit with the mapped rows written out once (the
solver's ``reads_row_map`` switched off: the path every one of these solvers
took before) must give the same bits as the fit that reads them through the
row map, with :meth:`MappedRows.tocsr` made to fail; and a fit of a
memory-mapped binary dataset must give the bits of the fit of the same arrays
in memory.  The products the solvers now take from the ``_glm`` kernels
(:class:`fastdp.solvers.glm_oracle.RowProducts`) are checked against scipy's
products with the written-out matrix, so the in-memory fits keep their bits.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from fastdp._mapped_rows import MappedRows
from fastdp._validation import check_X
from fastdp.io import open_binary
from fastdp.io.binary import save_binary
from fastdp.io.libsvm import csr_from_arrays
from fastdp.linear_model import DPLinearSVC, DPLogisticRegression, DPRidge
from fastdp.preprocessing import RowMap
from fastdp.solvers.accelerated.estimator import _AcceleratedEstimatorSolver
from fastdp.solvers.accelerated.oracle import row_l1_norms
from fastdp.solvers.exact import ExactEstimatorSolver
from fastdp.solvers.glm_oracle import GlmOracle, RowProducts
from fastdp.solvers.line_search.estimator import (
    FixedSplitEstimatorSolver,
    _FilteredEstimatorSolver,
)

from test_mapped_rows import _same_bits  # noqa: E402  (tests/ is on sys.path)
from test_mapped_rows_products import _data  # noqa: E402

EXACT = dict(epsilon=np.inf, solver="exact")
ACCEL = dict(epsilon=2.0, epochs=2, batch_size=50)
LINE = dict(epsilon=2.0, epochs=2, batch_size=100)

# name: (estimator, classes, solver class, parameters)
CASES = {
    "exact-logistic": (DPLogisticRegression, 2, ExactEstimatorSolver, EXACT),
    "exact-multinomial": (DPLogisticRegression, 3, ExactEstimatorSolver, EXACT),
    "exact-hinge": (DPLinearSVC, 2, ExactEstimatorSolver, EXACT),
    "exact-squared": (DPRidge, 0, ExactEstimatorSolver, EXACT),
    "dp_gd_laplace": (DPLogisticRegression, 2, _AcceleratedEstimatorSolver,
                      dict(ACCEL, solver="dp_gd_laplace")),
    "dp_heavy_ball": (DPLogisticRegression, 2, _AcceleratedEstimatorSolver,
                      dict(ACCEL, solver="dp_heavy_ball")),
    "dp_nesterov": (DPLogisticRegression, 2, _AcceleratedEstimatorSolver,
                    dict(ACCEL, solver="dp_nesterov")),
    "dp_masg": (DPLogisticRegression, 2, _AcceleratedEstimatorSolver,
                dict(ACCEL, solver="dp_masg")),
    "dp_nesterov-l1-bound": (DPLogisticRegression, 2, _AcceleratedEstimatorSolver,
                             dict(ACCEL, solver="dp_nesterov",
                                  solver_options={"row_l1_bound": 40.0})),
    "dp_gd_laplace-full-batch-ridge": (DPRidge, 0, _AcceleratedEstimatorSolver,
                                       dict(epsilon=2.0, epochs=3, batch_size=500,
                                            solver="dp_gd_laplace", clip=1.0)),
    "dp_blsgd": (DPLogisticRegression, 2, FixedSplitEstimatorSolver,
                 dict(LINE, solver="dp_blsgd")),
    "dp_blsgd_adaptive": (DPLogisticRegression, 2, _FilteredEstimatorSolver,
                          dict(LINE, solver="dp_blsgd_adaptive")),
    "dp_blsgd_ac": (DPLinearSVC, 2, _FilteredEstimatorSolver,
                    dict(LINE, solver="dp_blsgd_ac")),
    "dp_blgd": (DPLogisticRegression, 2, _FilteredEstimatorSolver,
                dict(LINE, solver="dp_blgd")),
    "dpagd": (DPRidge, 0, _FilteredEstimatorSolver, dict(epsilon=2.0, epochs=3, solver="dpagd")),
    "dp_blsgd-history": (DPLogisticRegression, 2, FixedSplitEstimatorSolver,
                         dict(LINE, solver="dp_blsgd", record_history=True)),
}


def _labels(y, classes):
    if classes == 0:     # regression targets
        return np.random.default_rng(7).normal(size=y.shape[0])
    return y


def _fit(case, X, y, **extra):
    estimator, _, _, params = CASES[case]
    return estimator(random_state=0, normalize=True, fit_intercept=True,
                     **dict(params, **extra)).fit(X, y)


def _same_model(got, want):
    assert got.solver_ == want.solver_ and got.epsilon_ == want.epsilon_
    assert _same_bits(got.coef_, want.coef_)
    assert _same_bits(np.asarray(got.intercept_), np.asarray(want.intercept_))
    assert got.n_iter_ == want.n_iter_
    assert got.history_ == want.history_   # (record_history: objectives of the mapped rows)


def _no_copy(self):
    raise AssertionError("the mapped rows were written out")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("case", sorted(CASES))
def test_fit_reads_mapped_rows_with_the_bits_of_the_copy(monkeypatch, case, dtype,
                                                         index_dtype):
    _, classes, solver_class, _ = CASES[case]
    X, y = _data(dtype, index_dtype, classes=max(classes, 2))
    y = _labels(y, classes)
    with monkeypatch.context() as patch:      # as before: the mapped rows written out once
        patch.setattr(solver_class, "reads_row_map", False)
        want = _fit(case, X, y)
    with monkeypatch.context() as patch:      # now: no copy at all
        patch.setattr(MappedRows, "tocsr", _no_copy)
        got = _fit(case, X, y)
    _same_model(got, want)
    assert np.all(np.isfinite(got.coef_)) and np.any(got.coef_ != 0.0)


def _binary(tmp_path, dtype, index_dtype, classes):
    X, y = _data(np.float64, np.int64, classes=max(classes, 2))
    save_binary(tmp_path / "d.fdp", [(X, y)], n_features=X.shape[1], dtype=dtype,
                index_dtype=index_dtype)
    Xm, ym = open_binary(tmp_path / "d.fdp")
    assert isinstance(Xm.data, np.memmap) and Xm.indices.dtype == index_dtype
    copy = csr_from_arrays(np.array(Xm.data), np.array(Xm.indices), np.array(Xm.indptr),
                           Xm.shape)
    return Xm, copy, _labels(np.asarray(ym), classes)


@pytest.mark.parametrize("dtype, index_dtype", [(np.float32, np.int32), (np.float64, np.int64)])
@pytest.mark.parametrize("case", sorted(CASES))
def test_fit_of_memory_mapped_data_equals_in_memory(monkeypatch, tmp_path, case, dtype,
                                                    index_dtype):
    _, classes, _, _ = CASES[case]
    Xm, copy, y = _binary(tmp_path, dtype, index_dtype, classes)
    want = _fit(case, copy, y)
    monkeypatch.setattr(MappedRows, "tocsr", _no_copy)
    _same_model(_fit(case, Xm, y), want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("mapped", [False, True])
def test_row_products_have_scipy_bits(dtype, index_dtype, mapped):
    """``RowProducts.dot``/``tdot`` against scipy's products (the written-out matrix for
    mapped rows), with 1 and 2 threads; and the mapped dense copy, L1 norms."""
    X, _ = _data(dtype, index_dtype, n=700)
    X = check_X(X)
    M = check_X(RowMap(bound="normalize", fit_intercept=True).map_rows(X), max_row_norm=1.0) \
        if mapped else X
    ref = M.tocsr() if mapped else X
    rng = np.random.default_rng(4)
    v, V = rng.normal(size=M.shape[1]), rng.normal(size=(3, M.shape[1])).T
    a, A = rng.normal(size=M.shape[0]), rng.normal(size=(M.shape[0], 3))
    products = RowProducts(M)
    for threads in (1, 2):
        assert _same_bits(products.dot(v, threads), np.asarray(ref @ v))
        assert _same_bits(products.dot(V, threads), np.asarray(ref @ V))
        assert _same_bits(products.tdot(a, threads), np.asarray(ref.T @ a))
        assert _same_bits(products.tdot(A, threads), np.asarray(ref.T @ A))
    assert _same_bits(row_l1_norms(M), np.asarray(abs(ref).sum(axis=1)).ravel())
    if mapped:
        assert _same_bits(M.toarray(), ref.toarray())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("dense", [False, True])
def test_replica_gradients_keep_their_bits(dtype, dense):
    """``GlmOracle.gradients`` (full batch, no clipping) equals the scipy formula it used
    before, on CSR and on mapped rows (those against their written-out matrix)."""
    rng = np.random.default_rng(5)
    if dense:
        X = sp.csr_matrix(rng.normal(size=(300, 20)).astype(dtype))
    else:
        X, _ = _data(dtype, np.int32, n=400)
    X = check_X(X)
    y = np.where(rng.random(X.shape[0]) < 0.5, -1.0, 1.0)
    thetas = rng.normal(size=(3, X.shape[1]))
    oracle = GlmOracle(X, y, loss="logistic", lam=0.1)
    Z = X.toarray() if dense else X
    coefs = oracle.loss.derivative_in_place(np.asarray(Z @ thetas.T), y[:, None])
    want = np.asarray(Z.T @ coefs).T / X.shape[0] + 0.1 * thetas
    assert _same_bits(oracle.gradients(thetas), want)
    M = check_X(RowMap(bound="normalize", fit_intercept=True).map_rows(X), max_row_norm=1.0)
    thetas = rng.normal(size=(3, M.shape[1]))
    mapped = GlmOracle(M, y, loss="logistic", lam=0.1)
    copy = GlmOracle(M.tocsr(), y, loss="logistic", lam=0.1)
    assert _same_bits(mapped.gradients(thetas), copy.gradients(thetas))
    rows = np.array([3, 1, 1, 250], dtype=np.int64)
    assert _same_bits(mapped.gradient(thetas[0], rows), copy.gradient(thetas[0], rows))
    assert mapped.objective(thetas[0]) == copy.objective(thetas[0])
    assert np.isclose(mapped.smoothness(), copy.smoothness(), rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("clip", [0.3, np.inf])
def test_clipped_gradient_sum_reads_mapped_rows_as_the_written_out_matrix(dtype, index_dtype,
                                                                         threads, clip):
    from fastdp._kernels import _glm
    from fastdp.exceptions import ValidationError

    X, y = _data(dtype, index_dtype, n=1200)
    X = check_X(X)
    mapped = check_X(RowMap(bound="normalize").map_rows(X), max_row_norm=1.0)
    copy = mapped.tocsr()
    theta = np.random.default_rng(6).normal(size=mapped.shape[1]) * 3.0
    rows = np.concatenate([np.arange(0, 1200, 3), [5, 5, 1199]]).astype(np.int64)
    got, want = np.zeros(mapped.shape[1]), np.zeros(mapped.shape[1])
    _glm.clipped_gradient_sum(X.data, X.indices, X.indptr, y, rows, theta, _glm.LOSS_LOGISTIC,
                              clip, got, threads, **mapped.kernel_map())
    _glm.clipped_gradient_sum(copy.data, copy.indices, copy.indptr, y, rows, theta,
                              _glm.LOSS_LOGISTIC, clip, want, threads)
    assert _same_bits(got, want) and got[X.shape[1]] != 0.0
    with pytest.raises(ValidationError, match="column index"):  # stored columns reach the tail
        _glm.clipped_gradient_sum(X.data, X.indices, X.indptr, y, rows, theta,
                                  _glm.LOSS_LOGISTIC, clip, np.zeros(mapped.shape[1]), 1,
                                  **dict(mapped.kernel_map(), tail_column=X.shape[1] - 1))
    with pytest.raises(ValidationError, match="row_scale has length"):
        _glm.clipped_gradient_sum(X.data, X.indices, X.indptr, y, rows, theta,
                                  _glm.LOSS_LOGISTIC, clip, np.zeros(mapped.shape[1]), 1,
                                  **dict(mapped.kernel_map(),
                                         row_scale=mapped.row_scale[:-1]))
