"""Mini-batch samplers for the stochastic DP solvers, each with its privacy event.

A sampler decides which examples each step of a solver touches.  The privacy
guarantee depends on *how* the batches were drawn, so every sampler also
builds the privacy event that describes a run of it (see
:mod:`fastdp.privacy.events`); the solver never accounts a run under a sampling
scheme it did not use.

Batches are handed to the compiled kernels as two flat int64 arrays:
``batch_ptr`` (length ``n_steps + 1``) and ``batch_idx``, batch ``t`` being
``batch_idx[batch_ptr[t]:batch_ptr[t + 1]]``.  The indices inside a batch are
distinct and sorted increasingly (a batch is a *set*; sorting it changes
nothing in the distribution of the set, and makes the kernels' memory
accesses local).

=======================  ======================  ==========================  ====================
sampler                  batch                   adjacency of the analysis   event of one run
=======================  ======================  ==========================  ====================
``PoissonSampler(q)``    each example with       add/remove                  ``SelfComposedEvent(
                         probability q; size                                 PoissonSampledEvent(q,
                         varies (may be empty)                               step), T)``
``FixedSizeSampler(L)``  L distinct examples,    replace-one                 ``SelfComposedEvent(
                         uniformly, every step                               FixedSizeSampledEvent(
                                                                             n, L, step), T)``
``ShuffleSampler(L)``    consecutive lots of L   replace-one (once per       ``ShuffledEvent(n, L,
                         from a fresh random     permutation, no             step, passes)``
                         permutation per epoch   amplification)
=======================  ======================  ==========================  ====================

The per-step event ``step`` states its noise relative to the *add/remove*
sensitivity of one step; the replace-one events convert it themselves
(replace-one sensitivity <= 2 x add/remove sensitivity, see
:mod:`fastdp.privacy.events`).

Only the Poisson sampler matches the (RDP / moments) accountants' subsampled
Gaussian analysis exactly, and it is the default.  Randomness comes only from
the ``numpy.random.Generator`` passed in.

The number of steps of a run of ``epochs`` epochs is ``T = floor(epochs * n / L)``
(spec 000, section 2.8), with ``L`` the (expected) batch size.

Vocabulary
----------
fastdp names its samplers ``"poisson"``, ``"fixed"`` and ``"shuffle"``
(:data:`SAMPLER_NAMES`) everywhere: the estimators' ``sampler``, the solvers,
the planning helpers of :mod:`fastdp.privacy.calibration` (``sampling=``) and
the CLI (``--sampler``).  The old spellings ``"fixed_size"`` and
``"uniform"`` (both meaning ``"fixed"``) are still accepted with a
:class:`DeprecationWarning` (:func:`canonical_sampler_name`).

Layer
-----
Samplers sit beside the privacy layer, not under it (DESIGN.md): a sampler
emits the event of what it sampled, so this module imports the event algebra
(:mod:`fastdp.privacy.events`), and the planning helpers build their events
from the same sampler objects (:func:`fastdp.privacy.calibration.dp_sgd_event`),
so planning and training cannot disagree.
"""

import math
import numbers
import warnings
from fractions import Fraction

import numpy as np

from fastdp._validation import check_batch_size
from fastdp.exceptions import ValidationError
from fastdp.privacy import events as ev

__all__ = [
    "SAMPLER_NAMES",
    "canonical_sampler_name",
    "Sampler",
    "PoissonSampler",
    "FixedSizeSampler",
    "ShuffleSampler",
    "get_sampler",
    "n_steps_for_epochs",
    "epoch_boundaries",
]


def n_steps_for_epochs(epochs, n, batch_size):
    """Number of mini-batch steps of ``epochs`` epochs: ``floor(epochs * n / batch_size)``.

    Exact rational arithmetic is used, so e.g. 1 epoch of 200000 examples with
    ``batch_size=1000`` is exactly 200 steps.  ``batch_size`` may be a float
    (the expected batch size ``q * n`` of Poisson sampling); a ratio within
    1e-9 (relative) of an integer is rounded to it.
    """
    if isinstance(batch_size, numbers.Integral) and isinstance(epochs, numbers.Integral):
        return int(epochs) * int(n) // int(batch_size)
    ratio = Fraction(epochs) * int(n) / Fraction(batch_size)
    nearest = round(ratio)
    if abs(ratio - nearest) <= Fraction(1, 10**9) * max(1, nearest):
        return int(nearest)
    return int(math.floor(ratio))


