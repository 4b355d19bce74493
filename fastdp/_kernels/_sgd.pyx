# cython: language_level=3
# (boundscheck, wraparound, cdivision and initializedcheck come from setup.py, so that
# FASTDP_DEBUG_KERNELS=1 builds a bounds-checked debug version; a directive here would win)
"""Compiled mini-batch (DP-)SGD over raw CSR arrays, with exact lazy Gaussian noise.

One call of :func:`run_sgd` runs any number of steps (an epoch or more)
without returning to Python.  Every step t (spec 000, section 2.6) is

    G_t       = sum_{i in B_t} clip(loss'(x_i^T theta, y_i) x_i, C)
    theta    <- rho * theta - kappa * (G_t + xi_t),     xi_t ~ N(0, noise_std^2 I)

with ``rho = 1 - eta lam`` (the paper's regulariser) or ``1 - eta lam / L``
(the reference code's), ``kappa = eta / L`` and ``noise_std = sigma C``.  The
kernel takes no privacy decision: the caller chooses rho, kappa, C, the noise
std and the batches.

The weight-decay scale trick
----------------------------
theta is kept as ``a * w`` with a scalar ``a``: the decay is ``a <- rho a``
and the gradient step touches only the columns of the batch rows,
``w[c] -= kappa (G_t)_c / a``.  On entry ``a = 1`` and ``w = theta``; before
returning, ``w`` is multiplied by ``a`` (so ``w`` holds theta again).  When
``a`` falls below 1e-100 it is folded into ``w`` the same way (O(M), no draws).

Exact lazy noise
----------------
In eager mode every step adds ``kappa xi_t / a_t`` to all M coordinates of w.
A step reads w only at the columns of its batch rows.  The noise of the
steps ``s+1, ..., t-1`` owed to a coordinate c that nothing read since step s
is, in theta units at time t-1, ``kappa sum_j rho^(t-1-j) xi_{j,c}``: a sum of
independent Gaussians independent of everything computed in between, hence
distributed as ONE Gaussian with variance
``(kappa noise_std)^2 h(p)``, ``p = t-1-s``, ``h(p) = sum_{i<p} rho^(2i) =
(1 - rho^(2p)) / (1 - rho^2)`` (``h(p) = p`` when rho = 1), a closed-form
geometric sum.  Lazy mode draws exactly that sum (divided by the current
``a`` to get w units) when c is next read, and flushes every coordinate
before returning.  By induction over the steps the joint distribution of the
batches, every value of theta read, every gradient and the flushed output is
the same as in eager mode, for every dataset, so the released output (theta
after the call) has the same distribution and the same (epsilon, delta).
The un-flushed w exists only inside this ``nogil`` call.  Draws per call:
O(nnz of the batches + M) instead of O(T M).

Order of the Gaussian draws (the numpy reference in the tests follows it)
--------------------------------------------------------------------------
For step t = 1..T of the call:

1. lazy mode: for each row of the batch (batch order) and each stored entry
   (storage order) with column c, at its first occurrence in the step: if
   ``p = (t - 1) - last[c] > 0``, ``theta[c] += kappa noise_std sqrt(h(p)) z``;
2. margins from theta, clipped coefficients, decay and gradient step (no draws);
3. eager mode: for c = 0..M-1, ``theta[c] += kappa noise_std z``.

At the end of a lazy call, for c = 0..M-1 with ``p = T - last[c] > 0``:
``theta[c] += kappa noise_std sqrt(h(p)) z``.  No draws when noise_std is 0.

Determinism
-----------
The margins and clipped coefficients of a batch are independent (OpenMP
``prange`` when ``num_threads > 1`` and the batch has at least
``parallel_min_rows`` rows); the scatter into w is split by columns, each
column receiving its updates in batch order; every draw happens in the
sequential part.  Results are bit-identical for any thread count.  Each
eligible batch takes the parallel or the serial path as a timing gate decides
(``_gate.pxd: ParallelGate``: the faster path so far, the other re-tried at
doubling intervals), which keeps a busy machine from making threads slower
than one; the bits never depend on the path.

The step loop itself is ``_minibatch.pxd: run_steps``, shared with the
multinomial kernel (:mod:`fastdp._kernels._multinomial`).
"""
from libc.math cimport INFINITY
from libc.stdint cimport int32_t, int64_t

from fastdp._kernels._csr cimport index_t, real_t
from fastdp._kernels._checks cimport check_loss_code, check_row_map
from fastdp._kernels._gate cimport GATE_SLOTS, ParallelGate, gate_slot, gate_state, gates_reset
from fastdp._kernels._minibatch cimport StepModel, pending_noise_scale_array, run_step_kernel

from fastdp._validation import _StructureToken

# Serial-or-parallel choice for batches (speed only; see ``_gate.pxd: ParallelGate``),
# one per thread count.  Copied into each call and written back at its end
# (concurrent calls may lose an update: harmless).
cdef ParallelGate _gates[GATE_SLOTS]
gates_reset(_gates, GATE_SLOTS)


def pending_noise_scales(double rho, Py_ssize_t n_steps):
    """``sqrt(h(p))`` for p = 0..n_steps, ``h(p) = sum_{i<p} rho^(2i)`` (closed form).

    Computed as ``expm1(2 p log rho) / expm1(2 log rho)``, which is accurate
    for rho close to 1; ``h(p) = p`` for rho = 1.  Raises ``ValidationError``
    unless ``0 < rho <= 1`` and ``n_steps >= 0``.
    """
    return pending_noise_scale_array(rho, n_steps)


