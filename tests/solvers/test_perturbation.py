"""Tests of fastdp.solvers.perturbation (Chaudhuri, Monteleoni, Sarwate 2011).

Noise distributions are checked by goodness-of-fit tests on fixed seeds
(deterministic outcome); with fresh seeds every assertion has a false-alarm
rate of at most 1e-4.
"""
import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats
from scipy.special import expit
from sklearn.linear_model import LogisticRegression

from fastdp.exceptions import FastDPError, ValidationError
from fastdp.privacy import get_accountant
from fastdp.privacy.events import Adjacency, GaussianEvent, NonPrivateEvent, PureEvent
from fastdp.solvers.perturbation import (
    ESTIMATOR_SOLVERS,
    objective_perturbation,
    objective_perturbation_parameters,
    output_perturbation,
    output_sensitivity,
    sample_l2_laplace,
    solve_erm,
    solve_logistic,
)

ALPHA = 1e-4  # per-assertion false-alarm rate


def _data(rng, n=200, m=3):
    X = rng.normal(size=(n, m))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True)) * 1.0000001
    w = rng.normal(size=m) * 2
    y = np.where(X @ w + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


def _objective_gradient(X, y, theta, lam):
    n = X.shape[0]
    return X.T @ (-y * expit(-y * (X @ theta))) / n + lam * theta


def _direction_is_uniform(vectors):
    """Each coordinate u_i of a uniform unit vector in R^d has u_i^2 ~ Beta(1/2, (d-1)/2)."""
    d = vectors.shape[1]
    u = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    pvals = [stats.kstest(u[:, i] ** 2, stats.beta(0.5, (d - 1) / 2).cdf).pvalue for i in range(d)]
    signs = [stats.binomtest(int(np.sum(u[:, i] > 0)), len(u)).pvalue for i in range(d)]
    # Bonferroni over the 2d tests keeps the family's false-alarm rate at ALPHA
    return min(pvals + signs) > ALPHA / (2 * d)


def test_sample_l2_laplace_norm_gamma_and_direction_uniform():
    rng = np.random.default_rng(0)
    for dim, scale in ((1, 0.5), (3, 2.0), (20, 0.1)):
        draws = np.array([sample_l2_laplace(rng, dim, scale) for _ in range(3000)])
        norms = np.linalg.norm(draws, axis=1)
        assert stats.kstest(norms, stats.gamma(a=dim, scale=scale).cdf).pvalue > ALPHA
        if dim > 1:
            assert _direction_is_uniform(draws)
            # norm independent of direction: Spearman correlation with the first coordinate's sign
            r = stats.spearmanr(norms, draws[:, 0] / norms)
            assert r.pvalue > ALPHA


def test_solver_matches_sklearn_optimum(rng):
    X, y = _data(rng, n=300, m=6)
    lam = 1e-2
    theta, info = solve_logistic(sp.csr_matrix(X), y, lam, gtol=1e-12)
    assert info["converged"] and info["gradient_norm"] <= 1e-12
    assert np.linalg.norm(_objective_gradient(X, y, theta, lam)) < 1e-11
    ref = LogisticRegression(C=1.0 / (lam * 300), fit_intercept=False, tol=1e-14,
                             max_iter=100000).fit(X, y)
    np.testing.assert_allclose(theta, ref.coef_.ravel(), rtol=1e-6, atol=1e-8)


def test_output_sensitivity_bound_holds_for_worst_case_replacements(rng):
    """Corollary 8: ||theta*(D) - theta*(D')|| <= 2 / (n lam) when one row is replaced."""
    X, y = _data(rng, n=100, m=4)
    lam = 0.05
    base, _ = solve_logistic(sp.csr_matrix(X), y, lam, gtol=1e-13)
    bound = output_sensitivity(100, lam, tol=0.0, row_norm_bound=1.0)
    for k in range(10):
        X2, y2 = X.copy(), y.copy()
        X2[k] = -X[k] / np.linalg.norm(X[k])  # flipped, unit norm
        y2[k] = -y[k] if k % 2 else y[k]
        other, _ = solve_logistic(sp.csr_matrix(X2), y2, lam, gtol=1e-13)
        assert np.linalg.norm(base - other) <= bound


def test_output_perturbation_noise_is_l2_laplace_with_the_paper_scale(rng):
    X, y = _data(rng, n=150, m=3)
    lam, eps = 0.02, 0.7
    exact, _ = solve_logistic(sp.csr_matrix(X), y, lam, gtol=1e-13)
    noise = []
    for seed in range(600):
        res = output_perturbation(X, y, lam=lam, epsilon=eps, random_state=seed)
        noise.append(res.coef - exact)
    noise = np.array(noise)
    delta = output_sensitivity(150, lam)
    # the paper's beta = n lam eps / 2, up to the (1 + 1e-6 + tol) slack of the sensitivity
    assert delta == pytest.approx(2.0 / (150 * lam), rel=3e-6)
    assert stats.kstest(np.linalg.norm(noise, axis=1), stats.gamma(a=3, scale=delta / eps).cdf
                        ).pvalue > ALPHA
    assert _direction_is_uniform(noise)
    assert res.event == PureEvent(eps, Adjacency.REPLACE_ONE)
    assert res.sensitivity == delta and res.adjacency == "replace_one"


def test_output_perturbation_gaussian_variant(rng):
    X, y = _data(rng, n=150, m=3)
    lam, sigma = 0.02, 0.8
    exact, _ = solve_logistic(sp.csr_matrix(X), y, lam, gtol=1e-13)
    noise = np.array([output_perturbation(X, y, lam=lam, noise_multiplier=sigma,
                                          mechanism="gaussian", random_state=s).coef - exact
                      for s in range(400)])
    std = sigma * output_sensitivity(150, lam)
    assert stats.kstest(noise.ravel() / std, "norm").pvalue > ALPHA
    res = output_perturbation(X, y, lam=lam, noise_multiplier=sigma, mechanism="gaussian",
                              random_state=0)
    assert res.event == GaussianEvent(sigma, Adjacency.REPLACE_ONE)


def test_objective_perturbation_parameters_closed_forms():
    c = 0.25
    # large n lam: Delta = 0 and eps' = eps - log(1 + 2c/(n lam) + c^2/(n lam)^2)
    eps_p, delta = objective_perturbation_parameters(1.0, 1000, 0.01)
    assert delta == 0.0
    assert eps_p == pytest.approx(1.0 - math.log((1 + c / 10.0) ** 2), rel=1e-14)
    # small n lam: eps' = eps / 2 and Delta = c / (n (e^(eps/4) - 1)) - lam > 0
    eps_p, delta = objective_perturbation_parameters(0.1, 100, 1e-4)
    assert eps_p == 0.05
    assert delta == pytest.approx(c / (100 * (math.exp(0.025) - 1)) - 1e-4, rel=1e-14)
    assert delta > 0


@pytest.mark.parametrize("n, lam, eps", [(150, 0.02, 2.0), (40, 1e-3, 0.5)])
def test_objective_perturbation_noise_recovered_from_optimality(rng, n, lam, eps):
    """At the minimiser, b = -n (grad J(theta) + Delta theta): test b's law (both branches)."""
    X, y = _data(rng, n=n, m=3)
    eps_p, delta = objective_perturbation_parameters(eps, n, lam)
    bs = []
    for seed in range(500):
        res = objective_perturbation(X, y, lam=lam, epsilon=eps, random_state=seed)
        bs.append(-n * (_objective_gradient(X, y, res.coef, lam) + delta * res.coef))
    bs = np.array(bs)
    assert res.extra["epsilon_prime"] == eps_p and res.extra["delta_reg"] == delta
    assert stats.kstest(np.linalg.norm(bs, axis=1), stats.gamma(a=3, scale=2.0 / eps_p).cdf
                        ).pvalue > ALPHA
    assert _direction_is_uniform(bs)
    assert res.event == PureEvent(eps, Adjacency.REPLACE_ONE)


def test_same_seed_same_output(rng):
    X, y = _data(rng)
    a = objective_perturbation(X, y, lam=0.01, epsilon=1.0, random_state=3)
    b = objective_perturbation(sp.csr_matrix(X), y, lam=0.01, epsilon=1.0, random_state=3,
                               num_threads=2)
    np.testing.assert_allclose(a.coef, b.coef, rtol=1e-9)
    c = output_perturbation(X, y, lam=0.01, epsilon=1.0, random_state=3)
    d = output_perturbation(X, y, lam=0.01, epsilon=1.0, random_state=3)
    assert np.array_equal(c.coef, d.coef)


@pytest.mark.parametrize("call, match", [
    (lambda X, y: output_perturbation(X, y, lam=0.1, epsilon=1.0, loss="squared"), "squared"),
    (lambda X, y: objective_perturbation(X, y, lam=0.1, epsilon=1.0, loss="hinge"), "hinge"),
    (lambda X, y: output_perturbation(X * 3, y, lam=0.1, epsilon=1.0), "norm"),
    (lambda X, y: output_perturbation(X, y, lam=0.0, epsilon=1.0), "lam"),
    (lambda X, y: objective_perturbation(X, y, lam=0.1, epsilon=-1.0), "epsilon"),
    (lambda X, y: output_perturbation(X, y, lam=0.1, noise_multiplier=1.0), "laplace"),
    (lambda X, y: output_perturbation(X, y, lam=0.1, epsilon=1.0, mechanism="gaussian"),
     "gaussian"),
    (lambda X, y: output_perturbation(X, y, lam=0.1, epsilon=1.0, mechanism="exp"), "mechanism"),
    (lambda X, y: output_perturbation(X, y, lam=0.1, epsilon=1.0, tol=0.5), "tol"),
    (lambda X, y: output_perturbation(X, y, lam=0.1, epsilon=1.0, max_iter=0), "max_iter"),
    (lambda X, y: output_perturbation(X, np.arange(len(y)), lam=0.1, epsilon=1.0), "binary"),
])
def test_inputs_breaking_the_assumptions_are_rejected(rng, call, match):
    X, y = _data(rng)
    with pytest.raises(ValidationError, match=match):
        call(X, y)


def test_unconverged_solver_releases_nothing(rng):
    X, y = _data(rng)
    with pytest.raises(FastDPError, match="nothing is released"):
        output_perturbation(X, y, lam=1e-6, epsilon=1.0, max_iter=1, random_state=0)


def test_estimator_adapters_noise_and_events():
    out, obj = ESTIMATOR_SOLVERS["output"], ESTIMATOR_SOLVERS["objective"]
    config = {"lam": 0.01, "options": {}}
    pure = get_accountant("pure")
    assert out.noise_for_budget(1000, config, 0.5, 1e-5, pure) == 2.0
    assert out.event(1000, config, 2.0) == PureEvent(0.5, Adjacency.REPLACE_ONE)
    rdp = get_accountant("rdp")
    noise = obj.noise_for_budget(1000, config, 0.5, 1e-5, rdp)
    assert rdp.epsilon(obj.event(1000, config, noise), 1e-5) <= 0.5
    gauss = {"lam": 0.01, "options": {"mechanism": "gaussian"}}
    sigma = out.noise_for_budget(1000, gauss, 1.0, 1e-5, rdp)
    assert out.event(1000, gauss, sigma) == GaussianEvent(sigma, Adjacency.REPLACE_ONE)
    assert rdp.epsilon(out.event(1000, gauss, sigma), 1e-5) <= 1.0
    with pytest.raises(ValidationError):
        obj.check_options({"mechanism": "gaussian"})
    with pytest.raises(ValidationError):
        out.event(1000, {"lam": 0.01, "options": {"mechanism": "uniform"}}, 1.0)


def test_estimator_adapter_runs_and_nonprivate_limit(rng):
    X, y = _data(rng)
    config = {"lam": 0.01, "options": {}, "num_threads": None}
    res = ESTIMATOR_SOLVERS["objective"].run(X, y, loss="logistic", noise=2.0, config=config,
                                             random_state=np.random.default_rng(0))
    assert res.event == ESTIMATOR_SOLVERS["objective"].event(200, config, 2.0)
    res = ESTIMATOR_SOLVERS["output"].run(X * 5, y, loss="logistic", noise=0.0, config=config,
                                          random_state=np.random.default_rng(0))
    assert res.event == NonPrivateEvent()
    exact, _ = solve_logistic(sp.csr_matrix(X * 5), y, 0.01, gtol=1e-13)
    np.testing.assert_allclose(res.coef, exact, rtol=1e-6, atol=1e-8)


def _huber(u, h):
    return np.where(u > 1 + h, 0.0, np.where(u < 1 - h, 1 - u, (1 + h - u) ** 2 / (4 * h)))


def _huber_gradient(X, y, theta, lam, h):
    u = y * (X @ theta)
    d = np.where(u > 1 + h, 0.0, np.where(u < 1 - h, -1.0, -(1 + h - u) / (2 * h)))
    return X.T @ (y * d) / X.shape[0] + lam * theta


def test_huber_hinge_solver_matches_scipy_lbfgs(rng):
    from scipy.optimize import minimize

    X, y = _data(rng, n=200, m=4)
    lam, h = 0.05, 0.5
    theta, info = solve_erm(sp.csr_matrix(X), y, lam, loss="huber_hinge", huber_h=h, gtol=1e-12)
    assert info["converged"]
    ref = minimize(lambda t: np.mean(_huber(y * (X @ t), h)) + 0.5 * lam * t @ t, np.zeros(4),
                   jac=lambda t: _huber_gradient(X, y, t, lam, h), method="L-BFGS-B",
                   options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 10000}).x
    np.testing.assert_allclose(theta, ref, rtol=1e-6, atol=1e-8)


