"""Tests of the DP-SCD solvers (spec 000 section 7) against closed forms, scikit-learn and laws.

Statistical tests state their false-alarm rates and use fixed seeds.
"""
import math

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression

from fastdp._kernels import _scd
from fastdp.exceptions import ValidationError
from fastdp.losses import dual_objective, duality_gap, primal_objective
from fastdp.privacy import events
from fastdp.sampling import FixedSizeSampler, PoissonSampler
from fastdp.losses import get_loss
from fastdp.solvers.scd import (
    _primal_step,
    dual_dpscd,
    dual_sensitivity,
    primal_dpscd,
    primal_sensitivity,
    scd,
    seq_dpscd,
    seq_sensitivity,
)


def make_problem(n=400, m=10, seed=0, task="ridge", label_noise=0.3):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, m))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    w = rng.standard_normal(m)
    if task == "ridge":
        y = X @ w + 0.1 * rng.standard_normal(n)
    else:
        y = np.where(X @ w + label_noise * rng.standard_normal(n) > 0, 1.0, -1.0)
    return X, y


def ridge_optimum(X, y, lam):
    n, m = X.shape
    return np.linalg.solve(X.T @ X + lam * n * np.eye(m), X.T @ y)


# ----------------------------------------------------------------------------
# item 3: SDCA limit (sigma = 0, L = 1, no scaling)
# ----------------------------------------------------------------------------

def test_sdca_ridge_reaches_closed_form_and_zero_gap():
    X, y = make_problem()
    lam = 1e-2
    res = scd(X, y, loss="ridge", lam=lam, epochs=30, random_state=0, record_history=True)
    assert np.linalg.norm(res.coef - ridge_optimum(X, y, lam)) <= 1e-6
    assert res.history[-1]["duality_gap"] <= 1e-10
    assert res.n_iter == 30 * 400 and res.event == events.NonPrivateEvent()
    assert res.diagnostics["n_noise_draws"] == 0 and res.noise_std == 0.0


def test_sdca_logistic_matches_sklearn_optimum():
    X, y = make_problem(task="binary")
    lam = 1e-2
    n = X.shape[0]
    res = scd(X, y, loss="logistic", lam=lam, epochs=100, random_state=1)
    ref = LogisticRegression(C=1 / (lam * n), fit_intercept=False, tol=1e-12, max_iter=10000).fit(X, y)
    p_ref = primal_objective(ref.coef_.ravel(), X, y, "logistic", lam)
    p_ours = primal_objective(res.coef, X, y, "logistic", lam)
    assert abs(p_ours - p_ref) <= 1e-8
    assert duality_gap(res.alpha, X, y, "logistic", lam) <= 1e-8


def test_sdca_hinge_gap():
    X, y = make_problem(task="binary", label_noise=0.0)  # labels from a linear model
    lam = 1e-2  # lam N = 4
    res0 = scd(X, y, loss="hinge", lam=lam, epochs=200, box_eps=0.0, random_state=2)
    assert duality_gap(res0.alpha, X, y, "hinge", lam) <= 1e-8
    res1 = scd(X, y, loss="hinge", lam=lam, epochs=200, box_eps=1e-4, random_state=2)
    gap1 = duality_gap(res1.alpha, X, y, "hinge", lam)
    assert 1e-6 <= gap1 <= 1e-4  # the box floor of the reference implementation's b = 1e-4


# ----------------------------------------------------------------------------
# item 4: mini-batch limit (sigma = 0, L > 1)
# ----------------------------------------------------------------------------

def _stepwise(X, y, loss, lam, L, box_eps, steps, seed, clip=np.inf):
    """Run Algorithm 1 without noise one step per kernel call; return F* per step and max |v - X alpha|."""
    Xc = sp.csr_matrix(X)
    n, m = X.shape
    alpha, v = np.zeros(n), np.zeros(m)
    sq = _scd.row_squared_norms(Xc.data, Xc.indptr)
    code = {"ridge": 0, "logistic": 1, "hinge": 2}[loss]
    ptr, idx = FixedSizeSampler(L).stream(n, np.random.default_rng(seed)).take(steps)
    values, worst = [dual_objective(alpha, X, y, loss, lam)], 0.0
    for t in range(steps):
        _scd.run_dual_scd(Xc.data, Xc.indices, Xc.indptr, y, sq, alpha, v, ptr[t:t + 2] - ptr[t],
                          idx[ptr[t]:ptr[t + 1]], np.zeros(L), np.zeros(m, np.int32), code,
                          lam * n, float(L), clip, box_eps, False, 0.0, 0.0, True, None, 1, 64)
        values.append(dual_objective(alpha, X, y, loss, lam))
        worst = max(worst, np.abs(v - X.T @ alpha).max())
    return np.array(values), worst, alpha, v


