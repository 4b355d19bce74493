"""fastdp's on-disk binary CSR: convert a LIBSVM file once, train on it memory-mapped.

A binary dataset is a directory (by convention named ``*.fdp``) holding

* ``indptr.npy``, ``indices.npy``, ``data.npy``: the canonical CSR arrays
  (``indices`` and ``indptr`` of one dtype, int32 or int64; ``data`` float32
  or float64);
* ``labels.npy``: float64 labels;
* ``row_sq_norms.npy``: float64 ``sum_j x_ij**2`` of every row, computed at
  conversion exactly as :func:`fastdp._validation.check_X` computes it, so a
  fit checks the row-norm bound in O(n) without reading X;
* ``kernel_sq_norms.npy`` (format version 2): the same sums as the solvers'
  kernels and the estimators' row map add them up (in storage order, one
  float64 square after the other: :func:`fastdp._kernels._scd.row_squared_norms`),
  which differ from ``check_X``'s pairwise sums in the last bits, so a fit
  takes the kernels' row norms from here instead of scanning all of X;
* ``header.json``: format and version, fastdp version, shape, nnz, dtypes,
  the length of every array, the source file's name, size and SHA-256, the
  conversion options, what was verified at conversion, and the SHA-256 of
  the header itself (``header_sha256``).

:func:`convert_libsvm` writes it in one streaming pass with bounded memory
(the loader's text buffer plus one chunk of rows: the arrays are appended to
their ``.npy`` files as the text is parsed and the headers fixed up at the
end), into a temporary directory renamed into place when complete.
:func:`open_binary` maps it (``numpy.load(mmap_mode="r")``) and returns a
``scipy.sparse.csr_matrix`` over the maps themselves: nothing is copied, and
training reads the data through the page cache, so data larger than RAM can
be trained on (see ``docs/large-data.md``).

Trust: :func:`open_binary` checks everything that is cheap (the header's own
SHA-256, the format version, every file's presence, dtype, length and size,
``indptr`` from 0 to nnz and never decreasing, the stored row norms against
each other) and then trusts the checks made at conversion (canonical
structure, finite values, the stored row norms), so a fit reads no more of X
than the solver does.  The trusted structure is still checked as it is used:
the compiled kernels check each row's column indices (strictly increasing
within ``[0, n_features)``) the first time the process reads that row, and
the Python paths that hand the whole matrix to scipy or numpy (prediction,
the per-epoch objectives, the balanced column split) check the rows first
(:func:`fastdp._validation.check_rows_as_read`); a damaged or forged
``indices.npy``, or a header re-signed with fewer features, gives a
``ValidationError`` naming the row, never an out-of-bounds access.  The
values and the stored norms are not re-checked (a consistently forged norm
file passes).  Treat a binary dataset like any file you execute or unpickle:
open only ones you produced.  ``verify=True`` repeats every check in full
(O(nnz), in bounded blocks) for one of unknown origin.

Files that change after opening: :func:`open_binary` opens every file itself,
relative to one descriptor of the dataset directory and without following a
symbolic link (an array file or header that is a link is refused; a link to
the directory, named by the caller, is resolved once), maps each array from
that very descriptor, and records each file's identity (device, inode, size,
modification and status-change times: :mod:`fastdp.io._mapped_files`).  The
verified registration of the returned CSR re-checks them, a few ``stat``
calls, whenever it is consulted (the start of every fit, prediction and norm
pass), and a file truncated, rewritten, replaced, deleted, or the dataset
written again to the same path (``convert --overwrite``), is then a
``ValidationError`` ("... changed since it was opened ...: reopen it with
open_binary") before anything is read from the maps, instead of a SIGBUS or a
fit on stale stored norms.  A change *during* a running fit cannot be caught:
a truncation then still faults (SIGBUS), as with :class:`numpy.memmap`.
``convert --overwrite`` of a dataset that is mapped is safe (it writes a new
directory and renames it into place; the old files are deleted, not
truncated, so the old maps keep reading the old data until the check refuses
them).  See ``docs/large-data.md``, "When the files change after opening".

Privacy: converting and opening read the private data and release nothing.
"""

import hashlib
import json
import operator
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import scipy.sparse as sp

