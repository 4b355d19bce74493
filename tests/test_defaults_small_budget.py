"""The small-budget floor of the DP-SGD rule: H = s T >= 100 min(1, n/d) (issue 17; the
constant was 300 until issue 32 chose 100 leave-one-dataset-out).

Closed forms of :func:`fastdp.defaults.min_total_step` and of the rule with the
floor, checked against the formula written out again here; that the floor
only raises the step and leaves every cell with ``0.3 e n >= H_min``
unchanged; that the estimator and the accounted search resolve the same
step; and a utility check on 240 rows at epsilon = 1, where issue 32's floor of
100 beats the former 300 (see docs/defaults.md, "The small-budget floor" and
"Leave-one-dataset-out protocol"; the former check on mushrooms at epsilon = 0.1,
where the floor of 300 acted, no longer applies: 0.3 eps n = 195 > 100 there).
"""

import math

import numpy as np
import pytest

from fastdp.defaults import (MAX_LEARNING_RATE, MIN_TOTAL_STEP, default_alpha, dpsgd_defaults,
                             min_total_step, multiclass_noise_factor)
from fastdp.linear_model import DPLinearSVC, DPLogisticRegression, DPRidge
from fastdp.model_selection import RULE_STEP_FACTORS, rule_grid


def _by_hand(n, eps, d, K=2):
    """The rule written out from docs/defaults.md (binary, or class-pair for K >= 3)."""
    L = min(256, n // 4) if n <= 65536 else math.isqrt(n)
    cap = 8.0
    if K >= 3:
        L = min(L * K // 2, n // 4)
        E = min(80, max(5, round(20 * eps)))          # the epochs at eps itself
        eps = eps / (2.0 * math.sqrt(math.log(K))) ** min(1.0, d / n)   # issue 32: p = d/n
        cap = 4.0 * K
    else:
        E = min(80, max(5, round(20 * eps)))
    floor = 100.0 * min(1.0, n / d) if K == 2 else 0.0  # binary logistic loss only
    H = max(0.3 * eps * n, floor)                       # nominal total step s E n / L
    s = min(H * L / (E * n), cap)
    return {"batch_size": L, "epochs": float(E), "learning_rate": s / 0.3, "clip": 0.3}


def test_min_total_step_closed_form():
    assert MIN_TOTAL_STEP == 100.0
    assert min_total_step(6499, 113, "logistic") == 100.0
    assert min_total_step(2000, 62062, "logistic") == pytest.approx(100.0 * 2000 / 62062,
                                                                     rel=1e-15)
    assert min_total_step(5000, 5000, "logistic") == 100.0
    for loss in ("hinge", "squared", "multinomial"):
        assert min_total_step(6499, 113, loss) == 0.0
    assert min_total_step(6499, None, "logistic") == 0.0


@pytest.mark.parametrize("n, d", [(6499, 113), (3342, 11), (4000, 106), (2000, 62062),
                                  (12748, 62062), (40000, 301), (10**5, 50)])
@pytest.mark.parametrize("eps", [0.01, 0.05, 0.1, 0.3, 0.5, 1.0, 8.0])
def test_binary_rule_with_the_floor_matches_the_formula(n, d, eps):
    got = dpsgd_defaults(n, eps, "logistic", 2, d)
    want = _by_hand(n, eps, d)
    assert got["batch_size"] == want["batch_size"]
    assert got["epochs"] == want["epochs"]
    assert got["clip"] == want["clip"]
    assert got["learning_rate"] == pytest.approx(want["learning_rate"], rel=1e-12)


@pytest.mark.parametrize("n, d, K", [(3342, 8, 3), (20000, 101, 10), (20000, 101, 4),
                                     (12748, 62062, 20)])
@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, 8.0])
def test_multiclass_rule_with_the_floor_matches_the_formula(n, d, K, eps):
    got = dpsgd_defaults(n, eps, "multinomial", K, d)
    want = _by_hand(n, eps, d, K)
    assert (got["batch_size"], got["epochs"]) == (want["batch_size"], want["epochs"])
    assert got["learning_rate"] == pytest.approx(want["learning_rate"], rel=1e-12)
    assert multiclass_noise_factor(K) == pytest.approx(2.0 * math.sqrt(math.log(K)))


def test_floor_only_raises_the_step_and_keeps_large_budgets():
    for n in (500, 2000, 6499, 30000, 200000):
        for d in (5, 113, 3000, 62062):
            for eps in (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 8.0):
                for loss, K in (("logistic", 2), ("multinomial", 5)):
                    old = dpsgd_defaults(n, eps, loss, K)
                    new = dpsgd_defaults(n, eps, loss, K, d)
                    assert new["learning_rate"] >= old["learning_rate"]
                    assert {k: new[k] for k in ("batch_size", "epochs", "clip")} == \
                        {k: old[k] for k in ("batch_size", "epochs", "clip")}
                    if K == 2 and 0.3 * eps * n >= 100.0 * min(1.0, n / d):
                        assert new == old    # H of the rule without the floor >= H_min
                    # multiclass: no floor; d enters through kappa_K ** min(1, d/n) (issue 32),
                    # which only raises the step (p <= 1 without d is 1)
                    assert new["learning_rate"] * new["clip"] <= \
                        MAX_LEARNING_RATE[loss] * (K / 2 if K > 2 else 1) + 1e-12


