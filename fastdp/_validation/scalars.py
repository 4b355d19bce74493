"""Checks of scalar hyper-parameters: real numbers, intervals, integers, batch sizes.

The one definition of these checks (and of their domains) that every fastdp
module uses; each returns the checked value as a Python number or raises
:class:`fastdp.exceptions.ValidationError`.
"""

import numbers

import numpy as np

from fastdp.exceptions import ValidationError


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
