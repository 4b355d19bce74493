"""Utility bounds of private distributed dual averaging (spec 004 §4), corrected where the paper errs.

All bounds assume the paper's hypotheses: an L-Lipschitz loss (every
per-sample subgradient of norm ≤ L), ``h`` convex with modulus ``mu``, the
prox function ``d(x) = ||x||^2 / 2`` (so ``d(x*) = ||x*||^2 / 2``), a gossip
with mixing parameter ``beta < 1`` and a uniformly random fraction ``iota``
of active agents per round. They are expectations over the algorithm's
randomness (sampling, noise, gossip) for fixed data. The constant

    ``M = iota L^2 / 2 + 2 sqrt(iota) L^2 / (1 - beta)``

appears throughout.

Functions
---------
:func:`theorem2_bound`
    Right-hand side of Theorem 2, eq. (9): a bound on
    ``A_t E[F(y~^(t)) - F*]`` for the averaged virtual sequence y~
    (:mod:`fastdp.distributed.diagnostics`).
:func:`corollary32_bound`
    Eq. (10): ``(1/n) sum_i E||x~_i^(t) - x*||^2`` for σ = 0, a_t = t, γ_t = 0.
:func:`corollary34_bound`
    ``E[F(y~^(t)) - F*]`` for σ = 0, a_t = 1, γ_t = γ√t. fastdp returns the
    corrected ``gamma d(x*) / (iota sqrt t) + 2 M / (gamma sqrt t)`` (what (9)
    gives); ``paper_printed=True`` returns eq. (11) as printed, which drops
    the γ² on ``d(x*)`` (spec 004 §4.5, §8.14).
:func:`corollary34_consensus_bound`
    Eq. (12): ``(1/n) sum_i E||x~_i^(t) - y~^(t)||``.
:func:`consensus_bounds`
    Lemma 4.5: eqs. (31), (18) and (19).

Privacy: pure functions of public constants (and of ``d(x*)``, which reads
the data: a non-private diagnostic, as the paper's evaluation is).
"""

import math

import numpy as np

from fastdp.distributed.schedules import DualAveragingSchedule
from fastdp.exceptions import ValidationError

__all__ = [
    "gossip_constant",
    "theorem2_bound",
    "theorem2_suboptimality_bound",
    "corollary32_bound",
    "corollary34_bound",
    "corollary34_consensus_bound",
    "consensus_bounds",
]


def _check(iota, lipschitz, beta):
    iota, lipschitz, beta = float(iota), float(lipschitz), float(beta)
    if not 0 < iota <= 1:
        raise ValidationError(f"iota must lie in (0, 1]; got {iota}.")
    if not (math.isfinite(lipschitz) and lipschitz >= 0):
        raise ValidationError(f"lipschitz must be a finite number >= 0; got {lipschitz}.")
    if not 0 <= beta < 1:
        raise ValidationError(f"beta must lie in [0, 1) (a gossip that mixes); got {beta}.")
    return iota, lipschitz, beta


def _rounds(t):
    t = np.asarray(t)
    if t.size == 0 or np.any(t < 1) or not np.all(np.equal(np.mod(t, 1), 0)):
        raise ValidationError("rounds t must be integers >= 1.")
    return t.astype(np.int64)


def _scalar(out):
    return float(out) if np.ndim(out) == 0 else out


def gossip_constant(iota, lipschitz, beta):
    """``M = iota L^2 / 2 + 2 sqrt(iota) L^2 / (1 - beta)``."""
    iota, L, beta = _check(iota, lipschitz, beta)
    return iota * L ** 2 / 2 + 2 * math.sqrt(iota) * L ** 2 / (1 - beta)


def theorem2_bound(t, schedule, *, iota, mu, lipschitz, beta, sigma, dim, d_star):
    """Theorem 2, eq. (9): bound on ``A_t E[F(y~^(t)) - F*]``.

    ``(gamma_t / iota) d(x*) + sum_{tau <= t} a_tau^2 / (mu iota A_tau + gamma_tau)
    * (M + dim iota sigma^2 / 2 + 2 sqrt(dim iota) L sigma / (1 - beta))``.

    Parameters
    ----------
    t : int or array of int
        Rounds (>= 1).
    schedule : DualAveragingSchedule
    iota, mu, lipschitz, beta, sigma : float
        Fraction of active agents, modulus of h, Lipschitz constant, mixing
        parameter, noise standard deviation per coordinate.
    dim : int
    d_star : float
        ``d(x*) = ||x*||^2 / 2``.

    Returns
    -------
    float or ndarray
    """
    iota, L, beta = _check(iota, lipschitz, beta)
    if not isinstance(schedule, DualAveragingSchedule):
        raise ValidationError(f"schedule must be a DualAveragingSchedule; got {schedule!r}.")
    t = _rounds(t)
    a, A, g = schedule.arrays(int(t.max()))
    den = float(mu) * iota * A[1:] + g[1:]
    if np.any(den[: int(t.max())] <= 0):
        raise ValidationError("mu iota A_t + gamma_t must be > 0 in every round (use gamma > 0 "
                              "when mu = 0).")
    per_round = (gossip_constant(iota, L, beta) + dim * iota * sigma ** 2 / 2
                 + 2 * math.sqrt(dim * iota) * L * sigma / (1 - beta))
    csum = np.cumsum(a[1:] ** 2 / den)
    return _scalar(g[t] / iota * float(d_star) + csum[t - 1] * per_round)


