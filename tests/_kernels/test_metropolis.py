"""Tests of the numba Metropolis kernel (fastdp/_kernels/_metropolis.py).

* A plain numpy/Python replay of the chain, fed with the random numbers the
  kernel says a chain consumes, must give bit-identical states and acceptance
  counts (spec 001, T20), for box and polytope constraints and both objectives.
* Results do not depend on the number of threads; same seed, same bits.
* The random numbers: ziggurat normals (generated in blocks, first tries
  vectorised) and open uniforms pass KS / chi-square / lag-correlation tests
  (false-alarm rate 1e-3 per test); the block layout is deterministic.
* The chains sample the right density: 1-D KS test against the exact CDF and a
  2-D histogram against quadrature (T8/T9).
"""

import math

import numba
import numpy as np
import pytest
from scipy import stats

from fastdp._kernels import _metropolis as K
from fastdp._kernels import _xoshiro as X

ALPHA = 1e-3  # false-alarm rate of every statistical test in this file


# --------------------------------------------------------------------------
# numpy reference (independent of the kernel's arithmetic layout)
# --------------------------------------------------------------------------
def ref_objective(kind, A, b, tau, weight, x):
    s = b.copy()
    if kind == K.OBJ_MAX_AFFINE:
        for j in range(A.shape[1]):
            s = s + A[:, j] * x[j]
        return float(np.max(s))
    for j in range(A.shape[1]):
        s = s - A[:, j] * x[j]
    total = 0.0
    for r in s:
        total += tau * r if r >= 0 else (tau - 1.0) * r
    return weight * total


def ref_inside(y, H, h, lo, hi, use_box):
    if use_box:
        return bool(np.all((y >= lo) & (y <= hi)))
    s = np.zeros(H.shape[0])
    for j in range(H.shape[1]):
        s = s + H[:, j] * y[j]
    return bool(np.all(s <= h))


def ref_chain(kind, A, b, tau, weight, beta, H, h, lo, hi, use_box, x0, step_std, normals, uniforms):
    x = x0.copy()
    fx = ref_objective(kind, A, b, tau, weight, x)
    accepted = 0
    for t in range(normals.shape[0]):
        y = x + step_std * normals[t]
        if not ref_inside(y, H, h, lo, hi, use_box):
            continue
        fy = ref_objective(kind, A, b, tau, weight, y)
        threshold = fx - math.log(uniforms[t]) / beta if beta > 0 else math.inf
        if fy < threshold:
            x, fx = y, fy
            accepted += 1
    return x, accepted


def run_kernel(kind, A, b, beta, x0, n_steps, step_std, seeds, *, tau=0.5, weight=1.0,
               box=None, poly=None):
    d = A.shape[1]
    At = np.ascontiguousarray(A.T)
    if box is not None:
        lo, hi = box
        H, h, use_box = np.zeros((0, d)), np.zeros(0), True
    else:
        H, h = poly
        lo = hi = np.zeros(d)
        use_box = False
    return K.metropolis_chains(kind, At, b, tau, weight, beta, H, h, lo, hi, use_box,
                               np.ascontiguousarray(x0), n_steps, np.broadcast_to(step_std, (d,)).copy(),
                               np.asarray(seeds, dtype=np.uint64))


@pytest.fixture(scope="module")
def instance():
    rng = np.random.default_rng(7)
    d, m = 3, 6
    return rng.standard_normal((m, d)), rng.standard_normal(m)


