"""Regularizers ``h`` and the composite dual-averaging prox step (spec 004 §2.1).

``prox(z, alpha, gamma) = argmin_x <z, x> + alpha * h(x) + gamma * ||x||^2 / 2``
(prox function ``d(x) = ||x||^2 / 2``, centred at 0). Closed forms:

==================================  ========================================
h                                   prox(z, alpha, gamma)
==================================  ========================================
(mu/2) ||x||^2                      -z / (alpha mu + gamma)
phi ||x||_1 (+ (mu/2)||x||^2)       -S(z, alpha phi) / (alpha mu + gamma)
indicator of the box [lo, hi]       clip(-z / gamma, lo, hi)
indicator of the ℓ2 ball radius R   Pi_R(-z / gamma)
==================================  ========================================

(S is soft-thresholding.) The problem must be strongly convex:
``alpha * mu + gamma > 0``.

Lazy averaging
--------------
The output of dual averaging is the weighted average ``sum_t a_t x^(t) / A_t``.
While an agent is inactive its ``z`` is constant, so in the theory-consistent
mode ``x^(tau) = prox(z, iota A_tau, gamma_tau)`` follows a known path. Each
regularizer sums ``sum_{tau=t1..t2} a_tau prox(z, iota A_tau, gamma_tau)`` in
O(m log T) from prefix sums (:meth:`Regularizer.weighted_prox_sum`), instead
of O(m (t2 - t1)); the loop (:meth:`Regularizer.naive_weighted_prox_sum`) is
kept as the reference.

Privacy: pure functions of public constants and of ``z`` (itself a
post-processing of released messages); nothing here reads private data.
"""

import functools
import math

import numpy as np

from fastdp._validation import check_real
from fastdp.exceptions import ValidationError

__all__ = [
    "Regularizer",
    "L2Penalty",
    "L1Penalty",
    "ElasticNetPenalty",
    "BoxConstraint",
    "L2BallConstraint",
    "soft_threshold",
]


def soft_threshold(z, tau):
    """``S(z, tau)_k = sign(z_k) max(|z_k| - tau, 0)``."""
    return np.sign(z) * np.maximum(np.abs(z) - tau, 0.0)


#: A penalty strength: a finite real >= 0.
_nonneg = functools.partial(check_real, low=0.0, allow_inf=False)


class Regularizer:
    """Base class: a convex ``h`` with modulus ``mu`` and its prox step.

    Subclasses implement :meth:`value`, :meth:`prox` and may override
    :meth:`lazy_tables` / :meth:`weighted_prox_sum` with closed forms.
    """

    mu = 0.0
    #: whether ``alpha * h == h`` (indicator functions): iota is irrelevant
    is_indicator = False

    def value(self, x):
        """``h(x)`` (``inf`` outside the domain)."""
        raise NotImplementedError

    def prox(self, z, alpha, gamma):
        """``argmin_x <z, x> + alpha h(x) + gamma ||x||^2 / 2`` (rows of ``z`` independently)."""
        raise NotImplementedError

    def check_schedule(self, alpha_gamma_pairs):
        """Raise unless every ``(alpha, gamma)`` gives a strongly convex prox problem."""
        for alpha, gamma in alpha_gamma_pairs:
            if not (alpha * self.mu + gamma > 0):
                raise ValidationError(
                    f"{type(self).__name__} with mu = {self.mu} needs gamma_t > 0 in every "
                    "round (alpha * mu + gamma must be > 0): use a schedule with gamma > 0 "
                    "or a strongly convex regularizer.")

    # -- lazy averaging -------------------------------------------------------
    def lazy_tables(self, a, A, gamma, iota):
        """Precomputed tables for :meth:`weighted_prox_sum` (default: the schedule)."""
        return {"a": a, "A": A, "gamma": gamma, "iota": float(iota)}

    def naive_weighted_prox_sum(self, z, tables, t1, t2):
        """Reference loop: ``sum_{tau=t1..t2} a_tau prox(z, iota A_tau, gamma_tau)``."""
        out = np.zeros_like(z, dtype=np.float64)
        a, A, g, iota = tables["a"], tables["A"], tables["gamma"], tables["iota"]
        for tau in range(int(t1), int(t2) + 1):
            out += a[tau] * self.prox(z, iota * A[tau], g[tau])
        return out

    def weighted_prox_sum(self, z, tables, t1, t2):
        """``sum_{tau=t1..t2} a_tau prox(z, iota A_tau, gamma_tau)`` for a fixed ``z``."""
        return self.naive_weighted_prox_sum(z, tables, t1, t2)


