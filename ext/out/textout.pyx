# cython: freethreading_compatible = False
"""Text of record columns, written by C over the Arrow buffers (issue 21): the line format of
webtap.writers, JSON lines (webtap.jsonl), Zeek log rows (webtap.zeeklog), comma-joined lists
and exact decimal seconds from nanosecond times.

Why C and not pyarrow.compute: pyarrow 26's compute wrappers import pandas on their first call
(~0.2 s and ~40 MB on every text run that needs none of it), and formatting with compute kernels
makes one intermediate array per step (cast, pad, join, replace) -- ~11,000 instructions per
record, against a few hundred here. This module reads the arrays' buffers in place (validity
bitmap, offsets, values, list children; the arrays' slice offsets honoured), loops without the
GIL, and returns bytes (rows) or an Arrow string array built with ``from_buffers`` (seconds,
joined lists), so a text run imports pyarrow's core only.

The rules, each written once here (the Python modules name the format, this module writes it):

* Line format (webtap.writers): fields joined by ``|``, one line per row ending in ``\\n``, a
  null is an empty field; text escaped so that every line keeps its field count: backslash ->
  ``\\\\``, ``|`` -> ``\\x7c``, CR -> ``\\r``, LF -> ``\\n``, other U+0000-U+001F and
  U+007F-U+009F -> ``\\xHH`` (lower-case hex), U+2028 / U+2029 -> ``\\u2028`` / ``\\u2029``.
  The C1 and U+2028/9 rules read UTF-8 (string values are valid UTF-8: the pairing table
  decodes what it keeps, so a 0xC2 or 0xE2 byte is the lead byte of its sequence).
* JSON lines (webtap.jsonl): ``{"key":value,...}`` per row; strings quoted with ``\\\\``,
  ``\\"`` and ``\\u00XX`` (lower-case hex) for U+0000-U+001F, everything else as is (UTF-8);
  timestamps (ns) as ISO 8601 UTC text with nanoseconds, ``"2014-03-04T22:11:25.123456789Z"``;
  durations as decimal seconds; lists as arrays; a null is ``null``.
* Zeek rows (webtap.zeeklog): fields joined by a tab, a null is ``-``; text escaped byte by
  byte as ``\\xHH`` for backslash, ``#``, ``"``, U+0000-U+001F and U+007F (and ``,`` inside a
  list element); then a value that is ``-`` or ``(empty)`` becomes ``\\x2d`` / ``\\x28empty)``
  and an empty one ``(empty)``; booleans ``T`` / ``F``; lists as their elements joined by
  ``,`` (a null element ``-``), an empty list ``(empty)``.
* In every format integers are decimal, booleans ``true`` / ``false`` (Zeek: ``T`` / ``F``),
  timestamps and durations in ns exact decimal seconds with 9 decimals (``[-]S.FFFFFFFFF``),
  floats as pyarrow's cast to string writes them (the shortest text that reads back as the
  same float; plain from 1e-6 up to below 1e10, else ``1.5e-7`` / ``1.2e+10``; ``nan``,
  ``inf``, ``-inf``, ``-0``).

The escaping rules are tables of one engine (``_escape``); a byte of a JSON or Zeek value that
is not valid UTF-8 passes as it is (those rules are byte rules).
"""
from libc.math cimport frexp, signbit
from libc.stdint cimport (int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t,
                          uint64_t, uintptr_t)
from libc.stdio cimport snprintf
from libc.stdlib cimport free, strtod, strtof
from libc.string cimport memcmp, memcpy

cimport cython

from util cimport wt_alloc

__all__ = ["format_lines", "format_jsonl", "format_zeek", "text_array", "seconds_text",
           "supported", "copy_spans"]

cdef enum Kind:
    K_STR = 1       # utf8, int32 offsets
    K_LSTR = 2      # large utf8, int64 offsets
    K_BOOL = 3
    K_U8 = 4
    K_U16 = 5
    K_U32 = 6
    K_U64 = 7
    K_I8 = 8
    K_I16 = 9
    K_I32 = 10
    K_I64 = 11
    K_SEC = 12      # duration in ns: decimal seconds, 9 decimals
    K_TS = 13       # timestamp in ns: decimal seconds (JSON: ISO 8601 text)
    K_F64 = 14
    K_F32 = 15
    K_NULL = 16     # the null type: every value null
    K_LIST = 17     # list, int32 offsets, one scalar child
    K_LLIST = 18    # large list, int64 offsets

cdef enum Style:
    S_LINES = 0
    S_JSON = 1
    S_ZEEK = 2
    S_RAW = 3       # text as it is, lists joined by "," (text_array(arr, "raw"))

_STYLES = {"lines": S_LINES, "jsonl": S_JSON, "zeek": S_ZEEK}

