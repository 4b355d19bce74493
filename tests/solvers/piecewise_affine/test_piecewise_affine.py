"""Tests of fastdp.solvers.piecewise_affine (spec 001, acceptance tests T1-T21).

References are independent of the code under test: brute-force grids, closed
forms (truncated Laplace), quadrature, scikit-learn's QuantileRegressor, the
greedy resource allocation, explicit enumeration of pinball pieces, and exact
density ratios. Every statistical test states its false-alarm rate: p-value
thresholds ALPHA = 1e-3, or "k SE" bands (4 SE: about 6e-5 two-sided under
normality).
"""

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from fastdp.exceptions import ValidationError
from fastdp.privacy import get_accountant
from fastdp.privacy.events import ExponentialMechanismEvent, PureEvent, SelfComposedEvent
from fastdp.solvers import piecewise_affine as pa
from fastdp.solvers.piecewise_affine.samplers import (
    exact_1d_pieces,
    exact_1d_sample,
    importance_estimates,
    independence_steps,
    independence_tv_bound,
    metropolis_sample,
    rejection_sample,
    vector_laplace,
)

bounds = pa.bounds
ALPHA = 1e-3


def random_problem(seed, d=2, m=5, c=1.0, b_max=1.0):
    rng = np.random.default_rng(seed)
    return pa.PiecewiseAffineProblem(rng.standard_normal((m, d)), rng.standard_normal(m), b_max,
                                     pa.Box.cube(d, c))


def abs_problem(c=1.0, b=(0.0, 0.0), b_max=1.0):
    """f(x) = max(x + b0, -x + b1) on [-c, c]; |x| for b = 0."""
    return pa.PiecewiseAffineProblem([[1.0], [-1.0]], list(b), b_max, pa.Box([-c], [c]))


def truncated_laplace_mean_abs(beta, c):
    return 1 / beta - c * math.exp(-beta * c) / (1 - math.exp(-beta * c))


# --------------------------------------------------------------------------
# T1-T5: core maths
# --------------------------------------------------------------------------
@pytest.mark.parametrize("d", [1, 2])
@pytest.mark.parametrize("seed", range(4))
def test_T1_lp_matches_brute_force_grid(d, seed):
    prob = random_problem(seed, d=d, m=6, c=1.5)
    x_opt, f_opt = prob.solve()
    assert prob.constraints.contains(x_opt)
    assert abs(prob.value(x_opt) - f_opt) <= 1e-8
    n = 200_001 if d == 1 else 1001
    grid = np.linspace(-1.5, 1.5, n)
    pts = grid[:, None] if d == 1 else np.stack(np.meshgrid(grid, grid), -1).reshape(-1, 2)
    f_grid = prob.value(pts).min()
    h = 3.0 / (n - 1)
    assert f_opt <= f_grid + 1e-9
    assert f_grid - f_opt <= prob.lipschitz * h * math.sqrt(d)


def test_T1_lp_on_polytope_and_determinism():
    rng = np.random.default_rng(11)
    A, b = rng.standard_normal((8, 2)), rng.standard_normal(8)
    H = np.array([[1.0, 1.0], [-1.0, 0.0], [0.0, -1.0], [1.0, -2.0]])
    h = np.array([1.0, 1.0, 1.0, 1.5])
    prob = pa.minimax_lp_problem(A, b, 0.5, H, h)
    x_opt, f_opt = prob.solve()
    grid = np.linspace(-1, 2, 601)
    pts = np.stack(np.meshgrid(grid, grid), -1).reshape(-1, 2)
    pts = pts[prob.constraints.contains(pts)]
    assert f_opt <= prob.value(pts).min() + 1e-9
    assert prob.value(pts).min() - f_opt <= prob.lipschitz * 3 / 600 * math.sqrt(2)
    again = pa.minimax_lp_problem(A, b, 0.5, H, h).solve()
    assert np.array_equal(again[0], x_opt)


def test_T2_lemma18_score_sensitivity():
    rng = np.random.default_rng(0)
    prob = random_problem(1, d=3, m=7)
    X = rng.uniform(-1, 1, (10_000, 3))
    b_other = prob.b + rng.uniform(-1, 1, (10_000, 7)) * prob.b_max
    f1 = prob.value(X)
    f2 = (np.einsum("nd,md->nm", X, prob.A) + b_other).max(1)
    assert np.max(np.abs(f1 - f2)) <= prob.b_max + 1e-12
    shifted = prob.with_offsets(prob.b + prob.b_max)
    np.testing.assert_allclose(shifted.value(X) - f1, prob.b_max, atol=1e-12)


def test_T3_subgradient_and_lemma22():
    rng = np.random.default_rng(2)
    prob = random_problem(3, d=3, m=9, c=2.0)
    for _ in range(200):
        x0, x = rng.uniform(-2, 2, (2, 3))
        u = prob.scores(x0)
        gamma = u.max() - u
        for j in range(prob.n_pieces):
            assert prob.value(x) >= prob.value(x0) + prob.A[j] @ (x - x0) - gamma[j] - 1e-12
        k = int(np.argmax(u))
        assert prob.value(x) >= prob.value(x0) + prob.A[k] @ (x - x0) - 1e-12


def test_T4_resource_allocation_matches_greedy():
    rng = np.random.default_rng(4)
    for _ in range(1000):
        n = int(rng.integers(1, 6))
        c = rng.normal(1.0, 1.0, n)
        if not np.any(c > 0):
            c[0] = 0.5
        zbar, mu = rng.uniform(0, 2, n), rng.uniform(0, 1)
        x_max = 3.0
        prob = pa.resource_allocation_problem(c, zbar, mu, x_max, delta=0.1)
        x = rng.uniform(0, x_max)
        greedy = pa.resource_allocation_utility(x, c, zbar)
        assert abs(prob.value(np.array([x])) - (mu * x - greedy)) <= 1e-9
    one = pa.resource_allocation_problem([1.0, 3.0, -1.0], [1, 1, 1], 0.5, 2.0, 0.2)
    both = pa.resource_allocation_problem([1.0, 3.0, -1.0], [1, 1, 1], 0.5, 2.0, 0.2,
                                          adjacency="all_agents")
    assert one.b_max == pytest.approx(0.6) and both.b_max == pytest.approx(0.8)


def test_T5_false_positive_bound():
    assert bounds.false_positive_lower_bound(0.1, 0.05) == pytest.approx(0.944741, abs=1e-6)


# --------------------------------------------------------------------------
# T6-T9: samplers
# --------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 10, 50])
@pytest.mark.parametrize("rate", [0.1, 1.0])
def test_T6_vector_laplace(n, rate):
    rng = np.random.default_rng(n * 10 + int(rate * 10))
    N = 50_000
    W = vector_laplace(rng, n, rate, N)
    norms = np.linalg.norm(W, axis=1)
    assert stats.kstest(norms, stats.gamma(n, scale=1 / rate).cdf).pvalue > ALPHA
    assert abs(norms.mean() - n / rate) < 4 * math.sqrt(n) / rate / math.sqrt(N)
    E = W / norms[:, None]
    assert np.linalg.norm(E.mean(0)) < 4 * math.sqrt(1 / N) * math.sqrt(n) / math.sqrt(n) + 4 / math.sqrt(N)
    if n > 1:
        assert np.max(np.abs(E.T @ E / N - np.eye(n) / n)) < 0.01


