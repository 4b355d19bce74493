"""Output and objective perturbation for L2-regularised logistic regression and Huber SVMs.

The two classic ERM baselines of K. Chaudhuri, C. Monteleoni, A. D. Sarwate,
"Differentially Private Empirical Risk Minimization", JMLR 12 (2011)
1069-1109 (the baselines of spec 003).  Both release one model for

    J(theta) = (1/n) sum_i loss(y_i x_i^T theta) + (lam/2) ||theta||^2

and nothing else.  The paper's assumptions, all enforced here:

* every row has ``||x_i|| <= 1`` (checked; ``check_X`` allows a relative
  floating-point slack of 1e-6, which the output-perturbation sensitivity
  includes), labels are -1/+1;
* the regulariser ``(1/2)||theta||^2`` is 1-strongly convex and doubly
  differentiable (lam > 0 multiplies it);
* the loss, as a function of the margin ``u = y x^T theta``, is convex and
  doubly differentiable with ``|loss'(u)| <= 1`` and ``|loss''(u)| <= c``.

Two losses qualify: the logistic loss (``c = 1/4``) and the paper's
Huber-smoothed hinge loss ``loss="huber_hinge"`` (section 3.4.2 of the paper,
``c = 1/(2h)``; twice differentiable except at ``u = 1 +- h``, where the paper
notes the argument still holds since loss'' exists almost everywhere and is
bounded).  The squared loss has an unbounded derivative and the plain hinge
loss is not differentiable: both are rejected.

Privacy
-------
* Private: the training examples; adjacency **replace-one** (the paper's
  datasets "differing in one entry", n public).  Events therefore carry
  ``adjacency="replace_one"``; a ledger refuses to compose them with
  add/remove events unless those are converted.
* Output perturbation (Algorithm 1): ``theta* + b``.  Theorem 6: with
  ``b`` of density proportional to ``exp(-beta ||b||)``, ``beta = n lam eps / 2``,
  the release is eps-DP; the proof (Corollary 8) bounds the L2 sensitivity
  of the exact minimiser by ``2 / (n lam)``.  Event ``PureEvent(eps)``.  The
  Gaussian variant adds ``N(0, (sigma Delta)^2 I)`` with the same L2
  sensitivity Delta, event ``GaussianEvent(sigma)`` (both replace-one).
* Objective perturbation (Algorithm 2, Theorem 9): minimise
  ``J(theta) + b^T theta / n + (Delta_reg / 2) ||theta||^2`` with ``b`` of
  density proportional to ``exp(-eps' ||b|| / 2)``, where
  ``eps' = eps - log(1 + 2c/(n lam) + c^2/(n lam)^2)`` and ``Delta_reg = 0``
  if that is > 0, else ``Delta_reg = c / (n (e^(eps/4) - 1)) - lam`` and
  ``eps' = eps / 2``.  Event ``PureEvent(eps)``.
* Released: the model only.  ``result.diagnostics`` (optimiser iterations,
  final gradient norm) depends on the data: non-private, never publish.

Optimisation accuracy
---------------------
Both theorems are about the *exact* minimiser.  The minimisers here come
from a trust-region Newton-CG method (scipy ``trust-ncg``, gradients and
Hessian-vector products from :mod:`fastdp._kernels._glm`) run until the
gradient norm is at most ``gtol = tol / n``.  For output perturbation this
error is accounted: by lam-strong convexity ``||theta_hat - theta*|| <=
gtol / lam``, so the sensitivity used is ``2 R / (n lam) + 2 gtol / lam =
(2 / (n lam)) (R + tol)`` (``R = 1 + 1e-6`` the row-norm bound), and the
guarantee holds for the computed model.  For objective perturbation the
paper's proof covers the exact minimiser only; the computed one differs from
it by at most ``gtol / (lam + Delta_reg)`` in norm (about 1e-6 / (n lam)
with the default), a gap the guarantee does not formally cover (as for every
implementation of Algorithm 2).  If the tolerance is not reached the solver
raises instead of releasing a model.
"""

