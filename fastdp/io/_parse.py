"""CSR arrays filled chunk by chunk by the compiled LIBSVM parser.

:class:`CsrBuilder` owns the growing output arrays (values in the requested
float dtype, indices and indptr in int32 or int64, float64 labels, optional
qids) and parses one chunk of whole lines at a time into them with
:func:`fastdp._kernels._libsvm_parse.fill_csr`, which writes straight into
the final dtypes (a float32 value is the double parsed from the text rounded
once to float32, exactly as scikit-learn stores it).  Tokens the compiled
parser leaves to Python's ``float()`` are resolved here, and the first
malformed line becomes a :class:`~fastdp.exceptions.LibsvmParseError` with its
line number.

Privacy: reads the private data; releases nothing.
"""

import numpy as np

from fastdp._kernels import _libsvm_parse as _kernel
from fastdp.exceptions import LibsvmParseError, ValidationError
from fastdp.io._growable import GrowableArray

__all__ = ["CsrBuilder", "INT32_MAX", "resolve_hard_tokens"]

INT32_MAX = np.iinfo(np.int32).max
_NO_ERROR_LINE = np.iinfo(np.int64).max


def resolve_hard_tokens(raw, hard, data, labels, stop_line, line_offset=0, note=""):
    """Convert the tokens the compiled parser left to Python ``float()``.

    Raises the parse error of the first token (in file order) that ``float()``
    rejects on a line before ``stop_line`` (lines counted within ``raw``;
    ``line_offset`` lines precede it).
    """
    for start, end, slot, line in hard.tolist():
        if line >= stop_line:
            break
        token = raw[start:end]
        try:
            value = float(bytes(token))
        except ValueError:
            what = "label" if slot < 0 else "feature value"
            raise LibsvmParseError(
                f"cannot read {what} {bytes(token).decode('latin-1')!r} as a number{note}",
                line + line_offset,
            ) from None
        if slot < 0:
            labels[-slot - 1] = value
        else:
            data[slot] = value


