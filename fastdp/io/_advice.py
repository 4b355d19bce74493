"""Access advice for memory-mapped CSR data during the sampled steps of a fit.

A step of DP-SGD or DP-SCD reads L random rows.  When the rows come from a
memory-mapped binary dataset (:func:`fastdp.io.binary.open_binary`) larger
than the page cache, every row is a page fault, and two things of the
operating system make that slow (``docs/large-data.md``):

* the kernel's read-around pulls up to ``read_ahead_kb`` around every fault
  (MBs per row: read amplification).  :func:`step_advice` advises
  ``MADV_RANDOM`` on the maps for the duration of the steps (one page per
  fault) and ``MADV_NORMAL`` again afterwards (sequential scans read ahead);
* the faults of one thread are served one at a time, so the disk's latency,
  not its bandwidth, sets the pace.  :func:`step_advice` therefore starts a
  readahead thread that walks the same batches as the kernel, a bounded
  distance ahead of it, and asks for their rows' pages with
  ``madvise(MADV_WILLNEED)`` (asynchronous reads), so that the disk serves
  many reads at once and the kernel finds its rows in the page cache.

Advice never changes a byte that is read: results are bit for bit those of
a fit without it (same seed, same bits), and for arrays in memory (or maps
already in the page cache) :func:`step_advice` does nothing at all.

System calls: the pages of a batch's rows (sorted, as the kernel reads
them) are merged into runs — adjacent pages, and pages at most
``_GAP_PAGES`` apart (the few pages between two nearby rows cost less to read
than a separate request) — and the runs go to the kernel in one
``process_madvise`` call per 1024 runs (Linux 5.10+, on the process itself),
else one ``madvise`` per run.  A batch of L random rows of a large file thus
costs a few system calls instead of about 2 L.

How far ahead: the thread counts the pages it asked for and the page faults
of the process (``/proc/self/stat``, minus its own), which is what the
kernel has consumed, and stays at most ``budget`` bytes ahead (default: the
smaller of 256 MiB and an eighth of the available memory), so prefetched
pages are not evicted before the kernel reads them.  The kernels run one
call per epoch (their lazy noise is flushed at the end of a call, so an
epoch cannot be cut into calls without changing the bits), which is why the
readahead runs beside the call instead of between steps.
"""

import ctypes
import ctypes.util
import mmap
import sys
import threading
import time

import numpy as np

__all__ = ["step_advice", "mapped_arrays", "resident_fraction"]

_PAGE = mmap.PAGESIZE
_MADV_NORMAL = getattr(mmap, "MADV_NORMAL", 0)
_MADV_RANDOM = getattr(mmap, "MADV_RANDOM", 1)
_MADV_WILLNEED = getattr(mmap, "MADV_WILLNEED", 3)
# prefetch only maps of which less than this fraction is in the page cache
_RESIDENT_SKIP = 0.95
_BUDGET_MAX = 256 << 20
# rows at most this many pages apart are asked for in one range (the pages between them too)
_GAP_PAGES = 1
_IOV_MAX = 1024             # ranges per process_madvise call (UIO_MAXIOV)
_SYS_PIDFD_OPEN = 434       # x86_64 and aarch64 (the generic syscall table) alike
_SYS_PROCESS_MADVISE = 440


def _libc():
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        lib.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        lib.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
        return lib
    except (OSError, AttributeError):  # pragma: no cover - not Linux / no libc
        return None


_LIBC = _libc() if sys.platform.startswith("linux") else None


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]


