"""Tests of fastdp.privacy.pure against closed forms and the numbers of specs 002 and 004."""
import math

import numpy as np
import pytest

from fastdp.exceptions import PrivacyAnalysisError, ValidationError
from fastdp.privacy import events as ev
from fastdp.privacy.accountants import get_accountant
from fastdp.privacy.pure import (
    PureDPAccountant,
    advanced_composition,
    amplify_poisson,
    amplify_without_replacement,
    basic_composition,
)

N_002, S1_002 = 100000, 40.0


def spec002_event(m, steps, scale_factor=1.0, epsilon=1.0):
    """Uniform-budget DP-GD/HB/NAG of spec 002 (eqs. 3.4-3.5) as an event.

    Laplace noise of scale b on a batch-mean gradient with L1 sensitivity S1/m
    (replace-one) is a LaplaceEvent with scale b·m/S1 relative to the sensitivity.
    """
    eps0 = math.log1p(math.expm1(epsilon / steps) * N_002 / m)
    b = S1_002 / (m * eps0) * scale_factor
    step = ev.FixedSizeSampledEvent(N_002, m, ev.LaplaceEvent(b * m / S1_002, "replace_one"))
    return ev.SelfComposedEvent(step, steps), eps0, b


@pytest.mark.parametrize("m, steps, eps0, b", [
    (100000, 100, 0.0100000, 0.0400), (100000, 1000, 0.0010000, 0.4000),
    (1000, 100, 0.695654, 0.057500), (1000, 200, 0.406300, 0.098450),
    (1000, 500, 0.182490, 0.219190), (1000, 1000, 0.095356, 0.41948),
])
def test_spec002_uniform_budget_totals_one(m, steps, eps0, b):
    event, our_eps0, our_b = spec002_event(m, steps)
    assert our_eps0 == pytest.approx(eps0, rel=1e-5)  # spec 002 §6.1.4: 5 significant digits
    assert our_b == pytest.approx(b, rel=1e-5)
    assert PureDPAccountant().epsilon(event, 0.0) == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize("m, steps, realized", [
    (100000, 100, 1.414), (100000, 1000, 1.414), (1000, 100, 1.661), (1000, 200, 1.547),
    (1000, 500, 1.470), (1000, 1000, 1.443),
])
def test_spec002_reference_code_noise_realized_epsilon(m, steps, realized):
    """Laplace scale b/√2 (the reference code's convention) spends more than ε = 1."""
    event, _, _ = spec002_event(m, steps, scale_factor=1 / math.sqrt(2))
    assert f"{PureDPAccountant().epsilon(event, 0.0):.4g}" == f"{realized:.4g}"


@pytest.mark.parametrize("m", [1, 10, 1000, N_002])
@pytest.mark.parametrize("target", [1e-8, 1e-4, 0.01, 1.0, 5.0])
def test_amplification_round_trip(m, target):
    """ε0 from eq. 3.5 amplifies back to the per-step target (log1p/expm1 accuracy)."""
    eps0 = math.log1p(math.expm1(target) * N_002 / m)
    assert amplify_without_replacement(eps0, m, N_002) == pytest.approx(target, rel=1e-10)


def test_amplification_closed_forms():
    assert amplify_without_replacement(0.3, 10, 10) == pytest.approx(0.3, rel=1e-15)
    assert amplify_without_replacement(2.0, 5, 100) == pytest.approx(
        math.log(1 + 0.05 * (math.exp(2.0) - 1)), rel=1e-14)
    assert amplify_poisson(2.0, 0.05) == pytest.approx(math.log(1 + 0.05 * (math.exp(2.0) - 1)), rel=1e-14)
    assert amplify_poisson(1.0, 0.0) == 0.0
    # huge ε: log(q e^ε) to first order, no overflow
    assert amplify_poisson(2000.0, 0.01) == pytest.approx(2000.0 + math.log(0.01), rel=1e-14)
    with pytest.raises(ValidationError):
        amplify_without_replacement(1.0, 11, 10)
    with pytest.raises(ValidationError):
        amplify_poisson(-1.0, 0.1)


