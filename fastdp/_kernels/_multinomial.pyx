# cython: language_level=3
# (boundscheck, wraparound, cdivision and initializedcheck come from setup.py, so that
# FASTDP_DEBUG_KERNELS=1 builds a bounds-checked debug version; a directive here would win)
"""Compiled multinomial (softmax) mini-batch (DP-)SGD over raw CSR arrays, with lazy noise.

The model is Theta (K x M), stored *feature-major* as ``w`` of shape (M, K)
(``w = Theta^T``, C-contiguous) so that the K weights of one column are
adjacent: a sparse row reads and writes K contiguous doubles per stored
entry.  One call of :func:`run_multinomial_sgd` runs any number of steps
without returning to Python.  Every step t is

    r_i       = softmax(Theta x_i) - e_{y_i}                (K-vector, per example)
    g_i       = r_i x_i^T,  ||g_i||_F = ||r_i||_2 ||x_i||_2
    G_t       = sum_{i in B_t} g_i min(1, C / ||g_i||_F)    (each K x M g_i clipped as ONE vector)
    Theta    <- rho * Theta - kappa * (G_t + Xi_t),          Xi_t ~ N(0, noise_std^2 I_{K x M})

with ``rho = 1 - eta lam``, ``kappa = eta / L`` and ``noise_std = sigma C``
chosen by the caller (the kernel takes no privacy decision).  The softmax
is computed stably (scores shifted by their maximum) and the label's
residual as ``-(sum_{k != y} p_k)`` (no cancellation in ``p_y - 1``).

Scale trick and lazy noise
--------------------------
Exactly as :mod:`fastdp._kernels._sgd`, one column of ``w`` (K numbers)
taking the place of one coordinate: ``Theta = a * w`` with the decay
``a <- rho a`` (folded into ``w`` below 1e-100 and at the end), and the
noise owed to a column c not read since step s is drawn when c is next read
at step t, as K independent normals times ``kappa noise_std sqrt(h(p))``,
``p = t - 1 - s``, ``h(p) = sum_{i<p} rho^(2i)``
(:func:`fastdp._kernels._sgd.pending_noise_scales`).  The K coordinates of
a column are always read together, so the argument of ``_sgd`` (a sum of
independent decayed Gaussians is one Gaussian, independent of everything
computed in between) applies coordinate by coordinate: lazy and eager runs
release the same distribution.

Order of the Gaussian draws (the numpy reference in the tests follows it)
--------------------------------------------------------------------------
For step t = 1..T of the call:

1. lazy mode: for each row of the batch (batch order) and each stored entry
   (storage order) with column c, at its first occurrence in the step: if
   ``p = (t - 1) - last[c] > 0``, K normals z_0..z_{K-1} and
   ``Theta[k, c] += kappa noise_std sqrt(h(p)) z_k``;
2. residuals, clipping, decay and the gradient step (no draws);
3. eager mode: for c = 0..M-1, for k = 0..K-1, ``Theta[k, c] += kappa noise_std z``.

At the end of a lazy call, for c = 0..M-1 with ``p = T - last[c] > 0``:
K normals as in 1.  No draws when noise_std is 0.

Determinism
-----------
The residuals of a batch's rows are independent (OpenMP ``prange`` when
``num_threads > 1`` and the batch has at least ``parallel_min_rows`` rows);
the scatter into ``w`` is split by columns, each column receiving its
updates in batch order; every draw happens in the sequential part.  Results
are bit-identical for any thread count and either path of the timing gate
(``_gate.pxd: ParallelGate``).

The step loop is the one of :mod:`fastdp._kernels._sgd`, written once in
``_minibatch.pxd`` (``run_steps``, with the softmax residual as the
per-example gradient); rows may be read through the estimators' row map
(``row_scale``, ``row_shrink``, ``tail_value``, ``tail_column``), the same
bits as the written-out mapped rows without the copy.
"""
from libc.math cimport INFINITY
from libc.stdint cimport int32_t, int64_t

