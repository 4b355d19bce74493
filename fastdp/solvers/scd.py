"""Stochastic dual coordinate descent: DP-SCD, seqDP-SCD and non-private SCD/SDCA.

The algorithms of spec 000 (Damaskinos et al., "Differentially Private
Stochastic Coordinate Descent", AAAI 2021) for the problem

    min_theta  P(theta) = (1/N) sum_i loss(x_i^T theta, y_i) + (lam/2) ||theta||^2

solved through its dual (``F*(alpha)`` of :mod:`fastdp.losses`, minimised).
The released model is ``theta = v / (lam N)``, built from the noisy
auxiliary vector ``v``.  Every epoch runs inside one call of the compiled
kernel :func:`fastdp._kernels._scd.run_dual_scd`.

==================  ===============================  =============================
function            algorithm                        noise std per coordinate
==================  ===============================  =============================
:func:`dual_dpscd`  Algorithm 1: independent         sigma * sqrt(2) C
                    updates in a batch
:func:`seq_dpscd`   Algorithm 3: sequential updates  sigma * 2C sqrt(L(L+1)) (paper),
                    in a batch                       sigma * C sqrt(4L^2 - 2) ("repo")
:func:`scd`         SDCA (L = 1) / mini-batch SCD    none (not private)
:func:`primal_dpscd` Algorithm 2: primal coordinates  sigma * 2C sqrt(L(L+1)), q = 1
                    (numpy; feature-normalised X)
==================  ===============================  =============================

Privacy (dual_dpscd, seq_dpscd)
-------------------------------
* Private: the training examples (x_i, y_i).  Rows must have ``||x_i|| <= 1``
  (checked; normalise per example beforehand, which is private).
* Adjacency: the noise is calibrated to the add/remove sensitivity of one
  mini-batch step (one example absent, producing no update): std =
  sigma x sensitivity, so one step is ``GaussianEvent(sigma)`` (add/remove)
  on the sampled batch.  The sampler's event then states the adjacency of
  the guarantee: Poisson sampling is analysed under add/remove; fixed-size
  sampling and the per-epoch shuffle under replace-one, where the event
  converts the step to ``GaussianEvent(sigma / 2)`` (replace-one sensitivity
  <= 2 x add/remove sensitivity; for DP-SCD exactly 2 sqrt(2) C).
* Released: the noisy ``v`` after every step (and so ``coef = v / (lam N)``,
  and the per-epoch states passed to ``callback``).  ``result.event``
  describes all T steps with the sampler that really ran.  Lazy noise
  releases the same distribution (see :mod:`fastdp._kernels._scd`).  The
  paper's threat model also releases ``alpha``; the sensitivity used here
  (``sqrt(2) C``, counting alpha) covers that, but see the next point.
* Not covered: ``result.alpha`` is internal state.  Only the sampled
  coordinates of alpha change in a step, so publishing alpha (even noisy)
  reveals which examples were in which batch, and the subsampling
  amplification behind Poisson and fixed-size accounting needs the batches
  to stay secret.  Do not publish ``alpha``; keep it for diagnostics.  Also not
  covered: the optional per-epoch ``history`` and ``result.diagnostics`` (they
  read the data or the secret batches), anything computed from the data
  before the call, and timing (the work per step follows the sparsity of the
  sampled rows).
* The solvers take an explicit ``noise_multiplier``; choosing it from a target
  epsilon is the caller's job (``fastdp.privacy`` calibration).
"""

import math

import numpy as np
import scipy.sparse as sp

from fastdp._kernels import _scd
from fastdp._validation import (
    check_batch_size, check_labels, check_positive, check_X,
)
from fastdp.exceptions import ValidationError
from fastdp.losses import dual_objective, duality_gap, get_loss, primal_objective
from fastdp.sampling import get_sampler
from fastdp.solvers._common import (
    check_num_threads, check_run_arguments, epoch_batches, prepare_data, sampled_gaussian_event,
    split_random_state, start_batches,
)
from fastdp.solvers._kernel_epochs import KernelEpochs, mini_batch_result
from fastdp.solvers._result import SolverResult
from fastdp.solvers.registry import EstimatorSolver
from fastdp.solvers.scd_settings import (
    DEFAULT_BOX_EPS, DpScdDetails, DualScdDetails, DualScdSettings, ScdDetails, SeqScdDetails,
    SeqScdSettings,
)