def epoch_boundaries(epochs, n, batch_size):
    """Cumulative step counts at the end of each (possibly partial) epoch.

    Returns a list ``[T_1, T_2, ..., T]`` with ``T_e = n_steps_for_epochs(e, ...)``
    for ``e = 1, ..., ceil(epochs)`` (the last one uses ``epochs`` itself).
    Empty epochs (no complete step) are dropped.
    """
    total = n_steps_for_epochs(epochs, n, batch_size)
    bounds = []
    for e in range(1, int(math.ceil(epochs)) + 1):
        t = total if e >= epochs else min(total, n_steps_for_epochs(e, n, batch_size))
        if t > (bounds[-1] if bounds else 0):
            bounds.append(t)
    return bounds


def _pack(sizes, flat):
    ptr = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=ptr[1:])
    return ptr, np.ascontiguousarray(flat, dtype=np.int64)


def _sort_within_batches(ptr, idx, n):
    """Sort the indices of every batch increasingly (batches keep their order)."""
    n_steps = len(ptr) - 1
    if idx.size == 0:
        return idx
    step = np.repeat(np.arange(n_steps, dtype=np.int64), np.diff(ptr))
    key = step * np.int64(n) + idx
    key.sort()
    return key - step * np.int64(n)


def uniform_subsets(rng, n, sizes):
    """Draw, for every step, a uniformly random subset of ``range(n)`` of the given size.

    Parameters
    ----------
    rng : numpy.random.Generator
    n : int
        Population size.
    sizes : array of int
        Size of each subset (each at most ``n``).

    Returns
    -------
    batch_ptr, batch_idx : int64 arrays
        Flat batches, sorted increasingly within each batch.

    Notes
    -----
    Small subsets are drawn with replacement as sorted keys ``step * n + index``;
    repeated keys are redrawn (within their step) until all are distinct.  The
    procedure commutes with every relabelling of ``range(n)``, so each subset
    is uniform over the subsets of its size; subsets of different steps are
    independent.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    ptr = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=ptr[1:])
    total = int(ptr[-1])
    if total == 0:
        return ptr, np.zeros(0, dtype=np.int64)
    if int(sizes.max()) * 8 > n:
        parts = [np.sort(rng.choice(n, size=int(k), replace=False)) for k in sizes]
        return ptr, np.concatenate(parts).astype(np.int64, copy=False)
    step_base = np.repeat(np.arange(len(sizes), dtype=np.int64) * np.int64(n), sizes)
    keys = step_base + rng.integers(0, n, size=total, dtype=np.int64)
    keys.sort()
    while True:
        repeated = np.flatnonzero(keys[1:] == keys[:-1]) + 1
        if repeated.size == 0:
            break
        base = keys[repeated] - keys[repeated] % np.int64(n)
        keys[repeated] = base + rng.integers(0, n, size=repeated.size, dtype=np.int64)
        keys.sort()
    return ptr, keys - step_base


class Sampler:
    """Base class: a recipe for mini-batches plus the privacy event of a run.

    Attributes
    ----------
    name : str
        ``"poisson"``, ``"fixed"`` or ``"shuffle"``.
    adjacency : str
        ``"add_remove"`` or ``"replace_one"``: the neighbouring relation under
        which the event's accounting holds.  The per-step event passed to
        :meth:`event` states its noise relative to the add/remove sensitivity;
        replace-one events convert it (sigma halves).
    fixed_size : bool
        True when every batch has exactly ``batch_size`` examples.
    """

    name = None
    adjacency = None
    fixed_size = True

    def expected_batch_size(self, n):
        """Expected number of examples per batch for ``n`` examples."""
        raise NotImplementedError

    def sample_rate(self, n):
        """Probability that a given example is in a given batch."""
        return self.expected_batch_size(n) / n

    def check(self, n):
        """Raise :class:`ValidationError` if the sampler cannot serve ``n`` examples."""
        if not isinstance(n, numbers.Integral) or n < 1:
            raise ValidationError(f"n must be a positive int; got {n!r}.")

    def n_steps(self, n, epochs):
        """Steps of a run of ``epochs`` epochs: ``floor(epochs * n / L)``."""
        self.check(n)
        return n_steps_for_epochs(epochs, n, self._step_divisor(n))

    def epoch_boundaries(self, n, epochs):
        """Cumulative step counts at the end of each epoch (see :func:`epoch_boundaries`)."""
        self.check(n)
        return epoch_boundaries(epochs, n, self._step_divisor(n))

    def _step_divisor(self, n):
        return self.expected_batch_size(n)

    def stream(self, n, rng):
        """A :class:`BatchStream` drawing this sampler's batches from ``rng``."""
        self.check(n)
        return BatchStream(self, n, rng)

    def _draw(self, n, n_steps, rng, state):
        raise NotImplementedError

    def event(self, n, n_steps, step_event):
        """Privacy event of ``n_steps`` steps, each releasing ``step_event`` on its batch."""
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}({self._param_repr()})"

    def __eq__(self, other):
        return type(self) is type(other) and self._param_repr() == other._param_repr()

    def __hash__(self):
        return hash((type(self).__name__, self._param_repr()))


