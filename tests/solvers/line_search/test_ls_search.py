"""NOISYBTLS (fastdp.solvers.line_search.search): noise law, classic-Armijo limit, sensitivity.

Spec 003 §7 items 4, 6, 8.
"""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from fastdp._kernels import _line_search as K
from fastdp.exceptions import ValidationError
from fastdp.losses import get_loss
from fastdp.privacy.events import LineSearchEvent
from fastdp.solvers.line_search import GlmBatchOracle
from fastdp.solvers.line_search.search import (
    armijo_coefficients,
    candidate_steps,
    draw_svt_noise,
    line_search_event,
    noisy_backtracking,
)


def _svt_frequencies(event, queries, n_draws, seed):
    rng = np.random.default_rng(seed)
    counts = np.zeros(len(queries) + 1)
    q = np.asarray(queries, dtype=float)
    for _ in range(n_draws):
        lam, nu = draw_svt_noise(event, 1.0, q.size, rng)
        counts[K.first_above(q, lam, nu)] += 1     # index -1 = failure (last cell)
    return counts / n_draws


@pytest.mark.parametrize("event, expected", [
    (LineSearchEvent.laplace(1.0), [0.41811, 0.25052, 0.15004, 0.18133]),
    (LineSearchEvent.gaussian(1.0), [0.31868, 0.29248, 0.21146, 0.17738]),
])
def test_svt_output_law_matches_spec_table(event, expected):
    """Spec §4.7 law of the stopping index for q = [−1, 0, 1], Δ_q = 1.

    10^5 draws; each cell within 4.5 standard errors (two-sided false-alarm
    rate ≤ 8 cells × 6.8e-6 ≈ 5e-5). A factor-2 error in any noise scale moves
    some cell by more than 0.02 (≫ 4.5 SE ≈ 0.007)."""
    n = 100_000
    freq = _svt_frequencies(event, [-1.0, 0.0, 1.0], n, seed=2024)
    p = np.asarray(expected)
    se = np.sqrt(p * (1 - p) / n)
    assert np.all(np.abs(freq - p) <= 4.5 * se), (freq, p)


def test_svt_law_by_quadrature_other_queries():
    """Independent reference: exact law by 1-D quadrature over the threshold
    (Laplace ε_BT = 0.5, queries [0.5, −2, 3, 0]), 10^5 draws, 4.5 SE."""
    eps = 0.5
    queries = np.array([0.5, -2.0, 3.0, 0.0])
    b_t, b_q = 2 / eps, 4 / eps
    grid = np.linspace(-60 * b_t, 60 * b_t, 400_001)
    dens = np.exp(-np.abs(grid) / b_t) / (2 * b_t)

    def lap_cdf(x, b):          # P(ν < x)
        return np.where(x < 0, 0.5 * np.exp(x / b), 1 - 0.5 * np.exp(-x / b))

    reject = [lap_cdf(grid - qk, b_q) for qk in queries]     # P(q_k + ν_k < λ | λ)
    probs, alive = [], np.ones_like(grid)
    for r in reject:
        probs.append(np.trapezoid(dens * alive * (1 - r), grid))
        alive = alive * r
    probs.append(np.trapezoid(dens * alive, grid))
    p = np.array(probs)
    assert p.sum() == pytest.approx(1.0, abs=1e-6)
    n = 100_000
    freq = _svt_frequencies(LineSearchEvent.laplace(eps), queries, n, seed=99)
    se = np.sqrt(p * (1 - p) / n)
    assert np.all(np.abs(freq - p) <= 4.5 * se), (freq, p)


def test_noise_scales_follow_the_event_and_c_obj():
    rng = np.random.default_rng(0)
    lam, nu = draw_svt_noise(LineSearchEvent.gaussian(0.5), 2.0, 200_000, rng)
    # query std = C_obj·sqrt(3/ρ) = 2·sqrt(6); chi-square 99.99% band on the sample std
    assert np.std(nu) == pytest.approx(2 * math.sqrt(6.0), rel=0.01)
    lam_l, nu_l = draw_svt_noise(LineSearchEvent.laplace(0.25), 3.0, 200_000, rng)
    # Laplace scale b = C_obj·4/ε = 48: mean |ν| = b
    assert np.mean(np.abs(nu_l)) == pytest.approx(48.0, rel=0.01)


