"""Tests of the scikit-learn estimators in fastdp.linear_model."""
import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import expit
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import Normalizer
from sklearn.utils.estimator_checks import parametrize_with_checks

from fastdp.exceptions import BudgetExceededError, ValidationError
from fastdp.linear_model import DPLinearSVC, DPLogisticRegression, DPRidge, default_delta
from fastdp.losses import get_loss, primal_objective
from fastdp.privacy import calibrate_noise_multiplier, compute_epsilon
from fastdp.privacy.ledger import PrivacyLedger


@pytest.fixture
def binary_data(make_linear_data):
    return make_linear_data(400)


@pytest.fixture
def regression_data(make_linear_data):
    return make_linear_data(400, task="regression")


# ---------------------------------------------------------------- sklearn API

# The estimator checks feed data whose rows are not normalised: with the
# defaults every row is bounded per example (normalised, or clipped for
# DPRidge), so the checks run with the defaults, non-private (the exact
# optimum) and private (large epsilon), and once with DP-SCD.
_CHECK_ESTIMATORS = [
    DPRidge(epsilon=np.inf, random_state=0),
    DPLogisticRegression(epsilon=np.inf, random_state=0),
    DPLinearSVC(epsilon=np.inf, random_state=0),
    DPLogisticRegression(epsilon=1e4, random_state=0),
    DPLinearSVC(epsilon=1e4, random_state=0),
    DPRidge(epsilon=1e4, random_state=0),
    DPLogisticRegression(epsilon=1e4, solver="dpscd", alpha=1e-3, batch_size=10, epochs=20,
                         random_state=0),
]


@parametrize_with_checks(_CHECK_ESTIMATORS)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_clone_pipeline_gridsearch(binary_data):
    X, y = binary_data
    est = DPLogisticRegression(epsilon=2.0, random_state=0, batch_size=50, epochs=3)
    assert clone(est).get_params() == est.get_params()
    pipe = make_pipeline(Normalizer(), est)
    pipe.fit(X, y)
    assert pipe.score(X, y) > 0.6
    grid = GridSearchCV(est, {"clip": [0.1, 1.0]}, cv=2).fit(X, y)
    assert grid.best_params_["clip"] in (0.1, 1.0)


# ---------------------------------------------------- non-private optima


def test_ridge_nonprivate_matches_sklearn(regression_data):
    X, y = regression_data
    lam = 1e-2
    # epsilon=inf: the exact optimum (solver "exact"), here on the raw rows
    est = DPRidge(epsilon=np.inf, alpha=lam, normalize=False, fit_intercept=False,
                  random_state=1).fit(sp.csr_matrix(X), y)
    assert est.solver_ == "exact"
    ref = Ridge(alpha=lam * X.shape[0], fit_intercept=False).fit(X, y)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-6, atol=1e-8)
    assert est.epsilon_ == math.inf and est.noise_multiplier_ == 0.0


def test_logistic_nonprivate_matches_sklearn(binary_data):
    X, y = binary_data
    lam = 1e-2
    est = DPLogisticRegression(epsilon=np.inf, alpha=lam, normalize=False, fit_intercept=False,
                               random_state=2).fit(X, y)
    ref = LogisticRegression(C=1.0 / (lam * X.shape[0]), fit_intercept=False, tol=1e-12,
                             max_iter=10000).fit(X, y)
    loss = get_loss("logistic")
    ypm = np.where(y == 1, 1.0, -1.0)
    p_est = primal_objective(est.coef_[0], X, ypm, loss, lam)
    p_ref = primal_objective(ref.coef_[0], X, ypm, loss, lam)
    # the exact solver: relative objective gap <= 1e-6 (in fact ~1e-12)
    assert p_est <= p_ref * (1.0 + 1e-6)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=2e-3, atol=2e-3)
    proba = est.predict_proba(X)
    np.testing.assert_allclose(proba[:, 1], expit(X @ est.coef_[0]), rtol=1e-12)
    np.testing.assert_allclose(np.exp(est.predict_log_proba(X)), proba, rtol=1e-12)
    assert list(est.classes_) == [0, 1]


def test_svc_nonprivate_predicts_like_linear_svc(binary_data):
    from sklearn.svm import LinearSVC

    X, y = binary_data
    lam = 1e-2
    est = DPLinearSVC(epsilon=np.inf, alpha=lam, normalize=False, fit_intercept=False,
                      random_state=3).fit(X, y)
    ref = LinearSVC(C=1.0 / (lam * X.shape[0]), loss="hinge", fit_intercept=False, tol=1e-10,
                    max_iter=100000).fit(X, y)
    loss = get_loss("hinge")
    ypm = np.where(y == 1, 1.0, -1.0)
    assert primal_objective(est.coef_[0], X, ypm, loss, lam) == pytest.approx(
        primal_objective(ref.coef_[0], X, ypm, loss, lam), rel=1e-3)