from fastdp.exceptions import ValidationError
from fastdp.io._mapped_files import MappedFiles
from fastdp.io._npy import NpyAppender, read_npy_header
from fastdp.io._parse import INT32_MAX
from fastdp.io._source import LineChunks
from fastdp.io.libsvm import (check_int32_columns, check_loader_arguments, csr_from_arrays,
                              new_builder, parse_chunks, progress_callback)

__all__ = ["convert_libsvm", "save_binary", "open_binary", "open_binary_rows", "binary_shape",
           "is_binary_dataset", "FORMAT", "FORMAT_VERSION"]

FORMAT = "fastdp-binary-csr"
FORMAT_VERSION = 2  # 2: kernel_sq_norms.npy
HEADER = "header.json"
_ARRAYS = ("indptr", "indices", "data", "labels", "row_sq_norms", "kernel_sq_norms")
_REDO = "convert the LIBSVM file again (fastdp convert SRC DST)"


def _corrupt(path, what):
    return ValidationError(f"{path} is not a valid fastdp binary dataset: {what}; {_REDO}.")


def _header_digest(header):
    """SHA-256 of the header without its own ``header_sha256`` field (canonical JSON)."""
    body = {key: value for key, value in header.items() if key != "header_sha256"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def is_binary_dataset(path):
    """True when ``path`` is a directory holding a binary dataset header."""
    try:
        return Path(path).is_dir() and (Path(path) / HEADER).is_file()
    except TypeError:
        return False


# --------------------------------------------------------------------------- conversion


class _Writers:
    """The ``.npy`` appenders of a conversion, and the index bookkeeping."""

    def __init__(self, directory, dtype, index_dtype):
        self.files = {
            "indptr": NpyAppender(directory / "indptr.npy", index_dtype),
            "indices": NpyAppender(directory / "indices.npy", index_dtype),
            "data": NpyAppender(directory / "data.npy", dtype),
            "labels": NpyAppender(directory / "labels.npy", np.float64),
            "row_sq_norms": NpyAppender(directory / "row_sq_norms.npy", np.float64),
            "kernel_sq_norms": NpyAppender(directory / "kernel_sq_norms.npy", np.float64),
        }
        self.files["indptr"].append(np.zeros(1, dtype=index_dtype))
        self.rows = 0
        self.nnz = 0

    def widen(self):
        self.files["indptr"].widen_to_int64()
        self.files["indices"].widen_to_int64()

    def index_for(self, file_index, rows, nnz, index_dtype):
        """The index dtype of the file once ``rows`` rows with ``nnz`` entries are added.

        int32 indices are widened to int64 when the totals would pass
        ``INT32_MAX``, unless the caller fixed ``index_dtype`` (then a
        ValidationError).
        """
        if file_index == np.int32 and max(self.nnz + nnz, self.rows + rows) > INT32_MAX:
            if index_dtype is not None:
                raise ValidationError(
                    f"the data has more than {INT32_MAX} entries or rows, too many for "
                    "index_dtype=int32; use int64 (or None)")
            self.widen()
            return np.dtype(np.int64)
        return file_index

    def append(self, indptr, indices, data, labels, sq_norms):
        """Append one chunk of rows (``indptr`` relative to the chunk, from 0)."""
        from fastdp._kernels._scd import row_squared_norms

        self.files["kernel_sq_norms"].append(row_squared_norms(data, indptr))
        self.files["indptr"].append(indptr[1:].astype(np.int64) + self.nnz)
        self.files["indices"].append(indices)
        self.files["data"].append(data)
        self.files["labels"].append(labels)
        self.files["row_sq_norms"].append(sq_norms)
        self.rows += labels.shape[0]
        self.nnz += indices.shape[0]

    def close(self):
        return {name: writer.close() for name, writer in self.files.items()}

    def abort(self):
        for writer in self.files.values():
            writer.abort()


def convert_libsvm(src, dst, *, dtype=np.float64, index_dtype=None, n_features=None,
                   zero_based="auto", overwrite=False, progress=False, max_line_bytes=None,
                   max_expansion=None):
    """Convert a LIBSVM file into a binary dataset directory (one streaming pass).

    Privacy: reads the private data; writes it (unchanged but for the dtype)
    to ``dst``; releases nothing.

    Parameters
    ----------
    src : str or path-like
        LIBSVM / svmlight file, plain or gzip / bzip2 / xz (as
        :func:`~fastdp.io.libsvm.load_libsvm`).
    dst : str or path-like
        Directory to create (by convention ``*.fdp``).
    dtype : {numpy.float64, numpy.float32}, default=numpy.float64
        Value dtype on disk.
    index_dtype : {None, numpy.int32, numpy.int64}, default=None
        None: int32 when the rows, columns and entries fit, else int64 (the
        files are widened in place if the data outgrows int32).  A forced
        int32 that the data outgrows (more than 2**31 - 1 entries, rows or
        columns) is a ValidationError.
    n_features : int, optional
        Number of columns (default: largest index + 1).
    zero_based : bool or "auto", default="auto"
        As :func:`~fastdp.io.libsvm.load_libsvm` on the whole file: the result
        equals ``load_libsvm(src, ...)``.  ``"auto"`` writes indices as
        one-based and, if an index 0 turns up, shifts what was written back
        once, in place.
    overwrite : bool, default=False
        Replace an existing ``dst``.
    progress : bool or None, default=False
        A progress bar over the bytes read (None: only on a terminal).
    max_line_bytes, max_expansion : optional
        Bounds on a hostile source (longest line; decompressed bytes per
        compressed byte), as :func:`~fastdp.io.libsvm.load_libsvm`.

    Returns
    -------
    header : dict
        The header written to ``dst/header.json``.

    Raises
    ------
    LibsvmParseError, ValidationError
        As :func:`~fastdp.io.libsvm.load_libsvm`; also when ``dst`` exists and
        ``overwrite`` is False.  Nothing is left at ``dst`` on error.

    Notes
    -----
    Memory: the loader's fixed text buffer plus one chunk of parsed rows
    (about 1 MiB of text) and its row norms: a few MiB whatever the file size.
    """
    from fastdp._validation import _csr_sq_norms

    n_features, zero_based, dtype, index_dtype, _, _ = check_loader_arguments(
        n_features, zero_based, dtype, index_dtype)
    if n_features is not None:
        check_int32_columns(index_dtype, n_features)
    dst, work = _work_directory(dst, overwrite)
    file_index = np.dtype(np.int64 if index_dtype == np.int64 or (
        n_features is not None and n_features > INT32_MAX) else np.int32)
    writers = _Writers(work, dtype, file_index)
    # one chunk at a time, in the files' dtypes (a chunk never outgrows int32)
    builder = new_builder(dtype, np.int32, zero_based, None)
    shift = 0 if zero_based is True else 1  # "auto": one-based until an index 0 is seen
    finite = True
    try:
        with LineChunks(src, sha256=True, max_line_bytes=max_line_bytes,
                        max_expansion=max_expansion) as source:
            callback, bar = progress_callback(progress, source.raw_size, "converting")
            source.set_progress(callback)
            try:
                for _ in parse_chunks(source, builder):
                    if zero_based == "auto" and shift and builder.min_index == 0:
                        writers.files["indices"].add(1)  # the file is zero-based after all
                        shift = 0
                    if builder.rows == 0:
                        continue
                    rows, nnz = builder.rows, builder.nnz
                    file_index = writers.index_for(file_index, rows, nnz, index_dtype)
                    indptr, indices, data, labels = builder.drain()  # views: no copy
                    if shift:
                        indices -= shift
                    # the norms read only these attributes of a CSR matrix
                    sq_norms = _csr_sq_norms(SimpleNamespace(indptr=indptr, data=data,
                                                             shape=(rows, INT32_MAX)))
                    # a NaN or an infinity makes its row's sum of squares non-finite, so
                    # finite norms prove finite values without another pass over the data
                    if finite and not np.isfinite(sq_norms).all():
                        finite = bool(np.isfinite(data).all())
                    writers.append(indptr, indices, data, labels, sq_norms)
            finally:
                if bar is not None:
                    bar.close()
        needed = builder.max_index - shift + 1 if writers.nnz > 0 else 1
        if n_features is None:
            n_features = needed
        elif n_features < needed:
            raise ValidationError(
                f"n_features={n_features} is too small: the file has feature index "
                f"{needed - 1} (0-based), so it needs n_features >= {needed}")
        check_int32_columns(index_dtype, n_features)
        if file_index == np.int32 and n_features > INT32_MAX:
            writers.widen()
            file_index = np.dtype(np.int64)
        lengths = writers.close()
    except BaseException:
        try:
            writers.abort()  # may fail too (e.g. a full disk while flushing)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        raise
    source_info = {"name": os.path.basename(source.name), "size": source.raw_size,
                   "sha256": source.sha256, "compression": source.compression}
    options = {"zero_based": zero_based, "zero_based_file": shift == 0}
    header = _header(writers, lengths, n_features, dtype, file_index, source_info, options,
                     finite)
    _publish(work, dst, header)
    return header


def _header(writers, lengths, n_features, dtype, file_index, source, options, finite):
    """The header of a written dataset, with its own SHA-256."""
    from fastdp import __version__

    header = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "fastdp_version": __version__,
        "shape": [int(writers.rows), int(n_features)],
        "nnz": int(writers.nnz),
        "dtype": dtype.name,
        "index_dtype": file_index.name,
        "arrays": {name: {"file": f"{name}.npy", "length": int(lengths[name]),
                          "dtype": writers.files[name].dtype.str} for name in _ARRAYS},
        "source": source,
        "options": options,
        "verified": {"structure": True, "finite": finite},
    }
    header["header_sha256"] = _header_digest(header)
    return header


