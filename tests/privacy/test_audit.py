"""Tests of fastdp.privacy.audit: the statistics, the claim, the canaries, validity and power.

Statistical tests state their false-alarm rate; seeds are fixed, so outcomes
are reproducible.
"""
import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from fastdp.exceptions import PrivacyAnalysisError, ValidationError
from fastdp.privacy import audit
from fastdp.privacy import events as ev
from fastdp.privacy.accountants import get_accountant


def gdp_epsilon(mu, delta):
    """Exact ε(δ) of a μ-GDP mechanism (Dong, Roth, Su 2019, Cor. 2.13), by bisection."""
    from scipy.optimize import brentq

    def excess(e):
        return stats.norm.cdf(-e / mu + mu / 2) - math.exp(e) * stats.norm.cdf(-e / mu - mu / 2) - delta

    return 0.0 if excess(0.0) <= 0 else brentq(excess, 0.0, 200.0, xtol=1e-12)


# ----------------------------------------------------------------------------
# Clopper-Pearson
# ----------------------------------------------------------------------------
@pytest.mark.parametrize("k, n", [(0, 1), (0, 10), (3, 10), (10, 10), (57, 400), (399, 400)])
def test_clopper_pearson_matches_scipy_exact_interval(k, n):
    reference = stats.binomtest(k, n).proportion_ci(confidence_level=0.9, method="exact")
    low, high = audit.clopper_pearson(k, n, 0.9)
    assert low == pytest.approx(reference.low, abs=1e-12)
    assert high == pytest.approx(reference.high, abs=1e-12)
    # a one-sided bound at level c is the two-sided bound at level 2c - 1
    assert audit.clopper_pearson(k, n, 0.95, side="upper") == pytest.approx(high, abs=1e-12)
    assert audit.clopper_pearson(k, n, 0.95, side="lower") == pytest.approx(low, abs=1e-12)


def test_clopper_pearson_closed_forms_and_arrays():
    # k = 0: upper = 1 - a^(1/n); k = n: lower = a^(1/n)
    n = 37
    assert audit.clopper_pearson(0, n, 0.95, side="upper") == pytest.approx(1 - 0.05 ** (1 / n))
    assert audit.clopper_pearson(n, n, 0.95, side="lower") == pytest.approx(0.05 ** (1 / n))
    ks = np.array([0, 5, 37])
    uppers = audit.clopper_pearson(ks, np.full(3, n), 0.95, side="upper")
    assert uppers.shape == (3,) and uppers[-1] == 1.0
    assert uppers[1] == pytest.approx(audit.clopper_pearson(5, n, 0.95, side="upper"))


def test_clopper_pearson_upper_bound_covers():
    """Coverage of the one-sided 90% bound: P(p <= upper) >= 0.9 exactly (conservative).

    2000 simulated binomials: a miss rate above 12.5% has probability < 1e-3
    when the true miss rate is at most 10%.
    """
    rng = np.random.default_rng(7)
    p, n = 0.13, 60
    ks = rng.binomial(n, p, size=2000)
    uppers = audit.clopper_pearson(ks, np.full_like(ks, n), 0.9, side="upper")
    assert np.mean(uppers < p) < 0.125


def test_clopper_pearson_rejects_bad_counts():
    for args in [(5, 3), (-1, 3), (0, 0), (1.5, 3)]:
        with pytest.raises(ValidationError):
            audit.clopper_pearson(*args)
    with pytest.raises(ValidationError):
        audit.clopper_pearson(1, 3, 1.0)
    with pytest.raises(ValidationError):
        audit.clopper_pearson(1, 3, side="both")


