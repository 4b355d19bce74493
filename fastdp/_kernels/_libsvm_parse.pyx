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

cdef extern from *:
    """
    #include <stdint.h>
    #if defined(_MSC_VER) && !defined(__clang__) && defined(_M_X64)
    #include <intrin.h>
    #endif

    /* Exact 64 x 64 -> 128-bit product: returns the low word, stores the high one. */
    static inline uint64_t fastdp_mul128(uint64_t a, uint64_t b, uint64_t *high) {
    #if defined(__SIZEOF_INT128__)
        unsigned __int128 p = (unsigned __int128)a * b;
        *high = (uint64_t)(p >> 64);
        return (uint64_t)p;
    #elif defined(_MSC_VER) && !defined(__clang__) && defined(_M_X64)
        return _umul128(a, b, high);
    #else
        uint64_t a_lo = a & 0xFFFFFFFFu, a_hi = a >> 32;
        uint64_t b_lo = b & 0xFFFFFFFFu, b_hi = b >> 32;
        uint64_t p0 = a_lo * b_lo, p1 = a_lo * b_hi, p2 = a_hi * b_lo, p3 = a_hi * b_hi;
        uint64_t mid = (p0 >> 32) + (p1 & 0xFFFFFFFFu) + (p2 & 0xFFFFFFFFu);
        *high = p3 + (p1 >> 32) + (p2 >> 32) + (mid >> 32);
        return (p0 & 0xFFFFFFFFu) | (mid << 32);
    #endif
    }

    #define FASTDP_MAX_INDEX INT64_C(2147483647)
    #define FASTDP_PRECISION_MASK UINT64_C(0x1FF)  /* 64 - 52 - 3 low bits */
    #define FASTDP_MASK64 UINT64_C(0xFFFFFFFFFFFFFFFF)
    #define FASTDP_TWO53 (UINT64_C(1) << 53)
    #define FASTDP_TWO52 (UINT64_C(1) << 52)
    #define FASTDP_SMALLEST_POW10 (-342)
    #define FASTDP_N_POW5 651  /* 10**-342 .. 10**308 */

    /* Number of leading zero bits of a non-zero uint64. */
    static inline int fastdp_clz64(uint64_t w) {
    #if defined(__GNUC__) || defined(__clang__)
        return __builtin_clzll(w);
    #else
        int n = 0, bits;
        for (bits = 32; bits > 0; bits >>= 1) {
            if ((w >> (64 - bits)) == 0) { n += bits; w <<= bits; }
        }
        return n;
    #endif
    }
    """
    uint64_t fastdp_mul128(uint64_t a, uint64_t b, uint64_t *high) noexcept nogil
    int fastdp_clz64(uint64_t w) noexcept nogil
    const int64_t _C_MAX_INDEX "FASTDP_MAX_INDEX"
    const uint64_t _PRECISION_MASK "FASTDP_PRECISION_MASK"
    const uint64_t _MASK64 "FASTDP_MASK64"
    const uint64_t _TWO53 "FASTDP_TWO53"
    const uint64_t _TWO52 "FASTDP_TWO52"
    const int64_t _SMALLEST_POW10 "FASTDP_SMALLEST_POW10"
    enum: _N_POW5 "FASTDP_N_POW5"

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



def _powers_of_five_128():
    """128-bit truncated approximations of 5**q, q in [-342, 308], top bit set.

    Built with exact Python integers (the construction of the Eisel-Lemire
    paper): for q >= 0 the top 128 bits of 5**q; for q < 0 the top 128 bits of
    floor(2**b / 5**-q) + 1 for a large enough b.
    """
    smallest, largest = -342, 308
    hi = np.empty(largest - smallest + 1, dtype=np.uint64)
    lo = np.empty_like(hi)
    mask64 = (1 << 64) - 1
    for q in range(smallest, largest + 1):
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
        hi[q - smallest] = c >> 64
        lo[q - smallest] = c & mask64
    return hi, lo


