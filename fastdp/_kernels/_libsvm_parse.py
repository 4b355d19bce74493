"""numba byte parser for LIBSVM / svmlight text.

This module holds compiled inner loops only: no I/O, no privacy decisions.
:func:`fastdp.datasets.load_libsvm` reads and decompresses the file, calls
:func:`count_rows_and_tokens` then :func:`fill_csr`, and turns the error code
returned here into a :class:`fastdp.exceptions.LibsvmParseError`.

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
fast path when the mantissa is below 2**53 and the power of ten is at most 22,
otherwise the Eisel-Lemire algorithm (128-bit truncated powers of five,
computed at import time from exact integer arithmetic) for results in the
normal range. Every other token (more digits, ``inf``/``nan``, underscores,
extreme exponents, or garbage) is reported back as a *hard* token span; the
Python caller converts those with ``float()`` itself, which both gives the exact
value and decides validity the way scikit-learn does.

Speed
-----
:func:`fill_csr` makes one sweep over the bytes; each number is read by the
same loop that finds the end of its token (:func:`_scan_number`). Helpers on
the hot path are inlined at the numba IR level (``inline="always"``): a call
between numba functions passes every array argument with reference counting,
which costs more than parsing a short number. Rare paths (more than 19 digits,
exponents) stay real calls.
"""

import numpy as np
from numba import njit

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

# Status returned by _eisel_lemire.
FLOAT_OK = 0
FLOAT_HARD = 1

_SMALLEST_POW10 = -342
_LARGEST_POW10 = 308
_MAX_INDEX = 2**31 - 1


def _powers_of_five_128():
    """128-bit truncated approximations of 5**q, q in [-342, 308], top bit set.

    Built with exact Python integers (the construction of the Eisel-Lemire
    paper): for q >= 0 the top 128 bits of 5**q; for q < 0 the top 128 bits of
    floor(2**b / 5**-q) + 1 for a large enough b.
    """
    hi = np.empty(_LARGEST_POW10 - _SMALLEST_POW10 + 1, dtype=np.uint64)
    lo = np.empty_like(hi)
    mask64 = (1 << 64) - 1
    for q in range(_SMALLEST_POW10, _LARGEST_POW10 + 1):
        if q >= 0:
            c = 5**q
            if c.bit_length() < 128:
                c <<= 128 - c.bit_length()
            else:
                c >>= c.bit_length() - 128
        else:
            p = 5**-q
            z = p.bit_length()
            if q >= -27:
                c = (1 << (z + 127)) // p + 1
            else:
                c = (1 << (2 * z + 128)) // p + 1
                c >>= max(0, c.bit_length() - 128)
        hi[q - _SMALLEST_POW10] = c >> 64
        lo[q - _SMALLEST_POW10] = c & mask64
    return hi, lo


POW5_HI, POW5_LO = _powers_of_five_128()
POW10 = np.array([10.0**k for k in range(23)], dtype=np.float64)  # exact doubles
# numba freezes global arrays into the compiled code as constants
_POW5_HI, _POW5_LO, _POW10 = POW5_HI, POW5_LO, POW10
_POW2 = np.ldexp(1.0, np.arange(-1074, 972))  # exact powers of two (a frozen numba constant)

_U0 = np.uint64(0)
_U1 = np.uint64(1)
_U32 = np.uint64(32)
_MASK32 = np.uint64(0xFFFFFFFF)
_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)
_PRECISION_MASK = np.uint64(0xFFFFFFFFFFFFFFFF >> 55)  # 52 mantissa bits + 3
_TWO53 = np.uint64(1 << 53)
_TWO52 = np.uint64(1 << 52)


@njit(cache=True, inline="always")
def _full_multiply(a, b):
    """Exact 64 x 64 -> 128-bit product of two uint64, as (high, low)."""
    a_lo = a & _MASK32
    a_hi = a >> _U32
    b_lo = b & _MASK32
    b_hi = b >> _U32
    p0 = a_lo * b_lo
    p1 = a_lo * b_hi
    p2 = a_hi * b_lo
    p3 = a_hi * b_hi
    mid = (p0 >> _U32) + (p1 & _MASK32) + (p2 & _MASK32)
    low = (p0 & _MASK32) | (mid << _U32)
    high = p3 + (p1 >> _U32) + (p2 >> _U32) + (mid >> _U32)
    return high, low


@njit(cache=True, inline="always")
def _leading_zeros(w):
    """Number of leading zero bits of a non-zero uint64."""
    n = 0
    for bits in (32, 16, 8, 4, 2, 1):  # binary search; a constant trip count, unrolled by LLVM
        if (w >> np.uint64(64 - bits)) == _U0:
            n += bits
            w = w << np.uint64(bits)
    return n


