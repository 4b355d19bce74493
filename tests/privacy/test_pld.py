"""Tests of fastdp.privacy.pld against dp_accounting and the anchors of anchors-dp-libs §2."""
import math

import numpy as np
import pytest

dp_accounting = pytest.importorskip("dp_accounting")
from dp_accounting import pld as dp_pld  # noqa: E402

from fastdp.exceptions import PrivacyAnalysisError, ValidationError  # noqa: E402
from fastdp.privacy import events as ev  # noqa: E402
from fastdp.privacy.accountants import get_accountant  # noqa: E402
from fastdp.privacy.pld import PLDAccountant  # noqa: E402

# anchors-dp-libs §2.1 settings: q, σ, T, δ; §2.2 PLD columns (vdi 1e-4, vdi 1e-3)
SETTINGS = {
    "A": (0.01, 4.0, 10000, 1e-5, 0.9469993060, 0.9600452122),
    "B": (256 / 60000, 1.1, 14063, 1e-5, 2.3817788136, 2.3906234298),
    "C": (0.01, 1.1, 10000, 1e-5, 5.1926201316, 5.1962513164),
    "D": (0.01, 0.7, 1000, 1e-5, 4.6182914431, 4.6185997162),
    "E": (1.0, 10.0, 100, 1e-5, 4.3771781000, 4.3771784668),
    "F": (1e-3, 0.8, 100000, 1e-7, 3.2269366422, 3.2950908510),
}


def sgm_event(q, sigma, steps):
    inner = ev.GaussianEvent(sigma) if q == 1.0 else ev.PoissonSampledEvent(q, ev.GaussianEvent(sigma))
    return ev.SelfComposedEvent(inner, steps)


def direct(event, delta, vdi, relation=None):
    relation = relation or dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
    accountant = dp_pld.PLDAccountant(relation, value_discretization_interval=vdi)
    return accountant.compose(event.to_dp_accounting()).get_epsilon(delta)


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_anchor_values_coarse_grid(name):
    q, sigma, steps, delta, _, expected = SETTINGS[name]
    eps = PLDAccountant(value_discretization_interval=1e-3).epsilon(sgm_event(q, sigma, steps), delta)
    assert eps == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("name", ["A", "E", "F"])
def test_anchor_values_default_grid(name):
    q, sigma, steps, delta, expected, _ = SETTINGS[name]
    eps = PLDAccountant().epsilon(sgm_event(q, sigma, steps), delta)
    assert eps == pytest.approx(expected, rel=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["B", "C", "D"])
def test_anchor_values_default_grid_slow(name):
    q, sigma, steps, delta, expected, _ = SETTINGS[name]
    eps = PLDAccountant().epsilon(sgm_event(q, sigma, steps), delta)
    assert eps == pytest.approx(expected, rel=1e-6)


def test_setting_e_matches_analytic_gaussian():
    """100 Gaussians with σ = 10 are one Gaussian with σ = 1: ε = 4.377178095681."""
    eps = PLDAccountant().epsilon(sgm_event(1.0, 10.0, 100), 1e-5)
    assert abs(eps - 4.377178095681) < 1e-6
    assert eps >= 4.377178095681 - 1e-9  # pessimistic discretisation never under-reports
    assert abs(eps - dp_accounting.get_epsilon_gaussian(1.0, 1e-5)) < 1e-6


def test_same_discretisation_same_answer_random_settings():
    rng = np.random.default_rng(2024)
    accountant = PLDAccountant(value_discretization_interval=1e-3)
    for _ in range(8):
        q = float(10 ** rng.uniform(-3, -0.5))
        sigma = float(rng.uniform(0.6, 5.0))
        steps = int(rng.integers(1, 400))
        delta = float(10 ** rng.uniform(-8, -3))
        event = sgm_event(q, sigma, steps)
        assert accountant.epsilon(event, delta) == direct(event, delta, 1e-3)
        eps = accountant.epsilon(event, delta)
        direct_delta = dp_pld.PLDAccountant(value_discretization_interval=1e-3).compose(
            event.to_dp_accounting()).get_delta(eps)
        assert accountant.delta(event, eps) == direct_delta


def test_laplace_and_composed_events_match_dp_accounting():
    event = ev.ComposedEvent([
        ev.SelfComposedEvent(ev.PoissonSampledEvent(0.05, ev.LaplaceEvent(2.0)), 50),
        ev.SelfComposedEvent(ev.PoissonSampledEvent(0.01, ev.GaussianEvent(1.5)), 200),
    ])
    assert PLDAccountant(1e-3).epsilon(event, 1e-6) == direct(event, 1e-6, 1e-3)


