"""Defaults of the accelerated and line-search solvers (docs/defaults.md): the documented
table, what the estimator resolves, and that the resolved clip reaches the mechanism."""

import math

import numpy as np
import pytest

from fastdp.defaults import SOLVER_DEFAULTS, solver_defaults
from fastdp.linear_model import DPLogisticRegression, DPRidge

MOMENTUM = ["dp_heavy_ball", "dp_nesterov", "dp_masg"]
ADAPTIVE = ["dp_blsgd_adaptive", "dp_blsgd_ac"]
FULL_BATCH = ["dp_blgd", "dpagd"]

#: docs/defaults.md, written out again
DOCUMENTED = {"dp_gd_laplace": {"clip": 0.3},
              **{s: {"clip": 0.3, "epochs": 3.0} for s in MOMENTUM},
              **{s: {"clip": 1.0, "epochs": 40.0} for s in ADAPTIVE},
              # full batch, with the step-grid rule (issue 17): 100 nominal iterations
              **{s: {"clip": 1.0, "epochs": 100.0} for s in FULL_BATCH}}
ALIASES = {"heavy_ball": "dp_heavy_ball", "nag": "dp_nesterov", "masg": "dp_masg",
           "dp_agd": "dpagd"}
#: the full-batch solvers' noise-dominated regime (s = n sqrt(rho) / sqrt(d) < 50), which
#: _data() at epsilon = 1 is in (n = 600, d + 1 = 7: s = 32.7)
NOISY = {"dp_blgd": {"clip": 0.3, "epochs": 40.0}, "dpagd": {"clip": 0.3, "epochs": 100.0}}


def _data(n=600, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * 3.0
    return X, (X @ rng.standard_normal(d) > 0).astype(int)


def test_table_matches_the_documentation():
    for name, want in DOCUMENTED.items():
        assert solver_defaults(name, "logistic", 1.0) == want, name
    for alias, name in ALIASES.items():
        assert solver_defaults(alias, "logistic", 0.5) == DOCUMENTED[name], alias
    assert set(SOLVER_DEFAULTS) == set(DOCUMENTED) | set(ALIASES)


@pytest.mark.parametrize("name", ["dpsgd", "dpscd", "dp_blsgd", "output", "exact"])
def test_other_solvers_keep_their_defaults(name):
    assert solver_defaults(name, "logistic", 1.0) == {}


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_squared_loss_and_eps_inf_are_not_covered(name):
    assert solver_defaults(name, "squared", 1.0) == {}
    assert solver_defaults(name, "logistic", math.inf) == {}


@pytest.mark.parametrize("name", ["dp_gd_laplace"] + MOMENTUM + ADAPTIVE + FULL_BATCH)
def test_estimator_resolves_the_rule_and_explicit_settings_win(name):
    X, y = _data()
    kw = {"batch_size": len(y)} if name in ("dpagd", "dp_blgd") else {}
    m = DPLogisticRegression(solver=name, epsilon=1.0, random_state=0, **kw).fit(X, y)
    want = NOISY.get(name, DOCUMENTED[name])
    assert m.clip_ == want["clip"]
    assert m.epochs_ == want.get("epochs", 10)
    own = DPLogisticRegression(solver=name, epsilon=1.0, random_state=0, clip=0.7, epochs=2,
                               **kw).fit(X, y)
    assert own.clip_ == 0.7 and own.epochs_ == 2


def test_ridge_keeps_the_solver_defaults():
    X, y = _data()
    m = DPRidge(solver="dp_heavy_ball", epsilon=1.0, random_state=0).fit(X, y - 0.5)
    assert m.clip_ == 1.0 and m.epochs_ == 10


def test_the_default_clip_sets_the_laplace_scale():
    """Accelerated solvers: the drawn Laplace scale is S1 / (m eps0) with S1 = 2 sqrt(d) C
    (rows of L2 norm <= 1): the default C = 0.3 gives 0.3 times the scale of C = 1."""
    X, y = _data(n=1500, d=8)
    X = X / np.linalg.norm(X, axis=1, keepdims=True)
    common = dict(solver="dp_heavy_ball", epsilon=0.8, alpha=0.01, sampler="fixed",
                  fit_intercept=False, normalize=False, batch_size=300, epochs=4,
                  accountant="pure", random_state=0)
    default = DPLogisticRegression(**common).fit(X, y)
    one = DPLogisticRegression(clip=1.0, **common).fit(X, y)
    assert default.epsilon_ == pytest.approx(one.epsilon_, rel=1e-12)
    np.testing.assert_allclose(default.solver_result_.extra["laplace_scales"],
                               0.3 * np.asarray(one.solver_result_.extra["laplace_scales"]),
                               rtol=1e-12)