class BatchStream:
    """Stateful source of consecutive batches of one run (keeps shuffle state between calls)."""

    def __init__(self, sampler, n, rng):
        self.sampler = sampler
        self.n = int(n)
        self.rng = rng
        self._state = {}

    def take(self, n_steps):
        """The next ``n_steps`` batches as ``(batch_ptr, batch_idx)`` int64 arrays."""
        n_steps = int(n_steps)
        if n_steps < 0:
            raise ValidationError(f"n_steps must be >= 0; got {n_steps}.")
        if n_steps == 0:
            return np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return self.sampler._draw(self.n, n_steps, self.rng, self._state)


def _self_composed(event, count):
    return ev.SelfComposedEvent(event, int(count))


class PoissonSampler(Sampler):
    """Poisson sampling: every example joins each batch independently with probability q.

    The batch size is Binomial(n, q): it varies from step to step and can be
    0 (the step then still releases its noise).  This is the sampling the
    subsampled-Gaussian RDP and moments accountants analyse, under add/remove
    adjacency.

    Parameters
    ----------
    sample_rate : float, optional
        q in (0, 1].
    batch_size : int, optional
        Expected batch size L instead of q: ``q = L / n`` once n is known.
        Exactly one of ``sample_rate`` and ``batch_size`` must be given.
    """

    name = "poisson"
    adjacency = "add_remove"
    fixed_size = False

    def __init__(self, sample_rate=None, *, batch_size=None):
        if (sample_rate is None) == (batch_size is None):
            raise ValidationError("PoissonSampler needs exactly one of sample_rate and batch_size.")
        if sample_rate is not None:
            if isinstance(sample_rate, (bool, np.bool_)) or not isinstance(sample_rate, numbers.Real):
                raise ValidationError(f"sample_rate must be a number in (0, 1]; got {sample_rate!r}.")
            if not 0.0 < float(sample_rate) <= 1.0:
                raise ValidationError(f"sample_rate must lie in (0, 1]; got {sample_rate!r}.")
            self._rate = float(sample_rate)
            self._batch_size = None
        else:
            self._batch_size = check_batch_size(batch_size)
            self._rate = None

    def _param_repr(self):
        if self._rate is not None:
            return f"sample_rate={self._rate!r}"
        return f"batch_size={self._batch_size!r}"

    def check(self, n):
        super().check(n)
        if self._batch_size is not None:
            check_batch_size(self._batch_size, n)

    def sample_rate(self, n):
        if self._rate is not None:
            return self._rate
        return self._batch_size / n

    def expected_batch_size(self, n):
        return self._batch_size if self._batch_size is not None else self._rate * n

    def _draw(self, n, n_steps, rng, state):
        sizes = rng.binomial(n, self.sample_rate(n), size=n_steps)
        return uniform_subsets(rng, n, sizes)

    def event(self, n, n_steps, step_event):
        return _self_composed(ev.PoissonSampledEvent(self.sample_rate(n), step_event), n_steps)


class _FixedBatchSizeSampler(Sampler):
    """Base of the samplers whose every batch has exactly ``batch_size`` examples.

    Parameters
    ----------
    batch_size : int
        L >= 1, at most n (checked by :meth:`check`).
    """

    def __init__(self, batch_size):
        self.batch_size = check_batch_size(batch_size)

    def _param_repr(self):
        return f"batch_size={self.batch_size!r}"

    def check(self, n):
        super().check(n)
        check_batch_size(self.batch_size, n)

    def expected_batch_size(self, n):
        return self.batch_size


class FixedSizeSampler(_FixedBatchSizeSampler):
    """Every step draws ``batch_size`` distinct examples uniformly at random, independently.

    The literal reading of Algorithm 1, step 5 of the DP-SCD paper.  Its
    privacy is analysed under *replace-one* adjacency (subsampling without
    replacement), so a mechanism using it must calibrate its noise to the
    replace-one sensitivity.

    Parameters
    ----------
    batch_size : int
        L >= 1, at most n.
    """

    name = "fixed"
    adjacency = "replace_one"

    def _draw(self, n, n_steps, rng, state):
        return uniform_subsets(rng, n, np.full(n_steps, self.batch_size, dtype=np.int64))

    def event(self, n, n_steps, step_event):
        return _self_composed(ev.FixedSizeSampledEvent(int(n), self.batch_size, step_event), n_steps)


