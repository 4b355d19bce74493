"""DP-BLSGD with a fixed per-iteration split ("NN mode", spec 003 §3.8).

Not adaptive: every iteration spends the same ρ_iter (a Gaussian gradient
release and one Gaussian NOISYBTLS), so the run's event is known before it
runs; this is what the estimator solver ``"dp_blsgd"`` uses.
"""

import dataclasses
import math

import numpy as np

from fastdp._validation import check_random_state
from fastdp.exceptions import ValidationError
from fastdp.privacy.events import ComposedEvent, LineSearchEvent, NonPrivateEvent
from fastdp.sampling import get_sampler
from fastdp.solvers.line_search.adapt import StepSizeAdapter
from fastdp.solvers.line_search.releases import (
    gradient_event,
    initial_point,
    line_search_result,
    noisy_gradient,
    objective_values,
    prepare_oracle,
)
from fastdp.solvers.line_search.search import armijo_coefficients, candidate_steps, noisy_backtracking
from fastdp.solvers.line_search.settings import BlsgdSettings, _real

__all__ = ["fixed_split_event", "dp_blsgd_fixed", "check_grad_share", "FixedSplitDetails"]


@dataclasses.dataclass(frozen=True)
class FixedSplitDetails:
    """What a :func:`dp_blsgd_fixed` run reports beyond the common result fields
    (``result.extra`` is their read-only view).

    Attributes
    ----------
    etas : list of float
        The step taken at every iteration (public: a function of the released steps).
    n_accepted : int
        Iterations whose search accepted a candidate (the others took the fallback step).
    rho_iter : float
        zCDP cost of one iteration (``inf`` when not private).
    grad_share : float
        Share of ``rho_iter`` spent on the gradient.
    eta0 : float
        The initial step η0 at the end of the run.
    """

    etas: list
    n_accepted: int
    rho_iter: float
    grad_share: float
    eta0: float


def check_grad_share(grad_share):
    """The share of an iteration's budget spent on the gradient: a real number in (0, 1)."""
    return _real("grad_share", grad_share, low=0.0, high=1.0, low_open=True, high_open=True)


def fixed_split_event(rho_iter, *, grad_share=0.9, max_it=10, svt_analysis="paper"):
    """Per-iteration event of :func:`dp_blsgd_fixed` on its batch (before sampling).

    A Gaussian gradient release with ρ_grad = grad_share·ρ_iter and one
    Gaussian NOISYBTLS with ρ_BT = (1 − grad_share)·ρ_iter: with the paper's
    analysis its RDP is exactly a·ρ_iter (spec 003 §3.8).
    """
    check_grad_share(grad_share)
    if not (math.isfinite(rho_iter) and rho_iter > 0):
        raise ValidationError(f"rho_iter must be a finite number > 0; got {rho_iter!r}.")
    return ComposedEvent((gradient_event(grad_share * rho_iter),
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
    oracle = prepare_oracle(X, y, loss, num_threads)
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
    cfg = cfg.validate(1.0)
    sample_rng, noise_rng, init_rng = check_random_state(random_state).spawn(3)
    stream = smp.stream(n, sample_rng)
    w = initial_point(cfg.init, cfg.init_scale, d, init_rng)
    steps = StepSizeAdapter(cfg.eta0, cfg.tau, cfg.varsigma, cfg.eta0_cap)
    fallback_factor = cfg.beta ** cfg.max_it
    etas_log, accepted, history = [], 0, ([] if record_history else None)
    ptr, idx = stream.take(int(n_iter))
    for t in range(int(n_iter)):
        rows = idx[ptr[t]:ptr[t + 1]]
        g = noisy_gradient(oracle, rows, w, cfg.c_grad, rho_grad, m, cfg.mu, noise_rng,
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
            mean, reg = objective_values(oracle, w, cfg.mu)
            history.append(dict(iteration=t + 1, objective=mean, regularized_objective=reg,
                                eta=outcome.eta))
    event = smp.event(n, int(n_iter), step_event) if private else NonPrivateEvent()
    details = FixedSplitDetails(etas=etas_log, n_accepted=accepted,
                                rho_iter=(rho_iter if private else math.inf),
                                grad_share=grad_share, eta0=steps.eta0)
    return line_search_result(w, algorithm="dp_blsgd_fixed", loss=loss, mu=cfg.mu, n_iter=int(n_iter), q=q,
                   n=n, rho=(rho_grad if private else 0.0), c_grad=cfg.c_grad, event=event,
                   history=history, details=details,
                   extra=dict(n_noise_draws=int(n_iter) * (d + cfg.max_it + 1)),
                   sampler=smp.name, num_threads=num_threads)
