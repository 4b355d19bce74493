"""Input validation shared by every fastdp estimator and solver.

This module is the single place where user input is checked and brought into
the layout the compiled kernels expect:

* feature matrices become either a *canonical* CSR matrix (sorted column
  indices, no duplicate entries, ``indices`` and ``indptr`` of one integer
  type) or a C-contiguous dense array, with float32 or float64 values;
* labels become float64 arrays (``{-1, +1}`` for binary tasks);
* hyper-parameters and privacy parameters are checked for range;
* ``random_state`` becomes a :class:`numpy.random.Generator`.

Every failure raises :class:`fastdp.exceptions.ValidationError` (a
``ValueError``) whose message says what to do about it.

Privacy
-------
Validation reads the private data (for example to reject a row whose norm
exceeds the bound a mechanism needs) but releases nothing except the decision
to reject, which is raised to the *caller* before any mechanism runs. The
error messages name row indices and counts of offending rows: they are meant
for the data owner, not for publication. No function here spends privacy.
"""

import itertools
import math
import numbers
import weakref

import numpy as np
import scipy.sparse as sp

from fastdp.exceptions import ValidationError

__all__ = [
    "check_sparse_structure",
    "structure_token",
    "check_X",
    "row_norms",
    "check_labels",
    "check_X_y",
    "check_real",
    "check_real_array",
    "check_positive",
    "check_integer",
    "check_epsilon",
    "check_delta",
    "check_in_interval",
    "check_in_open_interval",
    "check_privacy_params",
    "check_random_state",
    "check_batch_size",
]

_FLOAT_DTYPES = (np.float64, np.float32)
_INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))
_ROW_NORM_FIX = (
    "Rescale each example to norm at most 1 first: use "
    "fastdp.preprocessing.normalize_rows (unit rows) or "
    "fastdp.preprocessing.clip_rows (shrink only rows that are too long), "
    "or pass normalize=True to the estimator. Both are per-example "
    "operations and cost no privacy."
)


# --------------------------------------------------------------------------
# feature matrices
# --------------------------------------------------------------------------


def _normalise_dtype_spec(dtype):
    """Return the accepted dtypes as a tuple of :class:`numpy.dtype`."""
    if dtype is None:
        return ()
    if isinstance(dtype, (list, tuple)):
        return tuple(np.dtype(d) for d in dtype)
    return (np.dtype(dtype),)


def _target_dtype(current, accepted):
    """Dtype to use for values of dtype ``current`` given the accepted dtypes."""
    if not accepted or current in accepted:
        return current
    if current.kind == "c":
        raise ValidationError(
            f"X has complex dtype {current}: Complex data not supported; fastdp works with real numbers. "
            "Pass the real part (X.real) or another real-valued representation."
        )
    if np.dtype(np.float64) in accepted:
        return np.dtype(np.float64)
    return accepted[0]


#: Entries per block of the O(nnz) checks of sparse input: each allocates
#: temporaries for one block of rows only (about 8 MiB of float64).
_BLOCK_ENTRIES = 1 << 20


def _row_blocks(indptr, max_entries=None):
    """Consecutive row ranges ``(r0, r1)`` covering all rows, each holding at most
    ``max_entries`` entries (or a single longer row)."""
    max_entries = _BLOCK_ENTRIES if max_entries is None else max_entries
    n_rows = indptr.shape[0] - 1
    r0 = 0
    largest = np.iinfo(indptr.dtype).max
    while r0 < n_rows:
        key = int(indptr[r0]) + max_entries
        # a key of indptr's own dtype: with a Python int, numpy casts all of an int32
        # indptr to int64 on every call (O(n) per block, quadratic over X)
        key = indptr.dtype.type(key) if key <= largest else key
        r1 = int(np.searchsorted(indptr, key, side="right")) - 1
        r1 = min(max(r1, r0 + 1), n_rows)
        yield r0, r1
        r0 = r1


def _first_bad_row_message(bad_rows, what):
    first = int(bad_rows[0])
    return (
        f"X contains {what} in {len(bad_rows)} row(s) (first: row {first}). "
        "Remove or impute these values before fitting (for example with "
        "sklearn.impute.SimpleImputer or by dropping the rows)."
    )


def _reject_non_finite_dense(X):
    finite = np.isfinite(X)
    if finite.all():
        return
    bad_rows = np.flatnonzero(~finite.all(axis=1))
    what = "NaN" if np.isnan(X[bad_rows[0]]).any() else "infinity"
    raise ValidationError(_first_bad_row_message(bad_rows, what))


def _reject_non_finite_csr(X):
    data = X.data
    bad = []  # positions of non-finite values, block by block (bounded temporaries)
    for r0, r1 in _row_blocks(X.indptr):
        k0, k1 = int(X.indptr[r0]), int(X.indptr[r1])
        finite = np.isfinite(data[k0:k1])
        if not finite.all():
            bad.append(k0 + np.flatnonzero(~finite))
    if not bad:
        return
    bad_positions = np.concatenate(bad)
    bad_rows = np.unique(np.searchsorted(X.indptr, bad_positions, side="right") - 1)
    what = "NaN" if np.isnan(data[bad_positions[0]]) else "infinity"
    raise ValidationError(_first_bad_row_message(bad_rows, what))


def _reject_empty(shape):
    n_samples, n_features = shape
    if n_samples == 0:
        raise ValidationError(
            f"X has shape {shape}: it has no examples (0 rows). Pass at least one "
            "example; check that filtering or splitting did not remove them all."
        )
    if n_features == 0:
        raise ValidationError(
            f"X has shape {shape}: it has no features (0 columns). Pass at least one "
            "feature column."
        )


# --------------------------------------------------------------------------
# sparse structure, checked before scipy converts anything
# --------------------------------------------------------------------------
#
# scipy's format conversions (coo -> csr, csc -> csr, bsr -> csr, dia -> csr,
# lil -> csr, dok -> coo) run compiled loops that trust the index arrays: an
# index edited after construction (``X.row[0] = 10**6``) makes them write out
# of bounds (a segfault, or silent heap corruption).  These checks look only
# at the arrays, vectorised and O(nnz), and never call a scipy method that
# reads the indices.

_REBUILD = (
    "Rebuild the matrix from valid arrays (e.g. scipy.sparse.csr_matrix((data, indices, "
    "indptr), shape=...) or scipy.sparse.coo_matrix((data, (row, col)), shape=...)); do not "
    "edit its index arrays in place."
)


def _malformed(fmt, what):
    return ValidationError(f"Malformed {fmt.upper()} matrix: {what}. {_REBUILD}")


def _sparse_shape(X):
    shape = getattr(X, "shape", None)
    if (not isinstance(shape, tuple) or len(shape) != 2
            or not all(isinstance(d, numbers.Integral) and not isinstance(d, bool) and d >= 0
                       for d in shape)):
        ndim = len(shape) if isinstance(shape, tuple) else "?"
        raise ValidationError(
            f"X must be 2-D (n_samples, n_features); got a {ndim}-D sparse array with shape "
            f"{shape!r}. Reshape it, e.g. X.reshape(1, -1) for a single example."
        )
    return int(shape[0]), int(shape[1])


def _index_array(fmt, name, array):
    """``array`` if it is a 1-D integer ndarray, else a clear error."""
    if not isinstance(array, np.ndarray) or array.ndim != 1 or array.dtype.kind not in "iu":
        what = (f"a {array.ndim}-D array of dtype {array.dtype}" if isinstance(array, np.ndarray)
                else f"a {type(array).__name__}")
        raise _malformed(fmt, f"{name} must be a 1-D integer array, got {what}")
    return array


def _value_array(fmt, array, ndim=1):
    if not isinstance(array, np.ndarray) or array.ndim != ndim:
        what = (f"{array.ndim}-D" if isinstance(array, np.ndarray) else type(array).__name__)
        raise _malformed(fmt, f"data must be a {ndim}-D array, got {what}")
    return array


