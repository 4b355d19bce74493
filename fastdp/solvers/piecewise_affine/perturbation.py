"""M_P and M_S: Laplace noise on the private offsets, or on the exact minimiser (spec 001 §4.1-4.2)."""

import math

import numpy as np

from fastdp._validation import check_epsilon, check_random_state
from fastdp.exceptions import ValidationError
from fastdp.privacy.events import LaplaceEvent, PureEvent
from fastdp.solvers.piecewise_affine.checks import check_choice, check_n_runs, check_problem
from fastdp.solvers.piecewise_affine.problem import PiecewiseAffineProblem
from fastdp.solvers.piecewise_affine.result import finish
from fastdp.solvers.piecewise_affine.samplers import vector_laplace

__all__ = ["offset_perturbation", "solution_perturbation"]


def offset_perturbation(problem, epsilon, *, noise="vector_laplace", adjacency="linf",
                        n_runs=None, random_state=None):
    """M_P: Laplace noise on the private offsets, then the LP (Theorem 16).

    Private: b. Adjacency (``adjacency``):

    * ``"linf"`` (default, the paper's eq. 4): ||b - b'||_inf <= b_max, every
      offset may move at once. Sensitivity of b: sqrt(m) b_max in L2, m b_max
      in L1.
    * ``"single"`` (spec 001, A11; **not** the paper's relation): adjacent
      offset vectors differ in at most **one** entry, by at most b_max (e.g.
      one record feeds exactly one offset). Sensitivity of b: b_max in L2
      and in L1, so the noise is sqrt(m) (vector) or m (i.i.d.) times
      smaller. Only valid when the application's neighbouring data sets
      really change a single offset; under eq. 4 this noise is **not**
      epsilon-DP. It only changes M_P: the other mechanisms keep eq. 4.

    Noise: ``noise="vector_laplace"`` (the paper's choice), density
    ∝ exp(-eps ||w||_2 / Delta_2); or ``noise="iid_laplace"``, independent
    Lap(Delta_1 / eps) per offset. Released: argmin_{x in P} max_i
    (a_i . x + b_i + w_i), an epsilon-DP post-processing of the noisy offsets
    (always in P). Event: ``PureEvent(eps)`` (vector Laplace) or
    ``LaplaceEvent(1/eps)`` (i.i.d.), composed ``n_runs`` times.

    Only for explicit pieces (:class:`PiecewiseAffineProblem`).
    """
    problem = check_problem(problem)
    if not isinstance(problem, PiecewiseAffineProblem):
        raise ValidationError(
            "offset perturbation needs explicit pieces; this problem has 2^n implicit pieces. "
            "Use method='exponential', 'subgradient' or 'solution_perturbation'.")
    epsilon = check_epsilon(epsilon)
    check_choice("noise", noise, ("vector_laplace", "iid_laplace"))
    check_choice("adjacency", adjacency, ("linf", "single"))
    n, single = check_n_runs(n_runs)
    rng = check_random_state(random_state)
    m = problem.n_pieces
    l2_sensitivity, l1_sensitivity = problem.b_max, problem.b_max
    if adjacency == "linf":
        l2_sensitivity, l1_sensitivity = math.sqrt(m) * problem.b_max, m * problem.b_max
    if noise == "vector_laplace":
        W = vector_laplace(rng, m, epsilon / l2_sensitivity, n)
        event = PureEvent(epsilon, problem.adjacency)
    else:
        W = rng.laplace(scale=l1_sensitivity / epsilon, size=(n, m))
        event = LaplaceEvent(1.0 / epsilon, problem.adjacency)
    X = np.vstack([problem.with_offsets(problem.b + w).solve()[0] for w in W])
    return finish(problem, X, single, "offset_perturbation", epsilon, event, rng,
                   params={"noise": noise, "adjacency": adjacency,
                           "l2_sensitivity": l2_sensitivity, "l1_sensitivity": l1_sensitivity},
                   diagnostics={"noise_norm_nonprivate": np.linalg.norm(W, axis=1),
                                "noise_sup_norm_nonprivate": np.abs(W).max(axis=1)})


def solution_perturbation(problem, epsilon, *, sensitivity=None, paper_sqrt_d=False,
                          project=False, n_runs=None, random_state=None):
    """M_S: the exact minimiser plus vector-Laplace noise (section 4.2, Theorem 17).

    Private: b. Adjacency: ||b - b'||_inf <= b_max. Sensitivity: any
    minimiser lies in P, so ||x_opt(b) - x_opt(b')||_2 <= Delta with Delta =
    ``sensitivity`` (default: the public diameter bound of P, whatever b_max).
    Noise density ∝ exp(-eps ||w||_2 / Delta), which is epsilon-DP.
    ``paper_sqrt_d=True`` uses the paper's exp(-eps ||w||_2 / (sqrt(d) Delta))
    (erratum E2: also epsilon-DP, sqrt(d) times noisier). Released:
    x_opt + w in R^d, or its projection onto P when ``project=True``
    (post-processing; the paper does not project, erratum E3). Event:
    ``PureEvent(eps)``, composed ``n_runs`` times.
    """
    problem = check_problem(problem)
    epsilon = check_epsilon(epsilon)
    n, single = check_n_runs(n_runs)
    rng = check_random_state(random_state)
    d = problem.n_features
    if sensitivity is None:
        sensitivity = problem.diameter()
    else:
        sensitivity = float(sensitivity)
        if not (math.isfinite(sensitivity) and sensitivity >= problem.diameter() * (1 - 1e-12)):
            raise ValidationError(
                f"sensitivity must be a public bound >= the diameter bound of P "
                f"({problem.diameter():.6g}); got {sensitivity!r}.")
    scale = sensitivity * (math.sqrt(d) if paper_sqrt_d else 1.0)
    W = vector_laplace(rng, d, epsilon / scale, n)
    x_opt = problem.solve()[0]
    raw = x_opt + W
    X = problem.constraints.project(raw) if project else raw
    return finish(problem, X, single, "solution_perturbation", epsilon,
                   PureEvent(epsilon, problem.adjacency), rng,
                   params={"sensitivity": sensitivity, "paper_sqrt_d": bool(paper_sqrt_d),
                           "project": bool(project)},
                   diagnostics={"noise_norm_nonprivate": np.linalg.norm(W, axis=1)})