class CsrBuilder:
    """Growing CSR arrays of the rows parsed so far.

    Parameters
    ----------
    value_dtype : float32 or float64
    index_dtype : int32 or int64
        Dtype of ``indices`` and ``indptr``.  int32 arrays are widened to
        int64 in place when the entries (or rows) outgrow int32 if
        ``widen=True``; with ``widen=False`` that is an error.
    allow_zero : bool
        Accept index 0 (``zero_based`` True or "auto").
    with_qid : bool
        Keep the ``qid:`` of every row.
    note : str
        Appended to parse-error messages (e.g. where line numbers start).

    Attributes
    ----------
    rows, nnz : int
    min_index, max_index : int
        Smallest and largest index read, as written in the file.
    lines : int
        Lines consumed so far (for error line numbers).
    """

    def __init__(self, value_dtype, index_dtype, *, allow_zero, with_qid=False, widen=True,
                 note=""):
        self.value_dtype = np.dtype(value_dtype)
        self.allow_zero = bool(allow_zero)
        self.with_qid = bool(with_qid)
        self.can_widen = bool(widen)
        self.note = note
        self.rows = self.nnz = self.lines = 0
        self.min_index = _kernel.MAX_INDEX + 1
        self.max_index = -1
        self._indptr = GrowableArray(index_dtype, 1)
        self._indptr.view()[0] = 0
        self._indices = GrowableArray(index_dtype)
        self._data = GrowableArray(self.value_dtype)
        self._labels = GrowableArray(np.float64)
        self._qids = GrowableArray(np.int64)
        self._has_qid = GrowableArray(np.uint8)

    @property
    def index_dtype(self):
        return self._indices.dtype

    # -------------------------------------------------------------- capacity
    def reserve(self, rows, entries):
        """Room for ``rows`` rows and ``entries`` entries in total."""
        self._indptr.reserve(rows + 1)
        self._labels.reserve(rows)
        self._indices.reserve(entries)
        self._data.reserve(entries)

    def _ensure_room(self, more_rows, more_entries, expected):
        """Room for this chunk; grows towards ``expected`` (rows, entries) totals."""
        rows = self.rows + more_rows
        entries = self.nnz + more_entries
        if self.index_dtype == np.int32 and max(rows, entries) > INT32_MAX:
            self.widen(f"the data has more than {INT32_MAX} entries or rows")
        for rows_side, needed, goal in ((True, rows, expected[0]), (False, entries, expected[1])):
            capacity = (min(self._labels.capacity, self._indptr.capacity - 1) if rows_side
                        else min(self._data.capacity, self._indices.capacity))
            if needed > capacity:
                target = max(needed, int(1.02 * goal), int(1.25 * capacity))
                try:
                    self._grow(rows_side, target)
                except MemoryError:  # the estimate was too generous: ask for what is needed
                    self._grow(rows_side, needed + (needed >> 4))
        if not self.with_qid:  # per-chunk scratch for the parser's qid slots
            self._qids.reserve(more_rows)
            self._has_qid.reserve(more_rows)
        else:
            self._qids.reserve(self._labels.capacity)
            self._has_qid.reserve(self._labels.capacity)

    def widen(self, reason):
        """Turn int32 indices and indptr into int64 in place (``reason``: for the error
        raised when the index dtype was forced to int32)."""
        if self.index_dtype == np.int64:
            return
        if not self.can_widen:
            raise ValidationError(f"{reason}, too many for index_dtype=int32; use "
                                  "index_dtype=int64 (or None: chosen from the sizes)")
        self._indices.widen(self.nnz)
        self._indptr.widen(self.rows + 1)

    def _grow(self, rows_side, capacity):
        if rows_side:
            self._labels.reserve(capacity)
            self._indptr.reserve(capacity + 1)
        else:
            self._data.reserve(capacity)
            self._indices.reserve(capacity)

    # -------------------------------------------------------------- parsing
    def parse(self, chunk, expected=(0, 0)):
        """Parse ``chunk`` (uint8 array of whole lines) and append its rows.

        ``expected`` is the (rows, entries) the whole input is expected to
        hold: capacity grows towards it, so growth stays rare.
        """
        max_rows, max_entries = _kernel.count_rows_and_tokens(chunk)
        self._ensure_room(max_rows, max_entries, expected)
        r, k = self.rows, self.nnz
        q = r if self.with_qid else 0
        indptr = self._indptr.view(r)
        indices, data = self._indices.view(k), self._data.view(k)
        labels = self._labels.view(r)
        qids, has_qid = self._qids.view(q), self._has_qid.view(q)
        err, err_line, rows, nnz, hard, qid_err_line, min_index, max_index = _kernel.fill_csr(
            chunk, self.allow_zero, indptr, indices, data, labels, qids, has_qid)
        stop_line = err_line if err != _kernel.ERR_NONE else _NO_ERROR_LINE
        if self.with_qid and qid_err_line:
            stop_line = min(stop_line, qid_err_line)
        resolve_hard_tokens(chunk, hard, data, labels, stop_line, self.lines, self.note)
        if err != _kernel.ERR_NONE and err_line == stop_line:
            raise LibsvmParseError(_kernel.ERROR_MESSAGES[err] + self.note, err_line + self.lines)
        if self.with_qid and qid_err_line:
            raise LibsvmParseError("a 'qid:' value is not a 64-bit integer" + self.note,
                                   qid_err_line + self.lines)
        indptr[: rows + 1] += k  # fill_csr counts entries from 0 in every chunk
        self.rows += rows
        self.nnz += nnz
        self.lines += max_rows - 1  # the newlines of the chunk
        self.min_index = min(self.min_index, min_index)
        self.max_index = max(self.max_index, max_index)

    # -------------------------------------------------------------- output
    def shift_indices(self, by):
        """Subtract ``by`` from every index read so far (one-based files)."""
        if self.nnz:
            self._indices.view(0, self.nnz)[...] -= self._indices.dtype.type(by)

    def _qid_values(self, start, stop):
        qids = self._qids.view(start, stop)
        return np.where(self._has_qid.view(start, stop).view(bool), qids, -1)

    def drain(self):
        """Views of every row parsed so far (indptr, indices, data, labels), then forget them.

        No copy: the views share the builder's arrays and stay valid only until
        the next :meth:`parse` (which writes over them).  Qids are not returned.
        """
        rows, nnz = self.rows, self.nnz
        views = (self._indptr.view(0, rows + 1), self._indices.view(0, nnz),
                 self._data.view(0, nnz), self._labels.view(0, rows))
        self.rows = self.nnz = 0
        return views

    def pop_rows(self, count):
        """Copies of the first ``count`` rows (indptr, indices, data, labels, qids or
        None); the rows after them move to the front."""
        count = min(int(count), self.rows)
        end = int(self._indptr.view(count, count + 1)[0])
        indptr = self._indptr.view(0, count + 1).copy()
        indices = self._indices.view(0, end).copy()
        data = self._data.view(0, end).copy()
        labels = self._labels.view(0, count).copy()
        qids = self._qid_values(0, count) if self.with_qid else None
        rest_rows, rest_nnz = self.rows - count, self.nnz - end
        if rest_rows:
            tail = self._indptr.view(count, self.rows + 1) - end
            self._indptr.view(0, rest_rows + 1)[...] = tail
            for array, a, b, size in ((self._indices, end, self.nnz, rest_nnz),
                                      (self._data, end, self.nnz, rest_nnz),
                                      (self._labels, count, self.rows, rest_rows)):
                array.view(0, size)[...] = array.view(a, b).copy()
            if self.with_qid:
                for array in (self._qids, self._has_qid):
                    array.view(0, rest_rows)[...] = array.view(count, self.rows).copy()
        self.rows, self.nnz = rest_rows, rest_nnz
        return indptr, indices, data, labels, qids

    def finish(self):
        """The tight arrays (indptr, indices, data, labels, qids or None).

        The builder must not be used afterwards.
        """
        qids = self._qid_values(0, self.rows) if self.with_qid else None
        self._qids = self._has_qid = None
        return (self._indptr.finish(self.rows + 1), self._indices.finish(self.nnz),
                self._data.finish(self.nnz), self._labels.finish(self.rows), qids)
