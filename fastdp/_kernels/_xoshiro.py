"""numba random numbers of the piecewise-affine samplers: xoshiro256** and a ziggurat.

Every chain of :mod:`fastdp._kernels._metropolis` owns one xoshiro256**
generator seeded through splitmix64 from its own 64-bit seed, and draws its
standard normals with the 256-layer ziggurat method, so a chain gives the same
bits whatever the number of threads and whatever other chains run. A step
consumes its numbers in fixed-size blocks (:func:`block_steps`), filled here.
"""

import math

import numpy as np
from numba import njit

_INV_2_53 = 1.0 / 9007199254740992.0


# --------------------------------------------------------------------------
# per-chain random numbers: splitmix64 seeding, xoshiro256**, ziggurat
# --------------------------------------------------------------------------
@njit(cache=True)
def _rotl(x, k):
    return (x << np.uint64(k)) | (x >> np.uint64(64 - k))


@njit(cache=True)
def _seed_state(seed, state):
    """Fill the 4-word xoshiro256** state from a 64-bit seed with splitmix64."""
    z = np.uint64(seed)
    for i in range(4):
        z = z + np.uint64(0x9E3779B97F4A7C15)
        t = z
        t = (t ^ (t >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        t = (t ^ (t >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        state[i] = t ^ (t >> np.uint64(31))


@njit(cache=True)
def _next_u64(state):
    bits, state[0], state[1], state[2], state[3] = _xoshiro_step(state[0], state[1], state[2], state[3])
    return bits


@njit(cache=True)
def _next_open_uniform(state):
    """Uniform double in the open interval (0, 1) (53 random bits, midpoint)."""
    return (np.float64(np.int64(_next_u64(state) >> np.uint64(11))) + 0.5) * _INV_2_53


def _ziggurat_tables():
    """Layer edges x[0..256] and f(x) of the 256-layer normal ziggurat.

    Marsaglia and Tsang (2000): f(x) = exp(-x^2/2) on x >= 0 is covered by a
    base strip (rectangle [0, r] x [0, f(r)] plus the tail beyond r) and 255
    rectangles, all of area v. ``x[0] = v / f(r)`` is the virtual width of the
    base strip, ``x[1] = r``, ``x[i+1] = f^{-1}(f(x[i]) + v / x[i])`` and
    ``x[256] = 0``. With this r the top layer's area matches v to 2e-13
    relative, far below anything a sample can detect.
    """
    r = 3.6541528853610088
    v = r * math.exp(-0.5 * r * r) + math.sqrt(math.pi / 2.0) * math.erfc(r / math.sqrt(2.0))
    x = np.empty(_ZIG_LAYERS + 1)
    x[0] = v / math.exp(-0.5 * r * r)
    x[1] = r
    for i in range(1, _ZIG_LAYERS - 1):
        x[i + 1] = math.sqrt(-2.0 * math.log(v / x[i] + math.exp(-0.5 * x[i] * x[i])))
    x[_ZIG_LAYERS] = 0.0
    return x, np.exp(-0.5 * x * x), r


_ZIG_LAYERS = 256
_ZIG_X, _ZIG_F, _ZIG_R = _ziggurat_tables()


@njit(cache=True, inline="always")
def _xoshiro_step(s0, s1, s2, s3):
    """One xoshiro256** output with the state held in registers."""
    result = _rotl(s1 * np.uint64(5), 7) * np.uint64(9)
    t = s1 << np.uint64(17)
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = _rotl(s3, 45)
    return result, s0, s1, s2, s3


@njit(cache=True, inline="always")
def _ziggurat_first_try(bits):
    """Layer, sign, abscissa and fast-path acceptance of one ziggurat draw.

    Bits 0-7 of the draw pick the layer, bit 8 the sign and bits 11-63 the
    abscissa, so the three are independent. The sign is applied by a
    multiplication (no unpredictable branch); unsigned table indices skip
    numba's negative-index wraparound.
    """
    layer = bits & np.uint64(0xFF)
    sign = 1.0 - 2.0 * np.float64(np.int64((bits >> np.uint64(8)) & np.uint64(1)))
    xx = np.float64(np.int64(bits >> np.uint64(11))) * _INV_2_53 * _ZIG_X[layer]
    return layer, sign, xx, xx < _ZIG_X[layer + np.uint64(1)]


@njit(cache=True)
def _ziggurat_slow(state, layer, sign, xx):
    """Finish a ziggurat draw whose first try missed the inner rectangle."""
    while True:
        if layer == 0:
            # tail beyond r (Marsaglia 1964)
            while True:
                a = -math.log(_next_open_uniform(state)) / _ZIG_R
                e = -math.log(_next_open_uniform(state))
                if 2.0 * e > a * a:
                    break
            return sign * (_ZIG_R + a)
        f_hi = _ZIG_F[layer + np.uint64(1)]
        f_lo = _ZIG_F[layer]
        if f_lo + _next_open_uniform(state) * (f_hi - f_lo) < math.exp(-0.5 * xx * xx):
            return sign * xx
        layer, sign, xx, inside = _ziggurat_first_try(_next_u64(state))
        if inside:
            return sign * xx


_BLOCK_WORDS = 1024


@njit(cache=True)
def block_steps(d):
    """Steps per random block: as many as fit in about 1024 64-bit words (>= 1)."""
    return max(1, _BLOCK_WORDS // (d + 1))


@njit(cache=True)
def _fill_words(state, words, n):
    """``n`` consecutive xoshiro256** outputs into ``words`` (state kept in registers)."""
    s0, s1, s2, s3 = state[0], state[1], state[2], state[3]
    for k in range(n):
        bits, s0, s1, s2, s3 = _xoshiro_step(s0, s1, s2, s3)
        words[k] = bits
    state[0], state[1], state[2], state[3] = s0, s1, s2, s3


@njit(cache=True)
def _ziggurat_first_tries(words, z, missed, n):
    """First ziggurat try of ``n`` words at once (branch-free: SIMD with gathers).

    Writes the candidate ``z[k]`` and ``missed[k] = 1`` where the first try fell
    outside its layer's inner rectangle (about 1.5% of draws); returns the
    number of misses.
    """
    n_missed = 0
    for k in range(n):
        layer, sign, xx, inside = _ziggurat_first_try(words[k])
        z[k] = sign * xx
        miss = np.uint8(0) if inside else np.uint8(1)
        missed[k] = miss
        n_missed += miss
    return n_missed


@njit(cache=True)
def _open_uniforms(words, u, n):
    """Uniform doubles in (0, 1) from 53 bits of each word (midpoint rule)."""
    for k in range(n):
        u[k] = (np.float64(np.int64(words[k] >> np.uint64(11))) + 0.5) * _INV_2_53


@njit(cache=True)
def _fill_block(state, n_steps, d, words, z, u, missed):
    """The random numbers of ``n_steps`` consecutive Metropolis steps.

    Stream layout of one block (this defines what a chain consumes):

    1. ``n_steps * d`` words, step-major, each the first ziggurat try of one
       normal ``z[t * d + j]``;
    2. ``n_steps`` words, the uniforms ``u[t]``;
    3. for every normal whose first try missed, in index order, the further
       words :func:`_ziggurat_slow` needs to finish it.

    Steps 1-2 run as straight loops (the conversion is vectorised); only the
    rare misses take the scalar path. ``missed`` must have room for
    ``n_steps * d`` rounded up to a multiple of 8 (its padding stays 0).
    """
    n_z = n_steps * d
    _fill_words(state, words, n_z + n_steps)
    n_missed = _ziggurat_first_tries(words, z, missed, n_z)
    _open_uniforms(words[n_z:], u, n_steps)
    if n_missed == 0:
        return
    flags = missed.view(np.uint64)
    for w in range((n_z + 7) // 8):
        if flags[w] == 0:
            continue
        for k in range(8 * w, min(8 * w + 8, n_z)):
            if missed[k]:
                layer, sign, xx, _ = _ziggurat_first_try(words[k])
                z[k] = _ziggurat_slow(state, layer, sign, xx)
                missed[k] = 0
                n_missed -= 1
        if n_missed == 0:
            return


@njit(cache=True)
def _block_buffers(d):
    n = block_steps(d)
    n_z = n * d
    words = np.empty(n_z + n, dtype=np.uint64)
    z = np.empty(n_z)
    u = np.empty(n)
    missed = np.zeros(8 * ((n_z + 7) // 8), dtype=np.uint8)
    return n, words, z, u, missed
