"""The driver of data-parallel DP-SGD: one noisy model, noise keyed by (seed, step).

Step t (the single-machine update of :mod:`fastdp.solvers.sgd`)::

    G_t   = sum over shards s (in shard order) of  sum_{i in B_t, i in s} clip(grad_i, C)
    theta <- rho theta - kappa (G_t + xi_t),      xi_t ~ N(0, (sigma C)^2 I)

Multinomial DP-SGD is the same step with theta of shape (d, K) (``Theta^T``):
each per-example K x d gradient is clipped as one vector by the workers, and a
column's K coordinates are read, noised and updated together.

The workers compute the per-shard sums (:class:`~.worker.ShardWorker`); the
driver holds only the model (O(d) memory, independent of n), adds **one**
noise draw per step to the reduced sum, and sends each worker only the model
coordinates its sampled rows read.

Noise: exact lazy noise, as the single-machine kernel
(:mod:`fastdp._kernels._sgd`): ``theta = a w`` with a scalar decay ``a``; the
noise a coordinate c owes since it was last read (steps ``last+1 .. t-1``) is
drawn as one Gaussian of variance ``(kappa sigma C)^2 h(t-1-last)`` when lot t
reads c, and every coordinate is flushed at the end of each epoch.  The
joint law of everything read and released is that of eager noise, so the
event is the single-machine one: ``T`` Poisson-subsampled ``GaussianEvent(sigma)``
steps.  The draws of step t come from ``Philox(noise_key, counter=[0, 0, t, 0])``
(in the order of the sorted columns read), those of the flush at the end of
step T_e from counter ``[0, 0, T_e, 1]``: a function of (seed, t) and of the
lots (themselves keyed), so a retried step re-sends exactly the values it sent
before and never releases a second draw.  The driver's state changes only
once every partial sum of the step has arrived.

Bits: the reduction adds the shard partials in shard order, so a run's bits
depend on the number of shards, not on the number of workers or where the
shards live; with one shard they equal the single-machine solver's with the
``"block_poisson"`` sampler.  Different shard counts agree to rounding
(relative 1e-12 in the tests).
"""

import dataclasses
import time

import numpy as np

from fastdp._kernels._sgd import pending_noise_scales
from fastdp.distributed.data_parallel.replies import check_columns, check_count, check_partials
from fastdp.distributed.data_parallel.worker import union_columns
from fastdp.exceptions import FastDPError
from fastdp.sampling_blocks import keyed_streams

__all__ = ["LazyNoisyModel", "StepStats", "WorkersRestarted", "run_dpsgd", "run_steps"]

_FOLD_BELOW = 1e-100


class LazyNoisyModel:
    """The driver's model ``theta = a w`` with keyed, exact lazy noise (see the module docstring).

    Parameters
    ----------
    n_features : int
    rho, kappa : float
        Decay and step of ``theta <- rho theta - kappa (G + xi)``.
    noise_std : float
        sigma C (0: no noise).
    noise_key : array of 2 uint64
    max_steps : int
        Longest gap between two reads (the run's T).
    n_classes : int, default=0
        0: a vector model.  K >= 2: multinomial, ``w`` of shape (d, K)
        (``Theta^T``); a column's K coordinates are read, noised (K draws in
        order k = 0..K-1, columns in sorted order) and updated together.
    """

    def __init__(self, n_features, rho, kappa, noise_std, noise_key, max_steps, n_classes=0):
        shape = (int(n_features), int(n_classes)) if n_classes else (int(n_features),)
        self.w = np.zeros(shape, dtype=np.float64)
        self.a = 1.0
        self.last = np.zeros(int(n_features), dtype=np.int64)
        self.rho, self.kappa = float(rho), float(kappa)
        self.noise_scale = abs(float(kappa)) * float(noise_std)   # the sign of a centred draw is immaterial
        self.scales = pending_noise_scales(float(rho), int(max_steps) + 1)
        self.streams = keyed_streams(noise_key)
        self.n_draws = 0

    def _owed(self, values, steps, counter):
        owed = np.flatnonzero(steps > 0)
        if self.noise_scale > 0.0 and owed.size:
            if values.ndim == 1:
                z = self.streams.at(*counter).standard_normal(owed.size)
                values[owed] += self.noise_scale * self.scales[steps[owed]] * z
            else:   # multinomial: the K coordinates of a column, drawn together
                z = self.streams.at(*counter).standard_normal(owed.size * values.shape[1])
                values[owed] += (self.noise_scale * self.scales[steps[owed]])[:, None] * \
                    z.reshape(owed.size, values.shape[1])
            self.n_draws += z.size
        return values

    def read(self, t, cols):
        """theta at ``cols`` before step t, with the noise they owe (no state change)."""
        return self._owed(self.a * self.w[cols], (t - 1) - self.last[cols], (t, 0))

    def commit(self, t, cols, values, G):
        """Step t: ``theta <- rho theta - kappa G`` (``values`` from :meth:`read`)."""
        self.a *= self.rho
        self.w[cols] = (self.rho * values - self.kappa * G) / self.a
        self.last[cols] = t - 1
        if self.a < _FOLD_BELOW:
            self.w *= self.a
            self.a = 1.0

    def restore(self, t, theta):
        """Back to the flushed state ``theta`` after step t (a checkpoint of :meth:`flush`)."""
        self.w, self.a = theta.copy(), 1.0
        self.last[:] = t

    def flush(self, t):
        """Add every owed noise after step t; returns theta (a new array, released)."""
        theta = self._owed(self.a * self.w, t - self.last, (t, 1))
        self.w, self.a = theta.copy(), 1.0
        self.last[:] = t
        return theta


