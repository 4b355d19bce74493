"""The files a binary dataset was opened from, and the O(1) check that they did not change.

:func:`fastdp.io.binary.open_binary` maps a dataset's arrays and trusts what was
checked when they were written (canonical structure, finite values, the
stored row norms).  That trust holds only while the files are the ones that
were opened: a file truncated after the open makes the next read of its
mapped pages a SIGBUS (the interpreter dies); a file rewritten in place
changes the mapped values behind the stored norms (a row above the norm bound
the privacy guarantee needs would be trained on as if it were below it); a
file replaced by another (a rename, ``convert --overwrite``) leaves the maps on
the old data while the directory holds another dataset.

:class:`MappedFiles` opens every file of the dataset itself, relative to one
descriptor of the dataset's directory and without following a symbolic link
(``O_NOFOLLOW``): the arrays are mapped from exactly the files whose identity
it records (device, inode, size, modification and status-change times, from
``fstat`` of the descriptor that is mapped, so nothing can be swapped between
the check and the map).  :meth:`MappedFiles.check` compares each name in that
directory with its record (one ``stat`` per file and one ``fstat`` of the
directory: a few microseconds, whatever the size of the data) and raises a
:class:`~fastdp.exceptions.ValidationError` naming what changed.  fastdp calls
it whenever it consults the record of a verified CSR
(:func:`fastdp._validation.trusted._verified`), i.e. at the start of every
fit, prediction and norm pass of an opened dataset, before anything is read
from the maps, any privacy is reserved or any model attribute is set.

Limits (stated in ``docs/large-data.md``):

* a change *during* a pass is not seen until the next pass, and a
  truncation then still faults (SIGBUS on a mapped page is a hardware fault,
  not an exception; as for :class:`numpy.memmap`);
* a rewrite that keeps the size, the inode and both times (a file system
  whose clock ticks coarser than the two writes, or a deliberate reset of
  both times, which needs root for the status-change time) is not seen;
* metadata changes (``chmod``, a new hard link) change the status-change
  time and so count as changes: reopen the dataset.

Privacy: reads file metadata only; releases nothing.
"""

import os
import stat
import weakref

from fastdp.exceptions import ValidationError

__all__ = ["MappedFiles"]

_REOPEN = "reopen it with open_binary"
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO in place of a file: refused, not waited on
# relative to a directory descriptor where the platform can (Linux, macOS); else by path
_DIR_FD = (os.open in os.supports_dir_fd and os.stat in os.supports_dir_fd
           and os.stat in os.supports_follow_symlinks and bool(_O_DIRECTORY))


