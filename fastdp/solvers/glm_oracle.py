"""The GLM oracle: margins, (clipped) gradient sums, gradients and objective over CSR rows.

One class, :class:`GlmOracle`, holds a validated CSR matrix (float32 or
float64 values, int32 or int64 indices, read by the kernels as they are), the
labels and the loss, and answers every question the gradient-based solver
families ask about a set of rows B, through the shared compiled kernels of
:mod:`fastdp._kernels._glm` (no second copy of the loops):

* ``margins(rows, v)``: ``x_i^T v`` for i in B;
* ``clipped_gradient_sum(rows, w, clip)``: ``sum_{i in B} clip(loss'(x_i^T w, y_i) x_i, C)``;
* ``gradient(theta, rows)``: the mean clipped gradient over B plus ``lam theta``
  (the accelerated solvers' oracle, spec 002 section 2.0);
* ``gradients(thetas, rows)``: the same for R replicas at once;
* ``loss_values(w)``, ``objective(theta)``, ``smoothness()``: non-private diagnostics.

The estimators' mapped rows (:class:`fastdp._mapped_rows.MappedRows`:
``normalize=``, ``fit_intercept=``) are read through their row map by the
same kernels, without a copy of X.  Every product with X — the oracle's, and
the exact solver's (:mod:`fastdp.solvers.exact`) — goes through
:class:`RowProducts`, one thin layer over the ``_glm`` kernels; its full
products ``X @ V`` and ``X.T @ A`` have the bits of scipy's products with
the (written-out) matrix: the same sums, in the same order.

The accelerated solvers use it as :class:`fastdp.solvers.accelerated.oracle.GLMProblem`
(which adds the L1 sensitivity of their data domain), the line-search solvers
as :class:`fastdp.solvers.line_search.oracle.GlmBatchOracle` (their call convention);
both are this class.

Privacy
-------
Private: the rows and labels.  The oracle reads them and releases nothing;
the solvers clip (through ``clip``) and add the noise.  ``loss_values``,
``objective`` and ``smoothness`` read the whole dataset: non-private
diagnostics.
"""

import math

import numpy as np

from fastdp._kernels import _glm
from fastdp._validation import check_labels, check_rows_as_read, check_X, is_mapped_rows
from fastdp.exceptions import ValidationError
from fastdp.losses import get_loss, primal_objective
from fastdp.solvers._common import StructureTokenCache, as_csr, check_num_threads, kernel_rows

__all__ = ["GlmOracle", "RowProducts"]