def test_objective_perturbation_huber_hinge_noise_and_constants(rng):
    """Huber SVM (c = 1/(2h)): b recovered from the optimality condition is l2-Laplace."""
    X, y = _data(rng, n=150, m=3)
    lam, eps, h = 0.02, 1.0, 0.5
    eps_p, delta = objective_perturbation_parameters(eps, 150, lam, curvature=1 / (2 * h))
    bs = []
    for seed in range(400):
        res = objective_perturbation(X, y, lam=lam, epsilon=eps, loss="huber_hinge", huber_h=h,
                                     random_state=seed)
        bs.append(-150 * (_huber_gradient(X, y, res.coef, lam, h) + delta * res.coef))
    bs = np.array(bs)
    assert res.loss == "huber_hinge" and res.extra["curvature"] == 1.0
    assert res.extra["epsilon_prime"] == eps_p
    assert stats.kstest(np.linalg.norm(bs, axis=1), stats.gamma(a=3, scale=2.0 / eps_p).cdf
                        ).pvalue > ALPHA
    out = output_perturbation(X, y, lam=lam, epsilon=eps, loss="huber_hinge", random_state=0)
    assert out.loss == "huber_hinge" and out.event == PureEvent(eps, Adjacency.REPLACE_ONE)
    with pytest.raises(ValidationError, match="huber_h"):
        objective_perturbation(X, y, lam=lam, epsilon=eps, loss="huber_hinge", huber_h=0.0)


