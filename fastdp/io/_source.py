"""The bytes of a LIBSVM source, delivered as chunks of whole lines.

One reused buffer (:data:`CHUNK_BYTES`, grown only for a line longer than
it) is filled from the source and handed out as a numpy view of the whole
lines it holds; the partial line at its end is carried into the next fill.
Nothing is ever held whole:

* a plain file is read (never memory-mapped: a map that another program
  truncates kills the reader with SIGBUS); its size and modification time are
  taken when it is opened and checked again at the end, and no byte past the
  size seen at the start is accepted, so a file that changes while it is read
  is a clear error instead of a silently partial dataset;
* gzip, bzip2 and xz files (recognised by their first bytes, not by their
  name) are streamed through the decompressor;
* a binary file object (or a pipe) is read the same way, without the size
  checks.

Byte ranges follow scikit-learn's ``load_svmlight_file(offset=, length=)``:
the bytes before ``offset`` and the rest of the line that contains byte
``offset`` are skipped (when ``offset > 0``), and reading stops after the
line that contains byte ``offset + length`` (when ``length > 0``).  Offsets
count decompressed bytes.  So a line belongs to the range when the newline
that precedes it (position -1 for the first line) lies in
``[offset, offset + length)`` (``[-1, length)`` for ``offset = 0``), and
consecutive ranges that tile the file give every line exactly once.

Privacy: reads the private data; releases nothing.
"""

import bz2
import gzip
import io
import lzma
import os
import stat
import zlib

import numpy as np

from fastdp.exceptions import ValidationError
from fastdp.io._hashing import BackgroundHasher

__all__ = ["CHUNK_BYTES", "MAX_LINE_BYTES", "MAX_EXPANSION", "LineChunks"]

#: Size of the reused text buffer (bytes).  Each chunk is parsed while it is in
#: the CPU cache; a line longer than the buffer doubles it for that line.
CHUNK_BYTES = 1 << 20

#: Longest line a source may hold (bytes; the ``max_line_bytes`` default).  A
#: LIBSVM row of a million non-zeros takes about 16 MB; a longer "line" is
#: almost surely not data (a file of NULs, a corrupt or hostile file), and the
#: parser needs a few times its length in memory.
MAX_LINE_BYTES = 1 << 28

#: Largest ratio of decompressed to compressed bytes (the ``max_expansion``
#: default), allowed after the first MiB: LIBSVM text compresses about 3-20x;
#: a file that expands hundreds of times is a decompression bomb.
MAX_EXPANSION = 200

_COMPRESSIONS = (
    (b"\x1f\x8b", "gzip", lambda raw: gzip.GzipFile(fileobj=raw, mode="rb")),
    (b"BZh", "bzip2", lambda raw: bz2.BZ2File(raw, mode="rb")),
    (b"\xfd7zXZ\x00", "xz", lambda raw: lzma.LZMAFile(raw, mode="rb")),
)
_MAGIC_BYTES = max(len(magic) for magic, _, _ in _COMPRESSIONS)
_DECOMPRESSION_ERRORS = (EOFError, OSError, ValueError, lzma.LZMAError, zlib.error)


def _changed_while_reading(name, detail):
    return ValidationError(
        f"{name} changed while it was being read ({detail}); another program is writing, "
        "truncating or replacing it. Load it again once it is complete (or load a copy).")


def _positive(name, value, default):
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not value > 0:
        raise ValidationError(f"{name} must be a number > 0; got {value!r}.")
    return int(value) if name == "max_line_bytes" else float(value)


class _RawReader(io.RawIOBase):
    """The raw (possibly compressed) bytes of the source, counted as they are read.

    Counts the bytes (for progress and size estimates), hashes them when
    asked, and refuses a byte beyond ``size`` (the size seen at open) when it
    is known: one byte more than the size is asked for, which must not exist.

    The hasher (a :class:`~fastdp.io._hashing.BackgroundHasher`) is given a
    copy of the bytes read unless ``stable`` is true: then it is given a view
    of the caller's buffer, which the caller (:class:`LineChunks`, the only
    reader of a plain source) leaves unchanged until the hasher's ``wait``.
    """

    def __init__(self, handle, name, size, hasher, progress):
        super().__init__()
        self._handle = handle
        self._name = name
        self._size = size
        self._hasher = hasher
        self._progress = progress
        self._pending = b""  # bytes read ahead to recognise the compression
        self.consumed = 0
        self.stable = False  # see the class docstring

    def readable(self):
        return True

    def _read_handle(self, view):
        if hasattr(self._handle, "readinto"):
            return self._handle.readinto(view) or 0
        data = self._handle.read(len(view))
        if isinstance(data, str):
            raise ValidationError(
                "open the file in binary mode ('rb') before passing it to load_libsvm")
        view[: len(data)] = data
        return len(data)

    def readinto(self, buffer):
        view = memoryview(buffer).cast("B")
        if self._pending:
            got = min(len(view), len(self._pending))
            view[:got] = self._pending[:got]
            self._pending = self._pending[got:]
            return got
        want = len(view)
        if self._size is not None:
            want = min(want, self._size + 1 - self.consumed)
            if want <= 0:
                return 0
        got = self._read_handle(view[:want])
        if got:
            if self._hasher is not None:
                self._hasher.update(view[:got] if self.stable else bytes(view[:got]))
            self.consumed += got
            if self._size is not None and self.consumed > self._size:
                raise _changed_while_reading(self._name, f"it has more than {self._size} bytes")
            if self._progress is not None:
                self._progress(got)
        return got

    def head(self):
        """The first bytes (for the compression magic), read ahead and replayed."""
        buffer = bytearray(_MAGIC_BYTES)
        filled = 0
        while filled < _MAGIC_BYTES:
            got = self.readinto(memoryview(buffer)[filled:])
            if not got:
                break
            filled += got
        self._pending = bytes(buffer[:filled])
        return self._pending


