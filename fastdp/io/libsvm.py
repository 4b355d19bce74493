"""LIBSVM / svmlight text into CSR: whole, by byte range, or chunk by chunk.

Public API
----------
load_libsvm
    The whole file (or a byte range of it) as one CSR matrix, equal to
    :func:`sklearn.datasets.load_svmlight_file`, parsed straight into the
    requested value and index dtypes with memory ≈ the final CSR.
iter_libsvm_chunks
    The rows in consecutive CSR chunks of bounded size.

Memory
------
The text passes through one reused buffer (:data:`~fastdp.io._source.CHUNK_BYTES`,
1 MiB; a longer line grows it) and compressed files stream through their
decompressor, so the input is never held whole.  The output arrays grow in
place (:mod:`fastdp.io._growable`): their reserve is never touched and the
final shrink frees it, so the peak of :func:`load_libsvm` is the final CSR
plus a fixed buffer: the text buffer, the parser's per-chunk scratch (qid
slots: 9 bytes per line of a chunk, about 0.5 MiB) and the decompressor's
own state (gzip 32 KiB, bzip2 about 4 MiB, xz up to 64 MiB at preset 9).

Privacy: loading reads the private data, releases nothing and spends no
privacy budget.
"""

import numbers

import numpy as np
import scipy.sparse as sp

from fastdp.exceptions import ValidationError
from fastdp.io._parse import INT32_MAX, CsrBuilder
from fastdp.io._source import CHUNK_BYTES, LineChunks

__all__ = ["load_libsvm", "iter_libsvm_chunks"]

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


# --------------------------------------------------------------------------- arguments


def _check_positive_int(value, name, allow_none=True):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValidationError(f"{name} must be {'None or ' if allow_none else ''}a positive "
                              f"integer, got {value!r}")
    return int(value)


def _check_value_dtype(dtype):
    try:
        dtype = np.dtype(dtype)
    except TypeError as exc:
        raise ValidationError(f"dtype {dtype!r} is not a numpy dtype") from exc
    if dtype not in _FLOATS:
        raise ValidationError(f"dtype must be float32 or float64; got {dtype}.")
    return dtype


def _check_index_dtype(index_dtype):
    if index_dtype is None:
        return None
    try:
        index_dtype = np.dtype(index_dtype)
    except TypeError as exc:
        raise ValidationError(f"index_dtype {index_dtype!r} is not a numpy dtype") from exc
    if index_dtype not in _INDEX_DTYPES:
        raise ValidationError(f"index_dtype must be None (chosen from the sizes), int32 or "
                              f"int64; got {index_dtype}.")
    return index_dtype


def _check_range(offset, length):
    if isinstance(offset, bool) or not isinstance(offset, numbers.Integral) or offset < 0:
        raise ValidationError(f"offset must be an integer >= 0 (bytes), got {offset!r}")
    if isinstance(length, bool) or not isinstance(length, numbers.Integral):
        raise ValidationError(f"length must be an integer (bytes; <= 0 reads to the end), "
                              f"got {length!r}")
    return int(offset), int(length)


def check_loader_arguments(n_features, zero_based, dtype, index_dtype, offset=0, length=-1):
    """Checked ``(n_features, zero_based, dtype, index_dtype, offset, length)``."""
    n_features = _check_positive_int(n_features, "n_features")
    if not (zero_based is True or zero_based is False or zero_based == "auto"):
        raise ValidationError(f"zero_based must be True, False or 'auto', got {zero_based!r}")
    offset, length = _check_range(offset, length)
    return (n_features, zero_based, _check_value_dtype(dtype), _check_index_dtype(index_dtype),
            offset, length)


def check_int32_columns(index_dtype, n_columns):
    """Refuse ``index_dtype=int32`` (forced) for data of more than ``INT32_MAX`` columns.

    int32 indices are used only while the column count fits int32 (the kernels
    count columns, and the estimators append one, in the index type); with
    ``index_dtype=None`` such data gets int64, with int32 forced it is this
    error, never a silent int64 result or an overflow.
    """
    if index_dtype is not None and np.dtype(index_dtype) == np.int32 and n_columns > INT32_MAX:
        raise ValidationError(
            f"index_dtype=int32 cannot hold this data: it has {n_columns} columns, more than "
            f"int32 can count ({INT32_MAX}); use index_dtype=int64 (or None: chosen from the "
            "sizes)")


