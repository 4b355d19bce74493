"""RDP curves ε(α) of single mechanisms and of subsampled mechanisms, vectorised over orders.

The formulas (with their papers) are listed in :mod:`fastdp.privacy.rdp`,
which maps events to these curves, composes them and converts to (ε, δ).
Every function takes an array of orders α > 1 and returns ε(α) per order.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.special import gammaln, gammasgn, log_ndtr

from fastdp.exceptions import ValidationError
from fastdp.privacy.events import LineSearchEvent, PrivacyFilterEvent

__all__ = [
    "rdp_gaussian",
    "rdp_laplace",
    "rdp_pure",
    "rdp_line_search",
    "rdp_privacy_filter",
    "rdp_poisson_gaussian",
    "rdp_poisson_general",
    "rdp_fixed_size_gaussian",
    "rdp_fixed_size_general",
]

_LOG2 = math.log(2.0)
_LOG3 = math.log(3.0)
_LOG4 = math.log(4.0)
_WOR_EXACT_MAX_ORDER = 256   # Thm 27 with forward differences up to here (as dp_accounting)
_FRAC_BLOCK = 64             # terms per block of the fractional-order series
_FRAC_MAX_TERMS = 8192       # give up (order excluded) beyond this many terms
_FRAC_TAIL_LOG_TOL = 27.0    # stop when the next term is e^-27 below the total


# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------
def _as_orders(orders) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(orders, dtype=float))
    if arr.ndim != 1 or arr.size == 0:
        raise ValidationError("orders must be a non-empty 1-D sequence of numbers.")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 1.0):
        raise ValidationError("every RDP order must be finite and > 1.")
    return arr


def _is_integer(orders: np.ndarray) -> np.ndarray:
    return orders == np.round(orders)


def _integer_segments(int_orders) -> tuple:
    arr = np.asarray(int_orders, dtype=float)
    return _integer_segments_cached(arr.tobytes())


@functools.lru_cache(maxsize=64)
def _integer_segments_cached(key: bytes):
    """Flat (order, k) layout for sums over k = 0..α at integer orders α.

    Returns (alpha_per_term, k, log_binom, starts) where terms of order i are
    the slice starts[i]:starts[i+1].
    """
    alphas = np.frombuffer(key, dtype=float).astype(np.int64)
    lengths = alphas + 1
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    alpha_rep = np.repeat(alphas, lengths).astype(float)
    k = (np.arange(lengths.sum()) - np.repeat(starts, lengths)).astype(float)
    log_binom = gammaln(alpha_rep + 1) - gammaln(k + 1) - gammaln(alpha_rep - k + 1)
    return alpha_rep, k, log_binom, starts


def _segment_logsumexp(terms: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """log Σ exp(terms) over consecutive segments beginning at ``starts``.

    Computed as max + log1p(Σ of the other terms / max), so sums that are
    1 + tiny keep their relative precision.
    """
    maxima = np.maximum.reduceat(terms, starts)
    finite = np.isfinite(maxima)
    safe = np.where(finite, maxima, 0.0)
    lengths = np.diff(starts, append=terms.size)
    shifted = terms - np.repeat(safe, lengths)
    is_max = shifted == 0.0
    ties = np.add.reduceat(is_max.astype(float), starts)
    rest = np.add.reduceat(np.where(is_max, 0.0, np.exp(shifted)), starts) + (ties - 1.0)
    out = safe + np.log1p(np.where(finite, rest, 0.0))
    out[~finite] = maxima[~finite]
    return out


def _unamplified(sample_rate, orders, curve):
    """Common start of the subsampled curves: ``(q, orders, unamplified)``.

    ``q`` is the sampling rate as a float, ``orders`` a float array, and
    ``unamplified`` the RDP without amplification: the mechanism's own curve
    ``curve(orders)``, or 0 when ``q = 0`` (the mechanism never sees the
    data).  Subsampling never increases RDP, so ``unamplified`` bounds the
    amplified curve, and at ``q`` in {0, 1} it is the exact answer.
    """
    orders = np.asarray(orders, dtype=float)
    q = float(sample_rate)
    unamplified = np.zeros_like(orders) if q == 0 else np.asarray(curve(orders), dtype=float)
    return q, orders, unamplified


def _log1mexp(x):
    """log(1 − e^{−x}) for x > 0, stable."""
    x = np.asarray(x, dtype=float)
    return np.where(x < _LOG2, np.log(-np.expm1(-x)), np.log1p(-np.exp(-x)))


def _logcosh(x):
    x = np.abs(np.asarray(x, dtype=float))
    small = x < 20.0
    xs = np.where(small, x, 0.0)
    return np.where(small, np.log1p(2.0 * np.sinh(xs / 2.0) ** 2),
                    x - _LOG2 + np.log1p(np.exp(-2.0 * x)))


# ---------------------------------------------------------------------------
# Mechanism curves (not subsampled)
# ---------------------------------------------------------------------------
def rdp_gaussian(noise_multiplier: float, orders) -> np.ndarray:
    """RDP of the Gaussian mechanism with noise multiplier σ: α / (2σ²)."""
    orders = np.asarray(orders, dtype=float)
    return orders / (2.0 * noise_multiplier ** 2)


def rdp_laplace(scale: float, orders) -> np.ndarray:
    """Exact RDP of the Laplace mechanism with scale b (relative to Δ₁).

    Mironov (2017), Prop. 6, with ε = 1/b:
    ε + log(1 + (α−1)(e^{(1−2α)ε} − 1)/(2α−1)) / (α−1), Taylor-expanded for
    α < 1.1 as dp_accounting does.
    """
    a = np.asarray(orders, dtype=float)
    eps = 1.0 / scale
    c = np.expm1(eps * (1.0 - 2.0 * a)) / (2.0 * a - 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        main = eps + np.log1p((a - 1.0) * c) / (a - 1.0)
    near_one = a < 1.1
    if np.any(near_one):
        v = -c[near_one] * (a[near_one] - 1.0)
        k = np.arange(1, 100, dtype=float)
        series = np.sum(v[:, None] ** (k - 1.0) / k, axis=1)
        main = main.copy()
        main[near_one] = eps + c[near_one] * series
    return main


def rdp_pure(epsilon: float, orders) -> np.ndarray:
    """RDP curve valid for every pure ε-DP mechanism.

    The Rényi divergence of binary randomized response at ε, which dominates
    any ε-DP pair: [log cosh((α−½)ε) − log cosh(ε/2)] / (α−1). It is at most
    min(ε, α·ε²/2).
    """
    a = np.asarray(orders, dtype=float)
    if epsilon == 0:
        return np.zeros_like(a)
    return np.minimum((_logcosh((a - 0.5) * epsilon) - _logcosh(epsilon / 2.0)) / (a - 1.0),
                      epsilon)


def rdp_line_search(event: LineSearchEvent, orders) -> np.ndarray:
    """RDP curve of one NOISYBTLS call (spec 003 §4.1), before subsampling."""
    if event.form == "laplace":
        if event.analysis == "paper":
            return 2.0 * rdp_laplace(2.0 / event.epsilon_bt, orders)   # eq. (4)
        return rdp_pure(event.epsilon_bt, orders)
    return rdp_gaussian(event.gaussian_equivalent_noise_multiplier(), orders)


# ---------------------------------------------------------------------------
# Poisson-subsampled Gaussian (exact)
# ---------------------------------------------------------------------------
def rdp_privacy_filter(event: PrivacyFilterEvent, orders) -> np.ndarray:
    """Guaranteed RDP of a privacy-filtered run (its cap) at ``orders``.

    zCDP form: α·ρ at every order. Fixed-order form: at α the smallest cap
    of a tracked order ≥ α (RDP is non-decreasing in the order), inf above
    the largest tracked order. See :class:`~fastdp.privacy.events.PrivacyFilterEvent`.
    """
    orders = _as_orders(orders)
    return np.array([event.rdp_bound(a) for a in orders], dtype=float)


def _sgm_log_a_integer(q: float, sigma: float, int_orders: np.ndarray) -> np.ndarray:
    alpha_rep, k, log_binom, starts = _integer_segments(int_orders)
    terms = (log_binom + k * math.log(q) + (alpha_rep - k) * math.log1p(-q)
             + (k * k - k) / (2.0 * sigma ** 2))
    return _segment_logsumexp(terms, starts)


@functools.lru_cache(maxsize=4096)
def _frac_binomial_row(order: float, n_terms: int):
    """log|C(α, i)| and sign C(α, i) for i = 0..n_terms−1 (generalised binomials)."""
    i = np.arange(n_terms, dtype=float)
    log_binom = gammaln(order + 1) - gammaln(i + 1) - gammaln(order - i + 1)
    return log_binom, gammasgn(order - i + 1)


def _frac_binomials(frac_orders, n_terms: int):
    rows = [_frac_binomial_row(float(a), n_terms) for a in frac_orders]
    return np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows])


def _sgm_log_a_fractional(q: float, sigma: float, frac_orders: np.ndarray,
                          absolute: bool) -> np.ndarray:
    """log A_α for fractional α (Mironov, Talwar, Zhang 2019, §3.3), vectorised.

    Each order's two series are summed until their terms are e^-27 below the
    total and decreasing; the first omitted term's magnitude is added, which
    bounds the alternating tail. Orders that do not converge get +inf
    (excluded from the minimum).
    """
    out = np.full(frac_orders.size, np.inf)
    if frac_orders.size == 0:
        return out
    log_q, log_1mq = math.log(q), math.log1p(-q)
    z0 = sigma ** 2 * (math.log1p(-q) - math.log(q)) + 0.5
    inv_2s2 = 1.0 / (2.0 * sigma ** 2)
    pending = np.arange(frac_orders.size)
    n_terms = _FRAC_BLOCK
    while pending.size and n_terms <= _FRAC_MAX_TERMS:
        a = frac_orders[pending]
        log_binom, sign = _frac_binomials(a, n_terms + 1)
        i = np.arange(n_terms + 1, dtype=float)[None, :]
        j = a[:, None] - i
        s0 = (log_binom + i * log_q + j * log_1mq + (i * i - i) * inv_2s2
              + log_ndtr((z0 - i) / sigma))
        s1 = (log_binom + j * log_q + i * log_1mq + (j * j - j) * inv_2s2
              + log_ndtr((j - z0) / sigma))
        both = np.concatenate([s0[:, :-1], s1[:, :-1]], axis=1)
        signs = np.concatenate([sign[:, :-1], sign[:, :-1]], axis=1)
        if absolute:
            signs = np.abs(signs)
        m = np.max(both, axis=1, keepdims=True)
        total = np.sum(signs * np.exp(both - m), axis=1)
        next_mag = np.exp(np.maximum(s0[:, -1], s1[:, -1]) - m[:, 0])
        with np.errstate(divide="ignore", invalid="ignore"):
            log_total = m[:, 0] + np.log(total + 2.0 * next_mag)
        last = np.maximum(s0[:, -2:], s1[:, -2:])
        decreasing = (s0[:, -1] < s0[:, -2]) & (s1[:, -1] < s1[:, -2])
        # the tail bound needs the alternating part of the series (i > α + 1)
        alternating = n_terms > a + 2.0
        converged = (decreasing & alternating & (last[:, -1] < log_total - _FRAC_TAIL_LOG_TOL)
                     & (total > 0))
        out[pending[converged]] = log_total[converged]
        pending = pending[~converged]
        n_terms *= 2
    return out


def rdp_poisson_gaussian(sample_rate: float, noise_multiplier: float, orders,
                         fractional_series: str = "exact") -> np.ndarray:
    """RDP of the Poisson-subsampled Gaussian mechanism (add/remove), exact.

    Parameters
    ----------
    sample_rate : float
        q ∈ [0, 1].
    noise_multiplier : float
        σ > 0.
    orders : array of float
    fractional_series : {"exact", "absolute"}
        How to sum the series at fractional orders: with its signs (exact) or
        with absolute values (an upper bound; dp_accounting's choice).
    """
    sigma = float(noise_multiplier)
    q, orders, unamplified = _unamplified(sample_rate, orders, functools.partial(rdp_gaussian, sigma))
    if q in (0.0, 1.0):
        return unamplified
    out = np.empty_like(orders)
    is_int = _is_integer(orders)
    if np.any(is_int):
        out[is_int] = _sgm_log_a_integer(q, sigma, orders[is_int]) / (orders[is_int] - 1)
    if np.any(~is_int):
        frac = orders[~is_int]
        log_a = _sgm_log_a_fractional(q, sigma, frac, fractional_series == "absolute")
        stuck = ~np.isfinite(log_a)
        if np.any(stuck):
            # Series too slow (e.g. σ ≫ 1 at q near 1/2): the cumulant
            # log A_α is convex with log A_1 = 0, so interpolating it between
            # the neighbouring integer orders is a valid upper bound.
            lo, hi = np.floor(frac[stuck]), np.ceil(frac[stuck])
            ends = np.unique(np.concatenate([lo, hi]))
            ends = ends[ends >= 2]
            at = dict(zip(ends.tolist(), _sgm_log_a_integer(q, sigma, ends).tolist())) if ends.size else {}
            at[1.0] = 0.0
            t = frac[stuck] - lo
            log_a[stuck] = (1 - t) * np.array([at[x] for x in lo.tolist()]) + \
                t * np.array([at[x] for x in hi.tolist()])
        out[~is_int] = log_a / (frac - 1)
    return np.minimum(out, unamplified)


# ---------------------------------------------------------------------------
# Poisson-subsampled general mechanism (Zhu & Wang 2019, general upper bound)
# ---------------------------------------------------------------------------
def _next_integer_orders(orders: np.ndarray) -> np.ndarray:
    return np.maximum(np.ceil(orders), 2.0)


def rdp_poisson_general(sample_rate: float, curve, orders, *, factor_three: bool = True) -> np.ndarray:
    """Zhu & Wang (2019) upper bound for a Poisson-subsampled mechanism.

    ``curve(orders)`` is the mechanism's RDP on its sample (add/remove). At an
    integer order α ≥ 2, with γ the sampling rate:

    (1/(α−1))·log[(1−γ)^{α−1}(αγ−γ+1) + C(α,2)γ²(1−γ)^{α−2}e^{ε(2)}
    + 3·Σ_{l=3..α} C(α,l)γ^l(1−γ)^{α−l}e^{(l−1)ε(l)}].

    A fractional order uses the next integer order (RDP is non-decreasing in
    α). The result never exceeds the unsubsampled curve (subsampling does not
    increase RDP, by joint convexity).

    ``factor_three=False`` drops the factor 3 of the terms l ≥ 3: Zhu and
    Wang's tighter form, proven only for mechanisms that satisfy their
    condition (not for the sparse vector technique); fastdp uses it solely for
    the ``"zw_tight_all"`` ablation of :class:`~fastdp.privacy.filters.RdpBudgetFilter`,
    whose results are not guarantees.
    """
    q, orders, unamplified = _unamplified(sample_rate, orders, curve)
    if q in (0.0, 1.0):
        return unamplified
    targets = _next_integer_orders(orders)
    uniq = np.unique(targets)
    base = np.asarray(curve(np.arange(2.0, uniq.max() + 1.0)), dtype=float)  # ε(l), l = 2..max
    alpha_rep, k, log_binom, starts = _integer_segments(uniq)
    log_q, log_1mq = math.log(q), math.log1p(-q)
    k_int = k.astype(np.int64)
    eps_k = np.where(k_int >= 2, base[np.clip(k_int - 2, 0, base.size - 1)], 0.0)
    terms = log_binom + k * log_q + (alpha_rep - k) * log_1mq + (k - 1.0) * eps_k
    if factor_three:
        terms = np.where(k_int >= 3, terms + _LOG3, terms)
    # k = 0 and k = 1 together: (1−γ)^{α−1}(αγ − γ + 1)
    terms = np.where(k_int == 0, (alpha_rep - 1.0) * log_1mq + np.log1p((alpha_rep - 1.0) * q), terms)
    terms = np.where(k_int == 1, -np.inf, terms)
    log_a = _segment_logsumexp(terms, starts)
    amplified = dict(zip(uniq.tolist(), (log_a / (uniq - 1.0)).tolist()))
    out = np.array([amplified[t] for t in targets.tolist()])
    return np.minimum(out, unamplified)


# ---------------------------------------------------------------------------
# Fixed-size sampling without replacement (replace-one), WBK 2019
# ---------------------------------------------------------------------------
@functools.lru_cache(maxsize=64)
def _wor_gaussian_forward_differences(sigma: float, max_level: int) -> np.ndarray:
    """log|Δ^ℓ g(0)| for ℓ = 0..max_level, g(m) = exp(cgf(m−1)), cgf(x) = x(x+1)/(2σ²).

    Computed with a signed log-space difference table (each level is a
    vector operation).
    """
    m = np.arange(max_level + 1, dtype=float)
    vec = (m - 1.0) * m / (2.0 * sigma ** 2)
    sgn = np.ones_like(vec, dtype=bool)
    out = np.empty(max_level + 1)
    out[0] = vec[0]
    for level in range(1, max_level + 1):
        a, sa = vec[1:], sgn[1:]
        b, sb = vec[:-1], sgn[:-1]
        hi, lo = np.maximum(a, b), np.minimum(a, b)
        same = sa == sb
        with np.errstate(divide="ignore", invalid="ignore"):
            diff = np.where(hi == lo, -np.inf, hi + np.log1p(-np.exp(lo - hi)))
            added = hi + np.log1p(np.exp(lo - hi))
        vec = np.where(same, diff, added)
        # sign of sa·e^a − sb·e^b
        sgn = np.where(same, np.where(a > b, sa, ~sa), sa)
        out[level] = vec[0]
    return out


def _wor_log_a_integer_gaussian(q: float, sigma: float, alpha: int, log_d: np.ndarray) -> float:
    if alpha == 1:
        return 0.0
    i = np.arange(2, alpha + 1, dtype=float)
    log_binom = gammaln(alpha + 1.0) - gammaln(i + 1.0) - gammaln(alpha - i + 1.0)
    cgf_im1 = (i - 1.0) * i / (2.0 * sigma ** 2)
    f2 = 1.0 / sigma ** 2
    s2 = min(_LOG4 + f2 + float(_log1mexp(f2)), f2 + _LOG2)
    if alpha <= _WOR_EXACT_MAX_ORDER:
        i3 = i[1:].astype(np.int64)
        lo = log_d[2 * (i3 // 2)]
        hi = log_d[2 * ((i3 + 1) // 2)]
        rest = np.minimum(_LOG4 + 0.5 * (lo + hi), _LOG2 + cgf_im1[1:])
    else:
        rest = _LOG2 + cgf_im1[1:]
    inner = np.concatenate(([s2], rest)) + i * math.log(q) + log_binom
    return float(np.logaddexp.reduce(np.concatenate(([0.0], inner))))


def rdp_fixed_size_gaussian(sample_rate: float, noise_multiplier: float, orders) -> np.ndarray:
    """RDP of the Gaussian on a fixed-size sample without replacement.

    Replace-one adjacency, ``sample_rate`` = batch/n, σ relative to the
    replace-one sensitivity. Wang, Balle, Kasiviswanathan (2019), Thm 27 (with
    forward differences of the Gaussian cumulant up to order 256, the simpler
    bound above), fractional orders by interpolating the cumulant (Cor. 10);
    capped by the unsampled Gaussian curve.
    """
    sigma = float(noise_multiplier)
    q, orders, unamplified = _unamplified(sample_rate, orders, functools.partial(rdp_gaussian, sigma))
    if q in (0.0, 1.0):
        return unamplified
    floors, ceils = np.floor(orders).astype(np.int64), np.ceil(orders).astype(np.int64)
    needed = np.unique(np.concatenate([floors, ceils]))
    top = int(min(needed.max(), _WOR_EXACT_MAX_ORDER))
    log_d = _wor_gaussian_forward_differences(sigma, top + 2)
    log_a = {int(a): _wor_log_a_integer_gaussian(q, sigma, int(a), log_d) for a in needed}
    return _interpolate_cumulant(orders, floors, ceils, log_a, unamplified)


def _interpolate_cumulant(orders, floors, ceils, log_a, cap):
    t = orders - floors
    x = np.array([log_a[int(f)] for f in floors])
    y = np.array([log_a[int(c)] for c in ceils])
    return np.minimum(((1.0 - t) * x + t * y) / (orders - 1.0), cap)


def rdp_fixed_size_general(sample_rate: float, curve, orders, pure_epsilon: float = math.inf) -> np.ndarray:
    """WBK (2019) Thm 9 for any mechanism on a fixed-size sample (replace-one).

    ``curve(orders)`` is the mechanism's RDP under replace-one on its sample
    and ``pure_epsilon`` its ε(∞) (``inf`` if not pure DP).
    """
    q, orders, unamplified = _unamplified(sample_rate, orders, curve)
    if q in (0.0, 1.0):
        return unamplified
    floors, ceils = np.floor(orders).astype(np.int64), np.ceil(orders).astype(np.int64)
    needed = np.unique(np.concatenate([floors, ceils]))
    top = int(needed.max())
    eps_l = np.asarray(curve(np.arange(2.0, top + 1.0)), dtype=float) if top >= 2 else np.zeros(0)
    if math.isinf(pure_epsilon):
        log_em1 = math.inf
    else:
        log_em1 = float(np.log(np.expm1(pure_epsilon))) if pure_epsilon > 0 else -math.inf
    log_a = {}
    for alpha in needed.tolist():
        if alpha <= 1:
            log_a[alpha] = 0.0
            continue
        j = np.arange(2, alpha + 1, dtype=float)
        log_binom = gammaln(alpha + 1.0) - gammaln(j + 1.0) - gammaln(alpha - j + 1.0)
        e = eps_l[: alpha - 1]
        cap = np.minimum(_LOG2, j * log_em1)
        s = j * math.log(q) + log_binom + (j - 1.0) * e + cap
        e2 = e[0]
        with np.errstate(divide="ignore"):
            s2_inner = min(_LOG4 + e2 + float(_log1mexp(e2)) if e2 > 0 else -math.inf,
                           e2 + min(_LOG2, 2.0 * log_em1))
        s[0] = 2.0 * math.log(q) + log_binom[0] + s2_inner
        log_a[alpha] = float(np.logaddexp.reduce(np.concatenate(([0.0], s))))
    return _interpolate_cumulant(orders, floors, ceils, log_a, unamplified)
