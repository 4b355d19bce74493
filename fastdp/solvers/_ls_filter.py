"""A zCDP privacy filter for the adaptive line-search solvers (estimator form).

DP-BLSGD with CHEB, DP-BLSGD-AC, DP-BLGD and DP-AGD decide *during* the run
how many private queries they make and with which budgets, so the privacy
event of a run is not known before it starts. The scikit-learn estimators need
one (to reserve it in a ledger before training). :class:`ZcdpFilter` gives it:
the planned event is the cap, ``PrivacyFilterEvent.zcdp(rho_cap)``, and the
filter halts the run before any query whose zCDP cost would take the running
total above the cap.

Guarantee (what the cap event states). Every query the solvers make is
ρ_t-zCDP under add/remove adjacency with ρ_t fixed before the query runs
(:func:`zcdp_of`). The filter admits a query only if Σ ρ_t ≤ ρ_cap still
holds afterwards, on every path. By the RDP filter theorem of Feldman & Zrnic
(2021, Thm 3.1), applied at each order α > 1 to the costs α·ρ_t (the zCDP
filter of Whitehouse et al. 2022), the transcript is (α, α·ρ_cap)-RDP at
*every* order α > 1 simultaneously, i.e. ρ_cap-zCDP, so converting to
(ε, δ) at the best order after the fact is sound (classic Mironov 2017 or the
improved Balle et al. 2020 conversion; both hold for any mechanism with that
RDP bound). This is stronger than the paper's running "∃ order" budget of
:class:`~fastdp.solvers._ls_budget.RdpBudgetFilter`, which the filter theorem
does not cover.

No amplification by subsampling is claimed. The gradient and every
line-search retry of an iteration read the same Poisson batch, and later
calls are chosen after seeing earlier outputs on it, so no amplification
theorem for a fresh sample applies to them. The charge of every call is its
*unsampled* cost, which is sound for Poisson batches: condition on every
record's inclusion bits; for each fixed set of bits the run is a fully
adaptive composition over fixed batches that differ in at most the one
record, the filter theorem bounds its Rényi divergence by the cap, and the
Rényi divergence of the mixture over the bits (whose law does not depend on
the record) is at most the largest one (joint quasi-convexity). This needs
the batch normaliser to be the public expected batch size (``normalize=
"expected"``), which the filter mode requires.

Floating point: costs are summed with ``math.fsum`` (correctly rounded), and a
query is admitted only if the fsum including it is ≤ the cap.
"""

import math

import numpy as np

from fastdp.exceptions import PrivacyAnalysisError, ValidationError
from fastdp.privacy.events import (
    ComposedEvent,
    FixedSizeSampledEvent,
    GaussianEvent,
    LaplaceEvent,
    LineSearchEvent,
    NonPrivateEvent,
    PoissonSampledEvent,
    PrivacyFilterEvent,
    PureEvent,
    SelfComposedEvent,
)

__all__ = ["zcdp_of", "ZcdpFilter", "rho_cap_for"]


def zcdp_of(event):
    """An upper bound ρ on the zCDP of ``event`` (RDP ≤ α·ρ at every α > 1), unsampled.

    * Gaussian, noise multiplier σ: 1/(2σ²) (exact).
    * Laplace scale b, pure ε, exponential mechanism ε: ε²/2 with ε = 1/b
      (any ε-DP mechanism is ε²/2-zCDP; Bun & Steinke 2016, Prop. 1.4).
    * Line search, Laplace: paper analysis (eq. 4, twice the Laplace RDP at
      ε_BT/2) ε_BT²/4; conservative (pure ε_BT) ε_BT²/2. Gaussian: paper ρ_BT
      (eq. 5); conservative ρ_BT·(1/3 + max_it/6) (naive composition).
    * Composition: the sum; self-composition: count × the member.
    * Sampled events: the inner event's ρ (no amplification is claimed).
    * A zCDP privacy filter: its cap. Non-private: inf.

    Raises
    ------
    PrivacyAnalysisError
        For events without a zCDP bound (a fixed-order RDP filter).
    """
    if isinstance(event, NonPrivateEvent):
        return math.inf
    if isinstance(event, GaussianEvent):
        return 0.5 / event.noise_multiplier ** 2
    if isinstance(event, LaplaceEvent):
        return 0.5 / event.scale ** 2
    if isinstance(event, PureEvent):
        return 0.5 * event.epsilon ** 2
    if isinstance(event, LineSearchEvent):
        if event.form == "laplace":
            factor = 0.25 if event.analysis == "paper" else 0.5
            return factor * event.epsilon_bt ** 2
        return 0.5 / event.gaussian_equivalent_noise_multiplier() ** 2
    if isinstance(event, ComposedEvent):
        return math.fsum(zcdp_of(e) for e in event.events)
    if isinstance(event, SelfComposedEvent):
        return event.count * zcdp_of(event.event) if event.count else 0.0
    if isinstance(event, (PoissonSampledEvent, FixedSizeSampledEvent)):
        return zcdp_of(event.event)
    if isinstance(event, PrivacyFilterEvent) and event.rho is not None:
        return event.rho
    raise PrivacyAnalysisError(f"no zCDP bound is known for {type(event).__name__}.")


def rho_cap_for(epsilon, delta, accountant=None):
    """Largest zCDP cap ρ whose filter event the accountant converts to ε ≤ ``epsilon``.

    ``accountant`` defaults to fastdp's RDP accountant (improved conversion).
    """
    from fastdp.privacy.calibration import calibrate

    return float(calibrate(PrivacyFilterEvent.zcdp, epsilon, delta,
                           accountant=("rdp" if accountant is None else accountant),
                           increasing_privacy=False))


class ZcdpFilter:
    """zCDP privacy filter with the interface of :class:`~fastdp.solvers._ls_budget.RdpBudgetFilter`.

    Parameters
    ----------
    rho_cap : float
        The cap ρ (> 0): the run is ρ_cap-zCDP under add/remove adjacency.
    delta : float, optional
        Only for the ε reports (:meth:`epsilon_spent`).
    accountant : accountant, optional
        Converts ρ to ε for the reports (default fastdp's RDP accountant).

    ``sample_rate``, ``fresh_batch`` and the batch calls are accepted for
    interface compatibility and ignored: every call is charged unsampled (see
    the module docstring).
    """

    is_guarantee = True

    def __init__(self, rho_cap, delta=None, accountant=None):
        if isinstance(rho_cap, bool) or not isinstance(rho_cap, (int, float, np.floating)) \
                or not (math.isfinite(rho_cap) and rho_cap > 0):
            raise ValidationError(f"the zCDP cap must be a finite number > 0; got {rho_cap!r}.")
        self.rho_cap = float(rho_cap)
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

    def _cost(self, events):
        if not isinstance(events, (list, tuple)):
            events = (events,)
        return [zcdp_of(e) for e in events]

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

    def open_batch(self):
        """No-op (no joint amplification)."""

    def close_batch(self):
        """No-op (no joint amplification)."""

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
        from fastdp.privacy.rdp import RdpAccountant

        accountant = RdpAccountant() if self._accountant is None else self._accountant
        return float(accountant.epsilon(PrivacyFilterEvent.zcdp(rho), self.delta))

    def epsilon_spent(self):
        """ε at ``delta`` of the consumed ρ (nan without ``delta``); ≤ :meth:`epsilon_cap`."""
        return self._epsilon_of_rho(self.rho_spent)

    def epsilon_cap(self):
        """ε at ``delta`` of the cap (what a ledger is charged)."""
        return self._epsilon_of_rho(self.rho_cap)

    def best_order(self):
        return math.nan
