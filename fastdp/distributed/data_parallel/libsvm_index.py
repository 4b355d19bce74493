"""A row index of a LIBSVM file: which byte range holds rows ``[start, stop)``.

Sampling is keyed by fixed blocks of rows, so a shard is a range of whole row
blocks, while a file is read by byte ranges.  :class:`LibsvmIndex` connects the
two without ever holding a row:

1. The file is cut into ``C`` byte chunks (``chunk_bytes`` each, at least one
   per counting task).  A *line belongs to the chunk holding its first byte*;
   a *data line* is one whose first non-blank character exists and is not
   ``#`` (comment-only, blank and whitespace-only lines are not rows, as for
   :func:`fastdp.io.libsvm.load_libsvm`); a last line without a newline is
   a line like any other.
2. **Counting pass** (:func:`count_chunk_rows`): every chunk's data lines are
   counted from its newlines (a vectorised scan) and the first byte of each
   line (a line that begins with blanks is looked at further), reading the
   chunk plus the rest of its last line.
   The chunks are counted by the engine's workers, each task a run of
   consecutive chunks (Ray tasks spread over the nodes, or in this process),
   so the file is read once, in parallel, and only O(C) numbers come back.
3. The driver adds the counts: ``rows[c]`` is the global number of the first
   row of chunk c (``rows[C]`` = the file's row count).
4. **Locating** row r (:meth:`LibsvmIndex.position`): the worker that loads a
   shard scans the one chunk holding r for the start of its data line (at
   most ``chunk_bytes`` read, twice per shard).  The shard is then read with
   ``load_libsvm(offset=, length=)`` over exactly the lines ``[start of row a,
   start of row b)`` (a line belongs to a range when the newline before it
   lies in the range, scikit-learn's rule), so no worker streams the file
   from its start and no row is read twice.

Chosen over an index of every row (8 bytes per row on the driver) and over a
driver-only count (the driver would read the whole file): O(file / chunk)
numbers on the driver, one parallel read of the file, and at most two chunks
re-read per shard.  The index records the file's size and modification time;
a file that changed since it was indexed is refused when a shard is loaded.

Privacy: counting rows reads the private file but releases only n (public in
every fastdp fit); no budget is spent.
"""

import dataclasses
import os

import numpy as np

from fastdp.exceptions import ValidationError

__all__ = ["DEFAULT_CHUNK_BYTES", "LibsvmIndex", "chunk_bounds", "chunk_data_starts",
           "count_chunk_rows", "index_libsvm"]

DEFAULT_CHUNK_BYTES = 4 << 20
_BLANK = np.frombuffer(b" \t\r\x0b\x0c", dtype=np.uint8)   # bytes.strip()'s blanks but \n
_HASH = ord("#")


def _file_stamp(path):
    st = os.stat(path)
    return int(st.st_size), int(st.st_mtime_ns)


_MAX_CHUNKS = 1 << 16   # chunks a file may be cut into when chunk_bytes is below the default