import math
import numbers

import numpy as np
from scipy.optimize import minimize

from fastdp._validation import (
    check_labels, check_positive, check_random_state, check_X,
)
from fastdp.exceptions import FastDPError, ValidationError
from fastdp.losses import HuberHingeLoss, LogisticLoss, get_loss
from fastdp.privacy.events import Adjacency, GaussianEvent, PureEvent
from fastdp.solvers._result import SolverResult
from fastdp.solvers.registry import EstimatorSolver
from fastdp.solvers._common import as_csr, check_num_threads
from fastdp.solvers.glm_oracle import RowProducts
from fastdp.solvers.perturbation_settings import (
    DEFAULT_MAX_ITER, DEFAULT_TOL, HuberObjectivePerturbationDetails, ObjectivePerturbationDetails,
    ObjectivePerturbationSettings, OutputPerturbationDetails, OutputPerturbationSettings,
)

__all__ = [
    "output_perturbation",
    "objective_perturbation",
    "objective_perturbation_parameters",
    "output_sensitivity",
    "sample_l2_laplace",
    "solve_logistic",
    "solve_erm",
    "HuberHingeLoss",
    "ESTIMATOR_SOLVERS",
]

#: Bound c on the second derivative of the logistic loss in the margin.
LOGISTIC_CURVATURE = LogisticLoss.smoothness
#: Row-norm slack accepted by ``check_X`` (relative); included in the sensitivity.
_ROW_NORM_TOL = 1e-6
_DEFAULT_TOL = DEFAULT_TOL


# --------------------------------------------------------------------------
# noise
# --------------------------------------------------------------------------


def sample_l2_laplace(rng, dim, scale):
    """Draw b in R^dim with density proportional to ``exp(-||b|| / scale)``.

    ``||b||`` is Gamma(shape=dim, scale=scale) and the direction ``b / ||b||``
    is uniform on the sphere, independent of the norm (the density depends
    on b only through ||b||; polar coordinates give the norm density
    proportional to ``r^(dim-1) exp(-r / scale)``).  The direction is a
    normalised standard Gaussian vector.

    Parameters
    ----------
    rng : numpy.random.Generator
    dim : int
        Dimension >= 1.
    scale : float
        > 0 (the paper's ``1 / beta``).
    """
    direction = rng.standard_normal(dim)
    norm = np.linalg.norm(direction)
    while norm == 0.0:  # probability 0; keeps the direction well defined
        direction = rng.standard_normal(dim)
        norm = np.linalg.norm(direction)
    radius = rng.gamma(shape=dim, scale=scale)
    return direction * (radius / norm)


# --------------------------------------------------------------------------
# constants of the two mechanisms
# --------------------------------------------------------------------------


def output_sensitivity(n_samples, lam, tol=_DEFAULT_TOL, row_norm_bound=1.0 + _ROW_NORM_TOL):
    """L2 sensitivity of the computed minimiser under replace-one adjacency.

    ``2 R / (n lam)`` for the exact minimiser (Chaudhuri et al. 2011,
    Corollary 8, with rows of norm <= R and ``|loss'| <= 1``), plus
    ``2 gtol / lam`` with ``gtol = tol / n`` for the optimisation error of the
    two computed minimisers: ``(2 / (n lam)) (R + tol)``.

    Raises
    ------
    ValidationError
        Unless n >= 1, lam > 0, tol >= 0 and R > 0 are finite numbers.
    """
    for name, value, low_ok in (("n_samples", n_samples, lambda v: v >= 1),
                                ("lam", lam, lambda v: v > 0), ("tol", tol, lambda v: v >= 0),
                                ("row_norm_bound", row_norm_bound, lambda v: v > 0)):
        if (isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating))
                or not math.isfinite(value) or not low_ok(value)):
            raise ValidationError(f"output_sensitivity: {name} = {value!r} is out of range.")
    return 2.0 * (row_norm_bound + tol) / (n_samples * lam)


