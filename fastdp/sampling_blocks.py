"""Poisson sampling keyed by row blocks: the same lots on one machine and on k machines.

:class:`BlockPoissonSampler` draws exactly the lots of Poisson sampling (every
row joins lot t independently with probability q) but from a *counter-based*
stream: the rows are cut into fixed blocks of ``block_size`` rows (the last
one may be shorter), and the members of block b in lot t are drawn from a
Philox generator whose key comes from the seed and whose counter is
``(t, b)``.  Whoever holds the rows of block b (the single-machine solver, or
one of k data-parallel workers) computes the same members without talking to
anyone, so the lots do not depend on how the rows are split into shards, as
long as shards are whole blocks.

Inside a block the members are found by geometric skips: the gaps between
consecutive members of a Bernoulli(q) process are independent Geometric(q)
variables, so a block costs about ``q * block_size`` draws (plus a constant),
and a lot of n rows about ``q n + n / block_size`` draws, not n.

Stream layout (what makes it reproducible)
------------------------------------------
Block b of lot t (t = 1, 2, ...) uses ``numpy.random.Philox(key=k,
counter=[0, 0, t, b])`` with ``k`` two 64-bit words drawn from the sampling
generator of the run.  Gaps are drawn ``chunk = ceil(q B + 6 sqrt(q B) + 8)``
at a time (``B = block_size``) until the running position passes the end of
a full block; members are the positions below the block's length.  So the
members of a block depend on (key, q, B, t, b) only, never on n, the shard
layout or the number of workers.

Privacy: the event is exactly that of :class:`fastdp.sampling.PoissonSampler`
with the same rate (add/remove adjacency): memberships are independent
Bernoulli(q) over rows and lots; which generator produced them does not
enter the analysis.
"""

import math
import numbers

import numpy as np

from fastdp.exceptions import ValidationError
from fastdp.sampling import PoissonSampler

__all__ = ["BlockPoissonSampler", "DEFAULT_BLOCK_SIZE", "sampling_key", "block_members",
           "block_ranges", "keyed_streams"]

#: Rows per sampling block (shards of the data-parallel engine are whole blocks).
DEFAULT_BLOCK_SIZE = 4096


def sampling_key(rng):
    """A 128-bit Philox key (two uint64 words) drawn from a ``numpy.random.Generator``."""
    return rng.integers(0, 2**64, size=2, dtype=np.uint64, endpoint=False)


class _KeyedStreams:
    """Generators ``Philox(key, counter=[0, 0, t, b])``, re-positioned without re-construction.

    Setting the state of one Philox (counter, empty buffer) is ~10x cheaper
    than building a new generator and gives the same stream.
    """

    def __init__(self, key):
        self.bit_generator = np.random.Philox(key=np.asarray(key, dtype=np.uint64))
        self.generator = np.random.Generator(self.bit_generator)
        self._state = self.bit_generator.state

    def at(self, t, b):
        """The generator positioned at the start of stream ``(t, b)``."""
        state = self._state
        state["state"]["counter"][:] = (0, 0, t, b)
        state["buffer_pos"], state["has_uint32"], state["uinteger"] = 4, 0, 0
        self.bit_generator.state = state
        return self.generator


def block_members(streams, rate, block_size, t, b, block_len):
    """Members of block ``b`` in lot ``t``: sorted positions in ``[0, block_len)`` (int64).

    Parameters
    ----------
    streams : _KeyedStreams
        The run's streams (of its key, :func:`sampling_key`).
    rate : float
        q in (0, 1].
    block_size : int
        B, the rows of a full block.
    t, b : int
        Lot (>= 1) and block (>= 0).
    block_len : int
        Rows of this block (``B``, or fewer for the last block).
    """
    if rate >= 1.0:
        return np.arange(block_len, dtype=np.int64)
    expected = rate * block_size
    chunk = int(math.ceil(expected + 6.0 * math.sqrt(expected) + 8.0))
    gen = streams.at(t, b)
    parts = []
    last = -1
    while last < block_size - 1:
        pos = last + np.cumsum(gen.geometric(rate, size=chunk))
        parts.append(pos)
        last = int(pos[-1])
    pos = np.concatenate(parts) if len(parts) > 1 else parts[0]
    return pos[: np.searchsorted(pos, block_len)].astype(np.int64, copy=False)


