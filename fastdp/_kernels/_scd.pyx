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
a gate that times both (``_glm.pxd: ParallelGate``): on a machine whose cores
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
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid
from cython.parallel cimport prange
from libc.math cimport fabs, log, sqrt, copysign, INFINITY
from libc.stdint cimport int32_t, int64_t
from numpy.random cimport bitgen_t
from numpy.random.c_distributions cimport random_standard_normal, random_standard_normal_fill

from fastdp._kernels._glm cimport (
    real_t, index_t, prefetch_row, collect_pending, FASTDP_GLM_PREFETCH,
    ParallelGate, fastdp_glm_now, gate_choose, gate_record, gate_reset,
    raise_invalid, check_csr, check_all_rows, check_length, check_min_length, check_threads,
    structure_proven, check_sq_norms,
    check_batches, first_bad_pointer,
)

import numpy as np

from fastdp._validation import _StructureToken

# Serial-or-parallel choice for batches (speed only; see ``_glm.ParallelGate``),
# one per thread count (2..8; more threads share the last).  Copied into each
# call and written back at its end (concurrent calls may lose an update: harmless).
cdef ParallelGate _gates[9]
cdef int _g
for _g in range(9):
    gate_reset(&_gates[_g])


LOSS_RIDGE = 0
LOSS_LOGISTIC = 1
LOSS_HINGE = 2

cdef enum:
    _RIDGE = 0
    _LOGISTIC = 1
    _HINGE = 2


cdef inline double _clip(double x, double lo, double hi) noexcept nogil:
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


cdef inline double _coordinate_step(int loss, double alpha_j, double y_j, double m_j,
                                    double s_j, double box_eps) noexcept nogil:
    """Closed-form minimiser zeta of N*G*_j (spec 000 section 2.1), before scaling."""
    cdef double ya, a_t, z_hat, g, h, p
    if loss == _RIDGE:
        return (y_j - m_j - alpha_j) / (1.0 + s_j)
    ya = _clip(y_j * alpha_j, box_eps, 1.0 - box_eps)
    a_t = y_j * ya
    if loss == _HINGE:
        if s_j > 0.0:
            z_hat = (y_j - m_j) / s_j
        elif y_j != m_j:
            z_hat = copysign(INFINITY, y_j - m_j)
        else:
            z_hat = 0.0
    else:
        p = ya
        g = y_j * log(p / (1.0 - p)) + m_j
        h = 1.0 / (p * (1.0 - p)) + s_j
        z_hat = -g / h
    return y_j * _clip(y_j * (a_t + z_hat), box_eps, 1.0 - box_eps) - a_t


cdef inline double _scaled_row_step(int loss, const real_t* data, const index_t* indices,
                                    const index_t* indptr, const double* y,
                                    const double* sq_norms, const real_t* alpha,
                                    const real_t* v, int64_t j, double lam_n,
                                    double sigma_prime, double clip,
                                    double box_eps) noexcept nogil:
    """zeta_j of row j from the current (alpha, v), scaled so that |zeta_j| <= clip."""
    cdef double dot = 0.0
    cdef double zeta, ratio
    cdef index_t k
    for k in range(indptr[j], indptr[j + 1]):
        dot = dot + <double>data[k] * <double>v[indices[k]]
    zeta = _coordinate_step(loss, <double>alpha[j], y[j], dot / lam_n,
                            sigma_prime * sq_norms[j] / lam_n, box_eps)
    ratio = fabs(zeta) / clip
    if ratio > 1.0:
        zeta = zeta / ratio
    return zeta