def new_builder(dtype, index_dtype, zero_based, n_features, *, with_qid=False, note=""):
    """A :class:`CsrBuilder` for these options.

    ``index_dtype=None`` starts with int32 (int64 when ``n_features`` needs it)
    and widens in place if the entries outgrow int32; a forced int32 that the
    data outgrows is an error.
    """
    if index_dtype is None:
        start = np.int64 if n_features is not None and n_features > INT32_MAX else np.int32
        return CsrBuilder(dtype, start, allow_zero=zero_based is not False, with_qid=with_qid,
                          widen=True, note=note)
    if n_features is not None:
        check_int32_columns(index_dtype, n_features)
    return CsrBuilder(dtype, index_dtype, allow_zero=zero_based is not False,
                      with_qid=with_qid, widen=False, note=note)


def range_note(offset):
    return (f" (line numbers count from the first whole line after byte {offset})"
            if offset > 0 else "")


# --------------------------------------------------------------------------- the parsing loop


def _expected_totals(source, builder, more_rows, more_entries):
    """(rows, entries) the whole input should hold, extrapolated from the fraction of
    the raw bytes read so far (0, 0 when unknown)."""
    size = source.raw_size
    if size is None or source.offset or source.length > 0:
        return 0, 0
    done = source.raw_consumed
    if done <= 0:
        return 0, 0
    scale = size / done
    return int((builder.rows + more_rows) * scale), int((builder.nnz + more_entries) * scale)


def parse_chunks(source, builder, *, grow_to_total=False):
    """Parse every chunk of ``source`` into ``builder``; yields the text bytes of each
    chunk after it is parsed (the caller may take rows out of the builder then).

    With ``grow_to_total`` the builder's capacity grows towards the totals
    extrapolated from the bytes read so far (for a load that keeps everything).
    """
    for chunk in source:
        expected = (0, 0)
        if grow_to_total:
            expected = _expected_totals(source, builder, 0, 0)
        builder.parse(chunk, expected=expected)
        yield chunk.shape[0]


def resolve_columns(builder, zero_based, n_features, whole_file):
    """Shift one-based indices to zero-based (zero_based False, or "auto" over a whole
    file whose smallest index is >= 1) and return the number of columns."""
    one_based = zero_based is False or (zero_based == "auto" and whole_file
                                        and builder.nnz > 0 and builder.min_index > 0)
    max_index = builder.max_index - 1 if one_based else builder.max_index
    if one_based:
        builder.shift_indices(1)
    needed = max_index + 1 if builder.nnz > 0 else 1
    if n_features is None:
        return needed
    if n_features < needed:
        raise ValidationError(
            f"n_features={n_features} is too small: the file has feature index {needed - 1} "
            f"(0-based), so it needs n_features >= {needed}")
    return n_features


def csr_from_arrays(data, indices, indptr, shape):
    """A canonical ``csr_matrix`` over these very arrays (no copy, no scan).

    scipy's ``(data, indices, indptr)`` constructor scans int64 indices and
    may copy them to int32; here the arrays are attached as they are
    (``indices`` and ``indptr`` must share one dtype, rows sorted and
    unique).  The empty matrix made first holds an ``indptr`` of zeros that is
    never touched (so it costs no memory) and is replaced at once.
    """
    X = sp.csr_matrix(tuple(int(s) for s in shape), dtype=data.dtype)
    X.data, X.indices, X.indptr = data, indices, indptr
    X.has_sorted_indices = True
    X.has_canonical_format = True
    return X


def progress_callback(progress, source_size, desc):
    """(callback, bar) for ``progress`` (False: none; None: on a terminal; True: always)."""
    if progress is False:
        return None, None
    if progress is not None and progress is not True:
        raise ValidationError(f"progress must be True, False or None (a bar on a terminal); "
                              f"got {progress!r}")
    from fastdp.progress import progress_bar

    bar = progress_bar(total=source_size, desc=desc, unit="B", unit_scale=True, enabled=progress)
    return bar.update, bar


# --------------------------------------------------------------------------- public


