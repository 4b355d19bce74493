"""Batch oracle of the line-search solvers: the GLM oracle under its line-search name.

:class:`GlmBatchOracle` is :class:`fastdp.solvers.glm_oracle.GlmOracle` (clipped
gradient sums and margins over the shared compiled GLM kernels) called as the
line search calls it, ``GlmBatchOracle(X, y, loss, num_threads)``, with the
labels used as given (the drivers check them).  It adds no noise and releases
nothing: the drivers privatise what it returns.
"""

from fastdp.solvers.glm_oracle import GlmOracle

__all__ = ["GlmBatchOracle"]


class GlmBatchOracle(GlmOracle):
    """Per-batch gradient sums and margins of a GLM on CSR data (see :class:`GlmOracle`).

    Parameters
    ----------
    X : sparse matrix or ndarray of shape (n, d)
        Converted to canonical CSR once (float32/float64 values kept).
    y : ndarray of shape (n,)
        Labels (±1 for logistic/hinge, real for squared), used as given.
    loss : {"squared", "logistic", "hinge"}
    num_threads : int, default 1
        Threads of the GLM kernels (same bits for any value).
    """

    def __init__(self, X, y, loss, num_threads=1):
        super().__init__(X, y, loss=loss, num_threads=num_threads, labels="as_given")

    @property
    def kernel_code(self):
        """The loss code of the kernels (``self.loss.code``; the GLM kernels and the
        line-search kernel share it)."""
        return self.loss.code
