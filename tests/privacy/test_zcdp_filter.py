"""The zCDP privacy filter (fastdp.privacy.filters.ZcdpFilter) and the zCDP costs it charges.

(Moved from tests/solvers/test_ls_filter.py; the filtered line-search runs are in
tests/solvers/line_search/test_ls_zcdp_runs.py.)
"""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting import rdp as dp_rdp
from hypothesis import given, settings
from hypothesis import strategies as st

from fastdp.exceptions import PrivacyAnalysisError, ValidationError
from fastdp.privacy.events import (
    ComposedEvent,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    LineSearchEvent,
    PoissonSampledEvent,
    PrivacyFilterEvent,
    PureEvent,
    SelfComposedEvent,
)
from fastdp.privacy.rdp import RdpAccountant
from fastdp.privacy.filters import ZcdpFilter
from fastdp.privacy.zcdp import rho_for_epsilon as rho_cap_for
from fastdp.privacy.zcdp import zcdp_of

ORDERS = np.concatenate([1.0 + np.geomspace(1e-3, 0.9, 30), np.arange(2.0, 65.0),
                         [128.0, 256.0, 512.0, 1024.0]])


def _leaves(x, max_it):
    return [GaussianEvent(1.0 / x), LaplaceEvent(1.0 / x), PureEvent(x),
            ExponentialMechanismEvent(x), LineSearchEvent.laplace(x),
            LineSearchEvent.laplace(x, analysis="conservative"),
            LineSearchEvent.gaussian(x * x), LineSearchEvent.gaussian(x * x, max_it=max_it,
                                                                      analysis="conservative")]


@settings(max_examples=40, deadline=None)
@given(x=st.floats(1e-3, 3.0), max_it=st.integers(1, 20))
def test_zcdp_cost_dominates_the_rdp_curve(x, max_it):
    """α·zcdp_of(e) >= the accountant's RDP of e at every order (the filter's charges are sound)."""
    acc = RdpAccountant(orders=ORDERS)
    for event in _leaves(x, max_it):
        curve = acc.rdp_curve(event)
        assert np.all(curve <= ORDERS * zcdp_of(event) * (1 + 1e-9) + 1e-15), event


def test_zcdp_cost_closed_forms():
    assert zcdp_of(GaussianEvent(2.0)) == pytest.approx(1 / 8)
    assert zcdp_of(LaplaceEvent(0.5)) == pytest.approx(2.0)          # ε = 2, ε²/2
    assert zcdp_of(LineSearchEvent.laplace(0.2)) == pytest.approx(0.01)   # eq. (4): ε²/4
    assert zcdp_of(LineSearchEvent.gaussian(0.03)) == pytest.approx(0.03)
    assert zcdp_of(LineSearchEvent.gaussian(0.03, max_it=4, analysis="conservative")) == \
        pytest.approx(0.03 * (1 / 3 + 4 / 6))
    both = ComposedEvent((GaussianEvent(2.0), SelfComposedEvent(PureEvent(0.1), 3)))
    assert zcdp_of(both) == pytest.approx(1 / 8 + 3 * 0.005)
    # no amplification is claimed for sampled events
    assert zcdp_of(PoissonSampledEvent(0.01, GaussianEvent(2.0))) == pytest.approx(1 / 8)
    with pytest.raises(PrivacyAnalysisError):
        zcdp_of(PrivacyFilterEvent.rdp([8], [1.0]))


_EVENT = st.one_of(
    st.floats(0.05, 50.0).map(GaussianEvent),
    st.floats(1e-3, 2.0).map(LineSearchEvent.laplace),
    st.floats(1e-3, 2.0).map(ExponentialMechanismEvent),
)


@settings(max_examples=200, deadline=None)
@given(cap=st.floats(1e-4, 5.0), calls=st.lists(_EVENT, min_size=0, max_size=60))
def test_filter_never_lets_consumed_exceed_cap(cap, calls):
    """Whatever adaptive sequence asks, the admitted calls' costs sum to at most the cap."""
    flt = ZcdpFilter(cap)
    admitted = []
    for event in calls:
        if flt.can_afford(event):
            flt.charge(event)
            admitted.append(event)
        else:
            # refused exactly when admitting it would overflow
            assert math.fsum([zcdp_of(e) for e in admitted] + [zcdp_of(event)]) > cap
            with pytest.raises(PrivacyAnalysisError):
                flt.charge(event)
    consumed = math.fsum(zcdp_of(e) for e in admitted)
    assert consumed <= cap
    assert flt.rho_spent == consumed
    assert flt.event() == PrivacyFilterEvent.zcdp(cap)
    assert flt.consumed_event() == ComposedEvent(tuple(admitted))
    # the cap's RDP curve dominates the consumed run's at every order
    acc = RdpAccountant(orders=ORDERS)
    assert np.all(acc.rdp_curve(flt.consumed_event()) <= acc.rdp_curve(flt.event()) * (1 + 1e-9))


@pytest.mark.parametrize("epsilon,delta", [(0.05, 1e-8), (1.0, 1e-5), (4.0, 1e-6)])
def test_rho_cap_for_budget_against_dp_accounting(epsilon, delta):
    rho = rho_cap_for(epsilon, delta)
    ours = RdpAccountant().epsilon(PrivacyFilterEvent.zcdp(rho), delta)
    assert ours <= epsilon and ours == pytest.approx(epsilon, rel=1e-5)
    ref = dp_rdp.RdpAccountant()
    ref.compose(dp_accounting.GaussianDpEvent(1.0 / math.sqrt(2.0 * rho)))
    assert ref.get_epsilon(delta) == pytest.approx(ours, rel=1e-9)


def test_filter_rejects_bad_caps():
    for bad in (0.0, -1.0, math.inf, math.nan, True, "1"):
        with pytest.raises(ValidationError):
            ZcdpFilter(bad)
