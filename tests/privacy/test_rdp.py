"""Tests for fastdp.privacy.rdp against dp_accounting, closed forms and the
reference values of ../shared/research/anchors-dp-libs.md §2 and spec 003 §4.7."""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting import rdp as dp_rdp
from dp_accounting.rdp import rdp_privacy_accountant as dp_rdp_impl

from fastdp.exceptions import ValidationError
from fastdp.privacy.events import (
    Adjacency,
    ComposedEvent,
    FixedSizeSampledEvent,
    GaussianEvent,
    LaplaceEvent,
    LineSearchEvent,
    NonPrivateEvent,
    PoissonSampledEvent,
    PureEvent,
    SelfComposedEvent,
    ShuffledEvent,
)
from fastdp.privacy.rdp import (
    DEFAULT_ORDERS,
    RdpAccountant,
    delta_from_rdp,
    epsilon_from_rdp,
    rdp_fixed_size_general,
    rdp_fixed_size_gaussian,
    rdp_gaussian,
    rdp_laplace,
    rdp_poisson_gaussian,
    rdp_poisson_general,
    rdp_pure,
)

R1 = Adjacency.REPLACE_ONE


def sgm(q, sigma, steps):
    return SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma)), steps)


# ---------------------------------------------------------------------------
# anchors §2.2: settings A-F
# ---------------------------------------------------------------------------
# id: q, sigma, T, delta, dp_accounting RDP eps, Opacus RDP eps
SETTINGS = {
    "A": (0.01, 4.0, 10_000, 1e-5, 1.0354900660, 1.0354900660),
    "B": (256 / 60000, 1.1, 14_063, 1e-5, 2.5966555295, 2.5966555287),
    "C": (0.01, 1.1, 10_000, 1e-5, 5.6320106701, 5.6319923685),
    "D": (0.01, 0.7, 1_000, 1e-5, 5.4232574440, 5.4213970675),
    "E": (1.0, 10.0, 100, 1e-5, 4.7285070672, 4.7285070672),
    "F": (1e-3, 0.8, 100_000, 1e-7, 3.5411209459, 3.5411206451),
}


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_reference_settings_exact_series(name):
    """Exact fractional-order series: dp_accounting's values where its
    magnitude-sum series is tight (A, B, E, F at 1e-6), and Opacus's signed
    series everywhere (it sums the same exact series)."""
    q, sigma, steps, delta, dp_acc, opacus = SETTINGS[name]
    eps = RdpAccountant().epsilon(sgm(q, sigma, steps), delta)
    assert eps == pytest.approx(opacus, rel=1e-8)
    assert eps == pytest.approx(dp_acc, rel=1e-6 if name in "ABEF" else 1e-3)
    assert eps <= dp_acc * (1 + 1e-9)        # the exact series is never looser


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_reference_settings_absolute_series_match_dp_accounting(name):
    q, sigma, steps, delta, dp_acc, _ = SETTINGS[name]
    eps = RdpAccountant(fractional_series="absolute").epsilon(sgm(q, sigma, steps), delta)
    assert eps == pytest.approx(dp_acc, rel=1e-8)


def test_optimal_orders_of_reference_settings():
    orders = {"A": 17, "B": 8.1, "C": 4.7, "D": 3.6, "E": 5.4, "F": 7.6}
    acc = RdpAccountant()
    for name, order in orders.items():
        q, sigma, steps, delta, _, _ = SETTINGS[name]
        assert acc.epsilon_and_order(sgm(q, sigma, steps), delta)[1] == pytest.approx(order)


def test_setting_e_is_one_gaussian_and_above_the_analytic_value():
    # q = 1, σ = 10, T = 100 is one Gaussian with σ_eff = 1; RDP can only be
    # looser than the exact analytic Gaussian ε = 4.377178095681.
    acc = RdpAccountant()
    eps = acc.epsilon(sgm(1.0, 10.0, 100), 1e-5)
    assert eps == pytest.approx(acc.epsilon(GaussianEvent(1.0), 1e-5), rel=1e-12)
    assert eps == pytest.approx(4.7285070672, rel=1e-9)
    analytic = dp_accounting.get_epsilon_gaussian(1.0, 1e-5)
    assert analytic == pytest.approx(4.377178095681, rel=1e-10)
    assert analytic < eps