__all__ = [
    "dual_dpscd",
    "seq_dpscd",
    "scd",
    "primal_dpscd",
    "dual_sensitivity",
    "seq_sensitivity",
    "primal_sensitivity",
    "ESTIMATOR_SOLVERS",
]

_PARALLEL_MIN_ROWS = 64


# --------------------------------------------------------------------------
# sensitivities (spec 000 sections 3.2 and 3.4)
# --------------------------------------------------------------------------


RELEASED_STATES = ("v", "alpha_and_v")
"""What a DP-SCD step releases: ``"v"`` (fastdp's default) or the paper's ``(alpha, v)``."""


def dual_sensitivity(clip, adjacency="add_remove", released="v"):
    """L2 sensitivity of one Algorithm-1 step (rows with norm <= 1).

    ``released="v"`` (default): only ``v`` is released (``alpha`` is internal
    state, never published: its coordinates would reveal the batches).  The
    absent example's update ``zeta_k`` (``|zeta_k| <= C``) moves ``v`` by
    ``zeta_k x_k``, of norm at most C; every other update reads the same
    released ``v`` and its own ``alpha_j``, which depends on its own row, its
    own sampling history and the released ``v`` only, so it is the same in
    both datasets.  ``S = C``.  (The absent example's own ``zeta_k`` depends
    on its hidden history, but every value it can take moves ``v`` by at most
    C, and the Rényi divergence of a mixture of such shifted Gaussians is at
    most that of the worst fixed shift, by joint convexity.)

    ``released="alpha_and_v"`` (the paper's Lemma 1): the step also releases
    ``alpha``, which moves by ``zeta_k`` too, so ``S = sqrt(2) C``.

    Replace-one doubles either: ``zeta_k x_k - zeta'_k x'_k`` has norm up to 2C.
    """
    clip = float(clip)
    if released not in RELEASED_STATES:
        raise ValidationError(f"released must be one of {RELEASED_STATES}; got {released!r}.")
    base = clip if released == "v" else math.sqrt(2.0) * clip
    if adjacency == "add_remove":
        return base
    if adjacency == "replace_one":
        return 2.0 * base
    raise ValidationError(f"adjacency must be 'add_remove' or 'replace_one'; got {adjacency!r}.")


def seq_sensitivity(clip, batch_size, mode="paper"):
    """Add/remove L2 sensitivity of one seqDP-SCD (Algorithm 3) step of ``batch_size`` updates.

    ``mode="paper"`` (Lemma 5): ``2 C sqrt(L (L + 1))``.  ``mode="repo"``: the
    reference code's tighter count ``C sqrt(4 L^2 - 2)`` (spec 000 section 2.4:
    the absent example moves alpha and v by at most C each, every later update
    in the batch by at most 2C each).  Replace-one samplers' events double it.
    """
    clip = float(clip)
    L = int(batch_size)
    if mode == "paper":
        return 2.0 * clip * math.sqrt(L * (L + 1.0))
    if mode == "repo":
        return clip * math.sqrt(4.0 * L * L - 2.0)
    raise ValidationError(f"seq_sensitivity must be 'paper' or 'repo'; got {mode!r}.")


# --------------------------------------------------------------------------
# the shared driver
# --------------------------------------------------------------------------


def _history_entry(epoch, n_iter, alpha, v, X, y, loss, lam, private):
    n = X.shape[0]
    coef = np.asarray(v, dtype=np.float64) / (lam * n)
    alpha64 = np.asarray(alpha, dtype=np.float64)
    primal = primal_objective(coef, X, y, loss, lam)
    dual = dual_objective(alpha64, X, y, loss, lam)
    entry = {
        "epoch": epoch,
        "n_iter": n_iter,
        "primal_objective": primal,
        "dual_objective": dual,
        "gap_public": primal + dual,
    }
    if not private:
        entry["duality_gap"] = duality_gap(alpha64, X, y, loss, lam)
    return entry


