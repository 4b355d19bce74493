"""The non-private optimum, to tight tolerance: what ``epsilon=np.inf`` trains.

A model trained without privacy should be the exact minimiser of the
estimator's objective

    P(theta) = (1/N) sum_i loss(x_i^T theta, y_i) + (lam/2) ||theta||^2

(or its multinomial form), not the end of a noiseless run of a DP solver
with the DP solver's clipping and step sizes.  :func:`exact_minimize`
reaches it:

* squared, logistic and multinomial logistic losses (smooth): L-BFGS
  (:func:`scipy.optimize.minimize`) on the primal with exact gradients,
  stopped when the gradient's infinity norm is below ``tol`` (default
  1e-10, a relative objective gap of about 1e-12 on normalised rows);
* hinge loss (not smooth): exact dual coordinate ascent (SDCA with the
  closed-form hinge step, :func:`fastdp.solvers.scd.scd` with batch size 1
  and no box margin) until the duality gap is below ``tol``.

The products with X come from the ``_glm`` kernels
(:class:`fastdp.solvers.glm_oracle.RowProducts`: scipy's bits), which also
read the estimators' mapped rows (``normalize=``, ``fit_intercept=``) without
a copy of X.

Privacy: none.  The result reveals the training data (event
:class:`~fastdp.privacy.events.NonPrivateEvent`).
"""

import dataclasses
import math

import numpy as np
import scipy.optimize
import scipy.special

from fastdp.exceptions import ValidationError
from fastdp.losses import get_loss
from fastdp.privacy.events import NonPrivateEvent
from fastdp.solvers._common import as_csr, check_lam
from fastdp.solvers._result import SolverResult
from fastdp.solvers.glm_oracle import RowProducts

__all__ = ["exact_minimize", "multinomial_objective_and_gradient", "ExactDetails",
           "HingeExactDetails"]

_MAX_LBFGS_ITER = 20000
_MAX_SDCA_EPOCHS = 2000


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExactDetails:
    """What an exact minimisation reports beyond the common result fields.

    Attributes
    ----------
    converged : bool
        Whether the tolerance was met.
    message : str
        The optimiser's message.
    """

    converged: bool
    message: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class HingeExactDetails(ExactDetails):
    """What the exact hinge-loss minimisation (SDCA) reports.

    Attributes
    ----------
    duality_gap : float
        The final duality gap.
    """

    duality_gap: float


def _result(coef, *, loss, lam, n_iter, batch_size, details):
    return SolverResult(
        coef=coef, alpha=None, v=None, n_iter=int(n_iter), epochs=float("nan"),
        algorithm="exact", loss=loss, lam=lam, noise_multiplier=0.0, sensitivity=0.0,
        noise_std=0.0, clip=math.inf, batch_size=float(batch_size), sample_rate=1.0,
        sampler="full", adjacency="none", event=NonPrivateEvent(), lazy_noise=False,
        diagnostics={}, num_threads=1, history=None, details=details)


def multinomial_objective_and_gradient(theta, X, y, lam):
    """Value and gradient of the multinomial logistic objective.

    Parameters
    ----------
    theta : ndarray of shape (K, d)
    X : csr_matrix, ndarray or fastdp.solvers.glm_oracle.RowProducts of shape (n, d)
        (the products of a ``RowProducts`` read its rows through the kernels,
        mapped rows included, with the bits of scipy's products)
    y : ndarray of int of shape (n,)
        Class indices in ``[0, K)``.
    lam : float

    Returns
    -------
    value : float
        ``(1/n) sum_i [logsumexp(theta x_i) - (theta x_i)_{y_i}] + lam/2 ||theta||_F^2``.
    gradient : ndarray of shape (K, d)
    """
    n = X.shape[0]
    kernels = isinstance(X, RowProducts)
    scores = X.dot(theta.T) if kernels else np.asarray(X @ theta.T)       # (n, K)
    lse = scipy.special.logsumexp(scores, axis=1)
    value = float(np.mean(lse - scores[np.arange(n), y])) + 0.5 * lam * float(np.sum(theta * theta))
    residual = np.exp(scores - lse[:, None])
    residual[np.arange(n), y] -= 1.0
    gradient = (X.tdot(residual) if kernels else np.asarray(X.T @ residual)).T / n + lam * theta
    return value, gradient


def _lbfgs(fun, x0, tol):
    out = scipy.optimize.minimize(
        fun, x0, jac=True, method="L-BFGS-B",
        options={"maxiter": _MAX_LBFGS_ITER, "maxfun": 2 * _MAX_LBFGS_ITER, "gtol": tol,
                 "ftol": 0.0, "maxcor": 30})
    return out.x, int(out.nit), bool(out.success), str(out.message)


