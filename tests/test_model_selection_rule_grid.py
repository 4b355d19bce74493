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


def test_rule_grid_is_the_rule_its_step_times_3_and_over_3_and_larger_lots():
    # by hand (docs/defaults.md): n = 1000 -> L = min(256, n/4) = 250; eps = 0.5 -> E = 10;
    # nominal H = max(0.3 eps n, 100 min(1, n/d)) = 150 (the small-budget floor of 100 since
    # issue 32, d = 5 + 1 intercept column, does not act; it was 300, H = 300, eta = 25);
    # s = H L / (E n) = 3.75; C = 0.3 -> eta = 12.5
    grid = rule_grid(DPLogisticRegression(), 1000, 5, 0.5)
    assert grid[0] == {}
    rates = [g["solver_options"]["learning_rate"] for g in grid[1:3]]
    np.testing.assert_allclose(rates, [3 * 12.5, 12.5 / 3], rtol=1e-12)
    # issue 32: lots 4 times larger (min(1000, n/2) = 500), epochs round(10 / 4) = 2, at the
    # rule's H: eta = 12.5 * (500 / 250) * (10 / 2) = 125, capped at eta_max / C = 8 / 0.3
    assert grid[3]["batch_size"] == 500 and grid[3]["epochs"] == 2.0
    assert grid[3]["solver_options"]["learning_rate"] == pytest.approx(8.0 / 0.3, rel=1e-12)
    # and the estimator resolves its own default to the same eta
    X, y = _data()
    est = DPLogisticRegression(epsilon=0.5, random_state=0).fit(X, y)
    assert est.learning_rate_ == pytest.approx(12.5, rel=1e-12) and est.clip_ == 0.3
    # squared loss: C = 1, s capped at eta_max = 1/beta = 1
    ridge = rule_grid(DPRidge(), 1000, 5, 8.0)
    assert ridge[1]["solver_options"]["learning_rate"] == pytest.approx(3.0)


def test_default_search_runs_around_the_rule_with_two_expected_candidates():
    X, y = _data()
    # n = 1000: about 200 validation rows, a standard error of at least 3.5 points > 2.5
    with pytest.warns(UserWarning, match="cannot tell its candidates apart"):
        search = DPHyperparameterSearch(DPLogisticRegression(), epsilon=2.0, delta=1e-5,
                                        random_state=0).fit(X, y)
    # E[K] = 2 since the split is accounted in parallel (issue 17; it was 3)
    assert search.repetitions_.mean() == pytest.approx(2.0, rel=1e-6)
    assert search.epsilon_ <= 2.0
    # the three step candidates run the same mechanism: the default fit's event at eps_c;
    # the larger-lot candidate (issue 32) another one
    candidate, larger_lots = search.privacy_event_.events
    assert candidate != larger_lots
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


def test_selection_standard_error_closed_form_and_the_warning_threshold():
    from fastdp.model_selection import SELECTION_ERROR_WARNING, selection_standard_error

    # sqrt(1/(4m) + (sigma/m)^2), written out: m = 400, sigma = 0 -> 1/40 = 0.025
    assert selection_standard_error(400, 0.0) == pytest.approx(0.025, rel=1e-12)
    assert selection_standard_error(1000, 20.0) == pytest.approx(
        np.sqrt(0.25 / 1000 + 0.02 ** 2), rel=1e-12)
    assert selection_standard_error(0, 1.0) == np.inf
    assert SELECTION_ERROR_WARNING == 0.025


def test_no_warning_when_the_validation_part_resolves_the_candidates():
    import warnings

    X, y = _data(n=12000, d=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        search = DPHyperparameterSearch(DPLogisticRegression(), epsilon=4.0, delta=1e-5,
                                        random_state=0).fit(X, y)
    assert search.epsilon_ <= 4.0
