"""The accelerated solvers for the scikit-learn estimators (:mod:`fastdp.solvers.registry`).

``ESTIMATOR_SOLVERS`` maps ``"dp_gd_laplace"``, ``"dp_heavy_ball"``,
``"dp_nesterov"``, ``"dp_masg"`` (and the short names ``"heavy_ball"``,
``"nag"``, ``"masg"``) to :class:`AcceleratedEstimatorSolver`.
"""

import dataclasses
import math

from fastdp._validation import check_integer, check_positive, check_real
from fastdp.exceptions import ValidationError
from fastdp.privacy.calibration import calibrate
from fastdp.sampling import get_sampler
from fastdp.solvers._common import check_clip, check_lam
from fastdp.solvers.accelerated.oracle import GLMProblem, glm_l1_sensitivity
from fastdp.solvers.accelerated.plan import plan_gd, plan_heavy_ball, plan_masg, plan_nesterov
from fastdp.solvers.accelerated.run import check_form, run_plan
from fastdp.solvers.accelerated.settings import AcceleratedSettings
from fastdp.solvers.registry import EstimatorSolver

__all__ = ["ESTIMATOR_SOLVERS", "MAX_ESTIMATOR_STEPS"]


def _check_clip(clip):
    """The estimator's clip C for the GLM gradient: > 0, ``None`` or inf for none."""
    return check_clip(clip, private=False)


def _int_at_least(name, value, low=1):
    return check_integer(name, value, low=low)


_CURVATURE = {"squared": 1.0, "logistic": 0.25}