def exact_minimize(X, y, *, loss, lam, n_classes=None, tol=1e-10):
    """Minimise the estimator's objective without privacy, to tolerance ``tol``.

    Parameters
    ----------
    X : csr_matrix, ndarray or fastdp._mapped_rows.MappedRows of shape (n, d)
        Checked, finite rows (no norm bound is needed); mapped rows are read
        through their row map, without a copy.
    y : ndarray of shape (n,)
        Real targets (squared), -1/+1 labels (logistic, hinge) or class
        indices (``loss="multinomial"``).
    loss : {"squared", "logistic", "hinge", "multinomial"}
    lam : float
        > 0 (the objective must be strongly convex for a unique optimum).
    n_classes : int or None
        K, for ``loss="multinomial"``.
    tol : float, default=1e-10
        Gradient infinity-norm tolerance (smooth losses) or duality gap (hinge).

    Returns
    -------
    SolverResult
        ``coef`` of shape (d,) or (K, d); ``event = NonPrivateEvent()``;
        ``details`` (:class:`ExactDetails`) has ``converged`` and the
        optimiser's message (and the duality gap for the hinge loss).
    """
    lam = check_lam(lam)
    X = as_csr(X)
    n, d = X.shape
    products = RowProducts(X)
    if loss == "multinomial":
        K = int(n_classes)
        yi = np.asarray(y, dtype=np.int64)

        def fun(flat):
            value, grad = multinomial_objective_and_gradient(flat.reshape(K, d), products, yi,
                                                             lam)
            return value, grad.ravel()

        flat, nit, ok, message = _lbfgs(fun, np.zeros(K * d), tol)
        return _result(flat.reshape(K, d), loss=loss, lam=lam, n_iter=nit, batch_size=n,
                       details=ExactDetails(converged=ok, message=message))
    loss_obj = get_loss(loss)
    y = np.ascontiguousarray(y, dtype=np.float64)
    if loss_obj.name == "hinge":
        return _hinge_sdca(X, y, lam, tol)

    def fun(theta):
        z = products.dot(theta)
        value = float(np.mean(loss_obj.value(z, y))) + 0.5 * lam * float(theta @ theta)
        grad = products.tdot(loss_obj.derivative(z, y)) / n + lam * theta
        return value, grad

    theta, nit, ok, message = _lbfgs(fun, np.zeros(d), tol)
    return _result(theta, loss=loss_obj.name, lam=lam, n_iter=nit, batch_size=n,
                   details=ExactDetails(converged=ok, message=message))


def _hinge_sdca(X, y, lam, tol):
    """Exact SDCA for the hinge loss, until the duality gap is <= tol.

    The gap is measured after 32, 64, 128, ... epochs in all (at most
    ``_MAX_SDCA_EPOCHS``); each stretch continues from the previous one's dual
    state (``warm_start``), so reaching 2^k epochs costs 2^k epochs, not 2^(k+1).
    """
    from fastdp.losses import duality_gap
    from fastdp.solvers.scd import scd

    if not np.all(np.abs(y) == 1.0):
        raise ValidationError("the hinge loss needs labels in {-1, +1}.")
    done, stretch, result, n_iter = 0, 32, None, 0
    while True:
        # the visiting order is a fixed public seed per stretch: not a privacy matter here
        result = scd(X, y, loss="hinge", lam=lam, epochs=stretch, batch_size=1, box_eps=0.0,
                     random_state=done, warm_start=result)
        done += stretch
        n_iter += result.n_iter
        gap = float(duality_gap(result.alpha, X, y, "hinge", lam))
        if gap <= tol or done >= _MAX_SDCA_EPOCHS:
            break
        stretch = done
    return _result(result.coef, loss="hinge", lam=lam, n_iter=n_iter, batch_size=1,
                   details=HingeExactDetails(converged=gap <= tol, duality_gap=gap,
                                             message=f"SDCA, {done} epochs"))


# --------------------------------------------------------------------------
# estimator adapter (fastdp.solvers.registry)
# --------------------------------------------------------------------------
from fastdp.solvers.registry import NonPrivateEstimatorSolver  # noqa: E402


class ExactEstimatorSolver(NonPrivateEstimatorSolver):
    """The non-private optimum, for estimators with ``epsilon=np.inf`` (``solver="exact"``).

    ``settings.n_classes`` (when not None) makes the logistic loss multinomial;
    the settings are the common :class:`~fastdp.solvers.settings.SolverSettings`
    (no ``solver_options``).
    Refuses any private run: it adds no noise.
    """

    name = "exact"
    losses = ("squared", "logistic", "hinge")
    noise_name = "none"
    reads_row_map = True  # the _glm kernels (and SDCA's) read the mapped rows without a copy

    def solve(self, problem, settings, rng):
        """The exact minimiser for ``problem`` (``settings.alpha`` = lambda); refuses noise."""
        if settings.noise_parameter:
            self.refuse()
        n_classes = settings.n_classes
        return exact_minimize(problem.X, problem.y,
                              loss="multinomial" if n_classes else problem.loss,
                              lam=settings.alpha, n_classes=n_classes)


ESTIMATOR_SOLVERS = {"exact": ExactEstimatorSolver()}
