"""Objective classes of spec 001: max-affine objectives with private offsets.

``PiecewiseAffineProblem`` is f(x; b) = max_i (a_i . x + b_i) on a public
constraint set P. ``SumOfPinballProblem`` is the structured case of quantile
(and least-absolute-deviation) regression with private responses,
f(x) = weight * sum_j rho_tau(y_j - z_j . x), which is max-affine with 2^n
implicit pieces that are never enumerated.

What is private: the offsets b (the responses y). Public: the slopes (the
features), P, tau, weight and the adjacency radius ``b_max``. Adjacency
(spec 001, eq. 4): b ~ b' iff max_i |b_i - b'_i| <= b_max. For any two
adjacent data sets and every x, |f(x; b) - f(x; b')| <= b_max (Lemma 18), the
score sensitivity every mechanism here uses.

The classes only compute; they release nothing and decide nothing about
privacy. Methods that read the private offsets (``value``, ``solve``,
``select_subgradients`` with a finite temperature) say so.
"""

import math

import numpy as np
from scipy.optimize import linprog

from fastdp._kernels import _metropolis
from fastdp._validation import check_positive, check_real_array
from fastdp.exceptions import ValidationError
from fastdp.privacy.events import Adjacency, _as_adjacency
from fastdp.solvers.piecewise_affine.constraints import check_constraints

__all__ = ["PiecewiseAffineProblem", "SumOfPinballProblem"]


def _gumbel_argmax(logits, rng):
    """Row-wise sample of i with probability softmax(logits[r])_i (Gumbel-max)."""
    return np.argmax(logits + rng.gumbel(size=logits.shape), axis=-1)


class _ProblemBase:
    """Shared public geometry and the kernel interface."""

    kernel_kind = None

    def _init_common(self, constraints, b_max, adjacency, d):
        self.constraints = check_constraints(constraints, d)
        self.b_max = check_positive("b_max", b_max)
        self.adjacency = _as_adjacency(adjacency)
        self._solution = None

    @property
    def n_features(self):
        return self.constraints.dim

    def diameter(self):
        """Public bound R on diam(P)."""
        return self.constraints.diameter()

    def center(self):
        """Data-independent point of P (box centre / Chebyshev centre)."""
        return self.constraints.center()

    def size(self):
        """The paper's size c of P: ``diameter / (2 sqrt(d))`` (= c for [-c, c]^d)."""
        return self.diameter() / (2.0 * math.sqrt(self.n_features))

    def solve(self):
        """Non-private minimiser and minimum ``(x_opt, f_opt)`` (reads b; cached).

        Solved as a linear program by HiGHS with fixed options, so ``x_opt``
        is a deterministic function of the data.
        """
        if self._solution is None:
            self._solution = self._solve_lp()
        x, f = self._solution
        return x.copy(), f

    def objective_gap(self, X):
        """f(X) - f_opt (reads b)."""
        return self.value(X) - self.solve()[1]


