"""DP stochastic line search (spec 003): DP-BLSGD, DP-BLSGD-AC, DP-BLGD, fixed split, DP-AGD.

Chen & Lee, "Stochastic Adaptive Line Search for Differentially Private
Optimization". DP-BLSGD is DP-SGD whose step size comes from a private Armijo
backtracking search (NOISYBTLS, :mod:`fastdp.solvers._ls_search`): a sparse
vector (AboveThreshold) run over the candidates η0·β^k on the same Poisson
batch as the gradient, paying privacy once per search.

==========================  ==================================================
function                    algorithm
==========================  ==================================================
:func:`dp_blsgd`            Algorithm 2 with CHEB (Algorithm 3), η0 adaptation;
                            ``adaptive_clipping=True`` is DP-BLSGD-AC
:func:`dp_blgd`             full batch (q = 1) with DP-AGD's gradient
                            averaging on a failed search (spec 003 §3.7)
:func:`dp_blsgd_fixed`      NN-mode fixed split (§3.8): ρ_iter per iteration,
                            90 % gradient / 10 % Gaussian NOISYBTLS, T fixed
:func:`dp_agd`              the DP-AGD baseline (Lee & Kifer 2018, §3.10 B3)
==========================  ==================================================

Problem: ``min_w (1/n) Σ_i loss(x_i·w, y_i) + (μ/2)‖w‖²`` for the logistic,
hinge (plain) or squared loss, over CSR or dense data; labels ±1 for the
classification losses.

Privacy
-------
* Private: the training records (x_i, y_i). n and d are public.
* Adjacency: add/remove one record (spec 003 §1.2), the one under which the
  Poisson amplification bounds hold.
* Gradient query: Σ_{i∈B} clip(∇loss_i(w), C_grad), L2 sensitivity C_grad,
  plus N(0, C_grad²/(2ρ_grad)·I): a ``GaussianEvent(1/sqrt(2ρ_grad))``; the
  released gradient is that noisy sum divided by the public m = q·n, plus the
  data-independent μ·w.
* Line-search query: sensitivity C_obj (clipped losses in [0, C_obj]); a
  ``LineSearchEvent`` per call (:mod:`fastdp.solvers._ls_search`).
* Released: every noisy gradient, every released step index and the final
  model (the whole transcript). No row-norm bound is needed: clipping bounds
  each record's contribution.
* Budget: the adaptive algorithms (dp_blsgd, dp_blgd, dp_agd) run until a
  running per-order RDP budget (:class:`~fastdp.privacy.filters.RdpBudgetFilter`)
  cannot afford the next call; ``result.event`` is the composition of every
  call that ran, and ``result.extra["epsilon_spent"] ≤ epsilon`` (classic
  RDP → DP conversion, integer orders 2..500). The guarantee rests on
  composition with a budget filter; the paper's "∃ order" check is standard
  practice but not covered by the fixed-order filter theorem (use
  ``fixed_order=`` for the strict mode). The ``amplification="zw_tight_all"``
  ablation is not a guarantee.
* ``budget_filter="zcdp"`` (and the estimator solvers ``"dp_blsgd_adaptive"``,
  ``"dp_blsgd_ac"``, ``"dp_blgd"``, ``"dpagd"``) instead run under a sound zCDP
  privacy filter (:class:`~fastdp.privacy.filters.ZcdpFilter`, Feldman & Zrnic 2021):
  every call charged its unsampled zCDP cost, the run halted before the cap
  ρ would be exceeded; ``result.event`` is the cap
  (``PrivacyFilterEvent.zcdp(ρ)``, planned before the run) and
  ``result.extra["rho_consumed"] ≤ ρ`` what was used.
* :func:`dp_blsgd_fixed` is not adaptive: its event is known before the run.
* Not covered: ``record_history=True`` objectives (they read all data; a
  non-private diagnostic).
"""

import dataclasses
import math

import numpy as np
import scipy.sparse as sp

from fastdp._kernels import _line_search as _kernel
from fastdp._validation import check_labels, check_privacy_params, check_random_state
from fastdp.exceptions import ValidationError
from fastdp.privacy.events import (
    ComposedEvent,
    ExponentialMechanismEvent,
    GaussianEvent,
    LineSearchEvent,
    NonPrivateEvent,
    PrivacyFilterEvent,
)
from fastdp.privacy.filters import RdpBudgetFilter, RunningZcdpBudget, ZcdpFilter
from fastdp.privacy.zcdp import bun_steinke_rho, rho_for_epsilon, zcdp_of
from fastdp.sampling import PoissonSampler, get_sampler
from fastdp.solvers._ls_adapt import (
    INCREASE_EPS,
    INCREASE_RHO,
    AngleTracker,
    StepSizeAdapter,
    cheb_decision,
)
from fastdp.solvers.glm_oracle import GlmOracle
from fastdp.solvers._ls_search import (
    armijo_coefficients,
    candidate_steps,
    line_search_event,
    noisy_backtracking,
)
from fastdp.solvers._ls_settings import MAX_CANDIDATES, BlsgdSettings, _choice, _integer, _real
from fastdp.solvers._result import SolverResult
from fastdp.solvers.registry import EstimatorSolver

