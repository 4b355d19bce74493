"""Tests of fastdp.solvers.multinomial (softmax SGD and DP-SGD for K >= 2 classes).

References: scikit-learn's multinomial ``LogisticRegression`` (lbfgs) for the
optimum, the numpy reference of the kernel (``tests/_kernels/multinomial_reference.py``)
fed the solver's documented streams, and fastdp's binary SGD for K = 2
(with lam = 0, Theta_1 - Theta_0 follows binary logistic GD with step 2 eta).
Statistical tests use fixed seeds; with fresh seeds each assertion's
false-alarm rate is at most 1e-4 (stated per test).
"""
import math
import pathlib
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats
from scipy.special import softmax
from sklearn.linear_model import LogisticRegression

from fastdp.exceptions import FastDPError, ValidationError
from fastdp.privacy import get_accountant
from fastdp.privacy.events import GaussianEvent, NonPrivateEvent
from fastdp.sampling import FixedSizeSampler, PoissonSampler, get_sampler
from fastdp.solvers.multinomial import (
    ESTIMATOR_SOLVERS,
    dp_multinomial_sgd,
    multinomial_objective,
    multinomial_sgd,
)
from fastdp.solvers.sgd import dpsgd, sgd

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "_kernels"))
from multinomial_reference import run_multinomial_reference  # noqa: E402


def _data(rng, n=300, d=12, K=4, density=0.4):
    """Unit-norm sparse rows (every row non-empty), labels from a planted softmax model."""
    X = sp.random(n, d, density=density, format="csr", random_state=rng)
    X.data = rng.normal(size=X.nnz)
    X = sp.csr_matrix(X + sp.coo_matrix((np.ones(n), (np.arange(n), rng.integers(0, d, size=n))),
                                        shape=(n, d)))
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X = sp.csr_matrix(sp.diags(1.0 / norms) @ X)
    X.sort_indices()
    scores = np.asarray(X @ (3.0 * rng.normal(size=(d, K))))
    return X, np.argmax(scores + rng.gumbel(size=(n, K)), axis=1)


def _sklearn_optimum(X, y, lam):
    """Theta* (K x d) from scikit-learn's lbfgs; for K = 2 sklearn fits the binary model
    w = Theta_1 - Theta_0, and the multinomial optimum is Theta* = [-w/2, w/2] with w the
    binary optimum at penalty lam / 2 (||Theta*||_F^2 = ||w||^2 / 2)."""
    n = X.shape[0]
    binary = len(np.unique(y)) == 2
    model = LogisticRegression(C=(2.0 if binary else 1.0) / (n * lam), fit_intercept=False,
                               solver="lbfgs", tol=1e-14, max_iter=100000).fit(X, y)
    return np.vstack([-model.coef_ / 2, model.coef_ / 2]) if binary else model.coef_


@pytest.mark.parametrize("K", [2, 5])
def test_full_batch_reaches_sklearn_multinomial_optimum(rng, K):
    """Full-batch GD (shuffle sampler, L = n): relative objective gap <= 1e-10, coef to 1e-6."""
    X, y = _data(rng, K=K)
    n, lam = X.shape[0], 0.01
    res = multinomial_sgd(X, y, n_classes=K, lam=lam, epochs=3000, batch_size=n,
                          learning_rate=1.5, random_state=0)
    ref = _sklearn_optimum(X, y, lam)
    ours, theirs = multinomial_objective(res.coef, X, y, lam), multinomial_objective(ref, X, y, lam)
    assert abs(ours - theirs) / theirs <= 1e-10
    np.testing.assert_allclose(res.coef, ref, atol=1e-6)


def test_minibatch_small_step_reaches_sklearn_objective(rng):
    """Mini-batches of 10, eta = 0.05, 300 epochs: relative objective gap <= 1e-4."""
    X, y = _data(rng, n=400, K=5)
    lam = 0.01
    res = multinomial_sgd(X, y, n_classes=5, lam=lam, epochs=300, batch_size=10,
                          learning_rate=0.05, random_state=3)
    theirs = multinomial_objective(_sklearn_optimum(X, y, lam), X, y, lam)
    gap = (multinomial_objective(res.coef, X, y, lam) - theirs) / theirs
    assert 0.0 <= gap <= 1e-4


