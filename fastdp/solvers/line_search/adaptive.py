"""DP-BLSGD, DP-BLSGD-AC and DP-BLGD: the adaptive line-search solvers (spec 003 §3.6-3.7).

One loop (:func:`run_adaptive`) runs until its privacy filter cannot afford
the next call: the running RDP budget of the paper
(:class:`~fastdp.privacy.filters.RdpBudgetFilter`) or the zCDP privacy
filter (:class:`~fastdp.privacy.filters.ZcdpFilter`).  See
:mod:`fastdp.solvers.line_search` for the privacy model.
"""

import dataclasses
import math
from typing import Any, Optional

from fastdp._validation import check_privacy_params, check_random_state
from fastdp.exceptions import ValidationError
from fastdp.privacy.events import NonPrivateEvent
from fastdp.privacy.filters import RdpBudgetFilter, ZcdpFilter
from fastdp.privacy.zcdp import rho_for_epsilon
from fastdp.sampling import PoissonSampler
from fastdp.solvers._result import FLATTEN
from fastdp.solvers.line_search.adapt import (
    INCREASE_EPS,
    INCREASE_RHO,
    AngleTracker,
    StepSizeAdapter,
    cheb_decision,
)
from fastdp.solvers.line_search.releases import (
    add_gaussian,
    average_releases,
    FilterReport,
    draw_batch,
    filter_report,
    gradient_event,
    initial_point,
    line_search_result,
    noisy_gradient,
    objective_values,
    prepare_oracle,
)
from fastdp.solvers.line_search.search import (
    armijo_coefficients,
    candidate_steps,
    line_search_event,
    noisy_backtracking,
)
from fastdp.solvers.line_search.settings import BlsgdSettings

__all__ = ["dp_blsgd", "dp_blgd", "run_adaptive", "AdaptiveDetails"]


@dataclasses.dataclass(frozen=True)
class AdaptiveDetails:
    """What a :func:`run_adaptive` run (DP-BLSGD, DP-BLSGD-AC, DP-BLGD) reports beyond the
    common result fields (``result.extra`` is their read-only view).

    The counts of evaluated examples, the realised batch sizes and the number
    of noise draws reveal batch sizes: they are in ``result.diagnostics``
    (non-private), not here.

    Attributes
    ----------
    etas : list of float
        The accepted step of every iteration (0 when none was).
    eta0_trace, rho_grad_trace, budget_bt_trace, c_grad_trace : list of float
        η0, ρ_grad, the line-search budget and C_grad at the end of every iteration.
    cheb : dict
        CHEB's decisions: counts of ``"rho_grad"``, ``"line_search"``, ``"none"``.
    n_gradient_calls, n_line_searches, n_refinements : int
        Gradient releases, noisy line searches and GradAvg re-releases.
    epsilon_spent : float
        The filter's ε of the calls that ran (``inf`` in the noise-free mode).
    best_order : float
        The Rényi order of ``epsilon_spent`` (NaN in the noise-free mode).
    epsilon_target, delta : float or None
        The (ε, δ) the run was asked for (None under an estimator's zCDP cap).
    is_guarantee : bool
        Whether ``epsilon_spent`` is a guarantee of the filter's analysis.
    rho_grad, budget_bt : float
        Final gradient budget and line-search budget (ε_BT or ρ_BT).
    noise : str
        The line search's noise (``"laplace"`` or ``"gaussian"``).
    c_grad, c_obj : float
        Final clipping bounds of gradients and objective values.
    eta0 : float
        Final initial step η0.
    theta_bar : float
        Running mean angle of CHEB.
    settings : dict
        The run's :class:`~fastdp.solvers.line_search.settings.BlsgdSettings` fields.
    remaining_budget : ndarray or float
        What the filter had left (per Rényi order for the RDP filter).
    filter : FilterReport or None
        Under a zCDP filter, what was consumed against the cap (shown in
        ``extra`` as its own keys ``budget_filter``, ``rho_cap``, ...).
    """

    etas: list
    eta0_trace: list
    rho_grad_trace: list
    budget_bt_trace: list
    c_grad_trace: list
    cheb: dict
    n_gradient_calls: int
    n_line_searches: int
    n_refinements: int
    epsilon_spent: float
    best_order: float
    epsilon_target: Optional[float]
    delta: Optional[float]
    is_guarantee: bool
    rho_grad: float
    budget_bt: float
    noise: str
    c_grad: float
    c_obj: float
    eta0: float
    theta_bar: float
    settings: dict
    remaining_budget: Any
    filter: Optional[FilterReport] = dataclasses.field(default=None, metadata=FLATTEN)