# ----------------------------------------------------------------------------
# from rates to epsilon
# ----------------------------------------------------------------------------
def test_epsilon_from_rates_closed_form():
    assert audit.epsilon_from_rates(0.1, 0.2) == pytest.approx(math.log(8.0))
    assert audit.epsilon_from_rates(0.2, 0.1) == pytest.approx(math.log(8.0))
    assert audit.epsilon_from_rates(0.1, 0.2, delta=0.05) == pytest.approx(math.log(0.75 / 0.1))
    assert audit.epsilon_from_rates(0.5, 0.5) == 0.0
    assert audit.epsilon_from_rates(0.7, 0.6) == 0.0          # worse than guessing: no bound
    assert audit.epsilon_from_rates(0.0, 0.3) == math.inf
    assert audit.epsilon_from_rates(0.0, 1.0) == 0.0           # never says "present"
    np.testing.assert_allclose(audit.epsilon_from_rates([0.1, 0.5], [0.2, 0.5]),
                               [math.log(8.0), 0.0])


def test_randomized_response_rates_give_its_exact_epsilon():
    # randomized response at epsilon flips with p = 1/(1+e^eps): the optimal test's
    # rates (p, p) certify exactly epsilon, the classical tightness example
    for eps in (0.3, 1.0, 2.5):
        p = 1.0 / (1.0 + math.exp(eps))
        assert audit.epsilon_from_rates(p, p) == pytest.approx(eps, rel=1e-12)


def test_epsilon_lower_bound_is_below_the_point_estimate_and_grows_with_trials():
    point = audit.epsilon_from_rates(0.1, 0.3)
    bounds = [audit.epsilon_lower_bound(10 * k, 100 * k, 30 * k, 100 * k, confidence=0.95)
              for k in (1, 10, 100)]
    assert bounds[0] < bounds[1] < bounds[2] < point
    assert bounds[2] == pytest.approx(point, rel=0.05)
    with pytest.raises(ValidationError):
        audit.epsilon_lower_bound(5, 4, 0, 4)
    with pytest.raises(ValidationError):
        audit.epsilon_lower_bound(0, 0, 0, 4)


def _randomized_response_counts(rng, eps, n, repeats):
    p = 1.0 / (1.0 + math.exp(eps))
    return rng.binomial(n, p, size=repeats), rng.binomial(n, p, size=repeats)


def test_lower_bound_is_valid_for_randomized_response():
    """Validity: the bound exceeds the true ε in at most 1 - confidence of audits.

    The optimal test of randomized response has FPR = FNR = 1/(1+e^ε), so the
    point estimate exceeds ε about half the time.  Over 400 independent audits
    at confidence 0.9, more than 16% exceedances has probability < 1e-4 if the
    true rate is <= 10%; the naive plug-in rate exceeds in about 45%.
    """
    rng = np.random.default_rng(11)
    eps, n, repeats = 1.0, 300, 400
    fp, fn = _randomized_response_counts(rng, eps, n, repeats)
    bounds = np.array([audit.epsilon_lower_bound(a, n, b, n, confidence=0.9)
                       for a, b in zip(fp, fn)])
    plug_in = audit.epsilon_from_rates(fp / n, fn / n)
    assert np.mean(bounds > eps) < 0.16
    assert np.mean(plug_in > eps) > 0.3          # the test above would catch a missing interval
    assert np.median(bounds) > 0.6 * eps         # and the bound is not vacuous


# ----------------------------------------------------------------------------
# thresholds and score audits
# ----------------------------------------------------------------------------
def test_select_threshold_finds_the_direction():
    rng = np.random.default_rng(0)
    low, high = rng.normal(0.0, 1.0, 400), rng.normal(3.0, 1.0, 400)
    t, direction, bound = audit.select_threshold(low, high)
    assert direction == 1 and 0.0 < t < 4.5 and bound > 1.0
    t2, direction2, bound2 = audit.select_threshold(-low, -high)
    assert direction2 == -1 and t2 == pytest.approx(-t) and bound2 == pytest.approx(bound)
    # identical distributions: no evidence
    _, _, none = audit.select_threshold(rng.normal(size=400), rng.normal(size=400))
    assert none < 0.3


