"""Public constraint sets of spec 001: boxes and bounded polytopes.

Everything here is public (it never reads the private offsets): membership,
Euclidean projection, a data-independent centre, a public bound on the
diameter and uniform sampling. Projection onto a public set is
post-processing and costs no privacy.
"""

import numpy as np
from scipy.optimize import linprog

from fastdp._kernels import _metropolis
from fastdp._validation import check_real_array
from fastdp.exceptions import ValidationError

__all__ = ["Box", "Polytope", "check_constraints"]


class Box:
    """The box ``{x : lo <= x <= hi}`` (public).

    Parameters
    ----------
    lo, hi : array-like of shape (d,)
        Finite bounds with ``lo < hi`` coordinate-wise.
    """

    is_box = True

    def __init__(self, lo, hi):
        lo = check_real_array("lo", lo, 1)
        hi = check_real_array("hi", hi, 1)
        if lo.shape != hi.shape or lo.size == 0:
            raise ValidationError(
                f"lo and hi must have the same non-zero length; got {lo.shape} and {hi.shape}.")
        if np.any(lo >= hi):
            raise ValidationError(
                "Box needs lo < hi in every coordinate (a set with volume); "
                f"violated at coordinate {int(np.flatnonzero(lo >= hi)[0])}.")
        self.lo, self.hi = lo, hi

    @classmethod
    def cube(cls, d, c):
        """The paper's box ``[-c, c]^d``."""
        if int(d) != d or d < 1:
            raise ValidationError(f"d must be a positive integer; got {d!r}.")
        if not (np.isfinite(c) and c > 0):
            raise ValidationError(f"c must be a finite number > 0; got {c!r}.")
        return cls(np.full(int(d), -float(c)), np.full(int(d), float(c)))

    @property
    def dim(self):
        return self.lo.shape[0]

    def contains(self, X):
        """Boolean membership of the rows of ``X`` (or of the vector ``X``)."""
        X = np.asarray(X, dtype=np.float64)
        return np.all((X >= self.lo) & (X <= self.hi), axis=-1)

    def project(self, X):
        """Euclidean projection (coordinate-wise clipping)."""
        return np.clip(X, self.lo, self.hi)

    def center(self):
        return 0.5 * (self.lo + self.hi)

    def diameter(self):
        """Exact diameter ``||hi - lo||_2``."""
        return float(np.linalg.norm(self.hi - self.lo))

    def bounding_box(self):
        return self.lo.copy(), self.hi.copy()

    def halfspaces(self):
        """``(H, h)`` with ``P = {x : H x <= h}``."""
        eye = np.eye(self.dim)
        return np.vstack([eye, -eye]), np.concatenate([self.hi, -self.lo])

    def sample_uniform(self, rng, n):
        """``n`` exact uniform draws from the box, shape (n, d)."""
        return self.lo + (self.hi - self.lo) * rng.random((n, self.dim))

    def linprog_bounds(self):
        return list(zip(self.lo, self.hi))

    def linprog_inequalities(self):
        return None, None

    def __repr__(self):
        return f"Box(lo={self.lo!r}, hi={self.hi!r})"