def dp_blsgd(X, y, *, epsilon, delta, loss="logistic", random_state=None, record_history=False,
             num_threads=1, _noise_free=False, **settings):
    """DP-BLSGD (spec 003 Algorithm 2, clarified in §3.6), with CHEB and η0 adaptation.

    Each iteration draws a Poisson batch B (rate q), releases the noisy
    clipped gradient ``g = (Σ_B clip(∇loss_i, C_grad) + N(0, C_grad²/(2ρ_grad) I))/m + μw``
    and runs NOISYBTLS on B from η0. On a failed search CHEB draws a second
    noisy gradient on a fresh batch at the same point, compares the angle to
    the running mean θ̄ and increases ρ_grad or ε_BT (ρ_BT) by (1 + ξ); the
    gradient becomes the average of the two and the search is retried. With
    ``adaptive_clipping=True`` (DP-BLSGD-AC) the first ρ_grad increase of an
    iteration also shrinks C_grad and C_obj by (1 − ζ). Every τ iterations
    ``η0 ← min(ς·max Ω, η0)``. The run stops when no Rényi order can afford
    another gradient query.

    Privacy: see the module docstring (add/remove adjacency; gradient
    sensitivity C_grad, line-search sensitivity C_obj; released: the whole
    transcript; ``result.event`` = composition of every call; ε_spent ≤ ε).

    Parameters
    ----------
    X : sparse matrix or ndarray (n, d)
    y : ndarray (n,)
        ±1 labels (logistic, hinge; other two-class labels are mapped) or real
        targets (squared).
    epsilon, delta : float
        Total budget; the run stops before exceeding it.
    loss : {"logistic", "hinge", "squared"}
    random_state : int, Generator or None
        Three independent streams are spawned: batches, noise, initial point.
    record_history : bool
        Per-iteration objective values (non-private diagnostics).
    num_threads : int
        Threads of the GLM kernels (same bits for any value).
    **settings
        Fields of :class:`~fastdp.solvers.line_search.settings.BlsgdSettings`.
    _noise_free : bool
        **Test hook, not private**: no noise anywhere and no accounting;
        needs ``max_iter``. Gives deterministic (S)GD with Armijo backtracking.

    Returns
    -------
    SolverResult
        ``details`` is an :class:`AdaptiveDetails`; ``extra``, their read-only view,
        holds: ``epsilon_spent``, ``best_order``, ``etas`` (accepted
        step per iteration, 0 if none), ``eta0_trace``, ``rho_grad``/
        ``budget_bt`` final values and per-iteration traces, CHEB branch
        counts, ``c_grad``/``c_obj`` (AC), ``n_gradient_calls``,
        ``n_line_searches``, ``settings``. ``diagnostics`` (non-private:
        they reveal realised batch sizes) holds ``gradient_evaluations`` and
        ``objective_evaluations`` (per-example counts, Fig. 2),
        ``batch_sizes`` and ``n_noise_draws``.
    """
    return run_adaptive(X, y, epsilon=epsilon, delta=delta, loss=loss, random_state=random_state,
                         record_history=record_history, num_threads=num_threads,
                         noise_free=_noise_free, refine="cheb", algorithm="dp_blsgd",
                         settings=settings)


def dp_blgd(X, y, *, epsilon, delta, loss="logistic", random_state=None, record_history=False,
            num_threads=1, _noise_free=False, **settings):
    """DP-BLGD: full-batch DP-BLSGD with DP-AGD's gradient averaging (spec 003 §3.7).

    q = 1 (no amplification, B = D, m = n). On a failed search, if affordable,
    ρ_new = (1 + ξ)ρ_grad: the same clipped full-batch sum is re-released
    with budget ρ_new − ρ_grad (a ``GaussianEvent`` of that budget) and
    averaged with weights (ρ_grad/ρ_new, 1 − ρ_grad/ρ_new), so the combined
    gradient has exactly the noise variance of one release at ρ_new; then
    ρ_grad ← ρ_new. No angle test, no ε_BT increase.

    Privacy and parameters: as :func:`dp_blsgd` (``sample_rate`` is forced to 1).
    """
    settings = dict(settings)
    if settings.get("sample_rate", 1.0) != 1.0:
        raise ValidationError("dp_blgd is full batch: do not pass sample_rate (it is 1).")
    settings["sample_rate"] = 1.0
    return run_adaptive(X, y, epsilon=epsilon, delta=delta, loss=loss, random_state=random_state,
                         record_history=record_history, num_threads=num_threads,
                         noise_free=_noise_free, refine="gradavg", algorithm="dp_blgd",
                         settings=settings)


