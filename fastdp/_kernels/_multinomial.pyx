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
(``_glm.pxd: ParallelGate``).
"""
from cython.parallel cimport prange
from libc.math cimport INFINITY, exp, sqrt
from libc.stdint cimport int32_t, int64_t
from numpy.random cimport bitgen_t
from numpy.random.c_distributions cimport random_standard_normal, random_standard_normal_fill

from fastdp._kernels._csr cimport (
    CsrRow, CsrView, FASTDP_PREFETCH, csr_row, csr_view, index_t, prefetch_row, real_t,
)
from fastdp._kernels._glm cimport (
    GATE_SLOTS, ColumnRange, LazyNoise, ParallelGate, RowBatch, bit_generator_of,
    check_all_rows, check_batches, check_csr, check_length, check_min_length, check_sq_norms,
    check_rows, check_threads, collect_pending, column_splits_of, every_column, gate_begin,
    gate_end,
    gate_slot, gates_reset, lazy_noise_scratch, raise_invalid, row_span, structure_proven,
    thread_columns,
)

import numpy as np

from fastdp._validation import _StructureToken

from fastdp._kernels._sgd import pending_noise_scales

# Serial-or-parallel choice for batches (speed only), one per thread count.
cdef ParallelGate _gates[GATE_SLOTS]
gates_reset(_gates, GATE_SLOTS)

cdef double _FOLD_BELOW = 1e-100


ctypedef struct SoftmaxLoss:
    # What the clipped residual of an example needs.
    Py_ssize_t K              # number of classes
    double clip               # C, the bound on each example's gradient (Frobenius norm)
    bint clipping             # clip < inf
    const int64_t* labels     # class index of each row
    const double* sq_norms    # squared row norms (read only when clipping)


cdef inline void _scale(double* w, Py_ssize_t size, double a) noexcept nogil:
    """w *= a (folds the scale of Theta = a w into w)."""
    cdef Py_ssize_t i
    for i in range(size):
        w[i] = w[i] * a


cdef inline void _residual(const SoftmaxLoss* s, const CsrView[real_t, index_t]* X, int64_t j,
                           const double* w, double a, double* r) noexcept nogil:
    """Clipped residual r (K) of row j: ``g_j = r x_j^T`` clipped to Frobenius norm C.

    ``r = softmax(a W^T x_j) - e_label``, then ``r *= min(1, C / (||r|| ||x_j||))``
    (``||x_j||^2`` from ``sq_norms``); a product, so a zero row gives no division by 0.
    """
    cdef CsrRow[real_t, index_t] row = csr_row(X, j)
    cdef Py_ssize_t K = s.K
    cdef int64_t label = s.labels[j]
    cdef index_t p                      # position within the row
    cdef Py_ssize_t c, base             # class, offset of the row's column in w
    cdef double x                       # a stored value
    cdef double top                     # largest score
    cdef double total                   # sum of the exponentials
    cdef double rest                    # their sum over the classes other than the label
    cdef double norm2                   # ||r||^2
    cdef double g                       # ||g_j|| = ||r|| ||x_j||, then the clip factor
    for c in range(K):
        r[c] = 0.0
    for p in range(row.nnz):
        x = <double>row.values[p]
        base = <Py_ssize_t>row.columns[p] * K
        for c in range(K):
            r[c] = r[c] + x * w[base + c]
    top = r[0]
    for c in range(1, K):
        if r[c] > top:
            top = r[c]
    total = 0.0
    for c in range(K):
        r[c] = exp(a * (r[c] - top))          # a > 0: the shift keeps every exponent <= 0
        total = total + r[c]
    r[label] = 0.0
    rest = 0.0
    for c in range(K):
        rest = rest + r[c]                    # sum over k != label, without cancellation
    norm2 = 0.0
    for c in range(K):
        r[c] = r[c] / total
        norm2 = norm2 + r[c] * r[c]
    r[label] = -rest / total
    norm2 = norm2 + r[label] * r[label]
    if s.clipping:
        g = sqrt(norm2 * s.sq_norms[j])
        if g > s.clip:
            g = s.clip / g
            for c in range(K):
                r[c] = r[c] * g


cdef inline void _scatter(const CsrView[real_t, index_t]* X, RowBatch batch, const double* R,
                          Py_ssize_t K, double scale, double* w,
                          ColumnRange columns) noexcept nogil:
    """``w[c, :] += scale * x_{rows[q], c} * R[q, :]`` for q = 0..count-1 (in this order),
    for the columns c of ``columns``.

    Each column receives its updates in the same order whichever range it
    falls in, so splitting the columns among threads changes no bit.
    """
    cdef int64_t q, j                   # position in the batch, row number
    cdef index_t k, k0, k1              # storage positions of the row's entries in range
    cdef Py_ssize_t c, base             # class, offset of column indices[k] in w
    cdef double z                       # scale * x
    cdef const double* rq               # the residual of row q
    for q in range(batch.count):
        j = batch.rows[q]
        rq = &R[q * K]
        row_span(X, j, columns, &k0, &k1)
        for k in range(k0, k1):
            z = scale * <double>X.data[k]
            base = <Py_ssize_t>X.indices[k] * K
            for c in range(K):
                w[base + c] = w[base + c] + z * rq[c]


cdef inline void _add_column_noise(bitgen_t* rng, double* wcol, Py_ssize_t K, double scale,
                                   double* normals) noexcept nogil:
    """``wcol[k] += scale * z_k`` for K fresh standard normals (drawn in order k = 0..K-1)."""
    cdef Py_ssize_t c
    random_standard_normal_fill(rng, K, normals)
    for c in range(K):
        wcol[c] = wcol[c] + scale * normals[c]


def run_multinomial_sgd(const real_t[::1] data, const index_t[::1] indices,
                        const index_t[::1] indptr, const int64_t[::1] y,
                        const double[::1] sq_norms, double[:, ::1] w,
                        const int64_t[::1] batch_ptr, const int64_t[::1] batch_idx,
                        double[::1] residual_buffer, int32_t[::1] last_noised,
                        double clip, double rho, double kappa, double noise_std,
                        bint lazy_noise, object bit_generator, int num_threads,
                        Py_ssize_t parallel_min_rows, const int64_t[::1] column_splits=None, *,
                        check_structure=True):
    """Run ``len(batch_ptr) - 1`` multinomial (DP-)SGD steps in place on ``w`` (= Theta^T).

    The safe way in is :mod:`fastdp.solvers.multinomial`, which validates X
    once and passes its structure token.  This function refuses every
    argument that could make it read or write out of bounds, or silently
    drop the noise or the clipping (see ``Raises``).

    Parameters
    ----------
    data, indices, indptr : CSR arrays of X (N x M), canonical (see ``_glm``).
    y : int64 class indices in ``[0, K)``, length N.
    sq_norms : float64 squared row norms, length N (for the clipping).
    w : float64 array of shape (M, K), C-contiguous
        ``Theta^T`` (column c of Theta is row c of w), updated in place.
    batch_ptr, batch_idx : the batches, batch t being
        ``batch_idx[batch_ptr[t]:batch_ptr[t + 1]]``.
    residual_buffer : float64 scratch of length >= K * (the largest batch).
    last_noised : int32 scratch of length M (lazy mode), overwritten.
    clip : C > 0 (``inf``: no clipping), bound on the Frobenius norm of each
        per-example gradient.
    rho : decay factor in (0, 1].
    kappa : step factor eta / L > 0.
    noise_std : std of the Gaussian added to each coordinate of the clipped
        gradient sum (sigma C).
    lazy_noise : draw the noise lazily (see the module docstring).
    bit_generator : numpy ``BitGenerator`` (its lock held by the caller);
        ignored when ``noise_std == 0``.
    num_threads : OpenMP threads for the residuals and the scatter.
    parallel_min_rows : smallest batch processed in parallel.
    column_splits : int64, length ``num_threads + 1`` from 0 to M, optional
        Column ranges of the threads in the scatter (default: equal ranges).
    check_structure : True or a structure token, default=True
        The CSR structure of X is checked (one sequential pass over
        ``indices``: row pointers non-decreasing, column indices strictly
        increasing within ``[0, M)``, M = ``w.shape[0]``) unless this is
        ``fastdp._validation.structure_token(X)`` for these arrays (O(1) for
        ``check_X`` output); ``False`` checks too.

    Returns
    -------
    n_draws : int
        Standard normal draws taken from ``bit_generator``.

    Raises
    ------
    ValidationError
        Always checked: the CSR arrays, the lengths of y and (when clipping)
        sq_norms (N; when clipping also every entry >= 0 and not NaN, which
        would turn the clipping off), every label in ``[0, K)`` (O(N)),
        ``K >= 2``, last_noised (>= M in lazy noisy mode), residual_buffer
        (>= K times the largest batch), the batches, ``0 < rho <= 1``,
        ``kappa > 0``, ``clip > 0``, ``noise_std >= 0`` (not NaN),
        ``num_threads <= 1024``, column_splits, the bit generator; and, unless
        ``check_structure`` is a token for these arrays, the CSR structure
        (every column index < M).
    """

    cdef Py_ssize_t n_steps = batch_ptr.shape[0] - 1
    cdef Py_ssize_t m = w.shape[0]
    cdef Py_ssize_t K = w.shape[1]
    cdef int nt = num_threads if num_threads > 0 else 1
    cdef bint noisy = noise_std > 0.0
    cdef bint lazy = lazy_noise and noisy           # noise drawn lazily
    cdef bitgen_t* rng = NULL
    cdef int64_t n_draws = 0
    cdef int64_t t, c, i                            # step, column, position in the owing list
    cdef int64_t n_owing                            # columns of a batch that owe noise
    cdef Py_ssize_t q                               # position in the batch
    cdef int tid                                    # OpenMP thread
    cdef int32_t owed                               # steps of noise a column owes
    cdef double a = 1.0                             # Theta = a w
    cdef double step_std = kappa * noise_std        # std of one step's noise, in Theta units
    cdef RowBatch batch                             # the rows of step t
    cdef ParallelGate gate = _gates[gate_slot(num_threads)]
    cdef bint eligible                              # the batch may take the parallel path
    cdef int path                                   # 1: parallel, 0: serial

    _check_arguments(data, indices, indptr, y, sq_norms, w, batch_ptr, batch_idx,
                     residual_buffer, last_noised, clip, rho, kappa, noise_std, lazy,
                     num_threads, check_structure)
    if n_steps <= 0:
        return 0
    if n_steps >= 2**31 - 1:
        raise_invalid("run_multinomial_sgd: at most 2**31 - 2 steps per call; split the batches "
                      "over several calls.")
    # noise_scale[p]: std (Theta units) of the noise of p pending steps
    scale_arr = step_std * pending_noise_scales(rho, n_steps)
    cdef const double[::1] noise_scale = scale_arr
    splits_arr = column_splits_of("run_multinomial_sgd", column_splits, nt, m, "w.shape[0]")
    cdef const int64_t[::1] splits = splits_arr     # the threads' column ranges
    scratch = []
    cdef LazyNoise pending = lazy_noise_scratch(last_noised, m if lazy else 0, K, scratch)
    if noisy:
        rng = bit_generator_of("run_multinomial_sgd", bit_generator)
    cdef CsrView[real_t, index_t] X = csr_view(data, indices, indptr)
    cdef SoftmaxLoss s
    s.K = K
    s.clip = clip
    s.clipping = clip < INFINITY
    s.labels = &y[0] if y.shape[0] > 0 else NULL
    s.sq_norms = &sq_norms[0] if sq_norms.shape[0] > 0 else NULL
    cdef double* w_ = &w[0, 0] if m > 0 else NULL   # Theta^T, row c = column c of Theta
    cdef const int64_t* rows = &batch_idx[0] if batch_idx.shape[0] > 0 else NULL
    cdef double* residuals = &residual_buffer[0] if residual_buffer.shape[0] > 0 else NULL

    with nogil:
        if lazy:
            for c in range(m):
                pending.last[c] = 0
        for t in range(1, n_steps + 1):
            batch.rows = rows + batch_ptr[t - 1]
            batch.count = batch_ptr[t] - batch_ptr[t - 1]
            # 1. lazy noise: bring every column the batch reads up to step t-1
            if lazy and batch.count > 0:
                n_owing = collect_pending(&X, batch, <int32_t>(t - 1), &pending)
                for i in range(n_owing):
                    if i + 8 < n_owing:
                        FASTDP_PREFETCH(&w_[pending.columns[i + 8] * K])
                    _add_column_noise(rng, &w_[pending.columns[i] * K], K,
                                      noise_scale[pending.owed[i]] / a, pending.normals)
                n_draws += n_owing * K
            # 2. clipped residuals from the same Theta = a w
            eligible = nt > 1 and batch.count >= parallel_min_rows
            path = gate_begin(&gate, eligible)
            if path == 1:
                for q in prange(batch.count, num_threads=nt, schedule="static"):
                    _residual(&s, &X, batch.rows[q], w_, a, &residuals[q * K])
            else:
                for q in range(batch.count):
                    if q + 4 < batch.count:
                        prefetch_row(&X, batch.rows[q + 4])
                    _residual(&s, &X, batch.rows[q], w_, a, &residuals[q * K])
            # 3. decay, then the sparse gradient step in w units
            a = a * rho
            if batch.count > 0:
                if path == 1:
                    for tid in prange(nt, num_threads=nt, schedule="static"):
                        _scatter(&X, batch, residuals, K, -kappa / a, w_,
                                 thread_columns(&splits[0], tid))
                else:
                    _scatter(&X, batch, residuals, K, -kappa / a, w_, every_column())
            gate_end(&gate, eligible, path, batch.count)
            # 4. eager noise on every coordinate
            if noisy and not lazy:
                for i in range(m * K):
                    w_[i] = w_[i] + (step_std / a) * random_standard_normal(rng)
                n_draws += m * K
            if a < _FOLD_BELOW:
                _scale(w_, m * K, a)
                a = 1.0
        # final flush: nothing leaves this call with pending noise
        if lazy:
            for c in range(m):
                owed = <int32_t>n_steps - pending.last[c]
                if owed > 0:
                    _add_column_noise(rng, &w_[c * K], K, noise_scale[owed] / a, pending.normals)
                    n_draws += K
                    pending.last[c] = <int32_t>n_steps
        if a != 1.0:
            _scale(w_, m * K, a)
    _gates[gate_slot(num_threads)] = gate
    return n_draws


def clipped_gradient_sum(const real_t[::1] data, const index_t[::1] indices,
                         const index_t[::1] indptr, const int64_t[::1] y,
                         const double[::1] sq_norms, const int64_t[::1] rows,
                         const double[:, ::1] w, double clip, double[:, ::1] out, *,
                         check_structure=True):
    """``out += sum_{i in rows} g_i min(1, C / ||g_i||_F)`` (Theta^T layout); returns None.

    ``g_i = (softmax(Theta x_i) - e_{y_i}) x_i^T`` is the K x M gradient of
    example i, clipped as ONE vector, exactly as one step of
    :func:`run_multinomial_sgd` computes it (the same ``_residual``, at scale
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
    cdef bint proven
    check_csr(caller, data.shape[0], indices, indptr)
    if K < 2 or out.shape[0] != m or out.shape[1] != K:
        raise_invalid(f"{caller}: w has shape ({m}, {K}) and out ({out.shape[0]}, "
                      f"{out.shape[1]}); both need (n_features, n_classes), n_classes >= 2.")
    if not clip > 0.0:
        raise_invalid(f"{caller}: clip must be > 0 (inf for none); got {clip}.")
    check_length(caller, "y", y.shape[0], indptr.shape[0] - 1, "one class index per row of X")
    if clip < INFINITY:
        check_length(caller, "sq_norms", sq_norms.shape[0], indptr.shape[0] - 1,
                     "one squared norm per row of X")
    proven = structure_proven(caller, check_structure, _StructureToken, indices, indptr, m)
    check_rows(caller, "rows", indices, indptr, &rows[0] if count > 0 else NULL, count,
               not proven, m, "w")
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
    cdef CsrView[real_t, index_t] X = csr_view(data, indices, indptr)
    cdef SoftmaxLoss s
    s.K = K
    s.clip = clip
    s.clipping = clip < INFINITY
    s.labels = &y[0]
    s.sq_norms = &sq_norms[0] if sq_norms.shape[0] > 0 else NULL
    cdef RowBatch batch
    batch.rows = &rows[0]
    batch.count = count
    with nogil:
        for q in range(count):
            _residual(&s, &X, rows[q], &w[0, 0] if m > 0 else NULL, 1.0, &residuals[q * K])
        _scatter(&X, batch, &residuals[0], K, 1.0, &out[0, 0] if m > 0 else NULL,
                 every_column())


cdef int _check_arguments(const real_t[::1] data, const index_t[::1] indices,
                          const index_t[::1] indptr, const int64_t[::1] y,
                          const double[::1] sq_norms, double[:, ::1] w,
                          const int64_t[::1] batch_ptr, const int64_t[::1] batch_idx,
                          double[::1] residual_buffer, int32_t[::1] last_noised, double clip,
                          double rho, double kappa, double noise_std, bint lazy,
                          int num_threads, object check_structure) except -1:
    """Every check of :func:`run_multinomial_sgd` (see its ``Raises``)."""
    cdef str caller = "run_multinomial_sgd"
    cdef int64_t n_rows, largest, K = w.shape[1]
    cdef Py_ssize_t i                   # row
    cdef int64_t bad = -1               # first row with a label outside [0, K)
    check_csr(caller, data.shape[0], indices, indptr)
    n_rows = indptr.shape[0] - 1
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
    if clip < INFINITY:
        check_length(caller, "sq_norms", sq_norms.shape[0], n_rows,
                     "one squared norm per row of X")
        check_sq_norms(caller, sq_norms)
    if lazy:
        check_min_length(caller, "last_noised", last_noised.shape[0], w.shape[0],
                         "one per feature (row of w), in lazy noisy mode")
    largest = check_batches(caller, batch_ptr, batch_idx, n_rows)
    check_min_length(caller, "residual_buffer", residual_buffer.shape[0], largest * K,
                     "K per row of the largest batch")
    if not (0.0 < rho <= 1.0) or not kappa > 0.0 or not clip > 0.0 or not noise_std >= 0.0:
        raise_invalid(f"{caller}: need 0 < rho <= 1, kappa > 0, clip > 0 (inf for none) and "
                      f"noise_std >= 0; got rho={rho}, kappa={kappa}, clip={clip}, "
                      f"noise_std={noise_std}.")
    check_threads(caller, num_threads)
    if not structure_proven(caller, check_structure, _StructureToken, indices, indptr,
                            w.shape[0]):
        check_all_rows(caller, indices, indptr, w.shape[0], "w")
    return 0