def _initial_state(warm_start, n, m, dtype):
    """Fresh ``(alpha, v)`` of the run: zeros, or copies of a previous run's ``warm_start``."""
    if warm_start is None:
        return np.zeros(n, dtype=dtype), np.zeros(m, dtype=dtype)
    alpha = getattr(warm_start, "alpha", None)
    v = getattr(warm_start, "v", None)
    if (alpha is None or v is None or np.shape(alpha) != (n,) or np.shape(v) != (m,)):
        raise ValidationError(
            f"warm_start must be the result of scd on the same data (alpha of shape ({n},), "
            f"v of shape ({m},)).")
    return np.array(alpha, dtype=dtype, copy=True), np.array(v, dtype=dtype, copy=True)


def _run(X, y, *, algorithm, loss, lam, epochs, sampler, sigma_prime, clip, noise_multiplier,
         sensitivity_fn, sequential, lazy_noise, box_eps, random_state, num_threads,
         record_history, callback, extra, details_class=DualScdDetails, noise_alpha=True,
         warm_start=None):
    loss, lam, epochs, sigma, clip = check_run_arguments(loss, lam, epochs, noise_multiplier, clip)
    private = sigma > 0.0
    box_eps = loss.check_box_eps(box_eps)
    num_threads = check_num_threads(num_threads)
    X, y = prepare_data(X, y, loss, private)
    n, m = X.shape
    stream, noise_rng = start_batches(sampler, n, epochs, random_state)
    if sigma_prime is None:
        sigma_prime = float(sampler.expected_batch_size(n))
    sensitivity = sensitivity_fn(clip, sampler) if private else 0.0
    noise_std = sigma * sensitivity
    if getattr(sampler, "keyed", False):  # block-keyed lots: the data-parallel step loop
        if sequential or (noise_alpha and private):
            raise ValidationError("the block-keyed sampler runs dual DP-SCD with released='v' "
                                  "(independent updates, noise on v only).")
        from fastdp.distributed.data_parallel.dual import keyed_dpscd
        return keyed_dpscd(X, y, sampler=sampler, sampling_rng=stream.rng, noise_rng=noise_rng,
                           loss=loss, lam=lam, epochs=epochs, sigma=sigma, clip=clip,
                           box_eps=box_eps, noise_std=noise_std, sensitivity=sensitivity,
                           num_threads=num_threads, algorithm=algorithm,
                           record_history=record_history, callback=callback, extra=extra)

    dtype = X.dtype
    alpha, v = _initial_state(warm_start, n, m, dtype)
    lam_n = lam * n
    run = KernelEpochs(X, y, num_threads=num_threads, noise_rng=noise_rng)
    history = [] if record_history else None
    params = (loss.code, lam_n, float(sigma_prime), clip, box_eps, bool(sequential),
              noise_std if noise_alpha else 0.0, noise_std, bool(lazy_noise))
    for epoch in run.run(_scd.run_dual_scd, sampler, stream, epochs, state=(alpha, v),
                         params=params, parallel_min_rows=_PARALLEL_MIN_ROWS):
        if record_history:
            history.append(_history_entry(epoch, run.n_steps, alpha, v, X, y, loss, lam,
                                          private))
        if callback is not None:
            callback({"epoch": epoch, "n_iter": run.n_steps, "coef": v / lam_n, "v": v})

    details = details_class(sigma_prime=float(sigma_prime), box_eps=box_eps,
                            dtype=np.dtype(dtype).name, **extra)
    return mini_batch_result(
        run, sampler=sampler, noise_multiplier=sigma, lazy_noise=lazy_noise,
        coef=np.asarray(v, dtype=np.float64) / lam_n, alpha=alpha, v=v, epochs=epochs,
        algorithm=algorithm, loss=loss.name, lam=lam, sensitivity=sensitivity,
        noise_std=noise_std, clip=clip, history=history, details=details,
    )


# --------------------------------------------------------------------------
# public solvers
# --------------------------------------------------------------------------


