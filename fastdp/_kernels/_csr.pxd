# cython: language_level=3
"""A read-only view of a CSR matrix for the compiled kernels, and its row accessor.

Every kernel reads X through one :data:`CsrView` (its three arrays, its row
count and its number of stored entries) instead of passing the raw pointers
and a row number to each helper; :func:`csr_row` gives a row as a pointer to
its values, a pointer to their column indices and their count (the role of
scikit-learn's ``SequentialDataset`` or lightning's ``RowDataset``).

The view is a C++ template over the value type (``float`` or ``double``) and
the index type (``int32_t`` or ``int64_t``, the same for ``indices`` and
``indptr``), so a kernel written with the fused types :data:`real_t` and
:data:`index_t` reads float32/float64 values and int32/int64 indices without
converting them.  Values are read as ``double`` wherever they are used:
arithmetic is float64 whatever the storage type.

A view may also carry a *row map* (:func:`csr_set_row_map`): the rows the
kernel reads are then ``x_j`` with every stored value multiplied by a per-row
factor, optionally by a second per-row factor, and with one constant entry
appended at a column past the stored ones (the estimators' intercept column).
This is exactly the matrix ``fastdp._mapped_rows.MappedRows.tocsr()`` writes
out, value for value (the same roundings in the same order), read without a
copy of X: O(n) extra memory instead of O(nnz).  :func:`csr_row` resolves a
row's map once; :func:`row_value` and :attr:`CsrRow.tail` give its values.

Nothing here checks anything: the entry points check the arrays first
(``_checks.pxd``).  A view over a CSR whose structure was *trusted* rather than
scanned (a binary dataset opened without ``verify``, ``fastdp.io.binary``) also
carries a per-row "checked" map (:func:`csr_check_rows`): the kernels then check
each row the first time they read it (``_checks.pxd: rows_unsafe``) and stop
with an error flag instead of reading out of bounds.
"""
from libc.math cimport INFINITY
from libc.stdint cimport int32_t, int64_t


ctypedef fused real_t:
    float
    double

ctypedef fused index_t:
    int32_t
    int64_t

ctypedef fused coef_t:      # a dense vector beside X (theta, w, v): float64, or float32
    float                   # for DP-SCD's v, which has the dtype of X
    double


cdef extern from *:
    """
    template <typename Real, typename Index>
    struct fastdp_csr_view {
        const Real* data;
        const Index* indices;
        const Index* indptr;
        int64_t n_rows;
        int64_t nnz;
        const double* row_scale;
        const double* row_shrink;
        double tail_value;
        int64_t tail_column;
        unsigned char* row_checked;
        int64_t check_below;
        int64_t* failure;
    };
    template <typename Real, typename Index>
    struct fastdp_csr_row {
        const Real* values;
        const Index* columns;
        Index nnz;
        int mapped;
        Real scale;
        double shrink;
        double tail;
        int64_t tail_column;
    };
    #if defined(__GNUC__) || defined(__clang__)
    #define FASTDP_PREFETCH(p) __builtin_prefetch((const void*)(p))
    #else
    #define FASTDP_PREFETCH(p) ((void)0)
    #endif
    """
    cdef cppclass CsrView "fastdp_csr_view" [Real, Index]:
        const Real* data        # the stored values (NULL when there are none)
        const Index* indices    # the column index of each stored value (NULL when none)
        const Index* indptr     # row j is stored at positions indptr[j] .. indptr[j + 1] - 1
        int64_t n_rows          # len(indptr) - 1
        int64_t nnz             # len(indices)
        const double* row_scale     # per-row factor of the stored values, or NULL (none)
        const double* row_shrink    # per-row second factor (after rounding), or NULL (none)
        double tail_value       # the value of the appended entry (before the second factor)
        int64_t tail_column     # its column, or -1: no appended entry
        unsigned char* row_checked  # NULL: the structure was scanned, rows are read unchecked;
                                # else one flag per row, 1 once checked (``csr_check_rows``)
        int64_t check_below     # the bound of the column indices of a checked row
        int64_t* failure        # failure[0]: the first flawed row found (-1: none), [1]: its flaw

    cdef cppclass CsrRow "fastdp_csr_row" [Real, Index]:
        const Real* values      # the row's stored values
        const Index* columns    # their column indices (increasing in canonical CSR)
        Index nnz               # how many there are
        int mapped              # the stored values are read through scale and shrink
        Real scale              # the row's factor (1 without a map)
        double shrink           # the row's second factor (1 without one)
        double tail             # the appended entry's value as read (when tail_column >= 0)
        int64_t tail_column     # its column, or -1: none

    void FASTDP_PREFETCH(const void* p) nogil   # a cache hint; never faults


