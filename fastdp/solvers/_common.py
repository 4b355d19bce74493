"""Argument checks, data preparation and the epoch loop shared by the mini-batch solvers.

The dual SCD family (:mod:`fastdp.solvers.scd`), DP-SGD
(:mod:`fastdp.solvers.sgd`) and the perturbation baselines
(:mod:`fastdp.solvers.perturbation`) take the same kinds of arguments
(``lam``, ``noise_multiplier``, ``clip``, ``num_threads``,
``batch_size``, a sampler) and feed the compiled kernels the same layout (a
canonical CSR matrix and float64 labels).  The checks and conversions live
here, once; generic scalar checks come from :mod:`fastdp._validation`.

Privacy
-------
The checks read only hyper-parameters, except :func:`prepare_data` (which
reads the private data to validate it, releasing nothing but the decision to
reject) and :func:`sampled_gaussian_event` (which describes, publicly, what a
run releases).  Nothing here spends privacy.
"""

import math
import numbers

import numpy as np
import scipy.sparse as sp

from fastdp._validation import (
    check_labels, check_positive, check_random_state, check_real, check_X, is_mapped_rows,
)
from fastdp.exceptions import ValidationError
from fastdp.losses import get_loss

__all__ = [
    "check_run_arguments",
    "check_lam",
    "check_noise_multiplier",
    "check_clip",
    "check_num_threads",
    "as_csr",
    "prepare_data",
    "kernel_rows",
    "kernel_sq_norms",
    "split_random_state",
    "start_batches",
    "epoch_batches",
    "grow_buffer",
    "balanced_column_splits",
    "sampled_gaussian_event",
    "StructureTokenCache",
]


# --------------------------------------------------------------------------
# hyper-parameters
# --------------------------------------------------------------------------


def check_run_arguments(loss, lam, epochs, noise_multiplier, clip, *, allow_zero_lam=False):
    """Check the arguments every mini-batch GLM solver takes, in this order.

    Parameters
    ----------
    loss : str or fastdp.losses.Loss
    lam : real number
        See :func:`check_lam`.
    epochs : real number
        Passes over the data; finite, > 0 (fractions allowed).
    noise_multiplier : real number
        See :func:`check_noise_multiplier`.
    clip : real number or None
        See :func:`check_clip` (checked against ``noise_multiplier > 0``).
    allow_zero_lam : bool, default=False
        Accept ``lam = 0``.

    Returns
    -------
    loss : fastdp.losses.Loss
    lam, epochs, sigma, clip : float
        The run is private iff ``sigma > 0``.

    Raises
    ------
    ValidationError
        For the first argument out of range.
    """
    loss = get_loss(loss)
    lam = check_lam(lam, allow_zero=allow_zero_lam)
    epochs = check_positive("epochs", epochs)
    sigma = check_noise_multiplier(noise_multiplier)
    clip = check_clip(clip, sigma > 0.0)
    return loss, lam, epochs, sigma, clip


def check_lam(lam, *, allow_zero=False):
    """Check the L2 strength lambda of the 1/n-averaged objective.

    Parameters
    ----------
    lam : real number
        lambda; must be finite and > 0 (>= 0 with ``allow_zero``).
    allow_zero : bool, default=False
        Accept ``lam = 0`` (no regulariser), as SGD does; the dual SCD family
        divides by lambda and needs it > 0.

    Returns
    -------
    lam : float

    Raises
    ------
    ValidationError
        If ``lam`` is not a real number or out of range.
    """
    lam = check_real("lam", lam)
    low_ok = lam >= 0.0 if allow_zero else lam > 0.0
    if not (low_ok and lam < math.inf):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValidationError(f"lam (the L2 strength lambda) must be a finite number {bound}; got {lam!r}.")
    return lam


def check_noise_multiplier(noise_multiplier):
    """Check the noise multiplier sigma (finite, >= 0; 0 means a non-private run).

    Parameters
    ----------
    noise_multiplier : real number

    Returns
    -------
    sigma : float

    Raises
    ------
    ValidationError
        If ``noise_multiplier`` is not a finite real number >= 0.
    """
    sigma = check_real("noise_multiplier", noise_multiplier)
    if not (0.0 <= sigma < math.inf):
        raise ValidationError(
            f"noise_multiplier must be a finite number >= 0 (0 = not private); got {noise_multiplier!r}."
        )
    return sigma