def _check_index_range(fmt, name, values, upper):
    """Every entry of ``values`` (integers) lies in ``[0, upper)``."""
    if values.size == 0:
        return
    low, high = int(values.min()), int(values.max())
    if low < 0 or high >= upper:
        raise _malformed(
            fmt, f"{name} must lie in [0, {upper}), found values in [{low}, {high}]")


def _check_compressed(fmt, indptr, indices, n_data, n_major, n_minor, major, minor):
    """The arrays of a compressed format (CSR: major = rows; CSC: columns; BSR: block rows).

    ``indptr`` has ``n_major + 1`` entries, starts at 0, never decreases and
    ends at most at ``len(indices)`` and ``n_data``; the indices it covers lie
    in ``[0, n_minor)``.  Unsorted or duplicate indices are allowed (check_X
    canonicalises them).
    """
    indptr = _index_array(fmt, "indptr", indptr)
    indices = _index_array(fmt, "indices", indices)
    if indptr.shape[0] != n_major + 1:
        raise _malformed(fmt, f"indptr has length {indptr.shape[0]}, expected n_{major} + 1 = "
                              f"{n_major + 1}")
    if indptr[0] != 0 or (n_major > 0 and np.any(indptr[1:] < indptr[:-1])):
        raise _malformed(fmt, "indptr must start at 0 and never decrease")
    nnz = int(indptr[-1])
    if nnz > indices.shape[0] or nnz > n_data:
        raise _malformed(fmt, f"indptr[-1] = {nnz} but indices has {indices.shape[0]} and data "
                              f"has {n_data} entries (the indptr must not point past them)")
    _check_index_range(fmt, f"{minor} indices", indices[:nnz], n_minor)


def _check_csr_arrays(X, n_rows, n_cols):
    data = _value_array("csr", X.data)
    _check_compressed("csr", X.indptr, X.indices, data.shape[0], n_rows, n_cols, "rows",
                      "column")


def _check_csc_arrays(X, n_rows, n_cols):
    data = _value_array("csc", X.data)
    _check_compressed("csc", X.indptr, X.indices, data.shape[0], n_cols, n_rows, "cols", "row")


def _check_bsr_arrays(X, n_rows, n_cols):
    data = _value_array("bsr", X.data, ndim=3)
    r, c = int(data.shape[1]), int(data.shape[2])
    if r < 1 or c < 1 or n_rows % r or n_cols % c:
        raise _malformed("bsr", f"blocks of shape ({r}, {c}) do not tile the shape "
                                f"({n_rows}, {n_cols})")
    blocksize = getattr(X, "blocksize", (r, c))
    if tuple(blocksize) != (r, c):
        raise _malformed("bsr", f"blocksize {tuple(blocksize)} differs from the data blocks "
                                f"({r}, {c})")
    _check_compressed("bsr", X.indptr, X.indices, data.shape[0], n_rows // r, n_cols // c,
                      "block_rows", "block column")


def _check_coo_arrays(X, n_rows, n_cols):
    data = _value_array("coo", X.data)
    coords = getattr(X, "coords", None)
    if coords is None:  # older scipy: row and col attributes
        coords = (X.row, X.col)
    if not isinstance(coords, tuple) or len(coords) != 2:
        raise _malformed("coo", "a 2-D matrix needs exactly two coordinate arrays (row, col)")
    for name, index, upper in (("row", coords[0], n_rows), ("col", coords[1], n_cols)):
        index = _index_array("coo", name, index)
        if index.shape[0] != data.shape[0]:
            raise _malformed("coo", f"{name} has {index.shape[0]} entries but data has "
                                    f"{data.shape[0]}; they must have the same length")
        _check_index_range("coo", f"{name} indices", index, upper)


def _check_dia_arrays(X, n_rows, n_cols):
    data = _value_array("dia", X.data, ndim=2)
    offsets = _index_array("dia", "offsets", X.offsets)
    if offsets.shape[0] != data.shape[0]:
        raise _malformed("dia", f"offsets has {offsets.shape[0]} entries but data has "
                                f"{data.shape[0]} diagonals")
    if offsets.size:
        low, high = int(offsets.min()), int(offsets.max())
        if low <= -max(n_rows, 1) or high >= max(n_cols, 1):
            raise _malformed("dia", f"offsets must lie in ({-n_rows}, {n_cols}), found values "
                                    f"in [{low}, {high}]")
        if np.unique(offsets).size != offsets.size:
            raise _malformed("dia", "offsets must not repeat")


def _flat_integers(fmt, name, lists, total):
    """The integers of a sequence of lists, as one int64 array (exactly ``total`` of them)."""
    try:
        flat = np.array(list(itertools.chain.from_iterable(lists)))
    except (TypeError, ValueError, OverflowError) as exc:
        raise _malformed(fmt, f"{name} must hold lists of integers ({exc})") from None
    if flat.shape != (total,) or (total and flat.dtype.kind not in "iu"):
        raise _malformed(fmt, f"{name} must hold lists of integers (found dtype {flat.dtype})")
    return flat


def _check_lil_arrays(X, n_rows, n_cols):
    rows, data = X.rows, X.data
    for name, array in (("rows", rows), ("data", data)):
        if not isinstance(array, np.ndarray) or array.shape != (n_rows,):
            got = array.shape if isinstance(array, np.ndarray) else type(array).__name__
            raise _malformed("lil", f"{name} must be an object array of {n_rows} lists (one "
                                    f"per row), got {got}")
    try:
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=n_rows)
        data_lengths = np.fromiter(map(len, data), dtype=np.int64, count=n_rows)
    except TypeError:
        raise _malformed("lil", "every entry of rows and data must be a list") from None
    if np.any(lengths != data_lengths):
        bad = int(np.flatnonzero(lengths != data_lengths)[0])
        raise _malformed("lil", f"row {bad} has {lengths[bad]} column indices but "
                                f"{data_lengths[bad]} values")
    columns = _flat_integers("lil", "rows", rows, int(lengths.sum()))
    _check_index_range("lil", "column indices", columns, n_cols)


def _check_dok_keys(X, n_rows, n_cols):
    # scipy >= 1.13 keeps the entries in X._dict (what X.keys() and every conversion
    # read), older scipy in the dict X itself: check both
    keys = list(X.keys())
    if isinstance(X, dict) and dict.__len__(X):
        keys += list(dict.keys(X))
    try:
        coords = np.array(keys)
    except (TypeError, ValueError, OverflowError):
        coords = None
    if keys and (coords is None or coords.shape != (len(keys), 2)
                 or coords.dtype.kind not in "iu"):
        raise _malformed("dok", "every key must be a pair of integers (row, column)")
    if keys:
        _check_index_range("dok", "row indices", coords[:, 0], n_rows)
        _check_index_range("dok", "column indices", coords[:, 1], n_cols)


_STRUCTURE_CHECKS = {
    "csr": _check_csr_arrays,
    "csc": _check_csc_arrays,
    "bsr": _check_bsr_arrays,
    "coo": _check_coo_arrays,
    "dia": _check_dia_arrays,
    "lil": _check_lil_arrays,
    "dok": _check_dok_keys,
}


