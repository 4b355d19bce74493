"""The model a user gets with the defaults: row map in prediction, intercept,
epsilon=inf is the exact optimum, multiclass, defaults from public quantities."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import expit, softmax
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.preprocessing import normalize as sk_normalize

from fastdp.defaults import default_alpha, dpsgd_defaults
from fastdp.exceptions import ValidationError
from fastdp.linear_model import DPLinearSVC, DPLogisticRegression, DPRidge
from fastdp.losses import primal_objective
from fastdp.preprocessing import RowMap
from fastdp.privacy.events import SelfComposedEvent

ESTIMATORS = [DPRidge, DPLogisticRegression, DPLinearSVC]


def _data(n=300, d=6, task="binary", k=3, scale=5.0, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * scale          # rows far above norm 1
    w = rng.normal(size=d)
    if task == "regression":
        return X, X @ w / scale + 3.0 + 0.1 * rng.normal(size=n)
    if task == "binary":
        return X, (X @ w + 2.0 * scale > 0).astype(int)
    W = rng.normal(size=(k, d))
    return X, np.argmax(X @ W.T + rng.gumbel(size=(n, k)) * 0.3, axis=1)


def _by_hand(X, bound, fit_intercept, c=1.0):
    """The documented row map, written out with scikit-learn/numpy only."""
    X = np.asarray(X, dtype=np.float64)
    if bound == "normalize":
        Xb = sk_normalize(X)
    elif bound == "clip":
        norms = np.linalg.norm(X, axis=1)
        Xb = X / np.maximum(1.0, norms)[:, None]
    else:
        Xb = X
    if not fit_intercept:
        return Xb, Xb
    a = 1.0 / math.sqrt(1.0 + c * c)
    return Xb, np.hstack([a * Xb, np.full((X.shape[0], 1), a * c)])


# ------------------------------------------------------------- the row map
@pytest.mark.parametrize("bound", ["normalize", "clip", "reject"])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("sparse", [True, False])
def test_row_map_matches_the_documented_formula(bound, fit_intercept, sparse):
    X, _ = _data()
    if bound == "reject":
        X = X / np.linalg.norm(X, axis=1).max()
    Xin = sp.csr_matrix(X) if sparse else X
    row_map = RowMap(bound, fit_intercept, 2.0)
    _, expected = _by_hand(X, bound, fit_intercept, c=2.0)
    got = row_map.transform(Xin)
    got = got.toarray() if sp.issparse(got) else got
    np.testing.assert_allclose(got, expected, rtol=1e-11, atol=1e-15)  # 1 - 2^-40 safety
    assert np.linalg.norm(got, axis=1).max() <= 1.0   # strictly, despite rounding
    theta = np.arange(got.shape[1], dtype=float)
    coef, intercept = row_map.split_coef(theta)
    Xb, _ = _by_hand(X, bound, fit_intercept, c=2.0)
    np.testing.assert_allclose(Xb @ coef + intercept, got @ theta, rtol=1e-10, atol=1e-13)


def test_row_map_rejects_bad_parameters():
    with pytest.raises(ValidationError):
        RowMap("squash")
    for c in (0.0, -1.0, np.nan, np.inf, True):
        with pytest.raises(ValidationError):
            RowMap("clip", True, c)


# ------------------------------------------------ prediction applies the map
@pytest.mark.parametrize("Est", ESTIMATORS)
@pytest.mark.parametrize("normalize", ["auto", True, "clip"])
@pytest.mark.parametrize("solver", ["auto", "dpscd", "output", "dp_blsgd"])
def test_prediction_applies_the_training_row_map(Est, normalize, solver):
    task = "regression" if Est is DPRidge else "binary"
    X, y = _data(task=task)
    if solver == "output" and Est is not DPLogisticRegression:
        pytest.skip("output perturbation supports the logistic loss only")
    est = Est(epsilon=2.0, normalize=normalize, solver=solver, random_state=0).fit(X, y)
    bound = est.row_map_.bound
    assert bound == {"auto": "clip" if Est is DPRidge else "normalize", True: "normalize",
                     "clip": "clip"}[normalize]
    Xb, Xm = _by_hand(X, bound, True, c=est.intercept_scaling)
    a, c = est.row_map_.scale, est.intercept_scaling
    theta = np.hstack([est.coef_.reshape(-1) / a, np.ravel(est.intercept_) / (a * c)])
    if Est is DPRidge:
        np.testing.assert_allclose(est.predict(X), Xb @ est.coef_ + est.intercept_, rtol=1e-10)
        np.testing.assert_allclose(est.predict(X), Xm @ theta, rtol=1e-9, atol=1e-12)
        return
    scores = Xb @ est.coef_[0] + est.intercept_[0]
    np.testing.assert_allclose(est.decision_function(X), scores, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(est.decision_function(X), Xm @ theta, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(est.predict(X), est.classes_[(scores > 0).astype(int)])
    assert est.score(X, y) == np.mean(est.predict(X) == y)
    if Est is DPLogisticRegression:
        np.testing.assert_allclose(est.predict_proba(X)[:, 1], expit(scores), rtol=1e-10)


def test_reject_keeps_the_strict_refusal():
    X, y = _data()
    with pytest.raises(ValidationError, match="norm"):
        DPLogisticRegression(normalize=False).fit(X, y)
    X1 = X / np.linalg.norm(X, axis=1).max()
    est = DPLogisticRegression(normalize=False, random_state=0).fit(X1, y)
    assert est.row_map_.bound == "reject"
    with pytest.raises(ValidationError, match="normalize"):
        DPLogisticRegression(normalize="sometimes").fit(X, y)


# ---------------------------------------------------------------- intercept
def test_intercept_is_learnt_privately_and_costs_nothing_extra():
    X, y = _data()
    with_b = DPLogisticRegression(epsilon=1.0, random_state=0).fit(X, y)
    without = DPLogisticRegression(epsilon=1.0, fit_intercept=False, random_state=0).fit(X, y)
    assert without.intercept_[0] == 0.0 and with_b.intercept_[0] != 0.0
    # same mechanism: same event, same noise, same epsilon
    assert with_b.privacy_event_ == without.privacy_event_
    assert with_b.noise_multiplier_ == without.noise_multiplier_
    assert with_b.epsilon_ == without.epsilon_ <= 1.0


def test_intercept_at_eps_inf_matches_sklearn_on_the_augmented_rows():
    X, y = _data(task="regression")
    lam = 1e-3
    est = DPRidge(epsilon=np.inf, alpha=lam, normalize="clip", intercept_scaling=0.5).fit(X, y)
    Xb, Xm = _by_hand(X, "clip", True, c=0.5)
    ref = Ridge(alpha=lam * X.shape[0], fit_intercept=False).fit(Xm, y)
    a = 1.0 / math.sqrt(1.25)
    np.testing.assert_allclose(est.coef_, a * ref.coef_[:-1], rtol=1e-7, atol=1e-10)
    assert est.intercept_ == pytest.approx(a * 0.5 * ref.coef_[-1], rel=1e-7)


def test_intercept_recovers_a_shifted_target():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(2000, 4))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = X @ np.array([1.0, -1.0, 0.5, 0.0]) + 5.0
    est = DPRidge(epsilon=np.inf, alpha=1e-8).fit(X, y)
    assert est.intercept_ == pytest.approx(5.0, abs=1e-3)
    assert est.score(X, y) > 0.999


# ------------------------------------------------------- epsilon = inf
@pytest.mark.parametrize("Est, loss", [(DPRidge, "squared"), (DPLogisticRegression, "logistic"),
                                       (DPLinearSVC, "hinge")])
def test_eps_inf_reaches_the_non_private_optimum(Est, loss):
    from sklearn.svm import LinearSVC

    task = "regression" if loss == "squared" else "binary"
    X, y = _data(task=task, n=400)
    est = Est(epsilon=np.inf, random_state=0).fit(X, y)
    assert est.solver_ == "exact" and est.epsilon_ == math.inf
    n = X.shape[0]
    lam = default_alpha(n)
    _, Xm = _by_hand(X, est.row_map_.bound, True, c=est.intercept_scaling)
    ypm = y if task == "regression" else np.where(y == 1, 1.0, -1.0)
    if loss == "squared":
        ref = Ridge(alpha=lam * n, fit_intercept=False).fit(Xm, y).coef_
    elif loss == "logistic":
        ref = LogisticRegression(C=1.0 / (lam * n), fit_intercept=False, tol=1e-12,
                                 max_iter=100000).fit(Xm, y).coef_[0]
    else:
        ref = LinearSVC(C=1.0 / (lam * n), loss="hinge", fit_intercept=False, tol=1e-12,
                        max_iter=1000000).fit(Xm, y).coef_[0]
    a, c = est.row_map_.scale, est.intercept_scaling
    theta = np.hstack([est.coef_.reshape(-1) / a, np.ravel(est.intercept_) / (a * c)])
    p_est = primal_objective(theta, Xm, ypm, loss, lam)
    p_ref = primal_objective(ref, Xm, ypm, loss, lam)
    assert (p_est - p_ref) / p_ref <= 1e-6


# -------------------------------------------------------------- multiclass
def test_multinomial_eps_inf_matches_sklearn():
    X, y = _data(task="multiclass", k=4, n=400)
    est = DPLogisticRegression(epsilon=np.inf).fit(X, y)
    assert est.multi_class_ == "multinomial" and est.coef_.shape == (4, 6)
    _, Xm = _by_hand(X, "normalize", True, c=est.intercept_scaling)
    lam = default_alpha(X.shape[0])
    ref = LogisticRegression(C=1.0 / (lam * X.shape[0]), fit_intercept=False, tol=1e-12,
                             max_iter=100000).fit(Xm, y)
    a = est.row_map_.scale
    np.testing.assert_allclose(est.coef_, a * ref.coef_[:, :-1], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(est.predict_proba(X), ref.predict_proba(Xm), atol=1e-6)
    np.testing.assert_array_equal(est.predict(X), ref.predict(Xm))


def test_multinomial_dpsgd_is_one_mechanism():
    X, y = _data(task="multiclass", k=5, n=1000)
    # the same lot and epochs (the default rules differ: docs/defaults.md, multiclass rule)
    same = dict(epsilon=1.0, random_state=0, batch_size=250, epochs=20.0)
    multi = DPLogisticRegression(**same).fit(X, y)
    binary = DPLogisticRegression(**same).fit(X, (y == 0).astype(int))
    assert multi.multi_class_ == "multinomial" and multi.coef_.shape == (5, 6)
    # the K x d gradient is clipped as one vector: the event (and the noise) of
    # the binary problem, not a composition of K
    assert multi.privacy_event_ == binary.privacy_event_
    assert multi.epsilon_ <= 1.0
    proba = multi.predict_proba(X)
    np.testing.assert_allclose(proba, softmax(multi.decision_function(X), axis=1), rtol=1e-12)
    assert multi.score(X, y) > 0.5


@pytest.mark.parametrize("Est, solver", [(DPLinearSVC, "auto"), (DPLogisticRegression, "dpscd")])
def test_one_vs_rest_fits_are_composed_in_one_event(Est, solver, tmp_path):
    from fastdp.privacy.ledger import PrivacyLedger

    X, y = _data(task="multiclass", k=3, n=600)
    ledger = PrivacyLedger(epsilon=10.0, delta=1e-5, path=tmp_path / "budget.json")
    est = Est(epsilon=2.0, delta=1e-5, solver=solver, ledger=ledger, random_state=0).fit(X, y)
    assert est.multi_class_ == "ovr" and est.coef_.shape == (3, 6)
    assert isinstance(est.privacy_event_, SelfComposedEvent) and est.privacy_event_.count == 3
    assert 2.0 * (1 - 1e-3) < est.epsilon_ <= 2.0
    assert len(ledger.entries) == 1 and ledger.spent() == pytest.approx(est.epsilon_, rel=1e-6)
    assert set(est.predict(X)) <= set(range(3))


# ------------------------------------------------------------ the defaults
def test_defaults_depend_on_public_quantities_only():
    """Two datasets with the same n, d and labels set give the same settings."""
    X1, y1 = _data(seed=1)
    X2, y2 = _data(seed=2)
    a = DPLogisticRegression(epsilon=0.7, random_state=0).fit(X1, y1)
    b = DPLogisticRegression(epsilon=0.7, random_state=0).fit(X2 * 100, y2)
    for name in ("solver_", "alpha_", "batch_size_", "epochs_", "learning_rate_", "clip_",
                 "noise_multiplier_", "n_iter_"):
        assert getattr(a, name) == getattr(b, name), name


def test_dpsgd_rule_values():
    """docs/defaults.md: step s = eta * C = min(0.3 eps L / E, eta_max); C = 0.3 for the
    logistic and multinomial losses (eta = s / 0.3), C = 1 for hinge and squared."""
    assert default_alpha(1000) == 1e-4
    rule = dpsgd_defaults(10_000, 1.0, "logistic")
    assert rule == {"batch_size": 256, "epochs": 20.0,
                    "learning_rate": pytest.approx(0.3 * 256 / 20 / 0.3), "clip": 0.3}
    small = dpsgd_defaults(10_000, 0.1, "logistic")
    assert small["epochs"] == 5.0
    assert small["learning_rate"] * small["clip"] == pytest.approx(0.3 * 0.1 * 256 / 5)
    assert dpsgd_defaults(10_000, 2.0, "logistic")["epochs"] == 40.0
    assert dpsgd_defaults(10_000, 8.0, "logistic")["epochs"] == 80.0
    big = dpsgd_defaults(10_000, 100.0, "logistic")
    assert big["learning_rate"] * big["clip"] == pytest.approx(8.0)
    assert dpsgd_defaults(10_000, 1.0, "multinomial")["clip"] == 0.3
    hinge = dpsgd_defaults(10_000, 1.0, "hinge")
    assert hinge["clip"] == 1.0 and hinge["learning_rate"] == 0.3 * 256 / 20
    assert dpsgd_defaults(10_000, 100.0, "squared") == {
        "batch_size": 256, "epochs": 80.0, "learning_rate": 1.0, "clip": 1.0}   # 1/beta
    # epsilon = inf (non-private SGD): no clipping bias, the capped step
    assert dpsgd_defaults(10_000, math.inf, "logistic")["clip"] == 1.0
    assert dpsgd_defaults(100, 1.0, "hinge")["batch_size"] == 25
    assert dpsgd_defaults(10**6, 1.0, "hinge")["batch_size"] == 1000


def test_accuracy_does_not_fall_as_epsilon_grows():
    """Median of 3 seeds on a separable-ish synthetic problem: monotone within noise."""
    X, y = _data(n=3000, d=10, seed=3)
    Xt, yt = X[2000:], y[2000:]
    X, y = X[:2000], y[:2000]
    accs = []
    for eps in (0.5, 2.0, 8.0, np.inf):
        accs.append(np.median([DPLogisticRegression(epsilon=eps, random_state=s).fit(X, y)
                               .score(Xt, yt) for s in range(3)]))
    assert all(b >= a - 0.01 for a, b in zip(accs, accs[1:])), accs


def test_perturbation_alpha_rule():
    from fastdp.defaults import perturbation_alpha

    assert perturbation_alpha(10_000, 100, 1.0, "output") == pytest.approx(5 * 10 / 10_000)
    assert perturbation_alpha(10_000, 100, 100.0, "output") == 1e-3          # the floor
    assert perturbation_alpha(10_000, 100, 1.0, "objective") == pytest.approx(2 * 10 / 10_000)
    assert perturbation_alpha(10_000, 100, np.inf, "objective") == default_alpha(10_000)
    X, y = _data(n=500)
    est = DPLogisticRegression(solver="output", epsilon=1.0, random_state=0).fit(X, y)
    assert est.alpha_ == perturbation_alpha(500, 7, 1.0, "output")  # d counts the intercept


def test_delta_above_one_over_n_warns():
    from fastdp.exceptions import WeakPrivacyWarning

    X, y = _data(n=200)
    with pytest.warns(WeakPrivacyWarning, match="1/n"):
        DPLogisticRegression(epsilon=1.0, delta=0.5, random_state=0).fit(X, y)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", WeakPrivacyWarning)
        DPLogisticRegression(epsilon=1.0, random_state=0).fit(X, y)          # default delta
        DPLogisticRegression(epsilon=np.inf, delta=0.5).fit(X, y)            # not private


def test_impossible_runs_are_refused_before_the_ledger_is_charged(tmp_path):
    from fastdp.privacy.ledger import PrivacyLedger

    X, y = _data(n=200)
    ledger = PrivacyLedger(epsilon=5.0, delta=1e-5, path=tmp_path / "b.json")
    with pytest.raises(ValidationError, match="steps"):
        DPLogisticRegression(epochs=1e12, ledger=ledger).fit(X, y)
    huge = sp.csr_matrix(([1.0, 1.0], ([0, 1], [0, 2**31 - 2])), shape=(2, 2**31 - 1))
    with pytest.raises(ValidationError, match="GiB"):
        DPLogisticRegression(ledger=ledger).fit(huge, [0, 1])
    with pytest.raises(ValidationError, match="lazy_noise"):
        DPLogisticRegression(lazy_noise="yes", ledger=ledger).fit(X, y)
    assert len(ledger.entries) == 0


def test_noise_multiplier_overriding_epsilon_warns():
    X, y = _data(n=200)
    with pytest.warns(UserWarning, match="ignored"):
        est = DPLogisticRegression(epsilon=0.5, noise_multiplier=2.0, random_state=0).fit(X, y)
    assert est.noise_multiplier_ == 2.0 and est.epsilon_ != 0.5


@pytest.mark.parametrize("fmt", ["coo", "csc"])
def test_edited_sparse_indices_are_refused_before_conversion(fmt):
    """In a child process: scipy's conversion of such a matrix writes out of bounds."""
    import subprocess
    import sys

    edit = "X.row[0] = 10**6" if fmt == "coo" else "X.indices[0] = 10**6"
    code = (
        "import numpy as np, scipy.sparse as sp\n"
        "from fastdp.linear_model import DPLogisticRegression\n"
        "from fastdp.exceptions import ValidationError\n"
        f"X = sp.random(50, 5, density=0.5, format='{fmt}', random_state=0)\n"
        f"{edit}\n"
        "try:\n"
        "    DPLogisticRegression().fit(X, np.arange(50) % 2)\n"
        "except ValidationError as exc:\n"
        "    print('refused', exc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and "refused" in done.stdout, done.stderr[-2000:]


def _every_private_solver():
    from fastdp.solvers.registry import ESTIMATOR_SOLVER_NAMES, get_estimator_solver

    out = []
    for name in ESTIMATOR_SOLVER_NAMES:
        if name in ("sgd", "exact"):
            continue
        losses = get_estimator_solver(name).losses
        for Est in ESTIMATORS:
            if Est._loss in losses:
                out.append((Est, name))
    return out


@pytest.mark.parametrize("Est, solver", _every_private_solver(),
                         ids=lambda v: v if isinstance(v, str) else v.__name__)
def test_every_solver_predicts_through_the_row_map(Est, solver):
    """For every registered private solver: the intercept is fitted and prediction on raw
    rows equals the training-time map applied by hand."""
    task = "regression" if Est is DPRidge else "binary"
    X, y = _data(n=400, task=task)
    est = Est(epsilon=4.0, solver=solver, random_state=0).fit(X, y)
    Xb, Xm = _by_hand(X, est.row_map_.bound, True, c=est.intercept_scaling)
    a, c = est.row_map_.scale, est.intercept_scaling
    theta = np.hstack([est.coef_.reshape(-1) / a, np.ravel(est.intercept_) / (a * c)])
    scores = est.predict(X) if Est is DPRidge else est.decision_function(X)
    np.testing.assert_allclose(scores, Xm @ theta, rtol=1e-9, atol=1e-10)
    assert est.epsilon_ <= 4.0 * (1 + 1e-9)


def test_nan_input_gives_a_short_fastdp_message():
    X, y = _data(n=50)
    X[3, 1] = np.nan
    with pytest.raises(ValidationError) as info:
        DPLogisticRegression().fit(X, y)
    message = str(info.value)
    assert "NaN" in message and "HistGradientBoosting" not in message and "\n" not in message
