"""DP accelerated gradient methods with Laplace noise (spec 002, Kuru et al. 2022).

==================  =========================================================
function            algorithm
==================  =========================================================
:func:`dp_gd`       DP-GD / DP-SGD (Algorithm 1): x_k = x_{k−1} − α g̃(x_{k−1})
:func:`dp_heavy_ball`  DP heavy ball (Algorithm 2), momentum or the
                    equivalent gradient-smoothing form (eqs. 3.6-3.7)
:func:`dp_nesterov` DP-NAG (Algorithm 3); ``allocation="prop42"`` with the
                    horizon rule is DP-NAG-opt (Algorithm 4)
:func:`dp_masg`     multistage DP-MASG with momentum restarts (Algorithm 5);
                    ``allocation="prop42"`` is DP-MASG-opt
==================  =========================================================

Each step k = 1..T evaluates one (mini-batch) gradient g_k at a public point,
adds i.i.d. Laplace noise of scale b_k to every coordinate, and moves; the
iterates x_1..x_T are released (spec 002, section 2.0).

Privacy
-------
* Private: the n records of the problem (rows and labels); n is public.
* Adjacency: replace-one record (spec 002, Def. A.2).
* Sensitivity: the problem's ``sensitivity`` S1 bounds the L1 distance of
  two records' gradients (a bounded data domain, Assumption 3.2; no
  clipping is needed for logistic regression with ``||x||_1 <= R``,
  S1 = 2R).  A batch of m records drawn uniformly *without replacement*
  has mean-gradient sensitivity S1/m.
* Noise and accounting: step k is ``ε_step(S1, b_k, n, m) = log(1 + (m/n)
  (e^{S1/(b_k m)} − 1))``-DP (Laplace mechanism + amplification by
  subsampling without replacement, eq. 3.3); the run is ``Σ_k ε_step``-DP
  by basic composition, δ = 0.  The default uniform schedule makes every
  step cost ε/T (Prop. 3.1); the ``"prop42"`` allocation splits ε unevenly
  (Prop. 4.2) and may stop at T' <= T (Remark 4.1).  The returned ``event``
  records the Laplace scales actually drawn.
* Released: every iterate (``result.coef`` is the last one).
* Noise convention: ``"paper"`` (default) draws scale b, as the proof
  needs; ``"reference_code"`` draws b/√2 like the authors' code (spec 002,
  section 7, A1): its event, and so its ε, is that of the smaller noise,
  about 1.41-1.66 for a nominal ε = 1.  ``result.extra["noise_convention"]``
  says which ran.

Randomness: one ``numpy.random.Generator`` from ``random_state``, split into
a batch-sampling stream and a noise stream.

Estimators: ``ESTIMATOR_SOLVERS`` provides ``"dp_gd_laplace"``,
``"dp_heavy_ball"``, ``"dp_nesterov"`` and ``"dp_masg"`` for
:mod:`fastdp.linear_model` (``solver_options`` select the -opt allocation,
the noise convention, ...; see :class:`_AcceleratedEstimatorSolver`).
Every run builds an :class:`AcceleratedPlan` from public parameters first
(its ``event`` can be charged to a ledger before any data is read) and
:func:`run_plan` then executes it with the gradient oracle.
"""

import math
import numbers

import numpy as np

from fastdp._validation import check_integer, check_positive, check_random_state, check_real
from fastdp.exceptions import ValidationError
from fastdp.privacy.events import NonPrivateEvent, SelfComposedEvent
from fastdp.privacy.pure import basic_composition
from fastdp.privacy.calibration import calibrate
from fastdp.sampling import FixedSizeSampler, get_sampler
from fastdp.privacy import laplace_schedule as lap
from fastdp.privacy.laplace_schedule import (  # noqa: F401  (public re-exports)
    b_for_eps,
    eps0_uniform,
    eps_step,
    laplace_schedule_event,
    total_epsilon,
)
from fastdp.solvers import _accel_accounting as acc
from fastdp.solvers import _accel_schedules as sch
from fastdp.solvers._accel_accounting import (  # noqa: F401  (public re-exports)
    noise_second_moment,
    subsampling_variance_bound,
)
from fastdp.solvers._accel_oracle import GLMProblem, glm_l1_sensitivity, sensitivity_logreg  # noqa: F401
from fastdp.solvers._accel_schedules import (  # noqa: F401
    choose_horizon,
    horizon_bounds,
    log_bound_coefficients,
    masg_schedule,
    nag_momentum,
    numerical_allocation,
    polyak_heavy_ball_parameters,
    prop42_allocation,
)
from fastdp.solvers._accel_theory import (  # noqa: F401
    hb_quadratic_bound,
    hb_stationary_trace,
    lmi_min_eigenvalue,
    prop34_bound,
    rho_hb,
    rho_nag_reference,
)
from fastdp.solvers._common import check_clip, check_lam
from fastdp.solvers._result import SolverResult
from fastdp.solvers.registry import EstimatorSolver

