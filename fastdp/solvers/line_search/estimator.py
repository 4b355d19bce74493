"""The line-search solvers for the scikit-learn estimators (:mod:`fastdp.solvers.registry`).

``"dp_blsgd"`` (and ``"line_search"``): the fixed split, event known in
advance; ``"dp_blsgd_adaptive"``, ``"dp_blsgd_ac"``, ``"dp_blgd"`` and
``"dpagd"`` (``"dp_agd"``): adaptive runs under a zCDP privacy filter whose
cap is the planned event.
"""

import math

from fastdp.exceptions import ValidationError
from fastdp.privacy.events import ComposedEvent, PrivacyFilterEvent
from fastdp.privacy.filters import ZcdpFilter
from fastdp.privacy.zcdp import rho_for_epsilon, zcdp_of
from fastdp.sampling import get_sampler
from fastdp.solvers.line_search.adaptive import run_adaptive
from fastdp.solvers.line_search.agd import check_agd_settings, dp_agd_core
from fastdp.solvers.line_search.estimator_settings import (
    AdaptiveLineSearchSettings,
    DpAgdSettings,
    FixedSplitSettings,
    armijo_as_alpha,
)
from fastdp.solvers.line_search.fixed_split import (
    check_grad_share,
    dp_blsgd_fixed,
    fixed_split_event,
)
from fastdp.solvers.line_search.releases import filter_report, gradient_event, prepare_oracle
from fastdp.solvers.line_search.search import line_search_event
from fastdp.solvers.line_search.settings import BlsgdSettings
from fastdp.solvers.registry import EstimatorSolver

__all__ = ["ESTIMATOR_SOLVERS", "FixedSplitEstimatorSolver", "AdaptiveLineSearchEstimatorSolver",
           "DpAgdEstimatorSolver"]


MAX_CALLS_PER_NOMINAL_ITERATION = 100
"""A privacy filter's cap may pay for at most this many private calls per nominal
iteration (and at least :data:`MIN_CALL_LIMIT` in all): settings under which the cap
affords more (a tiny per-call budget next to a large one) would run for hours."""
MIN_CALL_LIMIT = 10**6


def _check_call_bound(name, rho_cap, cheapest_call, nominal_iterations):
    """Refuse settings under which the filter's cap affords an unbounded number of calls.

    Every gradient release and every step search costs at least
    ``cheapest_call`` (zCDP; the per-call budgets only grow during a run), and
    a refinement always follows a search, so the run makes at most about
    ``rho_cap / cheapest_call`` of them.
    """
    calls = rho_cap / cheapest_call
    limit = max(MAX_CALLS_PER_NOMINAL_ITERATION * nominal_iterations, MIN_CALL_LIMIT)
    if not calls <= limit:
        raise ValidationError(
            f"solver {name!r}: with these settings the privacy filter's cap rho = {rho_cap:.3g} "
            f"pays for up to {calls:.3g} private calls of cost {cheapest_call:.3g}, more than "
            f"{limit:.3g} (the run would not end in reasonable time); make the per-call budgets "
            "(epsilon_iter, rho_grad, rho_bt, epsilon_bt, grad_share) less uneven.")


