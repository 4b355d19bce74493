"""Losses of generalised linear models, their conjugates and SDCA dual pieces.

The problem (spec 000, section 1) is L2-regularised empirical risk
minimisation with examples as rows of an (N, M) matrix ``X``::

    P(theta)  = (1/N) sum_i loss(x_i^T theta, y_i) + (lam/2) ||theta||^2          (primal)
    F*(alpha) = (1/N) sum_i loss*(-alpha_i, y_i) + ||X^T alpha||^2 / (2 lam N^2)   (dual, minimised)

``F*`` is the *negative* of the usual (maximised) SDCA dual ``D``, so at the
optimum ``min P = -min F*`` and the duality gap is ``P(theta(alpha)) + F*(alpha)
>= 0`` with ``theta(alpha) = X^T alpha / (lam N)``.

Three losses are provided, each as a small class with vectorised numpy
methods (all arguments broadcast against each other):

=========  =========================  ======================  ========================
name       loss(z, y)                 loss*(-alpha, y)        domain of alpha
=========  =========================  ======================  ========================
squared    (z - y)^2 / 2              alpha^2/2 - alpha y     all reals
logistic   log(1 + exp(-y z))         p log p + (1-p)log(1-p) p = alpha y in [0, 1]
hinge      max(0, 1 - y z)            -alpha y                alpha y in [0, 1]
=========  =========================  ======================  ========================

Labels are real for the squared loss and must be exactly -1 or +1 for the
logistic and hinge losses (see :func:`fastdp._validation.check_labels`).

This module is the only Python implementation of the losses; the compiled
kernels have the same formulas once, in ``fastdp/_kernels/_losses.pxd``, and
``Loss.code`` (a member of the ``IntEnum`` ``fastdp._kernels._losses.LossCode``)
names a loss to them.  :class:`HuberHingeLoss`, the smoothed hinge loss of
the perturbation baselines, has no kernel code and is not among the names
:func:`get_loss` accepts.

Privacy
-------
The loss methods are pure functions of their arguments. The module-level
objectives (:func:`primal_objective`, :func:`dual_objective`,
:func:`duality_gap`, :func:`gap_public`, :func:`primal_from_dual`) read the
whole private dataset: they are **non-private diagnostics** for tests,
convergence monitoring and benchmarks. Their outputs must not be released as
part of a DP model without separate accounting.
"""

import math

import numpy as np
from scipy.special import expit, xlogy

from fastdp._kernels._losses import LossCode
from fastdp._validation import check_in_interval, check_positive, check_rows_as_read
from fastdp.exceptions import ValidationError

__all__ = [
    "Loss",
    "SquaredLoss",
    "LogisticLoss",
    "HingeLoss",
    "HuberHingeLoss",
    "LossCode",
    "get_loss",
    "primal_objective",
    "dual_objective",
    "duality_gap",
    "gap_public",
    "primal_from_dual",
]


def _f64(a):
    return np.asarray(a, dtype=np.float64)