__all__ = [
    "dp_gd",
    "dp_heavy_ball",
    "dp_nesterov",
    "dp_masg",
    "AcceleratedPlan",
    "plan_gd",
    "plan_heavy_ball",
    "plan_nesterov",
    "plan_masg",
    "run_plan",
    "run_plan_replicas",
    "ESTIMATOR_SOLVERS",
    # problem and accounting
    "GLMProblem", "glm_l1_sensitivity", "sensitivity_logreg",
    "eps_step", "b_for_eps", "eps0_uniform", "total_epsilon", "laplace_schedule_event",
    "subsampling_variance_bound", "noise_second_moment",
    # schedules and budget allocation
    "nag_momentum", "polyak_heavy_ball_parameters", "masg_schedule", "log_bound_coefficients",
    "horizon_bounds", "choose_horizon", "prop42_allocation", "numerical_allocation",
    # theory
    "rho_hb", "rho_nag_reference", "hb_stationary_trace", "hb_quadratic_bound",
    "lmi_min_eigenvalue", "prop34_bound",
]


# ---------------------------------------------------------------------------
# plans: everything public about a run, computed before touching the data
# ---------------------------------------------------------------------------


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


def _check_clip(clip):
    """The estimator's clip C for the GLM gradient: > 0, ``None`` or inf for none."""
    return check_clip(clip, private=False)


def _int_at_least(name, value, low=1):
    return check_integer(name, value, low=low)


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
    :func:`~fastdp.solvers._accel_schedules.horizon_bounds`).
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

    Stages from :func:`~fastdp.solvers._accel_schedules.masg_schedule` for
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


# ---------------------------------------------------------------------------
# the one momentum loop
# ---------------------------------------------------------------------------


def _initial_point(x0, d):
    if x0 is None:
        return np.zeros(d)
    x0 = np.array(x0, dtype=np.float64).ravel()
    if x0.size != d or not np.all(np.isfinite(x0)):
        raise ValidationError(f"x0 must be a finite vector of length n_features = {d}")
    return x0


def run_plan(problem, plan, *, x0=None, form="momentum", sensitivity_fn=None, random_state=None,
             callback=None, record_iterates=False):
    """Run an :class:`AcceleratedPlan` on ``problem``; returns a :class:`SolverResult`.

    Step k (k = 1..T'), with x_{−1} = x_0 and x_{k−2} := x_{k−1} at restarts::

        y_k = x_{k−1} + β_k (x_{k−1} − x_{k−2})
        p_k = y_k (NAG, MASG) or x_{k−1} (HB, GD)
        g̃_k = (1/m) Σ_{i∈B_k} ∇f(p_k; y_i) + Laplace(b_k)^d
        x_k = y_k − α_k g̃_k

    ``form="smoothing"`` (heavy ball without restarts only) runs the
    equivalent ū_k = β ū_{k−1} + (1−β) g̃_k, x_k = x_{k−1} − α/(1−β) ū_k,
    ū_1 = (1−β) g̃_1 (eqs. 3.6-3.7); it draws the same batches and noise.

    Parameters
    ----------
    problem : gradient oracle
        See :mod:`fastdp.solvers._accel_oracle`; ``problem.n_samples`` must
        equal ``plan.n_samples``.  The plan's scales are for
        ``plan.sensitivity``; if ``problem.sensitivity`` differs they are
        rescaled by the ratio (same ε: the event is stated relative to S1).
    plan : AcceleratedPlan
    x0 : array-like, optional
        Starting point (public); zeros by default.
    sensitivity_fn : callable x -> float, optional
        State-dependent S1(x_{k−1}) for GD/HB (Prop. 3.1): the drawn scale
        is ``b_k S1(x_{k−1}) / S1`` so each step keeps its ε (spec A6).
    random_state : int, Generator or None
    callback : callable (k, x_k) -> None, optional
    record_iterates : bool
        Keep all x_1..x_T' in ``result.extra["iterates"]``.
    """
    d = _check_run(problem, plan, form, sensitivity_fn)
    x = _initial_point(x0, d)[None, :]
    core = _momentum_loop(problem, plan, x, [check_random_state(random_state)], form=form,
                          sensitivity_fn=sensitivity_fn, callback=callback,
                          record_iterates=record_iterates)
    x, iterates, drawn = core
    return _result(plan, x[0], None if iterates is None else iterates[0], form, problem, drawn[0])