class FixedSplitEstimatorSolver(EstimatorSolver):
    """``solver="dp_blsgd"`` of the estimators: :func:`dp_blsgd_fixed`.

    The estimators need the whole run's event before training, so they use
    the non-adaptive fixed split (spec 003 §3.8): the noise parameter is the
    per-iteration noise multiplier σ (ρ_iter = 1/(2σ²), 90 % gradient, 10 %
    Gaussian line search), calibrated so that the accountant's ε of
    ``sampler.event(n, T, fixed_split_event(ρ_iter))`` is at most the target
    (T = floor(epochs·n/L)). ``clip`` is C_grad and ``alpha`` (the
    estimator's L2 strength) is μ. The adaptive DP-BLSGD (CHEB) is the
    estimator solver ``"dp_blsgd_adaptive"`` (zCDP privacy filter, no
    amplification) and the function :func:`dp_blsgd`.

    ``solver_options``: ``c_obj``, ``grad_share``, ``eta0``, ``max_it``,
    ``armijo_alpha`` (the Armijo constant α), ``beta``, ``tau``, ``varsigma``,
    ``eta0_cap``, ``armijo_scale``, ``svt_analysis``, ``init``, ``init_scale``.
    The line-search event has an RDP analysis only: use ``accountant="rdp"``.
    """

    name = "dp_blsgd"
    losses = ("squared", "logistic", "hinge")
    noise_name = "noise_multiplier"
    options = FixedSplitSettings.option_names()
    settings_class = FixedSplitSettings
    reads_row_map = True  # the _glm kernels read the estimators' mapped rows without a copy

    @staticmethod
    def _step_event(settings, noise):
        return fixed_split_event(1.0 / (2.0 * noise ** 2), grad_share=settings.grad_share,
                                 max_it=settings.max_it, svt_analysis=settings.svt_analysis)

    def check_params(self, n_samples, config, *, private):
        """The base checks, the sampler, the split (``grad_share``, ``max_it``,
        ``svt_analysis``) and every line-search setting."""
        super().check_params(n_samples, config, private=private)
        get_sampler(config["sampler"], config["batch_size"]).check(n_samples)
        s = self.settings(config)
        self._step_event(s, 1.0)
        options = armijo_as_alpha(s)
        options.pop("grad_share")
        BlsgdSettings.from_options(dict(options, mu=s.alpha,
                                        c_grad=(3.0 if s.clip is None else s.clip))).validate(1.0)

    def event(self, n_samples, config, noise):
        sampler = get_sampler(config["sampler"], config["batch_size"])
        n_steps = sampler.n_steps(n_samples, config["epochs"])
        return sampler.event(n_samples, n_steps, self._step_event(self.settings(config), noise))

    def solve(self, problem, settings, rng):
        """:func:`dp_blsgd_fixed` on ``problem`` (σ = ``settings.noise_parameter``)."""
        s = settings
        sampler = get_sampler(s.sampler, s.batch_size)
        return dp_blsgd_fixed(
            problem.X, problem.y, noise_multiplier=float(s.noise_parameter),
            n_iter=sampler.n_steps(problem.n_samples, s.epochs),
            batch_size=s.batch_size, loss=problem.loss, mu=s.alpha,
            c_grad=(3.0 if s.clip is None else s.clip), sampler=s.sampler,
            random_state=rng, record_history=s.record_history,
            num_threads=s.num_threads or 1, **armijo_as_alpha(s))


class _FilteredEstimatorSolver(EstimatorSolver):
    """Shared part of the adaptive solvers run under a zCDP privacy filter.

    The noise parameter is the filter's cap ρ (``noise_name = "rho_cap"``):
    the planned event is ``PrivacyFilterEvent.zcdp(ρ)``, calibrated as the
    largest ρ whose ε (estimator's accountant, which must be an RDP
    accountant) is within the target; the run is halted before any query
    that would take its summed zCDP cost above ρ (:class:`~fastdp.privacy.filters.ZcdpFilter`),
    and ``result.event`` is that same cap event. A ledger is charged the cap,
    not the (smaller, data-dependent) consumed amount, which is reported in
    ``solver_result_.extra`` (``rho_consumed``, ``consumed_event``). A given
    ``noise_multiplier`` is read as ρ itself.
    """

    noise_name = "rho_cap"
    losses = ("squared", "logistic", "hinge")
    reads_row_map = True  # the _glm kernels read the estimators' mapped rows without a copy

    def event(self, n_samples, config, noise):
        return PrivacyFilterEvent.zcdp(float(noise))

    def noise_for_budget(self, n_samples, config, epsilon, delta, accountant):
        return rho_for_epsilon(epsilon, delta, accountant)

    @staticmethod
    def _nominal_iterations(epochs, sample_rate):
        """T = floor(epochs / q) (≥ 1): the iterations the cap pays for without refinements."""
        return max(1, int(math.floor(float(epochs) / sample_rate + 1e-9)))


