"""Tests of ParallelComposedEvent (mechanisms on the disjoint parts of a random split).

References independent of the implementation: the closed-form Gaussian curve
α/(2σ²), the binomial sum of the Poisson-subsampled Gaussian at integer orders
(Mironov, Talwar, Zhang 2019, written out here), the randomized-response curve
in closed form, and the exact output law of small discrete split mechanisms
computed by enumerating every coin vector (and, for the repeated selection,
the number of runs K).
"""

import itertools
import math

import numpy as np
import pytest
from scipy.special import comb, logsumexp

from fastdp.exceptions import PrivacyAnalysisError, ValidationError
from fastdp.privacy import get_accountant
from fastdp.privacy.events import (
    Adjacency,
    ApproxDpEvent,
    ComposedEvent,
    GaussianEvent,
    ParallelComposedEvent,
    PoissonSampledEvent,
    PureEvent,
    RepeatedSelectionEvent,
    SelfComposedEvent,
    event_delta,
    event_from_dict,
)
from fastdp.privacy.rdp import RdpAccountant, epsilon_from_rdp
from fastdp.privacy.tuning import Repetitions
from fastdp.privacy.zcdp import zcdp_of

ORDERS = np.arange(2.0, 41.0)


def _gaussian_curve(sigma, orders):
    return orders / (2.0 * sigma ** 2)


def _sampled_gaussian_curve(q, sigma, orders):
    """Integer orders: log Σ_k C(α,k)(1−q)^{α−k} q^k exp((k²−k)/(2σ²)) / (α−1)."""
    out = []
    for a in orders.astype(int):
        k = np.arange(a + 1)
        terms = (np.log(comb(a, k)) + (a - k) * math.log1p(-q) + k * math.log(q)
                 + (k * k - k) / (2.0 * sigma ** 2))
        out.append(logsumexp(terms) / (a - 1))
    return np.array(out)


def _rr_curve(eps, orders):
    """Binary randomized response at ε (the curve that dominates ε-DP)."""
    p = math.exp(eps) / (1.0 + math.exp(eps))
    return np.array([math.log(p ** a * (1 - p) ** (1 - a) + (1 - p) ** a * p ** (1 - a)) / (a - 1)
                     for a in orders])


# ---------------------------------------------------------------------------
# the curve: the pointwise maximum
# ---------------------------------------------------------------------------
def test_rdp_is_the_pointwise_max_of_hand_computed_curves():
    q, sigma_fit, steps, sigma_score = 0.02, 1.1, 20, 3.0
    fit = SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma_fit)), steps)
    score = GaussianEvent(sigma_score)
    acc = RdpAccountant()
    got = acc.rdp_curve(ParallelComposedEvent((fit, score)), orders=ORDERS)
    fit_hand = steps * _sampled_gaussian_curve(q, sigma_fit, ORDERS)
    score_hand = _gaussian_curve(sigma_score, ORDERS)
    want = np.maximum(fit_hand, score_hand)
    # the two curves cross inside the range: both members matter
    assert (fit_hand > score_hand).any() and (fit_hand < score_hand).any()
    np.testing.assert_allclose(got, want, rtol=1e-9)
    # composition is the sum, strictly above the max
    composed = acc.rdp_curve(ComposedEvent((fit, score)), orders=ORDERS)
    np.testing.assert_allclose(composed, fit_hand + score_hand, rtol=1e-9)
    # ε at δ: the conversion of the max curve, below the composed ε
    eps = acc.epsilon(ParallelComposedEvent((fit, score)), 1e-5)
    full = np.maximum(acc.rdp_curve(fit), _gaussian_curve(sigma_score, acc.orders))
    assert eps == pytest.approx(epsilon_from_rdp(acc.orders, full, 1e-5)[0], rel=1e-9)
    assert eps < acc.epsilon(ComposedEvent((fit, score)), 1e-5)


