"""Dual DP-SCD (Algorithm 1 of spec 000, ``released="v"``) on the data-parallel engine.

Step t of :func:`fastdp.solvers.scd.dual_dpscd` with a lot B_t::

    zeta_j = scaled coordinate step of row j from (alpha_j, v)      for j in B_t
    alpha_j <- alpha_j + zeta_j                                     (private state)
    v       <- v + sum_{j in B_t} zeta_j x_j + xi_t,   xi_t ~ N(0, (sigma C)^2 I)

The L updates of a lot are independent given v, so the sum over B_t splits
over the shards: each worker keeps the dual variables ``alpha`` of its own
shards (they never leave it, except as a checkpoint, below), computes the
steps of its sampled rows with the single-machine kernel
(:func:`fastdp._kernels._scd.run_dual_scd`, one step, no noise) and returns
its part of Delta v as a sparse vector on the columns its rows read.  The
driver adds the parts in shard order and adds **one** keyed noise draw
(:class:`~.driver.LazyNoisyModel` with ``rho = 1``: the exact lazy noise of
the single-machine kernel, ``sqrt(p)`` for p pending steps), so the event is
the single-machine one: T Poisson-subsampled ``GaussianEvent(sigma)`` steps of
sensitivity C (``dual_sensitivity(C, released="v")``).

Bits: as DP-SGD, a run's bits depend on the number of shards only (partials
added in shard order); the single-machine ``dual_dpscd`` with a
:class:`~fastdp.sampling_blocks.BlockPoissonSampler` runs this loop with one
in-process shard (:func:`keyed_dpscd`), so it equals a one-shard run on any
number of machines.  Everything is float64 (a float32 X gives float64 alpha
and v here, unlike the single-machine kernel path).

Faults: alpha is state, so a failed worker cannot simply retry the step.  At
the end of every epoch the driver takes a checkpoint: its own flushed v
(O(d), in memory) and every worker's alpha (the executor keeps them; on Ray,
fetched to the driver's node, 8 bytes per row, so that losing a worker's node
loses no checkpoint).  When a worker
dies, the executor restarts it (reloading its shards), every worker restores
alpha from the checkpoint and the driver replays the epoch from its own
checkpoint.  The lots and noise draws are keyed by (seed, t), so the replay
computes exactly the same values: the run ends with the same bits and no
second noise draw is ever released (nothing leaves the driver mid-epoch).
"""

import dataclasses

import numpy as np

from fastdp._kernels import _scd
from fastdp.distributed.data_parallel.driver import LazyNoisyModel, run_steps
from fastdp.distributed.data_parallel.worker import row_entries

__all__ = ["DualStep", "ShardDual", "run_dpscd", "keyed_dpscd", "shard_objective_sums",
           "engine_history_terms"]

_NO_LAST = np.zeros(1, dtype=np.int32)   # the kernel's lazy-noise scratch (unused: no noise)
_ONE_CHUNK = 2**62                        # parallel_min_rows: serial path (same bits anyway)


class ShardDual:
    """The dual variables of one shard (private state of its worker) and scratch."""

    def __init__(self, X):
        self.alpha = np.zeros(X.shape[0], dtype=np.float64)
        self.data = X.data.astype(np.float64, copy=False)   # alpha, v and the data: one dtype
        self.sq_norms = _scd.row_squared_norms(self.data, X.indptr)
        self.zeta = np.zeros(1, dtype=np.float64)

    def checkpoint(self):
        return self.alpha.copy()

    def restore(self, saved):
        if saved is None:
            self.alpha[:] = 0.0
        else:
            self.alpha[:] = saved