def load_libsvm(path, n_features=None, zero_based="auto", dtype=np.float64, return_qid=False,
                *, index_dtype=None, offset=0, length=-1, progress=False, max_line_bytes=None,
                max_expansion=None):
    """Load a LIBSVM / svmlight file (or a byte range of it) into a canonical CSR matrix.

    Gives what :func:`sklearn.datasets.load_svmlight_file` gives on the same
    file (same shape, indices, bit-identical values and labels, same
    ``zero_based="auto"`` rule, same treatment of comments, ``qid:`` and
    blank lines), several times faster: the bytes are parsed by a compiled
    kernel, floats are converted with correct rounding and written straight
    into ``dtype`` (a float32 value is the parsed double rounded once, as
    scikit-learn stores it).  Memory: the final CSR plus a fixed buffer (see
    :mod:`fastdp.io.libsvm`).

    Privacy: loading releases nothing and spends no privacy budget.

    Parameters
    ----------
    path : str, path-like or binary file object
        Plain text, or gzip / bzip2 / xz compressed (recognised by content);
        compressed files are streamed through the decompressor.
    n_features : int, optional
        Number of columns. Default: largest index + 1. Passing a value smaller
        than that is an error; a larger value pads with empty columns (use this
        to give train and test files the same width, e.g. 123 for ``a9a.t``).
        Required with ``offset``/``length`` (as in scikit-learn).
    zero_based : bool or "auto", default="auto"
        Whether the file's indices start at 0. ``"auto"`` (scikit-learn's rule):
        one-based unless index 0 occurs anywhere in the file; with ``offset``
        or ``length`` it means zero-based (scikit-learn's rule for ranges: one
        range cannot tell).
    dtype : {numpy.float64, numpy.float32}, default=numpy.float64
        Value dtype. float32 halves the memory of the values.
    return_qid : bool, default=False
        Also return the query id of every row (-1 for rows without one).
    index_dtype : {None, numpy.int32, numpy.int64}, default=None
        Dtype of ``indices`` and ``indptr`` (scipy keeps them equal).
        ``None``: int32 when the rows, columns and entries fit (below 2**31),
        else int64. A forced int32 that the data outgrows (more than
        2**31 - 1 entries, rows or columns) is a ValidationError.
    offset, length : int, default 0 and -1
        Byte range, as scikit-learn's ``load_svmlight_file``: the first
        ``offset`` bytes and the rest of the line holding byte ``offset`` are
        skipped (when ``offset > 0``); reading stops after the line holding
        byte ``offset + length`` (when ``length > 0``). A line belongs to the
        range when the newline before it lies in ``[offset, offset +
        length)``, so ranges that tile the file give every row exactly once.
        Offsets count decompressed bytes.
    progress : bool or None, default=False
        A progress bar over the bytes read: None shows it only when stderr
        is a terminal, True always.
    max_line_bytes, max_expansion : optional
        Bounds of what a hostile file can make the loader allocate: the longest
        line (default 256 MiB) and, for a compressed file, the most
        decompressed bytes per compressed byte (default 200; see
        :class:`~fastdp.io._source.LineChunks`).  Beyond them: a ValidationError.

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_samples, n_features)
        Canonical (sorted unique indices per row, tight storage).
    y : ndarray of float64, shape (n_samples,)
    qid : ndarray of int64, shape (n_samples,), only if ``return_qid``

    Notes
    -----
    Where fastdp goes beyond scikit-learn: xz files and compression recognised
    by content (scikit-learn reads ``.gz``/``.bz2`` by file suffix); every
    malformed line raises :class:`LibsvmParseError` (a ``ValueError``) with its
    line number, including an index above 2**31 - 1 (an ``OverflowError`` in
    scikit-learn); qids are returned one per row. Indices are int32 when they
    fit (scikit-learn: int64). Byte ranges: scikit-learn (1.9) reads one
    line past a range that ends inside a blank or comment-only line, or that
    lies inside a single line, so that line's row is returned by two
    consecutive ranges; here it belongs to one range only. A plain file is
    read, never memory-mapped (a truncated memory map would kill the process
    with SIGBUS); a file that another program truncates, extends or replaces
    while it is read gives a :class:`~fastdp.exceptions.ValidationError`.
    scikit-learn's ``multilabel`` option is not supported.

    Raises
    ------
    LibsvmParseError
        On a malformed line (non-numeric label or value, token without ``:``,
        non-integer, negative or too large index, index 0 with
        ``zero_based=False``, unsorted or repeated indices in a row). The
        error's ``line_number`` is the 1-based line in the decompressed file
        (counted from the start of the range when ``offset > 0``).
    ValidationError
        On bad arguments, when ``n_features`` is smaller than the file needs,
        when a compressed file is truncated or corrupt, or when the file
        changes while it is read.
    """
    n_features, zero_based, dtype, index_dtype, offset, length = check_loader_arguments(
        n_features, zero_based, dtype, index_dtype, offset, length)
    ranged = offset > 0 or length > 0
    if ranged and n_features is None:
        raise ValidationError("n_features is required when offset or length is given (each "
                              "range must give matrices of the same width)")
    if ranged and zero_based == "auto":
        zero_based = True  # scikit-learn's rule for ranges
    builder = new_builder(dtype, index_dtype, zero_based, n_features, with_qid=return_qid,
                          note=range_note(offset))
    with LineChunks(path, offset=offset, length=length, max_line_bytes=max_line_bytes,
                    max_expansion=max_expansion) as source:
        callback, bar = progress_callback(progress, source.raw_size, "loading")
        source.set_progress(callback)
        try:
            for _ in parse_chunks(source, builder, grow_to_total=True):
                pass
        finally:
            if bar is not None:
                bar.close()
    n_columns = resolve_columns(builder, zero_based, n_features, whole_file=not ranged)
    check_int32_columns(index_dtype, n_columns)
    if index_dtype is None and max(n_columns, builder.rows) > INT32_MAX:
        builder.widen("")
    n_rows = builder.rows
    indptr, indices, data, labels, qids = builder.finish()
    X = csr_from_arrays(data, indices, indptr, (n_rows, n_columns))
    if return_qid:
        return X, labels, qids
    return X, labels


