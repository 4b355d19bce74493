"""Prox closed forms against a numerical minimiser; lazy averaging against the loop (spec 004 A1, A10)."""
import numpy as np
import pytest
from scipy import optimize

from fastdp.distributed.regularizers import (
    BoxConstraint,
    ElasticNetPenalty,
    L1Penalty,
    L2BallConstraint,
    L2Penalty,
    soft_threshold,
)
from fastdp.distributed.schedules import (
    DualAveragingSchedule,
    convex_schedule,
    strongly_convex_schedule,
)
from fastdp.exceptions import ValidationError


def _numeric_prox(reg, z, alpha, gamma, bounds=None):
    """Generic minimiser of <z,x> + alpha h(x) + gamma ||x||^2/2 (smooth splitting for l1)."""
    m = len(z)
    if isinstance(reg, (BoxConstraint, L2BallConstraint)):
        cons = () if isinstance(reg, BoxConstraint) else (
            {"type": "ineq", "fun": lambda x: reg.radius ** 2 - x @ x},)
        res = optimize.minimize(lambda x: z @ x + 0.5 * gamma * x @ x, np.zeros(m),
                                jac=lambda x: z + gamma * x, bounds=bounds, constraints=cons,
                                method="SLSQP", options={"ftol": 1e-15, "maxiter": 500})
        return res.x
    # x = u - v with u, v >= 0 makes phi ||x||_1 linear
    phi, mu = reg.phi, reg.mu

    def f(w):
        x = w[:m] - w[m:]
        return z @ x + alpha * (phi * w.sum() + 0.5 * mu * x @ x) + 0.5 * gamma * x @ x

    def g(w):
        x = w[:m] - w[m:]
        gx = z + (alpha * mu + gamma) * x
        return np.r_[gx + alpha * phi, -gx + alpha * phi]

    res = optimize.minimize(f, np.zeros(2 * m), jac=g, bounds=[(0, None)] * (2 * m),
                            method="L-BFGS-B", options={"ftol": 1e-16, "gtol": 1e-13, "maxiter": 5000})
    return res.x[:m] - res.x[m:]


@pytest.mark.parametrize("reg", [L2Penalty(0.3), L1Penalty(0.2), ElasticNetPenalty(0.1, 0.5)],
                         ids=repr)
def test_penalty_prox_matches_numeric(reg):
    rng = np.random.default_rng(0)
    for _ in range(5):
        z = rng.normal(size=6) * 2
        alpha, gamma = rng.uniform(0.1, 3), rng.uniform(0.1, 2)
        assert np.allclose(reg.prox(z, alpha, gamma), _numeric_prox(reg, z, alpha, gamma),
                           atol=1e-8)
    assert np.array_equal(reg.prox(np.zeros(4), 1.0, 1.0), np.zeros(4))


def test_constraint_prox_matches_numeric():
    rng = np.random.default_rng(1)
    box = BoxConstraint(-0.3, 0.5)
    ball = L2BallConstraint(0.7)
    for _ in range(5):
        z = rng.normal(size=5)
        gamma = rng.uniform(0.5, 2)
        assert np.allclose(box.prox(z, 7.0, gamma),
                           _numeric_prox(box, z, 0, gamma, bounds=[(-0.3, 0.5)] * 5), atol=1e-8)
        assert np.allclose(ball.prox(z, 7.0, gamma), _numeric_prox(ball, z, 0, gamma), atol=1e-7)
    assert np.array_equal(ball.prox(np.zeros(3), 1.0, 1.0), np.zeros(3))


def test_closed_forms_and_values():
    z = np.array([3.0, -0.5, 1.0])
    assert np.array_equal(soft_threshold(z, 1.0), [2.0, 0.0, 0.0])
    assert np.allclose(L2Penalty(2.0).prox(z, 0.5, 1.0), -z / 2.0)
    assert L2Penalty(2.0).value(z) == pytest.approx(0.5 * 2.0 * z @ z)
    assert L1Penalty(0.5).value(z) == pytest.approx(0.5 * 4.5)
    assert BoxConstraint(-1, 1).value([0.5, 2.0]) == np.inf
    assert L2BallConstraint(1.0).value([0.6, 0.8]) == 0.0
    with pytest.raises(ValidationError):
        L1Penalty(0.1).prox(z, 1.0, 0.0)
    with pytest.raises(ValidationError):
        BoxConstraint(1, 0)


SCHEDULES = [strongly_convex_schedule(0.0), strongly_convex_schedule(20.0), convex_schedule(0.01),
             DualAveragingSchedule("linear", 0.3, "sqrt")]
REGS = [L2Penalty(5e-4), L1Penalty(5e-4), ElasticNetPenalty(1e-3, 1e-2), BoxConstraint(-0.3, 0.5),
        BoxConstraint(0.2, 0.5), BoxConstraint(-np.inf, 0.1), L2BallConstraint(0.7)]


@pytest.mark.parametrize("schedule", SCHEDULES, ids=repr)
@pytest.mark.parametrize("reg", REGS, ids=repr)
def test_lazy_sum_equals_loop(schedule, reg):
    a, A, g = schedule.arrays(400)
    if g[1] == 0 and reg.mu == 0:
        with pytest.raises(ValidationError):
            reg.check_schedule([(0.1 * A[1], g[1])])
        return
    tables = reg.lazy_tables(a, A, g, 0.1)
    rng = np.random.default_rng(2)
    for t1, t2 in [(1, 400), (5, 17), (3, 9), (100, 100), (250, 401), (7, 6)]:
        for scale in (0.01, 1.0, 300.0):
            z = rng.normal(size=40) * scale
            z[:3] = 0.0
            fast = reg.weighted_prox_sum(z, tables, t1, t2)
            slow = reg.naive_weighted_prox_sum(z, tables, t1, t2)
            assert np.all(np.isfinite(fast))
            assert np.allclose(fast, slow, rtol=1e-10, atol=1e-10 * max(1.0, np.abs(slow).max()))


def test_schedule_arrays():
    a, A, g = strongly_convex_schedule(20.0).arrays(5)
    assert list(a) == [0, 1, 2, 3, 4, 5, 6] and list(A) == [0, 1, 3, 6, 10, 15, 21]
    assert list(g) == [0] + [20.0] * 6
    a, A, g = convex_schedule(0.01).arrays(3)
    assert list(a) == [0, 1, 1, 1, 1] and list(A) == [0, 1, 2, 3, 4]
    assert np.allclose(g, 0.01 * np.sqrt(np.arange(5)))
    with pytest.raises(ValidationError):
        convex_schedule(0.0)
    with pytest.raises(ValidationError):
        DualAveragingSchedule("quadratic")
