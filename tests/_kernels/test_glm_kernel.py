"""Tests of the shared sparse GLM kernels (fastdp/_kernels/_glm.pyx) against numpy."""
import pathlib
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from fastdp._kernels import _glm
from fastdp._validation import structure_token
from fastdp.exceptions import ValidationError
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from sgd_reference import loss_derivative  # noqa: E402

LOSSES = {"squared": _glm.LOSS_SQUARED, "logistic": _glm.LOSS_LOGISTIC, "hinge": _glm.LOSS_HINGE}


def _csr(rng, n, m, density, value_dtype, index_dtype):
    X = sp.random(n, m, density=density, format="csr", random_state=rng, dtype=np.float64)
    X.data = rng.normal(size=X.nnz) * 2.0
    X = X.astype(value_dtype)
    X.sort_indices()
    X.indices = X.indices.astype(index_dtype)
    X.indptr = X.indptr.astype(index_dtype)
    return X


def _reference_clipped_sum(X, y, rows, theta, name, clip):
    Xr = X[rows].toarray().astype(np.float64)
    d = loss_derivative(name, Xr @ theta, y[rows])
    norms = np.abs(d) * np.linalg.norm(Xr, axis=1)
    factor = np.minimum(1.0, clip / np.where(norms > 0, norms, 1.0))
    return (d * factor) @ Xr


@pytest.mark.parametrize("value_dtype", [np.float32, np.float64])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_clipped_gradient_sum_matches_numpy(rng, value_dtype, index_dtype, loss):
    X = _csr(rng, 300, 40, 0.15, value_dtype, index_dtype)
    y = np.sign(rng.normal(size=300)) if loss != "squared" else rng.normal(size=300)
    theta = rng.normal(size=40)
    rows = rng.integers(0, 300, size=500).astype(np.int64)  # repeats count twice
    for clip in (0.05, 1.0, np.inf):
        out = np.full(40, 0.25)
        _glm.clipped_gradient_sum(X.data, X.indices, X.indptr, y, rows, theta, LOSSES[loss],
                                  clip, out)
        ref = 0.25 + _reference_clipped_sum(X, y, rows, theta, loss, clip)
        np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-10)


def test_gradient_sum_is_clip_inf_and_matches_loss_module(rng):
    from fastdp.losses import get_loss

    X = _csr(rng, 200, 30, 0.2, np.float64, np.int32)
    y = np.sign(rng.normal(size=200))
    theta = rng.normal(size=30)
    rows = np.arange(200, dtype=np.int64)
    for name, code in LOSSES.items():
        a = np.zeros(30)
        b = np.zeros(30)
        _glm.gradient_sum(X.data, X.indices, X.indptr, y, rows, theta, code, a)
        _glm.clipped_gradient_sum(X.data, X.indices, X.indptr, y, rows, theta, code, np.inf, b)
        assert np.array_equal(a, b)
        ref = X.T @ get_loss(name).derivative(X @ theta, y)
        np.testing.assert_allclose(a, ref, rtol=1e-12, atol=1e-12)


def test_single_clipped_gradient_has_norm_at_most_clip(rng):
    X = _csr(rng, 50, 20, 0.5, np.float64, np.int32)
    y = rng.normal(size=50) * 100.0
    theta = rng.normal(size=20) * 10.0
    for i in range(50):
        out = np.zeros(20)
        _glm.clipped_gradient_sum(X.data, X.indices, X.indptr, y, np.array([i], np.int64),
                                  theta, _glm.LOSS_SQUARED, 0.3, out)
        assert np.linalg.norm(out) <= 0.3 * (1 + 1e-12)
        unclipped = (X[i] @ theta - y[i]) * X[i].toarray().ravel()
        if np.linalg.norm(unclipped) > 0.3:
            assert np.linalg.norm(out) == pytest.approx(0.3, rel=1e-12)


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_margins_and_weighted_row_sum(rng, index_dtype):
    X = _csr(rng, 400, 60, 0.1, np.float32, index_dtype)
    theta = rng.normal(size=60)
    rows = rng.permutation(400)[:250].astype(np.int64)
    out = np.empty(250)
    _glm.margins(X.data, X.indices, X.indptr, rows, theta, out)
    np.testing.assert_allclose(out, X[rows].astype(np.float64) @ theta, rtol=1e-12, atol=1e-12)
    w = rng.normal(size=250)
    acc = np.zeros(60)
    _glm.weighted_row_sum(X.data, X.indices, X.indptr, rows, w, acc)
    np.testing.assert_allclose(acc, X[rows].astype(np.float64).T @ w, rtol=1e-12, atol=1e-12)


def test_thread_count_does_not_change_bits(rng):
    X = _csr(rng, 3000, 500, 0.02, np.float64, np.int32)
    y = np.sign(rng.normal(size=3000))
    theta = rng.normal(size=500)
    rows = rng.integers(0, 3000, size=2000).astype(np.int64)
    results = []
    for nt in (1, 2, 3):
        g = np.zeros(500)
        _glm.clipped_gradient_sum(X.data, X.indices, X.indptr, y, rows, theta,
                                  _glm.LOSS_LOGISTIC, 0.5, g, num_threads=nt)
        m = np.empty(2000)
        _glm.margins(X.data, X.indices, X.indptr, rows, theta, m, num_threads=nt)
        s = np.zeros(500)
        _glm.weighted_row_sum(X.data, X.indices, X.indptr, rows, m, s, num_threads=nt)
        results.append((g, m, s))
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert np.array_equal(a, b)