class AdaptiveLineSearchEstimatorSolver(_FilteredEstimatorSolver):
    """``solver="dp_blsgd_adaptive"``, ``"dp_blsgd_ac"`` and ``"dp_blgd"`` of the estimators.

    DP-BLSGD with CHEB (:func:`dp_blsgd`), its "-AC" variant
    (``adaptive_clipping=True``) and full-batch DP-BLGD (:func:`dp_blgd`),
    run under a zCDP privacy filter with cap ρ (see
    :class:`_FilteredEstimatorSolver`). Mapping of the estimator's settings:
    ``batch_size`` L gives the Poisson rate q = L/n (DP-BLGD: q = 1; the
    ``sampler`` must be "poisson"), ``clip`` is C_grad (default 3), ``alpha``
    is μ, and ``epochs`` fixes the nominal iteration count T = epochs/q: unless
    ``solver_options`` sets ``epsilon_iter``, ε_iter is chosen so that T
    iterations without CHEB increases cost exactly ρ (gradient ε_iter²/2 plus
    the line search's zCDP cost). CHEB's extra queries and budget increases
    then end the run earlier. Every call is charged unsampled (no
    amplification: the gradient and the retries share a batch).

    Privacy: add/remove adjacency; gradient sensitivity C_grad (L2),
    line-search query sensitivity C_obj; released: the whole transcript
    and the model; the run is ρ-zCDP.

    ``solver_options``: the fields of
    :class:`~fastdp.solvers.line_search.settings.BlsgdSettings` except
    ``sample_rate``, ``mu``, ``c_grad``, the RDP-budget options
    (``amplification``, ``check``, ``fixed_order``, ``batch_accounting``,
    ``budget_filter``) and ``normalize``; ``armijo_alpha`` is the Armijo α.
    """

    default_sampler = "poisson"
    settings_class = AdaptiveLineSearchSettings

    def __init__(self, name, refine, adaptive_clipping=False):
        self.name = name
        self._refine = refine
        self._adaptive_clipping = adaptive_clipping
        options = set(AdaptiveLineSearchSettings.option_names())
        if refine == "gradavg":
            options -= {"phi_max", "phi_min", "psi", "budget_rule", "zeta"}
        self.options = tuple(sorted(options - {"armijo_alpha"})) + ("armijo_alpha",)

    def default_clip(self, n_samples, config, loss):
        return 3.0

    def _sample_rate(self, n_samples, settings):
        keyed = _keyed(settings.sampler, settings.batch_size)
        if settings.sampler != "poisson" and keyed is None:
            raise ValidationError(
                f"solver {self.name!r} draws Poisson batches; use sampler='poisson' (or None) "
                "or a block-keyed Poisson sampler ('block_poisson').")
        if self._refine == "gradavg":
            return 1.0
        if keyed is not None:
            return min(1.0, keyed.sample_rate(n_samples))
        return min(1.0, float(settings.batch_size) / n_samples)

    def _blsgd_settings(self, n_samples, settings, rho_cap):
        """``(BlsgdSettings fields as a dict, q)`` of the typed ``settings``; ``epsilon_iter``
        chosen from the cap ``rho_cap`` when not given (and ``rho_cap`` is not None)."""
        s = settings
        q = self._sample_rate(n_samples, s)
        blsgd = dict(armijo_as_alpha(s), sample_rate=q, mu=s.alpha,
                     c_grad=(3.0 if s.clip is None else float(s.clip)))
        if self._refine == "cheb":
            blsgd["adaptive_clipping"] = self._adaptive_clipping
        if blsgd["epsilon_iter"] is None and rho_cap is not None:
            probe = BlsgdSettings.from_options(dict(blsgd, epsilon_iter=1.0)).validate(1.0)
            unit = zcdp_of(ComposedEvent((
                gradient_event(probe.rho_grad),
                line_search_event(probe.noise, probe.epsilon_bt if probe.noise == "laplace"
                                  else probe.rho_bt, probe.max_it, probe.svt_analysis))))
            iterations = self._nominal_iterations(s.epochs, q)
            blsgd["epsilon_iter"] = math.sqrt(rho_cap / (iterations * unit))
        return blsgd, q

    def check_params(self, n_samples, config, *, private):
        """The base checks, the sampler (Poisson) and every DP-BLSGD setting
        (``epsilon_iter``, chosen from the cap when not given, is checked in
        :meth:`event`)."""
        super().check_params(n_samples, config, private=private)
        blsgd, _ = self._blsgd_settings(n_samples, self.settings(config), None)
        if blsgd["epsilon_iter"] is None:
            blsgd["epsilon_iter"] = 1.0  # placeholder: chosen from the cap
        BlsgdSettings.from_options(blsgd).validate(math.nan)

    def event(self, n_samples, config, noise):
        """The cap's filter event; refuses settings whose run the cap would not bound."""
        s = self.settings(config, noise)
        blsgd, q = self._blsgd_settings(n_samples, s, float(noise))
        cfg = BlsgdSettings.from_options(blsgd).validate(math.nan)
        search = zcdp_of(line_search_event(cfg.noise, cfg.epsilon_bt if cfg.noise == "laplace"
                                           else cfg.rho_bt, cfg.max_it, cfg.svt_analysis))
        _check_call_bound(self.name, float(noise), min(cfg.rho_grad, search),
                          self._nominal_iterations(s.epochs, q))
        return super().event(n_samples, config, noise)

    def solve(self, problem, settings, rng):
        """The adaptive run on ``problem`` under a zCDP filter with cap
        ``settings.noise_parameter`` (0: the noise-free Armijo (S)GD)."""
        s = settings
        n = problem.n_samples
        rho_cap = float(s.noise_parameter)
        private = rho_cap > 0.0
        blsgd, q = self._blsgd_settings(n, s, rho_cap if private else None)
        common = dict(loss=problem.loss, random_state=rng, record_history=s.record_history,
                      num_threads=s.num_threads or 1, refine=self._refine, algorithm=self.name,
                      sampler=_keyed(s.sampler, s.batch_size))
        if not private:
            # noise_multiplier=0 / epsilon=inf: noise-free Armijo (S)GD for T iterations; a
            # failed search is not retried (without noise a retry on the batch fails again)
            if blsgd["max_iter"] is None:
                blsgd["max_iter"] = self._nominal_iterations(s.epochs, q)
            if blsgd["epsilon_iter"] is None:
                blsgd["epsilon_iter"] = 1.0
            common["refine"] = "none"
            return run_adaptive(problem.X, problem.y, epsilon=1.0, delta=0.5, noise_free=True,
                                settings=blsgd, **common)
        return run_adaptive(problem.X, problem.y, epsilon=None, delta=None, noise_free=False,
                            settings=blsgd, budget=ZcdpFilter(rho_cap), **common)