def test_two_classes_match_binary_logistic_sgd(rng):
    """K = 2, lam = 0, no clipping: Theta_1 - Theta_0 is binary SGD with step 2 eta."""
    X, y = _data(rng, K=2)
    kwargs = dict(lam=0.0, epochs=5, batch_size=25, random_state=4)
    multi = multinomial_sgd(X, y, n_classes=2, learning_rate=0.4, **kwargs)
    binary = sgd(X, np.where(y == 1, 1.0, -1.0), loss="logistic", learning_rate=0.8, **kwargs)
    np.testing.assert_allclose(multi.coef[1] - multi.coef[0], binary.coef, rtol=1e-10,
                               atol=1e-12)
    np.testing.assert_allclose(multi.coef.sum(axis=0), 0.0, atol=1e-12)


@pytest.mark.parametrize("sampler", ["poisson", "fixed", "shuffle"])
@pytest.mark.parametrize("lazy", [True, False])
def test_private_run_matches_reference_with_same_streams(rng, sampler, lazy):
    """Batches and noise from the documented streams reproduce the solver to rounding."""
    X, y = _data(rng, n=200, d=10, K=3)
    res = dp_multinomial_sgd(X, y, n_classes=3, lam=0.05, epochs=2, batch_size=20, clip=0.4,
                             noise_multiplier=1.3, learning_rate=0.7, sampler=sampler,
                             lazy_noise=lazy, random_state=42)
    sampling_rng, noise_rng = np.random.default_rng(42).spawn(2)
    smp = get_sampler(sampler, 20)
    stream = smp.stream(200, sampling_rng)
    theta = np.zeros((3, 10))
    done = 0
    for bound in smp.epoch_boundaries(200, 2):
        ptr, idx = stream.take(bound - done)
        theta, _ = run_multinomial_reference(X, y, theta, ptr, idx, clip=0.4, rho=1 - 0.7 * 0.05,
                                             kappa=0.7 / 20, noise_std=1.3 * 0.4,
                                             lazy_noise=lazy, rng=noise_rng)
        done = bound
    np.testing.assert_allclose(res.coef, theta, rtol=1e-10, atol=1e-12)
    assert res.coef.shape == (3, 10) and res.noise_std == pytest.approx(0.52)
    assert res.sensitivity == 0.4 and res.loss == "multinomial"


def test_event_is_binary_dpsgds_event(rng):
    X, y = _data(rng, n=500, K=6)
    res = dp_multinomial_sgd(X, y, n_classes=6, lam=1e-3, epochs=3, batch_size=50, clip=1.0,
                             noise_multiplier=1.1, random_state=0)
    binary = dpsgd(X, np.where(y == 0, 1.0, -1.0), loss="logistic", lam=1e-3, epochs=3,
                   batch_size=50, clip=1.0, noise_multiplier=1.1, random_state=0)
    assert res.n_iter == 30 and res.adjacency == "add_remove" and res.sampler == "poisson"
    expected = PoissonSampler(batch_size=50).event(500, 30, GaussianEvent(1.1))
    assert res.event == binary.event == expected
    accountant = get_accountant("rdp")
    assert accountant.epsilon(res.event, 1e-5) == accountant.epsilon(binary.event, 1e-5)
    fixed = dp_multinomial_sgd(X, y, n_classes=6, lam=1e-3, epochs=3, batch_size=50, clip=1.0,
                               noise_multiplier=1.1, sampler="fixed", random_state=0)
    assert fixed.adjacency == "replace_one"
    assert fixed.event == FixedSizeSampler(50).event(500, 30, GaussianEvent(1.1))
    assert multinomial_sgd(X, y, n_classes=6, lam=1e-3, epochs=1).event == NonPrivateEvent()


def test_clipping_a_lone_huge_example_moves_theta_by_eta_c():
    """n = 1, one step, sigma = 0, lam = 0: Theta_1 = -eta clip(g, C), ||.||_F = eta C,
    along the unclipped per-example gradient (p - e_y) x^T."""
    x = np.zeros(9)
    x[[0, 3, 8]] = [4e4, -1e5, 2e4]
    res = multinomial_sgd(sp.csr_matrix(x), [3], n_classes=4, lam=0.0, epochs=1, batch_size=1,
                          learning_rate=0.6, clip=0.25)
    g = np.outer(np.array([0.25, 0.25, 0.25, -0.75]), x)     # softmax(0) - e_3
    np.testing.assert_allclose(np.linalg.norm(res.coef), 0.6 * 0.25, rtol=1e-12)
    np.testing.assert_allclose(res.coef, -0.6 * 0.25 * g / np.linalg.norm(g), rtol=1e-12)


