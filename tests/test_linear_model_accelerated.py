"""The scikit-learn estimators with the spec-002 solvers (dp_heavy_ball, dp_nesterov, dp_masg)."""
import math

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression, Ridge

from fastdp.exceptions import ValidationError
from fastdp.linear_model import DPLogisticRegression, DPRidge
from fastdp.privacy import events
from fastdp.privacy.pure import PureDPAccountant
from fastdp.solvers.registry import get_estimator_solver

SOLVERS = ["dp_heavy_ball", "dp_nesterov", "dp_masg"]


def _data(n=1500, d=8, seed=0, task="binary"):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    w = rng.standard_normal(d)
    if task == "binary":
        return X, (X @ w + 0.3 * rng.standard_normal(n) > 0).astype(int)
    return X, X @ w + 0.1 * rng.standard_normal(n)


@pytest.mark.parametrize("solver", SOLVERS)
def test_pure_accountant_spends_exactly_the_budget(solver):
    X, y = _data()
    model = DPLogisticRegression(solver=solver, epsilon=0.8, alpha=0.01, sampler="fixed", fit_intercept=False, normalize=False,
                                 batch_size=300, epochs=4, accountant="pure", clip=1.0,
                                 random_state=0).fit(X, y)
    assert model.epsilon_ == pytest.approx(0.8, rel=1e-12) and model.epsilon_ <= 0.8 + 1e-12
    assert model.noise_name_ == "schedule_epsilon"
    assert model.n_iter_ == 20
    event = model.privacy_event_
    assert isinstance(event, events.SelfComposedEvent) and event.count == 20
    assert isinstance(event.event, events.FixedSizeSampledEvent)
    assert isinstance(event.event.event, events.LaplaceEvent)
    assert model.solver_result_.extra["noise_convention"] == "paper"
    # the scales reported are those drawn: S1 / (m eps0) with S1 = 2 sqrt(d) (rows of L2 norm 1,
    # clip 1) and eps0 from eq. 3.5
    from fastdp.solvers.accelerated import b_for_eps
    drawn = model.solver_result_.extra["laplace_scales"]
    assert np.allclose(drawn, b_for_eps(2 * math.sqrt(8), 0.8 / 20, 1500, 300), rtol=1e-12)
    assert model.score(X, y) > 0.6


@pytest.mark.parametrize("solver", SOLVERS)
def test_rdp_accountant_calibrates_a_larger_pure_budget(solver):
    X, y = _data()
    model = DPLogisticRegression(solver=solver, epsilon=1.0, alpha=0.01, sampler="fixed",
                                 batch_size=150, epochs=5, random_state=0).fit(X, y)
    assert model.epsilon_ <= 1.0
    assert model.epsilon_ == pytest.approx(1.0, rel=1e-5)
    # the pure-DP epsilon of what ran is the schedule budget, above the (eps, delta) one
    pure = PureDPAccountant().epsilon(model.privacy_event_, 0.0)
    assert pure == pytest.approx(model.noise_multiplier_, rel=1e-9) and pure > 1.0


def test_non_private_limit_reaches_scikit_learn_logistic_optimum():
    X, y = _data()
    lam = 0.01
    model = DPLogisticRegression(solver="dp_nesterov", epsilon=np.inf, alpha=lam, fit_intercept=False, normalize=False,
                                 sampler="fixed", batch_size=X.shape[0],
                                 solver_options={"n_iter": 600}).fit(X, y)
    ref = LogisticRegression(C=1.0 / (lam * X.shape[0]), fit_intercept=False, tol=1e-12,
                             max_iter=10_000).fit(X, y)
    assert np.allclose(model.coef_, ref.coef_, atol=1e-7)
    assert math.isinf(model.epsilon_)


@pytest.mark.parametrize("solver", ["dp_heavy_ball", "dp_masg"])
def test_non_private_limit_reaches_scikit_learn_ridge_optimum(solver):
    X, y = _data(task="regression")
    lam = 0.05
    model = DPRidge(solver=solver, epsilon=np.inf, alpha=lam, clip=np.inf, sampler="fixed", fit_intercept=False, normalize=False,
                    batch_size=X.shape[0], solver_options={"n_iter": 3000}).fit(X, y)
    ref = Ridge(alpha=lam * X.shape[0], fit_intercept=False).fit(X, y)
    assert np.allclose(model.coef_, ref.coef_, atol=1e-8)


def test_opt_allocation_through_the_estimator():
    X, y = _data()
    model = DPLogisticRegression(
        solver="dp_nesterov", epsilon=1.0, alpha=0.01, sampler="fixed", batch_size=X.shape[0],
        accountant="pure", solver_options={"n_iter": 200, "allocation": "prop42",
                                           "n_features": X.shape[1]},
        random_state=1).fit(X, y)
    result = model.solver_result_
    assert result.extra["allocation"] == "prop42"
    assert result.n_iter == result.extra["horizon"] <= 200
    assert model.epsilon_ == pytest.approx(1.0, rel=1e-12)
    scales = result.extra["laplace_scales"]
    assert scales[0] > scales[-1]  # noise starts high, then decreases


def test_reference_code_convention_reports_its_real_epsilon():
    X, y = _data()
    model = DPLogisticRegression(solver="dp_heavy_ball", epsilon=1.0, alpha=0.01, sampler="fixed",
                                 batch_size=X.shape[0], accountant="pure",
                                 solver_options={"n_iter": 30, "noise_convention": "reference_code"},
                                 random_state=0).fit(X, y)
    # the pure budget is calibrated for the noise really drawn: epsilon_ never exceeds the target
    assert model.epsilon_ <= 1.0 and model.epsilon_ == pytest.approx(1.0, rel=1e-5)
    # scale b/sqrt(2) costs sqrt(2) times the nominal budget: the nominal one is 1/sqrt(2)
    assert model.noise_multiplier_ == pytest.approx(1 / math.sqrt(2), rel=1e-5)
    assert model.solver_result_.extra["noise_convention"] == "reference_code"


def test_bad_settings_are_rejected():
    X, y = _data(n=300)
    with pytest.raises(ValidationError, match="without replacement"):
        DPLogisticRegression(solver="dp_nesterov", batch_size=50, sampler="poisson").fit(X, y)
    with pytest.raises(ValidationError, match="solver_options"):
        DPLogisticRegression(solver="dp_masg", sampler="fixed",
                             solver_options={"learning_rate": 1.0}).fit(X, y)
    with pytest.raises(ValidationError, match="n_features"):
        get_estimator_solver("dp_nesterov").event(
            300, {"lam": 0.1, "batch_size": 300, "epochs": 1, "clip": 1.0, "sampler": "fixed",
                  "options": {"allocation": "prop42"}}, 1.0)
    with pytest.raises(ValidationError, match="hinge"):
        from fastdp.linear_model import DPLinearSVC
        DPLinearSVC(solver="dp_heavy_ball", sampler="fixed").fit(X, y)


def test_same_seed_same_model():
    X, y = _data()
    # sampler=None: the solver's default, batches without replacement
    kw = dict(solver="dp_masg", epsilon=1.0, alpha=0.01, batch_size=100, epochs=2,
              accountant="pure")
    a = DPLogisticRegression(random_state=5, **kw).fit(X, y)
    b = DPLogisticRegression(random_state=5, **kw).fit(X, y)
    assert np.array_equal(a.coef_, b.coef_)
    assert a.sampler_ == "fixed"