def objective_perturbation_parameters(epsilon, n_samples, lam, curvature=LOGISTIC_CURVATURE):
    """``(epsilon_prime, delta_reg)`` of Algorithm 2 (Chaudhuri et al. 2011, Theorem 9).

    ``eps' = eps - log(1 + 2c/(n lam) + c^2/(n lam)^2)``; if ``eps' > 0`` the
    extra regulariser is ``Delta = 0``, else ``Delta = c / (n (e^(eps/4) - 1)) - lam``
    and ``eps' = eps / 2``.  The noise b has density proportional to
    ``exp(-eps' ||b|| / 2)``.
    """
    nl = n_samples * lam
    ratio = curvature / nl
    eps_prime = epsilon - math.log1p(2.0 * ratio + ratio * ratio)
    if eps_prime > 0.0:
        return eps_prime, 0.0
    return epsilon / 2.0, curvature / (n_samples * math.expm1(epsilon / 4.0)) - lam


# --------------------------------------------------------------------------
# the non-private solver
# --------------------------------------------------------------------------


class _MarginObjective:
    """``(1/n) sum loss(x_i^T theta, y_i) + (reg/2)||theta||^2 + linear^T theta``, with
    gradient and Hessian-vector products from the ``_glm`` kernels (the loss a
    :class:`fastdp.losses.Loss` of the margin ``y x^T theta``)."""

    def __init__(self, X, y, reg, linear, loss, num_threads):
        self.X, self.y = X, y
        # the estimators' mapped rows are read through their row map, without a copy
        self.products = RowProducts(X)
        self.n, self.m = X.shape
        self.reg = reg
        self.linear = linear
        self.loss = loss
        self.num_threads = num_threads
        self.rows = np.arange(self.n, dtype=np.int64)
        self._margins = np.empty(self.n)
        self._curvature = None

    def _margin(self, theta, out):
        return self.products.margins(self.rows, theta, out, self.num_threads)

    def _row_sum(self, weights, out):
        return self.products.weighted_row_sum(self.rows, weights, out, self.num_threads)

    def value_and_gradient(self, theta):
        z = self._margin(theta, self._margins)
        value = float(np.sum(self.loss.value(z, self.y))) / self.n
        grad = self._row_sum(self.loss.derivative(z, self.y) / self.n,
                             self.reg * theta + self.linear)
        self._curvature = self.loss.second_derivative(z, self.y) / self.n
        value += 0.5 * self.reg * float(theta @ theta) + float(self.linear @ theta)
        return value, grad

    def hessian_product(self, theta, direction):
        if self._curvature is None:
            self.value_and_gradient(theta)
        xd = self._margin(direction, np.empty(self.n))
        return self._row_sum(self._curvature * xd,
                             self.reg * np.asarray(direction, dtype=np.float64))


def solve_erm(X, y, lam, *, loss="logistic", huber_h=0.5, linear=None, gtol=1e-10,
              max_iter=200, num_threads=None):
    """Minimise ``(1/n) sum loss(y_i x_i^T theta) + (lam/2)||theta||^2 + linear^T theta``.

    Trust-region Newton-CG (scipy ``trust-ncg``) with gradients and Hessian
    products from :mod:`fastdp._kernels._glm`, stopped when the gradient norm
    is at most ``gtol``.  ``loss``: ``"logistic"`` or ``"huber_hinge"`` (with
    ``huber_h``), labels in {-1, +1}.  Non-private: the result reveals the data.

    Returns
    -------
    theta : ndarray
    info : dict
        ``gradient_norm``, ``iterations``, ``converged``.
    """
    X = as_csr(check_X(X))
    margin_loss = _margin_loss(loss, huber_h)
    y = np.ascontiguousarray(y, dtype=np.float64)
    m = X.shape[1]
    linear = np.zeros(m) if linear is None else np.ascontiguousarray(linear, dtype=np.float64)
    objective = _MarginObjective(X, y, float(lam), linear, margin_loss,
                                 check_num_threads(num_threads))
    result = minimize(objective.value_and_gradient, np.zeros(m), jac=True, method="trust-ncg",
                      hessp=objective.hessian_product,
                      options={"gtol": gtol, "maxiter": int(max_iter)})
    theta = np.asarray(result.x, dtype=np.float64)
    theta, gnorm, polish = _newton_polish(objective, theta, gtol, max_steps=min(20, int(max_iter)))
    return theta, {"gradient_norm": gnorm, "iterations": int(result.nit) + polish,
                   "converged": bool(gnorm <= gtol)}


