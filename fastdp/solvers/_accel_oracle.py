"""Gradient oracles of the accelerated solvers, and the L1 sensitivity of GLM gradients.

The drivers of :mod:`fastdp.solvers.accelerated` only need a *problem*
object with

``n_samples``, ``n_features`` : int
``sensitivity`` : float
    S1, a bound on ``||∇f(x; y) − ∇f(x; y')||_1`` over all records y, y' of
    the (public) data domain and all x: the replace-one L1 sensitivity of one
    record's gradient (spec 002, Assumption 3.2).
``gradient(theta, rows=None)`` : ndarray
    ``(1/|B|) Σ_{i∈B} ∇f(theta; y_i)`` over the rows B (all rows when None),
    regulariser included (spec 002, section 2.0).
``objective(theta)`` : float, optional
    ``F(theta)``, a non-private diagnostic.

:class:`GLMProblem` is that object for L2-regularised generalised linear
models on CSR or dense data; its gradient is the shared compiled kernel
``fastdp._kernels._glm.clipped_gradient_sum`` (no second copy of the loop).
Optionally a problem has ``gradients(thetas, rows)``: the gradients of R
replicas at once (:func:`fastdp.solvers.accelerated.run_plan_replicas`).
"""

import math

import numpy as np
import scipy.sparse as sp

from fastdp._kernels import _glm
from fastdp._validation import check_labels, check_X
from fastdp.solvers._common import StructureTokenCache, as_csr
from fastdp.exceptions import ValidationError
from fastdp.losses import get_loss, primal_objective

__all__ = ["GLMProblem", "glm_l1_sensitivity", "sensitivity_logreg", "row_l1_norms"]

_LOSS_CODES = {"squared": _glm.LOSS_SQUARED, "logistic": _glm.LOSS_LOGISTIC,
               "hinge": _glm.LOSS_HINGE}


def sensitivity_logreg(row_l1_bound):
    """S1 = 2R for logistic regression with rows in the L1 ball of radius R (spec 002, eq. 5.2)."""
    R = float(row_l1_bound)
    if not (R > 0 and math.isfinite(R)):
        raise ValidationError(f"row_l1_bound must be a finite number > 0; got {row_l1_bound!r}")
    return 2.0 * R


def glm_l1_sensitivity(loss, n_features, row_l1_bound=None, clip=math.inf):
    """Replace-one L1 sensitivity S1 of one record's GLM gradient.

    The data part of the gradient is ``h = clip(loss'(x^T θ, y) x, C)`` (the
    regulariser does not depend on the data and cancels), so
    ``S1 = 2 max ||h||_1`` with, whichever applies (the smallest is used):

    * ``||h||_1 <= ||x||_1 <= R`` for the logistic and hinge losses
      (``|loss'| <= 1``) when every row has ``||x||_1 <= R``;
    * ``||h||_1 <= sqrt(d) ||h||_2 <= sqrt(d) C`` with L2 clipping at C.

    Raises
    ------
    ValidationError
        When neither bound applies (squared loss without clipping).
    """
    loss = get_loss(loss)
    bounds = []
    if row_l1_bound is not None and loss.name in ("logistic", "hinge"):
        bounds.append(sensitivity_logreg(row_l1_bound) / 2.0)
    clip = float(clip)
    if not clip > 0:
        raise ValidationError(f"clip must be > 0 (inf for none); got {clip!r}")
    if math.isfinite(clip):
        bounds.append(math.sqrt(int(n_features)) * clip)
    if not bounds:
        raise ValidationError(
            f"the {loss.name} loss has no bounded gradient here: give row_l1_bound (a public "
            "bound on every row's L1 norm, for the logistic and hinge losses) or a finite clip.")
    return 2.0 * min(bounds)


def row_l1_norms(X):
    """L1 norm of every row of ``X`` (CSR or dense)."""
    if sp.issparse(X):
        return np.asarray(abs(X).sum(axis=1)).ravel()
    return np.abs(np.asarray(X)).sum(axis=1)