def _keyed(sampler, batch_size=None):
    """The block-keyed Poisson sampler named by ``sampler`` (an instance, or
    ``"block_poisson"`` with ``batch_size``), else None."""
    from fastdp.sampling_blocks import BlockPoissonSampler

    if isinstance(sampler, BlockPoissonSampler):
        return sampler
    if sampler == "block_poisson":
        return None if batch_size is None else BlockPoissonSampler(batch_size=batch_size)
    return None


class DpAgdEstimatorSolver(_FilteredEstimatorSolver):
    """``solver="dpagd"`` of the estimators: DP-AGD (:func:`dp_agd`) under a zCDP filter.

    Full batch. The cap ρ (see :class:`_FilteredEstimatorSolver`) is split
    over T = ``epochs`` nominal iterations: ρ_iter = ρ/T, of which
    ``grad_share`` (default 0.5) goes to the initial gradient release
    (ρ_grad) and the rest to one noisy-min step selection
    (ε_nmax = sqrt(2·ρ_sel), an ε_nmax-DP report-noisy-min, charged
    ε_nmax²/2). Refinements (GradAvg) and repeated selections then end the run
    earlier. (The function :func:`dp_agd` keeps the DP-AGD code's
    (ε, δ)-based allocation.) ``clip`` is C_grad (default 3), ``alpha`` is μ.

    Privacy: add/remove adjacency; gradient sensitivity C_grad (L2), score
    sensitivity C_obj (monotone scores); released: the transcript and the
    model; the run is ρ-zCDP.

    ``solver_options``: ``c_obj``, ``grad_share``, ``n_candidates``,
    ``step_max``, ``gamma``, ``step_update_period``, ``step_update_factor``,
    ``init``, ``init_scale``, ``max_iter``.
    """

    name = "dpagd"
    options = DpAgdSettings.option_names()
    settings_class = DpAgdSettings

    def default_clip(self, n_samples, config, loss):
        return 3.0

    @staticmethod
    def _loop_settings(settings):
        """``(grad_share, settings of the DP-AGD loop)`` of the typed ``settings``."""
        options = settings.options()
        grad_share = check_grad_share(options.pop("grad_share"))
        clip = settings.clip
        return grad_share, dict(options, mu=settings.alpha, c_grad=(3.0 if clip is None else clip))

    def check_params(self, n_samples, config, *, private):
        """The base checks, ``grad_share`` and every DP-AGD setting."""
        super().check_params(n_samples, config, private=private)
        check_agd_settings(**self._loop_settings(self.settings(config))[1])

    def event(self, n_samples, config, noise):
        """The cap's filter event; refuses settings whose run the cap would not bound."""
        s = self.settings(config, noise)
        grad_share, _ = self._loop_settings(s)
        iterations = self._nominal_iterations(s.epochs, 1.0)
        rho_iter = float(noise) / iterations
        _check_call_bound(self.name, float(noise),
                          min(grad_share, 1.0 - grad_share) * rho_iter, iterations)
        return super().event(n_samples, config, noise)

    def solve(self, problem, settings, rng):
        """DP-AGD on ``problem`` under a zCDP filter with cap ``settings.noise_parameter``."""
        rho_cap = float(settings.noise_parameter)
        if not rho_cap > 0.0:
            raise ValidationError("solver 'dpagd' has no non-private mode; use a finite epsilon.")
        grad_share, loop = self._loop_settings(settings)
        iterations = self._nominal_iterations(settings.epochs, 1.0)
        rho_iter = rho_cap / iterations
        zcdp_filter = ZcdpFilter(rho_cap)
        num_threads = settings.num_threads or 1
        oracle = prepare_oracle(problem.X, problem.y, problem.loss, num_threads)
        loop["c_grad"] = float(loop["c_grad"])
        res = dp_agd_core(oracle, budget=zcdp_filter,
                          rho_grad=grad_share * rho_iter,
                          eps_nmax=math.sqrt(2.0 * (1.0 - grad_share) * rho_iter),
                          loss=problem.loss, random_state=rng,
                          record_history=settings.record_history, num_threads=num_threads,
                          **loop)
        return res.with_details(filter=filter_report(zcdp_filter))


# "line_search" is the same solver under the generic name.
ESTIMATOR_SOLVERS = {
    "dp_blsgd": FixedSplitEstimatorSolver(),
    "line_search": FixedSplitEstimatorSolver(),
    "dp_blsgd_adaptive": AdaptiveLineSearchEstimatorSolver("dp_blsgd_adaptive", "cheb"),
    "dp_blsgd_ac": AdaptiveLineSearchEstimatorSolver("dp_blsgd_ac", "cheb",
                                                     adaptive_clipping=True),
    "dp_blgd": AdaptiveLineSearchEstimatorSolver("dp_blgd", "gradavg"),
    "dpagd": DpAgdEstimatorSolver(),
    "dp_agd": DpAgdEstimatorSolver(),
}
