# cython: language_level=3
# (boundscheck, wraparound, cdivision and initializedcheck come from setup.py, so that
# FASTDP_DEBUG_KERNELS=1 builds a bounds-checked debug version; a directive here would win)
"""Compiled stochastic dual coordinate descent (DP-SCD) over raw CSR arrays.

One call of :func:`run_dual_scd` runs any number of mini-batch steps (a whole
epoch or more) without returning to Python.  It implements, for the squared
(ridge), logistic and hinge losses (spec 000, sections 2.1-2.4):

* Algorithm 1 (dual DP-SCD, ``sequential=False``): the updates of one
  mini-batch are computed independently from the same (alpha, v), each scaled
  so that ``|zeta_j| <= clip``, then applied; Gaussian noise of std
  ``noise_std_alpha`` is added to the alpha coordinates of the batch and of std
  ``noise_std_v`` to every coordinate of v.
* Algorithm 3 (seqDP-SCD, ``sequential=True``): the updates of a batch are
  applied one after another (later rows read the updated v), then the same
  noise step follows.
* With both noise stds zero: SDCA (batch size 1, no scaling) and mini-batch
  SCD (the epsilon -> infinity limit of Algorithm 1).

The kernel takes no privacy decision: the caller chooses the noise stds
(noise multiplier x sensitivity), the scaling bound and the batches.

Determinism
-----------
Inside a batch (parallel mode) the margins ``m_j = x_j^T v / (lam N)`` and the
steps ``zeta_j`` are independent; with ``num_threads > 1`` and a batch of at
least ``parallel_min_rows`` rows they are computed with an OpenMP ``prange``
(static schedule) into a buffer.  The update of v is then applied with the
columns split among the threads (``column_splits``): every column still
receives its updates in batch order, so each value is computed exactly as in
the sequential apply.  Every Gaussian draw happens in the sequential part, in
a fixed order.  The result is therefore bit-identical for any thread count.
Input CSR must be canonical (column indices sorted within rows).

Whether a batch takes the parallel or the serial path is decided per batch by
a gate that times both (``_gate.pxd: ParallelGate``): on a machine whose cores
are busy, OpenMP threads wait for a core at every barrier and the parallel
path can be many times slower than the serial one; the gate then keeps to
the serial path and re-tries the parallel one at doubling intervals.  The
choice depends on timings, but the result does not (same bits either way).

Speed
-----
The first pass over a batch (the lazy-noise bookkeeping, or the margins)
prefetches whole rows a few rows ahead: rows of a random batch are far apart
in memory, and waiting for each row is the main cost otherwise.  The
bookkeeping pass is branch-free; the draws then run over a compact list.

Shared pieces
-------------
X is read through the CSR view and row accessor of ``_csr.pxd`` (row map
included); the batches, the lazy-noise bookkeeping, the noise steps (lazy,
eager, final flush), the cache hints and the timing gate are the ones of the
mini-batch SGD kernels (``_glm.pxd``, ``_minibatch.pxd``, ``_gate.pxd``), with
K = 1 coefficient per column and no decay (a = 1); the argument checks are
``_checks.pxd``.  What is DP-SCD's own is the scaled dual coordinate step, its
application to (alpha, v), and the noise on alpha.

Order of the Gaussian draws (the numpy reference in the tests follows it)
--------------------------------------------------------------------------
For step t = 1..T of the call:

1. lazy mode only: for each row j of the batch (batch order) and each stored
   entry of row j (storage order) with column c: if ``p = (t - 1) - last[c]``
   is positive, ``v[c] += noise_std_v * sqrt(p) * z`` and ``last[c] = t - 1``;
2. the coordinate steps and their application (no draws);
3. for each row j of the batch (batch order): ``alpha[j] += noise_std_alpha * z``;
4. eager mode only: for c = 0..M-1: ``v[c] += noise_std_v * z``.

At the end of a lazy call, for c = 0..M-1 with ``p = T - last[c] > 0``:
``v[c] += noise_std_v * sqrt(p) * z``.  Draws are skipped when the std is 0.

Lazy noise spends no more privacy than eager noise
--------------------------------------------------
In eager mode every step adds an independent N(0, tau^2) to every coordinate
of v.  A step only *reads* v at the columns of its batch rows.  So the pending
Gaussians of a coordinate c that nothing read since its last read are
independent of everything computed in between, and their sum is distributed
as one N(0, p tau^2) draw.  Lazy mode draws exactly that sum at the moment c
is next read (or at the final flush).  By induction over the steps, the joint
distribution of (batches, every value of v read, every zeta_j, alpha, and the
flushed final v) is the same in both modes, for every dataset.  The
mechanism's released output (the final alpha and v, and the flushed
snapshots the solver records between calls) therefore has exactly the same
distribution as in eager mode, and the same (epsilon, delta) holds for
neighbouring datasets.  The un-flushed intermediate v exists only inside this
``nogil`` call and is never observable.
"""
from cython.parallel cimport prange
from libc.math cimport fabs
from libc.stdint cimport int32_t, int64_t
from numpy.random cimport bitgen_t
from numpy.random.c_distributions cimport random_standard_normal

