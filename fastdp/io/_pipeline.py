"""One background thread that runs calls in the order they were submitted.

:func:`~fastdp.io.binary.convert_libsvm` parses text on the calling thread
and hands the rest of the work on each chunk — hashing the raw bytes,
computing row norms, writing the ``.npy`` files — to an :class:`OrderedWorker`,
so that parsing and writing overlap (the parser and the hash both release
the GIL).  The calls run one at a time in submission order, so the files
get exactly the bytes a single thread would write.  At most ``depth`` calls
wait in the queue (bounded memory: ``submit`` blocks when it is full).

Privacy: moves the caller's work to a thread; reads and releases nothing
itself.
"""

import hashlib
import queue
import threading

__all__ = ["OrderedWorker", "BackgroundSha256"]

_STOP = object()


class OrderedWorker:
    """A worker thread running submitted calls in order.

    An exception raised by a call is kept; the calls after it are skipped
    and the exception is raised again, in the caller's thread, by the next
    :meth:`submit`, :meth:`wait` or :meth:`close`.

    Parameters
    ----------
    depth : int, default=8
        Most calls waiting at once (``submit`` blocks beyond that).
    """

    def __init__(self, depth=8):
        self._queue = queue.Queue(maxsize=int(depth))
        self._error = None
        self._cancelled = False
        self._thread = threading.Thread(target=self._run, name="fastdp-io-worker", daemon=True)
        self._thread.start()

    def _run(self):
        while True:
            item = self._queue.get()
            try:
                if item is _STOP:
                    return
                if self._error is None and not self._cancelled:
                    function, args = item
                    function(*args)
            except BaseException as exc:  # handed to the caller's thread
                self._error = exc
            finally:
                self._queue.task_done()

    def _raise(self):
        if self._error is not None:
            raise self._error

    def submit(self, function, *args):
        """Queue ``function(*args)`` (raises an earlier call's exception first)."""
        self._raise()
        self._queue.put((function, args))

    def wait(self):
        """Block until every submitted call has run; raise the first exception."""
        self._queue.join()
        self._raise()

    def close(self):
        """Run what is queued, stop the thread; raise the first exception."""
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join()
        self._raise()

    def cancel(self):
        """Skip what is queued and stop the thread (errors are dropped)."""
        self._cancelled = True
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join()


class BackgroundSha256:
    """A SHA-256 whose ``update`` runs on an :class:`OrderedWorker`.

    ``update`` copies the bytes (the caller may reuse its buffer at once);
    ``hexdigest`` waits for the worker first.
    """

    def __init__(self, worker):
        self._worker = worker
        self._hash = hashlib.sha256()

    def update(self, data):
        self._worker.submit(self._hash.update, bytes(data))

    def hexdigest(self):
        self._worker.wait()
        return self._hash.hexdigest()