def theorem2_suboptimality_bound(t, schedule, **kwargs):
    """``theorem2_bound / A_t``: the bound on ``E[F(y~^(t)) - F*]``."""
    t_arr = _rounds(t)
    _, A, _ = schedule.arrays(int(t_arr.max()))
    return _scalar(theorem2_bound(t_arr, schedule, **kwargs) / A[t_arr])


def corollary32_bound(t, *, iota, mu, lipschitz, beta):
    """Eq. (10): ``16/(t+1) (L^2 (log t + 1) / (mu^2 iota (1-beta)^2 t) + M / (mu^2 iota))``."""
    iota, L, beta = _check(iota, lipschitz, beta)
    t = _rounds(t).astype(np.float64)
    M = gossip_constant(iota, L, beta)
    return _scalar(16 / (t + 1) * (L ** 2 * (np.log(t) + 1) / (mu ** 2 * iota * (1 - beta) ** 2 * t)
                                   + M / (mu ** 2 * iota)))


def corollary34_bound(t, *, gamma, iota, lipschitz, beta, d_star, paper_printed=False):
    """``E[F(y~^(t)) - F*]`` for σ = 0, a_t = 1, γ_t = γ√t (Corollary 3.4).

    Default: the corrected ``(gamma^2 d(x*) + 2 iota M) / (iota gamma sqrt t)``.
    ``paper_printed=True``: eq. (11) as printed, ``(d(x*) + 2 iota M) / (iota gamma sqrt t)``.
    """
    iota, L, beta = _check(iota, lipschitz, beta)
    t = _rounds(t).astype(np.float64)
    M = gossip_constant(iota, L, beta)
    d_term = float(d_star) if paper_printed else gamma ** 2 * float(d_star)
    return _scalar((d_term + 2 * iota * M) / (iota * gamma * np.sqrt(t)))


def corollary34_consensus_bound(t, *, gamma, iota, lipschitz, beta):
    """Eq. (12): ``2 L sqrt(iota) / (gamma (1 - beta) sqrt t)``."""
    iota, L, beta = _check(iota, lipschitz, beta)
    t = _rounds(t).astype(np.float64)
    return _scalar(2 * L * math.sqrt(iota) / (gamma * (1 - beta) * np.sqrt(t)))


def consensus_bounds(t, schedule, *, iota, mu, lipschitz, beta, sigma, dim, n_nodes):
    """Lemma 4.5 at rounds ``t``: the bounds on the recorded consensus errors.

    Returns
    -------
    dict with
        ``"z_consensus"``: eq. (31), ``n iota (L^2 + dim sigma^2) / (1 - beta)^2``
        (bounds ``E||z^(t) - 1 zbar^(t)||^2 / a_t^2``);
        ``"x_deviation"``: eq. (18),
        ``a_t (L + sqrt(dim) sigma) sqrt(iota) / ((1-beta) (mu iota A_t + gamma_t))``;
        ``"x_deviation_sq"``: eq. (19),
        ``a_t^2 (L^2 + dim sigma^2) iota / ((1-beta)^2 (mu iota A_t + gamma_t)^2)``.
    """
    iota, L, beta = _check(iota, lipschitz, beta)
    t = _rounds(t)
    a, A, g = schedule.arrays(int(t.max()))
    den = float(mu) * iota * A[t] + g[t]
    z = n_nodes * iota * (L ** 2 + dim * sigma ** 2) / (1 - beta) ** 2 * np.ones(t.shape)
    dev = a[t] * (L + math.sqrt(dim) * sigma) * math.sqrt(iota) / ((1 - beta) * den)
    dev_sq = a[t] ** 2 * (L ** 2 + dim * sigma ** 2) * iota / ((1 - beta) ** 2 * den ** 2)
    return {"z_consensus": z, "x_deviation": dev, "x_deviation_sq": dev_sq}