class PiecewiseAffineProblem(_ProblemBase):
    """minimise f(x; b) = max_i (a_i . x + b_i) subject to x in P.

    Parameters
    ----------
    A : array-like of shape (m, d)
        Public slopes a_i (rows).
    b : array-like of shape (m,)
        **Private** offsets.
    b_max : float
        Public adjacency radius: b ~ b' iff ||b - b'||_inf <= b_max.
    constraints : Box or Polytope
        Public, bounded constraint set P.
    adjacency : {"replace_one", "add_remove"}, default "replace_one"
        Record-level relation from which the user derived ``b_max`` (the
        label carried by the privacy events; every guarantee holds for any
        relation under which adjacent data sets satisfy the b_max bound).
    """

    kernel_kind = _metropolis.OBJ_MAX_AFFINE

    def __init__(self, A, b, b_max, constraints, adjacency=Adjacency.REPLACE_ONE):
        A = check_real_array("A", A, 2, allow_empty=False)
        b = check_real_array("b", b, 1, allow_empty=False)
        if A.shape[0] != b.shape[0]:
            raise ValidationError(
                f"A has {A.shape[0]} rows (pieces) but b has {b.shape[0]} entries; they must match.")
        self.A = np.ascontiguousarray(A)
        self.b = b
        self._init_common(constraints, b_max, adjacency, A.shape[1])

    @property
    def n_pieces(self):
        return self.A.shape[0]

    @property
    def log_n_pieces(self):
        return math.log(self.n_pieces)

    @property
    def lipschitz(self):
        """G = max_i ||a_i||_2 (public)."""
        return float(np.max(np.linalg.norm(self.A, axis=1)))

    def with_offsets(self, b):
        """The same public problem with other offsets (e.g. noisy or adjacent ones)."""
        return PiecewiseAffineProblem(self.A, b, self.b_max, self.constraints, self.adjacency)

    def scores(self, X):
        """a_i . x + b_i for every row of X, shape (..., m) (reads b)."""
        return np.asarray(X, dtype=np.float64) @ self.A.T + self.b

    def value(self, X):
        """f(X; b) (reads b)."""
        return self.scores(X).max(axis=-1)

    def kernel_arrays(self):
        """``(At, b, tau, weight)`` for :mod:`fastdp._kernels._metropolis`."""
        return np.ascontiguousarray(self.A.T), self.b, 0.0, 1.0

    def select_subgradients(self, X, beta, rng, *, sign=1.0):
        """One piece per row of X with P(i) ∝ exp(sign * beta * (a_i . x + b_i)).

        ``beta = inf`` gives the exact subgradient (argmax), ``beta = 0`` the
        uniform choice. Returns the slopes (n, d) and the indices (n,).
        """
        X = np.atleast_2d(X)
        if beta == 0:
            idx = rng.integers(0, self.n_pieces, size=X.shape[0])
        elif math.isinf(beta):
            idx = np.argmax(sign * self.scores(X), axis=-1)
        else:
            idx = _gumbel_argmax(sign * beta * self.scores(X), rng)
        return self.A[idx], idx

    def _solve_lp(self):
        m, d = self.A.shape
        cons = self.constraints
        # variables (x, t): minimise t subject to A x - t <= -b and x in P
        cost = np.zeros(d + 1)
        cost[-1] = 1.0
        A_ub = np.hstack([self.A, -np.ones((m, 1))])
        b_ub = -self.b
        H, h = cons.linprog_inequalities()
        if H is not None:
            A_ub = np.vstack([A_ub, np.hstack([H, np.zeros((H.shape[0], 1))])])
            b_ub = np.concatenate([b_ub, h])
        bounds = cons.linprog_bounds() + [(None, None)]
        res = linprog(cost, A_ub=A_ub, b_ub=b_ub, bounds=bounds, method="highs")
        if res.status != 0:
            raise ValidationError(f"The linear program failed: {res.message}")
        x = cons.project(res.x[:d]) if cons.is_box else res.x[:d]
        return x, float(self.value(x))