cdef inline CsrView[real_t, index_t] values_view(const real_t[::1] data,
                                                const index_t[::1] indptr) noexcept:
    """A view of a CSR matrix's values and row pointers only (``indices`` NULL: for
    readers of the values alone, such as :func:`row_sq_norm`)."""
    cdef CsrView[real_t, index_t] X
    X.data = &data[0] if data.shape[0] > 0 else NULL
    X.indices = NULL
    X.indptr = &indptr[0]
    X.n_rows = indptr.shape[0] - 1
    X.nnz = data.shape[0]
    X.row_scale = NULL
    X.row_shrink = NULL
    X.tail_value = 0.0
    X.tail_column = -1
    X.row_checked = NULL
    X.check_below = 0
    X.failure = NULL
    return X


cdef inline CsrView[real_t, index_t] csr_view(const real_t[::1] data, const index_t[::1] indices,
                                              const index_t[::1] indptr) noexcept:
    """The view of a CSR matrix's arrays (``indptr`` must not be empty)."""
    cdef CsrView[real_t, index_t] X = values_view(data, indptr)
    X.indices = &indices[0] if indices.shape[0] > 0 else NULL
    X.nnz = indices.shape[0]
    return X


cdef inline void csr_check_rows(CsrView[real_t, index_t]* X, unsigned char* row_checked,
                                int64_t check_below, int64_t* failure) noexcept:
    """Make the kernels check every row of X as they first read it (``_checks.pxd:
    rows_unsafe``): its column indices strictly increasing within ``[0, check_below)``.
    ``row_checked``: one flag per row, kept between calls (a row is checked once per
    process); ``failure``: two int64 the kernel fills with the first flawed row (or -1)
    and its flaw.  For a CSR whose structure was trusted, not scanned (a binary dataset
    opened without ``verify``); a view without it reads every row unchecked."""
    X.row_checked = row_checked
    X.check_below = check_below
    X.failure = failure
    failure[0] = -1
    failure[1] = 0


cdef inline void csr_set_row_map(CsrView[real_t, index_t]* X, const double* row_scale,
                                 const double* row_shrink, double tail_value,
                                 int64_t tail_column) noexcept:
    """Read X through a row map: row j's stored value x becomes
    ``(real)((double)(real)(x * (real)row_scale[j]) * row_shrink[j])`` (NULL: that
    factor is left out) and, if ``tail_column >= 0``, the row gets one more entry,
    ``(real)((double)(real)tail_value * row_shrink[j])``, at column ``tail_column``
    (after the stored ones, which must all lie below it)."""
    X.row_scale = row_scale
    X.row_shrink = row_shrink
    X.tail_value = tail_value
    X.tail_column = tail_column


cdef inline CsrView[real_t, index_t] mapped_view(
        const real_t[::1] data, const index_t[::1] indices, const index_t[::1] indptr,
        const double[::1] row_scale, const double[::1] row_shrink, double tail_value,
        int64_t tail_column) noexcept:
    """The view of CSR arrays read through an optional row map (``row_scale``,
    ``row_shrink``: None for none; ``tail_column`` -1 for no appended entry); the entry
    points check the map first (``_checks.pxd: check_row_map``)."""
    cdef CsrView[real_t, index_t] X = csr_view(data, indices, indptr)
    csr_set_row_map(&X, &row_scale[0] if row_scale is not None and row_scale.shape[0] > 0 else NULL,
                    &row_shrink[0] if row_shrink is not None and row_shrink.shape[0] > 0 else NULL,
                    tail_value, tail_column)
    return X


cdef inline real_t map_value(real_t x, real_t scale, double shrink) noexcept nogil:
    """``(real)((double)(real)(x * scale) * shrink)``: the two roundings of the
    materialised map (a factor of 1 changes no bit)."""
    x = <real_t>(x * scale)
    return <real_t>(<double>x * shrink)


cdef inline CsrRow[real_t, index_t] csr_row(const CsrView[real_t, index_t]* X,
                                            int64_t j) noexcept nogil:
    """Row j of X: its values, their columns and their count."""
    cdef CsrRow[real_t, index_t] row
    cdef index_t start = X.indptr[j]
    row.values = X.data + start
    row.columns = X.indices + start
    row.nnz = X.indptr[j + 1] - start
    row.mapped = X.row_scale != NULL or X.row_shrink != NULL
    row.scale = <real_t>X.row_scale[j] if X.row_scale != NULL else <real_t>1
    row.shrink = X.row_shrink[j] if X.row_shrink != NULL else 1.0
    row.tail_column = X.tail_column
    row.tail = 0.0
    if X.tail_column >= 0:
        row.tail = <double>map_value(<real_t>X.tail_value, <real_t>1, row.shrink)
    return row