def run_plan_replicas(problem, plan, *, random_states, x0=None, form="momentum",
                      record_iterates=True):
    """R independent runs of ``plan`` in lock step (the 20 runs of a figure).

    Replica r draws its batches and noise from ``random_states[r]`` exactly
    as ``run_plan(problem, plan, random_state=random_states[r])`` does; the
    gradients of all replicas are evaluated together
    (``problem.gradients(points, rows)`` when the problem has it, else one
    ``problem.gradient`` call per replica), so the iterates agree with the
    single runs up to floating-point summation order (about 1e-13
    relative), not bit for bit.

    Privacy: every replica is a separate run on the same data and spends
    the plan's ε; releasing all R replicas spends R ε (basic composition),
    which the returned ``event`` (``SelfComposedEvent(plan.event, R)``)
    states.  Use this for experiments that report averages over runs.

    Returns
    -------
    dict
        ``coefs`` (R, d): the last iterates; ``iterates`` (R, T', d) when
        ``record_iterates``; ``laplace_scales`` (R, T') drawn; ``event``;
        ``epsilon_per_run`` and ``horizon``.
    """
    d = _check_run(problem, plan, form, None)
    if isinstance(random_states, (int, np.integer, np.random.Generator, np.random.SeedSequence)):
        raise ValidationError("random_states must be a sequence with one seed per replica")
    rngs = [check_random_state(r) for r in random_states]
    if not rngs:
        raise ValidationError("random_states must name at least one replica")
    x = np.tile(_initial_point(x0, d), (len(rngs), 1))
    x, iterates, drawn = _momentum_loop(problem, plan, x, rngs, form=form, sensitivity_fn=None,
                                        callback=None, record_iterates=record_iterates)
    return {"coefs": x, "iterates": iterates, "laplace_scales": drawn,
            "event": (SelfComposedEvent(plan.event, len(rngs)) if plan.private
                      else NonPrivateEvent()),
            "epsilon_per_run": plan.epsilon, "horizon": plan.horizon}


def _check_form(plan, form):
    """``form`` is one of :data:`_FORMS`, and "smoothing" only for a heavy-ball plan."""
    if not (isinstance(form, str) and form in _FORMS):
        raise ValidationError(f"form must be 'momentum' or 'smoothing'; got {form!r}")
    if form == "smoothing" and (plan.extrapolate or np.any(plan.restarts)
                                or np.any(plan.momenta != plan.momenta[0])):
        raise ValidationError("form='smoothing' is the heavy-ball rewrite: constant momentum, "
                              "gradient at x_{k-1}, no restarts")


def _check_run(problem, plan, form, sensitivity_fn):
    """Validate a run's arguments; returns the number of features d."""
    n, d = int(problem.n_samples), int(problem.n_features)
    if n != plan.n_samples:
        raise ValidationError(f"the plan is for n = {plan.n_samples} samples; the problem has {n}")
    _check_form(plan, form)
    if sensitivity_fn is not None and plan.extrapolate:
        raise ValidationError("a state-dependent sensitivity is for DP-GD / DP-HB only (spec A6)")
    return d


def _replica_gradients(problem, points, rows):
    """Mean gradients at ``points`` (R, d); ``rows`` is None or (R, m) batches."""
    if hasattr(problem, "gradients") and points.shape[0] > 1:
        return problem.gradients(points, rows)
    return np.stack([problem.gradient(p, None if rows is None else rows[r])
                     for r, p in enumerate(points)])


def _momentum_loop(problem, plan, x, rngs, *, form, sensitivity_fn, callback, record_iterates):
    """The one momentum loop of every accelerated solver, for R replicas (rows of x).

    Replica r uses ``rngs[r]`` split into a batch stream and a noise stream.
    Returns (x_T' (R, d), iterates (R, T', d) or None, drawn scales (R, T')).
    """
    n = plan.n_samples
    R, d = x.shape
    T, m = plan.horizon, plan.batch_size
    streams = [rng.spawn(2) for rng in rngs]
    if m < n:
        batches = [FixedSizeSampler(m).stream(n, sampling).take(T) for sampling, _ in streams]
    noise_rngs = [noise for _, noise in streams]
    # plan scales are for plan.sensitivity; a problem with another S1 rescales
    # them (the scale relative to the sensitivity, hence every ε, is unchanged)
    scales = plan.scales
    if sensitivity_fn is None and float(problem.sensitivity) != plan.sensitivity:
        scales = scales * (float(problem.sensitivity) / plan.sensitivity)
    smoothing = form == "smoothing"
    drawn = np.empty((R, T))
    x_prev = x.copy()
    u = None
    noise = np.empty((R, d))
    iterates = np.empty((R, T, d)) if record_iterates else None
    for k in range(T):
        alpha, beta = plan.step_sizes[k], plan.momenta[k]
        if plan.restarts[k]:
            x_prev = x
        rows = (np.stack([idx[ptr[k]:ptr[k + 1]] for ptr, idx in batches]) if m < n else None)
        scale = np.full(R, scales[k])
        if sensitivity_fn is not None and scales[k] > 0:
            scale = scale * np.array([float(sensitivity_fn(x_r)) for x_r in x]) / plan.sensitivity
        drawn[:, k] = scale
        if smoothing:
            g = _replica_gradients(problem, x, rows)
        else:
            y = x + beta * (x - x_prev)
            g = _replica_gradients(problem, y if plan.extrapolate else x, rows)
        if scales[k] > 0:
            for r in range(R):
                noise[r] = noise_rngs[r].laplace(0.0, scale[r], size=d)
            g = g + noise
        if smoothing:
            u = (1.0 - beta) * g if u is None else beta * u + (1.0 - beta) * g
            x_new = x - (alpha / (1.0 - beta)) * u
        else:
            x_new = y - alpha * g
        x_prev, x = x, x_new
        if record_iterates:
            iterates[:, k] = x
        if callback is not None:
            callback(k + 1, x[0])
    return x, iterates, drawn


