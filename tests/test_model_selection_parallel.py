"""The accounted search with its split accounted by parallel composition (issue 17).

References: Papernot & Steinke's Theorem 2 written out by hand on closed-form
Gaussian curves (a tiny estimator whose fit is one Gaussian release), the
pointwise maximum of the fit's and the score's curves, and the former
composition (the sum) for comparison.
"""

import math

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin

from fastdp.exceptions import ValidationError
from fastdp.linear_model import DPLogisticRegression
from fastdp.model_selection import (
    DPHyperparameterSearch,
    auto_validation_fraction,
    candidate_event,
    matched_score_sigma,
)
from fastdp.privacy.events import (
    Adjacency,
    ComposedEvent,
    GaussianEvent,
    ParallelComposedEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
)
from fastdp.privacy.rdp import RdpAccountant, epsilon_from_rdp
from fastdp.privacy.tuning import tnb_expected_repetitions


class NoisyCountClassifier(ClassifierMixin, BaseEstimator):
    """One Gaussian release (noise multiplier from the classic calibration to (ε, δ)) of the
    count of positive labels; predicts the majority it suggests."""

    def __init__(self, epsilon=1.0, delta=1e-5, ledger=None, random_state=None, bias=0.0,
                 noise_factor=1.0):
        self.noise_factor = noise_factor
        self.epsilon = epsilon
        self.delta = delta
        self.ledger = ledger
        self.random_state = random_state
        self.bias = bias

    def fit(self, X, y):
        sigma = self.noise_factor * math.sqrt(2 * math.log(1.25 / self.delta)) / self.epsilon
        event = GaussianEvent(sigma)
        if self.ledger is not None:
            self.ledger.reserve(event).commit()
        noisy = float(np.sum(y > 0)) + sigma * np.random.default_rng(self.random_state).normal()
        self.majority_ = 1.0 if noisy + self.bias > len(y) / 2 else -1.0
        self.classes_ = np.array([-1.0, 1.0])
        self.privacy_event_ = event
        return self

    def predict(self, X):
        return np.full(np.shape(X)[0], self.majority_)


def _data(n=400, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 2)), np.where(rng.random(n) < 0.7, 1.0, -1.0)


def _ps_by_hand(sigma, eta, gamma, orders):
    """Papernot & Steinke Thm 2 on the Gaussian curve α/(2σ²), second order over the grid and 1."""
    curve = orders / (2 * sigma ** 2)
    log_inv_gamma = -math.log(gamma)
    extra = min([log_inv_gamma] + [(1 - 1 / lh) * lh / (2 * sigma ** 2) + log_inv_gamma / lh
                                   for lh in orders])
    return curve + (1 + eta) * extra + math.log(tnb_expected_repetitions(eta, gamma)) / (orders - 1)


@pytest.mark.parametrize("score_share, factor", [("auto", 1.0), (0.9, 3.0), (0.2, 1.0)])
def test_search_epsilon_is_papernot_steinke_on_the_max_curve(score_share, factor):
    """The score's curve below the fit's (auto, 0.2) and above it (0.9 with a fit 3x noisier)."""
    X, y = _data()
    grid = {"bias": [-20.0, 0.0, 20.0]}
    search = DPHyperparameterSearch(NoisyCountClassifier(noise_factor=factor), grid,
                                    epsilon=1.5, delta=1e-5, expected_repetitions=3.0, eta=-0.5,
                                    validation_fraction=0.25, score_share=score_share,
                                    random_state=0).fit(X, y)
    eps_c, sigma_s = search.candidate_epsilon_, search.score_noise_multiplier_
    classic = math.sqrt(2 * math.log(1.25 / 1e-5)) / eps_c
    sigma_fit = factor * classic
    if score_share == "auto":            # matched: the score's curve is the fit's
        assert sigma_s == pytest.approx(sigma_fit, rel=1e-12)
    else:
        assert sigma_s == pytest.approx(classic / score_share, rel=1e-12)
    assert (sigma_s < sigma_fit) == (factor == 3.0)   # which curve is the max
    # the max of two Gaussian curves is the Gaussian with the smaller σ (the sum would be
    # the Gaussian with 1/σ² = 1/σ_f² + 1/σ_s²)
    reps = search.repetitions_
    acc = RdpAccountant()
    by_hand = _ps_by_hand(min(sigma_fit, sigma_s), reps.eta, reps.gamma, acc.orders)
    want = epsilon_from_rdp(acc.orders, by_hand, 1e-5)[0]
    assert search.epsilon_ == pytest.approx(want, rel=1e-9)
    assert search.epsilon_ <= 1.5
    composed = _ps_by_hand((sigma_fit ** -2 + sigma_s ** -2) ** -0.5, reps.eta, reps.gamma,
                           acc.orders)
    assert epsilon_from_rdp(acc.orders, composed, 1e-5)[0] > 1.01 * want


