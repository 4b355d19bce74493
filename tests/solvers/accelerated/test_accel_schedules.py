"""Schedules, bound coefficients, horizon rule and budget allocation (spec 002, sections 4.6-4.7, 6)."""
import math

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import logsumexp

from fastdp.exceptions import ValidationError
from fastdp.solvers.accelerated import accounting as acc
from fastdp.solvers.accelerated import schedules as sch
from fastdp.solvers.accelerated import plan_masg, plan_nesterov

L5 = 5.100080706735987  # spec 6.1 test 6: L of the section-5 data
MU5 = 0.02
N, D, S1 = 100_000, 20, 40.0


def test_masg_schedule_section5():
    # spec 6.2 test 14: kappa = 255.004, T = 1000
    s = sch.masg_schedule(1000, L5, MU5)
    assert (s["n1"], s["C"]) == (89, 34)
    assert list(s["stage_ends"]) == [89, 225, 497, 1000]
    assert np.flatnonzero(s["restarts"]).tolist() == [89, 225, 497]  # 0-based first steps
    for k, (lo, hi) in enumerate([(0, 89), (89, 225), (225, 497), (497, 1000)], start=1):
        alpha = 1.0 / (4.0 ** (0 if k == 1 else k) * L5)
        assert np.all(s["step_sizes"][lo:hi] == alpha)
        root = math.sqrt(MU5 * alpha)
        assert np.allclose(s["momenta"][lo:hi], (1 - root) / (1 + root), rtol=1e-15)
    c = sch.masg_schedule(1000, L5, MU5, step_multiplier=0.1)
    assert np.allclose(c["step_sizes"], 0.1 * s["step_sizes"], rtol=1e-15)  # spec B4
    assert list(c["stage_ends"]) == [89, 225, 497, 1000]
    assert sch.masg_schedule(100, L5, MU5)["stage_ends"].tolist() == [89, 100]
    assert sch.masg_schedule(5, 1.0, 0.9)["n1"] == 1  # kappa <= e: guard n1 >= 1


def test_masg_schedule_rejects_bad_input():
    with pytest.raises(ValidationError):
        sch.masg_schedule(10, 1.0, 2.0)
    with pytest.raises(ValidationError):
        sch.masg_schedule(10, 1.0, 0.1, step_multiplier=1.5)
    with pytest.raises(ValidationError):
        sch.masg_schedule(10, 1.0, 0.1, n1_rounding="round")


# spec 002, section 7, B1: T' per (constants, c) for nominal T = 100, 200, 500, 1000
HORIZONS = {
    ("reference_code", 1.0): [100, 136, 136, 136],
    ("paper", 1.0): [100, 106, 106, 106],
    ("consistent", 1.0): [100, 121, 121, 121],
    ("reference_code", 0.1): [100, 200, 396, 396],
    ("paper", 0.1): [100, 200, 303, 303],
    ("consistent", 0.1): [100, 200, 349, 349],
}


@pytest.mark.parametrize("constants, c", sorted(HORIZONS))
def test_horizon_rule(constants, c):
    got = [sch.choose_horizon(np.full(T, c / L5), None, L5, MU5, D, S1, N, 1.0, 10.0, constants)
           for T in (100, 200, 500, 1000)]
    assert got == HORIZONS[constants, c]
    masg = sch.masg_schedule(1000, L5, MU5, c)
    assert sch.choose_horizon(masg["step_sizes"], masg["stages"], L5, MU5, D, S1, N, 1.0, 10.0,
                              constants) == 89


def test_horizon_rule_dependence_on_initial_error():
    # spec D4: E0 = 1, 5, 10, 20, 29, 40, 100 -> T' (reference constants, c = 1)
    got = [sch.choose_horizon(np.full(1000, 1 / L5), None, L5, MU5, D, S1, N, 1.0, E0,
                              "reference_code") for E0 in (1, 5, 10, 20, 29, 40, 100)]
    assert got == [87, 121, 136, 151, 159, 166, 187]