def _scalar(value):
    return float(value) if isinstance(value, numbers.Real) else math.nan


def _result(plan, x, iterates, form, problem, scales):
    """SolverResult of a run; ``scales`` are the Laplace scales drawn (problem units)."""
    private = plan.private
    rel = plan.scales[0] * plan.batch_size / plan.sensitivity if private else 0.0
    extra = {
        "nominal_n_iter": plan.nominal_n_iter,
        "horizon": plan.horizon,
        "noise_convention": plan.noise_convention,
        "allocation": plan.allocation,
        "bound_constants": plan.bound_constants,
        "laplace_scales": np.array(scales),
        # b_k of the analysis for the problem's (constant) S1
        "nominal_scales": plan.nominal_scales * (float(problem.sensitivity) / plan.sensitivity),
        "step_epsilons": plan.step_epsilons,
        "epsilon_pure": plan.epsilon,
        "step_sizes": plan.step_sizes,
        "momenta": plan.momenta,
        "form": form,
    }
    extra.update(plan.extra)
    if iterates is not None:
        extra["iterates"] = iterates
    m, n = plan.batch_size, plan.n_samples
    loss = getattr(problem, "loss", None)
    return SolverResult(
        coef=x.copy(), alpha=None, v=None, n_iter=plan.horizon, epochs=plan.horizon * m / n,
        algorithm=plan.algorithm, loss=getattr(loss, "name", "") or "",
        lam=_scalar(getattr(problem, "lam", math.nan)), noise_multiplier=rel,
        sensitivity=float(problem.sensitivity) / m if private else 0.0,
        noise_std=math.sqrt(2.0) * scales[0] if private else 0.0,
        clip=float(getattr(problem, "clip", math.inf)),
        batch_size=float(m), sample_rate=m / n, sampler="fixed" if m < n else "full_batch",
        adjacency="replace_one", event=plan.event, lazy_noise=False,
        diagnostics={"n_noise_draws": plan.horizon * x.size if private else 0},
        num_threads=int(getattr(problem, "num_threads", 1)),
        history=None, extra=extra)


# ---------------------------------------------------------------------------
# public functions
# ---------------------------------------------------------------------------

_RUN_DOC = """    problem : gradient oracle
        E.g. :class:`~fastdp.solvers._accel_oracle.GLMProblem`; provides
        ``n_samples``, ``n_features``, ``sensitivity`` (S1) and
        ``gradient(theta, rows)``.
    epsilon : float
        Total pure ε (δ = 0); ``np.inf`` runs without noise.
    n_iter : int
        T, the number of noisy gradients (the nominal horizon for -opt).
    batch_size : int, optional
        m, drawn without replacement each step (default: n, full batch).
    x0 : array-like, optional
        Public starting point (zeros by default); x_{-1} = x_0.
    laplace_scales : array-like of shape (n_iter,), optional
        An explicit schedule b_1..b_T instead of the budget split; ``epsilon``
        is then ignored and the result reports the schedule's ε.
    noise_convention : {"paper", "reference_code"}
        Laplace scale b (correct ε-DP, default) or b/√2 (the authors' code).
    random_state : int, Generator or None
    callback : callable (k, x_k), optional
    record_iterates : bool
        Keep x_1..x_T in ``result.extra["iterates"]``.

    Returns
    -------
    SolverResult
        ``coef`` = x_T; ``event`` = the Laplace event of the scales drawn;
        ``extra`` holds the schedules, T' (``horizon``), the per-step ε and
        their sum ``epsilon_pure``, and ``noise_convention``.
"""