def test_candidate_steps_and_validation():
    np.testing.assert_allclose(candidate_steps(2.0, 0.5, 4), [2, 1, 0.5, 0.25])
    with pytest.raises(ValidationError):
        candidate_steps(0.0, 0.5, 3)
    with pytest.raises(ValidationError):
        candidate_steps(1.0, 1.0, 3)
    with pytest.raises(ValidationError):
        candidate_steps(1.0, 0.5, 0)
    with pytest.raises(ValidationError):
        line_search_event("uniform", 1.0, 3)
    with pytest.raises(ValidationError):
        armijo_coefficients(np.ones(2), np.ones(2), alpha=0.5, normalizer=1, mu=0,
                            armijo_scale="sum")


# ---------------------------------------------------------------------------
# noise-free limit: classic Armijo (spec §7.6)
# ---------------------------------------------------------------------------
def _problem(rng, n=300, d=8, loss="logistic"):
    X = rng.normal(0, 1, (n, d)) * (rng.random((n, d)) < 0.5)
    y = rng.choice([-1.0, 1.0], n) if loss != "squared" else rng.normal(0, 1, n)
    return sp.csr_matrix(X), y


def _mean_objective(X, y, w, loss, mu, c_obj, m):
    vals = np.minimum(get_loss(loss).value(X @ w, y), c_obj)
    return vals.sum() / m + 0.5 * mu * w @ w


@pytest.mark.parametrize("loss", ["logistic", "hinge", "squared"])
@pytest.mark.parametrize("c_obj", [2.0, np.inf])
def test_noise_free_search_is_classic_armijo(loss, c_obj):
    rng = np.random.default_rng(1)
    X, y = _problem(rng, loss=loss)
    oracle = GlmBatchOracle(X, y, loss)
    rows = oracle.all_rows
    mu, alpha, m = 0.01, 0.3, 250.0
    n_found = n_fail = 0
    for trial in range(40):
        w = rng.normal(0, 0.5, X.shape[1])
        grad = X.T @ get_loss(loss).derivative(X @ w, y) / m + mu * w
        g = (grad + 0.1 * rng.normal(0, 1, X.shape[1])) * (1 if trial % 4 else -1)
        etas = candidate_steps(float(rng.choice([0.5, 2.0, 8.0])), 0.6, 8)
        slope, curv = armijo_coefficients(w, g, alpha=alpha, normalizer=m, mu=mu)
        out = noisy_backtracking(oracle.margins(rows, w), oracle.margins(rows, g), y,
                                 loss_code=oracle.kernel_code, c_obj=c_obj, etas=etas,
                                 slope=slope, curvature=curv, event=LineSearchEvent.laplace(1.0),
                                 rng=None, noise_free=True)
        f0 = _mean_objective(X, y, w, loss, mu, c_obj, m)
        expected = next((e for e in etas
                         if _mean_objective(X, y, w - e * g, loss, mu, c_obj, m)
                         <= f0 - alpha * e * g @ g), 0.0)
        assert out.eta == expected
        n_found += expected > 0
        n_fail += expected == 0
    assert n_found > 5 and n_fail > 2          # both branches exercised


def test_paper_literal_scale_has_no_m_and_no_regulariser():
    w, g = np.array([1.0, 2.0]), np.array([0.5, -1.0])
    assert armijo_coefficients(w, g, alpha=0.5, normalizer=100, mu=1.0,
                               armijo_scale="paper_literal") == (0.5 * 1.25, 0.0)
    slope, curv = armijo_coefficients(w, g, alpha=0.5, normalizer=100, mu=0.1)
    eta = 0.3     # m·[(μ/2)(‖w‖² − ‖w − ηg‖²)] − α η m ‖g‖² == −slope·η − curv·η²
    direct = 100 * (0.05 * (w @ w - (w - eta * g) @ (w - eta * g))) - 0.5 * eta * 100 * g @ g
    assert -slope * eta - curv * eta ** 2 == pytest.approx(direct, rel=1e-13)


def test_failure_returns_fallback_step():
    z = u = np.zeros(3)
    y = np.ones(3)
    etas = candidate_steps(1.0, 0.5, 3)
    out = noisy_backtracking(z, u, y, loss_code=K.LOSS_LOGISTIC, c_obj=1.0, etas=etas,
                             slope=1.0, curvature=0.0, event=LineSearchEvent.laplace(1.0),
                             rng=None, noise_free=True, fallback_step=0.125)
    assert (out.index, out.eta, out.n_examined, out.accepted) == (-1, 0.125, 3, False)


# ---------------------------------------------------------------------------
# sensitivity (spec §7.4), property test
# ---------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10 ** 6), loss=st.sampled_from(["logistic", "hinge", "squared"]),
       scale=st.sampled_from(["mean", "paper_literal"]),
       c_obj=st.floats(0.1, 5.0), c_grad=st.floats(0.1, 5.0))
