"""Dual-averaging schedules ``a_t`` (weights) and ``gamma_t`` (prox weights), spec 004 §2.4.

=====================  ==========  ==================  =====================================
schedule               a_t         gamma_t             use
=====================  ==========  ==================  =====================================
strongly convex        t           gamma (constant)    Cor. 3.2 / 3.5 (gamma = 0); the ℓ2
                                                       experiment (gamma = 20)
convex                 1           gamma * sqrt(t)     Cor. 3.4 / 3.6; the ℓ1 experiment
                                                       (gamma = 0.01)
=====================  ==========  ==================  =====================================

``A_t = sum_{s <= t} a_s`` (``A_0 = 0``). The prox step of round t uses
``alpha = iota * A_t`` and ``gamma_t``.

Privacy: schedules are public constants.
"""

import math

import numpy as np

from fastdp.exceptions import ValidationError

__all__ = ["DualAveragingSchedule", "strongly_convex_schedule", "convex_schedule"]

_WEIGHTS = ("linear", "constant")
_GROWTH = ("constant", "sqrt")


class DualAveragingSchedule:
    """Weights ``a_t`` and prox weights ``gamma_t`` of dual averaging.

    Parameters
    ----------
    weights : {"linear", "constant"}
        ``a_t = t`` or ``a_t = 1``.
    gamma : float, default=0.0
        Scale of ``gamma_t`` (>= 0).
    gamma_growth : {"constant", "sqrt"}
        ``gamma_t = gamma`` or ``gamma_t = gamma * sqrt(t)``.
    """

    def __init__(self, weights="linear", gamma=0.0, gamma_growth="constant"):
        if weights not in _WEIGHTS:
            raise ValidationError(f"weights must be one of {_WEIGHTS}; got {weights!r}.")
        if gamma_growth not in _GROWTH:
            raise ValidationError(f"gamma_growth must be one of {_GROWTH}; got {gamma_growth!r}.")
        gamma = float(gamma)
        if not (math.isfinite(gamma) and gamma >= 0):
            raise ValidationError(f"gamma must be a finite number >= 0; got {gamma!r}.")
        self.weights = weights
        self.gamma = gamma
        self.gamma_growth = gamma_growth

    def __repr__(self):
        return (f"DualAveragingSchedule(weights={self.weights!r}, gamma={self.gamma!r}, "
                f"gamma_growth={self.gamma_growth!r})")

    def __eq__(self, other):
        return isinstance(other, DualAveragingSchedule) and repr(self) == repr(other)

    def __hash__(self):
        return hash(repr(self))

    def arrays(self, n_rounds):
        """``(a, A, gamma)`` as float64 arrays indexed by ``t = 0 .. n_rounds + 1``.

        Entry 0 is 0 for all three (``A_0 = a_0 = gamma_0 = 0``).
        """
        t = np.arange(int(n_rounds) + 2, dtype=np.float64)
        a = t.copy() if self.weights == "linear" else np.ones_like(t)
        a[0] = 0.0
        A = np.cumsum(a)
        if self.weights == "linear":
            A = t * (t + 1.0) / 2.0          # exact for t below 2**26
        g = np.full_like(t, self.gamma) if self.gamma_growth == "constant" else self.gamma * np.sqrt(t)
        g[0] = 0.0
        return a, A, g


def strongly_convex_schedule(gamma=0.0):
    """``a_t = t``, ``gamma_t = gamma`` (Cor. 3.2/3.5 with gamma = 0; the ℓ2 experiment uses 20)."""
    return DualAveragingSchedule("linear", gamma, "constant")


def convex_schedule(gamma):
    """``a_t = 1``, ``gamma_t = gamma * sqrt(t)`` (Cor. 3.4/3.6; the ℓ1 experiment uses 0.01)."""
    if float(gamma) <= 0:
        raise ValidationError("the convex schedule needs gamma > 0 (gamma_t = gamma * sqrt(t)).")
    return DualAveragingSchedule("constant", gamma, "sqrt")