def check_sparse_structure(X):
    """Refuse a scipy.sparse matrix whose index arrays are inconsistent, before any conversion.

    scipy trusts the index arrays of a sparse matrix when it converts it to
    another format (``tocsr``, ``tocsc``, ``tocoo``, ``asformat``; also inside
    scikit-learn's ``validate_data``): an index edited after construction
    (``X.row[0] = 10**6`` on a COO matrix, out-of-range ``X.indices`` on a
    CSC matrix) makes scipy's compiled code write out of bounds and crash the
    process or corrupt its memory.  Call this first, on the object the user
    passed.

    Parameters
    ----------
    X : object
        Any input.  scipy.sparse matrices and arrays of every format (csr,
        csc, coo, bsr, dia, lil, dok, ``*_matrix`` and ``*_array``) are
        checked; anything else is returned untouched.

    Returns
    -------
    X : object
        The input itself (never copied or modified).

    Raises
    ------
    ValidationError
        If X is sparse and not 2-D, or its arrays could make a conversion read
        or write out of bounds: index arrays that are not 1-D integer arrays,
        index pointers that do not start at 0, decrease, or point past the
        index/data arrays, coordinate arrays whose length differs from the
        data, indices outside the shape, BSR blocks that do not tile the
        shape, DIA offsets that do not match the data or lie outside the
        shape, LIL rows and values of different lengths, DOK keys that are not
        integer pairs in range.

    Notes
    -----
    Cost: O(nnz), vectorised (one pass of min/max over the index arrays); for
    LIL and DOK, whose indices are Python objects, one conversion of them to
    an array.  Unsorted and duplicate indices are accepted (they are valid
    scipy input; :func:`check_X` canonicalises them).

    Privacy: reads only the positions of the stored entries; releases nothing.
    """
    if not sp.issparse(X):
        return X
    if _verified(X) is not None:  # checked when written (fastdp.io.binary)
        return X
    n_rows, n_cols = _sparse_shape(X)
    fmt = getattr(X, "format", None)
    check = _STRUCTURE_CHECKS.get(fmt)
    if check is None:
        raise ValidationError(
            f"X is a scipy.sparse object of unknown format {fmt!r}; convert it to CSR first.")
    check(X, n_rows, n_cols)
    return X


# --------------------------------------------------------------------------
# proof for the compiled kernels that a CSR structure was checked
# --------------------------------------------------------------------------
#
# The kernels of fastdp._kernels scan the CSR structure of the rows they read
# (O(nnz)) unless the caller passes, as ``check_structure``, a token made
# here for exactly the arrays it passes.  check_X registers the index arrays
# of every sparse matrix it returns (weakly: nothing is kept alive), so a
# solver that validated X with check_X gets its token in O(1).


def _address(array):
    return int(array.__array_interface__["data"][0])


class _StructureToken:
    """Proof that ``indices``/``indptr`` form canonical CSR with ``n_features`` columns.

    Private: made only by :func:`structure_token`.  It holds the two arrays,
    so their memory stays valid while the token exists, and their addresses,
    lengths and index width, which a kernel compares (O(1)) with the arrays
    it is given.
    """

    __slots__ = ("indices", "indptr", "n_features", "itemsize", "indices_address",
                 "indices_length", "indptr_address", "indptr_length")

    def __init__(self, indices, indptr, n_features, indices_address, indptr_address):
        self.indices = indices
        self.indptr = indptr
        self.n_features = n_features
        self.itemsize = indices.dtype.itemsize
        self.indices_address = indices_address
        self.indices_length = indices.shape[0]
        self.indptr_address = indptr_address
        self.indptr_length = indptr.shape[0]

    def __reduce__(self):
        raise TypeError("a CSR structure token is valid in this process only; make a new one "
                        "with fastdp._validation.structure_token(X)")

    def __repr__(self):
        return (f"<CSR structure checked: {self.indptr_length - 1} rows, "
                f"{self.n_features} columns, {self.indices_length} entries>")


# id(indices) -> (weakref(indices), weakref(indptr), n_features, address of indices,
#                 address of indptr)
_CHECKED_STRUCTURES = {}


def _forget_structure(key):
    _CHECKED_STRUCTURES.pop(key, None)


def _remember_structure(indices, indptr, n_features):
    """Register canonical CSR index arrays as checked (weakly)."""
    key = id(indices)
    try:
        entry = (weakref.ref(indices, lambda _, key=key: _forget_structure(key)),
                 weakref.ref(indptr), int(n_features), _address(indices), _address(indptr))
    except (TypeError, AttributeError):  # not weak-referenceable: scanned when used
        return None
    _CHECKED_STRUCTURES[key] = entry
    return entry


def _known_structure(indices, indptr, n_features):
    """The registry entry of these arrays, or None."""
    entry = _CHECKED_STRUCTURES.get(id(indices))
    if (entry is not None and entry[0]() is indices and entry[1]() is indptr
            and entry[2] == n_features):
        return entry
    return None


def structure_token(X):
    """Token telling the kernels that the CSR structure of ``X`` is valid (private).

    Pass it as ``check_structure=`` to a kernel of :mod:`fastdp._kernels`
    together with ``X.data, X.indices, X.indptr`` to skip the kernel's O(nnz)
    scan of the structure.  For a matrix returned by :func:`check_X` (the
    same ``indices`` and ``indptr`` objects) it costs O(1) (a few
    microseconds: make it once per solver run, not per kernel call); for any
    other CSR matrix it checks the structure first (O(nnz)): ``indptr``
    non-decreasing from 0 to ``len(indices)``, column indices strictly
    increasing within every row and within ``[0, n_features)``.

    Parameters
    ----------
    X : scipy.sparse CSR matrix or array

    Returns
    -------
    token : object
        Valid only with these very ``indices`` and ``indptr`` arrays, in this
        process; a kernel given other arrays with it raises ValidationError.

    Raises
    ------
    ValidationError
        If X is not CSR or its structure is not canonical CSR.

    Notes
    -----
    The token is a promise that nothing modifies the arrays afterwards:
    fastdp's solvers use it for the matrix ``check_X`` returned to them.
    """
    if is_mapped_rows(X):  # the kernels read its rows from its (checked) CSR matrix
        X = X.csr
    if not (sp.issparse(X) and X.format == "csr"):
        raise ValidationError("structure_token needs a CSR matrix (use check_X first).")
    indices, indptr = X.indices, X.indptr
    entry = _known_structure(indices, indptr, X.shape[1])
    if entry is None:
        n_rows, n_cols = _sparse_shape(X)
        _check_csr_arrays(X, n_rows, n_cols)
        if (indices.dtype not in _INDEX_DTYPES or indptr.dtype != indices.dtype
                or indices.shape[0] != int(indptr[-1]) or not indices.flags.c_contiguous
                or not indptr.flags.c_contiguous or not _csr_is_canonical(X)):
            raise ValidationError(
                "structure_token needs canonical CSR (column indices strictly increasing in "
                "every row, int32/int64 indices and indptr of one dtype, no spare storage): "
                "pass the matrix through check_X first.")
        entry = _remember_structure(indices, indptr, n_cols)
        if entry is None:
            entry = (None, None, n_cols, _address(indices), _address(indptr))
    return _StructureToken(indices, indptr, entry[2], entry[3], entry[4])


# --------------------------------------------------------------------------
# CSR data checked when it was written (fastdp.io.binary), trusted when opened
# --------------------------------------------------------------------------
#
# A binary dataset (fastdp.io.binary) is checked once, when it is converted:
# canonical structure, finite values, squared row norms stored beside it.
# open_binary registers its memory-mapped arrays here, so that validating it
# for a fit reads O(n) metadata instead of scanning all of X (which may not
# fit in memory) again.  The registry is weak (nothing is kept alive) and is
# keyed by the very array objects: any other array (a copy, a slice) is
# checked in full as usual.

# id(data) -> _VerifiedCsr
_VERIFIED_CSR = {}


class _VerifiedCsr:
    """What was verified about one CSR's arrays when they were written."""

    __slots__ = ("data", "indices", "indptr", "shape", "sq_norms", "finite", "max_row_length",
                 "kernel_sq_norms")

    def __init__(self, X, sq_norms, finite, kernel_sq_norms=None):
        self.kernel_sq_norms = kernel_sq_norms
        self.data = weakref.ref(X.data)
        self.indices = weakref.ref(X.indices)
        self.indptr = weakref.ref(X.indptr)
        self.shape = tuple(X.shape)
        self.sq_norms = sq_norms
        self.finite = bool(finite)
        lengths = np.diff(np.asarray(X.indptr)) if X.shape[0] else np.zeros(1, np.int64)
        self.max_row_length = int(lengths.max()) if lengths.size else 0