@pytest.mark.parametrize("L", [2, 10, 100])
@pytest.mark.parametrize("loss,box_eps", [("ridge", 1e-4), ("hinge", 0.0)])
def test_minibatch_dual_is_monotone_and_consistent(loss, box_eps, L):
    X, y = make_problem(n=200, task="ridge" if loss == "ridge" else "binary", seed=3)
    values, worst, _, _ = _stepwise(X, y, loss, 1e-2, L, box_eps, steps=min(300, 20 * 200 // L), seed=4)
    assert np.all(np.diff(values) <= 1e-12 * np.maximum(1, np.abs(values[:-1])))
    assert worst <= 1e-10


@pytest.mark.parametrize("L", [2, 10, 100])
@pytest.mark.parametrize("loss", ["ridge", "logistic", "hinge"])
def test_minibatch_converges_to_the_same_optimum(loss, L):
    task = "ridge" if loss == "ridge" else "binary"
    X, y = make_problem(n=200, task=task, seed=5)
    lam = 1e-1
    ref = scd(X, y, loss=loss, lam=lam, epochs=100, random_state=0)
    res = scd(X, y, loss=loss, lam=lam, epochs=60 * (1 + L // 10), batch_size=L, random_state=0,
              sampler="poisson")
    p_ref = primal_objective(ref.coef, X, y, loss, lam)
    assert primal_objective(res.coef, X, y, loss, lam) - p_ref <= 1e-4 * max(1.0, abs(p_ref))
    assert np.abs(res.v - X.T @ res.alpha).max() <= 1e-10


# ----------------------------------------------------------------------------
# item 5: scaling; item 13: privacy off; item 12: determinism; item 11: bookkeeping
# ----------------------------------------------------------------------------

def test_large_clip_equals_no_clip_exactly():
    X, y = make_problem(task="binary")
    a = scd(X, y, loss="logistic", lam=1e-2, epochs=3, batch_size=5, random_state=0)
    b = scd(X, y, loss="logistic", lam=1e-2, epochs=3, batch_size=5, random_state=0, clip=1e6)
    assert np.array_equal(a.coef, b.coef) and np.array_equal(a.alpha, b.alpha)


def test_zero_noise_multiplier_is_non_private_and_draws_nothing():
    X, y = make_problem()
    res = dual_dpscd(X, y, loss="ridge", lam=1e-2, epochs=2, batch_size=10, clip=0.1,
                     noise_multiplier=0.0, random_state=0)
    assert res.event == events.NonPrivateEvent() and res.diagnostics["n_noise_draws"] == 0
    assert not res.private and np.abs(res.v - X.T @ res.alpha).max() <= 1e-10


@pytest.mark.parametrize("solver", ["dual", "seq"])
def test_same_seed_same_bits_and_thread_independence(solver):
    X, y = make_problem(n=600, m=30, task="binary")
    kw = dict(loss="hinge", lam=1e-3, epochs=2, batch_size=100, clip=0.2, noise_multiplier=1.5)
    fn = dual_dpscd if solver == "dual" else seq_dpscd
    a = fn(X, y, random_state=7, num_threads=1, **kw)
    b = fn(X, y, random_state=7, num_threads=2, **kw)
    c = fn(X, y, random_state=8, **kw)
    assert np.array_equal(a.coef, b.coef) and np.array_equal(a.alpha, b.alpha)
    assert not np.array_equal(a.coef, c.coef)


def test_bookkeeping_T_q_and_event():
    X, y = make_problem(n=400)
    res = dual_dpscd(X, y, loss="ridge", lam=1e-2, epochs=2.5, batch_size=30, clip=0.1,
                     noise_multiplier=2.0, random_state=0)
    T = math.floor(2.5 * 400 / 30)
    assert res.n_iter == T and res.sample_rate == 30 / 400 and res.batch_size == 30
    assert res.event == events.SelfComposedEvent(
        events.PoissonSampledEvent(30 / 400, events.GaussianEvent(2.0)), T)
    assert res.noise_std == pytest.approx(2.0 * 0.1, rel=1e-15)  # only v released: S = C
    fixed = dual_dpscd(X, y, loss="ridge", lam=1e-2, epochs=1, batch_size=30, clip=0.1,
                       noise_multiplier=2.0, sampler="fixed", random_state=0)
    assert fixed.event == events.SelfComposedEvent(
        events.FixedSizeSampledEvent(400, 30, events.GaussianEvent(2.0)), 13)
    assert fixed.adjacency == "replace_one"
    shuffled = seq_dpscd(X, y, loss="ridge", lam=1e-2, epochs=1, batch_size=30, clip=0.1,
                         noise_multiplier=2.0, random_state=0)
    assert shuffled.event == events.ShuffledEvent(400, 30, events.GaussianEvent(2.0), 1)
    assert shuffled.noise_std == pytest.approx(2.0 * 2 * 0.1 * math.sqrt(30 * 31), rel=1e-15)
    repo = seq_dpscd(X, y, loss="ridge", lam=1e-2, epochs=1, batch_size=30, clip=0.1,
                     noise_multiplier=2.0, random_state=0, seq_sensitivity="repo")
    assert repo.noise_std == pytest.approx(2.0 * 0.1 * math.sqrt(4 * 900 - 2), rel=1e-15)


def test_sensitivity_formulas():
    assert dual_sensitivity(0.5) == 0.5  # only v is released
    assert dual_sensitivity(0.5, "replace_one") == 1.0
    assert dual_sensitivity(0.5, released="alpha_and_v") == pytest.approx(math.sqrt(2) * 0.5)
    assert dual_sensitivity(0.5, "replace_one", "alpha_and_v") == pytest.approx(
        2 * math.sqrt(2) * 0.5)
    assert seq_sensitivity(1.0, 1, "repo") == pytest.approx(math.sqrt(2))
    assert seq_sensitivity(1.0, 3, "paper") == pytest.approx(2 * math.sqrt(12))


def test_history_is_per_epoch_and_flushed():
    X, y = make_problem()
    res = dual_dpscd(X, y, loss="ridge", lam=1e-2, epochs=3, batch_size=20, clip=0.1,
                     noise_multiplier=1.0, random_state=0, record_history=True)
    assert [h["epoch"] for h in res.history] == [1, 2, 3]
    assert res.history[-1]["n_iter"] == res.n_iter
    last = res.history[-1]
    assert last["primal_objective"] == pytest.approx(
        primal_objective(res.coef, X, y, "ridge", 1e-2), rel=1e-12)
    seen = []
    dual_dpscd(X, y, loss="ridge", lam=1e-2, epochs=3, batch_size=20, clip=0.1,
               noise_multiplier=1.0, random_state=0, callback=lambda s: seen.append(s["coef"].copy()))
    assert len(seen) == 3 and np.array_equal(seen[-1], res.coef)


# ----------------------------------------------------------------------------
# item 7: noise calibration through the solver; item 8: consistency in expectation
# ----------------------------------------------------------------------------

def test_solver_noise_std_one_step():
    """One step from alpha = v = 0 (T = 1): noisy minus noise-free result is the noise.

    Both runs see the same batch (separate sampling stream).  Empirical second
    moment within 5 sqrt(2/k) of tau^2 (false alarm < 1e-6).
    """
    rng = np.random.default_rng(0)
    n, m = 200, 5000
    X = sp.random(n, m, density=0.01, random_state=rng, format="csr")
    X = sp.csr_matrix(X.multiply(1 / np.maximum(np.sqrt(X.multiply(X).sum(1)), 1e-12)))
    y = rng.standard_normal(n)
    kw = dict(loss="ridge", lam=1e-2, epochs=40 / n, batch_size=40, clip=0.3, random_state=3,
              sampler="fixed")
    noisy = dual_dpscd(X, y, noise_multiplier=1.7, released="alpha_and_v", **kw)
    clean = dual_dpscd(X, y, noise_multiplier=0.0, **kw)
    assert noisy.n_iter == 1
    tau = 1.7 * math.sqrt(2) * 0.3
    eta_v = noisy.v - clean.v
    eta_a = noisy.alpha - clean.alpha
    touched = eta_a != 0
    assert touched.sum() == 40
    for eta in (eta_v, eta_a[touched]):
        assert abs(np.mean(eta**2) / tau**2 - 1) < 5 * math.sqrt(2 / eta.size)


def test_consistency_in_expectation():
    """E[v_T - X alpha_T] = 0 and E||v_T - X alpha_T||^2 = tau^2 T (M + L) (Remark 1).

    2000 runs; means within 5 standard errors, second moment within 5%
    (about 7 standard errors here; false alarm < 1e-6).
    """
    X, y = make_problem(n=50, m=20, seed=9)
    n, m = X.shape
    L, C, sigma, epochs = 5, 0.2, 0.8, 1
    T = n * epochs // L
    tau2 = 2 * (sigma * C) ** 2
    diffs = []
    for seed in range(2000):
        res = dual_dpscd(X, y, loss="ridge", lam=0.1, epochs=epochs, batch_size=L, clip=C,
                         noise_multiplier=sigma, random_state=seed, sampler="fixed",
                         released="alpha_and_v")
        diffs.append(res.v - X.T @ res.alpha)
    diffs = np.array(diffs)
    se = diffs.std(axis=0) / math.sqrt(len(diffs))
    assert np.all(np.abs(diffs.mean(axis=0)) < 5 * se)
    second = np.mean(np.sum(diffs**2, axis=1))
    assert second == pytest.approx(tau2 * T * (m + L), rel=0.05)


# ----------------------------------------------------------------------------
# item 15: convergence to a noise ball
# ----------------------------------------------------------------------------

def test_noise_ball_grows_with_sigma_and_vanishes_without_noise():
    X, y = make_problem(n=1000, m=10, seed=11)
    lam = 1e-2
    p_star = primal_objective(ridge_optimum(X, y, lam), X, y, "ridge", lam)
    medians = []
    for sigma in (8.0, 2.0, 0.5, 0.0):
        subopt = []
        for seed in range(10):
            res = dual_dpscd(X, y, loss="ridge", lam=lam, epochs=10, batch_size=50, clip=0.1,
                             noise_multiplier=sigma, random_state=seed, record_history=True)
            subopt.append(primal_objective(res.coef, X, y, "ridge", lam) - p_star)
            if sigma > 0:
                objs = [h["primal_objective"] for h in res.history]
                assert max(objs) < 10 * max(1.0, objs[0])  # no divergence across epochs
        medians.append(np.median(subopt))
    assert medians[0] > medians[1] > medians[2] > medians[3]
    # sigma -> 0 is mini-batch SCD itself (same batches: same sampling stream)
    limit = [primal_objective(scd(X, y, loss="ridge", lam=lam, epochs=10, batch_size=50, clip=0.1,
                                  sampler="poisson", random_state=seed).coef, X, y, "ridge", lam)
             - p_star for seed in range(10)]
    assert medians[3] == np.median(limit)


# ----------------------------------------------------------------------------
# dtypes and bad input
# ----------------------------------------------------------------------------

@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sparse_dtypes_are_kept(dtype, index_dtype):
    X, y = make_problem(n=300, m=12, task="binary")
    # strictly inside the unit ball: check_X scales rounding-level excess onto the bound,
    # and its dense and sparse row norms round differently (not what this test is about)
    X = X * (1.0 - 1e-9)
    Xs = sp.csr_matrix(X.astype(dtype))
    Xs.indices = Xs.indices.astype(index_dtype)
    Xs.indptr = Xs.indptr.astype(index_dtype)
    kw = dict(loss="logistic", lam=1e-2, epochs=3, batch_size=10, clip=0.5, noise_multiplier=0.5,
              random_state=4)
    res = dual_dpscd(Xs, y, **kw)
    ref = dual_dpscd(X, y, **kw)
    assert res.alpha.dtype == dtype and res.v.dtype == dtype
    if dtype == np.float64:
        assert np.array_equal(res.coef, ref.coef)
    else:
        np.testing.assert_allclose(res.coef, ref.coef, atol=1e-3)


def test_bad_input_is_rejected():
    X, y = make_problem(n=50)
    base = dict(loss="ridge", lam=1e-2, epochs=1, batch_size=5, clip=0.1, noise_multiplier=1.0)
    with pytest.raises(ValidationError, match="batch_size"):
        dual_dpscd(X, y, **dict(base, batch_size=51))
    for bad_clip in (0.0, -1.0):
        with pytest.raises(ValidationError, match="clip"):
            dual_dpscd(X, y, **dict(base, clip=bad_clip))
    with pytest.raises(ValidationError, match="finite clip"):
        dual_dpscd(X, y, **dict(base, clip=None))
    with pytest.raises(ValidationError, match="norm"):
        dual_dpscd(2 * X, y, **base)
    scd(2 * X, y, loss="ridge", lam=1e-2, epochs=1)  # non-private: any norm is fine
    with pytest.raises(ValidationError):
        dual_dpscd(X, np.arange(50) % 3, **dict(base, loss="logistic"))
    with pytest.raises(ValidationError, match="box_eps"):
        dual_dpscd(X, np.sign(y) + (y == 0), **dict(base, loss="logistic", box_eps=0.0))
    with pytest.raises(ValidationError, match="fixed-size"):
        seq_dpscd(X, y, sampler="poisson", **base)
    with pytest.raises(ValidationError):
        dual_dpscd(X, y, **dict(base, noise_multiplier=-1.0))
    with pytest.raises(ValidationError):
        dual_dpscd(X, y, **dict(base, lam=0.0))
    with pytest.raises(ValidationError, match="no complete"):
        dual_dpscd(X, y, **dict(base, epochs=0.01))
    with pytest.raises(ValidationError):
        dual_dpscd(X, y, **dict(base, num_threads=0))
    assert isinstance(PoissonSampler(0.1), PoissonSampler)


# ----------------------------------------------------------------------------
# primal DP-SCD (Algorithm 2)
# ----------------------------------------------------------------------------

def column_normalised(n=300, m=8, seed=0, task="ridge"):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, m))
    X /= np.linalg.norm(X, axis=0, keepdims=True)
    w = rng.standard_normal(m) * 3
    if task == "ridge":
        return X, X @ w + 0.05 * rng.standard_normal(n)
    return X, np.where(X @ w + 0.05 * rng.standard_normal(n) > 0, 1.0, -1.0)


@pytest.mark.parametrize("L", [1, 4])
def test_primal_ridge_reaches_closed_form(L):
    X, y = column_normalised()
    lam = 1e-3
    res = primal_dpscd(X, y, loss="ridge", lam=lam, epochs=300, batch_size=L, clip=None,
                       noise_multiplier=0.0, random_state=0)
    assert np.linalg.norm(res.coef - ridge_optimum(X, y, lam)) <= 1e-6
    assert np.abs(res.v - X @ res.coef).max() <= 1e-10
    assert res.event == events.NonPrivateEvent()


def test_primal_logistic_matches_sklearn():
    X, y = column_normalised(task="binary")
    lam = 1e-3
    n = X.shape[0]
    res = primal_dpscd(X, y, loss="logistic", lam=lam, epochs=400, batch_size=1, clip=None,
                       noise_multiplier=0.0, random_state=0)
    ref = LogisticRegression(C=1 / (lam * n), fit_intercept=False, tol=1e-12, max_iter=10000).fit(X, y)
    assert primal_objective(res.coef, X, y, "logistic", lam) - primal_objective(
        ref.coef_.ravel(), X, y, "logistic", lam) <= 1e-8


def test_primal_noise_event_and_std():
    X, y = column_normalised(n=4000, m=30)
    L, C, sigma = 3, 0.2, 0.9
    kw = dict(loss="ridge", lam=1e-2, epochs=L / 30, batch_size=L, clip=C, random_state=5)
    noisy = primal_dpscd(X, y, noise_multiplier=sigma, **kw)
    clean = primal_dpscd(X, y, noise_multiplier=0.0, **kw)
    assert noisy.n_iter == 1
    assert noisy.event == events.SelfComposedEvent(events.GaussianEvent(sigma), 1)
    tau = sigma * primal_sensitivity(C, L)
    assert tau == pytest.approx(sigma * 2 * C * math.sqrt(L * (L + 1)))
    eta = noisy.v - clean.v  # n = 4000 draws; false alarm < 1e-6
    assert abs(np.mean(eta**2) / tau**2 - 1) < 5 * math.sqrt(2 / eta.size)
    assert np.count_nonzero(noisy.coef - clean.coef) == L


def test_primal_empirical_sensitivity():
    """Removing example k changes [delta theta_B; delta v] by at most 2C sqrt(L(L+1))."""
    X, y = column_normalised(n=40, m=12, seed=3)
    loss = get_loss("ridge")
    L, C, lam = 4, 0.3, 1e-3
    rng = np.random.default_rng(4)
    worst = 0.0
    for _ in range(300):
        theta = rng.standard_normal(12) * 3
        v = X @ theta + rng.standard_normal(40)
        coords = np.sort(rng.choice(12, L, replace=False))
        k = rng.integers(40)
        keep = np.arange(40) != k
        z, dv = _primal_step(sp.csc_matrix(X), y, theta, v, coords, loss, lam, float(L), C)
        z0, dv0 = _primal_step(sp.csc_matrix(X[keep]), y[keep], theta, v[keep], coords, loss,
                               lam * 40 / 39, float(L), C)  # same lam*N: the public constant
        dv0_full = np.zeros(40)
        dv0_full[keep] = dv0
        worst = max(worst, np.linalg.norm(np.concatenate([z - z0, dv - dv0_full])))
    assert worst <= primal_sensitivity(C, L) * (1 + 1e-12)


def test_primal_bad_input():
    X, y = column_normalised()
    base = dict(loss="ridge", lam=1e-2, epochs=1, batch_size=2, clip=0.1, noise_multiplier=1.0)
    with pytest.raises(ValidationError, match="column"):
        primal_dpscd(X * 2, y, **base)
    with pytest.raises(ValidationError, match="smooth"):
        primal_dpscd(X, np.sign(y) + (y == 0), **dict(base, loss="hinge"))
    with pytest.raises(ValidationError, match="batch_size"):
        primal_dpscd(X, y, **dict(base, batch_size=9))


def test_eager_noise_path_and_draw_counts():
    """Eager noise draws T*M + (sampled alphas); lazy draws O(nnz + N + M) and fewer here."""
    rng = np.random.default_rng(0)
    X = sp.random(300, 2000, density=0.005, random_state=rng, format="csr")
    X = sp.csr_matrix(X.multiply(1 / np.maximum(np.sqrt(X.multiply(X).sum(1)), 1e-12)))
    y = rng.standard_normal(300)
    kw = dict(loss="ridge", lam=1e-2, epochs=2, batch_size=10, clip=0.1, noise_multiplier=1.0,
              random_state=1, sampler="fixed", released="alpha_and_v")
    eager = dual_dpscd(X, y, lazy_noise=False, **kw)
    lazy = dual_dpscd(X, y, lazy_noise=True, **kw)
    T = eager.n_iter
    assert eager.diagnostics["n_noise_draws"] == T * 2000 + T * 10
    assert lazy.diagnostics["n_noise_draws"] <= 2 * (X.nnz + 2000) + T * 10
    assert lazy.diagnostics["n_noise_draws"] < eager.diagnostics["n_noise_draws"] / 5


def test_released_v_only_noises_v_with_sensitivity_c():
    """Default ``released="v"``: one step from alpha = v = 0 adds N(0, (sigma C)^2) to
    every coordinate of v and no noise to alpha (second moment within 5 sqrt(2/k):
    false alarm < 1e-6); the paper's mode noises both with sqrt(2) C."""
    rng = np.random.default_rng(5)
    X = sp.random(200, 3000, density=0.01, random_state=rng, format="csr")
    X = sp.csr_matrix(X.multiply(1 / np.maximum(np.sqrt(X.multiply(X).sum(1)), 1e-12)))
    y = rng.standard_normal(200)
    kw = dict(loss="ridge", lam=1e-2, epochs=10 / 200, batch_size=10, clip=0.3,
              random_state=3, sampler="fixed", lazy_noise=False)
    noisy = dual_dpscd(X, y, noise_multiplier=1.7, **kw)
    clean = dual_dpscd(X, y, noise_multiplier=0.0, **kw)
    # add/remove sensitivity C (the fixed sampler's event doubles it for replace-one)
    assert noisy.n_iter == 1 and noisy.sensitivity == 0.3
    np.testing.assert_allclose(noisy.alpha, clean.alpha, rtol=1e-12, atol=1e-15)  # no alpha noise
    eta = noisy.v - clean.v
    tau = 1.7 * 0.3
    assert abs(np.mean(eta**2) / tau**2 - 1) < 5 * math.sqrt(2 / eta.size)
    # the event does not depend on the released state; the noise does
    paper = dual_dpscd(X, y, noise_multiplier=1.7, released="alpha_and_v", **kw)
    assert paper.event == noisy.event
    assert paper.noise_std == pytest.approx(math.sqrt(2) * noisy.noise_std)
    with pytest.raises(ValidationError, match="released"):
        dual_dpscd(X, y, noise_multiplier=1.7, released="alpha", **kw)
