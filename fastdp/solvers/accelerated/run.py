"""The one momentum loop of the accelerated solvers, and the record of a run.

:func:`run_plan` executes an :class:`~fastdp.solvers.accelerated.plan.AcceleratedPlan`
on a gradient oracle (:class:`~fastdp.solvers.accelerated.oracle.GLMProblem`);
:func:`run_plan_replicas` runs R independent replicas in lock step.  Every
accelerated solver (GD, heavy ball, NAG, MASG) is this loop with another plan.

Privacy: the loop draws exactly the Laplace scales of the plan (rescaled to
the problem's sensitivity, which keeps every ε); ``result.event`` is the
plan's event.  Batches are drawn without replacement
(:class:`~fastdp.sampling.FixedSizeSampler`) from a stream split off the
run's generator, the noise from another.
"""

import math
import numbers

import numpy as np

from fastdp._validation import check_random_state
from fastdp.exceptions import ValidationError
from fastdp.privacy.events import NonPrivateEvent, SelfComposedEvent
from fastdp.sampling import FixedSizeSampler
from fastdp.solvers._result import SolverResult
from fastdp.solvers.accelerated.settings import AcceleratedDetails

__all__ = ["run_plan", "run_plan_replicas", "check_form", "FORMS"]

FORMS = ("momentum", "smoothing")
"""The two forms of the heavy-ball update (``form=``)."""


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
        See :mod:`fastdp.solvers.accelerated.oracle`; ``problem.n_samples`` must
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
        Keep all x_1..x_T' in ``result.details.iterates``.
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


def check_form(plan, form):
    """``form`` is one of :data:`FORMS`, and "smoothing" only for a heavy-ball plan."""
    if not (isinstance(form, str) and form in FORMS):
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
    check_form(plan, form)
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
    details = AcceleratedDetails(
        nominal_n_iter=plan.nominal_n_iter, horizon=plan.horizon,
        noise_convention=plan.noise_convention, allocation=plan.allocation,
        bound_constants=plan.bound_constants, laplace_scales=np.array(scales),
        # b_k of the analysis for the problem's (constant) S1
        nominal_scales=plan.nominal_scales * (float(problem.sensitivity) / plan.sensitivity),
        step_epsilons=plan.step_epsilons, epsilon_pure=plan.epsilon, step_sizes=plan.step_sizes,
        momenta=plan.momenta, form=form, iterates=iterates, **plan.extra)
    m, n = plan.batch_size, plan.n_samples
    loss = getattr(problem, "loss", None)
    return SolverResult(
        coef=x.copy(), n_iter=plan.horizon, epochs=plan.horizon * m / n,
        algorithm=plan.algorithm, loss=getattr(loss, "name", "") or "",
        lam=_scalar(getattr(problem, "lam", math.nan)), noise_multiplier=rel,
        sensitivity=float(problem.sensitivity) / m if private else 0.0,
        noise_std=math.sqrt(2.0) * scales[0] if private else 0.0,
        clip=float(getattr(problem, "clip", math.inf)),
        batch_size=float(m), sample_rate=m / n, sampler="fixed" if m < n else "full_batch",
        adjacency="replace_one", event=plan.event,
        diagnostics={"n_noise_draws": plan.horizon * x.size if private else 0},
        num_threads=int(getattr(problem, "num_threads", 1)), details=details)
