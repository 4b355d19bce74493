"""DP-AGD and DP-BLGD defaults (docs/defaults.md, "The step grids of DP-AGD and DP-BLGD"):
the step grid and objective clip follow the closed forms of the logistic loss's smoothness
bound, the estimator hands them to the mechanism, and the default fit trains (issue 17:
both solvers used to predict a9a's majority class at every epsilon)."""

import math
import os

import numpy as np
import pytest

from fastdp.defaults import line_search_options, logistic_smoothness
from fastdp.linear_model import DPLogisticRegression
from fastdp.privacy.zcdp import bun_steinke_rho

DATA = os.environ.get("FASTDP_DATA", "")


def _closed_form(solver, mu, m=20, a=0.5, b=0.8):
    """The rule written out again: beta = 1/4 + mu (R = 1), G = 1."""
    beta = 0.25 + mu
    out = {"c_obj": math.log(1.0 + math.exp(1.0 / beta))}
    if solver == "dp_blgd":
        out.update(max_it=m, eta0=2.0 * (1.0 - a) / (beta * b ** (m - 1)))
    else:
        out["step_max"] = 1.0 / beta
    return out


@pytest.mark.parametrize("mu", [0.0, 1e-5, 0.01, 0.3])
@pytest.mark.parametrize("solver", ["dpagd", "dp_agd", "dp_blgd"])
def test_grid_is_the_closed_form_of_the_smoothness_bound(solver, mu):
    got = line_search_options(solver, "logistic", mu)
    want = _closed_form(solver, mu)
    assert got.keys() == want.keys()
    for key in want:
        assert got[key] == pytest.approx(want[key], rel=1e-12), key
    if mu == 0.0:   # the documented numbers
        assert got["c_obj"] == pytest.approx(4.01815, abs=1e-5)
        assert got.get("step_max", 4.0) == 4.0
        assert got.get("eta0", 277.56) == pytest.approx(277.56, abs=0.01)


def test_user_armijo_constants_enter_the_rule():
    got = line_search_options("dp_blgd", "logistic", 0.0,
                              {"max_it": 10, "armijo_alpha": 0.3, "beta": 0.5})
    assert got["max_it"] == 10
    assert got["eta0"] == pytest.approx(2 * 0.7 / (0.25 * 0.5 ** 9), rel=1e-12)


@pytest.mark.parametrize("solver,loss", [("dpsgd", "logistic"), ("dp_blsgd_adaptive", "logistic"),
                                         ("dpagd", "squared"), ("dp_blgd", "hinge")])
def test_other_solvers_and_losses_are_not_covered(solver, loss):
    assert line_search_options(solver, loss, 1e-4) == {}


def _logistic(X, y, w, mu):
    z = y * (X @ w)
    f = np.mean(np.logaddexp(0.0, -z)) + 0.5 * mu * w @ w
    g = -(X.T @ (y / (1.0 + np.exp(z)))) / len(y) + mu * w
    return f, g


@pytest.mark.parametrize("mu", [0.0, 1e-3])
def test_smallest_blgd_candidate_satisfies_armijo_and_smoothness_holds(mu):
    """Independent check of the bound the rule rests on: on unit rows, the noise-free
    Armijo condition F(w - eta g) <= F(w) - a eta |g|^2 holds at eta = 2 (1 - a) / beta
    (the grid's smallest candidate) from arbitrary points, and the Hessian's largest
    eigenvalue is <= beta."""
    rng = np.random.default_rng(0)
    n, d = 400, 12
    X = rng.standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = np.where(rng.random(n) < 0.3, 1.0, -1.0)
    beta = logistic_smoothness(mu)
    opts = line_search_options("dp_blgd", "logistic", mu)
    smallest = opts["eta0"] * 0.8 ** (opts["max_it"] - 1)
    assert smallest == pytest.approx(2.0 * 0.5 / beta, rel=1e-12)
    for scale in (0.0, 1.0, 10.0, 50.0):
        w = scale * rng.standard_normal(d)
        f, g = _logistic(X, y, w, mu)
        f_new, _ = _logistic(X, y, w - smallest * g, mu)
        assert f_new <= f - 0.5 * smallest * (g @ g) + 1e-12
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
        H = (X.T * (p * (1 - p))) @ X / n + mu * np.eye(d)
        assert np.linalg.eigvalsh(H).max() <= beta + 1e-12


