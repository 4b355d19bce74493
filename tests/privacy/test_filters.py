"""Privacy filters (fastdp.privacy.filters): one interface, numbers against closed forms,
dp-accounting and the numbers the filters gave before they moved out of the solvers."""

import math

import dp_accounting.rdp.rdp_privacy_accountant as dp_rdp_impl
import numpy as np
import pytest
from scipy.special import gammaln, logsumexp

from fastdp.exceptions import PrivacyAnalysisError, ValidationError
from fastdp.privacy import laplace_schedule as lap
from fastdp.privacy.events import (
    ComposedEvent,
    ExponentialMechanismEvent,
    FixedSizeSampledEvent,
    GaussianEvent,
    LaplaceEvent,
    LineSearchEvent,
    PoissonSampledEvent,
    PrivacyFilterEvent,
)
from fastdp.privacy.filters import (
    PrivacyFilter,
    PureDpBudget,
    RdpBudgetFilter,
    RunningZcdpBudget,
    ZcdpFilter,
    paper_orders,
    rdp_poisson_tight_all,
)
from fastdp.privacy.rdp import RdpAccountant
from fastdp.privacy.zcdp import bun_steinke_rho, zcdp_of

DELTA = 1e-5
ORDERS = paper_orders()


def _filters():
    return [RdpBudgetFilter(1.0, DELTA), ZcdpFilter(0.05, DELTA), RunningZcdpBudget(0.05, DELTA),
            PureDpBudget(1.0)]


@pytest.mark.parametrize("flt", _filters(), ids=lambda f: type(f).__name__)
def test_every_filter_has_the_one_interface(flt):
    assert isinstance(flt, PrivacyFilter)
    event = GaussianEvent(20.0) if not isinstance(flt, PureDpBudget) else LaplaceEvent(20.0)
    assert flt.spent() == pytest.approx(0.0, abs=1e-12) or isinstance(flt, RdpBudgetFilter)
    assert flt.can_afford(event) and flt.can_afford([event, event])
    cost = flt.charge(event)
    assert np.all(np.asarray(cost) > 0) and flt.n_charges == 1
    assert flt.spent() == flt.epsilon_spent() and flt.spent() > 0
    assert flt.event().is_private


def test_rdp_filter_unsampled_gaussian_is_the_closed_form():
    """k Gaussian calls: rem[a] = ε − log(1/δ)/(a−1) − k·a/(2σ²); spent = ε − max rem."""
    eps, sigma, k = 2.0, 6.0, 7
    flt = RdpBudgetFilter(eps, DELTA)
    for _ in range(k):
        flt.charge(GaussianEvent(sigma))
    closed = eps - math.log(1 / DELTA) / (ORDERS - 1) - k * ORDERS / (2 * sigma ** 2)
    np.testing.assert_allclose(flt.rem, closed, rtol=1e-12, atol=1e-12)
    assert flt.spent() == pytest.approx(float(np.min(eps - closed)), rel=1e-12)
    assert flt.best_order() == ORDERS[int(np.argmax(closed))]


def test_rdp_filter_sampled_gaussian_against_dp_accounting():
    """sgm_exact, separate batches: the charged curve is dp-accounting's sampled Gaussian."""
    q, sigma, k = 0.02, 1.3, 40
    flt = RdpBudgetFilter(5.0, DELTA, amplification="sgm_exact", batch_accounting="separate")
    for _ in range(k):
        flt.open_batch()
        flt.charge(GaussianEvent(sigma), sample_rate=q)
    theirs = k * np.asarray(dp_rdp_impl._compute_rdp_poisson_subsampled_gaussian(q, sigma, ORDERS))
    np.testing.assert_allclose(5.0 - math.log(1 / DELTA) / (ORDERS - 1) - flt.rem, theirs,
                               rtol=1e-9)


# The filter's numbers before it moved to the privacy layer (solvers/_ls_budget.py at
# f2f038e): a fixed sequence of line-search iterations, q = 0.05, charged jointly.
PREVIOUS = {   # amplification: (ε spent, best order, iterations the paper's check affords)
    "zw_general": (2.33457725071698, 9.0, 3),
    "sgm_exact": (2.334577250716986, 9.0, 3),
}


def _line_search_sequence(amplification):
    flt = RdpBudgetFilter(1.0, DELTA, amplification=amplification)
    afforded = 0
    for t in range(300):
        flt.open_batch()
        grad, search = GaussianEvent(4.0 + t % 3), LineSearchEvent.laplace(0.1)
        if flt.can_afford([grad, search], 0.05):
            afforded += 1
        flt.charge(grad, 0.05)
        flt.charge(search, 0.05)
    return flt, afforded


@pytest.mark.parametrize("amplification", sorted(PREVIOUS))
def test_rdp_filter_reproduces_the_previous_numbers(amplification):
    flt, afforded = _line_search_sequence(amplification)
    spent, order, count = PREVIOUS[amplification]
    assert flt.spent() == spent and flt.best_order() == order and afforded == count
    # and the recorded event says the same through the RDP accountant
    acc = RdpAccountant(orders=ORDERS, conversion="classic",
                        poisson_amplification=("best" if amplification == "sgm_exact"
                                               else "zhu_wang_general"))
    assert acc.epsilon(flt.event(), DELTA) == pytest.approx(spent, rel=1e-9)