POW5_HI, POW5_LO = _powers_of_five_128()
POW10 = np.array([10.0**k for k in range(23)], dtype=np.float64)  # exact doubles

# C copies of the tables (filled once at import from the arrays above).
cdef uint64_t _pow5_hi[_N_POW5]
cdef uint64_t _pow5_lo[_N_POW5]
cdef double _pow10[23]
cdef double _pow2[2046]  # 2**-1074 .. 2**971, exact


def _fill_tables():
    cdef Py_ssize_t k
    cdef uint64_t[::1] hi = POW5_HI
    cdef uint64_t[::1] lo = POW5_LO
    cdef double[::1] p10 = POW10
    cdef double[::1] p2 = np.ldexp(1.0, np.arange(-1074, 972))
    assert hi.shape[0] == _N_POW5
    for k in range(_N_POW5):
        _pow5_hi[k] = hi[k]
        _pow5_lo[k] = lo[k]
    for k in range(23):
        _pow10[k] = p10[k]
    for k in range(2046):
        _pow2[k] = p2[k]


_fill_tables()


# --------------------------------------------------------------------------- floats

cdef inline double _eisel_lemire(uint64_t w, int64_t q) noexcept nogil:
    """Correctly rounded w * 10**q for 0 < w < 10**19 and a normal, finite result;
    NaN asks the caller for a fallback."""
    cdef int lz = fastdp_clz64(w)
    cdef uint64_t high, low, high2, mantissa
    cdef Py_ssize_t k = q - _SMALLEST_POW10
    cdef int64_t upperbit, shift, power2
    w = w << lz
    low = fastdp_mul128(w, _pow5_hi[k], &high)
    if (high & _PRECISION_MASK) == _PRECISION_MASK:
        fastdp_mul128(w, _pow5_lo[k], &high2)
        low = low + high2
        if high2 > low:
            high = high + 1
        # Conservative guard (never needed for <= 19 digits, kept as a safety net).
        if (high & _PRECISION_MASK) == _PRECISION_MASK and low == _MASK64 and (q < -27 or q > 55):
            return NAN
    upperbit = <int64_t>(high >> 63)
    shift = upperbit + 9  # upperbit + 64 - 52 - 3
    mantissa = high >> shift
    # floor(q * log2(10)) + 63 + ...: an arithmetic right shift of a signed product
    power2 = (((152170 + 65536) * q) >> 16) + 63 + upperbit - lz + 1023
    if power2 <= 0:
        return NAN  # subnormal: not reached for the q range we call with
    if low <= 1 and q >= -4 and q <= 23 and (mantissa & 3) == 1:
        if (mantissa << shift) == high:
            mantissa = mantissa & ~(<uint64_t>1)  # exactly half-way: round to even
    mantissa = mantissa + (mantissa & 1)
    mantissa = mantissa >> 1
    if mantissa >= _TWO53:
        mantissa = _TWO52
        power2 += 1
    if power2 >= 0x7FF:
        return NAN
    # mantissa * 2**(power2 - 1075) is a normal double: the product is exact
    return (<double>mantissa) * _pow2[power2 - 1075 + 1074]


cdef inline double _scale_decimal(uint64_t w, int64_t exp10, bint negative) noexcept nogil:
    """Correctly rounded (-1)**negative * w * 10**exp10 for w < 10**19; NaN = fall back."""
    cdef double value
    if w == 0:
        value = 0.0
    elif w <= _TWO53 and exp10 >= -22 and exp10 <= 22:
        value = <double>w
        if exp10 >= 0:
            value = value * _pow10[exp10]
        else:
            value = value / _pow10[-exp10]
    elif exp10 >= -307 and exp10 <= 288:
        value = _eisel_lemire(w, exp10)
        if value != value:
            return NAN
    else:
        return NAN
    return -value if negative else value