def _two_blobs(n=800, d=5, seed=0):
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.3).astype(int)
    X = rng.standard_normal((n, d)) + 1.5 * y[:, None]
    return X, y


def test_estimator_hands_the_rule_to_the_mechanism_and_explicit_options_win():
    X, y = _two_blobs()
    m = DPLogisticRegression(solver="dp_blgd", epsilon=1.0, random_state=0).fit(X, y)
    got = m.solver_result_.extra["settings"]
    want = _closed_form("dp_blgd", m.alpha_)
    for key in want:
        assert got[key] == pytest.approx(want[key], rel=1e-12), key
    own = DPLogisticRegression(solver="dp_blgd", epsilon=1.0, random_state=0,
                               solver_options={"eta0": 2.0, "c_obj": 1.0}).fit(X, y)
    assert own.solver_result_.extra["settings"]["eta0"] == 2.0
    assert own.solver_result_.extra["settings"]["c_obj"] == 1.0
    # DP-AGD: the first period's steps (before any shrinking) are on the grid
    # k * step_max / 20, and no step is above step_max
    agd = DPLogisticRegression(solver="dpagd", epsilon=1.0, random_state=0).fit(X, y)
    step_max = _closed_form("dpagd", agd.alpha_)["step_max"]
    etas = np.asarray(agd.solver_result_.extra["etas"])
    assert etas.max() <= step_max * (1 + 1e-12)
    k = etas[:10] / (step_max / 20.0)
    np.testing.assert_allclose(k, np.round(k), atol=1e-9)
    small = DPLogisticRegression(solver="dpagd", epsilon=1.0, random_state=0,
                                 solver_options={"step_max": 0.5}).fit(X, y)
    assert max(small.solver_result_.extra["etas"]) <= 0.5


def test_agd_step_shrinking_is_capped_at_the_initial_step_max():
    """The every-period shrinking ``min(1.1 max(chosen), cap)``: the cap is the initial
    step_max (the DP-AGD code's 2.0 was its initial value), so steps above 2 stay possible."""
    from fastdp.privacy.filters import RunningZcdpBudget
    from fastdp.solvers.line_search.agd import dp_agd_core
    from fastdp.solvers.line_search.releases import prepare_oracle

    import scipy.sparse as sp

    rng = np.random.default_rng(1)          # separable: long steps keep lowering the loss
    y = np.where(rng.random(2000) < 0.5, 1.0, -1.0)
    X = np.c_[y * (1.0 + rng.random(2000)), 0.3 * rng.standard_normal((2000, 2))]
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    oracle = prepare_oracle(sp.csr_matrix(X), y, "logistic")
    common = dict(rho_grad=50.0, eps_nmax=10.0, loss="logistic", mu=0.0, c_grad=1.0,
                  c_obj=50.0, n_candidates=41, gamma=0.1, step_update_period=1,
                  step_update_factor=1.1, init="zeros", init_scale=0.0, max_iter=6,
                  random_state=0, record_history=False, num_threads=1)
    res = dp_agd_core(oracle, budget=RunningZcdpBudget(1e6, 1e-5), step_max=20.0, **common)
    etas = res.extra["etas"]
    assert max(etas[1:]) > 2.0          # the old hard-coded cap would forbid this
    assert all(e <= 20.0 for e in etas)


def _a9a():
    from fastdp.datasets import load_dataset

    X, y = load_dataset("a9a", data_home=DATA)
    Xt, yt = load_dataset("a9a", data_home=DATA, subset="test")
    return X, y, Xt, yt


@pytest.mark.skipif(not os.path.isdir(os.path.join(DATA, "a9a")),
                    reason="a9a not found under FASTDP_DATA")