def register_verified_csr(X, *, sq_norms, finite, kernel_sq_norms=None):
    """Record that the arrays of CSR ``X`` were verified when they were written.

    For :mod:`fastdp.io.binary` only: call it with the arrays of a dataset
    whose structure was checked canonical at conversion and whose header
    still matches.  Afterwards :func:`check_sparse_structure`, :func:`check_X`
    and :func:`structure_token` trust these very arrays (cheap checks only:
    the same objects, the shape, the first and last ``indptr``) and the row
    norm bound is decided from ``sq_norms``.

    Parameters
    ----------
    X : scipy.sparse CSR matrix
        Canonical, with ``indices``/``indptr`` of one dtype and tight storage.
    sq_norms : ndarray of float64, shape (n_samples,)
        ``sum_j x_ij**2`` of every row, computed by :func:`_csr_sq_norms`
        (the same bits the full check computes).
    finite : bool
        Whether every value was checked finite.
    kernel_sq_norms : ndarray of float64, shape (n_samples,), optional
        The row norms as the kernels sum them
        (``fastdp._kernels._scd.row_squared_norms(X.data, X.indptr)``, the
        same bits), returned by :func:`stored_kernel_sq_norms`.
    """
    key = id(X.data)
    if kernel_sq_norms is not None:
        kernel_sq_norms = np.asarray(kernel_sq_norms, dtype=np.float64).view()
        kernel_sq_norms.flags.writeable = False
    entry = _VerifiedCsr(X, np.asarray(sq_norms, dtype=np.float64), finite, kernel_sq_norms)
    try:
        weakref.finalize(X.data, _VERIFIED_CSR.pop, key, None)
    except TypeError:  # pragma: no cover - ndarray is weak-referenceable
        return
    _VERIFIED_CSR[key] = entry
    _remember_structure(X.indices, X.indptr, X.shape[1])


def stored_kernel_sq_norms(X):
    """The kernels' squared row norms of CSR ``X`` stored when its arrays were written
    (:func:`register_verified_csr`, read-only), or None: then compute them."""
    entry = _verified(X)
    return None if entry is None else entry.kernel_sq_norms


def _verified(X):
    """The registry entry of CSR ``X``'s arrays if they are the verified ones, else None."""
    if not (sp.issparse(X) and getattr(X, "format", None) == "csr"):
        return None
    entry = _VERIFIED_CSR.get(id(getattr(X, "data", None)))
    if (entry is None or entry.data() is not X.data or entry.indices() is not X.indices
            or entry.indptr() is not X.indptr or tuple(X.shape) != entry.shape):
        return None
    indptr = X.indptr
    nnz = X.data.shape[0]
    if indptr.shape[0] != entry.shape[0] + 1 or indptr[0] != 0 or int(indptr[-1]) != nnz:
        return None
    return entry


def _check_csr_structure(X):
    """Reject CSR matrices whose index arrays could make a kernel read out of bounds."""
    n_rows, n_cols = _sparse_shape(X)
    _check_csr_arrays(X, n_rows, n_cols)


def _csr_is_canonical(X):
    """True when every row has strictly increasing column indices and storage is tight.

    Computed from the arrays (never from scipy's cached flags, which a user may
    have invalidated by editing the arrays), without modifying ``X``.
    """
    nnz = int(X.indptr[-1])
    if X.indices.shape[0] != nnz or X.data.shape[0] != nnz:
        return False
    if nnz < 2:
        return True
    for r0, r1 in _row_blocks(X.indptr):  # a block boundary is a row boundary
        k0, k1 = int(X.indptr[r0]), int(X.indptr[r1])
        indices = X.indices[k0:k1]
        increasing = indices[1:] > indices[:-1]
        # a position k (1..) that starts a row may be anything
        row_starts = np.asarray(X.indptr[r0 + 1:r1]) - k0
        row_starts = row_starts[(row_starts > 0) & (row_starts < k1 - k0)]
        increasing[row_starts - 1] = True
        if not increasing.all():
            return False
    return True


def _csr_from_arrays(template, data, indices, indptr):
    """Build a CSR object of the same class as ``template`` without index downcasting."""
    out = template.__class__(template.shape, dtype=data.dtype)
    out.data = data
    out.indices = indices
    out.indptr = indptr
    return out


def _canonical_csr_copy(X, value_dtype, index_dtype):
    """Return a new canonical CSR matrix holding ``X`` (which is left untouched)."""
    nnz = int(X.indptr[-1])
    out = _csr_from_arrays(
        X,
        np.array(X.data[:nnz], dtype=value_dtype, copy=True),
        np.array(X.indices[:nnz], dtype=index_dtype, copy=True),
        np.array(X.indptr, dtype=index_dtype, copy=True),
    )
    # force scipy to recompute: the flags of a fresh object are not trusted
    out.has_sorted_indices = False
    out.has_canonical_format = False
    out.sum_duplicates()
    return out


def _check_sparse(X, accepted, copy):
    check_sparse_structure(X)  # before scipy converts anything (its converters trust the indices)
    if X.format != "csr":
        X = X.tocsr()  # a new object: the user's matrix is not modified
        copy = False  # already a private copy
        _check_csr_structure(X)
    value_dtype = _target_dtype(X.data.dtype, accepted)
    verified = _verified(X)
    if verified is not None and not copy and value_dtype == X.data.dtype:
        if not verified.finite:
            _reject_non_finite_csr(X)
        return X  # canonical and (if recorded) finite: checked when written
    if X.indices.dtype == X.indptr.dtype and X.indices.dtype in _INDEX_DTYPES:
        index_dtype = X.indices.dtype
    else:
        index_dtype = np.dtype(np.int64)
    needs_copy = (
        copy
        or value_dtype != X.data.dtype
        or index_dtype != X.indices.dtype
        or index_dtype != X.indptr.dtype
        or not (X.data.flags.c_contiguous and X.indices.flags.c_contiguous
                and X.indptr.flags.c_contiguous)
        or not _csr_is_canonical(X)
    )
    if needs_copy:
        X = _canonical_csr_copy(X, value_dtype, index_dtype)
    _reject_non_finite_csr(X)
    return X


def _check_dense(X, accepted, copy):
    try:
        array = np.asarray(X)
    except (TypeError, ValueError) as exc:
        raise ValidationError(
            f"Could not convert X to a numeric array ({exc}). Pass a 2-D numpy array "
            "or a scipy.sparse matrix of numbers."
        ) from exc
    if array.ndim != 2:
        raise ValidationError(
            f"X must be 2-D (n_samples, n_features); got an array with shape "
            f"{array.shape}. Use X.reshape(-1, 1) for a single feature or "
            "X.reshape(1, -1) for a single example."
        )
    if array.dtype.kind not in "biuf":
        if array.dtype.kind == "c":
            _target_dtype(array.dtype, accepted)  # raises with a clear message
        try:
            array = array.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise ValidationError(
                f"X has dtype {array.dtype} and could not be converted to float64 "
                f"({exc}). Encode non-numeric columns (e.g. with "
                "sklearn.preprocessing.OneHotEncoder) first."
            ) from exc
    value_dtype = _target_dtype(array.dtype, accepted)
    out = np.asarray(array, dtype=value_dtype, order="C")
    if copy and np.shares_memory(out, array):
        out = out.copy()
    _reject_non_finite_dense(out)
    return out


def row_norms(X, squared=False):
    """Euclidean norm of every row of ``X``, computed without densifying.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features) or scipy.sparse matrix
        Dense array or sparse matrix (any scipy format; its structure is
        checked by :func:`check_sparse_structure`, then non-CSR formats are
        converted to CSR). Duplicate entries are summed first (a
        non-canonical matrix is canonicalised in a copy), so the norms are
        those of the matrix the entries describe.
    squared : bool, default=False
        Return squared norms.

    Returns
    -------
    norms : ndarray of shape (n_samples,), float64
        Accumulated in float64 whatever the dtype of ``X``.

    Notes
    -----
    Privacy: reads every example; the result is private data, not a release.
    """
    if sp.issparse(X):
        check_sparse_structure(X)  # before any conversion
        if X.format != "csr":
            X = X.tocsr()
        if not _csr_is_canonical(X):  # duplicates are one entry each (their sum)
            X = _canonical_csr_copy(X, X.data.dtype, X.indices.dtype)
        sq = _csr_sq_norms(X)
    else:
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValidationError(
                f"row_norms needs a 2-D array; got shape {X.shape}."
            )
        Xf = X.astype(np.float64, copy=False)
        sq = np.einsum("ij,ij->i", Xf, Xf)
    return sq if squared else np.sqrt(sq)