def test_replace_one_gaussian_is_stated_against_its_own_sensitivity():
    """GaussianEvent(sigma, replace_one): std = sigma x replace-one sensitivity.

    Its loss is the unit-sensitivity Gaussian, so its epsilon equals the
    add/remove event's and, for one release at sigma = 1, the analytic value
    4.377178095681 (dp_accounting's REPLACE_ONE PLD would double the
    sensitivity and report 9.997).
    """
    one = PLDAccountant(1e-4).epsilon(ev.GaussianEvent(1.0, adjacency="replace_one"), 1e-5)
    assert one == pytest.approx(4.377178095681, abs=1e-6)
    event = ev.SelfComposedEvent(ev.GaussianEvent(3.0, adjacency="replace_one"), 20)
    same = ev.SelfComposedEvent(ev.GaussianEvent(3.0), 20)
    assert PLDAccountant(1e-3).epsilon(event, 1e-5) == PLDAccountant(1e-3).epsilon(same, 1e-5)
    relation = dp_accounting.NeighboringRelation.REPLACE_ONE
    # pure events become randomized response, which dp_accounting takes only under replace-one
    pure = ev.PureEvent(0.2, adjacency="replace_one")
    assert PLDAccountant(1e-3).epsilon(pure, 1e-5) == direct(pure, 1e-5, 1e-3, relation)


def test_repeated_pure_events_are_composed_count_times():
    """dp_accounting 0.6.0 composes SelfComposed(RandomizedResponse, k) once; fastdp k times."""
    relation = dp_accounting.NeighboringRelation.REPLACE_ONE
    one = ev.PureEvent(0.1)
    rr = one.to_dp_accounting()
    expanded = dp_pld.PLDAccountant(relation, 1e-3).compose(
        dp_accounting.ComposedDpEvent([rr] * 25)).get_epsilon(1e-6)
    ours = PLDAccountant(1e-3).epsilon(ev.SelfComposedEvent(one, 25), 1e-6)
    assert ours == pytest.approx(expanded, rel=1e-9)
    assert ours > 2.0  # 25 releases at ε = 0.1; the dp_accounting shortcut reports ~0.101


def test_unsampled_pure_and_laplace_compose_relation_free():
    vdi = 1e-3
    laplace = ev.SelfComposedEvent(ev.LaplaceEvent(4.0), 25)
    pure = ev.SelfComposedEvent(ev.PureEvent(0.1), 25)
    accountant = PLDAccountant(vdi)
    assert accountant.epsilon(laplace, 1e-6) == direct(laplace, 1e-6, vdi)
    # dp_accounting refuses Laplace under replace-one and randomized response under
    # add/remove, so it cannot compose this mixture under either relation; fastdp can
    mixed = ev.ComposedEvent([laplace, pure])
    eps = accountant.epsilon(mixed, 1e-6)
    basic = 25 * 0.25 + 25 * 0.1  # pure composition bound
    assert eps <= basic + 10 * vdi
    assert eps > max(accountant.epsilon(laplace, 1e-6), accountant.epsilon(pure, 1e-6))
    replace_one = ev.SelfComposedEvent(ev.LaplaceEvent(4.0, adjacency="replace_one"), 25)
    assert accountant.epsilon(replace_one, 1e-6) == accountant.epsilon(laplace, 1e-6)


def test_pure_event_pld_close_to_exact_pure_bound():
    """One ε-DP release: δ(ε) = 0 at ε, so the PLD ε at tiny δ is ε (up to the grid)."""
    eps = PLDAccountant(1e-4).epsilon(ev.PureEvent(0.7), 1e-12)
    assert eps == pytest.approx(0.7, abs=2e-4)


def test_refusals():
    accountant = PLDAccountant(1e-3)
    with pytest.raises(PrivacyAnalysisError):
        accountant.epsilon(ev.FixedSizeSampledEvent(1000, 10, ev.GaussianEvent(1.0)), 1e-5)
    with pytest.raises(PrivacyAnalysisError):
        accountant.epsilon(ev.LineSearchEvent.laplace(0.5), 1e-5)  # paper analysis: RDP only
    assert accountant.epsilon(ev.NonPrivateEvent(), 1e-5) == math.inf
    assert accountant.delta(ev.NonPrivateEvent(), 1.0) == 1.0
    with pytest.raises(ValidationError):
        PLDAccountant(value_discretization_interval=0.0)


