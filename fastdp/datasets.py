"""Data layer: a fast LIBSVM loader, LIBSVM-like synthetic data and the real datasets.

Privacy meaning
---------------
Nothing in this module releases anything: loading and generating data spend no
privacy budget. The functions here only *read* the private data set; what later
touches it (preprocessing, solvers) states its own privacy meaning. The real
datasets are public research data; IPUMS-BR is loadable for reproductions but
must never be copied into the repository or a package (IPUMS terms of use).

Public API
----------
load_libsvm
    Numba byte parser equal to :func:`sklearn.datasets.load_svmlight_file`.
make_sparse_classification, make_sparse_regression
    Synthetic sparse data (Zipf column popularity, Poisson row lengths,
    lognormal values, unit-norm rows, a planted linear model).
load_dataset, DATASETS
    The real datasets of ``shared/data/MANIFEST.md``.
"""

import bz2
import gzip
import lzma
import os
import stat
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from fastdp._kernels import _libsvm_parse as _kernel
from fastdp._validation import check_integer
from fastdp.exceptions import DatasetNotFoundError, LibsvmParseError, ValidationError

__all__ = [
    "load_libsvm",
    "make_sparse_classification",
    "make_sparse_regression",
    "load_dataset",
    "dataset_search_paths",
    "DATASETS",
]

# --------------------------------------------------------------------------- #
# LIBSVM loader
# --------------------------------------------------------------------------- #

_MAGIC_DECOMPRESSORS = (
    (b"\x1f\x8b", gzip.decompress),
    (b"BZh", bz2.decompress),
    (b"\xfd7zXZ\x00", lzma.decompress),
)


def _decompress_if_needed(raw):
    for magic, decompress in _MAGIC_DECOMPRESSORS:
        if raw[: len(magic)] == magic:
            try:
                return decompress(raw)
            except (EOFError, OSError, ValueError, lzma.LZMAError) as exc:
                raise ValidationError(
                    f"the file starts like a compressed file ({decompress.__module__}) but "
                    f"cannot be decompressed: {exc}. It is probably truncated or corrupt; "
                    "download or copy it again."
                ) from exc
    return raw


def _read_bytes(source):
    """Whole content of a path or binary file object, decompressed if needed.

    The compression (gzip, bzip2, xz) is recognised by the magic bytes, so the
    file name does not matter.
    """
    if hasattr(source, "read"):
        raw = source.read()
        if isinstance(raw, str):
            raise ValidationError("open the file in binary mode ('rb') before passing it to load_libsvm")
        return bytes(_decompress_if_needed(raw))
    try:
        path = os.fspath(source)
    except TypeError:
        raise ValidationError(
            f"load_libsvm expects a path or a binary file object, got {type(source).__name__}"
        ) from None
    with open(path, "rb") as f:
        return bytes(_decompress_if_needed(f.read()))


def _changed_while_reading(path, detail):
    return ValidationError(
        f"{path} changed while it was being read ({detail}); another program is writing, "
        "truncating or replacing it. Load it again once it is complete (or load a copy).")


def _read_whole_file(handle, path):
    """The whole content of an open file, read into memory (bytes).

    For a regular file the size is taken before reading and checked again
    afterwards (one byte more is asked for, which must not exist), so a file
    that grows, shrinks or is rewritten while it is read gives a clear error
    instead of a silently partial dataset.
    """
    before = os.fstat(handle.fileno())
    if not stat.S_ISREG(before.st_mode):  # a pipe or device: no size to check
        return handle.read()
    size = before.st_size
    handle.seek(0)
    content = handle.read(size + 1)
    after = os.fstat(handle.fileno())
    if len(content) != size:
        raise _changed_while_reading(path, f"{len(content)} bytes read, {size} expected")
    if after.st_size != size or after.st_mtime_ns != before.st_mtime_ns:
        raise _changed_while_reading(path, "its size or modification time changed")
    return content