def _csr_sq_norms(X, bound=1.0):
    """``sum_j (x_ij / bound)**2`` of every row of a CSR matrix, accumulated in float64.

    Works through blocks of rows (:func:`_row_blocks`), so its temporaries are
    one block's float64 values (never a float64 copy of all of float32 data,
    never an O(nnz) array), with the same bits as one pass over all rows:
    every row is summed by the same ``np.add.reduceat`` call on the same values.
    """
    indptr = X.indptr
    sq = np.zeros(X.shape[0])
    for r0, r1 in _row_blocks(indptr):
        k0, k1 = int(indptr[r0]), int(indptr[r1])
        if k1 == k0:
            continue
        values = np.asarray(X.data[k0:k1], dtype=np.float64)
        if bound != 1.0:
            values = values / bound
        starts = np.asarray(indptr[r0:r1]) - k0
        nonempty = starts < np.asarray(indptr[r0 + 1:r1 + 1]) - k0
        # consecutive non-empty row starts delimit exactly one row each
        sq[r0:r1][nonempty] = np.add.reduceat(values * values, starts[nonempty])
    return sq


def _scaled_sq_norms(X, bound, rows=None):
    """``sum_j (x_ij / bound)**2`` for every row (or ``rows``), accumulated in float64.

    Dividing by the bound first keeps the squares representable whenever the
    row norm is within a few orders of magnitude of the bound (whatever the
    bound's own magnitude); a row far above it overflows to ``inf`` (refused),
    a row far below it underflows towards 0 (accepted), both correctly.
    """
    if sp.issparse(X):
        return _csr_sq_norms(X if rows is None else X[rows], bound)
    Xf = np.asarray(X if rows is None else X[rows], dtype=np.float64)
    if bound != 1.0:
        Xf = Xf / bound
    return np.einsum("ij,ij->i", Xf, Xf)


def _stored_scaled_sq_norms(X, bound):
    """:func:`_scaled_sq_norms` of a verified CSR from its stored squared norms, or None.

    With ``bound == 1`` the stored values are those very numbers.  Otherwise
    ``stored / bound**2`` differs from the direct sum by rounding only, at most
    ``(k + 4) 2**-53`` relative each way for rows of at most k entries: every
    row that is not clearly below 1 by eight times that margin (and every
    non-finite one) is summed directly, so the rows above the bound, and the
    values used for them, are exactly those of the direct computation.
    """
    entry = _verified(X)
    if entry is None:
        return None
    if bound == 1.0:
        return entry.sq_norms.copy()
    with np.errstate(all="ignore"):
        sq = entry.sq_norms / (bound * bound)
    margin = 8.0 * (entry.max_row_length + 4) * 2.0**-53
    unclear = np.flatnonzero(~(sq <= 1.0 - margin))
    if unclear.size:
        sq[unclear] = _scaled_sq_norms(X, bound, unclear)
    return sq


def _norm_for_message(X, row, bound, sq):
    """The L2 norm of one row, without overflow (for error messages only)."""
    if np.isfinite(sq):
        return float(np.sqrt(sq) * bound)
    if is_mapped_rows(X):
        X = X.row(row)
        row = 0
    values = X[row].toarray().ravel() if sp.issparse(X) else np.asarray(X[row])
    values = values.astype(np.float64)
    scale = float(np.max(np.abs(values)))
    return scale * float(np.linalg.norm(values / scale))


def _shrink_factors(sq, dtype, shrunk_sq):
    """Factors that scale rows whose squared scaled norms ``sq`` exceed 1 onto the bound.

    Starts from ``1 / sqrt(sq)``; ``shrunk_sq(todo, factors)`` returns the
    squared scaled norms of the rows ``todo`` (positions in ``sq``) once scaled
    by ``factors`` and rounded to ``dtype``.  A row that rounding left above 1
    is shrunk by a few more ulp, up to 64 times.  Each row's factor depends on
    that row alone, so rows may be processed in any grouping.
    """
    step = float(np.finfo(dtype).eps)
    factors = 1.0 / np.sqrt(sq)
    todo = np.arange(sq.size)
    for attempt in range(64):
        over = shrunk_sq(todo, factors[todo]) > 1.0
        if not over.any():
            return factors
        todo = todo[over]
        factors[todo] *= 1.0 - step * 2.0**attempt  # rounding pushed them up: shrink a bit more
    raise ValidationError("could not scale rows of X onto max_row_norm (internal error).")


def _shrink_rows(X, rows, bound):
    """Copy of X with ``rows`` scaled down until ``_scaled_sq_norms <= 1``."""
    dtype = X.dtype
    sq = _scaled_sq_norms(X, bound, rows)
    factors = 1.0 / np.sqrt(sq)
    if sp.issparse(X):
        data = X.data.copy()
        starts = X.indptr[rows].astype(np.int64)
        counts = X.indptr[rows + 1].astype(np.int64) - starts
        owner = np.repeat(np.arange(rows.size), counts)
        first = np.cumsum(counts) - counts  # position of each row's first entry in `positions`
        positions = np.arange(int(counts.sum())) - first[owner] + starts[owner]
        original = X.data[positions].astype(np.float64)
        out = _csr_from_arrays(X, data, X.indices, X.indptr)
    else:
        out = X.copy()
        original = X[rows].astype(np.float64)

    def shrunk_sq(todo, todo_factors):
        factors[todo] = todo_factors
        if sp.issparse(X):
            data[positions] = (original * factors[owner]).astype(dtype)
        else:
            out[rows[todo]] = (original[todo] * todo_factors[:, None]).astype(dtype)
        return _scaled_sq_norms(out, bound, rows[todo])

    _shrink_factors(sq, dtype, shrunk_sq)
    return out


def _check_row_norm_bound(X, max_row_norm, row_norm_tol):
    """X itself if every row provably has norm <= bound; a copy with the rows that
    exceed it by at most ``tol`` (relative) scaled onto it; a ValidationError beyond."""
    bound = check_positive("max_row_norm", max_row_norm)
    tol = check_real("row_norm_tol", row_norm_tol)
    if not (0.0 <= tol <= 1e-3):
        raise ValidationError(
            f"row_norm_tol must lie in [0, 1e-3] (it absorbs rounding only); got {row_norm_tol!r}.")
    mapped = is_mapped_rows(X)
    with np.errstate(over="ignore"):
        sq = X.scaled_sq_norms(bound) if mapped else _stored_scaled_sq_norms(X, bound)
        if sq is None:
            sq = _scaled_sq_norms(X, bound)
    over = sq > 1.0
    if not over.any():
        return X
    too_long = sq > (1.0 + tol) ** 2
    if too_long.any():
        count = int(too_long.sum())
        worst = int(np.argmax(sq))
        norm = _norm_for_message(X, worst, bound, sq[worst])
        raise ValidationError(
            f"{count} of {X.shape[0]} rows of X have L2 norm above {bound:g} "
            f"(the bound this mechanism's privacy guarantee needs); the worst is "
            f"row {worst} with norm {norm:.12g}. {_ROW_NORM_FIX}"
        )
    # rounding-level excess: scale those rows onto the bound (a per-example map with a
    # public parameter, so private-safe), so that the bound holds exactly afterwards
    if mapped:
        rows = np.flatnonzero(over)
        return X.shrunk(rows, bound, sq[rows])
    return _shrink_rows(X, np.flatnonzero(over), bound)