__all__ = [
    "BlsgdSettings",
    "dp_blsgd",
    "dp_blgd",
    "dp_blsgd_fixed",
    "dp_agd",
    "fixed_split_event",
    "average_releases",
    "zcdp_rho_for",
    "ESTIMATOR_SOLVERS",
]


# --------------------------------------------------------------------------
# shared pieces
# --------------------------------------------------------------------------
def _prepare(X, y, loss, num_threads=1):
    if loss not in ("logistic", "hinge", "squared"):
        raise ValidationError(f"loss must be 'logistic', 'hinge' or 'squared'; got {loss!r}.")
    if not sp.issparse(X):
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValidationError("X must be a 2-D array or sparse matrix.")
    task = "regression" if loss == "squared" else "binary"
    y_arr = np.asarray(y)
    if y_arr.ndim != 1 or y_arr.shape[0] != X.shape[0]:
        raise ValidationError(f"y must be 1-D with one entry per row of X ({X.shape[0]}).")
    if task == "binary":
        labels = np.unique(y_arr)
        if not np.all(np.isin(labels, (-1.0, 1.0))):
            y_arr, _ = check_labels(y_arr, task, n_samples=X.shape[0])
    return GlmOracle(X, y_arr, loss=loss, num_threads=num_threads, labels="as_given")


def _initial_point(kind, scale, d, rng):
    if kind == "zeros":
        return np.zeros(d)
    return scale * rng.standard_normal(d)


def _batch(sampler_stream, q, oracle):
    if q >= 1.0:
        return oracle.all_rows
    _, idx = sampler_stream.take(1)
    return idx


def _gradient_event(rho):
    return GaussianEvent(1.0 / math.sqrt(2.0 * rho))


def _add_gaussian(clean_sum, c_grad, rho, rng, noise_free=False):
    """clean_sum + N(0, C²/(2ρ)·I): the Gaussian release of a clipped sum (sensitivity C)."""
    if noise_free:
        return clean_sum.copy()
    return clean_sum + (c_grad / math.sqrt(2.0 * rho)) * rng.standard_normal(clean_sum.shape[0])


def average_releases(noisy_old, fresh, rho_old, rho_new):
    """DP-AGD's GradAvg: combine two Gaussian releases of the same clipped sum.

    ``noisy_old`` was released with budget ρ_old, ``fresh`` with
    ρ_new − ρ_old; the weights (ρ_old/ρ_new, 1 − ρ_old/ρ_new) give noise
    variance exactly C²/(2ρ_new) per coordinate, as one release at ρ_new
    (post-processing: no extra privacy cost).
    """
    weight = rho_old / rho_new
    return weight * noisy_old + (1.0 - weight) * fresh


def _noisy_gradient(oracle, rows, w, c_grad, rho, m, mu, rng, noise_free=False):
    """(released mean gradient incl. μw, noisy sum, clean sum) of one Gaussian release.

    The clean sum is private and never released; DP-BLGD re-noises it.
    """
    clean = oracle.clipped_gradient_sum(rows, w, c_grad)
    noisy = _add_gaussian(clean, c_grad, rho, rng, noise_free)
    return noisy / m + mu * w, noisy, clean


def _objective(oracle, w, mu):
    losses = oracle.loss_values(w)
    mean = float(np.mean(losses))
    return mean, mean + 0.5 * mu * float(np.dot(w, w))


def _filter_report(budget):
    """What a zCDP-filtered run consumed against its cap (all public: functions of the transcript)."""
    return dict(budget_filter="zcdp", rho_cap=budget.rho_cap, rho_consumed=budget.rho_spent,
                epsilon_cap=budget.epsilon_cap(), consumed_event=budget.consumed_event())


_NON_PRIVATE_KEYS = ("n_noise_draws", "batch_sizes", "gradient_evaluations",
                     "objective_evaluations")


def _result(w, *, algorithm, loss, mu, n_iter, q, n, rho, c_grad, event, history, extra,
            sampler="poisson", num_threads=1):
    # realised batch sizes and evaluation counts reveal |B|: non-private diagnostics
    diagnostics = {k: extra.pop(k) for k in _NON_PRIVATE_KEYS if k in extra}
    sigma = 1.0 / math.sqrt(2.0 * rho) if rho > 0 else 0.0
    return SolverResult(
        coef=w, alpha=None, v=None, n_iter=int(n_iter), epochs=float(n_iter * q),
        algorithm=algorithm, loss=loss, lam=float(mu), noise_multiplier=sigma,
        sensitivity=float(c_grad), noise_std=sigma * c_grad, clip=float(c_grad),
        batch_size=float(q * n), sample_rate=float(q), sampler=sampler,
        adjacency="add_remove", event=event, lazy_noise=False,
        diagnostics=diagnostics, num_threads=int(num_threads),
        history=history, extra=extra)