class Loss:
    """Base class of the GLM losses; see the module docstring for the formulas.

    Attributes
    ----------
    name : str
        Canonical name (``"squared"``, ``"logistic"`` or ``"hinge"``).
    smoothness : float
        Lipschitz constant ``1/mu`` of the derivative in z (``math.inf`` for
        the non-smooth hinge loss).
    mu : float
        ``1 / smoothness``: the strong-convexity modulus of the conjugate
        (0 for the hinge loss).
    task : str
        ``"regression"`` or ``"binary"``: the label kind the loss expects.
    code : LossCode or None
        The code that names this loss to the compiled kernels (None: no kernel
        implements it).
    """

    name = None
    smoothness = None
    task = None
    code = None

    @property
    def mu(self):
        return 0.0 if math.isinf(self.smoothness) else 1.0 / self.smoothness

    def __repr__(self):
        return f"{type(self).__name__}()"

    def __eq__(self, other):
        return type(self) is type(other)

    def __hash__(self):
        return hash(type(self))

    # ---- interface implemented by every loss ---------------------------------

    def value(self, z, y):
        """Loss ``loss(z, y)`` of prediction ``z`` for label ``y`` (elementwise)."""
        raise NotImplementedError

    def derivative(self, z, y):
        """Derivative ``d loss / d z`` (a subgradient where the loss has a kink)."""
        raise NotImplementedError

    def second_derivative(self, z, y):
        """Second derivative ``d^2 loss / d z^2``."""
        raise NotImplementedError

    def derivative_in_place(self, z, y):
        """:meth:`derivative`, written over ``z`` (a float64 array, returned).

        For large arrays (e.g. margins of many models at once) where a second
        array of the same size is not wanted; equal to :meth:`derivative` up to
        rounding.
        """
        z[...] = self.derivative(z, y)
        return z

    def conjugate(self, u, y):
        """Convex conjugate ``loss*(u) = sup_z (u z - loss(z, y))``; ``inf`` off its domain."""
        raise NotImplementedError

    def project_dual(self, alpha, y, box_eps=1e-4):
        """Project dual variables into the box the coordinate step works in.

        Identity for the squared loss; ``y * clip(alpha * y, box_eps, 1 - box_eps)``
        for logistic and hinge (spec 000, section 2.1).
        """
        raise NotImplementedError

    def dual_coordinate_step(self, alpha_j, y_j, margin_j, s_j, box_eps=1e-4):
        """Update ``zeta_j`` minimising the local subproblem ``G*_j`` (spec 000, section 2.1).

        Parameters
        ----------
        alpha_j : float or ndarray
            Current (possibly noisy, possibly out-of-box) dual coordinate(s).
        y_j : float or ndarray
            Label(s).
        margin_j : float or ndarray
            ``m_j = x_j^T v / (lam N)``, the prediction of the current public
            model ``v / (lam N)`` on example j.
        s_j : float or ndarray
            ``L ||x_j||^2 / (lam N)`` with L the mini-batch size (``L = 1`` for
            plain SDCA). Must be >= 0.
        box_eps : float, default=1e-4
            Width of the margin kept from the edges of the dual box for the
            logistic and hinge losses (ignored for the squared loss; 0 allowed
            for hinge, which gives exact SDCA).

        Returns
        -------
        zeta_j : ndarray (0-d for scalar input)
            The update. For logistic and hinge it is measured from the
            *projected* ``alpha_j`` (see :meth:`project_dual`): the new dual
            value is ``project_dual(alpha_j) + zeta_j``; a solver adds
            ``zeta_j`` to the stored ``alpha_j`` as in spec 000, section 2.1.

        Notes
        -----
        The subproblem is ``N G*_j(zeta) = loss*(-(alpha_j + zeta)) + m_j zeta
        + (s_j / 2) zeta^2 + const``; see :meth:`subproblem_value`.
        Privacy: reads only example j's label, margin and norm; no release.
        """
        raise NotImplementedError

    # ---- shared implementations ----------------------------------------------

    def check_box_eps(self, box_eps):
        """Check ``box_eps`` for this loss and return it as a float.

        ``[0, 0.5)`` for the squared loss, which ignores its value: the
        range every dual-SCD kernel accepts; the boxed losses override this
        with their interval.

        Raises
        ------
        ValidationError
            If ``box_eps`` is not a real number, or is outside the loss's interval.
        """
        return check_in_interval("box_eps", box_eps, 0.0, 0.5, include_low=True,
                                 advice="The squared loss ignores it.")

    def dual_term(self, alpha, y):
        """``loss*(-alpha, y)``, the per-example term of the dual objective (0 log 0 = 0)."""
        return self.conjugate(-_f64(alpha), y)

    def optimal_dual(self, z, y):
        """KKT dual value ``alpha = -loss'(z, y)`` paired with prediction ``z``."""
        return -self.derivative(z, y)

    def subproblem_value(self, zeta, alpha_j, y_j, margin_j, s_j):
        """``N G*_j(zeta)`` up to a constant: ``loss*(-(alpha_j+zeta)) + m_j zeta + s_j zeta^2 / 2``.

        ``alpha_j`` is used as given (pass :meth:`project_dual` of it to match
        :meth:`dual_coordinate_step`). ``inf`` where ``alpha_j + zeta`` is
        outside the dual domain.
        """
        zeta = _f64(zeta)
        return (
            self.dual_term(_f64(alpha_j) + zeta, y_j)
            + _f64(margin_j) * zeta
            + 0.5 * _f64(s_j) * zeta * zeta
        )


