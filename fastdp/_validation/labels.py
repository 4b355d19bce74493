"""Labels: ``check_labels`` (float64, ``{-1, +1}`` for binary tasks) and ``check_X_y``.
"""

import numpy as np

from fastdp._validation.features import check_X
from fastdp.exceptions import ValidationError


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
