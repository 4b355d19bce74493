"""Samplers behind spec 001's mechanisms (no privacy decisions here).

* :func:`vector_laplace`: density ∝ exp(-rate ||w||_2) on R^n (spec P1).
* :func:`metropolis_sample`: random-walk Metropolis chains for
  pi(x) ∝ exp(-beta f(x)) on P, run by the numba kernel.
* :func:`hit_and_run_sample`: hit-and-run chains with exact 1-D
  conditionals (spec 2.3.4, an extension; explicit pieces only).
* :func:`rejection_sample`: exact sampler of pi by rejection from Uniform(P)
  (spec 2.3.2).
* :func:`independence_sample`: Metropolis chains with Uniform(P) proposals;
  fixed running time and a public bound on their distance to pi
  (:func:`independence_tv_bound`), hence a quantified delta.
* :func:`exact_1d_sample`: exact inverse-CDF sampler of pi for d = 1
  (spec 2.3.3).
* :func:`importance_estimates`: E_pi[f] and C(0, eps) of Theorem 21 from
  uniform draws (reference values; they read the private data).

Every function draws only from the ``numpy.random.Generator`` it is given.
"""

import math

import numpy as np

from fastdp._kernels import _metropolis
from fastdp.exceptions import ValidationError

__all__ = [
    "vector_laplace",
    "metropolis_sample",
    "rejection_sample",
    "rejection_upper_bound",
    "independence_sample",
    "hit_and_run_sample",
    "independence_tv_bound",
    "independence_steps",
    "exact_1d_sample",
    "exact_1d_pieces",
    "importance_estimates",
    "objective_values",
]


def vector_laplace(rng, n, rate, size):
    """``size`` draws from p(w) ∝ exp(-rate ||w||_2) on R^n, shape (size, n).

    ||w|| ~ Gamma(shape n, rate), direction uniform on the sphere.
    """
    radius = rng.gamma(shape=n, scale=1.0 / rate, size=size)
    direction = rng.standard_normal((size, n))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    return radius[:, None] * direction


def objective_values(problem, X):
    """f at the rows of X with the kernel's arithmetic (reads the private data)."""
    At, b, tau, weight = problem.kernel_arrays()
    X = np.ascontiguousarray(np.atleast_2d(X), dtype=np.float64)
    return _metropolis.objective_values(problem.kernel_kind, At, b, tau, weight, X)


def _chain_start(problem, beta, x0, n_steps, rng):
    """Checked starting points, step count and per-chain 64-bit seeds of a chain batch."""
    d = problem.n_features
    x0 = np.ascontiguousarray(np.atleast_2d(x0), dtype=np.float64)
    if x0.shape[1] != d:
        raise ValidationError(f"starting points must have {d} columns; got shape {x0.shape}.")
    if not np.all(np.isfinite(x0)) or not np.all(problem.constraints.contains(x0)):
        raise ValidationError(
            "every chain must start inside the constraint set P; got a starting point "
            "outside P. Use init='center' or init='uniform' (both data-independent).")
    n_steps = int(n_steps)
    if n_steps < 0:
        raise ValidationError(f"n_steps must be >= 0; got {n_steps}.")
    if not (math.isfinite(beta) and beta >= 0):
        raise ValidationError(f"beta must be finite and >= 0; got {beta!r}.")
    seeds = rng.integers(0, 2**64, size=x0.shape[0], dtype=np.uint64)
    return x0, n_steps, seeds


def metropolis_sample(problem, beta, x0, n_steps, step_std, rng):
    """Final states of ``len(x0)`` independent Metropolis chains.

    Parameters
    ----------
    problem : PiecewiseAffineProblem or SumOfPinballProblem
    beta : float
        Inverse temperature.
    x0 : ndarray (n_chains, d)
        Starting points in P (checked).
    n_steps : int
    step_std : float or ndarray (d,)
        Proposal standard deviation.
    rng : numpy.random.Generator
        Source of the per-chain 64-bit seeds.

    Returns
    -------
    X : ndarray (n_chains, d)
    acceptance : ndarray (n_chains,)
        Fraction of accepted moves per chain.
    """
    x0, n_steps, seeds = _chain_start(problem, beta, x0, n_steps, rng)
    step = np.broadcast_to(np.asarray(step_std, dtype=np.float64), (problem.n_features,)).copy()
    if not np.all(np.isfinite(step)) or np.any(step < 0):
        raise ValidationError("the proposal standard deviation must be finite and >= 0.")
    At, b, tau, weight = problem.kernel_arrays()
    H, h, lo, hi, use_box = _kernel_constraints(problem)
    X, accepted = _metropolis.metropolis_chains(
        problem.kernel_kind, At, b, float(tau), float(weight), float(beta), H, h, lo, hi,
        use_box, x0, n_steps, step, seeds)
    acceptance = accepted / n_steps if n_steps else np.zeros(x0.shape[0])
    return X, acceptance


