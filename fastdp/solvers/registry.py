"""How the scikit-learn estimators run a solver family.

Every solver family that the estimators of :mod:`fastdp.linear_model` can use
provides an :class:`EstimatorSolver` (in its own module, in a dict named
``ESTIMATOR_SOLVERS``), and is listed by name in :data:`_REGISTRY`.  The
estimator then always does the same four things, whatever the solver:

1. ``noise = solver.noise_for_budget(n, config, epsilon, delta, accountant)``
   (or the user's ``noise_multiplier``);
2. ``event = solver.event(n, config, noise)``: the privacy event of the whole
   run, *before* anything runs (so a ledger can refuse it);
3. charge the ledger with ``event``;
4. ``result = solver.run(X, y, loss=..., noise=..., config=..., random_state=...)``,
   whose ``result.event`` must equal ``event``.

Solvers whose number of queries is decided during the run (the adaptive
line-search solvers, DP-AGD) plan a privacy-filter event
(:class:`~fastdp.privacy.events.PrivacyFilterEvent`): the noise parameter is
the filter's cap, the run halts before exceeding it, and ``result.event`` is
the cap; what the run actually consumed is reported in ``result.extra``.

``config`` is a plain dict with the estimator's resolved settings:
``lam`` (float), ``batch_size`` (int), ``epochs``, ``clip``, ``sampler``
(name), ``lazy_noise``, ``num_threads``, ``record_history``, ``callback``, ``n_features``, ``loss`` and
``options`` (the estimator's ``solver_options`` dict, solver-specific).

Typed settings: a family with a ``settings_class`` (a frozen subclass of
:class:`~fastdp.solvers.settings.SolverSettings`) reads ``config`` only
through :meth:`EstimatorSolver.settings`, the one translation of the dict into
that dataclass, and is run as ``solver.solve(problem, settings, rng)``
(:meth:`EstimatorSolver.run` is that call for dict callers).
"""

import importlib

from fastdp.exceptions import ValidationError
from fastdp.privacy.calibration import calibrate
from fastdp.solvers.settings import SolverProblem, SolverSettings

__all__ = ["EstimatorSolver", "NonPrivateEstimatorSolver", "get_estimator_solver",
           "ESTIMATOR_SOLVER_NAMES",
           "DOCUMENTED_SOLVER_NAMES"]