@dataclasses.dataclass(frozen=True)
class DualStep:
    """Public settings of a dual DP-SCD step (sent to the workers).

    Attributes
    ----------
    loss_code : int
        ``fastdp._kernels._scd`` loss code.
    lam_n : float
        lambda * N (N the rows of the whole data set).
    sigma_prime : float
        Subproblem constant (the expected lot size L).
    clip : float
        C, the bound on each coordinate step (``inf``: none).
    box_eps : float
    """

    loss_code: int
    lam_n: float
    sigma_prime: float
    clip: float
    box_eps: float

    def start(self, X):
        """The state of a shard at the start of a run (alpha = 0)."""
        return ShardDual(X)

    def partial(self, X, y, token, state, rows, cols, v):
        """This shard's part of Delta v for lot rows ``rows``; updates ``state.alpha``.

        ``v`` holds the model at ``cols`` (the sorted columns the rows read);
        it is left as it was.  Returns ``(cols, sums)``, the sums added in
        row order.
        """
        k = rows.size
        if k == 0:
            return cols, np.zeros(cols.size, dtype=np.float64)
        if state.zeta.size < k:
            state.zeta = np.zeros(2 * k, dtype=np.float64)
        read = v[cols].copy()        # the kernel also applies the steps to v: keep it
        _scd.run_dual_scd(state.data, X.indices, X.indptr, y, state.sq_norms, state.alpha, v,
                          np.array([0, k], dtype=np.int64), rows, state.zeta, _NO_LAST,
                          self.loss_code, self.lam_n, self.sigma_prime, self.clip, self.box_eps,
                          False, 0.0, 0.0, False, None, 1, _ONE_CHUNK, None,
                          check_structure=token)
        v[cols] = read
        positions, counts = row_entries(X, rows)
        weights = np.repeat(state.zeta[:k], counts) * state.data[positions]
        sums = np.bincount(np.searchsorted(cols, X.indices[positions]), weights=weights,
                           minlength=cols.size)
        return cols, sums


def shard_objective_sums(X, y, alpha, coef, loss):
    """One shard's parts of the dual DP-SCD history entry (a non-private diagnostic).

    Returns ``(sum_i loss(x_i . coef, y_i), sum_i loss*(-alpha_i), X^T alpha)``
    over the shard's rows, each computed as :func:`fastdp.losses.primal_objective`
    and :func:`fastdp.losses.dual_objective` compute it over all rows (so one
    shard gives their bits).  ``X^T alpha`` is dense, of length d.
    """
    from fastdp.losses import _aggregate, _predict, get_loss

    loss = get_loss(loss)
    return (float(np.sum(loss.value(_predict(X, coef), y))),
            float(np.sum(loss.dual_term(alpha, y))),
            _aggregate(X, alpha))


def engine_history_terms(executor, coef, loss, lam, n):
    """``primal_objective``, ``dual_objective`` and ``gap_public`` of a private dual DP-SCD fit.

    The entries :func:`fastdp.solvers.scd._history_entry` records for a
    private fit (``coef = v / (lam N)`` the released model), from the workers'
    :func:`shard_objective_sums` added in shard order::

        P = (sum_s loss sums) / N + (lam/2) ||coef||^2
        F* = (sum_s conjugate sums) / N + ||sum_s X_s^T alpha_s||^2 / (2 lam N^2)

    With one shard the bits are those of the single-machine entry; with more,
    the sums are added in another order (1e-12 relative).  Privacy: as on one
    machine, a non-private diagnostic (it reads the data and alpha, which
    depends on the secret lots); each worker sends ``X_s^T alpha_s`` (d
    values) and two sums per entry.  A worker restarted during the query is
    restored from the checkpoint the driver took at this epoch's end (the
    state the entry describes) and the query repeated.
    """
    from fastdp.distributed.data_parallel.driver import WorkersRestarted

    while True:
        try:
            replies = executor.broadcast("dual_objective_sums", coef, loss.name)
            break
        except WorkersRestarted:
            executor.restore()
    losses, conjugates, aggregate = 0.0, 0.0, None
    for parts in replies:
        for loss_sum, conjugate_sum, part in parts:   # shard order
            losses += loss_sum
            conjugates += conjugate_sum
            aggregate = part.copy() if aggregate is None else aggregate + part
    primal = float(losses / n + 0.5 * lam * coef @ coef)
    dual = float(conjugates / n + (aggregate @ aggregate) / (2.0 * lam * n * n))
    return {"primal_objective": primal, "dual_objective": dual, "gap_public": primal + dual}