@pytest.mark.parametrize("solver", ["dpagd", "dp_blgd"])
def test_default_fit_beats_the_majority_class_on_a9a(solver):
    """a9a (official test split) at epsilon = 1, seeds 0, 1, 2: the median test accuracy of
    the default fit is at least 5 points above the majority class (76.4 %).

    Before this rule both solvers predicted the majority class (76.4 % on every seed), so
    the test fails on the old defaults.  False alarm: the benchmark (rev a2 of
    benchmarks/results/solver_defaults.jsonl) measured 84.1-84.6 % on these seeds and
    82.1-85.0 % over 15 runs per solver at epsilon in [0.5, 8]; the median of three would
    have to fall 3 points below the lowest run seen, far outside the seed spread
    (about 0.3 points), and the seeds are fixed, so the result is deterministic.
    """
    X, y, Xt, yt = _a9a()
    majority = 100.0 * max(np.mean(yt == v) for v in np.unique(yt))
    accs = [100.0 * DPLogisticRegression(solver=solver, epsilon=1.0, random_state=s)
            .fit(X, y).score(Xt, yt) for s in range(3)]
    assert np.median(accs) >= majority + 5.0, (accs, majority)


def test_backtracking_constants_of_the_rule_are_the_solver_defaults():
    from fastdp.defaults import _ARMIJO
    from fastdp.solvers.line_search.settings import BlsgdSettings

    assert _ARMIJO == {"armijo_alpha": BlsgdSettings.alpha, "beta": BlsgdSettings.beta}


@pytest.mark.parametrize("bad", [{"max_it": 0}, {"beta": 1.5}, {"armijo_alpha": "x"},
                                 {"max_it": 2.5}])
def test_invalid_user_constants_are_left_to_the_solver_validation(bad):
    from fastdp.exceptions import ValidationError

    assert "eta0" not in line_search_options("dp_blgd", "logistic", 0.0, bad)
    X, y = _two_blobs(n=200)
    with pytest.raises(ValidationError):
        DPLogisticRegression(solver="dp_blgd", epsilon=1.0, solver_options=bad).fit(X, y)


# --- the noise-dominated regime (docs/defaults.md, "DP-AGD and DP-BLGD at small epsilon") ---

def _noise_index(n, d, eps, delta):
    """s = n sqrt(rho) / sqrt(d) with rho solving rho + 2 sqrt(rho log(1/delta)) = eps,
    written out: sqrt(rho) = sqrt(log(1/delta) + eps) - sqrt(log(1/delta))."""
    L = math.log(1.0 / delta)
    return n * (math.sqrt(L + eps) - math.sqrt(L)) / math.sqrt(d)


@pytest.mark.parametrize("n,d,eps,delta,want", [
    (8844, 69, 0.1, 1e-5, 15.7),       # phishing (train split, + intercept column)
    (6499, 113, 0.1, 1e-5, 9.0),       # mushrooms
    (32561, 124, 0.1, 1e-5, 43.0),     # a9a
    (39799, 301, 0.1, 1e-5, 33.7),     # w8a (80 % split)
    (6499, 113, 0.5, 1e-5, 44.6),      # mushrooms at epsilon = 0.5
])
def test_noise_index_is_the_closed_form(n, d, eps, delta, want):
    from fastdp.defaults import full_batch_noise_index

    got = full_batch_noise_index(n, d, bun_steinke_rho(eps, delta))
    assert got == pytest.approx(_noise_index(n, d, eps, delta), rel=1e-10)
    # the rho both solvers spend (the privacy layer's conversion)
    assert got == pytest.approx(n * math.sqrt(bun_steinke_rho(eps, delta)) / math.sqrt(d),
                                rel=1e-9)
    assert got == pytest.approx(want, abs=0.05)     # the numbers quoted in docs/defaults.md


@pytest.mark.parametrize("solver,noisy", [("dpagd", {"clip": 0.3, "epochs": 100.0}),
                                          ("dp_agd", {"clip": 0.3, "epochs": 100.0}),
                                          ("dp_blgd", {"clip": 0.3, "epochs": 40.0})])
def test_regime_switches_at_the_threshold(solver, noisy):
    from fastdp.defaults import NOISE_INDEX_THRESHOLD, solver_defaults

    assert NOISE_INDEX_THRESHOLD == 50.0
    d, delta = 69, 1e-5
    # the n at which s = 50 for epsilon = 0.1, from the closed form
    n_star = 50.0 / _noise_index(1, d, 0.1, delta)
    rho = bun_steinke_rho(0.1, delta)
    below = solver_defaults(solver, "logistic", 0.1, int(n_star) - 1, d, rho)
    above = solver_defaults(solver, "logistic", 0.1, int(n_star) + 1, d, rho)
    assert below == noisy
    assert above == {"clip": 1.0, "epochs": 100.0}
    # without n, d and delta (or epsilon = inf, or another loss) the regime does not apply
    assert solver_defaults(solver, "logistic", 0.1) == {"clip": 1.0, "epochs": 100.0}
    assert solver_defaults(solver, "logistic", math.inf, 100, d, rho) == {}
    assert solver_defaults(solver, "squared", 0.1, 100, d, rho) == {}