# --------------------------------------------------------------------------
# DP-BLSGD / DP-BLGD (adaptive, budget filter)
# --------------------------------------------------------------------------
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
        Fields of :class:`~fastdp.solvers._ls_settings.BlsgdSettings`.
    _noise_free : bool
        **Test hook, not private**: no noise anywhere and no accounting;
        needs ``max_iter``. Gives deterministic (S)GD with Armijo backtracking.

    Returns
    -------
    SolverResult
        ``extra`` holds: ``epsilon_spent``, ``best_order``, ``etas`` (accepted
        step per iteration, 0 if none), ``eta0_trace``, ``rho_grad``/
        ``budget_bt`` final values and per-iteration traces, CHEB branch
        counts, ``c_grad``/``c_obj`` (AC), ``n_gradient_calls``,
        ``n_line_searches``, ``settings``. ``diagnostics`` (non-private:
        they reveal realised batch sizes) holds ``gradient_evaluations`` and
        ``objective_evaluations`` (per-example counts, Fig. 2),
        ``batch_sizes`` and ``n_noise_draws``.
    """
    return _run_adaptive(X, y, epsilon=epsilon, delta=delta, loss=loss, random_state=random_state,
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
    return _run_adaptive(X, y, epsilon=epsilon, delta=delta, loss=loss, random_state=random_state,
                         record_history=record_history, num_threads=num_threads,
                         noise_free=_noise_free, refine="gradavg", algorithm="dp_blgd",
                         settings=settings)


def _run_adaptive(X, y, *, epsilon, delta, loss, random_state, record_history, num_threads,
                  noise_free, refine, algorithm, settings, budget=None):
    # ``budget``: a ready ZcdpFilter (estimator form: the cap is the planned event);
    # otherwise one is built from (epsilon, delta) and ``budget_filter``.
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
    oracle = _prepare(X, y, loss, num_threads)
    n, d = oracle.n_samples, oracle.n_features
    q = cfg.sample_rate
    sample_rng, noise_rng, init_rng = check_random_state(random_state).spawn(3)
    stream = PoissonSampler(q).stream(n, sample_rng) if q < 1.0 else None
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

    w = _initial_point(cfg.init, cfg.init_scale, d, init_rng)
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
        grad_event = _gradient_event(rho_grad)
        if not afford(grad_event):
            break
        if cfg.stop_when_ls_unaffordable and not afford(grad_event, ls_event()):
            break
        budget.open_batch()
        rows = _batch(stream, q, oracle)
        m = m_expected if cfg.normalize == "expected" else max(rows.shape[0], 1)
        g, noisy_sum, clean_sum = _noisy_gradient(oracle, rows, w, c_grad, rho_grad, m, cfg.mu,
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
            elif refine == "cheb" and afford(_gradient_event(rho_grad), fresh_batch=True):
                event2 = _gradient_event(rho_grad)
                rows2 = _batch(stream, q, oracle)
                m2 = m_expected if cfg.normalize == "expected" else max(rows2.shape[0], 1)
                g2 = _noisy_gradient(oracle, rows2, w, c_grad, rho_grad, m2, cfg.mu,
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
                refine_event = _gradient_event(rho_new - rho_grad)
                if not afford(refine_event):
                    break
                # re-release the same clipped full-batch sum with budget ρ_new − ρ_grad
                fresh = _add_gaussian(clean_sum, c_grad, rho_new - rho_grad, noise_rng,
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
            mean, reg = _objective(oracle, w, cfg.mu)
            history.append(dict(iteration=t, objective=mean, regularized_objective=reg,
                                eta=eta, epsilon_spent=(0.0 if noise_free
                                                        else budget.epsilon_spent())))

    event = NonPrivateEvent() if noise_free else budget.event()
    extra = dict(log)
    extra.update(
        epsilon_spent=(math.inf if noise_free else budget.epsilon_spent()),
        best_order=(math.nan if noise_free else budget.best_order()),
        epsilon_target=epsilon, delta=delta, is_guarantee=(not noise_free and budget.is_guarantee),
        rho_grad=rho_grad, budget_bt=budget_bt, noise=cfg.noise, c_grad=c_grad, c_obj=c_obj,
        eta0=steps.eta0, theta_bar=angles.theta_bar, settings=dict(vars(cfg)),
        remaining_budget=budget.rem.copy())
    if isinstance(budget, ZcdpFilter):
        extra.update(_filter_report(budget))
    return _result(w, algorithm=algorithm, loss=loss, mu=cfg.mu, n_iter=t, q=q, n=n,
                   rho=rho_grad, c_grad=c_grad, event=event, history=history, extra=extra,
                   num_threads=num_threads)


# --------------------------------------------------------------------------
# NN-mode fixed split (non-adaptive; event known in advance)
# --------------------------------------------------------------------------
def _check_grad_share(grad_share):
    """The share of an iteration's budget spent on the gradient: a real number in (0, 1)."""
    return _real("grad_share", grad_share, low=0.0, high=1.0, low_open=True, high_open=True)


