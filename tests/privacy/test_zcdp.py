"""zCDP in the privacy layer (fastdp.privacy.zcdp): rules against closed forms and dp-accounting."""

import math

import dp_accounting
import dp_accounting.rdp as dp_rdp
import numpy as np
import pytest

from fastdp.exceptions import PrivacyAnalysisError
from fastdp.privacy.accountants import get_accountant
from fastdp.privacy.events import (
    ComposedEvent,
    ExponentialMechanismEvent,
    FixedSizeSampledEvent,
    GaussianEvent,
    LaplaceEvent,
    LineSearchEvent,
    NonPrivateEvent,
    PoissonSampledEvent,
    PrivacyFilterEvent,
    SelfComposedEvent,
    ShuffledEvent,
)
from fastdp.privacy.rdp import RdpAccountant
from fastdp.privacy.zcdp import ZcdpAccountant, bun_steinke_rho, rho_for_epsilon, zcdp_of

ORDERS = np.array([1.5, 2.0, 3.0, 8.0, 32.0, 256.0])


@pytest.mark.parametrize("event, rho", [
    (GaussianEvent(2.0), 1 / 8),
    (LaplaceEvent(0.5), 2.0),                                   # ε = 2: ε²/2
    (ExponentialMechanismEvent(0.3), 0.045),
    (LineSearchEvent.laplace(0.2), 0.01),                       # paper eq. (4): ε²/4
    (LineSearchEvent.gaussian(0.03), 0.03),
    (SelfComposedEvent(GaussianEvent(2.0), 3), 3 / 8),
    (SelfComposedEvent(GaussianEvent(2.0), 0), 0.0),
    (ComposedEvent((GaussianEvent(1.0), LaplaceEvent(1.0))), 1.0),
    (PoissonSampledEvent(0.01, GaussianEvent(2.0)), 1 / 8),      # no amplification claimed
    (FixedSizeSampledEvent(100, 10, GaussianEvent(2.0)), 1 / 8),
    (PrivacyFilterEvent.zcdp(0.7), 0.7),
    (NonPrivateEvent(), math.inf),
])
def test_rules(event, rho):
    assert zcdp_of(event) == pytest.approx(rho, rel=1e-15)
    assert ZcdpAccountant().rho(event) == zcdp_of(event)


def test_every_rule_bounds_the_rdp_curve():
    """α·ρ ≥ the RDP accountant's unsampled curve at every order (the filters' charges are sound)."""
    acc = RdpAccountant(orders=ORDERS)
    for event in (GaussianEvent(0.7), LaplaceEvent(0.4), ExponentialMechanismEvent(1.5),
                  LineSearchEvent.laplace(0.5), LineSearchEvent.gaussian(0.2, max_it=5,
                                                                        analysis="conservative")):
        assert np.all(acc.rdp_curve(event) <= ORDERS * zcdp_of(event) * (1 + 1e-12)), event


def test_events_without_a_rule_are_refused():
    for event in (PrivacyFilterEvent.rdp([8], [1.0]), ShuffledEvent(10, 2, GaussianEvent(1.0), 1)):
        with pytest.raises(PrivacyAnalysisError):
            zcdp_of(event)


@pytest.mark.parametrize("delta", [1e-5, 1e-8])
def test_accountant_against_dp_accounting(delta):
    """ρ-zCDP is the RDP curve α·ρ: the ε of a Gaussian with σ = 1/sqrt(2ρ)."""
    event = ComposedEvent((GaussianEvent(3.0), ExponentialMechanismEvent(0.1),
                           SelfComposedEvent(GaussianEvent(5.0), 4)))
    rho = zcdp_of(event)
    ref = dp_rdp.RdpAccountant()
    ref.compose(dp_accounting.GaussianDpEvent(1.0 / math.sqrt(2.0 * rho)))
    acc = get_accountant(ZcdpAccountant())
    assert acc.epsilon(event, delta) == pytest.approx(ref.get_epsilon(delta), rel=1e-9)
    assert acc.delta(event, acc.epsilon(event, delta)) == pytest.approx(delta, rel=1e-6)
    # no amplification is claimed: never below the RDP accountant on a sampled event
    sampled = PoissonSampledEvent(0.01, GaussianEvent(3.0))
    assert acc.epsilon(sampled, delta) >= RdpAccountant().epsilon(sampled, delta)


def test_conversions():
    eps, delta = 0.8, 1e-6
    rho = bun_steinke_rho(eps, delta)
    assert rho + 2 * math.sqrt(rho * math.log(1 / delta)) == pytest.approx(eps, rel=1e-12)
    cap = rho_for_epsilon(eps, delta)
    assert RdpAccountant().epsilon(PrivacyFilterEvent.zcdp(cap), delta) <= eps
    assert cap > rho          # the RDP conversion is tighter than Bun–Steinke's
    assert ZcdpAccountant().epsilon_of_rho(0.0, delta) == 0.0
    assert ZcdpAccountant().epsilon_of_rho(math.inf, delta) == math.inf
