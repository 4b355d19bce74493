"""Tests of fastdp.solvers.sgd (DP-SGD and SGD, spec 000 sections 2.6 and 7.14)."""
import math
import pathlib
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression

from fastdp.exceptions import FastDPError, ValidationError
from fastdp.privacy import compute_epsilon
from fastdp.privacy.events import NonPrivateEvent
from fastdp.sampling import FixedSizeSampler, PoissonSampler
from fastdp.solvers.sgd import ESTIMATOR_SOLVERS, decay_and_step, dpsgd, sgd

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "_kernels"))
from sgd_reference import clipped_coefficients, run_sgd_reference  # noqa: E402


def _data(rng, n=300, m=12, task="binary", density=0.5):
    X = sp.random(n, m, density=density, format="csr", random_state=rng)
    X.data = rng.normal(size=X.nnz)
    X = sp.csr_matrix(X + sp.coo_matrix((np.ones(n), (np.arange(n), rng.integers(0, m, size=n))),
                                        shape=(n, m)))
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X = sp.csr_matrix(sp.diags(1.0 / norms) @ X)
    X.sort_indices()
    w = rng.normal(size=m)
    z = np.asarray(X @ w).ravel()
    if task == "binary":
        return X, np.where(z + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, z + 0.1 * rng.normal(size=n)


def _gradient_descent(X, y, loss, lam, eta, steps, lam_effective=None):
    n = X.shape[0]
    lam_eff = lam if lam_effective is None else lam_effective
    theta = np.zeros(X.shape[1])
    for _ in range(steps):
        coefs = clipped_coefficients(X, y, np.arange(n), theta, loss, np.inf)
        theta = theta - eta * (X.T @ coefs / n + lam_eff * theta)
    return theta


@pytest.mark.parametrize("loss", ["squared", "logistic", "hinge"])
def test_noiseless_full_batch_equals_gradient_descent(rng, loss):
    X, y = _data(rng, task="regression" if loss == "squared" else "binary")
    n = X.shape[0]
    res = dpsgd(X, y, loss=loss, lam=0.01, epochs=30, batch_size=n, clip=None,
                noise_multiplier=0.0, learning_rate=0.5, sampler="shuffle", random_state=0)
    ref = _gradient_descent(X, y, loss, 0.01, 0.5, 30)
    np.testing.assert_allclose(res.coef, ref, rtol=1e-11, atol=1e-13)
    assert res.n_iter == 30 and res.event == NonPrivateEvent()


def test_full_batch_sgd_reaches_sklearn_logistic_optimum(rng):
    X, y = _data(rng)
    n, lam = X.shape[0], 0.01
    res = sgd(X, y, loss="logistic", lam=lam, epochs=600, batch_size=n, learning_rate=3.0,
              random_state=0)
    ref = LogisticRegression(C=1.0 / (lam * n), fit_intercept=False, tol=1e-12,
                             max_iter=10000).fit(X, y)
    np.testing.assert_allclose(res.coef, ref.coef_.ravel(), rtol=1e-7, atol=1e-9)


def test_full_batch_ridge_reaches_closed_form_and_repo_mode_uses_lam_over_L(rng):
    X, y = _data(rng, task="regression")
    n, lam = X.shape[0], 0.05
    Xd = X.toarray()
    res = sgd(X, y, loss="squared", lam=lam, epochs=800, batch_size=n, learning_rate=1.5,
              random_state=0)
    closed = np.linalg.solve(Xd.T @ Xd + lam * n * np.eye(X.shape[1]), Xd.T @ y)
    np.testing.assert_allclose(res.coef, closed, rtol=1e-9, atol=1e-10)
    # reg="repo": the fixed point is the optimum with lam replaced by lam / L (spec 000 §7.14)
    L = n // 2
    repo = sgd(X, y, loss="squared", lam=lam, epochs=1500, batch_size=L, learning_rate=1.0,
               sampler="shuffle", reg="repo", random_state=0)
    closed_repo = np.linalg.solve(Xd.T @ Xd + (lam / L) * n * np.eye(X.shape[1]), Xd.T @ y)
    closed_paper = closed
    assert (np.linalg.norm(repo.coef - closed_repo)
            < 0.05 * np.linalg.norm(repo.coef - closed_paper))


def test_minibatch_sgd_neighbourhood_shrinks_with_step(rng):
    X, y = _data(rng, n=400)
    n, lam = X.shape[0], 0.01
    ref = LogisticRegression(C=1.0 / (lam * n), fit_intercept=False, tol=1e-12,
                             max_iter=10000).fit(X, y).coef_.ravel()
    errors = []
    for eta in (2.0, 0.2):
        res = sgd(X, y, loss="logistic", lam=lam, epochs=200 if eta < 1 else 40, batch_size=10,
                  learning_rate=eta, random_state=3)
        errors.append(np.linalg.norm(res.coef - ref) / np.linalg.norm(ref))
    assert errors[1] < errors[0] / 2 and errors[1] < 0.05


@pytest.mark.parametrize("reg", ["paper", "repo"])
@pytest.mark.parametrize("sampler", ["poisson", "fixed", "shuffle"])
def test_private_step_matches_reference_with_same_streams(rng, reg, sampler):
    """Batches and noise drawn from the documented streams reproduce the solver bit-for-bit-ish."""
    X, y = _data(rng, n=200, m=10)
    kwargs = dict(loss="logistic", lam=0.05, epochs=2, batch_size=20, clip=0.4,
                  noise_multiplier=1.3, learning_rate=0.7, reg=reg, lazy_noise=False)
    res = dpsgd(X, y, sampler=sampler, random_state=42, **kwargs)
    sampling_rng, noise_rng = np.random.default_rng(42).spawn(2)
    from fastdp.sampling import get_sampler

    smp = get_sampler(sampler, 20)
    stream = smp.stream(200, sampling_rng)
    theta = np.zeros(10)
    done = 0
    rho, kappa = decay_and_step(0.7, 0.05, 20, reg)
    assert rho == pytest.approx(1 - 0.7 * 0.05 / (1 if reg == "paper" else 20))
    for bound in smp.epoch_boundaries(200, 2):
        ptr, idx = stream.take(bound - done)
        theta, _ = run_sgd_reference(X, y, theta, ptr, idx, loss="logistic", clip=0.4, rho=rho,
                                     kappa=kappa, noise_std=1.3 * 0.4, lazy_noise=False,
                                     rng=noise_rng)
        done = bound
    np.testing.assert_allclose(res.coef, theta, rtol=1e-10, atol=1e-12)
    assert res.noise_std == pytest.approx(1.3 * 0.4) and res.sensitivity == 0.4


def test_event_matches_sampler_and_accountant(rng):
    X, y = _data(rng, n=500)
    res = dpsgd(X, y, loss="logistic", lam=1e-3, epochs=3, batch_size=50, clip=1.0,
                noise_multiplier=1.1, random_state=0)
    assert res.n_iter == 30 and res.sampler == "poisson" and res.adjacency == "add_remove"
    from fastdp.privacy.events import GaussianEvent

    assert res.event == PoissonSampler(batch_size=50).event(500, 30, GaussianEvent(1.1))
    eps = compute_epsilon(1.1, 0.1, 30, 1e-5)
    from fastdp.privacy import get_accountant

    assert get_accountant("rdp").epsilon(res.event, 1e-5) == pytest.approx(eps, rel=1e-12)
    fixed = dpsgd(X, y, loss="logistic", lam=1e-3, epochs=3, batch_size=50, clip=1.0,
                  noise_multiplier=1.1, sampler="fixed", random_state=0)
    assert fixed.adjacency == "replace_one"
    assert fixed.event == FixedSizeSampler(50).event(500, 30, GaussianEvent(1.1))


def test_same_seed_same_bits_any_thread_count_and_lazy_draws_fewer(rng):
    X, y = _data(rng, n=2000, m=3000, density=0.001)
    kwargs = dict(loss="hinge", lam=1e-3, epochs=2, batch_size=300, clip=0.5,
                  noise_multiplier=0.9)
    a = dpsgd(X, y, random_state=7, num_threads=1, **kwargs)
    b = dpsgd(X, y, random_state=7, num_threads=2, **kwargs)
    c = dpsgd(X, y, random_state=8, num_threads=1, **kwargs)
    assert np.array_equal(a.coef, b.coef)
    assert not np.array_equal(a.coef, c.coef)
    eager = dpsgd(X, y, random_state=7, lazy_noise=False, **kwargs)
    assert eager.diagnostics["n_noise_draws"] == eager.n_iter * 3000
    assert a.diagnostics["n_noise_draws"] < eager.diagnostics["n_noise_draws"] / 2


def test_float32_input_and_history_and_callback(rng):
    X, y = _data(rng)
    seen = []
    res64 = dpsgd(X, y, loss="logistic", lam=1e-3, epochs=3, batch_size=30, clip=1.0,
                  noise_multiplier=0.5, random_state=1, record_history=True,
                  callback=lambda d: seen.append(d["epoch"]))
    res32 = dpsgd(X.astype(np.float32), y, loss="logistic", lam=1e-3, epochs=3, batch_size=30,
                  clip=1.0, noise_multiplier=0.5, random_state=1)
    np.testing.assert_allclose(res32.coef, res64.coef, rtol=1e-4, atol=1e-5)
    assert seen == [1, 2, 3] and [h["epoch"] for h in res64.history] == [1, 2, 3]
    assert res32.extra["dtype"] == "float32"


def test_clipping_bounds_sensitivity_empirically(rng):
    """One noiseless step with and without example k differs by at most kappa * C."""
    X, y = _data(rng, n=50, task="regression")
    y = y * 50.0  # large residuals: every gradient is clipped
    theta = rng.normal(size=X.shape[1])
    full = clipped_coefficients(X, y, np.arange(50), theta, "squared", 0.3)
    for k in range(50):
        contrib = full[k] * X[k].toarray().ravel()
        assert np.linalg.norm(contrib) <= 0.3 * (1 + 1e-12)


@pytest.mark.parametrize("bad, match", [
    (dict(clip=None), "finite clip"),
    (dict(learning_rate=0.0), "learning_rate"),
    (dict(learning_rate=200.0, lam=0.01), "lower the learning rate"),
    (dict(reg="other"), "reg"),
    (dict(lam=-1.0), "lam"),
    (dict(batch_size=0), "batch_size"),
    (dict(batch_size=10**6), "batch_size"),
    (dict(noise_multiplier=-1.0), "noise_multiplier"),
    (dict(sampler="bogus"), "sampler"),
    (dict(epochs=0.001), "epochs"),
])
def test_bad_arguments_raise_validation_error(rng, bad, match):
    X, y = _data(rng, n=100)
    kwargs = dict(loss="logistic", lam=1e-3, epochs=1, batch_size=10, clip=1.0,
                  noise_multiplier=1.0, random_state=0)
    kwargs.update(bad)
    with pytest.raises(ValidationError, match=match):
        dpsgd(X, y, **kwargs)


def test_bad_data_raises(rng):
    X, y = _data(rng, n=100)
    with pytest.raises(ValidationError):
        dpsgd(X, np.arange(100.0), loss="logistic", lam=1e-3, epochs=1, batch_size=10,
              clip=1.0, noise_multiplier=1.0)
    Xn = X.copy()
    Xn.data[0] = np.nan
    with pytest.raises(ValidationError):
        sgd(Xn, y, loss="logistic", lam=1e-3, epochs=1)


def test_divergence_is_reported(rng):
    X, y = _data(rng, n=100, task="regression")
    with pytest.raises(FastDPError, match="diverged"):
        sgd(X * 1e3, y, loss="squared", lam=0.0, epochs=50, batch_size=1, learning_rate=1.0,
            random_state=0)


def test_estimator_adapters(rng):
    solver = ESTIMATOR_SOLVERS["dpsgd"]
    config = {"lam": 1e-3, "batch_size": 20, "epochs": 2, "clip": 1.0, "sampler": "poisson",
              "lazy_noise": True, "num_threads": None, "record_history": False,
              "options": {"learning_rate": 0.5}}
    event = solver.event(200, config, 1.2)
    X, y = _data(rng, n=200)
    res = solver.run(X, y, loss="logistic", noise=1.2, config=config,
                     random_state=np.random.default_rng(0))
    assert res.event == event and res.extra["learning_rate"] == 0.5
    solver.check_options({"learning_rate": 1.0, "reg": "repo"})
    with pytest.raises(ValidationError):
        solver.check_options({"momentum": 0.9})
    with pytest.raises(ValidationError, match="not private"):
        ESTIMATOR_SOLVERS["sgd"].noise_for_budget(200, config, 1.0, 1e-5, None)
    res = ESTIMATOR_SOLVERS["sgd"].run(X, y, loss="logistic", noise=0.0,
                                       config=dict(config, clip=None),
                                       random_state=np.random.default_rng(0))
    assert res.event == NonPrivateEvent() and math.isinf(res.clip)


@pytest.mark.parametrize("reg", ["paper", "repo"])
def test_noise_std_is_sigma_c_closed_form(reg):
    """All-zero rows (no gradient): theta_T = -kappa sum_t rho^(T-t) xi_t, xi_t ~ N(0, (sigma C)^2).

    Per coordinate var = (eta/L)^2 (sigma C)^2 (1 - rho^(2T)) / (1 - rho^2); the sum of
    squares over 20000 coordinates is chi-square (two-sided level 1e-4).
    """
    from scipy import stats

    n, m, L = 200, 20000, 20
    X = sp.csr_matrix((n, m))
    y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    res = dpsgd(X, y, loss="logistic", lam=0.3, epochs=2, batch_size=L, clip=0.7,
                noise_multiplier=1.5, learning_rate=0.5, reg=reg, random_state=4)
    rho, kappa = res.extra["rho"], res.extra["kappa"]
    T = res.n_iter
    var = (kappa * 1.5 * 0.7) ** 2 * (1 - rho ** (2 * T)) / (1 - rho ** 2)
    chi2 = float(np.sum(res.coef ** 2) / var)
    assert 2 * min(stats.chi2.cdf(chi2, m), stats.chi2.sf(chi2, m)) > 1e-4
    assert res.noise_std == pytest.approx(1.5 * 0.7)
