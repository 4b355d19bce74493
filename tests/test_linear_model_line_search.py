"""The estimators of fastdp.linear_model with solver="dp_blsgd" (spec 003 fixed split)."""
import math

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.utils.estimator_checks import parametrize_with_checks

from fastdp.exceptions import BudgetExceededError, PrivacyAnalysisError, ValidationError
from fastdp.linear_model import DPLinearSVC, DPLogisticRegression, DPRidge
from fastdp.privacy.events import PoissonSampledEvent, SelfComposedEvent
from fastdp.privacy.ledger import PrivacyLedger
from fastdp.privacy.rdp import RdpAccountant
from fastdp.solvers.line_search import fixed_split_event


@pytest.fixture
def binary_data(make_linear_data):
    return make_linear_data(2000)


_OPTS = {"c_obj": 1.0, "armijo_alpha": 0.1}
_CHECK_ESTIMATORS = [
    DPLogisticRegression(epsilon=np.inf, solver="dp_blsgd", batch_size=5, epochs=20,
                         clip=10.0, solver_options=_OPTS, random_state=0),
    DPLinearSVC(epsilon=np.inf, solver="dp_blsgd", batch_size=5, epochs=20, clip=10.0,
                solver_options=_OPTS, random_state=0),
    DPLogisticRegression(epsilon=1e4, solver="dp_blsgd", normalize=True, batch_size=5,
                         epochs=10, solver_options=_OPTS, random_state=0),
]


@parametrize_with_checks(_CHECK_ESTIMATORS)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_private_fit_event_and_epsilon(binary_data):
    X, y = binary_data
    clf = DPLogisticRegression(epsilon=1.0, delta=1e-6, solver="dp_blsgd", batch_size=100,
                               epochs=5, random_state=0).fit(X, y)
    n_steps = 5 * 2000 // 100
    sigma = clf.noise_multiplier_
    expected = SelfComposedEvent(PoissonSampledEvent(0.05, fixed_split_event(1 / (2 * sigma ** 2))),
                                 n_steps)
    assert clf.privacy_event_ == expected
    assert clf.n_iter_ == n_steps
    assert clf.epsilon_ <= 1.0
    # calibration is tight: 1% less noise overshoots the target
    smaller = SelfComposedEvent(PoissonSampledEvent(0.05, fixed_split_event(
        1 / (2 * (sigma / 1.01) ** 2))), n_steps)
    assert RdpAccountant().epsilon(smaller, 1e-6) > 1.0
    assert clf.score(X, y) > 0.8


def test_non_private_fit_matches_sklearn(binary_data):
    X, y = binary_data
    ours = DPLogisticRegression(epsilon=np.inf, solver="dp_blsgd", alpha=1e-3, batch_size=200,
                                epochs=30, clip=1e6,
                                solver_options={"c_obj": 1e6, "armijo_alpha": 0.1},
                                random_state=0).fit(X, y)
    ref = LogisticRegression(C=1 / (1e-3 * len(y)), fit_intercept=False).fit(X, y)
    agree = np.mean(ours.predict(X) == ref.predict(X))
    assert agree > 0.97
    assert ours.epsilon_ == math.inf


def test_hinge_and_squared_losses_run(binary_data, rng):
    X, y = binary_data
    svc = DPLinearSVC(epsilon=2.0, solver="dp_blsgd", batch_size=100, epochs=3,
                      random_state=1).fit(X, y)
    assert svc.epsilon_ <= 2.0 and svc.score(X, y) > 0.7
    t = X @ rng.normal(size=8)
    reg = DPRidge(epsilon=2.0, solver="dp_blsgd", batch_size=100, epochs=3,
                  random_state=1).fit(X, t)
    assert reg.epsilon_ <= 2.0 and np.all(np.isfinite(reg.coef_))


def test_ledger_refuses_before_training(binary_data):
    X, y = binary_data
    ledger = PrivacyLedger(epsilon=1.0, delta=1e-5)
    DPLogisticRegression(epsilon=0.8, delta=1e-6, solver="dp_blsgd", ledger=ledger,
                         random_state=0).fit(X, y)
    with pytest.raises(BudgetExceededError):
        DPLogisticRegression(epsilon=0.8, delta=1e-6, solver="dp_blsgd", ledger=ledger,
                             random_state=0).fit(X, y)


def test_bad_options_and_accountant(binary_data):
    X, y = binary_data
    with pytest.raises(ValidationError, match="does not understand"):
        DPLogisticRegression(solver="dp_blsgd", solver_options={"xi": 0.3}).fit(X, y)
    with pytest.raises(ValidationError):
        DPLogisticRegression(solver="dp_blsgd", solver_options={"grad_share": 1.5}).fit(X, y)
    # the line search has an RDP analysis only: PLD accounting refuses it clearly
    with pytest.raises(PrivacyAnalysisError):
        DPLogisticRegression(solver="dp_blsgd", accountant="pld", random_state=0).fit(X, y)