def dual_dpscd(X, y, *, loss, lam, epochs, batch_size, clip, noise_multiplier,
               sampler="poisson", lazy_noise=True, box_eps=DEFAULT_BOX_EPS, random_state=None,
               num_threads=None, record_history=False, callback=None, released="v"):
    """Dual DP-SCD (Algorithm 1 of spec 000): private SDCA with independent mini-batch updates.

    Each of ``T = floor(epochs * n / batch_size)`` steps samples a batch B,
    computes for every j in B the closed-form coordinate step ``zeta_j`` of
    the local subproblem with constant ``sigma' = batch_size`` from the same
    (alpha, v), scales it to ``|zeta_j| <= clip``, adds ``zeta_j`` to
    ``alpha_j`` and ``zeta_j x_j`` to ``v``, then adds Gaussian noise of std
    ``noise_multiplier * sensitivity`` to every coordinate of ``v`` (and, with
    ``released="alpha_and_v"``, to ``alpha_B`` too).  Returns ``coef = v / (lam n)``.

    Parameters
    ----------
    X : array-like or scipy.sparse matrix of shape (n, m)
        Examples as rows; float32 or float64 values (kept), int32 or int64
        indices.  When ``noise_multiplier > 0`` every row must have L2 norm
        <= 1.
    y : array-like of shape (n,)
        Real labels (``loss="squared"``) or two classes, mapped to -1/+1.
    loss : {"squared", "ridge", "logistic", "hinge"}
    lam : float
        lambda > 0 of the 1/n-averaged objective.
    epochs : float
        Number of passes; the number of steps is ``floor(epochs * n / batch_size)``.
    batch_size : int
        L, the (expected) mini-batch size; ``1 <= L <= n``.  Also the
        subproblem constant sigma' (fixed, never the realised batch size, so
        the other examples' updates do not depend on whether example k is
        present).
    clip : float
        C > 0, the bound on each coordinate update.  ``None`` (no scaling)
        only when ``noise_multiplier == 0``.
    noise_multiplier : float
        sigma >= 0.  Noise std per coordinate = sigma * S with S the add/remove
        sensitivity (:func:`dual_sensitivity`: C, or sqrt(2) C with
        ``released="alpha_and_v"``), whatever the sampler; replace-one
        samplers' events account it as sigma / 2.  0 gives non-private
        mini-batch SCD.
    sampler : {"poisson", "fixed", "shuffle"} or fastdp.sampling.Sampler, default="poisson"
        How batches are drawn (see :mod:`fastdp.sampling`); the returned event
        accounts for exactly this sampler.
    lazy_noise : bool, default=True
        Draw each v-coordinate's noise lazily (same output distribution,
        O(nnz + n + m) draws per epoch instead of O(m n / L)).
    box_eps : float, default=1e-4
        Margin b of the dual box ``alpha y in [b, 1 - b]`` (logistic: > 0;
        hinge: >= 0).
    random_state : None, int or numpy.random.Generator
        Seeds two independent streams (sampling and noise).  Same seed, same
        bits, for any ``num_threads``.
    num_threads : int or None, default=None (1)
        OpenMP threads for the margins of a batch.
    record_history : bool, default=False
        Record per-epoch objectives (non-private diagnostics; reads the data).
    callback : callable or None
        Called after every epoch with a dict (``epoch``, ``n_iter``, ``coef``,
        ``v``) of the flushed, released state; must not modify it.
    released : {"v", "alpha_and_v"}, default="v"
        What the guarantee covers.  ``"v"``: the noisy ``v`` only (alpha is
        internal state, gets no noise, and is never published), sensitivity C.
        ``"alpha_and_v"``: the paper's Algorithm 1 (noise on alpha and v,
        sensitivity sqrt(2) C), kept to reproduce the paper.

    Returns
    -------
    SolverResult
        ``event`` is ``SelfComposedEvent(<sampled GaussianEvent(sigma)>, T)``
        for the sampler used (``NonPrivateEvent`` when sigma = 0).

    Notes
    -----
    Privacy: see the module docstring (noise calibrated to the add/remove
    sensitivity; the event's adjacency is add/remove for Poisson, replace-one
    for fixed-size sampling and shuffling; released: every noisy v and the
    final model; ``result.alpha`` is internal state, not covered).
    """
    smp = get_sampler(sampler, check_batch_size(batch_size))
    return _run(
        X, y, algorithm="dual_dpscd", loss=loss, lam=lam, epochs=epochs, sampler=smp,
        sigma_prime=None, clip=clip, noise_multiplier=noise_multiplier,
        sensitivity_fn=lambda c, s: dual_sensitivity(c, released=released), sequential=False,
        lazy_noise=lazy_noise, box_eps=box_eps, random_state=random_state,
        num_threads=num_threads, record_history=record_history, callback=callback,
        extra={"released": released}, details_class=DpScdDetails,
        noise_alpha=released == "alpha_and_v",
    )