@pytest.mark.parametrize("solver", ["dpsgd", "dp_blsgd_adaptive", "dp_heavy_ball", "dp_blsgd"])
def test_regime_is_for_the_full_batch_line_searches_only(solver):
    from fastdp.defaults import solver_defaults

    assert solver_defaults(solver, "logistic", 0.1, 100, 50, bun_steinke_rho(0.1, 1e-5)) == \
        solver_defaults(solver, "logistic", 0.1)


def test_estimator_and_engine_resolve_the_regime_and_explicit_settings_win():
    """A 400-row fit at epsilon = 0.1 (s = 400 sqrt(rho) / sqrt(6) = 2.4) takes the regime,
    on one machine and on the data-parallel engine (same resolution function);
    an explicit clip or epochs wins; at epsilon = 8 (s = 167) the rule is as before."""
    from fastdp.distributed.data_parallel import LocalWorkers

    X, y = _two_blobs(n=400)
    for solver, epochs in (("dp_blgd", 40.0), ("dpagd", 100.0)):
        m = DPLogisticRegression(solver=solver, epsilon=0.1, random_state=0).fit(X, y)
        assert (m.clip_, m.epochs_) == (0.3, epochs)
        e = DPLogisticRegression(solver=solver, epsilon=0.1, random_state=0,
                                 engine=LocalWorkers(1)).fit(X, y)
        assert (e.clip_, e.epochs_) == (0.3, epochs)
        own = DPLogisticRegression(solver=solver, epsilon=0.1, random_state=0, clip=1.0,
                                   epochs=7).fit(X, y)
        assert (own.clip_, own.epochs_) == (1.0, 7)
        big = DPLogisticRegression(solver=solver, epsilon=8.0, random_state=0).fit(X, y)
        assert (big.clip_, big.epochs_) == (1.0, 100.0)


def _phishing_split():
    """phishing with the fixed 80/20 split of benchmarks/derive_highd_defaults.py."""
    from fastdp.datasets import load_dataset

    X, y = load_dataset("phishing", data_home=DATA)
    perm = np.random.default_rng(0).permutation(X.shape[0])
    cut = int(round(0.8 * X.shape[0]))
    tr, te = np.sort(perm[:cut]), np.sort(perm[cut:])
    return X[tr], np.asarray(y)[tr], X[te], np.asarray(y)[te]


@pytest.mark.skipif(not os.path.isdir(os.path.join(DATA, "phishing")),
                    reason="phishing not found under FASTDP_DATA")
@pytest.mark.parametrize("solver,floor", [("dpagd", 90.0), ("dp_blgd", 89.0)])
def test_regime_beats_the_old_rule_on_phishing_at_small_epsilon(solver, floor):
    """phishing at epsilon = 0.1 (s = 15.7 < 50), seeds 0-4: the median test accuracy of
    the default fit is >= ``floor``; the old rule (clip 1, 100 epochs, passed explicitly)
    is below it.

    Measured (benchmarks/derive_line_search_small_eps.py, rev s1, seeds 0-4): DP-AGD
    old 88.3 / new 91.4, DP-BLGD old 87.7 / new 90.0, so each side clears the floor by
    >= 1.0 point; over seeds 0-9 the medians are 88.1 / 90.9 and 86.4 / 89.9.  The seeds
    are fixed and the fits deterministic, so the outcome does not vary between runs.
    """
    Xtr, ytr, Xte, yte = _phishing_split()

    def median(**kw):
        return np.median([100.0 * DPLogisticRegression(solver=solver, epsilon=0.1,
                                                       random_state=s, **kw)
                          .fit(Xtr, ytr).score(Xte, yte) for s in range(5)])

    new, old = median(), median(clip=1.0, epochs=100)
    assert new >= floor > old, (new, old)
