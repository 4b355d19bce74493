"""Privacy filters: every budget a solver consults while it runs.

Adaptive solvers (spec 003's line searches, DP-AGD) decide *during* a run how
many private queries they make and with which noise, so they cannot be
accounted before they start.  They ask a filter instead.  Every filter has
one interface:

``can_afford(event)``
    True if releasing ``event`` (or a sequence of events released together)
    now keeps the run within the budget.
``charge(event)``
    Record one released event; returns its cost in the filter's currency.
``spent()``
    The ε spent so far, at the filter's δ (``nan`` where the filter has no δ).
``event()``
    The privacy event of the whole run (what a ledger is charged).

A solver never computes ε or ρ itself: it describes each release as an event
(:mod:`fastdp.privacy.events`) and the filter prices it with the privacy
layer's accountants (:mod:`fastdp.privacy.rdp`, :mod:`fastdp.privacy.zcdp`,
:mod:`fastdp.privacy.pure`).

==========================  ================================  =====================================
filter                      currency                          guarantee of the run
==========================  ================================  =====================================
:class:`RdpBudgetFilter`    RDP at integer orders 2..500      (ε_spent, δ), "∃ order" (the paper's)
:class:`ZcdpFilter`         zCDP ρ, cap fixed in advance      the cap: ``PrivacyFilterEvent.zcdp``
:class:`RunningZcdpBudget`  zCDP ρ, running remainder         composition of the calls that ran
:class:`PureDpBudget`       pure ε (basic composition)        composition of the calls that ran
==========================  ================================  =====================================

The RDP filter's sampled calls take ``sample_rate`` and ``fresh_batch``
keywords (joint amplification of the calls sharing a batch); the zCDP
filters accept and ignore them (no amplification is claimed).
"""

from __future__ import annotations

import abc
import math

import numpy as np

from fastdp._validation import check_delta, check_positive
from fastdp.exceptions import PrivacyAnalysisError, ValidationError
from fastdp.privacy.events import ComposedEvent, PoissonSampledEvent, PrivacyFilterEvent
from fastdp.privacy.pure import PureDPAccountant, basic_composition
from fastdp.privacy.rdp import RdpAccountant, rdp_poisson_general
from fastdp.privacy.zcdp import ZcdpAccountant, zcdp_of

__all__ = [
    "PrivacyFilter",
    "RdpBudgetFilter",
    "ZcdpFilter",
    "RunningZcdpBudget",
    "PureDpBudget",
    "AMPLIFICATIONS",
    "paper_orders",
    "rdp_poisson_tight_all",
]


def _as_events(events):
    """A tuple of events from one event or a sequence of them."""
    return tuple(events) if isinstance(events, (list, tuple)) else (events,)


class PrivacyFilter(abc.ABC):
    """The interface of every filter (module docstring).

    Attributes
    ----------
    is_guarantee : bool
        False only for unproven ablations; :meth:`spent` is then not a guarantee.
    n_charges : int
        Number of :meth:`charge` calls.
    """

    is_guarantee = True

    @abc.abstractmethod
    def can_afford(self, events, **batch) -> bool:
        """True if releasing ``events`` now stays within the budget."""

    @abc.abstractmethod
    def charge(self, event, **batch):
        """Record one released event; returns its cost."""

    @abc.abstractmethod
    def spent(self) -> float:
        """ε spent so far at the filter's δ (nan without one)."""

    @abc.abstractmethod
    def event(self):
        """The privacy event of the run."""

    def epsilon_spent(self) -> float:
        """Alias of :meth:`spent`."""
        return self.spent()

    def open_batch(self):
        """Start a new batch (only the RDP filter groups calls by batch)."""

    def close_batch(self):
        """Finish the open batch (only the RDP filter groups calls by batch)."""

    def best_order(self) -> float:
        """Rényi order of :meth:`spent` (nan when not defined)."""
        return math.nan


# ---------------------------------------------------------------------------
# Running RDP budget (spec 003 §4.3)
# ---------------------------------------------------------------------------
AMPLIFICATIONS = ("zw_general", "sgm_exact", "zw_tight_all")
_ACCOUNTANT_MODE = {"zw_general": "zhu_wang_general", "sgm_exact": "best",
                    "zw_tight_all": "zhu_wang_general"}


def paper_orders(max_order=500):
    """The integer Rényi orders 2..max_order of spec 003 §4.3."""
    return np.arange(2.0, float(max_order) + 1.0)