def iter_libsvm_chunks(path, chunk_rows=None, chunk_bytes=None, *, n_features=None,
                       zero_based="auto", dtype=np.float64, index_dtype=None, return_qid=False,
                       offset=0, length=-1):
    """Yield the rows of a LIBSVM file as consecutive CSR chunks, with bounded memory.

    Privacy: reading releases nothing and spends no privacy budget.

    Parameters
    ----------
    path : str, path-like or binary file object
        As :func:`load_libsvm` (plain, gzip, bzip2 or xz).
    chunk_rows : int, optional
        Rows per chunk (the last chunk may have fewer).
    chunk_bytes : int, optional
        About this many bytes of text per chunk (whole lines; a chunk closes
        once it holds at least ``chunk_bytes`` bytes, or at the end). When
        neither is given, ``chunk_bytes`` is 16 MiB.
    n_features : int, optional
        Width of every chunk. Default: each chunk is as wide as its largest
        index + 1 (pass ``n_features`` for chunks of one width).
    zero_based : bool or "auto", default="auto"
        As in byte-range loading, ``"auto"`` means zero-based (a chunk cannot
        see the whole file); pass ``zero_based=False`` for the usual
        one-based LIBSVM files.
    dtype, index_dtype, return_qid, offset, length
        As :func:`load_libsvm`.

    Yields
    ------
    X : csr_matrix, y : ndarray of float64 (and qid : ndarray of int64 if ``return_qid``)
        Fresh arrays (keeping a chunk keeps only it alive).

    Notes
    -----
    Memory: one chunk of output plus the fixed text buffer of
    :func:`load_libsvm`; a line is never split between chunks. Concatenating
    the chunks (``scipy.sparse.vstack``) gives ``load_libsvm`` of the same
    range with the same ``zero_based`` and ``n_features``.
    """
    n_features, zero_based, dtype, index_dtype, offset, length = check_loader_arguments(
        n_features, zero_based, dtype, index_dtype, offset, length)
    chunk_rows = _check_positive_int(chunk_rows, "chunk_rows")
    chunk_bytes = _check_positive_int(chunk_bytes, "chunk_bytes")
    if chunk_rows is None and chunk_bytes is None:
        chunk_bytes = 16 << 20
    if zero_based == "auto":
        zero_based = True
    builder = new_builder(dtype, index_dtype, zero_based, n_features, with_qid=return_qid,
                          note=range_note(offset))
    buffer_bytes = min(CHUNK_BYTES, chunk_bytes) if chunk_bytes else CHUNK_BYTES

    def emit(count):
        indptr, indices, data, labels, qids = builder.pop_rows(count)
        if zero_based is False and indices.size:
            indices -= 1
        needed = int(indices.max()) + 1 if indices.size else 1
        width = needed if n_features is None else n_features
        if width < needed:
            raise ValidationError(
                f"n_features={n_features} is too small: the file has feature index "
                f"{needed - 1} (0-based), so it needs n_features >= {needed}")
        check_int32_columns(index_dtype, width)
        if width > INT32_MAX and indices.dtype == np.int32:  # as load_libsvm: int64 then
            indices, indptr = indices.astype(np.int64), indptr.astype(np.int64)
        X = csr_from_arrays(data, indices, indptr, (labels.shape[0], width))
        return (X, labels, qids) if return_qid else (X, labels)

    text = 0
    with LineChunks(path, offset=offset, length=length, buffer_bytes=buffer_bytes) as source:
        for size in parse_chunks(source, builder):
            text += size
            while chunk_rows is not None and builder.rows >= chunk_rows:
                yield emit(chunk_rows)
            if chunk_bytes is not None and text >= chunk_bytes and builder.rows:
                text = 0
                yield emit(builder.rows)
    while builder.rows:
        yield emit(chunk_rows or builder.rows)
