"""Multinomial (softmax) mini-batch SGD and DP-SGD for K >= 2 classes on sparse data.

The problem is

    min_Theta  P(Theta) = (1/N) sum_i [logsumexp(Theta x_i) - (Theta x_i)_{y_i}]
                          + (lam/2) ||Theta||_F^2

with Theta of shape (K, d) and class indices ``y_i in {0, ..., K-1}`` (no
intercept: append a constant feature column for one).  Each of
``T = floor(epochs * N / L)`` steps draws a lot B with the chosen sampler and
does

    g_i   = (softmax(Theta x_i) - e_{y_i}) x_i^T                      (K x d, rank one)
    G     = sum_{i in B} g_i / max(1, ||g_i||_F / C)
    Theta <- (1 - eta lam) Theta - (eta / L) (G + Xi),     Xi ~ N(0, (sigma C)^2 I_{K x d})

where ``||g_i||_F = ||softmax(Theta x_i) - e_{y_i}||_2 ||x_i||_2``, so the
whole K x d gradient is clipped as ONE vector (one Gaussian mechanism per
step, not K), and L is the fixed expected lot size, never the realised size
of a Poisson lot.  Every epoch runs inside one call of the compiled kernel
:func:`fastdp._kernels._multinomial.run_multinomial_sgd` (weight-decay scale
trick, exact lazy noise drawn K coordinates at a time per touched column).

Privacy (dp_multinomial_sgd with noise_multiplier > 0)
-------------------------------------------------------
* Private: the training examples (x_i, y_i).  Clipping bounds each example's
  contribution to G by C in Frobenius norm whatever its norm or label.
* Adjacency: the noise std sigma C is calibrated to the add/remove
  sensitivity C of G, so one step is ``GaussianEvent(sigma)`` on the sampled
  lot and the run's event is exactly the one of binary DP-SGD
  (:func:`fastdp.solvers.sgd.dpsgd`) with the same sigma, n, L, T and
  sampler: Poisson under add/remove; fixed-size and shuffle under
  replace-one (the sampler's event converts the step, sensitivity 2C).
* Released: every iterate Theta_t, hence ``coef``.  The regulariser acts on
  the released iterate (post-processing).  ``K`` (``n_classes``) is public.
* Not covered: the optional ``history`` and ``result.diagnostics`` (non-private).
* The solver takes an explicit ``noise_multiplier``; the estimators calibrate
  it through :class:`MultinomialDPSGDEstimatorSolver`.
"""

import dataclasses
import numbers

import numpy as np
from scipy.special import logsumexp

from fastdp._kernels import _multinomial
from fastdp._validation import check_batch_size, check_positive, check_rows_as_read, check_X
from fastdp.exceptions import ValidationError
from fastdp.sampling import get_sampler
from fastdp.solvers._common import (
    as_csr, check_clip, check_lam, check_noise_multiplier, check_num_threads, start_batches,
)
from fastdp.solvers._kernel_epochs import (
    KernelEpochs, check_finite_iterate, gaussian_steps_event, mini_batch_result,
)
from fastdp.solvers.registry import EstimatorSolver, NonPrivateEstimatorSolver
from fastdp.solvers.settings import SolverSettings
from fastdp.solvers.sgd import decay_and_step

__all__ = [
    "dp_multinomial_sgd",
    "multinomial_sgd",
    "multinomial_objective",
    "check_class_indices",
    "MultinomialDPSGDEstimatorSolver",
    "MultinomialSGDEstimatorSolver",
    "ESTIMATOR_SOLVERS",
    "DEFAULT_LEARNING_RATE",
    "MultinomialSettings",
    "MultinomialDetails",
]

#: Default step size eta.  The Hessian of the softmax loss of one example is
#: ``(diag(p) - p p^T) kron x x^T``, whose largest eigenvalue is at most
#: ``||x||^2 / 2``; with rows of norm <= 1 the averaged loss is 1/2-smooth and
#: eta = 1 is a stable gradient step.
DEFAULT_LEARNING_RATE = 1.0

_PARALLEL_MIN_ROWS = 128