def _identity(st):
    """What is compared: (device, inode, size, mtime_ns, ctime_ns)."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _describe_change(old, new):
    """Words for how identity ``new`` differs from ``old``."""
    if new is None:
        return "it was deleted or renamed"
    if old[:2] != new[:2]:
        return "it was replaced by another file (a rename over it, or the dataset written again)"
    if old[2] != new[2]:
        return f"its size changed from {old[2]} to {new[2]} bytes (truncated or extended)"
    return ("it was modified in place (modification or status-change time changed: "
            "rewritten, or its metadata changed)")


class MappedFiles:
    """The files of one opened binary dataset, with their identity at open.

    Parameters
    ----------
    path : pathlib.Path
        The dataset directory (a symbolic link to a directory is followed
        once, here: the user named it).

    Raises
    ------
    ValidationError
        If ``path`` cannot be opened as a directory.
    """

    def __init__(self, path):
        self.path = path
        self._records = {}
        self._dir = None
        self._root = os.path.abspath(path)  # by-path fallback (no directory descriptors)
        if _DIR_FD:
            try:
                self._dir = os.open(path, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
            except OSError as exc:
                raise ValidationError(f"{path} cannot be opened as a directory ({exc})") from None
            self._dir_id = _identity(os.fstat(self._dir))[:2]
            self._closer = weakref.finalize(self, os.close, self._dir)
        else:
            self._dir_id = _identity(os.stat(path))[:2]
            self._closer = None

    def close(self):
        """Close the directory descriptor (the records stay; :meth:`check` then fails)."""
        if self._closer is not None:
            self._closer()

    def open(self, name):
        """Open file ``name`` of the directory for reading, without following a link,
        and record its identity: a binary file object (the caller closes it).

        Raises
        ------
        FileNotFoundError
            If there is no such entry.
        ValidationError
            If the entry is a symbolic link or not a regular file.
        """
        flags = os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC | _O_NONBLOCK
        try:
            if self._dir is not None:
                fd = os.open(name, flags, dir_fd=self._dir)
            else:
                full = os.path.join(self._root, name)
                if os.path.islink(full):
                    raise OSError(getattr(os, "ELOOP", 40), "is a symbolic link")
                fd = os.open(full, flags | getattr(os, "O_BINARY", 0))
        except FileNotFoundError:
            raise
        except OSError as exc:
            if self._is_link(name):
                raise ValidationError(
                    f"{self.path / name} is a symbolic link; the files of a fastdp binary "
                    "dataset must be regular files inside its directory (fastdp checks "
                    "that they do not change while mapped, which a link would bypass: "
                    "copy the target in, or convert the data again)") from None
            raise ValidationError(f"{self.path / name} cannot be opened ({exc})") from None
        st = os.fstat(fd)  # before fdopen, which refuses a directory with its own error
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise ValidationError(f"{self.path / name} is not a regular file; a fastdp binary "
                                  "dataset holds regular files only")
        handle = os.fdopen(fd, "rb")
        self._records[name] = _identity(st)
        return handle

    def size(self, name):
        """The size of ``name`` when it was opened (bytes)."""
        return self._records[name][2]

    def _is_link(self, name):
        try:
            if self._dir is not None:
                return stat.S_ISLNK(os.stat(name, dir_fd=self._dir, follow_symlinks=False).st_mode)
            return os.path.islink(os.path.join(self._root, name))
        except OSError:
            return False

    def _current(self, name):
        try:
            if self._dir is not None:
                return _identity(os.stat(name, dir_fd=self._dir, follow_symlinks=False))
            return _identity(os.lstat(os.path.join(self._root, name)))
        except OSError:
            return None

    def _directory_gone(self):
        """True when the opened directory was deleted (its files went with it)."""
        try:
            if self._dir is not None:
                return os.fstat(self._dir).st_nlink == 0
            return _identity(os.stat(self._root))[:2] != self._dir_id
        except OSError:
            return True

    def _path_now(self):
        """Words for what ``path`` holds now, for the message of a deleted directory."""
        try:
            now = _identity(os.stat(self.path))[:2]
        except OSError:
            return f"{self.path} no longer exists"
        if now != self._dir_id:
            return (f"{self.path} now holds another dataset (written again, e.g. by "
                    "convert --overwrite)")
        return f"{self.path} was emptied"

    def check(self):
        """Raise a ValidationError if a file changed since it was opened (O(1) syscalls).

        Raises
        ------
        ValidationError
            "... changed since it was opened (...): reopen it with open_binary".
        """
        if self._dir is not None and not self._closer.alive:
            raise ValidationError(f"{self.path} was closed; {_REOPEN}.")
        if self._directory_gone():
            raise ValidationError(
                f"the binary dataset {self.path} changed since it was opened (its directory "
                f"was deleted or replaced; {self._path_now()}): the data mapped at open no "
                f"longer matches the path; {_REOPEN}.")
        for name, recorded in self._records.items():
            current = self._current(name)
            if current != recorded:
                raise ValidationError(
                    f"the binary dataset {self.path} changed since it was opened ({name}: "
                    f"{_describe_change(recorded, current)}); its stored row norms and checks "
                    f"no longer describe the mapped data, and reading a truncated map would "
                    f"kill the process (SIGBUS): {_REOPEN}.")
