"""Privacy of distributed dual averaging: paper σ, corrected KOV argument, fastdp's event (spec 004 A5, §3)."""
import math
import warnings

import dp_accounting
import numpy as np
import pytest

from fastdp.distributed.privacy import (
    calibrate_sigma,
    dda_event,
    epsilon_kov,
    epsilon_paper,
    epsilon_paper_claim,
    gaussian_epsilon,
    privacy_report,
    sigma_kov,
    sigma_paper,
)
from fastdp.exceptions import ValidationError
from fastdp.privacy import NonPrivateEvent, get_accountant


@pytest.mark.parametrize("iota, T, q, eps, sigma, ok", [
    (0.1, 600000, 20000, 0.8, 0.063038, False),
    (1.0, 60000, 20000, 0.8, 0.199342, False),
    (0.5, 200, 10, 0.5, 18.414459, True),
])
def test_sigma_paper_vectors(iota, T, q, eps, sigma, ok):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = sigma_paper(eps, 0.01, T, iota, q, 1.0)
    assert r.sigma == pytest.approx(sigma, abs=1e-6)
    assert r.preconditions_ok is ok
    assert bool(caught) is (not ok)
    assert epsilon_paper(r.sigma, 0.01, T, iota, q) == pytest.approx(eps, rel=1e-12)


def test_paper_claim_remark():
    assert epsilon_paper_claim(10, 10, 0.5) == pytest.approx(math.sqrt(0.6) * 0.5 + 0.05)


def test_kov_reproduces_error_e1():
    """The paper's σ does not give the paper's ε even in the regime where its inequalities hold."""
    sigma = 18.414459
    eps_t = gaussian_epsilon(sigma, 2.0, 0.01, "lemma_4_1")
    assert eps_t == pytest.approx(0.35355, abs=1e-5)
    eps_paper_delta, _ = epsilon_kov(sigma, 200, 0.5, 10, 1.0, 0.01, None, "lemma_4_1")
    assert eps_paper_delta == pytest.approx(0.507, abs=1e-3)
    assert eps_paper_delta > 0.5
    eps, delta = epsilon_kov(sigma, 200, 0.5, 10, 1.0, 0.01, 1e-5, "lemma_4_1")
    assert eps == pytest.approx(1.39, abs=5e-3) and eps > 0.5
    # E3: the honest delta is 1 - (1 - delta')(1 - iota delta0 / q)^T
    assert delta == pytest.approx(1 - (1 - 1e-5) * (1 - 0.5 * 0.01 / 10) ** 200, rel=1e-12)


def test_kov_monotone_and_sigma_kov_inverse():
    sigmas = [0.5, 1.0, 2.0, 4.0, 8.0]
    eps = [epsilon_kov(s, 5000, 0.1, 500, 1.0, 1e-4, 1e-6)[0] for s in sigmas]
    assert all(a > b for a, b in zip(eps, eps[1:]))
    target, delta, T, iota, q = 1.0, 1e-5, 3000, 0.1, 300
    s = sigma_kov(target, delta, T, iota, q)
    rate = iota / q
    e_ok, d_ok = epsilon_kov(s, T, iota, q, 1.0, delta / (2 * rate * T), delta / 2)
    e_bad, _ = epsilon_kov(s / (1 + 1e-6), T, iota, q, 1.0, delta / (2 * rate * T), delta / 2)
    assert e_ok <= target < e_bad
    assert d_ok <= delta * (1 + 1e-9)


@pytest.mark.parametrize("sigma, delta", [(0.5, 1e-5), (1.0, 1e-5), (3.0, 1e-6)])
def test_analytic_gaussian_matches_dp_accounting_pld(sigma, delta):
    acc = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_accounting.GaussianDpEvent(sigma))
    ref = acc.get_epsilon(delta)
    assert gaussian_epsilon(sigma, 1.0, delta) == pytest.approx(ref, rel=2e-3)
    if ref < 1:
        assert gaussian_epsilon(sigma, 1.0, delta, "lemma_4_1") >= ref


def test_event_structure_and_reference_accountant():
    ev = dda_event(1.5, 1.0, 400, activation="public", max_active_rounds=900)
    assert ev.count == 900 and ev.event.n == 400 and ev.event.batch_size == 1
    assert ev.event.event.noise_multiplier == pytest.approx(0.75)
    assert ev.adjacency.value == "replace_one"
    ours = get_accountant("rdp").epsilon(ev, 1e-5)
    ref = dp_accounting.rdp.RdpAccountant(
        neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
    ref.compose(ev.to_dp_accounting())
    assert ours == pytest.approx(ref.get_epsilon(1e-5), rel=0.05)
    assert isinstance(dda_event(0.0, 1.0, 10, max_active_rounds=3), NonPrivateEvent)
    with pytest.raises(ValidationError):
        dda_event(1.0, 1.0, 10, activation="secret", max_active_rounds=3)
    with pytest.raises(ValidationError):
        dda_event(1.0, 1.0, 10, activation="public")


@pytest.mark.parametrize("sigma", [1.0, 2.0, 4.0])
def test_public_activation_never_smaller_than_hidden(sigma):
    acc = get_accountant("rdp")
    T, n, q = 6000, 20, 300
    public = dda_event(sigma, 1.0, q, activation="public", max_active_rounds=T // 10)
    hidden = dda_event(sigma, 1.0, q, activation="hidden", n_rounds=T, n_samples=n * q,
                       max_active_per_round=2)
    assert acc.epsilon(public, 1e-5) >= acc.epsilon(hidden, 1e-5)


def test_calibrate_sigma_never_overshoots():
    def make(s):
        return dda_event(s, 1.0, 200, max_active_rounds=600)

    s = calibrate_sigma(make, 1.0, 1e-5)
    acc = get_accountant("rdp")
    assert acc.epsilon(make(float(s)), 1e-5) <= 1.0 < acc.epsilon(make(float(s) / (1 + 1e-5)), 1e-5)


def test_privacy_report_three_numbers():
    counts = np.array([95, 101, 99, 105])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = privacy_report(2.0, lipschitz=1.0, q=50, n_rounds=500, iota=0.5, delta=1e-5,
                           delta0=0.01, activation_counts=counts, n_nodes=4)
    assert r.event.count == 105
    assert r.epsilon == pytest.approx(get_accountant("rdp").epsilon(r.event, 1e-5))
    assert r.epsilon_paper == pytest.approx(epsilon_paper(2.0, 0.01, 500, 0.5, 50))
    assert r.delta_kov <= 1e-5 * (1 + 1e-9)
    text = str(r)
    assert "guaranteed" in text and "not a guarantee" in text
