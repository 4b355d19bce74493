"""Adaptation rules (fastdp.solvers.line_search.adapt): CHEB decisions, θ̄ EMA, η0 update.

Spec 003 §7 items 14–16, with hand-computed expectations.
"""

import math

import numpy as np
import pytest

from fastdp.exceptions import ValidationError
from fastdp.solvers.line_search.adapt import (
    INCREASE_EPS,
    INCREASE_RHO,
    NO_INCREASE,
    AngleTracker,
    StepSizeAdapter,
    angle_degrees,
    cheb_decision,
)


def _rotated(deg):
    r = math.radians(deg)
    return np.array([math.cos(r), math.sin(r), 0.0])


def test_angle_degrees():
    e1 = np.array([1.0, 0.0, 0.0])
    assert angle_degrees(e1, _rotated(60)) == pytest.approx(60.0, abs=1e-12)
    assert angle_degrees(e1, -e1) == pytest.approx(180.0)
    assert angle_degrees(e1, 3 * e1) == 0.0
    assert angle_degrees(e1, np.zeros(3)) == 90.0           # zero-norm guard


def test_cheb_decisions_on_crafted_gradients():
    g = np.array([1.0, 2.0, -0.5])
    assert cheb_decision(g, -g, 90.0)[0] == INCREASE_RHO               # opposite: g·g2 < 0
    e1 = np.array([1.0, 0.0, 0.0])
    assert cheb_decision(e1, _rotated(5), 90.0)[0] == INCREASE_EPS     # 5° < 45° = 0.5·90°
    assert cheb_decision(e1, _rotated(60), 90.0)[0] == NO_INCREASE     # 45° ≤ 60° ≤ 99°
    assert cheb_decision(e1, _rotated(80), 60.0)[0] == INCREASE_RHO    # 80° > 66° = 1.1·60°
    # ablations of Fig. 1e
    assert cheb_decision(e1, _rotated(5), 90.0, rule="must")[0] == INCREASE_RHO
    assert cheb_decision(e1, -e1, 90.0, rule="no")[0] == NO_INCREASE
    decision, angle = cheb_decision(e1, _rotated(30), 90.0)
    assert angle == pytest.approx(30.0)
    with pytest.raises(ValidationError):
        cheb_decision(e1, e1, 90.0, rule="sometimes")


def test_theta_bar_ema_trace():
    """θ̄ starts at 90°, is not updated by the first accepted gradient, then
    θ̄ ← 0.8 θ̄ + 0.2 θ_t (3-step hand computation)."""
    tr = AngleTracker(psi=0.8)
    tr.accept(_rotated(0))
    assert tr.theta_bar == 90.0
    tr.accept(_rotated(30))         # θ = 30: 0.8·90 + 0.2·30 = 78
    assert tr.theta_bar == pytest.approx(78.0)
    tr.accept(_rotated(90))         # θ = 60: 0.8·78 + 0.2·60 = 74.4
    assert tr.theta_bar == pytest.approx(74.4)
    tr.accept(_rotated(-90))        # θ = 180: 0.8·74.4 + 0.2·180 = 95.52
    assert tr.theta_bar == pytest.approx(95.52)
    with pytest.raises(ValidationError):
        AngleTracker(psi=1.0)


def test_eta0_update_rule():
    s = StepSizeAdapter(1.0, tau=3, varsigma=1.2)
    for eta in (0.5, 0.64, 0.4):
        s.record(eta)
    assert s.end_iteration() == 1.0 and s.end_iteration() == 1.0
    assert s.end_iteration() == pytest.approx(0.768)           # min(1.2·0.64, 1)
    assert s.selected == []                                    # Ω emptied
    for _ in range(3):                                         # empty Ω: unchanged
        s.end_iteration()
    assert s.eta0 == pytest.approx(0.768)
    s.record(0.75)
    for _ in range(3):
        s.end_iteration()
    assert s.eta0 == pytest.approx(0.768)                      # capped by the current η0
    s2 = StepSizeAdapter(1.0, tau=1, cap="initial")
    s2.record(0.5)
    s2.end_iteration()
    s2.record(0.75)
    assert s2.end_iteration() == pytest.approx(0.9)            # cap: initial η0 = 1
    s3 = StepSizeAdapter(10.0, tau=2)
    s3.record(8.0)
    s3.end_iteration()
    assert s3.end_iteration() == pytest.approx(9.6)            # spec §7.7: 10 → 1.2·8
    with pytest.raises(ValidationError):
        StepSizeAdapter(1.0, cap="max")
    with pytest.raises(ValidationError):
        StepSizeAdapter(1.0, tau=0)