def test_events_of_every_pure_kind():
    accountant = PureDPAccountant()
    assert accountant.epsilon(ev.LaplaceEvent(4.0), 0.0) == 0.25
    assert accountant.epsilon(ev.PureEvent(0.3), 0.0) == 0.3
    assert accountant.epsilon(ev.ExponentialMechanismEvent(0.7), 0.0) == 0.7
    assert accountant.epsilon(ev.LineSearchEvent.laplace(0.2, max_it=10), 0.0) == 0.2
    composed = ev.ComposedEvent([ev.SelfComposedEvent(ev.LaplaceEvent(10.0), 7),
                                 ev.ExponentialMechanismEvent(0.05)])
    assert accountant.epsilon(composed, 0.0) == pytest.approx(0.75, rel=1e-15)
    poisson = ev.SelfComposedEvent(ev.PoissonSampledEvent(0.01, ev.LaplaceEvent(0.5)), 100)
    assert accountant.epsilon(poisson, 0.0) == pytest.approx(
        100 * math.log1p(0.01 * math.expm1(2.0)), rel=1e-13)
    # fixed-size sampling of an add/remove event: replace-one conversion doubles ε first
    fixed = ev.FixedSizeSampledEvent(1000, 10, ev.PureEvent(0.5))
    assert accountant.epsilon(fixed, 0.0) == pytest.approx(math.log1p(0.01 * math.expm1(1.0)), rel=1e-13)
    assert accountant.epsilon(ev.NonPrivateEvent(), 0.0) == math.inf


def test_shuffled_has_no_amplification_and_labels_what_if():
    event = ev.ShuffledEvent(1000, 100, ev.LaplaceEvent(2.0, "replace_one"), epochs=3)
    accountant = PureDPAccountant()
    assert accountant.epsilon(event, 0.0) == pytest.approx(1.5, rel=1e-15)
    report = accountant.report(event, 0.0)
    assert report.epsilon == pytest.approx(1.5)
    # what-if: 30 Poisson(0.1) steps of the add/remove reading of the inner event
    assert report.epsilon_if_poisson_assumed == pytest.approx(30 * math.log1p(0.1 * math.expm1(0.5)))


def test_gaussian_is_refused():
    accountant = PureDPAccountant()
    for event in (ev.GaussianEvent(1.0),
                  ev.SelfComposedEvent(ev.PoissonSampledEvent(0.1, ev.GaussianEvent(2.0)), 5),
                  ev.LineSearchEvent.gaussian(0.1),
                  ev.ComposedEvent([ev.LaplaceEvent(1.0), ev.GaussianEvent(3.0)])):
        with pytest.raises(PrivacyAnalysisError):
            accountant.epsilon(event, 1e-5)


def kov_reference(eps_list, delta_prime):
    """Kairouz-Oh-Viswanath Thm 3.5, written out independently (loop, no fsum)."""
    eps_list = np.asarray(eps_list, dtype=float)
    sq = float(np.sum(eps_list ** 2))
    drift = float(np.sum(eps_list * (np.exp(eps_list) - 1) / (np.exp(eps_list) + 1)))
    return min(float(eps_list.sum()),
               drift + math.sqrt(2 * sq * math.log(math.e + math.sqrt(sq) / delta_prime)),
               drift + math.sqrt(2 * sq * math.log(1 / delta_prime)))


def test_advanced_composition_closed_forms():
    rng = np.random.default_rng(5)
    for _ in range(20):
        eps = rng.uniform(0.001, 0.5, size=int(rng.integers(1, 300)))
        dp = float(10 ** rng.uniform(-9, -2))
        assert advanced_composition(list(eps), dp) == pytest.approx(kov_reference(eps, dp), rel=1e-12)
    # homogeneous DRV: sqrt(2k ln(1/δ')) ε + k ε (e^ε − 1)
    k, e, dp = 1000, 0.01, 1e-6
    drv = math.sqrt(2 * k * math.log(1 / dp)) * e + k * e * math.expm1(e)
    assert advanced_composition([(e, k)], dp, form="drv") == pytest.approx(drv, rel=1e-13)
    # spec 004 Lemma 4.3 as printed
    paper = math.sqrt(2 * k * e * e * math.log(math.e + math.sqrt(k) * e / dp)) + k * e * e
    assert advanced_composition([(e, k)], dp, form="paper_004") == pytest.approx(paper, rel=1e-13)
    # the (ε, count) form equals the repeated list
    assert advanced_composition([(0.05, 40)], 1e-5) == pytest.approx(
        advanced_composition([0.05] * 40, 1e-5), rel=1e-12)
    # KOV's minimum never exceeds basic composition
    assert advanced_composition([(2.0, 3)], 1e-5) == basic_composition([(2.0, 3)]) == 6.0


def spec004_event(sigma=18.414459, iota=0.5, q=10, steps=200, delta0=0.01):
    """Spec 004 §3.3: per-round Gaussian as (ε_t, δ0)-DP, amplified by ι/q, T rounds."""
    eps_t = 2 * math.sqrt(2 * math.log(2 / delta0)) / sigma
    return ev.SelfComposedEvent(ev.PoissonSampledEvent(iota / q, ev.PureEvent(eps_t)), steps), eps_t