def _publish(work, dst, header):
    """Write ``header.json`` into the complete directory ``work`` and rename it to ``dst``."""
    try:
        with open(work / HEADER, "w", encoding="ascii") as handle:
            json.dump(header, handle, indent=1, sort_keys=True)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        if dst.exists():
            shutil.rmtree(dst)
        os.replace(work, dst)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def _replaceable(dst):
    """True when ``overwrite`` may delete ``dst``: an empty directory or a binary dataset
    (a real directory whose ``header.json`` names this format), never a link or a file."""
    if dst.is_symlink() or not dst.is_dir():
        return False
    if not any(dst.iterdir()):
        return True
    try:
        with open(dst / HEADER, encoding="ascii") as handle:
            return json.load(handle).get("format") == FORMAT
    except (OSError, ValueError, RecursionError, AttributeError):
        return False


def _work_directory(dst, overwrite):
    """A fresh temporary directory beside ``dst`` (refuses an existing ``dst``, and with
    ``overwrite`` anything but an empty directory or a binary dataset)."""
    dst = Path(dst)
    if (dst.exists() or dst.is_symlink()) and not overwrite:
        raise ValidationError(f"{dst} already exists; pass overwrite=True (--overwrite) to "
                              "replace it")
    if (dst.exists() or dst.is_symlink()) and not _replaceable(dst):
        raise ValidationError(
            f"{dst} exists and is not a fastdp binary dataset (nor an empty directory); "
            "overwrite replaces only those, so nothing was deleted: choose another DST or "
            "remove it yourself")
    work = dst.with_name(f"{dst.name}.partial-{os.getpid()}")
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    return dst, work