class GLMProblem(StructureTokenCache):
    """L2-regularised GLM: ``F(θ) = (1/n) Σ_i loss(x_iᵀθ, y_i) + (lam/2)||θ||²``.

    Parameters
    ----------
    X : array-like or scipy.sparse matrix of shape (n, d)
        Examples as rows, validated by :func:`fastdp._validation.check_X`
        and brought to canonical CSR by
        :func:`fastdp.solvers._common.as_csr` for the kernel.
    y : array-like of shape (n,)
        Labels (±1 for logistic and hinge).
    loss : {"squared", "logistic", "hinge"}
    lam : float
        lam >= 0 (the paper's λ‖x‖² is ``lam = 2λ``); μ = lam.
    row_l1_bound : float, optional
        Public bound R on every row's L1 norm (the data domain of spec 002,
        Assumption 3.2).  Rows are checked: a row above R raises
        :class:`ValidationError` (rows are never silently clipped).
    clip : float, default inf
        L2 bound on each example's loss gradient (``inf``: none).
    sensitivity : float, optional
        Override S1 (must be a valid bound for the data domain; the default
        is :func:`glm_l1_sensitivity`).
    num_threads : int, default 1
        Threads of the kernel (same bits for any value).

    Notes
    -----
    Private: the rows and labels.  The gradient and objective read them and
    release nothing; the solvers add the Laplace noise.  ``objective`` is a
    non-private diagnostic.
    """

    def __init__(self, X, y, *, loss, lam, row_l1_bound=None, clip=math.inf, sensitivity=None,
                 num_threads=1):
        self.loss = get_loss(loss)
        X = as_csr(check_X(X))
        self.X = X
        self._dense = None  # BLAS copy of a small dense X for gradients(); built on demand
        y, _ = check_labels(y, self.loss.task, n_samples=X.shape[0])
        self.y = np.ascontiguousarray(y, dtype=np.float64)
        self.lam = float(lam)
        if not (self.lam >= 0 and math.isfinite(self.lam)):
            raise ValidationError(f"lam must be a finite number >= 0; got {lam!r}")
        self.n_samples, self.n_features = X.shape
        if row_l1_bound is not None:
            norms = row_l1_norms(X)
            worst = int(np.argmax(norms))
            if norms[worst] > float(row_l1_bound) * (1.0 + 1e-9):
                raise ValidationError(
                    f"row {worst} has L1 norm {norms[worst]:.6g} > row_l1_bound = {row_l1_bound}; "
                    "the sensitivity bound needs every row inside the public L1 ball. Rescale "
                    "the offending rows (per example) or raise the bound.")
        self.row_l1_bound = row_l1_bound
        self.clip = float(clip)
        if sensitivity is None:
            sensitivity = glm_l1_sensitivity(self.loss, self.n_features, row_l1_bound, self.clip)
        self.sensitivity = float(sensitivity)
        self.num_threads = int(num_threads) if num_threads else 1
        self._all_rows = np.arange(self.n_samples, dtype=np.int64)

    def gradient(self, theta, rows=None):
        """Mean clipped loss gradient over ``rows`` (all when None) plus ``lam θ``."""
        theta = np.ascontiguousarray(theta, dtype=np.float64)
        rows = self._all_rows if rows is None else np.ascontiguousarray(rows, dtype=np.int64)
        out = np.zeros(self.n_features)
        _glm.clipped_gradient_sum(self.X.data, self.X.indices, self.X.indptr, self.y, rows, theta,
                                  _LOSS_CODES[self.loss.name], self.clip, out,
                                  num_threads=self.num_threads, check_structure=self._structure())
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
        :mod:`fastdp.losses`; they equal the kernel's gradients up to the
        summation order (~1e-15 relative).  Mini-batches and clipped
        gradients use the kernel once per replica.  Private: as
        :meth:`gradient` (reads the rows, releases nothing).
        """
        thetas = np.ascontiguousarray(thetas, dtype=np.float64)
        if thetas.ndim != 2 or thetas.shape[1] != self.n_features:
            raise ValidationError(f"thetas must have shape (R, {self.n_features}); "
                                  f"got {thetas.shape}")
        if rows is not None or math.isfinite(self.clip) or self.loss.name == "hinge":
            return np.stack([self.gradient(t, None if rows is None else rows[r])
                             for r, t in enumerate(thetas)])
        X = self._matrix_for_products()
        margins = np.asarray(X @ thetas.T)  # (n, R)
        if self.loss.name == "logistic":
            # loss'(z, y) = −y σ(−y z) = −y / (1 + e^{y z}); e^{yz} = inf gives −0
            with np.errstate(over="ignore"):
                margins *= self.y[:, None]
                np.exp(margins, out=margins)
                margins += 1.0
                np.reciprocal(margins, out=margins)
                margins *= -self.y[:, None]
            coefs = margins
        else:
            coefs = self.loss.derivative(margins, self.y[:, None])
        out = np.asarray(X.T @ coefs).T / self.n_samples
        if self.lam:
            out += self.lam * thetas
        return out

    def _matrix_for_products(self):
        """X for the replica products: dense when it has <= 2^24 entries, half non-zero."""
        n, d = self.X.shape
        if self._dense is None:
            small = n * d <= 2 ** 24 and self.X.nnz >= 0.5 * n * d
            self._dense = self.X.toarray() if small else False
        return self.X if self._dense is False else self._dense

    def objective(self, theta):
        """``F(θ)`` (unclipped loss); a non-private diagnostic."""
        return primal_objective(theta, self.X, self.y, self.loss, self.lam)

    def smoothness(self):
        """L = c_loss λ_max(XᵀX/n) + lam (c_loss = 1 squared, 1/4 logistic).

        Computed from the data: a non-private diagnostic (the paper treats L
        as public; the estimators use a public bound from the row norms).
        """
        if self.loss.name == "hinge":
            raise ValidationError("the hinge loss is not smooth")
        curvature = 1.0 if self.loss.name == "squared" else 0.25
        if self.n_features <= 2000:
            gram = (self.X.T @ self.X).toarray() / self.n_samples
            top = float(np.linalg.eigvalsh(gram)[-1])
        else:  # largest singular value of X without forming the Gram matrix
            from scipy.sparse.linalg import svds

            top = float(svds(self.X, k=1, return_singular_vectors=False)[0]) ** 2 / self.n_samples
        return curvature * top + self.lam