def dp_gd(problem, *, epsilon, n_iter, step_size, batch_size=None, x0=None, laplace_scales=None,
          noise_convention="paper", sensitivity_fn=None, random_state=None, callback=None,
          record_iterates=False):
    """DP-GD / DP-SGD with Laplace noise (spec 002, Algorithm 1).

    ``x_k = x_{k-1} − α (∇F_{B_k}(x_{k-1}) + η_k)``, η_k ~ Laplace(b)^d with
    ``b = S1/(m ε0)``, ``ε0 = log(1 + (n/m)(e^{ε/T} − 1))`` (eqs. 3.4-3.5).

    Privacy: private are the n records; replace-one adjacency; the batch
    mean has L1 sensitivity S1/m; each step is ε/T-DP (Laplace + sampling
    without replacement), the run ε-DP; released: x_1..x_T.

    Parameters
    ----------
    step_size : float
        α.
    sensitivity_fn : callable x -> float, optional
        State-dependent bound S1(x) (Prop. 3.1, spec A6).
"""
    plan = plan_gd(n_samples=problem.n_samples, sensitivity=problem.sensitivity, epsilon=epsilon,
                   n_iter=n_iter, step_size=step_size, batch_size=batch_size,
                   laplace_scales=laplace_scales, noise_convention=noise_convention)
    return run_plan(problem, plan, x0=x0, sensitivity_fn=sensitivity_fn,
                    random_state=random_state, callback=callback, record_iterates=record_iterates)


def dp_heavy_ball(problem, *, epsilon, n_iter, step_size, momentum=None, strong_convexity=None,
                  form="momentum", batch_size=None, x0=None, laplace_scales=None,
                  noise_convention="paper", sensitivity_fn=None, random_state=None, callback=None,
                  record_iterates=False):
    """DP heavy ball with gradient smoothing (spec 002, Algorithm 2).

    ``x_k = x_{k-1} − α g̃_k + β (x_{k-1} − x_{k-2})``, g̃_k the Laplace-noised
    gradient at x_{k-1}; ``form="smoothing"`` computes the same iterates as
    ``ū_k = β ū_{k-1} + (1 − β) g̃_k``, ``x_k = x_{k-1} − α/(1−β) ū_k``
    (eqs. 3.6-3.7): the smoothing is post-processing and costs nothing.

    Privacy: as :func:`dp_gd` (Prop. 3.1): each step ε/T-DP, the run ε-DP,
    replace-one adjacency, x_1..x_T released.

    Parameters
    ----------
    step_size, momentum : float
        α and β ∈ [0, 1); β defaults to (1 − √(αμ))/(1 + √(αμ)) (spec B5),
        which needs ``strong_convexity``; Polyak's pair is
        :func:`~fastdp.solvers._accel_schedules.polyak_heavy_ball_parameters`.
    form : {"momentum", "smoothing"}
    sensitivity_fn : callable x -> float, optional
        State-dependent bound S1(x) (spec A6).
"""
    plan = plan_heavy_ball(n_samples=problem.n_samples, sensitivity=problem.sensitivity,
                           epsilon=epsilon, n_iter=n_iter, step_size=step_size, momentum=momentum,
                           strong_convexity=strong_convexity, batch_size=batch_size,
                           laplace_scales=laplace_scales, noise_convention=noise_convention)
    return run_plan(problem, plan, x0=x0, form=form, sensitivity_fn=sensitivity_fn,
                    random_state=random_state, callback=callback, record_iterates=record_iterates)