def test_audit_scores_counts_and_fixed_threshold():
    without = np.array([0.0, 0.1, 0.2, 0.9, 1.2])
    with_ = np.array([0.5, 1.1, 1.3, 1.4, 2.0])
    result = audit.audit_scores(without, with_, threshold=1.0, claimed_epsilon=0.5)
    assert (result.false_positives, result.negatives) == (1, 5)
    assert (result.false_negatives, result.positives) == (1, 5)
    assert result.epsilon_lower == pytest.approx(audit.epsilon_lower_bound(1, 5, 1, 5))
    assert result.n_selection == 0 and result.fpr == 0.2
    assert result.violation == (result.epsilon_lower > 0.5)
    flipped = audit.audit_scores(-without, -with_, threshold=-1.0, direction=-1)
    assert flipped.epsilon_lower == result.epsilon_lower
    assert "claimed" in str(result) and "no claim" in str(flipped)
    with pytest.raises(ValidationError):
        audit.audit_scores(without, [np.nan, 1.0])
    with pytest.raises(ValidationError):
        audit.audit_scores(without, with_, selection_fraction=1.0)
    with pytest.raises(ValidationError):
        audit.audit_scores([1.0], with_)


def _gaussian_release(shift, scale):
    return lambda with_canary, rng: rng.normal() * scale + (shift if with_canary else 0.0)


def test_audit_of_an_ideal_gaussian_mechanism_has_power_and_validity():
    """A Gaussian mechanism claiming sigma = 1 (mu = 1): honest, and with noise halved.

    At delta = 0.1 the claim is 1.160.  Confidence 0.99: the honest audit
    reports a violation with probability <= 1%; the broken one (mu = 2,
    true epsilon 3.81 at delta = 0.1) is caught with 800 runs per side.
    """
    claim = ev.GaussianEvent(1.0)
    honest = audit.run_audit(_gaussian_release(1.0, 1.0), 800, claimed_event=claim, delta=0.1,
                             confidence=0.99, random_state=3, selection_fraction=0.3)
    assert honest.epsilon_claimed == pytest.approx(gdp_epsilon(1.0, 0.1), abs=2e-3)
    assert not honest.violation and 0.3 < honest.epsilon_lower < honest.epsilon_claimed
    broken = audit.run_audit(_gaussian_release(1.0, 0.5), 800, claimed_event=claim, delta=0.1,
                             confidence=0.99, random_state=4, selection_fraction=0.3)
    assert broken.violation and broken.epsilon_lower < gdp_epsilon(2.0, 0.1)


def test_run_audit_is_reproducible_and_checks_arguments():
    release = _gaussian_release(2.0, 1.0)
    a = audit.run_audit(release, 50, random_state=9)
    b = audit.run_audit(release, 50, random_state=9)
    assert a == b and a.epsilon_claimed is None
    c = audit.run_audit(lambda w, rng: np.array([rng.normal() + 2.0 * w, 7.0]), 50,
                        statistic=lambda out: out[0], random_state=9)
    assert c.epsilon_lower > 0.5
    with pytest.raises(ValidationError):
        audit.run_audit(release, 3)
    with pytest.raises(ValidationError):
        audit.run_audit(release, 10, claimed_event=ev.GaussianEvent(1.0), claimed=1.0)


