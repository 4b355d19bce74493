"""Files of saved models and pipelines: read with checks, written atomically, authenticated.

* :func:`read_regular_file` reads a file only if it is a regular file (a FIFO,
  a device or a directory is refused without blocking) and no larger than a
  bound, so a hostile path cannot hang or exhaust memory.
* :func:`read_json_file` parses such a file as JSON, with every failure
  (invalid UTF-8 or JSON, nesting too deep, numbers out of range) one
  :class:`~fastdp.exceptions.ValidationError`.
* :func:`write_atomically` writes beside the target and renames over it, so a
  full disk or a crash leaves the previous file intact.
* :func:`authentication_code` / :func:`check_authentication`: an optional
  HMAC-SHA256 over a saved file's metadata with a user's secret key.

Trust
-----
A saved model is only as trustworthy as its file.  Loading recomputes ε from
the saved privacy event and checks that the numbers agree, so a careless edit
is refused; but whoever can write the file can also write a *consistent*
forgery (another event, another δ, with ε recomputed to match), which no check
on the file alone can detect.  A model moved between machines or people can be
authenticated with a secret key: ``save_model(..., key=K)`` stores an
HMAC-SHA256 of the metadata (which holds the SHA-256 of every array file), and
``load_model(..., key=K)`` refuses a file whose code does not verify.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
import uuid

from fastdp.exceptions import ValidationError

MAX_JSON_BYTES = 256 * 2**20
"""Largest model or pipeline JSON file read (256 MiB: far above any saved model's metadata)."""

AUTHENTICATION_FIELD = "authentication"


def read_regular_file(path, what, max_bytes):
    """The bytes of ``path`` if it is a regular file of at most ``max_bytes`` bytes.

    Opened without blocking (a FIFO never hangs), checked with ``fstat`` on the
    open descriptor (a link to a device or a directory is refused), and read
    to at most ``max_bytes + 1`` bytes.

    Raises
    ------
    ValidationError
        Missing, unreadable, not a regular file, or too large.
    """
    try:
        fd = os.open(os.fspath(path), os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
                     | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ValidationError(f"{what} {path}: cannot be opened ({exc.strerror}).") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ValidationError(f"{what} {path} is not a regular file (a FIFO, device or "
                                  "directory); refused.")
        if info.st_size > max_bytes:
            raise ValidationError(f"{what} {path} is {info.st_size} bytes, more than the "
                                  f"{max_bytes} a {what} may have; refused.")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValidationError(f"{what} {path} grew past {max_bytes} bytes while read; refused.")
    return data


def read_json_file(path, what, max_bytes=MAX_JSON_BYTES):
    """The JSON value in ``path`` (a regular file, bounded; see :func:`read_regular_file`)."""
    data = read_regular_file(path, what, max_bytes)
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValidationError(f"{path} is not a fastdp {what} (invalid JSON: {exc}).") from None
    except (RecursionError, OverflowError, ValueError) as exc:
        raise ValidationError(f"{path} is not a fastdp {what} ({type(exc).__name__}: "
                              "nested too deeply or a number out of range).") from None


def write_atomically(path, data):
    """Write ``data`` (bytes) to ``path``: beside it first, then renamed over it.

    A failure (a full disk, a file-size limit) removes the partial file and
    leaves any previous ``path`` untouched; the exception says so.
    """
    path = os.fspath(path)
    temporary = os.path.join(os.path.dirname(path) or ".",
                             f".{os.path.basename(path)}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(temporary, "xb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException as exc:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        if isinstance(exc, Exception):
            exc.add_note(f"fastdp: {path} was not written; any previous file there is unchanged.")
        raise


def _canonical(metadata):
    body = {k: v for k, v in metadata.items() if k != AUTHENTICATION_FIELD}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def check_key(key):
    """The key as bytes: a non-empty ``bytes`` or ``str`` (UTF-8), else a ValidationError."""
    if isinstance(key, str):
        key = key.encode("utf-8")
    if not isinstance(key, (bytes, bytearray)) or not key:
        raise ValidationError("key must be non-empty bytes or str (a secret shared by the "
                              "saver and the loader).")
    return bytes(key)


def authentication_code(metadata, key):
    """HMAC-SHA256 (hex) of ``metadata`` without its authentication field, under ``key``."""
    return hmac.new(check_key(key), _canonical(metadata), hashlib.sha256).hexdigest()


def check_authentication(path, metadata, key):
    """Verify ``metadata``'s authentication code under ``key`` (None: nothing to verify).

    Returns
    -------
    bool
        True if verified, False when no key was given.

    Raises
    ------
    ValidationError
        A key was given and the file has no code, or a code that does not verify.
    """
    if key is None:
        return False
    stored = metadata.get(AUTHENTICATION_FIELD)
    code = stored.get("hmac_sha256") if isinstance(stored, dict) else None
    if not isinstance(code, str):
        raise ValidationError(f"{path} is not authenticated (saved without a key): refused, as "
                              "a key was given.")
    if not hmac.compare_digest(code, authentication_code(metadata, key)):
        raise ValidationError(f"{path}: its authentication code does not verify under this key: "
                              "the file was modified or saved with another key.")
    return True
