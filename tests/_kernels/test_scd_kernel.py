"""Tests of the compiled DP-SCD kernel against its numpy reference and statistical laws.

Statistical tests state their false-alarm rate; all use fixed seeds, so a
passing test stays passing.
"""
import math
import pathlib
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from fastdp._kernels import _scd

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from scd_reference import dual_scd_reference  # noqa: E402

LOSSES = {"ridge": 0, "logistic": 1, "hinge": 2}


def unit_rows_csr(n, m, density, seed, dtype=np.float64, index_dtype=np.int32):
    rng = np.random.default_rng(seed)
    X = sp.random(n, m, density=density, random_state=rng, format="csr", dtype=np.float64)
    X.data = rng.standard_normal(X.data.size)
    # make sure no row is empty
    dense = X.toarray()
    for i in np.flatnonzero(np.abs(dense).sum(axis=1) == 0):
        dense[i, rng.integers(m)] = 1.0
    norms = np.linalg.norm(dense, axis=1)
    X = sp.csr_matrix(dense / norms[:, None])
    X.sort_indices()
    X.data = X.data.astype(dtype)
    X.indices = X.indices.astype(index_dtype)
    X.indptr = X.indptr.astype(index_dtype)
    return X


def labels(n, loss, seed):
    rng = np.random.default_rng(seed)
    if loss == "ridge":
        return rng.standard_normal(n)
    return np.where(rng.standard_normal(n) > 0, 1.0, -1.0)


def poisson_batches(n, q, steps, seed):
    rng = np.random.default_rng(seed)
    return [np.flatnonzero(rng.random(n) < q).astype(np.int64) for _ in range(steps)]


def flat(batches):
    ptr = np.zeros(len(batches) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in batches], out=ptr[1:])
    idx = np.concatenate(batches).astype(np.int64) if batches else np.zeros(0, np.int64)
    return ptr, idx


def run_kernel(X, y, batches, *, loss, lam_n, sigma_prime, clip=np.inf, box_eps=1e-4,
               sequential=False, std_alpha=0.0, std_v=0.0, lazy=False, seed=0,
               alpha=None, v=None, num_threads=1, parallel_min_rows=1, check_structure=True):
    n, m = X.shape
    alpha = np.zeros(n, X.dtype) if alpha is None else np.array(alpha, dtype=X.dtype)
    v = np.zeros(m, X.dtype) if v is None else np.array(v, dtype=X.dtype)
    ptr, idx = flat(batches)
    gen = np.random.default_rng(seed)
    sq = _scd.row_squared_norms(X.data, X.indptr)
    buf = np.zeros(max(1, int(np.diff(ptr).max(initial=0))))
    with gen.bit_generator.lock:
        draws = _scd.run_dual_scd(
            X.data, X.indices, X.indptr, np.asarray(y, np.float64), sq, alpha, v, ptr, idx, buf,
            np.zeros(m, np.int32), LOSSES[loss], lam_n, sigma_prime, clip, box_eps, sequential,
            std_alpha, std_v, lazy, gen.bit_generator, num_threads, parallel_min_rows,
            check_structure=check_structure)
    return alpha, v, draws


@pytest.mark.parametrize("sequential", [False, True])
def test_structure_scan_changes_no_bit(sequential):
    """check_structure=False (what the solvers pass) skips a scan, nothing else."""
    X = unit_rows_csr(150, 40, 0.1, 11)
    y = labels(150, "logistic", 12)
    batches = poisson_batches(150, 0.3, 12, 13)
    runs = [run_kernel(X, y, batches, loss="logistic", lam_n=15.0, sigma_prime=45.0, clip=0.5,
                       sequential=sequential, std_alpha=0.3, std_v=0.2, lazy=True, seed=4,
                       num_threads=2, parallel_min_rows=8, check_structure=check)
            for check in (True, False)]
    for a, b in zip(runs[0], runs[1]):
        assert np.array_equal(a, b)


# ----------------------------------------------------------------------------
# the compiled kernel equals the numpy reference (same Gaussians)
# ----------------------------------------------------------------------------