def test_other_accountants_take_the_max_or_refuse():
    a, b = GaussianEvent(2.0), GaussianEvent(1.0)
    par = ParallelComposedEvent((a, b))
    assert zcdp_of(par) == pytest.approx(0.5)                       # max(1/8, 1/2)
    pure = get_accountant("pure")
    assert pure.epsilon(ParallelComposedEvent((PureEvent(1.0), PureEvent(0.3))), 0.0) == 1.0
    # (ε, δ) members: (max ε, max δ); the event states max δ itself
    approx = ParallelComposedEvent((ApproxDpEvent(0.5, 1e-6), ApproxDpEvent(0.2, 3e-6)))
    assert event_delta(approx) == pytest.approx(3e-6)
    assert event_delta(ComposedEvent((approx, ApproxDpEvent(0.1, 1e-6)))) == pytest.approx(4e-6)
    assert pure.epsilon(approx, 1e-5) == pytest.approx(0.5)
    with pytest.raises(PrivacyAnalysisError):
        pure.epsilon(approx, 2e-6)                                  # below the stated δ
    # PLD: at the top level the max of the members' ε; nested: refused
    pld = get_accountant("pld", value_discretization_interval=1e-3)
    assert pld.epsilon(par, 1e-5) == pytest.approx(pld.epsilon(b, 1e-5), rel=1e-12)
    assert pld.delta(par, 1.0) == pytest.approx(pld.delta(b, 1.0), rel=1e-12)
    with pytest.raises(PrivacyAnalysisError, match="parallel composition"):
        pld.epsilon(ComposedEvent((par, a)), 1e-5)
    with pytest.raises(PrivacyAnalysisError):
        get_accountant("moments").epsilon(par, 1e-5)
    # RDP inside a composition: the sum of the max with the rest
    acc = RdpAccountant()
    np.testing.assert_allclose(acc.rdp_curve(ComposedEvent((par, a)), orders=ORDERS),
                               _gaussian_curve(1.0, ORDERS) + _gaussian_curve(2.0, ORDERS))


def test_structure_round_trip_and_refusals():
    par = ParallelComposedEvent((GaussianEvent(2.0), PureEvent(0.5)))
    assert event_from_dict(par.to_dict()) == par
    assert par.adjacency is Adjacency.ADD_REMOVE
    one = par.to_replace_one()
    assert isinstance(one, ParallelComposedEvent) and one.adjacency is Adjacency.REPLACE_ONE
    assert one.events == (GaussianEvent(1.0, "replace_one"), PureEvent(1.0, "replace_one"))
    with pytest.raises(PrivacyAnalysisError, match="replace-one"):
        ParallelComposedEvent((GaussianEvent(1.0), GaussianEvent(1.0, "replace_one")))
    with pytest.raises(ValidationError):
        ParallelComposedEvent(())
    with pytest.raises(ValidationError):
        ParallelComposedEvent((GaussianEvent(1.0), 3.0))
    # the pure-DP view of a repeated selection over parallel candidates (Liu & Talwar)
    rep = RepeatedSelectionEvent.of(ParallelComposedEvent((PureEvent(0.4), PureEvent(0.7))),
                                    Repetitions.geometric(0.5))
    assert rep.pure_epsilon() == pytest.approx(3 * 0.7)


# ---------------------------------------------------------------------------
# brute force: randomized-response fit + randomized-response score on a split
# ---------------------------------------------------------------------------
EPS_FIT, EPS_SCORE, P_VAL = 1.0, 0.5, 0.3


def _rr(bit, eps):
    """Law of randomized response at ε of ``bit``: [P(0), P(1)]."""
    keep = math.exp(eps) / (1.0 + math.exp(eps))
    return np.array([keep, 1 - keep]) if bit == 0 else np.array([1 - keep, keep])


def _split_law(bits, overlap=False):
    """Exact law of (f, s) over the coins: f = RR(OR of the training bits),
    s = RR(parity of the validation bits XOR f) -- or of all bits if ``overlap``."""
    law = np.zeros((2, 2))
    n = len(bits)
    for coins in itertools.product((0, 1), repeat=n):           # 1: validation
        w = math.prod(P_VAL if c else 1 - P_VAL for c in coins)
        train_or = int(any(b for b, c in zip(bits, coins) if c == 0))
        parity = sum(b for b, c in zip(bits, coins) if c == 1 or overlap) % 2
        pf = _rr(train_or, EPS_FIT)
        for f in (0, 1):
            law[f] += w * pf[f] * _rr(parity ^ f, EPS_SCORE)
    return law.ravel()


def _renyi(p, q, orders):
    return np.array([logsumexp(a * np.log(p) + (1 - a) * np.log(q)) / (a - 1) for a in orders])


