"""The index arrays of every scipy.sparse format, checked before scipy converts anything.

scipy's format conversions (coo -> csr, csc -> csr, bsr -> csr, dia -> csr,
lil -> csr, dok -> coo) run compiled loops that trust the index arrays: an
index edited after construction (``X.row[0] = 10**6``) makes them write out
of bounds (a segfault, or silent heap corruption).  These checks look only
at the arrays, vectorised and O(nnz), and never call a scipy method that
reads the indices.
"""

import itertools
import numbers

import numpy as np
import scipy.sparse as sp

from fastdp._validation.trusted import _verified
from fastdp.exceptions import ValidationError


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


def _check_csr_structure(X):
    """Reject CSR matrices whose index arrays could make a kernel read out of bounds."""
    n_rows, n_cols = _sparse_shape(X)
    _check_csr_arrays(X, n_rows, n_cols)