from fastdp._kernels._checks cimport (
    bit_generator_of, check_batches, check_csr, check_csr_structure, check_length,
    check_loss_code, check_min_length, check_row_map, check_sq_norms, check_step_count,
    check_rows_as_read, check_threads, column_splits_of, first_bad_pointer, raise_failure,
    raise_invalid, rows_unsafe,
)
from fastdp._kernels._csr cimport (
    CsrRow, CsrView, FASTDP_PREFETCH, csr_row, csr_set_row_map, index_t, lower_bound,
    mapped_view, real_t, row_dot, row_sq_norm, row_value, values_view,
)
from fastdp._kernels._gate cimport (
    GATE_SLOTS, GatedBatch, ParallelGate, gate_close, gate_open, gate_slot, gate_state,
    gates_reset,
)
from fastdp._kernels._glm cimport LazyNoise, RowBatch, lazy_noise_scratch, step_batch
from fastdp._kernels._losses cimport dual_coordinate_step
from fastdp._kernels._minibatch cimport (
    add_eager_noise, bring_up_to_date, flush_pending_noise, pending_noise_scale_array,
    prefetch_ahead,
)

import numpy as np

from fastdp._validation import _StructureToken

# Serial-or-parallel choice for batches (speed only; see ``_gate.pxd: ParallelGate``),
# one per thread count.  Copied into each call and written back at its end
# (concurrent calls may lose an update: harmless).
cdef ParallelGate _gates[GATE_SLOTS]
gates_reset(_gates, GATE_SLOTS)


ctypedef struct DualStep:
    # The constants of the scaled coordinate step of a row (spec 000 section 2.1).
    int loss                  # a LossCode
    double lam_n              # lambda N
    double sigma_prime        # the subproblem constant sigma'
    double clip               # C: |zeta_j| is scaled down to at most C
    double box_eps            # box margin of the logistic / hinge duals
    const double* y           # labels, by row number
    const double* sq_norms    # squared row norms, by row number


cdef inline double _scaled_row_step(const DualStep* s, const CsrView[real_t, index_t]* X,
                                    const real_t* alpha, const real_t* v,
                                    int64_t j) noexcept nogil:
    """zeta_j of row j from the current (alpha, v), scaled so that |zeta_j| <= clip."""
    cdef double dot = row_dot(csr_row(X, j), v)     # x_j^T v
    cdef double zeta, ratio
    zeta = dual_coordinate_step(s.loss, <double>alpha[j], s.y[j], dot / s.lam_n,
                                s.sigma_prime * s.sq_norms[j] / s.lam_n, s.box_eps)
    ratio = fabs(zeta) / s.clip
    if ratio > 1.0:
        zeta = zeta / ratio
    return zeta


