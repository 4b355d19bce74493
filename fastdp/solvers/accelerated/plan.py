"""Plans of the accelerated solvers: every public quantity of a run, fixed before the data.

An :class:`AcceleratedPlan` holds the step sizes, momenta, restarts and
Laplace scales of one run of DP-GD, DP heavy ball, DP-NAG(-opt) or
DP-MASG(-opt) (spec 002, Algorithms 1-5), and its privacy ``event``; the
``plan_*`` functions build it from public parameters only, so the event can
be charged to a ledger before any data is read.  :mod:`.run` executes a plan.

Privacy: nothing here reads data; the event is that of the drawn Laplace
scales (pure ε, basic composition of the per-step ε_step, replace-one
adjacency; see :mod:`fastdp.privacy.laplace_schedule`).
"""

import math

import numpy as np

from fastdp._validation import check_integer, check_positive
from fastdp.exceptions import ValidationError
from fastdp.privacy import laplace_schedule as lap
from fastdp.privacy.events import NonPrivateEvent
from fastdp.privacy.pure import basic_composition
from fastdp.solvers.accelerated import accounting as acc
from fastdp.solvers.accelerated import schedules as sch

__all__ = ["AcceleratedPlan", "plan_gd", "plan_heavy_ball", "plan_nesterov", "plan_masg"]


class AcceleratedPlan:
    """The public schedule of one run: step sizes, momenta, restarts, noise scales.

    Built by the ``plan_*`` functions from public parameters only; its
    ``event`` is the privacy event of running it (before anything runs).

    Attributes
    ----------
    algorithm : str
    step_sizes, momenta : ndarray of shape (T',)
    restarts : ndarray of bool, shape (T',)
        True where the momentum restarts (x_{k−2} := x_{k−1}).
    extrapolate : bool
        Gradient at the extrapolated point (NAG/MASG) or at x_{k−1} (HB/GD).
    nominal_scales : ndarray of shape (T',)
        b_k of the analysis (0: no noise).
    scales : ndarray of shape (T',)
        Laplace scales drawn (b_k, or b_k/√2 for ``"reference_code"``).
    n_samples, batch_size : int
    sensitivity : float
    nominal_n_iter : int
        T requested; ``horizon`` = T' run (``len(step_sizes)``).
    noise_convention, allocation, bound_constants : str
    step_epsilons : ndarray
        ε_step of the drawn scales (what each step really costs).
    epsilon : float
        Σ step_epsilons (pure ε of the run; inf when not private).
    event : DpEvent
    """

    def __init__(self, *, algorithm, step_sizes, momenta, restarts, extrapolate, nominal_scales,
                 n_samples, batch_size, sensitivity, nominal_n_iter, noise_convention,
                 allocation, bound_constants=None, extra=None):
        self.algorithm = algorithm
        self.step_sizes = np.asarray(step_sizes, dtype=np.float64)
        self.momenta = np.asarray(momenta, dtype=np.float64)
        self.restarts = np.asarray(restarts, dtype=bool)
        self.extrapolate = bool(extrapolate)
        self.nominal_scales = np.asarray(nominal_scales, dtype=np.float64)
        self.scales = acc.drawn_scales(self.nominal_scales, noise_convention)
        self.n_samples = int(n_samples)
        self.batch_size = int(batch_size)
        self.sensitivity = float(sensitivity)
        self.nominal_n_iter = int(nominal_n_iter)
        self.noise_convention = noise_convention
        self.allocation = allocation
        self.bound_constants = bound_constants
        self.extra = {} if extra is None else dict(extra)
        self.private = bool(np.all(self.scales > 0))
        if self.private:
            self.step_epsilons = lap.step_epsilons(self.scales, self.sensitivity, self.n_samples,
                                                   self.batch_size)
            self.epsilon = basic_composition(self.step_epsilons)
        else:
            self.step_epsilons = np.full(self.scales.size, math.inf)
            self.epsilon = math.inf
        self.event = (lap.laplace_schedule_event(self.scales, self.sensitivity, self.n_samples,
                                                 self.batch_size)
                      if self.private else NonPrivateEvent())

    @property
    def horizon(self):
        """T': the number of steps that run."""
        return int(self.step_sizes.size)