def test_other_losses_and_eps_inf_are_unchanged():
    for loss in ("hinge", "squared"):
        for eps in (0.1, 1.0):
            assert dpsgd_defaults(6499, eps, loss, 2, 113) == dpsgd_defaults(6499, eps, loss)
    assert dpsgd_defaults(6499, math.inf, "logistic", 2, 113) == \
        dpsgd_defaults(6499, math.inf, "logistic")


def test_mushrooms_shaped_values():
    # n = 6499 rows, 112 features + the intercept column, eps = 0.1:
    # L = 256, E = 5: s = max(0.3 * 0.1 * 6499, 100) * 256 / (5 * 6499) = 1.536 (0.3 eps n =
    # 195 is above the floor of 100 since issue 32; with 300 it was 2.3634); eps = 0.03:
    # 0.3 eps n = 58.5 < 100, s = 100 * 256 / (5 * 6499) = 0.7878
    rule = dpsgd_defaults(6499, 0.1, "logistic", 2, 113)
    assert (rule["batch_size"], rule["epochs"]) == (256, 5.0)
    assert rule["learning_rate"] == pytest.approx(1.536 / 0.3, rel=1e-12)
    assert dpsgd_defaults(6499, 0.03, "logistic", 2, 113)["learning_rate"] == \
        pytest.approx(100.0 * 256 / (5 * 6499) / 0.3, rel=1e-12)
    assert dpsgd_defaults(6499, 0.1, "logistic")["learning_rate"] == \
        pytest.approx(1.536 / 0.3, rel=1e-12)


def _small_problem(n=1200, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.where(X @ rng.standard_normal(d) > 0, 1.0, -1.0)
    return X, y


def test_estimators_resolve_the_floor_with_d_counting_the_intercept():
    X, y = _small_problem()
    n, d = X.shape
    for fit_intercept in (True, False):
        m = DPLogisticRegression(epsilon=0.1, fit_intercept=fit_intercept,
                                 random_state=0).fit(X, y)
        want = dpsgd_defaults(n, 0.1, "logistic", 2, d + int(fit_intercept))
        assert m.learning_rate_ == pytest.approx(min(want["learning_rate"],
                                                     0.5 / default_alpha(n)), rel=1e-12)
    # DPLinearSVC (hinge) and DPRidge (squared) keep the rule without the floor
    s = DPLinearSVC(epsilon=0.1, random_state=0).fit(X, y)
    assert s.learning_rate_ == pytest.approx(dpsgd_defaults(n, 0.1, "hinge")["learning_rate"])
    # (DPRidge at n epsilon = 120 falls under its own floor, a private constant since
    # issue 32: checked at n = 3600, n epsilon = 360)
    Xr = np.vstack([X, X + 0.1, X - 0.1])
    r = DPRidge(epsilon=0.1, random_state=0).fit(Xr, Xr @ np.ones(d))
    assert r.learning_rate_ == pytest.approx(dpsgd_defaults(3 * n, 0.1, "squared")["learning_rate"])


def test_search_grid_steps_are_the_estimators_times_the_factors():
    X, y = _small_problem()
    n, d = X.shape
    est = DPLogisticRegression()
    m = DPLogisticRegression(epsilon=0.1, random_state=0).fit(X, y)
    grid = rule_grid(est, n, d, 0.1)
    assert grid[RULE_STEP_FACTORS.index(1.0)] == {}
    for f, params in zip(RULE_STEP_FACTORS, grid):
        if f != 1.0:
            assert params["solver_options"]["learning_rate"] == \
                pytest.approx(f * m.learning_rate_, rel=1e-12)


def _few_rows(seed=12345, d=10, n_train=240, n_test=20000):
    """A 240-row logistic problem (benchmarks/defaults_corpus.py's ``syn_n300`` law), with a
    20,000-row test set so that the test's sampling error is small (0.3 points)."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)

    def draw(n):
        X = rng.normal(size=(n, d))
        return X, np.where(X @ w + rng.logistic(size=n) > 0, 1.0, -1.0)

    return draw(n_train) + draw(n_test)


def test_floor_of_100_beats_300_on_a_few_hundred_rows():
    """Median test accuracy of seeds 0-6 at eps = 1 on 240 rows (issue 32).

    The floor 300 (issue 17's) made H = 300 where 0.3 eps n = 72: measured 78.1 %; the
    floor 100 (chosen leave-one-dataset-out on the corpus, docs/defaults.md) 80.6 %.
    The test asks for at least 79.5 % and a gain of at least 1.2 points (half the
    measured gain): the old floor fails the first, the new one passes both.
    """
    Xtr, ytr, Xte, yte = _few_rows()
    n, d = Xtr.shape
    L, E = min(256, n // 4), 20.0
    old_step = min(max(0.3 * n, 300.0 * min(1.0, n / (d + 1))) * L / (E * n), 8.0)
    new_acc, old_acc = [], []
    for seed in range(7):
        m = DPLogisticRegression(epsilon=1.0, random_state=seed).fit(Xtr, ytr)
        o = DPLogisticRegression(epsilon=1.0, random_state=seed,
                                 solver_options={"learning_rate": old_step / 0.3}).fit(Xtr, ytr)
        assert m.learning_rate_ == pytest.approx(100.0 * L / (E * n) / 0.3, rel=1e-12)
        assert m.epsilon_ == o.epsilon_
        new_acc.append(100.0 * m.score(Xte, yte))
        old_acc.append(100.0 * o.score(Xte, yte))
    new_med, old_med = float(np.median(new_acc)), float(np.median(old_acc))
    assert old_med < 79.5
    assert new_med >= 79.5
    assert new_med - old_med >= 1.2