def save_binary(dst, chunks, *, n_features, dtype=np.float64, index_dtype=None,
                overwrite=False):
    """Write a binary dataset from consecutive CSR row chunks (bounded memory).

    For data that is not a LIBSVM file (generated, or read from another
    format): the rows of ``chunks``, in order, become the dataset that
    :func:`open_binary` maps, with the same checks and stored row norms as
    :func:`convert_libsvm`.  Only one chunk is in memory at a time (plus its
    row norms).

    Privacy: writes the data it is given to ``dst``; releases nothing.

    Parameters
    ----------
    dst : str or path-like
        Directory to create (by convention ``*.fdp``).
    chunks : iterable of (X, y)
        ``X`` a canonical ``scipy.sparse`` CSR matrix (strictly increasing
        column indices in every row) of ``n_features`` columns, ``y`` its
        labels (1-D, one per row).
    n_features : int
        Number of columns.
    dtype : {numpy.float64, numpy.float32}, default=numpy.float64
        Value dtype on disk (values are cast; the row norms are those of the
        cast values).
    index_dtype : {None, numpy.int32, numpy.int64}, default=None
        None: int32 while the rows, columns and entries fit, widened in place
        to int64 when they do not; a forced int32 they outgrow is an error.
    overwrite : bool, default=False
        Replace an existing ``dst``.

    Returns
    -------
    header : dict
        The header written to ``dst/header.json`` (its ``source`` fields are
        None: there is no source file).

    Raises
    ------
    ValidationError
        A chunk that is not CSR, has another width, is not canonical, or
        whose labels do not match its rows; a forced int32 that the data
        outgrows; an existing ``dst`` without ``overwrite``.  Nothing is left
        at ``dst`` on error.
    """
    from fastdp._validation import _csr_is_canonical, _csr_sq_norms, check_sparse_structure

    n_features = check_loader_arguments(n_features, "auto", dtype, index_dtype)[0]
    if n_features is None:
        raise ValidationError("n_features is required")
    dtype, index_dtype = check_loader_arguments(None, "auto", dtype, index_dtype)[2:4]
    check_int32_columns(index_dtype, n_features)
    dst, work = _work_directory(dst, overwrite)
    file_index = np.dtype(np.int64 if index_dtype == np.int64 or n_features > INT32_MAX
                          else np.int32)
    writers = _Writers(work, dtype, file_index)
    finite = True
    try:
        for number, (X, y) in enumerate(chunks):
            if not (sp.issparse(X) and X.format == "csr") or X.shape[1] != n_features:
                raise ValidationError(
                    f"chunk {number}: expected a CSR matrix of {n_features} columns, got "
                    f"{type(X).__name__} of shape {getattr(X, 'shape', None)}")
            y = np.asarray(y, dtype=np.float64)
            if y.shape != (X.shape[0],):
                raise ValidationError(f"chunk {number}: {X.shape[0]} rows but labels of shape "
                                      f"{y.shape}")
            check_sparse_structure(X)
            if not _csr_is_canonical(X):
                raise ValidationError(f"chunk {number}: the column indices of a row are not "
                                      "strictly increasing (call sum_duplicates() and "
                                      "sort_indices() first)")
            file_index = writers.index_for(file_index, X.shape[0], X.nnz, index_dtype)
            data = np.asarray(X.data, dtype=dtype)
            chunk = csr_from_arrays(data, X.indices, X.indptr, X.shape)
            sq_norms = _csr_sq_norms(chunk)
            finite = finite and bool(np.isfinite(data).all())
            writers.append(np.asarray(X.indptr, dtype=np.int64), X.indices, data, y, sq_norms)
        lengths = writers.close()
    except BaseException:
        try:
            writers.abort()  # may fail too (e.g. a full disk while flushing)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        raise
    source = {"name": None, "size": None, "sha256": None, "compression": None}
    header = _header(writers, lengths, n_features, dtype, file_index, source,
                     {"written_by": "save_binary"}, finite)
    _publish(work, dst, header)
    return header