class LineChunks:
    """Whole-line chunks of a LIBSVM source (a context manager and an iterator).

    Parameters
    ----------
    source : str, path-like or binary file object
    offset, length : int
        Byte range (decompressed bytes), as scikit-learn's: see the module
        docstring.  ``length <= 0`` reads to the end.
    buffer_bytes : int
        Size of the reused buffer.
    sha256 : bool
        Hash the raw bytes (only when the whole source is read: offset 0,
        length -1); the hex digest is :attr:`sha256` after the last chunk.
        The hash runs on a background thread, overlapping the parsing of the
        chunks (:mod:`fastdp.io._hashing`); the thread is joined by the last
        chunk, by :meth:`close` and when the iteration stops early.
    progress : callable, optional
        Called with the number of raw bytes read each time some are.
    max_line_bytes : int, optional
        Longest line accepted (default :data:`MAX_LINE_BYTES`); a longer one is
        a ValidationError before the buffer grows past it.
    max_expansion : float, optional
        Compressed sources: most decompressed bytes per compressed byte read
        (default :data:`MAX_EXPANSION`; the first MiB is always allowed).

    Attributes
    ----------
    name : str
        The path (or a description of the file object), for messages.
    raw_size : int or None
        Size in bytes of a regular file (compressed size if compressed).
    raw_consumed : int
        Raw bytes read so far (with ``raw_size``, the fraction done).
    compression : str or None
    sha256 : str or None
    """

    def __init__(self, source, *, offset=0, length=-1, buffer_bytes=None, sha256=False,
                 progress=None, max_line_bytes=None, max_expansion=None):
        self.offset = int(offset)
        self.length = int(length)
        self.max_line_bytes = _positive("max_line_bytes", max_line_bytes, MAX_LINE_BYTES)
        self.max_expansion = _positive("max_expansion", max_expansion, MAX_EXPANSION)
        self.buffer_bytes = min(int(buffer_bytes or CHUNK_BYTES), self.max_line_bytes + 1)
        self._decompressed = 0
        if sha256 and (self.offset or self.length > 0):
            raise ValueError("the SHA-256 of a source is computed only when it is read whole")
        self.sha256 = None
        self._hasher = BackgroundHasher() if sha256 else None
        self._progress = progress
        self._owned = None  # the handle we opened (closed on exit)
        self._before = None  # fstat at open, for a regular file
        self._stream = None
        self._seekable_plain = False
        self.compression = None
        self._open(source)

    # ------------------------------------------------------------------ open
    def _open(self, source):
        if hasattr(source, "read"):
            handle = source
            self.name = getattr(source, "name", None) or type(source).__name__
            if not isinstance(self.name, str):
                self.name = type(source).__name__
        else:
            try:
                path = os.fspath(source)
            except TypeError:
                raise ValidationError(
                    f"load_libsvm expects a path or a binary file object, got "
                    f"{type(source).__name__}") from None
            self.name = os.fsdecode(path)
            handle = self._owned = open(path, "rb")
        size = None
        if self._owned is not None:
            info = os.fstat(handle.fileno())
            if stat.S_ISREG(info.st_mode):
                self._before = info
                size = info.st_size
        self.raw_size = size
        self._raw = _RawReader(handle, self.name, size, self._hasher, self._progress)
        head = self._raw.head()
        for magic, kind, opener in _COMPRESSIONS:
            if head.startswith(magic):
                self.compression = kind
                self._stream = opener(self._raw)
                return
        self._stream = self._raw
        self._seekable_plain = size is not None
        self._raw.stable = True  # read only into the buffer of __iter__

    def set_progress(self, callback):
        """Call ``callback(n)`` with the number of raw bytes each time some are read
        (at once for those already read)."""
        self._raw._progress = callback
        if callback is not None and self._raw.consumed:
            callback(self._raw.consumed)

    @property
    def raw_consumed(self):
        return self._raw.consumed

    def close(self):
        if self._hasher is not None:
            self._hasher.close()
        if self._stream is not None and self._stream is not self._raw:
            try:
                self._stream.close()
            except _DECOMPRESSION_ERRORS:
                pass
        if self._owned is not None:
            self._owned.close()
            self._owned = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------ read
    def _readinto(self, view):
        if self.compression is None:
            return self._stream.readinto(view)
        try:
            got = self._stream.readinto(view)
        except ValidationError:
            raise
        except _DECOMPRESSION_ERRORS as exc:
            self._check_unchanged(whole=False)  # a file cut while read: say so
            raise ValidationError(
                f"{self.name} starts like a {self.compression} file but cannot be decompressed: "
                f"{exc}. It is probably truncated or corrupt; download or copy it again."
            ) from exc
        self._decompressed += got or 0
        allowed = self.max_expansion * max(self._raw.consumed, 1 << 20)
        if self._decompressed > allowed:
            raise ValidationError(
                f"{self.name}: {self._raw.consumed} {self.compression} bytes decompress to more "
                f"than {self._decompressed} bytes ({self.max_expansion:g} times more): a "
                "decompression bomb, not LIBSVM text. If the file is genuine, pass a larger "
                "max_expansion.")
        return got

    def _skip_to_offset(self, buffer):
        """Position the stream at ``offset``; False when the source is shorter."""
        if self.offset == 0:
            return True
        if self._seekable_plain:
            self._raw._pending = b""
            self._owned.seek(self.offset)
            self._raw.consumed = self.offset
            return True
        todo = self.offset
        while todo > 0:
            got = self._readinto(memoryview(buffer)[: min(len(buffer), todo)])
            if not got:
                return False
            todo -= got
        return True

    def _check_unchanged(self, whole):
        if self._before is None:
            return
        after = os.fstat(self._owned.fileno())
        size = self._before.st_size
        if whole and self._raw.consumed != size:
            raise _changed_while_reading(self.name, f"{self._raw.consumed} bytes read, {size} "
                                                    "expected")
        if after.st_size != size or after.st_mtime_ns != self._before.st_mtime_ns:
            raise _changed_while_reading(self.name, "its size or modification time changed")

    def __iter__(self):
        """Yield uint8 views of whole lines; a view is valid until the next one is asked for."""
        try:
            yield from self._chunks()
        except BaseException:  # an error, or the iteration abandoned: stop the hash thread
            if self._hasher is not None:
                self._hasher.close()
            raise

    def _settle(self):
        """Wait until the bytes given to the hasher are hashed, before they are moved."""
        if self._hasher is not None:
            self._hasher.wait()

    def _chunks(self):
        buffer = bytearray(self.buffer_bytes)
        if not self._skip_to_offset(buffer):
            self._check_unchanged(whole=False)
            return
        limit = self.offset + self.length if self.length > 0 else None
        drop_first_line = self.offset > 0
        position = self.offset  # stream position of buffer[0]
        filled = 0
        eof = False
        while True:
            if not eof and filled < len(buffer):
                got = self._readinto(memoryview(buffer)[filled:])
                if got:
                    filled += got
                    continue  # fill the buffer before cutting it
                eof = True
            if drop_first_line:
                newline = buffer.find(b"\n", 0, filled)
                if newline < 0:
                    position += filled
                    filled = 0
                    if eof:
                        break
                    continue
                drop_first_line = False
                self._settle()
                buffer[: filled - newline - 1] = buffer[newline + 1:filled]
                filled -= newline + 1
                position += newline + 1
            if filled == 0:
                if eof:
                    break
                continue
            if limit is not None and position > limit:
                break
            done = eof
            end = filled if eof else buffer.rfind(b"\n", 0, filled) + 1
            if limit is not None and limit - position < filled:
                newline = buffer.find(b"\n", limit - position, filled)
                if newline >= 0:
                    end, done = newline + 1, True
            if end == 0:  # no complete line yet
                if filled == len(buffer):  # a line longer than the buffer: make room
                    if len(buffer) > self.max_line_bytes:
                        raise ValidationError(
                            f"{self.name}: a line (at byte {position}) is longer than "
                            f"max_line_bytes = {self.max_line_bytes} bytes: not LIBSVM text (a "
                            "file of NULs, a corrupt file?). If the file is genuine, pass a "
                            "larger max_line_bytes.")
                    self._settle()
                    buffer = buffer + bytearray(min(len(buffer),
                                                    self.max_line_bytes + 1 - len(buffer)))
                continue
            yield np.frombuffer(buffer, dtype=np.uint8, count=end)
            if done:
                break
            self._settle()
            buffer[: filled - end] = buffer[end:filled]
            filled -= end
            position += end
        whole = limit is None and self.offset == 0
        if whole and self._hasher is not None:
            self.sha256 = self._hasher.hexdigest()
        self._check_unchanged(whole=whole and eof)
