"""The "auto" accountant (issue 31): the smaller of the own-PLD and RDP bounds, and
calibration under the own PLD and "auto"."""
import math

import pytest

from fastdp.exceptions import PrivacyAnalysisError
from fastdp.privacy import calibrate_noise_multiplier, compute_epsilon, compute_epsilon_report
from fastdp.privacy import events as ev
from fastdp.privacy.accountants import get_accountant
from fastdp.privacy.auto import AutoAccountant
from fastdp.privacy.calibration import OWN_PLD_RTOL


def sgm(q, sigma, steps):
    return ev.SelfComposedEvent(ev.PoissonSampledEvent(q, ev.GaussianEvent(sigma)), steps)


def test_auto_is_the_smaller_bound_and_says_which():
    auto = get_accountant("auto")
    assert isinstance(auto, AutoAccountant)
    pld, rdp = get_accountant("pld_own"), get_accountant("rdp")
    event = sgm(0.01, 1.0, 1000)
    assert auto.epsilon(event, 1e-5) == min(pld.epsilon(event, 1e-5), rdp.epsilon(event, 1e-5))
    assert auto.used(event, 1e-5) == "pld_own"
    assert auto.report(event, 1e-5).accountant == "auto (pld_own)"
    assert auto.delta(event, 2.0) == min(pld.delta(event, 2.0), rdp.delta(event, 2.0))


def test_auto_falls_back_to_the_accountant_that_analyses_the_event():
    auto = get_accountant("auto")
    fixed = ev.SelfComposedEvent(ev.FixedSizeSampledEvent(1000, 10, ev.GaussianEvent(1.0)), 100)
    assert auto.epsilon(fixed, 1e-5) == get_accountant("rdp").epsilon(fixed, 1e-5)
    assert auto.report(fixed, 1e-5).accountant == "auto (rdp)"
    approx = ev.SelfComposedEvent(ev.ApproxDpEvent(0.2, 1e-8), 10)   # RDP refuses (ε, δ)-DP
    assert auto.epsilon(approx, 1e-5) == get_accountant("pld_own").epsilon(approx, 1e-5)
    assert auto.used(approx, 1e-5) == "pld_own"
    with pytest.raises(PrivacyAnalysisError, match="no accountant of 'auto'"):
        auto.epsilon(ev.ComposedEvent((fixed.to_replace_one(), approx.to_replace_one(),
                                       ev.LineSearchEvent.gaussian(0.1).to_replace_one())), 1e-5)


def test_auto_report_of_shuffling_keeps_the_what_if():
    report = compute_epsilon_report(1.0, 0.01, 300, 1e-5, accountant="auto", sampling="shuffle",
                                    dataset_size=1000)
    assert report.epsilon_if_poisson_assumed < report.epsilon_guaranteed
    assert report.accountant.startswith("auto (")


@pytest.mark.parametrize("target,q,steps", [
    pytest.param(1.0, 0.01, 1000, marks=pytest.mark.slow),   # dp-accounting: 6 s
    (0.1, 0.004, 2500),
    pytest.param(8.0, 0.02, 200, marks=pytest.mark.slow),
])
def test_own_pld_calibration_is_feasible_and_tight(target, q, steps):
    pld = get_accountant("pld_own")
    sigma = calibrate_noise_multiplier(target, 1e-5, q, steps, accountant="pld_own")
    assert pld.epsilon(sgm(q, float(sigma), steps), 1e-5) <= target
    assert sigma.epsilon <= target
    assert pld.epsilon(sgm(q, sigma.infeasible_bound, steps), 1e-5) > target
    assert float(sigma) / sigma.infeasible_bound - 1 <= OWN_PLD_RTOL * 1.0001
    rdp_sigma = calibrate_noise_multiplier(target, 1e-5, q, steps, accountant="rdp")
    assert float(sigma) < float(rdp_sigma)
    # never above 1.005 x dp-accounting's pessimistic-PLD sigma: its epsilon at sigma/1.005
    # is above the target, so its own sigma is larger than that
    dpa_pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    eps = dpa_pld.from_gaussian_mechanism(float(sigma) / 1.005, sampling_prob=q,
                                          value_discretization_interval=1e-4
                                          ).self_compose(steps).get_epsilon_for_delta(1e-5)
    assert eps > target


def test_auto_calibration_is_the_smaller_of_the_two():
    args = (1.0, 1e-5, 0.01, 1000)
    auto = calibrate_noise_multiplier(*args, accountant="auto")
    own = calibrate_noise_multiplier(*args, accountant="pld_own")
    rdp = calibrate_noise_multiplier(*args, accountant="rdp")
    assert float(auto) == pytest.approx(min(float(own), float(rdp)), rel=1e-9)
    assert compute_epsilon(float(auto), 0.01, 1000, 1e-5, accountant="auto") <= 1.0
    # an event the PLD refuses: the RDP calibration
    fixed_auto = calibrate_noise_multiplier(*args, accountant="auto", sampling="fixed",
                                            dataset_size=10000)
    fixed_rdp = calibrate_noise_multiplier(*args, accountant="rdp", sampling="fixed",
                                           dataset_size=10000)
    assert float(fixed_auto) == float(fixed_rdp)
    with pytest.raises(PrivacyAnalysisError, match="fixed-size sampling"):
        calibrate_noise_multiplier(*args, accountant="pld_own", sampling="fixed",
                                   dataset_size=10000)


def test_auto_with_large_noise_is_small_epsilon():
    assert compute_epsilon(50.0, 0.01, 10, 1e-5, accountant="auto") < 0.01
    assert math.isinf(get_accountant("auto").epsilon(ev.NonPrivateEvent(), 1e-5))


