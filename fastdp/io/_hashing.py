"""SHA-256 of a stream computed on a background thread, in the order fed.

``hashlib`` releases the GIL while it hashes a buffer of more than 2047
bytes, so a second thread that hashes each chunk of a source while the
caller parses it takes the hashing off the parsing thread's time when a
second core is free.  The digest is that of the chunks concatenated in the
order they were given to :meth:`BackgroundHasher.update`: exactly
``hashlib.sha256(whole).hexdigest()``.

Buffers are handed over without a copy.  The caller must not change the
bytes of a buffer it gave to :meth:`~BackgroundHasher.update` until
:meth:`~BackgroundHasher.wait` has returned (``wait`` returns when every
buffer given so far has been hashed); immutable ``bytes`` need no care.

An error raised by the hash on the worker thread is raised again in the
caller by the next :meth:`~BackgroundHasher.update`,
:meth:`~BackgroundHasher.wait` or :meth:`~BackgroundHasher.hexdigest`.
:meth:`~BackgroundHasher.close` (also on leaving a ``with`` block, and by
``hexdigest``) stops the worker and joins it, so no thread outlives its
hasher, whatever exception ends the reading.

Privacy: hashes the private data; releases only the digest.
"""

import hashlib
import queue
import threading

__all__ = ["BackgroundHasher"]

#: Most buffers queued but not yet hashed; ``update`` blocks beyond it.
QUEUE_DEPTH = 8

_STOP = object()


class BackgroundHasher:
    """A SHA-256 fed in order, hashed on one worker thread (a context manager).

    Parameters
    ----------
    factory : callable, default=hashlib.sha256
        Makes the hash object (its ``update`` and ``hexdigest`` are used);
        tests pass a failing one.

    Notes
    -----
    The worker starts at the first :meth:`update`, so a hasher that is never
    fed starts no thread.
    """

    def __init__(self, factory=hashlib.sha256):
        self._hash = factory()
        self._queue = queue.Queue(maxsize=QUEUE_DEPTH)
        self._thread = None
        self._error = None
        self._closed = False
        self._failed = False

    def _work(self):
        while True:
            item = self._queue.get()
            try:
                if item is _STOP:
                    return
                if self._error is None:  # after an error: drain, so that wait() returns
                    self._hash.update(item)
            except BaseException as exc:  # raised again in the caller
                self._error = exc
            finally:
                del item  # release the buffer before saying it is done
                self._queue.task_done()

    def _raise_error(self):
        if self._error is not None:
            error, self._error = self._error, None
            self._failed = True
            raise error

    def update(self, buffer):
        """Queue ``buffer`` (bytes-like) to be hashed after those queued before it."""
        if self._closed:
            raise ValueError("update() on a closed BackgroundHasher")
        if self._failed:
            raise ValueError("update() on a BackgroundHasher whose hash has failed")
        self._raise_error()
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="fastdp-sha256",
                                            daemon=True)
            self._thread.start()
        self._queue.put(buffer)

    def wait(self):
        """Return once every buffer queued so far is hashed (then they may change)."""
        if self._thread is not None:
            self._queue.join()
        self._raise_error()

    def hexdigest(self):
        """The hex digest of everything queued; stops the worker."""
        self.wait()
        self.close()
        return self._hash.hexdigest()

    def close(self):
        """Stop and join the worker (idempotent; never raises the worker's error)."""
        self._closed = True
        thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(_STOP)  # the worker drains everything before it
            thread.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