@pytest.mark.parametrize("q,sigma,order,value", [
    (0.01, 0.7, 3.6, 0.00181143807582),
    (0.01, 1.1, 4.7, 0.000317788071822),
    (256 / 60000, 1.1, 8.1, 9.965972761934e-05),
])
def test_exact_per_step_rdp_at_fractional_orders(q, sigma, order, value):
    """mpmath quadrature values from the anchors note."""
    assert rdp_poisson_gaussian(q, sigma, [order])[0] == pytest.approx(value, rel=1e-9)


def test_fractional_series_against_quadrature():
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 25
    for q, sigma, a in [(0.3, 0.5, 1.1), (0.5, 2.0, 1.3), (0.05, 3.0, 2.5)]:
        density = lambda z: mpmath.npdf(z, 0, sigma) * (  # noqa: E731
            (1 - q) + q * mpmath.exp((2 * z - 1) / (2 * sigma ** 2))) ** a
        exact = float(mpmath.log(mpmath.quad(density, [-mpmath.inf, -20, 0, 1, 20, mpmath.inf]))
                      / (a - 1))
        ours = rdp_poisson_gaussian(q, sigma, [a])[0]
        assert ours == pytest.approx(exact, rel=1e-8)
        assert ours >= exact * (1 - 1e-10)


def test_slow_fractional_series_falls_back_to_a_valid_bound():
    # q = 1/2, σ = 1000: the series at α = 1.4 converges too slowly; the
    # interpolated cumulant is used. Exact value ≈ q²α/(2σ²) = 1.75e-7.
    value = rdp_poisson_gaussian(0.5, 1000.0, [1.4])[0]
    assert 1.75e-7 <= value <= rdp_poisson_gaussian(0.5, 1000.0, [2.0])[0] * (1 + 1e-9)
    assert rdp_poisson_gaussian(0.5, 1000.0, [1.5])[0] == pytest.approx(1.875e-7, rel=1e-4)


def test_replace_one_and_no_amplification_values():
    acc = RdpAccountant()
    wor_b = SelfComposedEvent(FixedSizeSampledEvent(60000, 256, GaussianEvent(1.1, R1)), 14_063)
    assert acc.epsilon(wor_b, 1e-5) == pytest.approx(5.2434669088, rel=1e-9)
    wor_2 = SelfComposedEvent(FixedSizeSampledEvent(10000, 100, GaussianEvent(1.1, R1)), 10_000)
    assert acc.epsilon(wor_2, 1e-5) == pytest.approx(11.7717150002, rel=1e-9)
    # add/remove σ is converted: σ = 2.2 w.r.t. C is σ = 1.1 w.r.t. 2C
    wor_ar = SelfComposedEvent(FixedSizeSampledEvent(60000, 256, GaussianEvent(2.2)), 14_063)
    assert acc.epsilon(wor_ar, 1e-5) == pytest.approx(5.2434669088, rel=1e-9)
    assert acc.epsilon(SelfComposedEvent(GaussianEvent(1.1), 60), 1e-5) == pytest.approx(
        56.9504531554, rel=1e-9)
    assert acc.epsilon(SelfComposedEvent(GaussianEvent(0.55), 60), 1e-5) == pytest.approx(
        164.96, rel=1e-4)


def test_shuffled_event_reports_guarantee_and_labelled_poisson_what_if():
    acc = RdpAccountant()
    sh = ShuffledEvent(60000, 256, GaussianEvent(1.1, R1), epochs=60)
    report = acc.report(sh, 1e-5)
    assert report.epsilon_guaranteed == pytest.approx(56.9504531554, rel=1e-9)
    assert acc.epsilon(sh, 1e-5) == report.epsilon_guaranteed == float(report)
    what_if = acc.epsilon(sgm(256 / 60000, 1.1, 60 * 235), 1e-5)
    assert report.epsilon_if_poisson_assumed == pytest.approx(what_if, rel=1e-12)
    assert "not a guarantee" in str(report)
    plain = acc.report(sgm(0.01, 1.0, 10), 1e-5)
    assert plain.epsilon_if_poisson_assumed is None


# ---------------------------------------------------------------------------
# agreement with dp_accounting on random settings
# ---------------------------------------------------------------------------
def test_poisson_gaussian_curve_matches_dp_accounting_at_integer_orders():
    rng = np.random.default_rng(20260101)
    orders = np.array(list(range(2, 64)) + [128, 256, 512, 1024], dtype=float)
    for _ in range(40):
        q = 10 ** rng.uniform(-5, -0.05)
        sigma = 10 ** rng.uniform(-0.4, 1.5)
        ours = rdp_poisson_gaussian(q, sigma, orders)
        theirs = dp_rdp_impl._compute_rdp_poisson_subsampled_gaussian(q, sigma, orders)
        np.testing.assert_allclose(ours, theirs, rtol=1e-7)