def fixed_split_event(rho_iter, *, grad_share=0.9, max_it=10, svt_analysis="paper"):
    """Per-iteration event of :func:`dp_blsgd_fixed` on its batch (before sampling).

    A Gaussian gradient release with ρ_grad = grad_share·ρ_iter and one
    Gaussian NOISYBTLS with ρ_BT = (1 − grad_share)·ρ_iter: with the paper's
    analysis its RDP is exactly a·ρ_iter (spec 003 §3.8).
    """
    _check_grad_share(grad_share)
    if not (math.isfinite(rho_iter) and rho_iter > 0):
        raise ValidationError(f"rho_iter must be a finite number > 0; got {rho_iter!r}.")
    return ComposedEvent((_gradient_event(grad_share * rho_iter),
                          LineSearchEvent.gaussian((1.0 - grad_share) * rho_iter, max_it=max_it,
                                                   analysis=svt_analysis)))


def dp_blsgd_fixed(X, y, *, noise_multiplier, n_iter, batch_size, loss="logistic", mu=1e-3,
                   c_grad=3.0, c_obj=3.0, grad_share=0.9, eta0=1.0, max_it=10, alpha=0.001,
                   beta=0.8, tau=10, varsigma=1.2, eta0_cap="current", armijo_scale="mean",
                   svt_analysis="paper", sampler="poisson", init="normal", init_scale=0.01,
                   random_state=None, record_history=False, num_threads=1):
    """DP-BLSGD with a fixed per-iteration budget (spec 003 §3.8, "NN mode").

    Every iteration spends ρ_iter = 1/(2σ²) (σ = ``noise_multiplier``):
    ``grad_share`` of it on the Gaussian gradient, the rest on one Gaussian
    NOISYBTLS on the same batch; there is no CHEB. A failed search uses the
    public fallback step β^max_it·η0, so every iteration updates. The τ/ς η0
    adaptation is kept. Defaults follow the paper's NN settings (C_obj = 3,
    α = 0.001, β = 0.8).

    Privacy
    -------
    Private: the records; adjacency: add/remove for ``sampler="poisson"``
    (the batch's gradient and search are amplified jointly: one
    ``PoissonSampledEvent(q, fixed_split_event(ρ_iter))`` per iteration),
    replace-one for the fixed-size and shuffle samplers (their events convert
    the step). Sensitivities C_grad (gradient, L2) and C_obj (queries).
    Released: all noisy gradients, step indices, the model. The event of the
    run is ``sampler.event(n, n_iter, fixed_split_event(ρ_iter))`` and does
    not depend on the data.

    Parameters
    ----------
    noise_multiplier : float
        σ of the iteration: ρ_iter = 1/(2σ²). ``0`` runs without privacy (no
        noise, classic Armijo backtracking, ``NonPrivateEvent``).
    n_iter : int
        Iterations T.
    batch_size : int
        Expected batch size L (q = L/n).
    """
    if not (isinstance(noise_multiplier, (int, float, np.floating))
            and not isinstance(noise_multiplier, bool)
            and math.isfinite(noise_multiplier) and noise_multiplier >= 0):
        raise ValidationError(
            f"noise_multiplier must be a finite number >= 0; got {noise_multiplier!r}.")
    private = noise_multiplier > 0
    if isinstance(n_iter, bool) or int(n_iter) != n_iter or n_iter < 0:
        raise ValidationError(f"n_iter must be an integer >= 0; got {n_iter!r}.")
    oracle = _prepare(X, y, loss, num_threads)
    n, d = oracle.n_samples, oracle.n_features
    smp = get_sampler(sampler, batch_size)
    smp.check(n)
    q = smp.sample_rate(n)
    m = smp.expected_batch_size(n)
    # noise_multiplier = 0: non-private run (no noise, classic Armijo, NonPrivateEvent)
    rho_iter = 1.0 / (2.0 * float(noise_multiplier) ** 2) if private else 1.0
    step_event = fixed_split_event(rho_iter, grad_share=grad_share, max_it=max_it,
                                   svt_analysis=svt_analysis)
    ls_event = step_event.events[1]
    rho_grad = grad_share * rho_iter
    cfg = BlsgdSettings(eta0=eta0, max_it=max_it, alpha=alpha, beta=beta, tau=tau,
                        varsigma=varsigma, eta0_cap=eta0_cap, armijo_scale=armijo_scale,
                        init=init, init_scale=init_scale, mu=mu, c_grad=c_grad, c_obj=c_obj)
    cfg.validate(1.0)
    sample_rng, noise_rng, init_rng = check_random_state(random_state).spawn(3)
    stream = smp.stream(n, sample_rng)
    w = _initial_point(cfg.init, cfg.init_scale, d, init_rng)
    steps = StepSizeAdapter(cfg.eta0, cfg.tau, cfg.varsigma, cfg.eta0_cap)
    fallback_factor = cfg.beta ** cfg.max_it
    etas_log, accepted, history = [], 0, ([] if record_history else None)
    ptr, idx = stream.take(int(n_iter))
    for t in range(int(n_iter)):
        rows = idx[ptr[t]:ptr[t + 1]]
        g = _noisy_gradient(oracle, rows, w, cfg.c_grad, rho_grad, m, cfg.mu, noise_rng,
                            noise_free=not private)[0]
        z = oracle.margins(rows, w)
        u = oracle.margins(rows, g)
        etas = candidate_steps(steps.eta0, cfg.beta, cfg.max_it)
        slope, curvature = armijo_coefficients(w, g, alpha=cfg.alpha, normalizer=m, mu=cfg.mu,
                                               armijo_scale=cfg.armijo_scale)
        outcome = noisy_backtracking(z, u, oracle.labels(rows), loss_code=oracle.loss.code,
                                     c_obj=cfg.c_obj, etas=etas, slope=slope,
                                     curvature=curvature, event=ls_event, rng=noise_rng,
                                     fallback_step=fallback_factor * steps.eta0,
                                     noise_free=not private)
        if outcome.accepted:
            steps.record(outcome.eta)
            accepted += 1
        w = w - outcome.eta * g
        etas_log.append(outcome.eta)
        steps.end_iteration()
        if record_history:
            mean, reg = _objective(oracle, w, cfg.mu)
            history.append(dict(iteration=t + 1, objective=mean, regularized_objective=reg,
                                eta=outcome.eta))
    event = smp.event(n, int(n_iter), step_event) if private else NonPrivateEvent()
    extra = dict(etas=etas_log, n_accepted=accepted, rho_iter=(rho_iter if private else math.inf),
                 grad_share=grad_share,
                 eta0=steps.eta0, n_noise_draws=int(n_iter) * (d + cfg.max_it + 1))
    return _result(w, algorithm="dp_blsgd_fixed", loss=loss, mu=cfg.mu, n_iter=int(n_iter), q=q,
                   n=n, rho=(rho_grad if private else 0.0), c_grad=cfg.c_grad, event=event,
                   history=history,
                   extra=extra, sampler=smp.name, num_threads=num_threads)


