"""The default search of DPHyperparameterSearch: a grid around the default rule.

docs/model-selection.md: with ``param_grid=None`` and an estimator on its default
rule, the candidates are the rule itself and its DP-SGD step x3 and /3 at the
candidates' budget, with 3 expected candidates; otherwise DEFAULT_PARAM_GRID and 10.
"""

import numpy as np
import pytest

from fastdp.linear_model import DPLogisticRegression, DPRidge
from fastdp.model_selection import (
    DEFAULT_PARAM_GRID, DPHyperparameterSearch, plan_candidate_event, rule_grid,
)
from fastdp.privacy.events import GaussianEvent, ParallelComposedEvent


def _data(n=1000, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(X @ rng.normal(size=d) + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


def test_rule_grid_is_the_rule_and_its_step_times_3_and_over_3():
    # by hand (docs/defaults.md): n = 1000 -> L = min(256, n/4) = 250; eps = 0.5 -> E = 10;
    # nominal H = max(0.3 eps n, 300 min(1, n/d)) = 300 (the small-budget floor, d = 5 + 1
    # intercept column; was 0.3 eps n = 150 before it); s = H L / (E n) = 7.5 (< 8);
    # C = 0.3 -> eta = 25 (was 12.5)
    grid = rule_grid(DPLogisticRegression(), 1000, 5, 0.5)
    assert grid[0] == {}
    rates = [g["solver_options"]["learning_rate"] for g in grid[1:]]
    np.testing.assert_allclose(rates, [3 * 25.0, 25.0 / 3], rtol=1e-12)
    # and the estimator resolves its own default to the same eta
    X, y = _data()
    est = DPLogisticRegression(epsilon=0.5, random_state=0).fit(X, y)
    assert est.learning_rate_ == pytest.approx(25.0, rel=1e-12) and est.clip_ == 0.3
    # squared loss: C = 1, s capped at eta_max = 1/beta = 1 (2/beta from issue 17 to 32)
    ridge = rule_grid(DPRidge(), 1000, 5, 8.0)
    assert ridge[1]["solver_options"]["learning_rate"] == pytest.approx(3.0)


def test_default_search_runs_around_the_rule_with_two_expected_candidates():
    X, y = _data()
    search = DPHyperparameterSearch(DPLogisticRegression(), epsilon=2.0, delta=1e-5,
                                    random_state=0).fit(X, y)
    # E[K] = 2 since the split is accounted in parallel (issue 17; it was 3)
    assert search.repetitions_.mean() == pytest.approx(2.0, rel=1e-6)
    assert search.epsilon_ <= 2.0
    # the three candidates run the same mechanism: the default fit's event at eps_c
    (candidate,) = search.privacy_event_.events
    assert isinstance(candidate, ParallelComposedEvent)   # issue 17: was ComposedEvent
    train, score = candidate.events
    assert isinstance(score, GaussianEvent)
    rng = np.random.default_rng(0)
    n_train = int(np.count_nonzero(rng.random(X.shape[0]) >= search.validation_fraction_))
    default = DPLogisticRegression(epsilon=search.candidate_epsilon_, delta=1e-5)
    assert train == plan_candidate_event(default, n_train, X.shape[1], labels=[-1.0, 1.0])
    assert search.best_params_ in rule_grid(DPLogisticRegression(), n_train, X.shape[1],
                                            search.candidate_epsilon_)


def test_a_non_default_estimator_keeps_the_alpha_epochs_grid():
    search = DPHyperparameterSearch(DPLogisticRegression(solver="dpscd"), epsilon=2.0)
    _, _, reps, grid = search._check()
    assert len(grid) == 8 and {g["alpha"] for g in grid} == set(DEFAULT_PARAM_GRID["alpha"])
    assert reps.mean() == pytest.approx(10.0, rel=1e-6)
    # an explicit grid keeps E[K] = 10 too
    _, _, reps, grid = DPHyperparameterSearch(DPLogisticRegression(), {"alpha": [1e-3]},
                                              epsilon=2.0)._check()
    assert grid == [{"alpha": 1e-3}] and reps.mean() == pytest.approx(10.0, rel=1e-6)
