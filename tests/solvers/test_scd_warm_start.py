"""``scd(warm_start=...)``: continuing a non-private SDCA run from its dual state."""

import numpy as np
import pytest
import scipy.sparse as sp

from fastdp.exceptions import ValidationError
from fastdp.losses import dual_objective
from fastdp.solvers.exact import exact_minimize
from fastdp.solvers.scd import scd


def _data(n=120, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= 1.5 * np.linalg.norm(X, axis=1, keepdims=True)
    y = np.where(X[:, 0] + 0.4 * rng.normal(size=n) > 0, 1.0, -1.0)
    return sp.csr_matrix(X), y


@pytest.mark.parametrize("loss", ["hinge", "squared"])
def test_continuation_keeps_v_and_descends(loss):
    X, y = _data()
    lam = 1e-3
    first = scd(X, y, loss=loss, lam=lam, epochs=3, box_eps=0.0, random_state=1)
    more = scd(X, y, loss=loss, lam=lam, epochs=5, box_eps=0.0, random_state=2,
               warm_start=first)
    # the state carried over is the dual's: v stays X^T alpha (a second computation)
    np.testing.assert_allclose(more.v, X.T @ more.alpha, rtol=0, atol=1e-12)
    # exact coordinate steps never increase the minimised dual F* (box_eps=0)
    assert dual_objective(more.alpha, X, y, loss, lam) <= dual_objective(first.alpha, X, y,
                                                                          loss, lam) + 1e-15
    # the first run is not modified by the continuation
    np.testing.assert_array_equal(first.v, scd(X, y, loss=loss, lam=lam, epochs=3, box_eps=0.0,
                                               random_state=1).v)


def test_warm_start_of_other_data_is_refused():
    X, y = _data()
    first = scd(X, y, loss="hinge", lam=1e-3, epochs=1, random_state=0)
    X2, y2 = _data(n=50)
    with pytest.raises(ValidationError, match="warm_start"):
        scd(X2, y2, loss="hinge", lam=1e-3, epochs=1, warm_start=first)


def test_exact_hinge_meets_its_gap_against_a_qp_reference():
    """The exact hinge minimiser against a second method: scipy's SLSQP on the dual QP."""
    from scipy.optimize import minimize
    X, y = _data(n=40, d=4, seed=3)
    lam = 1e-2
    result = exact_minimize(X, y, loss="hinge", lam=lam)
    assert result.details.converged
    n = X.shape[0]
    A = (X.toarray() * y[:, None])
    # dual of (1/n) sum hinge + lam/2 ||w||^2: max_b mean(b) - ||A^T b||^2 / (2 lam n^2), 0<=b<=1
    fun = lambda b: -(b.mean() - (A.T @ b) @ (A.T @ b) / (2 * lam * n * n))
    jac = lambda b: -(np.full(n, 1.0 / n) - A @ (A.T @ b) / (lam * n * n))
    qp = minimize(fun, np.full(n, 0.5), jac=jac, bounds=[(0, 1)] * n, method="L-BFGS-B",
                  options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10000})
    w = A.T @ qp.x / (lam * n)
    np.testing.assert_allclose(result.coef, w, atol=1e-4)
