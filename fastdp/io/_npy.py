""".npy files written by appending, and edited in place, with bounded memory.

:class:`NpyAppender` writes a 1-D ``.npy`` file whose length is not known in
advance: a fixed-size header (:data:`HEADER_BYTES`) is written first with a
placeholder length, the values are appended as they come, and the header is
rewritten with the final length at :meth:`NpyAppender.close` (same size, so
nothing moves).  The result is an ordinary ``.npy`` file that
``numpy.load(..., mmap_mode="r")`` maps.

Privacy: writes the data it is given; releases nothing.
"""

import os
import struct

import numpy as np

from fastdp.io._growable import widen_to_int64

__all__ = ["HEADER_BYTES", "NpyAppender", "npy_header", "read_npy_header"]

#: Size of every header written here (a multiple of 64: the values stay aligned).
HEADER_BYTES = 128
_MAGIC = b"\x93NUMPY\x01\x00"
_EDIT_BLOCK = 1 << 20  # values per step when a written file is edited in place
#: Bytes appended between two writeback starts (:meth:`NpyAppender._start_writeback`).
WRITEBACK_BYTES = 64 << 20


def npy_header(dtype, length):
    """The :data:`HEADER_BYTES`-byte ``.npy`` (version 1.0) header of a 1-D array."""
    text = "{'descr': %r, 'fortran_order': False, 'shape': (%d,), }" % (
        np.lib.format.dtype_to_descr(np.dtype(dtype)), int(length))
    room = HEADER_BYTES - len(_MAGIC) - 2
    encoded = text.encode("latin-1")
    if len(encoded) + 1 > room:  # pragma: no cover - a 1-D shape always fits
        raise ValueError("npy header does not fit")
    return _MAGIC + struct.pack("<H", room) + encoded.ljust(room - 1) + b"\n"


def read_npy_header(handle):
    """``(shape, fortran_order, dtype)`` of the ``.npy`` file ``handle``, left at the first value.

    Versions 1.0 and 2.0 only (what numpy writes for arrays without huge headers);
    any other raises ``ValueError``.
    """
    version = np.lib.format.read_magic(handle)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(handle)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(handle)
    raise ValueError(f"npy format version {version} is not one fastdp reads")


class NpyAppender:
    """A 1-D ``.npy`` file filled by appending arrays.

    Parameters
    ----------
    path : str or path-like
    dtype : numpy dtype
    """

    def __init__(self, path, dtype):
        self.path = os.fspath(path)
        self.dtype = np.dtype(dtype)
        self.length = 0
        self._file = open(self.path, "wb")
        self._file.write(npy_header(self.dtype, 0))
        self._written_back = 0      # bytes up to which writeback was started

    def append(self, values):
        """Append ``values`` (converted to the file's dtype; a small temporary)."""
        values = np.ascontiguousarray(values, dtype=self.dtype)
        self._file.write(memoryview(values).cast("B"))
        self.length += values.shape[0]
        if HEADER_BYTES + self.length * self.dtype.itemsize - self._written_back >= WRITEBACK_BYTES:
            self._start_writeback()

    def _start_writeback(self):
        """Start writing the bytes appended since the last call to the disk, without waiting.

        Left alone, the kernel writes nothing back until the dirty pages reach
        its background threshold (10 % of RAM by default), so a conversion
        shorter than that parses with the disk idle and then waits in the final
        ``fsync`` for everything.  ``posix_fadvise(DONTNEED)`` on a range of
        freshly written (dirty) pages starts their writeback (Linux: without
        waiting for it) and drops nothing: only clean pages are dropped, and
        these are dirty.  Where the call does not exist this does nothing.
        """
        self._file.flush()
        end = self._file.tell()
        if end > self._written_back and hasattr(os, "posix_fadvise"):
            os.posix_fadvise(self._file.fileno(), self._written_back, end - self._written_back,
                             os.POSIX_FADV_DONTNEED)
        self._written_back = end

    def _edit(self):
        """A writable map of the values written so far (flushed first)."""
        self._file.flush()
        return np.memmap(self.path, dtype=np.uint8, mode="r+", offset=HEADER_BYTES,
                         shape=(self.length * self.dtype.itemsize,))

    def add(self, value):
        """Add ``value`` to every value written so far, in place."""
        if self.length == 0:
            return
        values = self._edit().view(self.dtype)
        for start in range(0, self.length, _EDIT_BLOCK):
            values[start:start + _EDIT_BLOCK] += self.dtype.type(value)
        values.flush()
        del values

    def widen_to_int64(self):
        """Turn the int32 values written so far into int64, in place on disk."""
        if self.dtype != np.dtype(np.int32):
            raise TypeError("only int32 files are widened")
        self._file.flush()
        self._file.truncate(HEADER_BYTES + 8 * self.length)
        self.dtype = np.dtype(np.int64)
        if self.length:
            raw = self._edit()
            widen_to_int64(raw, self.length)
            raw.flush()
            del raw
        self._file.seek(HEADER_BYTES + 8 * self.length)

    def close(self):
        """Write the final header and close; returns the number of values."""
        self._file.seek(0)
        self._file.write(npy_header(self.dtype, self.length))
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        return self.length

    def abort(self):
        self._file.close()
