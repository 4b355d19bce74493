"""Arrays that grow, shrink and widen in place (never a second copy in memory).

A loader that does not know its output size in advance usually grows its
arrays by allocating a larger one and copying: while the copy runs both
live, so the peak is about twice the data.  :class:`GrowableArray` instead
keeps its values in one owned block of bytes that :meth:`numpy.ndarray.resize`
reallocates; for large blocks the C library moves the pages with ``mremap``
rather than copying them, and the reserve beyond what was written is never
touched, so it never becomes resident memory.  (numpy zero-fills the new part
of a *writeable* array on ``resize``; the block is made read-only for the
call to skip that fill, which is what keeps the reserve untouched.)

:func:`widen_to_int64` turns int32 values into int64 inside the same block
(grown to twice its bytes), from the end towards the front in bounded steps;
it serves in-memory blocks and memory-mapped files alike.

Privacy: memory management only; nothing is read or released.
"""

import numpy as np

__all__ = ["GrowableArray", "widen_to_int64", "WIDEN_BLOCK"]

#: Values converted per step by :func:`widen_to_int64` (bounded scratch).
WIDEN_BLOCK = 1 << 20


def _resize_bytes(block, n_bytes):
    """Resize an owned uint8 block in place without touching its new part."""
    writeable = block.flags.writeable
    block.flags.writeable = False  # numpy skips the zero-fill of a read-only array
    try:
        block.resize(int(n_bytes), refcheck=False)
    finally:
        block.flags.writeable = writeable


def widen_to_int64(raw, count):
    """Convert ``count`` int32 values at the start of ``raw`` into int64, in place.

    Parameters
    ----------
    raw : ndarray of uint8
        At least ``8 * count`` bytes, whose first ``4 * count`` hold the int32
        values (native byte order).  A memory-mapped file works too.
    count : int

    Notes
    -----
    Value ``k`` moves from bytes ``[4k, 4k + 4)`` to ``[8k, 8k + 8)``.  Working
    from the end, each block of values is copied out (bounded scratch) before
    its destination, which may overlap it, is written; a destination never
    lies before its source, so no value still to be read is overwritten.
    """
    narrow = raw[: 4 * count].view(np.int32)
    wide = raw[: 8 * count].view(np.int64)
    stop = count
    while stop > 0:
        start = max(0, stop - WIDEN_BLOCK)
        wide[start:stop] = narrow[start:stop].astype(np.int64)
        stop = start


class GrowableArray:
    """A 1-D array of ``dtype`` with a capacity that grows in place.

    Views returned by :meth:`view` must be dropped before the next
    :meth:`reserve`, :meth:`widen` or :meth:`finish` (the block may move).

    Parameters
    ----------
    dtype : numpy dtype
    capacity : int
    """

    def __init__(self, dtype, capacity=0):
        self.dtype = np.dtype(dtype)
        self._block = np.empty(max(int(capacity), 1) * self.dtype.itemsize, dtype=np.uint8)

    @property
    def capacity(self):
        return self._block.shape[0] // self.dtype.itemsize

    def view(self, start=0, stop=None):
        """Typed view of elements ``[start, stop)`` of the capacity."""
        return self._block.view(self.dtype)[start:stop]

    def reserve(self, capacity):
        """Make room for at least ``capacity`` elements (keeps the values)."""
        if capacity > self.capacity:
            _resize_bytes(self._block, int(capacity) * self.dtype.itemsize)

    def widen(self, count):
        """Turn int32 values into int64 (the first ``count`` are kept)."""
        if self.dtype != np.dtype(np.int32):
            raise TypeError("only int32 arrays are widened")
        _resize_bytes(self._block, 8 * self.capacity)
        widen_to_int64(self._block, int(count))
        self.dtype = np.dtype(np.int64)

    def finish(self, length):
        """The first ``length`` elements as a tight array (the block shrinks to them).

        The object must not be used afterwards.
        """
        _resize_bytes(self._block, max(int(length), 0) * self.dtype.itemsize)
        out = self._block.view(self.dtype)
        self._block = None
        return out
