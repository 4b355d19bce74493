"""Checks of the public arguments every spec-001 mechanism shares.

Starting points are public: they are never derived from the private offsets b.
"""

import numpy as np

from fastdp.exceptions import ValidationError
from fastdp.solvers.piecewise_affine.problem import PiecewiseAffineProblem, SumOfPinballProblem

__all__ = ["check_problem", "check_n_runs", "check_choice", "start_points"]


def check_problem(problem):
    if not isinstance(problem, (PiecewiseAffineProblem, SumOfPinballProblem)):
        raise ValidationError(
            "problem must be a PiecewiseAffineProblem or SumOfPinballProblem; got "
            f"{type(problem).__name__}.")
    return problem


def check_n_runs(n_runs):
    if n_runs is None:
        return 1, True
    if isinstance(n_runs, bool) or int(n_runs) != n_runs or n_runs < 1:
        raise ValidationError(f"n_runs must be a positive integer or None; got {n_runs!r}.")
    return int(n_runs), False


def check_choice(name, value, choices):
    if value not in choices:
        raise ValidationError(f"{name} must be one of {choices}; got {value!r}.")
    return value


def start_points(problem, init, n_runs, rng):
    """Data-independent starting points (n_runs, d); never derived from b."""
    cons = problem.constraints
    d = problem.n_features
    if isinstance(init, str):
        if init == "center":
            return np.tile(cons.center(), (n_runs, 1))
        if init == "uniform":
            return cons.sample_uniform(rng, n_runs)
        raise ValidationError(
            f"init must be 'center', 'uniform' or an array of public starting points; got {init!r}. "
            "Starting points must not depend on the private offsets.")
    x0 = np.array(init, dtype=np.float64)
    if x0.ndim == 1:
        x0 = np.tile(x0, (n_runs, 1))
    if x0.shape != (n_runs, d):
        raise ValidationError(f"init must have shape ({d},) or ({n_runs}, {d}); got {x0.shape}.")
    if not np.all(np.isfinite(x0)) or not np.all(cons.contains(x0)):
        raise ValidationError("every starting point must lie inside the constraint set P.")
    return x0