# ----------------------------------------------------------------------------
# the claim
# ----------------------------------------------------------------------------
def test_claimed_epsilon_is_the_tightest_accountant():
    pld = get_accountant("pld", value_discretization_interval=1e-3)
    rdp = get_accountant("rdp")
    event = ev.SelfComposedEvent(ev.PoissonSampledEvent(0.05, ev.GaussianEvent(1.1)), 40)
    expected = min(pld.epsilon(event, 1e-5), rdp.epsilon(event, 1e-5))
    assert audit.claimed_epsilon(event, 1e-5) == pytest.approx(expected, rel=1e-12)
    assert audit.claimed_epsilon(ev.PureEvent(0.7, adjacency="replace_one"), 0.0) == 0.7
    assert audit.claimed_epsilon(ev.NonPrivateEvent(), 0.1) == math.inf
    assert audit.claimed_epsilon(ev.GaussianEvent(2.0), 1e-5, accountants=["rdp"]) == \
        rdp.epsilon(ev.GaussianEvent(2.0), 1e-5)
    with pytest.raises(PrivacyAnalysisError):
        audit.claimed_epsilon(ev.GaussianEvent(1.0), 0.0, accountants=["pure"])


def test_claimed_epsilon_removes_trivial_sampling_exactly():
    """Sampling every example is no sampling; unsampled Gaussians do not depend on the relation.

    A replace-one GaussianEvent(s) is noise s x (replace-one sensitivity): mu = 1/s,
    so its exact profile is the mu-GDP one, like add/remove GaussianEvent(s).
    """
    n = 16
    full_batch = ev.SelfComposedEvent(ev.FixedSizeSampledEvent(n, n, ev.GaussianEvent(2.0)), 3)
    mu = math.sqrt(3) / 1.0  # each step: sigma 2 add/remove = 1 replace-one
    assert audit.claimed_epsilon(full_batch, 0.1) == pytest.approx(gdp_epsilon(mu, 0.1), abs=2e-3)
    poisson_all = ev.SelfComposedEvent(ev.PoissonSampledEvent(1.0, ev.GaussianEvent(1.5)), 2)
    assert audit.claimed_epsilon(poisson_all, 1e-3) == pytest.approx(
        gdp_epsilon(math.sqrt(2) / 1.5, 1e-3), abs=2e-3)
    partial = ev.SelfComposedEvent(ev.FixedSizeSampledEvent(n, 4, ev.GaussianEvent(2.0)), 3)
    assert audit.claimed_epsilon(partial, 0.1) == pytest.approx(
        get_accountant("rdp").epsilon(partial, 0.1))


# ----------------------------------------------------------------------------
# canaries and neighbouring datasets
# ----------------------------------------------------------------------------
@pytest.mark.parametrize("sparse", [False, True])
def test_isolated_canary_and_neighbouring_datasets(sparse):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(6, 3))
    X = sp.csr_matrix(X) if sparse else X
    y = rng.normal(size=6)
    X2, canary, index = audit.isolated_canary(X, value=0.5)
    assert X2.shape == (6, 4) and index == 3
    dense = X2.toarray() if sparse else X2
    assert np.all(dense[:, 3] == 0) and np.array_equal(dense[:, :3], np.asarray(
        X.toarray() if sparse else X))
    (X0, y0), (X1, y1) = audit.neighbouring_datasets(X2, y, canary, 7.0, "add_remove")
    assert X0.shape == (6, 4) and X1.shape == (7, 4) and y1[-1] == 7.0
    assert sp.issparse(X1) == sparse
    (R0, z0), (R1, z1) = audit.neighbouring_datasets(X2, y, canary, 7.0, "replace_one",
                                                     replaced_x=canary, replaced_y=-7.0)
    assert R0.shape == R1.shape == (7, 4) and (z0[-1], z1[-1]) == (-7.0, 7.0)
    assert np.array_equal(z0[:-1], z1[:-1])
    with pytest.raises(ValidationError):
        audit.neighbouring_datasets(X2, y, canary, 7.0, "replace_one")
    with pytest.raises(ValidationError):
        audit.neighbouring_datasets(X2, y, canary, 7.0, "add_remove", replaced_y=1.0)
    with pytest.raises(ValidationError):
        audit.neighbouring_datasets(X2, y, np.ones((1, 2)), 7.0, "add_remove")
    with pytest.raises(ValidationError):
        audit.neighbouring_datasets(X2, y[:3], canary, 7.0, "add_remove")
