"""The one GLM oracle (fastdp.solvers.glm_oracle) against dense numpy references.

References are written here from the formulas (dense matrix products, the
loss derivative of :mod:`fastdp.losses` is not used for the clipped sums).
"""
import math

import numpy as np
import pytest
import scipy.sparse as sp

from fastdp.exceptions import ValidationError
from fastdp.solvers.accelerated import GLMProblem
from fastdp.solvers.line_search import GlmBatchOracle
from fastdp.solvers.glm_oracle import GlmOracle


def _derivative(name, z, y):
    if name == "squared":
        return z - y
    if name == "logistic":
        return -y / (1.0 + np.exp(y * z))
    return np.where(y * z < 1.0, -y, 0.0)


def _problem(rng, dtype=np.float64, n=120, d=15):
    X = sp.random(n, d, density=0.3, random_state=rng, format="csr", dtype=np.float64)
    X.data = rng.normal(size=X.nnz)
    return X.astype(dtype), np.where(rng.random(n) < 0.5, -1.0, 1.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["squared", "logistic", "hinge"])
def test_gradient_matches_dense_reference(rng, dtype, name):
    X, y = _problem(rng, dtype)
    theta = rng.normal(size=X.shape[1])
    rows = rng.integers(0, X.shape[0], 50)
    dense = X.toarray().astype(np.float64)
    for clip in (0.3, math.inf):
        oracle = GlmOracle(X, y, loss=name, lam=0.1, clip=clip)
        d = _derivative(name, dense[rows] @ theta, y[rows])
        scale = np.minimum(1.0, clip / np.maximum(np.abs(d) * np.linalg.norm(dense[rows], axis=1),
                                                  1e-300))
        ref = (d * scale) @ dense[rows] / rows.size + 0.1 * theta
        np.testing.assert_allclose(oracle.gradient(theta, rows), ref, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(oracle.margins(rows, theta), dense[rows] @ theta, rtol=1e-12)


@pytest.mark.parametrize("name", ["squared", "logistic"])
def test_replica_gradients_equal_one_at_a_time(rng, name):
    X, y = _problem(rng)
    oracle = GlmOracle(X, y, loss=name, lam=0.05)
    thetas = rng.normal(size=(4, X.shape[1]))
    together = oracle.gradients(thetas)
    alone = np.stack([oracle.gradient(t) for t in thetas])
    np.testing.assert_allclose(together, alone, rtol=1e-12, atol=1e-14)


def test_loss_values_and_labels():
    rng = np.random.default_rng(3)
    X, y = _problem(rng)
    theta = rng.normal(size=X.shape[1])
    z = X.toarray() @ theta
    assert np.allclose(GlmOracle(X, y, loss="logistic").loss_values(theta),
                       np.log1p(np.exp(-y * z)), rtol=1e-13)
    assert np.allclose(GlmOracle(X, y, loss="hinge").loss_values(theta),
                       np.maximum(0.0, 1.0 - y * z), rtol=1e-13)
    # labels="check" maps two classes to -1/+1; "as_given" keeps the numbers
    zero_one = (y > 0).astype(float)
    assert np.array_equal(GlmOracle(X, zero_one, loss="logistic").y, y)
    assert np.array_equal(GlmOracle(X, zero_one, loss="logistic", labels="as_given").y, zero_one)
    with pytest.raises(ValidationError, match="labels"):
        GlmOracle(X, y, loss="logistic", labels="other")
    with pytest.raises(ValidationError, match="one entry per row"):
        GlmOracle(X, y[:-1], loss="logistic", labels="as_given")


def test_the_named_oracles_are_the_one_oracle():
    rng = np.random.default_rng(4)
    X, y = _problem(rng)
    problem = GLMProblem(X, y, loss="logistic", lam=0.1, row_l1_bound=50.0)
    batch = GlmBatchOracle(X, y, "hinge")
    assert isinstance(problem, GlmOracle) and isinstance(batch, GlmOracle)
    assert batch.kernel_code == batch.loss.code and problem.sensitivity == 100.0
    theta = rng.normal(size=X.shape[1])
    rows = np.arange(X.shape[0])
    same = GlmOracle(X, y, loss="logistic", lam=0.1)
    assert np.array_equal(problem.gradient(theta), same.gradient(theta))
    assert np.array_equal(batch.clipped_gradient_sum(rows, theta, 0.5),
                          GlmOracle(X, y, loss="hinge").clipped_gradient_sum(rows, theta, 0.5))