def check_clip(clip, private):
    """Check the scaling/clipping bound C.

    Parameters
    ----------
    clip : real number or None
        C > 0.  ``None`` or ``inf`` mean "no scaling", which is allowed only
        in a non-private run.
    private : bool
        Whether noise is added (``noise_multiplier > 0``): the sensitivity,
        and hence the noise, is proportional to C, so C must be finite.

    Returns
    -------
    clip : float
        ``math.inf`` for "no scaling".

    Raises
    ------
    ValidationError
        If C is not a real number > 0, or is infinite in a private run.
    """
    if clip is None:
        clip = math.inf
    clip = check_real("clip", clip)
    if not clip > 0.0:
        raise ValidationError(
            f"clip (the scaling bound C of each coordinate update) must be > 0; got {clip!r}. "
            "Use clip=None for no scaling in a non-private run."
        )
    if private and math.isinf(clip):
        raise ValidationError(
            "A private run (noise_multiplier > 0) needs a finite clip C: the sensitivity, and "
            "hence the noise, is proportional to C."
        )
    return clip


MAX_NUM_THREADS = 1024
"""Largest OpenMP thread count the compiled kernels accept."""


def check_num_threads(num_threads):
    """Check the OpenMP thread count of a kernel call.

    Parameters
    ----------
    num_threads : int or None
        ``None`` means 1.

    Returns
    -------
    num_threads : int
        >= 1.

    Raises
    ------
    ValidationError
        If ``num_threads`` is not None or an int in [1, 1024] (bools are rejected; the
        compiled kernels refuse more than 1024 OpenMP threads).
    """
    if num_threads is None:
        return 1
    if isinstance(num_threads, (bool, np.bool_)) or not isinstance(num_threads, numbers.Integral):
        raise ValidationError(f"num_threads must be None or a positive int; got {num_threads!r}.")
    if num_threads < 1:
        raise ValidationError(f"num_threads must be >= 1; got {num_threads}.")
    if num_threads > MAX_NUM_THREADS:
        raise ValidationError(f"num_threads must be at most {MAX_NUM_THREADS}; got {num_threads}. "
                              "Use the number of cores of the machine.")
    return int(num_threads)


# --------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------


def as_csr(X):
    """Canonical CSR form of a matrix already checked by :func:`fastdp._validation.check_X`.

    Parameters
    ----------
    X : ndarray or scipy.sparse.csr_matrix of shape (n_samples, n_features)
        Output of ``check_X``: sparse input passes through unchanged, dense
        input is converted.

    Returns
    -------
    X_csr : scipy.sparse.csr_matrix
        Sorted column indices, ``indices`` and ``indptr`` of one integer type,
        float32 or float64 values (as :func:`check_X` keeps them).

    Mapped rows (:class:`fastdp._mapped_rows.MappedRows`, which ``check_X``
    passes through) are returned as they are: the row-map-aware kernels read
    them (:func:`kernel_rows`).

    Notes
    -----
    Privacy: reads the private data; releases nothing.
    """
    if is_mapped_rows(X):
        return X
    if not sp.issparse(X):
        X = sp.csr_matrix(X)
        X.sort_indices()
        if X.indices.dtype != X.indptr.dtype:
            X.indptr = X.indptr.astype(X.indices.dtype)
    return X


def prepare_data(X, y, loss, private):
    """Canonical CSR X and float64 labels for a GLM kernel.

    Parameters
    ----------
    X : array-like or scipy.sparse matrix of shape (n, m)
    y : array-like of shape (n,)
    loss : fastdp.losses.Loss
        Its ``task`` decides the label check (binary labels must be -1/+1).
    private : bool
        Require row norms <= 1 (the sensitivity bound of the dual SCD family).

    Returns
    -------
    X : scipy.sparse.csr_matrix
    y : ndarray of shape (n,), float64, C-contiguous

    Raises
    ------
    ValidationError
        Everything :func:`check_X` and :func:`check_labels` raise, and binary
        labels outside {-1, +1}.

    Notes
    -----
    Privacy: reads the private data; releases nothing but the decision to
    reject it.
    """
    X = as_csr(check_X(X, max_row_norm=1.0 if private else None))
    y, _ = check_labels(y, loss.task, n_samples=X.shape[0])
    if loss.task == "binary" and not np.all(np.abs(y) == 1.0):
        raise ValidationError("logistic and hinge losses need labels in {-1, +1}.")
    return X, np.ascontiguousarray(y, dtype=np.float64)