cdef inline void _prefetch_example(const DualStep* s, const CsrView[real_t, index_t]* X,
                                   RowBatch batch, int64_t q, const real_t* alpha) noexcept nogil:
    """``_minibatch.pxd: prefetch_ahead`` (the row pointer 8 rows ahead, all of the row 4
    rows ahead), and the dual variable, label and norm of the row 4 ahead."""
    cdef int64_t j = prefetch_ahead(X, batch, q)
    if j < 0:
        return
    FASTDP_PREFETCH(&alpha[j])
    FASTDP_PREFETCH(&s.y[j])
    FASTDP_PREFETCH(&s.sq_norms[j])


cdef inline void _row_splits(const CsrView[real_t, index_t]* X, int64_t j, const int64_t* cs,
                             int nt, int64_t* out) noexcept nogil:
    """Storage positions where row j crosses the column boundaries ``cs[1..nt-1]``:
    ``out[0] = indptr[j]``, ``out[nt] = indptr[j + 1]``."""
    cdef int s
    cdef index_t k = X.indptr[j]
    out[0] = k
    for s in range(1, nt):
        k = lower_bound(X.indices, k, X.indptr[j + 1], cs[s])
        out[s] = k
    out[nt] = X.indptr[j + 1]


cdef inline void _apply_split(const CsrView[real_t, index_t]* X, const double* zeta,
                              RowBatch batch, const int64_t* row_splits, int nt, int tid,
                              const int64_t* cs, real_t* v) noexcept nogil:
    """Thread tid's share of the batch update: v[c] += zeta_q x_{j_q, c} for the stored
    entries of its column range ``[cs[tid], cs[tid + 1])`` (``row_splits`` from
    :func:`_row_splits`, nt + 1 per row) and a row map's appended entry if its column is
    in that range, rows in batch order."""
    cdef int64_t q, k                   # position in the batch, storage position
    cdef int64_t c                      # appended column
    cdef double z
    cdef int64_t k0, k1                 # row q's storage positions in the thread's columns
    cdef int64_t start                  # row q's first storage position
    cdef CsrRow[real_t, index_t] row    # row q of the batch with its map (mapped views only)
    cdef bint mapped = X.row_scale != NULL or X.row_shrink != NULL
    for q in range(batch.count):
        z = zeta[q]
        start = row_splits[q * (nt + 1)]
        k0 = row_splits[q * (nt + 1) + tid]
        k1 = row_splits[q * (nt + 1) + tid + 1]
        if not mapped:
            for k in range(k0, k1):
                v[X.indices[k]] = <real_t>(<double>v[X.indices[k]] + z * <double>X.data[k])
        else:
            row = csr_row(X, batch.rows[q])
            for k in range(k0, k1):
                v[X.indices[k]] = <real_t>(<double>v[X.indices[k]]
                                           + z * row_value(&row, <index_t>(k - start)))
        c = X.tail_column
        if c >= 0 and cs[tid] <= c and c < cs[tid + 1]:
            row = csr_row(X, batch.rows[q])
            v[c] = <real_t>(<double>v[c] + z * row.tail)


cdef inline void _apply_row(const CsrView[real_t, index_t]* X, int64_t j, double zeta,
                            real_t* alpha, real_t* v) noexcept nogil:
    """alpha_j += zeta and v += zeta x_j."""
    cdef CsrRow[real_t, index_t] row = csr_row(X, j)
    cdef index_t p
    alpha[j] = <real_t>(<double>alpha[j] + zeta)
    for p in range(row.nnz):
        v[row.columns[p]] = <real_t>(<double>v[row.columns[p]] + zeta * row_value(&row, p))
    if row.tail_column >= 0:
        v[row.tail_column] = <real_t>(<double>v[row.tail_column] + zeta * row.tail)