def test_epsilon_and_delta_match_dp_accounting_on_random_settings():
    rng = np.random.default_rng(7)
    orders = list(range(2, 64)) + [128, 256, 512, 1024]
    ours_acc = RdpAccountant(orders=orders)
    for _ in range(30):
        q = 10 ** rng.uniform(-4, -0.3)
        sigma = 10 ** rng.uniform(-0.3, 1.2)
        steps = int(10 ** rng.uniform(0, 5))
        delta = 10 ** rng.uniform(-9, -3)
        theirs = dp_rdp.RdpAccountant(orders=orders).compose(
            sgm(q, sigma, steps).to_dp_accounting())
        ours = ours_acc.epsilon(sgm(q, sigma, steps), delta)
        assert ours == pytest.approx(theirs.get_epsilon(delta), rel=1e-6)
        eps = max(ours, 0.1)
        assert ours_acc.delta(sgm(q, sigma, steps), eps) == pytest.approx(
            theirs.get_delta(eps), rel=1e-6, abs=1e-300)


def test_fixed_size_curve_matches_dp_accounting():
    orders = np.array([1.5, 2, 3, 4.5, 10, 32, 63, 128, 300, 512], dtype=float)
    for q, sigma in [(256 / 60000, 1.1), (0.01, 0.8), (0.1, 3.0), (0.5, 1.0)]:
        ours = rdp_fixed_size_gaussian(q, sigma, orders)
        theirs = dp_rdp_impl._compute_rdp_sample_wor_gaussian(q, sigma, orders)
        np.testing.assert_allclose(ours, np.minimum(theirs, rdp_gaussian(sigma, orders)), rtol=1e-9)


def test_laplace_and_pure_curves_match_dp_accounting():
    orders = DEFAULT_ORDERS
    for scale in [0.2, 1.0, 7.0, 300.0]:
        theirs = np.array([dp_rdp_impl._laplace_rdp(1 / scale, a) for a in orders])
        np.testing.assert_allclose(rdp_laplace(scale, orders), theirs, rtol=1e-10)
    for eps in [1e-3, 0.1, 1.0, 6.0]:
        p = 2 / (1 + math.exp(eps))
        theirs = dp_rdp_impl._compute_randomized_response_rdp(
            p, 2, orders, dp_accounting.NeighboringRelation.REPLACE_ONE)
        np.testing.assert_allclose(rdp_pure(eps, orders), theirs, rtol=1e-8)
        assert np.all(rdp_pure(eps, orders) <= np.minimum(eps, orders * eps ** 2 / 2) * (1 + 1e-12))


# ---------------------------------------------------------------------------
# spec 003 §4.7: line-search curves and Zhu-Wang amplification
# ---------------------------------------------------------------------------
SVT_TABLE = {
    0.001: [4.999166e-07, 2.499574e-06, 2.498553e-05, 2.402003e-04],
    0.01: [4.991636e-05, 2.494905e-04, 2.399420e-03, 8.613410e-03],
    0.1: [4.913699e-03, 2.373728e-02, 8.609924e-02, 9.861332e-02],
    1.0: [4.006078e-01, 8.573808e-01, 9.860983e-01, 9.986133e-01],
}


@pytest.mark.parametrize("eps_bt", sorted(SVT_TABLE))
def test_laplace_line_search_curve_eq4(eps_bt):
    ours = RdpAccountant().rdp_curve(LineSearchEvent.laplace(eps_bt), orders=[2, 10, 100, 1000])
    np.testing.assert_allclose(ours, SVT_TABLE[eps_bt], rtol=1e-6)   # table has 7 digits
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    e = mpmath.mpf(eps_bt)
    eq4 = [float(2 / (a - 1) * mpmath.log(mpmath.mpf(a) / (2 * a - 1) * mpmath.exp((a - 1) * e / 2)
                                          + mpmath.mpf(a - 1) / (2 * a - 1) * mpmath.exp(-a * e / 2)))
           for a in (2, 10, 100, 1000)]
    np.testing.assert_allclose(ours, eq4, rtol=1e-10)