def test_T7_finite_exponential_mechanism_distribution():
    prob = random_problem(5, d=2, m=5)
    x0 = np.array([0.3, -0.2])
    beta = 1.7
    rng = np.random.default_rng(0)
    _, idx = prob.select_subgradients(np.tile(x0, (100_000, 1)), beta, rng)
    logits = beta * prob.scores(x0)
    p = np.exp(logits - logits.max())
    p /= p.sum()
    counts = np.bincount(idx, minlength=5)
    assert stats.chisquare(counts, p * idx.size).pvalue > ALPHA
    # inverse-CDF sampling of the same law agrees (two-sample chi-square)
    inv = np.searchsorted(np.cumsum(p), rng.random(100_000) * np.cumsum(p)[-1], side="right")
    table = np.vstack([counts, np.bincount(inv, minlength=5)])
    assert stats.chi2_contingency(table).pvalue > ALPHA


@pytest.mark.parametrize("eps, mean_abs, C0, paper, d2", [
    (1.0, 0.458506, 1.270747, 2.541494, 2.479210),
    (10.0, 0.193216, 5.033918, 1.006784, 0.523240),
])
def test_T8_one_dimensional_exact_samplers_and_reference_values(eps, mean_abs, C0, paper, d2):
    beta = eps / 2
    assert truncated_laplace_mean_abs(beta, 1.0) == pytest.approx(mean_abs, abs=1e-6)
    C_exact = beta / (1 - math.exp(-beta))
    assert C_exact == pytest.approx(C0, abs=1e-6)
    assert bounds.exponential_mechanism_bound(C_exact, 1.0, eps) == pytest.approx(paper, abs=1e-6)
    assert bounds.exponential_mechanism_log_bound(C_exact, 1.0, eps) == pytest.approx(d2, abs=1e-6)
    assert bounds.exponential_mechanism_dimension_bound(1, 1.0, eps) == pytest.approx(2 / eps)
    prob = abs_problem()

    def cdf(t):
        t = np.asarray(t)
        z = 2 * (1 - math.exp(-beta)) / beta
        neg = (np.exp(-beta * np.abs(np.minimum(t, 0))) - math.exp(-beta)) / beta
        pos = (1 - math.exp(-beta)) / beta + (1 - np.exp(-beta * np.maximum(t, 0))) / beta
        return np.where(t < 0, neg, pos) / z

    rng = np.random.default_rng(8)
    for X in (exact_1d_sample(prob, beta, 100_000, rng)[:, 0],
              rejection_sample(prob, beta, 100_000, rng)[0][:, 0]):
        assert stats.kstest(X, cdf).pvalue > ALPHA
        assert abs(np.abs(X).mean() - mean_abs) < 4 * np.abs(X).std() / math.sqrt(X.size)
    est = importance_estimates(prob, beta, 200_000, rng)
    assert abs(est["C0"] - C0) < 4 * est["C0_se"]
    assert abs(est["mean_f"] - mean_abs) < 4 * est["mean_f_se"]


def test_T8_metropolis_through_the_public_api():
    prob = abs_problem()
    res = pa.exponential_mechanism(prob, 1.0, sampler="metropolis", n_runs=20_000, n_steps=500,
                                   random_state=3)
    x = res.x[:, 0]
    assert not res.exact and "approximate" in res.privacy_note
    beta = 0.5
    exact = exact_1d_sample(prob, beta, 20_000, np.random.default_rng(1))[:, 0]
    assert stats.ks_2samp(x, exact).pvalue > ALPHA
    acc = res.diagnostics["acceptance_rate_nonprivate"]
    assert 0.5 < acc.mean() < 1.0


def test_T9_two_dimensional_rejection_sampler_and_importance_sampling():
    rng = np.random.default_rng(9)
    prob = pa.PiecewiseAffineProblem(rng.standard_normal((3, 2)) * 2, rng.standard_normal(3), 1.0,
                                     pa.Box.cube(2, 1.0))
    for eps in (0.1, 1.0):
        beta = eps / 2
        grid = (np.arange(400) + 0.5) / 200 - 1
        pts = np.stack(np.meshgrid(grid, grid, indexing="ij"), -1).reshape(-1, 2)
        f = prob.value(pts)
        w = np.exp(-beta * f)
        p = w.reshape(10, 40, 10, 40).sum(axis=(1, 3)).ravel()
        p /= p.sum()
        X, _ = rejection_sample(prob, beta, 50_000, rng)
        counts, _, _ = np.histogram2d(X[:, 0], X[:, 1], bins=10, range=[[-1, 1], [-1, 1]])
        assert stats.chisquare(counts.ravel(), p * X.shape[0]).pvalue > ALPHA
        est = importance_estimates(prob, beta, 100_000, rng)
        assert abs(est["mean_f"] - (w * f).sum() / w.sum()) < 4 * est["mean_f_se"]


