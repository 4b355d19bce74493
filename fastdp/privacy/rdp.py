"""fastdp's Rényi-DP accountant, vectorised over orders.

The accountant maps every event of :mod:`fastdp.privacy.events` to its RDP
curve ε(α) on a grid of orders, sums the curves of composed events and converts
the total to (ε, δ).

Curves (α is the Rényi order; all sums are done in log space):

* Gaussian, noise multiplier σ: α / (2σ²).
* Laplace, scale b: Mironov (2017), Prop. 6 (exact).
* pure ε-DP: the curve of binary randomized response at ε, which dominates
  every ε-DP mechanism: [log cosh((α−½)ε) − log cosh(ε/2)] / (α−1).
* line search (spec 003): eq. (4)/(5) of the paper, or the conservative
  analyses (see :class:`~fastdp.privacy.events.LineSearchEvent`).
* Poisson-subsampled Gaussian (add/remove): the exact sampled-Gaussian RDP of
  Mironov, Talwar and Zhang (2019): the binomial sum at integer orders, the
  two-sided series of their §3.3 at fractional orders (summed with its signs,
  i.e. the exact value; ``fractional_series="absolute"`` sums magnitudes, an
  upper bound, as dp_accounting does).
* Poisson-subsampled other mechanisms: Zhu and Wang (2019) general upper bound
  at integer orders (factor 3), the next integer order at fractional orders,
  and never more than the unsubsampled curve.
* Fixed-size sampling without replacement (replace-one): Wang, Balle and
  Kasiviswanathan (2019), Thm 27 for Gaussians (forward differences up to
  order 256, their Stirling-type bound above), Thm 9 otherwise; fractional
  orders by linear interpolation of the cumulant (their Cor. 10).
* Parallel composition (mechanisms on the disjoint parts of a random split,
  :class:`~fastdp.privacy.events.ParallelComposedEvent`): the pointwise
  maximum of the members' curves.
* Repeated selection (best of K random repetitions, private hyperparameter
  search): the pointwise maximum of the candidates' curves, then Papernot and
  Steinke (2022), Thms 2 and 6, with the second order minimised over the whole
  grid (:mod:`fastdp.privacy.tuning`).

Conversion to (ε, δ): the improved bound of Balle et al. (2020) / Canonne,
Kamath and Steinke (2020), as in dp_accounting (default), or the classic
ε = RDP + log(1/δ)/(α−1) of Mironov (2017) (``conversion="classic"``).

Speed: integer orders are summed in one flat vector per call (segment
log-sum-exp), per-order series use cached binomial tables, and fractional
orders are evaluated only where a rigorous lower bound (RDP is non-decreasing
in α) says they could beat the best integer order, so the minimum is the same
as over the full grid.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from fastdp.exceptions import PrivacyAnalysisError, ValidationError
from fastdp.privacy.accountants import Accountant, check_delta, check_epsilon, check_event
from fastdp.privacy.events import (
    _APPROX_NO_RDP,
    ApproxDpEvent,
    ComposedEvent,
    DpEvent,
    FixedSizeSampledEvent,
    GaussianEvent,
    LaplaceEvent,
    LineSearchEvent,
    NonPrivateEvent,
    ParallelComposedEvent,
    PoissonSampledEvent,
    PrivacyFilterEvent,
    PureEvent,
    RepeatedSelectionEvent,
    SelfComposedEvent,
    ShuffledEvent,
)
from fastdp.privacy.rdp_curves import (
    _as_orders,
    _is_integer,
    rdp_fixed_size_gaussian,
    rdp_fixed_size_general,
    rdp_gaussian,
    rdp_laplace,
    rdp_line_search,
    rdp_poisson_gaussian,
    rdp_poisson_general,
    rdp_privacy_filter,
    rdp_pure,
)
from fastdp.privacy.tuning import rdp_repeated_selection

__all__ = [
    "DEFAULT_ORDERS",
    "RdpAccountant",
    "rdp_gaussian",
    "rdp_laplace",
    "rdp_pure",
    "rdp_line_search",
    "rdp_privacy_filter",
    "rdp_poisson_gaussian",
    "rdp_poisson_general",
    "rdp_fixed_size_gaussian",
    "rdp_fixed_size_general",
    "epsilon_from_rdp",
    "delta_from_rdp",
]

#: dp_accounting's default grid (so results agree with it and with the
#: reference values): 1.1, 1.2, ..., 10.9, 11, ..., 63, 128, 256, 512, 1024.
DEFAULT_ORDERS = np.array(
    [1 + x / 10.0 for x in range(1, 100)] + list(range(11, 64)) + [128, 256, 512, 1024],
    dtype=float)


# ---------------------------------------------------------------------------
# Conversion to (ε, δ)
# ---------------------------------------------------------------------------
_CONVERSIONS = ("improved", "classic")


@functools.lru_cache(maxsize=256)
def _conversion_constants(key: bytes):
    """Per-order constants of the improved conversion: (log1p(−1/α) − log α/(α−1), 1/(α−1))."""
    a = np.frombuffer(key, dtype=float)
    inv = 1.0 / (a - 1.0)
    const = np.log1p(-1.0 / a) - np.log(a) * inv
    const[a <= 1.01] = np.inf      # the improved bound is unstable near 1
    const.setflags(write=False)
    inv.setflags(write=False)
    return const, inv


def _epsilon_per_order(orders, rdp, delta, conversion):
    orders = np.asarray(orders, dtype=float)
    rdp = np.maximum(np.asarray(rdp, dtype=float), 0.0)
    if delta == 0:
        return np.where(rdp == 0, 0.0, np.inf)
    const, inv = _conversion_constants(orders.tobytes())
    log_inv_delta = -math.log(delta)
    if conversion == "classic":
        return rdp + log_inv_delta * inv
    eps = rdp + const + log_inv_delta * inv
    # KL route: δ ≥ sqrt(1 − e^{−KL}) with KL ≤ RDP at any order ≥ 1.
    eps[delta * delta + np.expm1(-rdp) > 0] = 0.0
    return eps


def epsilon_from_rdp(orders, rdp, delta: float, conversion: str = "improved"):
    """Smallest ε over the orders such that the curve ``rdp`` is (ε, δ)-DP.

    Returns ``(epsilon, optimal_order)``.
    """
    eps = _epsilon_per_order(orders, rdp, delta, conversion)
    idx = int(np.argmin(eps))
    return max(0.0, float(eps[idx])), float(np.asarray(orders)[idx])


def log_deltas_from_rdp(orders, rdp, epsilons, conversion: str = "improved"):
    """log δ of an RDP curve at each order and each ε: shape ``(len(epsilons), len(orders))``.

    Mironov's classic conversion (``"classic"``) or the improved one of Balle
    et al. (2020) / Canonne, Kamath and Steinke (2020) with the KL route;
    undefined entries are ``+inf``.  :func:`delta_from_rdp` takes the minimum
    over the orders for one ε.
    """
    a = np.asarray(orders, dtype=float)[None, :]
    r = np.maximum(np.asarray(rdp, dtype=float), 0.0)[None, :]
    eps = np.atleast_1d(np.asarray(epsilons, dtype=float))[:, None]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if conversion == "classic":
            log_delta = (a - 1.0) * (r - eps)
        else:
            kl = np.where(r > 0, 0.5 * np.log1p(-np.exp(-r)), -np.inf)
            bound = (a - 1.0) * (r - eps + np.log1p(-1.0 / a)) - np.log(a)
            log_delta = np.where(a > 1.01, np.minimum(kl, bound), kl)
    return np.where(np.isnan(log_delta), np.inf, log_delta)


def delta_from_rdp(orders, rdp, epsilon: float, conversion: str = "improved"):
    """Smallest δ over the orders such that ``rdp`` is (ε, δ)-DP.

    Returns ``(delta, optimal_order)``.
    """
    log_delta = log_deltas_from_rdp(orders, rdp, epsilon, conversion)[0]
    idx = int(np.argmin(log_delta))
    return (float(min(math.exp(min(log_delta[idx], 0.0)), 1.0)),
            float(np.asarray(orders, dtype=float)[idx]))


# ---------------------------------------------------------------------------
# Event -> curve
# ---------------------------------------------------------------------------
def _effective_gaussian(event: DpEvent):
    """σ of the single Gaussian equivalent to a tree of Gaussians, else None."""
    if isinstance(event, GaussianEvent):
        return event.noise_multiplier
    if isinstance(event, SelfComposedEvent):
        sigma = _effective_gaussian(event.event)
        if sigma is None or event.count == 0:
            return None
        return sigma / math.sqrt(event.count)
    if isinstance(event, ComposedEvent) and event.events:
        inv = 0.0
        for e in event.events:
            sigma = _effective_gaussian(e)
            if sigma is None:
                return None
            inv += sigma ** -2
        return inv ** -0.5
    return None


def _pure_epsilon_of(event: DpEvent) -> float:
    """ε(∞) of an unsampled tree (sum over composition), inf if unknown."""
    if hasattr(event, "pure_epsilon"):
        return float(event.pure_epsilon())
    if isinstance(event, SelfComposedEvent):
        return event.count * _pure_epsilon_of(event.event) if event.count else 0.0
    if isinstance(event, ComposedEvent):
        return float(sum(_pure_epsilon_of(e) for e in event.events))
    if isinstance(event, ParallelComposedEvent):
        return float(max(_pure_epsilon_of(e) for e in event.events))
    return math.inf


def _divergence_lower_bound(event: DpEvent) -> float:
    """A lower bound on the event's RDP at every order α ≥ 1 (0 if unknown).

    RDP is non-decreasing in α, so it is at least the KL divergence (α = 1):
    exact for Gaussian (1/(2σ²)), Laplace (ε + e^{−ε} − 1) and randomized
    response (ε·tanh(ε/2)); Pinsker's 2·TV² with TV = q·(2Φ(1/(2σ)) − 1)
    for the Poisson-subsampled Gaussian. Used only to prune orders.
    """
    if isinstance(event, GaussianEvent):
        return 0.5 / event.noise_multiplier ** 2
    if isinstance(event, LaplaceEvent):
        eps = 1.0 / event.scale
        return eps + math.expm1(-eps)
    if isinstance(event, LineSearchEvent):
        if event.form == "gaussian":
            return 0.5 / event.gaussian_equivalent_noise_multiplier() ** 2
        if event.analysis == "paper":
            half = event.epsilon_bt / 2.0
            return 2.0 * (half + math.expm1(-half))
        return event.epsilon_bt * math.tanh(event.epsilon_bt / 2.0)
    if isinstance(event, PureEvent):
        return event.epsilon * math.tanh(event.epsilon / 2.0)
    if isinstance(event, PoissonSampledEvent):
        sigma = _effective_gaussian(event.event)
        if sigma is None:
            return 0.0
        tv = event.sample_rate * math.erf(1.0 / (2.0 * math.sqrt(2.0) * sigma))
        return 2.0 * tv * tv
    if isinstance(event, SelfComposedEvent):
        return event.count * _divergence_lower_bound(event.event)
    if isinstance(event, ComposedEvent):
        return float(sum(_divergence_lower_bound(e) for e in event.events))
    return 0.0


def _has_exact_convex_curve(event: DpEvent) -> bool:
    """True if the accountant's curve for ``event`` is an exact Rényi curve.

    Exact curves have a convex cumulant and are non-decreasing, which the
    order pruning relies on; bounds (Zhu-Wang, WBK) are evaluated on the
    full grid instead.
    """
    if isinstance(event, (GaussianEvent, LaplaceEvent, PureEvent, LineSearchEvent)):
        return True
    if isinstance(event, PoissonSampledEvent):
        return _effective_gaussian(event.event) is not None
    if isinstance(event, ShuffledEvent):
        return False
    if isinstance(event, (SelfComposedEvent, ComposedEvent)):
        return all(_has_exact_convex_curve(e) for e in event.children())
    return False


class RdpAccountant(Accountant):
    """fastdp's Rényi-DP accountant (the fast default).

    Parameters
    ----------
    orders : sequence of float, optional
        Rényi orders (> 1). Default :data:`DEFAULT_ORDERS` (dp_accounting's).
    conversion : {"improved", "classic"}, default "improved"
        RDP → (ε, δ) rule: Balle et al. 2020 / Canonne-Kamath-Steinke
        (dp_accounting's default), or Mironov 2017's ε = RDP + log(1/δ)/(α−1).
    fractional_series : {"exact", "absolute"}, default "exact"
        Sampled-Gaussian series at fractional orders: exact signed sum, or
        the magnitude sum (upper bound) dp_accounting uses.
    poisson_amplification : {"best", "zhu_wang_general"}, default "best"
        ``"best"``: exact sampled-Gaussian RDP for Gaussians, Zhu-Wang's
        general bound for other mechanisms. ``"zhu_wang_general"``: the
        general bound (with its factor 3) for every Poisson-sampled event,
        as spec 003's paper does (valid but looser; for reproductions).

    Notes
    -----
    Every event of :mod:`fastdp.privacy.events` is supported except
    ``ApproxDpEvent`` with δ > 0 (an (ε, δ) guarantee has no Rényi curve:
    refused with :class:`~fastdp.exceptions.PrivacyAnalysisError`, use the
    pure or PLD accountant; with δ = 0 it is a pure ε-DP event). Curves of
    mechanisms are cached per (event, orders). Events containing a
    :class:`~fastdp.privacy.events.ShuffledEvent` are accounted without
    amplification (``epsilon``); :meth:`report` adds the labelled Poisson
    what-if number.
    """

    name = "rdp"

    def __init__(self, orders=None, conversion: str = "improved",
                 fractional_series: str = "exact", poisson_amplification: str = "best"):
        self.orders = DEFAULT_ORDERS.copy() if orders is None else np.sort(np.unique(_as_orders(orders)))
        if conversion not in _CONVERSIONS:
            raise ValidationError(f"conversion must be one of {_CONVERSIONS}, got {conversion!r}.")
        if fractional_series not in ("exact", "absolute"):
            raise ValidationError("fractional_series must be 'exact' or 'absolute'.")
        self.conversion = conversion
        self.fractional_series = fractional_series
        if poisson_amplification not in ("best", "zhu_wang_general"):
            raise ValidationError(
                "poisson_amplification must be 'best' or 'zhu_wang_general'.")
        self.poisson_amplification = poisson_amplification
        is_int = _is_integer(self.orders)
        ints = self.orders[is_int]
        # Stage 1 of the search: integer orders up to 64 (all integers if the
        # grid has fewer than two of them there).
        first = ints[ints <= 64.0]
        self._stage1 = first if first.size >= 2 else ints
        self._stage2 = np.setdiff1d(self.orders, self._stage1)
        self._prepare_lower_bounds()
        self._cache = {}

    def __repr__(self):
        return (f"RdpAccountant(orders=<{self.orders.size} orders>, conversion={self.conversion!r}, "
                f"fractional_series={self.fractional_series!r}, "
                f"poisson_amplification={self.poisson_amplification!r})")

    def clear_cache(self) -> None:
        """Forget cached curves (for benchmarks; results do not change)."""
        self._cache.clear()

    # -- curves ------------------------------------------------------------
    def rdp_curve(self, event: DpEvent, view: str = "guaranteed", orders=None) -> np.ndarray:
        """RDP of ``event`` at ``orders`` (default: the accountant's grid)."""
        check_event(event)
        orders = self.orders if orders is None else _as_orders(orders)
        return self._curve(event, orders, view)

    def _curve(self, event: DpEvent, orders: np.ndarray, view: str) -> np.ndarray:
        key = (event, view, orders.tobytes())
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        value = self._compute_curve(event, orders, view)
        if len(self._cache) > 4096:
            self._cache.clear()
        value.setflags(write=False)
        self._cache[key] = value
        return value

    def _compute_curve(self, event, orders, view):
        if isinstance(event, NonPrivateEvent):
            return np.full(orders.shape, np.inf)
        if isinstance(event, GaussianEvent):
            return rdp_gaussian(event.noise_multiplier, orders)
        if isinstance(event, LaplaceEvent):
            return rdp_laplace(event.scale, orders)
        if isinstance(event, LineSearchEvent):
            return rdp_line_search(event, orders)
        if isinstance(event, PureEvent):
            return rdp_pure(event.epsilon, orders)
        if isinstance(event, ApproxDpEvent):
            if event.delta > 0.0:
                raise PrivacyAnalysisError(f"the RDP accountant cannot analyse {event!r}: "
                                           + _APPROX_NO_RDP)
            return rdp_pure(event.epsilon, orders)
        if isinstance(event, PrivacyFilterEvent):
            return rdp_privacy_filter(event, orders)
        if isinstance(event, RepeatedSelectionEvent):
            return self._repeated_selection_curve(event, orders, view)
        if isinstance(event, SelfComposedEvent):
            if event.count == 0:
                return np.zeros(orders.shape)
            return event.count * self._curve(event.event, orders, view)
        if isinstance(event, ComposedEvent):
            total = np.zeros(orders.shape)
            for e in event.events:
                total = total + self._curve(e, orders, view)
            return total
        if isinstance(event, ParallelComposedEvent):   # disjoint parts: the maximum
            return np.max([self._curve(e, orders, view) for e in event.events], axis=0)
        if isinstance(event, ShuffledEvent):
            return self._curve(event.view(view), orders, view)
        if isinstance(event, PoissonSampledEvent):
            sigma = _effective_gaussian(event.event)
            if sigma is not None and self.poisson_amplification == "best":
                return rdp_poisson_gaussian(event.sample_rate, sigma, orders, self.fractional_series)
            return rdp_poisson_general(
                event.sample_rate, lambda o: self._curve(event.event, np.asarray(o, float), view), orders)
        if isinstance(event, FixedSizeSampledEvent):
            inner = event.replace_one_event
            sigma = _effective_gaussian(inner)
            if sigma is not None:
                return rdp_fixed_size_gaussian(event.sample_rate, sigma, orders)
            return rdp_fixed_size_general(
                event.sample_rate, lambda o: self._curve(inner, np.asarray(o, float), view),
                orders, _pure_epsilon_of(inner))
        raise PrivacyAnalysisError(
            f"the RDP accountant has no analysis for {type(event).__name__}.")

    def _repeated_selection_curve(self, event, orders, view):
        """Best-of-K curve at ``orders``; the second order λ̂ ranges over the whole grid."""
        def base(at):
            return np.max([self._curve(e, at, view) for e in event.events], axis=0)

        full = base(self.orders)
        at = full if np.array_equal(orders, self.orders) else base(orders)
        pure = event.candidate_pure_epsilon() if event.distribution == "geometric" else math.inf
        return rdp_repeated_selection(event.repetitions, orders, at, self.orders, full,
                                      pure_epsilon=pure, conversion=self.conversion)

    # -- conversion with pruning ------------------------------------------
    def _prepare_lower_bounds(self):
        """Index tables for :meth:`_lower_bounds` (depend on the grid only)."""
        xs = np.concatenate(([1.0], self._stage1))
        t = self._stage2
        pos = np.searchsorted(xs, t, side="right") - 1          # xs[pos] <= t
        lo = np.maximum(pos, 1)                 # secant through xs[lo-1], xs[lo] <= t
        r0 = np.minimum(pos + 1, xs.size - 2)   # secant through xs[r0], xs[r0+1] >= t
        self._lb = dict(
            xs=xs, pos=pos, lo=lo, r0=r0, has_left=(pos >= 1),
            has_right=(pos + 2 < xs.size),
            below_scale=np.where(pos >= 1, (t - 1.0) / np.maximum(xs[pos] - 1.0, 1e-300), 0.0),
            dx_left=(t - xs[lo]) / (xs[lo] - xs[lo - 1]),
            dx_right=(xs[r0] - t) / (xs[r0 + 1] - xs[r0]),
            inv_tm1=1.0 / (t - 1.0),
        )

    def _lower_bounds(self, cgf1: np.ndarray) -> np.ndarray:
        """Rigorous lower bounds of the RDP at the stage-2 orders.

        Uses that the cumulant K(α) = (α−1)·RDP(α) of a true Rényi curve is
        convex with K(1) = 0 and that RDP is non-decreasing in α.
        """
        lb = self._lb
        ks = np.concatenate(([0.0], cgf1))
        pos, lo, r0 = lb["pos"], lb["lo"], lb["r0"]
        bound = ks[pos] * lb["below_scale"]                                   # monotone
        from_left = ks[lo] + lb["dx_left"] * (ks[lo] - ks[lo - 1])                  # convex, left
        bound = np.where(lb["has_left"], np.maximum(bound, from_left), bound)
        from_right = ks[r0] - lb["dx_right"] * (ks[r0 + 1] - ks[r0])                # convex, right
        bound = np.where(lb["has_right"], np.maximum(bound, from_right), bound)
        return np.maximum(bound, 0.0) * lb["inv_tm1"]

    def _epsilon_and_order(self, event, delta, view):
        if not event.is_private:
            return math.inf, float("nan")
        exact = (self.fractional_series == "exact" and self.poisson_amplification == "best"
                 and _has_exact_convex_curve(event))
        if not exact or self._stage1.size < 2:
            curve = self._curve(event, self.orders, view)
            eps, order = epsilon_from_rdp(self.orders, curve, delta, self.conversion)
            return eps, order
        curve1 = self._curve(event, self._stage1, view)
        eps1 = _epsilon_per_order(self._stage1, curve1, delta, self.conversion)
        i = int(np.argmin(eps1))
        best, best_order = float(eps1[i]), float(self._stage1[i])
        if self._stage2.size and np.all(np.isfinite(curve1)):
            lower = np.maximum(self._lower_bounds((self._stage1 - 1.0) * curve1),
                               _divergence_lower_bound(event))
            eps_lower = _epsilon_per_order(self._stage2, lower, delta, self.conversion)
            candidates = self._stage2[eps_lower < best]
            if candidates.size:
                curve2 = self._curve(event, candidates, view)
                eps2 = _epsilon_per_order(candidates, curve2, delta, self.conversion)
                j = int(np.argmin(eps2))
                if eps2[j] < best:
                    best, best_order = float(eps2[j]), float(candidates[j])
        elif self._stage2.size:
            curve = self._curve(event, self.orders, view)
            return epsilon_from_rdp(self.orders, curve, delta, self.conversion)
        return max(0.0, best), best_order

    def _epsilon(self, event, delta, view):
        return self._epsilon_and_order(event, delta, view)[0]

    def _delta(self, event, epsilon, view):
        if not event.is_private:
            return 1.0
        return delta_from_rdp(self.orders, self._curve(event, self.orders, view),
                              epsilon, self.conversion)[0]

    # -- public extras -----------------------------------------------------
    def epsilon_and_order(self, event: DpEvent, delta: float):
        """Guaranteed ε at ``delta`` and the Rényi order achieving it."""
        check_event(event)
        return self._epsilon_and_order(event, check_delta(delta), "guaranteed")

    def delta_and_order(self, event: DpEvent, epsilon: float):
        """Guaranteed δ at ``epsilon`` and the Rényi order achieving it."""
        check_event(event)
        if not event.is_private:
            return 1.0, float("nan")
        return delta_from_rdp(self.orders, self._curve(event, self.orders, "guaranteed"),
                              check_epsilon(epsilon), self.conversion)
