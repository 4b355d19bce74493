# cython: language_level=3
"""C-level building blocks of the sparse GLM kernels (shared by every solver family).

``cimport`` this file (``from fastdp._kernels._glm cimport ...``) to use the
inline helpers inside another ``nogil`` kernel; the Python entry points live
in ``_glm.pyx``.  X is read through the CSR view of ``_csr.pxd`` (float32 or
float64 values, int32 or int64 indices, column indices sorted within rows
for the column-split helpers); the losses come from ``_losses.pxd``.

Contents: the clipped per-example gradient coefficient, the scatter of a
batch into a dense vector, the lazy-noise bookkeeping, the serial/parallel
timing gate, and the argument checks every entry point runs.
"""
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid
from libc.math cimport fabs, sqrt
from libc.stdint cimport int32_t, int64_t
from numpy.random cimport bitgen_t

from fastdp._kernels._csr cimport (
    CsrRow, CsrView, FASTDP_PREFETCH, csr_row, index_t, lower_bound, prefetch_row, real_t,
    row_dot, row_dot_sq, row_value,
)
from fastdp._kernels._losses cimport is_loss_code, loss_derivative


ctypedef struct RowBatch:
    # The rows a step reads: rows[0 .. count - 1], row numbers of X (any order).
    const int64_t* rows
    int64_t count


ctypedef struct ColumnRange:
    # The columns one thread updates: [lo, hi), or every column when ``every``
    # (then no binary search is needed to find them within a row).
    int64_t lo
    int64_t hi
    bint every


cdef inline ColumnRange every_column() noexcept nogil:
    cdef ColumnRange r
    r.lo = 0
    r.hi = 0
    r.every = True
    return r


cdef inline ColumnRange thread_columns(const int64_t* splits, int tid) noexcept nogil:
    """Thread tid's columns ``[splits[tid], splits[tid + 1])``."""
    cdef ColumnRange r
    r.lo = splits[tid]
    r.hi = splits[tid + 1]
    r.every = False
    return r


cdef inline void row_span(const CsrView[real_t, index_t]* X, int64_t j, ColumnRange columns,
                          index_t* k0, index_t* k1) noexcept nogil:
    """Storage positions ``[k0[0], k1[0])`` of row j's entries in the columns of
    ``columns`` (binary search unless it is every column)."""
    if columns.every:
        k0[0] = X.indptr[j]
        k1[0] = X.indptr[j + 1]
    else:
        k0[0] = lower_bound(X.indices, X.indptr[j], X.indptr[j + 1], columns.lo)
        k1[0] = lower_bound(X.indices, k0[0], X.indptr[j + 1], columns.hi)


# ---------------------------------------------------------------------------
# per-example gradients of a GLM
# ---------------------------------------------------------------------------

ctypedef struct ClippedLoss:
    # What the coefficient of x_j in the clipped gradient of example j needs.
    int loss                  # a LossCode
    double clip               # C, the L2 bound on each example's gradient
    bint clipping             # clip < inf
    const double* y           # labels, by row number
    const double* sq_norms    # squared row norms by row number; NULL: computed from the row


cdef inline double clipped_coefficient(double deriv, double sq_norm, double clip) noexcept nogil:
    """Coefficient c of ``clip(deriv * x, C) = c * x``: ``deriv / max(1, |deriv| ||x|| / C)``.

    ``clip = inf`` gives ``deriv``.  Computed as a product (no division by a
    possibly zero norm), so a zero row or a zero derivative gives exactly 0.
    """
    cdef double g = fabs(deriv) * sqrt(sq_norm)
    if g > clip:
        return deriv * (clip / g)
    return deriv


cdef inline double gradient_coefficient(const ClippedLoss* g, const CsrView[real_t, index_t]* X,
                                        int64_t j, const double* theta,
                                        double scale) noexcept nogil:
    """c_j with ``clip(loss'(x_j^T theta', y_j) x_j, C) = c_j x_j`` at ``theta' = scale * theta``."""
    cdef CsrRow[real_t, index_t] row = csr_row(X, j)
    cdef double sq = 0.0        # ||x_j||^2
    cdef double z               # x_j^T theta
    cdef double d               # loss'(scale z, y_j)
    if g.clipping and g.sq_norms == NULL:
        z = row_dot_sq(row, theta, &sq)
    else:
        z = row_dot(row, theta)
    d = loss_derivative(g.loss, scale * z, g.y[j])
    if not g.clipping:
        return d
    if g.sq_norms != NULL:
        sq = g.sq_norms[j]
    return clipped_coefficient(d, sq, g.clip)


