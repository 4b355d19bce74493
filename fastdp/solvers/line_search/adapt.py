"""Adaptation rules of DP-BLSGD (spec 003 §3.3–3.5, §3.9): no privacy cost.

Everything here is computed from already released quantities (noisy
gradients, accepted step sizes), so it is post-processing and spends no
privacy budget.

* :func:`angle_degrees` — ANGLEBETWEEN in degrees (90° for a zero vector).
* :class:`AngleTracker` — θ̄, the exponential moving average of the angles
  between consecutive accepted gradients (eq. 7): starts at 90°, not updated
  at t = 0, ``θ̄ ← ψ·θ̄ + (1 − ψ)·θ_t``.
* :func:`cheb_decision` — the budget decision of CHEB (Algorithm 3, eq. 8)
  from the two noisy gradients at the same point, and the "no"/"must"
  ablations of Fig. 1e.
* :class:`StepSizeAdapter` — the "intelligent backtracking" η0 update:
  every τ iterations ``η0 ← min(ς·max Ω, cap)`` with Ω the steps accepted
  since the last update (cap = current η0, or the initial η0 with
  ``eta0_cap="initial"``); Ω is then emptied, and an empty Ω leaves η0 as is.
"""

import math

import numpy as np

from fastdp.exceptions import ValidationError

__all__ = [
    "BUDGET_RULES",
    "INCREASE_RHO",
    "INCREASE_EPS",
    "NO_INCREASE",
    "angle_degrees",
    "AngleTracker",
    "cheb_decision",
    "StepSizeAdapter",
]

BUDGET_RULES = ("adap", "no", "must")
INCREASE_RHO = "rho_grad"
INCREASE_EPS = "line_search"
NO_INCREASE = "none"


def angle_degrees(u, v):
    """Angle between ``u`` and ``v`` in degrees, in [0, 180]; 90 if either is zero."""
    nu = float(np.linalg.norm(u))
    nv = float(np.linalg.norm(v))
    if nu == 0.0 or nv == 0.0 or not (math.isfinite(nu) and math.isfinite(nv)):
        return 90.0
    cos = float(np.dot(u, v)) / (nu * nv)
    return math.degrees(math.acos(min(1.0, max(-1.0, cos))))


class AngleTracker:
    """θ̄: EMA of the angles between consecutive accepted noisy gradients (eq. 7).

    Parameters
    ----------
    psi : float
        Smoothing ψ in [0, 1) (paper 0.8).
    initial : float
        Initial θ̄ in degrees (paper 90).
    """

    def __init__(self, psi=0.8, initial=90.0):
        if not (0.0 <= psi < 1.0):
            raise ValidationError(f"psi must lie in [0, 1); got {psi!r}.")
        self.psi = float(psi)
        self.theta_bar = float(initial)
        self._previous = None
        self.last_angle = None

    def accept(self, g):
        """Record the gradient of an accepted step; updates θ̄ from the second on."""
        g = np.array(g, dtype=np.float64, copy=True)
        if self._previous is not None:
            self.last_angle = angle_degrees(g, self._previous)
            self.theta_bar = self.psi * self.theta_bar + (1.0 - self.psi) * self.last_angle
        self._previous = g


def cheb_decision(g1, g2, theta_bar, *, phi_max=1.1, phi_min=0.5, rule="adap"):
    """Which budget CHEB increases (Algorithm 3, lines 5–10).

    ``rule="adap"`` (paper): if ``g1·g2 < 0`` or the angle exceeds
    ``phi_max·θ̄`` the gradient is too noisy (:data:`INCREASE_RHO`); else if
    the angle is below ``phi_min·θ̄`` the line search is too noisy
    (:data:`INCREASE_EPS`); else :data:`NO_INCREASE`. ``"must"``: always
    :data:`INCREASE_RHO`; ``"no"``: always :data:`NO_INCREASE` (spec 003 §3.9).

    Returns
    -------
    (decision, angle) : (str, float)
    """
    if rule not in BUDGET_RULES:
        raise ValidationError(f"budget_rule must be one of {BUDGET_RULES}; got {rule!r}.")
    angle = angle_degrees(g1, g2)
    if rule == "no":
        return NO_INCREASE, angle
    if rule == "must":
        return INCREASE_RHO, angle
    if float(np.dot(g1, g2)) < 0.0 or angle > phi_max * theta_bar:
        return INCREASE_RHO, angle
    if angle < phi_min * theta_bar:
        return INCREASE_EPS, angle
    return NO_INCREASE, angle


class StepSizeAdapter:
    """η0 adaptation between iterations (spec 003 §3.4).

    Parameters
    ----------
    eta0 : float
        Initial η0.
    tau : int
        Update period τ in iterations (paper 10).
    varsigma : float
        Factor ς (paper 1.2).
    cap : {"current", "initial"}
        Upper bound of the update: the current η0 (literal reading; η0 never
        grows) or the initial η0.
    """

    def __init__(self, eta0, tau=10, varsigma=1.2, cap="current"):
        if cap not in ("current", "initial"):
            raise ValidationError(f"eta0_cap must be 'current' or 'initial'; got {cap!r}.")
        if int(tau) != tau or tau < 1:
            raise ValidationError(f"tau must be an integer >= 1; got {tau!r}.")
        self.eta0 = float(eta0)
        self.initial = float(eta0)
        self.tau = int(tau)
        self.varsigma = float(varsigma)
        self.cap = cap
        self.selected = []
        self.iterations = 0

    def record(self, eta):
        """Add a step accepted by the private search to Ω."""
        self.selected.append(float(eta))

    def end_iteration(self):
        """Count one iteration; every τ-th applies the update and empties Ω."""
        self.iterations += 1
        if self.iterations % self.tau == 0:
            if self.selected:
                bound = self.eta0 if self.cap == "current" else self.initial
                self.eta0 = min(self.varsigma * max(self.selected), bound)
            self.selected = []
        return self.eta0
