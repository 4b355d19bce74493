"""numba kernels of the random-walk Metropolis sampler for spec 001's M_E.

This module holds compiled inner loops only: no privacy decisions, no I/O.
:mod:`fastdp.solvers.piecewise_affine` chooses the temperature ``beta``, the
proposal scale and the (data-independent) starting points and validates every
array; the kernels here only run the chains.

Target density on a polytope P (zero outside P)::

    pi(x) ∝ exp(-beta * f(x)),

with one of two objectives (``kind``):

* ``OBJ_MAX_AFFINE`` (0): f(x) = max_i (A[i] . x + b[i]);
* ``OBJ_SUM_PINBALL`` (1): f(x) = weight * sum_i rho_tau(b[i] - A[i] . x),
  rho_tau(r) = max(tau * r, (tau - 1) * r) (quantile regression; tau = 1/2,
  weight = 2 gives least absolute deviations).

P is a box ``lo <= x <= hi`` (``use_box``) or ``H x <= h`` (no tolerance).

One step of a chain (spec 001, section 2.3.1): draw ``d`` standard normals
``z`` and one uniform ``u`` in (0, 1) (always both, so the random stream of a
chain does not depend on the data), propose ``y = x + step_std * z``; if y is
outside P the step is a rejection (the step still counts, proposals are never
redrawn); otherwise accept when ``f(y) < f(x) - log(u) / beta`` (probability
min(1, exp(-beta (f(y) - f(x))))).

Random numbers: every chain owns a xoshiro256** generator seeded through
splitmix64 from its own 64-bit seed; normals come from the 256-layer
ziggurat method. Chains therefore
give the same bits whatever the number of threads and whatever other chains
run. :func:`chain_random_stream` returns exactly the numbers a chain consumes,
so a plain numpy implementation can replay a chain bit for bit (tests).
"""

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import get_num_threads, njit

from fastdp._kernels._xoshiro import (
    _block_buffers,
    _fill_block,
    _next_open_uniform,
    _next_u64,
    _seed_state,
    _ziggurat_first_try,
    _ziggurat_slow,
)

__all__ = [
    "OBJ_MAX_AFFINE",
    "OBJ_SUM_PINBALL",
    "metropolis_chains",
    "chain_random_stream",
    "hit_and_run_chains",
    "hit_and_run_random_stream",
    "objective_values",
    "dykstra_project",
]

OBJ_MAX_AFFINE = 0

OBJ_MAX_AFFINE = 0
OBJ_SUM_PINBALL = 1



# --------------------------------------------------------------------------
# objective and membership
# --------------------------------------------------------------------------
@njit(cache=True)
def _accumulate_scores(At, x, sign, s):
    """s[i] += sign * (A[i,0] x[0]) + ... in the order j = 0, 1, ..., d - 1.

    ``sign`` is +1 or -1 (exact). The inner loop runs over the pieces
    (contiguous in ``At``, SIMD); four coordinates are handled per pass over
    ``s`` (fewer store-to-load round trips) without changing the order in
    which each piece is summed.
    """
    d, m = At.shape
    j = 0
    while j + 4 <= d:
        x0, x1, x2, x3 = sign * x[j], sign * x[j + 1], sign * x[j + 2], sign * x[j + 3]
        for i in range(m):
            s[i] = s[i] + At[j, i] * x0 + At[j + 1, i] * x1 + At[j + 2, i] * x2 + At[j + 3, i] * x3
        j += 4
    while j < d:
        xj = sign * x[j]
        for i in range(m):
            s[i] += At[j, i] * xj
        j += 1


