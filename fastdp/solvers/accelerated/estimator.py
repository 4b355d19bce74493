"""The accelerated solvers for the scikit-learn estimators (:mod:`fastdp.solvers.registry`).

``ESTIMATOR_SOLVERS`` maps ``"dp_gd_laplace"``, ``"dp_heavy_ball"``,
``"dp_nesterov"``, ``"dp_masg"`` (and the short names ``"heavy_ball"``,
``"nag"``, ``"masg"``) to :class:`AcceleratedEstimatorSolver`.
"""

import math

from fastdp._validation import check_integer, check_positive, check_real
from fastdp.exceptions import ValidationError
from fastdp.privacy.calibration import calibrate
from fastdp.sampling import get_sampler
from fastdp.solvers._common import check_clip, check_lam
from fastdp.solvers.accelerated.oracle import GLMProblem, glm_l1_sensitivity
from fastdp.solvers.accelerated.plan import plan_gd, plan_heavy_ball, plan_masg, plan_nesterov
from fastdp.solvers.accelerated.run import check_form, run_plan
from fastdp.solvers.registry import EstimatorSolver

__all__ = ["ESTIMATOR_SOLVERS", "MAX_ESTIMATOR_STEPS"]


def _check_clip(clip):
    """The estimator's clip C for the GLM gradient: > 0, ``None`` or inf for none."""
    return check_clip(clip, private=False)


def _int_at_least(name, value, low=1):
    return check_integer(name, value, low=low)


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
        check_form(plan, options.get("form", "momentum"))

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
