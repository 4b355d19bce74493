"""The compiled losses (fastdp/_kernels/_losses.pxd) against fastdp.losses, and the one
table of loss codes.

References: :mod:`fastdp.losses` (numpy formulas written independently of the
Cython ones, via scipy's ``expit``/``logaddexp``), and for the dual step its
definition as the minimiser of the subproblem (``scipy.optimize.minimize_scalar``).
"""
import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from fastdp._kernels import _glm, _line_search, _losses
from fastdp._kernels._losses import LossCode
from fastdp.exceptions import ValidationError
from fastdp.losses import HingeLoss, LogisticLoss, SquaredLoss, get_loss

LOSSES = [SquaredLoss(), LogisticLoss(), HingeLoss()]


def _points(rng, loss, n=2000):
    z = np.concatenate([rng.normal(0, 3, n), [0.0, 1.0, -1.0, 40.0, -40.0, 700.0, -700.0]])
    if loss.task == "binary":
        y = np.where(rng.random(z.size) < 0.5, -1.0, 1.0)
    else:
        y = rng.normal(0, 2, z.size)
    return z, y


def test_one_code_per_loss_everywhere():
    """The enum is the single table: losses.py, the GLM kernels' names and the numba
    kernel's constants all read it."""
    assert [(c.name, int(c)) for c in LossCode] == [("SQUARED", 0), ("LOGISTIC", 1), ("HINGE", 2)]
    assert {get_loss(name).code for name in ("squared", "ridge")} == {LossCode.SQUARED}
    assert {get_loss(name).code for name in ("logistic", "log")} == {LossCode.LOGISTIC}
    assert get_loss("hinge").code is LossCode.HINGE
    assert (_glm.LOSS_SQUARED, _glm.LOSS_LOGISTIC, _glm.LOSS_HINGE) == tuple(LossCode)
    assert (_line_search.LOSS_SQUARED, _line_search.LOSS_LOGISTIC,
            _line_search.LOSS_HINGE) == tuple(LossCode)
    assert _line_search.LOSS_CODES == {loss.name: int(loss.code) for loss in LOSSES}


@pytest.mark.parametrize("loss", LOSSES, ids=lambda l: l.name)
def test_compiled_value_and_derivative_match_losses_module(rng, loss):
    z, y = _points(rng, loss)
    np.testing.assert_allclose(_losses.values(loss.code, z, y), loss.value(z, y),
                               rtol=1e-14, atol=1e-300)
    np.testing.assert_allclose(_losses.derivatives(loss.code, z, y), loss.derivative(z, y),
                               rtol=1e-14, atol=1e-300)


@pytest.mark.parametrize("loss", LOSSES, ids=lambda l: l.name)
def test_numba_line_search_value_matches_losses_module(rng, loss):
    """The line-search kernel (numba cannot cimport the .pxd) has the same values."""
    z, y = _points(rng, loss, 300)
    got = np.array([_line_search.clipped_loss(int(loss.code), zi, yi, np.inf)
                    for zi, yi in zip(z, y)])
    np.testing.assert_allclose(got, loss.value(z, y), rtol=1e-14, atol=1e-300)
    np.testing.assert_allclose(got, _losses.values(loss.code, z, y), rtol=1e-15, atol=0)


@pytest.mark.parametrize("loss", LOSSES, ids=lambda l: l.name)
def test_compiled_dual_step_matches_losses_module_and_minimises(rng, loss):
    n, box_eps = 400, 1e-3
    y = _points(rng, loss, n)[1][:n]
    alpha = y * rng.uniform(-0.2, 1.2, n) if loss.task == "binary" else rng.normal(size=n)
    margins, s = rng.normal(size=n), rng.uniform(0.0, 3.0, n)
    got = _losses.dual_steps(loss.code, alpha, y, margins, s, box_eps)
    np.testing.assert_allclose(got, loss.dual_coordinate_step(alpha, y, margins, s, box_eps),
                               rtol=1e-12, atol=1e-14)
    if loss.name == "logistic":
        return  # one Newton step, not the exact minimiser
    for j in range(20):  # exact minimiser of the subproblem in the box
        a = loss.project_dual(alpha[j], y[j], box_eps)
        lo, hi = ((-np.inf, np.inf) if loss.task == "regression"
                  else sorted([y[j] * box_eps - a, y[j] * (1 - box_eps) - a]))
        f = lambda zeta: float(loss.subproblem_value(zeta, a, y[j], margins[j], s[j]))  # noqa: E731
        bounds = (lo, hi) if np.isfinite(lo) else (-50.0, 50.0)
        best = minimize_scalar(f, bounds=bounds, method="bounded", options={"xatol": 1e-10})
        assert f(got[j]) <= best.fun + 1e-8


def test_compiled_pieces_refuse_unknown_codes_and_lengths():
    with pytest.raises(ValidationError, match="loss code"):
        _losses.values(7, np.zeros(2), np.zeros(2))
    with pytest.raises(ValidationError, match="same length"):
        _losses.derivatives(0, np.zeros(2), np.zeros(3))
