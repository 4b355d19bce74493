"""The estimators of fastdp.linear_model with solver="dpsgd", "sgd", "output" and "objective"."""
import math

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.utils.estimator_checks import parametrize_with_checks

from fastdp.exceptions import BudgetExceededError, PrivacyAnalysisError, ValidationError
from fastdp.linear_model import DPLinearSVC, DPLogisticRegression, DPRidge
from fastdp.privacy import compute_epsilon
from fastdp.privacy.events import Adjacency, PureEvent
from fastdp.privacy.ledger import PrivacyLedger


@pytest.fixture
def binary_data(make_linear_data):
    return make_linear_data(600)


@pytest.fixture
def regression_data(make_linear_data):
    return make_linear_data(600, task="regression")


# ---------------------------------------------------------------- sklearn API

# Non-private (epsilon=inf) instances see the checks' raw data; private ones
# normalise rows per example (as tests/test_linear_model.py does).
# Non-private SGD on raw data keeps clip=1 (bounded steps: no divergence on
# unscaled check data).
_SGD = {"learning_rate": 0.02}
_CHECK_ESTIMATORS = [
    DPRidge(epsilon=np.inf, solver="sgd", batch_size=1, sampler="shuffle", epochs=30, clip=1.0,
            solver_options=_SGD, random_state=0),
    DPLogisticRegression(epsilon=np.inf, solver="sgd", batch_size=1, sampler="shuffle",
                         epochs=30, clip=1.0, solver_options=_SGD, random_state=0),
    DPLinearSVC(epsilon=np.inf, solver="dpsgd", batch_size=1, sampler="shuffle", epochs=30,
                clip=1.0, solver_options=_SGD, random_state=0),
    DPLogisticRegression(epsilon=1e4, solver="dpsgd", normalize=True, batch_size=5,
                         epochs=10, random_state=0),
    DPLogisticRegression(epsilon=np.inf, solver="objective", random_state=0),
    DPLogisticRegression(epsilon=1e4, solver="output", alpha=1e-2, normalize=True,
                         random_state=0),
    DPLogisticRegression(epsilon=1e4, solver="objective", alpha=1e-2, normalize=True,
                         random_state=0),
]


@parametrize_with_checks(_CHECK_ESTIMATORS)
def test_sklearn_compatible(estimator, check):
    check(estimator)


# ------------------------------------------------------------ non-private optima


def test_sgd_full_batch_ridge_matches_sklearn(regression_data):
    X, y = regression_data
    lam, n = 1e-2, X.shape[0]
    est = DPRidge(epsilon=np.inf, solver="sgd", alpha=lam, batch_size=n, sampler="shuffle", fit_intercept=False, normalize=False,
                  clip=None, epochs=400, solver_options={"learning_rate": 1.5},
                  random_state=0).fit(sp.csr_matrix(X), y)
    ref = Ridge(alpha=lam * n, fit_intercept=False).fit(X, y)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-7, atol=1e-9)
    assert est.epsilon_ == math.inf and est.noise_multiplier_ == 0.0


@pytest.mark.parametrize("solver", ["objective", "output"])
def test_perturbation_solvers_nonprivate_limit_is_the_exact_optimum(binary_data, solver):
    X, y = binary_data
    lam, n = 1e-2, X.shape[0]
    est = DPLogisticRegression(epsilon=np.inf, solver=solver, alpha=lam, fit_intercept=False, normalize=False).fit(X, y)
    ref = LogisticRegression(C=1.0 / (lam * n), fit_intercept=False, tol=1e-14,
                             max_iter=100000).fit(X, y)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-5, atol=1e-7)


# ------------------------------------------------------------------ privacy


def test_dpsgd_calibration_matches_accountant(binary_data):
    X, y = binary_data
    est = DPLogisticRegression(epsilon=1.0, delta=1e-5, solver="dpsgd", batch_size=60, epochs=4,
                               random_state=0, accountant="rdp").fit(X, y)
    assert est.n_iter_ == 40 and est.sampler_ == "poisson"
    assert est.epsilon_ <= 1.0
    assert compute_epsilon(est.noise_multiplier_, 0.1, 40, 1e-5) == pytest.approx(est.epsilon_)
    assert compute_epsilon(est.noise_multiplier_ * (1 - 1e-4), 0.1, 40, 1e-5) > 1.0
    assert est.solver_result_.algorithm == "dpsgd"
    assert est.noise_name_ == "noise_multiplier"