def _check_common(n_samples, batch_size, sensitivity, epsilon, n_iter, noise_convention):
    n = check_integer("n_samples", n_samples, low=1)
    m = n if batch_size is None else check_integer("batch_size", batch_size, low=1)
    if m > n:
        raise ValidationError(f"batch_size ({m}) must not exceed the number of samples ({n})")
    S = check_positive("sensitivity", sensitivity)
    eps = check_positive("epsilon", epsilon, allow_inf=True)
    T = check_integer("n_iter", n_iter, low=1)
    if noise_convention not in acc.NOISE_CONVENTIONS:
        raise ValidationError(
            f"noise_convention must be one of {acc.NOISE_CONVENTIONS}; got {noise_convention!r}")
    return n, m, S, eps, T


def _explicit_scales(laplace_scales, T):
    scales = np.asarray(laplace_scales, dtype=np.float64).ravel()
    if scales.size != T:
        raise ValidationError(f"laplace_scales must have n_iter = {T} entries; got {scales.size}")
    if not (np.all(scales > 0) and np.all(np.isfinite(scales))) and not np.all(scales == 0):
        raise ValidationError("laplace_scales must all be finite and > 0 (or all 0: not private)")
    return scales


def _uniform_or_explicit_scales(laplace_scales, S, eps, T, n, m):
    """The user's ``laplace_scales``, or the uniform split of ε over the T steps."""
    if laplace_scales is not None:
        return _explicit_scales(laplace_scales, T)
    return lap.uniform_scales(S, eps, T, n, m)


def _momentum(momentum, step_size, strong_convexity):
    """β in [0, 1): the given momentum, or (1 − √(μα))/(1 + √(μα)) from μ (spec B5)."""
    if momentum is None:
        if strong_convexity is None:
            raise ValidationError(
                "give momentum, or strong_convexity for the default β = (1−√(μα))/(1+√(μα))")
        momentum = sch.nag_momentum(step_size, strong_convexity)
    beta = float(momentum)
    if not 0.0 <= beta < 1.0:
        raise ValidationError(f"momentum must lie in [0, 1); got {momentum!r}")
    return beta


def plan_gd(*, n_samples, sensitivity, epsilon, n_iter, step_size, batch_size=None,
            laplace_scales=None, noise_convention="paper"):
    """Plan of DP-GD / DP-SGD (Algorithm 1): uniform budget, b = S1/(m ε0)."""
    n, m, S, eps, T = _check_common(n_samples, batch_size, sensitivity, epsilon, n_iter,
                                    noise_convention)
    alpha = check_positive("step_size", step_size)
    scales = _uniform_or_explicit_scales(laplace_scales, S, eps, T, n, m)
    return AcceleratedPlan(
        algorithm="dp_gd", step_sizes=np.full(T, alpha), momenta=np.zeros(T),
        restarts=np.zeros(T, dtype=bool), extrapolate=False, nominal_scales=scales,
        n_samples=n, batch_size=m, sensitivity=S, nominal_n_iter=T,
        noise_convention=noise_convention,
        allocation="explicit" if laplace_scales is not None else "uniform")


def plan_heavy_ball(*, n_samples, sensitivity, epsilon, n_iter, step_size, momentum=None,
                    strong_convexity=None, batch_size=None, laplace_scales=None,
                    noise_convention="paper"):
    """Plan of DP heavy ball (Algorithm 2): uniform budget (Prop. 3.1).

    ``momentum`` defaults to the experiments' β = (1 − √(αμ))/(1 + √(αμ))
    (spec B5), which needs ``strong_convexity``.
    """
    n, m, S, eps, T = _check_common(n_samples, batch_size, sensitivity, epsilon, n_iter,
                                    noise_convention)
    alpha = check_positive("step_size", step_size)
    beta = _momentum(momentum, alpha, strong_convexity)
    scales = _uniform_or_explicit_scales(laplace_scales, S, eps, T, n, m)
    return AcceleratedPlan(
        algorithm="dp_heavy_ball", step_sizes=np.full(T, alpha), momenta=np.full(T, beta),
        restarts=np.zeros(T, dtype=bool), extrapolate=False, nominal_scales=scales,
        n_samples=n, batch_size=m, sensitivity=S, nominal_n_iter=T,
        noise_convention=noise_convention,
        allocation="explicit" if laplace_scales is not None else "uniform")