def _newton_polish(objective, theta, gtol, max_steps):
    """Full Newton steps (CG on Hessian products) until the gradient norm is <= gtol.

    Near the optimum the objective's decrease falls below its rounding error,
    so a trust-region method (which compares objective values) stalls; plain
    Newton steps use only gradients and converge quadratically there (the
    objective is lam-strongly convex).
    """
    from scipy.sparse.linalg import LinearOperator, cg

    m = theta.shape[0]
    steps = 0
    _, grad = objective.value_and_gradient(theta)
    gnorm = float(np.linalg.norm(grad))
    while gnorm > gtol and steps < max_steps:
        hessian = LinearOperator((m, m), matvec=lambda d: objective.hessian_product(theta, d),
                                 dtype=np.float64)
        step, _ = cg(hessian, -grad, rtol=1e-3 * min(1.0, gnorm), atol=0.0, maxiter=10 * m)
        candidate = theta + step
        _, new_grad = objective.value_and_gradient(candidate)
        new_norm = float(np.linalg.norm(new_grad))
        steps += 1
        if not new_norm < gnorm:
            objective.value_and_gradient(theta)  # restore the curvature at theta
            break
        theta, grad, gnorm = candidate, new_grad, new_norm
    return theta, gnorm, steps


def solve_logistic(X, y, lam, *, linear=None, gtol=1e-10, max_iter=200, num_threads=None):
    """:func:`solve_erm` with the logistic loss (non-private)."""
    return solve_erm(X, y, lam, loss="logistic", linear=linear, gtol=gtol, max_iter=max_iter,
                     num_threads=num_threads)


# --------------------------------------------------------------------------
# argument checks
# --------------------------------------------------------------------------


def _margin_loss(loss, huber_h=0.5):
    """The :class:`fastdp.losses.Loss` for ``loss`` (logistic, or the Huber hinge with
    ``huber_h``); rejects losses that break the paper's assumptions.  Its
    ``smoothness`` is the paper's curvature bound c."""
    if isinstance(loss, HuberHingeLoss):
        return loss
    if isinstance(loss, str) and loss.lower() == "huber_hinge":
        return HuberHingeLoss(huber_h)
    name = get_loss(loss).name
    if name == "logistic":
        return LogisticLoss()
    reason = "unbounded derivative" if name == "squared" else "not differentiable"
    raise ValidationError(
        f"output and objective perturbation (Chaudhuri et al. 2011) need a convex, doubly "
        f"differentiable loss of the margin with |loss'| <= 1 and bounded loss''; the "
        f"{name} loss breaks this ({reason}). Use loss='logistic' or 'huber_hinge' (the "
        "paper's smoothed SVM loss), or a gradient-perturbation solver (dpsgd, dpscd).")


def _check_tol(tol):
    tol = check_positive("tol", tol)
    if tol > 1e-2:
        raise ValidationError(f"tol must be at most 1e-2 (relative optimisation error); got {tol!r}.")
    return tol


def _check_max_iter(max_iter):
    if isinstance(max_iter, (bool, np.bool_)) or not isinstance(max_iter, numbers.Integral) \
            or max_iter < 1:
        raise ValidationError(f"max_iter must be a positive int; got {max_iter!r}.")
    return int(max_iter)


