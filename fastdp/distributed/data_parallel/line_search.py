"""The Gaussian line-search family on the data-parallel engine: a batch oracle over shards.

The line-search solvers of :mod:`fastdp.solvers.line_search` (``dp_blsgd``,
``dp_blsgd_adaptive``, ``dp_blsgd_ac``, ``dp_blgd``, ``dpagd``) read the data
only through a *batch oracle* (``GlmOracle``'s interface: clipped gradient
sums, margins and labels of a batch of rows) and a batch stream.  Every data
query is a sum over the rows of a batch:

* a gradient release: ``sum_{i in B} clip(grad_i(w), C)`` (a d-vector);
* a noisy backtracking search (NOISYBTLS) or DP-AGD's step selection: the
  K + 1 clipped loss sums ``sum_{i in B} min(loss(x_i . (w - eta_k g), y_i), C_obj)``
  (the searches compare them with public terms after adding noise);
* ``record_history``: ``sum_i loss(x_i . w, y_i)`` over all rows (non-private).

:class:`ShardOracle` stands in for ``GlmOracle`` on the driver: each query is
sent to every worker, which computes its shards' partial sums with the
single-machine kernels (:meth:`~.worker.ShardWorker.gradient_sums`,
:meth:`~.worker.ShardWorker.loss_sums`), and the driver adds them **in shard
order**.  Margins are never shipped: ``margins(rows, v)`` returns a handle
(the lot and the point), and the search's clipped sums are computed where the
rows are (:func:`fastdp.solvers.line_search.search.clipped_loss_sums`).  The
solvers' own loops then run unchanged on the driver: one noise draw per
release from the driver's generators (the same draws, in the same order, as
on one machine), the same budget filter, the same adaptation.

Lots: :class:`EngineLotSampler` is the run's block-keyed Poisson sampler whose
stream hands out lot *numbers* (:class:`Lots`) instead of rows; lot t is
drawn by the workers from ``(sampling key, t, block)``, the key being drawn
from the solver's sampling generator exactly as the single-machine
:class:`~fastdp.sampling_blocks.BlockPoissonSampler` stream draws it.  So the
lots, and with one shard the bits, are those of the single-machine estimator
with a ``BlockPoissonSampler``; with more shards only the rounding of the
reduction differs (a search decision could flip only if a noisy query lands
within rounding of its threshold: never observed; the tests bound the
coefficients at 1e-12 relative).  Full-batch solvers (``dp_blgd``, ``dpagd``)
read every row.

Privacy: the event is the single-machine one (the solver's loop, its
privacy filter and its noise all run on the driver); workers return
un-noised partial sums, as for DP-SGD (inside the trust boundary).
Communication: a query sends each worker the model point (and a search's
direction) only on the columns its rows of the batch read, in sorted order
(values only: the worker knows the columns), never the dense O(d) vectors.
For a full batch those are the worker's *support* (the columns its shards
read, computed once when the shards are prepared; the driver asks for it once
per run).  For a lot they are the lot's columns, or the support when the lot
reads more than 2/3 of it (:func:`~.worker.sends_support`: then the support
is the smaller payload, the lot's column indices never travel).  The driver
learns a lot's columns from the reply to the previous lot's gradient query
(the worker draws lot t + 1 and reports it with its answer for lot t), so a
query costs one round trip, as a DP-SGD step; a lot not announced that way
(the first one) is asked once.  The plans of the last few lots are kept.
Replies are sparse: per shard, a gradient partial on the columns its rows
read (indices and values), or K + 1 numbers; the driver scatters them into
a zero vector in shard order (the reduction is unchanged, hence the bits).
The dense noise of these solvers stays on the driver.
"""

import time

import numpy as np

from fastdp.distributed.data_parallel.replies import (
    check_columns,
    check_count,
    check_partials,
    check_row_counts,
    check_values,
)
from fastdp.distributed.data_parallel.worker import union_columns
from fastdp.losses import get_loss
from fastdp.sampling_blocks import BlockPoissonSampler, sampling_key

__all__ = ["EngineLotSampler", "Lots", "ShardOracle"]


class Lots:
    """Lot numbers ``first .. first + count - 1`` of a keyed run (``first=None``: all rows).

    What the engine's batch stream returns in place of row indices; sliced
    as the solvers slice a batch stream's ``idx`` (``idx[ptr[t]:ptr[t + 1]]``
    with ``ptr = arange(T + 1)`` gives lot ``first + t``).  ``shape[0]`` is
    the lot's size (asked from the workers once, then kept).
    """

    def __init__(self, oracle, key, first, count=1):
        self.oracle, self.key, self.first, self.count = oracle, key, first, int(count)
        self._size = oracle.n_samples if first is None else None

    def __getitem__(self, item):
        start, stop, step = item.indices(self.count)
        if step != 1 or stop - start != 1:
            raise IndexError("a lot sequence is read one lot at a time")
        return Lots(self.oracle, self.key, self.first + start, 1)

    def query(self):
        """The ``(key, t)`` the workers resolve (``t=None``: every row)."""
        if self.count != 1:
            raise ValueError("a query reads one lot")
        return (self.key, self.first)

    @property
    def shape(self):
        if self._size is None:
            self._size = self.oracle.lot_size(self)
        return (self._size,)


