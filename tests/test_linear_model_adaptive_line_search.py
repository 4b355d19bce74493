"""The estimators with the adaptive line-search solvers and DP-AGD (zCDP privacy filter)."""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting import rdp as dp_rdp

from fastdp.exceptions import BudgetExceededError, PrivacyAnalysisError, ValidationError
from fastdp.linear_model import DPLinearSVC, DPLogisticRegression, DPRidge
from fastdp.privacy.events import PrivacyFilterEvent
from fastdp.privacy.ledger import PrivacyLedger
from fastdp.privacy.zcdp import zcdp_of

SOLVERS = ("dpagd", "dp_blsgd_adaptive", "dp_blsgd_ac", "dp_blgd")


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(11)
    X = rng.normal(size=(2000, 8))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    w = rng.normal(size=8)
    return X, np.where(X @ w + 0.1 * rng.normal(size=2000) > 0, 1, 0), X @ w


def _dp_accounting_epsilon(rho, delta):
    acc = dp_rdp.RdpAccountant()
    acc.compose(dp_accounting.GaussianDpEvent(1.0 / math.sqrt(2.0 * rho)))
    return acc.get_epsilon(delta)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("Est", [DPLogisticRegression, DPLinearSVC, DPRidge])
def test_fit_reports_the_cap_and_what_was_consumed(data, solver, Est):
    X, yb, yr = data
    y = yr if Est is DPRidge else yb
    est = Est(epsilon=1.0, delta=1e-6, solver=solver, batch_size=200, epochs=4,
              random_state=0).fit(X, y)
    rho = est.noise_multiplier_
    assert est.noise_name_ == "rho_cap"
    if Est is DPRidge:   # issue 32: the targets' private scale is composed before the filter
        assert est.privacy_event_.events[1] == PrivacyFilterEvent.zcdp(rho)
        assert est.epsilon_ <= 1.0
    else:
        assert est.privacy_event_ == PrivacyFilterEvent.zcdp(rho)
        # ε reported = an independent computation (dp_accounting's RDP accountant on a
        # Gaussian with the same RDP curve α·ρ), and within the target
        assert est.epsilon_ == pytest.approx(_dp_accounting_epsilon(rho, 1e-6), rel=1e-9)
        assert 1.0 - 1e-5 <= est.epsilon_ <= 1.0
    ex = est.solver_result_.extra
    assert 0 < ex["rho_consumed"] <= rho == ex["rho_cap"]
    assert zcdp_of(ex["consumed_event"]) == pytest.approx(ex["rho_consumed"], rel=1e-12)
    assert est.n_iter_ >= 1 and np.all(np.isfinite(est.coef_))


@pytest.mark.parametrize("solver", SOLVERS)
def test_ledger_charges_the_cap_and_refuses_over_budget(data, solver):
    X, y, _ = data
    ledger = PrivacyLedger(1.0, 1e-6)
    est = DPLogisticRegression(epsilon=0.7, delta=1e-6, solver=solver, epochs=3,
                               random_state=0, ledger=ledger).fit(X, y)
    assert ledger.spent() == pytest.approx(est.epsilon_, rel=1e-9)
    with pytest.raises(BudgetExceededError):
        DPLogisticRegression(epsilon=0.7, delta=1e-6, solver=solver, epochs=3,
                             random_state=0, ledger=ledger).fit(X, y)
    assert len(ledger) == 1


@pytest.mark.parametrize("solver", SOLVERS)
def test_same_seed_same_bits(data, solver):
    X, y, _ = data
    fits = [DPLogisticRegression(epsilon=0.5, solver=solver, epochs=3, random_state=5).fit(X, y)
            for _ in range(2)]
    np.testing.assert_array_equal(fits[0].coef_, fits[1].coef_)
    other = DPLogisticRegression(epsilon=0.5, solver=solver, epochs=3, random_state=6).fit(X, y)
    assert not np.array_equal(fits[0].coef_, other.coef_)


def test_useful_at_large_budget(data):
    X, y, _ = data
    for solver in ("dpagd", "dp_blgd"):
        est = DPLogisticRegression(epsilon=8.0, solver=solver, epochs=20, random_state=0)
        assert est.fit(X, y).score(X, y) > 0.85, solver


def test_refusals(data):
    X, y, _ = data
    with pytest.raises(PrivacyAnalysisError):          # the filter's guarantee is RDP only
        DPLogisticRegression(epsilon=1.0, solver="dpagd", accountant="pld").fit(X, y)
    with pytest.raises(ValidationError, match="solver_options"):
        DPLogisticRegression(epsilon=1.0, solver="dpagd",
                             solver_options={"amplification": "zw_general"}).fit(X, y)
    with pytest.raises(ValidationError, match="solver_options"):
        DPLogisticRegression(epsilon=1.0, solver="dp_blsgd_adaptive",
                             solver_options={"budget_filter": "rdp_paper"}).fit(X, y)
    with pytest.raises(ValidationError, match="poisson"):
        DPLogisticRegression(epsilon=1.0, solver="dp_blsgd_adaptive",
                             sampler="shuffle").fit(X, y)
    with pytest.raises(ValidationError, match="non-private"):
        DPLogisticRegression(epsilon=np.inf, solver="dpagd").fit(X, y)


def test_non_private_adaptive_line_search_is_armijo_sgd(data):
    X, y, _ = data
    est = DPLogisticRegression(epsilon=np.inf, solver="dp_blsgd_adaptive", batch_size=500,
                               epochs=5, random_state=0).fit(X, y)
    assert est.epsilon_ == math.inf and est.score(X, y) > 0.9


def test_solver_options_reach_the_run(data):
    X, y, _ = data
    est = DPLogisticRegression(epsilon=1.0, solver="dp_blsgd_adaptive", epochs=3,
                               solver_options={"noise": "gaussian", "armijo_alpha": 0.3,
                                               "epsilon_iter": 0.05},
                               random_state=0).fit(X, y)
    s = est.solver_result_.extra["settings"]
    assert s["noise"] == "gaussian" and s["alpha"] == 0.3 and s["epsilon_iter"] == 0.05


def test_noise_multiplier_is_the_cap(data):
    X, y, _ = data
    est = DPLogisticRegression(noise_multiplier=0.01, delta=1e-6, solver="dpagd", epochs=3,
                               random_state=0).fit(X, y)
    assert est.privacy_event_ == PrivacyFilterEvent.zcdp(0.01)
    assert est.epsilon_ == pytest.approx(_dp_accounting_epsilon(0.01, 1e-6), rel=1e-9)


from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

_CHECKED = [
    DPLogisticRegression(epsilon=1e4, solver="dpagd", normalize=True, epochs=5, random_state=0),
    DPLinearSVC(epsilon=1e4, solver="dp_blgd", normalize=True, epochs=5, random_state=0),
    DPLogisticRegression(epsilon=np.inf, solver="dp_blsgd_adaptive", batch_size=5, epochs=5,
                         random_state=0),
]


@parametrize_with_checks(_CHECKED)
def test_sklearn_compatible(estimator, check):
    check(estimator)