# --------------------------------------------------------------------------- opening


def _read_header(path, files):
    """The checked header of the dataset at ``path``, read through ``files``
    (:class:`~fastdp.io._mapped_files.MappedFiles`, which records its identity)."""
    try:
        handle = files.open(HEADER)
    except FileNotFoundError:
        raise _corrupt(path, f"{HEADER} is missing") from None
    try:
        with handle:
            header = json.loads(handle.read().decode("ascii"))
    except (OSError, ValueError) as exc:  # also undecodable bytes, 5000-digit numbers
        raise _corrupt(path, f"{HEADER} cannot be read ({exc})") from None
    except RecursionError:
        raise _corrupt(path, f"{HEADER} is nested too deeply to be a header") from None
    if not isinstance(header, dict):
        raise _corrupt(path, f"{HEADER} does not hold a JSON object")
    if header.get("format") != FORMAT:
        raise _corrupt(path, f"{HEADER} is not a {FORMAT} header")
    if header.get("format_version") != FORMAT_VERSION:
        raise ValidationError(
            f"{path} has format version {header.get('format_version')!r}; this fastdp reads "
            f"version {FORMAT_VERSION} (version 2 adds the row norms as the solvers sum them, "
            f"so that a fit does not scan X for them): {_REDO}.")
    if header.get("header_sha256") != _header_digest(header):
        raise _corrupt(path, f"{HEADER} does not match its SHA-256 (it was edited or damaged)")
    return header


def _open_files(path):
    """:class:`~fastdp.io._mapped_files.MappedFiles` of the dataset directory ``path``."""
    if not path.is_dir():
        if path.exists():
            raise ValidationError(f"{path} is not a directory: a fastdp binary dataset is a "
                                  f"directory made by `fastdp convert` (or convert_libsvm)")
        raise ValidationError(f"no such binary dataset: {path}")
    return MappedFiles(path)