class ElasticNetPenalty(Regularizer):
    """``h(x) = phi ||x||_1 + (mu/2) ||x||^2`` (``phi, mu >= 0``).

    Parameters
    ----------
    l1 : float
        phi.
    l2 : float
        mu (the strong-convexity modulus).
    """

    def __init__(self, l1=0.0, l2=0.0):
        self.phi = _nonneg("l1", l1)
        self.mu = _nonneg("l2", l2)

    def __repr__(self):
        return f"{type(self).__name__}(l1={self.phi!r}, l2={self.mu!r})"

    def value(self, x):
        x = np.asarray(x, dtype=np.float64)
        return float(self.phi * np.abs(x).sum() + 0.5 * self.mu * (x @ x))

    def prox(self, z, alpha, gamma):
        den = alpha * self.mu + gamma
        if not den > 0:
            raise ValidationError("prox step is not strongly convex: alpha * mu + gamma must be > 0.")
        if self.phi == 0.0:
            return -z / den
        return -soft_threshold(z, alpha * self.phi) / den

    def lazy_tables(self, a, A, gamma, iota):
        t = super().lazy_tables(a, A, gamma, iota)
        den = iota * self.mu * A + gamma
        ratio = np.zeros_like(a)
        ratio[1:] = a[1:] / den[1:]
        thr = iota * self.phi * A
        t["thr"] = thr[1:]                       # thresholds for tau = 1, 2, ...
        t["c1"] = np.cumsum(ratio)                # sum a/den
        t["c2"] = np.cumsum(ratio * thr)          # sum a thr/den
        return t

    def weighted_prox_sum(self, z, tables, t1, t2):
        t1, t2 = int(t1), int(t2)
        if t2 < t1:
            return np.zeros_like(z, dtype=np.float64)
        c1, c2 = tables["c1"], tables["c2"]
        if self.phi == 0.0:                      # same bits as the general formula
            return -z * (c1[t2] - c1[t1 - 1])
        absz = np.abs(z)
        thr = tables["thr"]                     # thr[tau - 1] for tau = 1, 2, ...
        if t2 - t1 < 12:                        # short stretch: count instead of bisecting
            end = np.full(absz.shape, t1 - 1, dtype=np.intp)
            for tau in range(t1, t2 + 1):
                end += thr[tau - 1] < absz
        else:
            end = np.clip(np.searchsorted(thr[t1 - 1:t2], absz, side="left") + (t1 - 1),
                          t1 - 1, t2)
        return -np.sign(z) * (absz * (c1[end] - c1[t1 - 1]) - (c2[end] - c2[t1 - 1]))


class L2Penalty(ElasticNetPenalty):
    """``h(x) = (mu/2) ||x||^2`` (strongly convex with modulus mu)."""

    def __init__(self, mu):
        super().__init__(0.0, mu)

    def __repr__(self):
        return f"L2Penalty(mu={self.mu!r})"


class L1Penalty(ElasticNetPenalty):
    """``h(x) = phi ||x||_1`` (convex; needs gamma_t > 0)."""

    def __init__(self, phi):
        super().__init__(phi, 0.0)

    def __repr__(self):
        return f"L1Penalty(phi={self.phi!r})"


class _ConstraintBase(Regularizer):
    is_indicator = True

    def _prefix_tables(self, a, A, gamma, iota):
        t = Regularizer.lazy_tables(self, a, A, gamma, iota)
        r = np.zeros_like(a)
        r[1:] = 1.0 / gamma[1:]
        t["neg_r"] = -r[1:]                      # non-decreasing in tau = 1, 2, ...
        t["c3"] = np.cumsum(a * r)               # sum a / gamma
        return t

    def check_schedule(self, alpha_gamma_pairs):
        for _, gamma in alpha_gamma_pairs:
            if not gamma > 0:
                raise ValidationError(
                    f"{type(self).__name__} is an indicator (mu = 0): the schedule needs "
                    "gamma_t > 0 in every round.")


