"""Keyed Poisson sampling: the same lots on one machine and on k machines, in O(q n) per lot.

:class:`BlockPoissonSampler` draws exactly the lots of Poisson sampling (every
row joins lot t independently with probability q) from *counter-based*
draws: the members of lot t are found top-down on a binary splitting tree
over the rows (:mod:`fastdp._kernels._sampling_tree`, where the derivation
is): the lot size ``C ~ Binomial(n, q)``, then at every node the split of its
members between its halves ``~ Hypergeometric``, down to nodes of at most 32
members whose positions are a uniform subset of their rows.  Every draw is a
Philox4x32-10 function of (the run's sampling key, t, the node), so whoever
holds rows ``[start, stop)`` (the single-machine solver, or one of k
data-parallel workers) descends only the nodes covering them and finds the
same members without talking to anyone: the lots do not depend on how the
rows are split into shards.

Cost of a lot restricted to ``[start, stop)``: ``O(q (stop - start) + log n)``
(about 1.3 ms of CPU for ``n = 10**8, q = 10**-4`` on one shared core,
``benchmarks/bench_keyed_sampling.py``), whatever the shard layout; rows
with no member are never touched.

``block_size`` no longer shapes the lots: it is the unit the data-parallel
engine cuts shards in (:func:`block_ranges`, :func:`default_shard_count`).

Stream layout (what makes it reproducible)
------------------------------------------
The Philox key is the first word of the run's two-word sampling key
(:func:`sampling_key`, drawn from the sampling generator of the run); lot t
(1 <= t < 2**32) of node v (v = 0: the lot size; the tree's root is 1, the
children of v are 2v and 2v + 1; the tree is a function of n) reads the
counters ``(v mod 2**32, v // 2**32, t, i)``, i = 0, 1, ...  So the members
depend on (key, q, n, t) only, never on the shard layout or the number of
workers.

Privacy: the event is exactly that of :class:`fastdp.sampling.PoissonSampler`
with the same rate (add/remove adjacency): memberships are independent
Bernoulli(q) over rows and lots; which generator produced them does not
enter the analysis.
"""

import numbers

import numpy as np

from fastdp.exceptions import ValidationError
from fastdp.sampling import PoissonSampler

__all__ = ["BlockPoissonSampler", "DEFAULT_BLOCK_SIZE", "DEFAULT_SHARDS", "sampling_key",
           "block_ranges", "default_shard_count", "keyed_streams"]

#: Rows per block (shards of the data-parallel engine are whole blocks).
DEFAULT_BLOCK_SIZE = 4096

#: Shards of a data set by default (fewer if it has fewer blocks): a rule of the data, so any
#: number of workers up to it trains the same model bit for bit.
DEFAULT_SHARDS = 16

#: Members at which the splitting tree stops and draws positions (:mod:`._sampling_tree`).
_LEAF_MEMBERS = 32


def sampling_key(rng):
    """A 128-bit Philox key (two uint64 words) drawn from a ``numpy.random.Generator``."""
    return rng.integers(0, 2**64, size=2, dtype=np.uint64, endpoint=False)


class _KeyedStreams:
    """Generators ``Philox(key, counter=[0, 0, t, b])``, re-positioned without re-construction.

    Setting the state of one Philox (counter, empty buffer) is ~10x cheaper
    than building a new generator and gives the same stream.
    """

    def __init__(self, key):
        self.key = np.asarray(key, dtype=np.uint64)
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


def default_shard_count(n, block_size):
    """Shards of ``n`` rows by default: ``min(DEFAULT_SHARDS, number of blocks)``.

    A public rule of the data alone (not of the number of workers), so the
    same rows give the same shards, hence the same partial sums added in the
    same order, on 1, 2, ..., ``DEFAULT_SHARDS`` workers: the same bits.
    """
    return min(DEFAULT_SHARDS, -(-int(n) // int(block_size)))


class BlockPoissonSampler(PoissonSampler):
    """Poisson sampling drawn on a keyed splitting tree (see the module docstring).

    Same lots distribution and same privacy event as
    :class:`~fastdp.sampling.PoissonSampler` (add/remove adjacency); the lots
    are a function of (key, n, t) only, so a data-parallel run over any
    shards draws the same lots as one machine.

    Parameters
    ----------
    sample_rate : float, optional
        q in (0, 1].
    batch_size : int, optional
        Expected lot size L instead of q (``q = L / n``).  Exactly one of the two.
    block_size : int, default=4096
        Rows per block: the unit the data-parallel engine cuts shards in (the
        lots do not depend on it).
    """

    name = "block_poisson"
    keyed = True  # lots come from (key, t, node), not from a sequential generator

    def __init__(self, sample_rate=None, *, batch_size=None, block_size=DEFAULT_BLOCK_SIZE):
        super().__init__(sample_rate, batch_size=batch_size)
        if (isinstance(block_size, (bool, np.bool_)) or not isinstance(block_size, numbers.Integral)
                or block_size < 1):
            raise ValidationError(f"block_size must be an int >= 1; got {block_size!r}.")
        self.block_size = int(block_size)

    def _param_repr(self):
        return f"{super()._param_repr()}, block_size={self.block_size!r}"

    def lot(self, key, n, t, start=0, stop=None):
        """Rows of lot ``t`` inside ``[start, stop)`` (default: all n rows), sorted, as int64.

        ``key`` is the run's sampling key (or a :func:`keyed_streams` of it).
        Row numbers are global (in ``range(n)``); any range gives the members
        of the whole lot that fall in it.
        """
        from fastdp._kernels._sampling_tree import tree_lot

        stop = n if stop is None else stop
        if not 0 <= start <= stop <= n:
            raise ValidationError(f"row range [{start}, {stop}) is not within {n} rows.")
        if not 1 <= t < 2**32:
            raise ValidationError(f"lot number must be in [1, 2**32); got {t}.")
        q = self.sample_rate(n)
        if q >= 1.0:
            return np.arange(start, stop, dtype=np.int64)
        key = key.key if isinstance(key, _KeyedStreams) else np.asarray(key, dtype=np.uint64)
        return tree_lot(np.uint64(key[0]), int(t), int(n), float(q), int(start), int(stop),
                        _LEAF_MEMBERS)

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