def _header_fields(path, header):
    """(n_rows, n_cols, nnz, dtype, index_dtype) from a checked header."""
    def count(value):  # a JSON integer: not a float, a string or a boolean
        if type(value) is not int:
            raise TypeError(f"{value!r} is not an integer")
        return value

    try:
        n_rows, n_cols = (count(v) for v in header["shape"])
        nnz = count(header["nnz"])
        dtype = np.dtype(header["dtype"])
        index_dtype = np.dtype(header["index_dtype"])
        arrays = header["arrays"]
        if set(arrays) != set(_ARRAYS):
            raise KeyError("arrays")
        if not isinstance(header.get("verified", {}), dict):
            raise TypeError("verified is not an object")
    except (KeyError, TypeError, ValueError) as exc:
        raise _corrupt(path, f"{HEADER} lacks or garbles a field ({exc})") from None
    if (dtype not in (np.float32, np.float64) or index_dtype not in (np.int32, np.int64)
            or min(n_rows, n_cols, nnz) < 0):
        raise _corrupt(path, f"{HEADER} has an unsupported dtype or a negative size")
    return n_rows, n_cols, nnz, dtype, index_dtype


def _map_array(path, files, name, expected_dtype, expected_length):
    """A read-only map of one array, with its dtype, length and size checked.

    The map is made from the very descriptor ``files`` opened (no symbolic
    link followed) and whose identity it recorded, so that
    :meth:`~fastdp.io._mapped_files.MappedFiles.check` later compares the
    directory with exactly the file that is mapped.
    """
    file = f"{name}.npy"
    try:
        handle = files.open(file)
    except FileNotFoundError:
        raise _corrupt(path, f"{file} is missing") from None
    with handle:
        try:
            shape, _, dtype = read_npy_header(handle)
        except (OSError, ValueError, EOFError, SyntaxError) as exc:
            raise _corrupt(path, f"{file} cannot be mapped ({exc}); it is probably "
                                 "truncated") from None
        if dtype != expected_dtype or shape != (expected_length,):
            raise _corrupt(path, f"{file} holds {dtype} of shape {shape}, the header says "
                                 f"{np.dtype(expected_dtype)} of shape ({expected_length},)")
        offset = handle.tell()
        size = files.size(file)
        if size != offset + expected_length * dtype.itemsize:
            raise _corrupt(path, f"{file} has {size} bytes, "
                                 f"{offset + expected_length * dtype.itemsize} expected "
                                 "(truncated or extended)")
        if expected_length == 0:  # nothing to map (an empty file cannot be mapped)
            return np.zeros(0, dtype=dtype)
        try:
            return np.memmap(handle, dtype=dtype, mode="r", shape=shape, offset=offset)
        except (OSError, ValueError) as exc:  # e.g. truncated since its size was read
            raise _corrupt(path, f"{file} cannot be mapped ({exc})") from None


def _map_all(path):
    """The header's fields, the checked maps of a binary dataset (O(1) reads) and its
    :class:`~fastdp.io._mapped_files.MappedFiles` (the caller closes it or hands it to
    the verified registration)."""
    files = _open_files(path)
    try:
        header = _read_header(path, files)
        n_rows, n_cols, nnz, dtype, index_dtype = _header_fields(path, header)
        expected = {"indptr": (index_dtype, n_rows + 1), "indices": (index_dtype, nnz),
                    "data": (dtype, nnz), "labels": (np.float64, n_rows),
                    "row_sq_norms": (np.float64, n_rows),
                    "kernel_sq_norms": (np.float64, n_rows)}
        arrays = {name: _map_array(path, files, name, *expected[name]) for name in _ARRAYS}
    except BaseException:
        files.close()
        raise
    indptr = arrays["indptr"]
    if int(indptr[0]) != 0 or int(indptr[-1]) != nnz:
        files.close()
        raise _corrupt(path, f"indptr runs from {int(indptr[0])} to {int(indptr[-1])}, not "
                             f"from 0 to nnz = {nnz}")
    return header, (n_rows, n_cols), arrays, files