def run_dual_scd(const real_t[::1] data, const index_t[::1] indices,
                 const index_t[::1] indptr, const double[::1] y,
                 const double[::1] sq_norms, real_t[::1] alpha, real_t[::1] v,
                 const int64_t[::1] batch_ptr, const int64_t[::1] batch_idx,
                 double[::1] zeta_buffer, int32_t[::1] last_noised,
                 int loss, double lam_n, double sigma_prime, double clip,
                 double box_eps, bint sequential, double noise_std_alpha,
                 double noise_std_v, bint lazy_noise, object bit_generator,
                 int num_threads, Py_ssize_t parallel_min_rows,
                 const int64_t[::1] column_splits=None, *, check_structure=True,
                 const double[::1] row_scale=None, const double[::1] row_shrink=None,
                 double tail_value=0.0, int64_t tail_column=-1):
    """Run ``len(batch_ptr) - 1`` mini-batch steps of (DP-)SCD in place.

    The safe way in is ``fastdp.solvers.scd`` (``dual_dpscd`` and friends),
    which validates X once and passes its structure token.  This
    function refuses every argument that could make it read or write out of
    bounds, or silently drop the noise (see ``Raises``).

    Parameters
    ----------
    data, indices, indptr : CSR arrays of X (N x M), canonical.
    y : float64 labels, length N.
    sq_norms : float64 squared row norms, length N.
    alpha : dual variables (length N, dtype of ``data``), updated in place.
    v : auxiliary vector (length M, dtype of ``data``), updated in place.
    batch_ptr, batch_idx : the batches as flat int64 arrays: batch t holds
        ``batch_idx[batch_ptr[t]:batch_ptr[t + 1]]``.
    zeta_buffer : float64 scratch of length >= the largest batch.
    last_noised : int32 scratch of length M (lazy mode), overwritten.
    loss : a member of ``fastdp._kernels._losses.LossCode`` (0 squared (ridge),
        1 logistic, 2 hinge).
    lam_n : lambda * N.
    sigma_prime : the subproblem constant (L for Algorithm 1, 1 for SDCA).
    clip : scaling bound C (``inf`` for none).
    box_eps : box margin b of the logistic / hinge dual box.
    sequential : Algorithm 3 (True) or Algorithm 1 (False).
    noise_std_alpha, noise_std_v : Gaussian noise stds (0 for none).
    lazy_noise : draw the v noise lazily (see the module docstring).
    bit_generator : a numpy ``BitGenerator`` (its lock must be held by the
        caller); ignored when both stds are 0.
    num_threads : OpenMP threads for the margins of a batch.
    parallel_min_rows : smallest batch computed in parallel.
    column_splits : int64 array of length ``num_threads + 1`` (0, ..., M), optional
        Column ranges of the threads in the parallel apply of Delta v (balance
        them by column counts); default: equal ranges.  The parallel apply
        needs column indices sorted within rows (canonical CSR).
    check_structure : True or a structure token, default=True
        As ``_sgd.run_sgd`` (column indices within ``[0, len(v))``).
    row_scale, row_shrink, tail_value, tail_column : optional row map
        Read the rows of X through a row map instead of as stored (see
        ``_csr.pxd: csr_set_row_map`` and ``_sgd.run_sgd``); ``sq_norms`` are
        then the mapped rows'.

    Returns
    -------
    n_draws : int
        Number of standard normal draws taken from ``bit_generator``.

    Raises
    ------
    ValidationError
        Always checked: the CSR arrays (``indptr[0] == 0``, ``indptr[-1] ==
        len(indices) <= len(data)``), the lengths of y, sq_norms, alpha (N),
        last_noised (>= M in lazy mode), zeta_buffer (>= the largest batch,
        parallel mode), the batches (``batch_ptr`` non-decreasing within
        ``[0, len(batch_idx)]``, every row number read in ``[0, N)``), the
        loss code, ``lam_n > 0``, ``clip > 0``, ``0 <= box_eps < 0.5``,
        noise stds ``>= 0`` (not NaN), ``num_threads <= 1024``, the
        bit generator, every squared norm >= 0 and not NaN; and, unless
        ``check_structure`` is a token for these arrays, the CSR structure.
    """
    cdef Py_ssize_t n_steps = batch_ptr.shape[0] - 1
    cdef Py_ssize_t n_features = v.shape[0]
    cdef int nt = num_threads if num_threads > 0 else 1
    cdef bint noisy = noise_std_alpha > 0.0 or noise_std_v > 0.0
    cdef bint a_noisy = noise_std_alpha > 0.0       # noise on the alpha coordinates
    cdef bint v_noisy = noise_std_v > 0.0           # noise on v
    cdef bint lazy_v = lazy_noise and v_noisy       # v's noise drawn lazily
    cdef bitgen_t* rng = NULL
    cdef int64_t n_draws = 0
    cdef int64_t t, j, c                            # step, row, column
    cdef Py_ssize_t q                               # position in the batch
    cdef int tid                                    # OpenMP thread
    cdef RowBatch batch                             # the rows of step t
    cdef ParallelGate gate = _gates[gate_slot(num_threads)]
    cdef GatedBatch timed                           # the path the gate chose for the batch
    cdef int64_t failure[2]                         # a flawed row read (trusted structure)
    cdef int proof

    cdef int64_t stored_columns = check_row_map(
        "run_dual_scd", row_scale.shape[0] if row_scale is not None else -1,
        row_shrink.shape[0] if row_shrink is not None else -1, tail_column,
        indptr.shape[0] - 1, v.shape[0])
    proof = _check_scd_arguments(data, indices, indptr, y, sq_norms, alpha, v, batch_ptr,
                                 batch_idx, zeta_buffer, last_noised, loss, lam_n, clip,
                                 box_eps, sequential, noise_std_alpha, noise_std_v, lazy_noise,
                                 num_threads, check_structure, stored_columns)
    if n_steps <= 0:
        return 0
    check_step_count("run_dual_scd", n_steps)
    # noise_scale[p] = noise_std_v * sqrt(p): the std of p pending steps of v-noise (no decay)
    scale_arr = noise_std_v * pending_noise_scale_array(1.0, n_steps)
    cdef const double[::1] noise_scale = scale_arr
    splits_arr = column_splits_of("run_dual_scd", column_splits, nt, n_features, "len(v)")
    cdef const int64_t[::1] splits = splits_arr     # the threads' column ranges
    largest = int(np.max(np.diff(batch_ptr))) if nt > 1 and not sequential else 0
    # row_splits[q (nt + 1) + s]: where row q of a parallel batch enters thread s's columns
    row_splits_arr = np.empty(max(largest, 1) * (nt + 1), dtype=np.int64)
    cdef int64_t[::1] row_splits = row_splits_arr
    scratch = []
    cdef LazyNoise lazy = lazy_noise_scratch(last_noised, n_features if lazy_v else 0,
                                             n_features if lazy_v else 0, scratch)
    if noisy:
        rng = bit_generator_of("run_dual_scd", bit_generator)
    cdef CsrView[real_t, index_t] X = mapped_view(data, indices, indptr, row_scale, row_shrink,
                                                  tail_value, tail_column)
    check_rows_as_read(&X, proof, check_structure, failure)
    cdef DualStep step
    step.loss = loss
    step.lam_n = lam_n
    step.sigma_prime = sigma_prime
    step.clip = clip
    step.box_eps = box_eps
    # Pointers of possibly empty arrays are only dereferenced inside loops
    # whose ranges are empty for empty arrays (the checks above).
    step.y = &y[0] if y.shape[0] > 0 else NULL
    step.sq_norms = &sq_norms[0] if sq_norms.shape[0] > 0 else NULL
    cdef double* zeta = &zeta_buffer[0] if zeta_buffer.shape[0] > 0 else NULL
    cdef real_t* alpha_ = &alpha[0] if alpha.shape[0] > 0 else NULL
    cdef real_t* v_ = &v[0] if n_features > 0 else NULL
    cdef const int64_t* rows = &batch_idx[0] if batch_idx.shape[0] > 0 else NULL

    with nogil:
        if lazy_noise:
            for c in range(n_features):
                lazy.last[c] = 0
        for t in range(1, n_steps + 1):
            batch = step_batch(rows, &batch_ptr[0], t)
            # 0. a trusted (not scanned) structure: check the rows not read before, or stop
            if rows_unsafe(&X, batch.rows, batch.count):
                break                               # X.failure names the row
            # 1. lazy noise: bring every column the batch reads up to step t-1
            if lazy_v:
                n_draws += bring_up_to_date(&X, batch, <int32_t>(t - 1), &lazy, rng, v_, 1,
                                            &noise_scale[0], 1.0)
            # 2. the coordinate steps
            if sequential:
                for q in range(batch.count):
                    j = batch.rows[q]
                    _apply_row(&X, j, _scaled_row_step(&step, &X, alpha_, v_, j), alpha_, v_)
            else:
                timed = gate_open(&gate, nt, batch.count, parallel_min_rows)
                if timed.path == 1:
                    # margins and steps, rows prefetched ahead; each row's
                    # boundaries between the threads' column ranges are found
                    # here, while the row is in cache
                    for q in prange(batch.count, num_threads=nt, schedule="static"):
                        _prefetch_example(&step, &X, batch, q, alpha_)
                        zeta[q] = _scaled_row_step(&step, &X, alpha_, v_, batch.rows[q])
                        _row_splits(&X, batch.rows[q], &splits[0], nt, &row_splits[q * (nt + 1)])
                    for tid in prange(nt, num_threads=nt, schedule="static"):
                        _apply_split(&X, zeta, batch, &row_splits[0], nt, tid, &splits[0], v_)
                    for q in range(batch.count):
                        j = batch.rows[q]
                        alpha_[j] = <real_t>(<double>alpha_[j] + zeta[q])
                else:
                    for q in range(batch.count):
                        _prefetch_example(&step, &X, batch, q, alpha_)
                        zeta[q] = _scaled_row_step(&step, &X, alpha_, v_, batch.rows[q])
                    for q in range(batch.count):
                        _apply_row(&X, batch.rows[q], zeta[q], alpha_, v_)
                gate_close(&timed, batch.count)
            # 3. noise on the alpha coordinates of the batch
            if a_noisy:
                for q in range(batch.count):
                    j = batch.rows[q]
                    alpha_[j] = <real_t>(<double>alpha_[j]
                                         + noise_std_alpha * random_standard_normal(rng))
                    n_draws += 1
            # 4. eager noise on every coordinate of v
            if v_noisy and not lazy_noise:
                n_draws += add_eager_noise(rng, v_, n_features, noise_std_v)
        # final flush: nothing leaves this call with pending noise
        if lazy_v and (X.row_checked == NULL or failure[0] < 0):
            n_draws += flush_pending_noise(rng, &lazy, v_, n_features, 1, <int32_t>n_steps,
                                           &noise_scale[0], 1.0)
    _gates[gate_slot(num_threads)] = gate
    if X.row_checked != NULL:
        raise_failure("run_dual_scd", failure, X.check_below)
    return n_draws