@njit(cache=True)
def _objective(kind, At, b, tau, weight, x, s):
    """(f(x), active piece); ``At`` is A transposed (d, m), ``s`` an (m,) scratch.

    Every piece is summed in the order b[i] + A[i,0] x[0] + A[i,1] x[1] + ...
    (pinball residuals: b[i] - A[i,0] x[0] - ...). The active piece (first
    index attaining the max; 0 for pinball objectives) lets the chain score it
    first at the next proposal.
    """
    m = b.shape[0]
    for i in range(m):
        s[i] = b[i]
    if kind == OBJ_MAX_AFFINE:
        _accumulate_scores(At, x, 1.0, s)
        best, arg = -np.inf, 0
        for i in range(m):
            if s[i] > best:
                best, arg = s[i], i
        return best, arg
    _accumulate_scores(At, x, -1.0, s)
    total = 0.0
    for i in range(m):
        r = s[i]
        if r >= 0.0:
            total += tau * r
        else:
            total += (tau - 1.0) * r
    return weight * total, 0


@njit(cache=True)
def _inside(x, H, h, lo, hi, use_box):
    if use_box:
        for j in range(x.shape[0]):
            if x[j] < lo[j] or x[j] > hi[j]:
                return False
        return True
    p, d = H.shape
    for k in range(p):
        s = 0.0
        for j in range(d):
            s += H[k, j] * x[j]
        if s > h[k]:
            return False
    return True


