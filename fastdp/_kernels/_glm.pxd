# cython: language_level=3
"""C-level building blocks of the sparse GLM kernels (shared by every solver family).

``cimport`` this file (``from fastdp._kernels._glm cimport ...``) to use the
inline helpers inside another ``nogil`` kernel; the Python entry points live
in ``_glm.pyx``.  X is read through the CSR view of ``_csr.pxd`` (float32 or
float64 values, int32 or int64 indices, column indices sorted within rows
for the column-split helpers); the losses come from ``_losses.pxd``.

Contents: the batch of rows a step reads and the columns a thread updates,
the clipped per-example gradient coefficient, the scatter of a batch into a
dense vector, and the lazy-noise bookkeeping.  The serial/parallel timing
gate is ``_gate.pxd``; the argument checks of the entry points are
``_checks.pxd``.
"""
from libc.math cimport fabs, sqrt
from libc.stdint cimport int32_t, int64_t

from fastdp._kernels._csr cimport (
    CsrRow, CsrView, FASTDP_PREFETCH, csr_row, index_t, lower_bound, prefetch_row, real_t,
    clipping_sq_norm, row_dot, row_dot_sq, row_value,
)
from fastdp._kernels._losses cimport loss_derivative


ctypedef struct RowBatch:
    # The rows a step reads: rows[0 .. count - 1], row numbers of X (any order).
    const int64_t* rows
    int64_t count


cdef inline RowBatch step_batch(const int64_t* rows, const int64_t* batch_ptr,
                                int64_t t) noexcept nogil:
    """The rows of step t (1-based) of an epoch kernel: ``rows[batch_ptr[t - 1]:batch_ptr[t]]``."""
    cdef RowBatch batch
    batch.rows = rows + batch_ptr[t - 1]
    batch.count = batch_ptr[t] - batch_ptr[t - 1]
    return batch


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
        sq = clipping_sq_norm(sq)   # never NaN
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