def _prepare(X, y):
    X = as_csr(check_X(X, max_row_norm=1.0, row_norm_tol=_ROW_NORM_TOL))
    y, _ = check_labels(y, "binary", n_samples=X.shape[0])
    y = np.ascontiguousarray(y, dtype=np.float64)
    if not np.all(np.abs(y) == 1.0):
        raise ValidationError("output and objective perturbation need labels in {-1, +1}.")
    return X, y


def _solve_or_raise(X, y, lam, linear, tol, max_iter, num_threads, loss=None):
    n = X.shape[0]
    gtol = tol / n
    theta, info = solve_erm(X, y, lam, loss=loss or LogisticLoss(), linear=linear,
                            gtol=gtol, max_iter=max_iter, num_threads=num_threads)
    if not info["converged"]:
        raise FastDPError(
            f"the minimiser did not reach gradient norm {gtol:.3g} in {max_iter} Newton "
            f"iterations (reached {info['gradient_norm']:.3g}); the privacy proof needs an "
            "(almost) exact minimiser, so nothing is released. Increase max_iter or tol.")
    return theta, info


def _result(theta, *, algorithm, loss, lam, n, noise_parameter, sensitivity, noise_std, event,
            info, num_threads, details):
    return SolverResult(
        coef=theta, alpha=None, v=None, n_iter=1, epochs=math.nan, algorithm=algorithm,
        loss=loss.name, lam=lam, noise_multiplier=noise_parameter, sensitivity=sensitivity,
        noise_std=noise_std, clip=math.inf, batch_size=float(n), sample_rate=1.0,
        sampler="none", adjacency="replace_one", event=event, lazy_noise=False,
        diagnostics={"optimizer_iterations": info["iterations"],
                     "gradient_norm": info["gradient_norm"]},
        num_threads=num_threads, history=None, details=details)


# --------------------------------------------------------------------------
# public mechanisms
# --------------------------------------------------------------------------