cdef inline void scatter_rows(const CsrView[real_t, index_t]* X, RowBatch batch,
                              const double* coefs, double scale, double* out,
                              ColumnRange columns) noexcept nogil:
    """``out[c] += scale * coefs[q] * x_{rows[q], c}`` for q = 0..count-1 (in this order),
    for the columns c of ``columns``.

    Each column receives its updates in the same order whichever range it
    falls in, so splitting the columns among threads changes no bit of the
    result.
    """
    cdef int64_t q, j                   # position in the batch, row number
    cdef index_t k, k0, k1              # storage positions of the row's entries in range
    cdef double z                       # scale * coefs[q]
    cdef CsrRow[real_t, index_t] row    # row j with its map (mapped views only)
    cdef bint mapped = X.row_scale != NULL or X.row_shrink != NULL or X.tail_column >= 0
    for q in range(batch.count):
        j = batch.rows[q]
        z = scale * coefs[q]
        if z == 0.0:
            continue
        row_span(X, j, columns, &k0, &k1)
        if not mapped:
            for k in range(k0, k1):
                out[X.indices[k]] = out[X.indices[k]] + z * <double>X.data[k]
            continue
        row = csr_row(X, j)
        for k in range(k0, k1):
            out[X.indices[k]] = out[X.indices[k]] + z * row_value(&row, k - X.indptr[j])
        if row.tail_column >= 0 and (columns.every or (
                columns.lo <= row.tail_column and row.tail_column < columns.hi)):
            out[row.tail_column] = out[row.tail_column] + z * row.tail


# ---------------------------------------------------------------------------
# lazy-noise bookkeeping (shared by the mini-batch kernels with lazy Gaussian noise)
# ---------------------------------------------------------------------------

ctypedef struct LazyNoise:
    # Which noise each column still owes.  A column c read at step t has had
    # its noise drawn up to step last[c]; the steps in between are drawn as
    # one Gaussian when c is next read (see the kernels' module docstrings).
    int32_t* last             # per column (n_columns)
    int64_t* columns          # scratch (n_columns + 1): columns of a batch that owe noise
    int32_t* owed             # scratch (n_columns + 1): how many steps each of them owes
    double* normals           # scratch: standard normals for the draws


cdef inline int64_t collect_pending(const CsrView[real_t, index_t]* X, RowBatch batch,
                                    int32_t t_prev, LazyNoise* lazy) noexcept nogil:
    """List the columns the batch reads that still owe noise, and how many steps each owes.

    Columns are listed once, at their first occurrence in batch order and
    storage order, and marked as brought up to ``t_prev`` (``last[c] = t_prev``).
    Branch-free: every entry is written, the count only advances for a column
    with ``t_prev - last[c] > 0``.  Returns the number of listed columns.
    """
    cdef int64_t q, j, c                # position in the batch, row number, column
    cdef int64_t n_owing = 0
    cdef index_t k                      # storage position
    cdef int32_t owed
    for q in range(batch.count):
        j = batch.rows[q]
        if q + 8 < batch.count:
            FASTDP_PREFETCH(&X.indptr[batch.rows[q + 8]])
        if q + 4 < batch.count:
            prefetch_row(X, batch.rows[q + 4])
        for k in range(X.indptr[j], X.indptr[j + 1]):
            c = X.indices[k]
            owed = t_prev - lazy.last[c]
            lazy.columns[n_owing] = c
            lazy.owed[n_owing] = owed
            n_owing += owed > 0
            lazy.last[c] = t_prev
        if X.tail_column >= 0:          # a row map's appended entry comes last in the row
            c = X.tail_column
            owed = t_prev - lazy.last[c]
            lazy.columns[n_owing] = c
            lazy.owed[n_owing] = owed
            n_owing += owed > 0
            lazy.last[c] = t_prev
    return n_owing