def _default_constants(bound_constants, noise_convention):
    if bound_constants is None:
        return "consistent" if noise_convention == "paper" else "reference_code"
    if bound_constants not in sch.BOUND_CONSTANTS:
        raise ValidationError(
            f"bound_constants must be one of {sch.BOUND_CONSTANTS}; got {bound_constants!r}")
    return bound_constants


def _allocated_scales(laplace_scales, allocation, step_sizes, stages, *, smoothness,
                      strong_convexity, n_features, S, n, m, eps, alter_horizon, initial_error,
                      constants, horizon_rule="paper"):
    """(T', nominal scales of the T' steps) of Algorithms 3-5.

    The user's ``laplace_scales`` or the uniform split (``allocation="uniform"``
    or ε = ∞) keep T' = T; otherwise Algorithm 4's optimised allocation.
    """
    T = step_sizes.size
    if laplace_scales is not None or allocation == "uniform" or math.isinf(eps):
        return T, _uniform_or_explicit_scales(laplace_scales, S, eps, T, n, m)
    if smoothness is None or strong_convexity is None:
        raise ValidationError(f"allocation={allocation!r} needs smoothness and strong_convexity")
    horizon = T
    if alter_horizon:
        horizon = sch.choose_horizon(step_sizes, stages, smoothness, strong_convexity,
                                     check_integer("n_features", n_features, low=1), S, n, eps,
                                     initial_error, constants, batch_size=m,
                                     horizon_rule=horizon_rule)
    log_a, _ = sch.log_bound_coefficients(step_sizes[:horizon], stages[:horizon], smoothness,
                                          strong_convexity, constants)
    if allocation == "prop42":
        budgets = sch.prop42_allocation(log_a, eps)
    else:
        budgets = sch.numerical_allocation(log_a, S, n, m, eps)
    scales = np.array([lap.b_for_eps(S, e, n, m) for e in budgets])
    return horizon, scales


def _allocation_labels(laplace_scales, allocation, constants):
    """The plan's ``allocation`` and ``bound_constants`` fields (constants only if used)."""
    return {"allocation": "explicit" if laplace_scales is not None else allocation,
            "bound_constants": constants if allocation != "uniform" else None}


def _horizon_label(allocation, alter_horizon, horizon_rule):
    """``extra["horizon_rule"]`` of a plan: the rule that chose T' (None if T' = T by fiat)."""
    return horizon_rule if allocation != "uniform" and alter_horizon else None


def _check_allocation(allocation, alter_horizon, laplace_scales, horizon_rule="paper"):
    if horizon_rule not in sch.HORIZON_RULES:
        raise ValidationError(
            f"horizon_rule must be one of {sch.HORIZON_RULES}; got {horizon_rule!r}")
    if allocation not in sch.ALLOCATIONS:
        raise ValidationError(f"allocation must be one of {sch.ALLOCATIONS}; got {allocation!r}")
    if laplace_scales is not None and allocation != "uniform":
        raise ValidationError("give either laplace_scales or a non-uniform allocation, not both")
    if alter_horizon is None:
        alter_horizon = allocation != "uniform"
    if not isinstance(alter_horizon, (bool, np.bool_)):
        raise ValidationError(f"alter_horizon must be True, False or None; got {alter_horizon!r}")
    return bool(alter_horizon)


