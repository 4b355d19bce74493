"""Parameter checks of the DP linear estimators that read no data, and the default delta.

:class:`_ParameterChecks` is one of the mixins of
:class:`~fastdp.linear_model._base._DPLinearModel`: whether the fit is private,
the checks of the public parameters (run before anything touches X), and
delta, the one privacy parameter that depends on n.
"""

import math
import numbers
import warnings

import numpy as np

from fastdp._validation import (check_positive, check_privacy_params, check_random_state,
                                check_real)
from fastdp.exceptions import ValidationError, WeakPrivacyWarning


def default_delta(n_samples):
    """The default delta: ``min(1e-5, 1 / (10 n))``, always below ``1/n``.

    A delta of order ``1/n`` permits releasing one whole example; fastdp's
    default stays an order of magnitude below that.

    Raises
    ------
    ValidationError
        If ``n_samples < 1`` (empty data).
    """
    if not n_samples >= 1:
        raise ValidationError(f"the data has {n_samples} examples; training needs at least one.")
    return min(1e-5, 1.0 / (10.0 * n_samples))


class _ParameterChecks:
    """Checks of the estimator's public parameters (a mixin of ``_DPLinearModel``)."""

    def _private(self):
        """True unless the user asked for a non-private fit (epsilon=inf)."""
        if self.noise_multiplier is not None:
            return float(self.noise_multiplier) > 0.0
        return not (isinstance(self.epsilon, numbers.Real) and math.isinf(self.epsilon)
                    and self.epsilon > 0)

    def _check_public_params(self):
        """Checks that read no data (run before anything touches X)."""
        if self.solver_options is not None and not isinstance(self.solver_options, dict):
            raise ValidationError(
                f"solver_options must be a dict or None; got {type(self.solver_options).__name__}.")
        if self.noise_multiplier is not None:
            nm = check_real("noise_multiplier", self.noise_multiplier)
            if not (0.0 <= nm < math.inf):
                raise ValidationError(
                    f"noise_multiplier must be a finite number >= 0 or None; got {nm!r}.")
        if not (isinstance(self.alpha, str) and self.alpha == "auto"):
            check_positive("alpha", self.alpha)
        if not (isinstance(self.epochs, str) and self.epochs == "auto"):
            check_positive("epochs", self.epochs)
        if isinstance(self.clip, str) and self.clip != "auto":
            raise ValidationError(f"clip must be a number > 0, None or 'auto'; got {self.clip!r}.")
        if self.clip is not None and not isinstance(self.clip, str):
            check_positive("clip", self.clip, allow_inf=True)
        if self.callback is not None and not callable(self.callback):
            raise ValidationError("callback must be callable (it receives a dict per epoch) or None.")
        check_random_state(self.random_state)  # a Generator is returned as is (nothing drawn)
        if not isinstance(self.lazy_noise, (bool, np.bool_)):
            raise ValidationError(f"lazy_noise must be True or False; got {self.lazy_noise!r}.")
        if self.noise_multiplier is not None and not (
                isinstance(self.epsilon, numbers.Real) and self.epsilon == 1.0):
            warnings.warn(
                f"noise_multiplier={self.noise_multiplier!r} is used as given and epsilon="
                f"{self.epsilon!r} is ignored; epsilon_ reports the epsilon of that noise.",
                UserWarning, stacklevel=3)
        return self._row_map()

    def _check_params(self, n_samples):
        delta = default_delta(n_samples) if self.delta is None else self.delta
        _, delta = check_privacy_params(self.epsilon, delta, allow_inf_epsilon=True)
        if self._private() and delta >= 1.0 / n_samples:
            warnings.warn(
                f"delta = {delta:g} is >= 1/n = {1.0 / n_samples:g}: a guarantee this weak "
                "permits releasing one whole example; use delta well below 1/n (the default is "
                "min(1e-5, 1/(10 n))).", WeakPrivacyWarning, stacklevel=3)
        return float(delta)
