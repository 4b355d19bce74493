"""The four accelerated solvers as functions: DP-GD, DP heavy ball, DP-NAG, DP-MASG.

Each builds its plan (:mod:`.plan`) from the problem's public size and
sensitivity and runs it (:func:`~fastdp.solvers.accelerated.run.run_plan`).
See :mod:`fastdp.solvers.accelerated` for the privacy model.
"""

from fastdp.solvers.accelerated.plan import plan_gd, plan_heavy_ball, plan_masg, plan_nesterov
from fastdp.solvers.accelerated.run import run_plan

__all__ = ["dp_gd", "dp_heavy_ball", "dp_nesterov", "dp_masg"]


_RUN_DOC = """    problem : gradient oracle
        E.g. :class:`~fastdp.solvers.accelerated.oracle.GLMProblem`; provides
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
        Keep x_1..x_T in ``result.details.iterates``.

    Returns
    -------
    SolverResult
        ``coef`` = x_T; ``event`` = the Laplace event of the scales drawn;
        ``details`` (an :class:`~fastdp.solvers.accelerated.settings.AcceleratedDetails`;
        ``extra`` is its read-only view) holds the schedules, T' (``horizon``),
        the per-step ε and their sum ``epsilon_pure``, and ``noise_convention``.
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
        :func:`~fastdp.solvers.accelerated.schedules.polyak_heavy_ball_parameters`.
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