cdef int _check_scd_arguments(const real_t[::1] data, const index_t[::1] indices,
                              const index_t[::1] indptr, const double[::1] y,
                              const double[::1] sq_norms, real_t[::1] alpha, real_t[::1] v,
                              const int64_t[::1] batch_ptr, const int64_t[::1] batch_idx,
                              double[::1] zeta_buffer, int32_t[::1] last_noised, int loss,
                              double lam_n, double clip, double box_eps, bint sequential,
                              double noise_std_alpha, double noise_std_v, bint lazy_noise,
                              int num_threads, object check_structure,
                              int64_t stored_columns) except -1:
    """Every check of :func:`run_dual_scd` (see its ``Raises``); the stored column indices
    must lie below ``stored_columns`` (``len(v)``, or the row map's appended column).
    Returns the structure's proof (``_checks.pxd: check_csr_structure``)."""
    cdef str caller = "run_dual_scd"
    cdef int64_t n_rows, largest
    check_csr(caller, data.shape[0], indices, indptr)
    n_rows = indptr.shape[0] - 1
    check_length(caller, "y", y.shape[0], n_rows, "one label per row of X")
    check_length(caller, "sq_norms", sq_norms.shape[0], n_rows, "one squared norm per row of X")
    check_sq_norms(caller, sq_norms)
    check_length(caller, "alpha", alpha.shape[0], n_rows, "one dual variable per row of X")
    if lazy_noise:
        check_min_length(caller, "last_noised", last_noised.shape[0], v.shape[0],
                         "one per coefficient of v, in lazy mode")
    largest = check_batches(caller, batch_ptr, batch_idx, n_rows)
    if not sequential:
        check_min_length(caller, "zeta_buffer", zeta_buffer.shape[0], largest,
                         "one per row of the largest batch")
    check_loss_code(caller, loss)
    if not (lam_n > 0.0 and clip > 0.0 and 0.0 <= box_eps < 0.5):
        raise_invalid(f"{caller}: need lam_n > 0, clip > 0 (inf for none) and 0 <= box_eps < "
                      f"0.5; got lam_n={lam_n}, clip={clip}, box_eps={box_eps}.")
    if not (noise_std_alpha >= 0.0 and noise_std_v >= 0.0):
        raise_invalid(f"{caller}: the noise stds must be >= 0 (0 for none); got "
                      f"noise_std_alpha={noise_std_alpha}, noise_std_v={noise_std_v}.")
    check_threads(caller, num_threads)
    return check_csr_structure(caller, check_structure, _StructureToken, indices, indptr,
                               stored_columns, "v")


