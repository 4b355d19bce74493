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

import numbers

import numpy as np
import scipy.sparse as sp

from fastdp.exceptions import ValidationError

__all__ = [
    "check_X",
    "row_norms",
    "check_labels",
    "check_X_y",
    "check_real",
    "check_real_array",
    "check_positive",
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
    data = X.data[: X.indptr[-1]]
    finite = np.isfinite(data)
    if finite.all():
        return
    bad_positions = np.flatnonzero(~finite)
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


def _check_csr_structure(X):
    """Reject CSR matrices whose index arrays could make a kernel read out of bounds."""
    n_rows, n_cols = X.shape
    indptr, indices = X.indptr, X.indices
    rebuild = (
        "Rebuild it with scipy.sparse.csr_matrix((data, indices, indptr), "
        "shape=(n_samples, n_features)) and check the index arrays."
    )
    if indptr.ndim != 1 or indptr.shape[0] != n_rows + 1:
        raise ValidationError(
            f"Malformed CSR matrix: indptr has length {indptr.shape[0]}, expected "
            f"n_rows + 1 = {n_rows + 1}. {rebuild}"
        )
    if indptr[0] != 0 or (n_rows > 0 and np.any(np.diff(indptr) < 0)):
        raise ValidationError(
            f"Malformed CSR matrix: indptr must start at 0 and never decrease. {rebuild}"
        )
    nnz = int(indptr[-1])
    if indices.shape[0] < nnz or X.data.shape[0] < nnz:
        raise ValidationError(
            f"Malformed CSR matrix: indptr[-1] = {nnz} but indices has "
            f"{indices.shape[0]} and data has {X.data.shape[0]} entries. {rebuild}"
        )
    used = indices[:nnz]
    if nnz and (used.min() < 0 or used.max() >= n_cols):
        raise ValidationError(
            f"Malformed CSR matrix: column indices must lie in [0, {n_cols}), found "
            f"values in [{int(used.min())}, {int(used.max())}]. {rebuild}"
        )


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
    increasing = X.indices[1:] > X.indices[:-1]
    # a position k (1..nnz-1) that starts a row may be anything
    row_starts = X.indptr[1:-1]
    row_starts = row_starts[(row_starts > 0) & (row_starts < nnz)]
    increasing[row_starts - 1] = True
    return bool(increasing.all())


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
    if X.ndim != 2:
        raise ValidationError(
            f"X must be 2-D (n_samples, n_features); got a {X.ndim}-D sparse array. "
            "Reshape it, e.g. X.reshape(1, -1) for a single example."
        )
    if X.format != "csr":
        X = X.tocsr()  # a new object: the user's matrix is not modified
        copy = False  # already a private copy
    _check_csr_structure(X)
    value_dtype = _target_dtype(X.data.dtype, accepted)
    if X.indices.dtype == X.indptr.dtype and X.indices.dtype in _INDEX_DTYPES:
        index_dtype = X.indices.dtype
    else:
        index_dtype = np.dtype(np.int64)
    needs_copy = (
        copy
        or value_dtype != X.data.dtype
        or index_dtype != X.indices.dtype
        or index_dtype != X.indptr.dtype
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
        Dense array or sparse matrix (any scipy format; non-CSR formats are
        converted to CSR). Duplicate entries of a non-canonical CSR matrix are
        treated as separate terms, so pass canonical input (see
        :func:`check_X`) for the norm of the summed entries.
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
        if X.format != "csr":
            X = X.tocsr()
        n_rows = X.shape[0]
        nnz = int(X.indptr[-1])
        data = np.asarray(X.data[:nnz], dtype=np.float64)
        starts = np.asarray(X.indptr[:-1])
        nonempty = starts < X.indptr[1:]
        sq = np.zeros(n_rows)
        if nnz:
            # consecutive non-empty row starts delimit exactly one row each
            sq[nonempty] = np.add.reduceat(data * data, starts[nonempty])
    else:
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValidationError(
                f"row_norms needs a 2-D array; got shape {X.shape}."
            )
        Xf = X.astype(np.float64, copy=False)
        sq = np.einsum("ij,ij->i", Xf, Xf)
    return sq if squared else np.sqrt(sq)


def _check_row_norm_bound(X, max_row_norm, row_norm_tol):
    bound = check_positive("max_row_norm", max_row_norm)
    tol = float(row_norm_tol)
    if not (np.isfinite(tol) and tol >= 0):
        raise ValidationError(f"row_norm_tol must be a finite number >= 0; got {row_norm_tol!r}.")
    norms = row_norms(X)
    too_long = norms > bound * (1.0 + tol)
    if too_long.any():
        count = int(too_long.sum())
        worst = int(np.argmax(norms))
        raise ValidationError(
            f"{count} of {X.shape[0]} rows of X have L2 norm above {bound:g} "
            f"(the bound this mechanism's privacy guarantee needs); the worst is "
            f"row {worst} with norm {norms[worst]:.6g}. {_ROW_NORM_FIX}"
        )


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
        When given, reject X if some row has L2 norm above
        ``max_row_norm * (1 + row_norm_tol)``. Mechanisms whose sensitivity
        analysis assumes ``||x_i|| <= 1`` pass ``max_row_norm=1``.
    row_norm_tol : float, default=1e-6
        Relative slack for the row-norm check (rows normalised in floating
        point can have norm ``1 + 1e-16``).
    copy : bool, default=False
        Always return a new array/matrix that shares no memory with ``X``.

    Returns
    -------
    X_checked : ndarray or scipy.sparse CSR matrix
        Sparse output is canonical: column indices sorted within each row,
        duplicate entries summed, ``indices`` and ``indptr`` of the same dtype
        (int32 or int64), ``len(data) == indptr[-1]``. Explicit zeros are kept.
        When the input already has this form with float32/float64 values and
        ``copy=False``, the input object itself is returned (no copy). The
        user's matrix is never modified.

    Raises
    ------
    ValidationError
        For NaN or infinite values (naming the first bad row), empty input
        (0 rows or 0 features), non-2-D input, complex or non-numeric values,
        malformed CSR index arrays, sparse input when ``accept_sparse=False``,
        and rows that exceed ``max_row_norm``.

    Notes
    -----
    Privacy: reads the private data; releases nothing. The row-norm check
    only rejects input, it never alters it: rescaling rows is left to
    ``fastdp.preprocessing``, where its (per-example, privacy-free) meaning is
    documented.
    """
    accepted = _normalise_dtype_spec(dtype)
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
        _check_row_norm_bound(X_checked, max_row_norm, row_norm_tol)
    return X_checked


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


def check_real(name, value):
    """Check that a scalar parameter is a real number (not NaN) and return it as a float.

    Parameters
    ----------
    name : str
        Parameter name used in the error message.
    value : real number
        Value to check; bools are rejected, infinities are kept.

    Returns
    -------
    value : float

    Raises
    ------
    ValidationError
        If ``value`` is not a real number or is NaN.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValidationError(f"{name} must be a real number; got {value!r} of type {type(value).__name__}.")
    value = float(value)
    if np.isnan(value):
        raise ValidationError(f"{name} must be a number; got NaN.")
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
    delta = check_in_interval(
        "delta", delta, 0.0, 1.0, include_low=allow_zero_delta,
        advice="A common choice is a value below 1/n_samples, e.g. 1e-5.",
    )
    return epsilon, delta


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
