"""Row norms of X and the row-norm bound a mechanism needs.

Squared norms are summed in float64, one block of rows at a time;
``check_X(..., max_row_norm=...)`` rejects rows above the bound and scales
rows that exceed it only by rounding onto it (a per-example map with a
public parameter, so it costs no privacy).
"""

import numpy as np
import scipy.sparse as sp

from fastdp._validation.blocks import _row_blocks
from fastdp._validation.csr import (_canonical_csr_copy, _csr_from_arrays, _csr_is_canonical,
                                   check_rows_as_read)
from fastdp._validation.scalars import check_positive, check_real
from fastdp._validation.sparse_structure import check_sparse_structure
from fastdp._validation.trusted import _verified, is_mapped_rows
from fastdp.exceptions import ValidationError


_ROW_NORM_FIX = (
    "Rescale each example to norm at most 1 first: use "
    "fastdp.preprocessing.normalize_rows (unit rows) or "
    "fastdp.preprocessing.clip_rows (shrink only rows that are too long), "
    "or pass normalize=True to the estimator. Both are per-example "
    "operations and cost no privacy."
)


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
    check_rows_as_read(X, "check_X")  # scipy's toarray trusts the columns
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
    undecided = np.isnan(sq)  # NaN > 1 is false: a NaN norm must not pass as within the bound
    if undecided.any():
        raise ValidationError(
            f"{int(undecided.sum())} of {X.shape[0]} rows of X have a squared L2 norm that is "
            f"NaN (first: row {int(np.argmax(undecided))}), so the bound {bound:g} this "
            f"mechanism's privacy guarantee needs cannot be checked (a NaN value or row factor "
            f"in rows that were not validated, or damaged stored row norms: validate X with "
            f"check_X, or open a binary dataset with open_binary(path, verify=True)).")
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