def test_horizon_bounds_against_direct_sum():
    alphas = np.full(50, 0.7 / L5)
    bounds = sch.horizon_bounds(alphas, None, L5, MU5, D, S1, N, 1.0, 10.0, "paper")
    for tau in (1, 17, 50):
        a = 0.7 / L5 * (1 + 0.7) * (1 - math.sqrt(MU5 * 0.7 / L5)) ** (tau - np.arange(1, tau + 1))
        direct = (1 - math.sqrt(MU5 * 0.7 / L5)) ** tau * 10.0 + D * (S1 / N) ** 2 * np.sum(a ** (1 / 3)) ** 3
        assert bounds[tau - 1] == pytest.approx(direct, rel=1e-12)


@pytest.mark.parametrize("constants, k_a", [("consistent", 1.0), ("reference_code", 0.5)])
def test_subsampled_horizon_rule_closed_form(constants, k_a):
    # spec A5 extension: bound(tau) = 2 q^tau E0 + sum_t a_t (d b_t^2 + sigma_s^2 / 2) with
    # a_t = K_a alpha (1 + alpha L) q^(tau - t), eps_t = eps a_t^(1/3) / sum_j a_j^(1/3),
    # b_t = S1 / (m log(1 + (n/m)(e^eps_t - 1))) and sigma_s^2 = S1^2 (n - m) / (4 m (n - 1))
    alpha, m, eps, E0 = 0.7 / L5, 1000, 1.0, 10.0
    q = 1 - math.sqrt(MU5 * alpha)
    bounds = sch.horizon_bounds(np.full(60, alpha), None, L5, MU5, D, S1, N, eps, E0, constants,
                                batch_size=m, horizon_rule="subsampled")
    sigma_s2 = S1 ** 2 * (N - m) / (4.0 * m * (N - 1))
    for tau in (1, 2, 23, 60):
        a = k_a * alpha * (1 + alpha * L5) * q ** (tau - np.arange(1, tau + 1))
        e_t = eps * a ** (1 / 3) / np.sum(a ** (1 / 3))
        b_t = S1 / (m * np.log(1 + (N / m) * (np.exp(e_t) - 1)))
        # geometric series: sum_t a_t = K_a alpha (1 + alpha L) (1 - q^tau) / (1 - q)
        subsampling = sigma_s2 / 2 * k_a * alpha * (1 + alpha * L5) * (1 - q ** tau) / (1 - q)
        # a_{tau,0} = 2^{s_tau - s_0} q^tau with s_0 = 0 for these constants (spec B1)
        closed = 2 * q ** tau * E0 + D * np.sum(a * b_t ** 2) + subsampling
        assert bounds[tau - 1] == pytest.approx(closed, rel=1e-11)
    # m = n: identical to the paper's rule (4.6); and the default rule ignores batch_size
    paper = sch.horizon_bounds(np.full(60, alpha), None, L5, MU5, D, S1, N, eps, E0, constants)
    full = sch.horizon_bounds(np.full(60, alpha), None, L5, MU5, D, S1, N, eps, E0, constants,
                              batch_size=N, horizon_rule="subsampled")
    assert np.array_equal(paper, full)
    assert np.array_equal(paper, sch.horizon_bounds(np.full(60, alpha), None, L5, MU5, D, S1, N,
                                                    eps, E0, constants, batch_size=m))


def test_subsampled_horizon_rule_in_plans():
    # section-5 constants, m = 1000: the subsampling term shortens NAG-opt's horizon
    # (136 -> 127 at c = 1) and lengthens MASG-opt's (89 -> 497: the small late-stage
    # steps damp the subsampling variance); m = n changes nothing
    common = dict(n_samples=N, sensitivity=S1, epsilon=1.0, n_iter=1000, n_features=D,
                  allocation="prop42", bound_constants="reference_code", smoothness=L5,
                  strong_convexity=MU5)
    got = {}
    for rule in sch.HORIZON_RULES:
        for m in (N, 1000):
            nag = plan_nesterov(step_size=1 / L5, batch_size=m, horizon_rule=rule, **common)
            masg = plan_masg(batch_size=m, horizon_rule=rule, **common)
            got[rule, m] = (nag.horizon, masg.horizon)
            assert nag.extra["horizon_rule"] == rule
            assert acc.total_epsilon(nag.nominal_scales, S1, N, m) == pytest.approx(1.0, rel=1e-12)
    assert got == {("paper", N): (136, 89), ("paper", 1000): (136, 89),
                   ("subsampled", N): (136, 89), ("subsampled", 1000): (127, 497)}
    with pytest.raises(ValidationError, match="horizon_rule"):
        plan_nesterov(step_size=1 / L5, horizon_rule="bogus", **common)
    uniform = plan_nesterov(step_size=1 / L5, **dict(common, allocation="uniform"))
    assert uniform.extra["horizon_rule"] is None