def test_clipping_bounds_each_examples_contribution(rng):
    """One noiseless full-batch step with example k and with it zeroed (its gradient is then
    exactly 0: removal from a fixed lot) differ by kappa ||clip(g_k, C)||_F = kappa C here."""
    X, y = _data(rng, n=40, K=5)
    X = sp.csr_matrix(X * 30.0)                 # large rows: every gradient is clipped
    kwargs = dict(n_classes=5, lam=0.0, epochs=1, batch_size=40, clip=0.3, learning_rate=1.0,
                  sampler="shuffle")
    full = multinomial_sgd(X, y, **kwargs).coef
    for k in range(0, 40, 7):
        zeroed = sp.csr_matrix(sp.diags((np.arange(40) != k).astype(float)) @ X)
        without = multinomial_sgd(zeroed, y, **kwargs).coef
        np.testing.assert_allclose(np.linalg.norm(full - without), 0.3 / 40, rtol=1e-9)


@pytest.mark.parametrize("lazy", [True, False])
def test_noise_std_is_sigma_c_per_coordinate(lazy):
    """All-zero rows (no gradient): Theta_T = -kappa sum_t rho^(T-t) Xi_t.

    Xi_t ~ N(0, (sigma C)^2 I).  Per coordinate
    var = (eta/L)^2 (sigma C)^2 (1 - rho^(2T)) / (1 - rho^2); the sum of squares
    over K d = 20000 coordinates is chi-square (two-sided level 1e-4), and the
    coordinates pass a KS test against that normal (level 1e-4).
    """
    n, d, K, L, eta, lam, sigma, C = 200, 4000, 5, 20, 0.5, 0.1, 1.7, 0.6
    X = sp.csr_matrix((n, d))
    res = dp_multinomial_sgd(X, np.zeros(n, int), n_classes=K, lam=lam, epochs=2,
                             batch_size=L, clip=C, noise_multiplier=sigma, learning_rate=eta,
                             lazy_noise=lazy, random_state=9)
    T, rho = res.n_iter, 1 - eta * lam
    std = (eta / L) * sigma * C * math.sqrt((1 - rho ** (2 * T)) / (1 - rho ** 2))
    chi2 = float(np.sum(res.coef ** 2) / std ** 2)
    assert 2 * min(stats.chi2.cdf(chi2, K * d), stats.chi2.sf(chi2, K * d)) > 1e-4
    assert stats.kstest(res.coef.ravel() / std, "norm").pvalue > 1e-4


def test_same_seed_same_bits_any_thread_count_and_lazy_draws_fewer(rng):
    X, y = _data(rng, n=2000, d=3000, K=7, density=0.001)
    kwargs = dict(n_classes=7, lam=1e-3, epochs=2, batch_size=300, clip=0.5,
                  noise_multiplier=0.9)
    a = dp_multinomial_sgd(X, y, random_state=7, num_threads=1, **kwargs)
    b = dp_multinomial_sgd(X, y, random_state=7, num_threads=2, **kwargs)
    c = dp_multinomial_sgd(X, y, random_state=8, num_threads=1, **kwargs)
    assert np.array_equal(a.coef, b.coef) and not np.array_equal(a.coef, c.coef)
    eager = dp_multinomial_sgd(X, y, random_state=7, lazy_noise=False, **kwargs)
    assert eager.diagnostics["n_noise_draws"] == eager.n_iter * 3000 * 7
    assert a.diagnostics["n_noise_draws"] < eager.diagnostics["n_noise_draws"] / 2


def test_float32_and_int64_input_give_the_same_bits(rng):
    """float32 values are read as doubles: float32 input == its exact float64 copy."""
    X, y = _data(rng)
    X32 = X.astype(np.float32)
    X64 = X32.astype(np.float64)
    X64.indices, X64.indptr = X64.indices.astype(np.int64), X64.indptr.astype(np.int64)
    kwargs = dict(n_classes=4, lam=1e-3, epochs=3, batch_size=30, clip=1.0,
                  noise_multiplier=0.5, random_state=1)
    res32, res64 = dp_multinomial_sgd(X32, y, **kwargs), dp_multinomial_sgd(X64, y, **kwargs)
    assert np.array_equal(res32.coef, res64.coef)
    assert res32.extra["dtype"] == "float32" and res64.extra["dtype"] == "float64"
    dense = dp_multinomial_sgd(X64.toarray(), y.astype(float), **kwargs)  # dense, float labels
    assert np.array_equal(dense.coef, res64.coef)


def test_history_and_callback(rng):
    X, y = _data(rng)
    seen = []

    def callback(state):
        assert state["coef"].shape == (4, 12) and not state["coef"].flags.writeable
        seen.append((state["epoch"], state["coef"].copy()))

    res = multinomial_sgd(X, y, n_classes=4, lam=1e-2, epochs=4, batch_size=30,
                          learning_rate=0.5, random_state=0, record_history=True,
                          callback=callback)
    assert [e for e, _ in seen] == [1, 2, 3, 4] and np.array_equal(seen[-1][1], res.coef)
    values = [h["primal_objective"] for h in res.history]
    assert values[-1] < values[0] < math.log(4)
    assert values[-1] == pytest.approx(multinomial_objective(res.coef, X, y, 1e-2), rel=1e-14)