cdef inline bint _parse_exponent(const uint8_t* buf, Py_ssize_t i, Py_ssize_t end,
                                 int64_t* exponent) noexcept nogil:
    """Parse ``[eE][+-]digits`` filling ``buf[i:end]`` exactly into ``exponent``."""
    cdef bint negative = False
    cdef int64_t e = 0
    cdef uint8_t c
    if i >= end or (buf[i] != 101 and buf[i] != 69):
        return False
    i += 1
    if i < end and (buf[i] == 45 or buf[i] == 43):
        negative = buf[i] == 45
        i += 1
    if i >= end:
        return False
    while i < end:
        c = buf[i]
        if c < 48 or c > 57:
            return False
        if e < 100000:
            e = e * 10 + (c - 48)
        i += 1
    exponent[0] = -e if negative else e
    return True


cdef inline Py_ssize_t _read_significant_digits(
        const uint8_t* buf, Py_ssize_t i, Py_ssize_t end,
        uint64_t* w, int* n_sig, int64_t* n_read) noexcept nogil:
    """Read the run of digits starting at ``buf[i]`` into ``w``, skipping leading zeros.

    ``w`` and ``n_sig`` carry on from an earlier run (the integer part before
    the fraction).  Returns the position after the run; ``n_read`` is the
    number of digits read and ``n_sig`` the number of significant digits,
    set to -1 when a 20th significant digit appears (the token then needs
    Python's ``float()``).
    """
    cdef uint8_t c
    n_read[0] = 0
    while i < end:
        c = buf[i]
        if c < 48 or c > 57:
            break
        n_read[0] += 1
        if w[0] != 0 or c != 48:
            if n_sig[0] == 19:
                n_sig[0] = -1
                return i
            w[0] = w[0] * 10 + (c - 48)
            n_sig[0] += 1
        i += 1
    return i


cdef double _parse_float_long(const uint8_t* buf, Py_ssize_t i, Py_ssize_t end,
                              bint negative) noexcept nogil:
    """Slow path for more than 19 digits: skip leading zeros, allow up to 19
    significant digits; NaN when the token needs Python's ``float()``."""
    cdef uint64_t w = 0
    cdef int n_sig = 0
    cdef int64_t n_integer = 0, n_fraction = 0, e = 0, exp10
    i = _read_significant_digits(buf, i, end, &w, &n_sig, &n_integer)
    if n_sig < 0:
        return NAN
    if i < end and buf[i] == 46:
        i = _read_significant_digits(buf, i + 1, end, &w, &n_sig, &n_fraction)
        if n_sig < 0:
            return NAN
    if n_integer + n_fraction == 0:
        return NAN
    exp10 = -n_fraction
    if i < end:
        if not _parse_exponent(buf, i, end, &e):
            return NAN
        exp10 += e
    return _scale_decimal(w, exp10, negative)


cdef inline bint _is_separator(uint8_t c) noexcept nogil:
    """End of a token: ASCII whitespace (as ``bytes.split``), '#' or newline."""
    return c == 32 or c == 35 or (c >= 9 and c <= 13)


cdef inline Py_ssize_t _digit_run(const uint8_t* buf, Py_ssize_t i, Py_ssize_t n,
                                  uint64_t* w) noexcept nogil:
    """Append the run of digits at ``buf[i]`` to ``w`` (wrapping past 2**64: the
    caller counts the digits); returns the position after the run."""
    cdef uint64_t acc = w[0]
    cdef uint8_t d
    while i < n:
        d = <uint8_t>(buf[i] - 48)  # wraps for bytes below '0'
        if d > 9:
            break
        acc = acc * 10 + d
        i += 1
    w[0] = acc
    return i