class EstimatorSolver:
    """Adapter between an estimator and one solver.

    Attributes
    ----------
    name : str
        The estimator's ``solver=`` value.
    losses : tuple of str
        Canonical loss names the solver supports (``"squared"``, ``"logistic"``,
        ``"hinge"``).
    noise_name : str
        What the noise parameter is (``"noise_multiplier"``, ``"laplace_scale"``, ...),
        reported on the fitted estimator.
    options : tuple of str
        Keys of ``solver_options`` the solver understands (others are rejected).
    default_sampler : str
        Sampler used when the estimator's ``sampler`` is None.
    supports_callback : bool
        Whether :meth:`run` passes ``config["callback"]`` (called after every
        epoch with the released state) to the solver.
    settings_class : type
        The family's frozen settings dataclass (see :meth:`settings`).
    """

    name = "solver"
    losses = ("squared", "logistic", "hinge")
    noise_name = "noise_multiplier"
    options = ()
    default_sampler = "poisson"
    supports_callback = False
    settings_class = SolverSettings

    def settings(self, config, noise=0.0):
        """The typed settings of ``config`` with noise parameter ``noise``.

        The one place where a family reads the config dict: the
        ``solver_options`` keys are checked (:meth:`check_options`), then
        :meth:`SolverSettings.from_config <fastdp.solvers.settings.SolverSettings.from_config>`
        builds :attr:`settings_class`; the values are checked by
        :meth:`check_params` and by the solver.
        """
        self.check_options(config.get("options") or {})
        return self.settings_class.from_config(config, noise)

    def check_options(self, options):
        """Reject unknown ``solver_options`` keys with a clear error."""
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            raise ValidationError(
                f"solver {self.name!r} does not understand solver_options {unknown}; "
                f"it accepts {sorted(self.options)}.")

    def check_params(self, n_samples, config, *, private):
        """Check every public setting :meth:`run` will read, without touching the data.

        The estimators call this before they calibrate the noise and before
        they reserve anything on a ledger: a mistake in a public parameter
        (a ``solver_options`` value out of range, a sampler the solver cannot
        use, ...) raises here and spends nothing.  :meth:`run` keeps its own
        checks (it is also called directly); this repeats them with the same
        check functions, on public quantities only.

        The default checks the ``solver_options`` keys and the thread count;
        solvers extend it with their own settings.

        Parameters
        ----------
        n_samples : int
            N (public).
        config : dict
            The resolved settings (see the module docstring), ``clip`` resolved.
        private : bool
            Whether the run adds noise (some settings, e.g. an infinite clip,
            are refused only then).

        Raises
        ------
        ValidationError
            For the first setting out of range.
        """
        from fastdp.solvers._common import check_num_threads

        self.check_options(config.get("options", {}))
        check_num_threads(config.get("num_threads"))

    @staticmethod
    def check_minibatch_settings(n_samples, config, private, *, allow_zero_lam=False):
        """The checks of the mini-batch GLM solvers: ``(loss, lam, sampler)``.

        ``lam``, ``epochs``, ``clip`` (finite when private) as
        :func:`fastdp.solvers._common.check_run_arguments`, and the sampler
        for ``batch_size`` against ``n_samples``.
        """
        from fastdp.sampling import get_sampler
        from fastdp.solvers._common import check_run_arguments

        loss, lam, _, _, _ = check_run_arguments(
            config["loss"], config["lam"], config["epochs"], 1.0 if private else 0.0,
            config["clip"], allow_zero_lam=allow_zero_lam)
        sampler = get_sampler(config["sampler"], config["batch_size"])
        sampler.check(n_samples)
        return loss, lam, sampler

    def default_clip(self, n_samples, config, loss):
        """The clipping bound used for ``clip="auto"`` (default 1.0).

        Only public quantities (n, the settings) may enter it.
        """
        return 1.0

    def event(self, n_samples, config, noise):
        """Privacy event of a whole run with noise parameter ``noise`` (> 0)."""
        raise NotImplementedError

    def noise_for_budget(self, n_samples, config, epsilon, delta, accountant):
        """Smallest noise whose event meets (epsilon, delta) under ``accountant``.

        The default calibrates a noise parameter for which privacy improves as
        it grows (a noise multiplier, a Laplace scale).  Solvers whose noise
        follows from the budget in closed form override this.
        """
        return float(calibrate(lambda s: self.event(n_samples, config, s), epsilon, delta,
                               accountant=accountant))

    def solve(self, problem, settings, rng):
        """Train on ``problem`` (:class:`~fastdp.solvers.settings.SolverProblem`) with
        typed ``settings`` and generator (or seed) ``rng``; returns a
        :class:`~fastdp.solvers._result.SolverResult`."""
        raise NotImplementedError

    def run(self, X, y, *, loss, noise, config, random_state):
        """Train; returns a :class:`~fastdp.solvers._result.SolverResult`-like object.

        For a family with typed settings this is
        ``solve(SolverProblem(X, y, loss), settings(config, noise), random_state)``.
        """
        return self.solve(SolverProblem(X, y, loss), self.settings(config, noise), random_state)


