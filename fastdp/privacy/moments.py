"""The paper-era moments accountant (Abadi et al. 2016), as the DP-SCD paper ran it.

Seed 000 (Damaskinos et al., "Differentially Private Stochastic Coordinate
Descent") chose its noise multipliers with the moments accountant of Abadi et
al. 2016, ported to numpy in the authors' repository (spec 000, sections 2.7,
3.5 and 3.6).  This module reproduces that accountant so that a reproduction
can print the paper's σ next to the σ fastdp's own accountants choose.  It is
**not** fastdp's default: the RDP and PLD accountants give a smaller ε for the
same noise.

What is computed
----------------
Mechanism: the Poisson-subsampled Gaussian mechanism with noise multiplier σ
(noise standard deviation = σ × L2 sensitivity), sampling rate q, composed T
times, under add/remove-one adjacency.  For each integer moment order
λ = 1..128 the log moment of the privacy loss is

    α(λ) = log Σ_{k=0}^{λ+1} C(λ+1, k) (1−q)^{λ+1−k} q^k exp(k(k−1) / (2σ²)),

(this is λ times the Rényi divergence of order λ+1 of the subsampled Gaussian,
so α(λ) composes additively over steps) and the tail bound gives

    ε(δ) = min_λ (T·α(λ) + log(1/δ)) / λ,      δ(ε) = min_λ exp(T·α(λ) − λε).

This is the *classic* Chernoff/RDP conversion, looser than the improved one
fastdp's RDP accountant uses by default.

Two arithmetics
---------------
``arithmetic="stable"`` (default)
    The formula above evaluated in log space (log-binomials, ``log1p`` of a
    sum of positive terms), accurate to rounding for every (q, σ, λ).
``arithmetic="repo"``
    The authors' arithmetic: a Pascal-triangle binomial table, Abadi's
    alternating-sign "differential moments" sum evaluated in float64, orders
    whose log moment comes out NaN or ±inf skipped, and the authors' fallback
    ε = T(log q + 1/σ²) − log δ when every order is invalid.  It overflows for
    small σ and cancels catastrophically for large q (spec 000 §3.6 lists
    cells where it returns too little noise), so use it only to reproduce the
    paper's numbers, never for a guarantee.

:func:`legacy_sigma_search` is the authors' noise search (``compute_sigma2``,
spec 000 §2.7) and :func:`calibrate_moments_sigma` the conservative one.
"""

import functools
import math

import numpy as np
from scipy.special import gammaln, logsumexp

from fastdp._validation import (
    check_delta,
    check_epsilon,
    check_integer,
    check_positive,
    check_real,
)
from fastdp.exceptions import PrivacyAnalysisError, ValidationError
from fastdp.privacy import events as ev
from fastdp.privacy.accountants import Accountant

__all__ = [
    "PAPER_MOMENT_ORDERS",
    "MomentsAccountant",
    "moments_log_moments",
    "moments_epsilon",
    "moments_delta",
    "legacy_sigma_search",
    "calibrate_moments_sigma",
]

#: Integer moment orders λ = 1..128 of the seed-000 code (``moment_orders=128``).
PAPER_MOMENT_ORDERS = tuple(range(1, 129))

_ARITHMETICS = ("stable", "repo")


# ----------------------------------------------------------------------------
# validation helpers
# ----------------------------------------------------------------------------
def _check_orders(orders):
    orders = tuple(int(o) for o in orders)
    if not orders or min(orders) < 1:
        raise ValidationError(
            "moment orders must be a non-empty sequence of integers >= 1; "
            f"got {orders!r}"
        )
    return orders


def _check_arithmetic(arithmetic):
    if arithmetic not in _ARITHMETICS:
        raise ValidationError(
            f"arithmetic must be one of {_ARITHMETICS}; got {arithmetic!r}"
        )
    return arithmetic


def _check_sigma_q(noise_multiplier, sample_rate):
    return (check_positive("noise_multiplier", noise_multiplier),
            check_real("sample_rate", sample_rate, low=0.0, high=1.0, low_open=True))