def check_X(
    X,
    *,
    accept_sparse=True,
    dtype=(np.float64, np.float32),
    max_row_norm=None,
    row_norm_tol=1e-6,
    copy=False,
):
    """Validate a feature matrix and bring it into kernel layout.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features) or scipy.sparse matrix
        Examples as rows. Sparse input of any format becomes CSR; other input
        becomes a C-contiguous ndarray.
    accept_sparse : bool, default=True
        If False, sparse input is rejected.
    dtype : dtype or tuple of dtypes, default=(np.float64, np.float32)
        Accepted value dtypes. Values of an accepted dtype are kept; any other
        real dtype (int, bool, float16, ...) is converted to float64 (or to the
        first accepted dtype when float64 is not accepted). ``None`` keeps any
        real dtype.
    max_row_norm : float or None, default=None
        When given, every row of the result has L2 norm at most
        ``max_row_norm``, with no slack: the float64 sum
        ``s = sum_j (x_ij / max_row_norm)**2`` of every row is at most 1 (the
        only error left is the rounding of that sum itself, at most
        ``(k + 2) 2**-53`` relative for a row of k entries, the order of
        float64 arithmetic everywhere else, e.g. in the accountants). Rows
        with ``s > (1 + row_norm_tol)**2`` are refused; rows between are
        scaled down onto the bound in the returned copy (rounding-level
        excess, e.g. unit rows from normalising in float64, norm up to
        ``1 + 2e-16``, or in float32, ``1 + 6e-8``: they move by an ulp or
        two). Mechanisms whose sensitivity analysis assumes
        ``||x_i|| <= 1`` pass ``max_row_norm=1``.
    row_norm_tol : float, default=1e-6
        Relative excess, in [0, 1e-3], that is scaled away instead of refused;
        0 refuses every row above the bound. The privacy guarantee needs no
        slack for it: the returned rows satisfy the bound.
    copy : bool, default=False
        Always return a new array/matrix that shares no memory with ``X``.

    Returns
    -------
    X_checked : ndarray or scipy.sparse CSR matrix
        Sparse output is canonical: column indices sorted within each row,
        duplicate entries summed, ``indices`` and ``indptr`` of the same dtype
        (int32 or int64), ``len(data) == indptr[-1]``. Explicit zeros are kept.
        When the input already has this form with float32/float64 values,
        ``copy=False`` and no row needs scaling onto ``max_row_norm``, the
        input object itself is returned (no copy). The user's matrix is never
        modified. The index arrays of sparse output are registered as checked
        (see :func:`structure_token`).

    Raises
    ------
    ValidationError
        For NaN or infinite values (naming the first bad row), empty input
        (0 rows or 0 features), non-2-D input, complex or non-numeric values,
        malformed sparse index arrays (any scipy format, checked before any
        conversion by :func:`check_sparse_structure`), sparse input when
        ``accept_sparse=False``, and rows that exceed ``max_row_norm`` by more
        than ``row_norm_tol``.

    Notes
    -----
    Privacy: reads the private data; releases nothing. Scaling a row whose
    norm exceeds the public bound by rounding only is a per-example map with
    a public parameter, so it costs no privacy (as
    ``fastdp.preprocessing.clip_rows``); larger excess is refused, never
    silently clipped: rescaling rows is left to ``fastdp.preprocessing``.
    """
    accepted = _normalise_dtype_spec(dtype)
    if is_mapped_rows(X):
        return _check_mapped_rows(X, accepted, accept_sparse, max_row_norm, row_norm_tol, copy)
    if sp.issparse(X):
        if not accept_sparse:
            raise ValidationError(
                "This function needs dense input but X is a scipy.sparse matrix. "
                "Convert it with X.toarray() if it fits in memory, or use a solver "
                "that supports sparse data."
            )
        X_checked = _check_sparse(X, accepted, copy)
    else:
        X_checked = _check_dense(X, accepted, copy)
    _reject_empty(X_checked.shape)
    if max_row_norm is not None:
        X_checked = _check_row_norm_bound(X_checked, max_row_norm, row_norm_tol)
    if sp.issparse(X_checked):
        _remember_structure(X_checked.indices, X_checked.indptr, X_checked.shape[1])
    return X_checked


def is_mapped_rows(X):
    """True for the estimators' mapped rows (:class:`fastdp._mapped_rows.MappedRows`),
    recognised by a class marker (this module cannot import that one)."""
    return getattr(X, "_fastdp_mapped_rows", False) is True


def _check_mapped_rows(X, accepted, accept_sparse, max_row_norm, row_norm_tol, copy):
    """:func:`check_X` of mapped rows: their X was checked when they were mapped.

    Only the row-norm bound is left to decide (from the mapped rows' norms,
    summed in blocks; rows above it by rounding get a second per-row factor,
    exactly the one a copy would get).  Anything else that would need a new
    matrix (``copy``, another dtype, dense output, a second shrink) checks the
    mapped matrix written out (:meth:`~fastdp._mapped_rows.MappedRows.tocsr`).
    """
    if (copy or not accept_sparse or (accepted and X.dtype not in accepted)
            or (max_row_norm is not None and X.row_shrink is not None)):
        return check_X(X.tocsr(), accept_sparse=accept_sparse, dtype=accepted or None,
                       max_row_norm=max_row_norm, row_norm_tol=row_norm_tol, copy=copy)
    _reject_empty(X.shape)
    if max_row_norm is not None:
        X = _check_row_norm_bound(X, max_row_norm, row_norm_tol)
    return X


# --------------------------------------------------------------------------
# labels
# --------------------------------------------------------------------------

_TASKS = ("binary", "regression")


def check_labels(y, task, *, n_samples=None):
    """Validate labels and convert them to the form the losses expect.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Labels. For ``task="binary"`` any two distinct labels (e.g. {0, 1},
        {-1, +1}, {1, 2}, {"no", "yes"}); for ``task="regression"`` real
        numbers.
    task : {"binary", "regression"}
        Kind of supervised problem.
    n_samples : int or None, default=None
        If given, ``y`` must have exactly this many entries.

    Returns
    -------
    y_checked : ndarray of shape (n_samples,), float64
        For ``"binary"``: -1.0 for ``classes[0]`` and +1.0 for ``classes[1]``.
        For ``"regression"``: the labels as float64.
    classes : ndarray of shape (2,) or None
        The two original labels, sorted (``classes[1]`` maps to +1);
        ``None`` for regression.

    Raises
    ------
    ValidationError
        If ``y`` is not 1-D, is empty, has the wrong length, contains NaN or
        infinity, or (binary) does not contain exactly two classes.

    Notes
    -----
    Privacy: labels are private data; nothing is released.
    """
    if task not in _TASKS:
        raise ValidationError(f"task must be one of {_TASKS}; got {task!r}.")
    try:
        y_arr = np.asarray(y)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"Could not convert y to an array ({exc}).") from exc
    if y_arr.ndim != 1:
        raise ValidationError(
            f"y must be 1-D with one label per example; got shape {y_arr.shape}. "
            "Use y.ravel() for a column vector; fastdp fits one target at a time."
        )
    if y_arr.shape[0] == 0:
        raise ValidationError("y is empty; pass one label per example.")
    if n_samples is not None and y_arr.shape[0] != n_samples:
        raise ValidationError(
            f"X has {n_samples} examples but y has {y_arr.shape[0]} labels; pass one "
            "label per row of X."
        )
    numeric = y_arr.dtype.kind in "biuf"
    if y_arr.dtype.kind == "c":
        raise ValidationError("y has complex values; labels must be real numbers or class names.")
    if task == "regression":
        if not numeric:
            try:
                y_arr = y_arr.astype(np.float64)
            except (TypeError, ValueError) as exc:
                raise ValidationError(
                    f"Regression targets must be numbers; could not convert y ({exc})."
                ) from exc
        y_float = np.array(y_arr, dtype=np.float64, copy=True)
        _reject_non_finite_labels(y_float)
        return y_float, None

    if numeric and y_arr.dtype.kind == "f":
        _reject_non_finite_labels(y_arr)
    two = _two_numeric_classes(y_arr) if numeric else None
    if two is not None:  # O(n): what np.unique below returns, without its O(n log n) sort
        return two
    if y_arr.dtype.kind == "O":
        try:
            classes, codes = np.unique(y_arr, return_inverse=True)
        except TypeError as exc:
            raise ValidationError(
                f"The labels in y cannot be compared with each other ({exc}); use "
                "labels of one type."
            ) from exc
    else:
        classes, codes = np.unique(y_arr, return_inverse=True)
    if classes.shape[0] != 2:
        found = classes[:10].tolist()
        if classes.shape[0] < 2:
            hint = (
                "A binary classifier needs examples of both classes; check that "
                "sampling or splitting kept both."
            )
        else:
            hint = (
                "fastdp's classifiers are binary: reduce the problem to two classes "
                "(for example one-vs-rest) first."
            )
        raise ValidationError(
            f"Only binary classification is supported: y needs exactly 2 classes; found "
            f"{classes.shape[0]} class{'es' if classes.shape[0] != 1 else ''}: {found}{' ...' if classes.shape[0] > 10 else ''}. {hint}"
        )
    y_pm = np.where(codes.reshape(-1) == 1, 1.0, -1.0)
    return y_pm, classes