def seq_dpscd(X, y, *, loss, lam, epochs, batch_size, clip, noise_multiplier,
              sampler="shuffle", sigma_prime=1.0, seq_sensitivity="paper", lazy_noise=True,
              box_eps=DEFAULT_BOX_EPS, random_state=None, num_threads=None,
              record_history=False, callback=None):
    """seqDP-SCD (Algorithm 3 of spec 000): sequential updates inside a batch, then noise.

    Inside each batch the updates are applied one after another, so later
    examples read the updated v; the sensitivity therefore grows with L
    (:func:`seq_sensitivity`).  Parameters as :func:`dual_dpscd`, plus:

    Parameters
    ----------
    sampler : {"shuffle", "fixed"} or Sampler, default="shuffle"
        Poisson sampling is refused: its batch size is unbounded, and the
        sensitivity bound needs at most L updates per step.
    sigma_prime : float, default=1.0
        Subproblem constant (1 = plain sequential SDCA steps, the reference
        code's choice; the paper writes L).
    seq_sensitivity : {"paper", "repo"}, default="paper"
        ``2 C sqrt(L(L+1))`` (Lemma 5) or the reference code's tighter
        ``C sqrt(4L^2 - 2)`` (both add/remove sensitivities).
    num_threads : ignored (the updates are sequential); kept for a uniform API.

    Returns
    -------
    SolverResult

    Notes
    -----
    Privacy: as :func:`dual_dpscd` with the sensitivity above.
    """
    smp = get_sampler(sampler, check_batch_size(batch_size))
    sigma_prime = _check_seq_settings(smp, sigma_prime, seq_sensitivity)
    mode = seq_sensitivity
    lot = smp.batch_size
    return _run(
        X, y, algorithm="seq_dpscd", loss=loss, lam=lam, epochs=epochs, sampler=smp,
        sigma_prime=sigma_prime, clip=clip, noise_multiplier=noise_multiplier,
        sensitivity_fn=lambda c, s: _seq_sensitivity_value(c, lot, mode),
        sequential=True, lazy_noise=lazy_noise, box_eps=box_eps, random_state=random_state,
        num_threads=1, record_history=record_history, callback=callback,
        extra={"seq_sensitivity": mode}, details_class=SeqScdDetails,
    )


_seq_sensitivity_value = seq_sensitivity


def _check_seq_settings(sampler, sigma_prime, mode):
    """The settings only seqDP-SCD takes; returns ``sigma_prime`` as a float."""
    if not sampler.fixed_size:
        raise ValidationError(
            "seq_dpscd needs fixed-size batches (sampler='shuffle' or 'fixed'): with Poisson "
            "sampling the number of sequential updates per step, and so the sensitivity, is unbounded."
        )
    sigma_prime = check_positive("sigma_prime", sigma_prime)
    if not (isinstance(mode, str) and mode in ("paper", "repo")):
        raise ValidationError(f"seq_sensitivity must be 'paper' or 'repo'; got {mode!r}.")
    return sigma_prime


