"""Heavy-ball theory utilities (spec 002, section 6.3, tests 18-20 and 23)."""
import math

import numpy as np
import pytest

from fastdp.solvers.accelerated import theory as th


def test_rho_hb_values():
    # spec 6.3 test 18 (mu = 0.1, L = 1)
    assert th.rho_hb(1.0, 0.0, 0.1, 1.0) == pytest.approx(0.9, abs=1e-12)
    assert th.rho_hb(0.1, 0.0, 0.1, 1.0) == pytest.approx(0.99, abs=1e-12)
    critical = 1.1 - math.sqrt(0.4)
    assert th.rho_hb(1.0, critical, 0.1, 1.0) == pytest.approx(math.sqrt(critical), abs=1e-6)
    assert th.rho_hb(1.0, 0.4675, 0.1, 1.0) == pytest.approx(0.6875, abs=1e-4)


def test_rho_classical_heavy_ball():
    mu, L = 0.01, 1.0
    kappa = L / mu
    alpha = 4 / (math.sqrt(mu) + math.sqrt(L)) ** 2
    beta = ((math.sqrt(kappa) - 1) / (math.sqrt(kappa) + 1)) ** 2
    assert th.rho_hb(alpha, beta, mu, L) == pytest.approx(9 / 11, rel=1e-7)


@pytest.mark.parametrize("alpha, rho, beta", [(1.0, 0.6841, 0.52), (0.5, 0.7797, 0.64),
                                              (0.1, 0.9010, 0.82)])
def test_rho_nag_reference_grid_minimum(alpha, rho, beta):
    grid = np.round(np.arange(0, 1, 0.01), 2)
    values = [th.rho_nag_reference(alpha, b, 0.1, 1.0) for b in grid]
    assert min(values) == pytest.approx(rho, abs=1e-4)
    assert grid[int(np.argmin(values))] == beta


@pytest.mark.parametrize("alpha, beta, trace", [(0.5, 0.3, 0.040836), (0.1, 0.8182, 0.030407),
                                                (1.0, 0.0, 0.062632), (1.0, 0.5195, 0.1231)])
def test_hb_stationary_trace_values(alpha, beta, trace):
    # spec 6.3 test 19 (Q = diag(0.1, 1), sigma = 0.1)
    assert th.hb_stationary_trace(alpha, beta, 0.01, [0.1, 1.0]) == pytest.approx(trace, rel=2e-4)


def test_hb_stationary_trace_against_simulation():
    # HB on Q = diag(0.1, 1) with N(0, sigma^2) gradient noise, (alpha, beta) = (1, 0.5195).
    # 2000 chains x 2000 steps, burn-in 500: the chain mixes in ~20 steps, so the
    # relative standard error of both averages is ~0.4%; the 1.5% tolerance is ~4 sigma.
    rng = np.random.default_rng(19)
    lam = np.array([0.1, 1.0])
    alpha, beta, sigma = 1.0, 0.5195, 0.1
    chains = 2000
    x = np.zeros((chains, 2))
    x_prev = x.copy()
    sum_sq = np.zeros(2)
    sum_f = 0.0
    count = 0
    for t in range(2000):
        noise = sigma * rng.standard_normal((chains, 2))
        x, x_prev = x - alpha * (lam * x + noise) + beta * (x - x_prev), x
        if t >= 500:
            sum_sq += np.mean(x * x, axis=0)
            sum_f += float(np.mean(0.5 * (lam * x * x).sum(axis=1)))
            count += 1
    trace = float(np.sum(sum_sq / count))
    assert trace == pytest.approx(th.hb_stationary_trace(alpha, beta, sigma ** 2, lam), rel=0.015)
    assert sum_f / count == pytest.approx(
        th.hb_stationary_suboptimality(alpha, beta, sigma ** 2, lam), rel=0.015)
    assert th.hb_stationary_suboptimality(alpha, beta, sigma ** 2, lam) == pytest.approx(0.013135, rel=2e-4)
    assert th.hb_stationary_suboptimality(alpha, beta, sigma ** 2, lam) <= \
        lam.max() * th.hb_stationary_trace(alpha, beta, sigma ** 2, lam)


# spec 002, section 5.1: min over T of the Fig. 1 log-bound ([CODE]'s rho), value and T
FIG1 = {
    1e-4: {0.1: [(2.28, 1), (2.27, 1), (-4.62, 250), (-7.92, 104)],
           0.5: [(-6.53, 214), (-6.97, 144), (-8.22, 51), (-8.83, 41)],
           1.0: [(-7.27, 100), (-7.80, 66), (-7.81, 43), (-9.22, 27)]},
    1e-2: {0.1: [(2.28, 1), (2.27, 1), (1.90, 174), (0.17, 57)],
           0.5: [(1.62, 120), (1.12, 79), (-0.22, 26), (-0.81, 22)],
           1.0: [(0.79, 54), (0.22, 34), (0.13, 21), (-1.24, 14)]},
}


@pytest.mark.parametrize("noise_level", sorted(FIG1))
@pytest.mark.parametrize("alpha", [0.1, 0.5, 1.0])
def test_fig1_minima(noise_level, alpha):
    # spec 6.3 test 20, to +-0.01
    horizons = np.arange(1, 251)
    beta_opt = (1 - math.sqrt(alpha * 0.1)) / (1 + math.sqrt(alpha * 0.1))
    for beta, (value, at) in zip((0.0, 0.3, 0.7, beta_opt), FIG1[noise_level][alpha]):
        curve = th.fig1_log_bound(horizons, alpha, beta, noise_level)
        assert curve.min() == pytest.approx(value, abs=0.01)
        assert horizons[int(np.argmin(curve))] == at


def test_quadratic_bound_is_infinite_when_unstable():
    assert th.hb_quadratic_bound(10, 2.5, 0.0, 0.01, [0.1, 1.0], 1.0) == math.inf


def test_lmi_gradient_descent_certificate():
    # spec 6.3 test 23: GD (beta = 0, alpha = 1/L, mu = 1, L = 10) with P = 0, c0 = 0, c = 1
    mu, L = 1.0, 10.0
    P = np.zeros((2, 2))
    assert th.lmi_min_eigenvalue(1 / L, 0.0, mu, L, 1 - mu / L, P) == pytest.approx(0.0, abs=1e-12)
    assert th.lmi_min_eigenvalue(1 / L, 0.0, mu, L, 1 - mu / L - 1e-3, P) == pytest.approx(
        -2.5e-4, rel=0.01)
    # bound (3.15) reduces to rho^{2t} (F0 - F*) + geometric sum (L d alpha^2 / 2) E_T
    t = np.arange(0, 5)
    rho2 = 1 - mu / L
    got = th.prop34_bound(t, rho2, P, 1.0, 3.0, 1 / L, L, 4, 0.5)
    expected = rho2 ** t * 3.0 + (1 - rho2 ** t) / (1 - rho2) * (L * 4 / L ** 2 / 2) * 0.5
    assert np.allclose(got, expected, rtol=1e-14)


def test_lmi_certifies_a_rate_for_damped_heavy_ball():
    # alpha = 1/L, beta = 0.3, kappa = 10: some rho < 1 is feasible, a tiny rho is not
    mu, L = 1.0, 10.0
    assert th._best_certificate(1 / L, 0.3, mu, L, 0.95 ** 2) >= -1e-10
    assert th._best_certificate(1 / L, 0.3, mu, L, 0.5 ** 2) < 0