class _Vectored:
    """``process_madvise(pidfd of this process, ranges, MADV_WILLNEED)``: many ranges in one
    system call; :meth:`get` gives None where the kernel does not offer it (checked once)."""

    _checked_pid = None     # the process the probe ran in (a forked child probes again)
    _instance = None

    def __init__(self, pidfd):
        self.pidfd = pidfd
        self.syscall = _LIBC.syscall
        self.syscall.restype = ctypes.c_long

    @classmethod
    def get(cls):
        import os

        if cls._checked_pid != os.getpid():
            cls._checked_pid = os.getpid()
            cls._instance = cls._probe()
        return cls._instance

    @classmethod
    def _probe(cls):
        import os
        import platform

        if _LIBC is None or platform.machine() not in ("x86_64", "aarch64"):
            return None
        try:
            _LIBC.syscall.restype = ctypes.c_long
            pidfd = int(_LIBC.syscall(ctypes.c_long(_SYS_PIDFD_OPEN), ctypes.c_int(os.getpid()),
                                      ctypes.c_uint(0)))
            if pidfd < 0:
                return None
            vectored = cls(pidfd)
            probe = np.zeros(2 * _PAGE, dtype=np.uint8)   # one whole page inside, advised once
            page = -(-probe.ctypes.data // _PAGE) * _PAGE
            if vectored.willneed(np.array([page]), np.array([_PAGE])) != _PAGE:
                os.close(pidfd)
                return None
            return vectored
        except (OSError, AttributeError, ValueError):  # pragma: no cover
            return None

    def willneed(self, addresses, lengths):
        """Advise the ranges (at most ``_IOV_MAX``); returns the bytes advised, or -1."""
        count = len(addresses)
        vec = (_IoVec * count)()
        for k, (address, length) in enumerate(zip(addresses.tolist(), lengths.tolist())):
            vec[k].base = address
            vec[k].length = length
        return int(self.syscall(ctypes.c_long(_SYS_PROCESS_MADVISE), ctypes.c_int(self.pidfd),
                                vec, ctypes.c_size_t(count), ctypes.c_int(_MADV_WILLNEED),
                                ctypes.c_uint(0)))


def _is_mapped(array):
    """True for a ``numpy.memmap`` backed by a file mapping (and not empty)."""
    return (isinstance(array, np.memmap) and getattr(array, "_mmap", None) is not None
            and array.nbytes > 0 and array.flags.c_contiguous)


def mapped_arrays(X):
    """``(data, indices, indptr)`` of X (a CSR matrix, or mapped rows over one) when at
    least one of them is a file mapping, else None (in-memory data: no advice)."""
    X = getattr(X, "csr", X)  # fastdp._mapped_rows.MappedRows
    arrays = tuple(getattr(X, name, None) for name in ("data", "indices", "indptr"))
    if _LIBC is None or not any(_is_mapped(a) for a in arrays):
        return None
    return arrays


def _span(array):
    """Page-aligned ``(address, length)`` covering the array's bytes."""
    start = array.ctypes.data
    lo = start - start % _PAGE
    return lo, start + array.nbytes - lo


def _advise(array, advice):
    if _is_mapped(array):
        lo, length = _span(array)
        _LIBC.madvise(lo, length, advice)  # advice only: a failure changes nothing


def resident_fraction(array, windows=256, window_pages=64):
    """Fraction of a mapped array's pages in the page cache (``mincore``); 1.0 in memory.

    Large maps are sampled: ``windows`` evenly spaced runs of ``window_pages``
    pages (a whole 34 GiB map takes ~1 s of system time to walk).
    """
    if _LIBC is None or not _is_mapped(array):
        return 1.0
    lo, length = _span(array)
    pages = (length + _PAGE - 1) // _PAGE
    if pages <= windows * window_pages:
        starts, count = [0], pages
    else:
        starts, count = np.linspace(0, pages - window_pages, windows).astype(np.int64), window_pages
    vec = np.zeros(count, dtype=np.uint8)
    resident = total = 0
    for first in starts:
        n = min(count, pages - int(first))
        if _LIBC.mincore(lo + int(first) * _PAGE, n * _PAGE, vec.ctypes.data) != 0:
            return 0.0  # pragma: no cover
        resident += int(np.count_nonzero(vec[:n] & 1))
        total += n
    return resident / total


def _faults(path="/proc/self/stat"):
    """Minor plus major page faults counted in ``path`` (a process or a thread)."""
    try:
        with open(path, "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return int(fields[7]) + int(fields[9])  # minflt, majflt (fields 10 and 12)
    except (OSError, IndexError, ValueError):  # pragma: no cover
        return 0


def _page_runs(starts, ends, base, gap=0):
    """Merged ``(first page, page count)`` runs covering byte ranges ``[starts, ends)``
    (ascending) of memory at address ``base``; empty ranges are skipped.  Ranges whose
    pages are adjacent, overlap, or lie at most ``gap`` pages apart share a run (the
    pages between them included)."""
    keep = ends > starts
    lo = (base + starts[keep]) // _PAGE
    hi = (base + ends[keep] - 1) // _PAGE
    if lo.size == 0:
        return lo, lo
    new = np.ones(lo.size, dtype=bool)
    new[1:] = lo[1:] > np.maximum.accumulate(hi)[:-1] + 1 + gap
    first = np.flatnonzero(new)
    run_lo = lo[first]
    run_hi = np.maximum.reduceat(hi, first)
    return run_lo, run_hi - run_lo + 1


class _Readahead(threading.Thread):
    """Walks the batches of one kernel call ahead of it, asking for their rows' pages."""

    def __init__(self, arrays, batch_ptr, batch_idx, budget):
        super().__init__(name="fastdp-readahead", daemon=True)
        self.data, self.indices, self.indptr = arrays
        self.batch_ptr = np.asarray(batch_ptr, dtype=np.int64)
        self.batch_idx = np.asarray(batch_idx, dtype=np.int64)
        self.budget_pages = max(1, budget // _PAGE)
        self.stop = threading.Event()
        self.pages_asked = 0
        self.syscalls = 0      # madvise / process_madvise calls made
        self.batches_asked = 0
        self.vectored = _Vectored.get()
        # only maps not already (almost) all in the page cache are worth the system calls
        self.wanted = {name: _is_mapped(a) and resident_fraction(a) < _RESIDENT_SKIP
                       for name, a in (("data", self.data), ("indices", self.indices),
                                       ("indptr", self.indptr))}

    def _willneed(self, starts, ends, base):
        """Ask for the pages of byte ranges ``[starts, ends)`` (ascending) at ``base``.

        ``pages_asked`` grows by the pages the ranges themselves cover (what the
        kernel will fault on), not by the gap pages merged between them, so the
        budget keeps counting what the kernel consumes."""
        self.pages_asked += int(_page_runs(starts, ends, base)[1].sum())
        lo, count = _page_runs(starts, ends, base, _GAP_PAGES)
        addresses, lengths = lo * _PAGE, count * _PAGE
        k = 0
        if self.vectored is not None:
            while k < lo.size:
                stop = min(k + _IOV_MAX, lo.size)
                self.syscalls += 1
                if self.vectored.willneed(addresses[k:stop], lengths[k:stop]) < 0:
                    self.vectored = None   # refused: the rest one range at a time
                    break
                k = stop
        madvise = _LIBC.madvise
        for first, n in zip(addresses[k:].tolist(), lengths[k:].tolist()):
            madvise(first, n, _MADV_WILLNEED)
            self.syscalls += 1

    def _rows(self, t):
        return self.batch_idx[self.batch_ptr[t]:self.batch_ptr[t + 1]]

    def _ask_pointers(self, t):
        rows = self._rows(t)
        if rows.size and self.wanted["indptr"]:
            size = self.indptr.itemsize
            self._willneed(rows * size, (rows + 2) * size, self.indptr.ctypes.data)

    def _ask_rows(self, t):
        rows = self._rows(t)
        if rows.size == 0:
            return
        starts = np.asarray(self.indptr[rows], dtype=np.int64)   # pages asked for before
        ends = np.asarray(self.indptr[rows + 1], dtype=np.int64)
        for name, array in (("indices", self.indices), ("data", self.data)):
            if self.wanted[name]:
                size = array.itemsize
                self._willneed(starts * size, ends * size, array.ctypes.data)
        self.batches_asked += 1

    def run(self):
        own = "/proc/thread-self/stat"
        kernel_start = _faults() - _faults(own)
        n_steps = self.batch_ptr.shape[0] - 1
        if n_steps > 0:
            self._ask_pointers(0)
        for t in range(n_steps):
            while not self.stop.is_set():
                consumed = _faults() - _faults(own) - kernel_start
                if self.pages_asked - consumed < self.budget_pages:
                    break
                time.sleep(0.002)  # the kernel is that far behind: let it catch up
            if self.stop.is_set():
                return
            if t + 1 < n_steps:
                self._ask_pointers(t + 1)
            self._ask_rows(t)


class step_advice:
    """Context manager around a kernel call that runs sampled steps over X.

    On a memory-mapped X (see :func:`mapped_arrays`): ``MADV_RANDOM`` on its
    maps while the steps run, ``MADV_NORMAL`` afterwards, and, unless the
    maps are already (almost) all in the page cache, a readahead thread that
    asks for the rows of the upcoming batches (``batch_ptr``/``batch_idx``,
    as the kernel gets them) at most ``budget`` bytes ahead of the kernel.
    For X in memory: nothing.

    Parameters
    ----------
    X : scipy.sparse CSR matrix or fastdp._mapped_rows.MappedRows
    batch_ptr, batch_idx : ndarray
        The batches of the kernel call.
    budget : int, optional
        Bytes the readahead may run ahead of the kernel.
    prefetch : bool, default=True
        Start the readahead thread (``False``: ``MADV_RANDOM`` only).
    """

    def __init__(self, X, batch_ptr, batch_idx, *, budget=None, prefetch=True):
        self.arrays = mapped_arrays(X)
        self.thread = None
        if self.arrays is None:
            return
        if prefetch and min(resident_fraction(a) for a in self.arrays) < _RESIDENT_SKIP:
            if budget is None:
                budget = min(_BUDGET_MAX, _available_memory() // 8)
            self.thread = _Readahead(self.arrays, batch_ptr, batch_idx, int(budget))

    def __enter__(self):
        if self.arrays is not None:
            for array in self.arrays:
                _advise(array, _MADV_RANDOM)
            if self.thread is not None:
                self.thread.start()
        return self

    def __exit__(self, *exc):
        if self.thread is not None:
            self.thread.stop.set()
            self.thread.join()
        if self.arrays is not None:
            for array in self.arrays:
                _advise(array, _MADV_NORMAL)
        return False


def _available_memory():
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):  # pragma: no cover
        pass
    return 2 << 30
