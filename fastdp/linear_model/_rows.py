"""What the solver sees of the data: the row map (bound and intercept column), the
validated X, and the targets of each fit.

:class:`_RowsAndTargets` is one of the mixins of
:class:`~fastdp.linear_model._base._DPLinearModel`.
"""

import inspect
import numbers

import numpy as np
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, validate_data

from fastdp._validation import check_labels, check_sparse_structure, check_X
from fastdp._validation.trusted import known_finite_csr
from fastdp.exceptions import ValidationError
from fastdp.preprocessing import RowMap


# scikit-learn's name of the finiteness switch of ``validate_data`` (renamed in 1.6)
_FINITE_KEYWORD = ("ensure_all_finite"
                   if "ensure_all_finite" in inspect.signature(check_array).parameters
                   else "force_all_finite")

_NORMALIZE_VALUES = {True: "normalize", False: "reject", "normalize": "normalize",
                     "clip": "clip", "reject": "reject"}


class _RowsAndTargets:
    """The row map, X's validation and the targets (a mixin of ``_DPLinearModel``).

    The estimator class sets ``_default_bound`` (the row bound of
    ``normalize="auto"``), ``_task`` and ``_loss``.
    """

    def _row_map(self):
        """The :class:`~fastdp.preprocessing.RowMap` this estimator's settings describe."""
        key = self.normalize
        if isinstance(key, (bool, np.bool_)):
            key = bool(key)
        if isinstance(key, str) and key == "auto":
            bound = self._default_bound
        elif isinstance(key, (bool, str)) and key in _NORMALIZE_VALUES:
            bound = _NORMALIZE_VALUES[key]
        else:
            raise ValidationError(
                f"normalize must be 'auto', True ('normalize'), 'clip' or False ('reject'); "
                f"got {self.normalize!r}.")
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise ValidationError(f"fit_intercept must be True or False; got {self.fit_intercept!r}.")
        scaling = self.intercept_scaling
        if isinstance(scaling, numbers.Integral) and not isinstance(scaling, (bool, np.bool_)):
            scaling = float(scaling)  # a Python int beyond int64 is not a numpy number
        return RowMap(bound=bound, fit_intercept=bool(self.fit_intercept),
                      intercept_scaling=scaling)

    def _validate_X(self, X, y="no_validation", *, reset, max_row_norm=None):
        """scikit-learn's checks (feature names and counts, messages), then fastdp's.

        ``validate_data`` keeps CSR float32/float64 input as it is; fastdp's
        :func:`~fastdp._validation.check_X` then canonicalises the indices.
        Errors are re-raised as :class:`~fastdp.exceptions.ValidationError`.
        """
        kwargs = dict(reset=reset, accept_sparse="csr", dtype=[np.float64, np.float32],
                      accept_large_sparse=True)
        if known_finite_csr(X):  # checked when written (a binary dataset): no scan of X.data
            kwargs[_FINITE_KEYWORD] = False
        # before scikit-learn converts a sparse matrix: scipy trusts its index arrays
        check_sparse_structure(X)
        if getattr(getattr(X, "dtype", None), "kind", None) in ("m", "M"):
            raise ValidationError(
                f"X has dtype {X.dtype}: dates and durations are not features; convert them "
                "to numbers (e.g. seconds since a reference) first.")
        if getattr(getattr(y, "dtype", None), "kind", None) == "S":  # an array of bytes
            raise ValidationError("labels given as bytes: decode them to strings (or use "
                                  "numbers) first, e.g. y.astype(str).")
        try:
            if isinstance(y, str) and y == "no_validation":
                X = validate_data(self, X, **kwargs)
            else:
                X, y = validate_data(self, X, y, y_numeric=self._task == "regression", **kwargs)
                if self._task != "regression":
                    check_classification_targets(y)
        except ValidationError:
            raise
        except ValueError as exc:
            message = str(exc)
            if "NaN" in message or "infinity" in message:
                # scikit-learn appends advice about other estimators; keep its first line
                message = (message.splitlines()[0] + " fastdp trains on finite values only: "
                           "drop or impute those entries first.")
            raise ValidationError(message) from exc
        X = check_X(X, max_row_norm=max_row_norm)
        return X if isinstance(y, str) and y == "no_validation" else (X, y)

    def _targets(self, y, n_samples):
        """``(targets, classes, n_fits, loss)`` of the problem the solver sees.

        Regression: real targets, one fit.  Two classes: -1/+1, one fit.
        K > 2 classes: class indices and one multinomial fit (logistic loss
        with DP-SGD or the exact solver), or K one-vs-rest -1/+1 fits.
        """
        if self._task == "regression":
            y, _ = check_labels(y, "regression", n_samples=n_samples)
            return y, None, 1, self._loss
        y = np.asarray(y)
        classes = np.unique(y)
        if classes.shape[0] < 2:
            raise ValidationError(
                f"{type(self).__name__} needs at least two classes in y; got 1 class: {classes.tolist()}.")
        if classes.shape[0] == 2:
            y, classes = check_labels(y, "binary", n_samples=n_samples)
            return y, classes, 1, self._loss
        index = np.searchsorted(classes, y).astype(np.int64)
        return index, classes, classes.shape[0], self._loss