def _parse_source(source, zero_based, return_qid):
    """Parse a path or a binary file object; returns what :func:`_parse_content` returns.

    A plain regular file is read and parsed in chunks (:func:`_parse_file_in_chunks`);
    a compressed file is read whole, checked for changes and decompressed; a
    file object or a pipe is read whole.
    """
    path = None
    if not hasattr(source, "read"):
        try:
            path = os.fspath(source)
        except TypeError:
            path = None
    if path is None:
        return _parse_content(_read_bytes(source), zero_based, return_qid)
    with open(path, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            content = _decompress_if_needed(handle.read())
        else:
            head = handle.read(8)
            if not any(head.startswith(magic) for magic, _ in _MAGIC_DECOMPRESSORS):
                return _parse_file_in_chunks(handle, path, zero_based, return_qid)
            content = _decompress_if_needed(_read_whole_file(handle, path))
    return _parse_content(content, zero_based, return_qid)


_CHUNK_BYTES = 1 << 20  # parsed while in cache: both passes of the parser read it there


class _CsrBuilder:
    """Growing output arrays of the chunked parser (amortised growth, views at the end)."""

    def __init__(self):
        self.rows = 0
        self.nnz = 0
        self.min_index = _kernel._MAX_INDEX + 1
        self.max_index = -1
        self._allocate(1, 0)

    def _allocate(self, row_capacity, entry_capacity):
        old = getattr(self, "arrays", None)
        self.arrays = {
            "indptr": np.empty(row_capacity + 1, dtype=np.int64),
            "labels": np.empty(row_capacity, dtype=np.float64),
            "qids": np.empty(row_capacity, dtype=np.int64),
            "has_qid": np.empty(row_capacity, dtype=np.uint8),
            "indices": np.empty(entry_capacity, dtype=np.int64),
            "data": np.empty(entry_capacity, dtype=np.float64),
        }
        if old is not None:
            for name in ("indptr",):
                self.arrays[name][: self.rows + 1] = old[name][: self.rows + 1]
            for name in ("labels", "qids", "has_qid"):
                self.arrays[name][: self.rows] = old[name][: self.rows]
            for name in ("indices", "data"):
                self.arrays[name][: self.nnz] = old[name][: self.nnz]

    def reserve(self, more_rows, more_entries, expected_rows, expected_entries):
        """Room for ``more_rows``/``more_entries`` after the current ones; grows to at
        least the expected totals (or 1.5 times) so that growth stays rare."""
        rows_needed = self.rows + more_rows
        entries_needed = self.nnz + more_entries
        row_capacity = self.arrays["labels"].shape[0]
        entry_capacity = self.arrays["data"].shape[0]
        if rows_needed <= row_capacity and entries_needed <= entry_capacity:
            return
        self._allocate(max(rows_needed, expected_rows, int(1.5 * row_capacity)),
                       max(entries_needed, expected_entries, int(1.5 * entry_capacity)))

    def tails(self):
        """Views of the arrays after the rows and entries already filled."""
        a, r, k = self.arrays, self.rows, self.nnz
        return (a["indptr"][r:], a["indices"][k:], a["data"][k:], a["labels"][r:],
                a["qids"][r:], a["has_qid"][r:])


def _parse_chunk(builder, chunk, raw, zero_based, return_qid, line_offset):
    """Parse whole lines ``chunk`` (a view of ``raw``) into ``builder``'s arrays."""
    indptr, indices, data, labels, qids, has_qid = builder.tails()
    err, err_line, rows, nnz, hard, qid_err_line, min_index, max_index = _kernel.fill_csr(
        chunk, zero_based is not False, indptr, indices, data, labels, qids, has_qid)
    stop_line = err_line if err != _kernel.ERR_NONE else np.iinfo(np.int64).max
    if return_qid and qid_err_line:
        stop_line = min(stop_line, qid_err_line)
    _resolve_hard_tokens(raw, hard, data, labels, stop_line, line_offset)
    if err != _kernel.ERR_NONE and err_line == stop_line:
        raise LibsvmParseError(_kernel.ERROR_MESSAGES[err], err_line + line_offset)
    if return_qid and qid_err_line:
        raise LibsvmParseError("a 'qid:' value is not a 64-bit integer", qid_err_line + line_offset)
    indptr[: rows + 1] += builder.nnz  # fill_csr counts entries from 0 in every chunk
    builder.rows += rows
    builder.nnz += nnz
    builder.min_index = min(builder.min_index, min_index)
    builder.max_index = max(builder.max_index, max_index)


def _parse_file_in_chunks(handle, path, zero_based, return_qid):
    """Read a plain file in chunks of whole lines and parse each while it is in cache.

    The file is never memory-mapped (a memory-mapped file that another process
    truncates kills the reader with SIGBUS) and never held in memory whole:
    each chunk is read into one reused buffer, parsed (both passes) and
    forgotten.  The size is taken before reading and checked again afterwards
    (one byte more than the size is asked for), so a file that grows, shrinks
    or is rewritten while it is read gives a clear error.  Returns what
    :func:`_parse_content` returns.
    """
    before = os.fstat(handle.fileno())
    size = before.st_size
    handle.seek(0)
    buffer = bytearray(min(_CHUNK_BYTES, size + 1))
    builder = _CsrBuilder()
    filled = total = line_offset = 0
    eof = False
    while True:
        if not eof and filled < len(buffer):
            with memoryview(buffer) as view:
                want = min(len(buffer) - filled, size + 1 - total)
                got = handle.readinto(view[filled:filled + want]) if want > 0 else 0
            if got:
                filled += got
                total += got
                if total > size:
                    raise _changed_while_reading(path, f"it has more than {size} bytes")
            else:
                eof = True
        if filled == 0:
            break
        end = filled if eof else buffer.rfind(b"\n", 0, filled) + 1
        if end == 0:  # no complete line in the buffer yet
            if filled == len(buffer):  # a line longer than the buffer: make room
                buffer = buffer + bytearray(len(buffer))
            continue
        chunk = np.frombuffer(buffer, dtype=np.uint8, count=end)
        max_rows, max_entries = _kernel.count_rows_and_tokens(chunk)
        scale = size / max(total, 1)  # expected totals from what was read so far
        builder.reserve(max_rows, max_entries, int((builder.rows + max_rows) * scale * 1.02),
                        int((builder.nnz + max_entries) * scale * 1.02))
        _parse_chunk(builder, chunk, buffer, zero_based, return_qid, line_offset)
        del chunk
        line_offset += max_rows - 1  # the newlines of the chunk
        buffer[: filled - end] = buffer[end:filled]
        filled -= end
    after = os.fstat(handle.fileno())
    if total != size:
        raise _changed_while_reading(path, f"{total} bytes read, {size} expected")
    if after.st_size != size or after.st_mtime_ns != before.st_mtime_ns:
        raise _changed_while_reading(path, "its size or modification time changed")
    a, rows, nnz = builder.arrays, builder.rows, builder.nnz
    qids = (np.where(a["has_qid"][:rows].view(bool), a["qids"][:rows], -1)
            if return_qid else None)
    return (a["indptr"][: rows + 1], a["indices"][:nnz], a["data"][:nnz], a["labels"][:rows],
            qids, rows, nnz, builder.min_index, builder.max_index)


def _check_loader_arguments(n_features, zero_based, dtype):
    if n_features is not None:
        if isinstance(n_features, bool) or not isinstance(n_features, (int, np.integer)) or n_features < 1:
            raise ValidationError(f"n_features must be None or a positive integer, got {n_features!r}")
    if not (zero_based is True or zero_based is False or zero_based == "auto"):
        raise ValidationError(f"zero_based must be True, False or 'auto', got {zero_based!r}")
    try:
        return np.dtype(dtype)
    except TypeError as exc:
        raise ValidationError(f"dtype {dtype!r} is not a numpy dtype") from exc


def _resolve_hard_tokens(raw, hard, data, labels, stop_line, line_offset=0):
    """Convert the tokens the compiled parser left to Python ``float()``.

    Raises the parse error of the first token (in file order) that ``float()``
    rejects on a line before ``stop_line`` (lines counted within ``raw``;
    ``line_offset`` lines precede it in the file).
    """
    for start, end, slot, line in hard.tolist():
        if line >= stop_line:
            break
        token = raw[start:end]
        try:
            value = float(token)
        except ValueError:
            what = "label" if slot < 0 else "feature value"
            raise LibsvmParseError(
                f"cannot read {what} {bytes(token).decode('latin-1')!r} as a number",
                line + line_offset,
            ) from None
        if slot < 0:
            labels[-slot - 1] = value
        else:
            data[slot] = value


def load_libsvm(path, n_features=None, zero_based="auto", dtype=np.float64, return_qid=False):
    """Load a LIBSVM / svmlight file into a canonical CSR matrix.

    Gives exactly what :func:`sklearn.datasets.load_svmlight_file` gives on the
    same file (same shape, dtypes, indices, bit-identical values and labels,
    same ``zero_based="auto"`` rule, same treatment of comments, ``qid:`` and
    blank lines), several times faster: the bytes are parsed by a numba kernel
    and floats are converted with correct rounding.

    Privacy: loading releases nothing and spends no privacy budget.

    Parameters
    ----------
    path : str, path-like or binary file object
        Plain text, or gzip / bzip2 / xz compressed (recognised by content).
    n_features : int, optional
        Number of columns. Default: largest index + 1. Passing a value smaller
        than that is an error; a larger value pads with empty columns (use this
        to give train and test files the same width, e.g. 123 for ``a9a.t``).
    zero_based : bool or "auto", default="auto"
        Whether the file's indices start at 0. ``"auto"`` (scikit-learn's rule):
        the indices are taken as one-based, and shifted down by one, when no
        index 0 appears in the file (and the file stores at least one entry).
        ``False`` makes an index 0 an error.
    dtype : numpy dtype, default=np.float64
        dtype of ``X.data``. Values are parsed as float64 and then cast, as
        scikit-learn does (so float32 data is bit-identical too). ``y`` is
        always float64, as in scikit-learn.
    return_qid : bool, default=False
        Also return the query ids, one per row (int64; ``-1`` for a row without
        ``qid:``). scikit-learn instead returns only the qids present; both agree
        when every row has one.

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_samples, n_features)
        Sorted, duplicate-free indices (``has_canonical_format`` is True).
        ``indices`` and ``indptr`` are int64 (as in scikit-learn 1.9).
        Explicit zeros written in the file are kept, as in scikit-learn.
    y : ndarray of float64, shape (n_samples,)
    qid : ndarray of int64, shape (n_samples,)
        Only when ``return_qid`` is True.

    Notes
    -----
    Where fastdp goes beyond scikit-learn: xz files and compression recognised
    by content (scikit-learn reads ``.gz``/``.bz2`` by file suffix); every
    malformed line raises :class:`LibsvmParseError` (a ``ValueError``) with its
    line number, including an index above 2**31 - 1 (an ``OverflowError`` in
    scikit-learn); qids are returned one per row. A plain file is read and
    parsed in chunks of whole lines (1 MiB, reused: each is parsed while in
    cache), never memory-mapped (a truncated memory map would kill the process
    with SIGBUS); a file that another program truncates, extends or replaces
    while it is read gives a :class:`~fastdp.exceptions.ValidationError`.
    scikit-learn's ``multilabel``, ``offset`` and ``length`` options are not
    supported.

    Raises
    ------
    LibsvmParseError
        On a malformed line (non-numeric label or value, token without ``:``,
        non-integer, negative or too large index, index 0 with
        ``zero_based=False``, unsorted or repeated indices in a row). The
        error's ``line_number`` is the 1-based line in the decompressed file.
    ValidationError
        On bad arguments, when ``n_features`` is smaller than the file needs,
        or when the file changes while it is read.
    """
    dtype = _check_loader_arguments(n_features, zero_based, dtype)
    parsed = _parse_source(path, zero_based, return_qid)
    indptr, indices, data, labels, qids, n_rows, nnz, min_index, max_index = parsed
    if zero_based is False or (zero_based == "auto" and nnz > 0 and min_index > 0):
        indices -= 1
        max_index -= 1
    needed = max_index + 1 if nnz > 0 else 1
    if n_features is None:
        n_features = needed
    elif n_features < needed:
        raise ValidationError(
            f"n_features={n_features} is too small: the file has feature index {needed - 1} "
            f"(0-based), so it needs n_features >= {needed}"
        )
    if dtype != np.float64:
        data = np.asarray(data, dtype=dtype)
    # Through csr_array, as scikit-learn does: keeps the int64 index arrays without a
    # copy (the csr_matrix constructor would downcast them to int32).
    X = sp.csr_matrix(sp.csr_array((data, indices, indptr), shape=(n_rows, int(n_features))))
    X.has_sorted_indices = True  # the parser enforced strictly increasing indices per row
    X.has_canonical_format = True
    if return_qid:
        return X, labels, qids
    return X, labels


def _parse_content(raw, zero_based, return_qid):
    """Run the compiled parser on the bytes; raise on the first malformed line.

    Returns (indptr, indices, data, labels, qids, n_rows, nnz, min_index,
    max_index) with indices as written in the file (not yet shifted).
    """
    buf = np.frombuffer(raw, dtype=np.uint8)
    max_rows, max_entries = _kernel.count_rows_and_tokens(buf)
    indptr = np.empty(max_rows + 1, dtype=np.int64)
    indices = np.empty(max_entries, dtype=np.int64)
    data = np.empty(max_entries, dtype=np.float64)
    labels = np.empty(max_rows, dtype=np.float64)
    qids = np.empty(max_rows, dtype=np.int64)
    has_qid = np.empty(max_rows, dtype=np.uint8)
    err, err_line, n_rows, nnz, hard, qid_err_line, min_index, max_index = _kernel.fill_csr(
        buf,
        zero_based is not False,
        indptr,
        indices,
        data,
        labels,
        qids,
        has_qid,
    )
    stop_line = err_line if err != _kernel.ERR_NONE else np.iinfo(np.int64).max
    if return_qid and qid_err_line:
        stop_line = min(stop_line, qid_err_line)
    _resolve_hard_tokens(raw, hard, data, labels, stop_line)
    if err != _kernel.ERR_NONE and err_line == stop_line:
        raise LibsvmParseError(_kernel.ERROR_MESSAGES[err], err_line)
    if return_qid and qid_err_line:
        raise LibsvmParseError("a 'qid:' value is not a 64-bit integer", qid_err_line)

    del buf  # the row arrays below must not keep the raw content alive
    if nnz < max_entries:  # qid tokens or colons inside comments
        indices = indices[:nnz].copy()
        data = data[:nnz].copy()
    if n_rows < max_rows:  # blank and comment lines, final newline
        indptr = indptr[: n_rows + 1].copy()
        labels = labels[:n_rows].copy()
    qids = np.where(has_qid[:n_rows].view(bool), qids[:n_rows], -1) if return_qid else None
    return indptr, indices, data, labels, qids, n_rows, nnz, min_index, max_index


# --------------------------------------------------------------------------- #
# Synthetic LIBSVM-like data
# --------------------------------------------------------------------------- #


def _sparse_design(n_samples, n_features, nnz_per_row, zipf_offset, value_sigma, rng):
    """Unit-row CSR design: Zipf column popularity, 1 + Poisson row lengths."""
    popularity = 1.0 / (np.arange(n_features, dtype=np.float64) + zipf_offset)
    popularity /= popularity.sum()
    column_of_rank = rng.permutation(n_features)  # scatter popular columns over the index range
    row_lengths = 1 + rng.poisson(nnz_per_row - 1, size=n_samples)
    indptr = np.zeros(n_samples + 1, dtype=np.int64)
    np.cumsum(row_lengths, out=indptr[1:])
    total = int(indptr[-1])
    ranks = rng.choice(n_features, size=total, p=popularity)
    columns = column_of_rank[ranks].astype(np.int32)
    values = rng.lognormal(0.0, value_sigma, size=total)
    X = sp.csr_matrix((values, columns, indptr.astype(np.int32) if total < 2**31 else indptr),
                      shape=(n_samples, n_features))
    X.sum_duplicates()  # sorts indices and merges repeated columns of a row
    squared = np.add.reduceat(X.data * X.data, X.indptr[:-1]) if X.nnz else np.zeros(0)
    X.data *= np.repeat(1.0 / np.sqrt(squared), np.diff(X.indptr))
    return X


def _planted_margin(X, rng):
    coef = rng.standard_normal(X.shape[1])
    margin = X @ coef
    scale = margin.std()
    if scale > 0:
        margin /= scale
        coef /= scale
    return margin, coef


def _make_sparse(n_samples, n_features, nnz_per_row, noise, zipf_offset, value_sigma, random_state):
    n_samples = check_integer("n_samples", n_samples, low=1)
    n_features = check_integer("n_features", n_features, low=1)
    if not np.isfinite(nnz_per_row) or nnz_per_row < 1:
        raise ValidationError(f"nnz_per_row must be a number >= 1, got {nnz_per_row!r}")
    if not (np.isfinite(noise) and noise >= 0):
        raise ValidationError(f"noise must be a finite number >= 0, got {noise!r}")
    if not (np.isfinite(zipf_offset) and zipf_offset > 0):
        raise ValidationError(f"zipf_offset must be > 0, got {zipf_offset!r}")
    rng = np.random.default_rng(random_state)
    X = _sparse_design(n_samples, n_features, nnz_per_row, zipf_offset, value_sigma, rng)
    margin, coef = _planted_margin(X, rng)
    return X, margin + noise * rng.standard_normal(n_samples), coef


def make_sparse_classification(
    n_samples=10_000,
    n_features=5_000,
    nnz_per_row=50,
    *,
    noise=0.5,
    zipf_offset=20.0,
    value_sigma=0.7,
    random_state=None,
    return_coef=False,
):
    """LIBSVM-like sparse binary classification data with unit-norm rows.

    The generator of ``shared/research/anchors-perf.md`` section 4.1 (with
    ``random_state=0``, 200 000 x 50 000 and ``nnz_per_row=50`` it is the
    ``synth`` benchmark problem):

    * column j (after a random permutation of the column ids) is drawn with
      probability proportional to ``1 / (rank + zipf_offset)`` (Zipf-like, as
      in text data);
    * row lengths are ``1 + Poisson(nnz_per_row - 1)`` draws; a column drawn
      twice in a row is merged, so the mean stored nnz per row is slightly
      below ``nnz_per_row`` (about 49 for 50 at d = 50 000);
    * values are lognormal(0, ``value_sigma``), then every row is scaled to
      unit L2 norm;
    * a planted model ``w* ~ N(0, I)``, margin ``m = X w* / std(X w*)`` and
      ``y = sign(m + noise * N(0, 1))`` in {-1, +1}.

    Privacy: synthetic data, nothing private. Rows have norm exactly 1, so
    they satisfy the row-norm bound of fastdp's mechanisms.

    Parameters
    ----------
    n_samples, n_features : int
    nnz_per_row : float, default=50
        Mean number of column draws per row (before merging repeats).
    noise : float, default=0.5
        Standard deviation of the label noise added to the margin.
    zipf_offset : float, default=20.0
    value_sigma : float, default=0.7
    random_state : None, int or numpy.random.Generator
        Seeds the single ``numpy.random.Generator`` used; same seed, same bits.
    return_coef : bool, default=False
        Also return the planted coefficients (scaled like the margin).

    Returns
    -------
    X : csr_matrix of float64, (n_samples, n_features), int32 indices, unit rows
    y : ndarray of float64 in {-1, +1}
    coef : ndarray of float64, only if ``return_coef``
    """
    X, score, coef = _make_sparse(n_samples, n_features, nnz_per_row, noise, zipf_offset, value_sigma,
                                  random_state)
    y = np.where(score > 0, 1.0, -1.0)
    return (X, y, coef) if return_coef else (X, y)


def make_sparse_regression(
    n_samples=10_000,
    n_features=5_000,
    nnz_per_row=50,
    *,
    noise=0.5,
    zipf_offset=20.0,
    value_sigma=0.7,
    random_state=None,
    return_coef=False,
):
    """LIBSVM-like sparse regression data with unit-norm rows.

    Same design matrix as :func:`make_sparse_classification` (same random
    stream, so the same ``X`` for the same seed), with target
    ``y = m + noise * N(0, 1)`` where ``m = X w* / std(X w*)`` (so ``y`` has
    roughly unit variance plus noise and is centred near 0).

    Privacy: synthetic data, nothing private.

    Returns
    -------
    X : csr_matrix of float64, (n_samples, n_features), int32 indices, unit rows
    y : ndarray of float64
    coef : ndarray of float64, only if ``return_coef``
    """
    X, y, coef = _make_sparse(n_samples, n_features, nnz_per_row, noise, zipf_offset, value_sigma,
                              random_state)
    return (X, y, coef) if return_coef else (X, y)


# --------------------------------------------------------------------------- #
# Real datasets
# --------------------------------------------------------------------------- #

# Public category lists for data-independent one-hot encodings (UCI schema).
_BANK_CATEGORIES = {
    "job": ["admin.", "unknown", "unemployed", "management", "housemaid", "entrepreneur", "student",
            "blue-collar", "self-employed", "retired", "technician", "services"],
    "marital": ["married", "divorced", "single"],
    "education": ["unknown", "secondary", "primary", "tertiary"],
    "default": ["yes", "no"],
    "housing": ["yes", "no"],
    "loan": ["yes", "no"],
    "contact": ["unknown", "telephone", "cellular"],
    "month": ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"],
    "poutcome": ["unknown", "other", "failure", "success"],
}

DATASETS = {
    # name: description used by load_dataset (files relative to the data home)
    "phishing": dict(kind="libsvm", files={"train": "phishing/phishing.bz2"}, n_features=68,
                     task="binary", labels="file 1 (legitimate) -> +1, 0 (phishing) -> -1"),
    "phishing_uci": dict(kind="arff", files={"train": "phishing/phishing_uci.arff.bz2"}, n_features=30,
                         task="binary", labels="Result +1 / -1 as in the file (1 = legitimate)"),
    "a9a": dict(kind="libsvm", files={"train": "a9a/a9a.bz2", "test": "a9a/a9a.t.bz2"}, n_features=123,
                task="binary", labels="+1 (income > 50K) / -1 as in the file"),
    "w8a": dict(kind="libsvm", files={"train": "w8a/w8a.bz2"}, n_features=300, task="binary",
                labels="+1 / -1 as in the file"),
    "mushrooms": dict(kind="libsvm", files={"train": "mushrooms/mushrooms.bz2"}, n_features=112,
                      task="binary", labels="file 1 (poisonous) -> +1, 2 (edible) -> -1"),
    "news20": dict(kind="libsvm", files={"train": "news20/news20.bz2"}, n_features=62061,
                   task="multiclass", labels="classes 1..20 as in the file (float)"),
    "cpusmall": dict(kind="libsvm", files={"train": "cpusmall/cpusmall.bz2"}, n_features=12,
                     task="regression", labels="target usr (%) as in the file"),
    "bank": dict(kind="dat", files={"train": "bank/BANK.dat.bz2"}, n_features=32, task="binary",
                 labels="last column 1 (subscribed) -> +1, 0 -> -1; DP-AGD's unscaled features"),
    "ipums_br": dict(kind="dat", files={"train": "ipums_br/IPUMS-BR.dat.bz2"}, n_features=52,
                     task="binary", labels="last column 1 -> +1, 0 -> -1. Internal reproduction "
                     "data: IPUMS terms forbid redistribution, never copy it"),
    "adult": dict(kind="adult", files={"train": "adult_uci/adult.data.bz2", "test": "adult_uci/adult.test.bz2",
                                       "names": "adult_uci/adult.names.bz2"},
                  n_features=None, task="binary",
                  labels="'>50K' -> +1, '<=50K' -> -1 (the test file's trailing '.' is dropped)"),
    "bank_full": dict(kind="bank_csv", files={"train": "bank/bank-full_commasep.csv.bz2"}, n_features=None,
                      task="binary", labels="y 'yes' -> +1, 'no' -> -1"),
    "abalone": dict(kind="abalone", files={"train": "abalone/abalone.data.bz2"}, n_features=10,
                    task="regression", labels="Rings (integer 1..29) as float"),
    "cal_housing": dict(kind="cal_housing", files={"train": "cal_housing/cal_housing.data.bz2"}, n_features=8,
                        task="regression", labels="medianHouseValue as float"),
}


def dataset_search_paths(data_home=None):
    """Directories searched for the real datasets, in order.

    ``data_home`` if given, else the ``FASTDP_DATA`` environment variable if
    set; then ``../shared/data`` relative to the current directory and to the
    fastdp source checkout (a convenience for the project's own tests).
    """
    if data_home is not None:
        return [Path(data_home)]
    paths = []
    if os.environ.get("FASTDP_DATA"):
        paths.append(Path(os.environ["FASTDP_DATA"]))
    paths.append(Path.cwd().parent / "shared" / "data")
    paths.append(Path(__file__).resolve().parents[2] / "shared" / "data")
    unique = []
    for p in paths:
        if p not in unique:
            unique.append(p)
    return unique


def _find_file(relative, data_home, name):
    searched = dataset_search_paths(data_home)
    for root in searched:
        candidate = root / relative
        if candidate.is_file():
            return candidate
    where = ", ".join(str(root / relative) for root in searched)
    raise DatasetNotFoundError(
        f"dataset {name!r}: file not found; looked in {where}. Pass data_home=... or set the "
        "FASTDP_DATA environment variable to the directory that holds shared/data's layout."
    )


def _text_lines(path):
    return _read_bytes(path).decode("utf-8").splitlines()


def _map_binary(values, positive, negative, name):
    y = np.where(values == positive, 1.0, -1.0)
    unknown = ~((values == positive) | (values == negative))
    if unknown.any():
        raise ValidationError(f"dataset {name!r}: unexpected label {values[unknown][0]!r}")
    return y


def _load_dense_dat(path, name):
    """Whitespace-separated numbers, label in the last column."""
    lines = [line.split() for line in _text_lines(path) if line.strip()]
    width = len(lines[0])
    if any(len(t) != width for t in lines):
        raise ValidationError(f"dataset {name!r}: rows of different lengths in {path}")
    table = np.array(lines, dtype=np.float64)
    return np.ascontiguousarray(table[:, :-1]), _map_binary(table[:, -1], 1.0, 0.0, name)


def _one_hot(column, categories, name, missing="?"):
    """Data-independent one-hot of a string column; ``missing`` gives a zero row."""
    lookup = {c: k for k, c in enumerate(categories)}
    out = np.zeros((len(column), len(categories)))
    for i, value in enumerate(column):
        if value == missing:
            continue
        if value not in lookup:
            raise ValidationError(f"dataset {name!r}: unknown category {value!r}")
        out[i, lookup[value]] = 1.0
    return out


def _encode_table(rows, schema, name, missing="?"):
    """Numeric columns as float, categorical ones one-hot with public categories."""
    blocks = []
    for col, categories in enumerate(schema):
        column = [r[col] for r in rows]
        if categories is None:
            blocks.append(np.array(column, dtype=np.float64)[:, None])
        else:
            blocks.append(_one_hot(column, categories, name, missing))
    return np.ascontiguousarray(np.hstack(blocks))


def _adult_schema(names_path):
    """Attribute list of adult.names: None for continuous, else the category list."""
    schema = []
    for line in _text_lines(names_path):
        if ":" not in line or line.startswith(("|", " ")):
            continue
        attribute, values = line.split(":", 1)
        values = values.strip().rstrip(".")
        if attribute.strip() == "" or " " in attribute.strip():
            continue
        schema.append(None if values == "continuous" else [v.strip() for v in values.split(",")])
    if len(schema) != 14:
        raise ValidationError(f"adult.names: expected 14 attributes, found {len(schema)}")
    return schema


def _load_adult(files, subset, data_home, name):
    schema = _adult_schema(_find_file(files["names"], data_home, name))
    rows = []
    for line in _text_lines(_find_file(files[subset], data_home, name)):
        if not line.strip() or line.startswith("|"):
            continue
        rows.append([v.strip() for v in line.split(",")])
    labels = np.array([r[14].rstrip(".") for r in rows])
    return _encode_table(rows, schema, name), _map_binary(labels, ">50K", "<=50K", name)


def _load_csv_dataset(kind, path, name):
    lines = [line for line in _text_lines(path) if line.strip()]
    if kind == "arff":
        start = next(k for k, line in enumerate(lines) if line.strip().lower() == "@data") + 1
        table = np.array([line.split(",") for line in lines[start:]], dtype=np.float64)
        return np.ascontiguousarray(table[:, :-1]), _map_binary(table[:, -1], 1.0, -1.0, name)
    rows = [[v.strip() for v in line.split(",")] for line in lines]
    if kind == "bank_csv":
        header, rows = rows[0], rows[1:]
        schema = [_BANK_CATEGORIES.get(column) for column in header[:-1]]
        labels = np.array([r[-1] for r in rows])
        return _encode_table(rows, schema, name), _map_binary(labels, "yes", "no", name)
    if kind == "abalone":
        schema = [["M", "F", "I"]] + [None] * 7
        return _encode_table(rows, schema, name), np.array([r[8] for r in rows], dtype=np.float64)
    if kind == "cal_housing":
        table = np.array(rows, dtype=np.float64)
        return np.ascontiguousarray(table[:, :-1]), table[:, -1].copy()
    raise ValidationError(f"unknown dataset kind {kind!r}")  # pragma: no cover


def load_dataset(name, data_home=None, subset="train", dtype=np.float64):
    """Load one of the real datasets listed in ``shared/data/MANIFEST.md``.

    Privacy: loading releases nothing. The datasets are treated as private
    training data by the solvers; preprocessing decides what is private-safe
    (see :mod:`fastdp.preprocessing`). ``ipums_br`` is internal reproduction
    data (IPUMS terms): load it, never copy it.

    Parameters
    ----------
    name : str
        One of ``DATASETS``:

        * LIBSVM files (returned as CSR via :func:`load_libsvm`, with the full
          ``n_features`` of the LIBSVM collection, so ``a9a`` test has 123
          columns): ``phishing`` (labels 0/1 mapped to -1/+1), ``a9a``
          (train/test, +-1), ``w8a`` (+-1), ``mushrooms`` (1 = poisonous -> +1,
          2 = edible -> -1), ``news20`` (multiclass 1..20, unchanged),
          ``cpusmall`` (regression).
        * dense ``.dat`` files of DP-AGD (last column 0/1 -> -1/+1, features
          unscaled): ``bank`` (45211 x 32), ``ipums_br`` (38000 x 52).
        * UCI CSV files, encoded without looking at the data (numeric columns
          as they are; categorical columns one-hot over the public category list
          of the UCI description, a missing ``?`` gives an all-zero block):
          ``adult`` (train/test, 105 columns, '>50K' -> +1), ``bank_full``
          (51 columns, 'yes' -> +1), ``abalone`` (Sex one-hot M/F/I + 7
          measurements, target Rings), ``cal_housing`` (8 columns, target
          medianHouseValue), ``phishing_uci`` (the 30 ARFF attributes, Result
          +-1).
    data_home : path, optional
        Directory laid out like ``shared/data``. Default: the ``FASTDP_DATA``
        environment variable, then ``../shared/data`` (see
        :func:`dataset_search_paths`).
    subset : {"train", "test"}, default="train"
        ``"test"`` exists for ``a9a`` and ``adult`` only.
    dtype : {numpy.float64, numpy.float32}, default=numpy.float64
        Value type of X.  LIBSVM sets are parsed straight into it; the others
        are converted.  float32 halves the memory of X; the estimators and
        kernels train on it without a copy.

    Returns
    -------
    X : csr_matrix (LIBSVM sets) or C-contiguous float64 ndarray (the others)
    y : ndarray of float64

    Raises
    ------
    DatasetNotFoundError
        The file is not in any searched directory; the message lists them.
    ValidationError
        Unknown name or subset.
    """
    if name not in DATASETS:
        raise ValidationError(f"unknown dataset {name!r}; choose one of {sorted(DATASETS)}")
    info = DATASETS[name]
    subsets = [s for s in info["files"] if s in ("train", "test")]
    if subset not in subsets:
        raise ValidationError(f"dataset {name!r} has subsets {subsets}, not {subset!r}")
    kind = info["kind"]
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValidationError(f"dtype must be float32 or float64; got {dtype}.")
    if kind == "libsvm":
        path = _find_file(info["files"][subset], data_home, name)
        X, y = load_libsvm(path, n_features=info["n_features"], dtype=dtype)
        if name == "phishing":
            y = _map_binary(y, 1.0, 0.0, name)
        elif name == "mushrooms":
            y = _map_binary(y, 1.0, 2.0, name)
        return X, y
    if kind == "adult":
        X, y = _load_adult(info["files"], subset, data_home, name)
    elif kind == "dat":
        X, y = _load_dense_dat(_find_file(info["files"][subset], data_home, name), name)
    else:
        X, y = _load_csv_dataset(kind, _find_file(info["files"][subset], data_home, name), name)
    return (X if dtype == X.dtype else X.astype(dtype)), y