# --------------------------------------------------------------------------
# DP-AGD baseline (Lee & Kifer 2018), spec 003 §3.10 B3
# --------------------------------------------------------------------------
#: Total zCDP budget ρ with ρ + 2·sqrt(ρ·log(1/δ)) = ε (DP-AGD's conversion; privacy layer).
zcdp_rho_for = bun_steinke_rho


def dp_agd(X, y, *, epsilon, delta, loss="logistic", mu=1e-3, c_grad=3.0, c_obj=1.0, splits=60,
           n_candidates=21, step_max=2.0, gamma=0.1, step_update_period=10,
           step_update_factor=1.1, init="zeros", init_scale=0.01, max_iter=None,
           random_state=None, record_history=False, num_threads=1):
    """DP-AGD (Lee & Kifer, KDD 2018), the full-batch baseline of spec 003 (§3.10 B3).

    Total zCDP budget ρ from ``ε = ρ + 2·sqrt(ρ log(1/δ))``. Each iteration
    releases the clipped full-batch gradient sum with Gaussian noise
    (σ = C_grad·sqrt(2 ln(1.25/δ))/ε_nmax, ε_nmax = ε/(2·splits)), normalises
    it, adds μw, and picks a step among ``n_candidates`` equally spaced values
    in [0, step_max] by report-noisy-min over the clipped objective sums
    ``Σ_i min(loss_i(w − s·d), C_obj) + n·(μ/2)‖w − s·d‖²`` with exponential
    noise of scale C_obj/ε_nmax. If step 0 wins, ρ_grad grows by (1 + γ), the
    same sum is re-released with the budget difference and averaged (GradAvg),
    and the selection is repeated. Every ``step_update_period`` iterations
    ``step_max ← min(1.1·max(chosen), 2.0)``. Stops when the remaining ρ
    cannot pay for the next call.

    Privacy
    -------
    Private: the records; adjacency add/remove. Gradient: L2 sensitivity
    C_grad, a ``GaussianEvent``. Noisy min: every score moves in the same
    direction when a record is added or removed (clipped losses ≥ 0) by at
    most C_obj, so report-noisy-min with Exp(C_obj/ε_nmax) noise is
    ε_nmax-DP (monotone scores; McKenna & Sheldon 2020) — an
    ``ExponentialMechanismEvent(ε_nmax)`` (ε²/2-zCDP). Released: the
    transcript. ``result.event`` composes every call; the zCDP total stays
    ≤ ρ, and the RDP accountant's ε of the event is ≤ ε.
    """
    epsilon, delta = check_privacy_params(epsilon, delta)
    oracle = _prepare(X, y, loss, num_threads)
    eps_nmax = epsilon / (2.0 * splits)
    sigma = c_grad * math.sqrt(2.0 * math.log(1.25 / delta)) / eps_nmax
    budget = RunningZcdpBudget(bun_steinke_rho(epsilon, delta), delta)
    res = _dp_agd_core(oracle, budget=budget, rho_grad=c_grad ** 2 / (2.0 * sigma ** 2),
                       eps_nmax=eps_nmax, loss=loss, mu=mu, c_grad=c_grad, c_obj=c_obj,
                       n_candidates=n_candidates, step_max=step_max, gamma=gamma,
                       step_update_period=step_update_period,
                       step_update_factor=step_update_factor, init=init, init_scale=init_scale,
                       max_iter=max_iter, random_state=random_state,
                       record_history=record_history, num_threads=num_threads)
    res.extra.update(rho_total=budget.rho_cap, rho_left=budget.left)
    return res