def dp_nesterov(problem, *, epsilon, n_iter, step_size, strong_convexity=None, smoothness=None,
                momentum=None, allocation="uniform", alter_horizon=None, initial_error=10.0,
                bound_constants=None, batch_size=None, x0=None, laplace_scales=None,
                noise_convention="paper", horizon_rule="paper", random_state=None,
                callback=None, record_iterates=False):
    """DP Nesterov accelerated gradient: DP-NAG and DP-NAG-opt (spec 002, Algorithms 3-4).

    ``z = x_{k-1} + β (x_{k-1} − x_{k-2})``, ``x_k = z − α g̃(z)``.  With
    ``allocation="prop42"`` the budget is split as ε_t ∝ a_{T',t}^{1/3}
    (noise starts high and decreases) over the horizon T' minimising the
    bound (4.6) (DP-NAG-opt).

    Privacy: private are the n records; replace-one adjacency; batch-mean
    sensitivity S1/m; step t costs ε_step(S1, b_t, n, m) and the costs sum to
    ε (basic composition); released: x_1..x_T'.

    Parameters
    ----------
    step_size : float
        α <= 1/L.
    strong_convexity, smoothness : float
        μ and L (L is needed by the optimised allocations).
    momentum : float, optional
        Default (1 − √(μα))/(1 + √(μα)).
    allocation : {"uniform", "prop42", "numerical"}
        ``"numerical"`` solves (4.4) exactly with the subsampled ε_step (an
        extension, spec A4).
    alter_horizon : bool, optional
        Choose T' <= T (Remark 4.1); default on for non-uniform allocations.
    initial_error : float
        The guess E_0 of F(x_0) − F* in the horizon rule (10 in the paper).
    bound_constants : {"consistent", "paper", "reference_code"}, optional
        Constants of the bound (spec B1); default "consistent" with
        ``noise_convention="paper"``, "reference_code" otherwise.
    horizon_rule : {"paper", "subsampled"}
        How T' is chosen: eq. 4.6 as published (default), or the bound of
        the subsampled schedule including σ_s² (an extension, spec A5).
"""
    plan = plan_nesterov(n_samples=problem.n_samples, sensitivity=problem.sensitivity,
                         epsilon=epsilon, n_iter=n_iter, step_size=step_size,
                         strong_convexity=strong_convexity, smoothness=smoothness,
                         momentum=momentum, n_features=problem.n_features, batch_size=batch_size,
                         allocation=allocation, alter_horizon=alter_horizon,
                         initial_error=initial_error, bound_constants=bound_constants,
                         laplace_scales=laplace_scales, noise_convention=noise_convention,
                         horizon_rule=horizon_rule)
    return run_plan(problem, plan, x0=x0, random_state=random_state, callback=callback,
                    record_iterates=record_iterates)


def dp_masg(problem, *, epsilon, n_iter, smoothness, strong_convexity, step_multiplier=1.0,
            n1=None, n1_rounding="ceil", p=1, allocation="uniform", alter_horizon=None,
            initial_error=10.0, bound_constants=None, batch_size=None, x0=None,
            laplace_scales=None, noise_convention="paper", horizon_rule="paper",
            random_state=None, callback=None, record_iterates=False):
    """Multistage DP-MASG and DP-MASG-opt (spec 002, Algorithm 5).

    NAG in stages: stage 1 of length n1 with α = c/L, stage k >= 2 of length
    2^k ⌈√κ ln 2^{p+2}⌉ with α = c/(4^k L); β per stage; momentum restart at
    every stage boundary.  ``allocation="prop42"`` uses the coefficients of
    eq. 4.8 and the horizon rule (DP-MASG-opt).

    Privacy: as :func:`dp_nesterov`.

    Parameters
    ----------
    smoothness, strong_convexity : float
        L and μ (κ = L/μ fixes the stages).
    step_multiplier : float
        c ∈ (0, 1], multiplies every stage's step (spec B4).
    n1, n1_rounding, p
        First-stage length (default ⌈√κ ln κ⌉), its rounding, and p >= 1.
    allocation, alter_horizon, initial_error, bound_constants, horizon_rule
        As :func:`dp_nesterov`.
"""
    plan = plan_masg(n_samples=problem.n_samples, sensitivity=problem.sensitivity,
                     epsilon=epsilon, n_iter=n_iter, smoothness=smoothness,
                     strong_convexity=strong_convexity, step_multiplier=step_multiplier, n1=n1,
                     n1_rounding=n1_rounding, p=p, n_features=problem.n_features,
                     batch_size=batch_size, allocation=allocation, alter_horizon=alter_horizon,
                     initial_error=initial_error, bound_constants=bound_constants,
                     laplace_scales=laplace_scales, noise_convention=noise_convention,
                     horizon_rule=horizon_rule)
    return run_plan(problem, plan, x0=x0, random_state=random_state, callback=callback,
                    record_iterates=record_iterates)


for _function in (dp_gd, dp_heavy_ball, dp_nesterov, dp_masg):
    if _function.__doc__:  # None under python -OO
        _function.__doc__ += _RUN_DOC
del _function


# ---------------------------------------------------------------------------
# estimator adapters (fastdp.solvers.registry)
# ---------------------------------------------------------------------------

_ESTIMATOR_OPTIONS = ("n_iter", "step_size", "step_multiplier", "momentum", "smoothness",
                      "allocation", "alter_horizon", "initial_error", "bound_constants",
                      "noise_convention", "row_l1_bound", "n_features", "form", "n1",
                      "n1_rounding", "p", "horizon_rule")
_CURVATURE = {"squared": 1.0, "logistic": 0.25}

MAX_ESTIMATOR_STEPS = 10**7
"""Most steps T an estimator may ask of an accelerated solver.

Every step is a Python-level iteration (a batch gradient and a Laplace draw),
and the plan holds a few arrays of T floats: 10^7 steps are hours of work and
a few hundred MB of schedule; more is refused before anything runs."""
_REAL_OPTIONS = ("step_size", "step_multiplier", "smoothness")
_FORMS = ("momentum", "smoothing")