from fastdp._kernels._csr cimport CsrView, index_t, mapped_view, real_t
from fastdp._kernels._checks cimport (
    check_csr, check_length, check_row_map, check_rows_read, raise_invalid,
)
from fastdp._kernels._gate cimport GATE_SLOTS, ParallelGate, gates_reset
from fastdp._kernels._glm cimport RowBatch, every_column
from fastdp._kernels._minibatch cimport (
    SoftmaxLoss, StepModel, run_step_kernel, scatter_residuals, softmax_residual,
)

import numpy as np

from fastdp._validation import _StructureToken

# Serial-or-parallel choice for batches (speed only), one per thread count.
cdef ParallelGate _gates[GATE_SLOTS]
gates_reset(_gates, GATE_SLOTS)


cdef inline SoftmaxLoss softmax_loss(Py_ssize_t K, double clip, const int64_t[::1] y,
                                     const double[::1] sq_norms) noexcept:
    """The :data:`SoftmaxLoss` of K classes, clip C, labels ``y`` and squared norms
    (None: computed from each row as the kernel reads it)."""
    cdef SoftmaxLoss s
    s.K = K
    s.clip = clip
    s.clipping = clip < INFINITY
    s.labels = &y[0] if y.shape[0] > 0 else NULL
    s.sq_norms = &sq_norms[0] if sq_norms is not None and sq_norms.shape[0] > 0 else NULL
    return s


def run_multinomial_sgd(const real_t[::1] data, const index_t[::1] indices,
                        const index_t[::1] indptr, const int64_t[::1] y,
                        const double[::1] sq_norms, double[:, ::1] w,
                        const int64_t[::1] batch_ptr, const int64_t[::1] batch_idx,
                        double[::1] residual_buffer, int32_t[::1] last_noised,
                        double clip, double rho, double kappa, double noise_std,
                        bint lazy_noise, object bit_generator, int num_threads,
                        Py_ssize_t parallel_min_rows, const int64_t[::1] column_splits=None, *,
                        check_structure=True, const double[::1] row_scale=None,
                        const double[::1] row_shrink=None, double tail_value=0.0,
                        int64_t tail_column=-1):
    """Run ``len(batch_ptr) - 1`` multinomial (DP-)SGD steps in place on ``w`` (= Theta^T).

    The safe way in is :mod:`fastdp.solvers.multinomial`, which validates X
    once and passes its structure token.  This function refuses every
    argument that could make it read or write out of bounds, or silently
    drop the noise or the clipping (see ``Raises``).

    Parameters
    ----------
    data, indices, indptr : CSR arrays of X (N x M), canonical (see ``_glm``).
    y : int64 class indices in ``[0, K)``, length N.
    sq_norms : float64 squared row norms, length N (for the clipping), or None
        None: each row's squared norm is summed in the kernel from the row as it
        reads it (the same squares in the same order, row map applied, as
        ``_scd.row_squared_norms``, hence the same bits), instead of a scan of X
        before the steps.
    w : float64 array of shape (M, K), C-contiguous
        ``Theta^T`` (column c of Theta is row c of w), updated in place.
    batch_ptr, batch_idx : the batches, batch t being
        ``batch_idx[batch_ptr[t]:batch_ptr[t + 1]]``.
    residual_buffer : float64 scratch of length >= K * (the largest batch).
    last_noised : int32 scratch of length M (lazy mode), overwritten.
    clip : C > 0 (``inf``: no clipping), bound on the Frobenius norm of each
        per-example gradient.
    noise_std : std of the Gaussian added to each coordinate of the clipped
        gradient sum (sigma C).
    rho, kappa, lazy_noise, bit_generator, num_threads, parallel_min_rows, column_splits
        As :func:`fastdp._kernels._sgd.run_sgd` (the threads compute residuals
        instead of margins; M = ``w.shape[0]``).
    check_structure : True or a structure token, default=True
        As :func:`fastdp._kernels._sgd.run_sgd`: unless this is
        ``fastdp._validation.structure_token(X)`` for these arrays, one pass
        checks the CSR structure (every column index < M).
    row_scale, row_shrink, tail_value, tail_column : optional row map
        Read the rows of X through a row map instead of as stored, exactly as
        :func:`fastdp._kernels._sgd.run_sgd` does (``_csr.pxd: csr_set_row_map``):
        the same bits as a run on the materialised rows
        (``fastdp._mapped_rows.MappedRows.tocsr``), without the copy; ``sq_norms``
        (when given) are then the mapped rows'.

    Returns
    -------
    n_draws : int
        The draws taken from ``bit_generator`` (standard normals).

    Raises
    ------
    ValidationError
        What :func:`fastdp._kernels._sgd.run_sgd` checks (with residual_buffer:
        >= K times the largest batch; the structure: every column index < M),
        and ``K >= 2`` and every label in ``[0, K)`` (O(N)) instead of the loss
        code.
    """

    cdef str caller = "run_multinomial_sgd"
    cdef Py_ssize_t K = w.shape[1]
    cdef int64_t stored_columns = check_row_map(
        caller, row_scale.shape[0] if row_scale is not None else -1,
        row_shrink.shape[0] if row_shrink is not None else -1, tail_column,
        indptr.shape[0] - 1, w.shape[0])
    check_csr(caller, data.shape[0], indices, indptr)
    _check_classes(caller, y, K, indptr.shape[0] - 1)
    cdef StepModel model                            # the classes, the clip, labels and norms
    model.K = K
    model.softmax = softmax_loss(K, clip, y, sq_norms)
    return run_step_kernel(caller, &model, data, indices, indptr, y.shape[0], sq_norms,
                           &w[0, 0] if w.shape[0] > 0 else NULL, w.shape[0], batch_ptr,
                           batch_idx, residual_buffer, last_noised, clip, rho, kappa, noise_std,
                           lazy_noise, bit_generator, num_threads, parallel_min_rows,
                           column_splits, "w.shape[0]", check_structure, _StructureToken,
                           row_scale, row_shrink, tail_value, tail_column, stored_columns,
                           _gates)