def rdp_poisson_tight_all(sample_rate, curve, orders):
    """Zhu–Wang's bound *without* the factor 3 (ablation ``"zw_tight_all"``).

    (1/(a−1))·log[(1−q)^{a−1}(aq−q+1) + Σ_{l=2..a} C(a,l) q^l (1−q)^{a−l} e^{(l−1)ε(l)}],
    never above the unsampled curve: :func:`fastdp.privacy.rdp.rdp_poisson_general`
    with ``factor_three=False``.  This is what autodp-like accountants use for
    every mechanism; it is not proven for the sparse-vector line search, so
    results using it are not guarantees.
    """
    return rdp_poisson_general(sample_rate, curve, orders, factor_three=False)


class RdpBudgetFilter(PrivacyFilter):
    """Per-order remaining RDP budget of DP-BLSGD (spec 003 §4.3).

    The filter keeps the remaining budget at every integer Rényi order
    a ∈ {2, …, 500},

        rem[a] = ε − log(1/δ)/(a − 1)                       (Proposition 1)

    checks before each call whether it is affordable and subtracts the
    (subsampling-amplified) RDP curve of every call it is told about. Every
    charged call is recorded as a privacy event, so the run's event is the
    composition of exactly what was released; :meth:`event` returns it and
    :meth:`spent` gives ``min_a [ε − rem[a]] ≤ ε`` (classic conversion, as in
    the paper).

    Parameters
    ----------
    epsilon : float
        Target ε > 0.
    delta : float
        Target δ in (0, 1).
    orders : array of int, optional
        Integer Rényi orders ≥ 2 (default 2..500).
    amplification : {"zw_general", "sgm_exact", "zw_tight_all"}
        How a Poisson-sampled call (rate q < 1) is amplified.
        ``"zw_general"`` (default, faithful): Zhu & Wang (2019) general bound
        with its factor 3 for every call, never above the unsampled curve;
        ``"sgm_exact"``: the exact sampled-Gaussian RDP for Gaussian gradient
        queries, the general bound for the sparse-vector line search;
        ``"zw_tight_all"``: the general bound *without* the factor 3 for every
        call, SVT included (autodp-like). **Not proven for the sparse vector
        technique; ablation only** — :meth:`spent` is then not a guarantee,
        and :attr:`is_guarantee` is False.
    check : {"unamplified", "amplified"}
        ``"unamplified"`` (paper: a call is affordable if some order has
        ``rem[a] >`` the call's *unsampled* curve) or ``"amplified"`` (compare
        with the amplified cost actually charged).
    fixed_order : int, optional
        Only this order decides affordability (strict RDP-filter mode, Feldman
        & Zrnic 2021). Default ``None``: "∃a" semantics, as in the paper,
        which chooses the order after the fact (standard practice, not covered
        by the filter theorem; spec 003 §4.3).
    batch_accounting : {"joint", "separate"}
        ``"joint"`` (default: calls sharing a batch — the gradient and every
        line-search retry — are amplified together as one mechanism on the
        batch; the increments telescope to amp(total)) or ``"separate"`` (the
        paper, spec 003 §4.4: each call on the same batch amplified as if it
        had its own sample). Separate amplification is **optimistic**: at
        order 2 the bound log(1 + q²(e^{ε(2)} − 1)) is convex in ε(2), so
        Σ amp(c_j) < amp(Σ c_j); it is kept to reproduce the paper's iteration
        counts. Joint pays the factor-3 floor of the general bound once per
        batch instead of once per call. Call :meth:`open_batch` when a new
        batch is drawn.

    Notes
    -----
    Privacy meaning: the filter itself releases nothing. The run it guards is
    (ε_spent, δ)-DP under add/remove adjacency, with ``ε_spent ≤ ε``, as the
    composition of the recorded events.
    """

    def __init__(self, epsilon, delta, *, orders=None, amplification="zw_general",
                 check="unamplified", fixed_order=None, batch_accounting="joint"):
        epsilon = check_positive("epsilon", epsilon)
        delta = check_delta(delta)
        if amplification not in AMPLIFICATIONS:
            raise ValidationError(
                f"amplification must be one of {AMPLIFICATIONS}; got {amplification!r}.")
        if check not in ("unamplified", "amplified"):
            raise ValidationError(f"check must be 'unamplified' or 'amplified'; got {check!r}.")
        if batch_accounting not in ("separate", "joint"):
            raise ValidationError(
                f"batch_accounting must be 'separate' or 'joint'; got {batch_accounting!r}.")
        self.orders = paper_orders() if orders is None else np.asarray(orders, dtype=float)
        if (self.orders.ndim != 1 or self.orders.size == 0 or np.any(self.orders < 2)
                or np.any(self.orders != np.round(self.orders))):
            raise ValidationError("orders must be integers >= 2.")
        self.epsilon = epsilon
        self.delta = delta
        self.amplification = amplification
        self.check = check
        self.batch_accounting = batch_accounting
        self.fixed_order = None
        self._mask = np.ones(self.orders.size, dtype=bool)
        if fixed_order is not None:
            hit = np.flatnonzero(self.orders == float(fixed_order))
            if hit.size != 1:
                raise ValidationError(f"fixed_order {fixed_order!r} is not among the orders.")
            self.fixed_order = int(fixed_order)
            self._mask = self.orders == float(fixed_order)
        self.rem = self.epsilon - math.log(1.0 / self.delta) / (self.orders - 1.0)
        self._accountant = RdpAccountant(orders=self.orders, conversion="classic",
                                         poisson_amplification=_ACCOUNTANT_MODE[amplification])
        self._tight_cache = {}
        self._events = []          # closed events, in order
        self._batch = None         # (rate, [inner events]) of the open joint batch
        self._batch_curve = None   # amplified curve already charged for the open batch
        self.n_charges = 0

    # ------------------------------------------------------------------ curves
    @property
    def is_guarantee(self):
        """False for the unproven ``"zw_tight_all"`` ablation."""
        return self.amplification != "zw_tight_all"

    def unamplified(self, event):
        """RDP curve of ``event`` on its batch (no subsampling)."""
        return self._accountant.rdp_curve(event)

    def amplified(self, event, sample_rate):
        """RDP curve of ``event`` run on a Poisson sample of rate ``sample_rate``."""
        if sample_rate >= 1.0:
            return self.unamplified(event)
        if self.amplification == "zw_tight_all":
            key = (event, float(sample_rate))
            if key not in self._tight_cache:
                if len(self._tight_cache) > 4096:
                    self._tight_cache.clear()
                self._tight_cache[key] = rdp_poisson_tight_all(
                    sample_rate, lambda o: self._accountant.rdp_curve(event, orders=o),
                    self.orders)
            return self._tight_cache[key]
        return self._accountant.rdp_curve(PoissonSampledEvent(sample_rate, event))

    # ------------------------------------------------------------ the filter
    def _increment(self, events, sample_rate, fresh_batch=False):
        """Amplified cost that charging ``events`` (in order) now would subtract."""
        if sample_rate >= 1.0 or self.batch_accounting == "separate" or fresh_batch:
            return sum(self.amplified(e, sample_rate) for e in events)
        rate, inner = self._batch if self._batch is not None else (sample_rate, [])
        if rate != sample_rate:
            raise ValidationError("a joint batch has a single sample rate.")
        total = self.amplified(ComposedEvent(tuple(inner) + tuple(events)), sample_rate)
        before = self._batch_curve if self._batch_curve is not None else 0.0
        return np.maximum(total - before, 0.0)

    def can_afford(self, events, sample_rate=1.0, fresh_batch=False):
        """True if some allowed order has ``rem[a] >`` the cost of ``events``.

        ``events`` is one event or a sequence of events that would all be
        charged (e.g. a gradient followed by a line search) on the open batch
        (a new one if none is open), or each on its own fresh batch with
        ``fresh_batch=True`` (CHEB's second gradient). With ``check="unamplified"`` the cost is
        the sum of their unsampled curves (the paper's check); under joint
        accounting it is never less than the increment actually charged, so
        the budget can never go negative at the order that passed.
        """
        events = _as_events(events)
        increment = self._increment(events, sample_rate, fresh_batch)
        if self.check == "unamplified":
            cost = sum(self.unamplified(e) for e in events)
            if self.batch_accounting == "joint":
                cost = np.maximum(cost, increment)
        else:
            cost = increment
        return bool(np.any((self.rem > cost) & self._mask))

    def open_batch(self):
        """Start a new batch (joint accounting groups the calls on it)."""
        self.close_batch()

    def close_batch(self):
        """Finish the open joint batch and record its event."""
        if self._batch is not None:
            rate, inner = self._batch
            self._events.append(PoissonSampledEvent(rate, ComposedEvent(tuple(inner))))
        self._batch = None
        self._batch_curve = None

    def charge(self, event, sample_rate=1.0, fresh_batch=False):
        """Subtract the cost of one released call; returns the amplified cost.

        ``fresh_batch=True``: the call ran on its own freshly sampled batch
        (amplified alone; the open joint batch is left untouched).
        """
        cost = self._increment((event,), sample_rate, fresh_batch)
        self.rem = self.rem - cost
        self.n_charges += 1
        if sample_rate >= 1.0:
            self._events.append(event)
        elif self.batch_accounting == "separate" or fresh_batch:
            self._events.append(PoissonSampledEvent(sample_rate, event))
        else:
            if self._batch is None:
                self._batch = (sample_rate, [])
            self._batch[1].append(event)
            self._batch_curve = cost if self._batch_curve is None else self._batch_curve + cost
        return cost

    # ----------------------------------------------------------------- report
    def spent(self):
        """min over the orders of ε − rem[a] (classic conversion)."""
        return float(np.min(self.epsilon - self.rem))

    def best_order(self):
        """The order at which :meth:`spent` is attained."""
        return float(self.orders[int(np.argmin(self.epsilon - self.rem))])

    def event(self):
        """Composition of every charged call (closes an open joint batch)."""
        self.close_batch()
        return ComposedEvent(tuple(self._events))