def test_solver_reaches_tiny_gradient_tolerance_at_small_lam():
    """Where trust-region Newton stalls (objective decrease below rounding), the
    gradient-only Newton polish still reaches gtol = tol / n (regression test)."""
    import scipy.sparse as sp
    from fastdp.preprocessing import normalize_rows

    rng = np.random.default_rng(0)
    X = sp.random(400, 300, density=0.05, random_state=0, format="csr")
    X = normalize_rows(X + sp.eye(400, 300, format="csr"))
    y = np.sign(rng.normal(size=400))
    for seed in range(3):
        result = objective_perturbation(X, y, lam=0.01, epsilon=0.5, random_state=seed)
        assert np.all(np.isfinite(result.coef))
    theta, info = solve_logistic(X, y, 1e-4, gtol=1e-6 / 400)
    assert info["converged"] and info["gradient_norm"] <= 1e-6 / 400


@pytest.mark.parametrize("args", [(-5, 0.1), (0, 0.1), (100, 0.0), (100, -1.0), (100, float("nan")),
                                  (100, 0.1, -1.0), (100, 0.1, 0.0, 0.0)])
def test_output_sensitivity_refuses_out_of_range_arguments(args):
    from fastdp.exceptions import ValidationError
    from fastdp.solvers.perturbation import output_sensitivity

    with pytest.raises(ValidationError, match="out of range"):
        output_sensitivity(*args)