def test_empty_rows_and_empty_matrix_rows(rng):
    X = sp.csr_matrix((5, 4))
    y = np.ones(5)
    out = np.zeros(4)
    _glm.clipped_gradient_sum(X.data, X.indices, X.indptr, y, np.zeros(0, np.int64), np.ones(4),
                              _glm.LOSS_HINGE, 1.0, out)
    _glm.clipped_gradient_sum(X.data, X.indices, X.indptr, y, np.arange(5, dtype=np.int64),
                              np.ones(4), _glm.LOSS_HINGE, 1.0, out)
    assert np.array_equal(out, np.zeros(4))


def test_bad_input_raises(rng):
    X = _csr(rng, 10, 5, 0.5, np.float64, np.int32)
    y = np.ones(10)
    theta = np.zeros(5)
    out = np.zeros(5)
    with pytest.raises(ValidationError, match="rows"):
        _glm.clipped_gradient_sum(X.data, X.indices, X.indptr, y, np.array([10], np.int64), theta,
                                  _glm.LOSS_LOGISTIC, 1.0, out)
    with pytest.raises(ValidationError, match="rows"):
        _glm.margins(X.data, X.indices, X.indptr, np.array([-1], np.int64), theta, np.zeros(1))
    with pytest.raises(ValidationError, match="loss code"):
        _glm.gradient_sum(X.data, X.indices, X.indptr, y, np.array([0], np.int64), theta, 7, out)
    with pytest.raises(ValidationError, match="clip"):
        _glm.clipped_gradient_sum(X.data, X.indices, X.indptr, y, np.array([0], np.int64), theta,
                                  _glm.LOSS_LOGISTIC, 0.0, out)
    with pytest.raises(ValidationError, match="n_features"):
        _glm.gradient_sum(X.data, X.indices, X.indptr, y, np.array([0], np.int64), np.zeros(4),
                          _glm.LOSS_LOGISTIC, out)
    with pytest.raises(ValidationError, match="one entry per row"):
        _glm.margins(X.data, X.indices, X.indptr, np.array([0], np.int64), theta, np.zeros(2))
    with pytest.raises((TypeError, ValueError)):  # int64 indices, int32 indptr: no copy, no guess
        _glm.margins(X.data, X.indices.astype(np.int64), X.indptr, np.array([0], np.int64),
                     theta, np.zeros(1))


def test_check_structure_keyword(rng):
    """Same bits with the structure scan (True, False) and without it (a structure token);
    only a token of these very arrays skips the scan, so a row whose column indices are
    unsorted is refused with check_structure=False too (the O(1) and row checks stay)."""
    X = _csr(rng, 40, 7, 0.5, np.float64, np.int64)
    y = np.where(rng.normal(size=40) > 0, 1.0, -1.0)
    rows = rng.integers(0, 40, size=300).astype(np.int64)       # parallel path possible
    theta = rng.normal(size=7)
    token = structure_token(X)
    for threads in (1, 2):
        results = []
        for check in (True, False, token):
            out = np.zeros(7)
            _glm.clipped_gradient_sum(X.data, X.indices, X.indptr, y, rows, theta,
                                      _glm.LOSS_LOGISTIC, 0.5, out, threads,
                                      check_structure=check)
            results.append(out)
        assert np.array_equal(results[0], results[1]) and np.array_equal(results[0], results[2])
    first = int(np.flatnonzero(np.diff(X.indptr) >= 2)[0])
    unsorted, data = X.indices.copy(), X.data.copy()     # the same matrix, unsorted storage
    k = X.indptr[first]
    unsorted[[k, k + 1]] = unsorted[[k + 1, k]]
    data[[k, k + 1]] = data[[k + 1, k]]
    one = np.array([first], np.int64)
    for check in (True, False):                          # False scans too
        with pytest.raises(ValidationError, match=f"row {first} are not strictly increasing"):
            _glm.margins(data, unsorted, X.indptr, one, theta, np.zeros(1),
                         check_structure=check)
    with pytest.raises(ValidationError, match="made for other CSR arrays"):
        _glm.margins(data, unsorted, X.indptr, one, theta, np.zeros(1), check_structure=token)
    with pytest.raises(ValidationError, match="canonical CSR"):   # no token for unsorted rows
        structure_token(sp.csr_matrix((data, unsorted, X.indptr), shape=X.shape))
    out = np.zeros(1)
    _glm.margins(X.data, X.indices, X.indptr, one, theta, out, check_structure=token)
    np.testing.assert_allclose(out, X[first].toarray() @ theta, rtol=1e-13)
    with pytest.raises(ValidationError, match="theta needs one entry per column"):
        _glm.margins(X.data, X.indices, X.indptr, np.arange(40, dtype=np.int64), theta[:2],
                     np.zeros(40))
    with pytest.raises(ValidationError, match="rows"):
        _glm.margins(X.data, X.indices, X.indptr, np.array([40], np.int64), theta, np.zeros(1),
                     check_structure=False)
    with pytest.raises(ValidationError, match="indptr"):
        _glm.margins(X.data, X.indices, X.indptr[:-1], one, theta, np.zeros(1),
                     check_structure=False)
