"""numba kernel of the binomial splitting tree: the rows of a Poisson lot in O(q n + log n).

Poisson sampling with rate q puts every row of ``range(n)`` in lot t
independently with probability q.  The lot is drawn top-down on a fixed binary
tree over the rows (node 1 is ``[0, n)``; node v over ``[lo, hi)`` has the
children 2v over ``[lo, mid)`` and 2v + 1 over ``[mid, hi)``, ``mid = lo +
(hi - lo) // 2``), so the tree is a function of n alone:

1. the size of the lot is drawn, ``C ~ Binomial(n, q)``;
2. a node holding c members splits them between its halves by drawing the
   left count ``c_L ~ Hypergeometric(c; |L|, |R|)`` (c draws without
   replacement from |L| left and |R| right rows), the right getting
   ``c - c_L``; nodes with no member are never visited;
3. a node with at most ``leaf_count`` members (or as many members as rows)
   draws the members' positions as a uniformly random c-subset of its rows.

Why this is Poisson sampling.  Let the indicators ``I_1..I_m`` of the rows of
a range be independent Bernoulli(q) and ``c = sum I_i``.  For any subset S of
size c, ``P(members = S) = q^c (1-q)^(m-c)``, the same for every S, so given
the count c the members are a *uniformly random c-subset* of the range, and
the count is Binomial(m, q).  For a uniform c-subset of ``L + R``, the number
in L has ``P(c_L = j) = C(|L|, j) C(|R|, c - j) / C(m, c)``, the
hypergeometric law, and given ``c_L = j`` the members in L and in R are
independent uniform j- and (c - j)-subsets of L and R.  So drawing C, then
splitting recursively with independent hypergeometric draws, then uniform
subsets at the leaves, gives exactly the joint law of the independent
Bernoulli(q) indicators.  Lots t != t' use disjoint streams, so they are
independent too.

Every draw comes from the counter-based stream ``(key, node, t)``
(:func:`._philox.keyed_pair`; node 0 is the lot size), so a draw depends on
(key, t, node) only: a worker that descends only the nodes overlapping its
rows ``[start, stop)`` derives exactly the members of the whole lot in that
range, with no communication.  Expected cost: ``O(q (stop - start) + log n)``
nodes; a node's discrete draw walks its law outward from the mode (weights
from the ratio ``P(k+1) / P(k)``, ``P(mode)`` by Loader's saddle-point formula, accurate to
a few ulps), O(its standard deviation).
"""

import math

import numpy as np
from numba import njit

from fastdp._kernels._philox import keyed_pair

_TINY = 2.0 ** -60        # both tails below this fraction of P(mode): rounding, stop
_INV_2_53 = 1.0 / 9007199254740992.0
_STACK = 160              # > 2 * depth of the tree for n < 2**62
_BINOMIAL, _HYPERGEOMETRIC = 0, 1
_MASK32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)
_TWO32 = np.uint64(2**32)


@njit(cache=True)
def _next32(key, node, t, state):
    """The next 32 random bits of the stream ``(key, node, t)``.  ``state`` (int64, 6 values,
    zero at the start of each stream): the next Philox call, the 4 words of the current one,
    and how many of them are used (4: none left)."""
    if state[0] == 0 or state[5] == 4:
        x, y = keyed_pair(key, node, t, state[0])
        state[1], state[2] = np.int64(x >> _SHIFT32), np.int64(x & _MASK32)
        state[3], state[4] = np.int64(y >> _SHIFT32), np.int64(y & _MASK32)
        state[0] += 1
        state[5] = 0
    state[5] += 1
    return np.uint64(state[state[5]])


@njit(cache=True)
def _uniform(key, node, t):
    """A double uniform on [0, 1) (53 bits): the first word of the stream."""
    return np.float64(keyed_pair(key, node, t, 0)[0] >> np.uint64(11)) * _INV_2_53


@njit(cache=True)
def _mul_hi_lo(x, m):
    """The 128-bit product of two uint64 as (high, low) words."""
    x_hi, x_lo, m_hi, m_lo = x >> _SHIFT32, x & _MASK32, m >> _SHIFT32, m & _MASK32
    lo_lo = x_lo * m_lo
    mid = x_hi * m_lo + (lo_lo >> _SHIFT32)
    mid2 = x_lo * m_hi + (mid & _MASK32)
    return x_hi * m_hi + (mid >> _SHIFT32) + (mid2 >> _SHIFT32), x * m


@njit(cache=True)
def _below(key, node, t, state, m):
    """r uniform on ``range(m)``, exact (Lemire's multiply-and-reject): ``floor(x m / 2**w)``
    for a w-bit random x (w = 32 when m <= 2**32, else 64), x redrawn when the low word of
    ``x m`` is below ``2**w mod m``."""
    m = np.uint64(m)
    if m <= _TWO32:
        product = _next32(key, node, t, state) * m
        if (product & _MASK32) < m:
            threshold = (_TWO32 - m) % m
            while (product & _MASK32) < threshold:
                product = _next32(key, node, t, state) * m
        return np.int64(product >> _SHIFT32)
    x = (_next32(key, node, t, state) << _SHIFT32) | _next32(key, node, t, state)
    high, low = _mul_hi_lo(x, m)
    if low < m:
        threshold = (np.uint64(0) - m) % m
        while low < threshold:
            x = (_next32(key, node, t, state) << _SHIFT32) | _next32(key, node, t, state)
            high, low = _mul_hi_lo(x, m)
    return np.int64(high)