cdef inline void _draw_pending(real_t* v, const int64_t* columns, const int32_t* pending,
                               int64_t n_owing, const double* noise_scale,
                               bitgen_t* rng, double* z) noexcept nogil:
    """v[c] += noise_std_v * sqrt(p_c) * z for the listed columns, in list order.

    The normals are drawn first, in one run (the same stream, in the same
    order, as one draw per column), then added with the v entries prefetched
    ahead: the generator and the scattered memory accesses no longer wait
    for each other.  ``z`` is scratch of at least ``n_owing`` doubles.
    """
    cdef int64_t i, c
    random_standard_normal_fill(rng, n_owing, z)
    for i in range(n_owing):
        if i + 16 < n_owing:
            FASTDP_GLM_PREFETCH(&v[columns[i + 16]])
        c = columns[i]
        v[c] = <real_t>(<double>v[c] + noise_scale[pending[i]] * z[i])


cdef inline void _prefetch_ahead(const real_t* data, const index_t* indices,
                                 const index_t* indptr, const int64_t* batch, int64_t p,
                                 int64_t end, const real_t* alpha, const double* y,
                                 const double* sq_norms) noexcept nogil:
    """Hint the cache: the row pointer 8 rows ahead, all of the row 4 rows ahead."""
    cdef int64_t j
    if p + 8 < end:
        FASTDP_GLM_PREFETCH(&indptr[batch[p + 8]])
    if p + 4 < end:
        j = batch[p + 4]
        prefetch_row(data, indices, indptr, j)
        FASTDP_GLM_PREFETCH(&alpha[j])
        FASTDP_GLM_PREFETCH(&y[j])
        FASTDP_GLM_PREFETCH(&sq_norms[j])


cdef inline index_t _lower_bound(const index_t* indices, index_t lo, index_t hi,
                                 int64_t c) noexcept nogil:
    """First k in [lo, hi) with indices[k] >= c (indices sorted within the row)."""
    cdef index_t mid
    while lo < hi:
        mid = lo + (hi - lo) // 2
        if indices[mid] < c:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef inline void _row_splits(const index_t* indices, const index_t* indptr, int64_t j,
                             const int64_t* cs, int nt, int64_t* out) noexcept nogil:
    """Storage positions where row j crosses the column boundaries ``cs[1..nt-1]``:
    ``out[0] = indptr[j]``, ``out[nt] = indptr[j + 1]``."""
    cdef int s
    cdef index_t k = indptr[j]
    out[0] = k
    for s in range(1, nt):
        k = _lower_bound(indices, k, indptr[j + 1], cs[s])
        out[s] = k
    out[nt] = indptr[j + 1]


cdef inline void _apply_split(const double* zeta, const real_t* data, const index_t* indices,
                              real_t* v, int64_t count, const int64_t* splits, int nt,
                              int tid) noexcept nogil:
    """Thread tid's share of the batch update: v[c] += zeta_q x_{j_q, c} for the stored
    entries of its column range (``splits`` from :func:`_row_splits`), rows in batch order."""
    cdef int64_t q, k
    cdef double z
    for q in range(count):
        z = zeta[q]
        for k in range(splits[q * (nt + 1) + tid], splits[q * (nt + 1) + tid + 1]):
            v[indices[k]] = <real_t>(<double>v[indices[k]] + z * <double>data[k])


cdef inline void _apply_row(double zeta, const real_t* data, const index_t* indices,
                            const index_t* indptr, real_t* alpha, real_t* v,
                            int64_t j) noexcept nogil:
    cdef index_t k
    alpha[j] = <real_t>(<double>alpha[j] + zeta)
    for k in range(indptr[j], indptr[j + 1]):
        v[indices[k]] = <real_t>(<double>v[indices[k]] + zeta * <double>data[k])


