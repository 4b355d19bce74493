# cython: language_level=3
"""Argument checks shared by every Python entry point of the compiled kernels.

``cimport`` these (``from fastdp._kernels._checks cimport ...``) in an entry
point, before its ``nogil`` section, so that no argument can make a kernel
read or write out of bounds.  Every refusal is a
``fastdp.exceptions.ValidationError`` whose message says what to pass.

O(1) checks (lengths, ``indptr[0] == 0``, ``indptr[-1] == len(indices) <=
len(data)``) and O(len(rows)) checks (row and batch numbers in range, squared
norms not NaN) always run.  The scan of the CSR structure (row pointers,
sorted in-range column indices) costs a pass over the column indices read; it
is skipped only when the caller's ``check_structure`` is a token of
``fastdp._validation.structure_token`` made for the same arrays
(:func:`structure_proven`), which the solvers get in O(1) for the matrix
``check_X`` returned.  ``check_structure=False`` scans too.  A token whose
structure was trusted rather than scanned (a binary dataset opened without
``verify``) skips the scan but not the checks: each row is checked the
first time a kernel reads it (:func:`check_rows_as_read`, :func:`rows_unsafe`,
:func:`check_rows_read`), and a flawed row stops the kernel with an error
naming it (:func:`raise_failure`).
"""
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid
from libc.stdint cimport int64_t
from numpy.random cimport bitgen_t

from fastdp._kernels._csr cimport CsrView, FASTDP_PREFETCH, csr_check_rows, index_t, real_t
from fastdp._kernels._losses cimport is_loss_code


cdef enum:
    MAX_THREADS = 1024          # far more OpenMP threads than this crash the runtime

cdef enum:
    CSR_OK = 0
    CSR_BAD_POINTER = 1         # indptr[j] > indptr[j + 1], or outside [0, nnz]
    CSR_NOT_INCREASING = 2      # column indices of a row unsorted or repeated
    CSR_BAD_COLUMN = 3          # column index outside [0, n_features)
    CSR_BAD_ROW = 4             # row number outside [0, n_rows)

cdef enum:
    PROOF_NONE = 0              # no token: the structure must be scanned
    PROOF_SCANNED = 1           # scanned in this process (check_X, or verify=True)
    PROOF_TRUSTED = 2           # trusted from a binary dataset's header: check rows as read


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


cdef inline int64_t first_flawed_unchecked_row(const index_t* indices, const index_t* indptr,
                                               int64_t nnz, int64_t n_features,
                                               const int64_t* rows, int64_t count,
                                               unsigned char* row_checked,
                                               int* flaw) noexcept nogil:
    """Position in ``rows[0..count-1]`` (row numbers in range; NULL: rows 0..count-1 in
    storage order) of the first row not yet
    marked in ``row_checked`` that fails :func:`row_flaw`, or -1; ``flaw[0]`` says what is
    wrong.  Rows that pass are marked (checked once per process: one byte test per
    later read).  The rows' pointers are hinted ahead, as in :func:`first_flawed_row`."""
    cdef int64_t q, j
    cdef int f
    for q in range(count):
        j = rows[q] if rows != NULL else q
        if row_checked[j]:
            continue
        if rows != NULL and q + 4 < count and not row_checked[rows[q + 4]]:
            prefetch_row_start(indices, indptr, rows[q + 4], nnz)
        f = row_flaw(indices, indptr, j, nnz, n_features)
        if f != CSR_OK:
            flaw[0] = f
            return q
        row_checked[j] = 1
    return -1