class SquaredLoss(Loss):
    """Squared loss ``(z - y)^2 / 2`` (ridge regression), 1-smooth."""

    name = "squared"
    smoothness = 1.0
    task = "regression"
    code = LossCode.SQUARED

    def value(self, z, y):
        r = _f64(z) - _f64(y)
        return 0.5 * r * r

    def derivative(self, z, y):
        return _f64(z) - _f64(y)

    def second_derivative(self, z, y):
        return np.ones(np.broadcast(_f64(z), _f64(y)).shape)

    def conjugate(self, u, y):
        u = _f64(u)
        return 0.5 * u * u + u * _f64(y)

    def project_dual(self, alpha, y, box_eps=1e-4):
        return np.broadcast_to(_f64(alpha), np.broadcast(_f64(alpha), _f64(y)).shape).copy()

    def dual_coordinate_step(self, alpha_j, y_j, margin_j, s_j, box_eps=1e-4):
        return (_f64(y_j) - _f64(margin_j) - _f64(alpha_j)) / (1.0 + _f64(s_j))


class _BoxedDualLoss(Loss):
    """Losses whose dual lives in the box ``alpha * y in [0, 1]`` (labels +-1)."""

    task = "binary"
    _box_eps_may_be_zero = True

    def check_box_eps(self, box_eps):
        """``box_eps`` in ``[0, 0.5)`` (``(0, 0.5)`` when the conjugate blows up at the box edges)."""
        return check_in_interval(
            "box_eps", box_eps, 0.0, 0.5, include_low=self._box_eps_may_be_zero,
            advice=f"The {self.name} loss needs this interval; the default 1e-4 matches the "
                   "reference implementation of DP-SCD.",
        )

    def project_dual(self, alpha, y, box_eps=1e-4):
        b = self.check_box_eps(box_eps)
        y = _f64(y)
        return y * np.clip(_f64(alpha) * y, b, 1.0 - b)

    def _unconstrained_step(self, alpha_tilde, y, margin, s):
        raise NotImplementedError

    def dual_coordinate_step(self, alpha_j, y_j, margin_j, s_j, box_eps=1e-4):
        b = self.check_box_eps(box_eps)
        y = _f64(y_j)
        alpha_tilde = self.project_dual(alpha_j, y, b)
        step = self._unconstrained_step(alpha_tilde, y, _f64(margin_j), _f64(s_j))
        alpha_new = y * np.clip(y * (alpha_tilde + step), b, 1.0 - b)
        return alpha_new - alpha_tilde