class _AcceleratedEstimatorSolver(EstimatorSolver):
    """Runs a spec-002 solver for :mod:`fastdp.linear_model` (see ``solvers.registry``).

    Settings come from the estimator (``alpha`` → lam = μ, ``batch_size`` →
    m, ``epochs`` → T = floor(epochs n / m), ``clip``) and from
    ``solver_options``: ``n_iter`` (T directly), ``step_size`` (default
    ``step_multiplier / L`` with the public bound ``L = c_loss + lam``, valid
    because the estimator checks ``||x_i||_2 <= 1``), ``momentum``,
    ``smoothness``, ``allocation``, ``alter_horizon``, ``initial_error``,
    ``bound_constants``, ``horizon_rule``, ``noise_convention``, ``row_l1_bound`` (a public
    bound R on every row's L1 norm; default √d from the L2 bound),
    ``n_features`` (needed by the horizon rule when the estimator's config
    lacks it), ``form``, and the MASG stage settings ``n1``, ``n1_rounding``
    and ``p``.

    Privacy: replace-one adjacency; batches without replacement (the
    estimator's ``sampler`` must be ``"fixed"`` unless ``batch_size = n``);
    L1 sensitivity ``S1 = 2 min(R, √d C)`` (logistic) or ``2 √d C``
    (squared, C the clip); the noise parameter is the pure-DP budget
    ``schedule_epsilon`` the Laplace schedule is built for, chosen as large
    as the estimator's accountant allows.
    """

    losses = ("squared", "logistic")
    noise_name = "schedule_epsilon"
    options = _ESTIMATOR_OPTIONS
    default_sampler = "fixed"  # uniform batches without replacement (spec 002, A8)

    def __init__(self, name, algorithm):
        self.name = name
        self.algorithm = algorithm

    # -- settings --------------------------------------------------------------
    def _settings(self, n, config):
        options = config.get("options", {})
        self.check_options(options)
        m = int(config["batch_size"])
        sampler = config.get("sampler", "fixed")
        if m < n and get_sampler(sampler, m).name != "fixed":
            raise ValidationError(
                f"solver {self.name!r} samples batches uniformly without replacement (spec 002); "
                f"pass sampler='fixed' (or batch_size = n_samples for full batches), not {sampler!r}.")
        n_iter = options.get("n_iter")
        if n_iter is None:
            n_iter = max(1, math.floor(float(config["epochs"]) * n / m))
        else:
            n_iter = _int_at_least("solver_options['n_iter']", n_iter)
        if n_iter > MAX_ESTIMATOR_STEPS:
            raise ValidationError(
                f"solver {self.name!r} would run {n_iter} steps, more than "
                f"{MAX_ESTIMATOR_STEPS:.0e} (each is a Python-level iteration); use fewer epochs, "
                "a larger batch_size or a smaller n_iter.")
        for key in _REAL_OPTIONS:
            if key in options:
                check_positive(f"solver_options[{key!r}]", options[key])
        if options.get("momentum") is not None:
            check_real("solver_options['momentum']", options["momentum"])
        if options.get("n1") is not None:
            _int_at_least("solver_options['n1']", options["n1"])
        if "p" in options and _int_at_least("solver_options['p']", options["p"]) > 64:
            raise ValidationError(f"solver_options['p'] must be at most 64; got {options['p']!r}.")
        lam = float(config["lam"])
        d = config.get("n_features", options.get("n_features"))
        if d is not None:
            d = _int_at_least("n_features", d)
        return options, m, int(n_iter), lam, d

    def _sensitivity(self, loss, d, options, clip):
        from fastdp.solvers._accel_oracle import glm_l1_sensitivity

        if d is None:
            return None
        R = options.get("row_l1_bound", math.sqrt(d))
        return glm_l1_sensitivity(loss, d, row_l1_bound=R, clip=clip)

    def check_params(self, n_samples, config, *, private):
        """The base checks, the schedule's settings (the plan is built, as for the
        event), ``form``, ``clip``, ``row_l1_bound`` and the L1 sensitivity."""
        super().check_params(n_samples, config, private=private)
        check_lam(config["lam"])
        options, _, _, _, d = self._settings(n_samples, config)
        if "row_l1_bound" in options:
            check_positive("solver_options['row_l1_bound']", options["row_l1_bound"])
        clip = _check_clip(config.get("clip", math.inf))
        loss = config.get("loss", "logistic")
        if private and d is not None:
            self._sensitivity(loss, d, options, clip)
        plan = self._plan(n_samples, config, 1.0 if private else math.inf, loss=loss, d=d)
        _check_form(plan, options.get("form", "momentum"))

    def _plan(self, n, config, schedule_epsilon, loss=None, d=None):
        options, m, T, lam, config_d = self._settings(n, config)
        d = config_d if d is None else d
        loss = loss or config.get("loss", "logistic")
        needs_horizon = (options.get("allocation", "uniform") != "uniform"
                         and options.get("alter_horizon", True))
        if needs_horizon:
            if d is None:
                raise ValidationError(
                    f"solver {self.name!r} with allocation={options['allocation']!r} chooses its "
                    "horizon from the number of features: pass solver_options={'n_features': d}.")
            S = self._sensitivity(loss, d, options, float(config.get("clip", math.inf)))
        else:
            # the event is stated relative to S1, so plan in units of S1; run() rescales
            S = 1.0
        L = float(options.get("smoothness", _CURVATURE.get(loss, 1.0) + lam))
        alpha = float(options.get("step_size", float(options.get("step_multiplier", 1.0)) / L))
        common = dict(n_samples=n, sensitivity=S, epsilon=schedule_epsilon, n_iter=T,
                      batch_size=m, noise_convention=options.get("noise_convention", "paper"))
        opt = dict(allocation=options.get("allocation", "uniform"),
                   alter_horizon=options.get("alter_horizon"),
                   initial_error=options.get("initial_error", 10.0),
                   bound_constants=options.get("bound_constants"), n_features=d,
                   horizon_rule=options.get("horizon_rule", "paper"))
        if self.algorithm == "heavy_ball":
            return plan_heavy_ball(step_size=alpha, momentum=options.get("momentum"),
                                   strong_convexity=lam, **common)
        if self.algorithm == "nesterov":
            return plan_nesterov(step_size=alpha, momentum=options.get("momentum"),
                                 strong_convexity=lam, smoothness=L, **opt, **common)
        if self.algorithm == "masg":
            return plan_masg(smoothness=L, strong_convexity=lam,
                             step_multiplier=float(options.get("step_multiplier", 1.0)),
                             n1=options.get("n1"), n1_rounding=options.get("n1_rounding", "ceil"),
                             p=options.get("p", 1), **opt, **common)
        return plan_gd(step_size=alpha, **common)

    # -- protocol ----------------------------------------------------------------
    def event(self, n_samples, config, noise):
        """Event of a run whose Laplace schedule spends ``noise`` = schedule ε (pure DP)."""
        return self._plan(n_samples, config, noise).event

    def noise_for_budget(self, n_samples, config, epsilon, delta, accountant):
        """Largest schedule ε whose event meets (epsilon, delta) under ``accountant``.

        The pure accountant gives exactly ``epsilon`` (basic composition);
        an (ε, δ) accountant such as RDP may allow a larger pure budget.
        """
        if accountant.epsilon(self.event(n_samples, config, epsilon), delta) <= epsilon:
            if getattr(accountant, "name", "") == "pure":
                return float(epsilon)
        return float(calibrate(lambda e: self.event(n_samples, config, e), epsilon, delta,
                               accountant=accountant, increasing_privacy=False,
                               initial_guess=epsilon))

    def run(self, X, y, *, loss, noise, config, random_state):
        from fastdp.solvers._accel_oracle import GLMProblem

        n, d = X.shape
        options = config.get("options", {})
        plan = self._plan(n, dict(config, loss=loss), noise if noise > 0 else math.inf,
                          loss=loss, d=config.get("n_features", options.get("n_features", d)))
        clip = _check_clip(config.get("clip", math.inf))
        # a non-private run adds no noise: its sensitivity is irrelevant
        sensitivity = self._sensitivity(loss, d, options, clip) if plan.private else 1.0
        problem = GLMProblem(X, y, loss=loss, lam=float(config["lam"]),
                             row_l1_bound=options.get("row_l1_bound"), clip=clip,
                             sensitivity=sensitivity, num_threads=config.get("num_threads") or 1)
        return run_plan(problem, plan, form=options.get("form", "momentum"),
                        random_state=random_state)


ESTIMATOR_SOLVERS = {
    "dp_gd_laplace": _AcceleratedEstimatorSolver("dp_gd_laplace", "gd"),
    "dp_heavy_ball": _AcceleratedEstimatorSolver("dp_heavy_ball", "heavy_ball"),
    "dp_nesterov": _AcceleratedEstimatorSolver("dp_nesterov", "nesterov"),
    "dp_masg": _AcceleratedEstimatorSolver("dp_masg", "masg"),
    # the short names for the same solvers
    "heavy_ball": _AcceleratedEstimatorSolver("dp_heavy_ball", "heavy_ball"),
    "nag": _AcceleratedEstimatorSolver("dp_nesterov", "nesterov"),
    "masg": _AcceleratedEstimatorSolver("dp_masg", "masg"),
}
