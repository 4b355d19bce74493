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

__all__ = ["WorkerSetup", "ShardWorker", "row_entries", "rows_columns"]


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

    ``marks``: optional all-False bool scratch array of length ``X.shape[1]``;
    when the rows hold many entries, the columns are found by marking it
    (O(entries + n_features)) instead of sorting (O(entries log entries)); it
    is left all-False.
    """
    positions, _ = row_entries(X, rows)
    total = positions.size
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    entries = X.indices[positions]
    if marks is None or 8 * total < marks.shape[0]:
        return np.unique(entries).astype(np.int64, copy=False)
    marks[entries] = True
    cols = np.flatnonzero(marks)
    marks[cols] = False
    return cols.astype(np.int64, copy=False)


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
        self._lot = None

    def ping(self):
        return True

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
        self._marks = np.zeros(width, dtype=bool)
        self._streams = keyed_streams(setup.sampling_key)
        self._lot = None
        self._dual = None if setup.dual is None else [setup.dual.start(X) for _, X, _, _ in shards]
        self._keyed_lot = None
        return "ok", None

    def checkpoint(self):
        """A copy of this worker's private state (dual DP-SCD: alpha of each shard), or None."""
        return None if self._dual is None else [state.checkpoint() for state in self._dual]

    def restore(self, states):
        """Reset the private state to a :meth:`checkpoint` (None: the start of the run)."""
        if self._dual is not None:
            for state, saved in zip(self._dual, states or [None] * len(self._dual)):
                state.restore(saved)
        self._lot = None
        return True

    def columns(self, t):
        """Sorted distinct columns the rows of lot ``t`` read in this worker's shards."""
        s = self.setup
        lots = []
        for spec, X, _, _ in self.shards:
            rows = s.sampler.lot(self._streams, s.n_rows, t, spec.start, spec.stop) - spec.start
            lots.append((rows, rows_columns(X, rows, self._marks)))
        cols = [c for _, c in lots]
        union = cols[0] if len(cols) == 1 else np.unique(np.concatenate(cols))
        self._lot = (t, lots, union)
        return union

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
        if self._lot is None or self._lot[0] != t:
            self.columns(t)
        _, lots, union = self._lot
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
    # sampling key ``key`` (``t = None``: every row, a full batch).  Every query
    # returns one result per shard, in shard order, for the driver to add.

    def _lot_rows(self, lot):
        """Shard-local rows of ``lot`` in each shard (the last lot is cached)."""
        key, t = lot
        if t is None:
            return [np.arange(spec.n_rows, dtype=np.int64) for spec, _, _, _ in self.shards]
        ident = (np.asarray(key, dtype=np.uint64).tobytes(), int(t))
        if self._keyed_lot is None or self._keyed_lot[0] != ident:
            s = self.setup
            streams = keyed_streams(np.asarray(key, dtype=np.uint64))
            rows = [s.sampler.lot(streams, s.n_rows, int(t), spec.start, spec.stop) - spec.start
                    for spec, _, _, _ in self.shards]
            self._keyed_lot = (ident, rows)
        return self._keyed_lot[1]

    def lot_sizes(self, lot):
        """Rows of ``lot`` in each shard."""
        return [int(rows.size) for rows in self._lot_rows(lot)]

    def gradient_sums(self, lot, w, clip):
        """Per shard: ``(cols, sum of clip(grad_i, clip) on cols)`` over the rows of ``lot``
        (the single-machine kernel, :meth:`fastdp.solvers.glm_oracle.GlmOracle.clipped_gradient_sum`),
        and the rows of ``lot`` in each shard."""
        s = self.setup
        w = np.ascontiguousarray(w, dtype=np.float64)
        partials = []
        lots = self._lot_rows(lot)
        for rows, (_, X, y, token) in zip(lots, self.shards):
            _glm.clipped_gradient_sum(X.data, X.indices, X.indptr, y, rows, w, s.loss_code,
                                      float(clip), self._out, s.num_threads,
                                      check_structure=token)
            cols = rows_columns(X, rows, self._marks)
            partials.append((cols, self._out[cols].copy()))
            self._out[cols] = 0.0
        return partials, [int(rows.size) for rows in lots]

    def _margins(self, X, token, rows, v):
        out = np.empty(rows.shape[0])
        _glm.margins(X.data, X.indices, X.indptr, rows, v, out,
                     num_threads=self.setup.num_threads, check_structure=token)
        return out

    def loss_sums(self, lot, w, g, etas, c_obj):
        """Per shard: the K + 1 clipped loss sums at ``w`` and ``w - etas[k] g`` over the rows
        of ``lot`` (:func:`fastdp._kernels._line_search.clipped_loss_sums`)."""
        w = np.ascontiguousarray(w, dtype=np.float64)
        g = np.ascontiguousarray(g, dtype=np.float64)
        etas = np.ascontiguousarray(etas, dtype=np.float64)
        parts = []
        for rows, (_, X, y, token) in zip(self._lot_rows(lot), self.shards):
            out = np.empty(etas.shape[0] + 1)
            _line_search.clipped_loss_sums(self._margins(X, token, rows, w),
                                           self._margins(X, token, rows, g),
                                           np.ascontiguousarray(y[rows]), etas,
                                           self.setup.loss_code, float(c_obj), out)
            parts.append(out)
        return parts

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