class LogisticLoss(_BoxedDualLoss):
    """Logistic loss ``log(1 + exp(-y z))`` for ``y`` in {-1, +1}, 1/4-smooth.

    The coordinate step is one Newton step on the subproblem from
    ``zeta = 0`` (at the projected ``alpha_j``), followed by projection into
    ``alpha y in [box_eps, 1 - box_eps]`` (spec 000, section 2.1). ``box_eps``
    must be > 0 here because the conjugate's derivatives blow up at the box
    edges.
    """

    name = "logistic"
    smoothness = 0.25
    code = LossCode.LOGISTIC
    _box_eps_may_be_zero = False

    def value(self, z, y):
        return np.logaddexp(0.0, -_f64(y) * _f64(z))

    def derivative(self, z, y):
        y = _f64(y)
        return -y * expit(-y * _f64(z))

    def derivative_in_place(self, z, y):
        """``-y / (1 + exp(y z))`` written over ``z`` (the kernels' form; ``exp(y z) = inf``
        gives ``-0``), with no temporary of the size of ``z``."""
        y = _f64(y)
        with np.errstate(over="ignore"):
            z *= y
            np.exp(z, out=z)
            z += 1.0
            np.reciprocal(z, out=z)
            z *= -y
        return z

    def second_derivative(self, z, y):
        y = _f64(y)
        yz = y * _f64(z)
        return y * y * expit(yz) * expit(-yz)

    def conjugate(self, u, y):
        p = -_f64(u) * _f64(y)
        inside = (p >= 0.0) & (p <= 1.0)
        q = np.where(inside, p, 0.5)  # keep xlogy away from invalid values
        out = xlogy(q, q) + xlogy(1.0 - q, 1.0 - q)
        return np.where(inside, out, np.inf)

    def newton_step(self, alpha_tilde, y, margin, s):
        """Unconstrained Newton step ``-g/h`` of the subproblem at ``zeta = 0``.

        ``g = y log(p / (1 - p)) + margin`` and ``h = 1 / (p (1 - p)) + s`` with
        ``p = alpha_tilde * y`` strictly inside (0, 1).
        """
        y = _f64(y)
        p = _f64(alpha_tilde) * y
        g = y * (np.log(p) - np.log1p(-p)) + _f64(margin)
        h = 1.0 / (p * (1.0 - p)) + _f64(s)
        return -g / h

    _unconstrained_step = newton_step


class HingeLoss(_BoxedDualLoss):
    """Hinge loss ``max(0, 1 - y z)`` for ``y`` in {-1, +1} (linear SVM); not smooth.

    The coordinate step is the exact minimiser of the subproblem over the box
    ``alpha y in [box_eps, 1 - box_eps]``; ``box_eps = 0`` gives exact SDCA on
    ``[0, 1]``. :meth:`derivative` returns the subgradient ``-y`` for
    ``y z < 1`` and 0 otherwise (so 0 at the kink).
    """

    name = "hinge"
    smoothness = math.inf
    code = LossCode.HINGE

    def value(self, z, y):
        return np.maximum(0.0, 1.0 - _f64(y) * _f64(z))

    def derivative(self, z, y):
        y = _f64(y)
        return np.where(y * _f64(z) < 1.0, -y, 0.0)

    def second_derivative(self, z, y):
        raise NotImplementedError(
            "The hinge loss has no second derivative at y*z = 1 and zero elsewhere; "
            "Newton-type methods need a smooth loss (squared or logistic)."
        )

    def conjugate(self, u, y):
        p = -_f64(u) * _f64(y)
        inside = (p >= 0.0) & (p <= 1.0)
        return np.where(inside, -p, np.inf)

    def _unconstrained_step(self, alpha_tilde, y, margin, s):
        # minimiser of -(alpha+zeta) y + m zeta + s zeta^2/2 is (y - m)/s;
        # s = 0 (an all-zero example) makes the problem linear: go to the edge.
        with np.errstate(divide="ignore", invalid="ignore"):
            step = (y - margin) / s
        return np.where(np.isnan(step), 0.0, step)


class HuberHingeLoss(Loss):
    """Huber-smoothed hinge loss of the margin ``u = y z`` (Chaudhuri et al. 2011, section 3.4.2).

    ``0`` for ``u > 1 + h``; ``(1 + h - u)^2 / (4h)`` for ``|1 - u| <= h``;
    ``1 - u`` for ``u < 1 - h``, for ``y`` in {-1, +1}.  ``|loss'| <= 1`` and
    ``loss'' <= 1/(2h)`` (its smoothness).  Used by the perturbation
    baselines; no dual pieces and no kernel code.

    Parameters
    ----------
    h : float, default=0.5
        Half-width ``h > 0`` of the smoothed region.
    """

    name = "huber_hinge"
    task = "binary"

    def __init__(self, h=0.5):
        self.h = check_positive("huber_h", h)
        self.smoothness = 1.0 / (2.0 * self.h)

    def __repr__(self):
        return f"HuberHingeLoss(h={self.h!r})"

    def __eq__(self, other):
        return type(self) is type(other) and self.h == other.h

    def __hash__(self):
        return hash((type(self), self.h))

    def value(self, z, y):
        h, u = self.h, _f64(y) * _f64(z)
        inside = (1.0 + h - u) ** 2 / (4.0 * h)
        return np.where(u > 1.0 + h, 0.0, np.where(u < 1.0 - h, 1.0 - u, inside))

    def derivative(self, z, y):
        h, y = self.h, _f64(y)
        u = y * _f64(z)
        return y * np.where(u > 1.0 + h, 0.0,
                            np.where(u < 1.0 - h, -1.0, -(1.0 + h - u) / (2.0 * h)))

    def second_derivative(self, z, y):
        h, y = self.h, _f64(y)
        u = y * _f64(z)
        return y * y * np.where(np.abs(1.0 - u) <= h, 1.0 / (2.0 * h), 0.0)