cdef inline LazyNoise lazy_noise_scratch(int32_t[::1] last_noised, Py_ssize_t n_columns,
                                         Py_ssize_t n_normals, list keep) except *:
    """The :data:`LazyNoise` of a kernel call: ``last_noised`` and new scratch arrays
    for ``n_columns`` columns (one entry when lazy noise is off) and ``n_normals``
    normals; the arrays are appended to ``keep`` (they must outlive the call)."""
    import numpy as np
    cdef LazyNoise lazy
    columns = np.empty(n_columns + 1, dtype=np.int64)
    owed = np.empty(n_columns + 1, dtype=np.int32)
    normals = np.empty(max(n_normals, 1), dtype=np.float64)
    keep.extend((columns, owed, normals))
    cdef int64_t[::1] columns_view = columns
    cdef int32_t[::1] owed_view = owed
    cdef double[::1] normals_view = normals
    lazy.last = &last_noised[0] if last_noised.shape[0] > 0 else NULL
    lazy.columns = &columns_view[0]
    lazy.owed = &owed_view[0]
    lazy.normals = &normals_view[0]
    return lazy


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
    double started            # clock at the start of the batch being timed


cdef enum:
    GATE_FIRST_INTERVAL = 32
    GATE_MAX_INTERVAL = 8192
    GATE_SLOTS = 9            # one gate per thread count 0..7, the last shared by 8 and more


cdef inline void gate_reset(ParallelGate* g) noexcept nogil:
    g.per_row[0] = -1.0
    g.per_row[1] = -1.0
    g.seen[0] = 0
    g.seen[1] = 0
    g.interval = GATE_FIRST_INTERVAL
    g.countdown = 0
    g.probe_batches = 0
    g.preferred = 1
    g.started = 0.0


cdef inline void gates_reset(ParallelGate* gates, int count) noexcept nogil:
    cdef int i
    for i in range(count):
        gate_reset(&gates[i])


cdef inline int gate_slot(int64_t num_threads) noexcept nogil:
    """The gate of a thread count in a table of GATE_SLOTS gates."""
    return <int>num_threads if 0 < num_threads < GATE_SLOTS - 1 else GATE_SLOTS - 1


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


cdef inline int gate_begin(ParallelGate* g, bint eligible) noexcept nogil:
    """The path of the next batch (1 parallel, 0 serial), its clock started.

    ``eligible``: the batch may run in parallel at all (more than one thread,
    enough rows); if not, the serial path, untimed.
    """
    if not eligible:
        return 0
    g.started = fastdp_glm_now()
    return gate_choose(g)


cdef inline void gate_end(ParallelGate* g, bint eligible, int path, int64_t rows) noexcept nogil:
    """Record the batch begun by :func:`gate_begin` (nothing unless eligible)."""
    if eligible:
        gate_record(g, path, fastdp_glm_now() - g.started, rows)


cdef inline dict gate_state(const ParallelGate* g):
    """The gate as a dict (diagnostics for benchmarks)."""
    return {"seconds_per_row_serial": g.per_row[0], "seconds_per_row_parallel": g.per_row[1],
            "parallel_preferred": bool(g.preferred), "retry_interval": g.interval,
            "batches_to_retry": g.countdown}


# ---------------------------------------------------------------------------
# argument checks shared by every Python entry point of the kernels
# ---------------------------------------------------------------------------
# The entry points (``margins``, ``run_dual_scd``, ...) call these before
# their ``nogil`` sections, so that no argument can make a kernel read or
# write out of bounds.  O(1) checks (lengths, ``indptr[0] == 0``,
# ``indptr[-1] == len(indices) <= len(data)``) and O(len(rows)) checks (row
# and batch numbers in range, squared norms not NaN) always run.  The scan of
# the CSR structure (row pointers, sorted in-range column indices) costs a
# pass over the column indices read; it is skipped only when the caller's
# ``check_structure`` is a token of ``fastdp._validation.structure_token``
# made for the same arrays (:func:`structure_proven`), which the solvers get
# in O(1) for the matrix ``check_X`` returned.  ``check_structure=False`` no
# longer skips anything.  Every refusal is a
# ``fastdp.exceptions.ValidationError`` whose message says what to pass.

cdef enum:
    MAX_THREADS = 1024          # far more OpenMP threads than this crash the runtime

cdef enum:
    CSR_OK = 0
    CSR_BAD_POINTER = 1         # indptr[j] > indptr[j + 1], or outside [0, nnz]
    CSR_NOT_INCREASING = 2      # column indices of a row unsorted or repeated
    CSR_BAD_COLUMN = 3          # column index outside [0, n_features)
    CSR_BAD_ROW = 4             # row number outside [0, n_rows)