def test_ledger_composes_under_the_tightest_bound(tmp_path):
    from fastdp.exceptions import BudgetExceededError
    from fastdp.privacy.ledger import PrivacyLedger

    fit = sgm(0.01, 1.0, 500)
    pld, rdp = get_accountant("pld_own"), get_accountant("rdp")
    two = ev.ComposedEvent((fit, fit))
    budget = 0.5 * (pld.epsilon(two, 1e-5) + rdp.epsilon(two, 1e-5))  # between the two bounds
    ledger = PrivacyLedger(budget, 1e-5, path=tmp_path / "book.json")   # default: "auto"
    assert ledger.accountant_name == "auto"
    ledger.charge(fit, "first")
    ledger.charge(fit, "second")          # RDP alone would refuse this one
    assert ledger.spent() == pytest.approx(pld.epsilon(two, 1e-5), rel=1e-12)
    assert "bound: pld_own" in ledger.summary()
    with pytest.raises(BudgetExceededError):
        PrivacyLedger(budget, 1e-5, "rdp").charge(two)
    with pytest.raises(BudgetExceededError):   # the tightest bound exceeds the budget
        ledger.charge(fit, "third")
    assert len(ledger.entries) == 2
    # reopening without an accountant keeps the file's; an old RDP file stays RDP
    assert PrivacyLedger(budget, 1e-5, path=tmp_path / "book.json").accountant_name == "auto"
    PrivacyLedger(3.0, 1e-5, "rdp", path=tmp_path / "old.json")
    assert PrivacyLedger(3.0, 1e-5, path=tmp_path / "old.json").accountant_name == "rdp"
    # a heterogeneous ledger: an RDP-only release makes the composition an RDP bound
    fixed = ev.SelfComposedEvent(ev.FixedSizeSampledEvent(1000, 10, ev.GaussianEvent(2.0)), 10)
    mixed = PrivacyLedger(50.0, 1e-5)
    mixed.charge(fixed.to_replace_one())
    assert mixed.spent() == rdp.epsilon(ev.ComposedEvent((fixed,)), 1e-5)


def test_split_bound_for_a_partly_pld_composition():
    """Fits the PLD analyses + a release with an RDP analysis only: ε_PLD(fits, δ_A) +
    ε_RDP(rest, δ − δ_A) is sound (basic composition) and here below RDP of the whole."""
    auto, pld, rdp = get_accountant("auto"), get_accountant("pld_own"), get_accountant("rdp")
    fits = ev.SelfComposedEvent(sgm(0.01, 0.8, 2000), 3)
    filt = ev.PrivacyFilterEvent.zcdp(1e-4)               # RDP only
    event = ev.ComposedEvent((fits, filt))
    split = min(pld.epsilon(ev.ComposedEvent((fits,)), s * 1e-5)
                + rdp.epsilon(ev.ComposedEvent((filt,)), (1 - s) * 1e-5) for s in (0.1, 0.5, 0.9))
    assert split < rdp.epsilon(event, 1e-5)
    assert auto.epsilon(event, 1e-5) == pytest.approx(split, rel=1e-12)
    assert auto.used(event, 1e-5) == "pld_own+rdp"


@pytest.mark.slow   # 600 + 600 DP-SGD runs: ~10 s
def test_audit_of_a_dpsgd_fit_at_the_auto_sigma():
    """DP-SGD with Poisson sampling at the σ "auto" calibrates: the audit's lower bound stays
    below the claim, and in the same run the same audit catches σ/4 (its power)."""
    import warnings

    import numpy as np

    from fastdp.privacy import audit, dp_sgd_event
    from fastdp.sampling import PoissonSampler
    from fastdp.solvers.sgd import dpsgd

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    X /= 1.25 * np.linalg.norm(X, axis=1, keepdims=True)
    y = rng.normal(size=40)
    X, canary, c = audit.isolated_canary(X)
    datasets = audit.neighbouring_datasets(X, y, canary, 50.0, "add_remove")
    q, steps, delta, target = 0.5, 2, 0.1, 2.0
    sigma = float(calibrate_noise_multiplier(target, delta, q, steps, accountant="auto"))
    settings = dict(loss="squared", lam=0.0, epochs=1, batch_size=20, clip=1.0,
                    sampler=PoissonSampler(q))
    event = dpsgd(*datasets[1], noise_multiplier=sigma, random_state=0, **settings).event
    assert event == dp_sgd_event(sigma, q, steps)
    claim = audit.claimed_epsilon(event, delta)
    assert claim <= get_accountant("auto").epsilon(event, delta) <= target

    def release_at(noise):
        def release(with_canary, generator):
            X_, y_ = datasets[with_canary]
            return dpsgd(X_, y_, noise_multiplier=noise, random_state=generator, **settings).coef[c]
        return release

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        honest = audit.run_audit(release_at(sigma), 600, claimed=claim, delta=delta,
                                 confidence=0.99, selection_fraction=0.3, random_state=3)
        broken = audit.run_audit(release_at(sigma / 4), 600, claimed=claim, delta=delta,
                                 confidence=0.99, selection_fraction=0.3, random_state=4)
    print(f"\nAUDIT auto sigma {sigma:.4f}: claim {claim:.4f}, lower bound {honest.epsilon_lower:.4f}"
          f"; sigma/4: lower bound {broken.epsilon_lower:.4f}")
    assert not honest.violation, honest
    assert honest.epsilon_lower > 0.3, honest          # the audit has power at this σ
    assert broken.violation, broken
