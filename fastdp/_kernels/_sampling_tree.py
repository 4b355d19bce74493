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
from the ratio ``P(k+1) / P(k)``, no log-gamma), O(its standard deviation).
"""

import math

import numpy as np
from numba import njit

from fastdp._kernels._philox import keyed_pair

_TINY = 2.0 ** -60        # a tail term below this fraction of the running total ends the walk
_INV_2_53 = 1.0 / 9007199254740992.0
_STACK = 160              # > 2 * depth of the tree for n < 2**62
_BINOMIAL, _HYPERGEOMETRIC = 0, 1


@njit(cache=True)
def _next_word(key, node, t, state):
    """The next 64 random bits of the stream ``(key, node, t)``; ``state`` (3 uint64: next
    call, buffered word, whether one is buffered) starts at zero for each stream."""
    if state[2]:
        state[2] = 0
        return state[1]
    x, state[1] = keyed_pair(key, node, t, state[0])
    state[0] += np.uint64(1)
    state[2] = 1
    return x


@njit(cache=True)
def _uniform(key, node, t):
    """A double uniform on [0, 1) (53 bits): the first word of the stream."""
    return np.float64(keyed_pair(key, node, t, 0)[0] >> np.uint64(11)) * _INV_2_53


@njit(cache=True)
def _below(key, node, t, state, m):
    """r uniform on ``range(m)`` (exact: the low ``2**64 mod m`` words are redrawn)."""
    m = np.uint64(m)
    threshold = (np.uint64(0) - m) % m
    while True:
        x = _next_word(key, node, t, state)
        if x >= threshold:
            return np.int64(x % m)


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


@njit(cache=True)
def _walk(kind, lo, hi, mode, p0, p1, p2, step, weights):
    """Weights relative to ``P(mode)`` of ``mode + step, mode + 2 step, ...`` into ``weights``
    until a term is a negligible fraction (2**-60) of the running total or the support
    ends; returns ``(count, sum)``."""
    total, w, k, count = 1.0, 1.0, mode, 0
    while ((k < hi) if step > 0 else (k > lo)) and count < weights.shape[0]:
        w = w * _ratio(kind, k, p0, p1, p2) if step > 0 else w / _ratio(kind, k - 1, p0, p1, p2)
        k += step
        weights[count] = w
        count += 1
        total += w
        if w < _TINY * total:
            break
    return count, total - 1.0


@njit(cache=True)
def _draw_unimodal(u, kind, lo, hi, mode, p0, p1, p2, scratch):
    """A draw of the law on ``[lo, hi]`` with the ratio :func:`_ratio`, by chop-down from ``mode``.

    ``u * total`` (total: the weights relative to ``P(mode)``, summed outward
    until negligible) is chopped down in the order mode, mode + 1, ..., then
    mode - 1, mode - 2, ...  ``scratch``: float64 (2, m) with m above any walk
    (about 9 standard deviations of the law).
    """
    n_right, right_total = _walk(kind, lo, hi, mode, p0, p1, p2, 1, scratch[0])
    n_left, left_total = _walk(kind, lo, hi, mode, p0, p1, p2, -1, scratch[1])
    target = u * (1.0 + right_total + left_total) - 1.0
    if target < 0.0:
        return mode
    for i in range(n_right):
        target -= scratch[0, i]
        if target < 0.0:
            return mode + i + 1
    for i in range(n_left):
        target -= scratch[1, i]
        if target < 0.0:
            return mode - i - 1
    return mode - n_left if n_left else mode + n_right     # rounding: the last term walked


@njit(cache=True)
def lot_size(key, t, n, q, scratch):
    """``C ~ Binomial(n, q)`` of lot t (stream node 0), 0 < q < 1."""
    mode = min(n, max(0, np.int64(math.floor((n + 1.0) * q))))
    return _draw_unimodal(_uniform(key, 0, t), _BINOMIAL, 0, n, mode, float(n), q / (1.0 - q),
                          0.0, scratch)


@njit(cache=True)
def left_count(key, node, t, c, a, b, scratch):
    """Members in the left half: ``Hypergeometric(c; a left rows, b right rows)``."""
    lo, hi = max(0, c - b), min(c, a)
    if lo == hi:
        return lo
    mode = min(hi, max(lo, np.int64(math.floor((c + 1.0) * (a + 1.0) / (a + b + 2.0)))))
    return _draw_unimodal(_uniform(key, node, t), _HYPERGEOMETRIC, lo, hi, mode, float(c),
                          float(a), float(b), scratch)


@njit(cache=True)
def leaf_members(key, node, t, size, c, out):
    """A uniformly random c-subset of ``range(size)`` (0 < c < size), sorted, into ``out[:c]``.

    Few members among many rows (``c * c <= size``): c independent uniform
    positions, drawn again from the start as soon as one repeats (all
    distinct with probability > 0.6; given that, a uniform c-subset);
    otherwise Floyd's algorithm (draw r in ``range(top + 1)`` for top = size - c,
    ..., size - 1 and take r, or top if r is taken: a uniform c-subset).
    """
    state = np.zeros(3, dtype=np.uint64)
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
    scratch = np.empty((2, np.int64(16.0 * math.sqrt(n * q) + 128.0)), dtype=np.float64)
    m = 0
    nodes = np.empty(_STACK, dtype=np.uint64)
    bounds = np.empty((_STACK, 3), dtype=np.int64)     # lo, hi, members
    nodes[0] = 1
    bounds[0, 0], bounds[0, 1], bounds[0, 2] = 0, n, lot_size(key, t, n, q, scratch)
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
            left = left_count(key, node, t, c, mid - lo, hi - mid, scratch)
            child = node << np.uint64(1)
            nodes[depth], nodes[depth + 1] = child | np.uint64(1), child     # left on top
            bounds[depth, 0], bounds[depth, 1], bounds[depth, 2] = mid, hi, c - left
            bounds[depth + 1, 0], bounds[depth + 1, 1], bounds[depth + 1, 2] = lo, mid, left
            depth += 2
    return out[:m].copy()