@njit(cache=True)
def _insert_sorted(out, filled, r):
    """Insert r into the sorted ``out[:filled]``; False (nothing changed) if r is there."""
    i = filled
    while i > 0 and out[i - 1] > r:
        i -= 1
    if i > 0 and out[i - 1] == r:
        return False
    for k in range(filled, i, -1):
        out[k] = out[k - 1]
    out[i] = r
    return True


@njit(cache=True)
def _ratio(kind, k, p0, p1, p2):
    """``P(k + 1) / P(k)``: Binomial(p0, odds p1) or Hypergeometric(p0 draws; p1 left, p2 right)."""
    if kind == _BINOMIAL:
        return (p0 - k) / (k + 1.0) * p1
    return (p1 - k) * (p0 - k) / ((k + 1.0) * (p2 - p0 + k + 1.0))


def _stirling_table(size=16):
    """``stirlerr(k) = log(k!) - log(sqrt(2 pi k) (k / e)^k)`` for k < size (k = 0: 0)."""
    k = np.arange(1, size, dtype=np.float64)
    small = np.array([math.lgamma(x + 1.0) - (x + 0.5) * math.log(x) + x
                      - 0.5 * math.log(2.0 * math.pi) for x in k])
    return np.concatenate(([0.0], small))


_STIRLERR = _stirling_table()
_LOG_2PI = math.log(2.0 * math.pi)


@njit(cache=True)
def _stirlerr(k):
    """The error of Stirling's formula for log(k!) (Loader 2000): a table below 16, else its
    asymptotic series."""
    if k < 16:
        return _STIRLERR[np.int64(k)]
    kk = k * k
    if k > 500:
        return (1.0 / 12 - (1.0 / 360) / kk) / k
    if k > 80:
        return (1.0 / 12 - (1.0 / 360 - (1.0 / 1260) / kk) / kk) / k
    if k > 35:
        return (1.0 / 12 - (1.0 / 360 - (1.0 / 1260 - (1.0 / 1680) / kk) / kk) / kk) / k
    return (1.0 / 12 - (1.0 / 360 - (1.0 / 1260 - (1.0 / 1680 - (1.0 / 1188) / kk) / kk) / kk)
            / kk) / k


@njit(cache=True)
def _bd0(x, m):
    """``x log(x / m) + m - x`` without cancellation (Loader 2000: a series near x = m)."""
    if abs(x - m) < 0.1 * (x + m):
        v = (x - m) / (x + m)
        total = (x - m) * v
        term = 2.0 * x * v
        v = v * v
        j = 1
        while True:
            term *= v
            nxt = total + term / (2 * j + 1)
            if nxt == total:
                return nxt
            total = nxt
            j += 1
    return x * math.log(x / m) + m - x


@njit(cache=True)
def _binomial_pmf(x, n, p, q):
    """``P(Binomial(n, p) = x)`` with ``q = 1 - p``, to a few ulps (Loader's saddle point)."""
    if x == 0:
        return 1.0 if n == 0 else math.exp(-_bd0(n, n * q) - n * p if p < 0.1 else n * math.log(q))
    if x == n:
        return math.exp(-_bd0(n, n * p) - n * q if q < 0.1 else n * math.log(p))
    lc = (_stirlerr(n) - _stirlerr(x) - _stirlerr(n - x) - _bd0(x, n * p)
          - _bd0(n - x, n * q))
    return math.exp(lc - 0.5 * (_LOG_2PI + math.log(x) + math.log1p(-x / n)))


@njit(cache=True)
def _pmf(kind, k, p0, p1, p2):
    """``P(k)``: Binomial(p0, p1 / (1 + p1)) (p1 the odds) or Hypergeometric(p0 draws; p1 left,
    p2 right) as a ratio of binomial pmfs at p = p0 / (p1 + p2)."""
    if kind == _BINOMIAL:
        p = p1 / (1.0 + p1)
        return _binomial_pmf(k, p0, p, 1.0 / (1.0 + p1))
    total = p1 + p2
    p, q = p0 / total, (total - p0) / total
    return (_binomial_pmf(k, p1, p, q) * _binomial_pmf(p0 - k, p2, p, q)
            / _binomial_pmf(p0, total, p, q))