@njit(cache=True, inline="always")
def _eisel_lemire(w, q, pow5_hi, pow5_lo):
    """Correctly rounded w * 10**q for 0 < w < 10**19 and a normal, finite result.

    Returns (status, value); status FLOAT_HARD asks the caller for a fallback.
    """
    lz = _leading_zeros(w)
    w = w << np.uint64(lz)
    k = q - _SMALLEST_POW10
    high, low = _full_multiply(w, pow5_hi[k])
    if (high & _PRECISION_MASK) == _PRECISION_MASK:
        high2, low2 = _full_multiply(w, pow5_lo[k])
        low = low + high2
        if high2 > low:
            high = high + _U1
        # Conservative guard (never needed for <= 19 digits, kept as a safety net).
        if (high & _PRECISION_MASK) == _PRECISION_MASK and low == _MASK64 and (q < -27 or q > 55):
            return FLOAT_HARD, 0.0
    upperbit = np.int64(high >> np.uint64(63))
    shift = upperbit + 9  # upperbit + 64 - 52 - 3
    mantissa = high >> np.uint64(shift)
    power2 = (((152170 + 65536) * q) >> 16) + 63 + upperbit - lz + 1023
    if power2 <= 0:
        return FLOAT_HARD, 0.0  # subnormal: not reached for the q range we call with
    if low <= _U1 and q >= -4 and q <= 23 and (mantissa & np.uint64(3)) == _U1:
        if (mantissa << np.uint64(shift)) == high:
            mantissa = mantissa & ~_U1  # exactly half-way: round to even
    mantissa = mantissa + (mantissa & _U1)
    mantissa = mantissa >> _U1
    if mantissa >= _TWO53:
        mantissa = _TWO52
        power2 += 1
    if power2 >= 0x7FF:
        return FLOAT_HARD, 0.0
    # mantissa * 2**(power2 - 1075) is a normal double: the product is exact
    return FLOAT_OK, float(mantissa) * _POW2[power2 - 1075 + 1074]


@njit(cache=True, inline="always")
def _scale_decimal(w, exp10, negative, pow5_hi, pow5_lo, pow10):
    """Correctly rounded (-1)**negative * w * 10**exp10 for w < 10**19; NaN = fall back."""
    if w == _U0:
        return -0.0 if negative else 0.0
    if w <= _TWO53 and exp10 >= -22 and exp10 <= 22:
        value = float(w)
        if exp10 >= 0:
            value = value * pow10[exp10]
        else:
            value = value / pow10[-exp10]
    elif exp10 >= -307 and exp10 <= 288:
        status, value = _eisel_lemire(w, exp10, pow5_hi, pow5_lo)
        if status != FLOAT_OK:
            return np.nan
    else:
        return np.nan
    return -value if negative else value


@njit(cache=True, inline="always")
def _parse_exponent(buf, i, end):
    """Parse ``[eE][+-]digits`` filling ``buf[i:end]`` exactly; returns (ok, exponent)."""
    if i >= end or (buf[i] != 101 and buf[i] != 69):
        return False, 0
    i += 1
    negative = False
    if i < end and (buf[i] == 45 or buf[i] == 43):
        negative = buf[i] == 45
        i += 1
    if i >= end:
        return False, 0
    e = 0
    while i < end:
        c = buf[i]
        if c < 48 or c > 57:
            return False, 0
        if e < 100000:
            e = e * 10 + (c - 48)
        i += 1
    return True, -e if negative else e


@njit(cache=True, inline="always")
def _read_significant_digits(buf, i, end, w, n_sig):
    """Read the run of digits starting at ``buf[i]`` into ``w``, skipping leading zeros.

    ``w`` and ``n_sig`` carry on from an earlier run (the integer part before
    the fraction).  Returns ``(i, w, n_sig, n_read)``: the position after the
    run, the accumulated significand, its number of significant digits, and
    the number of digits read; ``n_sig = -1`` when a 20th significant digit
    appears (the token then needs Python's ``float()``).
    """
    n_read = 0
    while i < end:
        c = buf[i]
        if c < 48 or c > 57:
            break
        n_read += 1
        if w != _U0 or c != 48:
            if n_sig == 19:
                return i, w, -1, n_read
            w = w * np.uint64(10) + np.uint64(c - 48)
            n_sig += 1
        i += 1
    return i, w, n_sig, n_read


