"""Tests of the (DP-)SGD kernel (fastdp/_kernels/_sgd.pyx).

Exactness: the kernel against the numpy reference (``sgd_reference.py``,
same standard normals) in lazy and eager mode, with the scale ``a`` folded
into ``w`` mid-call.  Distribution: for the squared loss without clipping a
run is affine in the noise, so theta_T is Gaussian with a covariance
computed in closed form; lazy and eager runs are both checked against it.
Statistical tests use fixed seeds (deterministic outcome); with fresh seeds
each assertion's false-alarm rate is at most 1e-4 (stated per test).
"""
import pathlib
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from fastdp._kernels import _glm, _sgd
from fastdp._kernels._scd import row_squared_norms
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from sgd_reference import pending_scales, run_sgd_reference  # noqa: E402

LOSSES = {"squared": _glm.LOSS_SQUARED, "logistic": _glm.LOSS_LOGISTIC, "hinge": _glm.LOSS_HINGE}


def _problem(rng, n, m, density, value_dtype=np.float64, index_dtype=np.int32, task="binary"):
    X = sp.random(n, m, density=density, format="csr", random_state=rng)
    X.data = rng.normal(size=X.nnz)
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X = sp.diags(1.0 / np.where(norms > 0, norms, 1.0)) @ X
    X = sp.csr_matrix(X, dtype=value_dtype)
    X.sort_indices()
    X.indices = X.indices.astype(index_dtype)
    X.indptr = X.indptr.astype(index_dtype)
    w = rng.normal(size=m)
    margin = np.asarray(X.astype(np.float64) @ w).ravel()
    y = np.where(margin + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0) if task == "binary" else margin
    return X, y


def _poisson_batches(rng, n, q, n_steps):
    sizes = rng.binomial(n, q, size=n_steps)
    parts = [np.sort(rng.choice(n, size=k, replace=False)) for k in sizes]
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    idx = np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
    return ptr, idx


def _run(X, y, theta, ptr, idx, *, loss, clip, rho, kappa, noise_std, lazy, seed,
         num_threads=1, parallel_min_rows=64, check_structure=True):
    w = np.array(theta, dtype=np.float64)
    sq = row_squared_norms(X.data, X.indptr)
    largest = max(int(np.diff(ptr).max(initial=0)), 1)
    bitgen = np.random.PCG64(seed)
    draws = _sgd.run_sgd(X.data, X.indices, X.indptr, y, sq, w, ptr, idx,
                         np.zeros(largest), np.zeros(X.shape[1], np.int32), LOSSES[loss],
                         clip, rho, kappa, noise_std, lazy, bitgen, num_threads,
                         parallel_min_rows, check_structure=check_structure)
    return w, draws


@pytest.mark.parametrize("lazy", [True, False])
def test_structure_scan_changes_no_bit(rng, lazy):
    """check_structure=False (what the solvers pass) skips a scan, nothing else."""
    X, y = _problem(rng, 150, 40, 0.1, np.float64, np.int64, task="binary")
    ptr, idx = _poisson_batches(rng, 150, 0.3, 12)
    runs = [_run(X, y, np.zeros(40), ptr, idx, loss="logistic", clip=0.5, rho=0.99, kappa=0.1,
                 noise_std=0.4, lazy=lazy, seed=3, num_threads=2, parallel_min_rows=8,
                 check_structure=check) for check in (True, False)]
    assert np.array_equal(runs[0][0], runs[1][0]) and runs[0][1] == runs[1][1]


def test_pending_noise_scales_closed_form_matches_direct_sum():
    for rho in (1.0, 0.999999, 0.99, 0.5, 1e-3):
        np.testing.assert_allclose(_sgd.pending_noise_scales(rho, 300), pending_scales(rho, 300),
                                   rtol=1e-12, atol=0)


