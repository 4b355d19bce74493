""":class:`DPRidge`: ridge regression trained with differential privacy.
"""

import numpy as np
from sklearn.base import RegressorMixin

from fastdp.linear_model._base import _DPLinearModel
from fastdp.linear_model._docs import _ATTRIBUTES_DOC, _PARAMETERS_DOC


class DPRidge(RegressorMixin, _DPLinearModel):
    __doc__ = """Ridge regression trained with differential privacy (DP-SGD by default).

    Minimises ``(1/N) sum_i (m(x_i)^T theta - y_i)^2 / 2 + (alpha/2) ||theta||^2``
    over the mapped rows ``m(x)`` (bounded rows plus the intercept column).
    DP-SGD clips each per-example gradient and DP-SCD each dual step, which
    bounds the sensitivity whatever the targets, so targets need no bound;
    still, centre and scale them with public knowledge for good utility.
    """ + _PARAMETERS_DOC + _ATTRIBUTES_DOC

    _loss = "squared"
    _task = "regression"
    _default_bound = "clip"

    def _shape_coef(self, coef):
        return np.asarray(coef, dtype=np.float64).reshape(-1)

    def _shape_intercept(self, intercept):
        return float(np.asarray(intercept).reshape(-1)[0])

    def predict(self, X):
        """Predict ``b(X) @ coef_ + intercept_`` (rows bounded as in ``fit``)."""
        return np.asarray(self._bounded_scores(X)).ravel() + self.intercept_
