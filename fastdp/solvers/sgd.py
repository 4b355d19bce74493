"""Mini-batch SGD and DP-SGD for L2-regularised GLMs on sparse data (spec 000, section 2.6).

The problem is

    min_theta  P(theta) = (1/N) sum_i loss(x_i^T theta, y_i) + (lam/2) ||theta||^2

(squared, logistic or hinge loss, no intercept).  Each of
``T = floor(epochs * N / L)`` steps draws a batch B with the chosen sampler and
does

    G     = sum_{i in B} clip(loss'(x_i^T theta, y_i) x_i, C),   clip(g, C) = g / max(1, ||g||/C)
    theta <- theta - eta * ((G + xi) / L + lam theta)            reg="paper" (default)
    theta <- theta - eta * (G + xi + lam theta) / L              reg="repo"

with ``xi ~ N(0, (sigma C)^2 I)`` and L the (expected) batch size: always the
fixed L, never the realised size of a Poisson batch (which would depend on
the data).  The reference code's ``reg="repo"`` effectively minimises P with
lam replaced by lam / L (spec 000, sections 2.6 and 8.13).  Every epoch runs
inside one call of the compiled kernel :func:`fastdp._kernels._sgd.run_sgd`,
which keeps ``theta = a w`` (weight-decay scale trick) and draws the noise
lazily and exactly (O(nnz + M) draws per epoch instead of O(T M)).

Privacy (dpsgd with noise_multiplier > 0)
-----------------------------------------
* Private: the training examples (x_i, y_i).  Clipping bounds each
  example's contribution to G by C whatever its norm, so rows need no norm
  bound (the estimators still require ``||x_i|| <= 1``).
* Adjacency: the noise std sigma C is calibrated to the add/remove
  sensitivity C of G, so one step is ``GaussianEvent(sigma)`` (add/remove) on
  the sampled batch.  The sampler's event states the adjacency of the
  guarantee: Poisson sampling under add/remove; fixed-size sampling and the
  per-epoch shuffle under replace-one (sensitivity 2C; the event converts
  the step to ``GaussianEvent(sigma / 2)``).
* Released: every iterate theta_t (the standard DP-SGD threat model), hence
  the final ``coef``.  The regulariser and the decay act on the released
  iterate only (post-processing).  ``result.event`` describes all T steps
  with the sampler that really ran.  Lazy noise releases the same
  distribution (see :mod:`fastdp._kernels._sgd`).
* Not covered: the optional per-epoch ``history`` and ``result.diagnostics``
  (the number of lazy draws depends on the sparsity of the sampled rows):
  non-private diagnostics, never publish them.
* The solver takes an explicit ``noise_multiplier``; choosing it from a
  target epsilon is the caller's job (``fastdp.privacy`` calibration, or the
  estimators through :data:`ESTIMATOR_SOLVERS`).
"""

import dataclasses

import numpy as np

from fastdp._kernels import _sgd
from fastdp._validation import check_batch_size, check_positive
from fastdp.exceptions import ValidationError
from fastdp.losses import primal_objective
from fastdp.sampling import get_sampler
from fastdp.solvers._common import (
    check_num_threads, check_run_arguments, prepare_data, start_batches,
)
from fastdp.solvers._kernel_epochs import (
    KernelEpochs, check_finite_iterate, gaussian_steps_event, mini_batch_result,
)
from fastdp.solvers.registry import EstimatorSolver, NonPrivateEstimatorSolver
from fastdp.solvers.settings import SolverSettings

__all__ = ["dpsgd", "sgd", "DEFAULT_LEARNING_RATE", "ESTIMATOR_SOLVERS", "SGDSettings",
           "SGDDetails"]

#: Default step size eta.  With rows of norm <= 1 the averaged loss is
#: 1-smooth (squared) or 1/4-smooth (logistic), so eta = 1 is a stable
#: gradient step for both (and a common choice for the hinge subgradient).
DEFAULT_LEARNING_RATE = 1.0