def test_query_and_gradient_sensitivity(seed, loss, scale, c_obj, c_grad):
    rng = np.random.default_rng(seed)
    X, y = _problem(rng, n=12, d=5, loss=loss)
    X = X * rng.uniform(0.1, 20)             # large rows: clipping must do the work
    drop = int(rng.integers(0, 12))
    keep = np.delete(np.arange(12), drop).astype(np.int64)
    oracle = GlmBatchOracle(X, y, loss)
    w = rng.normal(0, 3, 5)
    g = rng.normal(0, 3, 5)
    m, mu = float(rng.uniform(1, 50)), float(rng.uniform(0, 1))
    etas = candidate_steps(float(rng.uniform(0.1, 5)), 0.7, 6)
    slope, curv = armijo_coefficients(w, g, alpha=0.5, normalizer=m, mu=mu, armijo_scale=scale)
    queries = []
    for rows in (oracle.all_rows, keep):
        sums, q = np.empty(7), np.empty(6)
        K.clipped_loss_sums(oracle.margins(rows, w), oracle.margins(rows, g), y[rows], etas,
                            oracle.kernel_code, c_obj, sums)
        K.armijo_queries(sums, etas, slope, curv, q)
        queries.append(q)
    # exact bound c_obj, plus the rounding error of subtracting two sums of size |q|
    rounding = 8 * np.finfo(float).eps * np.max(np.abs(queries[0]))
    assert np.max(np.abs(queries[0] - queries[1])) <= c_obj * (1 + 1e-12) + rounding
    diff = oracle.clipped_gradient_sum(oracle.all_rows, w, c_grad) - \
        oracle.clipped_gradient_sum(keep, w, c_grad)
    assert np.linalg.norm(diff) <= c_grad * (1 + 1e-12)


# ---------------------------------------------------------------------------
# SVT privacy sanity (spec §7.9), exact output laws by quadrature
# ---------------------------------------------------------------------------
def _exact_law(queries, form, budget):
    """P(stop at k), k = 0..K−1, and P(fail) of NOISYBTLS with Δ_q = 1, by 1-D
    quadrature over the threshold noise."""
    from scipy.stats import laplace, norm

    event = line_search_event(form, budget, len(queries))
    t, s = event.threshold_noise, event.query_noise
    dist_t, dist_q = (laplace(scale=t), laplace(scale=s)) if form == "laplace" else \
        (norm(scale=t), norm(scale=s))
    grid = np.linspace(-80 * t, 80 * t, 200_001)
    dens = dist_t.pdf(grid)
    out, alive = [], np.ones_like(grid)
    for qk in queries:
        reject = dist_q.cdf(grid - qk)
        out.append(np.trapezoid(dens * alive * (1 - reject), grid))
        alive = alive * reject
    out.append(np.trapezoid(dens * alive, grid))
    return np.maximum(np.array(out), 1e-300)


@pytest.mark.slow
@pytest.mark.parametrize("form, budget", [("laplace", 0.5), ("laplace", 2.0),
                                          ("gaussian", 0.25), ("gaussian", 1.0)])
def test_exact_renyi_divergence_below_paper_bound(form, budget):
    """Neighbouring query vectors differ by shifts in {−1, 0, +1} per query
    (|Δq_k| ≤ Δ_q = 1); the exact D_a of the released index (both directions)
    never exceeds eq. (4)/(5) at a ∈ {2, 5, 20}."""
    import itertools

    from fastdp.privacy.rdp import rdp_line_search

    orders = np.array([2.0, 5.0, 20.0])
    bound = rdp_line_search(line_search_event(form, budget, 3), orders)
    rng = np.random.default_rng(0)
    bases = [np.array([-1.0, 0.0, 1.0]), np.zeros(3), rng.normal(0, 3, 3)]
    worst = 0.0
    for base in bases:
        p = _exact_law(base, form, budget)
        for shift in itertools.product((-1.0, 0.0, 1.0), repeat=3):
            p2 = _exact_law(base + np.array(shift), form, budget)
            for a_idx, a in enumerate(orders):
                for P, Q in ((p, p2), (p2, p)):
                    d = np.log(np.sum(P ** a * Q ** (1 - a))) / (a - 1)
                    worst = max(worst, d / bound[a_idx])
                    assert d <= bound[a_idx] * (1 + 1e-6), (base, shift, a)
    assert worst > 0.05        # the test is not vacuous