def run_dual_scd(const real_t[::1] data, const index_t[::1] indices,
                 const index_t[::1] indptr, const double[::1] y,
                 const double[::1] sq_norms, real_t[::1] alpha, real_t[::1] v,
                 const int64_t[::1] batch_ptr, const int64_t[::1] batch_idx,
                 double[::1] zeta_buffer, int32_t[::1] last_noised,
                 int loss, double lam_n, double sigma_prime, double clip,
                 double box_eps, bint sequential, double noise_std_alpha,
                 double noise_std_v, bint lazy_noise, object bit_generator,
                 int num_threads, Py_ssize_t parallel_min_rows,
                 const int64_t[::1] column_splits=None, *, check_structure=True):
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
    loss : 0 ridge, 1 logistic, 2 hinge.
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
        The CSR structure of X is checked (one sequential pass over
        ``indices``: row pointers non-decreasing, column indices strictly
        increasing within ``[0, len(v))``) unless this is
        ``fastdp._validation.structure_token(X)`` for these arrays (O(1) for
        ``check_X`` output); ``False`` checks too.

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
    cdef bitgen_t* rng = NULL
    cdef bint noisy = noise_std_alpha > 0.0 or noise_std_v > 0.0
    cdef bint v_noisy = noise_std_v > 0.0
    cdef bint a_noisy = noise_std_alpha > 0.0
    cdef int64_t n_draws = 0
    cdef int64_t t, p, b0, b1, j, c
    cdef int32_t pending
    cdef Py_ssize_t q
    cdef index_t k
    cdef int nt = num_threads if num_threads > 0 else 1
    cdef const real_t* dp
    cdef const index_t* ip
    cdef const index_t* pp
    cdef const double* yp
    cdef const double* np_
    cdef real_t* ap
    cdef real_t* vp
    cdef const int64_t* bi
    cdef double* zp
    cdef int32_t* lp
    cdef double* sp_
    cdef bint lazy_v
    cdef double zeta
    cdef int tid
    cdef const int64_t* cs
    cdef int64_t n_owing
    cdef int64_t* colp
    cdef int32_t* pendp
    cdef double* zbuf
    cdef int64_t* kp
    cdef int gate_slot = num_threads if 0 < num_threads < 8 else 8
    cdef ParallelGate gate = _gates[gate_slot]
    cdef int path = 0
    cdef double started = 0.0

    _check_scd_arguments(data, indices, indptr, y, sq_norms, alpha, v, batch_ptr, batch_idx,
                         zeta_buffer, last_noised, loss, lam_n, clip, box_eps, sequential,
                         noise_std_alpha, noise_std_v, lazy_noise, num_threads, check_structure)
    if n_steps <= 0:
        return 0
    if n_steps >= 2**31 - 1:
        raise_invalid("run_dual_scd: at most 2**31 - 2 steps per call; split the batches "
                      "over several calls.")
    # noise_scale[p] = noise_std_v * sqrt(p): the std of p pending steps of v-noise
    scale_arr = noise_std_v * np.sqrt(np.arange(n_steps + 1, dtype=np.float64))
    cdef double[::1] scale_view = scale_arr
    sp_ = &scale_view[0]
    lazy_v = lazy_noise and v_noisy
    if column_splits is None:
        splits_arr = (np.arange(nt + 1, dtype=np.int64) * n_features) // nt
    else:
        splits_arr = np.ascontiguousarray(column_splits, dtype=np.int64)
        if (splits_arr.shape[0] != nt + 1 or splits_arr[0] != 0
                or splits_arr[nt] != n_features or np.any(np.diff(splits_arr) < 0)):
            raise_invalid("run_dual_scd: column_splits must be non-decreasing from 0 to M = len(v), "
                          "length num_threads + 1.")
    cdef const int64_t[::1] splits_view = splits_arr
    cs = &splits_view[0]
    columns_arr = np.empty(n_features + 1 if lazy_v else 1, dtype=np.int64)
    pending_arr = np.empty(n_features + 1 if lazy_v else 1, dtype=np.int32)
    normals_arr = np.empty(n_features + 1 if lazy_v else 1, dtype=np.float64)
    largest = int(np.max(np.diff(batch_ptr))) if nt > 1 and not sequential else 0
    row_splits_arr = np.empty(max(largest, 1) * (nt + 1), dtype=np.int64)
    cdef int64_t[::1] row_splits_view = row_splits_arr
    kp = &row_splits_view[0]
    cdef int64_t[::1] columns_view = columns_arr
    cdef int32_t[::1] pending_view = pending_arr
    cdef double[::1] normals_view = normals_arr
    colp = &columns_view[0]
    pendp = &pending_view[0]
    zbuf = &normals_view[0]
    if noisy:
        capsule = getattr(bit_generator, "capsule", None)
        if capsule is None or not PyCapsule_IsValid(capsule, b"BitGenerator"):
            raise_invalid("run_dual_scd: bit_generator must be a numpy BitGenerator.")
        rng = <bitgen_t*> PyCapsule_GetPointer(capsule, b"BitGenerator")
    # Pointers of possibly empty arrays are only dereferenced inside loops
    # whose ranges are empty for empty arrays (the checks above).
    pp = &indptr[0]
    yp = &y[0] if y.shape[0] > 0 else NULL
    np_ = &sq_norms[0] if sq_norms.shape[0] > 0 else NULL
    zp = &zeta_buffer[0] if zeta_buffer.shape[0] > 0 else NULL
    lp = &last_noised[0] if last_noised.shape[0] > 0 else NULL
    dp = &data[0] if data.shape[0] > 0 else NULL
    ip = &indices[0] if indices.shape[0] > 0 else NULL
    ap = &alpha[0] if alpha.shape[0] > 0 else NULL
    vp = &v[0] if v.shape[0] > 0 else NULL
    bi = &batch_idx[0] if batch_idx.shape[0] > 0 else NULL

    with nogil:
        if lazy_noise:
            for c in range(n_features):
                lp[c] = 0
        for t in range(1, n_steps + 1):
            b0 = batch_ptr[t - 1]
            b1 = batch_ptr[t]
            # 1. lazy noise: bring every column the batch reads up to step t-1
            if lazy_v:
                n_owing = collect_pending(dp, ip, pp, &bi[b0] if b1 > b0 else bi, b1 - b0, lp,
                                           <int32_t>(t - 1), colp, pendp)
                _draw_pending(vp, colp, pendp, n_owing, sp_, rng, zbuf)
                n_draws += n_owing
            # 2. the coordinate steps
            if sequential:
                for p in range(b0, b1):
                    j = bi[p]
                    zeta = _scaled_row_step(loss, dp, ip, pp, yp, np_, ap, vp, j, lam_n,
                                            sigma_prime, clip, box_eps)
                    _apply_row(zeta, dp, ip, pp, ap, vp, j)
            else:
                path = 0
                if nt > 1 and b1 - b0 >= parallel_min_rows:
                    path = gate_choose(&gate)
                    started = fastdp_glm_now()
                if path == 1:
                    # margins and steps, rows prefetched ahead; each row's
                    # boundaries between the threads' column ranges are found
                    # here, while the row is in cache
                    for q in prange(b1 - b0, num_threads=nt, schedule="static"):
                        _prefetch_ahead(dp, ip, pp, bi, b0 + q, b1, ap, yp, np_)
                        zp[q] = _scaled_row_step(loss, dp, ip, pp, yp, np_, ap, vp, bi[b0 + q],
                                                 lam_n, sigma_prime, clip, box_eps)
                        _row_splits(ip, pp, bi[b0 + q], cs, nt, &kp[q * (nt + 1)])
                    for tid in prange(nt, num_threads=nt, schedule="static"):
                        _apply_split(zp, dp, ip, vp, b1 - b0, kp, nt, tid)
                    for q in range(b1 - b0):
                        j = bi[b0 + q]
                        ap[j] = <real_t>(<double>ap[j] + zp[q])
                else:
                    for q in range(b1 - b0):
                        _prefetch_ahead(dp, ip, pp, bi, b0 + q, b1, ap, yp, np_)
                        zp[q] = _scaled_row_step(loss, dp, ip, pp, yp, np_, ap, vp, bi[b0 + q],
                                                 lam_n, sigma_prime, clip, box_eps)
                    for q in range(b1 - b0):
                        _apply_row(zp[q], dp, ip, pp, ap, vp, bi[b0 + q])
                if nt > 1 and b1 - b0 >= parallel_min_rows:
                    gate_record(&gate, path, fastdp_glm_now() - started, b1 - b0)
            # 3. noise on the alpha coordinates of the batch
            if a_noisy:
                for p in range(b0, b1):
                    j = bi[p]
                    ap[j] = <real_t>(<double>ap[j] + noise_std_alpha * random_standard_normal(rng))
                    n_draws += 1
            # 4. eager noise on every coordinate of v
            if v_noisy and not lazy_noise:
                for c in range(n_features):
                    vp[c] = <real_t>(<double>vp[c] + noise_std_v * random_standard_normal(rng))
                    n_draws += 1
        # final flush: nothing leaves this call with pending noise
        if lazy_v:
            for c in range(n_features):
                pending = <int32_t>n_steps - lp[c]
                if pending > 0:
                    vp[c] = <real_t>(<double>vp[c] + sp_[pending] * random_standard_normal(rng))
                    n_draws += 1
                    lp[c] = <int32_t>n_steps
    _gates[gate_slot] = gate
    return n_draws