@njit(cache=True)
def _parse_float_long(buf, i, end, negative, pow5_hi, pow5_lo, pow10):
    """Slow path for more than 19 digits: skip leading zeros, allow up to 19
    significant digits; NaN when the token needs Python's ``float()``."""
    i, w, n_sig, n_integer = _read_significant_digits(buf, i, end, _U0, 0)
    if n_sig < 0:
        return np.nan
    n_fraction = 0
    if i < end and buf[i] == 46:
        i, w, n_sig, n_fraction = _read_significant_digits(buf, i + 1, end, w, n_sig)
        if n_sig < 0:
            return np.nan
    if n_integer + n_fraction == 0:
        return np.nan
    exp10 = -n_fraction
    if i < end:
        ok, e = _parse_exponent(buf, i, end)
        if not ok:
            return np.nan
        exp10 += e
    return _scale_decimal(w, exp10, negative, pow5_hi, pow5_lo, pow10)


@njit(cache=True, inline="always")
def _parse_int_token(buf, start, end):
    """Parse ``buf[start:end]`` like Python ``int()`` (sign, digits, single
    underscores between digits).

    Returns ``(ok, value, overflow)``; ``overflow`` is set when ``|value|``
    exceeds 2**62 (``value`` is then meaningless).
    """
    i = start
    if i >= end:
        return False, 0, False
    negative = False
    if buf[i] == 45:
        negative = True
        i += 1
    elif buf[i] == 43:
        i += 1
    value = 0
    overflow = False
    n_digits = 0
    previous_underscore = False
    while i < end:
        c = buf[i]
        if c == 95:  # '_' only between two digits
            if n_digits == 0 or previous_underscore:
                return False, 0, False
            previous_underscore = True
        elif c >= 48 and c <= 57:
            if value > 461168601842738790:  # (2**62) // 10
                overflow = True
            else:
                value = value * 10 + (c - 48)
            n_digits += 1
            previous_underscore = False
        else:
            return False, 0, False
        i += 1
    if n_digits == 0 or previous_underscore:
        return False, 0, False
    return True, -value if negative else value, overflow


@njit(cache=True)
def count_rows_and_tokens(buf):
    """First pass: upper bounds on the number of rows (newlines + 1) and of
    stored entries (colons: every feature token holds one)."""
    newlines = 0
    colons = 0
    for k in range(buf.size):
        c = buf[k]
        newlines += c == 10
        colons += c == 58
    return newlines + 1, colons


@njit(cache=True)
def _append_hard(hard, n_hard, start, end, slot, line):
    if n_hard == hard.shape[0]:
        grown = np.empty((2 * hard.shape[0], 4), dtype=np.int64)
        grown[:n_hard] = hard[:n_hard]
        hard = grown
    hard[n_hard, 0] = start
    hard[n_hard, 1] = end
    hard[n_hard, 2] = slot
    hard[n_hard, 3] = line
    return hard, n_hard + 1


@njit(cache=True, inline="always")
def _general_index(buf, start, colon):
    """Index of a feature token that is not plain ``digits:``, like ``int()``;
    returns (error code or ERR_NONE, index)."""
    if colon < 0:
        return ERR_MISSING_COLON, 0
    ok, index, overflow = _parse_int_token(buf, start, colon)
    if not ok:
        return ERR_BAD_INDEX, 0
    if overflow or index > _MAX_INDEX or index < 0:
        return (ERR_NEGATIVE_INDEX if buf[start] == 45 else ERR_INDEX_OVERFLOW), 0
    return ERR_NONE, index


@njit(cache=True, inline="always")
def _is_separator(c):
    """End of a token: ASCII whitespace (as ``bytes.split``), '#' or newline."""
    return c == 32 or c == 35 or (c >= 9 and c <= 13)


@njit(cache=True, inline="always")
def _scan_number(buf, i, n):
    """Scan one token from ``i`` to its end while reading it as a plain decimal.

    Returns ``(end, value)``: ``value`` is the correctly rounded double when the
    token is ``[+-]digits[.digits]`` with 1 to 19 digits, else the result of
    :func:`_parse_float_long` (NaN when Python's ``float()`` must decide).
    Scanning and accumulating in one loop is what makes the parser fast.
    """
    start = i
    negative = False
    if i < n:
        c = buf[i]
        if c == 45:
            negative = True
            i += 1
        elif c == 43:
            i += 1
    first = i
    w = _U0
    n_digits = 0
    dot = -1
    plain = True
    while i < n:
        c = buf[i]
        d = c - np.uint8(48)  # wraps for bytes below '0'
        if d <= np.uint8(9):
            w = w * np.uint64(10) + np.uint64(d)
            n_digits += 1
        elif c == 46 and dot < 0:
            dot = i
        elif _is_separator(c):
            break
        else:
            plain = False
        i += 1
    end = i
    if not plain or n_digits == 0 or n_digits > 19:
        if end == start:
            return end, np.nan
        return end, _parse_float_long(buf, first, end, negative, _POW5_HI, _POW5_LO, _POW10)
    n_fraction = 0 if dot < 0 else end - dot - 1
    return end, _scale_decimal(w, -n_fraction, negative, _POW5_HI, _POW5_LO, _POW10)