class RowProducts(StructureTokenCache):
    """Products of the rows of a checked X with vectors, through the ``_glm`` kernels.

    Parameters
    ----------
    X : scipy.sparse.csr_matrix or fastdp._mapped_rows.MappedRows
        Output of :func:`fastdp.solvers._common.as_csr` (canonical CSR,
        float32/float64 values, int32/int64 indices), or the estimators'
        mapped rows, read through their row map (no copy of X).

    Notes
    -----
    The full products :meth:`dot` and :meth:`tdot` equal scipy's ``X @ V``
    and ``X.T @ A`` bit for bit (X written out, for mapped rows): scipy sums
    ``x_ij v_j`` over each row in storage order from 0, and adds ``x_ij a_i``
    into column j in row order, as the kernels do (``margins``,
    ``weighted_row_sum``; any thread count).  Private: reads the rows,
    releases nothing.
    """

    def __init__(self, X):
        self.source = X
        # the stored matrix (the structure token is that of the stored arrays)
        self.X = X.csr if is_mapped_rows(X) else X
        self.shape = X.shape
        self.all_rows = np.arange(X.shape[0], dtype=np.int64)

    def _call(self, kernel, *args, num_threads=1):
        *arrays, row_map = kernel_rows(self.source)
        kernel(*arrays, *args, num_threads, check_structure=self._structure(), **row_map)

    def margins(self, rows, v, out=None, num_threads=1):
        """``x_i^T v`` for every i in ``rows`` (written to ``out`` when given)."""
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        if out is None:
            out = np.empty(rows.shape[0])
        self._call(_glm.margins, rows, np.ascontiguousarray(v, dtype=np.float64), out,
                   num_threads=num_threads)
        return out

    def weighted_row_sum(self, rows, weights, out, num_threads=1):
        """``out += sum_k weights[k] x_{rows[k]}``; returns ``out``."""
        self._call(_glm.weighted_row_sum, np.ascontiguousarray(rows, dtype=np.int64),
                   np.ascontiguousarray(weights, dtype=np.float64), out,
                   num_threads=num_threads)
        return out

    def clipped_gradient_sum(self, y, rows, w, loss_code, clip, out, num_threads=1):
        """``out += sum_{i in rows} clip(loss'(x_i^T w, y_i) x_i, C)``; returns ``out``."""
        self._call(_glm.clipped_gradient_sum, y, np.ascontiguousarray(rows, dtype=np.int64),
                   np.ascontiguousarray(w, dtype=np.float64), loss_code, float(clip), out,
                   num_threads=num_threads)
        return out

    def _operand(self, M, side, name):
        """``M`` as float64 of shape (m,) or (m, K), where m = ``self.shape[side]``."""
        M = np.asarray(M, dtype=np.float64)
        m = self.shape[side]
        if M.ndim not in (1, 2) or M.shape[0] != m:
            what = "column" if side == 1 else "row"
            if side == 1 and getattr(self.source, "tail_value", None) is not None:
                what += " (the last column: the appended constant)"
            raise ValidationError(
                f"{name} needs {name[-2]} of shape ({m},) or ({m}, K), one entry per {what} of "
                f"the {self.shape[0]} x {self.shape[1]} rows; got shape {M.shape}.")
        return M

    def dot(self, V, num_threads=1):
        """``X @ V`` for V of shape (d,) or (d, K): an ndarray of shape (n,) or (n, K).

        ``d`` is ``self.shape[1]``: for mapped rows with an appended constant
        column, the stored columns plus one.  Another length is a
        ValidationError (a longer V used to be accepted, its extra entries
        silently ignored).
        """
        V = self._operand(V, 1, "dot(V)")
        if V.ndim == 1:
            return self.margins(self.all_rows, V, num_threads=num_threads)
        out = np.empty((self.shape[0], V.shape[1]))
        column = np.empty(self.shape[0])
        for k in range(V.shape[1]):
            out[:, k] = self.margins(self.all_rows, V[:, k], column, num_threads)
        return out

    def tdot(self, A, num_threads=1):
        """``X.T @ A`` for A of shape (n,) or (n, K): an ndarray of shape (d,) or (d, K)."""
        A = self._operand(A, 0, "tdot(A)")
        if A.ndim == 1:
            return self.weighted_row_sum(self.all_rows, A, np.zeros(self.shape[1]), num_threads)
        out = np.empty((self.shape[1], A.shape[1]))
        for k in range(A.shape[1]):
            out[:, k] = self.weighted_row_sum(self.all_rows, A[:, k], np.zeros(self.shape[1]),
                                              num_threads)
        return out

    def linear_operator(self):
        """X as a :class:`scipy.sparse.linalg.LinearOperator` (float64)."""
        from scipy.sparse.linalg import LinearOperator

        return LinearOperator(self.shape, matvec=lambda v: self.dot(np.ravel(v)),
                              rmatvec=lambda a: self.tdot(np.ravel(a)), dtype=np.float64)


