"""One data-parallel worker: its shards, its lots, its clipped partial sums.

A :class:`ShardWorker` holds the rows of one or more shards (loaded by itself
through the source's loader), draws the members of each lot among its rows
with the block-keyed sampler, and computes, per shard, the sparse sum of the
clipped per-example gradients of its sampled rows with the single-machine
kernel (:func:`fastdp._kernels._glm.clipped_gradient_sum`).  It holds no model
state between steps: a step is a function of (t, the model coordinates it is
sent), so a step can be retried on a restarted worker and gives the same bits.

Privacy: a worker reads private rows and returns *un-noised* partial sums to
the driver (inside the trust boundary, like the single-machine kernel's
accumulator); the driver adds the noise before anything is released.
"""

import dataclasses

import numpy as np
import scipy.sparse as sp

from fastdp._kernels import _glm, _line_search, _multinomial, _scd
from fastdp.distributed.data_parallel.shards import ShardValidationError, load_shard
from fastdp.exceptions import ValidationError
from fastdp.sampling_blocks import keyed_streams

__all__ = ["WorkerSetup", "ShardWorker", "row_entries", "rows_columns", "sends_support",
           "union_columns"]


@dataclasses.dataclass(frozen=True)
class WorkerSetup:
    """Public settings the driver sends after combining the shard summaries.

    Attributes
    ----------
    n_rows : int
        Rows of the whole data set (the sampler's n).
    n_features : int
        Columns before the row map.
    shift : int
        Subtracted from the raw column indices (1 for one-based LIBSVM files).
    classes : ndarray of labels or None
        Binary labels (``classes[1]`` maps to +1, ``classes[0]`` to -1), the K
        labels of a multinomial run (label ``classes[k]`` maps to index k), or
        None to use the labels as they are.
    row_map : fastdp.preprocessing.RowMap or None
        Per-example map of the estimator (None: rows used as loaded).
    max_row_norm : float or None
        Rows above this norm are refused (the estimators' ``normalize=False``).
    loss_code : int
    clip : float
    sampler : fastdp.sampling_blocks.BlockPoissonSampler
    sampling_key : ndarray of 2 uint64
    n_steps : int
    num_threads : int
    dual : fastdp.distributed.data_parallel.dual.DualStep or None
        None: DP-SGD partial sums (clipped gradients).  Otherwise dual DP-SCD:
        the worker keeps its shards' dual variables and returns its part of
        Delta v (see :mod:`.dual`).
    n_classes : int
        0: one model (binary or regression).  K >= 2: multinomial DP-SGD; the
        worker returns the K x d clipped softmax gradient sum of its rows
        (feature-major, one row of K per column) and the labels are class
        indices.
    """

    n_rows: int
    n_features: int
    shift: int
    classes: object
    row_map: object
    max_row_norm: object
    loss_code: int
    clip: float
    sampler: object
    sampling_key: object
    n_steps: int
    num_threads: int = 1
    dual: object = None
    n_classes: int = 0


def _class_indices(y, n_classes):
    """``y`` as int64 class indices in ``[0, n_classes)`` (ValidationError otherwise)."""
    y = np.asarray(y)
    index = y.astype(np.int64)
    bad = (index != y) | (index < 0) | (index >= n_classes)
    if bad.any():
        raise ValidationError(f"label {y[bad][0]!r} is not a class index in [0, {n_classes})")
    return np.ascontiguousarray(index)


def row_entries(X, rows):
    """Storage positions of the entries of the CSR rows ``rows`` (row order, then storage
    order) and the number of entries of each row."""
    starts, stops = X.indptr[rows], X.indptr[rows + 1]
    counts = stops - starts
    total = int(counts.sum())
    offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
    return (offsets + np.arange(total)).astype(np.int64, copy=False), counts