_PARALLEL_MIN_ROWS = 256
_REG_MODES = ("paper", "repo")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SGDSettings(SolverSettings):
    """Settings of a (DP-)SGD run for the estimators.

    The common fields are those of :class:`~fastdp.solvers.settings.SolverSettings`
    (``alpha`` is lambda, ``noise_parameter`` the noise multiplier sigma); the
    others are the ``solver_options`` of :func:`dpsgd`.

    Attributes
    ----------
    learning_rate : float
        eta (default :data:`DEFAULT_LEARNING_RATE`).
    reg : {"paper", "repo"}
        Where the regulariser enters the step (see :func:`dpsgd`).
    """

    learning_rate: float = DEFAULT_LEARNING_RATE
    reg: str = "paper"


@dataclasses.dataclass(frozen=True)
class SGDDetails:
    """What a (DP-)SGD run reports beyond the common result fields.

    Attributes
    ----------
    learning_rate : float
        eta.
    reg : str
        ``"paper"`` or ``"repo"``.
    rho, kappa : float
        The update ``theta <- rho theta - kappa (G + xi)`` (:func:`decay_and_step`).
    dtype : str
        Value type of the rows the kernel read.
    """

    learning_rate: float
    reg: str
    rho: float
    kappa: float
    dtype: str


def decay_and_step(learning_rate, lam, batch_size, reg):
    """``(rho, kappa)`` of the update ``theta <- rho theta - kappa (G + xi)``.

    ``rho = 1 - eta lam`` (``reg="paper"``) or ``1 - eta lam / L`` (``"repo"``),
    ``kappa = eta / L``.  Raises :class:`ValidationError` unless ``rho > 0``.
    """
    if not (isinstance(reg, str) and reg in _REG_MODES):
        raise ValidationError(f"reg must be 'paper' or 'repo'; got {reg!r}.")
    shrink = learning_rate * lam if reg == "paper" else learning_rate * lam / batch_size
    rho = 1.0 - shrink
    if not rho > 0.0:
        raise ValidationError(
            f"learning_rate * lam{'' if reg == 'paper' else ' / batch_size'} = {shrink:g} must be "
            "< 1 (otherwise one step overshoots the regulariser); lower the learning rate.")
    return rho, learning_rate / batch_size


def _run(X, y, *, algorithm, loss, lam, epochs, sampler, clip, noise_multiplier, learning_rate,
         reg, lazy_noise, random_state, num_threads, record_history, callback):
    loss, lam, epochs, sigma, clip = check_run_arguments(loss, lam, epochs, noise_multiplier, clip,
                                                         allow_zero_lam=True)
    private = sigma > 0.0
    eta = check_positive("learning_rate", learning_rate)
    num_threads = check_num_threads(num_threads)
    X, y = prepare_data(X, y, loss, private=False)  # clipping bounds the sensitivity
    n, m = X.shape
    L = float(sampler.expected_batch_size(n))
    rho, kappa = decay_and_step(eta, lam, L, reg)
    stream, noise_rng = start_batches(sampler, n, epochs, random_state)
    noise_std = sigma * clip if private else 0.0
    if getattr(sampler, "keyed", False):  # block-keyed lots: the data-parallel step loop
        from fastdp.distributed.data_parallel.api import keyed_dpsgd
        return keyed_dpsgd(X, y, sampler=sampler, sampling_rng=stream.rng, noise_rng=noise_rng,
                           loss=loss, lam=lam, epochs=epochs, sigma=sigma, clip=clip, eta=eta,
                           reg=reg, rho=rho, kappa=kappa, num_threads=num_threads,
                           algorithm=algorithm, record_history=record_history, callback=callback)

    theta = np.zeros(m, dtype=np.float64)
    run = KernelEpochs(X, y, num_threads=num_threads, noise_rng=noise_rng,
                       norms_in_kernel=True)  # mapped rows: no pass over X for their norms
    history = [] if record_history else None
    for epoch in run.run(_sgd.run_sgd, sampler, stream, epochs, state=(theta,),
                         params=(loss.code, clip, rho, kappa, noise_std, bool(lazy_noise)),
                         parallel_min_rows=_PARALLEL_MIN_ROWS):
        check_finite_iterate(theta, algorithm, epoch, eta)  # theta is released (flushed) here
        if record_history:
            history.append({"epoch": epoch, "n_iter": run.n_steps,
                            "primal_objective": primal_objective(theta, X, y, loss, lam)})
        if callback is not None:
            callback({"epoch": epoch, "n_iter": run.n_steps, "coef": theta})

    return mini_batch_result(
        run, sampler=sampler, noise_multiplier=sigma, lazy_noise=lazy_noise, coef=theta,
        alpha=None, v=None, epochs=epochs, algorithm=algorithm, loss=loss.name, lam=lam,
        sensitivity=clip if private else 0.0, noise_std=noise_std, clip=clip, history=history,
        details=SGDDetails(learning_rate=eta, reg=reg, rho=rho, kappa=kappa,
                           dtype=np.dtype(X.dtype).name),
    )