def output_perturbation(X, y, *, lam, epsilon=None, noise_multiplier=None, mechanism="laplace",
                        loss="logistic", huber_h=0.5, tol=_DEFAULT_TOL, max_iter=DEFAULT_MAX_ITER,
                        random_state=None, num_threads=None):
    """Output perturbation (Chaudhuri et al. 2011, Algorithm 1): ``argmin J + b``.

    Parameters
    ----------
    X : {array-like, scipy.sparse matrix} of shape (n, m)
        Rows with ``||x_i|| <= 1`` (checked; Theorem 6 assumes it).
    y : array-like of shape (n,)
        Labels in {-1, +1}.
    lam : float
        L2 strength lambda > 0 (the regulariser ``(lam/2)||theta||^2``).
    epsilon : float
        For ``mechanism="laplace"``: the pure-DP epsilon > 0.  b has density
        proportional to ``exp(-epsilon ||b|| / Delta)`` (the paper's
        ``beta = n lam epsilon / 2``), Delta = :func:`output_sensitivity`.
    noise_multiplier : float
        For ``mechanism="gaussian"``: sigma > 0, ``b ~ N(0, (sigma Delta)^2 I)``.
    mechanism : {"laplace", "gaussian"}, default="laplace"
    loss : {"logistic", "huber_hinge"}, default="logistic"
        Other losses break Theorem 6's assumptions and are rejected.
    huber_h : float, default=0.5
        h of the Huber hinge loss (the value spec 003's baselines use).
    tol : float, default=1e-6
        Relative optimisation error: the minimiser is computed to gradient
        norm ``tol / n`` and Delta grows by the factor ``(R + tol) / R``.
    max_iter : int, default=200
        Newton iterations allowed.
    random_state : None, int or numpy.random.Generator
        Source of the noise.
    num_threads : int or None
        OpenMP threads of the gradient kernels (same result for any value).

    Returns
    -------
    SolverResult
        ``event`` is ``PureEvent(epsilon, replace_one)`` or
        ``GaussianEvent(sigma, replace_one)``; ``noise_multiplier`` holds the
        noise parameter (``1 / epsilon`` for Laplace, sigma for Gaussian),
        ``sensitivity`` Delta.

    Notes
    -----
    Privacy: Theorem 6 (convex differentiable loss with ``|loss'| <= 1``,
    1-strongly convex differentiable regulariser, ``||x_i|| <= 1``);
    replace-one adjacency; released: the model.  The Gaussian variant is the
    Gaussian mechanism on the same L2 sensitivity.
    """
    loss = _margin_loss(loss, huber_h)
    lam = check_positive("lam", lam)
    tol = _check_tol(tol)
    max_iter = _check_max_iter(max_iter)
    num_threads = check_num_threads(num_threads)
    if mechanism == "laplace":
        if epsilon is None or noise_multiplier is not None:
            raise ValidationError("mechanism='laplace' takes epsilon (and no noise_multiplier).")
        epsilon = check_positive("epsilon", epsilon)
    elif mechanism == "gaussian":
        if noise_multiplier is None or epsilon is not None:
            raise ValidationError("mechanism='gaussian' takes noise_multiplier (and no epsilon).")
        noise_multiplier = check_positive("noise_multiplier", noise_multiplier)
    else:
        raise ValidationError(f"mechanism must be 'laplace' or 'gaussian'; got {mechanism!r}.")
    X, y = _prepare(X, y)
    n, m = X.shape
    rng = check_random_state(random_state)
    theta, info = _solve_or_raise(X, y, lam, None, tol, max_iter, num_threads, loss)
    sensitivity = output_sensitivity(n, lam, tol)
    if mechanism == "laplace":
        scale = sensitivity / epsilon
        noise = sample_l2_laplace(rng, m, scale)
        event = PureEvent(epsilon, Adjacency.REPLACE_ONE)
        noise_parameter = 1.0 / epsilon
        noise_std = scale * math.sqrt(m + 1.0)  # sqrt(E||b||^2 / m)
    else:
        noise_std = noise_multiplier * sensitivity
        noise = noise_std * rng.standard_normal(m)
        event = GaussianEvent(noise_multiplier, Adjacency.REPLACE_ONE)
        noise_parameter = noise_multiplier
    return _result(theta + noise, algorithm="output_perturbation", loss=loss, lam=lam, n=n,
                   noise_parameter=noise_parameter, sensitivity=sensitivity,
                   noise_std=noise_std, event=event, info=info, num_threads=num_threads,
                   details=OutputPerturbationDetails(mechanism=mechanism, tol=tol))