def _in_threads(n, body):
    """Run ``body(start, stop)`` over contiguous ranges that cover ``range(n)``, on
    up to ``numba.get_num_threads()`` threads (the calling one included).

    The kernels here release the GIL (``nogil=True``), and every row or chain
    depends on nothing but its own inputs (and seed), so the results are the
    same bits for any number of threads.  This replaces numba's
    ``parallel=True``/``prange``, whose compilation cost about 12 of the 31 CPU
    seconds of compiling these kernels (parfor passes and a gufunc per loop).
    A pool is made per call: one kept between calls would not survive a fork.
    """
    k = max(1, min(int(get_num_threads()), int(n)))
    bounds = [n * j // k for j in range(k + 1)]
    if k == 1:
        body(0, n)
        return
    with ThreadPoolExecutor(max_workers=k - 1) as pool:
        futures = [pool.submit(body, bounds[j], bounds[j + 1]) for j in range(1, k)]
        body(bounds[0], bounds[1])
        for future in futures:
            future.result()


@njit(cache=True, nogil=True)
def _objective_rows(kind, At, b, tau, weight, X, out, start, stop):
    s = np.empty(b.shape[0])
    for r in range(start, stop):
        out[r] = _objective(kind, At, b, tau, weight, X[r], s)[0]


def objective_values(kind, At, b, tau, weight, X):
    """f at every row of ``X`` (same arithmetic as inside the chains)."""
    out = np.empty(X.shape[0])
    _in_threads(X.shape[0], lambda start, stop: _objective_rows(
        kind, At, b, tau, weight, X, out, start, stop))
    return out


# --------------------------------------------------------------------------
# chains
# --------------------------------------------------------------------------
@njit(cache=True)
def _piece_score(At, b, i, y):
    """a_i . y + b_i, summed in the same order as :func:`_objective`."""
    s = b[i]
    for j in range(At.shape[0]):
        s += At[j, i] * y[j]
    return s


@njit(cache=True)
def _propose(x, step_std, z, offset, y, lo, hi, use_box):
    """y = x + step_std * z[offset:offset + d]; for a box also whether y is inside.

    The box test is accumulated without branches (one unpredictable branch
    per step instead of up to d); for a polytope it returns True and the
    caller tests ``H y <= h``.
    """
    outside = False
    for j in range(x.shape[0]):
        yj = x[j] + step_std[j] * z[offset + j]
        y[j] = yj
        if use_box:
            outside |= (yj < lo[j]) | (yj > hi[j])
    return not outside


@njit(cache=True)
def _run_chain(kind, At, b, tau, weight, beta, H, h, lo, hi, use_box,
               x, n_steps, step_std, state):
    """Advance one chain in place from ``x``; returns the number of accepted moves.

    Random numbers come in blocks of :func:`block_steps` steps
    (:func:`_fill_block`). Acceptance rule: accept y iff
    f(y) < f(x) - log(u) / beta, which has probability
    min(1, exp(-beta (f(y) - f(x)))); log(u) is only computed for proposals
    inside P whose f(y) is not decided by the bounds 1 - u <= -log(u) <=
    (1 - u) / u. For max-affine objectives the piece that was active at the
    last accepted point is scored first: if it already reaches the upper
    threshold, f(y) does too and the proposal is rejected without scoring
    the other pieces. Every decision equals the plain rule's.
    """
    d = x.shape[0]
    y = np.empty(d)
    s = np.empty(b.shape[0])
    block, words, z, u, missed = _block_buffers(d)
    fx, active = _objective(kind, At, b, tau, weight, x, s)
    n_accepted = 0
    for first in range(0, n_steps, block):
        n_block = min(block, n_steps - first)
        _fill_block(state, n_block, d, words, z, u, missed)
        for t in range(n_block):
            if not _propose(x, step_std, z, t * d, y, lo, hi, use_box):
                continue
            if not use_box and not _inside(y, H, h, lo, hi, False):
                continue
            if beta > 0.0:
                # Squeeze -log(u) between 1 - u and (1 - u) / u (with 1e-12
                # relative margins, far above rounding error) so that the
                # logarithm is only computed when f(y) falls in between; the
                # decision always equals ``fy < fx - log(u) / beta``.
                gap = (1.0 - u[t]) / beta
                low = fx + gap * (1.0 - 1e-12)
                high = fx + gap / u[t] * (1.0 + 1e-12)
            else:
                low = high = np.inf
            if kind == OBJ_MAX_AFFINE and _piece_score(At, b, active, y) >= high:
                continue
            fy, active_y = _objective(kind, At, b, tau, weight, y, s)
            if fy >= low and (fy >= high or fy >= fx - math.log(u[t]) / beta):
                continue
            for j in range(d):
                x[j] = y[j]
            fx, active = fy, active_y
            n_accepted += 1
    return n_accepted


def metropolis_chains(kind, At, b, tau, weight, beta, H, h, lo, hi, use_box,
                      x0, n_steps, step_std, seeds):
    """Run ``len(seeds)`` independent Metropolis chains in parallel.

    Parameters
    ----------
    kind : int
        ``OBJ_MAX_AFFINE`` or ``OBJ_SUM_PINBALL``.
    At : float64 array (d, m), C-contiguous
        The slopes, transposed (column i is a_i).
    b : float64 array (m,)
    tau, weight : float
        Pinball parameters (ignored for max-affine).
    beta : float
        Inverse temperature (>= 0).
    H, h : float64 arrays (p, d), (p,)
        Polytope ``H x <= h`` (ignored when ``use_box``; pass (0, d), (0,)).
    lo, hi : float64 arrays (d,)
        Box bounds (ignored unless ``use_box``).
    use_box : bool
    x0 : float64 array (n_chains, d)
        Starting points; must lie in P (the caller checks).
    n_steps : int
        Steps per chain (>= 0).
    step_std : float64 array (d,)
        Proposal standard deviation per coordinate.
    seeds : uint64 array (n_chains,)
        One seed per chain.

    Returns
    -------
    X : float64 array (n_chains, d)
        Final states.
    n_accepted : int64 array (n_chains,)
        Accepted moves per chain.
    """
    n_chains, d = x0.shape
    X = np.empty((n_chains, d))
    n_accepted = np.zeros(n_chains, dtype=np.int64)
    _in_threads(n_chains, lambda start, stop: _metropolis_chain_range(
        kind, At, b, tau, weight, beta, H, h, lo, hi, use_box, x0, n_steps, step_std, seeds,
        X, n_accepted, start, stop))
    return X, n_accepted


@njit(cache=True, nogil=True)
def _metropolis_chain_range(kind, At, b, tau, weight, beta, H, h, lo, hi, use_box,
                            x0, n_steps, step_std, seeds, X, n_accepted, start, stop):
    """Chains ``start..stop - 1`` of :func:`metropolis_chains`, into ``X`` and ``n_accepted``."""
    d = x0.shape[1]
    state = np.empty(4, dtype=np.uint64)
    x = np.empty(d)
    for c in range(start, stop):
        _seed_state(seeds[c], state)
        for j in range(d):
            x[j] = x0[c, j]
        n_accepted[c] = _run_chain(kind, At, b, tau, weight, beta, H, h, lo, hi, use_box,
                                   x, n_steps, step_std, state)
        for j in range(d):
            X[c, j] = x[j]


@njit(cache=True)
def chain_random_stream(seed, n_steps, d):
    """The normals (n_steps, d) and uniforms (n_steps,) a chain with ``seed`` consumes.

    A chain uses, at every step, ``d`` normals and one uniform, whether or
    not the proposal is inside P or accepted; they are generated in blocks of
    :func:`block_steps` steps by :func:`_fill_block`, exactly as here.
    """
    state = np.empty(4, dtype=np.uint64)
    _seed_state(np.uint64(seed), state)
    normals = np.empty((n_steps, d))
    uniforms = np.empty(n_steps)
    block, words, z, u, missed = _block_buffers(d)
    for first in range(0, n_steps, block):
        n_block = min(block, n_steps - first)
        _fill_block(state, n_block, d, words, z, u, missed)
        for t in range(n_block):
            uniforms[first + t] = u[t]
            for j in range(d):
                normals[first + t, j] = z[t * d + j]
    return normals, uniforms


# --------------------------------------------------------------------------
# hit-and-run with exact 1-D conditionals (spec 001, section 2.3.4; extension)
# --------------------------------------------------------------------------
@njit(cache=True)
def _next_normal(state):
    """One standard normal by the ziggurat (scalar path)."""
    layer, sign, xx, inside = _ziggurat_first_try(_next_u64(state))
    if inside:
        return sign * xx
    return _ziggurat_slow(state, layer, sign, xx)


@njit(cache=True)
def _hit_and_run_draws(state, u):
    """The random numbers of one hit-and-run step: ``d`` normals into ``u``, then two uniforms."""
    for j in range(u.shape[0]):
        u[j] = _next_normal(state)
    return _next_open_uniform(state), _next_open_uniform(state)


@njit(cache=True)
def _chord(x, u, H, h, lo, hi, use_box):
    """[t_lo, t_hi] such that x + t u stays in P (x in P)."""
    t_lo, t_hi = -np.inf, np.inf
    if use_box:
        for j in range(x.shape[0]):
            if u[j] > 0.0:
                t_lo = max(t_lo, (lo[j] - x[j]) / u[j])
                t_hi = min(t_hi, (hi[j] - x[j]) / u[j])
            elif u[j] < 0.0:
                t_lo = max(t_lo, (hi[j] - x[j]) / u[j])
                t_hi = min(t_hi, (lo[j] - x[j]) / u[j])
        return min(t_lo, 0.0), max(t_hi, 0.0)
    for k in range(H.shape[0]):
        hu, hx = 0.0, 0.0
        for j in range(x.shape[0]):
            hu += H[k, j] * u[j]
            hx += H[k, j] * x[j]
        slack = max(h[k] - hx, 0.0)
        if hu > 0.0:
            t_hi = min(t_hi, slack / hu)
        elif hu < 0.0:
            t_lo = max(t_lo, slack / hu)
    return t_lo, t_hi


@njit(cache=True)
def _log_segment_mass(width, kappa):
    """log of ∫_0^width exp(-kappa t / width) dt (kappa = beta (g_right - g_left))."""
    if abs(kappa) < 1e-12:
        return math.log(width) - 0.5 * kappa
    if kappa > 0.0:
        return math.log(width) + math.log(-math.expm1(-kappa)) - math.log(kappa)
    return math.log(width) - kappa + math.log(-math.expm1(kappa)) - math.log(-kappa)


@njit(cache=True)
def _envelope(c, slope, t_lo, t_hi, knots, piece):
    """Upper envelope of the lines c_i + slope_i t on [t_lo, t_hi].

    Fills ``knots[0..K]`` (t_lo = knots[0] < ... <= knots[K] = t_hi) and
    ``piece[k]``, the line active on [knots[k], knots[k+1]]; returns K. Each
    new active line has a strictly larger slope, so K <= m.
    """
    m = c.shape[0]
    p = 0
    best = -np.inf
    for i in range(m):
        v = c[i] + slope[i] * t_lo
        if v > best or (v == best and slope[i] > slope[p]):
            best, p = v, i
    knots[0] = t_lo
    k = 0
    t = t_lo
    while True:
        nxt, q = t_hi, -1
        for i in range(m):
            if slope[i] > slope[p]:
                ti = (c[p] - c[i]) / (slope[i] - slope[p])
                if ti < t:
                    ti = t
                if ti < nxt or (ti == nxt and q >= 0 and slope[i] > slope[q]):
                    nxt, q = ti, i
        piece[k] = p
        knots[k + 1] = nxt
        k += 1
        if q < 0 or nxt >= t_hi:
            knots[k] = t_hi
            return k
        p, t = q, nxt


@njit(cache=True)
def _sample_chord(beta, c, slope, t_lo, t_hi, u1, u2, knots, piece, log_mass):
    """Exact draw of t with density ∝ exp(-beta max_i (c_i + slope_i t)) on [t_lo, t_hi]."""
    n_seg = _envelope(c, slope, t_lo, t_hi, knots, piece)
    top = -np.inf
    for k in range(n_seg):
        width = knots[k + 1] - knots[k]
        if width <= 0.0:
            log_mass[k] = -np.inf
            continue
        i = piece[k]
        g_left = c[i] + slope[i] * knots[k]
        log_mass[k] = -beta * g_left + _log_segment_mass(width, beta * slope[i] * width)
        top = max(top, log_mass[k])
    total = 0.0
    for k in range(n_seg):
        log_mass[k] = math.exp(log_mass[k] - top)
        total += log_mass[k]
    target = u1 * total
    acc = 0.0
    k = 0
    for k in range(n_seg):
        acc += log_mass[k]
        if acc > target and log_mass[k] > 0.0:
            break
    width = knots[k + 1] - knots[k]
    kappa = beta * slope[piece[k]] * width
    if abs(kappa) < 1e-12:
        offset = u2 * width
    else:
        offset = -math.log1p(u2 * math.expm1(-kappa)) * width / kappa
    return min(max(knots[k] + offset, knots[k]), knots[k + 1])


def hit_and_run_chains(A, b, beta, H, h, lo, hi, use_box, x0, n_steps, seeds):
    """Hit-and-run chains for pi(x) ∝ exp(-beta max_i (A[i] . x + b[i])) on P.

    Every step draws a uniform direction u (``d`` ziggurat normals,
    normalised), finds the chord {x + t u} ∩ P and draws t exactly from the
    1-D conditional ∝ exp(-beta f(x + t u)) by inverting the piecewise
    exponential CDF on the upper envelope of the lines
    (A[i] . x + b[i]) + (A[i] . u) t (two uniforms per step). The chain is
    reversible with respect to pi; every chain has its own xoshiro256**
    stream (:func:`hit_and_run_random_stream` replays it).

    Parameters
    ----------
    A : float64 array (m, d), C-contiguous; b : (m,)
    beta : float >= 0
    H, h, lo, hi, use_box : as :func:`metropolis_chains`
    x0 : float64 array (n_chains, d), points of P
    n_steps : int
    seeds : uint64 array (n_chains,)

    Returns
    -------
    X : float64 array (n_chains, d)
    """
    n_chains, d = x0.shape
    X = np.empty((n_chains, d))
    _in_threads(n_chains, lambda start, stop: _hit_and_run_chain_range(
        A, b, beta, H, h, lo, hi, use_box, x0, n_steps, seeds, X, start, stop))
    return X


@njit(cache=True, nogil=True)
def _hit_and_run_chain_range(A, b, beta, H, h, lo, hi, use_box, x0, n_steps, seeds, X,
                             start, stop):
    """Chains ``start..stop - 1`` of :func:`hit_and_run_chains`, into ``X``."""
    d = x0.shape[1]
    m = b.shape[0]
    for ch in range(start, stop):
        state = np.empty(4, dtype=np.uint64)
        _seed_state(seeds[ch], state)
        x = x0[ch].copy()
        u = np.empty(d)
        c = np.empty(m)
        slope = np.empty(m)
        knots = np.empty(m + 1)
        piece = np.empty(m, dtype=np.int64)
        log_mass = np.empty(m)
        for _ in range(n_steps):
            u1, u2 = _hit_and_run_draws(state, u)
            norm = 0.0
            for j in range(d):
                norm += u[j] * u[j]
            norm = math.sqrt(norm)
            for j in range(d):
                u[j] /= norm
            t_lo, t_hi = _chord(x, u, H, h, lo, hi, use_box)
            if not (t_hi > t_lo):
                continue
            for i in range(m):
                ci, si = b[i], 0.0
                for j in range(d):
                    ci += A[i, j] * x[j]
                    si += A[i, j] * u[j]
                c[i], slope[i] = ci, si
            t = _sample_chord(beta, c, slope, t_lo, t_hi, u1, u2, knots, piece, log_mass)
            for j in range(d):
                y = x[j] + t * u[j]
                if use_box:
                    y = min(max(y, lo[j]), hi[j])
                x[j] = y
        X[ch] = x


@njit(cache=True)
def hit_and_run_random_stream(seed, n_steps, d):
    """The normals (n_steps, d) and uniform pairs (n_steps, 2) a hit-and-run chain consumes."""
    state = np.empty(4, dtype=np.uint64)
    _seed_state(np.uint64(seed), state)
    normals = np.empty((n_steps, d))
    uniforms = np.empty((n_steps, 2))
    for t in range(n_steps):
        uniforms[t, 0], uniforms[t, 1] = _hit_and_run_draws(state, normals[t])
    return normals, uniforms


# --------------------------------------------------------------------------
# projection onto a polytope (used by the projected subgradient method)
# --------------------------------------------------------------------------
def dykstra_project(X, H, h, tol, max_iter):
    """Euclidean projection of every row of X onto {x : H x <= h} (Dykstra).

    Cycles over the half-spaces with Dykstra's correction terms until a full
    cycle moves the point by at most ``tol * (1 + max|x|)`` or ``max_iter``
    cycles ran. Rows are independent (parallel). The result can violate a
    constraint by a rounding-level amount; the caller makes it feasible.
    """
    out = np.empty(X.shape)
    _in_threads(X.shape[0], lambda start, stop: _dykstra_rows(
        X, H, h, tol, max_iter, out, start, stop))
    return out


@njit(cache=True, nogil=True)
def _dykstra_rows(X, H, h, tol, max_iter, out, start, stop):
    """Rows ``start..stop - 1`` of :func:`dykstra_project`, into ``out``."""
    d = X.shape[1]
    p = H.shape[0]
    sq = np.empty(p)
    for k in range(p):
        s = 0.0
        for j in range(d):
            s += H[k, j] * H[k, j]
        sq[k] = s
    for r in range(start, stop):
        x = X[r].copy()
        inc = np.zeros((p, d))
        yv = np.empty(d)
        for _ in range(max_iter):
            moved = 0.0
            scale = 0.0
            for k in range(p):
                dot = 0.0
                for j in range(d):
                    yv[j] = x[j] + inc[k, j]
                    dot += H[k, j] * yv[j]
                excess = dot - h[k]
                if excess < 0.0:
                    excess = 0.0
                for j in range(d):
                    new = yv[j] - excess / sq[k] * H[k, j]
                    inc[k, j] = yv[j] - new
                    delta = abs(new - x[j])
                    if delta > moved:
                        moved = delta
                    x[j] = new
                    if abs(new) > scale:
                        scale = abs(new)
            if moved <= tol * (1.0 + scale):
                break
        out[r] = x