cdef inline double row_value(const CsrRow[real_t, index_t]* row, index_t p) noexcept nogil:
    """The value of the row's p-th stored entry as the kernel reads it (row map applied)."""
    if row.mapped:
        return <double>map_value(row.values[p], row.scale, row.shrink)
    return <double>row.values[p]


cdef inline void prefetch_row(const CsrView[real_t, index_t]* X, int64_t j) noexcept nogil:
    """Hint every cache line of row j (its column indices, then its values)."""
    cdef index_t k                                          # storage position
    cdef index_t step = <index_t>(64 // sizeof(index_t))    # indices per cache line
    k = X.indptr[j]
    while k < X.indptr[j + 1]:
        FASTDP_PREFETCH(&X.indices[k])
        k = k + step
    step = <index_t>(64 // sizeof(real_t))                  # values per cache line
    k = X.indptr[j]
    while k < X.indptr[j + 1]:
        FASTDP_PREFETCH(&X.data[k])
        k = k + step


cdef inline index_t lower_bound(const index_t* columns, index_t lo, index_t hi,
                                int64_t c) noexcept nogil:
    """First position k in [lo, hi) with ``columns[k] >= c`` (``columns`` sorted there)."""
    cdef index_t mid
    while lo < hi:
        mid = lo + (hi - lo) // 2
        if columns[mid] < c:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef inline double row_dot(CsrRow[real_t, index_t] row, const coef_t* theta) noexcept nogil:
    """``x^T theta`` over the row's stored entries, in storage order, in float64
    (``theta`` float64, or float32 read as float64)."""
    cdef double s = 0.0
    cdef index_t p                      # position within the row
    if row.mapped:
        for p in range(row.nnz):
            s = s + row_value(&row, p) * <double>theta[row.columns[p]]
    else:
        for p in range(row.nnz):
            s = s + <double>row.values[p] * <double>theta[row.columns[p]]
    if row.tail_column >= 0:
        s = s + row.tail * <double>theta[row.tail_column]
    return s


cdef inline double row_dot_sq(CsrRow[real_t, index_t] row, const double* theta,
                              double* sq_norm) noexcept nogil:
    """As :func:`row_dot`, also storing the row's squared L2 norm in ``sq_norm[0]``
    (the bits of :func:`row_sq_norm`: the same squares summed in the same order)."""
    cdef double s = 0.0
    cdef double q = 0.0                 # running squared norm
    cdef double x
    cdef index_t p
    if row.mapped:                      # the map's test outside the loops, as in row_dot
        for p in range(row.nnz):
            x = row_value(&row, p)
            s = s + x * theta[row.columns[p]]
            q = q + x * x
    else:
        for p in range(row.nnz):
            x = <double>row.values[p]
            s = s + x * theta[row.columns[p]]
            q = q + x * x
    if row.tail_column >= 0:
        x = row.tail
        s = s + x * theta[row.tail_column]
        q = q + x * x
    sq_norm[0] = q
    return s


cdef inline double row_sq_norm(const CsrRow[real_t, index_t]* row) noexcept nogil:
    """The row's squared L2 norm as a kernel reads it: the squares of its values (row map
    applied) summed in float64 in storage order, the appended entry last.

    The one definition of a row's squared norm: ``_scd.row_squared_norms`` (with the same
    row map) computes it for every row, and :func:`row_dot_sq` gets the same bits
    alongside its product.
    """
    cdef double q = 0.0
    cdef double x
    cdef index_t p
    if row.mapped:
        for p in range(row.nnz):
            x = row_value(row, p)
            q = q + x * x
    else:
        for p in range(row.nnz):
            x = <double>row.values[p]
            q = q + x * x
    if row.tail_column >= 0:
        q = q + row.tail * row.tail
    return q


cdef inline double clipping_sq_norm(double q) noexcept nogil:
    """A squared norm computed from the row as read, made safe for the clipping test: a NaN
    (a NaN value in the row or its map) becomes ``inf``, whose clipped gradient is 0,
    instead of turning the clipping off (``NaN > C`` is false).  Sums of squares are never
    negative; every other value is returned unchanged."""
    if q >= 0.0:
        return q
    return INFINITY