class _Margins:
    """``x_i . v`` for the rows of ``lots``, left where the rows are (see the module)."""

    def __init__(self, oracle, lots, v):
        self.oracle, self.lots, self.v = oracle, lots, np.array(v, dtype=np.float64)

    def clipped_loss_sums(self, u, etas, loss_code, c_obj):
        """The K + 1 clipped loss sums of NOISYBTLS with these margins as ``z`` and ``u``'s as u."""
        if u.lots is not self.lots:
            raise ValueError("margins of two different lots")
        return self.oracle.loss_sums(self.lots, self.v, u.v, etas, c_obj)


class _LossValues:
    """Per-example losses of every row at ``w``; only their mean is read (``np.mean``)."""

    def __init__(self, oracle, w):
        self.oracle, self.w = oracle, w

    def mean(self, axis=None, dtype=None, out=None):
        return self.oracle.mean_loss(self.w)


class ShardOracle:
    """The batch oracle of the line-search solvers over prepared workers (module docstring).

    Parameters
    ----------
    executor : LocalWorkers or RayWorkers
        Prepared (shards loaded and mapped; the setup's ``loss_code`` and
        ``sampler`` are those of the run).
    n_samples, n_features : int
        Rows and model width (after the row map).
    loss : str
    """

    is_batch_oracle = True   # fastdp.solvers.line_search.releases.prepare_oracle passes it on

    def __init__(self, executor, n_samples, n_features, loss):
        self.executor = executor
        self.n_samples, self.n_features = int(n_samples), int(n_features)
        self.shape = (self.n_samples, self.n_features)
        self.loss = get_loss(loss)
        self.all_rows = Lots(self, None, None)
        self.y = self.all_rows    # labels stay with the rows
        self.n_queries = 0
        self.bytes_to_workers = 0
        self.bytes_from_workers = 0
        self.seconds_workers = 0.0
        self._supports = None     # per worker: its shards' columns and their union (learnt once)
        self._plans = {}          # lot -> _Plan
        self._marks = np.zeros(self.n_features, dtype=bool)

    # ---- transport --------------------------------------------------------------------

    def _ask(self, method, args):
        """``method(*args[w])`` on worker w; counts the query, its time and the arrays sent."""
        started = time.perf_counter()
        replies = self.executor.scatter(method, args)
        self.seconds_workers += time.perf_counter() - started
        self.n_queries += 1
        self.bytes_to_workers += sum(a.nbytes for one in args for a in one
                                     if isinstance(a, np.ndarray))
        return check_count(None, replies, self._n_workers(), "replies")

    def _n_shards(self, worker):
        return len(self.executor.assignment[worker])

    def _shard_columns(self, worker, cols):
        """A worker's per-shard column arrays (a support or a lot's), checked."""
        check_count(worker, cols, self._n_shards(worker), "shard column arrays")
        return [check_columns(worker, c, self.n_features) for c in cols]

    def _worker_supports(self):
        """The plan of a full batch: per worker, the sorted columns its shards read and their
        union (asked once per run)."""
        if self._supports is None:
            shards = [self._shard_columns(w, cols)
                      for w, cols in enumerate(self._ask("support", [()] * self._n_workers()))]
            self.bytes_from_workers += sum(c.nbytes for cols in shards for c in cols)
            self._supports = _Plan([union_columns(cols, self._marks) for cols in shards],
                                   shards, self.n_samples)
        return self._supports

    def _n_workers(self):
        return len(self.executor.assignment)

    def _learn(self, ident, reports):
        """Keep the plan of lot ``ident`` from the workers' ``lot_columns`` reports."""
        check_count(None, reports, self._n_workers(), "lot reports")
        shards = []
        for w, report in enumerate(reports):
            sizes, cols = check_count(w, report, 2, "a lot report that is not (rows, columns)")
            check_row_counts(w, sizes, self._n_shards(w))
            shards.append(None if cols is None else self._shard_columns(w, cols))
        self.bytes_from_workers += sum(c.nbytes for cols in shards if cols is not None
                                       for c in cols)
        sent = [None if cols is None else union_columns(cols, self._marks) for cols in shards]
        if any(cols is None for cols in shards):     # on the support: the worker's union
            supports = self._worker_supports().sent
            sent = [supports[w] if c is None else c for w, c in enumerate(sent)]
        plan = _Plan(sent, shards, int(sum(sum(sizes) for sizes, _ in reports)))
        self._plans.pop(ident, None)
        if len(self._plans) >= _PLANS_KEPT:
            self._plans.pop(next(iter(self._plans)))
        self._plans[ident] = plan
        return plan

    def _plan(self, lots):
        """The :class:`_Plan` of ``lots``.

        A full batch: the workers' supports.  A lot: learnt from the reply of the
        previous lot's gradient query (its ``ahead``), else asked (one round trip).
        """
        key, t = lots.query()
        if t is None:
            return self._worker_supports()
        ident = (np.asarray(key, dtype=np.uint64).tobytes(), int(t))
        plan = self._plans.get(ident)
        if plan is None:
            plan = self._learn(ident, self._ask("lot_columns",
                                                [(lots.query(),)] * self._n_workers()))
        return plan

    # ---- the oracle -------------------------------------------------------------------

    def lot_size(self, lots):
        return self._plan(lots).size

    def clipped_gradient_sum(self, rows, w, clip):
        """``sum_{i in rows} clip(grad_i(w), clip)`` (dense), reduced in shard order."""
        plan = self._plan(rows)
        w = np.asarray(w, dtype=np.float64)
        lot = rows.query()
        replies = self._ask("gradient_sums", [(lot, w[cols], float(clip)) for cols in plan.sent])
        checked = []
        for worker, (reply, known, sent) in enumerate(zip(replies, plan.shards, plan.sent)):
            check_count(worker, reply, 3, "a reply that is not (partials, row counts, next lot)")
            partials, sizes, _ = reply
            sizes = check_row_counts(worker, sizes, self._n_shards(worker))
            carried = [cols is not None for cols, _ in check_count(
                worker, partials, self._n_shards(worker), "shard partials")]
            checked.append((check_partials(worker, partials, self._n_shards(worker),
                                           self.n_features, known=known, within=sent,
                                           clip=float(clip), sizes=sizes), carried))
        out = np.zeros(self.n_features)
        for partials, carried in checked:
            for (cols, sums), sent_cols in zip(partials, carried):   # shard order
                if sent_cols:
                    self.bytes_from_workers += cols.nbytes
                out[cols] += sums                         # distinct cols: one add per entry
                self.bytes_from_workers += sums.nbytes
        if lot[1] is not None:
            key = np.asarray(lot[0], dtype=np.uint64).tobytes()
            self._learn((key, lot[1] + 1), [ahead for _, _, ahead in replies])
        rows._size = plan.size
        return out

    def margins(self, rows, v):
        return _Margins(self, rows, v)

    def labels(self, rows):
        return rows

    def loss_sums(self, rows, w, g, etas, c_obj):
        """The K + 1 clipped loss sums over ``rows`` (reduced in shard order)."""
        etas = np.ascontiguousarray(etas, dtype=np.float64)
        lot = rows.query()
        total = np.zeros(etas.shape[0] + 1)
        replies = self._ask("loss_sums", [(lot, w[cols], g[cols], etas, float(c_obj))
                                          for cols in self._plan(rows).sent])
        for worker, parts in enumerate(replies):
            for part in check_count(worker, parts, self._n_shards(worker), "shard loss sums"):
                total += check_values(worker, part, total.shape, "loss sums")
                self.bytes_from_workers += part.nbytes
        return total

    def loss_values(self, w):
        return _LossValues(self, np.array(w, dtype=np.float64))

    def mean_loss(self, w):
        """``(1/n) sum_i loss(x_i . w, y_i)`` over every row (non-private diagnostic)."""
        total = 0.0
        for parts in self._ask("support_loss_totals",
                               [(w[cols], self.loss.name)
                                for cols in self._worker_supports().sent]):
            for part in parts:
                total += part
        return total / self.n_samples

    def stats(self, n_steps):
        """``distributed_stats_`` of the run (non-private diagnostics)."""
        return {"n_steps": int(n_steps), "n_queries": self.n_queries,
                "bytes_to_workers": int(self.bytes_to_workers),
                "bytes_from_workers": int(self.bytes_from_workers),
                "seconds_workers": self.seconds_workers,
                "restarts": getattr(self.executor, "restarts", 0)}