class NonPrivateEstimatorSolver(EstimatorSolver):
    """Base of the solvers that add no noise (estimators with ``epsilon=np.inf`` only).

    Any private use is refused with one message naming the private
    alternative (``private_alternative``); the event of a noiseless run is
    :class:`~fastdp.privacy.events.NonPrivateEvent`.
    """

    private_alternative = "auto"

    def refuse(self):
        """Raise: this solver cannot make a private fit."""
        raise ValidationError(
            f"solver={self.name!r} is not private; use epsilon=np.inf for a non-private fit, or "
            f"solver={self.private_alternative!r} for a private one.")

    def event(self, n_samples, config, noise):
        if noise:
            self.refuse()
        from fastdp.privacy.events import NonPrivateEvent

        return NonPrivateEvent()

    def noise_for_budget(self, n_samples, config, epsilon, delta, accountant):
        self.refuse()


# name -> "module:attribute" (a dict of EstimatorSolver keyed by name);
# imported lazily, so a family that fails to import never breaks the others.
_REGISTRY = {
    "dpscd": "fastdp.solvers.scd:ESTIMATOR_SOLVERS",
    "seq_dpscd": "fastdp.solvers.scd:ESTIMATOR_SOLVERS",
    "dpsgd": "fastdp.solvers.sgd:ESTIMATOR_SOLVERS",
    "sgd": "fastdp.solvers.sgd:ESTIMATOR_SOLVERS",
    "exact": "fastdp.solvers.exact:ESTIMATOR_SOLVERS",
    "output": "fastdp.solvers.perturbation:ESTIMATOR_SOLVERS",
    "objective": "fastdp.solvers.perturbation:ESTIMATOR_SOLVERS",
    "dp_gd_laplace": "fastdp.solvers.accelerated:ESTIMATOR_SOLVERS",
    "dp_heavy_ball": "fastdp.solvers.accelerated:ESTIMATOR_SOLVERS",
    "dp_nesterov": "fastdp.solvers.accelerated:ESTIMATOR_SOLVERS",
    "dp_masg": "fastdp.solvers.accelerated:ESTIMATOR_SOLVERS",
    "heavy_ball": "fastdp.solvers.accelerated:ESTIMATOR_SOLVERS",
    "nag": "fastdp.solvers.accelerated:ESTIMATOR_SOLVERS",
    "masg": "fastdp.solvers.accelerated:ESTIMATOR_SOLVERS",
    "dp_blsgd": "fastdp.solvers.line_search:ESTIMATOR_SOLVERS",
    "line_search": "fastdp.solvers.line_search:ESTIMATOR_SOLVERS",
    # adaptive runs under a zCDP privacy filter (planned event = the cap)
    "dp_blsgd_adaptive": "fastdp.solvers.line_search:ESTIMATOR_SOLVERS",
    "dp_blsgd_ac": "fastdp.solvers.line_search:ESTIMATOR_SOLVERS",
    "dp_blgd": "fastdp.solvers.line_search:ESTIMATOR_SOLVERS",
    "dpagd": "fastdp.solvers.line_search:ESTIMATOR_SOLVERS",
    "dp_agd": "fastdp.solvers.line_search:ESTIMATOR_SOLVERS",
}

ESTIMATOR_SOLVER_NAMES = tuple(_REGISTRY)

#: Older spellings still accepted (one documented name per solver is listed).
_ALIASES = {"heavy_ball": "dp_heavy_ball", "nag": "dp_nesterov", "masg": "dp_masg",
            "line_search": "dp_blsgd", "dp_agd": "dpagd"}

#: The documented solver names (what help texts and error messages list).
DOCUMENTED_SOLVER_NAMES = ("auto",) + tuple(n for n in _REGISTRY if n not in _ALIASES)


def get_estimator_solver(name):
    """The :class:`EstimatorSolver` registered under ``name``."""
    if not isinstance(name, str) or name not in _REGISTRY:
        raise ValidationError(
            f"unknown solver {name!r}; choose one of {', '.join(DOCUMENTED_SOLVER_NAMES)}.")
    module_name, attribute = _REGISTRY[name].split(":")
    try:
        table = getattr(importlib.import_module(module_name), attribute)
        return table[name]
    except (ImportError, AttributeError, KeyError) as exc:
        raise ValidationError(f"solver {name!r} is not available in this build: {exc}") from exc