def dpsgd(X, y, *, loss, lam, epochs, batch_size, clip, noise_multiplier,
          learning_rate=DEFAULT_LEARNING_RATE, sampler="poisson", reg="paper", lazy_noise=True,
          random_state=None, num_threads=None, record_history=False, callback=None):
    """DP-SGD (spec 000, section 2.6): clipped per-example gradients plus Gaussian noise.

    Parameters
    ----------
    X : {array-like, scipy.sparse matrix} of shape (n, m)
        Examples as rows; CSR float32/float64 with int32/int64 indices is used
        without a copy.
    y : array-like of shape (n,)
        Real targets (squared loss) or labels in {-1, +1}.
    loss : {"squared", "ridge", "logistic", "hinge"}
    lam : float
        L2 strength lambda >= 0.
    epochs : float
        Passes over the data; ``T = floor(epochs * n / batch_size)`` steps.
    batch_size : int
        L, the (expected) lot size; also the fixed divisor of the step.
    clip : float
        C > 0, the per-example gradient norm bound.  ``None`` (no clipping)
        only when ``noise_multiplier == 0``.
    noise_multiplier : float
        sigma >= 0: noise std sigma C on the clipped gradient sum (the
        add/remove sensitivity is C).  0 gives non-private clipped SGD.
    learning_rate : float, default=1.0
        eta > 0 (constant step).  Needs ``eta lam < 1`` (``eta lam / L < 1``
        in repo mode).
    sampler : {"poisson", "fixed", "shuffle"} or fastdp.sampling.Sampler, default="poisson"
        How lots are drawn; the returned event accounts exactly this sampler.
    reg : {"paper", "repo"}, default="paper"
        Regulariser lam theta added to the averaged gradient (the paper's
        gradient, default) or lam theta added to the lot sum before dividing
        by L (the reference code's, which minimises P with lam / L).  Either
        way it is post-processing: no privacy cost.
    lazy_noise : bool, default=True
        Exact lazy noise (same output distribution); ``False``: eager noise on
        all m coordinates every step.
    random_state : None, int or numpy.random.Generator
        Seeds two independent streams (sampling and noise).  Same seed, same
        bits, for any ``num_threads``.
    num_threads : int or None, default=None (1)
        OpenMP threads for the margins and the gradient scatter.
    record_history : bool, default=False
        Per-epoch primal objective (non-private diagnostic; reads the data).
    callback : callable or None
        Called after every epoch with ``{"epoch", "n_iter", "coef"}`` (the
        flushed, released iterate; must not be modified).

    Returns
    -------
    SolverResult
        ``coef`` the final theta; ``alpha`` and ``v`` None; ``event`` the
        sampler's event of ``T`` steps of ``GaussianEvent(sigma)``
        (``NonPrivateEvent`` when sigma = 0); ``details`` (:class:`SGDDetails`)
        holds ``learning_rate``, ``reg``, ``rho``, ``kappa``.

    Notes
    -----
    Privacy: see the module docstring (private: the examples; add/remove
    adjacency for Poisson, replace-one for fixed-size and shuffle; released:
    every iterate).
    """
    return _run(X, y, algorithm="dpsgd", loss=loss, lam=lam, epochs=epochs,
                sampler=get_sampler(sampler, check_batch_size(batch_size)), clip=clip,
                noise_multiplier=noise_multiplier, learning_rate=learning_rate, reg=reg,
                lazy_noise=lazy_noise, random_state=random_state, num_threads=num_threads,
                record_history=record_history, callback=callback)