_PLANS_KEPT = 4    # lots whose plans the driver keeps (current, next, CHEB's)


class _Plan:
    """What the driver knows of a batch on the workers.

    ``sent``: per worker, the sorted columns its queries carry the model on;
    ``shards``: per worker, per shard the sorted columns the batch's rows read
    (None when the worker sends them with its partials: a lot on the
    support); ``size``: the rows of the batch.
    """

    __slots__ = ("sent", "shards", "size")

    def __init__(self, sent, shards, size):
        self.sent, self.shards, self.size = sent, shards, int(size)


class EngineLotSampler(BlockPoissonSampler):
    """A :class:`BlockPoissonSampler` whose stream returns :class:`Lots` of ``oracle``.

    Same rate, block size, event and name as ``keyed``; the sampling key is
    drawn from the stream's generator as ``BlockPoissonSampler``'s stream
    draws it, so lot t is the same set of rows.
    """

    def __init__(self, keyed, oracle):
        super().__init__(keyed._rate, batch_size=keyed._batch_size, block_size=keyed.block_size)
        self._oracle = oracle

    def stream(self, n, rng):
        self.check(n)
        return _LotStream(self._oracle, rng)


class _LotStream:
    def __init__(self, oracle, rng):
        self.oracle, self.rng, self.key, self.t = oracle, rng, None, 0

    def take(self, n_steps):
        n_steps = int(n_steps)
        if self.key is None:
            self.key = sampling_key(self.rng)
        lots = Lots(self.oracle, self.key, self.t + 1, n_steps)
        self.t += n_steps
        return np.arange(n_steps + 1, dtype=np.int64), lots