cdef inline bint rows_unsafe(const CsrView[real_t, index_t]* X, const int64_t* rows,
                             int64_t count) noexcept nogil:
    """False when the kernel may read rows ``rows[0..count-1]`` of X (row numbers in range).

    A view whose structure was scanned (``X.row_checked`` NULL): False at once, the only
    cost.  A view with a row map (``_csr.pxd: csr_check_rows``): each row not read before
    is checked (:func:`row_flaw`: pointers, column indices strictly increasing within
    ``[0, X.check_below)``) and marked; at the first flawed one ``X.failure`` gets the
    row and its flaw and the result is True: the kernel stops before reading it (and
    the caller raises, :func:`raise_failure`).
    """
    cdef int flaw = CSR_OK
    cdef int64_t q
    if X.row_checked == NULL:
        return False
    q = first_flawed_unchecked_row(X.indices, X.indptr, X.nnz, X.check_below, rows, count,
                                   X.row_checked, &flaw)
    if q < 0:
        return False
    X.failure[0] = rows[q]
    X.failure[1] = flaw
    return True


cdef inline int raise_untrusted_row(str caller, int64_t j, int flaw,
                                    int64_t n_features) except -1:
    """The error of a flawed row found in a CSR whose structure was trusted, not scanned."""
    what = ("its column indices are not strictly increasing (unsorted, repeated, or one "
            f"out of range)"
            if flaw == CSR_NOT_INCREASING else
            f"a column index lies outside [0, {n_features}) (the header's n_features)"
            if flaw == CSR_BAD_COLUMN else "its row pointers (indptr) are invalid")
    return raise_invalid(
        f"{caller}: row {j} of X is corrupt: {what}. X was trusted as checked when it was "
        f"written (a binary dataset opened with fastdp.io.open_binary without verify), so the "
        f"file was damaged or forged afterwards; the call stopped before reading the row and "
        f"returned nothing. Open it with open_binary(path, verify=True) to check it in full, "
        f"or convert the LIBSVM file again (fastdp convert SRC DST).")


cdef inline int raise_failure(str caller, const int64_t* failure,
                              int64_t n_features) except -1:
    """Raise the error of the flawed row a kernel stopped at (:func:`rows_unsafe`), if any."""
    if failure[0] >= 0:
        return raise_untrusted_row(caller, failure[0], <int>failure[1], n_features)
    return 0


cdef inline int check_rows_as_read(CsrView[real_t, index_t]* X, int proof, object token,
                                   int64_t* failure) except -1:
    """With ``proof == PROOF_TRUSTED`` (:func:`structure_proven`), make the kernels reading
    X check each row as they first read it (``_csr.pxd: csr_check_rows``, the token's
    per-row map); otherwise nothing (a scanned structure is read unchecked)."""
    cdef unsigned char[::1] checked
    if proof != PROOF_TRUSTED:
        return 0
    checked = token.row_checked
    if checked.shape[0] != X.n_rows:
        return raise_invalid("the structure token's row map does not match X; make a new "
                             "token with fastdp._validation.structure_token(X).")
    csr_check_rows(X, &checked[0] if X.n_rows > 0 else NULL, <int64_t>token.n_features,
                   failure)
    if X.n_rows == 0:
        X.row_checked = NULL
    return 0


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


cdef inline int structure_proven(str caller, object token, object token_class,
                                 const index_t[::1] indices, const index_t[::1] indptr,
                                 int64_t n_features) except -1:
    """How ``token`` proves that these very arrays form canonical CSR whose column indices
    are all below ``n_features``: ``PROOF_NONE`` (scan), ``PROOF_SCANNED`` (scanned in this
    process: the O(nnz) scan can be skipped) or ``PROOF_TRUSTED`` (trusted from a binary
    dataset's header, not scanned: the scan is skipped, but every row is checked as the
    kernel first reads it, :func:`check_rows_as_read`).

    ``token`` is the kernel's ``check_structure`` argument; only a token made by
    ``fastdp._validation.structure_token`` (class ``token_class``) for the same
    memory (addresses, lengths and index width of ``indices`` and ``indptr``)
    proves anything.  ``True``, ``False`` or anything else: none (scan).  A
    token for a matrix with more columns than ``n_features``: none (scan; the
    scan tells whether a column index reaches the short array).  A token for
    other arrays: ValidationError (a caller's mistake).
    """
    if type(token) is not token_class:
        return PROOF_NONE
    if (<Py_ssize_t>token.itemsize != <Py_ssize_t>sizeof(index_t)
            or <Py_ssize_t>token.indices_length != indices.shape[0]
            or <Py_ssize_t>token.indptr_length != indptr.shape[0]
            or (indices.shape[0] > 0 and <size_t>&indices[0] != <size_t>token.indices_address)
            or (indptr.shape[0] > 0 and <size_t>&indptr[0] != <size_t>token.indptr_address)):
        return raise_invalid(
            f"{caller}: the check_structure token was made for other CSR arrays; pass "
            f"fastdp._validation.structure_token(X) with X.data, X.indices, X.indptr of the "
            f"same X (or check_structure=True).")
    if n_features < <int64_t>token.n_features:
        return PROOF_NONE
    return PROOF_SCANNED if token.row_checked is None else PROOF_TRUSTED