def scd(X, y, *, loss, lam, epochs, batch_size=1, clip=None, sampler="shuffle",
        box_eps=DEFAULT_BOX_EPS, random_state=None, num_threads=None, record_history=False,
        callback=None, warm_start=None):
    """Non-private SCD: SDCA (``batch_size=1``) or mini-batch SCD (``batch_size > 1``).

    The epsilon -> infinity limit of :func:`dual_dpscd` (spec 000 section 2.3):
    no noise, no scaling by default (``clip=None``), batches from a per-epoch
    shuffle by default.  With ``batch_size=1`` each step is an exact SDCA
    coordinate step; with L > 1 the updates of a batch are independent with
    subproblem constant L (CoCoA+), so ``F*`` never increases for the ridge
    loss and for the hinge loss with ``box_eps=0``.

    Returns
    -------
    SolverResult
        No noise (``noise_multiplier = 0``) and no privacy (``event =
        NonPrivateEvent()``): the coefficients reveal the training data.
    """
    smp = get_sampler(sampler, check_batch_size(batch_size))
    return _run(
        X, y, algorithm="scd", loss=loss, lam=lam, epochs=epochs, sampler=smp,
        sigma_prime=None, clip=clip, noise_multiplier=0.0,
        sensitivity_fn=lambda c, s: 0.0, sequential=False, lazy_noise=True, box_eps=box_eps,
        random_state=random_state, num_threads=num_threads, record_history=record_history,
        callback=callback, extra={}, warm_start=warm_start,
    )


# --------------------------------------------------------------------------
# primal DP-SCD (Algorithm 2, spec 000 section 2.5)
# --------------------------------------------------------------------------


def primal_sensitivity(clip, batch_size):
    """Add/remove L2 sensitivity of one primal DP-SCD step: ``2 C sqrt(L (L + 1))`` (Lemma 4).

    Needs every *feature column* of X to have L2 norm <= 1: the absent example
    can flip the sign of all L coordinate updates (each differs by <= 2C) and
    moves ``v`` by at most ``sum_j 2C ||X_j|| <= 2LC``.
    """
    return 2.0 * float(clip) * math.sqrt(int(batch_size) * (int(batch_size) + 1.0))


def _primal_step(Xc, y, theta, v, coords, loss, lam, sigma_prime, clip):
    """Scaled primal coordinate steps for the features ``coords`` from the same (theta, v).

    ``zeta_j = -g_j / h_j`` with ``g_j = X_j^T loss'(v) / N + lam theta_j`` and
    ``h_j = sigma' X_j^2 . loss''(v) / N + lam`` (exact for the squared loss),
    then scaled to ``|zeta_j| <= clip``.  Returns ``(zeta, delta_v)``.
    """
    n = Xc.shape[0]
    XB = Xc[:, coords]
    g = np.asarray(XB.T @ loss.derivative(v, y)).ravel() / n + lam * theta[coords]
    curvature = loss.second_derivative(v, y)
    h = sigma_prime * np.asarray(XB.multiply(XB).T @ curvature).ravel() / n + lam
    zeta = -g / h
    zeta = zeta / np.maximum(1.0, np.abs(zeta) / clip)
    return zeta, np.asarray(XB @ zeta).ravel()


