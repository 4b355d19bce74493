"""``check_X``: a feature matrix checked and brought into kernel layout.

A feature matrix becomes either a canonical CSR matrix or a C-contiguous
dense array, with float32 or float64 values; the user's matrix is never
modified.
"""

import numpy as np
import scipy.sparse as sp

from fastdp._validation.csr import (_INDEX_DTYPES, _canonical_csr_copy, _csr_is_canonical,
                                   check_rows_as_read)
from fastdp._validation.row_norms import _check_row_norm_bound
from fastdp._validation.sparse_structure import _check_csr_structure, check_sparse_structure
from fastdp._validation.trusted import _remember_structure, _verified, is_mapped_rows
from fastdp._validation.values import (
    _reject_empty,
    _reject_non_finite_csr,
    _reject_non_finite_dense,
)
from fastdp.exceptions import ValidationError


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
    if verified is not None:  # a copy follows (O(nnz) anyway) of a trusted structure
        check_rows_as_read(X, "check_X")
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
