"""The ledger file on disk: atomic replacement, the inter-process lock, safe reading.

Private helpers of :mod:`fastdp.privacy.ledger`; the record format and the hash
chain are in :mod:`fastdp.privacy._ledger_chain`.

What a file-backed ledger guarantees
------------------------------------
With ``path`` the ledger lives in a JSON file (format:
:mod:`fastdp.privacy._ledger_chain`) that is replaced atomically on every
charge: the new content goes to a temporary file in the same directory, which
is flushed and ``fsync``-ed and then renamed over the ledger with
``os.replace`` (and the directory is ``fsync``-ed), so a crash at any point
leaves either the previous or the new ledger, never a torn one. A crash can
leave a stray ``.<name>.*.tmp`` file beside the ledger; it is never read and
may be deleted. The file keeps the permission bits it had (a new file is
created with mode 0600).

The path is resolved (``os.path.realpath``) before every use, so every name
of one file (through symbolic links, relative paths, ...) reaches the same
file and the same lock, and a symbolic link stays a link.  A ledger file with
several *hard* links is refused: replacing it under one name would leave the
other names on the old content, splitting one budget in two.

Several processes may share one ledger file: every charge takes an exclusive
POSIX ``flock`` on the side file ``<real path>.lock``, re-reads the ledger
from disk, checks the budget, appends and writes, then unlocks.  So concurrent
charges are serialised and can never jointly exceed the budget, and no charge
is lost.  Reading takes no lock and writes nothing (the atomic replacement
means a reader sees either the old or the new file), so a ledger in a
read-only directory can be inspected.  (On platforms without ``fcntl`` the
ledger works but does not lock, and says so with a warning.)
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
import warnings

from fastdp.exceptions import ValidationError

try:  # POSIX only
    import fcntl
except ImportError:  # pragma: no cover - exercised on Windows only
    fcntl = None


# ----------------------------------------------------------------------------
# files: atomic write, locking
# ----------------------------------------------------------------------------
def _fsync_directory(directory):
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # e.g. platforms that cannot open directories
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _atomic_write_json(path, payload, mode=None):
    """Write ``payload`` to ``path`` so that readers see the old or the new file only.

    ``mode``: permission bits of the new file (those of the file it replaces);
    None keeps ``tempfile.mkstemp``'s 0600.
    """
    text = json.dumps(payload, indent=1, allow_nan=False)
    directory = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".",
                                     suffix=".tmp", dir=directory)
    try:
        if mode is not None and hasattr(os, "fchmod"):
            os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _fsync_directory(directory)


_NO_LOCK_WARNED = False


@contextlib.contextmanager
def _exclusive_lock(lock_path):
    """Hold an exclusive POSIX flock on ``lock_path`` (created if needed).

    After the lock is granted the path is checked to still name the locked
    file: if someone deleted or replaced the lock file meanwhile, another
    process may hold a lock on the new one, so the lock is taken again.
    """
    global _NO_LOCK_WARNED
    if fcntl is None:  # pragma: no cover
        if not _NO_LOCK_WARNED:
            warnings.warn("fcntl is unavailable: the privacy ledger file is not locked; "
                          "do not share it between processes", RuntimeWarning, stacklevel=4)
            _NO_LOCK_WARNED = True
        yield
        return
    while True:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                named = os.stat(lock_path)
            except FileNotFoundError:
                named = None
            held = os.fstat(fd)
        except BaseException:
            os.close(fd)
            raise
        if named is not None and (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino):
            break
        os.close(fd)  # the lock file was replaced while we waited: lock the new one
    try:
        yield
    finally:
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


# ----------------------------------------------------------------------------
# reading
# ----------------------------------------------------------------------------
def _refuse_constant(name):
    raise ValueError(f"non-standard JSON constant {name}")


def _no_duplicate_keys(pairs):
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("an object has a repeated key")
    return dict(pairs)


def _check_link_count(path, info):
    if info.st_nlink > 1:
        raise ValidationError(
            f"privacy ledger {path} has {info.st_nlink} hard links: fastdp replaces the file "
            "on every charge, which would leave the other names on the old content and split "
            "one budget in two. Keep one name (remove the other links; use a symbolic link "
            "if a second name is needed).")


def _read_json(path, real):
    """The parsed JSON of a ledger file and its permission bits (a clear
    ValidationError for anything unreadable, not a regular file, or hard-linked)."""
    try:
        with open(real, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise ValidationError(f"privacy ledger {path} is not a regular file")
            _check_link_count(path, info)
            mode = stat.S_IMODE(info.st_mode)
            raw = handle.read()
    except FileNotFoundError:
        raise ValidationError(
            f"no privacy ledger at {path} (it was moved or deleted); create one with "
            "PrivacyLedger(epsilon, delta, path=...)") from None
    except OSError as exc:
        raise ValidationError(
            f"cannot read privacy ledger {path}: {exc.strerror or exc}") from None
    try:
        return json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant,
                          object_pairs_hook=_no_duplicate_keys), mode
    except RecursionError:
        reason = "nested too deeply"
    except (UnicodeDecodeError, ValueError, TypeError) as exc:
        reason = f"{type(exc).__name__}: {exc}"
    raise ValidationError(
        f"{path} is not a fastdp privacy ledger (unreadable: {reason[:200]}); it was not "
        "written by fastdp or was damaged outside fastdp.")