cdef struct Col:
    int kind
    int64_t offset          # the array's slice offset (in elements / bits)
    const uint8_t *valid    # NULL: no nulls
    const uint8_t *values   # numbers, bits, string or list offsets
    const uint8_t *data     # string bytes
    Col *child              # a list's elements
    const char *pre         # JSON: '{"key":' / ',"key":' written before the value
    int64_t npre


# The escaping rules: per byte a class; E_TWO writes '\' and ESC2[byte]; E_HEX \xHH; E_C2 a
# 0xC2 lead (U+0080-009F follow as \xHH); E_E2 a 0xE2 lead (U+2028/9 as \u2028/9); E_U00 \u00HH.
cdef enum Esc:
    E_COPY = 0
    E_TWO = 1
    E_HEX = 2
    E_C2 = 3
    E_E2 = 4
    E_U00 = 5

cdef struct Rules:
    uint8_t cls[256]
    char esc2[256]

cdef Rules R_LINE, R_JSON, R_ZEEK, R_ZEEK_ELEM


cdef void _rules_init():
    global R_ZEEK_ELEM
    cdef int i
    for i in range(256):
        R_LINE.cls[i] = R_JSON.cls[i] = R_ZEEK.cls[i] = E_COPY
        R_LINE.esc2[i] = R_JSON.esc2[i] = R_ZEEK.esc2[i] = 0
    # line format (webtap.writers)
    for i in range(0x20):
        R_LINE.cls[i] = E_HEX
    R_LINE.cls[0x7F] = E_HEX
    R_LINE.cls[ord("|")] = E_HEX
    R_LINE.cls[ord("\\")] = E_TWO
    R_LINE.esc2[ord("\\")] = ord("\\")
    R_LINE.cls[ord("\r")] = E_TWO
    R_LINE.esc2[ord("\r")] = ord("r")
    R_LINE.cls[ord("\n")] = E_TWO
    R_LINE.esc2[ord("\n")] = ord("n")
    R_LINE.cls[0xC2] = E_C2
    R_LINE.cls[0xE2] = E_E2
    # JSON strings (webtap.jsonl; RFC 8259 section 7)
    for i in range(0x20):
        R_JSON.cls[i] = E_U00
    R_JSON.cls[ord("\\")] = E_TWO
    R_JSON.esc2[ord("\\")] = ord("\\")
    R_JSON.cls[ord('"')] = E_TWO
    R_JSON.esc2[ord('"')] = ord('"')
    # Zeek text (webtap.zeeklog): controls, DEL, backslash; '#' and '"' for zat's CSV reader
    for i in range(0x20):
        R_ZEEK.cls[i] = E_HEX
    R_ZEEK.cls[0x7F] = E_HEX
    R_ZEEK.cls[ord("\\")] = E_HEX
    R_ZEEK.cls[ord("#")] = E_HEX
    R_ZEEK.cls[ord('"')] = E_HEX
    R_ZEEK_ELEM = R_ZEEK
    R_ZEEK_ELEM.cls[ord(",")] = E_HEX          # the set separator inside a list element


_rules_init()

cdef const char *HEX = b"0123456789abcdef"
cdef const char *ZEEK_EMPTY = b"(empty)"

cdef int64_t _width(int kind) noexcept nogil:
    """The most bytes one value of a kind takes besides its text's escaped bytes (a null's
    null / -, Zeek's (empty) and \\x28empty), JSON's quotes and brackets)."""
    if kind == K_TS:
        return 34           # "2262-04-11T23:47:16.854775807Z" with its quotes
    if kind == K_F64 or kind == K_F32:
        return 24           # -2.2250738585072014e-308
    if kind == K_SEC or K_U8 <= kind <= K_I64:
        return 21           # -9223372036.854775808, -9223372036854775808
    return 10               # \\x28empty), "", [], true, false, null


cdef int64_t _per_byte(int style) noexcept nogil:
    """The most bytes one byte of text becomes: \\u00HH (JSON), \\xHH (lines, Zeek)."""
    return 6 if style == S_JSON else 1 if style == S_RAW else 4


cdef inline char *_hex_escape(char *o, uint8_t v) noexcept nogil:
    o[0] = 92        # '\'
    o[1] = 120       # 'x'
    o[2] = HEX[v >> 4]
    o[3] = HEX[v & 15]
    return o + 4