# spec 002, section 3.3: (algorithm, c, T, T', eps_1, eps_T', b_1/b_T' at m = n, at m = 1000)
TABLE_33 = [
    ("nag", 1.0, 100, 100, 0.002855, 0.02412, (0.1401, 0.01658), (0.1591, 0.03237)),
    ("nag", 1.0, 500, 136, 0.001227, 0.02253, (0.3260, 0.01776), (0.3454, 0.03369)),
    ("nag", 0.1, 100, 100, 0.007058, 0.01366, (0.05668, 0.02929), (0.0747, 0.04624)),
    ("nag", 0.1, 200, 200, 0.002394, 0.009023, (0.1671, 0.04433), (0.1862, 0.06199)),
    ("nag", 0.1, 1000, 396, 0.0005139, 0.007156, (0.7783, 0.0559), (0.7979, 0.07391)),
    ("masg", 1.0, 1000, 89, 0.00375, 0.02500, (0.1067, 0.0160), (0.1254, 0.03171)),
    ("masg", 0.1, 200, 89, 0.008258, 0.01485, (0.04844, 0.02694), (0.06624, 0.04373)),
]


def _plan(alg, c, T, m):
    common = dict(n_samples=N, sensitivity=S1, epsilon=1.0, n_iter=T, n_features=D,
                  batch_size=m, allocation="prop42", bound_constants="reference_code",
                  smoothness=L5, strong_convexity=MU5)
    if alg == "nag":
        return plan_nesterov(step_size=c / L5, **common)
    return plan_masg(step_multiplier=c, **common)


@pytest.mark.parametrize("alg, c, T, horizon, e1, eT, full, sub", TABLE_33)
def test_opt_schedules(alg, c, T, horizon, e1, eT, full, sub):
    # spec 6.1 tests 3 and 6: T', eps_1, eps_T', b_1, b_T' to 4 significant digits
    for m, (b1, bT) in ((N, full), (1000, sub)):
        plan = _plan(alg, c, T, m)
        assert plan.horizon == horizon
        assert plan.nominal_n_iter == T
        assert plan.step_epsilons[0] == pytest.approx(e1, rel=2e-3 if e1 == 0.00375 else 5e-4)
        assert plan.step_epsilons[-1] == pytest.approx(eT, rel=5e-4)
        assert plan.scales[0] == pytest.approx(b1, rel=1.5e-3)
        assert plan.scales[-1] == pytest.approx(bT, rel=1.5e-3)
        # the whole budget over the T' executed steps only
        assert plan.epsilon == pytest.approx(1.0, rel=1e-12)
        assert plan.epsilon <= 1.0 + 1e-12
        assert acc.total_epsilon(plan.scales, S1, N, m) == pytest.approx(1.0, rel=1e-12)


def test_opt_scales_decrease_within_a_stage_and_jump_at_stage_starts():
    plan = _plan("masg", 1.0, 300, N)
    stages = sch.masg_schedule(300, L5, MU5)["stages"][:plan.horizon]
    assert plan.horizon == 89 and np.all(stages == 1)
    assert np.all(np.diff(plan.scales) < 0)
    long = plan_masg(n_samples=N, sensitivity=S1, epsilon=1.0, n_iter=300, smoothness=L5,
                     strong_convexity=MU5, n_features=D, allocation="prop42", alter_horizon=False)
    assert long.horizon == 300
    jump = long.scales[89] / long.scales[88]
    assert jump > 2.0