def block_ranges(n, block_size, n_shards):
    """Split ``range(n)`` into ``n_shards`` contiguous row ranges of whole blocks.

    Returns a list of ``(start, stop)``; the blocks are spread as evenly as
    possible (the last shard also holds the short last block).  Raises
    :class:`ValidationError` if there are fewer blocks than shards.
    """
    n_blocks = -(-int(n) // int(block_size))
    if not 1 <= int(n_shards) <= n_blocks:
        raise ValidationError(
            f"cannot cut {n} rows ({n_blocks} blocks of {block_size}) into {n_shards} shards of "
            "whole blocks; use fewer shards or a smaller block_size.")
    edges = [(n_blocks * s) // n_shards for s in range(n_shards + 1)]
    return [(edges[s] * block_size, min(n, edges[s + 1] * block_size)) for s in range(n_shards)]


class BlockPoissonSampler(PoissonSampler):
    """Poisson sampling with membership drawn per row block from a keyed counter stream.

    Same lots distribution and same privacy event as
    :class:`~fastdp.sampling.PoissonSampler` (add/remove adjacency); the lots
    are a function of (key, t, block) only, so a data-parallel run over
    shards of whole blocks draws the same lots as one machine.

    Parameters
    ----------
    sample_rate : float, optional
        q in (0, 1].
    batch_size : int, optional
        Expected lot size L instead of q (``q = L / n``).  Exactly one of the two.
    block_size : int, default=4096
        Rows per block.
    """

    name = "block_poisson"
    keyed = True  # lots come from (key, t, block), not from a sequential generator

    def __init__(self, sample_rate=None, *, batch_size=None, block_size=DEFAULT_BLOCK_SIZE):
        super().__init__(sample_rate, batch_size=batch_size)
        if (isinstance(block_size, (bool, np.bool_)) or not isinstance(block_size, numbers.Integral)
                or block_size < 1):
            raise ValidationError(f"block_size must be an int >= 1; got {block_size!r}.")
        self.block_size = int(block_size)

    def _param_repr(self):
        return f"{super()._param_repr()}, block_size={self.block_size!r}"

    def lot(self, key, n, t, start=0, stop=None):
        """Rows of lot ``t`` inside ``[start, stop)`` (whole blocks), sorted, as int64.

        ``key`` is the run's sampling key (or a :func:`keyed_streams` of it,
        to reuse one generator across calls).

        ``start`` and ``stop`` (default n) must be multiples of ``block_size`` or n.
        Row numbers are global (in ``range(n)``).
        """
        stop = n if stop is None else stop
        B = self.block_size
        if start % B or (stop % B and stop != n) or not 0 <= start <= stop <= n:
            raise ValidationError(f"row range [{start}, {stop}) is not a range of whole blocks "
                                  f"of {B} rows within {n} rows.")
        q = self.sample_rate(n)
        streams = key if isinstance(key, _KeyedStreams) else _KeyedStreams(key)
        parts = [b * B + block_members(streams, q, B, t, b, min(B, n - b * B))
                 for b in range(start // B, -(-stop // B))]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def _draw(self, n, n_steps, rng, state):
        if "key" not in state:
            state["key"], state["t"] = _KeyedStreams(sampling_key(rng)), 0
        lots = [self.lot(state["key"], n, state["t"] + s + 1) for s in range(n_steps)]
        state["t"] += n_steps
        ptr = np.zeros(n_steps + 1, dtype=np.int64)
        np.cumsum([len(x) for x in lots], out=ptr[1:])
        return ptr, np.concatenate(lots).astype(np.int64, copy=False)


def keyed_streams(key):
    """Reusable generator state for :meth:`BlockPoissonSampler.lot` calls with one key."""
    return _KeyedStreams(key)