# ---------------------------------------------------------------------------
# zCDP filters
# ---------------------------------------------------------------------------
class ZcdpFilter(PrivacyFilter):
    """zCDP privacy filter with a cap fixed before the run (the estimator form).

    The planned event is the cap, ``PrivacyFilterEvent.zcdp(rho_cap)``, and
    the filter halts the run before any query whose zCDP cost
    (:func:`~fastdp.privacy.zcdp.zcdp_of`) would take the running total
    above the cap.

    Guarantee (what the cap event states). Every query is ρ_t-zCDP under
    add/remove adjacency with ρ_t fixed before the query runs. The filter
    admits a query only if Σ ρ_t ≤ ρ_cap still holds afterwards, on every
    path. By the RDP filter theorem of Feldman & Zrnic (2021, Thm 3.1),
    applied at each order α > 1 to the costs α·ρ_t (the zCDP filter of
    Whitehouse et al. 2022), the transcript is (α, α·ρ_cap)-RDP at *every*
    order α > 1 simultaneously, i.e. ρ_cap-zCDP, so converting to (ε, δ) at
    the best order after the fact is sound. This is stronger than the paper's
    running "∃ order" budget of :class:`RdpBudgetFilter`, which the filter
    theorem does not cover.

    No amplification by subsampling is claimed. The gradient and every
    line-search retry of an iteration read the same Poisson batch, and later
    calls are chosen after seeing earlier outputs on it, so no amplification
    theorem for a fresh sample applies to them. The charge of every call is
    its *unsampled* cost, which is sound for Poisson batches: condition on
    every record's inclusion bits; for each fixed set of bits the run is a
    fully adaptive composition over fixed batches that differ in at most the
    one record, the filter theorem bounds its Rényi divergence by the cap,
    and the Rényi divergence of the mixture over the bits (whose law does not
    depend on the record) is at most the largest one (joint
    quasi-convexity). This needs the batch normaliser to be the public
    expected batch size (``normalize="expected"``).

    Floating point: costs are summed with ``math.fsum`` (correctly rounded),
    and a query is admitted only if the fsum including it is ≤ the cap.

    Parameters
    ----------
    rho_cap : float
        The cap ρ (> 0): the run is ρ_cap-zCDP under add/remove adjacency.
    delta : float, optional
        Only for the ε reports (:meth:`spent`).
    accountant : accountant, optional
        Converts ρ to ε for the reports (default fastdp's RDP accountant).

    ``sample_rate``, ``fresh_batch`` and the batch calls are accepted for
    interface compatibility and ignored: every call is charged unsampled.
    """

    def __init__(self, rho_cap, delta=None, accountant=None):
        try:
            self.rho_cap = check_positive("the zCDP cap", rho_cap)
        except ValidationError:
            raise ValidationError(
                f"the zCDP cap must be a finite number > 0; got {rho_cap!r}.") from None
        self.delta = delta
        self._accountant = accountant
        self._costs = []
        self._events = []
        self.n_charges = 0

    # ------------------------------------------------------------ the filter
    @property
    def rho_spent(self):
        """Σ ρ_t over the charged calls (≤ ``rho_cap``)."""
        return math.fsum(self._costs)

    @property
    def rem(self):
        """Remaining ρ, as a one-element array (the RDP filter reports per order)."""
        return np.array([self.rho_cap - self.rho_spent])

    @staticmethod
    def _cost(events):
        return [zcdp_of(e) for e in _as_events(events)]

    def can_afford(self, events, sample_rate=1.0, fresh_batch=False):
        """True if charging ``events`` keeps the total within the cap."""
        return math.fsum(self._costs + self._cost(events)) <= self.rho_cap

    def charge(self, event, sample_rate=1.0, fresh_batch=False):
        """Record one released call; refuses (PrivacyAnalysisError) a call over the cap."""
        cost = self._cost(event)
        if math.fsum(self._costs + cost) > self.rho_cap:
            raise PrivacyAnalysisError("internal error: a call over the privacy filter's cap ran.")
        self._costs.extend(cost)
        self._events.append(event)
        self.n_charges += 1
        return cost[0]

    # ----------------------------------------------------------------- report
    def event(self):
        """The planned event: ``PrivacyFilterEvent.zcdp(rho_cap)``."""
        return PrivacyFilterEvent.zcdp(self.rho_cap)

    def consumed_event(self):
        """Composition of the calls that ran (unsampled, as charged)."""
        return ComposedEvent(tuple(self._events))

    def _epsilon_of_rho(self, rho):
        if self.delta is None:
            return math.nan
        if rho <= 0.0:
            return 0.0
        if self._accountant is None:
            return ZcdpAccountant().epsilon_of_rho(rho, self.delta)
        return float(self._accountant.epsilon(PrivacyFilterEvent.zcdp(rho), self.delta))

    def spent(self):
        """ε at ``delta`` of the consumed ρ (nan without ``delta``); ≤ :meth:`epsilon_cap`."""
        return self._epsilon_of_rho(self.rho_spent)

    def epsilon_cap(self):
        """ε at ``delta`` of the cap (what a ledger is charged)."""
        return self._epsilon_of_rho(self.rho_cap)