def plan_nesterov(*, n_samples, sensitivity, epsilon, n_iter, step_size, strong_convexity=None,
                  smoothness=None, momentum=None, n_features=None, batch_size=None,
                  allocation="uniform", alter_horizon=None, initial_error=10.0,
                  bound_constants=None, laplace_scales=None, noise_convention="paper",
                  horizon_rule="paper"):
    """Plan of DP-NAG (Algorithm 3) or DP-NAG-opt (``allocation="prop42"``, Algorithm 4).

    ``allocation="uniform"``: every step costs ε/T.  ``"prop42"``: ε_t ∝
    a_{T',t}^{1/3} (Prop. 4.2; for m < n the m = n split, inverted exactly
    through eq. 3.3, spec A4).  ``"numerical"``: the exact optimum of (4.4)
    with the subsampled ε_step (an extension).  With ``alter_horizon``
    (default: on for the non-uniform allocations) only T' = argmin of the
    bound (4.6) steps run, spending the whole ε.  The non-uniform
    allocations need ``smoothness``, ``strong_convexity`` and ``n_features``.
    ``horizon_rule``: ``"paper"`` (default, eq. 4.6 as the paper and its code:
    n instead of m, no subsampling term) or ``"subsampled"`` (the bound of
    the subsampled schedule that runs, with σ_s²; an extension, spec A5; see
    :func:`~fastdp.solvers.accelerated.schedules.horizon_bounds`).
    """
    n, m, S, eps, T = _check_common(n_samples, batch_size, sensitivity, epsilon, n_iter,
                                    noise_convention)
    alpha = check_positive("step_size", step_size)
    alter_horizon = _check_allocation(allocation, alter_horizon, laplace_scales, horizon_rule)
    beta = _momentum(momentum, alpha, strong_convexity)
    constants = _default_constants(bound_constants, noise_convention)
    horizon, scales = _allocated_scales(
        laplace_scales, allocation, np.full(T, alpha), np.ones(T, dtype=np.int64),
        smoothness=smoothness, strong_convexity=strong_convexity, n_features=n_features, S=S, n=n,
        m=m, eps=eps, alter_horizon=alter_horizon, initial_error=initial_error, constants=constants,
        horizon_rule=horizon_rule)
    return AcceleratedPlan(
        algorithm="dp_nesterov", step_sizes=np.full(horizon, alpha), momenta=np.full(horizon, beta),
        restarts=np.zeros(horizon, dtype=bool), extrapolate=True, nominal_scales=scales,
        n_samples=n, batch_size=m, sensitivity=S, nominal_n_iter=T,
        noise_convention=noise_convention,
        **_allocation_labels(laplace_scales, allocation, constants),
        extra={"horizon_rule": _horizon_label(allocation, alter_horizon, horizon_rule)})


def plan_masg(*, n_samples, sensitivity, epsilon, n_iter, smoothness, strong_convexity,
              step_multiplier=1.0, n1=None, n1_rounding="ceil", p=1, n_features=None,
              batch_size=None, allocation="uniform", alter_horizon=None, initial_error=10.0,
              bound_constants=None, laplace_scales=None, noise_convention="paper",
              horizon_rule="paper"):
    """Plan of multistage DP-MASG (Algorithm 5) or DP-MASG-opt (``allocation="prop42"``).

    Stages from :func:`~fastdp.solvers.accelerated.schedules.masg_schedule` for
    the nominal T (then cut at T'), momentum restart at every stage
    boundary; the optimised allocation uses the coefficients of eq. 4.8 and
    ``horizon_rule`` as :func:`plan_nesterov`.
    """
    n, m, S, eps, T = _check_common(n_samples, batch_size, sensitivity, epsilon, n_iter,
                                    noise_convention)
    alter_horizon = _check_allocation(allocation, alter_horizon, laplace_scales, horizon_rule)
    schedule = sch.masg_schedule(T, smoothness, strong_convexity, step_multiplier, n1, n1_rounding, p)
    constants = _default_constants(bound_constants, noise_convention)
    horizon, scales = _allocated_scales(
        laplace_scales, allocation, schedule["step_sizes"], schedule["stages"],
        smoothness=smoothness, strong_convexity=strong_convexity, n_features=n_features, S=S, n=n,
        m=m, eps=eps, alter_horizon=alter_horizon, initial_error=initial_error, constants=constants,
        horizon_rule=horizon_rule)
    cut = slice(0, horizon)
    return AcceleratedPlan(
        algorithm="dp_masg", step_sizes=schedule["step_sizes"][cut],
        momenta=schedule["momenta"][cut], restarts=schedule["restarts"][cut], extrapolate=True,
        nominal_scales=scales, n_samples=n, batch_size=m, sensitivity=S, nominal_n_iter=T,
        noise_convention=noise_convention,
        **_allocation_labels(laplace_scales, allocation, constants),
        extra={"stages": schedule["stages"][cut], "n1": schedule["n1"], "C": schedule["C"],
               "stage_ends": schedule["stage_ends"],
               "horizon_rule": _horizon_label(allocation, alter_horizon, horizon_rule)})