cdef int _check_scd_arguments(const real_t[::1] data, const index_t[::1] indices,
                              const index_t[::1] indptr, const double[::1] y,
                              const double[::1] sq_norms, real_t[::1] alpha, real_t[::1] v,
                              const int64_t[::1] batch_ptr, const int64_t[::1] batch_idx,
                              double[::1] zeta_buffer, int32_t[::1] last_noised, int loss,
                              double lam_n, double clip, double box_eps, bint sequential,
                              double noise_std_alpha, double noise_std_v, bint lazy_noise,
                              int num_threads, object check_structure) except -1:
    """Every check of :func:`run_dual_scd` (see its ``Raises``)."""
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
    if loss not in (_RIDGE, _LOGISTIC, _HINGE):
        raise_invalid(f"{caller}: unknown loss code {loss}; use LOSS_RIDGE, LOSS_LOGISTIC or "
                      f"LOSS_HINGE.")
    if not (lam_n > 0.0 and clip > 0.0 and 0.0 <= box_eps < 0.5):
        raise_invalid(f"{caller}: need lam_n > 0, clip > 0 (inf for none) and 0 <= box_eps < "
                      f"0.5; got lam_n={lam_n}, clip={clip}, box_eps={box_eps}.")
    if not (noise_std_alpha >= 0.0 and noise_std_v >= 0.0):
        raise_invalid(f"{caller}: the noise stds must be >= 0 (0 for none); got "
                      f"noise_std_alpha={noise_std_alpha}, noise_std_v={noise_std_v}.")
    check_threads(caller, num_threads)
    if not structure_proven(caller, check_structure, _StructureToken, indices, indptr,
                            v.shape[0]):
        check_all_rows(caller, indices, indptr, v.shape[0], "v")
    return 0