cdef inline Py_ssize_t _scan_number(const uint8_t* buf, Py_ssize_t i, Py_ssize_t n,
                                    double* value) noexcept nogil:
    """Scan one token from ``i`` to its end while reading it as a decimal.

    Returns the end of the token; ``value`` is the correctly rounded double
    when the token is ``[+-]digits[.digits][(e|E)[+-]digits]`` with 1 to 19
    digits before the exponent, else the result of ``_parse_float_long`` (NaN
    when Python's ``float()`` must decide).  Scanning and accumulating in one
    loop is what makes the parser fast.
    """
    cdef Py_ssize_t start = i, first, end, fraction_start
    cdef bint negative = False
    cdef uint64_t w = 0
    cdef int64_t n_digits, n_fraction = 0, e = 0
    cdef uint8_t c
    if i < n:
        c = buf[i]
        if c == 45:
            negative = True
            i += 1
        elif c == 43:
            i += 1
    first = i
    i = _digit_run(buf, i, n, &w)
    n_digits = i - first
    if i < n and buf[i] == 46:
        fraction_start = i + 1
        i = _digit_run(buf, fraction_start, n, &w)
        n_fraction = i - fraction_start
        n_digits += n_fraction
    if i < n and not _is_separator(buf[i]):
        # an exponent, or anything else: find the end of the token first
        end = i
        while end < n and not _is_separator(buf[end]):
            end += 1
        if (n_digits >= 1 and n_digits <= 19 and (buf[i] == 101 or buf[i] == 69)
                and _parse_exponent(buf, i, end, &e)):
            value[0] = _scale_decimal(w, e - n_fraction, negative)
        elif end == start:
            value[0] = NAN
        else:
            value[0] = _parse_float_long(buf, first, end, negative)
        return end
    if n_digits == 0 or n_digits > 19:
        value[0] = NAN if i == start else _parse_float_long(buf, first, i, negative)
        return i
    value[0] = _scale_decimal(w, -n_fraction, negative)
    return i


# --------------------------------------------------------------------------- integers

cdef inline bint _parse_int_token(const uint8_t* buf, Py_ssize_t start, Py_ssize_t end,
                                  int64_t* result, bint* overflow) noexcept nogil:
    """Parse ``buf[start:end]`` like Python ``int()`` (sign, digits, single
    underscores between digits).

    ``overflow`` is set when ``|value|`` exceeds 2**62 (``result`` is then
    meaningless).
    """
    cdef Py_ssize_t i = start
    cdef bint negative = False, previous_underscore = False
    cdef int64_t value = 0, n_digits = 0
    cdef uint8_t c
    overflow[0] = False
    if i >= end:
        return False
    if buf[i] == 45:
        negative = True
        i += 1
    elif buf[i] == 43:
        i += 1
    while i < end:
        c = buf[i]
        if c == 95:  # '_' only between two digits
            if n_digits == 0 or previous_underscore:
                return False
            previous_underscore = True
        elif c >= 48 and c <= 57:
            if value > 461168601842738790LL:  # (2**62) // 10
                overflow[0] = True
            else:
                value = value * 10 + (c - 48)
            n_digits += 1
            previous_underscore = False
        else:
            return False
        i += 1
    if n_digits == 0 or previous_underscore:
        return False
    result[0] = -value if negative else value
    return True


cdef inline int _general_index(const uint8_t* buf, Py_ssize_t start, Py_ssize_t colon,
                               Py_ssize_t end, int64_t* index) noexcept nogil:
    """Index of a feature token that is not plain ``digits:``, like ``int()``;
    returns an error code or ``_ERR_NONE``."""
    cdef bint ok, overflow
    cdef int64_t value = 0
    if colon < 0:
        return _ERR_MISSING_COLON
    ok = _parse_int_token(buf, start, colon, &value, &overflow)
    if not ok:
        return _ERR_BAD_INDEX
    if overflow or value > _C_MAX_INDEX or value < 0:
        return _ERR_NEGATIVE_INDEX if buf[start] == 45 else _ERR_INDEX_OVERFLOW
    index[0] = value
    return _ERR_NONE


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
