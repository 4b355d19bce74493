""":class:`DPLinearSVC`: linear SVM (hinge loss) trained with differential privacy.
"""

from fastdp.linear_model._base import _DPLinearClassifier
from fastdp.linear_model._docs import _ATTRIBUTES_DOC, _PARAMETERS_DOC


class DPLinearSVC(_DPLinearClassifier):
    __doc__ = """Linear SVM (hinge loss) trained with differential privacy.

    Minimises ``(1/N) sum_i max(0, 1 - y_i m(x_i)^T theta) + (alpha/2)||theta||^2``;
    K > 2 classes: K one-vs-rest models, their events composed in one.
    The hinge loss is not smooth, so spec 000's convergence theory does not
    cover it; the privacy guarantee does.
    """ + _PARAMETERS_DOC + _ATTRIBUTES_DOC

    _loss = "hinge"
