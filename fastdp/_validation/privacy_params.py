"""Checks of the privacy parameters epsilon and delta, one domain for each.
"""

import math
import numbers

import numpy as np

from fastdp._validation.scalars import check_real
from fastdp.exceptions import ValidationError


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