_LOSSES = {
    "squared": SquaredLoss,
    "ridge": SquaredLoss,
    "logistic": LogisticLoss,
    "log": LogisticLoss,
    "hinge": HingeLoss,
}


def get_loss(name):
    """Return the loss object for a name (or pass a :class:`Loss` through).

    Parameters
    ----------
    name : str or Loss
        ``"squared"`` / ``"ridge"``, ``"logistic"`` / ``"log"``, or ``"hinge"``
        (case-insensitive), or an existing :class:`Loss` instance.

    Returns
    -------
    loss : Loss

    Raises
    ------
    ValidationError
        For an unknown name.
    """
    if isinstance(name, Loss):
        return name
    if isinstance(name, str) and name.lower() in _LOSSES:
        return _LOSSES[name.lower()]()
    raise ValidationError(
        f"Unknown loss {name!r}; use one of 'squared' (alias 'ridge'), "
        "'logistic' (alias 'log') or 'hinge'."
    )


# --------------------------------------------------------------------------
# objectives (non-private diagnostics)
# --------------------------------------------------------------------------


def _n_samples(X, y, vec, vec_name, length_axis):
    n_samples, n_features = X.shape
    y = _f64(y)
    if y.shape != (n_samples,):
        raise ValidationError(f"y has shape {y.shape}; expected ({n_samples},) to match X {X.shape}.")
    expected = (n_samples, n_features)[length_axis]
    if np.shape(vec) != (expected,):
        raise ValidationError(
            f"{vec_name} has shape {np.shape(vec)}; expected ({expected},) for X of shape {X.shape}."
        )
    return n_samples, y


def _predict(X, theta):
    check_rows_as_read(X, "objective")  # a trusted binary CSR: scipy trusts its columns
    return np.asarray(X @ _f64(theta), dtype=np.float64).reshape(-1)


def _aggregate(X, alpha):
    check_rows_as_read(X, "objective")
    return np.asarray(X.T @ _f64(alpha), dtype=np.float64).reshape(-1)


def primal_from_dual(alpha, X, lam):
    """Primal model of a dual vector: ``theta(alpha) = X^T alpha / (lam N)``.

    Parameters
    ----------
    alpha : ndarray of shape (n_samples,)
    X : ndarray or scipy.sparse matrix of shape (n_samples, n_features)
    lam : float
        Regularisation strength lambda > 0.

    Returns
    -------
    theta : ndarray of shape (n_features,)

    Notes
    -----
    Privacy: reads every example. A DP solver must release ``v / (lam N)``
    built from its noisy ``v``, never this map of its ``alpha``
    (spec 000, section 1.3). Non-private diagnostic.
    """
    if np.shape(alpha) != (X.shape[0],):
        raise ValidationError(f"alpha has shape {np.shape(alpha)}; expected ({X.shape[0]},).")
    return _aggregate(X, alpha) / (lam * X.shape[0])