def clipped_gradient_sum(const real_t[::1] data, const index_t[::1] indices,
                         const index_t[::1] indptr, const int64_t[::1] y,
                         const double[::1] sq_norms, const int64_t[::1] rows,
                         const double[:, ::1] w, double clip, double[:, ::1] out, *,
                         check_structure=True, const double[::1] row_scale=None,
                         const double[::1] row_shrink=None, double tail_value=0.0,
                         int64_t tail_column=-1):
    """``out += sum_{i in rows} g_i min(1, C / ||g_i||_F)`` (Theta^T layout); returns None.

    ``g_i = (softmax(Theta x_i) - e_{y_i}) x_i^T`` is the K x M gradient of
    example i, clipped as ONE vector, exactly as one step of
    :func:`run_multinomial_sgd` computes it (the same ``softmax_residual``, at scale
    ``a = 1``), and ``out`` receives its transpose (feature-major, like ``w``),
    the rows added in the order given.  The data-parallel workers return this
    sum for the rows of their shards (``fastdp.distributed.data_parallel``).

    Parameters
    ----------
    data, indices, indptr : CSR arrays of X (N x M).
    y : int64 class indices in ``[0, K)``, length N (those of ``rows`` are checked).
    sq_norms : float64 squared row norms, length N (read only when clipping).
    rows : int64 row numbers (a row listed twice contributes twice).
    w : float64 (M, K), C-contiguous: ``Theta^T``.
    clip : C > 0 (``inf``: no clipping).
    out : float64 (M, K), C-contiguous accumulator (added to, not reset).
    check_structure : True or a structure token, default=True
        As :func:`run_multinomial_sgd` (only the rows read are scanned).
    row_scale, row_shrink, tail_value, tail_column : optional row map
        As :func:`run_multinomial_sgd`.

    Raises
    ------
    ValidationError
        The CSR arrays, the row numbers, ``y`` (length; labels of ``rows``
        in ``[0, K)``), ``sq_norms`` (when clipping), the shapes of ``w`` and
        ``out`` (equal, K >= 2), ``clip > 0``.
    """
    cdef str caller = "multinomial clipped_gradient_sum"
    cdef Py_ssize_t count = rows.shape[0]
    cdef Py_ssize_t m = w.shape[0]
    cdef Py_ssize_t K = w.shape[1]
    cdef Py_ssize_t q
    cdef int64_t bad = -1
    cdef int64_t stored_columns = check_row_map(
        caller, row_scale.shape[0] if row_scale is not None else -1,
        row_shrink.shape[0] if row_shrink is not None else -1, tail_column,
        indptr.shape[0] - 1, m)
    check_csr(caller, data.shape[0], indices, indptr)
    if K < 2 or out.shape[0] != m or out.shape[1] != K:
        raise_invalid(f"{caller}: w has shape ({m}, {K}) and out ({out.shape[0]}, "
                      f"{out.shape[1]}); both need (n_features, n_classes), n_classes >= 2.")
    if not clip > 0.0:
        raise_invalid(f"{caller}: clip must be > 0 (inf for none); got {clip}.")
    check_length(caller, "y", y.shape[0], indptr.shape[0] - 1, "one class index per row of X")
    if clip < INFINITY:
        if sq_norms is None:
            raise_invalid(f"{caller}: sq_norms is None; clipping needs one squared norm per "
                          f"row of X.")
        check_length(caller, "sq_norms", sq_norms.shape[0], indptr.shape[0] - 1,
                     "one squared norm per row of X")
    check_rows_read(caller, check_structure, _StructureToken, indices, indptr, rows,
                    stored_columns, "w")
    if count == 0:
        return
    with nogil:
        for q in range(count):
            if y[rows[q]] < 0 or y[rows[q]] >= K or (clip < INFINITY
                                                     and not sq_norms[rows[q]] >= 0.0):
                bad = rows[q]
                break
    if bad >= 0:
        raise_invalid(f"{caller}: row {bad} has class index {y[bad]} (needs [0, {K})) or a "
                      f"squared norm that is negative or NaN.")
    residual_arr = np.empty(count * K, dtype=np.float64)
    cdef double[::1] residuals = residual_arr
    cdef CsrView[real_t, index_t] X = mapped_view(data, indices, indptr, row_scale, row_shrink,
                                                  tail_value, tail_column)
    cdef SoftmaxLoss s = softmax_loss(K, clip, y, sq_norms)
    cdef RowBatch batch
    batch.rows = &rows[0]
    batch.count = count
    with nogil:
        for q in range(count):
            softmax_residual(&s, &X, rows[q], &w[0, 0] if m > 0 else NULL, 1.0,
                             &residuals[q * K])
        scatter_residuals(&X, batch, &residuals[0], K, 1.0, &out[0, 0] if m > 0 else NULL,
                          every_column())


cdef int _check_classes(str caller, const int64_t[::1] y, int64_t K, int64_t n_rows) except -1:
    """``K >= 2`` classes, one class index per row, every one in ``[0, K)`` (O(N))."""
    cdef Py_ssize_t i                   # row
    cdef int64_t bad = -1               # first row with a label outside [0, K)
    if K < 2:
        raise_invalid(f"{caller}: w has {K} column(s); it needs one per class, K >= 2 "
                      f"(shape (n_features, n_classes)).")
    check_length(caller, "y", y.shape[0], n_rows, "one class index per row of X")
    with nogil:
        for i in range(n_rows):
            if y[i] < 0 or y[i] >= K:
                bad = i
                break
    if bad >= 0:
        raise_invalid(f"{caller}: y[{bad}] = {y[bad]} is not a class index in [0, {K}) "
                      f"(K = w.shape[1]).")
    return 0