def _check_row_metadata(path, indptr, sq_norms, kernel_sq_norms, finite):
    """The O(n) checks of what :func:`open_binary` trusts without reading X.

    ``indptr`` is non-decreasing (with its checked ends, every row's range lies in
    ``[0, nnz]``); both stored squared row norms are >= 0 (NaN only together, and only
    when the header does not claim finite values: such values are refused when X is
    validated for a fit), 0 for an empty row, and equal to each other up to the
    rounding of their two summation orders (relative ``4 (k + 2) 2**-53`` for a row of
    k entries; infinite only together).
    A damaged, swapped or hand-edited ``indptr.npy``, ``row_sq_norms.npy`` or
    ``kernel_sq_norms.npy`` fails here; both norm files forged consistently (or X
    edited behind them) does not: that needs ``verify=True``.
    """
    lengths = np.diff(np.asarray(indptr, dtype=np.int64))
    bad = np.flatnonzero(lengths < 0)
    if bad.size:
        j = int(bad[0])
        raise _corrupt(path, f"indptr decreases at row {j} (indptr[{j}] = {int(indptr[j])}, "
                             f"indptr[{j + 1}] = {int(indptr[j + 1])})")
    both_nan = np.isnan(sq_norms) & np.isnan(kernel_sq_norms) & (not finite)
    for name, norms in (("row_sq_norms", sq_norms), ("kernel_sq_norms", kernel_sq_norms)):
        bad = np.flatnonzero((~(norms >= 0.0) & ~both_nan)
                             | ((lengths == 0) & (norms != 0.0)))
        if bad.size:
            j = int(bad[0])
            raise _corrupt(path, f"{name}.npy holds {float(norms[j])!r} for row {j} of "
                                 f"{int(lengths[j])} entries (a squared norm is >= 0, and 0 "
                                 "for an empty row)")
    with np.errstate(invalid="ignore"):
        gap = np.abs(sq_norms - kernel_sq_norms)
        allowed = 4.0 * (lengths + 2) * 2.0**-53 * np.maximum(sq_norms, kernel_sq_norms)
    bad = np.flatnonzero(~((gap <= allowed) | (sq_norms == kernel_sq_norms) | both_nan))
    if bad.size:
        j = int(bad[0])
        raise _corrupt(path, f"the two stored squared norms of row {j} disagree "
                             f"({float(sq_norms[j])!r} in row_sq_norms.npy, "
                             f"{float(kernel_sq_norms[j])!r} in kernel_sq_norms.npy)")


def binary_shape(path):
    """``(n_rows, n_features)`` of a binary dataset, from its checked header alone.

    Privacy: reads only public sizes; releases nothing.

    Raises
    ------
    ValidationError
        As :func:`open_binary` for a missing or damaged header.
    """
    path = Path(path)
    files = _open_files(path)
    try:
        n_rows, n_cols = _header_fields(path, _read_header(path, files))[:2]
    finally:
        files.close()
    return n_rows, n_cols


def open_binary_rows(path, start, stop):
    """Rows ``[start, stop)`` of a binary dataset, copied out of the maps: ``(X, y)``.

    Reads the header, the two ``indptr`` entries that bound the range, and
    the range's own entries and labels; no other row is read or copied.  The
    rows are *not* registered as verified: the caller checks them (e.g. with
    :func:`fastdp._validation.check_X`), so damage inside the range is found
    there.

    Privacy: reads the private data; releases nothing.

    Parameters
    ----------
    path : str or path-like
        Directory written by :func:`convert_libsvm`.
    start, stop : int
        ``0 <= start <= stop <= n_rows``.

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (stop - start, n_features)
        Built by scipy's constructor (not assumed canonical).
    y : ndarray of float64

    Raises
    ------
    ValidationError
        As :func:`open_binary`; also for a row range outside the data or an
        ``indptr`` that does not bound the range within ``[0, nnz]``.
    """
    path = Path(path)
    _, (n_rows, n_cols), arrays, files = _map_all(path)
    files.close()  # the rows are copied now, before anything else can change the files
    try:
        start, stop = operator.index(start), operator.index(stop)
    except TypeError:
        raise ValidationError(f"start and stop must be integers (row numbers); got {start!r} "
                              f"and {stop!r}") from None
    if not 0 <= start <= stop <= n_rows:
        raise ValidationError(f"rows {start}..{stop - 1} are outside {path} ({n_rows} rows)")
    indptr = np.array(arrays["indptr"][start:stop + 1], dtype=np.int64)
    a, b = int(indptr[0]), int(indptr[-1])
    if not 0 <= a <= b <= arrays["indices"].shape[0]:
        raise _corrupt(path, f"indptr bounds rows {start}..{stop - 1} by entries {a}..{b}")
    indptr -= a
    X = sp.csr_matrix((np.array(arrays["data"][a:b]), np.array(arrays["indices"][a:b]), indptr),
                      shape=(stop - start, n_cols))
    return X, np.array(arrays["labels"][start:stop])


