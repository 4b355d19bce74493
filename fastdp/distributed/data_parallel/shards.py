"""Shards of a data-parallel run: row ranges of whole sampling blocks, loaded where they are used.

A *source* describes the data without holding it: the number of rows, the
block size, and a *row loader*, a picklable callable
``loader(start, stop) -> (X, y)`` that returns rows ``[start, stop)``
(``X`` any CSR-convertible matrix, ``y`` the labels).  Each worker calls the
loader for its own shards, so the rows never pass through the driver.  Three
loaders are provided: :class:`LibsvmRows` (a row range of a LIBSVM file, read
as one byte range located by a row index, :mod:`.libsvm_index`),
:class:`BinaryRows` (a row range of a binary dataset made by ``fastdp
convert``, sliced out of its memory maps: the best choice for large data) and
:class:`ArrayRows` (an in-memory matrix, for the single-machine path and
tests).  Any user callable with that signature works.

Privacy: loading and checking release nothing.  A shard that fails its checks
stops the run with :class:`ShardValidationError` naming it, before the run's
privacy budget is reserved and before any noise is drawn.
"""

import dataclasses
import os

import numpy as np
import scipy.sparse as sp

from fastdp.exceptions import ValidationError
from fastdp.sampling_blocks import DEFAULT_BLOCK_SIZE, block_ranges, default_shard_count

__all__ = ["ShardValidationError", "ShardSpec", "Source", "LibsvmRows", "BinaryRows", "ArrayRows",
           "count_libsvm_rows", "libsvm_source", "binary_source", "array_source", "load_shard"]


class ShardValidationError(ValidationError):
    """A shard's rows failed their checks (the message names the shard)."""


@dataclasses.dataclass(frozen=True)
class ShardSpec:
    """Shard ``index``: rows ``[start, stop)`` of the source (whole sampling blocks)."""

    index: int
    start: int
    stop: int

    @property
    def n_rows(self):
        return self.stop - self.start


@dataclasses.dataclass(frozen=True)
class Source:
    """Where the rows are: ``n_rows`` rows cut into ``n_shards`` shards of whole blocks.

    Attributes
    ----------
    loader : callable
        ``loader(start, stop) -> (X, y)``, picklable (it is sent to the workers).
    n_rows : int
        Rows of the data set (public, as in every fastdp fit).
    n_shards : int
        Shards (units of loading and of reduction: partial sums are added in
        shard order, so a run's bits depend on ``n_shards``, not on the
        number of workers).
    block_size : int
        Rows per sampling block (:class:`~fastdp.sampling_blocks.BlockPoissonSampler`).
    name : str
        For messages (e.g. the file name).
    n_features : int or None
        Columns, if known; otherwise the largest column index seen plus one.
    zero_based : bool or "auto"
        Whether the loader's column indices start at 0 (LIBSVM); ``"auto"``:
        one-based unless some shard has a column 0 (scikit-learn's rule,
        applied to the whole data set, not shard by shard).
    """

    loader: object
    n_rows: int
    n_shards: int = 1
    block_size: int = DEFAULT_BLOCK_SIZE
    name: str = "data"
    n_features: object = None
    zero_based: object = True

    def shards(self):
        """The :class:`ShardSpec` of every shard, in order."""
        return [ShardSpec(i, a, b) for i, (a, b) in
                enumerate(block_ranges(self.n_rows, self.block_size, self.n_shards))]

    def describe(self, spec):
        return f"shard {spec.index} (rows {spec.start}..{spec.stop - 1} of {self.name})"


def _data_line(line):
    body = line.split(b"#", 1)[0].strip()
    return bool(body)


def count_libsvm_rows(path):
    """Data lines of a LIBSVM file (comments and blank lines skipped), reading it in one pass."""
    with open(path, "rb") as fh:
        return sum(1 for line in fh if _data_line(line))


_WIDE = 2**31 - 1   # a range load needs a width; the real one is decided by the run


