# cython: language_level=3
# (boundscheck, wraparound, cdivision and initializedcheck come from setup.py, so that
# FASTDP_DEBUG_KERNELS=1 builds a bounds-checked debug version; a directive here would win)
"""Compiled byte parser for LIBSVM / svmlight text.

This module holds compiled inner loops only: no I/O, no privacy decisions.
:class:`fastdp.io._parse.CsrBuilder` reads and decompresses the file, calls
:func:`count_rows_and_tokens` then :func:`fill_csr` on each chunk of whole
lines, and turns the error code returned here into a
:class:`fastdp.exceptions.LibsvmParseError`.  It is compiled ahead of time
(``setup.py``), so a first load pays no just-in-time compilation.

Grammar (exactly what scikit-learn's ``load_svmlight_file`` accepts)
--------------------------------------------------------------------
* Lines end at ``\\n``. Everything from the first ``#`` of a line on is a comment.
* Tokens are separated by ASCII whitespace (space, ``\\t``, ``\\v``, ``\\f``,
  ``\\r``), so CRLF files, tabs and repeated spaces are fine. A line without
  tokens is skipped (it is not a row).
* The first token is the label, parsed like Python ``float()``.
* If the second token starts with ``qid`` it is a query id: ``qid:<int>``.
* Every other token is ``<index>:<value>``: the index is parsed like Python
  ``int()`` and must lie in ``[0, 2**31 - 1]`` (``0`` only when zero-based), the
  indices of a row must be strictly increasing, and the value (everything after
  the first colon) is parsed like Python ``float()``.

Floats
------
Decimal floats with at most 19 significant digits are converted here and are
correctly rounded (bit-identical to ``float()``/``strtod``): Clinger's exact
fast path when the mantissa is at most 2**53 and the power of ten is at most
22, otherwise the Eisel-Lemire algorithm (128-bit truncated powers of five,
computed at import time from exact integer arithmetic) for results in the
normal range.  Every other token (more digits, ``inf``/``nan``, underscores,
extreme exponents, or garbage) is reported back as a *hard* token span; the
Python caller converts those with ``float()`` itself, which both gives the exact
value and decides validity the way scikit-learn does.  Inside the kernel a
hard token is marked by a NaN (no token this parser converts is a NaN).

Safety
------
Every read of the text is guarded by the length of the buffer (no read past
its end, whatever the bytes), and every write by the length of the output
array it goes to: output arrays shorter than the bounds from
:func:`count_rows_and_tokens` raise ``ValueError`` instead of being overrun.

Speed
-----
:func:`fill_csr` makes one sweep over the bytes, without the GIL; each number
is read by the same loop that finds the end of its token (``_scan_number``).
The helpers on the hot path are inline C functions over raw pointers; rare
paths (more than 19 digits, exponents) are real calls.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy
from libc.math cimport NAN

import numpy as np

__all__ = [
    "ERR_NONE",
    "ERR_MISSING_COLON",
    "ERR_BAD_INDEX",
    "ERR_NEGATIVE_INDEX",
    "ERR_ZERO_INDEX",
    "ERR_INDEX_ORDER",
    "ERR_INDEX_OVERFLOW",
    "ERR_BAD_QID",
    "ERROR_MESSAGES",
    "MAX_INDEX",
    "POW5_HI",
    "POW5_LO",
    "POW10",
    "count_rows_and_tokens",
    "fill_csr",
]

ERR_NONE = 0
ERR_MISSING_COLON = 1
ERR_BAD_INDEX = 2
ERR_NEGATIVE_INDEX = 3
ERR_ZERO_INDEX = 4
ERR_INDEX_ORDER = 5
ERR_INDEX_OVERFLOW = 6
ERR_BAD_QID = 7

ERROR_MESSAGES = {
    ERR_MISSING_COLON: "a feature token has no ':' (expected '<index>:<value>')",
    ERR_BAD_INDEX: "a feature index is not an integer (expected '<index>:<value>')",
    ERR_NEGATIVE_INDEX: "a feature index is negative",
    ERR_ZERO_INDEX: (
        "feature index 0 found but zero_based=False; pass zero_based=True or 'auto' "
        "if the file uses 0-based indices"
    ),
    ERR_INDEX_ORDER: (
        "feature indices of a row must be sorted and unique (as scikit-learn requires); "
        "sort the row and merge duplicate indices"
    ),
    ERR_INDEX_OVERFLOW: "a feature index is larger than 2**31 - 1",
    ERR_BAD_QID: "a 'qid' token has no ':' (expected 'qid:<int>')",
}

# The same codes for the C code (the Python names above are the public ones).
cdef enum:
    _ERR_NONE = 0
    _ERR_MISSING_COLON = 1
    _ERR_BAD_INDEX = 2
    _ERR_NEGATIVE_INDEX = 3
    _ERR_ZERO_INDEX = 4
    _ERR_INDEX_ORDER = 5
    _ERR_INDEX_OVERFLOW = 6
    _ERR_BAD_QID = 7
    # not parse errors: misuse by the caller or no memory (raised as Python exceptions)
    _ERR_OUTPUT_TOO_SMALL = -1
    _ERR_NO_MEMORY = -2

#: Largest feature index accepted (scikit-learn stores indices as int32).
MAX_INDEX = 2**31 - 1

# the number parsers (floats and feature indices) and their tables
include "_libsvm_numbers.pxi"


# --------------------------------------------------------------------------- passes

def count_rows_and_tokens(const uint8_t[::1] buf):
    """First pass: upper bounds on the number of rows (newlines + 1) and of
    stored entries (colons: every feature token holds one).

    Parameters
    ----------
    buf : uint8[:] (C-contiguous, may be read-only)

    Returns
    -------
    max_rows, max_entries : int
    """
    cdef Py_ssize_t k, n = buf.shape[0]
    cdef int64_t newlines = 0, colons = 0
    cdef const uint8_t* p
    if n == 0:
        return 1, 0
    p = &buf[0]
    with nogil:
        for k in range(n):
            newlines += p[k] == 10
            colons += p[k] == 58
    return newlines + 1, colons


cdef struct _Outcome:
    int err
    int64_t err_line
    int64_t rows
    int64_t nnz
    int64_t qid_err_line
    int64_t min_index
    int64_t max_index
    int64_t* hard        # (start, end, slot, line) per hard token, malloc'd
    int64_t n_hard
    int64_t hard_capacity


cdef inline bint _append_hard(_Outcome* out, int64_t start, int64_t end, int64_t slot,
                              int64_t line) noexcept nogil:
    """Record a hard token; False when no memory is left."""
    cdef int64_t* grown
    cdef int64_t capacity
    if out.n_hard == out.hard_capacity:
        capacity = 16 if out.hard_capacity == 0 else 2 * out.hard_capacity
        grown = <int64_t*>realloc(out.hard, capacity * 4 * sizeof(int64_t))
        if grown == NULL:
            return False
        out.hard = grown
        out.hard_capacity = capacity
    out.hard[4 * out.n_hard] = start
    out.hard[4 * out.n_hard + 1] = end
    out.hard[4 * out.n_hard + 2] = slot
    out.hard[4 * out.n_hard + 3] = line
    out.n_hard += 1
    return True


ctypedef fused index_t:
    int32_t
    int64_t

ctypedef fused value_t:
    float
    double


cdef void _fill(const uint8_t* buf, Py_ssize_t n, bint zero_based,
                index_t* indptr, index_t* indices, value_t* data, double* labels,
                int64_t* qids, uint8_t* has_qid, Py_ssize_t max_rows,
                Py_ssize_t max_entries, _Outcome* out) noexcept nogil:
    """The sweep of :func:`fill_csr` over raw pointers (``indptr`` holds
    ``max_rows + 1`` values, ``labels``, ``qids``, ``has_qid`` ``max_rows``,
    ``indices`` and ``data`` ``max_entries``)."""
    cdef Py_ssize_t i = 0, start, colon, end
    cdef int64_t line = 0, row = 0, nnz = 0, token_number, prev_index, index, qid_value
    cdef int err
    cdef bint ok, overflow
    cdef double value
    cdef uint8_t c, d
    out.err = _ERR_NONE
    out.err_line = 0
    out.qid_err_line = 0
    out.min_index = _C_MAX_INDEX + 1
    out.max_index = -1
    indptr[0] = 0
    while i < n:
        line += 1
        token_number = 0
        prev_index = -1
        while True:
            # skip blanks (whitespace other than newline)
            while i < n:
                c = buf[i]
                if c == 32 or c == 9 or c == 11 or c == 12 or c == 13:
                    i += 1
                else:
                    break
            if i >= n:
                break
            c = buf[i]
            if c == 10:
                break
            if c == 35:  # comment: skip the rest of the line
                while i < n and buf[i] != 10:
                    i += 1
                break
            start = i
            if token_number == 0:
                if row >= max_rows:
                    out.err = _ERR_OUTPUT_TOO_SMALL
                    break
                i = _scan_number(buf, i, n, &value)
                labels[row] = value
                has_qid[row] = 0
                qids[row] = 0
                if value != value and not _append_hard(out, start, i, -row - 1, line):
                    out.err = _ERR_NO_MEMORY
                    break
                token_number = 1
                continue
            # fast path for the index: plain digits followed by ':'
            index = 0
            while i < n:
                d = <uint8_t>(buf[i] - 48)
                if d > 9 or index > _C_MAX_INDEX:
                    break
                index = index * 10 + d
                i += 1
            if i < n and buf[i] == 58 and i > start and index <= _C_MAX_INDEX:
                colon = i
            else:
                # general path: find the token and its first colon, then decide
                i = start
                colon = -1
                while i < n and not _is_separator(buf[i]):
                    if buf[i] == 58 and colon < 0:
                        colon = i
                    i += 1
                end = i
                if (token_number == 1 and end - start >= 3 and buf[start] == 113
                        and buf[start + 1] == 105 and buf[start + 2] == 100):  # 'qid'
                    if colon < 0:
                        out.err = _ERR_BAD_QID
                        break
                    ok = _parse_int_token(buf, colon + 1, end, &qid_value, &overflow)
                    if ok and not overflow:
                        qids[row] = qid_value
                        has_qid[row] = 1
                    elif out.qid_err_line == 0:
                        out.qid_err_line = line
                    token_number += 1
                    continue
                err = _general_index(buf, start, colon, end, &index)
                if err != _ERR_NONE:
                    out.err = err
                    break
            if index == 0 and not zero_based:
                out.err = _ERR_ZERO_INDEX
                break
            if index <= prev_index:
                out.err = _ERR_INDEX_ORDER
                break
            if nnz >= max_entries:
                out.err = _ERR_OUTPUT_TOO_SMALL
                break
            prev_index = index
            if index < out.min_index:
                out.min_index = index
            if index > out.max_index:
                out.max_index = index
            indices[nnz] = <index_t>index
            i = _scan_number(buf, colon + 1, n, &value)
            data[nnz] = <value_t>value  # a float32 value: the double rounded once
            if value != value and not _append_hard(out, colon + 1, i, nnz, line):
                out.err = _ERR_NO_MEMORY
                break
            nnz += 1
            token_number += 1
        if out.err != _ERR_NONE:
            out.err_line = line
            break
        if token_number > 0:
            row += 1
            indptr[row] = <index_t>nnz
        i += 1  # past the newline
    out.rows = row
    out.nnz = nnz


def fill_csr(const uint8_t[::1] buf, zero_based, index_t[::1] indptr, index_t[::1] indices,
             value_t[::1] data, double[::1] labels, int64_t[::1] qids, uint8_t[::1] has_qid):
    """Second pass: fill preallocated CSR arrays in one sweep over the bytes.

    Parameters
    ----------
    buf : uint8[:]
        The whole (decompressed) text, C-contiguous (may be read-only).
    zero_based : bool
        When False, index 0 is an error (scikit-learn's ``zero_based=False``).
    indptr, indices : int32[:] or int64[:] (the same dtype)
        At least ``max_rows + 1`` and ``max_entries`` values (the bounds from
        :func:`count_rows_and_tokens`).
    data : float32[:] or float64[:]
        At least ``max_entries`` values.  A float32 value is the correctly
        rounded double rounded once to float32 (as scikit-learn stores it).
    labels : float64[:]
    qids : int64[:]
    has_qid : uint8[:]
        Each at least ``max_rows`` values.

    Returns
    -------
    err_code, err_line : int
        ``ERR_NONE`` and 0, or the first structural error and its 1-based line.
    n_rows, nnz : int
        Rows (lines with a token) and stored entries actually read.
    hard : int64[n_hard, 4]
        (start, end, slot, line) of tokens the caller must convert with
        ``float()``; ``slot >= 0`` is a position in ``data``, ``slot < 0`` is the
        label of row ``-slot - 1``.  Their places in ``data`` / ``labels`` hold NaN.
    qid_err_line : int
        First line whose qid value is not an int64 (0 if none); only an error
        when the caller asked for qids, as in scikit-learn.
    min_index, max_index : int
        Smallest and largest index read (as written in the file).

    Raises
    ------
    ValueError
        When an output array is too short for the rows or entries of ``buf``.
    MemoryError
        When the list of hard tokens cannot grow.
    """
    cdef Py_ssize_t n = buf.shape[0]
    cdef Py_ssize_t max_rows = min(indptr.shape[0] - 1, labels.shape[0], qids.shape[0],
                                   has_qid.shape[0])
    cdef Py_ssize_t max_entries = min(indices.shape[0], data.shape[0])
    cdef bint zb = bool(zero_based)
    cdef _Outcome out
    cdef const uint8_t* text = NULL
    cdef int64_t[:, ::1] hard_view
    # Empty outputs have no valid first element; the kernel writes none of them then
    # (max_rows / max_entries are 0), so a pointer to a dummy slot is never written.
    cdef index_t dummy_index = 0
    cdef value_t dummy_value = 0
    cdef double dummy_label = 0
    cdef int64_t dummy_qid = 0
    cdef uint8_t dummy_has = 0
    if indptr.shape[0] < 1:
        raise ValueError("fill_csr: indptr needs at least one value")
    if n > 0:
        text = &buf[0]
    out.hard = NULL
    out.n_hard = 0
    out.hard_capacity = 0
    try:
        with nogil:
            _fill(text, n, zb, &indptr[0],
                  &indices[0] if indices.shape[0] > 0 else &dummy_index,
                  &data[0] if data.shape[0] > 0 else &dummy_value,
                  &labels[0] if labels.shape[0] > 0 else &dummy_label,
                  &qids[0] if qids.shape[0] > 0 else &dummy_qid,
                  &has_qid[0] if has_qid.shape[0] > 0 else &dummy_has,
                  max_rows, max_entries, &out)
        if out.err == _ERR_OUTPUT_TOO_SMALL:
            raise ValueError(
                "fill_csr: output arrays too short for the text (size them with "
                "count_rows_and_tokens)")
        if out.err == _ERR_NO_MEMORY:
            raise MemoryError("fill_csr: no memory for the list of hard tokens")
        hard = np.empty((out.n_hard, 4), dtype=np.int64)
        if out.n_hard > 0:
            hard_view = hard
            memcpy(&hard_view[0, 0], out.hard, out.n_hard * 4 * sizeof(int64_t))
    finally:
        free(out.hard)
    return (out.err, out.err_line, out.rows, out.nnz, hard, out.qid_err_line,
            out.min_index, out.max_index)