def test_gaussian_line_search_curve_eq5():
    acc = RdpAccountant()
    orders = np.array([2.0, 5.5, 40.0])
    np.testing.assert_allclose(acc.rdp_curve(LineSearchEvent.gaussian(0.02), orders=orders),
                               orders * 0.02, rtol=1e-12)
    cons = LineSearchEvent.gaussian(0.02, max_it=10, analysis="conservative")
    np.testing.assert_allclose(acc.rdp_curve(cons, orders=orders),
                               orders * 0.02 * (1 / 3 + 10 / 6), rtol=1e-12)
    lap_cons = LineSearchEvent.laplace(0.5, analysis="conservative")
    assert np.all(acc.rdp_curve(lap_cons) <= 0.5 + 1e-15)


@pytest.mark.parametrize("rho,order,expected", [
    (5e-7, 2, 1.000001e-08), (5e-7, 10, 5.0e-06), (5e-7, 100, 5.0e-05),
    (1e-3, 10, 1.0e-02), (1e-3, 100, 1.210432e-02), (0.5, 2, 1.703686e-02), (0.5, 10, 2.564884),
])
def test_zhu_wang_general_bound_table(rho, order, expected):
    """min(raw Lemma 4, a·ρ) for a line search with Gaussian curve a·ρ, q = 0.1."""
    event = PoissonSampledEvent(0.1, LineSearchEvent.gaussian(rho))
    assert RdpAccountant().rdp_curve(event, orders=[order])[0] == pytest.approx(expected, rel=1e-6)


def test_zhu_wang_general_for_gaussians_reproduces_spec_003_table():
    acc = RdpAccountant(poisson_amplification="zhu_wang_general")
    rho = 1e-3
    event = PoissonSampledEvent(0.1, GaussianEvent(1 / math.sqrt(2 * rho)))
    assert acc.rdp_curve(event, orders=[100])[0] == pytest.approx(1.210432e-02, rel=1e-6)
    exact = RdpAccountant().rdp_curve(event, orders=[100])[0]
    assert exact == pytest.approx(1.019090e-03, rel=1e-6)      # "sgm exact" column


def test_zhu_wang_closed_form_at_order_two_and_fractional_orders():
    curve = lambda a: np.ones_like(np.asarray(a, dtype=float))  # noqa: E731  ε(2) = 1
    assert rdp_poisson_general(0.1, curve, [2.0])[0] == pytest.approx(
        math.log(1 + 0.01 * (math.e - 1)), rel=1e-12)
    base = lambda a: 0.3 * np.asarray(a, dtype=float)  # noqa: E731
    frac = rdp_poisson_general(0.2, base, [3.5])[0]
    assert frac == pytest.approx(rdp_poisson_general(0.2, base, [4.0])[0], rel=1e-12)
    assert rdp_poisson_general(1.0, base, [3.5])[0] == pytest.approx(1.05)
    assert rdp_poisson_general(0.0, base, [3.5])[0] == 0.0


def test_wor_general_bound_reduces_to_gaussian_bound_above_order_256():
    sigma, q = 1.3, 0.02
    orders = np.array([300.0, 512.0])
    general = rdp_fixed_size_general(q, lambda a: rdp_gaussian(sigma, a), orders)
    np.testing.assert_allclose(general, rdp_fixed_size_gaussian(q, sigma, orders), rtol=1e-10)
    # and it is a valid bound (never above the unsampled curve) for Laplace
    lap = rdp_fixed_size_general(q, lambda a: rdp_laplace(2.0, a), DEFAULT_ORDERS, 0.5)
    assert np.all(lap <= rdp_laplace(2.0, DEFAULT_ORDERS) + 1e-15)
    assert np.all(np.isfinite(lap))


# ---------------------------------------------------------------------------
# conversion
# ---------------------------------------------------------------------------
def test_classic_conversion_reproduces_the_moments_accountant_value():
    """Anchors §2.2 observation: classic conversion over Opacus's order grid
    with dp_accounting's curve gives Abadi et al.'s 1.2586 for A."""
    opacus_orders = [1 + x / 10 for x in range(1, 100)] + list(range(12, 64))
    acc = RdpAccountant(orders=opacus_orders, conversion="classic", fractional_series="absolute")
    assert acc.epsilon(sgm(0.01, 4.0, 10_000), 1e-5) == pytest.approx(1.2585747413, rel=1e-9)
    assert acc.epsilon(sgm(256 / 60000, 1.1, 14_063), 1e-5) == pytest.approx(3.0083810534, rel=1e-9)