MAX_ESTIMATOR_STEPS = 10**7
"""Most steps T an estimator may ask of an accelerated solver.

Every step is a Python-level iteration (a batch gradient and a Laplace draw),
and the plan holds a few arrays of T floats: 10^7 steps are hours of work and
a few hundred MB of schedule; more is refused before anything runs."""
_REAL_OPTIONS = ("step_size", "step_multiplier", "smoothness")


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
    settings_class = AcceleratedSettings
    options = AcceleratedSettings.option_names() + ("n_features",)
    default_sampler = "fixed"  # uniform batches without replacement (spec 002, A8)
    reads_row_map = True  # the _glm kernels read the estimators' mapped rows without a copy

    def __init__(self, name, algorithm):
        self.name = name
        self.algorithm = algorithm

    # -- settings --------------------------------------------------------------
    def _checked(self, n, s):
        """``(m, T, d)`` of typed settings ``s``, every option checked."""
        m = int(s.batch_size)
        sampler = "fixed" if s.sampler is None else s.sampler
        if m < n and get_sampler(sampler, m).name != "fixed":
            raise ValidationError(
                f"solver {self.name!r} samples batches uniformly without replacement (spec 002); "
                f"pass sampler='fixed' (or batch_size = n_samples for full batches), not {sampler!r}.")
        if s.n_iter is None:
            n_iter = max(1, math.floor(float(s.epochs) * n / m))
        else:
            n_iter = _int_at_least("solver_options['n_iter']", s.n_iter)
        if n_iter > MAX_ESTIMATOR_STEPS:
            raise ValidationError(
                f"solver {self.name!r} would run {n_iter} steps, more than "
                f"{MAX_ESTIMATOR_STEPS:.0e} (each is a Python-level iteration); use fewer epochs, "
                "a larger batch_size or a smaller n_iter.")
        for key in _REAL_OPTIONS:
            if getattr(s, key) is not None:
                check_positive(f"solver_options[{key!r}]", getattr(s, key))
        if s.momentum is not None:
            check_real("solver_options['momentum']", s.momentum)
        if s.n1 is not None:
            _int_at_least("solver_options['n1']", s.n1)
        if _int_at_least("solver_options['p']", s.p) > 64:
            raise ValidationError(f"solver_options['p'] must be at most 64; got {s.p!r}.")
        d = s.n_features
        if d is not None:
            d = _int_at_least("n_features", d)
        return m, int(n_iter), d

    @staticmethod
    def _sensitivity(loss, d, s, clip):
        if d is None:
            return None
        R = math.sqrt(d) if s.row_l1_bound is None else s.row_l1_bound
        return glm_l1_sensitivity(loss, d, row_l1_bound=R, clip=clip)

    def check_params(self, n_samples, config, *, private):
        """The base checks, the schedule's settings (the plan is built, as for the
        event), ``form``, ``clip``, ``row_l1_bound`` and the L1 sensitivity."""
        super().check_params(n_samples, config, private=private)
        check_lam(config["lam"])
        s = self.settings(config)
        _, _, d = self._checked(n_samples, s)
        if s.row_l1_bound is not None:
            check_positive("solver_options['row_l1_bound']", s.row_l1_bound)
        clip = _check_clip(s.clip)
        loss = s.loss or "logistic"
        if private and d is not None:
            self._sensitivity(loss, d, s, clip)
        plan = self._plan(n_samples, s, 1.0 if private else math.inf)
        check_form(plan, s.form)

    def _plan(self, n, s, schedule_epsilon):
        """The plan of a run with settings ``s`` and schedule budget ``schedule_epsilon``."""
        m, T, d = self._checked(n, s)
        loss = s.loss or "logistic"
        lam = float(s.alpha)
        needs_horizon = s.allocation != "uniform" and s.alter_horizon in (None, True)
        if needs_horizon:
            if d is None:
                raise ValidationError(
                    f"solver {self.name!r} with allocation={s.allocation!r} chooses its "
                    "horizon from the number of features: pass solver_options={'n_features': d}.")
            S = self._sensitivity(loss, d, s, _check_clip(s.clip))
        else:
            # the event is stated relative to S1, so plan in units of S1; solve() rescales
            S = 1.0
        L = float(_CURVATURE.get(loss, 1.0) + lam if s.smoothness is None else s.smoothness)
        alpha = float(float(s.step_multiplier) / L if s.step_size is None else s.step_size)
        common = dict(n_samples=n, sensitivity=S, epsilon=schedule_epsilon, n_iter=T,
                      batch_size=m, noise_convention=s.noise_convention)
        opt = dict(allocation=s.allocation, alter_horizon=s.alter_horizon,
                   initial_error=s.initial_error, bound_constants=s.bound_constants,
                   n_features=d, horizon_rule=s.horizon_rule)
        if self.algorithm == "heavy_ball":
            return plan_heavy_ball(step_size=alpha, momentum=s.momentum, strong_convexity=lam,
                                   **common)
        if self.algorithm == "nesterov":
            return plan_nesterov(step_size=alpha, momentum=s.momentum, strong_convexity=lam,
                                 smoothness=L, **opt, **common)
        if self.algorithm == "masg":
            return plan_masg(smoothness=L, strong_convexity=lam,
                             step_multiplier=float(s.step_multiplier), n1=s.n1,
                             n1_rounding=s.n1_rounding, p=s.p, **opt, **common)
        return plan_gd(step_size=alpha, **common)

    # -- protocol ----------------------------------------------------------------
    def event(self, n_samples, config, noise):
        """Event of a run whose Laplace schedule spends ``noise`` = schedule ε (pure DP)."""
        return self._plan(n_samples, self.settings(config), noise).event

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

    def solve(self, problem, settings, rng):
        """Run on ``problem`` with typed ``settings``; the schedule ε is ``settings.noise_parameter``."""
        X, loss = problem.X, problem.loss
        n, d = X.shape
        noise = settings.noise_parameter
        s = dataclasses.replace(settings, loss=loss,
                                n_features=d if settings.n_features is None else settings.n_features)
        plan = self._plan(n, s, noise if noise > 0 else math.inf)
        clip = _check_clip(s.clip)
        # a non-private run adds no noise: its sensitivity is irrelevant
        sensitivity = self._sensitivity(loss, d, s, clip) if plan.private else 1.0
        oracle = GLMProblem(X, problem.y, loss=loss, lam=float(s.alpha),
                            row_l1_bound=s.row_l1_bound, clip=clip, sensitivity=sensitivity,
                            num_threads=s.num_threads or 1)
        return run_plan(oracle, plan, form=s.form, random_state=rng)

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
