"""The multiclass DP-SGD rule (docs/defaults.md): values written out by hand from the
documented formula, the binary rule unchanged, and the estimator and the accounted
search resolving it from public quantities only."""

import math

import numpy as np
import pytest

from fastdp.defaults import (default_alpha, dpsgd_defaults, multiclass_noise_factor,
                             multiclass_noise_power)
from fastdp.linear_model import DPLinearSVC, DPLogisticRegression
from fastdp.model_selection import RULE_STEP_FACTORS, rule_grid


def _by_hand(n, eps, K, d=None):
    """docs/defaults.md, the multiclass rule, independently of fastdp.defaults."""
    binary_lot = math.isqrt(n) if n > 65536 else max(1, min(256, n // 4))
    lot = max(1, min(binary_lot * K // 2, n // 4))
    p = 1.0 if d is None else min(1.0, d / n)        # issue 32: the power of kappa_K
    e = eps / (2.0 * math.sqrt(math.log(K))) ** p
    epochs = float(min(80, max(5, round(20.0 * eps))))   # at eps (was at e until issue 17's
    #                                                      follow-up: deliberate rule change)
    step = min(0.3 * e * lot / epochs, 0.5 * K * 8.0)
    return {"batch_size": lot, "epochs": epochs, "learning_rate": step / 0.3, "clip": 0.3}


@pytest.mark.parametrize("n, eps, K", [(12748, 0.1, 20), (12748, 1.0, 20), (12748, 8.0, 20),
                                       (3342, 0.5, 3), (20000, 2.0, 10), (100, 1.0, 4),
                                       (10**6, 30.0, 5)])
@pytest.mark.parametrize("d", [None, 17, 1200, 62062])
def test_multiclass_rule_matches_the_documented_formula(n, eps, K, d):
    rule = dpsgd_defaults(n, eps, "multinomial", K, d)
    want = _by_hand(n, eps, K, d)
    assert rule["batch_size"] == want["batch_size"]
    assert rule["epochs"] == want["epochs"]
    assert rule["clip"] == want["clip"]
    assert rule["learning_rate"] == pytest.approx(want["learning_rate"], rel=1e-12)


def test_news20_values():
    """K = 20, n = 12 748 at eps = 1: kappa = 2 sqrt(ln 20) = 3.4616, lot 2560, 20 epochs.
    d = 62 062 >= n: p = 1, s = 0.3 * 2560 / (20 * 3.4616) = 11.09 (as before issue 32);
    pendigits' shape, n = 7494, d = 17: p = 17 / 7494, s = 0.3 * 1280 / 20 / kappa_10 ** p."""
    assert multiclass_noise_factor(20) == pytest.approx(3.46163, abs=1e-5)
    rule = dpsgd_defaults(12748, 1.0, "multinomial", 20, 62062)
    assert rule["batch_size"] == 2560 and rule["epochs"] == 20.0
    assert rule["learning_rate"] * rule["clip"] == pytest.approx(0.3 * (1 / 3.46163) * 2560 / 20,
                                                                 rel=1e-5)
    assert multiclass_noise_power(12748, 62062) == 1.0
    assert multiclass_noise_power(7494, 17) == pytest.approx(17 / 7494, rel=1e-15)
    assert multiclass_noise_power(7494, None) == 1.0
    rule = dpsgd_defaults(7494, 1.0, "multinomial", 10, 17)
    kappa = 2.0 * math.sqrt(math.log(10.0))
    assert rule["learning_rate"] * rule["clip"] == pytest.approx(
        0.3 * 1280 / 20 / kappa ** (17 / 7494), rel=1e-12)


def test_binary_rule_is_unchanged():
    """n_classes is read for the multinomial loss only; K = 2 is the binary rule."""
    for eps in (0.1, 0.5, 1.0, 2.0, 8.0, math.inf):
        for loss in ("logistic", "hinge", "squared"):
            assert dpsgd_defaults(5000, eps, loss, 20) == dpsgd_defaults(5000, eps, loss)
        assert dpsgd_defaults(5000, eps, "multinomial", 2) == dpsgd_defaults(5000, eps, "logistic")
    # epsilon = inf: the multinomial rule is the non-private limit of the binary one
    assert dpsgd_defaults(5000, math.inf, "multinomial", 20) == \
        dpsgd_defaults(5000, math.inf, "logistic")


def test_noise_factor_needs_three_classes():
    with pytest.raises(ValueError):
        multiclass_noise_factor(2)
    assert multiclass_noise_factor(3) == pytest.approx(2.0 * math.sqrt(math.log(3.0)))


def _three_classes(n=1200, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * 4.0
    W = rng.normal(size=(3, d))
    return X, np.argmax(X @ W.T, axis=1)


def test_multinomial_estimator_resolves_the_multiclass_rule():
    X, y = _three_classes()
    m = DPLogisticRegression(epsilon=1.0, random_state=0).fit(X, y)
    want = _by_hand(X.shape[0], 1.0, 3, X.shape[1] + 1)     # d counts the intercept column
    assert m.batch_size_ == want["batch_size"] == 300      # min(384, n // 4)
    assert m.epochs_ == want["epochs"]
    assert m.clip_ == 0.3
    assert m.learning_rate_ == pytest.approx(min(want["learning_rate"],
                                                 0.5 / default_alpha(X.shape[0])))
    # one-vs-rest hinge fits are binary problems: the binary rule
    s = DPLinearSVC(epsilon=1.0, random_state=0).fit(X, y)
    assert s.batch_size_ == dpsgd_defaults(X.shape[0], 1.0, "hinge")["batch_size"]
    assert s.epochs_ == dpsgd_defaults(X.shape[0], 1.0, "hinge")["epochs"]


def test_multiclass_search_grid_follows_the_multiclass_rule():
    est = DPLogisticRegression()
    n = 4000
    grid = rule_grid(est, n, 6, 1.0, n_classes=5)
    eta = min(dpsgd_defaults(n, 1.0, "multinomial", 5, 7)["learning_rate"],
              0.5 / default_alpha(n))
    for f, params in zip(RULE_STEP_FACTORS, grid):
        if f == 1.0:
            assert params == {}
        else:
            assert params["solver_options"]["learning_rate"] == pytest.approx(f * eta)
    # binary: unchanged
    eta2 = min(dpsgd_defaults(n, 1.0, "logistic")["learning_rate"], 0.5 / default_alpha(n))
    assert rule_grid(est, n, 6, 1.0)[1]["solver_options"]["learning_rate"] == \
        pytest.approx(RULE_STEP_FACTORS[1] * eta2)