cdef char *_escape(char *o, const uint8_t *s, int64_t n, const Rules *R) noexcept nogil:
    """s[0:n] escaped by the rules R to o (at most 6 bytes per input byte); returns the end."""
    cdef int64_t i = 0, run = 0
    cdef uint8_t c, k
    while i < n:
        c = s[i]
        k = R.cls[c]
        if k == E_COPY:
            i += 1
            continue
        if k == E_C2:
            if i + 1 < n and 0x80 <= s[i + 1] <= 0x9F:
                memcpy(o, s + run, i - run)
                o = _hex_escape(o + (i - run), s[i + 1])
                i += 2
                run = i
            else:
                i += 1
            continue
        if k == E_E2:
            if i + 2 < n and s[i + 1] == 0x80 and (s[i + 2] == 0xA8 or s[i + 2] == 0xA9):
                memcpy(o, s + run, i - run)
                o += i - run
                o[0] = 92
                o[1] = 117      # 'u'
                o[2] = 50       # '2'
                o[3] = 48       # '0'
                o[4] = 50       # '2'
                o[5] = 56 if s[i + 2] == 0xA8 else 57
                o += 6
                i += 3
                run = i
            else:
                i += 1
            continue
        memcpy(o, s + run, i - run)
        o += i - run
        if k == E_TWO:
            o[0] = 92
            o[1] = R.esc2[c]
            o += 2
        elif k == E_HEX:
            o = _hex_escape(o, c)
        else:                   # E_U00
            o[0] = 92
            o[1] = 117          # 'u'
            o[2] = 48
            o[3] = 48
            o[4] = HEX[c >> 4]
            o[5] = HEX[c & 15]
            o += 6
        i += 1
        run = i
    memcpy(o, s + run, n - run)
    return o + (n - run)


cdef inline char *_udec(char *o, uint64_t v) noexcept nogil:
    cdef char tmp[24]
    cdef int k = 0
    while True:
        tmp[k] = 48 + <char>(v % 10)
        k += 1
        v //= 10
        if v == 0:
            break
    while k > 0:
        k -= 1
        o[0] = tmp[k]
        o += 1
    return o


cdef inline char *_sdec(char *o, int64_t v) noexcept nogil:
    if v < 0:
        o[0] = 45        # '-'
        return _udec(o + 1, <uint64_t>0 - <uint64_t>v)
    return _udec(o, <uint64_t>v)


cdef inline char *_pad(char *o, uint64_t v, int width) noexcept nogil:
    """v in exactly `width` decimal digits (leading zeros)."""
    cdef int k
    for k in range(width - 1, -1, -1):
        o[k] = 48 + <char>(v % 10)
        v //= 10
    return o + width


cdef inline bint _bit(const uint8_t *bits, int64_t i) noexcept nogil:
    return (bits[i >> 3] >> (i & 7)) & 1