def open_binary(path, *, verify=False, source=None):
    """Open a binary dataset memory-mapped: ``(X, y)`` without copying X.

    Privacy: reads the private data; releases nothing.

    Parameters
    ----------
    path : str or path-like
        Directory written by :func:`convert_libsvm` (``fastdp convert``).
    verify : bool, default=False
        Repeat every check of the conversion (structure, finite values, row
        norms) in full: O(nnz), in bounded blocks.  Use it for a dataset you
        did not convert yourself.
    source : str or path-like, optional
        The LIBSVM file the dataset should come from: its size and SHA-256
        must match the ones recorded at conversion (reads the whole file).

    Returns
    -------
    X : scipy.sparse.csr_matrix
        Over read-only ``numpy.memmap`` arrays (``X.data``, ``X.indices``,
        ``X.indptr`` are the maps themselves), canonical.  fastdp's
        validation trusts the checks made at conversion for these arrays
        (see :func:`fastdp._validation.register_verified_csr`) while the
        dataset's files are the ones opened: once one changes on disk, the
        next fit, prediction or norm pass of X raises a ValidationError
        (reopen the dataset; see the module docstring).
    y : ndarray of float64
        The labels (read into memory: O(n)).

    Raises
    ------
    ValidationError
        One clear error for a missing directory, header or array file, a
        header that does not match its SHA-256 or lacks a field, an array of
        another dtype or length than the header says, a truncated or
        extended file, an ``indptr`` that does not run from 0 to nnz, a
        failed ``verify``, a ``source`` that does not match, or a file of the
        dataset that is a symbolic link (or not a regular file).
    """
    path = Path(path)
    header, (n_rows, n_cols), arrays, files = _map_all(path)
    try:
        X, y = _checked_csr(path, header, (n_rows, n_cols), arrays, files, verify, source)
    except BaseException:
        files.close()
        raise
    return X, y


def _checked_csr(path, header, shape, arrays, files, verify, source):
    """:func:`open_binary` once the arrays are mapped: the checks, the registration."""
    from fastdp._kernels._scd import row_squared_norms
    from fastdp._validation import (_csr_is_canonical, _csr_sq_norms, _reject_non_finite_csr,
                                    check_sparse_structure, register_verified_csr)

    n_rows, n_cols = shape
    indptr = arrays["indptr"]
    if source is not None:
        _check_source(path, header, source)
    X = csr_from_arrays(arrays["data"], arrays["indices"], indptr, (n_rows, n_cols))
    sq_norms = np.array(arrays["row_sq_norms"])
    kernel_sq_norms = np.array(arrays["kernel_sq_norms"])
    finite = bool(header.get("verified", {}).get("finite", False))
    _check_row_metadata(path, indptr, sq_norms, kernel_sq_norms, finite)
    if verify:
        try:
            check_sparse_structure(X)
            canonical = _csr_is_canonical(X)
        except ValidationError as exc:
            raise _corrupt(path, f"verify: {exc}") from None
        if not canonical:
            raise _corrupt(path, "verify: the column indices of a row are not strictly "
                                 "increasing")
        try:
            _reject_non_finite_csr(X)
            finite = True
        except ValidationError:
            finite = False
        if not np.array_equal(_csr_sq_norms(X).view(np.uint64), sq_norms.view(np.uint64)):
            raise _corrupt(path, "verify: the stored row norms do not match the data")
        if not np.array_equal(row_squared_norms(X.data, X.indptr).view(np.uint64),
                              kernel_sq_norms.view(np.uint64)):
            raise _corrupt(path, "verify: the stored kernel row norms do not match the data")
    if header.get("verified", {}).get("structure") is True or verify:
        files.check()  # nothing changed while they were read
        # every later use of the registration first checks that the files are unchanged
        register_verified_csr(X, sq_norms=sq_norms, finite=finite,
                              kernel_sq_norms=kernel_sq_norms, guard=files.check,
                              scanned=verify)
    else:
        files.close()
    return X, np.array(arrays["labels"])


def _check_source(path, header, source):
    recorded = header.get("source", {})
    digest = hashlib.sha256()
    size = 0
    with open(source, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
            size += len(block)
    if size != recorded.get("size") or digest.hexdigest() != recorded.get("sha256"):
        raise ValidationError(
            f"{path} was converted from another file than {source} (size {recorded.get('size')}"
            f" and SHA-256 {recorded.get('sha256')} recorded; the file has {size} and "
            f"{digest.hexdigest()}): {_REDO}.")
