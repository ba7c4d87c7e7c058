# cython: freethreading_compatible = False
"""Text of record columns, written by C over the Arrow buffers (issue 21): the line format of
webtap.writers and exact decimal seconds from nanosecond times.

Why C and not pyarrow.compute: pyarrow 26's compute wrappers import pandas on their first call
(~0.2 s and ~40 MB on every text run that needs none of it), and formatting with compute kernels
makes one intermediate array per step (cast, pad, join, replace) -- ~11,000 instructions per
record, against a few hundred here. This module reads the arrays' buffers in place (validity
bitmap, offsets, values; the array's slice offset honoured), loops without the GIL, and returns
bytes (lines) or an Arrow string array built with ``from_buffers`` (seconds), so a text run
imports pyarrow's core only.

Line format (webtap.writers documents it): fields joined by ``|``, one line per row ending in
``\\n``, a null is an empty field; text is escaped so that every line keeps its field count:
backslash -> ``\\\\``, ``|`` -> ``\\x7c``, CR -> ``\\r``, LF -> ``\\n``, other U+0000-U+001F and
U+007F-U+009F -> ``\\xHH`` (lower-case hex), U+2028 / U+2029 -> ``\\u2028`` / ``\\u2029``.
Integers are decimal, booleans ``true`` / ``false`` (as pyarrow's cast to string writes them),
timestamps and durations in ns exact decimal seconds with 9 decimals (``[-]S.FFFFFFFFF``, as
every tool's text view shows its times).
String values are valid UTF-8 (the pairing table decodes what it keeps), so a 0xC2 or 0xE2
byte is always the lead byte of its sequence.
"""
from libc.stdint cimport (int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t,
                          uint64_t, uintptr_t)
from libc.stdlib cimport free

from util cimport wt_alloc
from libc.string cimport memcpy

__all__ = ["format_lines", "seconds_text", "supported"]

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
    K_SEC = 12      # timestamp / duration in ns: decimal seconds, 9 decimals

ctypedef struct Col:
    int kind
    int64_t offset          # the array's slice offset (in elements / bits)
    const uint8_t *valid    # NULL: no nulls
    const uint8_t *values   # numbers, bits, or string offsets
    const uint8_t *data     # string bytes


# per byte: 0 copy; 1 two-byte escape code in ESC2; 2 \xHH; 3 0xC2 lead (maybe U+0080-009F);
# 4 0xE2 lead (maybe U+2028/2029)
cdef uint8_t CLS[256]
cdef char ESC2[256]
cdef int _i
for _i in range(256):
    CLS[_i] = 0
    ESC2[_i] = 0
for _i in range(0x20):
    CLS[_i] = 2
CLS[0x7F] = 2
CLS[ord("|")] = 2
CLS[ord("\\")] = 1
ESC2[ord("\\")] = ord("\\")
CLS[ord("\r")] = 1
ESC2[ord("\r")] = ord("r")
CLS[ord("\n")] = 1
ESC2[ord("\n")] = ord("n")
CLS[0xC2] = 3
CLS[0xE2] = 4

cdef const char *HEX = b"0123456789abcdef"


cdef inline char *_hex_escape(char *o, uint8_t v) noexcept nogil:
    o[0] = 92        # '\'
    o[1] = 120       # 'x'
    o[2] = HEX[v >> 4]
    o[3] = HEX[v & 15]
    return o + 4


cdef char *_escape(char *o, const uint8_t *s, int64_t n) noexcept nogil:
    """s[0:n] escaped to o (at most 4 bytes per input byte); returns the end."""
    cdef int64_t i = 0, run = 0
    cdef uint8_t c, k
    while i < n:
        c = s[i]
        k = CLS[c]
        if k == 0:
            i += 1
            continue
        if k == 3:
            if i + 1 < n and 0x80 <= s[i + 1] <= 0x9F:
                memcpy(o, s + run, i - run)
                o = _hex_escape(o + (i - run), s[i + 1])
                i += 2
                run = i
            else:
                i += 1
            continue
        if k == 4:
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
        if k == 1:
            o[0] = 92
            o[1] = ESC2[c]
            o += 2
        else:
            o = _hex_escape(o, c)
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


cdef char *_field(char *o, const Col *c, int64_t r) noexcept nogil:
    cdef int64_t i = r + c.offset
    cdef int64_t a, b
    if c.valid != NULL and not _bit(c.valid, i):
        return o
    if c.kind == K_STR:
        a = (<const int32_t *>c.values)[i]
        b = (<const int32_t *>c.values)[i + 1]
        return _escape(o, c.data + a, b - a)
    if c.kind == K_LSTR:
        a = (<const int64_t *>c.values)[i]
        b = (<const int64_t *>c.values)[i + 1]
        return _escape(o, c.data + a, b - a)
    if c.kind == K_BOOL:
        if _bit(c.values, i):
            memcpy(o, b"true", 4)
            return o + 4
        memcpy(o, b"false", 5)
        return o + 5
    if c.kind == K_U8:
        return _udec(o, (<const uint8_t *>c.values)[i])
    if c.kind == K_U16:
        return _udec(o, (<const uint16_t *>c.values)[i])
    if c.kind == K_U32:
        return _udec(o, (<const uint32_t *>c.values)[i])
    if c.kind == K_U64:
        return _udec(o, (<const uint64_t *>c.values)[i])
    if c.kind == K_I8:
        return _sdec(o, (<const int8_t *>c.values)[i])
    if c.kind == K_I16:
        return _sdec(o, (<const int16_t *>c.values)[i])
    if c.kind == K_I32:
        return _sdec(o, (<const int32_t *>c.values)[i])
    if c.kind == K_SEC:
        return _seconds(o, (<const int64_t *>c.values)[i], 9)
    return _sdec(o, (<const int64_t *>c.values)[i])