@dataclasses.dataclass(frozen=True, kw_only=True)
class MultinomialSettings(SolverSettings):
    """Settings of a multinomial (DP-)SGD run for the estimators.

    The common fields are those of :class:`~fastdp.solvers.settings.SolverSettings`
    (``alpha`` is lambda, ``n_classes`` is K, ``noise_parameter`` the noise
    multiplier sigma); the other is the one ``solver_options`` key.

    Attributes
    ----------
    learning_rate : float
        eta (default :data:`DEFAULT_LEARNING_RATE`).
    """

    learning_rate: float = DEFAULT_LEARNING_RATE


@dataclasses.dataclass(frozen=True)
class MultinomialDetails:
    """What a multinomial (DP-)SGD run reports beyond the common result fields.

    Attributes
    ----------
    learning_rate, rho, kappa : float
        eta and the update ``Theta <- rho Theta - kappa (G + xi)``.
    n_classes : int
        K.
    dtype : str
        Value type of the rows the kernel read.
    """

    learning_rate: float
    rho: float
    kappa: float
    n_classes: int
    dtype: str


# --------------------------------------------------------------------------
# labels and objective
# --------------------------------------------------------------------------


def check_n_classes(n_classes):
    """Check K, the number of classes (an int >= 2; bools refused).

    Returns
    -------
    n_classes : int

    Raises
    ------
    ValidationError
        If ``n_classes`` is not an int >= 2.
    """
    if isinstance(n_classes, (bool, np.bool_)) or not isinstance(n_classes, numbers.Integral):
        raise ValidationError(f"n_classes must be an int >= 2; got {n_classes!r}.")
    if n_classes < 2:
        raise ValidationError(
            f"n_classes must be >= 2 (a softmax over one class learns nothing); got {n_classes}.")
    return int(n_classes)


def check_class_indices(y, n_classes, n_samples):
    """Validate integer class indices ``y_i in {0, ..., K-1}``.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Integers, or floats with integral values (e.g. ``3.0``).
    n_classes : int
        K (checked by :func:`check_n_classes`).
    n_samples : int
        Rows of X.

    Returns
    -------
    y : ndarray of shape (n_samples,), int64, C-contiguous

    Raises
    ------
    ValidationError
        If ``y`` is not 1-D, has the wrong length, is not numeric, holds a
        non-integral, non-finite or out-of-range value.

    Notes
    -----
    Privacy: labels are private; only the decision to reject is released.
    Not every class needs to occur (K is public, the data may lack a class).
    """
    n_classes = check_n_classes(n_classes)
    try:
        y_arr = np.asarray(y)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"Could not convert y to an array ({exc}).") from exc
    if y_arr.ndim != 1:
        raise ValidationError(f"y must be 1-D with one class index per example; got shape "
                              f"{y_arr.shape}.")
    if y_arr.shape[0] != n_samples:
        raise ValidationError(f"X has {n_samples} examples but y has {y_arr.shape[0]} labels; "
                              "pass one class index per row of X.")
    if y_arr.dtype.kind not in "iuf":
        raise ValidationError(
            f"y must hold integer class indices 0..{n_classes - 1}; got dtype {y_arr.dtype} "
            "(encode class names first, e.g. with sklearn.preprocessing.LabelEncoder).")
    if y_arr.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            integral = np.isfinite(y_arr) & (y_arr == np.round(y_arr))
        if not integral.all():
            bad = int(np.flatnonzero(~integral)[0])
            raise ValidationError(f"y[{bad}] = {y_arr[bad]!r} is not an integer class index.")
    if y_arr.size and (y_arr.min() < 0 or y_arr.max() >= n_classes):
        bad = int(np.flatnonzero((y_arr < 0) | (y_arr >= n_classes))[0])
        raise ValidationError(f"y[{bad}] = {y_arr[bad]!r} is outside [0, {n_classes}) "
                              f"(n_classes = {n_classes}).")
    return np.ascontiguousarray(y_arr, dtype=np.int64)


