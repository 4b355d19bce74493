"""Checks of a saved pipeline's members before they are rebuilt (a hostile file's view).

A pipeline file names scikit-learn transformers and their parameters; some
parameter values that scikit-learn accepts are harmful when they come from
someone else: a ``PolynomialFeatures`` degree whose output has billions of
columns, a ``FunctionTransformer`` whose ufunc gets ``where=False`` (and
returns uninitialised memory), a ``HashingVectorizer`` token pattern that
backtracks exponentially, an ``ngram_range`` of a million.  Every such value
is refused here with a :class:`~fastdp.exceptions.ValidationError`, and the
widths of the steps must chain exactly into the final estimator's
``n_features_in_``.
"""

from __future__ import annotations

import numbers

import numpy as np

from fastdp.exceptions import ValidationError

MAX_PIPELINE_STEPS = 64
"""Most transformer steps a saved pipeline may hold."""

MAX_STEP_FEATURES = 2**31 - 1
"""Most input or output features a saved pipeline step may declare."""

MAX_POLYNOMIAL_DEGREE = 16
"""Largest ``PolynomialFeatures`` degree a saved pipeline may hold."""

MAX_NGRAM = 16
"""Largest n of a saved ``HashingVectorizer``'s ``ngram_range``."""

DEFAULT_TOKEN_PATTERN = r"(?u)\b\w\w+\b"
"""The only ``token_pattern`` a saved ``HashingVectorizer`` may hold (scikit-learn's
default: linear time); a pattern from a file could backtrack exponentially."""

_BOOLEAN_PARAMS = ("copy", "interaction_only", "include_bias", "validate", "accept_sparse",
                   "check_inverse", "lowercase", "binary", "alternate_sign", "with_mean",
                   "with_std", "with_centering", "with_scaling", "clip", "unit_variance")


def _refuse(where, message):
    raise ValidationError(f"{where}: {message}")


def checked_width(where, value, what="n_features_in"):
    """A step's declared width: an int (not bool) in [1, MAX_STEP_FEATURES]."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not (
            1 <= value <= MAX_STEP_FEATURES):
        _refuse(where, f"{what} must be an integer in [1, {MAX_STEP_FEATURES}]; got "
                       f"{str(value)[:40]!r}.")
    return int(value)


def _check_ufunc(where, name, func):
    if func is None:
        return
    if not isinstance(func, np.ufunc) or func.nin != 1 or func.nout != 1:
        _refuse(where, f"{name} must be None or a NumPy ufunc of one input and one output; "
                       f"got {func!r}.")


def _check_int_range(where, name, value, low, high):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not (
            low <= value <= high):
        _refuse(where, f"{name} must be an integer in [{low}, {high}]; got {str(value)[:40]!r}.")
    return int(value)


def _check_pair(where, name, value, low, high):
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        _refuse(where, f"{name} must be a pair of integers; got {str(value)[:40]!r}.")
    first = _check_int_range(where, name, value[0], low, high)
    second = _check_int_range(where, name, value[1], low, high)
    if first > second:
        _refuse(where, f"{name} must be (min, max) with min <= max; got {value!r}.")


def check_member_params(where, cls_name, params):
    """Refuse parameter values of a saved step that are harmful from a file.

    ``params`` are the decoded parameters (ufuncs and dtypes rebuilt).
    scikit-learn validates the rest of each value when the step is fitted.
    """
    for name in _BOOLEAN_PARAMS:
        if name in params and not isinstance(params[name], bool):
            _refuse(where, f"{name} must be true or false; got {str(params[name])[:40]!r}.")
    if cls_name == "PolynomialFeatures":
        degree = params.get("degree", 2)
        if isinstance(degree, (tuple, list)):
            _check_pair(where, "degree", degree, 0, MAX_POLYNOMIAL_DEGREE)
        else:
            _check_int_range(where, "degree", degree, 0, MAX_POLYNOMIAL_DEGREE)
    elif cls_name == "FunctionTransformer":
        _check_ufunc(where, "func", params.get("func"))
        _check_ufunc(where, "inverse_func", params.get("inverse_func"))
        for name in ("kw_args", "inv_kw_args"):
            if params.get(name) not in (None, {}):
                _refuse(where, f"{name} must be empty: keyword arguments to a ufunc (e.g. "
                               "where=False, out=...) change what it computes.")
        if params.get("feature_names_out") not in (None, "one-to-one"):
            _refuse(where, "feature_names_out must be None or 'one-to-one'.")
    elif cls_name == "HashingVectorizer":
        if params.get("token_pattern", DEFAULT_TOKEN_PATTERN) not in (DEFAULT_TOKEN_PATTERN, None):
            _refuse(where, f"token_pattern must be scikit-learn's default "
                           f"{DEFAULT_TOKEN_PATTERN!r}: a pattern read from a file may take "
                           "exponential time.")
        for name in ("tokenizer", "preprocessor"):
            if params.get(name) is not None:
                _refuse(where, f"{name} must be None.")
        _check_pair(where, "ngram_range", params.get("ngram_range", (1, 1)), 1, MAX_NGRAM)
        _check_int_range(where, "n_features", params.get("n_features", 2**20), 1,
                         MAX_STEP_FEATURES)
    elif cls_name == "FeatureHasher":
        _check_int_range(where, "n_features", params.get("n_features", 2**20), 1,
                         MAX_STEP_FEATURES)


def output_width(cls_name, step, width):
    """Columns a rebuilt step outputs for ``width`` input columns."""
    if cls_name in ("HashingVectorizer", "FeatureHasher"):
        return int(step.n_features)
    if cls_name == "PolynomialFeatures":
        return int(step.n_output_features_)
    return width


def check_data_fitted_arrays(where, step, width):
    """A data-fitted scaler's array attributes: finite, one value per input column."""
    for attr, value in vars(step).items():
        if isinstance(value, np.ndarray) and attr.endswith("_") and not attr.startswith("_") \
                and attr not in ("feature_names_in_",):
            if value.dtype.kind not in "biuf" or value.shape != (width,) or not np.all(
                    np.isfinite(value)):
                _refuse(where, f"{attr} must be {width} finite numbers; got "
                               f"{value.dtype} {value.shape}.")
