"""DP-AGD (Lee & Kifer, KDD 2018), the full-batch baseline of spec 003 (§3.10 B3).

:func:`dp_agd` keeps the DP-AGD code's (ε, δ)-based allocation;
:func:`dp_agd_core` is the loop, under any privacy filter of
:mod:`fastdp.privacy.filters` (the estimator solver ``"dpagd"`` uses the
zCDP filter).
"""

import dataclasses
import math
from typing import Optional

import numpy as np

from fastdp._validation import check_privacy_params, check_random_state
from fastdp.privacy.events import ExponentialMechanismEvent
from fastdp.privacy.filters import RunningZcdpBudget
from fastdp.privacy.zcdp import bun_steinke_rho
from fastdp.solvers._result import FLATTEN
from fastdp.solvers.line_search.releases import (
    FilterReport,
    add_gaussian,
    average_releases,
    gradient_event,
    initial_point,
    line_search_result,
    objective_values,
    prepare_oracle,
)
from fastdp.solvers.line_search.search import clipped_loss_sums
from fastdp.solvers.line_search.settings import MAX_CANDIDATES, _choice, _integer, _real

__all__ = ["dp_agd", "dp_agd_core", "check_agd_settings", "zcdp_rho_for", "AgdDetails",
           "RunningBudgetReport"]


@dataclasses.dataclass(frozen=True)
class RunningBudgetReport:
    """What :func:`dp_agd`'s running zCDP budget had and has left (public).

    Attributes
    ----------
    rho_total : float
        The total ρ of (ε, δ).
    rho_left : float
        ρ not spent when the run stopped.
    """

    rho_total: float
    rho_left: float


@dataclasses.dataclass(frozen=True)
class AgdDetails:
    """What a DP-AGD run reports beyond the common result fields (``result.extra`` is
    their read-only view).

    Attributes
    ----------
    etas : list of float
        The chosen step of every iteration (0 when the last selection chose none).
    rho_grad : float
        Final gradient budget ρ_grad (after the GradAvg increases).
    n_refinements : int
        GradAvg re-releases.
    epsilon_nmax : float
        ε of one report-noisy-min step selection.
    budget : RunningBudgetReport or None
        :func:`dp_agd`'s running budget (shown in ``extra`` as ``rho_total``, ``rho_left``).
    filter : FilterReport or None
        Under a zCDP filter (the estimator solver ``"dpagd"``), what was
        consumed against the cap (shown in ``extra`` as ``budget_filter``,
        ``rho_cap``, ...).
    """

    etas: list
    rho_grad: float
    n_refinements: int
    epsilon_nmax: float
    budget: Optional[RunningBudgetReport] = dataclasses.field(default=None, metadata=FLATTEN)
    filter: Optional[FilterReport] = dataclasses.field(default=None, metadata=FLATTEN)


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
    ``step_max ← min(1.1·max(chosen), initial step_max)``
    (the DP-AGD code's cap 2.0 is its initial ``step_max``). Stops when the remaining ρ
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
    oracle = prepare_oracle(X, y, loss, num_threads)
    eps_nmax = epsilon / (2.0 * splits)
    sigma = c_grad * math.sqrt(2.0 * math.log(1.25 / delta)) / eps_nmax
    budget = RunningZcdpBudget(bun_steinke_rho(epsilon, delta), delta)
    res = dp_agd_core(oracle, budget=budget, rho_grad=c_grad ** 2 / (2.0 * sigma ** 2),
                       eps_nmax=eps_nmax, loss=loss, mu=mu, c_grad=c_grad, c_obj=c_obj,
                       n_candidates=n_candidates, step_max=step_max, gamma=gamma,
                       step_update_period=step_update_period,
                       step_update_factor=step_update_factor, init=init, init_scale=init_scale,
                       max_iter=max_iter, random_state=random_state,
                       record_history=record_history, num_threads=num_threads)
    return res.with_details(budget=RunningBudgetReport(rho_total=budget.rho_cap,
                                                       rho_left=budget.left))


def check_agd_settings(*, mu, c_grad, c_obj, n_candidates, step_max, gamma,
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


def dp_agd_core(oracle, *, budget, rho_grad, eps_nmax, loss, mu, c_grad, c_obj, n_candidates,
                 step_max, gamma, step_update_period, step_update_factor, init, init_scale,
                 max_iter, random_state, record_history, num_threads):
    """The DP-AGD loop (see :func:`dp_agd`); ``budget``, a privacy filter of
    :mod:`fastdp.privacy.filters`, decides affordability and records the calls
    (:class:`~fastdp.privacy.filters.RunningZcdpBudget` or
    :class:`~fastdp.privacy.filters.ZcdpFilter`)."""
    check_agd_settings(mu=mu, c_grad=c_grad, c_obj=c_obj, n_candidates=n_candidates,
                        step_max=step_max, gamma=gamma, step_update_period=step_update_period,
                        step_update_factor=step_update_factor, init=init,
                        init_scale=init_scale, max_iter=max_iter)
    n, d = oracle.n_samples, oracle.n_features
    rows = oracle.all_rows
    _, noise_rng, init_rng = check_random_state(random_state).spawn(3)
    w = initial_point(init, init_scale, d, init_rng)
    select_event = ExponentialMechanismEvent(eps_nmax)
    chosen, etas_log, history = [], [], ([] if record_history else None)
    y_all = oracle.y
    n_refinements = 0
    step_cap = step_max        # the shrinking rule's cap: the initial step_max (the code's 2.0)
    t = 0
    while max_iter is None or t < max_iter:
        grad_event = gradient_event(rho_grad)
        if not budget.can_afford((grad_event, select_event)):
            break
        clean = oracle.clipped_gradient_sum(rows, w, c_grad)
        noisy = add_gaussian(clean, c_grad, rho_grad, noise_rng)
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
            sums = clipped_loss_sums(z, u, y_all, grid, oracle.loss.code, c_obj)
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
            refine_event = gradient_event(rho_new - rho_grad)
            if not budget.can_afford(refine_event):
                stop = True
                break
            fresh = add_gaussian(clean, c_grad, rho_new - rho_grad, noise_rng)
            budget.charge(refine_event)
            noisy = average_releases(noisy, fresh, rho_grad, rho_new)
            rho_grad = rho_new
            n_refinements += 1
        etas_log.append(step)
        t += 1
        if t % step_update_period == 0 and chosen:
            step_max = min(step_update_factor * max(chosen), step_cap)
            chosen = []
        if record_history:
            mean, reg_obj = objective_values(oracle, w, mu)
            history.append(dict(iteration=t, objective=mean, regularized_objective=reg_obj,
                                eta=step))
        if stop:
            break
    details = AgdDetails(etas=etas_log, rho_grad=rho_grad, n_refinements=n_refinements,
                         epsilon_nmax=eps_nmax)
    return line_search_result(w, algorithm="dp_agd", loss=loss, mu=mu, n_iter=t, q=1.0, n=n, rho=rho_grad,
                   c_grad=c_grad, event=budget.event(), history=history, details=details,
                   extra=dict(n_noise_draws=0), num_threads=num_threads)