def multinomial_objective(coef, X, y, lam):
    """The objective P(Theta) of the module docstring (softmax loss plus ridge).

    ``P(Theta) = (1/N) sum_i [logsumexp(Theta x_i) - (Theta x_i)_{y_i}]
    + (lam/2) ||Theta||_F^2``.

    Parameters
    ----------
    coef : ndarray of shape (K, d)
        Theta.
    X : {array-like, scipy.sparse matrix} of shape (N, d)
    y : array-like of shape (N,)
        Class indices in ``[0, K)``.
    lam : float
        lambda >= 0.

    Returns
    -------
    value : float

    Notes
    -----
    Privacy: reads the whole training set; a non-private diagnostic.
    """
    coef = np.asarray(coef, dtype=np.float64)
    if coef.ndim != 2:
        raise ValidationError(f"coef must have shape (n_classes, n_features); got {coef.shape}.")
    X = check_X(X)
    if X.shape[1] != coef.shape[1]:
        raise ValidationError(f"X has {X.shape[1]} features but coef has {coef.shape[1]}.")
    y = check_class_indices(y, coef.shape[0], X.shape[0])
    check_rows_as_read(X, "multinomial objective")  # scipy trusts the columns
    scores = np.asarray(X @ coef.T)                           # (N, K), dense
    data_term = np.mean(logsumexp(scores, axis=1) - scores[np.arange(X.shape[0]), y])
    return float(data_term + 0.5 * check_lam(lam, allow_zero=True) * np.sum(coef * coef))


# --------------------------------------------------------------------------
# the solvers
# --------------------------------------------------------------------------


def _run(X, y, *, algorithm, n_classes, lam, epochs, sampler, clip, noise_multiplier,
         learning_rate, lazy_noise, random_state, num_threads, record_history, callback):
    n_classes = check_n_classes(n_classes)
    lam = check_lam(lam, allow_zero=True)
    epochs = check_positive("epochs", epochs)
    sigma = check_noise_multiplier(noise_multiplier)
    clip = check_clip(clip, sigma > 0.0)
    private = sigma > 0.0
    eta = check_positive("learning_rate", learning_rate)
    num_threads = check_num_threads(num_threads)
    X = as_csr(check_X(X))      # clipping bounds the sensitivity: no row-norm bound needed
    # (the estimators' mapped rows pass through as they are: the kernel reads their row map)
    n, d = X.shape
    y = check_class_indices(y, n_classes, n)
    L = float(sampler.expected_batch_size(n))
    rho, kappa = decay_and_step(eta, lam, L, "paper")
    stream, noise_rng = start_batches(sampler, n, epochs, random_state)
    noise_std = sigma * clip if private else 0.0
    if getattr(sampler, "keyed", False):  # block-keyed lots: the data-parallel step loop
        from fastdp.distributed.data_parallel.api import keyed_dpsgd
        return keyed_dpsgd(X, y, sampler=sampler, sampling_rng=stream.rng, noise_rng=noise_rng,
                           loss=None, lam=lam, epochs=epochs, sigma=sigma, clip=clip, eta=eta,
                           reg="paper", rho=rho, kappa=kappa, num_threads=num_threads,
                           algorithm=algorithm, record_history=record_history,
                           callback=callback, n_classes=n_classes)

    w = np.zeros((d, n_classes), dtype=np.float64)          # Theta^T, feature-major
    run = KernelEpochs(X, y, num_threads=num_threads, noise_rng=noise_rng, per_row=n_classes,
                       norms_in_kernel=True)  # mapped rows: no pass over X for their norms
    history = [] if record_history else None
    for epoch in run.run(_multinomial.run_multinomial_sgd, sampler, stream, epochs, state=(w,),
                         params=(clip, rho, kappa, noise_std, bool(lazy_noise)),
                         parallel_min_rows=_PARALLEL_MIN_ROWS):
        check_finite_iterate(w, algorithm, epoch, eta)      # Theta is released (flushed) here
        if record_history:
            history.append({"epoch": epoch, "n_iter": run.n_steps,
                            "primal_objective": multinomial_objective(w.T, X, y, lam)})
        if callback is not None:
            released = w.T.view()
            released.flags.writeable = False
            callback({"epoch": epoch, "n_iter": run.n_steps, "coef": released})

    return mini_batch_result(
        run, sampler=sampler, noise_multiplier=sigma, lazy_noise=lazy_noise,
        coef=np.ascontiguousarray(w.T), alpha=None, v=None, epochs=epochs, algorithm=algorithm,
        loss="multinomial", lam=lam, sensitivity=clip if private else 0.0, noise_std=noise_std,
        clip=clip, history=history,
        details=MultinomialDetails(learning_rate=eta, rho=rho, kappa=kappa, n_classes=n_classes,
                                   dtype=np.dtype(X.dtype).name),
    )


