"""The DP-SCD rules of fastdp.defaults (dual_scd_defaults): closed forms, the estimator
resolves them, and each named DP-SCD solver beats the majority class on a real set."""
import math

import numpy as np
import pytest

from fastdp.defaults import SEQ_LAM_N, default_batch_size, default_epochs, dual_scd_defaults
from fastdp.linear_model import DPLogisticRegression, DPRidge


@pytest.mark.parametrize("n, eps", [(1000, 0.1), (8291, 1.0), (24420, 8.0), (200000, 2.0)])
def test_dual_rule_reaches_the_dual_box(n, eps):
    """lam = L / (E n), so lam n / L = 1 / E = C and E C = 1 (the reach bound)."""
    rule = dual_scd_defaults("dpscd", n, eps)
    L, E = default_batch_size(n), float(min(80, max(5, round(20 * eps))))
    assert rule["batch_size"] == L and rule["epochs"] == E
    assert rule["alpha"] == pytest.approx(L / (E * n), rel=1e-15)
    assert rule["clip"] == pytest.approx(rule["alpha"] * n / L, rel=1e-12)
    assert rule["epochs"] * rule["clip"] == pytest.approx(1.0, rel=1e-12)


def test_dual_rule_follows_the_users_lot_and_epochs():
    rule = dual_scd_defaults("dpscd", 5000, 1.0, batch_size=50, epochs=4)
    assert rule["alpha"] == pytest.approx(50 / (4 * 5000)) and rule["clip"] == 0.25


@pytest.mark.parametrize("eps, lam_n", [(1.0, 1000.0), (4.0, 125.0), (0.01, 5000.0),
                                        (400.0, 1.0), (math.inf, 1.0)])
def test_sequential_rule(eps, lam_n):
    """L = 1, C = 1 / E, lam n = clip(1000 eps^-1.5, 1, n) (n = 5000)."""
    rule = dual_scd_defaults("seq_dpscd", 5000, eps)
    assert SEQ_LAM_N == 1000.0
    assert rule["batch_size"] == 1 and rule["clip"] == 1.0 / default_epochs(eps)
    assert rule["alpha"] * 5000 == pytest.approx(lam_n, rel=1e-12)


def _blobs(n=400, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.where(X @ rng.standard_normal(d) + 0.3 > 0, 1, 0)


@pytest.mark.parametrize("solver", ["dpscd", "seq_dpscd"])
def test_estimator_resolves_the_rule_and_explicit_settings_win(solver):
    X, y = _blobs()
    m = DPLogisticRegression(solver=solver, epsilon=1.0, random_state=0).fit(X, y)
    rule = dual_scd_defaults(solver, 400, 1.0)
    assert (m.batch_size_, m.epochs_) == (rule["batch_size"], rule["epochs"])
    assert m.alpha_ == pytest.approx(rule["alpha"]) and m.clip_ == pytest.approx(rule["clip"])
    own = DPLogisticRegression(solver=solver, epsilon=1.0, alpha=0.01, clip=0.5, epochs=2,
                               batch_size=4, random_state=0).fit(X, y)
    assert (own.alpha_, own.clip_, own.epochs_, own.batch_size_) == (0.01, 0.5, 2, 4)


def test_ridge_takes_the_dual_rule():
    X, y = _blobs(n=2000)   # n epsilon above DPRidge's floor rule (a constant below ~205)
    m = DPRidge(solver="dpscd", epsilon=1.0, random_state=0).fit(X, y - 0.5)
    rule = dual_scd_defaults("dpscd", 2000, 1.0)
    assert m.alpha_ == pytest.approx(rule["alpha"]) and m.clip_ == pytest.approx(rule["clip"])


@pytest.fixture(scope="module")
def phishing(data_dir):
    from sklearn.model_selection import train_test_split

    from fastdp.datasets import load_dataset

    X, y = load_dataset("phishing", data_home=data_dir)
    return train_test_split(X, y, test_size=0.25, random_state=0)


@pytest.mark.parametrize("solver, margin", [("dpscd", 0.30), ("seq_dpscd", 0.05)])
def test_named_scd_solvers_beat_the_majority_class(phishing, solver, margin):
    """phishing at epsilon = 1 (majority 0.548 on the test split): the old defaults scored
    the majority rate (0.548); the rules score 0.92 (dual) and 0.64 (sequential)."""
    Xtr, Xte, ytr, yte = phishing
    majority = max(np.mean(yte == c) for c in np.unique(ytr))
    m = DPLogisticRegression(solver=solver, epsilon=1.0, random_state=0).fit(Xtr, ytr)
    assert m.epsilon_ <= 1.0
    assert m.score(Xte, yte) > majority + margin


_NAMED = ["dpsgd", "dpscd", "seq_dpscd", "output", "objective", "dp_gd_laplace", "dp_heavy_ball",
          "dp_nesterov", "dp_masg", "dp_blsgd", "dp_blsgd_adaptive", "dp_blsgd_ac", "dp_blgd",
          "dpagd"]


@pytest.mark.slow
@pytest.mark.parametrize("solver", _NAMED)
def test_every_named_solver_beats_the_majority_class_on_phishing(phishing, solver):
    """docs/defaults.md, "Every named solver under its defaults": at epsilon = 1 every named
    solver's defaults score 0.64 to 0.93 on phishing (majority 0.548)."""
    Xtr, Xte, ytr, yte = phishing
    majority = max(np.mean(yte == c) for c in np.unique(ytr))
    m = DPLogisticRegression(solver=solver, epsilon=1.0, random_state=0).fit(Xtr, ytr)
    assert m.epsilon_ <= 1.0
    assert m.score(Xte, yte) > majority + 0.05