def _two_numeric_classes(y):
    """``check_labels``'s ``(y_pm, classes)`` for finite numeric labels of exactly two
    distinct values (the bits ``np.unique`` gives), from min, max and two comparisons;
    None otherwise (also when a class is a zero that occurs signed)."""
    lo, hi = y.min(), y.max()
    if not lo < hi:
        return None
    upper = y == hi
    if np.count_nonzero(upper) + np.count_nonzero(y == lo) != y.shape[0]:
        return None
    if y.dtype.kind == "f" and (lo == 0 or hi == 0) and np.signbit(y[y == 0]).any():
        return None  # np.unique keeps whichever zero sorts first: leave it that choice
    return np.where(upper, 1.0, -1.0), np.array([lo, hi], dtype=y.dtype)


def _reject_non_finite_labels(y):
    finite = np.isfinite(y)
    if not finite.all():
        bad = np.flatnonzero(~finite)
        raise ValidationError(
            f"y contains NaN or infinity in {len(bad)} place(s) (first: index {int(bad[0])}). "
            "Drop those examples or fix their labels."
        )


def check_X_y(X, y, task, **check_X_kwargs):
    """Validate a feature matrix and its labels together.

    Parameters
    ----------
    X : array-like or scipy.sparse matrix of shape (n_samples, n_features)
        See :func:`check_X`.
    y : array-like of shape (n_samples,)
        See :func:`check_labels`.
    task : {"binary", "regression"}
        Kind of supervised problem.
    **check_X_kwargs
        Passed to :func:`check_X` (``accept_sparse``, ``dtype``,
        ``max_row_norm``, ``row_norm_tol``, ``copy``).

    Returns
    -------
    X_checked : ndarray or CSR matrix
        As returned by :func:`check_X`.
    y_checked : ndarray of shape (n_samples,), float64
        As returned by :func:`check_labels`.
    classes : ndarray of shape (2,) or None
        As returned by :func:`check_labels`.

    Raises
    ------
    ValidationError
        Everything :func:`check_X` and :func:`check_labels` raise, and a
        mismatch between the number of rows of X and the number of labels.

    Notes
    -----
    Privacy: reads the private data; releases nothing.
    """
    X_checked = check_X(X, **check_X_kwargs)
    y_checked, classes = check_labels(y, task, n_samples=X_checked.shape[0])
    return X_checked, y_checked, classes


# --------------------------------------------------------------------------
# scalar parameters
# --------------------------------------------------------------------------