def _neighbours(n):
    """All (D, D') with D ∈ {0,1}^n: replace-one (one bit flipped) and add/remove (a row added)."""
    for bits in itertools.product((0, 1), repeat=n):
        for j in range(n):
            yield "replace_one", bits, bits[:j] + (1 - bits[j],) + bits[j + 1:]
        for extra in (0, 1):
            yield "add_remove", bits, bits + (extra,)


def test_brute_force_split_mechanism_is_within_the_max_curve():
    orders = np.array([1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0])
    claimed = RdpAccountant().rdp_curve(
        ParallelComposedEvent((PureEvent(EPS_FIT), PureEvent(EPS_SCORE))), orders=orders)
    np.testing.assert_allclose(claimed, np.maximum(_rr_curve(EPS_FIT, orders),
                                                   _rr_curve(EPS_SCORE, orders)), rtol=1e-9)
    worst, worst_overlap = np.zeros(orders.size), np.zeros(orders.size)
    worst_pure = 0.0
    for _, d, d2 in _neighbours(3):
        p, q = _split_law(d), _split_law(d2)
        for a, b in ((p, q), (q, p)):
            worst = np.maximum(worst, _renyi(a, b, orders))
            worst_pure = max(worst_pure, float(np.max(np.abs(np.log(a / b)))))
        po, qo = _split_law(d, True), _split_law(d2, True)
        worst_overlap = np.maximum(worst_overlap, _renyi(po, qo, orders))
    assert np.all(worst <= claimed * (1 + 1e-12))
    assert worst_pure <= max(EPS_FIT, EPS_SCORE) + 1e-12
    # not vacuous: the split mechanism comes close to the max at high orders...
    assert worst[-1] > 0.5 * claimed[-1]
    # ...and the same test fails when the score also reads the training rows
    assert np.any(worst_overlap > claimed * 1.01)


def _best_of_k_law(run_law, pmf):
    """Released (f, s) of the best of K runs (highest s, first run on ties), exact."""
    run = run_law.reshape(2, 2)                 # [f, s]
    a = run[:, 1].sum()                          # P(s = 1)
    k = np.arange(1, pmf.size + 1)
    none = float(np.sum(pmf * (1 - a) ** k))     # every run has s = 0 (K >= 1)
    some = float(np.sum(pmf)) - none
    out = np.zeros((2, 2))
    out[:, 1] = some * run[:, 1] / a
    out[:, 0] = none * run[:, 0] / (1 - a)
    return out.ravel()


def test_brute_force_repeated_selection_over_one_split():
    """The search's scheme exactly: ONE split shared by every run, K ~ truncated negative
    binomial, only the best run released; the accountant's Papernot–Steinke curve on the max
    dominates the exact Rényi divergence of the mixture over the coins."""
    reps = Repetitions.with_mean("truncated_negative_binomial", 3.0, eta=-0.5)
    pmf = reps.pmf(np.arange(1, 400))
    assert pmf.sum() == pytest.approx(1.0, abs=1e-9)
    orders = np.array([2.0, 3.0, 5.0, 10.0, 20.0])
    event = RepeatedSelectionEvent.of(
        ParallelComposedEvent((PureEvent(EPS_FIT), PureEvent(EPS_SCORE))), reps)
    claimed = RdpAccountant().rdp_curve(event, orders=orders)

    def law(bits):
        total = np.zeros(4)
        n = len(bits)
        for coins in itertools.product((0, 1), repeat=n):
            w = math.prod(P_VAL if c else 1 - P_VAL for c in coins)
            train_or = int(any(b for b, c in zip(bits, coins) if c == 0))
            parity = sum(b for b, c in zip(bits, coins) if c == 1) % 2
            pf = _rr(train_or, EPS_FIT)
            run = np.array([[pf[f] * _rr(parity ^ f, EPS_SCORE)[s] for s in (0, 1)]
                            for f in (0, 1)]).ravel()
            total += w * _best_of_k_law(run, pmf)
        return total / total.sum()

    worst = np.zeros(orders.size)
    for _, d, d2 in _neighbours(3):
        p, q = law(d), law(d2)
        worst = np.maximum(worst, np.maximum(_renyi(p, q, orders), _renyi(q, p, orders)))
    assert np.all(worst <= claimed)
    assert worst.max() > 0.1      # a real privacy loss, not a degenerate case
