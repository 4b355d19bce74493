"""Zero-concentrated DP (zCDP): the ρ of an event, and an accountant built on it.

A mechanism is ρ-zCDP when its Rényi divergence of order α is at most α·ρ at
every α > 1 (Bun & Steinke 2016).  zCDP composes by adding the ρ, which is
what the zCDP privacy filters of :mod:`fastdp.privacy.filters` charge.

Rules of :func:`zcdp_of` (an upper bound on ρ, unsampled):

* Gaussian, noise multiplier σ: 1/(2σ²) (exact).
* Laplace scale b, pure ε, exponential mechanism ε: ε²/2 with ε = 1/b
  (any ε-DP mechanism is ε²/2-zCDP; Bun & Steinke 2016, Prop. 1.4).
* Line search (spec 003), Laplace form: paper analysis (eq. 4, twice the
  Laplace RDP at ε_BT/2) ε_BT²/4; conservative (pure ε_BT) ε_BT²/2.
  Gaussian form: paper ρ_BT (eq. 5); conservative ρ_BT·(1/3 + max_it/6).
* Composition: the sum (``math.fsum``); self-composition: count × the member;
  parallel composition (disjoint parts of a data-independent split): the maximum.
* Poisson- and fixed-size-sampled events: the inner event's ρ (no
  amplification is claimed).
* A zCDP privacy filter (``PrivacyFilterEvent.zcdp``): its cap.
  Non-private: inf.  Everything else (shuffling, fixed-order RDP filters,
  approximate DP, repeated selection) has no zCDP rule here and is refused.

The accountant (:class:`ZcdpAccountant`; pass an instance wherever an
accountant is accepted) turns
ρ into (ε, δ) through the RDP curve α·ρ of the zCDP filter event and
fastdp's RDP conversion, so it never reports less than the RDP accountant
would for the same ρ.
"""

from __future__ import annotations

import functools
import math

from fastdp.exceptions import PrivacyAnalysisError
from fastdp.privacy import events as ev
from fastdp.privacy.accountants import Accountant
from fastdp.privacy.calibration import calibrate
from fastdp.privacy.rdp import RdpAccountant

__all__ = ["zcdp_of", "ZcdpAccountant", "rho_for_epsilon", "bun_steinke_rho"]


@functools.singledispatch
def zcdp_of(event: ev.DpEvent) -> float:
    """An upper bound ρ on the zCDP of ``event`` (RDP ≤ α·ρ at every α > 1), unsampled.

    See the module docstring for the rules.

    Raises
    ------
    PrivacyAnalysisError
        For events without a zCDP rule (e.g. a fixed-order RDP filter).
    """
    raise PrivacyAnalysisError(f"no zCDP bound is known for {type(event).__name__}.")


@zcdp_of.register
def _(event: ev.NonPrivateEvent) -> float:
    return math.inf


@zcdp_of.register
def _(event: ev.GaussianEvent) -> float:
    return 0.5 / event.noise_multiplier ** 2


@zcdp_of.register
def _(event: ev.LaplaceEvent) -> float:
    return 0.5 / event.scale ** 2


@zcdp_of.register
def _(event: ev.PureEvent) -> float:
    return 0.5 * event.epsilon ** 2


@zcdp_of.register
def _(event: ev.LineSearchEvent) -> float:
    if event.form == "laplace":
        factor = 0.25 if event.analysis == "paper" else 0.5
        return factor * event.epsilon_bt ** 2
    return 0.5 / event.gaussian_equivalent_noise_multiplier() ** 2


@zcdp_of.register
def _(event: ev.ComposedEvent) -> float:
    return math.fsum(zcdp_of(e) for e in event.events)


@zcdp_of.register
def _(event: ev.ParallelComposedEvent) -> float:
    return max(zcdp_of(e) for e in event.events)   # disjoint parts: the maximum


@zcdp_of.register
def _(event: ev.SelfComposedEvent) -> float:
    return event.count * zcdp_of(event.event) if event.count else 0.0


@zcdp_of.register(ev.PoissonSampledEvent)
@zcdp_of.register(ev.FixedSizeSampledEvent)
def _(event) -> float:
    return zcdp_of(event.event)


@zcdp_of.register
def _(event: ev.PrivacyFilterEvent) -> float:
    if event.rho is None:
        raise PrivacyAnalysisError("no zCDP bound is known for a fixed-order RDP filter.")
    return event.rho


class ZcdpAccountant(Accountant):
    """Accountant through zCDP: ρ of the event (:func:`zcdp_of`), then (ε, δ).

    The conversion is that of the RDP accountant applied to the curve α·ρ
    (``PrivacyFilterEvent.zcdp(ρ)``), improved conversion by default.

    Parameters
    ----------
    rdp_accountant : RdpAccountant, optional
        Does the conversion (default ``RdpAccountant()``).

    Notes
    -----
    Privacy meaning: ε(δ) of the release the event describes, under its
    adjacency; no subsampling amplification is claimed, so the answer is
    never below the RDP accountant's.
    """

    name = "zcdp"

    def __init__(self, rdp_accountant=None):
        self._rdp = RdpAccountant() if rdp_accountant is None else rdp_accountant

    def rho(self, event: ev.DpEvent) -> float:
        """ρ of ``event`` (:func:`zcdp_of`)."""
        return zcdp_of(event)

    def epsilon_of_rho(self, rho: float, delta: float) -> float:
        """ε at ``delta`` of a ρ-zCDP release (0 for ρ = 0, inf for ρ = inf)."""
        if rho <= 0.0:
            return 0.0
        if math.isinf(rho):
            return math.inf
        return float(self._rdp.epsilon(ev.PrivacyFilterEvent.zcdp(rho), delta))

    def _epsilon(self, event, delta, view):
        return self.epsilon_of_rho(zcdp_of(event), delta)

    def _delta(self, event, epsilon, view):
        rho = zcdp_of(event)
        if rho <= 0.0:
            return 0.0
        if math.isinf(rho):
            return 1.0
        return float(self._rdp.delta(ev.PrivacyFilterEvent.zcdp(rho), epsilon))


def rho_for_epsilon(epsilon, delta, accountant=None):
    """Largest zCDP cap ρ whose filter event the accountant converts to ε ≤ ``epsilon``.

    ``accountant`` defaults to fastdp's RDP accountant (improved conversion);
    the search is :func:`fastdp.privacy.calibration.calibrate` (never above
    the target).
    """
    return float(calibrate(ev.PrivacyFilterEvent.zcdp, epsilon, delta,
                           accountant=("rdp" if accountant is None else accountant),
                           increasing_privacy=False))


def bun_steinke_rho(epsilon, delta):
    """ρ with ρ + 2·sqrt(ρ·log(1/δ)) = ε (Bun & Steinke 2016, Prop. 1.3 inverted).

    The conversion DP-AGD (Lee & Kifer 2018) uses to turn its (ε, δ) target
    into a total zCDP budget; a ρ-zCDP release is (ε, δ)-DP at this ρ.
    """
    log_inv_delta = math.log(1.0 / delta)
    return (math.sqrt(log_inv_delta + epsilon) - math.sqrt(log_inv_delta)) ** 2