@pytest.mark.parametrize("kind", [K.OBJ_MAX_AFFINE, K.OBJ_SUM_PINBALL])
@pytest.mark.parametrize("constraint", ["box", "polytope"])
def test_kernel_matches_numpy_reference_bit_for_bit(instance, kind, constraint):
    A, b = instance
    d = A.shape[1]
    n_steps, beta, std = 400, 0.7, np.array([0.5, 0.3, 0.8])
    lo, hi = -np.ones(d), np.ones(d)
    H = np.vstack([np.eye(d), -np.eye(d), np.ones((1, d))])
    h = np.concatenate([np.ones(d), np.ones(d), [1.0]])
    x0 = np.zeros((5, d))
    seeds = np.array([0, 1, 2**63 + 5, 2**64 - 1, 123456789], dtype=np.uint64)
    kw = dict(box=(lo, hi)) if constraint == "box" else dict(poly=(H, h))
    X, acc = run_kernel(kind, A, b, beta, x0, n_steps, std, seeds, tau=0.3, weight=1.7, **kw)
    for c, seed in enumerate(seeds):
        normals, uniforms = K.chain_random_stream(seed, n_steps, d)
        x_ref, acc_ref = ref_chain(kind, A, b, 0.3, 1.7, beta, H, h, lo, hi, constraint == "box",
                                   x0[c], std, normals, uniforms)
        assert acc[c] == acc_ref
        assert np.array_equal(X[c], x_ref)
        assert 0 < acc_ref < n_steps  # the comparison exercised both branches


def test_objective_values_match_reference(instance):
    A, b = instance
    X = np.random.default_rng(1).standard_normal((50, A.shape[1]))
    At = np.ascontiguousarray(A.T)
    for kind in (K.OBJ_MAX_AFFINE, K.OBJ_SUM_PINBALL):
        got = K.objective_values(kind, At, b, 0.25, 2.0, X)
        want = [ref_objective(kind, A, b, 0.25, 2.0, x) for x in X]
        assert np.array_equal(got, want)
    # and against the closed forms
    np.testing.assert_allclose(K.objective_values(0, At, b, 0.0, 1.0, X), (X @ A.T + b).max(1), rtol=1e-13)
    r = b - X @ A.T
    np.testing.assert_allclose(K.objective_values(1, At, b, 0.25, 2.0, X),
                               2.0 * np.maximum(0.25 * r, -0.75 * r).sum(1), rtol=1e-12)


def test_thread_count_and_seed_reproducibility(instance):
    A, b = instance
    d = A.shape[1]
    x0 = np.zeros((64, d))
    seeds = np.arange(64, dtype=np.uint64) * np.uint64(7919)
    box = (-np.ones(d), np.ones(d))
    original = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        X1, a1 = run_kernel(0, A, b, 1.0, x0, 300, 0.4, seeds, box=box)
        numba.set_num_threads(max(1, numba.config.NUMBA_NUM_THREADS))
        X2, a2 = run_kernel(0, A, b, 1.0, x0, 300, 0.4, seeds, box=box)
    finally:
        numba.set_num_threads(original)
    assert np.array_equal(X1, X2) and np.array_equal(a1, a2)
    # a chain's output depends only on its own seed
    X3, _ = run_kernel(0, A, b, 1.0, x0[:3], 300, 0.4, seeds[[5, 0, 9]], box=box)
    assert np.array_equal(X3, X1[[5, 0, 9]])
    # different seeds give different chains
    assert not np.array_equal(X1[0], X1[1])


def test_chains_never_leave_the_polytope(instance):
    A, b = instance
    d = A.shape[1]
    # a thin simplex-like set: many proposals fall outside
    H = np.vstack([-np.eye(d), np.ones((1, d))])
    h = np.concatenate([np.zeros(d), [0.3]])
    x0 = np.full((200, d), 0.05)
    X, acc = run_kernel(0, A, b, 0.1, x0, 200, 0.5, np.arange(200), poly=(H, h))
    assert np.all(X @ H.T <= h)
    assert np.all(acc < 200)


def test_beta_zero_accepts_every_inside_proposal(instance):
    A, b = instance
    d = A.shape[1]
    big = (-1e6 * np.ones(d), 1e6 * np.ones(d))
    _, acc = run_kernel(0, A, b, 0.0, np.zeros((4, d)), 100, 1.0, np.arange(4), box=big)
    assert np.all(acc == 100)


def test_zero_steps_returns_the_start(instance):
    A, b = instance
    x0 = np.full((3, A.shape[1]), 0.25)
    X, acc = run_kernel(0, A, b, 1.0, x0, 0, 1.0, np.arange(3), box=(-np.ones(3), np.ones(3)))
    assert np.array_equal(X, x0) and np.all(acc == 0)