def run_dpscd(executor, *, n_features, epoch_ends, noise_std, noise_key, callback=None,
              algorithm="dual_dpscd"):
    """Run the steps of dual DP-SCD on prepared workers; returns ``(v, stats)``.

    ``v <- v + (Delta v + xi)``: the driver's :class:`LazyNoisyModel` with
    ``rho = 1`` and ``kappa = -1`` (noise std ``|kappa| sigma C = sigma C``).
    Checkpoints at every epoch end; a restarted worker makes the driver replay
    the epoch (module docstring).
    """
    model = LazyNoisyModel(n_features, 1.0, -1.0, noise_std, noise_key, int(epoch_ends[-1]))
    return run_steps(executor, model, epoch_ends, callback=callback, algorithm=algorithm,
                     stateful=True)


def keyed_dpscd(X, y, *, sampler, sampling_rng, noise_rng, loss, lam, epochs, sigma, clip,
                box_eps, noise_std, sensitivity, num_threads, algorithm, record_history,
                callback, extra):
    """Dual DP-SCD on one machine with block-keyed lots (``fastdp.solvers.scd`` delegates here).

    One in-process worker holding all of ``X`` cut into the default shards
    (:func:`~fastdp.sampling_blocks.default_shard_count`): bit-identical to a
    data-parallel run with the default shards on any number of workers.  Arguments as resolved by ``fastdp.solvers.scd``.
    """
    from fastdp.distributed.data_parallel.executors import LocalWorkers
    from fastdp.distributed.data_parallel.shards import array_source
    from fastdp.distributed.data_parallel.worker import WorkerSetup
    from fastdp.sampling_blocks import sampling_key
    from fastdp.solvers._common import sampled_gaussian_event
    from fastdp.solvers._result import SolverResult
    from fastdp.solvers.scd import _history_entry

    n, m = X.shape
    lam_n = lam * n
    L = float(sampler.expected_batch_size(n))
    epoch_ends = sampler.epoch_boundaries(n, epochs)
    dual = DualStep(loss_code=loss.code, lam_n=lam_n, sigma_prime=L,
                    clip=float(clip) if clip is not None else np.inf, box_eps=box_eps)
    setup = WorkerSetup(n_rows=n, n_features=m, shift=0, classes=None, row_map=None,
                        max_row_norm=None, loss_code=-1, clip=dual.clip, sampler=sampler,
                        sampling_key=sampling_key(sampling_rng), n_steps=int(epoch_ends[-1]),
                        num_threads=num_threads, dual=dual)
    executor = LocalWorkers(1)
    executor.open(array_source(X, y, block_size=sampler.block_size))   # the default shards
    executor.prepare(setup)
    history = [] if record_history else None

    def all_alpha():   # the shards' duals, in row order
        return np.concatenate([state.alpha for state in executor.workers[0]._dual])

    def on_epoch(epoch, done, v):
        if record_history:
            alpha = all_alpha()
            history.append(_history_entry(epoch, done, alpha, v, X, y, loss, lam, sigma > 0.0))
        if callback is not None:
            callback({"epoch": epoch, "n_iter": done, "coef": v / lam_n, "v": v})

    v, stats = run_dpscd(executor, n_features=m, epoch_ends=epoch_ends, noise_std=noise_std,
                         noise_key=sampling_key(noise_rng), callback=on_epoch,
                         algorithm=algorithm)
    done = int(epoch_ends[-1])
    return SolverResult(
        coef=v / lam_n, alpha=all_alpha(), v=v, n_iter=done,
        epochs=epochs, algorithm=algorithm, loss=loss.name, lam=lam, noise_multiplier=sigma,
        sensitivity=sensitivity, noise_std=noise_std, clip=clip, batch_size=L,
        sample_rate=float(sampler.sample_rate(n)), sampler=sampler.name,
        adjacency=sampler.adjacency, event=sampled_gaussian_event(sampler, n, done, sigma),
        lazy_noise=True, diagnostics={"n_noise_draws": int(stats.n_noise_draws)},
        num_threads=num_threads, history=history,
        extra=dict(extra, sigma_prime=L, box_eps=box_eps, dtype="float64"))
