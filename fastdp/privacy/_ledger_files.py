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

Only regular files are read: a ledger or lock path that is a FIFO, a device or
a directory is refused with a ``ValidationError`` (opened without blocking,
checked with ``fstat``), and a ledger file larger than :data:`MAX_LEDGER_BYTES`
is refused before it is read.

Rollback
--------
Every write also records the ledger's *generation* beside it, in
``<real path>.generation``: the number of records and the hash of the last
one.  Every read checks the ledger against it (the generation is read first,
so a reader racing a writer never sees a ledger older than the generation):
a ledger with fewer records than the generation (an older copy put back, its
last records cut with the head hash reset, a pending reservation removed) or
whose record at that position has another hash (another ledger's history) is
refused, and so is creating a new ledger where a generation says one existed.
This detects accidents and casual edits; someone who replaces both files
together (a backup of the directory) is not detected: the ledger is evidence,
not a security boundary.
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


MAX_LEDGER_BYTES = 1 << 30
"""Largest ledger file read (1 GiB: millions of charges)."""

_GENERATION_SUFFIX = ".generation"


def _atomic_write_json(path, payload, mode=None):
    """Write ``payload`` to ``path`` so that readers see the old or the new file only.

    ``mode``: permission bits of the new file (those of the file it replaces);
    None keeps ``tempfile.mkstemp``'s 0600.  A payload with a hash chain
    (``records`` and ``head``) then records its generation beside it.
    """
    _atomic_write_text(path, json.dumps(payload, indent=1, allow_nan=False), mode)
    if isinstance(payload, dict) and "records" in payload and "head" in payload:
        generation = {"records": len(payload["records"]), "head": payload["head"]}
        _atomic_write_text(path + _GENERATION_SUFFIX, json.dumps(generation), mode)


def _atomic_write_text(path, text, mode=None):
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
        fd = _open_regular(lock_path, os.O_RDWR | os.O_CREAT, "privacy ledger lock file")
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


def _open_regular(path, flags, what):
    """A descriptor of ``path`` if it is a regular file, opened without blocking
    (a FIFO never hangs); a ValidationError for a FIFO, device or directory."""
    try:
        fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0),
                     0o666)
    except (IsADirectoryError, FileExistsError):
        raise ValidationError(f"{what} {path} is a directory, not a regular file; remove it "
                              "or choose another ledger path.") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValidationError(f"{what} {path} is not a regular file (a FIFO, device or "
                                  "directory); refused.")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_json(path, real):
    """The parsed JSON of a ledger file and its permission bits (a clear
    ValidationError for anything unreadable, not a regular file, hard-linked or
    larger than :data:`MAX_LEDGER_BYTES`)."""
    try:
        with os.fdopen(_open_regular(real, os.O_RDONLY, "privacy ledger"), "rb") as handle:
            info = os.fstat(handle.fileno())
            _check_link_count(path, info)
            if info.st_size > MAX_LEDGER_BYTES:
                raise ValidationError(f"privacy ledger {path} is {info.st_size} bytes, more "
                                      f"than the {MAX_LEDGER_BYTES} a ledger may have.")
            mode = stat.S_IMODE(info.st_mode)
            raw = handle.read(MAX_LEDGER_BYTES + 1)
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


# ----------------------------------------------------------------------------
# generation (rollback detection)
# ----------------------------------------------------------------------------
def _read_generation(real):
    """``(records, head)`` last recorded beside the ledger at ``real``, or None."""
    where = real + _GENERATION_SUFFIX
    if not os.path.lexists(where):
        return None
    try:
        with os.fdopen(_open_regular(where, os.O_RDONLY, "privacy ledger generation file"),
                       "rb") as handle:
            data = json.loads(handle.read(4096).decode("utf-8"))
        count, head = data["records"], data["head"]
        if isinstance(count, bool) or not isinstance(count, int) or count < 1 or \
                not isinstance(head, str):
            raise ValueError("bad fields")
    except ValidationError:
        raise
    except (FileNotFoundError, PermissionError):
        return None  # gone, or not readable by this user (a reader of a shared ledger)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValidationError(f"the generation file {where} of a privacy ledger is damaged "
                              f"({type(exc).__name__}); fastdp cannot tell whether the ledger "
                              "was rolled back.") from None
    return count, head


def _check_generation(path, real, generation, records):
    """Refuse a ledger whose ``records`` do not extend its recorded ``generation``."""
    if generation is None:
        return
    count, head = generation
    if len(records) < count or records[count - 1].get("hash") != head:
        what = (f"it holds {len(records)} records where fastdp last wrote {count}"
                if len(records) < count else "its history differs from the one fastdp wrote")
        raise ValidationError(
            f"privacy ledger {path} was rolled back: {what} ({real}{_GENERATION_SUFFIX}). An "
            "older copy replaced it, or its last records (charges or pending reservations) "
            "were cut. Refusing it: charges would be forgotten. Restore the latest ledger.")


def _refuse_vanished(path, real):
    """Refuse to create a ledger where a generation file says one was written."""
    generation = _read_generation(real)
    if generation is not None:
        raise ValidationError(
            f"no privacy ledger at {path}, but {real}{_GENERATION_SUFFIX} says one with "
            f"{generation[0]} records was written there: it was deleted or moved. Restore it; "
            f"to start a new budget on purpose, delete {real}{_GENERATION_SUFFIX} too.")
