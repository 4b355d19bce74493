"""The (stochastic) subgradient iterations of spec 001, and the baselines that cost no privacy.

:func:`subgradient_method` runs batched iterations at a selection
temperature ``beta`` (finite: Algorithm 2; ``inf``: the non-private
subgradient method; 0: uniform selection, data-independent), and
:func:`data_independent_baselines` the outputs that never read the offsets b.
Step sizes are public.
"""

import math

import numpy as np

from fastdp._validation import check_random_state
from fastdp.exceptions import ValidationError
from fastdp.solvers.piecewise_affine.checks import check_choice, check_problem

__all__ = ["STEP_RULES", "step_sizes", "subgradient_method", "data_independent_baselines"]

STEP_RULES = ("constant", "inverse", "inverse_sqrt")


def step_sizes(problem, n_iter, step):
    R, G = problem.diameter(), problem.lipschitz
    i = np.arange(1, n_iter + 1, dtype=np.float64)
    if isinstance(step, str):
        check_choice("step", step, STEP_RULES)
        if step == "constant":
            return np.full(n_iter, R / (G * math.sqrt(n_iter)))
        if step == "inverse":
            return (R / G) / i
        return (R / G) / np.sqrt(i)
    if callable(step):
        steps = np.array([float(step(int(k))) for k in i], dtype=np.float64)
    else:
        steps = np.array(step, dtype=np.float64)
    if steps.shape != (n_iter,) or not np.all(np.isfinite(steps)) or np.any(steps <= 0):
        raise ValidationError(
            f"step must be one of {STEP_RULES}, a callable i -> alpha_i or {n_iter} positive numbers; "
            "step sizes must be public (not computed from b).")
    return steps


def subgradient_method(problem, *, beta, n_iter, steps, x1, project, rng, sign=1.0,
                       keep_trajectory=False):
    """Batched (stochastic) subgradient iterations, one row per run.

    ``beta`` is the selection temperature: finite for Algorithm 2 (beta' =
    eps / (2 k b_max)), ``inf`` for the regular subgradient method (B2, not
    private), 0 for uniform selection (B4, data-independent). Returns the
    last iterate, the step-weighted average of x^(1..k), the best f-value
    (non-private diagnostic) and optionally the trajectory (n, k+1, d).
    """
    X = np.array(x1, dtype=np.float64, copy=True)
    cons = problem.constraints
    avg = np.zeros_like(X)
    traj = np.empty((X.shape[0], n_iter + 1, X.shape[1])) if keep_trajectory else None
    for t in range(n_iter):
        if traj is not None:
            traj[:, t] = X
        avg += steps[t] * X
        g, _ = problem.select_subgradients(X, beta, rng, sign=sign)
        X = X - steps[t] * g
        if project:
            X = cons.project(X)
    if traj is not None:
        traj[:, n_iter] = X
    return X, avg / steps.sum(), traj


def data_independent_baselines(problem, n_runs=1, *, n_iter=100, step="constant", project=True,
                               random_state=None):
    """Outputs that do not read b (0-DP): the centre of P (B3) and Algorithm 2
    with epsilon -> 0, i.e. uniform piece selection (B4).

    Returns a dict of arrays of shape (n_runs, d): ``center``,
    ``uniform_subgradient_last``, ``uniform_subgradient_average``.
    For :class:`SumOfPinballProblem` uniform selection picks each s_j uniformly.
    """
    problem = check_problem(problem)
    rng = check_random_state(random_state)
    steps = step_sizes(problem, int(n_iter), step)
    start = np.tile(problem.center(), (n_runs, 1))
    last, avg, _ = subgradient_method(problem, beta=0.0, n_iter=int(n_iter), steps=steps,
                                      x1=start, project=project, rng=rng)
    return {"center": start, "uniform_subgradient_last": last,
            "uniform_subgradient_average": avg}