# ----------------------------------------------------------------------------
# log moments of one step
# ----------------------------------------------------------------------------
def _log_expm1(x):
    """log(exp(x) − 1) for x > 0, accurate for tiny and huge x."""
    x = np.asarray(x, dtype=np.float64)
    small = x < 30.0
    out = np.empty_like(x)
    out[small] = np.log(np.expm1(x[small]))
    out[~small] = x[~small] + np.log1p(-np.exp(-x[~small]))
    return out


def _stable_log_moments(sigma, q, orders):
    """α(λ) for each order, in log space (see module docstring)."""
    orders = np.asarray(orders, dtype=np.int64)
    if q == 1.0:
        return orders * (orders + 1) / (2.0 * sigma * sigma)
    # α(λ) = log(1 + Σ_{k>=2} C(n,k)(1−q)^{n−k} q^k (exp(k(k−1)/(2σ²)) − 1)),
    # n = λ + 1, because the binomial weights sum to one and the k = 0, 1
    # terms have exponent zero.  Every remaining term is positive.
    n_max = int(orders.max()) + 1
    k = np.arange(2, n_max + 1, dtype=np.float64)
    log_excess = _log_expm1(k * (k - 1.0) / (2.0 * sigma * sigma))
    n = (orders + 1).astype(np.float64)[:, None]
    log_terms = (
        gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(np.maximum(n - k, 0.0) + 1.0)
        + (n - k) * math.log1p(-q) + k * math.log(q) + log_excess
    )
    log_terms = np.where(k[None, :] <= n, log_terms, -np.inf)
    log_sum = logsumexp(log_terms, axis=1)
    return np.logaddexp(0.0, log_sum)


