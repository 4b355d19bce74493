# cython: language_level=3
"""C-level building blocks of the sparse GLM kernels (shared by every solver family).

``cimport`` this file (``from fastdp._kernels cimport _glm``) to use the inline
helpers inside another ``nogil`` kernel; the Python entry points live in
``_glm.pyx``.  Everything works on raw CSR pointers: ``data`` (float32 or
float64), ``indices`` and ``indptr`` (int32 or int64, the same type), column
indices sorted within rows for the column-split helpers.
"""
from libc.math cimport exp, fabs, sqrt
from libc.stdint cimport int32_t, int64_t


ctypedef fused real_t:
    float
    double

ctypedef fused index_t:
    int32_t
    int64_t


cdef enum:
    GLM_SQUARED = 0
    GLM_LOGISTIC = 1
    GLM_HINGE = 2


cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define FASTDP_GLM_PREFETCH(p) __builtin_prefetch((const void*)(p))
    #else
    #define FASTDP_GLM_PREFETCH(p) ((void)0)
    #endif
    """
    void FASTDP_GLM_PREFETCH(const void* p) nogil


cdef inline double loss_derivative(int loss, double z, double y) noexcept nogil:
    """d loss(z, y) / dz: squared ``z - y``; logistic ``-y / (1 + exp(y z))``;
    hinge ``-y`` if ``y z < 1`` else 0 (the subgradient 0 at the kink)."""
    cdef double yz, e
    if loss == GLM_SQUARED:
        return z - y
    yz = y * z
    if loss == GLM_LOGISTIC:
        if yz > 0.0:
            e = exp(-yz)
            return -y * e / (1.0 + e)
        return -y / (1.0 + exp(yz))
    if yz < 1.0:
        return -y
    return 0.0


cdef inline double row_dot(const real_t* data, const index_t* indices, index_t k0, index_t k1,
                           const double* theta) noexcept nogil:
    """sum_k data[k] theta[indices[k]] over the stored entries k0 <= k < k1 (storage order)."""
    cdef double s = 0.0
    cdef index_t k
    for k in range(k0, k1):
        s = s + <double>data[k] * theta[indices[k]]
    return s


cdef inline double row_dot_sq(const real_t* data, const index_t* indices, index_t k0, index_t k1,
                              const double* theta, double* sq_norm) noexcept nogil:
    """As :func:`row_dot`, also storing the squared L2 norm of the row in ``sq_norm[0]``."""
    cdef double s = 0.0
    cdef double q = 0.0
    cdef double x
    cdef index_t k
    for k in range(k0, k1):
        x = <double>data[k]
        s = s + x * theta[indices[k]]
        q = q + x * x
    sq_norm[0] = q
    return s


cdef inline double clipped_coefficient(double deriv, double sq_norm, double clip) noexcept nogil:
    """Coefficient c of ``clip(deriv * x, C) = c * x``: ``deriv / max(1, |deriv| ||x|| / C)``.

    ``clip = inf`` gives ``deriv``.  Computed as a product (no division by a
    possibly zero norm), so a zero row or a zero derivative gives exactly 0.
    """
    cdef double g = fabs(deriv) * sqrt(sq_norm)
    if g > clip:
        return deriv * (clip / g)
    return deriv


cdef inline void prefetch_row(const real_t* data, const index_t* indices,
                              const index_t* indptr, int64_t j) noexcept nogil:
    """Hint every cache line of row j (its column indices and values)."""
    cdef index_t k
    cdef index_t step = <index_t>(64 // sizeof(index_t))
    k = indptr[j]
    while k < indptr[j + 1]:
        FASTDP_GLM_PREFETCH(&indices[k])
        k = k + step
    step = <index_t>(64 // sizeof(real_t))
    k = indptr[j]
    while k < indptr[j + 1]:
        FASTDP_GLM_PREFETCH(&data[k])
        k = k + step


cdef inline index_t lower_bound(const index_t* indices, index_t lo, index_t hi,
                                int64_t c) noexcept nogil:
    """First k in [lo, hi) with ``indices[k] >= c`` (indices sorted within the row)."""
    cdef index_t mid
    while lo < hi:
        mid = lo + (hi - lo) // 2
        if indices[mid] < c:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef inline void scatter_rows(const double* coefs, double scale, const real_t* data,
                              const index_t* indices, const index_t* indptr,
                              const int64_t* rows, int64_t count, double* out,
                              int64_t c_lo, int64_t c_hi, bint whole_rows) noexcept nogil:
    """``out[c] += scale * coefs[q] * x_{rows[q], c}`` for q = 0..count-1 (in this order).

    With ``whole_rows`` every column is updated; otherwise only the columns
    in ``[c_lo, c_hi)`` (found by binary search).  Each column receives its
    updates in the same order either way, so splitting the columns among
    threads changes no bit of the result.
    """
    cdef int64_t q, j
    cdef index_t k, k0, k1
    cdef double z
    for q in range(count):
        j = rows[q]
        z = scale * coefs[q]
        if z == 0.0:
            continue
        if whole_rows:
            k0 = indptr[j]
            k1 = indptr[j + 1]
        else:
            k0 = lower_bound(indices, indptr[j], indptr[j + 1], c_lo)
            k1 = lower_bound(indices, k0, indptr[j + 1], c_hi)
        for k in range(k0, k1):
            out[indices[k]] = out[indices[k]] + z * <double>data[k]


# ---------------------------------------------------------------------------
# lazy-noise bookkeeping (shared by the mini-batch kernels with lazy Gaussian noise)
# ---------------------------------------------------------------------------

cdef inline int64_t collect_pending(const real_t* data, const index_t* indices,
                                    const index_t* indptr, const int64_t* batch, int64_t count,
                                    int32_t* last, int32_t t_prev, int64_t* columns,
                                    int32_t* pending) noexcept nogil:
    """List the columns the batch reads that still owe noise, and how many steps each owes.

    Columns are listed once, at their first occurrence in batch order and
    storage order, and marked as brought up to ``t_prev`` (``last[c] = t_prev``).
    Branch-free: every entry is written, the count only advances for a column
    with ``t_prev - last[c] > 0``.  ``columns`` and ``pending`` need room for
    n_features + 1 entries.  Returns the number of listed columns.
    """
    cdef int64_t q, j, c, n_owing = 0
    cdef index_t k
    cdef int32_t owed
    for q in range(count):
        j = batch[q]
        if q + 8 < count:
            FASTDP_GLM_PREFETCH(&indptr[batch[q + 8]])
        if q + 4 < count:
            prefetch_row(data, indices, indptr, batch[q + 4])
        for k in range(indptr[j], indptr[j + 1]):
            c = indices[k]
            owed = t_prev - last[c]
            columns[n_owing] = c
            pending[n_owing] = owed
            n_owing += owed > 0
            last[c] = t_prev
    return n_owing


# ---------------------------------------------------------------------------
# adaptive choice between the serial and the parallel path of a batch
# ---------------------------------------------------------------------------

cdef extern from *:
    """
    #if defined(_OPENMP)
    #include <omp.h>
    static double fastdp_glm_now(void) { return omp_get_wtime(); }
    #else
    static double fastdp_glm_now(void) { return 0.0; }
    #endif
    """
    double fastdp_glm_now() nogil


ctypedef struct ParallelGate:
    # Which path (serial or OpenMP) a kernel should take for the next batch.
    # Only speed depends on it: both paths give the same bits, so the choice
    # may follow measured times.  The preferred path's seconds per batch row
    # are smoothed (exponential moving average); every ``interval`` batches
    # the other path is re-tried for two batches, the first discarded (it pays
    # for moving the data between cores' caches, or for starting the threads),
    # the second compared.  A re-try that loses at least doubles the interval
    # (more when it lost by far; up to GATE_MAX_INTERVAL); one that wins
    # switches paths.  On a busy machine,
    # where OpenMP threads wait for a core at every barrier, the parallel path
    # is soon left; where it pays, it is kept.
    double per_row[2]
    int64_t seen[2]
    int64_t interval
    int64_t countdown
    int probe_batches
    int preferred


cdef enum:
    GATE_FIRST_INTERVAL = 32
    GATE_MAX_INTERVAL = 8192


cdef inline void gate_reset(ParallelGate* g) noexcept nogil:
    g.per_row[0] = -1.0
    g.per_row[1] = -1.0
    g.seen[0] = 0
    g.seen[1] = 0
    g.interval = GATE_FIRST_INTERVAL
    g.countdown = 0
    g.probe_batches = 0
    g.preferred = 1


cdef inline int gate_choose(ParallelGate* g) noexcept nogil:
    """1 for the parallel path, 0 for the serial one."""
    if g.seen[1] < 2:
        return 1
    if g.countdown <= 0:
        return 1 - g.preferred
    return g.preferred


cdef inline void gate_record(ParallelGate* g, int path, double seconds,
                             int64_t rows) noexcept nogil:
    """Fold the time of one batch of ``rows`` rows taken on ``path`` into the gate."""
    cdef double x, ratio
    if rows <= 0 or seconds <= 0.0:
        return
    x = seconds / <double>rows
    g.seen[path] += 1
    if g.seen[path] == 1:
        return                                  # warm-up: thread start, first touch
    if path == g.preferred:
        if g.per_row[path] < 0.0:
            g.per_row[path] = x
        else:
            g.per_row[path] = 0.75 * g.per_row[path] + 0.25 * x
        g.countdown -= 1
        return
    # a re-try of the other path
    g.probe_batches += 1
    if g.probe_batches < 2:
        return                                  # pays for the cache migration
    g.probe_batches = 0
    g.per_row[path] = x
    if g.per_row[g.preferred] < 0.0 or x < g.per_row[g.preferred]:
        g.preferred = path
        g.interval = GATE_FIRST_INTERVAL
    else:
        # wait at least twice as long, and long enough that re-tries cost at
        # most ~5% (a re-try is two batches at `ratio` times the price)
        ratio = x / g.per_row[g.preferred]
        g.interval = 2 * g.interval
        if ratio * 40.0 > <double>g.interval:
            g.interval = <int64_t>(ratio * 40.0)
        if g.interval > GATE_MAX_INTERVAL:
            g.interval = GATE_MAX_INTERVAL
    g.countdown = g.interval