def test_shuffled_report_labels_the_poisson_what_if():
    event = ev.ShuffledEvent(1000, 100, ev.GaussianEvent(2.0), epochs=3)
    report = PLDAccountant(1e-3).report(event, 1e-5)
    what_if = direct(ev.SelfComposedEvent(ev.PoissonSampledEvent(0.1, ev.GaussianEvent(2.0)), 30),
                     1e-5, 1e-3)
    assert report.epsilon_if_poisson_assumed == what_if
    assert report.epsilon == PLDAccountant(1e-3).epsilon(event, 1e-5)
    assert report.epsilon > report.epsilon_if_poisson_assumed


def test_registry_returns_this_class():
    accountant = get_accountant("pld", value_discretization_interval=1e-3)
    assert isinstance(accountant, PLDAccountant)
    assert accountant.value_discretization_interval == 1e-3


def test_monotone_in_sigma_and_steps():
    accountant = PLDAccountant(1e-3)
    eps_sigma = [accountant.epsilon(sgm_event(0.01, s, 300), 1e-5) for s in (0.8, 1.2, 2.0)]
    assert eps_sigma == sorted(eps_sigma, reverse=True)
    eps_steps = [accountant.epsilon(sgm_event(0.01, 1.0, t), 1e-5) for t in (10, 100, 1000)]
    assert eps_steps == sorted(eps_steps)


# ---------------------------------------------------------------------------
# approximate (ε, δ)-DP events
# ---------------------------------------------------------------------------
def _epsilon_delta_pld(eps, delta, vdi):
    from dp_accounting.pld import common, privacy_loss_distribution as pld_module

    return pld_module.from_privacy_parameters(
        common.DifferentialPrivacyParameters(eps, delta), value_discretization_interval=vdi)


def test_approx_event_matches_dp_accounting_pld_from_privacy_parameters():
    from dp_accounting.pld import privacy_loss_distribution as pld_module

    vdi = 1e-4
    event = ev.ComposedEvent([ev.SelfComposedEvent(ev.ApproxDpEvent(0.1, 1e-8), 25),
                              ev.GaussianEvent(3.0)])
    reference = _epsilon_delta_pld(0.1, 1e-8, vdi).self_compose(25).compose(
        pld_module.from_gaussian_mechanism(3.0, value_discretization_interval=vdi))
    acc = PLDAccountant(value_discretization_interval=vdi)
    for delta in (1e-6, 1e-5, 1e-3):
        assert acc.epsilon(event, delta) == pytest.approx(
            reference.get_epsilon_for_delta(delta), rel=1e-9)
    for eps in (0.5, 1.5):
        assert acc.delta(event, eps) == pytest.approx(reference.get_delta_for_epsilon(eps), rel=1e-9)
    # the composition is tighter than basic composition, and at least its own δ
    assert acc.epsilon(event, 1e-5) < 2.5 + 1.8
    assert acc.delta(event, 100.0) >= 1 - (1 - 1e-8) ** 25 - 1e-15


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
def test_approx_event_single_release_closed_form(adjacency):
    # dominating pair of (ε, δ)-DP: δ(ε') = δ + (1 − δ)[p − e^ε' (1 − p)]_+, p = e^ε/(1 + e^ε)
    eps, delta = 0.7, 1e-6
    p = math.exp(eps) / (1 + math.exp(eps))
    acc = PLDAccountant(value_discretization_interval=1e-5)
    event = ev.ApproxDpEvent(eps, delta, adjacency)
    assert acc.epsilon(event, delta) == pytest.approx(eps, abs=2e-5)
    target = 1e-2
    expected = math.log((p - (target - delta) / (1 - delta)) / (1 - p))
    assert acc.epsilon(event, target) == pytest.approx(expected, abs=2e-5)
    assert acc.delta(event, 0.3) == pytest.approx(
        delta + (1 - delta) * (p - math.exp(0.3) * (1 - p)), rel=1e-3)


def test_approx_event_needs_target_delta_above_its_own():
    event = ev.SelfComposedEvent(ev.ApproxDpEvent(0.1, 1e-6), 10)
    with pytest.raises(PrivacyAnalysisError, match="states delta = 1e-05"):
        PLDAccountant().epsilon(event, 5e-6)
    # sampled approximate events have no PLD here: refused, never ignored
    with pytest.raises(PrivacyAnalysisError):
        PLDAccountant().epsilon(ev.PoissonSampledEvent(0.1, ev.ApproxDpEvent(0.1, 1e-6)), 1e-5)
