"""Utility bounds of spec 001 (section 3) as plain functions of public numbers.

Paper results: Theorem 13 / eq. (13), Theorem 17, Theorem 21, Theorem 24.
Derived ones (marked [DERIVED] in the spec): D1 (dimension bound), D2
(1 + log C), D5 (best iteration count), the M_P bound and the Remark 3
hypothesis-testing bound. All logarithms are natural.
"""

import math

import numpy as np

__all__ = [
    "finite_selection_gap_bound",
    "solution_perturbation_bound",
    "exponential_mechanism_bound",
    "exponential_mechanism_log_bound",
    "exponential_mechanism_dimension_bound",
    "subgradient_bound",
    "subgradient_optimal_iterations",
    "offset_perturbation_bound",
    "false_positive_lower_bound",
]


def finite_selection_gap_bound(b_max, log_n_pieces, epsilon):
    """Eq. (13): E[gamma(i*)] <= 2 b_max (1 + log m) / epsilon."""
    return 2.0 * b_max * (1.0 + log_n_pieces) / epsilon


def solution_perturbation_bound(lipschitz, d, sensitivity, epsilon, paper_sqrt_d=True):
    """Theorem 17: G d^{3/2} Delta / eps (paper); G d Delta / eps without the sqrt(d)."""
    return lipschitz * d * (math.sqrt(d) if paper_sqrt_d else 1.0) * sensitivity / epsilon


def exponential_mechanism_bound(C0, b_max, epsilon):
    """Theorem 21: E[f(M_E) - f_opt] <= C(0, eps) 2 b_max / eps."""
    return C0 * 2.0 * b_max / epsilon


def exponential_mechanism_log_bound(C0, b_max, epsilon):
    """[DERIVED D2] (1 + log C(0, eps)) 2 b_max / eps (always <= Theorem 21)."""
    return (1.0 + math.log(C0)) * 2.0 * b_max / epsilon


def exponential_mechanism_dimension_bound(d, b_max, epsilon):
    """[DERIVED D1] E_pi[f] - f_opt <= d / beta = 2 d b_max / eps (convex f, convex P)."""
    return 2.0 * d * b_max / epsilon


def subgradient_bound(diameter, lipschitz, steps, b_max, log_n_pieces, epsilon):
    """Theorem 24 (eq. 14) for step sizes ``steps`` (k of them).

    (R^2 + G^2 sum a_i^2) / (2 sum a_i) + 2 k b_max (1 + log m) / eps. By
    [DERIVED D4] it also bounds the step-weighted average iterate.
    """
    steps = np.asarray(steps, dtype=np.float64)
    k = steps.shape[0]
    first = (diameter**2 + lipschitz**2 * np.sum(steps**2)) / (2.0 * np.sum(steps))
    return float(first + finite_selection_gap_bound(b_max, log_n_pieces, epsilon / k))


def subgradient_optimal_iterations(diameter, lipschitz, b_max, log_n_pieces, epsilon):
    """[DERIVED D5] k* = (R G eps / (4 b_max (1 + log m)))^{2/3}, at least 1."""
    k = (diameter * lipschitz * epsilon / (4.0 * b_max * (1.0 + log_n_pieces))) ** (2.0 / 3.0)
    return max(1, int(round(k)))


def offset_perturbation_bound(n_pieces, b_max, epsilon):
    """[DERIVED D3] E[f(M_P) - f_opt] <= 2 E||w||_inf <= 2 m^{3/2} b_max / eps."""
    return 2.0 * n_pieces**1.5 * b_max / epsilon


def false_positive_lower_bound(epsilon, p_false_negative):
    """Remark 3: p_FP >= max(1 - e^eps p_FN, e^-eps (1 - p_FN)) for any test."""
    return max(1.0 - math.exp(epsilon) * p_false_negative,
               math.exp(-epsilon) * (1.0 - p_false_negative))