def kernel_rows(X):
    """``(data, indices, indptr, row_map)`` of a prepared X, for a kernel call.

    ``row_map`` holds the keyword arguments that make a row-map-aware kernel
    (``_sgd.run_sgd``, ``_scd.run_dual_scd``) read mapped rows without a copy
    (:meth:`fastdp._mapped_rows.MappedRows.kernel_map`); it is empty for a
    CSR matrix, which the kernels read as stored.
    """
    if is_mapped_rows(X):
        return X.csr.data, X.csr.indices, X.csr.indptr, X.kernel_map()
    return X.data, X.indices, X.indptr, {}


def kernel_sq_norms(X, *, mapped_in_kernel=False):
    """Squared row norms of a prepared X as the kernels sum them (float64, storage order).

    For a binary dataset opened with :func:`fastdp.io.binary.open_binary` they
    were stored at conversion (the same bits): no scan of X.

    ``mapped_in_kernel=True`` (the DP-SGD kernels, which sum a row's norm while
    they read the row when given None): for mapped rows, the norms a pass
    already computed (:meth:`~fastdp._mapped_rows.MappedRows.known_kernel_sq_norms`),
    else None instead of a scan of X.
    """
    from fastdp._kernels._scd import row_squared_norms
    from fastdp._validation import stored_kernel_sq_norms

    if is_mapped_rows(X):
        return X.known_kernel_sq_norms() if mapped_in_kernel else X.kernel_sq_norms()
    stored = stored_kernel_sq_norms(X)
    if stored is not None:
        return stored
    return row_squared_norms(X.data, X.indptr)


# --------------------------------------------------------------------------
# the epoch loop
# --------------------------------------------------------------------------


def split_random_state(random_state):
    """Two independent generators from ``random_state``: one for sampling, one for noise.

    Parameters
    ----------
    random_state : None, int, SeedSequence, BitGenerator or Generator
        As :func:`fastdp._validation.check_random_state`.

    Returns
    -------
    sampling_rng, noise_rng : numpy.random.Generator
    """
    sampling_rng, noise_rng = check_random_state(random_state).spawn(2)
    return sampling_rng, noise_rng


def start_batches(sampler, n, epochs, random_state):
    """Check the run length, then open the batch stream and the noise generator of a run.

    Parameters
    ----------
    sampler : fastdp.sampling.Sampler
    n : int
        Number of examples (public).
    epochs : float
    random_state : None, int, SeedSequence, BitGenerator or Generator

    Returns
    -------
    stream : object
        ``sampler.stream(n, sampling_rng)``.
    noise_rng : numpy.random.Generator
        Independent of the sampling stream (see :func:`split_random_state`).

    Raises
    ------
    ValidationError
        If the sampler refuses n, or ``epochs`` gives no complete mini-batch
        step (checked before ``random_state`` is used).
    """
    sampler.check(n)
    if sampler.n_steps(n, epochs) < 1:
        raise ValidationError(
            f"epochs = {epochs} with batch size {sampler.expected_batch_size(n):g} and n = {n} "
            "gives no complete mini-batch step; increase epochs."
        )
    sampling_rng, noise_rng = split_random_state(random_state)
    return sampler.stream(n, sampling_rng), noise_rng


def epoch_batches(sampler, stream, n, epochs, *, check=True):
    """Iterate over the epochs of a run, with the batches of each epoch.

    Parameters
    ----------
    sampler : fastdp.sampling.Sampler
    stream : object
        ``sampler.stream(n, rng)``.
    n : int
        Size of the population the batches index (examples, or coordinates).
    epochs : float
    check : bool, default=True
        Check every batch with :func:`check_batches` (needed before a nogil
        kernel reads the indices).

    Yields
    ------
    epoch : int
        1, 2, ...
    n_done : int
        Steps done at the end of this epoch.
    batch_ptr, batch_idx : ndarray
        The epoch's ``n_done - n_done_before`` batches, as ``stream.take`` gives them.
    """
    done = 0
    for epoch, bound in enumerate(sampler.epoch_boundaries(n, epochs), start=1):
        batch_ptr, batch_idx = stream.take(bound - done)
        if check:
            check_batches(batch_ptr, batch_idx, n)
        done = bound
        yield epoch, done, batch_ptr, batch_idx