class _RepoArithmetic:
    """Float64 replica of the seed-000 code's moment arithmetic.

    The binomial table is built by Pascal's rule in float64 and each order's
    differential moments are the full (λ+1)×(λ+1) signed matrix times the
    exponentials, summed along rows, exactly as the reference did, so that
    overflow (0 · inf = NaN) and cancellation happen where they happened there.
    Only the σ-independent parts are cached.
    """

    def __init__(self, max_order):
        self.max_order = int(max_order)
        size = self.max_order + 1
        table = np.zeros((size, size), dtype=np.float64)
        table[:, 0] = 1.0
        for i in range(1, size):
            table[i, 1:] = table[i - 1, 1:] + table[i - 1, :-1]
        self.binomial = table
        parity = np.subtract.outer(np.arange(size), np.arange(size)) % 2
        self.signed_binomial = table * (1.0 - 2.0 * parity)

    def log_moments(self, sigma, q, orders):
        j = np.arange(self.max_order + 1, dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            exp_s0 = np.exp(j * (j + 1.0 - 2.0 * 0.0) / (2.0 * sigma * sigma))
            exp_s1 = np.exp(j * (j + 1.0 - 2.0 * 1.0) / (2.0 * sigma * sigma))
            log_q = np.log(q)
            out = np.empty(len(orders), dtype=np.float64)
            for index, order in enumerate(orders):
                size = order + 1
                signed = self.signed_binomial[:size, :size]
                moments0 = np.sum(signed * exp_s0[:size], 1)
                moments1 = np.sum(signed * exp_s1[:size], 1)
                weights = self.binomial[order:order + 1, :size]
                q_powers = np.exp(np.arange(size, dtype=np.float64)[None, :] * log_q)
                term0 = np.sum(weights * q_powers * moments0)
                term1 = np.sum(weights * q_powers * moments1)
                out[index] = np.log(np.squeeze(q * term0 + (1.0 - q) * term1))
        return out


_REPO_CACHE = {}


def _repo_arithmetic(max_order):
    if max_order not in _REPO_CACHE:
        _REPO_CACHE[max_order] = _RepoArithmetic(max_order)
    return _REPO_CACHE[max_order]


def moments_log_moments(noise_multiplier, sample_rate, orders=PAPER_MOMENT_ORDERS,
                        arithmetic="stable"):
    """Log moments α(λ) of one step of the Poisson-subsampled Gaussian.

    Parameters
    ----------
    noise_multiplier : float
        σ; the Gaussian noise standard deviation divided by the L2 sensitivity.
    sample_rate : float
        Poisson sampling rate q in (0, 1] (1 means no sampling).
    orders : sequence of int, default ``PAPER_MOMENT_ORDERS``
        Integer moment orders λ >= 1.
    arithmetic : {"stable", "repo"}
        ``"stable"`` evaluates the closed form in log space; ``"repo"``
        replicates the seed-000 code's float64 alternating sum, which can
        return NaN or ±inf (those orders are then skipped by the ε formulas).

    Returns
    -------
    numpy.ndarray
        α(λ) for each order, under add/remove-one adjacency; α(λ) composes
        additively over independent steps.
    """
    sigma, q = _check_sigma_q(noise_multiplier, sample_rate)
    orders = _check_orders(orders)
    if _check_arithmetic(arithmetic) == "stable":
        return _stable_log_moments(sigma, q, orders)
    return _repo_arithmetic(max(orders)).log_moments(sigma, q, orders)


# ----------------------------------------------------------------------------
# (ε, δ) from accumulated log moments
# ----------------------------------------------------------------------------
def _valid(log_moments):
    return np.isfinite(log_moments)


def _epsilon_from_log_moments(log_moments, orders, delta, fallback=None):
    valid = _valid(log_moments)
    if not np.any(valid):
        return math.inf if fallback is None else fallback
    values = (log_moments[valid] - math.log(delta)) / np.asarray(orders)[valid]
    return float(np.min(values))


def _delta_from_log_moments(log_moments, orders, epsilon, fallback=None):
    valid = _valid(log_moments)
    if not np.any(valid):
        return 1.0 if fallback is None else min(1.0, fallback)
    orders_valid = np.asarray(orders, dtype=np.float64)[valid]
    exponents = log_moments[valid] - orders_valid * epsilon
    below = exponents < 0
    if not np.any(below):
        return 1.0
    return float(np.exp(np.min(exponents[below])))


def _repo_fallback_epsilon(sigma, q, steps, delta):
    # The reference's last resort when every order overflowed ("E2 with k=1").
    return float(steps * (np.log(q) + 1.0 / sigma ** 2) - np.log(delta))


def moments_epsilon(noise_multiplier, sample_rate, steps, delta,
                    orders=PAPER_MOMENT_ORDERS, arithmetic="stable"):
    """ε of T Poisson-subsampled Gaussian steps under the moments accountant.

    Privacy meaning: each step releases a query of L2 sensitivity 1 (per
    add/remove of one example) plus N(0, σ²) noise, on a Poisson sample of
    rate q; the T releases together are (ε, δ)-DP with the returned ε
    (classic conversion).  With ``arithmetic="repo"`` the value is the
    seed-000 code's, which is NOT a guarantee where that code's arithmetic
    failed (spec 000 §3.6, † cells).

    Parameters
    ----------
    noise_multiplier, sample_rate : float
        σ and q, as in :func:`moments_log_moments`.
    steps : int
        Number of compositions T >= 0.
    delta : float
        Target δ in (0, 1).
    orders, arithmetic
        As in :func:`moments_log_moments`.

    Returns
    -------
    float
    """
    sigma, q = _check_sigma_q(noise_multiplier, sample_rate)
    steps = _check_steps(steps)
    delta = check_delta(delta)
    orders = _check_orders(orders)
    log_moments = steps * moments_log_moments(sigma, q, orders, arithmetic)
    fallback = (_repo_fallback_epsilon(sigma, q, steps, delta)
                if arithmetic == "repo" else None)
    return _epsilon_from_log_moments(log_moments, orders, delta, fallback)


def moments_delta(noise_multiplier, sample_rate, steps, epsilon,
                  orders=PAPER_MOMENT_ORDERS, arithmetic="stable"):
    """δ at a given ε of T Poisson-subsampled Gaussian steps (moments accountant).

    Same mechanism and adjacency as :func:`moments_epsilon`; returns
    ``min_λ exp(T·α(λ) − λε)`` (1.0 when no order gives a bound below 1).
    """
    sigma, q = _check_sigma_q(noise_multiplier, sample_rate)
    steps = _check_steps(steps)
    epsilon = float(epsilon)
    if not epsilon >= 0:
        raise ValidationError(f"epsilon must be >= 0; got {epsilon!r}")
    orders = _check_orders(orders)
    log_moments = steps * moments_log_moments(sigma, q, orders, arithmetic)
    fallback = None
    if arithmetic == "repo":
        fallback = float(np.exp(steps * (np.log(q) + 1.0 / sigma ** 2) - epsilon))
    return _delta_from_log_moments(log_moments, orders, epsilon, fallback)


#: A number of steps: a whole number >= 0 (``3.0`` accepted).
_check_steps = functools.partial(check_integer, "steps", low=0, allow_integral_float=True)


# ----------------------------------------------------------------------------
# σ searches
# ----------------------------------------------------------------------------
def legacy_sigma_search(epsilon, delta, sample_rate, steps,
                        orders=PAPER_MOMENT_ORDERS, arithmetic="repo"):
    """The seed-000 code's noise search (``compute_sigma2``), reproduced exactly.

    A "ternary" search over powers of ten between 1e-10 and 1e10, then a
    bisection in which a σ that is too private moves the upper end to 0.99·σ
    and one that is not private enough moves the lower end to 1.01·σ, until
    the ends cross; the lower end is returned (spec 000 §2.7).

    Privacy meaning: NONE guaranteed.  The returned σ can give an ε a few per
    cent above the target even under the exact moments accountant, and with
    the reference arithmetic (the default here, as in the paper) far more in
    the cells spec 000 §3.6 marks with †.  Use it to show the paper's σ next to
    fastdp's; use :func:`calibrate_moments_sigma` or fastdp's calibration for
    a σ that meets a target.

    Parameters
    ----------
    epsilon, delta : float
        Target (ε, δ).
    sample_rate : float
        q = lot size / N.
    steps : int
        T, the number of lots.
    orders : sequence of int, default ``PAPER_MOMENT_ORDERS``
    arithmetic : {"repo", "stable"}, default "repo"
        Which moment arithmetic the search queries.

    Returns
    -------
    float
        The σ the paper's code would have used.
    """
    epsilon = check_epsilon(epsilon, allow_inf=True)
    delta = check_delta(delta)

    def measured(sigma):
        return moments_epsilon(sigma, sample_rate, steps, delta, orders, arithmetic)

    def magnitude(x):
        return int(math.log10(x))

    low, high = 1e-10, 1e10
    while low <= high:
        mag_low, mag_high = magnitude(low), magnitude(high)
        if mag_high - mag_low > 1:
            mid = 10 ** int((mag_low + mag_high) / 2)
        else:
            mid = (low + high) / 2
        mid_eps = measured(mid)
        if epsilon == mid_eps:
            low = mid
            break
        if epsilon > mid_eps:
            high = mid * 0.99
        else:
            low = mid * 1.01
    return float(low)


def calibrate_moments_sigma(epsilon, delta, sample_rate, steps,
                            orders=PAPER_MOMENT_ORDERS, rtol=1e-6,
                            bracket=(1e-3, 1e4)):
    """Smallest σ whose moments-accountant ε does not exceed the target.

    Bisection on log σ with the stable arithmetic.  The returned σ always
    satisfies ``moments_epsilon(σ, ...) <= epsilon`` and is within a relative
    ``rtol`` of the smallest such σ (ε is decreasing in σ).

    Privacy meaning: the Poisson-subsampled Gaussian with the returned noise
    multiplier, composed ``steps`` times, is (ε, δ)-DP under add/remove
    adjacency by the moments accountant with the classic conversion.

    Raises
    ------
    PrivacyAnalysisError
        If even the upper end of ``bracket`` does not reach the target.
    """
    epsilon = float(epsilon)
    if not epsilon > 0:
        raise ValidationError(f"epsilon must be > 0; got {epsilon!r}")

    def eps_of(sigma):
        return moments_epsilon(sigma, sample_rate, steps, delta, orders, "stable")

    low, high = float(bracket[0]), float(bracket[1])
    if eps_of(high) > epsilon:
        raise PrivacyAnalysisError(
            f"no noise multiplier up to {high:g} reaches epsilon={epsilon:g}; "
            "raise the bracket or relax the target"
        )
    if eps_of(low) <= epsilon:
        return low
    while high / low - 1.0 > rtol:
        mid = math.sqrt(low * high)
        if eps_of(mid) <= epsilon:
            high = mid
        else:
            low = mid
    return high


# ----------------------------------------------------------------------------
# the accountant on fastdp events
# ----------------------------------------------------------------------------
class MomentsAccountant(Accountant):
    """Abadi et al.'s moments accountant on fastdp events (seed-000 flavour).

    Accepts ``GaussianEvent`` (q = 1), ``PoissonSampledEvent`` wrapping a
    ``GaussianEvent``, and any ``SelfComposedEvent`` / ``ComposedEvent`` of
    those; log moments add over the composition.  Adjacency must be
    add/remove-one (the analysis is for Poisson sampling under add/remove).
    Everything else (fixed-size or shuffled batches, Laplace, pure ε events,
    approximate (ε, δ) events, replace-one) raises :class:`~fastdp.exceptions.PrivacyAnalysisError`: the
    paper accounted its shuffled lots as if they were Poisson, and fastdp does
    not repeat that silently.  To show the paper's number for shuffled lots,
    call ``_epsilon(event, delta, "poisson_assumed")`` or
    :func:`moments_epsilon` directly and label it as the paper's assumption.

    Parameters
    ----------
    orders : sequence of int, default ``PAPER_MOMENT_ORDERS`` (1..128)
    arithmetic : {"stable", "repo"}, default "stable"
        See the module docstring; ``"repo"`` is the paper code's arithmetic,
        for reproductions only.
    """

    name = "moments"

    def __init__(self, orders=PAPER_MOMENT_ORDERS, arithmetic="stable"):
        self.orders = _check_orders(orders)
        self.arithmetic = _check_arithmetic(arithmetic)

    def __repr__(self):
        return f"MomentsAccountant(orders=1..{max(self.orders)}, arithmetic={self.arithmetic!r})"

    def _steps(self, event, view="guaranteed"):
        """Flatten an event into a list of (σ, q, count); σ = 0 marks non-private."""
        if isinstance(event, ev.ShuffledEvent):
            return self._steps(event.view(view), view)
        if isinstance(event, ev.NonPrivateEvent):
            return [(0.0, 1.0, 1)]
        if event.adjacency is not None and event.adjacency != ev.Adjacency.ADD_REMOVE:
            raise PrivacyAnalysisError(
                "the moments accountant covers add/remove adjacency only; got "
                f"{event.adjacency.value} in {event!r}. Use the RDP accountant for "
                "replace-one events."
            )
        if isinstance(event, ev.ApproxDpEvent):
            raise PrivacyAnalysisError(
                f"the moments accountant cannot analyse {event!r}: an (epsilon, delta)-DP "
                "guarantee has no moment (Renyi) curve; use accountant='pure' or 'pld'.")
        if isinstance(event, ev.GaussianEvent):
            return [(float(event.noise_multiplier), 1.0, 1)]
        if isinstance(event, ev.PoissonSampledEvent) and isinstance(event.event, ev.GaussianEvent):
            return [(float(event.event.noise_multiplier), float(event.sample_rate), 1)]
        if isinstance(event, ev.SelfComposedEvent):
            return [(s, q, c * int(event.count)) for s, q, c in self._steps(event.event, view)]
        if isinstance(event, ev.ComposedEvent):
            return [step for inner in event.events for step in self._steps(inner, view)]
        raise PrivacyAnalysisError(
            f"the moments accountant only analyses (Poisson-subsampled) Gaussian "
            f"events and their compositions; got {type(event).__name__}. Use "
            "accountant='rdp' or 'pld' (or 'pure' for pure-DP events)."
        )

    def log_moments(self, event, view="guaranteed"):
        """Accumulated log moments Σ_t α_t(λ) of ``event`` at ``self.orders``.

        Returns ``None`` when the event contains a non-private step (ε = ∞).
        """
        total = np.zeros(len(self.orders))
        for sigma, q, count in self._steps(event, view):
            if count == 0 or q == 0.0:
                continue
            if sigma == 0.0:
                return None
            total = total + count * moments_log_moments(sigma, q, self.orders, self.arithmetic)
        return total

    def _epsilon(self, event, delta, view):
        log_moments = self.log_moments(event, view)
        if log_moments is None or delta == 0.0:
            return math.inf
        if delta >= 1.0:
            return 0.0
        return _epsilon_from_log_moments(log_moments, self.orders, delta)

    def _delta(self, event, epsilon, view):
        log_moments = self.log_moments(event, view)
        if log_moments is None:
            return 1.0
        return _delta_from_log_moments(log_moments, self.orders, epsilon)