def check_real(name, value, *, low=None, high=None, low_open=False, high_open=False,
               allow_inf=True):
    """Check that a scalar parameter is a real number (not NaN) and return it as a float.

    This is the one scalar check of fastdp; the other scalar checks
    (:func:`check_positive`, :func:`check_integer`, :func:`check_delta`,
    :func:`check_epsilon`, ...) are written with it.

    Parameters
    ----------
    name : str
        Parameter name used in the error message.
    value : real number
        Value to check; bools are rejected.
    low, high : float, optional
        Bounds (inclusive unless ``low_open``/``high_open``).
    low_open, high_open : bool, default=False
        Exclude the bound itself.
    allow_inf : bool, default=True
        Accept infinities (they are still compared with the bounds).

    Returns
    -------
    value : float

    Raises
    ------
    ValidationError
        If ``value`` is not a real number, is NaN, is infinite while
        ``allow_inf`` is False, or lies outside the bounds.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValidationError(f"{name} must be a real number; got {value!r} of type {type(value).__name__}.")
    value = float(value)
    if np.isnan(value):
        raise ValidationError(f"{name} must be a number; got NaN.")
    if not allow_inf and np.isinf(value):
        raise ValidationError(f"{name} must be finite; got {value!r}.")
    if low is not None and (value < low or (low_open and value == low)):
        raise ValidationError(f"{name} must be {'>' if low_open else '>='} {low:g}; got {value!r}.")
    if high is not None and (value > high or (high_open and value == high)):
        raise ValidationError(f"{name} must be {'<' if high_open else '<='} {high:g}; got {value!r}.")
    return value


def check_real_array(name, value, ndim, *, allow_empty=True):
    """Check a public real array parameter (bounds, costs, a design known to everyone).

    Parameters
    ----------
    name : str
        Parameter name used in the error message.
    value : array-like
        Converted with ``numpy.array(value, dtype=float64)`` (always a copy).
    ndim : int
        Required number of dimensions.
    allow_empty : bool, default=True
        Accept an array with no entries.

    Returns
    -------
    arr : ndarray of float64

    Raises
    ------
    ValidationError
        If ``value`` is not real, has another number of dimensions, is empty
        while ``allow_empty`` is False, or holds NaN or infinity.
    """
    try:
        arr = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValidationError(f"{name} must be a real array; got {type(value).__name__}.") from None
    if arr.ndim != ndim:
        raise ValidationError(f"{name} must be {ndim}-dimensional; got shape {arr.shape}.")
    if not allow_empty and arr.size == 0:
        raise ValidationError(f"{name} is empty; pass at least one piece.")
    if not np.all(np.isfinite(arr)):
        raise ValidationError(f"{name} contains NaN or infinity; pass finite numbers.")
    return arr


def check_positive(name, value, *, allow_inf=False):
    """Check that a scalar parameter is a real number > 0.

    Parameters
    ----------
    name : str
        Parameter name used in the error message.
    value : real number
        Value to check (bools are rejected).
    allow_inf : bool, default=False
        Accept ``+inf``.

    Returns
    -------
    value : float

    Raises
    ------
    ValidationError
        If ``value`` is not a real number, is NaN, is <= 0, or is infinite
        while ``allow_inf`` is False.
    """
    value = check_real(name, value)
    if value <= 0:
        raise ValidationError(f"{name} must be > 0; got {value!r}. Pass a positive number.")
    if np.isinf(value) and not allow_inf:
        raise ValidationError(f"{name} must be finite; got {value!r}. Pass a finite positive number.")
    return value


def check_integer(name, value, *, low=None, high=None, allow_integral_float=False):
    """Check that a scalar parameter is an integer (bools rejected) and return it as an int.

    Parameters
    ----------
    name : str
        Parameter name used in the error message.
    value : int
        Value to check.
    low, high : int, optional
        Inclusive bounds.
    allow_integral_float : bool, default=False
        Also accept a real number with an integer value (``3.0``).

    Returns
    -------
    value : int

    Raises
    ------
    ValidationError
        If ``value`` is not an integer or lies outside ``[low, high]``.
    """
    integral = isinstance(value, numbers.Integral) or (
        allow_integral_float and isinstance(value, numbers.Real) and float(value).is_integer())
    if isinstance(value, (bool, np.bool_)) or not integral:
        raise ValidationError(f"{name} must be an integer; got {value!r}.")
    value = int(value)
    if low is not None and value < low:
        raise ValidationError(f"{name} must be >= {low}; got {value}.")
    if high is not None and value > high:
        raise ValidationError(f"{name} must be <= {high}; got {value}.")
    return value


def check_epsilon(epsilon, *, name="epsilon", allow_zero=False, allow_inf=False):
    """Check a privacy loss ε: a real number > 0 (``>= 0`` with ``allow_zero``).

    Parameters
    ----------
    epsilon : float
    name : str, default="epsilon"
    allow_zero : bool, default=False
        Accept 0 (an accountant's query "δ at ε = 0").
    allow_inf : bool, default=False
        Accept ``inf`` (no privacy).

    Returns
    -------
    epsilon : float
    """
    return check_real(name, epsilon, low=0.0, low_open=not allow_zero, allow_inf=allow_inf)


def check_delta(delta, *, name="delta", allow_zero=False, allow_one=False):
    """Check a privacy parameter δ: in the open interval (0, 1) by default.

    A privacy *target* or *guarantee* has δ in (0, 1): δ = 0 is pure DP,
    which only Laplace-type mechanisms can meet, and δ = 1 promises nothing.
    The closed ends are opened only where they mean something:

    * ``allow_zero=True``, δ in [0, 1): pure-DP targets (``epsilon`` of a pure
      mechanism, an audit's δ);
    * ``allow_zero=True, allow_one=True``, δ in [0, 1]: the *query* δ of an
      accountant (``Accountant.epsilon(event, delta)``), where ε(δ) is defined
      on the whole interval (ε(1) = 0);
    * ``allow_one=True``, δ' in (0, 1]: the slack of advanced composition
      (:func:`fastdp.privacy.pure.advanced_composition`), which the pure
      accountant evaluates up to 1 while it searches.

    These two are the only places fastdp accepts δ = 1.

    Parameters
    ----------
    delta : float
    name : str, default="delta"
    allow_zero, allow_one : bool, default=False

    Returns
    -------
    delta : float

    Raises
    ------
    ValidationError
        If ``delta`` is not a real number or lies outside the interval.
    """
    if isinstance(delta, (bool, np.bool_)) or not isinstance(delta, numbers.Real) \
            or math.isnan(delta):
        raise ValidationError(f"{name} must be a real number; got {delta!r}.")
    delta = float(delta)
    low_ok = delta >= 0.0 if allow_zero else delta > 0.0
    high_ok = delta <= 1.0 if allow_one else delta < 1.0
    if not (low_ok and high_ok):
        interval = f"{'[' if allow_zero else '('}0, 1{']' if allow_one else ')'}"
        raise ValidationError(f"{name} must lie in {interval}; got {delta!r}. A common choice "
                              "for a target is a value below 1/n_samples, e.g. 1e-5.")
    return delta


def check_in_interval(name, value, low, high, *, include_low=False, advice=""):
    """Check that ``low < value < high`` (``low <= value < high`` with ``include_low``).

    Parameters
    ----------
    name : str
        Parameter name used in the error message.
    value : real number
        Value to check (bools are rejected).
    low, high : float
        Bounds; ``high`` is always excluded.
    include_low : bool, default=False
        Accept ``value == low``.
    advice : str, default=""
        Sentence appended to the error message (what to pass instead).

    Returns
    -------
    value : float

    Raises
    ------
    ValidationError
        If ``value`` is not a real number or lies outside the interval.
    """
    value = check_real(name, value)
    low_ok = value >= low if include_low else value > low
    if not (low_ok and value < high):
        interval = f"{'[' if include_low else '('}{low:g}, {high:g})"
        raise ValidationError(f"{name} must lie in {interval}; got {value!r}." + (f" {advice}" if advice else ""))
    return value


def check_in_open_interval(name, value, low, high):
    """Check that ``low < value < high``.

    Parameters
    ----------
    name : str
        Parameter name used in the error message.
    value : real number
        Value to check (bools are rejected).
    low, high : float
        Open bounds.

    Returns
    -------
    value : float

    Raises
    ------
    ValidationError
        If ``value`` is not a real number or lies outside ``(low, high)``.
    """
    value = check_real(name, value)
    if not (low < value < high):
        raise ValidationError(
            f"{name} must lie strictly between {low:g} and {high:g}; got {value!r}."
        )
    return value


def check_privacy_params(epsilon, delta, *, allow_inf_epsilon=False, allow_zero_delta=False):
    """Check an (epsilon, delta) privacy target.

    Parameters
    ----------
    epsilon : float
        Privacy loss bound; must be finite and > 0. ``math.inf`` (meaning "no
        privacy": train without noise) is accepted only when
        ``allow_inf_epsilon`` is True.
    delta : float
        Failure probability; must lie in the open interval (0, 1). Pure
        epsilon-DP mechanisms may pass ``allow_zero_delta=True`` to accept 0.
        A common choice is ``delta < 1 / n_samples``.
    allow_inf_epsilon : bool, default=False
        Accept ``epsilon = inf`` as the non-private limit.
    allow_zero_delta : bool, default=False
        Accept ``delta = 0`` (pure DP).

    Returns
    -------
    epsilon, delta : float

    Raises
    ------
    ValidationError
        If either parameter is out of range.
    """
    epsilon = check_real("epsilon", epsilon)
    if epsilon <= 0:
        raise ValidationError(
            f"epsilon must be > 0; got {epsilon!r}. Smaller epsilon means more privacy; "
            "typical values are 0.1 to 10."
        )
    if np.isinf(epsilon) and not allow_inf_epsilon:
        raise ValidationError(
            "epsilon = inf means no privacy at all, which this function does not accept. "
            "Pass a finite epsilon, or use the non-private option (private=False) if one exists."
        )
    return epsilon, check_delta(delta, allow_zero=allow_zero_delta)


def check_random_state(random_state):
    """Turn ``random_state`` into a :class:`numpy.random.Generator`.

    Parameters
    ----------
    random_state : None, int, numpy.random.SeedSequence, numpy.random.BitGenerator or numpy.random.Generator
        ``None`` gives a generator seeded from fresh OS entropy (not
        reproducible). A non-negative int or a ``SeedSequence`` gives a new
        reproducible generator. A ``Generator`` is returned as is (the caller's
        stream advances as fastdp draws from it). A ``BitGenerator`` is wrapped.

    Returns
    -------
    rng : numpy.random.Generator

    Raises
    ------
    ValidationError
        For negative ints, bools, legacy ``numpy.random.RandomState`` objects
        and anything else.
    """
    if random_state is None:
        return np.random.default_rng()
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, (np.random.SeedSequence, np.random.BitGenerator)):
        return np.random.default_rng(random_state)
    if isinstance(random_state, (bool, np.bool_)):
        raise ValidationError(f"random_state must be None, an int or a Generator; got {random_state!r}.")
    if isinstance(random_state, numbers.Integral):
        if random_state < 0:
            raise ValidationError(
                f"random_state must be a non-negative int; got {random_state}."
            )
        return np.random.default_rng(int(random_state))
    if isinstance(random_state, np.random.RandomState):
        raise ValidationError(
            "fastdp draws randomness only from numpy.random.Generator; the legacy "
            "numpy.random.RandomState is not accepted. Pass an int seed or "
            "numpy.random.default_rng(seed)."
        )
    raise ValidationError(
        f"random_state must be None, an int, a numpy.random.SeedSequence or a "
        f"numpy.random.Generator; got {type(random_state).__name__}."
    )


def check_batch_size(batch_size, n_samples=None):
    """Check a mini-batch (lot) size, against the number of examples when it is known.

    Parameters
    ----------
    batch_size : int
        Number of examples per mini-batch; must satisfy
        ``1 <= batch_size <= n_samples``.
    n_samples : int or None, default=None
        Number of training examples; ``None`` checks only ``batch_size >= 1``
        (for a solver argument checked before the data are seen).

    Returns
    -------
    batch_size : int

    Raises
    ------
    ValidationError
        If ``batch_size`` is not an integer or is out of range.
    """
    if isinstance(batch_size, (bool, np.bool_)) or not isinstance(batch_size, numbers.Integral):
        raise ValidationError(
            f"batch_size must be a positive int; got {batch_size!r} of type {type(batch_size).__name__}."
        )
    batch_size = int(batch_size)
    if batch_size < 1:
        raise ValidationError(
            f"batch_size must be >= 1; got {batch_size}. Use a batch size between 1 and the "
            "number of examples."
        )
    if n_samples is not None and batch_size > n_samples:
        raise ValidationError(
            f"batch_size = {batch_size} exceeds the number of examples n = {n_samples}; "
            "use a batch size between 1 and n."
        )
    return batch_size
