"""Philox4x32-10 (Salmon et al., SC'11) in numba: a counter-based random function.

``philox4x32(c0, c1, c2, c3, k0, k1)`` maps a 128-bit counter and a 64-bit key
(32-bit words held in uint64 values) to 128 random bits; each call is
independent of every other, so a draw is addressed by its counter instead of
by its position in a sequential stream.  :mod:`._sampling_tree` addresses its
draws by (node of the tree, lot, draw number).  Checked against the
Random123 known-answer vectors (``tests/test_sampling_tree.py``).
"""

import numpy as np
from numba import njit

_MASK32 = np.uint64(0xFFFFFFFF)
_M0 = np.uint64(0xD2511F53)
_M1 = np.uint64(0xCD9E8D57)
_W0 = np.uint64(0x9E3779B9)
_W1 = np.uint64(0xBB67AE85)
_SHIFT32 = np.uint64(32)


@njit(cache=True)
def philox4x32(c0, c1, c2, c3, k0, k1):
    """The four 32-bit output words of Philox4x32 with 10 rounds (as uint64 values)."""
    c0, c1, c2, c3 = np.uint64(c0), np.uint64(c1), np.uint64(c2), np.uint64(c3)
    k0, k1 = np.uint64(k0), np.uint64(k1)
    for r in range(10):
        if r > 0:
            k0 = (k0 + _W0) & _MASK32
            k1 = (k1 + _W1) & _MASK32
        p0 = _M0 * c0
        p1 = _M1 * c2
        c0, c1, c2, c3 = ((p1 >> _SHIFT32) ^ c1 ^ k0, p1 & _MASK32,
                          (p0 >> _SHIFT32) ^ c3 ^ k1, p0 & _MASK32)
    return c0, c1, c2, c3


@njit(cache=True)
def keyed_pair(key, node, t, i):
    """Call number ``i`` of the stream ``(key, node, t)``: two 64-bit random words.

    The counter is ``(node low word, node high word, t, i)`` (t and i below
    2**32) and the key ``key`` (a 64-bit int).
    """
    key, node = np.uint64(key), np.uint64(node)
    x0, x1, x2, x3 = philox4x32(node & _MASK32, node >> _SHIFT32, np.uint64(t) & _MASK32,
                                np.uint64(i) & _MASK32, key & _MASK32, key >> _SHIFT32)
    return (x0 << _SHIFT32) | x1, (x2 << _SHIFT32) | x3
