""":class:`DPLogisticRegression`: logistic regression (binary and multinomial)
trained with differential privacy.
"""

import numpy as np

from fastdp.linear_model._base import _DPLinearClassifier
from fastdp.linear_model._docs import _ATTRIBUTES_DOC, _PARAMETERS_DOC


class DPLogisticRegression(_DPLinearClassifier):
    __doc__ = """Logistic regression (two or more classes) trained with differential privacy.

    Two classes: minimises ``(1/N) sum_i log(1 + exp(-y_i m(x_i)^T theta)) +
    (alpha/2)||theta||^2`` (labels mapped to -1/+1; ``classes_[1]`` is +1).
    K > 2 classes: the multinomial (softmax) loss, trained by DP-SGD with the
    whole K x d per-example gradient clipped as one vector (one mechanism,
    the same event as two classes), or the exact optimum at ``epsilon=np.inf``;
    other solvers fit K one-vs-rest models whose events are composed in one
    (``privacy_event_``) and charged once.  ``classes_`` is the set of labels
    seen in ``y`` (as in every scikit-learn classifier; it is not protected).
    """ + _PARAMETERS_DOC + _ATTRIBUTES_DOC

    _loss = "logistic"

    def predict_proba(self, X):
        """Class probabilities: sigmoid (two classes), softmax (multinomial), or
        normalised one-vs-rest sigmoids."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            p1 = 0.5 * (1.0 + np.tanh(0.5 * scores))
            return np.column_stack([1.0 - p1, p1])
        if self.multi_class_ == "multinomial":
            scores = scores - scores.max(axis=1, keepdims=True)
            p = np.exp(scores)
        else:
            p = 0.5 * (1.0 + np.tanh(0.5 * scores))
        return p / p.sum(axis=1, keepdims=True)

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return np.column_stack([-np.logaddexp(0.0, scores), -np.logaddexp(0.0, -scores)])
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))