class Polytope:
    """The bounded polytope ``{x : H x <= h}`` with non-empty interior (public).

    Boundedness is required (spec 001, erratum E6: on unbounded sets the
    exponential mechanism need not exist and no utility bound holds); it is
    checked with 2d linear programs, which also give the bounding box used for
    the public diameter bound and for uniform sampling.

    Parameters
    ----------
    H : array-like of shape (p, d)
    h : array-like of shape (p,)
    diameter : float, optional
        A public upper bound on the diameter. Default: the diameter of the
        bounding box (an upper bound).
    """

    is_box = False

    def __init__(self, H, h, diameter=None):
        H = check_real_array("H", H, 2)
        h = check_real_array("h", h, 1)
        if H.shape[0] != h.shape[0] or H.shape[0] == 0 or H.shape[1] == 0:
            raise ValidationError(
                f"H must have shape (p, d) and h shape (p,) with p, d >= 1; got {H.shape} and {h.shape}.")
        self.H, self.h = np.ascontiguousarray(H), h
        d = H.shape[1]
        lo, hi = np.empty(d), np.empty(d)
        for j in range(d):
            for sign, out in ((1.0, lo), (-1.0, hi)):
                cost = np.zeros(d)
                cost[j] = sign
                res = linprog(cost, A_ub=H, b_ub=h, bounds=[(None, None)] * d, method="highs")
                if res.status == 2:
                    raise ValidationError("The polytope H x <= h is empty; check H and h.")
                if res.status == 3:
                    raise ValidationError(
                        "The polytope H x <= h is unbounded. fastdp's piecewise-affine "
                        "mechanisms need a bounded constraint set (spec 001, erratum E6): "
                        "add bounds on every coordinate.")
                if res.status != 0:
                    raise ValidationError(f"Could not analyse the polytope: {res.message}")
                out[j] = sign * res.fun
        self._lo, self._hi = lo, hi
        self._center, radius = self._chebyshev_center()
        if radius <= 0:
            raise ValidationError(
                "The polytope H x <= h has an empty interior; pass a full-dimensional set.")
        if diameter is None:
            self._diameter = float(np.linalg.norm(hi - lo))
        else:
            if not (np.isfinite(diameter) and diameter > 0):
                raise ValidationError(f"diameter must be a finite number > 0; got {diameter!r}.")
            self._diameter = float(diameter)

    def _chebyshev_center(self):
        d = self.H.shape[1]
        norms = np.linalg.norm(self.H, axis=1)
        cost = np.zeros(d + 1)
        cost[-1] = -1.0
        res = linprog(cost, A_ub=np.hstack([self.H, norms[:, None]]), b_ub=self.h,
                      bounds=[(None, None)] * d + [(0, None)], method="highs")
        if res.status != 0:
            raise ValidationError(f"Could not compute the polytope's centre: {res.message}")
        return res.x[:d], float(res.x[-1])

    @property
    def dim(self):
        return self.H.shape[1]

    def contains(self, X):
        X = np.asarray(X, dtype=np.float64)
        return np.all(X @ self.H.T <= self.h, axis=-1)

    def project(self, X, tol=1e-12, max_iter=1000):
        """Euclidean projection by Dykstra's algorithm over the half-spaces.

        Rows of ``X`` are projected independently; iteration stops when no row
        violates a constraint by more than ``tol`` (relative to ``|h|``) and
        the iterates have settled. The result is then clipped into the set by
        a final feasibility step along the segment to the centre, so it
        always lies in P.
        """
        X = np.array(X, dtype=np.float64, copy=True)
        single = X.ndim == 1
        X = np.atleast_2d(X)
        outside = ~self.contains(X)
        if np.any(outside):
            X[outside] = self._dykstra(X[outside], tol, max_iter)
        return X[0] if single else X

    def _dykstra(self, X, tol, max_iter):
        X = _metropolis.dykstra_project(np.ascontiguousarray(X), self.H, self.h, tol, max_iter)
        return self._pull_inside(X)

    def _pull_inside(self, X):
        """Move rows left outside by rounding onto the segment towards the centre."""
        outside = ~self.contains(X)
        if not np.any(outside):
            return X
        c = self._center
        direction = X[outside] - c
        slack = self.h - self.H @ c                      # > 0: c is interior
        growth = direction @ self.H.T
        with np.errstate(divide="ignore", invalid="ignore"):
            limits = np.where(growth > 0, slack / growth, np.inf)
        t = np.minimum(1.0, limits.min(axis=1)) * (1.0 - 1e-12)
        X[outside] = c + t[:, None] * direction
        return X

    def center(self):
        """Chebyshev centre (centre of the largest inscribed ball), from public data."""
        return self._center.copy()

    def diameter(self):
        """Public upper bound on the diameter."""
        return self._diameter

    def bounding_box(self):
        return self._lo.copy(), self._hi.copy()

    def halfspaces(self):
        return self.H.copy(), self.h.copy()

    def linprog_bounds(self):
        return [(None, None)] * self.dim

    def linprog_inequalities(self):
        return self.H, self.h

    def sample_uniform(self, rng, n, max_rounds=10_000):
        """``n`` exact uniform draws, by rejection from the bounding box."""
        lo, hi = self._lo, self._hi
        out = np.empty((n, self.dim))
        filled = 0
        for _ in range(max_rounds):
            if filled == n:
                return out
            batch = max(64, 2 * (n - filled))
            cand = lo + (hi - lo) * rng.random((batch, self.dim))
            cand = cand[self.contains(cand)][: n - filled]
            out[filled:filled + cand.shape[0]] = cand
            filled += cand.shape[0]
        if filled == n:
            return out
        raise ValidationError(
            "The polytope fills a tiny part of its bounding box; uniform sampling by "
            "rejection is too slow. Use init='center' or pass starting points.")

    def __repr__(self):
        return f"Polytope(H with shape {self.H.shape})"


def check_constraints(constraints, d):
    """Check that ``constraints`` is a Box or Polytope of dimension ``d``."""
    if not isinstance(constraints, (Box, Polytope)):
        raise ValidationError(
            "constraints must be a fastdp Box(lo, hi) or Polytope(H, h); got "
            f"{type(constraints).__name__}.")
    if constraints.dim != d:
        raise ValidationError(
            f"constraints have dimension {constraints.dim} but the objective has {d} variables.")
    return constraints
