"""The defaults read only public quantities (n, d, K, epsilon, delta): issue 32.

Two datasets with the same shape and label set but different values must resolve to the
same settings, in the estimator and in the accounted search's candidates; the rule
functions take no data argument at all.
"""

import inspect

import numpy as np
import pytest

from fastdp.defaults import (dpsgd_defaults, min_total_step, multiclass_noise_factor,
                             multiclass_noise_power)
from fastdp.linear_model import DPLogisticRegression
from fastdp.model_selection import rule_grid

SETTINGS = ("solver_", "alpha_", "batch_size_", "epochs_", "learning_rate_", "clip_")


def _data(seed, n, d, K, scale):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * scale + rng.normal(size=d) * 5.0
    y = rng.integers(K, size=n)
    y[:K] = np.arange(K)           # every label present: the public label set is 0..K-1
    return X, y


def test_rule_functions_take_public_quantities_only():
    assert list(inspect.signature(dpsgd_defaults).parameters) == [
        "n_samples", "epsilon", "loss", "n_classes", "n_features"]
    assert list(inspect.signature(min_total_step).parameters) == [
        "n_samples", "n_features", "loss"]
    assert list(inspect.signature(multiclass_noise_factor).parameters) == ["n_classes"]
    assert list(inspect.signature(multiclass_noise_power).parameters) == [
        "n_samples", "n_features"]


@pytest.mark.parametrize("K", [2, 3, 12])
@pytest.mark.parametrize("eps", [0.1, 1.0, 8.0])
def test_same_shape_different_values_same_settings(K, eps):
    n, d = 900, 4
    fits = [DPLogisticRegression(epsilon=eps, random_state=0, epochs=1.0)
            .fit(*_data(seed, n, d, K, scale)) for seed, scale in ((0, 1.0), (1, 300.0))]
    # epochs=1.0 keeps the test fast; the rule still resolves the lot, step and clip
    for name in SETTINGS:
        assert getattr(fits[0], name) == getattr(fits[1], name), name
    want = dpsgd_defaults(n, eps, "multinomial" if K > 2 else "logistic", K, d + 1)
    assert fits[0].batch_size_ == want["batch_size"] and fits[0].clip_ == want["clip"]
    assert fits[0].learning_rate_ == pytest.approx(min(want["learning_rate"], 0.5 * n / 0.1),
                                                   rel=1e-12)


def test_search_candidates_by_hand_from_the_shape():
    """n = 5000, d = 7 (+ intercept), K = 4, eps = 0.7, written out from docs/defaults.md:
    L = min(2 * 256, n/4) = 512, E = round(14) = 14, e = 0.7 / kappa_4 ** (8 / 5000),
    s = 0.3 e 512 / 14 (cap (K/2) 8 = 16), eta = s / 0.3; the larger-lot candidate: lot
    min(4 * 512, n/2) = 2048, epochs round(14/4) = 4, eta * 4 * 14/4 capped at 16 / 0.3."""
    eta = 0.7 / (2.0 * np.sqrt(np.log(4.0))) ** (8 / 5000) * 512 / 14
    grid = rule_grid(DPLogisticRegression(), 5000, 7, 0.7, 4)
    assert grid[0] == {}
    np.testing.assert_allclose([g["solver_options"]["learning_rate"] for g in grid[1:3]],
                               [3 * eta, eta / 3], rtol=1e-12)
    assert grid[3]["batch_size"] == 2048 and grid[3]["epochs"] == 4.0
    assert grid[3]["solver_options"]["learning_rate"] == pytest.approx(16.0 / 0.3, rel=1e-12)