cdef inline int raise_invalid(str message) except -1:
    """Raise ``fastdp.exceptions.ValidationError(message)``."""
    from fastdp.exceptions import ValidationError
    raise ValidationError(message)


cdef inline bint bad_pointer(const index_t* indptr, int64_t j, int64_t nnz) noexcept nogil:
    """True unless ``0 <= indptr[j] <= indptr[j + 1] <= nnz`` (row j's storage range)."""
    return indptr[j] < 0 or indptr[j + 1] < indptr[j] or indptr[j + 1] > nnz


cdef inline int64_t first_bad_pointer(const index_t* indptr, int64_t n_rows,
                                      int64_t nnz) noexcept nogil:
    """First row j whose storage range is invalid (:func:`bad_pointer`), or -1."""
    cdef int64_t j
    for j in range(n_rows):
        if bad_pointer(indptr, j, nnz):
            return j
    return -1


cdef inline int row_flaw(const index_t* indices, const index_t* indptr, int64_t j, int64_t nnz,
                         int64_t n_features) noexcept nogil:
    """CSR_OK if row j can be read safely and is canonical, else the flaw found.

    Row j is fine when ``0 <= indptr[j] <= indptr[j + 1] <= nnz`` and its
    column indices are strictly increasing (sorted, no repeats) within
    ``[0, n_features)`` (so only the first and the last need a range check).
    Repeated columns are refused because the row norms used for clipping
    would be wrong.
    """
    cdef index_t k0 = indptr[j]
    cdef index_t k1 = indptr[j + 1]
    cdef index_t k
    cdef bint increasing = True
    if bad_pointer(indptr, j, nnz):
        return CSR_BAD_POINTER
    if k1 == k0:
        return CSR_OK
    for k in range(k0 + 1, k1):             # branch-free, so the compiler vectorises it
        increasing &= indices[k] > indices[k - 1]
    if not increasing:
        return CSR_NOT_INCREASING
    if indices[k0] < 0 or indices[k1 - 1] >= n_features:
        return CSR_BAD_COLUMN
    return CSR_OK


