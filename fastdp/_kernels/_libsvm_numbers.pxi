# Number parsing of the LIBSVM byte parser: correctly rounded decimal floats and
# ``int()``-like feature indices.
#
# Floats: Clinger's exact fast path (mantissa <= 2**53, power of ten <= 22),
# otherwise the Eisel-Lemire algorithm over 128-bit truncated powers of five,
# computed at import time from exact integer arithmetic (:func:`_powers_of_five_128`).
# A token this cannot convert exactly gives NaN: the Python caller converts it
# with ``float()`` (see the module docstring of ``_libsvm_parse.pyx``, "Floats").
# Integers: plain ``digits`` on the hot path, anything else through
# :func:`_general_index`, which returns one of the parser's error codes.
#
# The row assembly (tokens, rows, output arrays) is ``_libsvm_parse.pyx``, which
# includes this file textually (``include``): one compiled module, so the hot-path
# helpers stay inline C functions with direct access to the tables.

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