def _kernel_constraints(problem):
    cons = problem.constraints
    d = problem.n_features
    if cons.is_box:
        return np.zeros((0, d)), np.zeros(0), cons.lo, cons.hi, True
    H, h = cons.halfspaces()
    return np.ascontiguousarray(H), np.ascontiguousarray(h), np.zeros(d), np.zeros(d), False


def hit_and_run_sample(problem, beta, x0, n_steps, rng):
    """Final states of hit-and-run chains for pi ∝ exp(-beta f) on P (spec 2.3.4).

    Each step picks a uniform direction through the current point and draws
    the next point exactly from pi restricted to that chord (piecewise
    exponential on the upper envelope of the pieces). Reversible with respect
    to pi and much better mixing than the random walk on elongated sets;
    still a finite chain (approximate DP). Needs explicit pieces
    (:class:`PiecewiseAffineProblem`).
    """
    if not hasattr(problem, "A"):
        raise ValidationError(
            "sampler='hit_and_run' needs explicit pieces (PiecewiseAffineProblem); "
            "use sampler='metropolis' for this problem.")
    x0, n_steps, seeds = _chain_start(problem, beta, x0, n_steps, rng)
    H, h, lo, hi, use_box = _kernel_constraints(problem)
    X = _metropolis.hit_and_run_chains(np.ascontiguousarray(problem.A), problem.b, float(beta),
                                       H, h, lo, hi, use_box, x0, n_steps, seeds)
    if not use_box:
        # a chord end can overshoot a face by a rounding error: pull such points back
        outside = ~problem.constraints.contains(X)
        if np.any(outside):
            X[outside] = problem.constraints.project(X[outside])
    return X


def rejection_upper_bound(problem, beta):
    """Public bound on the expected proposals per exact rejection sample.

    Acceptance has probability exp(-beta (f(x) - f_opt)) >= exp(-beta G R) for
    uniform x (f is G-Lipschitz, P has diameter at most R); the bound uses only
    public quantities. (For a polytope each uniform point itself costs
    1 / (volume fraction of its bounding box) box draws, also public.)
    """
    return math.exp(min(700.0, beta * problem.lipschitz * problem.diameter()))


def rejection_sample(problem, beta, n, rng, batch=None):
    """``n`` exact draws of pi ∝ exp(-beta f) on P, by rejection from Uniform(P).

    A uniform proposal x is accepted with probability exp(-beta (f(x) - f_opt)),
    with f_opt from the LP. The expected number of proposals per draw is
    C(0, eps) of Theorem 21. The output law is exactly pi; the running time
    depends on the private data (it reveals roughly C), so use it where timing
    is not observable.

    Returns
    -------
    X : ndarray (n, d)
    n_proposals : int
    """
    f_opt = problem.solve()[1]
    out = np.empty((n, problem.n_features))
    filled, proposals = 0, 0
    batch = batch or max(256, 2 * n)
    while filled < n:
        cand = problem.constraints.sample_uniform(rng, batch)
        u = rng.random(batch)
        proposals += batch
        keep = cand[np.log(u) < -beta * (objective_values(problem, cand) - f_opt)]
        take = min(n - filled, keep.shape[0])
        out[filled:filled + take] = keep[:take]
        filled += take
    return out, proposals


def independence_tv_bound(weight_bound, n_steps):
    """Public bound on the total variation between T independence-Metropolis steps and pi.

    With Uniform(P) proposals q, the importance weight w = pi / q is at most
    ``weight_bound`` = W (for the exponential mechanism, C(0, eps) <=
    exp(beta G R) from public numbers, see :func:`rejection_upper_bound`). The
    transition kernel then satisfies K(x, .) >= pi(.) / W from every x (a
    Doeblin minorisation: the move to y is accepted with probability
    min(1, w(y)/w(x)) >= w(y)/W), so after T steps from any start

        TV(law of X_T, pi) <= (1 - 1/W)^T.
    """
    if weight_bound <= 1.0:
        return 0.0 if n_steps > 0 else 1.0
    return math.exp(n_steps * math.log1p(-1.0 / weight_bound))


def independence_steps(weight_bound, tv_target):
    """Smallest T with ``independence_tv_bound(weight_bound, T) <= tv_target``."""
    if weight_bound <= 1.0:
        return 1
    return max(1, math.ceil(math.log(tv_target) / math.log1p(-1.0 / weight_bound)))