cdef const uint8_t *_addr(buf):
    return NULL if buf is None else <const uint8_t *><uintptr_t>buf.address


cdef int _kind(t):
    """The Kind of an Arrow type, 0 when this module does not format it."""
    import pyarrow as pa

    if t == pa.string():
        return K_STR
    if t == pa.large_string():
        return K_LSTR
    if (pa.types.is_timestamp(t) or pa.types.is_duration(t)) and t.unit == "ns":
        return K_SEC
    return {pa.bool_(): K_BOOL, pa.uint8(): K_U8, pa.uint16(): K_U16, pa.uint32(): K_U32,
            pa.uint64(): K_U64, pa.int8(): K_I8, pa.int16(): K_I16, pa.int32(): K_I32,
            pa.int64(): K_I64}.get(t, 0)


def supported(t) -> bool:
    """Whether format_lines writes a column of Arrow type `t` (strings, integers, booleans,
    timestamps and durations in ns)."""
    return _kind(t) != 0


def format_lines(arrays, bytearray out=None):
    """The line format of equal-length Arrow arrays (one per field, in order), one line per
    row: as bytes, or, given `out`, written into that bytearray from its start (grown when too
    small, never shrunk) and the number of bytes written returned. A writer that reuses one
    buffer for every batch touches no fresh memory after the first (page faults of a new
    buffer per batch cost more than the formatting). Raises TypeError for a type that
    `supported` refuses (the caller converts such a column to text first)."""
    cdef int ncol = len(arrays)
    cdef int64_t n = len(arrays[0]) if ncol else 0
    cdef int64_t bound = 0, r, j, lo, hi
    cdef Col *cols
    cdef char *o
    cdef char *start
    if n == 0:
        return b"" if out is None else 0
    keep = []                       # the arrays (and so their buffers) stay alive meanwhile
    cols = <Col *>wt_alloc(ncol * sizeof(Col))
    try:
        for j in range(ncol):
            a = arrays[j]
            if hasattr(a, "combine_chunks"):
                a = a.combine_chunks()
            keep.append(a)
            if len(a) != n:
                raise ValueError("format_lines: arrays of different lengths")
            k = _kind(a.type)
            if k == 0:
                raise TypeError(f"format_lines: no text rule for {a.type}")
            bufs = a.buffers()
            cols[j].kind = k
            cols[j].offset = a.offset
            cols[j].valid = _addr(bufs[0]) if a.null_count else NULL
            cols[j].values = _addr(bufs[1])
            cols[j].data = NULL
            if k == K_STR or k == K_LSTR:
                cols[j].data = _addr(bufs[2])
                if k == K_STR:
                    lo = (<const int32_t *>cols[j].values)[a.offset]
                    hi = (<const int32_t *>cols[j].values)[a.offset + n]
                else:
                    lo = (<const int64_t *>cols[j].values)[a.offset]
                    hi = (<const int64_t *>cols[j].values)[a.offset + n]
                bound += 4 * (hi - lo)          # an escape is at most 4 bytes per byte
            else:
                bound += 32 * n                 # -9223372036854775808, -9223372036.854775808
        bound += ncol * n                       # separators and newlines
        if out is None:
            buf = bytearray(bound)
        else:
            buf = out
            if len(buf) < bound:
                buf.extend(bytes(bound - len(buf)))
        start = <char *>buf
        o = start
        with nogil:
            for r in range(n):
                for j in range(ncol):
                    if j:
                        o[0] = 124      # '|'
                        o += 1
                    o = _field(o, &cols[j], r)
                o[0] = 10               # '\n'
                o += 1
    finally:
        free(cols)
    if out is None:
        return bytes(memoryview(buf)[:o - start])
    return o - start


def seconds_text(arr, int decimals=9):
    """Exact decimal seconds of an int64-backed Arrow array (timestamp or duration in ns, or
    int64 ns): ``[-]S.FFFFFFFFF``, `decimals` (1-9) digits after the point, cut, not rounded;
    nulls stay null. Returns a pyarrow string array (built from its buffers)."""
    import pyarrow as pa

    cdef int64_t n, i, off
    cdef const int64_t *vals
    cdef const uint8_t *valid
    cdef int32_t *offs
    cdef uint8_t *vbits = NULL
    cdef char *o
    cdef char *start
    if not 1 <= decimals <= 9:
        raise ValueError("decimals must be 1..9")
    if hasattr(arr, "combine_chunks"):
        arr = arr.combine_chunks()
    if arr.type.bit_width != 64 or not (pa.types.is_timestamp(arr.type) or
                                        pa.types.is_duration(arr.type) or arr.type == pa.int64()):
        raise TypeError(f"seconds_text: not an int64-backed time: {arr.type}")
    n = len(arr)
    off = arr.offset
    bufs = arr.buffers()
    valid = _addr(bufs[0]) if arr.null_count else NULL
    vals = <const int64_t *>_addr(bufs[1])
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
            offs[i + 1] = <int32_t>(o - start)
    del data[o - start:]
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data), vbuf,
                                       arr.null_count)