def run_sgd(const real_t[::1] data, const index_t[::1] indices, const index_t[::1] indptr,
            const double[::1] y, const double[::1] sq_norms, double[::1] w,
            const int64_t[::1] batch_ptr, const int64_t[::1] batch_idx,
            double[::1] coef_buffer, int32_t[::1] last_noised,
            int loss, double clip, double rho, double kappa, double noise_std,
            bint lazy_noise, object bit_generator, int num_threads,
            Py_ssize_t parallel_min_rows, const int64_t[::1] column_splits=None, *,
            check_structure=True, const double[::1] row_scale=None,
            const double[::1] row_shrink=None, double tail_value=0.0,
            int64_t tail_column=-1):
    """Run ``len(batch_ptr) - 1`` (DP-)SGD steps in place on ``w`` (= theta on entry and exit).

    The safe way in is ``fastdp.solvers.sgd`` (``dpsgd``, ``sgd``), which
    validates X once and passes its structure token.  This function refuses
    every argument that could make it read or write out of bounds, or
    silently drop the noise or the clipping (see ``Raises``).

    Parameters
    ----------
    data, indices, indptr : CSR arrays of X (N x M), canonical (see ``_glm``).
    y : float64 labels, length N.
    sq_norms : float64 squared row norms, length N (for the clipping), or None
        None: each row's squared norm is summed in the kernel alongside its
        margin, from the values it reads (the same squares in the same order,
        row map applied, as ``_scd.row_squared_norms``, hence the same bits),
        instead of a scan of X before the steps; a NaN value read gives the row
        an infinite norm (its clipped gradient is 0), never a NaN one.
    w : float64 model of length M, updated in place.
    batch_ptr, batch_idx : the batches, batch t being
        ``batch_idx[batch_ptr[t]:batch_ptr[t + 1]]``.
    coef_buffer : float64 scratch of length >= the largest batch.
    last_noised : int32 scratch of length M (lazy mode), overwritten.
    loss : a member of ``fastdp._kernels._losses.LossCode`` (``_glm.LOSS_SQUARED``,
        ``LOSS_LOGISTIC`` or ``LOSS_HINGE``).
    clip : C > 0 (``inf``: no clipping).
    rho : decay factor in (0, 1].
    kappa : step factor eta / L > 0.
    noise_std : std of the Gaussian added to the clipped gradient sum (sigma C).
    lazy_noise : draw the noise lazily (see the module docstring).
    bit_generator : numpy ``BitGenerator`` (its lock held by the caller);
        ignored when ``noise_std == 0``.
    num_threads : OpenMP threads for the margins and the scatter.
    parallel_min_rows : smallest batch processed in parallel.
    column_splits : int64, length ``num_threads + 1`` from 0 to M, optional
        Column ranges of the threads in the scatter (default: equal ranges).
    check_structure : True or a structure token, default=True
        The CSR structure of X is checked (one sequential pass over
        ``indices``: row pointers non-decreasing, column indices strictly
        increasing within ``[0, len(w))``) unless this is
        ``fastdp._validation.structure_token(X)`` for these arrays (O(1) for
        ``check_X`` output); ``False`` checks too.
    row_scale, row_shrink, tail_value, tail_column : optional row map
        Read the rows of X through a row map instead of as stored (see
        ``_csr.pxd: csr_set_row_map``): float64 factors, one per row, and an
        entry ``tail_value`` appended to every row at column ``tail_column``
        (-1: none; the stored columns must lie below it).  ``sq_norms`` (when
        given) are then the mapped rows' (``fastdp._mapped_rows.MappedRows``).

    Returns
    -------
    n_draws : int
        Standard normal draws taken from ``bit_generator``.

    Raises
    ------
    ValidationError
        Always checked: the CSR arrays (``indptr[0] == 0``, ``indptr[-1] ==
        len(indices) <= len(data)``), the lengths of y and (when clipping
        and given) sq_norms (N; when clipping also every entry >= 0 and not NaN, which
        would turn the clipping off), last_noised (>= M in lazy noisy mode), coef_buffer
        (>= the largest batch), the batches (``batch_ptr`` non-decreasing
        within ``[0, len(batch_idx)]``, every row number read in ``[0, N)``),
        the loss code, ``0 < rho <= 1``, ``kappa > 0``, ``clip > 0``,
        ``noise_std >= 0`` (not NaN), ``num_threads <= 1024``, the bit
        generator; and, unless ``check_structure`` is a token for these
        arrays, the CSR structure.
    """

    cdef str caller = "run_sgd"
    cdef int64_t stored_columns = check_row_map(
        caller, row_scale.shape[0] if row_scale is not None else -1,
        row_shrink.shape[0] if row_shrink is not None else -1, tail_column,
        indptr.shape[0] - 1, w.shape[0])
    check_loss_code(caller, loss)
    cdef StepModel model                            # the loss, the clip, labels and norms
    model.K = 1
    model.glm.loss = loss
    model.glm.clip = clip
    model.glm.clipping = clip < INFINITY
    model.glm.y = &y[0] if y.shape[0] > 0 else NULL
    model.glm.sq_norms = (&sq_norms[0] if sq_norms is not None and sq_norms.shape[0] > 0
                          else NULL)        # NULL: computed from each row as it is read
    return run_step_kernel(caller, &model, data, indices, indptr, y.shape[0], sq_norms,
                           &w[0] if w.shape[0] > 0 else NULL, w.shape[0], batch_ptr, batch_idx,
                           coef_buffer, last_noised, clip, rho, kappa, noise_std, lazy_noise,
                           bit_generator, num_threads, parallel_min_rows, column_splits,
                           "len(w)", check_structure, _StructureToken, row_scale, row_shrink,
                           tail_value, tail_column, stored_columns, _gates)


def _parallel_gate_state(int num_threads):
    """The serial/parallel gate of :func:`run_sgd` for a thread count (diagnostics)."""
    return gate_state(&_gates[gate_slot(num_threads)])