def objective_perturbation(X, y, *, lam, epsilon, loss="logistic", huber_h=0.5, tol=_DEFAULT_TOL,
                           max_iter=DEFAULT_MAX_ITER, random_state=None, num_threads=None):
    """Objective perturbation (Chaudhuri et al. 2011, Algorithm 2).

    Minimises ``J(theta) + b^T theta / n + (Delta_reg/2)||theta||^2`` with b of
    density proportional to ``exp(-eps' ||b|| / 2)``;
    ``(eps', Delta_reg)`` from :func:`objective_perturbation_parameters`.

    Parameters
    ----------
    X, y, lam, loss, huber_h, tol, max_iter, random_state, num_threads
        As :func:`output_perturbation`; c = 1/4 (logistic) or 1/(2h) (Huber hinge).
    epsilon : float
        The pure-DP epsilon > 0.

    Returns
    -------
    SolverResult
        ``event`` is ``PureEvent(epsilon, replace_one)``; ``noise_multiplier``
        is ``1 / epsilon``; ``details`` (:class:`ObjectivePerturbationDetails`)
        holds ``epsilon_prime``, ``delta_reg``, ``curvature`` c and ``tol``.

    Notes
    -----
    Privacy: Theorem 9 (loss convex and doubly differentiable in the margin
    with ``|loss'| <= 1`` and ``|loss''| <= c``, regulariser 1-strongly convex
    and doubly differentiable, ``||x_i|| <= 1``); replace-one adjacency;
    released: the model.  The proof is for the exact minimiser (see the
    module docstring for the optimisation tolerance).
    """
    loss = _margin_loss(loss, huber_h)
    lam = check_positive("lam", lam)
    epsilon = check_positive("epsilon", epsilon)
    tol = _check_tol(tol)
    max_iter = _check_max_iter(max_iter)
    num_threads = check_num_threads(num_threads)
    X, y = _prepare(X, y)
    n, m = X.shape
    eps_prime, delta_reg = objective_perturbation_parameters(epsilon, n, lam, loss.smoothness)
    rng = check_random_state(random_state)
    b = sample_l2_laplace(rng, m, 2.0 / eps_prime)
    theta, info = _solve_or_raise(X, y, lam + delta_reg, b / n, tol, max_iter, num_threads,
                                  loss)
    return _result(theta, algorithm="objective_perturbation", loss=loss, lam=lam, n=n,
                   noise_parameter=1.0 / epsilon, sensitivity=math.nan,
                   noise_std=(2.0 / eps_prime) * math.sqrt(m + 1.0) / n,
                   event=PureEvent(epsilon, Adjacency.REPLACE_ONE), info=info,
                   num_threads=num_threads,
                   details=_objective_details(loss, epsilon_prime=eps_prime, delta_reg=delta_reg,
                                              curvature=loss.smoothness, tol=tol))


def _objective_details(loss, **fields):
    """The details of an objective perturbation run (with ``huber_h`` for the Huber hinge)."""
    if loss.name == "huber_hinge":
        return HuberObjectivePerturbationDetails(huber_h=loss.h, **fields)
    return ObjectivePerturbationDetails(**fields)


# --------------------------------------------------------------------------
# estimator adapters (fastdp.solvers.registry)
# --------------------------------------------------------------------------


class _PerturbationEstimatorSolver(EstimatorSolver):
    """Shared parts: logistic only, noise parameter = scale relative to the sensitivity."""

    losses = ("logistic",)
    noise_name = "noise_scale"
    reads_row_map = True  # the _glm kernels read the estimators' mapped rows without a copy

    def _mechanism(self, settings):
        return "laplace"

    def event(self, n_samples, config, noise):
        if self._mechanism(self.settings(config)) == "gaussian":
            return GaussianEvent(noise, Adjacency.REPLACE_ONE)
        return PureEvent(1.0 / noise, Adjacency.REPLACE_ONE)

    def noise_for_budget(self, n_samples, config, epsilon, delta, accountant):
        """Closed form ``1 / epsilon`` for the pure mechanisms.

        If the accountant reports more than epsilon for ``PureEvent(epsilon)``
        (the RDP conversion of a pure event can be slightly loose), the
        noise is calibrated against that accountant instead, so the reported
        epsilon never exceeds the target.  The Gaussian variant is calibrated.
        """
        if self._mechanism(self.settings(config)) == "laplace":
            noise = 1.0 / float(epsilon)
            if accountant.epsilon(self.event(n_samples, config, noise), delta) <= epsilon:
                return noise
        return super().noise_for_budget(n_samples, config, epsilon, delta, accountant)

    def check_params(self, n_samples, config, *, private):
        """The base checks, ``lam``, the mechanism, ``tol`` and ``max_iter``."""
        super().check_params(n_samples, config, private=private)
        check_positive("lam", config["lam"])
        s = self.settings(config)
        self._mechanism(s)
        _check_tol(s.tol)
        _check_max_iter(s.max_iter)

    def _nonprivate(self, problem, s, algorithm):
        """epsilon = inf: the exact regularised optimum, no noise (not private)."""
        num_threads = check_num_threads(s.num_threads)
        theta, info = _solve_or_raise(*_prepare_nonprivate(problem.X, problem.y), float(s.alpha),
                                      None, tol=s.tol, max_iter=s.max_iter,
                                      num_threads=num_threads)
        return _nonprivate_result(theta, problem.n_samples, float(s.alpha), num_threads, info,
                                  algorithm)