@pytest.mark.parametrize("loss", sorted(LOSSES))
@pytest.mark.parametrize("lazy", [True, False])
@pytest.mark.parametrize("dtypes", [(np.float64, np.int32), (np.float32, np.int64)])
def test_kernel_matches_numpy_reference(rng, loss, lazy, dtypes):
    X, y = _problem(rng, 120, 30, 0.15, *dtypes, task="regression" if loss == "squared" else "binary")
    ptr, idx = _poisson_batches(rng, 120, 0.1, 25)
    theta0 = rng.normal(size=30) * 0.1
    params = dict(loss=loss, clip=0.7, rho=0.97, kappa=0.3, noise_std=0.4)
    w, draws = _run(X, y, theta0, ptr, idx, lazy=lazy, seed=7, **params)
    ref, ref_draws = run_sgd_reference(X, y, theta0, ptr, idx, lazy_noise=lazy,
                                       rng=np.random.Generator(np.random.PCG64(7)), **params)
    np.testing.assert_allclose(w, ref, rtol=1e-9, atol=1e-11)
    assert draws == ref_draws
    if lazy:
        assert draws < 25 * 30  # the eager count
    else:
        assert draws == 25 * 30


def test_scale_fold_mid_call_is_exact(rng):
    # rho = 0.3: a = 0.3^t drops below 1e-100 after 192 steps, and is folded twice.
    X, y = _problem(rng, 50, 12, 0.3)
    ptr, idx = _poisson_batches(rng, 50, 0.2, 450)
    params = dict(loss="logistic", clip=1.0, rho=0.3, kappa=0.5, noise_std=1.0)
    for lazy in (True, False):
        w, _ = _run(X, y, np.zeros(12), ptr, idx, lazy=lazy, seed=3, **params)
        ref, _ = run_sgd_reference(X, y, np.zeros(12), ptr, idx, lazy_noise=lazy,
                                   rng=np.random.Generator(np.random.PCG64(3)), **params)
        np.testing.assert_allclose(w, ref, rtol=1e-9, atol=1e-12)


def test_noiseless_full_batch_is_gradient_descent(rng):
    X, y = _problem(rng, 80, 10, 0.4)
    lam, eta, n = 0.05, 0.5, 80
    ptr = np.arange(0, 41 * n, n, dtype=np.int64)
    idx = np.tile(np.arange(n, dtype=np.int64), 40)
    w, draws = _run(X, y, np.zeros(10), ptr, idx, loss="logistic", clip=np.inf,
                    rho=1 - eta * lam, kappa=eta / n, noise_std=0.0, lazy=True, seed=0)
    theta = np.zeros(10)
    for _ in range(40):
        grad = X.T @ (-y / (1 + np.exp(y * (X @ theta)))) / n + lam * theta
        theta = theta - eta * grad
    np.testing.assert_allclose(w, theta, rtol=1e-11, atol=1e-13)
    assert draws == 0


@pytest.mark.parametrize("lazy", [True, False])
def test_thread_count_does_not_change_bits(rng, lazy):
    X, y = _problem(rng, 3000, 400, 0.02)
    ptr, idx = _poisson_batches(rng, 3000, 0.1, 12)
    results = [
        _run(X, y, np.zeros(400), ptr, idx, loss="logistic", clip=0.5, rho=0.999, kappa=0.01,
             noise_std=0.5, lazy=lazy, seed=11, num_threads=nt, parallel_min_rows=16)[0]
        for nt in (1, 2, 3)
    ]
    assert np.array_equal(results[0], results[1]) and np.array_equal(results[0], results[2])


def _affine_noise_covariance(X, ptr, idx, rho, kappa, noise_std):
    """Covariance of theta_T for the squared loss without clipping (affine in the noise)."""
    Xd = X.toarray()
    m = Xd.shape[1]
    cov = np.zeros((m, m))
    for t in range(len(ptr) - 1):
        XB = Xd[idx[ptr[t]:ptr[t + 1]]]
        P = rho * np.eye(m) - kappa * XB.T @ XB
        cov = P @ cov @ P.T + (kappa * noise_std) ** 2 * np.eye(m)
    return cov