def primal_objective(theta, X, y, loss, lam):
    """``P(theta) = (1/N) sum_i loss(x_i^T theta, y_i) + (lam/2) ||theta||^2``.

    Parameters
    ----------
    theta : ndarray of shape (n_features,)
    X : ndarray or scipy.sparse matrix of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
        Labels (+-1 for logistic and hinge).
    loss : str or Loss
    lam : float
        Regularisation strength lambda > 0.

    Returns
    -------
    value : float

    Notes
    -----
    Privacy: reads the whole dataset; a non-private diagnostic.
    """
    loss = get_loss(loss)
    _, y = _n_samples(X, y, theta, "theta", 1)
    theta = _f64(theta)
    return float(np.mean(loss.value(_predict(X, theta), y)) + 0.5 * lam * theta @ theta)


def dual_objective(alpha, X, y, loss, lam):
    """Minimised dual ``F*(alpha) = (1/N) sum_i loss*(-alpha_i) + ||X^T alpha||^2 / (2 lam N^2)``.

    Sign convention (spec 000, sections 1.2 and 8.8): ``F*`` is minimised
    and equals ``-D(alpha)``, minus the usual SDCA dual that is maximised;
    so ``min_theta P = -min_alpha F*`` and ``P(theta) + F*(alpha) >= 0`` for
    every pair. ``inf`` when some ``alpha_i`` is outside the dual domain.

    Parameters
    ----------
    alpha : ndarray of shape (n_samples,)
    X : ndarray or scipy.sparse matrix of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    loss : str or Loss
    lam : float

    Returns
    -------
    value : float

    Notes
    -----
    Privacy: reads the whole dataset; a non-private diagnostic.
    """
    loss = get_loss(loss)
    n, y = _n_samples(X, y, alpha, "alpha", 0)
    v = _aggregate(X, alpha)
    return float(np.mean(loss.dual_term(alpha, y)) + (v @ v) / (2.0 * lam * n * n))


def duality_gap(alpha, X, y, loss, lam):
    """Duality gap at ``alpha``: ``P(theta(alpha)) + F*(alpha)`` (spec 000, section 1.4).

    Computed as the mean of the per-example Fenchel-Young terms
    ``loss(x_i^T theta) + loss*(-alpha_i) + alpha_i x_i^T theta`` with
    ``theta = X^T alpha / (lam N)``; each term is >= 0, so the gap is >= 0
    and 0 exactly at the optimum. (This replaces the incorrect second line
    of the paper's Eq. 4.) ``inf`` when ``alpha`` is dual-infeasible.

    Parameters
    ----------
    alpha : ndarray of shape (n_samples,)
    X : ndarray or scipy.sparse matrix of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    loss : str or Loss
    lam : float

    Returns
    -------
    gap : float

    Notes
    -----
    Privacy: reads the whole dataset (spec's ``gap_consistent``); a
    non-private diagnostic for tests and monitoring.
    """
    loss = get_loss(loss)
    _, y = _n_samples(X, y, alpha, "alpha", 0)
    alpha = _f64(alpha)
    z = _predict(X, primal_from_dual(alpha, X, lam))
    terms = loss.value(z, y) + loss.dual_term(alpha, y) + alpha * z
    return float(np.mean(terms))


def gap_public(alpha, v, X, y, loss, lam):
    """Gap of a solver's state ``(alpha, v)``: ``P(v / (lam N)) + F*(alpha)``.

    Equals :func:`duality_gap` when ``v == X^T alpha``; with noisy ``v`` it
    measures the released model ``v / (lam N)`` against the dual ``alpha``
    (what the reference implementation prints). It can be negative when
    ``v`` and ``alpha`` disagree.

    Parameters
    ----------
    alpha : ndarray of shape (n_samples,)
    v : ndarray of shape (n_features,)
    X : ndarray or scipy.sparse matrix of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    loss : str or Loss
    lam : float

    Returns
    -------
    value : float

    Notes
    -----
    Privacy: despite the name it reads the whole dataset; a non-private
    diagnostic.
    """
    theta = _f64(v) / (lam * X.shape[0])
    return primal_objective(theta, X, y, loss, lam) + dual_objective(alpha, X, y, loss, lam)