@njit(cache=True)
def fill_csr(buf, zero_based, indptr, indices, data, labels, qids, has_qid):
    """Second pass: fill preallocated CSR arrays in one sweep over the bytes.

    Parameters
    ----------
    buf : uint8[:]
        The whole (decompressed) file.
    zero_based : bool
        When False, index 0 is an error (scikit-learn's ``zero_based=False``).
    indptr, labels, qids, has_qid : arrays sized from :func:`count_rows_and_tokens`
        (``n_rows_bound + 1``, ``n_rows_bound``, ``n_rows_bound``, ``n_rows_bound``)
    indices, data : arrays of the entry bound from :func:`count_rows_and_tokens`

    Returns
    -------
    err_code, err_line : int
        ``ERR_NONE`` and 0, or the first structural error and its 1-based line.
    n_rows, nnz : int
        Rows (lines with a token) and stored entries actually read.
    hard : int64[n_hard, 4]
        (start, end, slot, line) of tokens the caller must convert with
        ``float()``; ``slot >= 0`` is a position in ``data``, ``slot < 0`` is the
        label of row ``-slot - 1``.
    qid_err_line : int
        First line whose qid value is not an int64 (0 if none); only an error
        when the caller asked for qids, as in scikit-learn.
    min_index, max_index : int
        Smallest and largest index read (as written in the file).
    """
    n = buf.size
    i = 0
    line = 0
    row = 0
    nnz = 0
    hard = np.empty((16, 4), dtype=np.int64)
    n_hard = 0
    qid_err_line = 0
    min_index = _MAX_INDEX + 1
    max_index = -1
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
                i, value = _scan_number(buf, i, n)
                labels[row] = value
                has_qid[row] = 0
                qids[row] = 0
                if value != value:
                    hard, n_hard = _append_hard(hard, n_hard, start, i, -row - 1, line)
                token_number = 1
                continue
            # fast path for the index: plain digits followed by ':'
            index = 0
            while i < n:
                d = buf[i] - np.uint8(48)
                if d > np.uint8(9) or index > _MAX_INDEX:
                    break
                index = index * 10 + np.int64(d)
                i += 1
            if i < n and buf[i] == 58 and i > start and index <= _MAX_INDEX:
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
                if (
                    token_number == 1
                    and end - start >= 3
                    and buf[start] == 113
                    and buf[start + 1] == 105
                    and buf[start + 2] == 100
                ):  # 'qid'
                    if colon < 0:
                        return ERR_BAD_QID, line, row, nnz, hard[:n_hard], qid_err_line, min_index, max_index
                    ok, qid_value, overflow = _parse_int_token(buf, colon + 1, end)
                    if ok and not overflow:
                        qids[row] = qid_value
                        has_qid[row] = 1
                    elif qid_err_line == 0:
                        qid_err_line = line
                    token_number += 1
                    continue
                err, index = _general_index(buf, start, colon)
                if err != ERR_NONE:
                    return err, line, row, nnz, hard[:n_hard], qid_err_line, min_index, max_index
            if index == 0 and not zero_based:
                return ERR_ZERO_INDEX, line, row, nnz, hard[:n_hard], qid_err_line, min_index, max_index
            if index <= prev_index:
                return ERR_INDEX_ORDER, line, row, nnz, hard[:n_hard], qid_err_line, min_index, max_index
            prev_index = index
            if index < min_index:
                min_index = index
            if index > max_index:
                max_index = index
            indices[nnz] = index
            i, value = _scan_number(buf, colon + 1, n)
            data[nnz] = value
            if value != value:
                hard, n_hard = _append_hard(hard, n_hard, colon + 1, i, nnz, line)
            nnz += 1
            token_number += 1
        if token_number > 0:
            row += 1
            indptr[row] = nnz
        i += 1  # past the newline
    return ERR_NONE, 0, row, nnz, hard[:n_hard], qid_err_line, min_index, max_index
