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
"""

import math

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
    "parse_float_token",
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

# Status of parse_float_token.
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

_U0 = np.uint64(0)
_U1 = np.uint64(1)
_U32 = np.uint64(32)
_MASK32 = np.uint64(0xFFFFFFFF)
_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)
_PRECISION_MASK = np.uint64(0xFFFFFFFFFFFFFFFF >> 55)  # 52 mantissa bits + 3
_TWO53 = np.uint64(1 << 53)
_TWO52 = np.uint64(1 << 52)


@njit(cache=True, inline="always")
def _is_space(c):
    # bytes.split() whitespace: \t \n \v \f \r and space
    return c == 32 or (c >= 9 and c <= 13)


@njit(cache=True)
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


@njit(cache=True)
def _leading_zeros(w):
    """Number of leading zero bits of a non-zero uint64."""
    n = 0
    if (w >> np.uint64(32)) == _U0:
        n += 32
        w = w << np.uint64(32)
    if (w >> np.uint64(48)) == _U0:
        n += 16
        w = w << np.uint64(16)
    if (w >> np.uint64(56)) == _U0:
        n += 8
        w = w << np.uint64(8)
    if (w >> np.uint64(60)) == _U0:
        n += 4
        w = w << np.uint64(4)
    if (w >> np.uint64(62)) == _U0:
        n += 2
        w = w << np.uint64(2)
    if (w >> np.uint64(63)) == _U0:
        n += 1
    return n


@njit(cache=True)
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
    return FLOAT_OK, math.ldexp(float(mantissa), power2 - 1075)


@njit(cache=True)
def parse_float_token(buf, start, end, pow5_hi, pow5_lo, pow10):
    """Parse ``buf[start:end]`` as a decimal float.

    Returns ``(status, value)``. ``FLOAT_OK``: ``value`` is the correctly rounded
    double. ``FLOAT_HARD``: the token is empty, not a plain decimal, has more than
    19 significant digits or an extreme exponent; the caller must decide with
    Python ``float()``.
    """
    i = start
    if i >= end:
        return FLOAT_HARD, 0.0
    negative = False
    c = buf[i]
    if c == 45:  # '-'
        negative = True
        i += 1
    elif c == 43:  # '+'
        i += 1
    w = _U0
    n_sig = 0
    exp10 = 0
    n_digits = 0
    while i < end:
        c = buf[i]
        if c < 48 or c > 57:
            break
        n_digits += 1
        if w != _U0 or c != 48:
            if n_sig == 19:
                return FLOAT_HARD, 0.0
            w = w * np.uint64(10) + np.uint64(c - 48)
            n_sig += 1
        i += 1
    if i < end and buf[i] == 46:  # '.'
        i += 1
        while i < end:
            c = buf[i]
            if c < 48 or c > 57:
                break
            n_digits += 1
            if w != _U0 or c != 48:
                if n_sig == 19:
                    return FLOAT_HARD, 0.0
                w = w * np.uint64(10) + np.uint64(c - 48)
                n_sig += 1
            exp10 -= 1
            i += 1
    if n_digits == 0:
        return FLOAT_HARD, 0.0
    if i < end and (buf[i] == 101 or buf[i] == 69):  # 'e' / 'E'
        i += 1
        exp_negative = False
        if i < end and (buf[i] == 45 or buf[i] == 43):
            exp_negative = buf[i] == 45
            i += 1
        n_exp_digits = 0
        e = 0
        while i < end:
            c = buf[i]
            if c < 48 or c > 57:
                break
            if e < 100000:
                e = e * 10 + (c - 48)
            n_exp_digits += 1
            i += 1
        if n_exp_digits == 0:
            return FLOAT_HARD, 0.0
        exp10 += -e if exp_negative else e
    if i != end:
        return FLOAT_HARD, 0.0
    if w == _U0:
        return FLOAT_OK, -0.0 if negative else 0.0
    if w <= _TWO53 and exp10 >= -22 and exp10 <= 22:
        value = float(w)
        if exp10 >= 0:
            value = value * pow10[exp10]
        else:
            value = value / pow10[-exp10]
    elif exp10 >= -307 and exp10 <= 288:
        status, value = _eisel_lemire(w, exp10, pow5_hi, pow5_lo)
        if status != FLOAT_OK:
            return status, 0.0
    else:
        return FLOAT_HARD, 0.0
    return FLOAT_OK, -value if negative else value


@njit(cache=True)
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
    """First pass: number of rows (lines with a token before any ``#``) and an
    upper bound on the number of stored entries (tokens after the label)."""
    n = buf.size
    i = 0
    n_rows = 0
    n_features = 0
    while i < n:
        line_tokens = 0
        in_token = False
        while i < n:
            c = buf[i]
            if c == 10:
                break
            if c == 35:  # comment: skip to end of line
                while i < n and buf[i] != 10:
                    i += 1
                break
            if _is_space(c):
                in_token = False
            elif not in_token:
                in_token = True
                line_tokens += 1
            i += 1
        i += 1  # past the newline
        if line_tokens > 0:
            n_rows += 1
            n_features += line_tokens - 1
    return n_rows, n_features


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


@njit(cache=True)
def fill_csr(buf, zero_based, indptr, indices, data, labels, qids, has_qid, pow5_hi, pow5_lo, pow10):
    """Second pass: fill preallocated CSR arrays.

    Parameters
    ----------
    buf : uint8[:]
        The whole (decompressed) file.
    zero_based : bool
        When False, index 0 is an error (scikit-learn's ``zero_based=False``).
    indptr, labels, qids, has_qid : arrays of length n_rows + 1, n_rows, n_rows, n_rows
    indices, data : arrays of the token upper bound from :func:`count_rows_and_tokens`

    Returns
    -------
    err_code, err_line : int
        ``ERR_NONE`` and 0, or the first structural error and its 1-based line.
    nnz : int
        Number of stored entries.
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
        # content end: first '#' or newline
        line_end = i
        content_end = -1
        while line_end < n and buf[line_end] != 10:
            if buf[line_end] == 35 and content_end < 0:
                content_end = line_end
            line_end += 1
        if content_end < 0:
            content_end = line_end
        token_number = 0
        prev_index = -1
        j = i
        while True:
            while j < content_end and _is_space(buf[j]):
                j += 1
            if j >= content_end:
                break
            start = j
            colon = -1
            while j < content_end and not _is_space(buf[j]):
                if buf[j] == 58 and colon < 0:
                    colon = j
                j += 1
            end = j
            if token_number == 0:
                status, value = parse_float_token(buf, start, end, pow5_hi, pow5_lo, pow10)
                labels[row] = value
                has_qid[row] = 0
                qids[row] = 0
                if status != FLOAT_OK:
                    hard, n_hard = _append_hard(hard, n_hard, start, end, -row - 1, line)
            elif (
                token_number == 1
                and end - start >= 3
                and buf[start] == 113
                and buf[start + 1] == 105
                and buf[start + 2] == 100
            ):  # 'qid'
                if colon < 0:
                    return ERR_BAD_QID, line, nnz, hard[:n_hard], qid_err_line, min_index, max_index
                ok, qid_value, overflow = _parse_int_token(buf, colon + 1, end)
                if ok and not overflow:
                    qids[row] = qid_value
                    has_qid[row] = 1
                elif qid_err_line == 0:
                    qid_err_line = line
            else:
                if colon < 0:
                    return ERR_MISSING_COLON, line, nnz, hard[:n_hard], qid_err_line, min_index, max_index
                ok, index, overflow = _parse_int_token(buf, start, colon)
                if not ok:
                    return ERR_BAD_INDEX, line, nnz, hard[:n_hard], qid_err_line, min_index, max_index
                if overflow or index > _MAX_INDEX:
                    if buf[start] == 45:
                        return ERR_NEGATIVE_INDEX, line, nnz, hard[:n_hard], qid_err_line, min_index, max_index
                    return ERR_INDEX_OVERFLOW, line, nnz, hard[:n_hard], qid_err_line, min_index, max_index
                if index < 0:
                    return ERR_NEGATIVE_INDEX, line, nnz, hard[:n_hard], qid_err_line, min_index, max_index
                if index == 0 and not zero_based:
                    return ERR_ZERO_INDEX, line, nnz, hard[:n_hard], qid_err_line, min_index, max_index
                if index <= prev_index:
                    return ERR_INDEX_ORDER, line, nnz, hard[:n_hard], qid_err_line, min_index, max_index
                prev_index = index
                if index < min_index:
                    min_index = index
                if index > max_index:
                    max_index = index
                indices[nnz] = index
                status, value = parse_float_token(buf, colon + 1, end, pow5_hi, pow5_lo, pow10)
                data[nnz] = value
                if status != FLOAT_OK:
                    hard, n_hard = _append_hard(hard, n_hard, colon + 1, end, nnz, line)
                nnz += 1
            token_number += 1
        if token_number > 0:
            row += 1
            indptr[row] = nnz
        i = line_end + 1
    return ERR_NONE, 0, nnz, hard[:n_hard], qid_err_line, min_index, max_index