def test_dpsgd_learns_with_a_large_budget(binary_data):
    X, y = binary_data
    est = DPLogisticRegression(epsilon=8.0, solver="dpsgd", batch_size=100, epochs=20, alpha=1e-3,
                               solver_options={"learning_rate": 2.0}, random_state=0).fit(X, y)
    assert est.score(X, y) > 0.85


@pytest.mark.parametrize("solver", ["output", "objective"])
def test_perturbation_estimators_are_pure_dp_replace_one(binary_data, solver):
    X, y = binary_data
    est = DPLogisticRegression(epsilon=2.0, solver=solver, accountant="pure", alpha=0.05,
                               random_state=0).fit(X, y)
    assert est.privacy_event_ == PureEvent(2.0, Adjacency.REPLACE_ONE)
    assert est.epsilon_ == 2.0 and est.noise_multiplier_ == 0.5
    assert est.noise_name_ == "noise_scale"
    rdp = DPLogisticRegression(epsilon=2.0, solver=solver, accountant="rdp", alpha=0.05,
                               random_state=0).fit(X, y)
    assert rdp.epsilon_ <= 2.0


def test_output_gaussian_variant_through_solver_options(binary_data):
    X, y = binary_data
    est = DPLogisticRegression(epsilon=1.0, solver="output", alpha=0.05,
                               solver_options={"mechanism": "gaussian"}, random_state=0).fit(X, y)
    assert est.epsilon_ <= 1.0 and est.privacy_event_.adjacency is Adjacency.REPLACE_ONE
    assert est.solver_result_.extra["mechanism"] == "gaussian"


def test_ledger_is_charged_before_training(binary_data):
    X, y = binary_data
    ledger = PrivacyLedger(epsilon=1.0, delta=1e-5, accountant="rdp")
    first = DPLogisticRegression(epsilon=0.9, delta=1e-5, solver="dpsgd", batch_size=60,
                                 epochs=2, ledger=ledger, random_state=0,
                                 accountant="rdp").fit(X, y)
    second = DPLogisticRegression(epsilon=0.9, delta=1e-5, solver="dpsgd", batch_size=60,
                                  epochs=2, ledger=ledger, random_state=1, accountant="rdp")
    with pytest.raises(BudgetExceededError):
        second.fit(X, y)
    assert not hasattr(second, "coef_") and hasattr(first, "coef_")
    # a pure replace-one release cannot silently compose with add/remove DP-SGD
    pure = PrivacyLedger(epsilon=5.0, delta=1e-5, accountant="rdp")
    DPLogisticRegression(epsilon=1.0, solver="objective", alpha=0.05, ledger=pure).fit(X, y)
    with pytest.raises(PrivacyAnalysisError, match="replace-one"):
        DPLogisticRegression(epsilon=1.0, solver="dpsgd", ledger=pure).fit(X, y)


def test_same_seed_same_model_any_thread_count(binary_data):
    X, y = binary_data
    a = DPLinearSVC(epsilon=1.0, solver="dpsgd", batch_size=300, random_state=5,
                    num_threads=1).fit(X, y)
    b = DPLinearSVC(epsilon=1.0, solver="dpsgd", batch_size=300, random_state=5,
                    num_threads=2).fit(X, y)
    assert np.array_equal(a.coef_, b.coef_)


# ------------------------------------------------------------------ bad input


def test_bad_settings_are_rejected(binary_data, regression_data):
    X, y = binary_data
    with pytest.raises(ValidationError, match="not private"):
        DPLogisticRegression(epsilon=1.0, solver="sgd").fit(X, y)
    with pytest.raises(ValidationError, match="does not support"):
        DPRidge(epsilon=1.0, solver="output").fit(*regression_data)
    with pytest.raises(ValidationError, match="does not support"):
        DPLinearSVC(epsilon=1.0, solver="objective").fit(X, y)
    with pytest.raises(ValidationError, match="solver_options"):
        DPLogisticRegression(solver="dpsgd", solver_options={"momentum": 0.9}).fit(X, y)
    with pytest.raises(ValidationError, match="norm"):
        DPLogisticRegression(solver="objective", normalize=False).fit(X * 2, y)
    with pytest.raises(ValidationError, match="learning"):
        DPLogisticRegression(solver="dpsgd", alpha=0.5,
                             solver_options={"learning_rate": 10.0}).fit(X, y)