# --------------------------------------------------------------- privacy


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
def test_private_fit_spends_at_most_target(binary_data, accountant):
    X, y = binary_data
    est = DPLogisticRegression(epsilon=1.0, delta=1e-5, batch_size=40, epochs=2,
                               accountant=accountant, random_state=0).fit(X, y)
    assert est.epsilon_ <= 1.0
    assert est.epsilon_ > 1.0 - 1e-3  # calibration is tight
    assert est.delta_ == 1e-5
    assert est.n_iter_ == 2 * X.shape[0] // 40


def test_noise_multiplier_matches_convenience_api(binary_data):
    X, y = binary_data
    n = X.shape[0]
    est = DPLogisticRegression(epsilon=0.5, delta=1e-6, batch_size=20, epochs=3,
                               random_state=0, accountant="rdp").fit(X, y)
    q, steps = 20 / n, 3 * n // 20
    sigma = calibrate_noise_multiplier(0.5, 1e-6, q, steps)
    assert est.noise_multiplier_ == pytest.approx(float(sigma), rel=2e-6)
    assert est.epsilon_ == pytest.approx(compute_epsilon(est.noise_multiplier_, q, steps, 1e-6),
                                         rel=1e-12)


def test_explicit_noise_multiplier_reports_computed_epsilon(binary_data):
    X, y = binary_data
    est = DPRidge(noise_multiplier=3.0, batch_size=40, epochs=1, random_state=0,
                  target_bound=(-1.0, 1.0))   # public targets range: no private statistics
    est.fit(X, y.astype(float))
    n = X.shape[0]
    expected = compute_epsilon(3.0, 40 / n, n // 40, default_delta(n), accountant="auto")
    assert est.epsilon_ == pytest.approx(expected, rel=1e-12)   # the default accountant
    assert est.delta_ == default_delta(n) < 1.0 / n


def test_default_delta_below_one_over_n():
    for n in (10, 1000, 10**6):
        assert default_delta(n) < 1.0 / n


def test_same_seed_same_bits_any_thread_count(binary_data):
    X, y = binary_data
    a = DPLogisticRegression(epsilon=1.0, batch_size=50, random_state=7, num_threads=1).fit(X, y)
    b = DPLogisticRegression(epsilon=1.0, batch_size=50, random_state=7, num_threads=2).fit(X, y)
    c = DPLogisticRegression(epsilon=1.0, batch_size=50, random_state=8).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert not np.array_equal(a.coef_, c.coef_)


def test_ledger_charged_and_refuses_over_budget(binary_data, tmp_path):
    X, y = binary_data
    ledger = PrivacyLedger(epsilon=1.1, delta=1e-5, path=tmp_path / "ledger.json")
    est = DPLogisticRegression(epsilon=1.0, delta=1e-5, batch_size=40, epochs=1,
                               ledger=ledger, random_state=0).fit(X, y)
    assert len(ledger.entries) == 1
    assert ledger.spent() == pytest.approx(est.epsilon_, rel=1e-9)
    second = DPLogisticRegression(epsilon=1.0, delta=1e-5, batch_size=40, epochs=1,
                                  ledger=ledger, random_state=1)
    with pytest.raises(BudgetExceededError):
        second.fit(X, y)
    assert not hasattr(second, "coef_")
    assert len(ledger.entries) == 1
    assert len(PrivacyLedger.load(tmp_path / "ledger.json").entries) == 1


def test_more_privacy_means_worse_fit_on_average(regression_data):
    X, y = regression_data
    lam = 1e-2
    loss = get_loss("squared")

    def objective(eps):
        vals = []
        for seed in range(6):
            est = DPRidge(epsilon=eps, alpha=lam, batch_size=100, epochs=5, clip=1.0,
                          random_state=seed).fit(X, y)
            vals.append(primal_objective(est.coef_, X, y, loss, lam))
        return np.median(vals)

    assert objective(0.05) > objective(5.0)


# -------------------------------------------------------------- bad input


def test_rows_above_unit_norm_rejected_unless_normalize(binary_data):
    X, y = binary_data
    X = X * 2.0
    with pytest.raises(ValidationError, match="norm"):
        DPLogisticRegression(epsilon=1.0, normalize=False, random_state=0).fit(X, y)
    for bound in ("auto", True, "clip"):  # bounded per example: accepted
        DPLogisticRegression(epsilon=1.0, normalize=bound, random_state=0).fit(X, y)
    # a non-private fit has no norm requirement
    DPLogisticRegression(epsilon=np.inf, normalize=False, random_state=0).fit(X, y)


@pytest.mark.parametrize("params, match", [
    ({"epsilon": 0.0}, "epsilon"),
    ({"epsilon": -1.0}, "epsilon"),
    ({"epsilon": float("nan")}, "epsilon"),
    ({"delta": 0.0}, "delta"),
    ({"delta": 1.0}, "delta"),
    ({"alpha": 0.0}, "alpha"),
    ({"batch_size": 10_000}, "batch_size"),
    ({"batch_size": 0}, "batch_size"),
    ({"clip": 0.0}, "clip"),
    ({"clip": -1.0}, "clip"),
    ({"solver": "magic"}, "solver"),
    ({"noise_multiplier": -1.0}, "noise_multiplier"),
    ({"sampler": "nope"}, "sampler"),
])
def test_bad_parameters(binary_data, params, match):
    X, y = binary_data
    with pytest.raises(ValidationError, match=match):
        DPLogisticRegression(random_state=0, **params).fit(X, y)


def test_bad_labels_and_data(binary_data):
    X, y = binary_data
    with pytest.raises(ValidationError):
        DPLogisticRegression().fit(X, np.zeros(X.shape[0]))
    with pytest.raises(ValidationError):
        DPLinearSVC().fit(X, np.ones(X.shape[0]))
    with pytest.raises(ValueError):
        DPLogisticRegression().fit(X[:10], y)
    bad = X.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValidationError):
        DPLogisticRegression().fit(bad, y)
    with pytest.raises(ValidationError):
        DPRidge().fit(np.empty((0, 3)), np.empty(0))