@pytest.mark.parametrize("loss", list(LOSSES))
@pytest.mark.parametrize("sequential", [False, True])
@pytest.mark.parametrize("lazy", [False, True])
def test_kernel_matches_reference(loss, sequential, lazy):
    n, m = 60, 12
    X = unit_rows_csr(n, m, 0.4, seed=1)
    y = labels(n, loss, 2)
    batches = poisson_batches(n, 0.1, 40, seed=3)
    kw = dict(loss=loss, lam_n=0.05 * n, sigma_prime=6.0, clip=0.4, box_eps=1e-4,
              sequential=sequential)
    a, v, _ = run_kernel(X, y, batches, std_alpha=0.3, std_v=0.2, lazy=lazy, seed=11,
                         num_threads=2, **kw)
    ar, vr, _ = dual_scd_reference(
        X, y, np.zeros(n), np.zeros(m), batches, lam_n=kw["lam_n"], loss=LOSSES[loss],
        sigma_prime=6.0, clip=0.4, box_eps=1e-4, sequential=sequential, noise_std_alpha=0.3,
        noise_std_v=0.2, lazy_noise=lazy, noise_rng=np.random.default_rng(11))
    np.testing.assert_allclose(a, ar, rtol=0, atol=1e-12)
    np.testing.assert_allclose(v, vr, rtol=0, atol=1e-12)


def test_empty_batches_still_add_v_noise():
    n, m = 10, 4
    X = unit_rows_csr(n, m, 0.5, seed=1)
    y = labels(n, "ridge", 2)
    a, v, draws = run_kernel(X, y, [np.zeros(0, np.int64)] * 3, loss="ridge", lam_n=1.0,
                             sigma_prime=1.0, std_alpha=1.0, std_v=1.0, lazy=False)
    assert draws == 3 * m
    assert np.all(a == 0) and np.all(v != 0)


# ----------------------------------------------------------------------------
# dtypes, index types, threads, seeds
# ----------------------------------------------------------------------------

@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_and_index_type_coverage(dtype, index_dtype):
    n, m = 80, 15
    X64 = unit_rows_csr(n, m, 0.3, seed=4)
    X = unit_rows_csr(n, m, 0.3, seed=4, dtype=dtype, index_dtype=index_dtype)
    y = labels(n, "logistic", 5)
    batches = poisson_batches(n, 0.2, 30, seed=6)
    kw = dict(loss="logistic", lam_n=0.1 * n, sigma_prime=16.0, clip=0.5, std_alpha=0.1,
              std_v=0.1, lazy=True, seed=3)
    a, v, _ = run_kernel(X, y, batches, **kw)
    a64, v64, _ = run_kernel(X64, y, batches, **kw)
    assert a.dtype == dtype and v.dtype == dtype
    if dtype == np.float64:
        assert np.array_equal(a, a64) and np.array_equal(v, v64)
    else:
        np.testing.assert_allclose(a, a64, atol=1e-4)
        np.testing.assert_allclose(v, v64, atol=1e-4)


@pytest.mark.parametrize("sequential", [False, True])
def test_thread_count_does_not_change_bits(sequential):
    n, m = 3000, 200
    X = unit_rows_csr(n, m, 0.05, seed=7)
    y = labels(n, "hinge", 8)
    batches = poisson_batches(n, 0.1, 20, seed=9)
    kw = dict(loss="hinge", lam_n=0.01 * n, sigma_prime=300.0, clip=0.2, std_alpha=0.5,
              std_v=0.5, lazy=True, seed=5, sequential=sequential, parallel_min_rows=1)
    a1, v1, d1 = run_kernel(X, y, batches, num_threads=1, **kw)
    a2, v2, d2 = run_kernel(X, y, batches, num_threads=2, **kw)
    assert np.array_equal(a1, a2) and np.array_equal(v1, v2) and d1 == d2


def test_same_seed_same_bits_other_seed_other_noise():
    n, m = 50, 10
    X = unit_rows_csr(n, m, 0.4, seed=1)
    y = labels(n, "ridge", 2)
    batches = poisson_batches(n, 0.2, 10, seed=3)
    kw = dict(loss="ridge", lam_n=5.0, sigma_prime=10.0, clip=0.3, std_alpha=0.2, std_v=0.2,
              lazy=True)
    a1, v1, _ = run_kernel(X, y, batches, seed=1, **kw)
    a2, v2, _ = run_kernel(X, y, batches, seed=1, **kw)
    a3, v3, _ = run_kernel(X, y, batches, seed=2, **kw)
    assert np.array_equal(a1, a2) and np.array_equal(v1, v2)
    assert not np.array_equal(v1, v3)


# ----------------------------------------------------------------------------
# lazy noise: draw counts and same output distribution as eager noise
# ----------------------------------------------------------------------------