cdef inline int check_csr_structure(str caller, object token, object token_class,
                                    const index_t[::1] indices, const index_t[::1] indptr,
                                    int64_t n_features, str features_name) except -1:
    """The CSR structure of every row (:func:`check_all_rows`, O(nnz)), unless ``token``
    proves it (:func:`structure_proven`, O(1)): the check of the epoch kernels, which may
    read any row.  Returns the proof (``PROOF_SCANNED`` after a scan here); with
    ``PROOF_TRUSTED`` the kernel must check its rows as it reads them
    (:func:`check_rows_as_read`).  Call after :func:`check_csr`."""
    cdef int proof = structure_proven(caller, token, token_class, indices, indptr, n_features)
    if proof == PROOF_NONE:
        check_all_rows(caller, indices, indptr, n_features, features_name)
        return PROOF_SCANNED
    return proof


cdef inline int check_rows_read(str caller, object token, object token_class,
                                const index_t[::1] indices, const index_t[::1] indptr,
                                const int64_t[::1] rows, int64_t n_features,
                                str features_name) except -1:
    """The row numbers ``rows`` (in range, O(len(rows))) and, unless ``token`` proves it,
    the CSR structure of those rows (:func:`check_rows`): the check of the kernels that
    read the rows they are given.  With a trusted structure (``PROOF_TRUSTED``), the rows
    not checked before in this process are (:func:`first_flawed_unchecked_row`), so that
    a damaged binary dataset gets an error naming the row, never an out-of-bounds read.
    Call after :func:`check_csr`."""
    cdef int proof = structure_proven(caller, token, token_class, indices, indptr,
                                      n_features)
    cdef unsigned char[::1] checked
    cdef int flaw = CSR_OK
    cdef int64_t q
    cdef int64_t bound
    check_rows(caller, "rows", indices, indptr, &rows[0] if rows.shape[0] > 0 else NULL,
               rows.shape[0], proof == PROOF_NONE, n_features, features_name)
    if proof != PROOF_TRUSTED or rows.shape[0] == 0:
        return 0
    checked = token.row_checked
    if checked.shape[0] != indptr.shape[0] - 1:
        return raise_invalid(f"{caller}: the structure token's row map does not match X; make "
                             f"a new token with fastdp._validation.structure_token(X).")
    bound = <int64_t>token.n_features
    with nogil:
        q = first_flawed_unchecked_row(&indices[0] if indices.shape[0] > 0 else NULL,
                                       &indptr[0], indices.shape[0], bound, &rows[0],
                                       rows.shape[0], &checked[0], &flaw)
    if q >= 0:
        return raise_untrusted_row(caller, rows[q], flaw, bound)
    return 0


cdef inline int check_step_count(str caller, Py_ssize_t n_steps) except -1:
    """At most ``2**31 - 2`` steps in one call of an epoch kernel (the lazy-noise step
    counters are int32)."""
    if n_steps >= 2**31 - 1:
        return raise_invalid(f"{caller}: at most 2**31 - 2 steps per call; split the batches "
                             f"over several calls.")
    return 0


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