def test_metropolis_on_polytope_matches_rejection_sampler():
    H = np.array([[1.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
    h = np.array([1.0, 0.0, 0.0])
    rng = np.random.default_rng(12)
    prob = pa.minimax_lp_problem(rng.standard_normal((4, 2)) * 3, rng.standard_normal(4), 1.0, H, h)
    res = pa.exponential_mechanism(prob, 2.0, sampler="metropolis", n_runs=10_000, n_steps=300,
                                   random_state=2)
    assert np.all(prob.constraints.contains(res.x))
    ref, _ = rejection_sample(prob, 1.0, 10_000, rng)
    for j in range(2):
        assert stats.ks_2samp(res.x[:, j], ref[:, j]).pvalue > ALPHA / 2


@pytest.mark.parametrize("constraint", ["box", "polytope"])
def test_hit_and_run_matches_rejection_sampler(constraint):
    """Spec 2.3.4 extension: hit-and-run against the exact sampler (KS per coordinate,
    Bonferroni over the two coordinates: false-alarm rate ALPHA)."""
    rng = np.random.default_rng(41)
    A, b = rng.standard_normal((4, 2)) * 3, rng.standard_normal(4)
    if constraint == "box":
        prob = pa.PiecewiseAffineProblem(A, b, 1.0, pa.Box([-1.0, -0.5], [1.0, 2.0]))
    else:
        H = np.array([[1.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
        prob = pa.minimax_lp_problem(A, b, 1.0, H, np.array([1.0, 0.0, 0.0]))
    res = pa.exponential_mechanism(prob, 2.0, sampler="hit_and_run", n_steps=25, n_runs=6000,
                                   random_state=3)
    assert np.all(prob.constraints.contains(res.x))
    assert res.delta is None and not res.exact and "hit-and-run" in res.privacy_note
    ref, _ = rejection_sample(prob, 1.0, 6000, rng)
    for j in range(2):
        assert stats.ks_2samp(res.x[:, j], ref[:, j]).pvalue > ALPHA / 2


def test_hit_and_run_needs_explicit_pieces():
    Z = np.random.default_rng(0).standard_normal((6, 2))
    prob = pa.quantile_regression_problem(Z, Z @ [1.0, -1.0], 0.5, 1.0, pa.Box.cube(2, 3.0))
    with pytest.raises(ValidationError, match="explicit pieces"):
        pa.exponential_mechanism(prob, 1.0, sampler="hit_and_run", n_steps=5)


# --------------------------------------------------------------------------
# T10-T14: privacy
# --------------------------------------------------------------------------
def log_density_1d(prob, beta, x):
    _, _, log_mass = exact_1d_pieces(prob, beta)
    log_z = np.logaddexp.reduce(log_mass)
    return -beta * prob.value(x[:, None]) - log_z


def test_T10_exact_density_ratio_reference_pair():
    a = [[14.27845693], [19.44490688]]
    D = pa.PiecewiseAffineProblem(a, [-0.82594603, 0.31036747], 1.0, pa.Box([-1.0], [1.0]))
    Dp = D.with_offsets([0.15382559, -0.68647065])
    assert np.max(np.abs(D.b - Dp.b)) <= 1.0
    x = np.linspace(-1, 1, 200_001)
    ratio = np.abs(log_density_1d(D, 0.5, x) - log_density_1d(Dp, 0.5, x))
    assert ratio.max() == pytest.approx(0.98736, abs=2e-5)
    # attained from x ~ 0.163 on (both densities use one piece each there)
    assert ratio[np.searchsorted(x, 0.164)] == pytest.approx(ratio.max(), abs=1e-6)
    assert ratio[np.searchsorted(x, 0.160)] < ratio.max() - 1e-4
    # with beta = eps / b_max (missing factor 2) the same pair violates eps = 1
    ratio_bug = np.abs(log_density_1d(D, 1.0, x) - log_density_1d(Dp, 1.0, x))
    assert ratio_bug.max() > 1.0


def test_T10_random_adjacent_pairs_respect_epsilon():
    rng = np.random.default_rng(10)
    x = np.linspace(-1, 1, 4001)
    worst = 0.0
    for trial in range(300):
        m = int(rng.integers(2, 6))
        prob = pa.PiecewiseAffineProblem(rng.standard_normal((m, 1)) * 5, rng.standard_normal(m), 1.0,
                                         pa.Box([-1.0], [1.0]))
        kind = trial % 3
        if kind == 0:
            shift = rng.choice([-1.0, 1.0], m)
        elif kind == 1:
            shift = np.zeros(m)
            shift[rng.integers(m)] = rng.choice([-1.0, 1.0])
        else:
            shift = rng.uniform(-1, 1, m)
        eps = 1.0
        ld = log_density_1d(prob, eps / 2, x) - log_density_1d(prob.with_offsets(prob.b + shift), eps / 2, x)
        worst = max(worst, np.abs(ld).max())
    assert worst <= 1.0 + 1e-6


def _log_ratio(k1, n1, k2, n2):
    est = math.log((k2 / n2) / (k1 / n1))
    se = math.sqrt(1 / k1 - 1 / n1 + 1 / k2 - 1 / n2)
    return est, se


def _audit(sample_D, sample_Dp, eps):
    """Largest (estimate - 3 SE) over the spec's events, and the R = [-1, -0.9] estimate."""
    n1, n2 = sample_D.size, sample_Dp.size
    events = [lambda x: x <= -0.9, lambda x: x > 0]
    for t in np.linspace(-0.9, 0.9, 10):
        events += [lambda x, t=t: x <= t, lambda x, t=t: x > t]
    worst = -np.inf
    for ev in events:
        k1, k2 = np.count_nonzero(ev(sample_D)), np.count_nonzero(ev(sample_Dp))
        for a, na, b, nb in ((k1, n1, k2, n2), (k2, n2, k1, n1)):
            est, se = _log_ratio(a, na, b, nb)
            worst = max(worst, est - 3 * se - eps)
    r_est, r_se = _log_ratio(np.count_nonzero(sample_D <= -0.9), n1, np.count_nonzero(sample_Dp <= -0.9), n2)
    return worst, r_est, r_se


def test_T11_black_box_audit_catches_missing_factor_two():
    D, Dp = abs_problem(), abs_problem(b=(1.0, -1.0))
    rng = np.random.default_rng(11)
    n = 200_000
    # exact samplers, correct beta = eps / (2 b_max) = 0.5
    xs = [pa.exponential_mechanism(P, 1.0, sampler="exact1d", n_runs=n, random_state=rng).x[:, 0]
          for P in (D, Dp)]
    worst, r_est, r_se = _audit(*xs, eps=1.0)
    assert worst <= 0
    assert abs(r_est - 0.66907) < 4 * r_se
    # Metropolis (fewer chains, same test)
    xs = [pa.exponential_mechanism(P, 1.0, sampler="metropolis", n_steps=200, n_runs=50_000,
                                    random_state=rng).x[:, 0]
          for P in (D, Dp)]
    worst, r_est, r_se = _audit(*xs, eps=1.0)
    assert worst <= 0
    assert abs(r_est - 0.66907) < 4 * r_se
    # mis-configured: the sampler believes b_max = 0.5, so beta = eps / b_max_true
    bad = [pa.exponential_mechanism(abs_problem(b=P.b, b_max=0.5), 1.0, sampler="exact1d",
                                    n_runs=n, random_state=rng).x[:, 0] for P in (D, Dp)]
    worst, r_est, _ = _audit(*bad, eps=1.0)
    assert worst > 0
    assert r_est == pytest.approx(1.27989, abs=0.06)


def vector_laplace_logpdf(w, rate):
    return -rate * np.linalg.norm(w, axis=-1)


def test_T12_offset_and_solution_perturbation_density_ratios():
    rng = np.random.default_rng(12)
    m, b_max, eps = 6, 0.7, 0.5
    rate = eps / (math.sqrt(m) * b_max)
    b = rng.standard_normal(m)
    for _ in range(2000):
        y = b + rng.standard_normal(m) * 3
        bp = b + b_max * rng.choice([-1.0, 1.0], m) * (rng.random() < 0.5 or rng.random(m))
        lr = vector_laplace_logpdf(y - b, rate) - vector_laplace_logpdf(y - bp, rate)
        assert lr <= eps + 1e-12
    # tight: y far along the shift direction reaches eps
    s = rng.choice([-1.0, 1.0], m)
    y = b - 100 * s
    lr = vector_laplace_logpdf(y - b, rate) - vector_laplace_logpdf(y - (b + b_max * s), rate)
    assert lr == pytest.approx(eps, rel=1e-6)
    # the mechanisms really use these scales: KS of the noise norms
    prob = random_problem(2, d=3, m=m, b_max=b_max)
    res = pa.offset_perturbation(prob, eps, n_runs=300, random_state=1)
    assert stats.kstest(res.diagnostics["noise_norm_nonprivate"], stats.gamma(m, scale=1 / rate).cdf).pvalue > ALPHA
    R = prob.diameter()
    for paper, scale in ((False, R), (True, math.sqrt(3) * R)):
        res = pa.solution_perturbation(prob, eps, paper_sqrt_d=paper, n_runs=5000, random_state=2)
        assert stats.kstest(res.diagnostics["noise_norm_nonprivate"], stats.gamma(3, scale=scale / eps).cdf).pvalue > ALPHA
        for _ in range(200):  # shift by at most Delta = R
            shift = rng.standard_normal(3)
            shift *= R * rng.random() / np.linalg.norm(shift)
            y = rng.standard_normal(3) * 10
            assert (vector_laplace_logpdf(y, eps / scale) - vector_laplace_logpdf(y - shift, eps / scale)
                    <= eps + 1e-12)


def test_T12_iid_laplace_option():
    prob = random_problem(3, d=2, m=4, b_max=0.5)
    res = pa.offset_perturbation(prob, 2.0, noise="iid_laplace", n_runs=2, random_state=0)
    assert get_accountant("pure").epsilon(res.event, 0.0) == pytest.approx(4.0)


def test_T13_algorithm1_sign_and_privacy():
    prob = random_problem(13, d=2, m=6)
    rng = np.random.default_rng(13)
    x0 = np.array([0.2, 0.4])
    u = prob.scores(x0)
    j_max, j_min = int(np.argmax(u)), int(np.argmin(u))
    picks = [pa.private_subgradient(prob, x0, 1e6, random_state=rng)[1] for _ in range(300)]
    assert set(picks) == {j_max}
    _, idx = prob.select_subgradients(np.tile(x0, (10_000, 1)), 1e6 / 2, rng)
    assert np.all(idx == j_max)
    assert pa.private_subgradient(prob, x0, 1e6, paper_sign=True, random_state=rng)[1] == j_min
    # (b) exact log-probability ratios under adjacent offsets
    for _ in range(500):
        x = rng.uniform(-1, 1, 2)
        eps = float(rng.uniform(0.01, 5))
        bp = prob.b + rng.uniform(-1, 1, 6) * prob.b_max
        lp = lambda b: (lambda l: l - np.logaddexp.reduce(l))(eps / 2 * (prob.A @ x + b))
        assert np.max(np.abs(lp(prob.b) - lp(bp))) <= eps + 1e-12


def test_T14_algorithm2_trajectory_privacy_and_accounting():
    prob = random_problem(14, d=2, m=5)
    rng = np.random.default_rng(14)
    eps, k = 1.0, 20
    beta = eps / k / 2
    steps = np.full(k, 0.1)
    for _ in range(50):
        bp = prob.b + rng.choice([-1.0, 1.0], 5) * prob.b_max
        Dp = prob.with_offsets(bp)
        x = prob.center()
        total = 0.0
        for t in range(k):
            _, i = prob.select_subgradients(x[None], beta, rng)
            logp = lambda P: (lambda l: l - np.logaddexp.reduce(l))(beta * P.scores(x))[i[0]]
            total += logp(prob) - logp(Dp)
            x = prob.constraints.project(x - steps[t] * prob.A[i[0]])
        assert abs(total) <= eps + 1e-9
    res = pa.dp_subgradient(prob, eps, n_iter=k, random_state=0)
    assert res.event == SelfComposedEvent(ExponentialMechanismEvent(eps / k, prob.adjacency), k)
    assert get_accountant("pure").epsilon(res.event, 0.0) == pytest.approx(eps)
    res = pa.dp_subgradient(prob, eps, n_iter=k, n_runs=7, random_state=0)
    assert get_accountant("pure").epsilon(res.event, 0.0) == pytest.approx(7 * eps)
    assert res.epsilon == pytest.approx(7 * eps)


# --------------------------------------------------------------------------
# T15-T19: utility bounds
# --------------------------------------------------------------------------
@pytest.mark.parametrize("d", [2, 10])
def test_T15_solution_perturbation_bound(d):
    prob = random_problem(15, d=d, m=8, c=1.0)
    eps, R = 0.5, prob.diameter()
    for project in (False, True):
        res = pa.solution_perturbation(prob, eps, paper_sqrt_d=True, project=project, n_runs=1000,
                                       random_state=d)
        gap = pa.evaluate(prob, res)["gap"]
        bound = bounds.solution_perturbation_bound(prob.lipschitz, d, R, eps, paper_sqrt_d=True)
        assert gap.mean() <= bound + 4 * gap.std() / math.sqrt(1000)
        norms = res.diagnostics["noise_norm_nonprivate"]
        expected = d * math.sqrt(d) * R / eps
        assert abs(norms.mean() - expected) < 4 * norms.std() / math.sqrt(1000)
        if project:
            assert np.all(prob.constraints.contains(res.x)) and np.all(gap >= -1e-9)
    tight = pa.solution_perturbation(prob, eps, n_runs=1000, random_state=1)
    gap = pa.evaluate(prob, tight)["gap"]
    assert gap.mean() <= bounds.solution_perturbation_bound(prob.lipschitz, d, R, eps, paper_sqrt_d=False)


def _check_exponential_bounds(prob, eps, X, C0):
    gap = prob.objective_gap(X)
    n = gap.size
    slack = 4 * gap.std() / math.sqrt(n)
    b_max, d = prob.b_max, prob.n_features
    assert gap.mean() <= bounds.exponential_mechanism_bound(C0, b_max, eps) + slack
    assert gap.mean() <= bounds.exponential_mechanism_log_bound(C0, b_max, eps) + slack
    assert gap.mean() <= bounds.exponential_mechanism_dimension_bound(d, b_max, eps) + slack
    beta = eps / (2 * b_max)
    for gamma in np.linspace(0, 3 * d / beta, 12):
        p = np.mean(gap >= gamma)
        assert p <= C0 * math.exp(-beta * gamma) + 4 * math.sqrt(max(p * (1 - p), 1 / n) / n)


@pytest.mark.parametrize("eps", [1.0, 10.0])
def test_T16_exponential_mechanism_bounds_1d(eps):
    prob = abs_problem()
    res = pa.exponential_mechanism(prob, eps, sampler="exact1d", n_runs=20_000, random_state=4)
    beta = eps / 2
    _check_exponential_bounds(prob, eps, res.x, beta / (1 - math.exp(-beta)))


@pytest.mark.parametrize("c", [0.1, 1.0, 10.0])
def test_T16_exponential_mechanism_bounds_d10(c):
    rng = np.random.default_rng(0)
    A, b = rng.standard_normal((200, 10)), rng.standard_normal(200)
    prob = pa.PiecewiseAffineProblem(A[:20], b[:20], 1.0, pa.Box.cube(10, c))
    eps = 0.1
    est = importance_estimates(prob, eps / 2, 100_000, np.random.default_rng(1))
    res = pa.exponential_mechanism(prob, eps, sampler="rejection", n_runs=2000, random_state=2)
    assert res.exact
    _check_exponential_bounds(prob, eps, res.x, est["C0"] + 4 * est["C0_se"])
    assert abs(prob.value(res.x).mean() - est["mean_f"]) < 4 * math.hypot(
        prob.value(res.x).std() / math.sqrt(2000), est["mean_f_se"])


def test_T17_finite_selection_gap_bound():
    rng = np.random.default_rng(17)
    for _ in range(300):
        m = int(rng.integers(2, 50))
        prob = pa.PiecewiseAffineProblem(rng.standard_normal((m, 3)), rng.standard_normal(m) * 3, 1.0,
                                         pa.Box.cube(3, 1.0))
        x0 = rng.uniform(-1, 1, 3)
        eps = 10 ** rng.uniform(-3, 2)
        u = prob.scores(x0)
        logits = eps / 2 * u
        p = np.exp(logits - logits.max())
        p /= p.sum()
        assert p @ (u.max() - u) <= bounds.finite_selection_gap_bound(1.0, math.log(m), eps) + 1e-12


@pytest.mark.parametrize("project", [True, False])
def test_T18_subgradient_bound(project):
    prob = random_problem(18, d=2, m=10, c=1.0, b_max=0.01)
    eps, k, n = 100.0, 50, 1000
    res = pa.dp_subgradient(prob, eps, n_iter=k, project=project, output="trajectory",
                            n_runs=n, random_state=18)
    traj = res.trajectory[:, :k]          # x^(1..k)
    f_opt = prob.solve()[1]
    best = prob.value(traj).min(axis=1) - f_opt
    steps = res.params["steps"]
    bound = bounds.subgradient_bound(prob.diameter(), prob.lipschitz, steps, 0.01, math.log(10), eps)
    assert best.mean() <= bound + 4 * best.std() / math.sqrt(n)
    avg = np.einsum("k,nkd->nd", steps, traj) / steps.sum()
    gap_avg = prob.value(avg) - f_opt
    assert gap_avg.mean() <= bound + 4 * gap_avg.std() / math.sqrt(n)
    res_avg = pa.dp_subgradient(prob, eps, n_iter=k, project=project, n_runs=n, random_state=18)
    np.testing.assert_allclose(res_avg.x, avg, rtol=1e-12, atol=1e-12)
    assert bounds.subgradient_optimal_iterations(6.32, 4.17, 1.0, math.log(20), 0.1) == 1


def test_T19_offset_perturbation_bound_holds_per_run():
    prob = random_problem(19, d=3, m=8)
    res = pa.offset_perturbation(prob, 0.5, n_runs=300, random_state=19)
    gap = pa.evaluate(prob, res)["gap"]
    assert np.all(gap <= 2 * res.diagnostics["noise_sup_norm_nonprivate"] + 1e-9)
    assert np.all(gap >= -1e-9)
    assert gap.mean() <= bounds.offset_perturbation_bound(8, 1.0, 0.5)


# --------------------------------------------------------------------------
# M_P under single-offset adjacency (spec 001, A11)
# --------------------------------------------------------------------------
def test_offset_perturbation_single_adjacency_noise_scale_and_privacy():
    rng = np.random.default_rng(31)
    m, b_max, eps = 9, 0.6, 0.8
    prob = random_problem(31, d=2, m=m, b_max=b_max)
    # vector Laplace: ||w|| ~ Gamma(m, scale Delta_2 / eps) with Delta_2 = b_max (not sqrt(m) b_max)
    res = pa.offset_perturbation(prob, eps, adjacency="single", n_runs=400, random_state=4)
    norms = res.diagnostics["noise_norm_nonprivate"]
    assert stats.kstest(norms, stats.gamma(m, scale=b_max / eps).cdf).pvalue > ALPHA
    assert stats.kstest(norms, stats.gamma(m, scale=math.sqrt(m) * b_max / eps).cdf).pvalue < ALPHA
    assert res.params["l2_sensitivity"] == pytest.approx(b_max)
    # the default (eq. 4) keeps sqrt(m) b_max
    assert pa.offset_perturbation(prob, eps, n_runs=1, random_state=0).params["l2_sensitivity"] == \
        pytest.approx(math.sqrt(m) * b_max)
    # i.i.d. Laplace: scale Delta_1 / eps = b_max / eps per offset (m b_max / eps under eq. 4)
    res = pa.offset_perturbation(prob, eps, noise="iid_laplace", adjacency="single", n_runs=2, random_state=1)
    assert get_accountant("pure").epsilon(res.event, 0.0) == pytest.approx(2 * eps)
    w_single = np.random.default_rng(7)
    single = pa.offset_perturbation(prob, eps, noise="iid_laplace", adjacency="single", n_runs=400,
                                    random_state=w_single)
    sup = single.diagnostics["noise_sup_norm_nonprivate"]
    # the sup norm of m i.i.d. Lap(s): P(max |w_i| <= t) = (1 - exp(-t/s))^m
    s_single = b_max / eps
    assert stats.kstest(sup, lambda t: (1 - np.exp(-np.maximum(t, 0) / s_single)) ** m).pvalue > ALPHA
    # privacy of the smaller vector-Laplace noise: a single-offset change keeps the
    # log density ratio <= eps (tight) ...
    rate = eps / b_max
    b = rng.standard_normal(m)
    for _ in range(500):
        j = rng.integers(m)
        bp = b.copy()
        bp[j] += b_max * rng.uniform(-1, 1)
        y = b + rng.standard_normal(m) * 2
        assert vector_laplace_logpdf(y - b, rate) - vector_laplace_logpdf(y - bp, rate) <= eps + 1e-12
    bp = b.copy()
    bp[0] += b_max
    y = b - 100 * np.eye(m)[0]
    assert (vector_laplace_logpdf(y - b, rate) - vector_laplace_logpdf(y - bp, rate)
            == pytest.approx(eps, rel=1e-6))
    # ... but not under the paper's relation (all offsets move): ratio sqrt(m) eps
    s_ = np.ones(m)
    y = b - 100 * s_
    lr = vector_laplace_logpdf(y - b, rate) - vector_laplace_logpdf(y - (b + b_max * s_), rate)
    assert lr == pytest.approx(math.sqrt(m) * eps, rel=1e-6)
    with pytest.raises(ValidationError, match="adjacency"):
        pa.offset_perturbation(prob, eps, adjacency="one")


# --------------------------------------------------------------------------
# approximate DP of the Metropolis samplers: quantified delta
# --------------------------------------------------------------------------
def test_random_walk_metropolis_delta_is_unquantified_and_says_why():
    prob = random_problem(33, d=2, m=4)
    res = pa.exponential_mechanism(prob, 1.0, sampler="metropolis", n_steps=50, n_runs=3,
                                   random_state=0)
    assert res.delta is None and not res.exact
    assert "not quantified" in res.privacy_note
    for sampler in ("rejection", "exact1d"):
        p = prob if sampler == "rejection" else abs_problem()
        r = pa.exponential_mechanism(p, 1.0, sampler=sampler, n_runs=3, random_state=0)
        assert r.delta == 0.0 and r.exact
    for method in ("offset_perturbation", "solution_perturbation", "subgradient"):
        assert pa.dp_minimize(prob, 1.0, method, random_state=0).delta == 0.0


def test_independence_tv_bound_against_exact_discrete_chain():
    """(1 - 1/W)^T bounds the exact TV of a discretised independence chain, from every start."""
    prob = abs_problem(c=1.0, b=(0.3, -0.2))
    beta = 2.0
    x = np.linspace(-1, 1, 201)
    f = prob.value(x[:, None])
    pi = np.exp(-beta * f)
    pi /= pi.sum()
    q = np.full(x.size, 1 / x.size)
    w = pi / q
    K = q[None, :] * np.minimum(1.0, w[None, :] / w[:, None])
    np.fill_diagonal(K, 0.0)
    K[np.diag_indices_from(K)] = 1.0 - K.sum(axis=1)
    W = w.max()
    law = np.eye(x.size)
    for T in range(1, 41):
        law = law @ K
        tv = 0.5 * np.abs(law - pi[None, :]).sum(axis=1).max()
        assert tv <= independence_tv_bound(W, T) + 1e-12
    # the public bound exp(beta G R) dominates the true sup weight C(0, eps)
    est = importance_estimates(prob, beta, 100_000, np.random.default_rng(0))
    assert est["C0"] <= math.exp(beta * prob.lipschitz * prob.diameter())
    assert independence_steps(W, 1e-6) == math.ceil(math.log(1e-6) / math.log1p(-1 / W))
    assert independence_tv_bound(W, independence_steps(W, 1e-6)) <= 1e-6
    assert independence_tv_bound(W, independence_steps(W, 1e-6) - 1) > 1e-6


def test_independence_sampler_matches_exact_sampler_and_reports_delta():
    rng = np.random.default_rng(34)
    # W = exp(beta G R) ~ 41: about 800 independence steps per run
    prob = pa.PiecewiseAffineProblem(rng.standard_normal((4, 2)), rng.standard_normal(4), 1.0,
                                     pa.Box.cube(2, 1.0))
    eps, n = 1.0, 5_000
    res = pa.exponential_mechanism(prob, eps, sampler="independence", target_delta=1e-8, n_runs=n,
                                   random_state=5)
    W = math.exp(0.5 * prob.lipschitz * prob.diameter())
    T = independence_steps(W, 1e-8 / (1 + math.exp(eps)))
    assert res.params["n_steps"] == T
    assert res.delta == pytest.approx(n * (1 + math.exp(eps)) * independence_tv_bound(W, T))
    assert res.delta / n <= 1e-8 and not res.exact
    ref, _ = rejection_sample(prob, 0.5, n, rng)
    for j in range(2):  # two coordinates: Bonferroni, total false-alarm rate ALPHA
        assert stats.ks_2samp(res.x[:, j], ref[:, j]).pvalue > ALPHA / 2
    with pytest.raises(ValidationError, match="max_expected_proposals"):
        pa.exponential_mechanism(random_problem(1, d=10, m=5, c=100.0), 10.0, sampler="independence")
    with pytest.raises(ValidationError, match="target_delta"):
        pa.exponential_mechanism(prob, eps, sampler="independence", target_delta=0.0)


# --------------------------------------------------------------------------
# T20-T21: reproducibility and starts; API details
# --------------------------------------------------------------------------
@pytest.mark.parametrize("method", pa.METHODS)
def test_T20_same_seed_same_bits(method):
    prob = random_problem(20, d=3, m=6)
    r1 = pa.dp_minimize(prob, 1.0, method, n_runs=50, random_state=5)
    r2 = pa.dp_minimize(prob, 1.0, method, n_runs=50, random_state=5)
    r3 = pa.dp_minimize(prob, 1.0, method, n_runs=50, random_state=6)
    assert np.array_equal(r1.x, r2.x)
    assert not np.array_equal(r1.x, r3.x)
    for name in r1.baselines:
        assert np.array_equal(r1.baselines[name], r2.baselines[name])


def test_T21_starting_points_are_validated():
    prob = random_problem(21, d=2, m=4)
    with pytest.raises(ValidationError, match="inside"):
        pa.exponential_mechanism(prob, 1.0, sampler="metropolis", init=[5.0, 0.0], n_steps=10)
    with pytest.raises(ValidationError, match="must not depend"):
        pa.exponential_mechanism(prob, 1.0, sampler="metropolis", init="optimum", n_steps=10)
    with pytest.raises(ValidationError):
        metropolis_sample(prob, 0.5, np.array([[2.0, 0.0]]), 10, 0.1, np.random.default_rng(0))
    with pytest.raises(ValidationError, match="inside"):
        pa.dp_subgradient(prob, 1.0, x1=[0.0, 3.0])
    res = pa.exponential_mechanism(prob, 1.0, sampler="metropolis", init="uniform", n_steps=10,
                                 n_runs=5, random_state=0)
    assert np.all(prob.constraints.contains(res.x))


def test_single_run_shapes_events_and_baselines():
    prob = random_problem(22, d=3, m=6)
    for method in pa.METHODS:
        res = pa.dp_minimize(prob, 0.3, method, random_state=0)
        assert res.x.shape == (3,)
        assert res.epsilon == pytest.approx(0.3)
        assert get_accountant("pure").epsilon(res.event, 0.0) == pytest.approx(0.3)
        np.testing.assert_array_equal(res.baselines["center"], prob.center())
        assert res.baselines["uniform_subgradient"].shape == (3,)
    assert pa.dp_minimize(prob, 0.3, "M_E", n_steps=5, random_state=0).event == \
        ExponentialMechanismEvent(0.3, prob.adjacency)
    assert pa.dp_minimize(prob, 0.3, "M_S", random_state=0).event == PureEvent(0.3, prob.adjacency)


def test_baselines_do_not_read_the_offsets():
    prob = random_problem(23, d=3, m=6)
    other = prob.with_offsets(prob.b + np.random.default_rng(0).standard_normal(6) * 10)
    b1 = pa.data_independent_baselines(prob, 20, random_state=3)
    b2 = pa.data_independent_baselines(other, 20, random_state=3)
    for name in b1:
        assert np.array_equal(b1[name], b2[name])


def test_invalid_inputs_raise_clear_errors():
    prob = random_problem(24)
    for bad in (0, -1, float("nan"), float("inf"), "a"):
        with pytest.raises(ValidationError, match="epsilon"):
            pa.dp_minimize(prob, bad)
    with pytest.raises(ValidationError, match="method"):
        pa.dp_minimize(prob, 1.0, "newton")
    with pytest.raises(ValidationError, match="unbounded"):
        pa.Polytope([[1.0, 0.0], [0.0, 1.0]], [1.0, 1.0])
    with pytest.raises(ValidationError, match="empty"):
        pa.Polytope([[1.0], [-1.0]], [-1.0, -1.0])
    with pytest.raises(ValidationError, match="pieces|match"):
        pa.PiecewiseAffineProblem(np.ones((3, 2)), np.ones(2), 1.0, pa.Box.cube(2, 1))
    with pytest.raises(ValidationError, match="dimension"):
        pa.PiecewiseAffineProblem(np.ones((3, 2)), np.ones(3), 1.0, pa.Box.cube(3, 1))
    with pytest.raises(ValidationError, match="b_max"):
        pa.PiecewiseAffineProblem(np.ones((3, 2)), np.ones(3), 0.0, pa.Box.cube(2, 1))
    with pytest.raises(ValidationError, match="NaN"):
        pa.PiecewiseAffineProblem(np.full((3, 2), np.nan), np.ones(3), 1.0, pa.Box.cube(2, 1))
    with pytest.raises(ValidationError, match="lo < hi"):
        pa.Box([0.0, 1.0], [1.0, 1.0])
    with pytest.raises(ValidationError, match="max_expected_proposals"):
        pa.exponential_mechanism(random_problem(1, d=10, m=5, c=100.0), 10.0, sampler="rejection")
    with pytest.raises(ValidationError, match="d = 1"):
        pa.exponential_mechanism(prob, 1.0, sampler="exact1d")
    with pytest.raises(ValidationError, match="sensitivity"):
        pa.solution_perturbation(prob, 1.0, sensitivity=0.1)
    with pytest.raises(ValidationError, match="step"):
        pa.dp_subgradient(prob, 1.0, n_iter=3, step=[1.0, -1.0, 1.0])
    with pytest.raises(ValidationError, match="n_runs"):
        pa.dp_minimize(prob, 1.0, n_runs=0)


def test_auto_sampler_uses_only_public_numbers():
    prob = random_problem(25, d=2, m=4)
    assert pa.exponential_mechanism(prob, 1.0, sampler="auto", random_state=0).params["sampler"] == "rejection"
    assert pa.exponential_mechanism(abs_problem(), 1.0, sampler="auto", random_state=0).params["sampler"] == "exact1d"
    big = random_problem(1, d=10, m=5, c=100.0)
    # no sampler with a guarantee is affordable: refused (Metropolis only by name)
    with pytest.raises(ValidationError, match="no sampler with a privacy guarantee"):
        pa.exponential_mechanism(big, 10.0, n_steps=5, random_state=0)
    assert pa.exponential_mechanism(big, 10.0, sampler="metropolis", n_steps=5,
                                    random_state=0).params["sampler"] == "metropolis"


# --------------------------------------------------------------------------
# constraint sets
# --------------------------------------------------------------------------
def test_polytope_geometry():
    H = np.vstack([np.eye(2), -np.eye(2)])
    h = np.array([1.0, 2.0, 1.0, 2.0])     # the box [-1, 1] x [-2, 2]
    poly, box = pa.Polytope(H, h), pa.Box([-1.0, -2.0], [1.0, 2.0])
    # Chebyshev centre: the inscribed ball of radius 1 (centre not unique here)
    ctr = poly.center()
    assert np.all(h - H @ ctr >= 1.0 - 1e-9)
    square = pa.Polytope(H, np.ones(4))
    np.testing.assert_allclose(square.center(), [0.0, 0.0], atol=1e-9)
    assert poly.diameter() == pytest.approx(box.diameter())
    X = np.random.default_rng(0).standard_normal((200, 2)) * 3
    np.testing.assert_allclose(poly.project(X), box.project(X), atol=1e-8)
    assert np.all(poly.contains(poly.project(X)))
    # projection onto a triangle: optimality (variational inequality) against vertices
    tri = pa.Polytope([[1.0, 1.0], [-1.0, 0.0], [0.0, -1.0]], [1.0, 0.0, 0.0])
    P = tri.project(X)
    verts = np.array([[0, 0], [1, 0], [0, 1]], dtype=float)
    for x, p in zip(X, P):
        assert np.all((x - p) @ (verts - p).T <= 1e-6)
    U = tri.sample_uniform(np.random.default_rng(1), 20_000)
    assert np.all(tri.contains(U))
    # uniform on the triangle: x1 has density 2 (1 - t)
    assert stats.kstest(U[:, 0], lambda t: 1 - (1 - np.clip(t, 0, 1)) ** 2).pvalue > ALPHA


# --------------------------------------------------------------------------
# structured problems (spec section 7)
# --------------------------------------------------------------------------
def test_chebyshev_regression_problem():
    rng = np.random.default_rng(30)
    Z, y = rng.standard_normal((12, 2)), rng.standard_normal(12)
    prob = pa.chebyshev_regression_problem(Z, y, 0.3, pa.Box.cube(2, 5.0))
    X = rng.standard_normal((50, 2))
    np.testing.assert_allclose(prob.value(X), np.abs(X @ Z.T - y).max(1), rtol=1e-13)
    assert prob.b_max == 0.3
    y2 = y.copy()
    y2[3] += 0.3
    other = pa.chebyshev_regression_problem(Z, y2, 0.3, pa.Box.cube(2, 5.0))
    assert np.max(np.abs(prob.value(X) - other.value(X))) <= 0.3 + 1e-12


def test_quantile_regression_matches_sklearn():
    from sklearn.linear_model import QuantileRegressor

    rng = np.random.default_rng(31)
    Z = rng.standard_normal((60, 3))
    y = Z @ np.array([0.5, -1.0, 0.2]) + rng.standard_normal(60)
    for tau in (0.3, 0.5, 0.8):
        prob = pa.quantile_regression_problem(Z, y, tau, 1.0, pa.Box.cube(3, 10.0))
        x_opt, f_opt = prob.solve()
        ref = QuantileRegressor(quantile=tau, alpha=0.0, fit_intercept=False, solver="highs").fit(Z, y)
        assert f_opt == pytest.approx(prob.value(ref.coef_), rel=1e-7, abs=1e-9)
        assert prob.b_max == pytest.approx(max(tau, 1 - tau))
    lad = pa.lad_regression_problem(Z, y, 0.5, pa.Box.cube(3, 10.0), responses_changed="all")
    np.testing.assert_allclose(lad.value(Z[:4]), np.abs(y - Z[:4] @ Z.T).sum(1), rtol=1e-12)
    assert lad.b_max == pytest.approx(60 * 0.5)


def test_pinball_factorised_selection_matches_enumeration():
    rng = np.random.default_rng(32)
    n, tau, w = 4, 0.3, 1.5
    Z, y = rng.standard_normal((n, 2)), rng.standard_normal(n)
    prob = pa.SumOfPinballProblem(Z, y, 1.0, pa.Box.cube(2, 2.0), tau=tau, weight=w)
    choices = np.array(list(itertools.product([tau, tau - 1], repeat=n)))
    A = -w * choices @ Z
    b = w * choices @ y
    enum = pa.PiecewiseAffineProblem(A, b, 1.0, pa.Box.cube(2, 2.0))
    X = rng.uniform(-2, 2, (100, 2))
    np.testing.assert_allclose(enum.value(X), prob.value(X), rtol=1e-12, atol=1e-12)
    x0, beta = np.array([0.4, -0.3]), 0.8
    slopes, s = prob.select_subgradients(np.tile(x0, (50_000, 1)), beta, rng)
    index = {tuple(c): i for i, c in enumerate(choices)}
    idx = np.array([index[tuple(row)] for row in s])
    np.testing.assert_allclose(slopes, A[idx], atol=1e-12)
    logits = beta * enum.scores(x0)
    p = np.exp(logits - logits.max())
    p /= p.sum()
    assert stats.chisquare(np.bincount(idx, minlength=len(p)), p * idx.size).pvalue > ALPHA


def test_pinball_mechanisms_run_and_offset_perturbation_is_refused():
    rng = np.random.default_rng(33)
    Z, y = rng.standard_normal((30, 2)), rng.standard_normal(30)
    prob = pa.lad_regression_problem(Z, y, 0.1, pa.Box.cube(2, 3.0))
    for method in ("subgradient", "exponential", "solution_perturbation"):
        res = pa.dp_minimize(prob, 1.0, method, n_runs=20, random_state=0, **(
            {"n_steps": 200, "sampler": "metropolis"} if method == "exponential" else {}))
        assert res.x.shape == (20, 2)
    with pytest.raises(ValidationError, match="implicit pieces"):
        pa.dp_minimize(prob, 1.0, "offset_perturbation")
    # exact 1-D sampler for a pinball objective against a grid density
    prob1 = pa.quantile_regression_problem(Z[:, :1], y, 0.3, 1.0, pa.Box([-2.0], [2.0]))
    x = exact_1d_sample(prob1, 0.7, 50_000, rng)[:, 0]
    grid = np.linspace(-2, 2, 40_001)
    dens = np.exp(-0.7 * (prob1.value(grid[:, None]) - prob1.solve()[1]))
    cdf = np.cumsum(dens)
    cdf /= cdf[-1]
    assert stats.kstest(x, lambda t: np.interp(t, grid, cdf)).pvalue > ALPHA


# --------------------------------------------------------------------------
# reproduction (fastdp.experiments.seed001): R1-R4
# --------------------------------------------------------------------------
def test_reproduction_deterministic_columns_match_spec_pilot():
    from fastdp.experiments import seed001

    cfg = seed001.Config()
    for c, row in seed001.PILOT_C.items():
        prob = seed001.make_problem(cfg, c=c)
        assert prob.solve()[1] == pytest.approx(row[0], abs=6e-4)
        assert prob.value(prob.center()) == pytest.approx(row[1], abs=6e-4)
        assert prob.lipschitz == pytest.approx(4.173, abs=6e-4)
    for m, row in seed001.PILOT_M.items():
        prob = seed001.make_problem(cfg, m=m)
        assert prob.solve()[1] == pytest.approx(row[0], abs=6e-4)
        assert prob.value(prob.center()) == pytest.approx(row[1], abs=6e-4)
    assert seed001.make_problem(cfg, m=200).lipschitz == pytest.approx(5.194, abs=6e-4)


def test_reproduction_smoke(tmp_path):
    from fastdp.experiments import seed001

    cfg = seed001.quick_config(n_runs=20, n_steps=200, n_iter=10, n_importance=2000,
                               c_grid=(0.1, 1.0), m_grid=(5, 10), k_grid=(2, 5), eps_grid=(1.0,))
    results = seed001.run_all(cfg)
    claims = {c["claim"]: c["held"] for c in results["claims"]}
    assert claims["f_opt is non-increasing in c (exact)"]
    assert claims["f_opt is non-decreasing in m for nested pieces (exact)"]
    path = seed001.write_report(results, cfg, tmp_path, figures=False)
    text = path.read_text()
    assert "R1 (Fig. 1)" in text and "R4" in text and "## Claims" in text
    assert (tmp_path / "seed001.json").exists()


@pytest.mark.slow
def test_reproduction_matches_spec_pilot_numbers(tmp_path):
    """R2/R3 at the spec's defaults with 1000 runs: our means against the pilot's.

    The pilot's 2 SEM is about 1-2% of each value; we accept |ours - pilot|
    <= 4 * sqrt(2) SEM (two independent estimates).
    """
    from fastdp.experiments import seed001

    cfg = seed001.Config(c_grid=(0.1, 1.0, 10.0), m_grid=(5, 200))
    rng = np.random.default_rng(cfg.seed)
    for sweep, pilot in ((seed001.sweep_c(cfg, rng), seed001.PILOT_C),
                         (seed001.sweep_m(cfg, rng), seed001.PILOT_M)):
        for key, point in sweep.items():
            for col, ref in zip(seed001.PILOT_COLUMNS[2:], pilot[key][2:]):
                if ref is None or point.get(col) is None:
                    continue
                ours = point[col]
                assert abs(ours["mean"] - ref) <= 4 * math.sqrt(2) * ours["sem"] + 0.002 * abs(ref), \
                    (key, col, ours["mean"], ref)


def test_independence_sampler_event_carries_its_delta_into_a_ledger():
    from fastdp.exceptions import PrivacyAnalysisError
    from fastdp.privacy.events import ApproxDpEvent, event_delta
    from fastdp.privacy.ledger import PrivacyLedger

    rng = np.random.default_rng(34)
    prob = pa.PiecewiseAffineProblem(rng.standard_normal((4, 2)), rng.standard_normal(4), 1.0,
                                     pa.Box.cube(2, 1.0))
    res = pa.dp_minimize(prob, 0.5, "exponential", sampler="independence", target_delta=1e-8,
                         n_runs=3, random_state=1)
    W = math.exp(0.25 * prob.lipschitz * prob.diameter())
    per_run = (1 + math.exp(0.5)) * independence_tv_bound(W, res.params["n_steps"])
    assert res.event == SelfComposedEvent(ApproxDpEvent(0.5, per_run, prob.adjacency), 3)
    assert event_delta(res.event) == res.delta == pytest.approx(3 * per_run, rel=1e-14)
    for accountant in ("pure", "pld"):
        ledger = PrivacyLedger(2.0, 1e-6, accountant)
        ledger.charge(res.event, label="M_E independence")
        assert ledger.spent_delta() == res.delta
        assert ledger.spent() <= res.epsilon + 1e-3
    assert PrivacyLedger(2.0, 1e-6, "pure").check(res.event) == res.epsilon
    with pytest.raises(PrivacyAnalysisError, match="accountant='pure'"):
        PrivacyLedger(2.0, 1e-6, "rdp").charge(res.event)  # RDP has no curve for (eps, delta)
    single = pa.exponential_mechanism(prob, 0.5, sampler="independence", random_state=1)
    assert isinstance(single.event, ApproxDpEvent) and single.event.delta == single.delta
    # the exact samplers keep their pure event
    exact = pa.exponential_mechanism(prob, 0.5, sampler="rejection", n_runs=3, random_state=1)
    assert exact.event == SelfComposedEvent(ExponentialMechanismEvent(0.5, prob.adjacency), 3)
    assert exact.delta == 0.0


# --------------------------------------------------------------------------
# samplers without a guarantee are never recorded as exact mechanisms (issue 18, item 14)
# --------------------------------------------------------------------------
def test_default_sampler_has_a_guarantee():
    """The default is 'auto': exact 1-D or rejection, an exact exponential mechanism whose
    event (pure epsilon) every accountant composes.  Before, the default was random-walk
    Metropolis, recorded as ExponentialMechanismEvent(eps) although it is only approximate."""
    from fastdp.privacy.events import NoGuaranteeEvent, no_guarantee_events

    for prob, expected in ((abs_problem(), "exact1d"), (random_problem(25, d=2, m=4), "rejection")):
        res = pa.exponential_mechanism(prob, 1.0, n_runs=4, random_state=0)
        assert res.params["sampler"] == expected and res.exact and res.delta == 0.0
        assert res.event == SelfComposedEvent(ExponentialMechanismEvent(1.0, prob.adjacency), 4)
        assert not no_guarantee_events(res.event)
        assert get_accountant("pure").epsilon(res.event, 0.0) == pytest.approx(4.0)
        assert res.epsilon == pytest.approx(4.0)
        res = pa.dp_minimize(prob, 1.0, "M_E", random_state=0)
        assert not isinstance(res.event, NoGuaranteeEvent) and math.isfinite(res.epsilon)


@pytest.mark.parametrize("sampler", ["metropolis", "hit_and_run"])
def test_approximate_samplers_carry_no_guarantee(sampler, tmp_path):
    """Metropolis and hit-and-run runs are NoGuaranteeEvents: every accountant refuses them,
    the ledger refuses them unless asked explicitly, result.epsilon is inf and the note says
    NO PRIVACY GUARANTEE."""
    from fastdp.exceptions import PrivacyAnalysisError
    from fastdp.privacy.events import NoGuaranteeEvent
    from fastdp.privacy.ledger import PrivacyLedger

    prob = random_problem(26, d=2, m=4)
    res = pa.exponential_mechanism(prob, 1.0, sampler=sampler, n_steps=20, n_runs=3,
                                   random_state=0)
    assert res.event == SelfComposedEvent(NoGuaranteeEvent(1.0, sampler, prob.adjacency), 3)
    assert res.epsilon == math.inf and res.delta is None and not res.exact
    assert res.params["target_epsilon"] == 1.0
    assert res.privacy_note.startswith("NO PRIVACY GUARANTEE")
    for name in ("rdp", "pld", "pure", "moments"):
        with pytest.raises(PrivacyAnalysisError, match="NO privacy guarantee"):
            get_accountant(name).epsilon(res.event, 1e-5 if name != "pure" else 0.0)
    ledger = PrivacyLedger(10.0, 0.0, accountant="pure", path=str(tmp_path / "l.json"))
    with pytest.raises(PrivacyAnalysisError, match="allow_no_guarantee=True"):
        ledger.charge(res.event, "M_E " + sampler)
    assert len(ledger.entries) == 0
    exact = pa.exponential_mechanism(prob, 1.0, random_state=0)
    ledger.charge(exact.event, "exact")
    ledger.charge(res.event, "M_E " + sampler, allow_no_guarantee=True)
    reloaded = PrivacyLedger.load(str(tmp_path / "l.json"))
    assert len(reloaded.entries) == 2 and len(reloaded.no_guarantee_entries()) == 1
    assert reloaded.spent() == pytest.approx(1.0)   # the release with a guarantee only
    assert "NO GUARANTEE" in reloaded.summary() and "no_guarantee=1" in repr(reloaded)