def independence_sample(problem, beta, x0, n_steps, rng):
    """Final states of independence-Metropolis chains for pi ∝ exp(-beta f) on P.

    Every step proposes y ~ Uniform(P) (independent of the current state) and
    accepts it with probability min(1, exp(-beta (f(y) - f(x)))). The chains
    run exactly ``n_steps`` steps (the running time does not depend on the
    data, unlike :func:`rejection_sample`), start at the public points ``x0``
    and, by :func:`independence_tv_bound`, end within total variation
    (1 - 1/W)^T of pi whatever the data.

    Returns
    -------
    X : ndarray (n_chains, d)
    acceptance : ndarray (n_chains,)
    """
    X = np.array(x0, dtype=np.float64, copy=True)
    fX = objective_values(problem, X)
    accepted = np.zeros(X.shape[0], dtype=np.int64)
    for _ in range(int(n_steps)):
        Y = problem.constraints.sample_uniform(rng, X.shape[0])
        u = rng.random(X.shape[0])
        fY = objective_values(problem, Y)
        take = np.log(u) < -beta * (fY - fX)
        X[take] = Y[take]
        fX[take] = fY[take]
        accepted += take
    return X, accepted / max(1, int(n_steps))


def exact_1d_pieces(problem, beta):
    """Breakpoints t (K+1,), values f(t) and log interval masses (K,) for d = 1.

    f is convex piecewise linear on [lo, hi]; the candidate kinks are the
    pairwise intersections of the pieces (max-affine) or the zeros of the
    residuals (pinball). On each interval f is linear, so
    log M_k = log ∫ exp(-beta f) is closed form (computed stably).
    """
    lo, hi = problem.constraints.bounding_box()
    lo, hi = float(lo[0]), float(hi[0])
    if hasattr(problem, "A"):
        a, b = problem.A[:, 0], problem.b
        da = a[:, None] - a[None, :]
        db = b[None, :] - b[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            kinks = (db / da)[np.abs(da) > 0]
    else:
        z, y = problem.Z[:, 0], problem.y
        kinks = y[z != 0] / z[z != 0]
    kinks = kinks[(kinks > lo) & (kinks < hi)]
    t = np.unique(np.concatenate([[lo, hi], kinks]))
    f = problem.value(t[:, None])
    width = np.diff(t)
    f0, f1 = f[:-1], f[1:]
    low = np.minimum(f0, f1)
    k = beta * np.abs(f1 - f0)
    # log of (1 - exp(-k)) / k, -> 0 as k -> 0
    with np.errstate(divide="ignore", invalid="ignore"):
        shape = np.where(k > 1e-12, np.log(-np.expm1(-k)) - np.log(np.where(k > 0, k, 1.0)),
                         -0.5 * k)
    log_mass = np.log(width) - beta * low + shape
    return t, f, log_mass


def exact_1d_sample(problem, beta, n, rng):
    """``n`` exact draws of pi ∝ exp(-beta f) on an interval (d = 1), shape (n, 1)."""
    if problem.n_features != 1:
        raise ValidationError("the exact 1-D sampler needs d = 1; use sampler='rejection' or 'metropolis'.")
    t, f, log_mass = exact_1d_pieces(problem, beta)
    p = np.exp(log_mass - log_mass.max())
    cdf = np.cumsum(p)
    cdf /= cdf[-1]
    k = np.minimum(np.searchsorted(cdf, rng.random(n), side="right"), len(p) - 1)
    u = rng.random(n)
    t0, width = t[k], t[k + 1] - t[k]
    rate = beta * (f[k + 1] - f[k]) / width   # density ∝ exp(-rate (x - t0)) on the interval
    kk = rate * width
    with np.errstate(divide="ignore", invalid="ignore"):
        offset = np.where(np.abs(kk) > 1e-12, -np.log1p(u * np.expm1(-kk)) / np.where(rate != 0, rate, 1.0),
                          u * width)
    return np.clip(t0 + offset, t[k], t[k + 1])[:, None]


def importance_estimates(problem, beta, n, rng):
    """E_pi[f] and C(0, eps) from ``n`` uniform draws (reads the private data).

    With w(x) = exp(-beta (f(x) - f_opt)) on uniform x: C(0, eps) = 1 / E[w]
    and E_pi[f] = E[w f] / E[w] (self-normalised).

    Returns
    -------
    dict with ``mean_f``, ``mean_f_se`` (delta method), ``C0``, ``C0_se``.
    """
    f_opt = problem.solve()[1]
    X = problem.constraints.sample_uniform(rng, n)
    f = objective_values(problem, X)
    w = np.exp(-beta * (f - f_opt))
    mw = w.mean()
    mean_f = float((w * f).mean() / mw)
    resid = w * (f - mean_f)
    return {
        "mean_f": mean_f,
        "mean_f_se": float(resid.std(ddof=1) / (mw * math.sqrt(n))),
        "C0": float(1.0 / mw),
        "C0_se": float(w.std(ddof=1) / (mw * mw * math.sqrt(n))),
    }