def dp_multinomial_sgd(X, y, *, n_classes, lam, epochs, batch_size, clip, noise_multiplier,
                       learning_rate=DEFAULT_LEARNING_RATE, sampler="poisson", lazy_noise=True,
                       num_threads=None, random_state=None, record_history=False, callback=None):
    """Multinomial DP-SGD: per-example K x d gradients clipped as one vector, plus Gaussian noise.

    Parameters
    ----------
    X : {array-like, scipy.sparse matrix} of shape (n, d)
        Examples as rows; CSR float32/float64 with int32/int64 indices is used
        without a copy.  Add a constant column for an intercept.
    y : array-like of shape (n,)
        Class indices in ``{0, ..., n_classes - 1}``.
    n_classes : int
        K >= 2 (public; classes absent from y are allowed).
    lam : float
        L2 strength lambda >= 0 on ``||Theta||_F^2 / 2``.
    epochs : float
        Passes over the data; ``T = floor(epochs * n / batch_size)`` steps.
    batch_size : int
        L, the (expected) lot size; also the fixed divisor of the step.
    clip : float
        C > 0, the bound on the Frobenius norm of each per-example gradient.
        ``None`` (no clipping) only when ``noise_multiplier == 0``.
    noise_multiplier : float
        sigma >= 0: noise std sigma C on every one of the K d coordinates of
        the clipped gradient sum.  0 gives non-private clipped SGD.
    learning_rate : float, default=1.0
        eta > 0 (constant step).  Needs ``eta lam < 1``.
    sampler : {"poisson", "fixed", "shuffle"} or fastdp.sampling.Sampler, default="poisson"
        How lots are drawn; the returned event accounts exactly this sampler.
    lazy_noise : bool, default=True
        Exact lazy noise (same output distribution); ``False``: eager noise on
        all K d coordinates every step.
    num_threads : int or None, default=None (1)
        OpenMP threads for the residuals and the gradient scatter.
    random_state : None, int or numpy.random.Generator
        Seeds two independent streams (sampling and noise).  Same seed, same
        bits, for any ``num_threads``.
    record_history : bool, default=False
        Per-epoch ``primal_objective`` (:func:`multinomial_objective`; non-private).
    callback : callable or None
        Called after every epoch with ``{"epoch", "n_iter", "coef"}`` (coef a
        (K, d) read-only view of the flushed, released iterate).

    Returns
    -------
    SolverResult
        ``coef`` the final Theta, shape (K, d); ``loss = "multinomial"``;
        ``event`` the sampler's event of ``T`` steps of
        ``GaussianEvent(sigma)`` (``NonPrivateEvent`` when sigma = 0), the
        same as binary DP-SGD's; ``details`` (:class:`MultinomialDetails`)
        holds ``learning_rate``, ``rho``, ``kappa``, ``n_classes``, ``dtype``.

    Notes
    -----
    Privacy: see the module docstring (private: the examples; add/remove
    adjacency for Poisson, replace-one for fixed-size and shuffle; released:
    every iterate).
    """
    return _run(X, y, algorithm="dp_multinomial_sgd", n_classes=n_classes, lam=lam,
                epochs=epochs, sampler=get_sampler(sampler, check_batch_size(batch_size)),
                clip=clip, noise_multiplier=noise_multiplier, learning_rate=learning_rate,
                lazy_noise=lazy_noise, random_state=random_state, num_threads=num_threads,
                record_history=record_history, callback=callback)


