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
models on CSR or dense data: the one GLM oracle
(:class:`fastdp.solvers.glm_oracle.GlmOracle`, over the shared compiled
kernels) with the sensitivity of its data domain.  It also has
``gradients(thetas, rows)``: the gradients of R replicas at once
(:func:`fastdp.solvers.accelerated.run_plan_replicas`).
"""

import math

import numpy as np
import scipy.sparse as sp

from fastdp._validation import is_mapped_rows
from fastdp.exceptions import ValidationError
from fastdp.losses import get_loss
from fastdp.solvers.glm_oracle import GlmOracle

__all__ = ["GLMProblem", "glm_l1_sensitivity", "sensitivity_logreg", "row_l1_norms"]

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
    """L1 norm of every row of ``X`` (CSR, dense, or the estimators' mapped rows, read
    in blocks without a copy)."""
    if is_mapped_rows(X):
        return X.row_l1_norms()
    if sp.issparse(X):
        return np.asarray(abs(X).sum(axis=1)).ravel()
    return np.abs(np.asarray(X)).sum(axis=1)


class GLMProblem(GlmOracle):
    """L2-regularised GLM: ``F(θ) = (1/n) Σ_i loss(x_iᵀθ, y_i) + (lam/2)||θ||²``, with its S1.

    The :class:`~fastdp.solvers.glm_oracle.GlmOracle` (gradient, gradients,
    objective, smoothness) plus the replace-one L1 sensitivity
    ``sensitivity`` of one record's gradient, which the accelerated solvers'
    Laplace noise needs.

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
        super().__init__(X, y, loss=loss, lam=lam, clip=clip, num_threads=num_threads)
        if row_l1_bound is not None:
            norms = row_l1_norms(self.X)
            worst = int(np.argmax(norms))
            if norms[worst] > float(row_l1_bound) * (1.0 + 1e-9):
                raise ValidationError(
                    f"row {worst} has L1 norm {norms[worst]:.6g} > row_l1_bound = {row_l1_bound}; "
                    "the sensitivity bound needs every row inside the public L1 ball. Rescale "
                    "the offending rows (per example) or raise the bound.")
        self.row_l1_bound = row_l1_bound
        if sensitivity is None:
            sensitivity = glm_l1_sensitivity(self.loss, self.n_features, row_l1_bound, self.clip)
        self.sensitivity = float(sensitivity)