cdef inline void prefetch_row_start(const index_t* indices, const index_t* indptr, int64_t j,
                                    int64_t nnz) noexcept nogil:
    """Hint the first cache lines of row j's column indices (at most 4, and only for a
    plausible row range: the pointers are not checked yet; a prefetch never faults)."""
    cdef index_t k = indptr[j]
    cdef index_t k1 = indptr[j + 1]
    cdef index_t step = <index_t>(64 // sizeof(index_t))
    cdef index_t stop
    if k < 0 or k1 > nnz or k1 < k:
        return
    stop = k + 4 * step if k1 - k > 4 * step else k1
    while k < stop:
        FASTDP_PREFETCH(&indices[k])
        k = k + step


cdef inline int64_t first_flawed_row(const index_t* indices, const index_t* indptr,
                                     int64_t n_rows, int64_t nnz, int64_t n_features,
                                     const int64_t* rows, int64_t count, bint structure,
                                     int* flaw) noexcept nogil:
    """Position of the first flawed row read, or -1; ``flaw[0]`` says what is wrong.

    ``rows`` NULL: every row 0..n_rows-1 in storage order, by :func:`row_flaw`.
    Otherwise ``rows[0..count-1]``: each must lie in ``[0, n_rows)`` and, with
    ``structure``, pass :func:`row_flaw`.
    """
    cdef int64_t q, j               # position in rows, row number
    cdef int f                      # the flaw of row j
    if rows == NULL:
        for j in range(n_rows):
            f = row_flaw(indices, indptr, j, nnz, n_features)
            if f != CSR_OK:
                flaw[0] = f
                return j
        return -1
    for q in range(count):
        j = rows[q]
        if j < 0 or j >= n_rows:
            flaw[0] = CSR_BAD_ROW
            return q
        if structure:
            if q + 8 < count and 0 <= rows[q + 8] < n_rows:
                FASTDP_PREFETCH(&indptr[rows[q + 8]])
            if q + 4 < count and 0 <= rows[q + 4] < n_rows:
                prefetch_row_start(indices, indptr, rows[q + 4], nnz)
            f = row_flaw(indices, indptr, j, nnz, n_features)
            if f != CSR_OK:
                flaw[0] = f
                return q
    return -1


cdef inline int check_csr(str caller, Py_ssize_t n_data, const index_t[::1] indices,
                          const index_t[::1] indptr) except -1:
    """O(1): ``indptr`` is not empty, ``indptr[0] == 0``, ``indptr[-1] == len(indices) <= len(data)``."""
    cdef Py_ssize_t n = indptr.shape[0]
    if n < 1:
        return raise_invalid(
            f"{caller}: indptr is empty; the row pointer of a CSR matrix with N rows has N + 1 "
            f"entries (pass X.indptr).")
    if indptr[0] != 0 or indptr[n - 1] != indices.shape[0] or indices.shape[0] > n_data:
        return raise_invalid(
            f"{caller}: inconsistent CSR arrays (indptr[0] = {indptr[0]}, indptr[-1] = "
            f"{indptr[n - 1]}, len(indices) = {indices.shape[0]}, len(data) = {n_data}); need "
            f"indptr[0] == 0 and indptr[-1] == len(indices) <= len(data). Pass the data, indices "
            f"and indptr of one canonical CSR matrix (fastdp._validation.check_X).")
    return 0


cdef inline int _raise_row_flaw(str caller, str rows_name, const index_t[::1] indptr,
                                int64_t nnz, int64_t q, int64_t j, int flaw,
                                int64_t n_features, str features_name) except -1:
    cdef int64_t n_rows = indptr.shape[0] - 1
    if flaw == CSR_BAD_ROW:
        return raise_invalid(
            f"{caller}: {rows_name}[{q}] = {j} is outside [0, {n_rows}) (X has {n_rows} rows); "
            f"pass row numbers of X.")
    if flaw == CSR_BAD_POINTER:
        return raise_invalid(
            f"{caller}: indptr is not a CSR row pointer at row {j} (indptr[{j}] = {indptr[j]}, "
            f"indptr[{j + 1}] = {indptr[j + 1]}, len(indices) = {nnz}); it must be "
            f"non-decreasing from 0 to len(indices). Pass the arrays of one CSR matrix.")
    if flaw == CSR_NOT_INCREASING:
        return raise_invalid(
            f"{caller}: the column indices of row {j} are not strictly increasing (unsorted or "
            f"repeated); pass canonical CSR (X.sum_duplicates(), or fastdp._validation.check_X).")
    return raise_invalid(
        f"{caller}: row {j} has a column index outside [0, {n_features}); {features_name} "
        f"needs one entry per column of X (its length must exceed every column index).")


cdef inline int check_rows(str caller, str rows_name, const index_t[::1] indices,
                           const index_t[::1] indptr, const int64_t* rows, int64_t count,
                           bint structure, int64_t n_features, str features_name) except -1:
    """O(count): ``rows[0..count-1]`` lie in ``[0, n_rows)``; with ``structure`` also the
    CSR structure of those rows (:func:`row_flaw`, O(their nnz)).  Call after :func:`check_csr`."""
    cdef int flaw = CSR_OK
    cdef int64_t nnz = indices.shape[0]
    cdef const index_t* columns = &indices[0] if nnz > 0 else NULL
    cdef int64_t n_rows = indptr.shape[0] - 1
    cdef int64_t q                  # position of the first flawed row in rows, or -1
    if count <= 0:
        return 0
    with nogil:
        q = first_flawed_row(columns, &indptr[0], n_rows, nnz, n_features, rows, count,
                             structure, &flaw)
    if q < 0:
        return 0
    return _raise_row_flaw(caller, rows_name, indptr, nnz, q, rows[q], flaw, n_features,
                           features_name)


cdef inline int check_all_rows(str caller, const index_t[::1] indices, const index_t[::1] indptr,
                               int64_t n_features, str features_name) except -1:
    """O(nnz), one sequential pass: the CSR structure of every row (:func:`row_flaw`).
    Call after :func:`check_csr`."""
    cdef int flaw = CSR_OK
    cdef int64_t nnz = indices.shape[0]
    cdef const index_t* columns = &indices[0] if nnz > 0 else NULL
    cdef int64_t n_rows = indptr.shape[0] - 1
    cdef int64_t j                  # the first flawed row, or -1
    with nogil:
        j = first_flawed_row(columns, &indptr[0], n_rows, nnz, n_features, NULL, 0, True, &flaw)
    if j < 0:
        return 0
    return _raise_row_flaw(caller, "", indptr, nnz, j, j, flaw, n_features, features_name)


cdef inline bint structure_proven(str caller, object token, object token_class,
                                  const index_t[::1] indices, const index_t[::1] indptr,
                                  int64_t n_features) except -1:
    """True when ``token`` proves that these very arrays form canonical CSR whose column
    indices are all below ``n_features``, so the O(nnz) structure scan can be skipped.

    ``token`` is the kernel's ``check_structure`` argument; only a token made by
    ``fastdp._validation.structure_token`` (class ``token_class``) for the same
    memory (addresses, lengths and index width of ``indices`` and ``indptr``)
    proves anything.  ``True``, ``False`` or anything else: False (scan).  A
    token for a matrix with more columns than ``n_features``: False (scan; the
    scan tells whether a column index reaches the short array).  A token for
    other arrays: ValidationError (a caller's mistake).
    """
    if type(token) is not token_class:
        return False
    if (<Py_ssize_t>token.itemsize != <Py_ssize_t>sizeof(index_t)
            or <Py_ssize_t>token.indices_length != indices.shape[0]
            or <Py_ssize_t>token.indptr_length != indptr.shape[0]
            or (indices.shape[0] > 0 and <size_t>&indices[0] != <size_t>token.indices_address)
            or (indptr.shape[0] > 0 and <size_t>&indptr[0] != <size_t>token.indptr_address)):
        return raise_invalid(
            f"{caller}: the check_structure token was made for other CSR arrays; pass "
            f"fastdp._validation.structure_token(X) with X.data, X.indices, X.indptr of the "
            f"same X (or check_structure=True).")
    return n_features >= <int64_t>token.n_features


cdef inline int64_t check_row_map(str caller, Py_ssize_t n_scale, Py_ssize_t n_shrink,
                                  int64_t tail_column, int64_t n_rows,
                                  int64_t n_columns) except -2:
    """The row map of a kernel call (``_csr.pxd: csr_set_row_map``); returns the number of
    columns the *stored* entries must stay below (``tail_column`` when there is an appended
    entry, so that it comes after them, else ``n_columns``).

    ``n_scale``, ``n_shrink``: lengths of ``row_scale`` and ``row_shrink`` (-1 when not
    given), one per row of X; ``-1 <= tail_column < n_columns``.
    """
    if n_scale >= 0 and n_scale != n_rows:
        return raise_invalid(f"{caller}: row_scale has length {n_scale}; it needs one factor "
                             f"per row of X ({n_rows}).")
    if n_shrink >= 0 and n_shrink != n_rows:
        return raise_invalid(f"{caller}: row_shrink has length {n_shrink}; it needs one "
                             f"factor per row of X ({n_rows}).")
    if not (-1 <= tail_column < n_columns):
        return raise_invalid(f"{caller}: tail_column = {tail_column} must be -1 (none) or a "
                             f"column of the model, in [0, {n_columns}).")
    return tail_column if tail_column >= 0 else n_columns


cdef inline int check_sq_norms(str caller, const double[::1] sq_norms) except -1:
    """O(N): every squared row norm is >= 0 and not NaN (a NaN would turn clipping off:
    ``NaN > clip`` is false).  ``inf`` is allowed: such a row's clipped update is 0."""
    cdef Py_ssize_t n = sq_norms.shape[0]
    cdef Py_ssize_t i
    cdef Py_ssize_t bad = -1
    with nogil:
        for i in range(n):
            if not (sq_norms[i] >= 0.0):
                bad = i
                break
    if bad >= 0:
        return raise_invalid(
            f"{caller}: sq_norms[{bad}] = {sq_norms[bad]}; squared row norms must be >= 0 "
            f"and not NaN (pass _scd.row_squared_norms(X.data, X.indptr)).")
    return 0


cdef inline int check_length(str caller, str name, Py_ssize_t actual, Py_ssize_t expected,
                             str meaning) except -1:
    """``actual == expected``; ``meaning`` says what the entries stand for."""
    if actual != expected:
        return raise_invalid(f"{caller}: {name} has length {actual}; it needs {meaning} "
                             f"({expected}).")
    return 0


cdef inline int check_min_length(str caller, str name, Py_ssize_t actual, Py_ssize_t needed,
                                 str meaning) except -1:
    """``actual >= needed``; ``meaning`` says what the entries stand for."""
    if actual < needed:
        return raise_invalid(f"{caller}: {name} has length {actual}; it needs at least "
                             f"{needed} entries ({meaning}).")
    return 0


cdef inline int check_threads(str caller, int64_t num_threads) except -1:
    """``num_threads <= MAX_THREADS`` (values below 1 keep meaning one thread where allowed)."""
    if num_threads > MAX_THREADS:
        return raise_invalid(f"{caller}: num_threads = {num_threads} is more than "
                             f"{<int>MAX_THREADS}; use at most the number of cores.")
    return 0


cdef inline int64_t check_batches(str caller, const int64_t[::1] batch_ptr,
                                  const int64_t[::1] batch_idx, int64_t n_rows) except -1:
    """The batches of an epoch kernel; returns the size of the largest one.

    O(steps + entries): ``batch_ptr`` non-decreasing within ``[0, len(batch_idx)]``
    and every row number read (``batch_idx[batch_ptr[0]:batch_ptr[-1]]``) in
    ``[0, n_rows)``.
    """
    cdef Py_ssize_t n_ptr = batch_ptr.shape[0]
    cdef Py_ssize_t t, q
    cdef int64_t largest = 0
    cdef int64_t bad_step = -1
    cdef int64_t bad_row = -1
    cdef int64_t first, last
    if n_ptr < 2:
        return 0
    first = batch_ptr[0]
    last = batch_ptr[n_ptr - 1]
    with nogil:
        for t in range(1, n_ptr):
            if batch_ptr[t] < batch_ptr[t - 1]:
                bad_step = t
                break
            if batch_ptr[t] - batch_ptr[t - 1] > largest:
                largest = batch_ptr[t] - batch_ptr[t - 1]
        if bad_step < 0 and 0 <= first and last <= batch_idx.shape[0]:
            for q in range(first, last):
                if batch_idx[q] < 0 or batch_idx[q] >= n_rows:
                    bad_row = q
                    break
    if bad_step >= 0 or first < 0 or last > batch_idx.shape[0]:
        return raise_invalid(
            f"{caller}: batch_ptr must be non-decreasing within [0, len(batch_idx) = "
            f"{batch_idx.shape[0]}] (batch t is batch_idx[batch_ptr[t]:batch_ptr[t + 1]]).")
    if bad_row >= 0:
        return raise_invalid(
            f"{caller}: batch_idx[{bad_row}] = {batch_idx[bad_row]} is outside [0, {n_rows}) "
            f"(X has {n_rows} rows); pass row numbers of X.")
    return largest


cdef inline int check_loss_code(str caller, long loss_code) except -1:
    """``loss_code`` is a member of ``fastdp._kernels._losses.LossCode``."""
    if not is_loss_code(loss_code):
        return raise_invalid(f"{caller}: unknown loss code {loss_code}; use a member of "
                             f"fastdp._kernels._losses.LossCode (LOSS_SQUARED = 0, "
                             f"LOSS_LOGISTIC = 1, LOSS_HINGE = 2).")
    return 0


cdef inline bitgen_t* bit_generator_of(str caller, object bit_generator) except NULL:
    """The C state of a numpy ``BitGenerator`` (the caller holds its lock)."""
    capsule = getattr(bit_generator, "capsule", None)
    if capsule is None or not PyCapsule_IsValid(capsule, b"BitGenerator"):
        raise_invalid(f"{caller}: bit_generator must be a numpy BitGenerator.")
    return <bitgen_t*> PyCapsule_GetPointer(capsule, b"BitGenerator")


cdef inline object column_splits_of(str caller, object column_splits, int nt, Py_ssize_t m,
                                    str what):
    """The threads' column ranges as an int64 array ``0 = s_0 <= ... <= s_nt = m``:
    ``column_splits`` checked, or equal ranges when it is None (``what`` names m)."""
    import numpy as np
    if column_splits is None:
        return (np.arange(nt + 1, dtype=np.int64) * m) // nt
    splits = np.ascontiguousarray(column_splits, dtype=np.int64)
    if (splits.shape[0] != nt + 1 or splits[0] != 0 or splits[nt] != m
            or np.any(np.diff(splits) < 0)):
        raise_invalid(f"{caller}: column_splits must be non-decreasing from 0 to M = {what}, "
                      f"length num_threads + 1.")
    return splits
