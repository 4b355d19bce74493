"""Tail averaging of the released DP-SGD iterates (Polyak-Ruppert), a post-processing step.

DP-SGD releases every iterate ``theta_t`` (its threat model), so any function
of them, such as their average, costs no privacy.  With a constant step the
last iterate carries the noise of the last few steps at full weight; the
average of the iterates of the run's tail weights them evenly, which lowers
the noise of the returned model and lets a larger step be used.

:class:`TailAverage` averages the iterates at ``n_points`` step counts spread
evenly over the last ``fraction`` of the run's T steps (the last one is T).
The solver runs its compiled kernel up to each of those step counts (the
kernel flushes its lazy noise at the end of every call, so the iterate read
there is the released one) and adds it to a running sum.  Only the batch
boundaries at which the kernel returns change; the batches, the noise
distribution and the event are those of the same run without averaging.
``fraction = 0`` (``average=False``) is the last iterate, with the kernel
called once per epoch exactly as before (same bits).
"""

import math
import numbers

import numpy as np

from fastdp.exceptions import ValidationError

__all__ = ["TailAverage", "RefinedBoundaries", "averaged_epochs", "check_average", "tail_average", "DEFAULT_POINTS"]

#: Iterates averaged at most: each costs one flush of the lazy noise (O(d) draws).
DEFAULT_POINTS = 64


def check_average(average):
    """The tail fraction of ``average``: ``False``/``0`` -> 0.0 (last iterate), a real in (0, 1].

    ``True`` means 0.5 (the last half of the steps).  Raises :class:`ValidationError`
    for anything else.
    """
    if average is None or average is False:
        return 0.0
    if average is True:
        return 0.5
    if isinstance(average, numbers.Real) and not isinstance(average, bool):
        value = float(average)
        if value == 0.0 or (0.0 < value <= 1.0):
            return value
    raise ValidationError(
        f"average must be False, True or the tail fraction of the steps in (0, 1]; "
        f"got {average!r}.")


class TailAverage:
    """The mean of the iterates at ``n_points`` step counts evenly spread over the tail.

    Parameters
    ----------
    fraction : float
        In (0, 1]: the tail is the last ``ceil(fraction * T)`` steps.
    n_steps : int
        T, the run's steps.
    n_points : int, default :data:`DEFAULT_POINTS`
        Iterates averaged at most (fewer when the tail is shorter).

    Attributes
    ----------
    points : list of int
        The step counts (increasing, ending at T) whose iterates are averaged.
    """

    def __init__(self, fraction, n_steps, n_points=DEFAULT_POINTS):
        T = int(n_steps)
        tail = max(1, math.ceil(float(fraction) * T)) if T > 0 else 0
        k = min(int(n_points), tail)
        start = T - tail
        # points start + tail * j / k, j = 1..k (integers, strictly increasing, last = T)
        self.points = [start + (tail * j) // k for j in range(1, k + 1)] if k > 0 else []
        self._wanted = set(self.points)
        self._sum = None
        self._count = 0

    def boundaries(self, epoch_ends):
        """The kernel-call boundaries: the sorted union of ``epoch_ends`` and the points."""
        return sorted(set(int(b) for b in epoch_ends) | self._wanted)

    def add(self, step, coef):
        """Add the released iterate ``coef`` after ``step`` steps if it is one of the points."""
        if step not in self._wanted:
            return
        if self._sum is None:
            self._sum = np.array(coef, dtype=np.float64, copy=True)
        else:
            self._sum += coef
        self._count += 1

    def mean(self, last):
        """The average (``last``, the final iterate, when no point was reached)."""
        if self._count == 0:
            return last
        return self._sum / self._count


class RefinedBoundaries:
    """A sampler whose epochs end at given step counts (the kernel returns there).

    Delegates everything else to ``sampler``; used only to drive the kernel
    loop, never for accounting (the run's event is the wrapped sampler's).
    """

    def __init__(self, sampler, boundaries):
        self._sampler = sampler
        self._boundaries = list(boundaries)

    def epoch_boundaries(self, n, epochs):
        """The refined boundaries (the run's T steps, cut at more places)."""
        return list(self._boundaries)

    def __getattr__(self, name):
        return getattr(self._sampler, name)



def tail_average(sampler, n_samples, epochs, average, n_points=DEFAULT_POINTS):
    """The :class:`TailAverage` of a run, or None for the last iterate (``average`` 0)."""
    if not average:
        return None
    epoch_ends = list(sampler.epoch_boundaries(n_samples, epochs))
    if not epoch_ends:
        return None
    return TailAverage(average, epoch_ends[-1], n_points)


def averaged_epochs(run, kernel, sampler, stream, epochs, *, state, params, parallel_min_rows,
                    tail):
    """:meth:`KernelEpochs.run`, also adding ``state[0]`` to ``tail`` at its points.

    Yields the epoch number after each epoch, as ``run.run`` does.  With
    ``tail`` None the kernel runs exactly as ``run.run`` runs it (same calls,
    same bits); with a :class:`TailAverage` the kernel also returns at its
    points, where ``state[0]`` (the released, flushed iterate) is added.
    """
    if tail is None:
        yield from run.run(kernel, sampler, stream, epochs, state=state, params=params,
                           parallel_min_rows=parallel_min_rows)
        return
    epoch_ends = list(sampler.epoch_boundaries(run.n_samples, epochs))
    ends = {b: e for e, b in enumerate(epoch_ends, start=1)}
    driver = RefinedBoundaries(sampler, tail.boundaries(epoch_ends))
    for _ in run.run(kernel, driver, stream, epochs, state=state, params=params,
                     parallel_min_rows=parallel_min_rows):
        tail.add(run.n_steps, state[0])
        if run.n_steps in ends:
            yield ends[run.n_steps]