class RunningZcdpBudget(ZcdpFilter):
    """DP-AGD's own running zCDP budget (Lee & Kifer 2018, the function form).

    ``left`` is the ρ not yet spent; a release of cost c (its
    :func:`~fastdp.privacy.zcdp.zcdp_of`) is affordable unless ``left < c``,
    and charging it subtracts c.  It is a zCDP filter (every charged call is
    ρ_t-zCDP, Σ ρ_t ≤ ρ_total on every path), but the run's event is the
    composition of the calls that ran, not the cap.

    Parameters
    ----------
    rho_total : float
        The budget ρ (> 0).
    delta : float, optional
        Only for the ε reports (:meth:`spent`).
    """

    def __init__(self, rho_total, delta=None):
        super().__init__(rho_total, delta)
        self.left = self.rho_cap

    def can_afford(self, events, sample_rate=1.0, fresh_batch=False):
        """True unless ``left`` is below the summed cost of ``events``."""
        return not self.left < sum(self._cost(events))

    def charge(self, event, sample_rate=1.0, fresh_batch=False):
        """Subtract the cost of one released call from ``left``; returns it."""
        (cost,) = self._cost(event)
        self.left -= cost
        self._costs.append(cost)
        self._events.append(event)
        self.n_charges += 1
        return cost

    def event(self):
        """Composition of the calls that ran."""
        return self.consumed_event()