class SumOfPinballProblem(_ProblemBase):
    """minimise f(x; y) = weight * sum_j rho_tau(y_j - z_j . x) subject to x in P.

    rho_tau(r) = max(tau r, (tau - 1) r). This is max-affine with 2^n pieces
    a_s = -weight * sum_j s_j z_j, b_s = weight * sum_j s_j y_j,
    s_j in {tau, tau - 1}; the pieces are never enumerated.

    Parameters
    ----------
    Z : array-like of shape (n, d)
        Public features.
    y : array-like of shape (n,)
        **Private** responses.
    b_max : float
        Public bound on sup_x |f(x; y) - f(x; y')| over adjacent y, y'. Use
        :func:`quantile_regression_problem` to derive it from a per-response
        bound.
    constraints : Box or Polytope
    tau : float in (0, 1), default 0.5
    weight : float, default 1.0
    adjacency : see :class:`PiecewiseAffineProblem`.
    """

    kernel_kind = _metropolis.OBJ_SUM_PINBALL

    def __init__(self, Z, y, b_max, constraints, tau=0.5, weight=1.0,
                 adjacency=Adjacency.REPLACE_ONE):
        Z = check_real_array("Z", Z, 2, allow_empty=False)
        y = check_real_array("y", y, 1, allow_empty=False)
        if Z.shape[0] != y.shape[0]:
            raise ValidationError(f"Z has {Z.shape[0]} rows but y has {y.shape[0]} entries.")
        tau = float(tau)
        if not 0.0 < tau < 1.0:
            raise ValidationError(f"tau must lie strictly between 0 and 1; got {tau!r}.")
        self.Z = np.ascontiguousarray(Z)
        self.y = y
        self.tau = tau
        self.weight = check_positive("weight", weight)
        self._init_common(constraints, b_max, adjacency, Z.shape[1])

    @property
    def n_pieces(self):
        return math.inf if self.Z.shape[0] > 1000 else 2 ** self.Z.shape[0]

    @property
    def log_n_pieces(self):
        return self.Z.shape[0] * math.log(2.0)

    @property
    def lipschitz(self):
        """Public bound on the Lipschitz constant: weight * max(tau, 1-tau) * sum_j ||z_j||."""
        return float(self.weight * max(self.tau, 1 - self.tau) * np.linalg.norm(self.Z, axis=1).sum())

    def with_offsets(self, y):
        return SumOfPinballProblem(self.Z, y, self.b_max, self.constraints, self.tau,
                                   self.weight, self.adjacency)

    def residuals(self, X):
        return self.y - np.asarray(X, dtype=np.float64) @ self.Z.T

    def value(self, X):
        r = self.residuals(X)
        return self.weight * np.maximum(self.tau * r, (self.tau - 1.0) * r).sum(axis=-1)

    def kernel_arrays(self):
        return np.ascontiguousarray(self.Z.T), self.y, self.tau, self.weight

    def select_subgradients(self, X, beta, rng, *, sign=1.0):
        """Exact factorised finite exponential mechanism over the 2^n pieces.

        P(s) ∝ exp(sign * beta * u_s(x)) with u_s(x) = weight * sum_j s_j r_j
        factorises: independently per j, s_j = tau with probability
        sigmoid(sign * beta * weight * r_j), else tau - 1. Returns the slopes
        (n_rows, d) and the choices s (n_rows, n).
        """
        X = np.atleast_2d(X)
        r = self.residuals(X)
        if beta == 0:
            p_tau = np.full(r.shape, 0.5)
        elif math.isinf(beta):
            p_tau = (sign * r >= 0).astype(np.float64)
        else:
            t = sign * beta * self.weight * r
            p_tau = 0.5 * (1.0 + np.tanh(0.5 * t))
        s = np.where(rng.random(r.shape) < p_tau, self.tau, self.tau - 1.0)
        slopes = -self.weight * (s @ self.Z)
        return slopes, s

    def _solve_lp(self):
        n, d = self.Z.shape
        cons = self.constraints
        # variables (x, u, v): y - Z x = u - v, u, v >= 0; minimise w (tau u + (1-tau) v)
        cost = np.concatenate([np.zeros(d), np.full(n, self.weight * self.tau),
                               np.full(n, self.weight * (1 - self.tau))])
        A_eq = np.hstack([self.Z, np.eye(n), -np.eye(n)])
        b_eq = self.y
        H, h = cons.linprog_inequalities()
        A_ub = b_ub = None
        if H is not None:
            A_ub = np.hstack([H, np.zeros((H.shape[0], 2 * n))])
            b_ub = h
        bounds = cons.linprog_bounds() + [(0, None)] * (2 * n)
        res = linprog(cost, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=b_eq, bounds=bounds,
                      method="highs")
        if res.status != 0:
            raise ValidationError(f"The linear program failed: {res.message}")
        x = cons.project(res.x[:d]) if cons.is_box else res.x[:d]
        return x, float(self.value(x))