def row_squared_norms(const real_t[::1] data, const index_t[::1] indptr, *,
                      const double[::1] row_scale=None, const double[::1] row_shrink=None,
                      double tail_value=0.0, bint tail=False):
    """Squared L2 norm of every CSR row, accumulated in float64 in storage order.

    With a row map (``row_scale``, ``row_shrink``, and ``tail`` for the
    appended entry ``tail_value``; see ``_csr.pxd: csr_set_row_map``), the
    norms of the mapped rows, the appended entry summed last.  Each is
    ``_csr.pxd: row_sq_norm`` of the row (the one definition of the sum, which
    the kernels use for a row they read).

    Raises
    ------
    ValidationError
        Unless ``indptr`` is non-decreasing from 0 to at most ``len(data)``
        (checked in one pass over ``indptr``, negligible next to the norms).
    """
    cdef Py_ssize_t n = indptr.shape[0] - 1
    cdef Py_ssize_t i                   # row
    cdef int64_t bad = -1
    if n < 0 or indptr[0] != 0:
        raise_invalid("row_squared_norms: indptr must start at 0 and have N + 1 entries for N "
                      "rows (pass X.indptr).")
    with nogil:
        bad = first_bad_pointer(&indptr[0], n, data.shape[0])
    if bad >= 0:
        raise_invalid(f"row_squared_norms: indptr is not a CSR row pointer at row {bad} "
                      f"(indptr[{bad}] = {indptr[bad]}, indptr[{bad + 1}] = {indptr[bad + 1]}, "
                      f"len(data) = {data.shape[0]}); it must be non-decreasing from 0 to at "
                      f"most len(data).")
    check_row_map("row_squared_norms", row_scale.shape[0] if row_scale is not None else -1,
                  row_shrink.shape[0] if row_shrink is not None else -1, -1, n, 1)
    out_arr = np.zeros(n, dtype=np.float64)
    cdef double[::1] out = out_arr
    # the kernels' view of the rows (no column indices: only the values are read), so that
    # these are the bits of the norm a kernel sums from a row it reads (_csr.pxd: row_sq_norm)
    cdef CsrView[real_t, index_t] X = values_view(data, indptr)
    cdef CsrRow[real_t, index_t] row
    csr_set_row_map(&X, &row_scale[0] if row_scale is not None and n > 0 else NULL,
                    &row_shrink[0] if row_shrink is not None and n > 0 else NULL, tail_value,
                    0 if tail else -1)
    with nogil:
        for i in range(n):
            row = csr_row(&X, i)
            out[i] = row_sq_norm(&row)
    return out_arr


def _parallel_gate_state(int num_threads):
    """The serial/parallel gate of :func:`run_dual_scd` for a thread count (diagnostics)."""
    return gate_state(&_gates[gate_slot(num_threads)])