def sgd(X, y, *, loss, lam, epochs, batch_size=1, learning_rate=DEFAULT_LEARNING_RATE,
        clip=None, sampler="shuffle", reg="paper", random_state=None, num_threads=None,
        record_history=False, callback=None):
    """Non-private mini-batch SGD with the DP-SGD kernel (no noise, no clipping by default).

    The baseline "SGD" of spec 000 (section 2.6): constant step
    ``learning_rate``, batches from a per-epoch shuffle by default.  With
    ``batch_size = n`` and the shuffle sampler it is gradient descent on P and
    converges to the exact optimum for a small enough step; with smaller
    batches it reaches a neighbourhood of the optimum that shrinks with the
    step.  Parameters as :func:`dpsgd`.

    Returns
    -------
    SolverResult
        As :func:`dpsgd` returns it, with ``noise_multiplier = 0`` and
        ``event = NonPrivateEvent()``: no privacy, the result reveals the
        training data.
    """
    return _run(X, y, algorithm="sgd", loss=loss, lam=lam, epochs=epochs,
                sampler=get_sampler(sampler, check_batch_size(batch_size)), clip=clip, noise_multiplier=0.0,
                learning_rate=learning_rate, reg=reg, lazy_noise=True,
                random_state=random_state, num_threads=num_threads,
                record_history=record_history, callback=callback)


# --------------------------------------------------------------------------
# estimator adapters (fastdp.solvers.registry)
# --------------------------------------------------------------------------


class DPSGDEstimatorSolver(EstimatorSolver):
    """``solver="dpsgd"`` of the estimators.

    ``solver_options``: ``learning_rate`` (default :data:`DEFAULT_LEARNING_RATE`)
    and ``reg`` (``"paper"`` default, or ``"repo"``), the fields of
    :class:`SGDSettings`.  The noise parameter is
    the noise multiplier sigma; the event is the sampler's event of T steps of
    ``GaussianEvent(sigma)`` (add/remove sensitivity C).
    """

    supports_callback = True
    reads_row_map = True  # the kernel reads the estimators' mapped rows without a copy

    name = "dpsgd"
    losses = ("squared", "logistic", "hinge")
    noise_name = "noise_multiplier"
    options = SGDSettings.option_names()
    settings_class = SGDSettings

    def check_params(self, n_samples, config, *, private):
        """The base checks, lam/epochs/clip/sampler, ``learning_rate`` and ``reg``
        (the step must not overshoot the regulariser)."""
        super().check_params(n_samples, config, private=private)
        _, lam, sampler = self.check_minibatch_settings(n_samples, config, private,
                                                        allow_zero_lam=True)
        s = self.settings(config)
        eta = check_positive("learning_rate", s.learning_rate)
        decay_and_step(eta, lam, float(sampler.expected_batch_size(n_samples)), s.reg)

    def event(self, n_samples, config, noise):
        return gaussian_steps_event(n_samples, config, noise)

    def solve(self, problem, settings, rng):
        """DP-SGD on ``problem`` with typed ``settings`` (sigma = ``settings.noise_parameter``)."""
        s = settings
        return dpsgd(
            problem.X, problem.y, loss=problem.loss, lam=s.alpha, epochs=s.epochs,
            batch_size=s.batch_size, clip=s.clip, noise_multiplier=s.noise_parameter,
            learning_rate=s.learning_rate, sampler=s.sampler, reg=s.reg,
            lazy_noise=s.lazy_noise, random_state=rng, num_threads=s.num_threads,
            record_history=s.record_history, callback=s.callback)


class SGDEstimatorSolver(NonPrivateEstimatorSolver, DPSGDEstimatorSolver):
    """``solver="sgd"``: non-private SGD (estimators with ``epsilon=np.inf`` only).

    ``clip`` of the estimator is applied if finite (``clip=None`` for none).
    """

    name = "sgd"
    private_alternative = "dpsgd"

    def solve(self, problem, settings, rng):
        """Non-private SGD on ``problem``; a noise parameter other than 0 is refused."""
        if settings.noise_parameter:
            self.refuse()
        s = settings
        return sgd(
            problem.X, problem.y, loss=problem.loss, lam=s.alpha, epochs=s.epochs,
            batch_size=s.batch_size, clip=s.clip, learning_rate=s.learning_rate,
            sampler=s.sampler, reg=s.reg, random_state=rng, num_threads=s.num_threads,
            record_history=s.record_history, callback=s.callback)


ESTIMATOR_SOLVERS = {"dpsgd": DPSGDEstimatorSolver(), "sgd": SGDEstimatorSolver()}