class ShuffleSampler(_FixedBatchSizeSampler):
    """The DP-SCD paper's sampling: a fresh random permutation every epoch, cut into lots.

    Lots are consecutive chunks of ``batch_size`` from the stream of
    permutations, so a lot can straddle two epochs (as in the reference
    code).  Unlike the reference code, the indices of a lot are always
    distinct: when a new permutation starts inside an open lot, entries of
    its head that are already in the lot are swapped with the first later
    entries that are not.

    No subsampling amplification analysis is known for this scheme; its event
    (:class:`fastdp.privacy.events.ShuffledEvent`) is never accounted as
    Poisson sampling.  Its guaranteed analysis is replace-one: an example is
    in at most one lot per permutation, so a run of T lots touches it at most
    ``ceil(T L / n)`` times (the event's ``epochs``).

    Parameters
    ----------
    batch_size : int
        L >= 1, at most n.
    """

    name = "shuffle"
    adjacency = "replace_one"

    def _draw(self, n, n_steps, rng, state):
        lot = self.batch_size
        need = n_steps * lot
        perm = state.get("perm")
        pos = state.get("pos", n)
        parts = []
        got = 0
        while got < need:
            if pos >= n:
                perm = rng.permutation(n).astype(np.int64, copy=False)
                open_count = got % lot
                if open_count:
                    collected = np.concatenate(parts)
                    _separate_from_open_lot(perm, collected[-open_count:], lot - open_count)
                pos = 0
            k = min(n - pos, need - got)
            parts.append(perm[pos:pos + k])
            pos += k
            got += k
        state["perm"], state["pos"] = perm, pos
        ptr = np.arange(n_steps + 1, dtype=np.int64) * lot
        return ptr, _sort_within_batches(ptr, np.concatenate(parts), n)

    def event(self, n, n_steps, step_event):
        passes = -(-(int(n_steps) * self.batch_size) // int(n))
        return ev.ShuffledEvent(int(n), self.batch_size, step_event, passes)


def _separate_from_open_lot(perm, open_items, head_len):
    """Swap entries of ``perm[:head_len]`` that are in ``open_items`` with later non-members."""
    in_open = np.isin(perm, open_items)
    bad = np.flatnonzero(in_open[:head_len])
    if bad.size == 0:
        return
    spare = head_len + np.flatnonzero(~in_open[head_len:])[: bad.size]
    perm[bad], perm[spare] = perm[spare].copy(), perm[bad].copy()


_SAMPLERS = {"poisson": PoissonSampler, "fixed": FixedSizeSampler, "shuffle": ShuffleSampler}

#: The sampler vocabulary of fastdp (module docstring).
SAMPLER_NAMES = tuple(_SAMPLERS)

#: Old spellings, accepted with a DeprecationWarning: old name -> name.
DEPRECATED_SAMPLER_NAMES = {"fixed_size": "fixed", "uniform": "fixed"}


def canonical_sampler_name(name):
    """The name in :data:`SAMPLER_NAMES` of a sampler spelling (case-insensitive).

    The old spellings ``"fixed_size"`` and ``"uniform"`` give ``"fixed"``
    with a :class:`DeprecationWarning`; anything else unknown is returned
    lower-cased, for the caller to refuse (or to handle, like the planning
    helpers' deprecated ``"none"``).
    """
    key = name.lower()
    if key in DEPRECATED_SAMPLER_NAMES:
        new = DEPRECATED_SAMPLER_NAMES[key]
        warnings.warn(f"sampler name {name!r} is deprecated; use {new!r} (the same sampler: "
                      f"fixed-size batches drawn without replacement).",
                      DeprecationWarning, stacklevel=3)
        return new
    return key


def get_sampler(sampler, batch_size):
    """Build a sampler from a name (or pass a :class:`Sampler` through).

    Parameters
    ----------
    sampler : {"poisson", "fixed", "shuffle"} or Sampler
        For ``"poisson"`` the batch size is the expected one
        (``q = batch_size / n``).  ``"uniform"`` and ``"fixed_size"`` are
        deprecated spellings of ``"fixed"``.
    batch_size : int
        L.

    Returns
    -------
    Sampler
    """
    if isinstance(sampler, Sampler):
        return sampler
    name = canonical_sampler_name(sampler) if isinstance(sampler, str) else None
    if name in _SAMPLERS:
        cls = _SAMPLERS[name]
        if cls is PoissonSampler:
            return PoissonSampler(batch_size=batch_size)
        return cls(batch_size)
    raise ValidationError(
        f"Unknown sampler {sampler!r}; use 'poisson' (default; matches the accountant), "
        "'fixed' (uniform without replacement, replace-one accounting) or 'shuffle' "
        "(the paper's per-epoch shuffling), or pass a fastdp.sampling.Sampler."
    )


def _block_poisson(batch_size):  # fastdp.sampling_blocks imports this module: import it lazily
    from fastdp.sampling_blocks import BlockPoissonSampler
    return BlockPoissonSampler(batch_size=batch_size)


_SAMPLERS["block_poisson"] = _block_poisson