@dataclasses.dataclass(frozen=True)
class LibsvmRows:
    """Row loader of a (plain-text) LIBSVM file: rows ``[start, stop)`` read as one byte range.

    The rows are located with a :class:`~.libsvm_index.LibsvmIndex` (chunk
    starts and their row numbers; see that module): the loader scans at most
    the chunk holding ``start`` and the one holding ``stop``, then parses
    exactly the bytes of those rows (``load_libsvm(offset=, length=)``), never
    the file from its start.  Without ``index``, one is built in this
    process at each call (a counting pass over the file, no parsing).

    Parameters
    ----------
    path : str
    dtype : numpy dtype, default=float64
    index : LibsvmIndex, optional
    """

    path: str
    dtype: object = np.float64
    index: object = None

    def __call__(self, start, stop):
        from fastdp.distributed.data_parallel.libsvm_index import index_libsvm
        from fastdp.io.libsvm import load_libsvm

        index = self.index if self.index is not None else index_libsvm(self.path)
        index.check_unchanged()
        span = index.byte_range(start, min(stop, index.n_rows))
        if span is None:
            return sp.csr_matrix((0, 1)), np.zeros(0)
        # zero_based=True keeps the indices as written; the run decides the shift globally
        X, y = load_libsvm(self.path, n_features=_WIDE, zero_based=True, dtype=self.dtype,
                           offset=span[0], length=span[1])
        width = int(X.indices.max()) + 1 if X.nnz else 1
        return sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], width)), y


@dataclasses.dataclass(frozen=True)
class BinaryRows:
    """Row loader of a binary dataset (``*.fdp``): rows ``[start, stop)`` out of its memory maps.

    Each call maps the directory's arrays (checking the header's SHA-256 and
    every file's dtype, length and size) and copies out only the rows asked
    for (:func:`fastdp.io.binary.open_binary_rows`); the shard's rows are then
    checked in full by :func:`load_shard`, so damage inside a shard is named
    there even though whole-file opens trust the conversion's checks.

    Parameters
    ----------
    path : str
        The dataset directory; every worker must be able to read it.
    """

    path: str

    def __call__(self, start, stop):
        from fastdp.io.binary import open_binary_rows

        return open_binary_rows(self.path, start, stop)


@dataclasses.dataclass(frozen=True, eq=False)
class ArrayRows:
    """Row loader of an in-memory matrix (the single-machine path, tests).

    ``offset``: the global number of the first row held (a part made by
    :meth:`part` holds rows ``[offset, offset + len(y))`` only).
    """

    X: object
    y: object
    offset: int = 0

    def __call__(self, start, stop):
        a, b = start - self.offset, stop - self.offset
        if a < 0 or b > np.asarray(self.y).shape[0]:
            raise ValidationError(f"rows [{start}, {stop}) are not in this part (rows "
                                  f"{self.offset}..{self.offset + len(self.y) - 1}).")
        return self.X[a:b], np.asarray(self.y)[a:b]

    def part(self, start, stop):
        """An :class:`ArrayRows` holding only rows ``[start, stop)``, sharing X's memory.

        CSR: views of ``data`` and ``indices`` and a new ``indptr`` (O(rows));
        dense: a view of the rows.  What a remote worker is sent instead of
        all of X (:class:`~.executors.RayWorkers`).
        """
        a, b = start - self.offset, stop - self.offset
        y = np.asarray(self.y)[a:b]
        if sp.issparse(self.X):
            X = self.X.tocsr() if self.X.format != "csr" else self.X
            lo, hi = int(X.indptr[a]), int(X.indptr[b])
            part = _CsrRows(X.data[lo:hi], X.indices[lo:hi], X.indptr[a:b + 1] - lo,
                            (b - a, X.shape[1]))
            return ArrayRows(part, y, start)
        return ArrayRows(self.X[a:b], y, start)


@dataclasses.dataclass(frozen=True, eq=False)
class _CsrRows:
    """The arrays of some CSR rows (views where possible); sliced as a CSR matrix."""

    data: object
    indices: object
    indptr: object
    shape: tuple

    def __getitem__(self, rows):
        matrix = sp.csr_matrix((self.data, self.indices, self.indptr), shape=self.shape,
                               copy=False)
        return matrix[rows]