def test_spec004_vectors():
    event, eps_t = spec004_event()
    assert eps_t == pytest.approx(0.35355, rel=1e-4)
    accountant = PureDPAccountant("advanced")
    per_round = accountant.pure_epsilons(event)
    assert per_round == [(pytest.approx(0.020984, rel=2e-5), 200)]
    # δ' = 1e-5: ε_KOV ≈ 1.39 (spec 004 §6 A.5)
    assert accountant.epsilon(event, 1e-5) == pytest.approx(1.39, abs=0.005)
    # the paper's δ' = sqrt(Σ ε'²) ≈ 0.297 gives ε_KOV ≈ 0.507 > 0.5 (error E1)
    delta_prime = math.sqrt(200) * per_round[0][0]
    assert delta_prime == pytest.approx(0.297, abs=5e-4)
    eps = PureDPAccountant("advanced", delta_prime=delta_prime).epsilon(event, delta_prime)
    assert eps == pytest.approx(0.507, abs=5e-4) and eps > 0.5


def test_advanced_accountant_options():
    event = ev.SelfComposedEvent(ev.PureEvent(0.01), 5000)
    basic = PureDPAccountant().epsilon(event, 1e-6)
    assert basic == pytest.approx(50.0)
    adv = PureDPAccountant("advanced").epsilon(event, 1e-6)
    assert adv == pytest.approx(kov_reference([0.01] * 5000, 1e-6), rel=1e-10) and adv < basic
    fixed = PureDPAccountant("advanced", delta_prime=1e-8)
    assert fixed.epsilon(event, 1e-6) == pytest.approx(kov_reference([0.01] * 5000, 1e-8), rel=1e-10)
    with pytest.raises(PrivacyAnalysisError):
        fixed.epsilon(event, 1e-9)
    assert PureDPAccountant("advanced").epsilon(event, 0.0) == basic  # no slack, no advantage
    with pytest.raises(ValidationError):
        PureDPAccountant("fancy")
    with pytest.raises(ValidationError):
        PureDPAccountant("advanced", advanced_form="nope")


def test_delta_inverts_epsilon():
    event = ev.SelfComposedEvent(ev.LaplaceEvent(50.0), 2000)  # Σε = 40
    accountant = PureDPAccountant("advanced")
    assert accountant.delta(event, 40.0) == 0.0
    for target in (1e-9, 1e-6, 1e-3):
        eps = accountant.epsilon(event, target)
        delta = accountant.delta(event, eps)
        assert delta == pytest.approx(target, rel=1e-9)
        assert accountant.epsilon(event, delta) <= eps * (1 + 1e-12)
    assert PureDPAccountant().delta(event, 39.0) == 1.0
    assert PureDPAccountant().delta(event, 40.0) == 0.0


def test_monotone_and_registry():
    accountant = get_accountant("pure", composition="advanced")
    assert isinstance(accountant, PureDPAccountant)
    eps = [accountant.epsilon(ev.SelfComposedEvent(ev.LaplaceEvent(s), 100), 1e-6) for s in (1, 10, 100)]
    assert eps == sorted(eps, reverse=True)
    eps = [accountant.epsilon(ev.SelfComposedEvent(
        ev.PoissonSampledEvent(q, ev.LaplaceEvent(1.0)), 100), 1e-6) for q in (0.01, 0.1, 1.0)]
    assert eps == sorted(eps)


# ---------------------------------------------------------------------------
# approximate (ε, δ)-DP events
# ---------------------------------------------------------------------------
def _kov_heterogeneous(eps_list, slack):
    """Kairouz-Oh-Viswanath Thm 3.5 written out (independent of fastdp.privacy.pure)."""
    eps_list = np.asarray(eps_list, float)
    total, squares = eps_list.sum(), (eps_list ** 2).sum()
    drift = (eps_list * np.tanh(eps_list / 2)).sum()
    return min(total,
               drift + math.sqrt(2 * squares * math.log(math.e + math.sqrt(squares) / slack)),
               drift + math.sqrt(2 * squares * math.log(1 / slack)))


APPROX_MIX = ev.ComposedEvent([
    ev.SelfComposedEvent(ev.ApproxDpEvent(0.05, 2e-8), 30),
    ev.PureEvent(0.1),
    ev.SelfComposedEvent(ev.LaplaceEvent(25.0), 20),
])
APPROX_EPS = [0.05] * 30 + [0.1] + [0.04] * 20
APPROX_DELTA = 30 * 2e-8