def test_objective_matches_direct_formula(rng):
    X, y = _data(rng, n=50, K=3)
    coef = rng.normal(size=(3, 12))
    P = softmax(X.toarray() @ coef.T, axis=1)
    direct = -np.mean(np.log(P[np.arange(50), y])) + 0.5 * 0.2 * np.sum(coef ** 2)
    assert multinomial_objective(coef, X, y, 0.2) == pytest.approx(direct, rel=1e-13)


@pytest.mark.parametrize("bad, match", [
    (dict(y="high"), "outside"),
    (dict(y="negative"), "outside"),
    (dict(y="fraction"), "not an integer"),
    (dict(y="nan"), "not an integer"),
    (dict(y="strings"), "integer class indices"),
    (dict(y="short"), "labels"),
    (dict(y="2d"), "1-D"),
    (dict(n_classes=1), "n_classes"),
    (dict(n_classes=True), "n_classes"),
    (dict(n_classes=2.5), "n_classes"),
    (dict(clip=None), "finite clip"),
    (dict(clip=0.0), "clip"),
    (dict(learning_rate=0.0), "learning_rate"),
    (dict(learning_rate=200.0, lam=0.01), "lower the learning rate"),
    (dict(lam=-1.0), "lam"),
    (dict(batch_size=0), "batch_size"),
    (dict(noise_multiplier=-1.0), "noise_multiplier"),
    (dict(sampler="bogus"), "sampler"),
    (dict(epochs=0.001), "epochs"),
    (dict(num_threads=0), "num_threads"),
])
def test_bad_arguments_raise_validation_error(rng, bad, match):
    X, y = _data(rng, n=100, K=4)
    at = np.arange(100)
    labels = {"high": np.where(at == 5, 4, y), "negative": np.where(at == 9, -1, y),
              "fraction": y + 0.5 * (at == 3), "nan": np.where(at == 2, np.nan, y),
              "strings": np.array(["a"] * 100), "short": y[:-1], "2d": y[:, None]}
    kwargs = dict(n_classes=4, lam=1e-3, epochs=1, batch_size=10, clip=1.0,
                  noise_multiplier=1.0, random_state=0)
    kwargs.update(bad)
    y_bad = labels[kwargs.pop("y")] if "y" in bad else y
    with pytest.raises(ValidationError, match=match):
        dp_multinomial_sgd(X, y_bad, **kwargs)


def test_bad_data_and_divergence(rng):
    X, y = _data(rng, n=100)
    Xn = X.copy()
    Xn.data[0] = np.nan
    with pytest.raises(ValidationError):
        multinomial_sgd(Xn, y, n_classes=4, lam=1e-3, epochs=1)
    with pytest.raises(ValidationError):
        multinomial_objective(np.zeros((4, 5)), X, y, 0.1)          # d mismatch
    with pytest.raises(FastDPError, match="diverged"):
        multinomial_sgd(X * 1e200, y, n_classes=4, lam=0.0, epochs=3, batch_size=1,
                        learning_rate=1e200, random_state=0)


def test_estimator_adapters(rng):
    solver = ESTIMATOR_SOLVERS["multinomial_dpsgd"]
    config = {"lam": 1e-3, "batch_size": 20, "epochs": 2, "clip": 1.0, "sampler": "poisson",
              "lazy_noise": True, "num_threads": None, "record_history": False,
              "n_classes": 5, "options": {"learning_rate": 0.5}}
    event = solver.event(200, config, 1.2)
    X, y = _data(rng, n=200, K=5)
    res = solver.run(X, y, loss="logistic", noise=1.2, config=config,
                     random_state=np.random.default_rng(0))
    assert res.event == event and res.extra["learning_rate"] == 0.5
    assert res.coef.shape == (5, 12)
    assert solver.noise_for_budget(200, config, 1.0, 1e-5, "rdp") > 0
    with pytest.raises(ValidationError):
        solver.check_options({"momentum": 0.9})
    plain = ESTIMATOR_SOLVERS["multinomial_sgd"]
    with pytest.raises(ValidationError, match="not private"):
        plain.noise_for_budget(200, config, 1.0, 1e-5, None)
    res = plain.run(X, y, loss="logistic", noise=0.0, config=dict(config, clip=None),
                    random_state=np.random.default_rng(0))
    assert res.event == NonPrivateEvent() and math.isinf(res.clip)
