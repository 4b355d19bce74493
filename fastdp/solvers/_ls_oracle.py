"""Batch oracle of the line-search solvers: clipped gradient sums and margins.

A thin wrapper over the shared compiled GLM kernels
(:func:`fastdp._kernels._glm.clipped_gradient_sum` and
:func:`fastdp._kernels._glm.margins`); it holds the CSR arrays, labels and
loss code so the drivers only pass row sets and vectors. It adds no noise and
releases nothing: the drivers privatise what it returns.
"""

import numpy as np
import scipy.sparse as sp

from fastdp._kernels import _glm
from fastdp._kernels import _line_search as _ls_kernel
from fastdp._validation import check_X
from fastdp.solvers._common import StructureTokenCache
from fastdp.exceptions import ValidationError

__all__ = ["GlmBatchOracle"]

_GLM_CODES = {"squared": _glm.LOSS_SQUARED, "logistic": _glm.LOSS_LOGISTIC,
              "hinge": _glm.LOSS_HINGE}


class GlmBatchOracle(StructureTokenCache):
    """Per-batch gradient sums and margins of a GLM on CSR data.

    Parameters
    ----------
    X : sparse matrix or ndarray of shape (n, d)
        Converted to canonical CSR (float64 values) once.
    y : ndarray of shape (n,)
        Labels (±1 for logistic/hinge, real for squared).
    loss : {"squared", "logistic", "hinge"}
    num_threads : int, default 1
        Threads of the GLM kernels (same bits for any value).
    """

    def __init__(self, X, y, loss, num_threads=1):
        if loss not in _GLM_CODES:
            raise ValidationError(f"loss must be one of {sorted(_GLM_CODES)}; got {loss!r}.")
        X = check_X(X)
        if not sp.issparse(X):
            X = sp.csr_matrix(X)
        self.X = X
        self.y = np.ascontiguousarray(y, dtype=np.float64)
        if self.y.shape != (X.shape[0],):
            raise ValidationError("y must have one entry per row of X.")
        self.loss = loss
        self.glm_code = _GLM_CODES[loss]
        self.kernel_code = _ls_kernel.LOSS_CODES[loss]
        self.n_samples, self.n_features = X.shape
        self.num_threads = int(num_threads)
        self.all_rows = np.arange(self.n_samples, dtype=np.int64)

    def clipped_gradient_sum(self, rows, w, clip):
        """Σ_{i∈rows} clip(∇loss_i(w), clip) (L2 clipping per example)."""
        out = np.zeros(self.n_features)
        _glm.clipped_gradient_sum(self.X.data, self.X.indices, self.X.indptr, self.y, rows,
                                  np.ascontiguousarray(w, dtype=np.float64), self.glm_code,
                                  float(clip), out, num_threads=self.num_threads,
                                  check_structure=self._structure())
        return out

    def margins(self, rows, v):
        """x_i·v for every i in rows."""
        out = np.empty(rows.shape[0])
        _glm.margins(self.X.data, self.X.indices, self.X.indptr, rows,
                     np.ascontiguousarray(v, dtype=np.float64), out,
                     num_threads=self.num_threads, check_structure=self._structure())
        return out

    def labels(self, rows):
        return self.y[rows]

    def loss_values(self, w):
        """Per-example unclipped losses at w over all rows (non-private diagnostic)."""
        z = self.margins(self.all_rows, w)
        if self.loss == "logistic":
            return np.logaddexp(0.0, -self.y * z)
        if self.loss == "hinge":
            return np.maximum(0.0, 1.0 - self.y * z)
        return 0.5 * (z - self.y) ** 2