@pytest.mark.parametrize("lazy", [True, False])
def test_output_distribution_matches_closed_form(rng, lazy):
    """Squared loss, no clipping: theta_T ~ N(theta_T(noise=0), K) with K in closed form.

    4000 runs on fixed batches; whitened outputs u must be N(0, I): a KS test
    of all coordinates and a chi-square test of sum ||u||^2, each at level
    1e-4 (false-alarm rate 1e-4 per assertion for fresh seeds).
    """
    X, y = _problem(rng, 40, 5, 0.5, task="regression")
    ptr, idx = _poisson_batches(rng, 40, 0.15, 30)
    params = dict(loss="squared", clip=np.inf, rho=0.9, kappa=0.4)
    mean, _ = _run(X, y, np.zeros(5), ptr, idx, noise_std=0.0, lazy=lazy, seed=0, **params)
    cov = _affine_noise_covariance(X, ptr, idx, params["rho"], params["kappa"], 1.3)
    whiten = np.linalg.cholesky(np.linalg.inv(cov))
    reps = 4000
    u = np.empty((reps, 5))
    for r in range(reps):
        w, _ = _run(X, y, np.zeros(5), ptr, idx, noise_std=1.3, lazy=lazy, seed=1000 + r, **params)
        u[r] = (w - mean) @ whiten
    assert stats.kstest(u.ravel(), "norm").pvalue > 1e-4
    chi2 = float(np.sum(u * u))
    dof = u.size
    p_two_sided = 2 * min(stats.chi2.cdf(chi2, dof), stats.chi2.sf(chi2, dof))
    assert p_two_sided > 1e-4


def test_lazy_and_eager_same_distribution_nonlinear(rng):
    """Logistic loss with clipping (not affine): two-sample KS tests, lazy vs eager.

    Three statistics of theta_T (two coordinates and the norm), each at level
    1e-4 per assertion for fresh seeds.
    """
    X, y = _problem(rng, 60, 8, 0.3)
    ptr, idx = _poisson_batches(rng, 60, 0.1, 40)
    params = dict(loss="logistic", clip=0.5, rho=0.95, kappa=1.0, noise_std=0.8)
    reps = 2000
    out = {}
    for lazy in (True, False):
        out[lazy] = np.array([
            _run(X, y, np.zeros(8), ptr, idx, lazy=lazy, seed=(50000 if lazy else 90000) + r,
                 **params)[0] for r in range(reps)])
    for stat in (lambda a: a[:, 0], lambda a: a[:, 3], lambda a: np.linalg.norm(a, axis=1)):
        assert stats.ks_2samp(stat(out[True]), stat(out[False])).pvalue > 1e-4


def test_noise_std_per_coordinate_closed_form(rng):
    """Rows never read (empty batches): theta_T = sum of decayed noise, var (kappa s)^2 h(T)."""
    X, y = _problem(rng, 10, 20000, 0.0001)
    ptr = np.zeros(31, dtype=np.int64)
    idx = np.zeros(0, dtype=np.int64)
    for lazy in (True, False):
        w, draws = _run(X, y, np.zeros(20000), ptr, idx, loss="hinge", clip=1.0, rho=0.9,
                        kappa=0.2, noise_std=2.0, lazy=lazy, seed=5)
        var = (0.2 * 2.0) ** 2 * (1 - 0.9 ** 60) / (1 - 0.81)
        # sum of squares / var ~ chi2(20000): two-sided level 1e-4
        chi2 = float(np.sum(w * w) / var)
        assert 2 * min(stats.chi2.cdf(chi2, 20000), stats.chi2.sf(chi2, 20000)) > 1e-4
        assert draws == (20000 if lazy else 30 * 20000)


def test_bad_parameters_raise(rng):
    X, y = _problem(rng, 20, 5, 0.5)
    ptr = np.array([0, 2], np.int64)
    idx = np.array([0, 1], np.int64)
    with pytest.raises(ValueError, match="rho"):
        _run(X, y, np.zeros(5), ptr, idx, loss="logistic", clip=1.0, rho=0.0, kappa=0.1,
             noise_std=0.0, lazy=True, seed=0)
    with pytest.raises(ValueError, match="kappa"):
        _run(X, y, np.zeros(5), ptr, idx, loss="logistic", clip=1.0, rho=1.0, kappa=-1.0,
             noise_std=0.0, lazy=True, seed=0)
    w = np.zeros(5)
    with pytest.raises(ValueError, match="column_splits"):
        _sgd.run_sgd(X.data, X.indices, X.indptr, y, row_squared_norms(X.data, X.indptr), w,
                     ptr, idx, np.zeros(2), np.zeros(5, np.int32), 1, 1.0, 1.0, 0.1, 0.0, True,
                     None, 2, 1, np.array([0, 9, 5], np.int64))