def primal_dpscd(X, y, *, loss, lam, epochs, batch_size, clip, noise_multiplier,
                 sampler="shuffle", random_state=None, record_history=False, callback=None):
    """Primal DP-SCD (Algorithm 2 of spec 000): private coordinate descent on theta.

    Each of ``T = floor(epochs * m / batch_size)`` steps picks L feature
    coordinates B, computes for every j in B the step of the separable
    surrogate with constant ``sigma' = L`` from the same (theta, v = X theta)
    (exact for the squared loss, one Newton step for the logistic loss),
    scales it to ``|zeta_j| <= clip``, applies it, then adds Gaussian noise of
    std ``noise_multiplier * 2 C sqrt(L (L + 1))`` to ``theta_B`` and to every
    one of the n coordinates of ``v``.  A numpy implementation (the paper
    analyses this algorithm but does not run it).

    Parameters
    ----------
    X : array-like or scipy.sparse matrix of shape (n, m)
        When private, every *column* (feature) must have L2 norm <= 1
        (Lemma 4 needs feature normalisation, unlike the dual algorithms).
    y : array-like of shape (n,)
    loss : {"squared", "ridge", "logistic"}
        The hinge loss is not smooth and has no primal Newton step here.
    lam, epochs, clip, noise_multiplier, random_state, record_history, callback
        As :func:`dual_dpscd`; epochs count passes over the m coordinates.
    batch_size : int
        L coordinates per step, ``1 <= L <= m``.
    sampler : {"shuffle", "fixed"} or Sampler, default="shuffle"
        How the coordinates are chosen (over ``range(m)``).  It gives no
        privacy amplification: every step reads every example.

    Returns
    -------
    SolverResult
        ``alpha`` is None; ``v`` has length n; ``sample_rate`` is 1; ``event``
        is ``SelfComposedEvent(GaussianEvent(sigma), T)`` (add/remove).

    Notes
    -----
    Privacy: private are the examples; adjacency add/remove; each step is a
    Gaussian mechanism on ``[theta_B; v]`` with sensitivity
    :func:`primal_sensitivity`, composed T times without sampling (q = 1,
    spec 000 section 3.3).  Released: every noisy (theta, v), hence the
    final model ``theta`` (no sampling of examples, so nothing to hide).
    """
    loss = get_loss(loss)
    if loss.name == "hinge":
        raise ValidationError(
            "primal_dpscd needs a smooth loss ('squared' or 'logistic'); use dual_dpscd for the hinge loss."
        )
    loss, lam, epochs, sigma, clip = check_run_arguments(loss, lam, epochs, noise_multiplier, clip)
    private = sigma > 0.0
    L = check_batch_size(batch_size)
    X = check_X(X)
    y, _ = check_labels(y, loss.task, n_samples=X.shape[0])
    y = np.asarray(y, dtype=np.float64)
    Xc = sp.csc_matrix(X, dtype=np.float64)
    n, m = Xc.shape
    if private:
        col_norms = np.sqrt(np.asarray(Xc.multiply(Xc).sum(axis=0)).ravel())
        if np.any(col_norms > 1.0 + 1e-6):
            raise ValidationError(
                f"{int(np.sum(col_norms > 1.0 + 1e-6))} feature columns of X have L2 norm above 1 "
                f"(largest {col_norms.max():.6g}); primal DP-SCD's sensitivity bound needs every "
                "column normalised (Lemma 4). Scale each column by a public bound, or use dual_dpscd."
            )
    smp = get_sampler(sampler, L)
    if not smp.fixed_size:
        raise ValidationError(
            "primal_dpscd needs fixed-size coordinate batches (sampler='shuffle' or 'fixed'): "
            "the sensitivity grows with the number of coordinates updated per step."
        )
    smp.check(m)
    n_iter = smp.n_steps(m, epochs)
    if n_iter < 1:
        raise ValidationError(f"epochs = {epochs} gives no complete step over m = {m} coordinates.")
    sensitivity = primal_sensitivity(clip, L) if private else 0.0
    noise_std = sigma * sensitivity
    sampling_rng, noise_rng = split_random_state(random_state)
    stream = smp.stream(m, sampling_rng)
    theta = np.zeros(m)
    v = np.zeros(n)
    history = [] if record_history else None
    done = 0
    for epoch, done, batch_ptr, batch_idx in epoch_batches(smp, stream, m, epochs, check=False):
        for t in range(batch_ptr.size - 1):
            coords = batch_idx[batch_ptr[t]:batch_ptr[t + 1]]
            zeta, delta_v = _primal_step(Xc, y, theta, v, coords, loss, lam, float(L), clip)
            theta[coords] += zeta
            v += delta_v
            if private:
                theta[coords] += noise_std * noise_rng.standard_normal(coords.size)
                v += noise_std * noise_rng.standard_normal(n)
        if record_history:
            history.append({"epoch": epoch, "n_iter": done,
                            "primal_objective": primal_objective(theta, Xc, y, loss, lam)})
        if callback is not None:
            callback({"epoch": epoch, "n_iter": done, "coef": theta, "v": v})
    from fastdp.privacy import events

    event = (events.SelfComposedEvent(events.GaussianEvent(sigma), done) if private
             else events.NonPrivateEvent())
    return SolverResult(
        coef=theta.copy(), alpha=None, v=v, n_iter=int(done), epochs=epochs,
        algorithm="primal_dpscd", loss=loss.name, lam=lam, noise_multiplier=sigma,
        sensitivity=sensitivity, noise_std=noise_std, clip=clip, batch_size=float(L),
        sample_rate=1.0, sampler=smp.name, adjacency="add_remove", event=event,
        lazy_noise=False, diagnostics={"n_noise_draws": int(done * (n + L)) if private else 0},
        num_threads=1, history=history, details=ScdDetails(sigma_prime=float(L)),
    )