def _check_agd_settings(*, mu, c_grad, c_obj, n_candidates, step_max, gamma,
                        step_update_period, step_update_factor, init, init_scale, max_iter):
    """Check DP-AGD's public settings (public values only; raises ValidationError)."""
    _real("mu", mu, low=0.0)
    _real("c_grad", c_grad, low=0.0, low_open=True)
    _real("c_obj", c_obj, low=0.0, low_open=True)
    _integer("n_candidates", n_candidates, low=2, high=MAX_CANDIDATES)
    _real("step_max", step_max, low=0.0, low_open=True)
    _real("gamma", gamma, low=0.0, low_open=True)
    _integer("step_update_period", step_update_period)
    _real("step_update_factor", step_update_factor, low=0.0, low_open=True)
    _choice("init", init, ("normal", "zeros"))
    _real("init_scale", init_scale, low=0.0)
    if max_iter is not None:
        _integer("max_iter", max_iter, low=0)


def _dp_agd_core(oracle, *, budget, rho_grad, eps_nmax, loss, mu, c_grad, c_obj, n_candidates,
                 step_max, gamma, step_update_period, step_update_factor, init, init_scale,
                 max_iter, random_state, record_history, num_threads):
    """The DP-AGD loop (see :func:`dp_agd`); ``budget``, a privacy filter of
    :mod:`fastdp.privacy.filters`, decides affordability and records the calls
    (:class:`~fastdp.privacy.filters.RunningZcdpBudget` or
    :class:`~fastdp.privacy.filters.ZcdpFilter`)."""
    _check_agd_settings(mu=mu, c_grad=c_grad, c_obj=c_obj, n_candidates=n_candidates,
                        step_max=step_max, gamma=gamma, step_update_period=step_update_period,
                        step_update_factor=step_update_factor, init=init,
                        init_scale=init_scale, max_iter=max_iter)
    n, d = oracle.n_samples, oracle.n_features
    rows = oracle.all_rows
    _, noise_rng, init_rng = check_random_state(random_state).spawn(3)
    w = _initial_point(init, init_scale, d, init_rng)
    select_event = ExponentialMechanismEvent(eps_nmax)
    chosen, etas_log, history = [], [], ([] if record_history else None)
    y_all = oracle.y
    n_refinements = 0
    t = 0
    while max_iter is None or t < max_iter:
        grad_event = _gradient_event(rho_grad)
        if not budget.can_afford((grad_event, select_event)):
            break
        clean = oracle.clipped_gradient_sum(rows, w, c_grad)
        noisy = _add_gaussian(clean, c_grad, rho_grad, noise_rng)
        budget.charge(grad_event)
        z = oracle.margins(rows, w)
        step = 0.0
        stop = False
        while True:
            if not budget.can_afford(select_event):
                stop = True
                break
            direction = noisy / max(float(np.linalg.norm(noisy)), 1e-300) + mu * w
            u = oracle.margins(rows, direction)
            grid = np.linspace(0.0, step_max, n_candidates)[1:]
            sums = np.empty(grid.size + 1)
            _kernel.clipped_loss_sums(z, u, y_all, grid, oracle.loss.code, float(c_obj), sums)
            steps_all = np.concatenate(([0.0], grid))
            ww, wd, dd = (float(np.dot(w, w)), float(np.dot(w, direction)),
                          float(np.dot(direction, direction)))
            reg = 0.5 * n * mu * (ww - 2.0 * steps_all * wd + steps_all ** 2 * dd)
            scores = sums + reg
            noise = noise_rng.exponential(c_obj / eps_nmax, size=scores.size)
            k = int(np.argmin(scores - noise))
            budget.charge(select_event)
            if k > 0:
                step = float(steps_all[k])
                w = w - step * direction
                chosen.append(step)
                break
            rho_new = (1.0 + gamma) * rho_grad
            refine_event = _gradient_event(rho_new - rho_grad)
            if not budget.can_afford(refine_event):
                stop = True
                break
            fresh = _add_gaussian(clean, c_grad, rho_new - rho_grad, noise_rng)
            budget.charge(refine_event)
            noisy = average_releases(noisy, fresh, rho_grad, rho_new)
            rho_grad = rho_new
            n_refinements += 1
        etas_log.append(step)
        t += 1
        if t % step_update_period == 0 and chosen:
            step_max = min(step_update_factor * max(chosen), 2.0)
            chosen = []
        if record_history:
            mean, reg_obj = _objective(oracle, w, mu)
            history.append(dict(iteration=t, objective=mean, regularized_objective=reg_obj,
                                eta=step))
        if stop:
            break
    extra = dict(etas=etas_log, rho_grad=rho_grad, n_refinements=n_refinements,
                 epsilon_nmax=eps_nmax, n_noise_draws=0)
    return _result(w, algorithm="dp_agd", loss=loss, mu=mu, n_iter=t, q=1.0, n=n, rho=rho_grad,
                   c_grad=c_grad, event=budget.event(), history=history,
                   extra=extra, num_threads=num_threads)