def test_conversion_helpers_edge_cases():
    orders = np.array([2.0, 8.0, 32.0])
    rdp = np.array([0.1, 0.4, 1.6])
    eps, order = epsilon_from_rdp(orders, rdp, 1e-5, "classic")
    assert eps == pytest.approx(np.min(rdp + math.log(1e5) / (orders - 1)))
    assert epsilon_from_rdp(orders, rdp, 0.0)[0] == math.inf
    assert epsilon_from_rdp(orders, np.zeros(3), 0.0)[0] == 0.0
    assert epsilon_from_rdp(orders, np.full(3, 1e-14), 1e-3)[0] == 0.0   # KL route
    d, _ = delta_from_rdp(orders, rdp, eps, "classic")
    assert d == pytest.approx(1e-5, rel=1e-9)
    assert delta_from_rdp(orders, np.full(3, np.inf), 1.0)[0] == 1.0


def test_delta_and_epsilon_are_inverse():
    acc = RdpAccountant()
    event = sgm(0.02, 1.3, 2000)
    eps = acc.epsilon(event, 1e-6)
    assert acc.delta(event, eps) <= 1e-6 * (1 + 1e-6)
    assert acc.delta(event, eps * 0.98) > 1e-6


def test_non_private_gives_infinity():
    acc = RdpAccountant()
    event = ComposedEvent([sgm(0.01, 1.0, 10), NonPrivateEvent()])
    assert acc.epsilon(event, 1e-5) == math.inf
    assert acc.delta(event, 10.0) == 1.0


# ---------------------------------------------------------------------------
# properties
# ---------------------------------------------------------------------------
def test_monotonicity():
    acc = RdpAccountant()
    sigmas = [0.6, 0.8, 1.1, 2.0, 5.0]
    eps_sigma = [acc.epsilon(sgm(0.01, s, 1000), 1e-5) for s in sigmas]
    assert all(a > b for a, b in zip(eps_sigma, eps_sigma[1:]))
    eps_q = [acc.epsilon(sgm(q, 1.0, 1000), 1e-5) for q in [1e-4, 1e-3, 1e-2, 0.1, 1.0]]
    assert all(a < b for a, b in zip(eps_q, eps_q[1:]))
    eps_t = [acc.epsilon(sgm(0.01, 1.0, t), 1e-5) for t in [1, 10, 100, 1000, 10_000]]
    assert all(a < b for a, b in zip(eps_t, eps_t[1:]))