# spec 002, section 5.2 (Fig. 2): mu = 1, L = 20, floor rounding of n1 = 13, C = 10
FIG2 = {
    2: dict(T=53, first=64.7, end1=29.6, t12=25.6, peak=90.4, last=42.8, starts=[]),
    3: dict(T=133, first=153.8, end1=70.4, t12=60.8, peak=215.0, last=97.0, starts=[204.7]),
    4: dict(T=293, first=342.2, end1=156.7, t12=135.3, peak=478.2, last=204.6,
            starts=[455.3, 431.3]),
    5: dict(T=613, first=740.2, end1=338.9, t12=292.6, peak=1034.3, last=419.2,
            starts=[984.7, 932.8, 883.6]),
}


def _fig2_profile(K, counting):
    T = 13 + 10 * (2 ** (K + 1) - 4)
    s = sch.masg_schedule(T, 20.0, 1.0, n1_rounding="floor")
    log_a, _ = sch.log_bound_coefficients(s["step_sizes"], s["stages"], 20.0, 1.0,
                                          "reference_code", s["stage_ends"], counting)
    return T, s, np.exp(logsumexp(log_a / 3) - log_a / 3)  # b_t n eps / S1


@pytest.mark.parametrize("K", sorted(FIG2))
def test_fig2_values(K):
    # spec 6.3 test 22, to +-0.1
    ref = FIG2[K]
    T, s, b = _fig2_profile(K, "reference_fig2")
    assert T == ref["T"] and s["n1"] == 13 and s["C"] == 10
    assert b[0] == pytest.approx(ref["first"], abs=0.1)
    assert b[12] == pytest.approx(ref["end1"], abs=0.1)
    assert b[11] == pytest.approx(ref["t12"], abs=0.1)
    assert b[13] == pytest.approx(ref["peak"], abs=0.1) and b.max() == b[13]
    assert b[-1] == pytest.approx(ref["last"], abs=0.1)
    starts = s["stage_ends"][1:-1]  # 0-based index of the first step of stages 3, 4, ...
    assert np.allclose(b[starts], ref["starts"], atol=0.1)
    assert b.min() == pytest.approx(ref["t12"], abs=0.1)


def test_fig2_paper_exact_counting():
    _, _, b = _fig2_profile(2, "exact")
    assert b[12] == pytest.approx(23.7, abs=0.1)


def test_prop42_closed_form_optimum():
    # spec 6.3 test 21
    rng = np.random.default_rng(21)
    log_a = np.log(rng.uniform(0.01, 2.0, size=30))
    budgets = sch.prop42_allocation(log_a, 1.0)
    assert budgets.sum() == pytest.approx(1.0, rel=1e-14)
    scales = np.array([acc.b_for_eps(S1, e, N, N) for e in budgets])
    value = sch.allocation_objective(log_a, scales)
    assert value == pytest.approx(sch.prop42_objective(log_a, S1, N, 1.0), rel=1e-12)
    assert value == pytest.approx((S1 / N) ** 2 * np.sum(np.exp(log_a) ** (1 / 3)) ** 3, rel=1e-12)
    uniform = np.full(30, acc.b_for_eps(S1, 1.0 / 30, N, N))
    assert value < sch.allocation_objective(log_a, uniform)
    # equal coefficients: uniform is optimal
    assert np.allclose(sch.prop42_allocation(np.zeros(5), 1.0), 0.2, rtol=1e-14)


def _slsqp(log_a, m):
    a = np.exp(log_a)
    T = a.size

    def objective(e):
        b = S1 / (m * np.log1p((N / m) * np.expm1(e))) if m < N else S1 / (N * e)
        return float(np.sum(a * b * b)) * 1e6

    res = minimize(objective, np.full(T, 1.0 / T), method="SLSQP",
                   bounds=[(1e-6, 1.0)] * T,
                   constraints=[{"type": "eq", "fun": lambda e: e.sum() - 1.0}],
                   options={"ftol": 1e-15, "maxiter": 500})
    return res.x, res.fun / 1e6