def check_batches(batch_ptr, batch_idx, n):
    """Guard of the nogil kernels: monotone pointers and indices inside [0, n).

    Parameters
    ----------
    batch_ptr : ndarray of shape (n_steps + 1,)
    batch_idx : ndarray of shape (batch_ptr[-1],)
    n : int

    Raises
    ------
    ValidationError
        If the batches are malformed.
    """
    if batch_ptr.ndim != 1 or batch_ptr.shape[0] < 1 or batch_ptr[0] != 0:
        raise ValidationError("batch_ptr must be a 1-D array starting at 0.")
    if batch_ptr[-1] != batch_idx.shape[0] or np.any(np.diff(batch_ptr) < 0):
        raise ValidationError("batch_ptr must be non-decreasing and end at len(batch_idx).")
    if batch_idx.size and (batch_idx.min() < 0 or batch_idx.max() >= n):
        raise ValidationError(f"batch indices must lie in [0, {n}).")


def grow_buffer(buffer, batch_ptr):
    """Return ``buffer``, or a larger zeroed float64 one if a batch of ``batch_ptr`` needs it.

    Parameters
    ----------
    buffer : ndarray of float64
        Per-batch scratch space of a kernel (one slot per batch member).
    batch_ptr : ndarray
        Batch pointers of the coming kernel call.

    Returns
    -------
    buffer : ndarray of float64
        At least as long as the largest batch.
    """
    largest = int(np.diff(batch_ptr).max(initial=0))
    if largest > buffer.shape[0]:
        return np.zeros(largest, dtype=np.float64)
    return buffer


def balanced_column_splits(X, num_threads):
    """Column ranges with about equal numbers of stored entries, one per thread.

    Used only to share the work of a dense update over the columns between
    threads; it does not change results.

    Parameters
    ----------
    X : scipy.sparse.csr_matrix of shape (n, m)
    num_threads : int

    Returns
    -------
    splits : ndarray of int64 of shape (num_threads + 1,) or None
        ``0 = s_0 <= s_1 <= ... <= s_T = m``; None for one thread.
    """
    if num_threads <= 1:
        return None
    from fastdp._validation import check_rows_as_read

    m = X.shape[1]
    check_rows_as_read(X, "balanced_column_splits")  # bincount trusts the column indices
    indices = X.csr.indices if is_mapped_rows(X) else X.indices  # (a mapped constant column: not counted)
    cum = np.cumsum(np.bincount(indices, minlength=m))
    targets = cum[-1] * np.arange(1, num_threads) / num_threads
    inner = np.searchsorted(cum, targets, side="right")
    return np.concatenate([[0], inner, [m]]).astype(np.int64)


# --------------------------------------------------------------------------
# privacy
# --------------------------------------------------------------------------


def sampled_gaussian_event(sampler, n, n_steps, noise_multiplier):
    """The event of ``n_steps`` sampled Gaussian steps, each ``GaussianEvent(sigma)``.

    Parameters
    ----------
    sampler : fastdp.sampling.Sampler
        The sampler that draws (or drew) the batches; its event states the
        adjacency (add/remove for Poisson, replace-one otherwise).
    n : int
        Number of examples (public).
    n_steps : int
    noise_multiplier : float
        sigma: noise std over the add/remove sensitivity of one step.

    Returns
    -------
    DpEvent
        ``sampler.event(n, n_steps, GaussianEvent(sigma))``, or
        ``NonPrivateEvent()`` when sigma = 0.
    """
    from fastdp.privacy import events

    if noise_multiplier == 0.0:
        return events.NonPrivateEvent()
    return sampler.event(n, n_steps, events.GaussianEvent(noise_multiplier))


# --------------------------------------------------------------------------
# kernel structure tokens
# --------------------------------------------------------------------------


class StructureTokenCache:
    """Mixin for objects holding a checked CSR ``self.X``: one structure token for its kernels.

    The token (:func:`fastdp._validation.structure_token`) lets a kernel skip
    its O(nnz) structure scan; it is made on first use, remade if ``self.X``
    is replaced, and left out of pickles and copies (valid in this process only).
    """

    def _structure(self):
        from fastdp._validation import structure_token

        token = self.__dict__.get("_token")
        if token is None or token.indices is not self.X.indices or token.indptr is not self.X.indptr:
            token = self._token = structure_token(self.X)
        return token

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_token", None)
        return state