def _tight_all_reference(q, curve, orders):
    """The ablation bound written out term by term (the solvers' former implementation)."""
    top = int(orders.max())
    eps_l = np.asarray(curve(np.arange(2.0, top + 1.0)))
    out = []
    for a in orders.astype(int):
        ls = np.arange(2, a + 1)
        terms = (gammaln(a + 1) - gammaln(ls + 1) - gammaln(a - ls + 1) + ls * math.log(q)
                 + (a - ls) * math.log1p(-q) + (ls - 1) * eps_l[ls - 2])
        head = (a - 1) * math.log1p(-q) + math.log1p((a - 1) * q)
        out.append(logsumexp(np.append(terms, head)) / (a - 1))
    return np.minimum(out, curve(orders))


@pytest.mark.parametrize("q", [0.01, 0.1, 0.4])
def test_tight_all_ablation_is_the_general_bound_without_factor_three(q):
    acc = RdpAccountant(orders=ORDERS, conversion="classic")
    for event in (GaussianEvent(2.0), LineSearchEvent.laplace(0.3)):
        curve = lambda o, e=event: acc.rdp_curve(e, orders=o)  # noqa: E731
        np.testing.assert_allclose(rdp_poisson_tight_all(q, curve, ORDERS),
                                   _tight_all_reference(q, curve, ORDERS), rtol=1e-11)


def test_zcdp_filter_admits_exactly_up_to_the_cap():
    events = [GaussianEvent(3.0), ExponentialMechanismEvent(0.2), LineSearchEvent.gaussian(0.01)]
    cap = math.fsum(zcdp_of(e) for e in events)       # 1/18 + 0.02 + 0.01
    assert cap == pytest.approx(1 / 18 + 0.02 + 0.01, rel=1e-15)
    flt = ZcdpFilter(cap, DELTA)
    for e in events:
        assert flt.can_afford(e)
        flt.charge(e)
    assert not flt.can_afford(GaussianEvent(1e6))
    with pytest.raises(PrivacyAnalysisError):
        flt.charge(GaussianEvent(1e6))
    assert flt.event() == PrivacyFilterEvent.zcdp(cap)
    assert flt.spent() == pytest.approx(flt.epsilon_cap(), rel=1e-12)
    # ε of ρ-zCDP: never below the Bun–Steinke closed form's inverse (that one is looser)
    assert flt.spent() <= cap + 2 * math.sqrt(cap * math.log(1 / DELTA))


def test_running_zcdp_budget_is_dp_agd_s_budget():
    """DP-AGD: ρ_total from ρ + 2·sqrt(ρ·log(1/δ)) = ε; a call is refused iff left < cost."""
    eps = 0.5
    rho = bun_steinke_rho(eps, DELTA)
    assert rho + 2 * math.sqrt(rho * math.log(1 / DELTA)) == pytest.approx(eps, rel=1e-12)
    budget = RunningZcdpBudget(rho)
    grad, select = GaussianEvent(40.0), ExponentialMechanismEvent(0.01)
    n = 0
    while budget.can_afford((grad, select)):
        budget.charge(grad)
        budget.charge(select)
        n += 1
    per = 1 / (2 * 40.0 ** 2) + 0.01 ** 2 / 2
    assert n == math.floor(rho / per + 1e-9)
    assert budget.left == pytest.approx(rho - n * per, abs=1e-12) and budget.left < per
    assert budget.event() == ComposedEvent((grad, select) * n)


def test_pure_budget_is_the_laplace_schedule_closed_form():
    """Steps of spec 002: ε_step = log(1 + (m/n)(e^{S/(bm)} − 1)), basic composition."""
    n, m, S, T = 1000, 50, 2.0, 30
    scales = lap.uniform_scales(S, 1.0, T, n, m)
    budget = PureDpBudget(1.0 + 1e-9)
    for b in scales:
        step = FixedSizeSampledEvent(n, m, LaplaceEvent(b * m / S, "replace_one"))
        assert budget.can_afford(step)
        cost = budget.charge(step)
        assert cost == pytest.approx(math.log1p(m / n * math.expm1(S / (b * m))), rel=1e-12)
    assert budget.spent() == pytest.approx(1.0, rel=1e-12)
    assert budget.spent() == pytest.approx(lap.total_epsilon(scales, S, n, m), rel=1e-12)
    assert not budget.can_afford(PoissonSampledEvent(0.5, LaplaceEvent(1.0)))


def test_filters_refuse_bad_parameters():
    for bad in (0.0, -1.0, math.nan, True, "1"):
        with pytest.raises(ValidationError):
            RdpBudgetFilter(bad, DELTA)
        with pytest.raises(ValidationError):
            PureDpBudget(bad)
    for bad_delta in (0.0, 1.0, -0.1, math.nan):
        with pytest.raises(ValidationError):
            RdpBudgetFilter(1.0, bad_delta)