def row_squared_norms(const real_t[::1] data, const index_t[::1] indptr):
    """Squared L2 norm of every CSR row, accumulated in float64 in storage order.

    Raises
    ------
    ValidationError
        Unless ``indptr`` is non-decreasing from 0 to at most ``len(data)``
        (checked in one pass over ``indptr``, negligible next to the norms).
    """
    cdef Py_ssize_t n = indptr.shape[0] - 1
    cdef Py_ssize_t i
    cdef index_t k
    cdef double s
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
    out_arr = np.zeros(n, dtype=np.float64)
    cdef double[::1] out = out_arr
    with nogil:
        for i in range(n):
            s = 0.0
            for k in range(indptr[i], indptr[i + 1]):
                s = s + <double>data[k] * <double>data[k]
            out[i] = s
    return out_arr


def _parallel_gate_state(int num_threads):
    """The serial/parallel gate of :func:`run_dual_scd` for a thread count (diagnostics)."""
    cdef ParallelGate g = _gates[num_threads if 0 < num_threads < 8 else 8]
    return {"seconds_per_row_serial": g.per_row[0], "seconds_per_row_parallel": g.per_row[1],
            "parallel_preferred": bool(g.preferred), "retry_interval": g.interval,
            "batches_to_retry": g.countdown}