@dataclasses.dataclass
class StepStats:
    """Communication and time of a run (non-private diagnostics)."""

    n_steps: int = 0
    bytes_to_workers: int = 0
    bytes_from_workers: int = 0
    seconds_driver: float = 0.0
    seconds_workers: float = 0.0
    n_noise_draws: int = 0
    restarts: int = 0
    replayed_steps: int = 0

    def per_step(self):
        k = max(self.n_steps, 1)
        return {"bytes_to_workers": self.bytes_to_workers / k,
                "bytes_from_workers": self.bytes_from_workers / k,
                "seconds_driver": self.seconds_driver / k,
                "seconds_workers": self.seconds_workers / k}


def run_dpsgd(executor, *, n_features, epoch_ends, rho, kappa, noise_std, noise_key,
              callback=None, algorithm="dpsgd", n_classes=0):
    """Run the steps of DP-SGD on prepared workers; returns ``(theta, stats)``.

    Parameters
    ----------
    executor : LocalWorkers or RayWorkers
        Prepared (shards loaded and mapped).
    n_features : int
        Width of the model (after the row map).
    epoch_ends : list of int
        Cumulative steps at the end of each epoch (the sampler's epoch boundaries).
    rho, kappa, noise_std, noise_key
        See :class:`LazyNoisyModel`.
    callback : callable, optional
        ``callback(epoch, n_done, theta)`` after each epoch (theta released).
    n_classes : int, default=0
        K >= 2 for multinomial DP-SGD (theta of shape (n_features, K), the
        workers' setup with the same ``n_classes``).
    """
    model = LazyNoisyModel(n_features, rho, kappa, noise_std, noise_key, int(epoch_ends[-1]),
                           n_classes)
    return run_steps(executor, model, epoch_ends, callback=callback, algorithm=algorithm)


class WorkersRestarted(Exception):
    """Raised by an executor after it restarted a worker that holds state (dual DP-SCD).

    The driver then restores every worker from the last checkpoint and replays
    from its own checkpoint (stateless DP-SGD workers just retry the call).
    """


def run_steps(executor, model, epoch_ends, *, callback=None, algorithm="dpsgd", stateful=False):
    """The step loop shared by DP-SGD and dual DP-SCD; returns ``(theta, stats)``.

    Step t: read the model at the union of the columns the workers' lots
    read (with the keyed noise they owe), send each worker its columns,
    add the per-shard partial sums in shard order, commit.  Flush at every
    epoch end.  ``stateful``: the workers keep state between steps; the
    executor checkpoints it at every epoch end and, when a worker was
    restarted (:class:`WorkersRestarted`), every worker is restored and the
    epoch replayed from the driver's checkpoint (same keyed draws, same bits).
    """
    T = int(epoch_ends[-1])
    n_features = model.w.shape[0]
    stats = StepStats()
    theta = model.w
    marks = np.zeros(int(n_features), dtype=bool)
    position = np.zeros(int(n_features), dtype=np.int64)   # column -> index in the union
    t, epoch = 0, 0
    if stateful:
        executor.checkpoint(initial=True)
        saved = model.w.copy()
    columns = None
    n_shards = [len(shards) for shards in executor.assignment]

    def checked_columns(replies):
        check_count(None, replies, len(n_shards), "column arrays")
        return [check_columns(w, c, n_features) for w, c in enumerate(replies)]

    def checked_step(results, columns):
        check_count(None, results, len(n_shards), "step replies")
        out = []
        for w, reply in enumerate(results):
            partials, ahead = check_count(w, reply, 2, "a step reply that is not "
                                                       "(partials, next columns)")
            out.append((check_partials(w, partials, n_shards[w], n_features, within=columns[w],
                                       extra=model.w.shape[1:]),
                        None if ahead is None and t == T else check_columns(
                            w, ahead, n_features, what="next columns")))
        return out

    while epoch < len(epoch_ends):
        end = epoch_ends[epoch]
        try:
            if columns is None:
                columns = checked_columns(executor.columns(t + 1))
            while t < end:
                t += 1
                started = time.perf_counter()
                union = union_columns(columns, marks)
                position[union] = np.arange(union.size)
                values = model.read(t, union)
                sends = [values[position[c]] for c in columns]
                waited = time.perf_counter()
                results = checked_step(executor.step(t, sends), columns)
                back = time.perf_counter()
                G = np.zeros((union.size,) + model.w.shape[1:], dtype=np.float64)
                for partials, _ in results:
                    for cols, sums in partials:     # shard order
                        G[position[cols]] += sums     # distinct cols: one add per entry
                        stats.bytes_from_workers += cols.nbytes + sums.nbytes
                model.commit(t, union, values, G)
                columns = [r[1] for r in results]
                stats.bytes_to_workers += sum(s.nbytes for s in sends)
                stats.bytes_from_workers += sum(c.nbytes for c in columns if c is not None)
                stats.seconds_workers += back - waited
                stats.seconds_driver += (waited - started) + (time.perf_counter() - back)
            theta = model.flush(end)       # keyed draws: a replayed flush is the same
            if stateful:
                executor.checkpoint()
        except WorkersRestarted:
            start = epoch_ends[epoch - 1] if epoch else 0
            stats.replayed_steps += t - start
            model.restore(start, saved)
            executor.restore()
            t, columns = start, None
            continue
        if not np.all(np.isfinite(theta)):
            raise FastDPError(f"{algorithm} diverged in epoch {epoch + 1} (non-finite "
                              "coefficients); lower the learning rate or normalise the rows.")
        if stateful:
            saved = theta.copy()
        epoch += 1
        if callback is not None:
            callback(epoch, end, theta)
    stats.n_steps = T
    stats.n_noise_draws = model.n_draws
    stats.restarts = getattr(executor, "restarts", 0)
    return theta, stats