def test_parallel_search_gives_the_candidates_more_than_composition():
    X, y = _data(2000)
    kw = dict(epsilon=1.0, delta=1e-5, validation_fraction=0.2, score_share=0.25, random_state=3)
    par = DPHyperparameterSearch(DPLogisticRegression(), **kw).fit(X, y)
    comp = DPHyperparameterSearch(DPLogisticRegression(), split_accounting="composed",
                                  **kw).fit(X, y)
    # two members since issue 32: the rule's event and the larger-lot candidate's
    assert len(comp.privacy_event_.events) == len(par.privacy_event_.events) == 2
    assert all(isinstance(m, ComposedEvent) for m in comp.privacy_event_.events)
    assert all(isinstance(m, ParallelComposedEvent) for m in par.privacy_event_.events)
    assert par.epsilon_ <= 1.0 and comp.epsilon_ <= 1.0
    assert par.candidate_epsilon_ > comp.candidate_epsilon_
    # "auto" under composition keeps the former score noise (share 0.25)
    auto = DPHyperparameterSearch(DPLogisticRegression(), split_accounting="composed",
                                  **dict(kw, score_share="auto")).fit(X, y)
    assert auto.epsilon_ == comp.epsilon_


def test_matched_score_sigma_sits_under_the_fits():
    fits = [SelfComposedEvent(PoissonSampledEvent(0.05, GaussianEvent(s)), 200)
            for s in (1.0, 1.5)]
    acc = RdpAccountant()
    sigma = matched_score_sigma(fits, acc)
    worst = np.max([acc.rdp_curve(f) for f in fits], axis=0)
    gauss = acc.orders / (2 * sigma ** 2)
    assert np.all(gauss <= worst * (1 + 1e-12))
    assert np.min(worst - gauss) == pytest.approx(0.0, abs=1e-9)     # touches: no smaller σ
    # then the candidate costs exactly its fit
    cand = candidate_event(fits[0], GaussianEvent(sigma))
    np.testing.assert_allclose(acc.rdp_curve(cand), acc.rdp_curve(fits[0]))


def test_candidate_event_refuses_mixed_adjacency_to_parallelise():
    fit = GaussianEvent(1.0, Adjacency.REPLACE_ONE)
    assert isinstance(candidate_event(fit, GaussianEvent(2.0, "replace_one")),
                      ParallelComposedEvent)
    with pytest.raises(ValidationError):
        candidate_event(fit, GaussianEvent(2.0, "replace_one"), "sum")
    with pytest.raises(Exception, match="replace-one"):   # composition refuses it too
        candidate_event(fit, GaussianEvent(2.0))


def test_auto_validation_fraction_rule():
    # 5 % of the rows, at least 200 rows in expectation, at most 20 %
    assert auto_validation_fraction(100_000) == 0.05
    assert auto_validation_fraction(4000) == 0.05
    assert auto_validation_fraction(2000) == pytest.approx(0.1)
    assert auto_validation_fraction(500) == 0.2
    with pytest.raises(ValidationError):
        auto_validation_fraction(0)


def test_search_reports_the_fraction_it_used_and_refuses_bad_options():
    X, y = _data(1000)
    search = DPHyperparameterSearch(NoisyCountClassifier(), {"bias": [0.0]}, epsilon=1.0,
                                    random_state=0).fit(X, y)
    assert search.validation_fraction_ == auto_validation_fraction(1000) == 0.2
    for bad in (dict(split_accounting="max"), dict(split_accounting=None),
                dict(validation_fraction="half"), dict(score_share="max"),
                dict(validation_fraction=1.0)):
        with pytest.raises(ValidationError):
            DPHyperparameterSearch(NoisyCountClassifier(), {"bias": [0.0]}, **bad).fit(X, y)