def libsvm_source(path, *, n_shards=None, block_size=DEFAULT_BLOCK_SIZE, n_features=None,
                  zero_based="auto", n_rows=None, engine=None, chunk_bytes=None):
    """A :class:`Source` over a plain LIBSVM file; its rows are counted, never held.

    The rows are counted by chunks of ``chunk_bytes`` (default 4 MiB) into a
    :class:`~.libsvm_index.LibsvmIndex`: by ``engine``'s workers in parallel
    (Ray tasks, one per worker) or in this process without ``engine``.  Each
    worker then reads its shards as byte ranges (:class:`LibsvmRows`).
    ``n_rows`` overrides the counted number (the shards are cut for it; a
    shard the file cannot fill stops the run with ``ShardValidationError``).
    ``n_shards`` None: :func:`~fastdp.sampling_blocks.default_shard_count` (a
    rule of the data: the same model on any number of workers up to it).
    """
    from fastdp.distributed.data_parallel.libsvm_index import DEFAULT_CHUNK_BYTES, index_libsvm

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ValidationError(f"no such file: {path!r}.")
    run_tasks = getattr(engine, "run_tasks", None)
    index = index_libsvm(path, n_tasks=getattr(engine, "n_workers", 1),
                         chunk_bytes=chunk_bytes or DEFAULT_CHUNK_BYTES, run_tasks=run_tasks)
    n = index.n_rows if n_rows is None else int(n_rows)
    if n < 1:
        raise ValidationError(f"{path!r} has no data rows.")
    n_shards = default_shard_count(n, block_size) if n_shards is None else n_shards
    return Source(LibsvmRows(path, index=index), n, int(n_shards), int(block_size),
                  os.path.basename(path), n_features, zero_based)


def binary_source(path, *, n_shards=None, block_size=DEFAULT_BLOCK_SIZE):
    """A :class:`Source` over a binary dataset (``fastdp convert``); reads its header only.

    ``n_rows`` and ``n_features`` come from the checked header (O(1)); the
    labels and the rows are read by the workers, each its own shards.
    Column indices are zero-based (the format stores them so).

    Raises
    ------
    ValidationError
        A missing directory or a missing, edited or damaged header.
    """
    from fastdp.io.binary import binary_shape

    path = os.fspath(path)
    n, d = binary_shape(path)
    if n < 1:
        raise ValidationError(f"{path!r} has no data rows.")
    n_shards = default_shard_count(n, block_size) if n_shards is None else n_shards
    return Source(BinaryRows(path), n, int(n_shards), int(block_size),
                  os.path.basename(os.path.normpath(path)), d, True)


def array_source(X, y, *, n_shards=None, block_size=DEFAULT_BLOCK_SIZE, name="X"):
    """A :class:`Source` over in-memory ``(X, y)`` (``X`` already validated, columns zero-based).

    ``n_shards`` None: :func:`~fastdp.sampling_blocks.default_shard_count`.

    ``X`` may be an estimator's mapped rows (:class:`fastdp._mapped_rows.MappedRows`,
    e.g. a fit with ``sampler="block_poisson"`` given by name): they are written out
    once as CSR, which the shard loader slices.
    """
    from fastdp._mapped_rows import is_mapped_rows

    if is_mapped_rows(X):
        X = X.tocsr()
    n_shards = default_shard_count(X.shape[0], block_size) if n_shards is None else n_shards
    return Source(ArrayRows(X, y), int(X.shape[0]), int(n_shards), int(block_size), name,
                  int(X.shape[1]), True)


def load_shard(source, spec):
    """Load and check one shard's raw rows; returns ``(X csr, y float64, summary)``.

    The summary (public facts the driver combines): ``n_rows``, ``max_col``
    (largest column index, -1 if none), ``has_col0``, ``labels`` (sorted
    distinct labels).

    Raises
    ------
    ShardValidationError
        The loader failed, returned the wrong number of rows, or the rows
        are not finite numbers; the message names the shard.
    """
    from fastdp._validation import check_X

    where = source.describe(spec)
    try:
        X, y = source.loader(spec.start, spec.stop)
        X = check_X(sp.csr_matrix(X) if not sp.issparse(X) else X)
        y = np.asarray(y, dtype=np.float64).reshape(-1)
    except ShardValidationError:
        raise
    except (ValidationError, ValueError, TypeError, OSError) as exc:
        raise ShardValidationError(f"{where}: {exc}") from exc
    if X.shape[0] != spec.n_rows or y.shape[0] != spec.n_rows:
        raise ShardValidationError(
            f"{where}: the loader returned {X.shape[0]} rows and {y.shape[0]} labels; expected "
            f"{spec.n_rows} (did the data change since it was counted?).")
    if not np.all(np.isfinite(y)):
        raise ShardValidationError(f"{where}: labels must be finite numbers.")
    summary = {"n_rows": spec.n_rows,
               "max_col": int(X.indices.max()) if X.nnz else -1,
               "has_col0": bool(X.nnz and X.indices.min() == 0),
               "labels": np.unique(y)}
    return X, y, summary