def test_seq_dpscd_solver_with_options(binary_data):
    X, y = binary_data
    est = DPLogisticRegression(solver="seq_dpscd", sampler="shuffle", epsilon=2.0, batch_size=20,
                               epochs=2, solver_options={"seq_sensitivity": "repo"},
                               random_state=0).fit(X, y)
    assert est.epsilon_ <= 2.0
    assert est.solver_result_.algorithm == "seq_dpscd"
    with pytest.raises(ValidationError, match="solver_options"):
        DPLogisticRegression(solver_options={"no_such_option": 1}).fit(X, y)
    with pytest.raises(ValidationError, match="Poisson"):
        DPLogisticRegression(solver="seq_dpscd", sampler="poisson").fit(X, y)


def test_default_sampler_per_solver_and_alpha_not_released(binary_data):
    X, y = binary_data
    seq = DPLogisticRegression(solver="seq_dpscd", epsilon=2.0, batch_size=20, epochs=1,
                               random_state=0).fit(X, y)
    assert seq.sampler_ == "fixed"
    dual = DPLogisticRegression(solver="dpscd", epsilon=2.0, batch_size=20, epochs=1,
                                fit_intercept=False, random_state=0).fit(X, y)
    assert dual.sampler_ == "poisson"
    # the noisy dual variables would reveal the sampled batches: never kept
    assert dual.solver_result_.alpha is None
    np.testing.assert_allclose(dual.coef_[0], dual.solver_result_.v / (dual.alpha_ * X.shape[0]))


def test_every_registered_solver_is_available():
    from fastdp.solvers.registry import ESTIMATOR_SOLVER_NAMES, get_estimator_solver

    for name in ESTIMATOR_SOLVER_NAMES:
        solver = get_estimator_solver(name)
        assert set(solver.losses) <= {"squared", "logistic", "hinge"}
    with pytest.raises(ValidationError, match="unknown solver"):
        get_estimator_solver("no_such_solver")


def test_line_search_alias(binary_data):
    X, y = binary_data
    a = DPLogisticRegression(solver="line_search", epsilon=2.0, random_state=0).fit(X, y)
    b = DPLogisticRegression(solver="dp_blsgd", epsilon=2.0, random_state=0).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert a.epsilon_ <= 2.0


def test_callback_sees_every_epoch_and_only_released_state(binary_data):
    X, y = binary_data
    seen = []
    est = DPLogisticRegression(epsilon=1.0, batch_size=40, epochs=3, callback=seen.append,
                               random_state=0).fit(X, y)
    assert [s["epoch"] for s in seen] == [1, 2, 3]
    assert all("alpha" not in s for s in seen)
    np.testing.assert_allclose(seen[-1]["coef"], est.coef_)
    np.testing.assert_allclose(seen[-1]["intercept"], est.intercept_)
    with pytest.raises(ValidationError, match="callback"):
        DPLogisticRegression(callback="not callable").fit(X, y)
    with pytest.raises(ValidationError, match="callback"):
        DPLogisticRegression(solver="output", callback=seen.append).fit(X, y)


def test_verbose_prints_privacy_report(binary_data, capsys):
    X, y = binary_data
    DPLogisticRegression(epsilon=1.0, batch_size=40, epochs=1, verbose=1,
                         random_state=0).fit(X, y)
    out = capsys.readouterr().out
    assert "epsilon=" in out and "sigma=" in out
