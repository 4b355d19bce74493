"""Canonical CSR: the test, the canonical copy, and the structure token for the kernels.

A canonical CSR matrix has sorted column indices, no duplicate entries, tight
storage, and ``indices`` and ``indptr`` of one integer type (int32 or int64).
"""

import numpy as np
import scipy.sparse as sp

from fastdp._validation.blocks import _row_blocks
from fastdp._validation.sparse_structure import _check_csr_arrays, _sparse_shape
from fastdp._validation.trusted import (
    _StructureToken,
    _address,
    _known_structure,
    _remember_structure,
    is_mapped_rows,
)
from fastdp.exceptions import ValidationError


_INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


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
    For a binary dataset opened without ``verify`` (structure trusted from
    its header, not scanned) the token carries the dataset's per-row map, and
    the kernels check each row as they first read it.
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
            entry = (None, None, n_cols, _address(indices), _address(indptr), None)
    return _StructureToken(indices, indptr, entry[2], entry[3], entry[4], entry[5])


def check_rows_as_read(X, caller):
    """Before ``X`` goes whole to scipy or numpy: check the rows of a CSR whose structure was
    trusted, not scanned (a binary dataset opened without ``verify``), that no kernel has
    checked yet in this process; nothing for any other matrix.

    scipy's sparse products and conversions trust the column indices (an index past the
    shape reads or writes out of bounds).  One pass over the column indices of the rows
    not checked before (:func:`fastdp._kernels._glm.check_rows_once`), then none.

    Parameters
    ----------
    X : scipy.sparse CSR matrix, or mapped rows (their CSR is checked)
    caller : str
        Named in the error.

    Raises
    ------
    ValidationError
        Naming the first row whose column indices are not strictly increasing within
        ``[0, n_features)``, and how to check or rebuild the dataset.
    """
    if is_mapped_rows(X):
        X = X.csr
    if not (sp.issparse(X) and X.format == "csr"):
        return
    entry = _known_structure(X.indices, X.indptr, X.shape[1])
    if entry is None or entry[5] is None:
        return
    from fastdp._kernels._glm import check_rows_once

    check_rows_once(caller, X.indices, X.indptr, entry[5], entry[2])


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