cdef inline char *_seconds(char *o, int64_t v, int decimals) noexcept nogil:
    """[-]S.F with `decimals` digits (cut, not rounded) of an int64 ns value."""
    cdef uint64_t mag, frac
    cdef char digits[9]
    cdef int k
    if v < 0:
        o[0] = 45        # '-'
        o += 1
        mag = <uint64_t>0 - <uint64_t>v
    else:
        mag = <uint64_t>v
    frac = mag % 1000000000
    o = _udec(o, mag // 1000000000)
    o[0] = 46            # '.'
    o += 1
    for k in range(8, -1, -1):
        digits[k] = 48 + <char>(frac % 10)
        frac //= 10
    memcpy(o, digits, decimals)
    return o + decimals


@cython.cdivision(True)
cdef char *_iso(char *o, int64_t v) noexcept nogil:
    """YYYY-MM-DDTHH:MM:SS.FFFFFFFFFZ of ns since the epoch (UTC; the proleptic Gregorian
    calendar, days from civil as H. Hinnant's algorithm; what pyarrow's strftime writes)."""
    cdef int64_t secs = v / 1000000000, frac = v % 1000000000
    cdef int64_t days, sod, z, era, doe, yoe, y, doy, mp, d, m
    if frac < 0:
        frac += 1000000000
        secs -= 1
    days = secs / 86400
    sod = secs % 86400
    if sod < 0:
        sod += 86400
        days -= 1
    z = days + 719468
    era = (z if z >= 0 else z - 146096) / 146097
    doe = z - era * 146097
    yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
    mp = (5 * doy + 2) / 153
    d = doy - (153 * mp + 2) / 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    if m <= 2:
        y += 1
    o = _pad(o, <uint64_t>y, 4)          # int64 ns reach the years 1677-2262
    o[0] = 45
    o = _pad(o + 1, <uint64_t>m, 2)
    o[0] = 45
    o = _pad(o + 1, <uint64_t>d, 2)
    o[0] = 84            # 'T'
    o = _pad(o + 1, <uint64_t>(sod // 3600), 2)
    o[0] = 58            # ':'
    o = _pad(o + 1, <uint64_t>(sod // 60 % 60), 2)
    o[0] = 58
    o = _pad(o + 1, <uint64_t>(sod % 60), 2)
    o[0] = 46            # '.'
    o = _pad(o + 1, <uint64_t>frac, 9)
    o[0] = 90            # 'Z'
    return o + 1


cdef int _digits(const char *buf, char *dig, int *exp10) noexcept nogil:
    """The digits and decimal exponent of printf's %e text (any decimal point character)."""
    cdef int n = 0, i = 0, sign = 1, e = 0
    while buf[i] != 0 and buf[i] != 101:          # 'e'
        if 48 <= buf[i] <= 57:
            dig[n] = buf[i]
            n += 1
        i += 1
    i += 1
    if buf[i] == 45:
        sign = -1
        i += 1
    elif buf[i] == 43:
        i += 1
    while 48 <= buf[i] <= 57:
        e = e * 10 + (buf[i] - 48)
        i += 1
    exp10[0] = sign * e
    return n


cdef inline bint _reads_back(const char *buf, double v, bint single) noexcept nogil:
    if single:
        return strtof(buf, NULL) == <float>v
    return strtod(buf, NULL) == v


cdef int _shortest(double v, bint single, char *dig, int *exp10) noexcept nogil:
    """The shortest digits that read back as v (v > 0, finite), the nearest such when several
    (double-conversion's ToShortest / ToShortestSingle, which pyarrow's cast uses)."""
    cdef char buf[48]
    cdef char up[48]
    cdef int lo = 1, hi = 9 if single else 17, p, mid, n, k, e, m
    cdef int ex
    cdef char point
    cdef bint pow2 = frexp(v, &ex) == 0.5
    cdef int64_t ns
    cdef char tmp[24]
    if not single and 1e-9 <= v < 1e6:
        # most floats of the records are whole nanoseconds in seconds (handshake_time): when
        # v = N / 1e9 for an integer N of at most 15 digits, N's digits are the shortest text
        # (two different texts of <= 15 significant digits never read as one double)
        ns = <int64_t>(v * 1e9 + 0.5)
        if <double>ns / 1e9 == v:
            n = <int>(_udec(tmp, <uint64_t>ns) - tmp)
            memcpy(dig, tmp, n)
            exp10[0] = n - 10
            while n > 1 and dig[n - 1] == 48:
                n -= 1
            return n
    if not pow2:
        # nearest p-digit text reads back for every p from the shortest on: bisect
        while lo < hi:
            mid = (lo + hi) // 2
            snprintf(buf, 48, "%.*e", mid - 1, v)
            if _reads_back(buf, v, single):
                hi = mid
            else:
                lo = mid + 1
        snprintf(buf, 48, "%.*e", lo - 1, v)
        return _digits(buf, dig, exp10)
    # a power of two: the float below is nearer than the one above, so the p-digit text above
    # v may read back where the nearest one (below) does not: try both, p by p
    for p in range(1, hi + 1):
        snprintf(buf, 48, "%.*e", p - 1, v)
        if _reads_back(buf, v, single):
            return _digits(buf, dig, exp10)
        if strtod(buf, NULL) < v:
            n = _digits(buf, dig, &e)
            k = n - 1
            while k >= 0 and dig[k] == 57:
                dig[k] = 48
                k -= 1
            if k < 0:
                dig[0] = 49
                e += 1
            else:
                dig[k] += 1
            point = buf[1] if p > 1 else 46
            m = 0
            up[m] = dig[0]
            m += 1
            if n > 1:
                up[m] = point
                m += 1
                memcpy(up + m, dig + 1, n - 1)
                m += n - 1
            snprintf(up + m, 48 - m, "e%d", e)
            if _reads_back(up, v, single):
                exp10[0] = e
                return n
    snprintf(buf, 48, "%.*e", hi - 1, v)
    return _digits(buf, dig, exp10)


cdef char *_float(char *o, double v, bint single) noexcept nogil:
    """v as pyarrow's cast to string writes it (module docstring)."""
    cdef char dig[24]
    cdef int n, e, dp, k
    if v != v:
        memcpy(o, b"nan", 3)
        return o + 3
    if signbit(v):
        o[0] = 45
        o += 1
        v = -v
    if v == 0:
        o[0] = 48
        return o + 1
    if v > 1.7976931348623157e308:
        memcpy(o, b"inf", 3)
        return o + 3
    n = _shortest(v, single, dig, &e)
    while n > 1 and dig[n - 1] == 48:
        n -= 1
    if -6 <= e < 10:
        dp = e + 1                       # digits before the point
        if dp <= 0:
            o[0] = 48
            o[1] = 46
            o += 2
            for k in range(-dp):
                o[0] = 48
                o += 1
            memcpy(o, dig, n)
            return o + n
        if dp >= n:
            memcpy(o, dig, n)
            o += n
            for k in range(dp - n):
                o[0] = 48
                o += 1
            return o
        memcpy(o, dig, dp)
        o[dp] = 46
        memcpy(o + dp + 1, dig + dp, n - dp)
        return o + n + 1
    o[0] = dig[0]
    o += 1
    if n > 1:
        o[0] = 46
        memcpy(o + 1, dig + 1, n - 1)
        o += n
    o[0] = 101           # 'e'
    o[1] = 43 if e >= 0 else 45
    return _udec(o + 2, <uint64_t>(e if e >= 0 else -e))


cdef inline void _span(const Col *c, int64_t i, const uint8_t **s, int64_t *n) noexcept nogil:
    cdef int64_t a, b
    if c.kind == K_STR:
        a = (<const int32_t *>c.values)[i]
        b = (<const int32_t *>c.values)[i + 1]
    else:
        a = (<const int64_t *>c.values)[i]
        b = (<const int64_t *>c.values)[i + 1]
    s[0] = c.data + a
    n[0] = b - a


cdef char *_text(char *o, const uint8_t *s, int64_t n, int style, bint elem) noexcept nogil:
    if style == S_LINES:
        return _escape(o, s, n, &R_LINE)
    if style == S_JSON:
        o[0] = 34        # '"'
        o = _escape(o + 1, s, n, &R_JSON)
        o[0] = 34
        return o + 1
    if style == S_ZEEK:
        if n == 0:
            memcpy(o, ZEEK_EMPTY, 7)
            return o + 7
        if n == 1 and s[0] == 45:
            memcpy(o, b"\\x2d", 4)
            return o + 4
        if n == 7 and memcmp(s, ZEEK_EMPTY, 7) == 0:
            memcpy(o, b"\\x28empty)", 10)
            return o + 10
        return _escape(o, s, n, &R_ZEEK_ELEM if elem else &R_ZEEK)
    memcpy(o, s, n)
    return o + n


cdef char *_value(char *o, const Col *c, int64_t i, int style, bint elem) noexcept nogil:
    """The value at absolute index i (slice offset included) of column c in `style`."""
    cdef const uint8_t *s
    cdef int64_t n, a, b, j
    cdef int k = c.kind
    if k == K_NULL or (c.valid != NULL and not _bit(c.valid, i)):
        if style == S_JSON:
            memcpy(o, b"null", 4)
            return o + 4
        if style == S_ZEEK:
            o[0] = 45    # '-'
            return o + 1
        return o
    if k == K_STR or k == K_LSTR:
        _span(c, i, &s, &n)
        return _text(o, s, n, style, elem)
    if k == K_BOOL:
        if style == S_ZEEK:
            o[0] = 84 if _bit(c.values, i) else 70       # T / F
            return o + 1
        if _bit(c.values, i):
            memcpy(o, b"true", 4)
            return o + 4
        memcpy(o, b"false", 5)
        return o + 5
    if k == K_U8:
        return _udec(o, (<const uint8_t *>c.values)[i])
    if k == K_U16:
        return _udec(o, (<const uint16_t *>c.values)[i])
    if k == K_U32:
        return _udec(o, (<const uint32_t *>c.values)[i])
    if k == K_U64:
        return _udec(o, (<const uint64_t *>c.values)[i])
    if k == K_I8:
        return _sdec(o, (<const int8_t *>c.values)[i])
    if k == K_I16:
        return _sdec(o, (<const int16_t *>c.values)[i])
    if k == K_I32:
        return _sdec(o, (<const int32_t *>c.values)[i])
    if k == K_I64:
        return _sdec(o, (<const int64_t *>c.values)[i])
    if k == K_SEC:
        return _seconds(o, (<const int64_t *>c.values)[i], 9)
    if k == K_TS:
        if style == S_JSON:
            o[0] = 34
            o = _iso(o + 1, (<const int64_t *>c.values)[i])
            o[0] = 34
            return o + 1
        return _seconds(o, (<const int64_t *>c.values)[i], 9)
    if k == K_F64:
        return _float(o, (<const double *>c.values)[i], 0)
    if k == K_F32:
        return _float(o, (<const float *>c.values)[i], 1)
    # a list: JSON [e,...]; Zeek e,... or (empty); raw e,...
    if k == K_LIST:
        a = (<const int32_t *>c.values)[i]
        b = (<const int32_t *>c.values)[i + 1]
    else:
        a = (<const int64_t *>c.values)[i]
        b = (<const int64_t *>c.values)[i + 1]
    if style == S_JSON:
        o[0] = 91        # '['
        o += 1
    elif a == b:
        if style == S_ZEEK:
            memcpy(o, ZEEK_EMPTY, 7)
            return o + 7
        return o
    for j in range(a, b):
        if j > a:
            o[0] = 44    # ','
            o += 1
        o = _value(o, c.child, j + c.child.offset, style, 1)
    if style == S_JSON:
        o[0] = 93        # ']'
        o += 1
    return o


cdef const uint8_t *_addr(buf):
    return NULL if buf is None else <const uint8_t *><uintptr_t>buf.address


cdef int _kind(t, int style):
    """The Kind of an Arrow type in `style`, 0 when this module does not write it."""
    import pyarrow as pa

    if t == pa.string():
        return K_STR
    if t == pa.large_string():
        return K_LSTR
    if pa.types.is_timestamp(t) and t.unit == "ns":
        return K_TS
    if pa.types.is_duration(t) and t.unit == "ns":
        return K_SEC
    if (pa.types.is_list(t) or pa.types.is_large_list(t)) and style != S_LINES:
        if _kind(t.value_type, S_LINES) == 0:          # one level, scalar elements
            return 0
        return K_LIST if pa.types.is_list(t) else K_LLIST
    return {pa.bool_(): K_BOOL, pa.uint8(): K_U8, pa.uint16(): K_U16, pa.uint32(): K_U32,
            pa.uint64(): K_U64, pa.int8(): K_I8, pa.int16(): K_I16, pa.int32(): K_I32,
            pa.int64(): K_I64, pa.float64(): K_F64, pa.float32(): K_F32,
            pa.null(): K_NULL}.get(t, 0)


def supported(t, style="lines") -> bool:
    """Whether this module writes a column of Arrow type `t` in `style` ("lines", "jsonl",
    "zeek"): strings, integers, floats (32, 64 bits), booleans, timestamps and durations in ns,
    the null type; in "jsonl" and "zeek" also lists of those."""
    return _kind(t, _STYLES[style]) != 0


cdef int64_t _str_bytes(const Col *c, int64_t lo, int64_t hi):
    """Bytes of the values lo..hi-1 (absolute indexes) of a string column."""
    if c.kind == K_STR:
        return (<const int32_t *>c.values)[hi] - (<const int32_t *>c.values)[lo]
    return (<const int64_t *>c.values)[hi] - (<const int64_t *>c.values)[lo]


def _whole(a):
    """One Array of an Array or ChunkedArray (a ChunkedArray without chunks: an empty Array;
    its combine_chunks would build one with pa.array, which imports pandas)."""
    if not hasattr(a, "combine_chunks"):
        return a
    if a.num_chunks == 1:
        return a.chunk(0)
    if a.num_chunks == 0:
        import pyarrow as pa

        return pa.nulls(0, a.type)
    return a.combine_chunks()


cdef int64_t _setup(Col *c, Col *child, a, int style, list keep) except -1:
    """Fill c from Arrow array a (child: the Col for a list's elements); returns an upper bound
    of the bytes its n values take."""
    cdef int64_t n, ea, eb, bound
    a = _whole(a)
    keep.append(a)
    k = _kind(a.type, style)
    if k == 0:
        raise TypeError(f"textout: no text rule for {a.type}")
    n = len(a)
    c.kind = k
    c.offset = a.offset
    c.valid = NULL
    c.values = NULL
    c.data = NULL
    c.child = NULL
    c.pre = NULL
    c.npre = 0
    if k == K_NULL or n == 0:                  # nothing to read (an empty array may have no buffers)
        return n * _width(k)
    bufs = a.buffers()
    c.valid = _addr(bufs[0]) if a.null_count else NULL
    c.values = _addr(bufs[1])
    if k == K_STR or k == K_LSTR:
        c.data = _addr(bufs[2])
        return n * _width(k) + _per_byte(style) * _str_bytes(c, a.offset, a.offset + n)
    if k == K_LIST or k == K_LLIST:
        if k == K_LIST:
            ea = (<const int32_t *>c.values)[a.offset]
            eb = (<const int32_t *>c.values)[a.offset + n]
        else:
            ea = (<const int64_t *>c.values)[a.offset]
            eb = (<const int64_t *>c.values)[a.offset + n]
        c.child = child
        _setup(child, NULL, a.values, style, keep)
        bound = n * _width(k) + (eb - ea) * (_width(child.kind) + 1)     # + the ','s
        if (child.kind == K_STR or child.kind == K_LSTR) and eb > ea:
            bound += _per_byte(style) * _str_bytes(child, ea + child.offset, eb + child.offset)
        return bound
    return n * _width(k)


def _grow(out, int64_t bound):
    """The output buffer: a new bytearray, or `out` grown to at least `bound` bytes."""
    if out is None:
        return bytearray(bound)
    if len(out) < bound:
        out.extend(bytes(bound - len(out)))
    return out


cdef _format(arrays, int style, prefixes, bytearray out):
    cdef int ncol = len(arrays)
    cdef int64_t n = len(arrays[0]) if ncol else 0
    cdef int64_t bound = 0, r, j
    cdef Col *cols
    cdef char *o
    cdef char *start
    cdef char sep = 9 if style == S_ZEEK else 124       # tab / '|'
    if n == 0:
        return b"" if out is None else 0
    keep = []                       # the arrays (and so their buffers) stay alive meanwhile
    cols = <Col *>wt_alloc(2 * ncol * sizeof(Col))      # a column, then its list elements
    try:
        for j in range(ncol):
            if len(arrays[j]) != n:
                raise ValueError("textout: arrays of different lengths")
            bound += _setup(&cols[j], &cols[ncol + j], arrays[j], style, keep)
            if prefixes is not None:
                p = prefixes[j]
                keep.append(p)
                cols[j].pre = <const char *>p
                cols[j].npre = len(p)
                bound += n * cols[j].npre
        bound += (ncol + 2) * n                 # separators, '}' and newlines
        buf = _grow(out, bound)
        start = <char *>buf
        o = start
        with nogil:
            for r in range(n):
                for j in range(ncol):
                    if style == S_JSON:
                        memcpy(o, cols[j].pre, cols[j].npre)
                        o += cols[j].npre
                    elif j:
                        o[0] = sep
                        o += 1
                    o = _value(o, &cols[j], r + cols[j].offset, style, 0)
                if style == S_JSON:
                    o[0] = 125          # '}'
                    o += 1
                o[0] = 10               # '\n'
                o += 1
    finally:
        free(cols)
    if out is None:
        return bytes(memoryview(buf)[:o - start])
    return o - start


def format_lines(arrays, bytearray out=None):
    """The line format of equal-length Arrow arrays (one per field, in order), one line per
    row: as bytes, or, given `out`, written into that bytearray from its start (grown when too
    small, never shrunk) and the number of bytes written returned. A writer that reuses one
    buffer for every batch touches no fresh memory after the first (page faults of a new
    buffer per batch cost more than the formatting). Raises TypeError for a type that
    `supported` refuses (the caller converts such a column to text first)."""
    return _format(arrays, S_LINES, None, out)


def format_jsonl(arrays, keys, bytearray out=None):
    """JSON lines of equal-length Arrow arrays: one object per row, ``keys[j]`` (the JSON text
    of column j's name, bytes, as the caller spells it) naming arrays[j]; bytes, or written into
    `out` as format_lines does. Raises TypeError for a type `supported(t, "jsonl")` refuses."""
    if len(keys) != len(arrays):
        raise ValueError("format_jsonl: one key per array")
    prefixes = [(b"{" if j == 0 else b",") + bytes(k) + b":" for j, k in enumerate(keys)]
    return _format(arrays, S_JSON, prefixes, out)


def format_zeek(arrays, bytearray out=None):
    """Zeek log rows of equal-length Arrow arrays (tab-separated, unset ``-``); bytes, or
    written into `out` as format_lines does. Raises TypeError for a type `supported(t, "zeek")`
    refuses."""
    return _format(arrays, S_ZEEK, None, out)


def text_array(arr, style):
    """Each value of an Arrow array as its text in `style` ("lines", "jsonl", "zeek" as the
    rows write it; "raw": strings as they are, a list as its elements joined by ``,``, the
    other scalars as in "lines"): a pyarrow string array built from its buffers, null where the
    value is null, and in "raw" where a list holds a null (as pyarrow's binary_join)."""
    import pyarrow as pa

    cdef Col c, ch
    cdef int st = S_RAW if style == "raw" else _STYLES[style]
    cdef int64_t n, i, j, a, b, off, bound
    cdef int32_t *offs
    cdef uint8_t *vbits
    cdef char *o
    cdef char *start
    cdef int64_t nulls = 0
    cdef bint ok
    keep = []
    bound = _setup(&c, &ch, arr, st, keep)
    arr = keep[0]
    n = len(arr)
    off = arr.offset
    offsets = bytearray((n + 1) * 4)
    data = bytearray(bound + 1)
    vbytes = bytearray((n + 7) // 8)            # re-based to this array's start
    offs = <int32_t *><char *>offsets
    vbits = <uint8_t *><char *>vbytes
    start = <char *>data
    o = start
    with nogil:
        offs[0] = 0
        for i in range(n):
            ok = c.kind != K_NULL and (c.valid == NULL or _bit(c.valid, i + off))
            if ok and st == S_RAW and c.child != NULL and ch.valid != NULL:
                if c.kind == K_LIST:
                    a = (<const int32_t *>c.values)[i + off]
                    b = (<const int32_t *>c.values)[i + off + 1]
                else:
                    a = (<const int64_t *>c.values)[i + off]
                    b = (<const int64_t *>c.values)[i + off + 1]
                for j in range(a, b):
                    if not _bit(ch.valid, j + ch.offset):
                        ok = False
                        break
            if ok:
                o = _value(o, &c, i + off, st, 0)
                vbits[i >> 3] |= <uint8_t>(1 << (i & 7))
            else:
                nulls += 1
            offs[i + 1] = <int32_t>(o - start)
    del data[o - start:]
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data),
                                       pa.py_buffer(vbytes) if nulls else None, nulls)


def seconds_text(arr, int decimals=9, fallback=None):
    """Exact decimal seconds of an int64-backed Arrow array (timestamp or duration in ns, or
    int64 ns): ``[-]S.FFFFFFFFF``, `decimals` (1-9) digits after the point, cut, not rounded;
    nulls stay null, or, given `fallback` (an array of the same kind and length), take its value
    there (the first valid of the two, as a coalesce). Returns a pyarrow string array (built
    from its buffers)."""
    import pyarrow as pa

    cdef int64_t n, i, off, foff = 0, nulls
    cdef const int64_t *vals
    cdef const int64_t *fvals = NULL
    cdef const uint8_t *valid
    cdef const uint8_t *fvalid = NULL
    cdef bint has_fb = fallback is not None
    cdef int32_t *offs
    cdef uint8_t *vbits = NULL
    cdef char *o
    cdef char *start
    if not 1 <= decimals <= 9:
        raise ValueError("decimals must be 1..9")
    arr = _time_array(arr)
    n = len(arr)
    off = arr.offset
    bufs = arr.buffers()
    valid = _addr(bufs[0]) if arr.null_count else NULL
    vals = <const int64_t *>_addr(bufs[1])
    nulls = arr.null_count
    if has_fb:
        fallback = _time_array(fallback)
        if len(fallback) != n:
            raise ValueError("seconds_text: fallback of another length")
        if valid != NULL:
            foff = fallback.offset
            fbufs = fallback.buffers()
            fvalid = _addr(fbufs[0]) if fallback.null_count else NULL
            fvals = <const int64_t *>_addr(fbufs[1])
    offsets = bytearray((n + 1) * 4)
    data = bytearray(n * (21 + decimals) + 1)
    offs = <int32_t *><char *>offsets
    vbuf = None
    if valid != NULL:
        vbytes = bytearray((n + 7) // 8)       # re-based to this array's start
        vbits = <uint8_t *><char *>vbytes
        vbuf = pa.py_buffer(vbytes)
    start = <char *>data
    o = start
    with nogil:
        offs[0] = 0
        for i in range(n):
            if valid == NULL or _bit(valid, i + off):
                o = _seconds(o, vals[i + off], decimals)
                if vbits != NULL:
                    vbits[i >> 3] |= <uint8_t>(1 << (i & 7))
            elif fvals != NULL and (fvalid == NULL or _bit(fvalid, i + foff)):
                o = _seconds(o, fvals[i + foff], decimals)
                vbits[i >> 3] |= <uint8_t>(1 << (i & 7))
                nulls -= 1
            offs[i + 1] = <int32_t>(o - start)
    del data[o - start:]
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data),
                                       vbuf if nulls else None, nulls)


def _time_array(arr):
    import pyarrow as pa

    arr = _whole(arr)
    if arr.type.bit_width != 64 or not (pa.types.is_timestamp(arr.type) or
                                        pa.types.is_duration(arr.type) or arr.type == pa.int64()):
        raise TypeError(f"seconds_text: not an int64-backed time: {arr.type}")
    return arr


@cython.boundscheck(False)
@cython.wraparound(False)
def copy_spans(const uint8_t[::1] data, const int64_t[::1] start, const int64_t[::1] offs,
               uint8_t[::1] out):
    """out[offs[k]:offs[k + 1]] = data[start[k]:start[k] + offs[k + 1] - offs[k]] for every row
    k: the bytes of a gather of strings (webtap.records.columns.gather_bytes), one memcpy per
    row instead of an index per byte. Every span is checked against both buffers (IndexError)."""
    cdef Py_ssize_t n = start.shape[0], k
    cdef int64_t a, b, l, nd = data.shape[0], no = out.shape[0]
    cdef bint bad = False
    if offs.shape[0] != n + 1:
        raise ValueError("offs must have one more item than start")
    with nogil:
        for k in range(n):
            a = start[k]
            b = offs[k]
            l = offs[k + 1] - b
            if l < 0 or a < 0 or b < 0 or a + l > nd or b + l > no:
                bad = True
                break
            if l:
                memcpy(&out[b], &data[a], <size_t>l)
    if bad:
        raise IndexError(f"span {k} outside its buffer")