class GlmOracle(StructureTokenCache):
    """L2-regularised GLM ``F(theta) = (1/n) sum_i loss(x_i^T theta, y_i) + (lam/2)||theta||^2``.

    Parameters
    ----------
    X : array-like or scipy.sparse matrix of shape (n, d)
        Examples as rows, validated by :func:`fastdp._validation.check_X` and
        brought to canonical CSR by :func:`fastdp.solvers._common.as_csr`
        (CSR float32/float64 with int32/int64 indices is used as it is).
    y : array-like of shape (n,)
        Labels (+-1 for logistic and hinge).
    loss : {"squared", "logistic", "hinge"} or fastdp.losses.Loss
    lam : float, default=0.0
        lam >= 0, the L2 strength of :meth:`gradient` and :meth:`objective`.
    clip : float, default=inf
        L2 bound on each example's loss gradient in :meth:`gradient` (``inf``: none).
    num_threads : int or None, default=1
        Threads of the kernels (same bits for any value); None means 1.
        Anything but None or an int in [1, 1024] (NaN, infinity, 0, a
        negative number, a bool, a float) is a ValidationError.
    labels : {"check", "as_given"}, default="check"
        ``"check"``: ``y`` goes through :func:`fastdp._validation.check_labels`
        for the loss's task (two classes mapped to -1/+1, finite targets).
        ``"as_given"``: ``y`` is used as float64 as it is (one entry per row
        required), for callers that checked it their own way.

    Attributes
    ----------
    X : scipy.sparse.csr_matrix
    y : ndarray of float64
    loss : fastdp.losses.Loss
        ``loss.code`` is the kernels' loss code.
    lam, clip : float
    n_samples, n_features, num_threads : int
    all_rows : ndarray of int64
        ``0, ..., n - 1``.
    """

    def __init__(self, X, y, *, loss, lam=0.0, clip=math.inf, num_threads=1, labels="check"):
        num_threads = check_num_threads(num_threads)  # before X is read
        self.loss = get_loss(loss)
        X = as_csr(check_X(X))  # mapped rows pass through: the kernels read their row map
        self.X = X
        self._rows = RowProducts(X)
        self._dense = None  # BLAS copy of a small dense X for gradients(); built on demand
        if labels == "check":
            y, _ = check_labels(y, self.loss.task, n_samples=X.shape[0])
        elif labels != "as_given":
            raise ValidationError(f"labels must be 'check' or 'as_given'; got {labels!r}.")
        self.y = np.ascontiguousarray(y, dtype=np.float64)
        if self.y.shape != (X.shape[0],):
            raise ValidationError("y must have one entry per row of X.")
        self.lam = float(lam)
        if not (self.lam >= 0 and math.isfinite(self.lam)):
            raise ValidationError(f"lam must be a finite number >= 0; got {lam!r}")
        self.clip = float(clip)
        self.n_samples, self.n_features = X.shape
        self.num_threads = num_threads
        self.all_rows = np.arange(self.n_samples, dtype=np.int64)

    # ---- sums over rows (the kernels) ------------------------------------------

    def clipped_gradient_sum(self, rows, w, clip):
        """``sum_{i in rows} clip(loss'(x_i^T w, y_i) x_i, C)`` (L2 clipping per example;
        ``clip = inf``: none); a row listed twice counts twice."""
        return self._rows.clipped_gradient_sum(self.y, rows, w, self.loss.code, clip,
                                               np.zeros(self.n_features), self.num_threads)

    def margins(self, rows, v):
        """``x_i^T v`` for every i in rows."""
        return self._rows.margins(rows, v, num_threads=self.num_threads)

    def _structure(self):
        """The structure token of the stored arrays (:class:`RowProducts`)."""
        return self._rows._structure()

    def labels(self, rows):
        """The labels of the rows."""
        return self.y[rows]

    # ---- the regularised objective ------------------------------------------

    def gradient(self, theta, rows=None):
        """Mean clipped loss gradient over ``rows`` (all when None) plus ``lam theta``."""
        theta = np.ascontiguousarray(theta, dtype=np.float64)
        rows = self.all_rows if rows is None else np.ascontiguousarray(rows, dtype=np.int64)
        out = self.clipped_gradient_sum(rows, theta, self.clip)
        out /= rows.size
        if self.lam:
            out += self.lam * theta
        return out

    def gradients(self, thetas, rows=None):
        """:meth:`gradient` of R replicas: row r of the result is ``gradient(thetas[r], rows[r])``.

        Parameters
        ----------
        thetas : ndarray of shape (R, d)
        rows : None or int ndarray of shape (R, m)
            One batch per replica (all rows for every replica when None).

        Notes
        -----
        Full batches without clipping (the paper's m = n runs) evaluate all
        replicas with two matrix products on X (a dense BLAS copy when X
        is small and mostly non-zero) and the loss derivative of
        :mod:`fastdp.losses` (:meth:`~fastdp.losses.Loss.derivative_in_place`);
        they equal the kernel's gradients up to the summation order (~1e-15
        relative).  Mini-batches and clipped gradients use the kernel once per
        replica.  Private: as :meth:`gradient` (reads the rows, releases nothing).
        """
        thetas = np.ascontiguousarray(thetas, dtype=np.float64)
        if thetas.ndim != 2 or thetas.shape[1] != self.n_features:
            raise ValidationError(f"thetas must have shape (R, {self.n_features}); "
                                  f"got {thetas.shape}")
        if rows is not None or math.isfinite(self.clip) or self.loss.name == "hinge":
            return np.stack([self.gradient(t, None if rows is None else rows[r])
                             for r, t in enumerate(thetas)])
        X = self._matrix_for_products()
        if X is None:   # sparse or mapped rows: the kernels, with scipy's bits
            coefs = self.loss.derivative_in_place(self._rows.dot(thetas.T, self.num_threads),
                                                  self.y[:, None])
            out = self._rows.tdot(coefs, self.num_threads).T / self.n_samples
        else:
            coefs = self.loss.derivative_in_place(X @ thetas.T, self.y[:, None])
            out = (X.T @ coefs).T / self.n_samples
        if self.lam:
            out += self.lam * thetas
        return out

    def _matrix_for_products(self):
        """A dense copy of X for the replica products when it has <= 2^24 entries, half
        non-zero; else None (the kernels read X)."""
        n, d = self.X.shape
        if self._dense is None:
            check_rows_as_read(self.X, "GLM oracle")  # toarray trusts the columns
            small = n * d <= 2 ** 24 and self.X.nnz >= 0.5 * n * d
            self._dense = self.X.toarray() if small else False
        return None if self._dense is False else self._dense

    # ---- non-private diagnostics --------------------------------------------

    def loss_values(self, w):
        """Per-example unclipped losses at w over all rows (non-private diagnostic)."""
        return self.loss.value(self.margins(self.all_rows, w), self.y)

    def objective(self, theta):
        """``F(theta)`` (unclipped loss); a non-private diagnostic."""
        check_rows_as_read(self.X, "GLM oracle objective")  # scipy's product trusts the columns
        return primal_objective(theta, self.X, self.y, self.loss, self.lam)

    def smoothness(self):
        """L = c_loss lambda_max(X^T X / n) + lam (c_loss = 1 squared, 1/4 logistic).

        Computed from the data: a non-private diagnostic (the paper treats L
        as public; the estimators use a public bound from the row norms).
        """
        if self.loss.name == "hinge":
            raise ValidationError("the hinge loss is not smooth")
        curvature = 1.0 if self.loss.name == "squared" else 0.25
        check_rows_as_read(self.X, "GLM oracle smoothness")  # scipy trusts the columns
        if self.n_features <= 2000 and not is_mapped_rows(self.X):
            gram = (self.X.T @ self.X).toarray() / self.n_samples
            top = float(np.linalg.eigvalsh(gram)[-1])
        else:  # largest singular value of X without forming the Gram matrix (or a copy)
            from scipy.sparse.linalg import svds

            X = self._rows.linear_operator() if is_mapped_rows(self.X) else self.X
            top = float(svds(X, k=1, return_singular_vectors=False)[0]) ** 2 / self.n_samples
        return curvature * top + self.lam