def rows_columns(X, rows, marks=None):
    """Sorted distinct column indices (int64) of the CSR rows ``rows`` of ``X``.

    ``rows=None``: every row (the support of ``X``, read from its stored
    entries without an O(entries) list of positions).  ``marks``: optional
    all-False bool scratch array of length ``X.shape[1]``; when the rows hold
    many entries, the columns are found by marking it (O(entries +
    n_features)) instead of sorting (O(entries log entries)); it is left
    all-False.
    """
    if rows is None:
        entries = X.indices[:X.indptr[-1]]
    else:
        entries = X.indices[row_entries(X, rows)[0]]
    total = entries.size
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    if marks is None or 8 * total < marks.shape[0]:
        return np.unique(entries).astype(np.int64, copy=False)
    marks[entries] = True
    cols = np.flatnonzero(marks)
    marks[cols] = False
    return cols.astype(np.int64, copy=False)


def union_columns(columns, marks):
    """Sorted union of sorted int64 column arrays.

    ``marks``: all-False bool scratch of length n_features; used (and left
    all-False) when the arrays hold many entries, as in :func:`rows_columns`.
    """
    if len(columns) == 1:
        return columns[0]
    if 8 * sum(c.size for c in columns) < marks.shape[0]:
        return np.unique(np.concatenate(columns)).astype(np.int64, copy=False)
    for c in columns:
        marks[c] = True
    union = np.flatnonzero(marks)
    marks[union] = False
    return union.astype(np.int64, copy=False)


def sends_support(n_lot_columns, n_support):
    """Whether a lot's queries carry the model on the worker's whole support.

    A lot's model coordinates travel either on the columns its rows read (the
    worker first reports those indices: 8 bytes each, once per lot, then 8 per
    value per query) or on the shard support the driver learnt once (8 bytes
    per value per query, nothing reported).  With about two queries per lot
    (a gradient and a search) the support is the smaller payload once the lot
    reads more than 2/3 of it.  A pure function of the two sizes, so the
    driver, the worker and a restarted worker agree.
    """
    return 3 * int(n_lot_columns) > 2 * int(n_support)


_LOTS_KEPT = 4   # lots a worker keeps resolved (current, prefetched, CHEB's, DP-SGD's next)