# --------------------------------------------------------------------------
# scikit-learn estimator adapter
# --------------------------------------------------------------------------
def _renamed_armijo_alpha(options):
    """A copy of the estimator's ``solver_options`` with ``armijo_alpha`` as ``alpha``
    (the estimators' ``alpha`` is the L2 strength)."""
    options = dict(options)
    if "armijo_alpha" in options:
        options["alpha"] = options.pop("armijo_alpha")
    return options


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
    options = ("c_obj", "grad_share", "eta0", "max_it", "armijo_alpha", "beta", "tau",
               "varsigma", "eta0_cap", "armijo_scale", "svt_analysis", "init", "init_scale")

    @staticmethod
    def _step_event(config, noise):
        options = config.get("options", {})
        return fixed_split_event(1.0 / (2.0 * noise ** 2),
                                 grad_share=options.get("grad_share", 0.9),
                                 max_it=options.get("max_it", 10),
                                 svt_analysis=options.get("svt_analysis", "paper"))

    def check_params(self, n_samples, config, *, private):
        """The base checks, the sampler, the split (``grad_share``, ``max_it``,
        ``svt_analysis``) and every line-search setting."""
        super().check_params(n_samples, config, private=private)
        get_sampler(config["sampler"], config["batch_size"]).check(n_samples)
        self._step_event(config, 1.0)
        options = _renamed_armijo_alpha(config.get("options", {}))
        options.pop("grad_share", None)
        clip = config["clip"]
        BlsgdSettings.from_options(dict(options, mu=config["lam"],
                                        c_grad=(3.0 if clip is None else clip))).validate(1.0)

    def event(self, n_samples, config, noise):
        sampler = get_sampler(config["sampler"], config["batch_size"])
        n_steps = sampler.n_steps(n_samples, config["epochs"])
        return sampler.event(n_samples, n_steps, self._step_event(config, noise))

    def run(self, X, y, *, loss, noise, config, random_state):
        options = _renamed_armijo_alpha(config.get("options", {}))
        sampler = get_sampler(config["sampler"], config["batch_size"])
        clip = config["clip"]
        return dp_blsgd_fixed(
            X, y, noise_multiplier=float(noise),
            n_iter=sampler.n_steps(X.shape[0], config["epochs"]),
            batch_size=config["batch_size"], loss=loss, mu=config["lam"],
            c_grad=(3.0 if clip is None else clip), sampler=config["sampler"],
            random_state=random_state, record_history=config.get("record_history", False),
            num_threads=config.get("num_threads") or 1, **options)


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

    def event(self, n_samples, config, noise):
        return PrivacyFilterEvent.zcdp(float(noise))

    def noise_for_budget(self, n_samples, config, epsilon, delta, accountant):
        return rho_for_epsilon(epsilon, delta, accountant)

    @staticmethod
    def _nominal_iterations(n_samples, config, sample_rate):
        """T = floor(epochs / q) (≥ 1): the iterations the cap pays for without refinements."""
        return max(1, int(math.floor(float(config["epochs"]) / sample_rate + 1e-9)))


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
    :class:`~fastdp.solvers._ls_settings.BlsgdSettings` except
    ``sample_rate``, ``mu``, ``c_grad``, the RDP-budget options
    (``amplification``, ``check``, ``fixed_order``, ``batch_accounting``,
    ``budget_filter``) and ``normalize``; ``armijo_alpha`` is the Armijo α.
    """

    default_sampler = "poisson"

    def __init__(self, name, refine, adaptive_clipping=False):
        self.name = name
        self._refine = refine
        self._adaptive_clipping = adaptive_clipping
        excluded = {"sample_rate", "mu", "c_grad", "amplification", "check", "fixed_order",
                    "batch_accounting", "budget_filter", "normalize", "alpha",
                    "adaptive_clipping"}
        if refine == "gradavg":
            excluded |= {"phi_max", "phi_min", "psi", "budget_rule", "zeta"}
        fields = [f.name for f in dataclasses.fields(BlsgdSettings)]
        self.options = tuple(sorted(set(fields) - excluded)) + ("armijo_alpha",)

    def default_clip(self, n_samples, config, loss):
        return 3.0

    def _sample_rate(self, n_samples, config):
        if config["sampler"] != "poisson":
            raise ValidationError(
                f"solver {self.name!r} draws Poisson batches; use sampler='poisson' (or None).")
        if self._refine == "gradavg":
            return 1.0
        return min(1.0, float(config["batch_size"]) / n_samples)

    def _settings(self, n_samples, config, rho_cap):
        options = _renamed_armijo_alpha(config.get("options", {}))
        q = self._sample_rate(n_samples, config)
        clip = config["clip"]
        settings = dict(options, sample_rate=q, mu=config["lam"],
                        c_grad=(3.0 if clip is None else float(clip)))
        if self._refine == "cheb":
            settings["adaptive_clipping"] = self._adaptive_clipping
        if settings.get("epsilon_iter") is None and rho_cap is not None:
            probe = BlsgdSettings.from_options(dict(settings, epsilon_iter=1.0)).validate(1.0)
            unit = zcdp_of(ComposedEvent((
                _gradient_event(probe.rho_grad),
                line_search_event(probe.noise, probe.epsilon_bt if probe.noise == "laplace"
                                  else probe.rho_bt, probe.max_it, probe.svt_analysis))))
            iterations = self._nominal_iterations(n_samples, config, q)
            settings["epsilon_iter"] = math.sqrt(rho_cap / (iterations * unit))
        return settings, q

    def check_params(self, n_samples, config, *, private):
        """The base checks, the sampler (Poisson) and every DP-BLSGD setting
        (``epsilon_iter``, chosen from the cap when not given, is checked in
        :meth:`event`)."""
        super().check_params(n_samples, config, private=private)
        settings, _ = self._settings(n_samples, config, None)
        if settings.get("epsilon_iter") is None:
            settings["epsilon_iter"] = 1.0  # placeholder: chosen from the cap
        BlsgdSettings.from_options(settings).validate(math.nan)

    def event(self, n_samples, config, noise):
        """The cap's filter event; refuses settings whose run the cap would not bound."""
        settings, q = self._settings(n_samples, config, float(noise))
        cfg = BlsgdSettings.from_options(settings).validate(math.nan)
        search = zcdp_of(line_search_event(cfg.noise, cfg.epsilon_bt if cfg.noise == "laplace"
                                           else cfg.rho_bt, cfg.max_it, cfg.svt_analysis))
        _check_call_bound(self.name, float(noise), min(cfg.rho_grad, search),
                          self._nominal_iterations(n_samples, config, q))
        return super().event(n_samples, config, noise)

    def run(self, X, y, *, loss, noise, config, random_state):
        n = X.shape[0]
        private = float(noise) > 0.0
        settings, q = self._settings(n, config, float(noise) if private else None)
        common = dict(loss=loss, random_state=random_state,
                      record_history=config.get("record_history", False),
                      num_threads=config.get("num_threads") or 1,
                      refine=self._refine, algorithm=self.name)
        if not private:
            # noise_multiplier=0 / epsilon=inf: noise-free Armijo (S)GD for T iterations; a
            # failed search is not retried (without noise a retry on the batch fails again)
            settings.setdefault("max_iter", self._nominal_iterations(n, config, q))
            settings.setdefault("epsilon_iter", 1.0)
            common["refine"] = "none"
            return _run_adaptive(X, y, epsilon=1.0, delta=0.5, noise_free=True,
                                 settings=settings, **common)
        return _run_adaptive(X, y, epsilon=None, delta=None, noise_free=False, settings=settings,
                             budget=ZcdpFilter(float(noise)), **common)


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
    options = ("c_obj", "grad_share", "n_candidates", "step_max", "gamma", "step_update_period",
               "step_update_factor", "init", "init_scale", "max_iter")

    _DEFAULTS = dict(c_obj=1.0, n_candidates=21, step_max=2.0, gamma=0.1,
                     step_update_period=10, step_update_factor=1.1, init="zeros",
                     init_scale=0.01, max_iter=None)

    def default_clip(self, n_samples, config, loss):
        return 3.0

    def _settings(self, config):
        """``(grad_share, settings of the DP-AGD loop)`` from the estimator's config."""
        options = dict(config.get("options", {}))
        grad_share = _check_grad_share(options.pop("grad_share", 0.5))
        clip = config["clip"]
        settings = dict(self._DEFAULTS, mu=config["lam"], c_grad=(3.0 if clip is None else clip))
        settings.update(options)
        return grad_share, settings

    def check_params(self, n_samples, config, *, private):
        """The base checks, ``grad_share`` and every DP-AGD setting."""
        super().check_params(n_samples, config, private=private)
        _check_agd_settings(**self._settings(config)[1])

    def event(self, n_samples, config, noise):
        """The cap's filter event; refuses settings whose run the cap would not bound."""
        grad_share, settings = self._settings(config)
        iterations = self._nominal_iterations(n_samples, config, 1.0)
        rho_iter = float(noise) / iterations
        _check_call_bound(self.name, float(noise),
                          min(grad_share, 1.0 - grad_share) * rho_iter, iterations)
        return super().event(n_samples, config, noise)

    def run(self, X, y, *, loss, noise, config, random_state):
        if not float(noise) > 0.0:
            raise ValidationError("solver 'dpagd' has no non-private mode; use a finite epsilon.")
        grad_share, settings = self._settings(config)
        rho_cap = float(noise)
        iterations = self._nominal_iterations(X.shape[0], config, 1.0)
        rho_iter = rho_cap / iterations
        zcdp_filter = ZcdpFilter(rho_cap)
        oracle = _prepare(X, y, loss, config.get("num_threads") or 1)
        settings["c_grad"] = float(settings["c_grad"])
        res = _dp_agd_core(oracle, budget=zcdp_filter,
                           rho_grad=grad_share * rho_iter,
                           eps_nmax=math.sqrt(2.0 * (1.0 - grad_share) * rho_iter), loss=loss,
                           random_state=random_state,
                           record_history=config.get("record_history", False),
                           num_threads=config.get("num_threads") or 1, **settings)
        res.extra.update(_filter_report(zcdp_filter))
        return res


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