# ---------------------------------------------------------------------------
# Pure DP
# ---------------------------------------------------------------------------
class PureDpBudget(PrivacyFilter):
    """A pure ε-DP budget: basic composition of the pure ε of the charged events.

    A release is affordable if the basic composition (Σ ε_i, ``math.fsum``)
    including it stays ≤ ``epsilon``; each event's ε is that of
    :class:`~fastdp.privacy.pure.PureDPAccountant` (Laplace 1/b, amplification
    by sampling without replacement or Poisson sampling, composition).

    Parameters
    ----------
    epsilon : float
        The budget (> 0, ``inf`` allowed: nothing is refused, everything is
        recorded).

    Notes
    -----
    Privacy meaning: the run is (:meth:`spent`, 0)-DP under the events'
    adjacency, as the composition of the recorded events (:meth:`event`).
    """

    def __init__(self, epsilon):
        self.epsilon = check_positive("epsilon", epsilon, allow_inf=True)
        self._accountant = PureDPAccountant()
        self._costs = []
        self._events = []
        self.n_charges = 0

    def _cost(self, events):
        return [basic_composition(self._accountant.pure_epsilons(e)) for e in _as_events(events)]

    def can_afford(self, events, **batch):
        """True if charging ``events`` keeps Σ ε within the budget."""
        return math.fsum(self._costs + self._cost(events)) <= self.epsilon

    def charge(self, event, **batch):
        """Record one released event; returns its pure ε."""
        (cost,) = self._cost(event)
        if math.fsum(self._costs + [cost]) > self.epsilon:
            raise PrivacyAnalysisError("internal error: a release over the pure-DP budget ran.")
        self._costs.append(cost)
        self._events.append(event)
        self.n_charges += 1
        return cost

    def spent(self):
        """Σ ε of the charged events (``math.fsum``)."""
        return math.fsum(self._costs)

    def event(self):
        """Composition of the charged events."""
        return ComposedEvent(tuple(self._events))