def multinomial_sgd(X, y, *, n_classes, lam, epochs, batch_size=1,
                    learning_rate=DEFAULT_LEARNING_RATE, clip=None, sampler="shuffle",
                    num_threads=None, random_state=None, record_history=False, callback=None):
    """Non-private multinomial mini-batch SGD (same kernel; no noise, no clipping by default).

    With ``batch_size = n`` and the shuffle sampler it is gradient descent on
    P and converges to the optimum for a small enough step.  Parameters as
    :func:`dp_multinomial_sgd`.

    Returns
    -------
    SolverResult
        That of :func:`dp_multinomial_sgd` without noise (``noise_multiplier = 0``,
        ``event = NonPrivateEvent()``); it reveals the training data.
    """
    return _run(X, y, algorithm="multinomial_sgd", n_classes=n_classes, lam=lam, epochs=epochs,
                sampler=get_sampler(sampler, check_batch_size(batch_size)), clip=clip,
                noise_multiplier=0.0, learning_rate=learning_rate, lazy_noise=True,
                random_state=random_state, num_threads=num_threads,
                record_history=record_history, callback=callback)


# --------------------------------------------------------------------------
# estimator adapters (fastdp.solvers.registry); not registered there
# --------------------------------------------------------------------------


class MultinomialDPSGDEstimatorSolver(EstimatorSolver):
    """Multinomial DP-SGD for a multiclass estimator (y: class indices 0..K-1).

    ``config["n_classes"]`` gives K; ``solver_options``: ``learning_rate``
    (default :data:`DEFAULT_LEARNING_RATE`).  The noise parameter is the noise
    multiplier sigma; the event is the sampler's event of T steps of
    ``GaussianEvent(sigma)`` (add/remove sensitivity C), independent of K.
    """

    supports_callback = True
    reads_row_map = True  # the kernel reads the estimators' mapped rows without a copy

    name = "multinomial_dpsgd"
    losses = ("logistic", "multinomial")
    noise_name = "noise_multiplier"
    options = MultinomialSettings.option_names()
    settings_class = MultinomialSettings

    def event(self, n_samples, config, noise):
        return gaussian_steps_event(n_samples, config, noise)

    def check_params(self, n_samples, config, *, private):
        """The base checks, lam/epochs/clip/sampler, the number of classes and
        ``learning_rate`` (the step must not overshoot the regulariser)."""
        super().check_params(n_samples, config, private=private)
        _, lam, sampler = self.check_minibatch_settings(
            n_samples, dict(config, loss="logistic"), private, allow_zero_lam=True)
        check_n_classes(config["n_classes"])
        eta = check_positive("learning_rate", self.settings(config).learning_rate)
        decay_and_step(eta, lam, float(sampler.expected_batch_size(n_samples)), "paper")

    @staticmethod
    def _arguments(s):
        """The keyword arguments of the solver functions common to both adapters."""
        return dict(
            n_classes=s.n_classes, lam=s.alpha, epochs=s.epochs, batch_size=s.batch_size,
            clip=s.clip, learning_rate=s.learning_rate, sampler=s.sampler,
            num_threads=s.num_threads, record_history=s.record_history, callback=s.callback)

    def solve(self, problem, settings, rng):
        """Multinomial DP-SGD on ``problem`` (y: class indices) with typed ``settings``."""
        return dp_multinomial_sgd(problem.X, problem.y, noise_multiplier=settings.noise_parameter,
                                  lazy_noise=settings.lazy_noise, random_state=rng,
                                  **self._arguments(settings))


class MultinomialSGDEstimatorSolver(NonPrivateEstimatorSolver, MultinomialDPSGDEstimatorSolver):
    """Non-private multinomial SGD (estimators with ``epsilon=np.inf`` only)."""

    name = "multinomial_sgd"
    private_alternative = "multinomial_dpsgd"

    def solve(self, problem, settings, rng):
        """Non-private multinomial SGD; a noise parameter other than 0 is refused."""
        if settings.noise_parameter:
            self.refuse()
        return multinomial_sgd(problem.X, problem.y, random_state=rng,
                               **self._arguments(settings))


ESTIMATOR_SOLVERS = {"multinomial_dpsgd": MultinomialDPSGDEstimatorSolver(),
                     "multinomial_sgd": MultinomialSGDEstimatorSolver()}