def test_approx_basic_composition_closed_form():
    acc = PureDPAccountant()
    assert acc.epsilon(APPROX_MIX, 1e-6) == pytest.approx(math.fsum(APPROX_EPS), rel=1e-14)
    assert acc.epsilon(APPROX_MIX, APPROX_DELTA) == pytest.approx(math.fsum(APPROX_EPS), rel=1e-14)
    # δ at ε ≥ Σε is the events' own Σδ; below it basic composition certifies nothing
    assert acc.delta(APPROX_MIX, 3.0) == pytest.approx(APPROX_DELTA, rel=1e-14)
    assert acc.delta(APPROX_MIX, 2.0) == 1.0
    with pytest.raises(PrivacyAnalysisError, match="states delta = 6e-07"):
        acc.epsilon(APPROX_MIX, 5e-7)
    terms = acc.epsilon_delta_terms(APPROX_MIX)
    assert (0.05, 2e-8, 30) in terms and (0.1, 0.0, 1) in terms
    with pytest.raises(PrivacyAnalysisError, match="epsilon_delta_terms"):
        acc.pure_epsilons(APPROX_MIX)


@pytest.mark.parametrize("delta", [1e-6, 1e-5, 1e-3])
def test_approx_advanced_composition_adds_own_delta_to_the_slack(delta):
    acc = PureDPAccountant("advanced")
    expected = _kov_heterogeneous(APPROX_EPS, delta - APPROX_DELTA)
    assert acc.epsilon(APPROX_MIX, delta) == pytest.approx(expected, rel=1e-12)
    assert expected < math.fsum(APPROX_EPS)
    # δ at that ε: own Σδ plus the smallest slack, which is delta − Σδ
    assert acc.delta(APPROX_MIX, expected) == pytest.approx(delta, rel=1e-6)
    drv = PureDPAccountant("advanced", advanced_form="drv").epsilon(APPROX_MIX, delta)
    eps_arr = np.asarray(APPROX_EPS)
    drv_ref = (math.sqrt(2 * math.log(1 / (delta - APPROX_DELTA)) * (eps_arr ** 2).sum())
               + (eps_arr * np.expm1(eps_arr)).sum())
    assert drv == pytest.approx(min(drv_ref, math.fsum(APPROX_EPS)), rel=1e-12)


def test_approx_advanced_composition_with_fixed_slack():
    acc = PureDPAccountant("advanced", delta_prime=1e-6)
    expected = _kov_heterogeneous(APPROX_EPS, 1e-6)
    assert acc.epsilon(APPROX_MIX, 1e-6 + APPROX_DELTA) == pytest.approx(expected, rel=1e-12)
    with pytest.raises(PrivacyAnalysisError, match="own delta"):
        acc.epsilon(APPROX_MIX, 1e-6)
    # at δ exactly Σδ_i there is no slack left: basic composition
    assert PureDPAccountant("advanced").epsilon(APPROX_MIX, APPROX_DELTA) == pytest.approx(
        math.fsum(APPROX_EPS), rel=1e-14)


def test_approx_amplification_scales_delta():
    eps, delta, q = 1.2, 1e-6, 0.02
    event = ev.SelfComposedEvent(ev.PoissonSampledEvent(q, ev.ApproxDpEvent(eps, delta)), 50)
    acc = PureDPAccountant()
    eps1 = math.log(1 + q * (math.exp(eps) - 1))
    assert acc.epsilon(event, 1e-6) == pytest.approx(50 * eps1, rel=1e-12)
    assert acc.delta(event, 50 * eps1 + 1e-9) == pytest.approx(50 * q * delta, rel=1e-12)
    fixed = ev.FixedSizeSampledEvent(100, 10, ev.ApproxDpEvent(eps, delta, "replace_one"))
    assert acc.epsilon(fixed, 1e-7) == pytest.approx(math.log(1 + 0.1 * math.expm1(eps)), rel=1e-12)
    assert acc.delta(fixed, 1.0) == pytest.approx(0.1 * delta, rel=1e-12)
    with pytest.raises(PrivacyAnalysisError):
        acc.epsilon(fixed, 0.5e-7)


def test_approx_event_with_zero_delta_is_pure():
    for acc in (PureDPAccountant(), PureDPAccountant("advanced")):
        pure = ev.SelfComposedEvent(ev.PureEvent(0.2), 40)
        approx = ev.SelfComposedEvent(ev.ApproxDpEvent(0.2, 0.0), 40)
        assert acc.epsilon(approx, 1e-6) == acc.epsilon(pure, 1e-6)
        assert acc.epsilon(approx, 0.0) == acc.epsilon(pure, 0.0)
        assert acc.delta(approx, 3.0) == acc.delta(pure, 3.0)