def test_numerical_allocation_matches_closed_form_and_slsqp():
    rng = np.random.default_rng(4)
    log_a = np.log(rng.uniform(0.05, 1.0, size=12))
    closed = sch.prop42_allocation(log_a, 1.0)
    numerical = sch.numerical_allocation(log_a, S1, N, N, 1.0)
    assert np.allclose(numerical, closed, rtol=1e-6)
    slsqp, _ = _slsqp(log_a, N)
    assert np.allclose(slsqp, closed, rtol=1e-4)
    # m < n: the exact optimum is no worse than the code's heuristic, and agrees with SLSQP
    m = 1000
    heuristic = np.array([acc.b_for_eps(S1, e, N, m) for e in closed])
    exact_budgets = sch.numerical_allocation(log_a, S1, N, m, 1.0)
    assert exact_budgets.sum() == pytest.approx(1.0, rel=1e-12)
    exact = np.array([acc.b_for_eps(S1, e, N, m) for e in exact_budgets])
    assert sch.allocation_objective(log_a, exact) <= sch.allocation_objective(log_a, heuristic)
    _, slsqp_value = _slsqp(log_a, m)
    assert sch.allocation_objective(log_a, exact) <= slsqp_value * (1 + 1e-6)


def test_numerical_allocation_plan_spends_exactly_epsilon():
    plan = plan_nesterov(n_samples=N, sensitivity=S1, epsilon=1.0, n_iter=200, step_size=1 / L5,
                         strong_convexity=MU5, smoothness=L5, n_features=D, batch_size=1000,
                         allocation="numerical")
    assert plan.horizon == 121  # consistent constants, same horizon rule
    assert plan.epsilon == pytest.approx(1.0, rel=1e-10)


def test_bound_coefficients_nag_closed_form():
    alphas = np.full(10, 0.1)
    for constants, k_a, a0 in (("paper", 1.0, 1.0), ("consistent", 1.0, 1.0),
                               ("reference_code", 0.5, 2.0)):
        log_a, log_a0 = sch.log_bound_coefficients(alphas, None, 2.0, 0.5, constants)
        q = 1 - math.sqrt(0.05)
        expected = k_a * 0.1 * 1.2 * q ** (10 - np.arange(1, 11))
        assert np.allclose(np.exp(log_a), expected, rtol=1e-13)
        # NAG: one stage; consistent/reference use s_0 = 0 (a factor 2)
        factor = 1.0 if constants == "paper" else 2.0
        assert math.exp(log_a0) == pytest.approx(factor * q ** 10, rel=1e-13)
    with pytest.raises(ValidationError):
        sch.log_bound_coefficients(np.full(3, 1.0), None, 2.0, 0.5)  # alpha > 1/L


def test_masg_coefficients_against_direct_products():
    # eq. 4.8 written out term by term, for every horizon tau (paper constants)
    s = sch.masg_schedule(60, 20.0, 1.0, step_multiplier=0.7, n1=7)
    alphas, stages = s["step_sizes"], s["stages"]
    q = 1 - np.sqrt(1.0 * alphas)
    bounds = sch.horizon_bounds(alphas, stages, 20.0, 1.0, 3, 2.0, 50, 0.5, 4.0, "paper")
    for tau in (1, 7, 8, 30, 60):
        a = np.array([alphas[t] * (1 + alphas[t] * 20.0) * np.prod(q[t + 1:tau])
                      * 2.0 ** (stages[tau - 1] - stages[t]) for t in range(tau)])
        a0 = 2.0 ** (stages[tau - 1] - stages[0]) * np.prod(q[:tau])
        direct = a0 * 4.0 + 3 * (2.0 / (50 * 0.5)) ** 2 * np.sum(a ** (1 / 3)) ** 3
        assert bounds[tau - 1] == pytest.approx(direct, rel=1e-12)
        log_a, log_a0 = sch.log_bound_coefficients(alphas[:tau], stages[:tau], 20.0, 1.0, "paper")
        assert np.allclose(np.exp(log_a), a, rtol=1e-12)
        assert math.exp(log_a0) == pytest.approx(a0, rel=1e-12)