# --------------------------------------------------------------------------
# random numbers
# --------------------------------------------------------------------------
def test_ziggurat_normals_and_uniforms_distribution():
    normals, uniforms = K.chain_random_stream(np.uint64(2024), 200_000, 1)
    z = normals[:, 0]
    assert stats.kstest(z, "norm").pvalue > ALPHA
    assert stats.kstest(uniforms, "uniform").pvalue > ALPHA
    assert np.all((uniforms > 0) & (uniforms < 1))
    # the tail branch (|z| > r = 3.654) fires at the right rate: two-sided binomial test
    tail = np.count_nonzero(np.abs(z) > X._ZIG_R)
    assert stats.binomtest(tail, z.size, 2 * stats.norm.sf(X._ZIG_R)).pvalue > ALPHA
    # moments: 4 standard errors
    assert abs(z.mean()) < 4 / math.sqrt(z.size)
    assert abs(z.var() - 1) < 4 * math.sqrt(2 / z.size)


def test_block_stream_normals_chi_square_positions_and_lag():
    """d = 10 layout (93 steps per block): every slot of a step and the stream as a whole.

    False-alarm rate ALPHA in total: chi-square over 100 equiprobable bins of all
    normals (ALPHA / 3), per-slot KS tests Bonferroni-corrected (ALPHA / 3 over 10
    slots), lag-1 correlation of the flattened stream within 4 SE (~6e-5).
    """
    d = 10
    normals, uniforms = K.chain_random_stream(np.uint64(99), 100_000, d)
    z = normals.ravel()
    edges = stats.norm.ppf(np.linspace(0, 1, 101))
    counts = np.histogram(z, bins=edges)[0]
    assert stats.chisquare(counts).pvalue > ALPHA / 3
    for j in range(d):
        assert stats.kstest(normals[:, j], "norm").pvalue > ALPHA / 30
    # steps at the start and the end of a block look alike (no positional bias)
    block = X.block_steps(d)
    first = normals[:(normals.shape[0] // block) * block].reshape(-1, block, d)
    assert stats.ks_2samp(first[:, 0].ravel(), first[:, -1].ravel()).pvalue > ALPHA / 3
    r = np.corrcoef(z[:-1], z[1:])[0, 1]
    assert abs(r) < 4 / math.sqrt(z.size)
    assert abs(np.corrcoef(uniforms[:-1], uniforms[1:])[0, 1]) < 4 / math.sqrt(uniforms.size)


def test_block_stream_prefix_and_partial_blocks():
    d = 10
    block = X.block_steps(d)
    assert block == 1024 // (d + 1)
    n_long, u_long = K.chain_random_stream(np.uint64(5), 3 * block, d)
    n_short, u_short = K.chain_random_stream(np.uint64(5), 2 * block, d)
    # whole blocks are a prefix of longer runs
    assert np.array_equal(n_long[:2 * block], n_short) and np.array_equal(u_long[:2 * block], u_short)
    # a partial last block is generated as its own (shorter) block: same seed, same bits
    n_a, u_a = K.chain_random_stream(np.uint64(5), 2 * block + 7, d)
    n_b, u_b = K.chain_random_stream(np.uint64(5), 2 * block + 7, d)
    assert np.array_equal(n_a, n_b) and np.array_equal(u_a, u_b)
    assert np.array_equal(n_a[:2 * block], n_short)


@pytest.mark.parametrize("beta", [0.05, 3.0])
def test_kernel_matches_reference_over_several_blocks_d10(beta):
    # d = 10, m = 20: 250 steps span three random blocks; beta = 3 exercises the exact
    # log(u) comparison between the squeeze bounds, beta = 0.05 the paper's regime
    rng = np.random.default_rng(11)
    A, b = rng.standard_normal((20, 10)), rng.standard_normal(20)
    lo, hi = -np.ones(10), np.ones(10)
    seeds = np.array([3, 2**64 - 2], dtype=np.uint64)
    x0 = np.zeros((2, 10))
    for kind in (K.OBJ_MAX_AFFINE, K.OBJ_SUM_PINBALL):
        X, acc = run_kernel(kind, A, b, beta, x0, 250, 0.2, seeds, tau=0.4, weight=1.0, box=(lo, hi))
        for c, seed in enumerate(seeds):
            normals, uniforms = K.chain_random_stream(seed, 250, 10)
            x_ref, acc_ref = ref_chain(kind, A, b, 0.4, 1.0, beta, None, None, lo, hi, True,
                                       x0[c], np.full(10, 0.2), normals, uniforms)
            assert acc[c] == acc_ref and np.array_equal(X[c], x_ref)
            assert 0 < acc_ref < 250


def test_ziggurat_tables_cover_equal_areas():
    x, f = X._ZIG_X, X._ZIG_F
    v = x[0] * f[1]  # base strip area (virtual rectangle)
    areas = x[1:-1] * (f[2:] - f[1:-1])
    np.testing.assert_allclose(areas, v, rtol=1e-11)
    # base strip = rectangle [0, r] x [0, f(r)] + the tail
    assert math.isclose(v, x[1] * f[1] + math.sqrt(math.pi / 2) * math.erfc(x[1] / math.sqrt(2)),
                        rel_tol=1e-14)


# --------------------------------------------------------------------------
# the target density
# --------------------------------------------------------------------------
def _laplace_on_unit_interval_cdf(beta):
    """CDF of the density ∝ exp(−beta·|t|) on [−1, 1] (the 1-D target of the
    box-constrained chains below), for the KS tests."""
    norm = 2 * (1 - math.exp(-beta)) / beta

    def cdf(t):
        t = np.asarray(t)
        left = (np.exp(-beta * np.abs(np.minimum(t, 0))) - math.exp(-beta)) / beta
        right = (1 - np.exp(-beta * np.maximum(t, 0))) / beta
        return np.where(t < 0, left, (1 - math.exp(-beta)) / beta + right) / norm

    return cdf


def test_one_dimensional_chain_matches_truncated_laplace():
    # f(x) = |x| on [-1, 1], beta = 0.5 (spec T8 with eps = 1, b_max = 1)
    A, b, beta = np.array([[1.0], [-1.0]]), np.zeros(2), 0.5
    n = 20_000
    X, acc = run_kernel(0, A, b, beta, np.zeros((n, 1)), 300, math.sqrt(0.1), np.arange(n),
                        box=(np.array([-1.0]), np.array([1.0])))
    x = X[:, 0]
    cdf = _laplace_on_unit_interval_cdf(beta)
    assert stats.kstest(x, cdf).pvalue > ALPHA
    mean_abs = 1 / beta - math.exp(-beta) / (1 - math.exp(-beta))
    assert abs(np.abs(x).mean() - mean_abs) < 4 * np.abs(x).std() / math.sqrt(n)


def test_two_dimensional_chain_histogram_matches_quadrature():
    rng = np.random.default_rng(3)
    A, b = rng.standard_normal((3, 2)) * 2, rng.standard_normal(3)
    beta = 1.0 / 2.0  # eps = 1, b_max = 1
    n = 20_000
    X, _ = run_kernel(0, A, b, beta, np.zeros((n, 2)), 400, math.sqrt(0.1), np.arange(n),
                      box=(-np.ones(2), np.ones(2)))
    grid = (np.arange(400) + 0.5) / 400 * 2 - 1
    gx, gy = np.meshgrid(grid, grid, indexing="ij")
    dens = np.exp(-beta * (np.stack([gx, gy], -1) @ A.T + b).max(-1))
    p = dens.reshape(10, 40, 10, 40).sum(axis=(1, 3))
    p /= p.sum()
    counts, _, _ = np.histogram2d(X[:, 0], X[:, 1], bins=10, range=[[-1, 1], [-1, 1]])
    tv = 0.5 * np.abs(counts / n - p).sum()
    assert tv < 0.03
    assert stats.chisquare(counts.ravel(), p.ravel() * n).pvalue > ALPHA


# --------------------------------------------------------------------------
# hit-and-run (spec 001, section 2.3.4)
# --------------------------------------------------------------------------
def ref_hit_and_run(A, b, beta, lo, hi, x0, normals, uniforms):
    """numpy replay: chord by the box, envelope by brute force (all pairwise
    intersections, then merging sub-intervals with the same active piece)."""
    x = x0.copy()
    for t in range(normals.shape[0]):
        u = normals[t] / math.sqrt(np.sum(normals[t] ** 2))
        with np.errstate(divide="ignore"):
            ta, tb = (lo - x) / u, (hi - x) / u
        t_lo = min(np.max(np.minimum(ta, tb)), 0.0)
        t_hi = max(np.min(np.maximum(ta, tb)), 0.0)
        c, s = A @ x + b, A @ u
        ds, dc = s[None, :] - s[:, None], c[:, None] - c[None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            kinks = (dc / ds)[ds != 0]
        cuts = np.unique(np.concatenate([[t_lo, t_hi], kinks[(kinks > t_lo) & (kinks < t_hi)]]))
        mids = 0.5 * (cuts[:-1] + cuts[1:])
        active = np.argmax(c[None, :] + s[None, :] * mids[:, None], axis=1)
        keep = np.concatenate([[True], active[1:] != active[:-1]])
        knots = np.concatenate([cuts[:-1][keep], [t_hi]])
        pieces = active[keep]
        width = np.diff(knots)
        g_left = c[pieces] + s[pieces] * knots[:-1]
        kappa = beta * s[pieces] * width
        shape = np.where(np.abs(kappa) < 1e-12, -0.5 * kappa,
                         np.log(np.abs(np.expm1(-kappa)) / np.where(kappa == 0, 1, np.abs(kappa))))
        log_mass = np.log(width) - beta * g_left + shape
        p = np.exp(log_mass - log_mass.max())
        k = min(int(np.searchsorted(np.cumsum(p), uniforms[t, 0] * p.sum(), side="right")), len(p) - 1)
        if abs(kappa[k]) < 1e-12:
            off = uniforms[t, 1] * width[k]
        else:
            off = -math.log1p(uniforms[t, 1] * math.expm1(-kappa[k])) * width[k] / kappa[k]
        x = np.clip(x + min(max(knots[k] + off, knots[k]), knots[k + 1]) * u, lo, hi)
    return x


def test_hit_and_run_matches_numpy_replay():
    rng = np.random.default_rng(21)
    d, m = 3, 7
    A, b = rng.standard_normal((m, d)) * 2, rng.standard_normal(m)
    lo, hi = -np.ones(d), np.full(d, 0.5)
    seeds = np.array([1, 77, 2**64 - 3], dtype=np.uint64)
    x0 = np.zeros((3, d))
    X = K.hit_and_run_chains(A, b, 1.5, np.zeros((0, d)), np.zeros(0), lo, hi, True, x0, 60, seeds)
    for c, seed in enumerate(seeds):
        normals, uniforms = K.hit_and_run_random_stream(seed, 60, d)
        x_ref = ref_hit_and_run(A, b, 1.5, lo, hi, x0[c], normals, uniforms)
        np.testing.assert_allclose(X[c], x_ref, rtol=1e-9, atol=1e-9)
    assert np.all((X >= lo) & (X <= hi))


def test_hit_and_run_one_dimensional_matches_truncated_laplace():
    # f(x) = |x| on [-1, 1], beta = 2: in d = 1 every step is an exact draw from pi
    A, b, beta = np.array([[1.0], [-1.0]]), np.zeros(2), 2.0
    n = 20_000
    X = K.hit_and_run_chains(A, b, beta, np.zeros((0, 1)), np.zeros(0), np.array([-1.0]),
                             np.array([1.0]), True, np.zeros((n, 1)), 1, np.arange(n, dtype=np.uint64))
    cdf = _laplace_on_unit_interval_cdf(beta)
    assert stats.kstest(X[:, 0], cdf).pvalue > ALPHA