# --------------------------------------------------------------------------
# estimator adapters (see fastdp.solvers.registry)
# --------------------------------------------------------------------------


class _DualScdEstimatorSolver(EstimatorSolver):
    """Runs :func:`dual_dpscd` (or :func:`seq_dpscd`) for the estimators.

    Typed settings: :class:`~fastdp.solvers.scd_settings.DualScdSettings`
    (``box_eps``, ``released``) or, for seqDP-SCD,
    :class:`~fastdp.solvers.scd_settings.SeqScdSettings` (``box_eps``,
    ``sigma_prime``, ``seq_sensitivity``).  The noise parameter is the noise
    multiplier sigma; the event is the
    sampler's event of ``T`` Gaussian steps, exactly as the solver reports it.
    """

    settings_class = DualScdSettings
    options = DualScdSettings.option_names()
    supports_callback = True
    reads_row_map = True  # the kernel reads the estimators' mapped rows without a copy

    def __init__(self, name, sequential):
        self.name = name
        self.sequential = sequential
        if sequential:
            self.settings_class = SeqScdSettings
            self.options = SeqScdSettings.option_names()
            # Poisson batches are unbounded, and so is seqDP-SCD's sensitivity.
            self.default_sampler = "fixed"

    def _sampler(self, config):
        return get_sampler(config["sampler"], config["batch_size"])

    def default_clip(self, n_samples, config, loss):
        """``C = lam N / L``: the size of an unscaled coordinate step.

        With unit-norm rows and sigma' = L the step is about
        ``residual * lam N / L``, so this C clips only unusually large steps
        while keeping the noise (proportional to C) matched to the signal.
        Logistic and hinge steps never exceed 1, so C is capped at 1 there.
        It uses only public quantities (N, lambda, L).
        """
        clip = config["lam"] * n_samples / config["batch_size"]
        return min(clip, 1.0) if get_loss(loss).task == "binary" else clip

    def check_params(self, n_samples, config, *, private):
        """The base checks, lam/epochs/clip/sampler, and ``box_eps``, ``released`` or
        seqDP-SCD's ``sigma_prime``, ``seq_sensitivity`` and fixed-size sampler."""
        super().check_params(n_samples, config, private=private)
        loss, _, sampler = self.check_minibatch_settings(n_samples, config, private)
        s = self.settings(config)
        loss.check_box_eps(s.box_eps)
        if self.sequential:
            _check_seq_settings(sampler, s.sigma_prime, s.seq_sensitivity)
        else:
            dual_sensitivity(1.0, released=s.released)

    def event(self, n_samples, config, noise):
        sampler = self._sampler(config)
        sampler.check(n_samples)
        return sampled_gaussian_event(sampler, n_samples, sampler.n_steps(n_samples, config["epochs"]),
                              float(noise))

    def solve(self, problem, settings, rng):
        """Dual (or sequential) DP-SCD on ``problem`` with typed ``settings``."""
        s = settings
        kwargs = dict(
            loss=problem.loss, lam=s.alpha, epochs=s.epochs, batch_size=s.batch_size,
            clip=s.clip, noise_multiplier=s.noise_parameter,
            sampler=get_sampler(s.sampler, s.batch_size), lazy_noise=s.lazy_noise,
            random_state=rng, record_history=s.record_history, callback=s.callback,
            **s.options())
        if self.sequential:
            return seq_dpscd(problem.X, problem.y, **kwargs)
        return dual_dpscd(problem.X, problem.y, num_threads=s.num_threads, **kwargs)


ESTIMATOR_SOLVERS = {
    "dpscd": _DualScdEstimatorSolver("dpscd", sequential=False),
    "seq_dpscd": _DualScdEstimatorSolver("seq_dpscd", sequential=True),
}