def test_lazy_noise_draw_count_is_linear_in_nnz():
    n, m = 400, 2000
    X = unit_rows_csr(n, m, 0.005, seed=3)
    y = labels(n, "ridge", 2)
    batches = poisson_batches(n, 0.01, 400, seed=4)
    kw = dict(loss="ridge", lam_n=4.0, sigma_prime=4.0, clip=0.3, std_alpha=0.1, std_v=0.1)
    _, _, lazy = run_kernel(X, y, batches, lazy=True, **kw)
    _, _, eager = run_kernel(X, y, batches, lazy=False, **kw)
    visited = sum(int(X.indptr[b + 1].sum() - X.indptr[b].sum()) for b in batches)
    rows = sum(len(b) for b in batches)
    assert eager == len(batches) * m + rows
    assert lazy <= visited + m + rows
    assert lazy < eager / 10


def test_lazy_and_eager_noise_have_the_same_distribution():
    """Two-sample comparison over 1500 independent runs per mode.

    Per output coordinate (alpha and v, 26 of them): KS two-sample test with a
    Bonferroni-corrected family-wise false-alarm rate of 1e-3, and z-tests of
    the means and log-variances at |z| < 5 (false alarm < 1e-5 for all).
    """
    n, m, runs = 20, 6, 1500
    X = unit_rows_csr(n, m, 0.3, seed=12)
    y = labels(n, "ridge", 13)
    batches = poisson_batches(n, 0.15, 25, seed=14)
    kw = dict(loss="ridge", lam_n=2.0, sigma_prime=3.0, clip=0.5, std_alpha=0.3, std_v=0.3)
    out = {}
    for lazy, offset in ((False, 0), (True, 10**6)):
        rows = []
        for r in range(runs):
            a, v, _ = run_kernel(X, y, batches, lazy=lazy, seed=offset + r, **kw)
            rows.append(np.concatenate([a, v]))
        out[lazy] = np.array(rows)
    eager, lazy = out[False], out[True]
    d = eager.shape[1]
    for c in range(d):
        p = stats.ks_2samp(eager[:, c], lazy[:, c]).pvalue
        assert p > 1e-3 / d, f"coordinate {c}: KS p = {p}"
        se = math.sqrt(eager[:, c].var() / runs + lazy[:, c].var() / runs)
        if se > 0:
            assert abs(eager[:, c].mean() - lazy[:, c].mean()) < 5 * se
            # log of the variance ratio has sd ~ sqrt(2/runs) * sqrt(2) (kurtosis ~ 3)
            z = math.log(eager[:, c].var() / lazy[:, c].var()) / math.sqrt(4.0 / runs)
            assert abs(z) < 5


# ----------------------------------------------------------------------------
# noise calibration and the exact v - X alpha identity
# ----------------------------------------------------------------------------

def test_one_step_noise_std_and_support():
    """Noise = noisy step minus noise-free step from the same state.

    The v noise (M = 20000 coords) and the alpha noise on the batch must have
    std tau: |s^2 / tau^2 - 1| < 5 sqrt(2 / k) (false alarm < 1e-6).  Alpha
    outside the batch must be untouched.
    """
    n, m = 500, 20000
    X = unit_rows_csr(n, m, 0.001, seed=21)
    y = labels(n, "ridge", 22)
    rng = np.random.default_rng(23)
    alpha0 = rng.standard_normal(n) * 0.1
    v0 = rng.standard_normal(m) * 0.1
    batch = [np.sort(rng.choice(n, 300, replace=False)).astype(np.int64)]
    tau = 0.7 * math.sqrt(2) * 0.25
    kw = dict(loss="ridge", lam_n=5.0, sigma_prime=300.0, clip=0.25, alpha=alpha0, v=v0)
    for lazy in (False, True):
        a_clean, v_clean, _ = run_kernel(X, y, batch, **kw)
        a_noisy, v_noisy, _ = run_kernel(X, y, batch, std_alpha=tau, std_v=tau, lazy=lazy,
                                         seed=31, **kw)
        eta_v = v_noisy - v_clean
        eta_a = a_noisy - a_clean
        outside = np.setdiff1d(np.arange(n), batch[0])
        assert np.array_equal(eta_a[outside], np.zeros(outside.size))
        for eta in (eta_v, eta_a[batch[0]]):
            k = eta.size
            assert abs(eta.mean()) < 5 * tau / math.sqrt(k)
            assert abs(np.mean(eta**2) / tau**2 - 1) < 5 * math.sqrt(2.0 / k)


