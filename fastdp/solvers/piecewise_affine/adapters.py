"""Problems of spec 001 sections 1.5 and 7 written as private-offset objectives.

Each helper states the record-level adjacency it assumes and derives the
adjacency radius b_max (a bound on max_i |b_i - b'_i|, equivalently on
sup_x |f(x; D) - f(x; D')|) from it. Features, prices, constraint sets and
bounds are public; responses / caps are private.
"""

import numpy as np

from fastdp._validation import check_positive, check_real_array
from fastdp.exceptions import ValidationError
from fastdp.solvers.piecewise_affine.constraints import Box, Polytope
from fastdp.solvers.piecewise_affine.problem import PiecewiseAffineProblem, SumOfPinballProblem

__all__ = [
    "chebyshev_regression_problem",
    "quantile_regression_problem",
    "lad_regression_problem",
    "minimax_lp_problem",
    "resource_allocation_problem",
    "resource_allocation_utility",
]


def chebyshev_regression_problem(Z, y, delta, constraints):
    """l_inf regression: minimise max_j |z_j . x - y_j| over P.

    Pieces +z_j (offset -y_j) and -z_j (offset +y_j). Private: y. If every
    response may change by at most ``delta`` (one of them or all at once),
    the offsets move by at most delta in l_inf, so b_max = delta.
    """
    Z = check_real_array("Z", Z, 2, allow_empty=False)
    y = check_real_array("y", y, 1, allow_empty=False)
    if Z.shape[0] != y.shape[0]:
        raise ValidationError(f"Z has {Z.shape[0]} rows but y has {y.shape[0]} entries.")
    return PiecewiseAffineProblem(np.vstack([Z, -Z]), np.concatenate([-y, y]),
                                  check_positive("delta", delta), constraints)


def quantile_regression_problem(Z, y, tau, delta, constraints, *, responses_changed="one",
                                weight=1.0):
    """Quantile regression: minimise weight * sum_j rho_tau(y_j - z_j . x) over P.

    Private: y. If one response changes by at most ``delta``
    (``responses_changed="one"``), f moves by at most
    weight * max(tau, 1 - tau) * delta at every x, which is b_max; if all may
    change (``"all"``), n times that.
    """
    if responses_changed not in ("one", "all"):
        raise ValidationError(f"responses_changed must be 'one' or 'all'; got {responses_changed!r}.")
    delta = check_positive("delta", delta)
    n = np.shape(y)[0] if np.ndim(y) == 1 else 1
    factor = 1 if responses_changed == "one" else n
    b_max = float(weight) * max(float(tau), 1.0 - float(tau)) * delta * factor
    return SumOfPinballProblem(Z, y, b_max, constraints, tau=tau, weight=weight)


def lad_regression_problem(Z, y, delta, constraints, *, responses_changed="one"):
    """Least absolute deviations: minimise sum_j |y_j - z_j . x| (tau = 1/2, weight 2).

    b_max = delta when one response changes by at most delta, n delta when all may.
    """
    return quantile_regression_problem(Z, y, 0.5, delta, constraints,
                                       responses_changed=responses_changed, weight=2.0)


def minimax_lp_problem(A, b, b_max, H, h):
    """An LP with private objective offsets in minimax form,
    minimise max_i (a_i . x + b_i) s.t. H x <= h (bounded)."""
    return PiecewiseAffineProblem(A, b, b_max, Polytope(H, h))


def resource_allocation_utility(x, c, zbar):
    """U(x) = max {c . z : 1 . z <= x, 0 <= z <= zbar} by the greedy fill (eq. 5)."""
    c = np.asarray(c, dtype=np.float64)
    zbar = np.asarray(zbar, dtype=np.float64)
    order = np.argsort(-c)
    remaining, total = float(x), 0.0
    for j in order:
        if c[j] <= 0 or remaining <= 0:
            break
        take = min(zbar[j], remaining)
        total += c[j] * take
        remaining -= take
    return total


def resource_allocation_problem(c, zbar, mu, x_max, delta, *, adjacency="one_agent"):
    """Example 7: buy x in [0, x_max] at unit price mu, split among agents.

    maximise U(x) - mu x is minimise f(x) = max_{nu in V} ((mu - nu) x -
    sum_j zbar_j (c_j - nu)_+), V = {0} ∪ {c_j > 0} (the dual vertices,
    spec 1.5). Private: the caps zbar. Public: gains c, price mu, x_max.
    b_max = delta max_j (c_j)_+ if one agent's cap changes by at most delta
    (``adjacency="one_agent"``), delta sum_j (c_j)_+ if all may
    (``"all_agents"``).
    """
    c = check_real_array("c", c, 1, allow_empty=False)
    zbar = check_real_array("zbar", zbar, 1, allow_empty=False)
    if c.shape != zbar.shape:
        raise ValidationError("c and zbar must have the same length.")
    if np.any(zbar < 0):
        raise ValidationError("caps zbar must be >= 0.")
    if adjacency not in ("one_agent", "all_agents"):
        raise ValidationError(f"adjacency must be 'one_agent' or 'all_agents'; got {adjacency!r}.")
    delta = check_positive("delta", delta)
    pos = np.maximum(c, 0.0)
    if not np.any(pos > 0):
        raise ValidationError("at least one gain c_j must be positive.")
    nus = np.unique(np.concatenate([[0.0], c[c > 0]]))
    slopes = float(mu) - nus
    offsets = -np.array([np.sum(zbar * np.maximum(c - nu, 0.0)) for nu in nus])
    b_max = delta * (pos.max() if adjacency == "one_agent" else pos.sum())
    return PiecewiseAffineProblem(slopes[:, None], offsets, b_max,
                                  Box([0.0], [check_positive("x_max", x_max)]))