class ShardWorker:
    """Shards ``shard_indices`` of ``source``, loaded in this process.

    Parameters
    ----------
    source : fastdp.distributed.data_parallel.shards.Source
    shard_indices : sequence of int
        Consecutive shard numbers.
    """

    def __init__(self, source, shard_indices):
        self.source = source
        specs = source.shards()
        self.specs = [specs[int(i)] for i in shard_indices]
        self.raw = None
        self.shards = None
        self.setup = None
        self._resolved = {}

    def ping(self):
        return True

    def node_id(self):
        """The Ray node this worker runs on (hex id; None outside Ray): placement checks."""
        try:
            import ray
            return ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
        except ImportError:
            return None

    def load(self):
        """Load and check the raw shards; ``("ok", summaries)`` or ``("error", message)``."""
        try:
            self.raw = [load_shard(self.source, s) for s in self.specs]
        except ShardValidationError as exc:
            return "error", str(exc)
        return "ok", [r[2] for r in self.raw]

    def prepare(self, setup):
        """Map the rows as the estimator would (column shift, width, row map, labels).

        Returns ``("ok", None)`` or ``("error", message naming the shard)``.
        """
        from fastdp._validation import check_X, structure_token

        if self.raw is None:
            status, detail = self.load()
            if status != "ok":
                return status, detail
        shards = []
        for spec, (X, y, summary) in zip(self.specs, self.raw):
            where = self.source.describe(spec)
            try:
                if summary["max_col"] - setup.shift >= setup.n_features:
                    raise ValidationError(
                        f"column index {summary['max_col'] - setup.shift} >= n_features = "
                        f"{setup.n_features}")
                if setup.shift or X.shape[1] != setup.n_features:
                    X = sp.csr_matrix((X.data, X.indices - setup.shift, X.indptr),
                                      shape=(X.shape[0], setup.n_features))
                X = check_X(X, max_row_norm=setup.max_row_norm)
                if setup.row_map is not None:
                    X = setup.row_map.transform(X)
                if setup.classes is not None:
                    unknown = ~np.isin(y, setup.classes)
                    if unknown.any():
                        raise ValidationError(f"label {y[unknown][0]!r} is not one of "
                                              f"{list(setup.classes)}")
                    y = (np.searchsorted(setup.classes, y) if setup.n_classes else
                         np.where(y == setup.classes[1], 1.0, -1.0))
                y = _class_indices(y, setup.n_classes) if setup.n_classes else y
            except ValidationError as exc:
                return "error", f"{where}: {exc}"
            y = y if setup.n_classes else np.ascontiguousarray(y, dtype=np.float64)
            shards.append((spec, X, y, structure_token(X)))
        self.shards, self.raw, self.setup = shards, None, setup
        width = shards[0][1].shape[1]
        shape = (width, setup.n_classes) if setup.n_classes else (width,)
        self._theta = np.zeros(shape, dtype=np.float64)
        self._out = np.zeros(shape, dtype=np.float64)
        self._sq_norms = ([_scd.row_squared_norms(X.data, X.indptr) for _, X, _, _ in shards]
                          if setup.n_classes else None)
        self._direction = None          # line-search scratch (allocated on first use)
        self._marks = np.zeros(width, dtype=bool)
        self._resolved = {}
        self._streams = {}
        supports = [rows_columns(X, None, self._marks) for _, X, _, _ in shards]
        self._support = (supports, union_columns(supports, self._marks))
        self._dual = None if setup.dual is None else [setup.dual.start(X) for _, X, _, _ in shards]
        return "ok", None

    def checkpoint(self):
        """A copy of this worker's private state (dual DP-SCD: alpha of each shard), or None."""
        return None if self._dual is None else [state.checkpoint() for state in self._dual]

    def restore(self, states):
        """Reset the private state to a :meth:`checkpoint` (None: the start of the run)."""
        if self._dual is not None:
            for state, saved in zip(self._dual, states or [None] * len(self._dual)):
                state.restore(saved)
        self._resolved = {}
        return True

    # ---- lots and the model coordinates they read (DP-SGD, DP-SCD and the line search) ---

    def support(self):
        """Per shard, the sorted distinct columns its rows read (computed once, at
        :meth:`prepare`); their union is what a full-batch query is sent."""
        return self._support[0]

    def _resolve(self, key, t):
        """``(per shard: (rows, cols), union of cols)`` of lot ``t`` of the sampler keyed by
        ``key``: the shard-local rows, the sorted columns they read and the union over the
        shards.  ``t = None``: every row (the supports, computed once).  The last few lots
        are kept, so a lot drawn to report its columns is not drawn again by its query."""
        if t is None:
            return [(np.arange(spec.n_rows, dtype=np.int64), cols)
                    for (spec, _, _, _), cols in zip(self.shards, self._support[0])], \
                self._support[1]
        key = np.asarray(key, dtype=np.uint64)
        ident = (key.tobytes(), int(t))
        found = self._resolved.get(ident)
        if found is None:
            s = self.setup
            streams = self._streams.get(ident[0])
            if streams is None:
                streams = self._streams[ident[0]] = keyed_streams(key)
            lots = []
            for spec, X, _, _ in self.shards:
                rows = s.sampler.lot(streams, s.n_rows, int(t), spec.start, spec.stop) - spec.start
                lots.append((rows, rows_columns(X, rows, self._marks)))
            found = (lots, union_columns([c for _, c in lots], self._marks))
            if len(self._resolved) >= _LOTS_KEPT:
                self._resolved.pop(next(iter(self._resolved)))
            self._resolved[ident] = found
        return found

    def columns(self, t):
        """Sorted distinct columns the rows of lot ``t`` (the run's sampling key) read in this
        worker's shards."""
        return self._resolve(self.setup.sampling_key, t)[1]

    def step(self, t, theta_values):
        """Partial sums of lot ``t`` given the model at this worker's columns.

        Parameters
        ----------
        t : int
        theta_values : float64 array
            The model at ``self.columns(t)``, in that order (multinomial: one
            row of K per column).

        Returns
        -------
        partials : list of (cols, sums)
            Per shard (in order): the clipped gradient sum of its sampled rows,
            on the sorted columns those rows read (multinomial: K per column).
        next_columns : int64 array or None
            ``columns(t + 1)``, or None after the last step.
        """
        lots, union = self._resolve(self.setup.sampling_key, t)
        s = self.setup
        self._theta[union] = theta_values
        if self._dual is not None:
            partials = [s.dual.partial(X, y, token, state, rows, cols, self._theta)
                        for (rows, cols), (_, X, y, token), state
                        in zip(lots, self.shards, self._dual)]
            return partials, (self.columns(t + 1) if t < s.n_steps else None)
        partials = []
        for k, ((rows, cols), (_, X, y, token)) in enumerate(zip(lots, self.shards)):
            if s.n_classes:
                _multinomial.clipped_gradient_sum(X.data, X.indices, X.indptr, y,
                                                  self._sq_norms[k], rows, self._theta, s.clip,
                                                  self._out, check_structure=token)
            else:
                _glm.clipped_gradient_sum(X.data, X.indices, X.indptr, y, rows, self._theta,
                                          s.loss_code, s.clip, self._out, s.num_threads,
                                          check_structure=token)
            partials.append((cols, self._out[cols].copy()))
            self._out[cols] = 0.0
        return partials, (self.columns(t + 1) if t < s.n_steps else None)

    def dual_objective_sums(self, coef, loss):
        """Per shard (dual DP-SCD ``record_history``, a non-private diagnostic):
        :func:`~.dual.shard_objective_sums` at the released model ``coef`` and the
        shard's current alpha."""
        from fastdp.distributed.data_parallel.dual import shard_objective_sums

        coef = np.ascontiguousarray(coef, dtype=np.float64)
        return [shard_objective_sums(X, y, state.alpha, coef, loss)
                for (_, X, y, _), state in zip(self.shards, self._dual)]

    # ---- queries of the line-search family (driver: :mod:`.line_search`) --------------
    #
    # A lot is ``(key, t)``: the members of lot t of the block-keyed sampler with
    # sampling key ``key`` (``t = None``: every row, a full batch).  A query sends
    # the model (and a search's direction) only on the columns the worker's rows
    # of the lot read: the lot's union, or the support when that is smaller to
    # ship (:func:`sends_support`; always for a full batch), in sorted order.
    # Every query returns one result per shard, in shard order, for the driver
    # to add.  The driver knows each shard's columns of a lot (and so a
    # gradient partial travels without its indices) for a full batch (the
    # shard supports, learnt once) and for a lot whose own columns are sent
    # (learnt from :meth:`lot_columns`).

    def _on_support(self, lot):
        """Whether queries on a (mini-batch) ``lot`` carry the model on the whole support."""
        _, union = self._resolve(*lot)
        return sends_support(union.size, self._support[1].size)

    def _sent_columns(self, lot):
        """The columns a query on ``lot`` carries the model on (see above)."""
        if lot[1] is None or self._on_support(lot):
            return self._support[1]
        return self._resolve(*lot)[1]

    def lot_columns(self, lot):
        """``(rows of lot in each shard, per shard the sorted columns its rows read)``, the
        columns None when the lot's queries carry the model on the support: what the
        driver learns once per lot."""
        lots, _ = self._resolve(*lot)
        on_support = lot[1] is None or self._on_support(lot)
        return [int(rows.size) for rows, _ in lots], (None if on_support else
                                                      [cols for _, cols in lots])

    def _place(self, lot, values, scratch):
        """``scratch`` holding ``values`` on the lot's sent columns (other entries are never
        read by the lot's rows)."""
        scratch[self._sent_columns(lot)] = values
        return scratch

    def gradient_sums(self, lot, w_values, clip):
        """Per shard: ``(cols, sum of clip(grad_i, clip) on cols)`` over the rows of ``lot``
        (the single-machine kernel, :meth:`fastdp.solvers.glm_oracle.GlmOracle.clipped_gradient_sum`),
        at the model ``w_values`` on the lot's sent columns.

        Returns ``(partials, rows of lot in each shard, ahead)``, ``ahead`` being
        :meth:`lot_columns` of the next lot ``(key, t + 1)`` (None for a full batch): a
        solver's next lot is reported with this reply, not in a round trip of its own.
        A partial's ``cols`` is None when the driver knows them (see above).
        """
        s = self.setup
        w = self._place(lot, w_values, self._theta)
        partials = []
        lots, _ = self._resolve(*lot)
        known = lot[1] is None or not self._on_support(lot)
        for (rows, cols), (_, X, y, token) in zip(lots, self.shards):
            _glm.clipped_gradient_sum(X.data, X.indices, X.indptr, y, rows, w, s.loss_code,
                                      float(clip), self._out, s.num_threads,
                                      check_structure=token)
            partials.append((None if known else cols, self._out[cols].copy()))
            self._out[cols] = 0.0
        ahead = None if lot[1] is None else self.lot_columns((lot[0], lot[1] + 1))
        return partials, [int(rows.size) for rows, _ in lots], ahead

    def _margins(self, X, token, rows, v):
        out = np.empty(rows.shape[0])
        _glm.margins(X.data, X.indices, X.indptr, rows, v, out,
                     num_threads=self.setup.num_threads, check_structure=token)
        return out

    def loss_sums(self, lot, w_values, g_values, etas, c_obj):
        """Per shard: the K + 1 clipped loss sums at ``w`` and ``w - etas[k] g`` over the rows
        of ``lot`` (:func:`fastdp._kernels._line_search.clipped_loss_sums`); ``w_values`` and
        ``g_values`` on the lot's sent columns."""
        if self._direction is None:
            self._direction = np.zeros(self._theta.shape[0])
        w = self._place(lot, w_values, self._theta)
        g = self._place(lot, g_values, self._direction)
        etas = np.ascontiguousarray(etas, dtype=np.float64)
        parts = []
        for (rows, _), (_, X, y, token) in zip(self._resolve(*lot)[0], self.shards):
            out = np.empty(etas.shape[0] + 1)
            _line_search.clipped_loss_sums(self._margins(X, token, rows, w),
                                           self._margins(X, token, rows, g),
                                           np.ascontiguousarray(y[rows]), etas,
                                           self.setup.loss_code, float(c_obj), out)
            parts.append(out)
        return parts

    def support_loss_totals(self, values, loss):
        """:meth:`loss_totals` at the model ``values`` on :meth:`support` (full batch)."""
        return self.loss_totals(self._place((None, None), values, self._theta), loss)

    def loss_totals(self, w, loss):
        """Per shard: ``sum_i loss(x_i . w, y_i)`` over all its rows (a non-private
        diagnostic: ``record_history``).  ``w`` of shape (d, K) with ``loss=None``: the
        multinomial (softmax cross-entropy) loss."""
        from fastdp.losses import get_loss

        totals = []
        for _, X, y, token in self.shards:
            if loss is None:
                from fastdp.solvers.multinomial import multinomial_objective
                totals.append(multinomial_objective(np.asarray(w).T, X, y, 0.0) * X.shape[0])
                continue
            z = self._margins(X, token, np.arange(X.shape[0], dtype=np.int64),
                              np.ascontiguousarray(w, dtype=np.float64))
            totals.append(float(np.sum(get_loss(loss).value(z, y))))
        return totals