def test_pruned_search_equals_full_grid_minimum():
    acc = RdpAccountant()
    rng = np.random.default_rng(3)
    for _ in range(60):
        q, s = 10 ** rng.uniform(-4, 0), 10 ** rng.uniform(-0.4, 1.5)
        steps, delta = int(10 ** rng.uniform(0, 5)), 10 ** rng.uniform(-10, -2)
        event = ComposedEvent([sgm(q, s, steps), SelfComposedEvent(LaplaceEvent(s), 1 + steps // 500),
                               SelfComposedEvent(LineSearchEvent.laplace(1 / s), 1 + steps // 1000)])
        pruned = acc.epsilon(event, delta)
        full = epsilon_from_rdp(acc.orders, acc.rdp_curve(event), delta)[0]
        assert pruned == pytest.approx(full, rel=1e-12)


def test_composition_sums_curves_and_caches():
    acc = RdpAccountant()
    a, b = sgm(0.01, 1.0, 100), SelfComposedEvent(LaplaceEvent(3.0), 4)
    np.testing.assert_allclose(acc.rdp_curve(ComposedEvent([a, b])),
                               acc.rdp_curve(a) + acc.rdp_curve(b), rtol=1e-14)
    assert acc.rdp_curve(a) is acc.rdp_curve(a)


def test_gaussian_compositions_inside_sampling_use_effective_sigma():
    acc = RdpAccountant()
    nested = PoissonSampledEvent(0.05, ComposedEvent([GaussianEvent(2.0), GaussianEvent(2.0)]))
    np.testing.assert_allclose(acc.rdp_curve(nested),
                               acc.rdp_curve(PoissonSampledEvent(0.05, GaussianEvent(math.sqrt(2)))),
                               rtol=1e-12)


def test_validation():
    with pytest.raises(ValidationError):
        RdpAccountant(orders=[0.5, 2])
    with pytest.raises(ValidationError):
        RdpAccountant(conversion="tight")
    with pytest.raises(ValidationError):
        RdpAccountant(poisson_amplification="magic")
    with pytest.raises(ValidationError):
        RdpAccountant().epsilon(sgm(0.1, 1, 1), 1.5)
    with pytest.raises(ValidationError):
        RdpAccountant().delta(sgm(0.1, 1, 1), -1)
    with pytest.raises(ValidationError):
        RdpAccountant().epsilon("event", 1e-5)
    with pytest.raises(ValidationError):
        RdpAccountant().epsilon(PureEvent(1.0), float("nan"))


# ---------------------------------------------------------------------------
# privacy-filter events
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("rho,delta", [(1e-4, 1e-8), (0.01, 1e-5), (0.5, 1e-6)])
def test_zcdp_filter_epsilon_matches_dp_accounting_gaussian(rho, delta):
    from fastdp.privacy.events import PrivacyFilterEvent

    event = PrivacyFilterEvent.zcdp(rho)
    ours = RdpAccountant().epsilon(event, delta)
    ref = dp_rdp.RdpAccountant()           # its default orders = ours; α·ρ is the Gaussian curve
    ref.compose(dp_accounting.GaussianDpEvent(1.0 / math.sqrt(2.0 * rho)))
    assert ours == pytest.approx(ref.get_epsilon(delta), rel=1e-9)
    # classic conversion on a fine grid -> the closed form ρ + 2 sqrt(ρ log(1/δ))
    fine = RdpAccountant(orders=1.0 + np.geomspace(1e-3, 1e4, 20001), conversion="classic")
    closed = rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))
    assert fine.epsilon(event, delta) == pytest.approx(closed, rel=1e-5)
    assert fine.epsilon(event, delta) >= closed * (1 - 1e-12)


def test_fixed_order_filter_curve_and_composition():
    from fastdp.privacy.events import PrivacyFilterEvent
    from fastdp.privacy.rdp import rdp_privacy_filter

    event = PrivacyFilterEvent.rdp([10, 40], [0.3, 0.6])
    curve = rdp_privacy_filter(event, [2, 10, 20, 40, 41])
    np.testing.assert_array_equal(curve, [0.3, 0.3, 0.6, 0.6, np.inf])
    acc = RdpAccountant(orders=[10, 40], conversion="classic")
    delta = 1e-6
    assert acc.epsilon(event, delta) == pytest.approx(
        min(0.3 + math.log(1 / delta) / 9, 0.6 + math.log(1 / delta) / 39))
    both = ComposedEvent((event, GaussianEvent(10.0)))
    np.testing.assert_allclose(acc.rdp_curve(both), [0.3 + 10 / 200, 0.6 + 40 / 200])


# ---------------------------------------------------------------------------
# approximate (ε, δ)-DP events have no Rényi curve
# ---------------------------------------------------------------------------
from fastdp.exceptions import PrivacyAnalysisError  # noqa: E402
from fastdp.privacy import events as _ev  # noqa: E402


@pytest.mark.parametrize("event", [
    _ev.ApproxDpEvent(0.5, 1e-9),
    _ev.SelfComposedEvent(_ev.ApproxDpEvent(0.5, 1e-9), 3),
    _ev.ComposedEvent([_ev.GaussianEvent(2.0), _ev.ApproxDpEvent(0.5, 1e-9)]),
    _ev.PoissonSampledEvent(0.1, _ev.ApproxDpEvent(0.5, 1e-9)),
    _ev.FixedSizeSampledEvent(100, 5, _ev.ApproxDpEvent(0.5, 1e-9, "replace_one")),
    _ev.ShuffledEvent(100, 10, _ev.ApproxDpEvent(0.5, 1e-9), epochs=2),
], ids=str)
def test_rdp_refuses_approximate_dp_events(event):
    acc = RdpAccountant()
    for call in (lambda: acc.epsilon(event, 1e-5), lambda: acc.delta(event, 1.0),
                 lambda: acc.report(event, 1e-5)):
        with pytest.raises(PrivacyAnalysisError, match="accountant='pure'.*accountant='pld'"):
            call()


def test_rdp_approximate_event_with_zero_delta_is_pure():
    acc = RdpAccountant()
    pure = _ev.SelfComposedEvent(_ev.PureEvent(0.3), 10)
    approx = _ev.SelfComposedEvent(_ev.ApproxDpEvent(0.3, 0.0), 10)
    assert acc.epsilon(approx, 1e-6) == acc.epsilon(pure, 1e-6)