def run_adaptive(X, y, *, epsilon, delta, loss, random_state, record_history, num_threads,
                  noise_free, refine, algorithm, settings, budget=None, sampler=None):
    # ``budget``: a ready ZcdpFilter (estimator form: the cap is the planned event);
    # otherwise one is built from (epsilon, delta) and ``budget_filter``.
    # ``sampler``: a Poisson sampler of rate q drawing the batches (default PoissonSampler(q);
    # a block-keyed one for the data-parallel engine and its single-machine reference).
    if budget is None:
        epsilon, delta = check_privacy_params(epsilon, delta)
    cfg = BlsgdSettings.from_options(settings).validate(epsilon if budget is None else math.nan)
    if noise_free and cfg.max_iter is None:
        raise ValidationError("the noise-free test mode needs max_iter.")
    if budget is None and cfg.budget_filter == "zcdp":
        budget = ZcdpFilter(rho_for_epsilon(epsilon, delta), delta)
    if isinstance(budget, ZcdpFilter) and cfg.normalize != "expected":
        raise ValidationError("the zCDP privacy filter needs normalize='expected' (dividing by "
                              "the realised batch size is not covered by its analysis).")
    oracle = prepare_oracle(X, y, loss, num_threads)
    n, d = oracle.n_samples, oracle.n_features
    q = cfg.sample_rate
    sample_rng, noise_rng, init_rng = check_random_state(random_state).spawn(3)
    if sampler is not None and q < 1.0 and sampler.sample_rate(n) != q:
        raise ValidationError(f"the sampler's rate {sampler.sample_rate(n)} differs from "
                              f"sample_rate {q}.")
    stream = (sampler or PoissonSampler(q)).stream(n, sample_rng) if q < 1.0 else None
    if budget is None:
        budget = RdpBudgetFilter(epsilon, delta, amplification=cfg.amplification,
                                 check=cfg.check, fixed_order=cfg.fixed_order,
                                 batch_accounting=cfg.batch_accounting)

    def afford(*events, fresh_batch=False):
        return True if noise_free else budget.can_afford(list(events), q, fresh_batch)

    def charge(event, fresh_batch=False):
        # CHEB's gradient runs on its own fresh batch: amplified alone
        if not noise_free:
            budget.charge(event, q, fresh_batch)

    w = initial_point(cfg.init, cfg.init_scale, d, init_rng)
    rho_grad = cfg.rho_grad
    budget_bt = cfg.epsilon_bt if cfg.noise == "laplace" else cfg.rho_bt
    c_grad, c_obj = cfg.c_grad, cfg.c_obj
    angles = AngleTracker(cfg.psi)
    steps = StepSizeAdapter(cfg.eta0, cfg.tau, cfg.varsigma, cfg.eta0_cap)
    m_expected = q * n
    log = dict(etas=[], eta0_trace=[], rho_grad_trace=[], budget_bt_trace=[], c_grad_trace=[],
               cheb=dict(rho_grad=0, line_search=0, none=0), n_gradient_calls=0,
               n_line_searches=0, n_refinements=0, gradient_evaluations=0,
               objective_evaluations=0, n_noise_draws=0, batch_sizes=[])
    history = [] if record_history else None

    def ls_event():
        return line_search_event(cfg.noise, budget_bt, cfg.max_it, cfg.svt_analysis)

    t = 0
    while cfg.max_iter is None or t < cfg.max_iter:
        grad_event = gradient_event(rho_grad)
        if not afford(grad_event):
            break
        if cfg.stop_when_ls_unaffordable and not afford(grad_event, ls_event()):
            break
        budget.open_batch()
        rows = draw_batch(stream, q, oracle)
        m = m_expected if cfg.normalize == "expected" else max(rows.shape[0], 1)
        g, noisy_sum, clean_sum = noisy_gradient(oracle, rows, w, c_grad, rho_grad, m, cfg.mu,
                                                  noise_rng, noise_free)
        charge(grad_event)
        log["n_gradient_calls"] += 1
        log["gradient_evaluations"] += rows.shape[0]
        log["n_noise_draws"] += d
        log["batch_sizes"].append(int(rows.shape[0]))
        z = oracle.margins(rows, w)
        y_b = oracle.labels(rows)
        eta, decreased = 0.0, False
        w_new = w
        while eta == 0.0 and afford(ls_event()):
            event = ls_event()
            u = oracle.margins(rows, g)
            etas = candidate_steps(steps.eta0, cfg.beta, cfg.max_it)
            slope, curvature = armijo_coefficients(w, g, alpha=cfg.alpha, normalizer=m, mu=cfg.mu,
                                                   armijo_scale=cfg.armijo_scale)
            outcome = noisy_backtracking(z, u, y_b, loss_code=oracle.loss.code, c_obj=c_obj,
                                         etas=etas, slope=slope, curvature=curvature, event=event,
                                         rng=noise_rng, noise_free=noise_free)
            charge(event)
            log["n_line_searches"] += 1
            log["objective_evaluations"] += rows.shape[0] * (outcome.n_examined + 1)
            log["n_noise_draws"] += cfg.max_it + 1
            eta = outcome.eta
            if outcome.accepted:
                w_new = w - eta * g
                steps.record(eta)
                angles.accept(g)
            elif refine == "cheb" and afford(gradient_event(rho_grad), fresh_batch=True):
                event2 = gradient_event(rho_grad)
                rows2 = draw_batch(stream, q, oracle)
                m2 = m_expected if cfg.normalize == "expected" else max(rows2.shape[0], 1)
                g2 = noisy_gradient(oracle, rows2, w, c_grad, rho_grad, m2, cfg.mu,
                                     noise_rng, noise_free)[0]
                charge(event2, fresh_batch=True)
                log["n_gradient_calls"] += 1
                log["gradient_evaluations"] += rows2.shape[0]
                log["n_noise_draws"] += d
                decision, _ = cheb_decision(g, g2, angles.theta_bar, phi_max=cfg.phi_max,
                                            phi_min=cfg.phi_min, rule=cfg.budget_rule)
                log["cheb"][decision] += 1
                if decision == INCREASE_RHO:
                    rho_grad *= 1.0 + cfg.xi
                    if cfg.adaptive_clipping and not decreased:
                        c_grad *= 1.0 - cfg.zeta
                        c_obj *= 1.0 - cfg.zeta
                        decreased = True
                elif decision == INCREASE_EPS:
                    budget_bt *= 1.0 + cfg.xi
                g = 0.5 * (g + g2)
            elif refine == "gradavg":
                rho_new = (1.0 + cfg.xi) * rho_grad
                refine_event = gradient_event(rho_new - rho_grad)
                if not afford(refine_event):
                    break
                # re-release the same clipped full-batch sum with budget ρ_new − ρ_grad
                fresh = add_gaussian(clean_sum, c_grad, rho_new - rho_grad, noise_rng,
                                      noise_free)
                charge(refine_event)
                log["n_refinements"] += 1
                log["n_noise_draws"] += d
                noisy_sum = average_releases(noisy_sum, fresh, rho_grad, rho_new)
                g = noisy_sum / m + cfg.mu * w
                rho_grad = rho_new
            else:
                break
        budget.close_batch()
        w = w_new
        log["etas"].append(eta)
        log["rho_grad_trace"].append(rho_grad)
        log["budget_bt_trace"].append(budget_bt)
        log["c_grad_trace"].append(c_grad)
        t += 1
        log["eta0_trace"].append(steps.end_iteration())
        if record_history:
            mean, reg = objective_values(oracle, w, cfg.mu)
            history.append(dict(iteration=t, objective=mean, regularized_objective=reg,
                                eta=eta, epsilon_spent=(0.0 if noise_free
                                                        else budget.epsilon_spent())))

    event = NonPrivateEvent() if noise_free else budget.event()
    # evaluation counts, batch sizes and noise draws reveal |B|: non-private diagnostics
    diagnostics = {key: log.pop(key) for key in ("gradient_evaluations",
                                                 "objective_evaluations", "n_noise_draws",
                                                 "batch_sizes")}
    details = AdaptiveDetails(
        **log,
        epsilon_spent=(math.inf if noise_free else budget.epsilon_spent()),
        best_order=(math.nan if noise_free else budget.best_order()),
        epsilon_target=epsilon, delta=delta, is_guarantee=(not noise_free and budget.is_guarantee),
        rho_grad=rho_grad, budget_bt=budget_bt, noise=cfg.noise, c_grad=c_grad, c_obj=c_obj,
        eta0=steps.eta0, theta_bar=angles.theta_bar, settings=dict(vars(cfg)),
        remaining_budget=budget.rem.copy(),
        filter=(filter_report(budget) if isinstance(budget, ZcdpFilter) else None))
    return line_search_result(w, algorithm=algorithm, loss=loss, mu=cfg.mu, n_iter=t, q=q, n=n,
                   rho=rho_grad, c_grad=c_grad, event=event, history=history,
                   details=details, extra=diagnostics, num_threads=num_threads)