def chunk_bounds(size, n_chunks):
    """``n_chunks + 1`` byte positions cutting ``[0, size)`` into nearly equal chunks."""
    n_chunks = max(1, min(int(n_chunks), max(int(size), 1)))
    return [(int(size) * c) // n_chunks for c in range(n_chunks + 1)]


def chunk_data_starts(path, start, stop):
    """Byte positions (int64, absolute, sorted) of the data lines starting in ``[start, stop)``.

    Reads bytes ``[start - 1, stop)`` (and, when the last line begun before
    ``stop`` starts with blanks, the rest of it); never the whole file.
    """
    with open(path, "rb") as fh:
        base = max(int(start) - 1, 0)
        fh.seek(base)
        buf = fh.read(max(int(stop) - base, 0))
        arr = np.frombuffer(buf, dtype=np.uint8)
        starts = np.flatnonzero(arr == 10) + 1
        if base == 0 and start == 0:
            starts = np.concatenate(([0], starts))
        starts = starts[(starts + base >= start) & (starts < arr.size)]
        # a line's first byte decides, unless it is blank (rare: then its first non-blank byte)
        first = arr[starts]
        data = (first != 10) & (first != _HASH)
        for i in np.flatnonzero(np.isin(first, _BLANK)):
            end = buf.find(b"\n", int(starts[i]))
            line = buf[int(starts[i]):] + fh.readline() if end < 0 else buf[int(starts[i]):end]
            body = line.lstrip(bytes(_BLANK))
            data[i] = bool(body) and body[:1] not in (b"#", b"\n")
    return (starts[data] + base).astype(np.int64)


def count_chunk_rows(path, bounds):
    """Data lines of each chunk ``[bounds[i], bounds[i + 1])`` (one counting task)."""
    return [int(chunk_data_starts(path, a, b).size) for a, b in zip(bounds[:-1], bounds[1:])]


@dataclasses.dataclass(frozen=True)
class LibsvmIndex:
    """Chunk starts and the global number of each chunk's first data row (module docstring).

    Attributes
    ----------
    path : str
    offsets : tuple of int
        ``C + 1`` byte positions (0, ..., file size).
    rows : tuple of int
        ``C + 1`` row numbers: ``rows[c]`` data rows precede chunk c; ``rows[C]``
        is the file's row count.
    stamp : (int, int)
        The file's size and modification time (ns) when it was indexed.
    """

    path: str
    offsets: tuple
    rows: tuple
    stamp: tuple

    @property
    def n_rows(self):
        return int(self.rows[-1])

    def check_unchanged(self):
        """ValidationError if the file's size or modification time changed since indexing."""
        if _file_stamp(self.path) != tuple(self.stamp):
            raise ValidationError(f"{self.path!r} changed since its rows were counted; "
                                  "build the source again.")

    def position(self, row):
        """Byte position of the start of data row ``row`` (the file size for ``row = n_rows``)."""
        row = int(row)
        if not 0 <= row <= self.n_rows:
            raise ValidationError(f"row {row} is outside the {self.n_rows} rows of {self.path!r}.")
        if row == self.n_rows:
            return int(self.offsets[-1])
        c = int(np.searchsorted(self.rows, row, side="right")) - 1
        while self.rows[c + 1] == self.rows[c]:   # skip chunks without rows
            c += 1
        starts = chunk_data_starts(self.path, self.offsets[c], self.offsets[c + 1])
        return int(starts[row - self.rows[c]])

    def byte_range(self, start, stop):
        """``(offset, length)`` for ``load_libsvm`` reading exactly rows ``[start, stop)``.

        ``length`` is -1 (to the end of the file) when ``stop`` is the last row;
        ``None`` when the range is empty.
        """
        if stop <= start:
            return None
        a, b = self.position(start), self.position(stop)
        # lines whose preceding newline lies in [a - 1, b - 1): the lines starting in [a, b)
        offset = max(a - 1, 0)
        if stop == self.n_rows:
            return offset, -1
        length = (b - 1) - offset
        return offset, length


def index_libsvm(path, *, n_tasks=1, chunk_bytes=DEFAULT_CHUNK_BYTES, run_tasks=None):
    """Build the :class:`LibsvmIndex` of a plain LIBSVM file (module docstring).

    Parameters
    ----------
    path : str
    n_tasks : int
        Counting tasks (each a run of consecutive chunks); at least one chunk per task.
    chunk_bytes : int
        Bytes per chunk (the most a shard load re-reads per boundary).
    run_tasks : callable, optional
        ``run_tasks(function, list of argument tuples) -> list of results``
        (an executor's, e.g. Ray tasks); default: in this process.
    """
    path = os.fspath(path)
    if int(chunk_bytes) < 1:
        raise ValidationError(f"chunk_bytes must be >= 1; got {chunk_bytes!r}.")
    with open(path, "rb") as fh:
        magic = fh.read(6)
    if magic[:2] == b"\x1f\x8b" or magic[:3] == b"BZh" or magic == b"\xfd7zXZ\x00":
        raise ValidationError(f"{path!r} is compressed: byte ranges need a plain LIBSVM file "
                              "(decompress it, or convert it with fastdp convert).")
    stamp = _file_stamp(path)
    size = stamp[0]
    # the index holds O(chunks) numbers and each chunk costs a read: a tiny chunk_bytes on a
    # large file (1 byte: one chunk per byte) would not finish; more chunks than the default
    # makes are allowed up to _MAX_CHUNKS
    smallest = min(DEFAULT_CHUNK_BYTES, -(-size // _MAX_CHUNKS))
    if int(chunk_bytes) < smallest:
        raise ValidationError(
            f"chunk_bytes={chunk_bytes!r} would cut {path!r} ({size} bytes) into more than "
            f"{_MAX_CHUNKS} chunks; use chunk_bytes >= {smallest} (default "
            f"{DEFAULT_CHUNK_BYTES}).")
    n_chunks = max(int(n_tasks), -(-size // int(chunk_bytes)))
    offsets = chunk_bounds(size, n_chunks)
    n_tasks = max(1, min(int(n_tasks), len(offsets) - 1))
    edges = chunk_bounds(len(offsets) - 1, n_tasks)
    args = [(path, offsets[edges[k]:edges[k + 1] + 1]) for k in range(n_tasks)]
    counts = (run_tasks or (lambda f, a: [f(*x) for x in a]))(count_chunk_rows, args)
    per_chunk = [c for part in counts for c in part]
    rows = np.concatenate(([0], np.cumsum(per_chunk, dtype=np.int64)))
    return LibsvmIndex(path, tuple(int(o) for o in offsets), tuple(int(r) for r in rows), stamp)