def test_clip_bounds_every_update_and_large_clip_changes_nothing():
    n, m = 200, 30
    X = unit_rows_csr(n, m, 0.2, seed=41)
    rng = np.random.default_rng(42)
    for loss in LOSSES:
        y = labels(n, loss, 43)
        alpha0 = y * rng.uniform(0, 1, n) if loss != "ridge" else rng.standard_normal(n)
        v0 = rng.standard_normal(m)
        batch = [np.arange(0, n, 2, dtype=np.int64)]
        kw = dict(loss=loss, lam_n=2.0, sigma_prime=100.0, alpha=alpha0, v=v0)
        a_free, v_free, _ = run_kernel(X, y, batch, **kw)
        zeta_free = a_free - alpha0
        clip = 0.5 * np.abs(zeta_free).max()
        a_c, _, _ = run_kernel(X, y, batch, clip=clip, **kw)
        assert np.all(np.abs(a_c - alpha0) <= clip * (1 + 1e-12))
        assert np.any(np.abs(a_c - alpha0) >= clip * (1 - 1e-12))
        a_big, v_big, _ = run_kernel(X, y, batch, clip=2 * np.abs(zeta_free).max(), **kw)
        assert np.array_equal(a_big, a_free) and np.array_equal(v_big, v_free)


def test_v_minus_X_alpha_equals_accumulated_noise():
    """Spec 000 section 4.1: v_T - X alpha_T = sum_t (eta_v - X_B eta_alpha), exactly."""
    n, m = 80, 15
    X = unit_rows_csr(n, m, 0.3, seed=51)
    y = labels(n, "logistic", 52)
    batches = poisson_batches(n, 0.1, 50, seed=53)
    a, v, _ = run_kernel(X, y, batches, loss="logistic", lam_n=4.0, sigma_prime=8.0, clip=0.3,
                         std_alpha=0.2, std_v=0.2, lazy=False, seed=54)
    _, _, log = dual_scd_reference(
        X, y, np.zeros(n), np.zeros(m), batches, loss=1, lam_n=4.0, sigma_prime=8.0, clip=0.3,
        noise_std_alpha=0.2, noise_std_v=0.2, lazy_noise=False, noise_rng=np.random.default_rng(54))
    acc = np.zeros(m)
    for b, eta_a, eta_v in zip(batches, log["alpha"], log["v"]):
        acc += eta_v - X[b].T @ eta_a
    np.testing.assert_allclose(v - X.T @ a, acc, atol=1e-9)


# ----------------------------------------------------------------------------
# empirical sensitivity (spec 000 section 7, item 6)
# ----------------------------------------------------------------------------

def _one_step_delta(X, y, batch, alpha0, v0, sequential, clip, sigma_prime, loss):
    a, v, _ = run_kernel(X, y, [batch], loss=loss, lam_n=1.0, sigma_prime=sigma_prime,
                         clip=clip, sequential=sequential, alpha=alpha0, v=v0, box_eps=0.0
                         if loss == "hinge" else 1e-4)
    return np.concatenate([a - alpha0, v - v0])


@pytest.mark.parametrize("loss", list(LOSSES))
def test_empirical_sensitivity(loss):
    n, m, L, C = 60, 20, 8, 0.3
    X = unit_rows_csr(n, m, 0.3, seed=61)
    y = labels(n, loss, 62)
    rng = np.random.default_rng(63)
    worst_dual, worst_seq = 0.0, 0.0
    for _ in range(200):
        alpha0 = rng.standard_normal(n) * 2
        v0 = rng.standard_normal(m) * 2
        batch = np.sort(rng.choice(n, L, replace=False)).astype(np.int64)
        k = rng.choice(batch)
        without = batch[batch != k]
        for sequential in (False, True):
            d = _one_step_delta(X, y, batch, alpha0, v0, sequential, C, L if not sequential else 1.0, loss)
            d0 = _one_step_delta(X, y, without, alpha0, v0, sequential, C,
                                 L if not sequential else 1.0, loss)
            diff = np.linalg.norm(d - d0)
            if sequential:
                worst_seq = max(worst_seq, diff)
            else:
                worst_dual = max(worst_dual, diff)
    assert worst_dual <= math.sqrt(2) * C * (1 + 1e-12)
    assert worst_dual >= 0.9 * C  # |zeta_k| = C is reached, so the bound is nearly tight
    assert worst_seq <= C * math.sqrt(4 * L * L - 2) * (1 + 1e-12)
    assert worst_seq <= 2 * C * math.sqrt(L * (L + 1))