class OutputPerturbationEstimatorSolver(_PerturbationEstimatorSolver):
    """``solver="output"``.  ``solver_options``: ``mechanism`` ("laplace" default,
    pure DP; or "gaussian"), ``tol``, ``max_iter`` (:class:`OutputPerturbationSettings`).
    The noise parameter is
    ``1 / epsilon`` (Laplace) or the noise multiplier sigma (Gaussian).
    ``batch_size``, ``epochs``, ``clip``, ``sampler`` and ``lazy_noise`` of the
    estimator do not apply and are ignored."""

    name = "output"
    settings_class = OutputPerturbationSettings
    options = OutputPerturbationSettings.option_names()

    def _mechanism(self, settings):
        mechanism = settings.mechanism
        if mechanism not in ("laplace", "gaussian"):
            raise ValidationError(f"mechanism must be 'laplace' or 'gaussian'; got {mechanism!r}.")
        return mechanism

    def solve(self, problem, settings, rng):
        """Output perturbation on ``problem`` (noise parameter ``settings.noise_parameter``)."""
        s = settings
        mechanism = self._mechanism(s)
        noise = s.noise_parameter
        if not noise:
            return self._nonprivate(problem, s, "output_perturbation")
        kwargs = ({"epsilon": 1.0 / noise} if mechanism == "laplace"
                  else {"noise_multiplier": noise})
        return output_perturbation(problem.X, problem.y, lam=s.alpha, mechanism=mechanism,
                                   loss=problem.loss, random_state=rng,
                                   num_threads=s.num_threads, tol=s.tol, max_iter=s.max_iter,
                                   **kwargs)


class ObjectivePerturbationEstimatorSolver(_PerturbationEstimatorSolver):
    """``solver="objective"``.  ``solver_options``: ``tol``, ``max_iter``
    (:class:`ObjectivePerturbationSettings`).  The noise
    parameter is ``1 / epsilon``; batch and epoch settings are ignored."""

    name = "objective"
    settings_class = ObjectivePerturbationSettings
    options = ObjectivePerturbationSettings.option_names()

    def solve(self, problem, settings, rng):
        """Objective perturbation on ``problem`` with ε = ``1 / settings.noise_parameter``."""
        s = settings
        if not s.noise_parameter:
            return self._nonprivate(problem, s, "objective_perturbation")
        return objective_perturbation(problem.X, problem.y, lam=s.alpha,
                                      epsilon=1.0 / s.noise_parameter, loss=problem.loss,
                                      random_state=rng, num_threads=s.num_threads,
                                      tol=s.tol, max_iter=s.max_iter)


def _prepare_nonprivate(X, y):
    X = as_csr(check_X(X))
    y, _ = check_labels(y, "binary", n_samples=X.shape[0])
    return X, np.ascontiguousarray(y, dtype=np.float64)


def _nonprivate_result(theta, n, lam, num_threads, info, algorithm):
    """The result of an epsilon = inf run: the exact regularised optimum, no noise."""
    from fastdp.privacy.events import NonPrivateEvent

    return SolverResult(
        coef=theta, alpha=None, v=None, n_iter=1, epochs=math.nan, algorithm=algorithm,
        loss="logistic", lam=lam, noise_multiplier=0.0, sensitivity=0.0,
        noise_std=0.0, clip=math.inf, batch_size=float(n), sample_rate=1.0, sampler="none",
        adjacency="replace_one", event=NonPrivateEvent(), lazy_noise=False,
        diagnostics={"optimizer_iterations": info["iterations"],
                     "gradient_norm": info["gradient_norm"]},
        num_threads=num_threads, history=None, extra={})


ESTIMATOR_SOLVERS = {"output": OutputPerturbationEstimatorSolver(),
                     "objective": ObjectivePerturbationEstimatorSolver()}
