"""Algorithms 1 and 2 of spec 001: the private subgradient and the DP subgradient method."""

import numpy as np

from fastdp._validation import check_epsilon, check_random_state
from fastdp.exceptions import ValidationError
from fastdp.privacy.events import ExponentialMechanismEvent, SelfComposedEvent
from fastdp.solvers.piecewise_affine.checks import (
    check_choice,
    check_n_runs,
    check_problem,
    start_points,
)
from fastdp.solvers.piecewise_affine.iterations import step_sizes, subgradient_method
from fastdp.solvers.piecewise_affine.result import finish

__all__ = ["private_subgradient", "dp_subgradient"]

_OUTPUTS = ("average", "last", "trajectory")


def private_subgradient(problem, x, epsilon, *, paper_sign=False, random_state=None):
    """Algorithm 1: an epsilon-DP approximate subgradient of f at a public point x.

    Private: b. Adjacency: ||b - b'||_inf <= b_max. Score: u_i = a_i . x + b_i,
    sensitivity b_max. Released: the index i* (and slope a_{i*}) drawn with
    P(i* = i) ∝ exp(+eps u_i / (2 b_max)) (finite exponential mechanism).
    ``paper_sign=True`` uses the paper's printed exp(-...) (erratum E1: it
    favours the minimising piece; still epsilon-DP, useless as a subgradient).
    Event: ``ExponentialMechanismEvent(eps)``.

    Returns
    -------
    slope : ndarray (d,)
    index : int or ndarray
        The piece (for :class:`SumOfPinballProblem`: the choices s in {tau, tau-1}^n).
    event : ExponentialMechanismEvent
    """
    problem = check_problem(problem)
    epsilon = check_epsilon(epsilon)
    rng = check_random_state(random_state)
    x = np.asarray(x, dtype=np.float64)
    if x.shape != (problem.n_features,) or not np.all(np.isfinite(x)):
        raise ValidationError(f"x must be a finite vector of length {problem.n_features}.")
    slopes, idx = problem.select_subgradients(x[None, :], epsilon / (2.0 * problem.b_max), rng,
                                              sign=-1.0 if paper_sign else 1.0)
    return slopes[0], idx[0], ExponentialMechanismEvent(epsilon, problem.adjacency)


def dp_subgradient(problem, epsilon, *, n_iter=100, step="constant", x1="center", project=True,
                   output="average", paper_sign=False, n_runs=None, random_state=None):
    """Algorithm 2: the epsilon-DP subgradient method.

    Private: b. Adjacency: ||b - b'||_inf <= b_max. Each of the ``n_iter`` = k
    iterations runs Algorithm 1 at the current (public) iterate with budget
    eps/k: P(i) ∝ exp(+(eps/k)(a_i . x + b_i)/(2 b_max)) (score sensitivity
    b_max), then steps x <- x - alpha_i a_{i*} and, by default, projects onto
    P (post-processing; erratum E3, ``project=False`` for the paper's literal
    iteration). Step sizes (``step``: "constant" R/(G sqrt(k)), "inverse"
    (R/G)/i, "inverse_sqrt" (R/G)/sqrt(i), a callable or an array) and
    x^(1) are public. Released (``output``): "average" (default; the
    step-weighted average of x^(1..k), covered by Theorem 24 [D4]), "last"
    (x^(k+1), the paper's output) or "trajectory" (all iterates). The best
    iterate is never returned: choosing it reads b (erratum E4). Event:
    ``SelfComposedEvent(ExponentialMechanismEvent(eps/k), k)``, composed
    ``n_runs`` times. ``paper_sign=True`` reproduces erratum E1.
    """
    problem = check_problem(problem)
    epsilon = check_epsilon(epsilon)
    check_choice("output", output, _OUTPUTS)
    n, single = check_n_runs(n_runs)
    if isinstance(n_iter, bool) or int(n_iter) != n_iter or n_iter < 1:
        raise ValidationError(f"n_iter must be a positive integer; got {n_iter!r}.")
    n_iter = int(n_iter)
    rng = check_random_state(random_state)
    steps = step_sizes(problem, n_iter, step)
    start = start_points(problem, x1, n, rng)
    beta = (epsilon / n_iter) / (2.0 * problem.b_max)
    last, avg, traj = subgradient_method(problem, beta=beta, n_iter=n_iter, steps=steps, x1=start,
                                         project=project, rng=rng,
                                         sign=-1.0 if paper_sign else 1.0,
                                         keep_trajectory=output == "trajectory")
    X = {"average": avg, "last": last, "trajectory": last}[output]
    per_step = ExponentialMechanismEvent(epsilon / n_iter, problem.adjacency)
    result = finish(problem, X, single, "subgradient", epsilon,
                     SelfComposedEvent(per_step, n_iter), rng,
                     params={"n_iter": n_iter, "steps": steps, "project": bool(project),
                             "output": output, "paper_sign": bool(paper_sign), "beta": beta,
                             "x1": x1 if isinstance(x1, str) else "given"})
    if traj is not None:
        result.trajectory = traj[0] if single else traj
    return result