@njit(cache=True)
def _draw_unimodal(u, kind, lo, hi, mode, p0, p1, p2):
    """A draw of the law on ``[lo, hi]`` with pmf :func:`_pmf` by chop-down from ``mode``.

    ``u`` minus ``P(mode)``, then alternately the next term to the right and to
    the left (each from its neighbour by :func:`_ratio`), until it falls below 0:
    about 1.6 standard deviations of the law in expectation.  If rounding
    leaves it above 0 once both tails are below 2**-60 of ``P(mode)``
    (probability about 1e-15), the mode.
    """
    top = _pmf(kind, float(mode), p0, p1, p2)
    target = u - top
    if target < 0.0:
        return mode
    w_right, w_left, right, left = top, top, mode, mode
    while True:
        if right < hi:
            w_right *= _ratio(kind, right, p0, p1, p2)
            right += 1
            target -= w_right
            if target < 0.0:
                return right
        if left > lo:
            w_left /= _ratio(kind, left - 1, p0, p1, p2)
            left -= 1
            target -= w_left
            if target < 0.0:
                return left
        if ((right >= hi or w_right < _TINY * top) and (left <= lo or w_left < _TINY * top)):
            return mode


@njit(cache=True)
def lot_size(key, t, n, q):
    """``C ~ Binomial(n, q)`` of lot t (stream node 0), 0 < q < 1."""
    mode = min(n, max(0, np.int64(math.floor((n + 1.0) * q))))
    return _draw_unimodal(_uniform(key, 0, t), _BINOMIAL, 0, n, mode, float(n), q / (1.0 - q),
                          0.0)


@njit(cache=True)
def left_count(key, node, t, c, a, b):
    """Members in the left half: ``Hypergeometric(c; a left rows, b right rows)``."""
    lo, hi = max(0, c - b), min(c, a)
    if lo == hi:
        return lo
    mode = min(hi, max(lo, np.int64(math.floor((c + 1.0) * (a + 1.0) / (a + b + 2.0)))))
    return _draw_unimodal(_uniform(key, node, t), _HYPERGEOMETRIC, lo, hi, mode, float(c),
                          float(a), float(b))


@njit(cache=True)
def leaf_members(key, node, t, size, c, out):
    """A uniformly random c-subset of ``range(size)`` (0 < c < size), sorted, into ``out[:c]``.

    Few members among many rows (``c * c <= size``): c independent uniform
    positions, drawn again from the start as soon as one repeats (all
    distinct with probability > 0.6; given that, a uniform c-subset);
    otherwise Floyd's algorithm (draw r in ``range(top + 1)`` for top = size - c,
    ..., size - 1 and take r, or top if r is taken: a uniform c-subset).
    """
    state = np.zeros(6, dtype=np.int64)
    filled = 0
    if c * c <= size:
        while filled < c:
            if _insert_sorted(out, filled, _below(key, node, t, state, size)):
                filled += 1
            else:
                filled = 0
        return
    for top in range(size - c, size):
        if not _insert_sorted(out, filled, _below(key, node, t, state, top + 1)):
            out[filled] = top           # every member so far is below top
        filled += 1


@njit(cache=True)
def _append(out, m, value):
    if m == out.shape[0]:
        grown = np.empty(2 * out.shape[0], dtype=np.int64)
        grown[:m] = out[:m]
        out = grown
    out[m] = value
    return out, m + 1


@njit(cache=True)
def tree_lot(key, t, n, q, start, stop, leaf_count):
    """Sorted rows (int64) of lot t in ``[start, stop)`` (0 < q < 1; see the module docstring)."""
    expected = q * (stop - start)
    out = np.empty(np.int64(expected + 8.0 * math.sqrt(expected) + 64.0), dtype=np.int64)
    leaf = np.empty(leaf_count, dtype=np.int64)
    m = 0
    nodes = np.empty(_STACK, dtype=np.uint64)
    bounds = np.empty((_STACK, 3), dtype=np.int64)     # lo, hi, members
    nodes[0] = 1
    bounds[0, 0], bounds[0, 1], bounds[0, 2] = 0, n, lot_size(key, t, n, q)
    depth = 1
    while depth > 0:
        depth -= 1
        node, lo, hi, c = nodes[depth], bounds[depth, 0], bounds[depth, 1], bounds[depth, 2]
        if c == 0 or hi <= start or lo >= stop:
            continue
        size = hi - lo
        if c == size:
            for row in range(max(lo, start), min(hi, stop)):
                out, m = _append(out, m, row)
        elif c <= leaf_count:
            leaf_members(key, node, t, size, c, leaf)
            for i in range(c):
                row = lo + leaf[i]
                if start <= row < stop:
                    out, m = _append(out, m, row)
        else:
            mid = lo + size // 2
            left = left_count(key, node, t, c, mid - lo, hi - mid)
            child = node << np.uint64(1)
            nodes[depth], nodes[depth + 1] = child | np.uint64(1), child     # left on top
            bounds[depth, 0], bounds[depth, 1], bounds[depth, 2] = mid, hi, c - left
            bounds[depth + 1, 0], bounds[depth + 1, 1], bounds[depth + 1, 2] = lo, mid, left
            depth += 2
    return out[:m].copy()