class BoxConstraint(_ConstraintBase):
    """Indicator of the box ``[lower, upper]`` (scalars or per-coordinate arrays)."""

    def __init__(self, lower, upper):
        lo = np.asarray(lower, dtype=np.float64)
        hi = np.asarray(upper, dtype=np.float64)
        if np.any(np.isnan(lo)) or np.any(np.isnan(hi)) or np.any(lo > hi):
            raise ValidationError("the box needs lower <= upper (no NaN).")
        self.lower, self.upper = lo, hi

    def __repr__(self):
        return f"BoxConstraint(lower={self.lower!r}, upper={self.upper!r})"

    def value(self, x):
        x = np.asarray(x, dtype=np.float64)
        inside = np.all((x >= self.lower - 1e-12) & (x <= self.upper + 1e-12))
        return 0.0 if inside else math.inf

    def prox(self, z, alpha, gamma):
        if not gamma > 0:
            raise ValidationError("the box prox needs gamma > 0.")
        return np.clip(-z / gamma, self.lower, self.upper)

    def lazy_tables(self, a, A, gamma, iota):
        return self._prefix_tables(a, A, gamma, iota)

    def weighted_prox_sum(self, z, tables, t1, t2):
        t1, t2 = int(t1), int(t2)
        if t2 < t1:
            return np.zeros_like(z, dtype=np.float64)
        A, c3, neg_r = tables["A"], tables["c3"], tables["neg_r"]
        v = -np.asarray(z, dtype=np.float64)
        lo = np.broadcast_to(self.lower, v.shape)
        hi = np.broadcast_to(self.upper, v.shape)
        pos, neg = v > 0, v < 0
        safe = np.where(v == 0, 1.0, v)
        # f(tau) = v / gamma_tau is monotone; the first bound met ("head") holds on a
        # prefix of rounds, the other ("tail") on a suffix, v / gamma in between.
        head_bound = np.where(pos, hi, lo)
        tail_bound = np.where(pos, lo, hi)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            head_end = np.searchsorted(neg_r, -(head_bound / safe), side="left")
            tail_start = np.searchsorted(neg_r, -(tail_bound / safe), side="right") + 1

        def span(lo_t, hi_t):
            s = np.clip(lo_t, t1, t2 + 1)
            e = np.clip(hi_t, t1 - 1, t2)
            return s, np.maximum(e, s - 1)

        hs, he = span(np.full(v.shape, t1), head_end)
        ts, te = span(tail_start, np.full(v.shape, t2))
        ms, me = span(he + 1, ts - 1)
        with np.errstate(invalid="ignore"):          # inf bound x empty span is masked
            out = (np.where(he >= hs, head_bound * (A[he] - A[hs - 1]), 0.0)
                   + np.where(te >= ts, tail_bound * (A[te] - A[ts - 1]), 0.0)
                   + v * (c3[me] - c3[ms - 1]))
        still = ~(pos | neg)
        if np.any(still):
            out = np.where(still, np.clip(0.0, lo, hi) * (A[t2] - A[t1 - 1]), out)
        return out


class L2BallConstraint(_ConstraintBase):
    """Indicator of the ℓ2 ball of radius ``radius`` centred at 0."""

    def __init__(self, radius):
        self.radius = float(radius)
        if not (math.isfinite(self.radius) and self.radius > 0):
            raise ValidationError(f"radius must be a finite number > 0; got {radius!r}.")

    def __repr__(self):
        return f"L2BallConstraint(radius={self.radius!r})"

    def value(self, x):
        return 0.0 if np.linalg.norm(x) <= self.radius * (1 + 1e-12) else math.inf

    def prox(self, z, alpha, gamma):
        if not gamma > 0:
            raise ValidationError("the ball prox needs gamma > 0.")
        v = -z / gamma
        norm = np.sqrt(np.sum(v * v, axis=-1, keepdims=True))
        scale = np.minimum(1.0, self.radius / np.where(norm > 0, norm, 1.0))
        return v * scale

    def lazy_tables(self, a, A, gamma, iota):
        return self._prefix_tables(a, A, gamma, iota)

    def weighted_prox_sum(self, z, tables, t1, t2):
        t1, t2 = int(t1), int(t2)
        z = np.asarray(z, dtype=np.float64)
        if t2 < t1 or z.ndim != 1:
            return super().weighted_prox_sum(z, tables, t1, t2)
        norm = math.sqrt(float(np.sum(z * z)))
        if norm == 0:
            return np.zeros_like(z)
        A, c3, neg_r = tables["A"], tables["c3"], tables["neg_r"]
        c = self.radius / norm                       # a_tau * min(1/gamma_tau, c)
        head_end = int(np.searchsorted(neg_r, -c, side="left"))   # 1/gamma > c for tau <= head_end
        he = min(max(head_end, t1 - 1), t2)
        total = c * (A[he] - A[t1 - 1]) + (c3[t2] - c3[he])
        return -z * total
