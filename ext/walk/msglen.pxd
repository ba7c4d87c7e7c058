# What one packet says about an HTTP message's length (RFC 9112 6.3), and the byte helpers of
# the header walks: shared by the dissector (ext/walk/dissect.pyx: messages after another in a
# segment) and the continuation rule (ext/walk/httpcont.pxd: the message after a header block
# continued from an earlier segment), which the feeder's reader (ext/run/classify.pxd) runs too.
# Inline functions only (house rule for .pxd sharing).
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp

from message cimport HttpMsg, MSG_RESPONSE, MSG_REQUEST, MSGF_LINE_TOO_LONG, METHOD_CONNECT

cdef enum:
    MAX_HEADER_LINE = 8192     # header lines longer than this are flagged, not parsed (nginx's
                               # default large_client_header_buffers size)

cdef extern from "lineend.h" nogil:
    uint32_t wt_line_end(const uint8_t *p, uint32_t pos, uint32_t n)


# ---------------------------------------------------------------------------------------------
# Byte helpers
# ---------------------------------------------------------------------------------------------
cdef inline bint _is_eol(uint8_t c) noexcept nogil:
    return c == 13 or c == 10


cdef inline uint8_t _lower(uint8_t c) noexcept nogil:
    if c >= 65 and c <= 90:
        return c + 32
    return c


cdef inline bint _name_is(const uint8_t *p, uint32_t n, const char *lname, uint32_t ln) noexcept nogil:
    """Case-insensitive ASCII comparison of p[0:n] with the lower-case name lname[0:ln]."""
    cdef uint32_t i
    if n != ln:
        return False
    for i in range(n):
        if _lower(p[i]) != <uint8_t>lname[i]:
            return False
    return True


cdef inline uint32_t _line_end(const uint8_t *p, uint32_t pos, uint32_t n) noexcept nogil:
    """First CR or LF at or after pos (tshark's line terminators: CRLF, lone CR, lone LF); n if none."""
    return wt_line_end(p, pos, n)


cdef inline uint32_t _next_line(const uint8_t *p, uint32_t eol, uint32_t n) noexcept nogil:
    """Start of the line after the terminator at eol (eol < n)."""
    if p[eol] == 13 and eol + 1 < n and p[eol + 1] == 10:
        return eol + 2
    return eol + 1


cdef inline bint _is_version(const uint8_t *p, uint32_t n) noexcept nogil:
    """p[0:n] is exactly HTTP/d.d"""
    return (n == 8 and memcmp(p, b"HTTP/", 5) == 0 and p[5] >= 48 and p[5] <= 57
            and p[6] == 46 and p[7] >= 48 and p[7] <= 57)


# ---------------------------------------------------------------------------------------------
# Message length (RFC 9112 6.3) from one packet: what the header block says about the body.
# ---------------------------------------------------------------------------------------------
ctypedef struct BodyInfo:
    uint32_t hdr_end      # offset (from the message's first byte) just past the header block's
                          # empty line; 0 when the block does not end in the packet
    uint64_t cl           # Content-Length value (cl_state == CL_VALID)
    uint8_t cl_state      # CL_NONE / CL_VALID / CL_BAD (not digits, or two different values)
    uint8_t te            # TE_NONE / TE_CHUNKED (chunked is the final coding) / TE_OTHER

cdef enum:
    CL_NONE = 0
    CL_VALID = 1
    CL_BAD = 2
    TE_NONE = 0
    TE_CHUNKED = 1
    TE_OTHER = 2
    CL_HUGE = 1000000000000000   # values of more digits than this are kept as this (> any packet)

# _msg_end's outcomes
cdef enum:
    END_KNOWN = 0        # *end: the message's last byte + 1 (it may lie past the captured bytes)
    END_CONTINUES = 1    # the body runs past the segment on the wire
    END_UNKNOWN = 2      # bytes follow whose extent the packet cannot tell (counted)
    END_CLOSE = 3        # nothing HTTP can follow in the connection: a response delimited by
                         # the close, 101 Switching Protocols, CONNECT (a tunnel)


cdef inline void _cl_value(const uint8_t *v, uint32_t n, BodyInfo *b) noexcept nogil:
    """One Content-Length field value: 1*DIGIT, or a list of equal ones ("5, 5"; RFC 9110 8.6).
    A value that is not that, or that differs from an earlier one, makes the length unknown."""
    cdef uint32_t i = 0, d
    cdef uint64_t x
    while True:
        while i < n and (v[i] == 32 or v[i] == 9):
            i += 1
        x = 0
        d = 0
        while i < n and v[i] >= 48 and v[i] <= 57:
            if x < CL_HUGE:
                x = x * 10 + (v[i] - 48)
            d += 1
            i += 1
        if x > CL_HUGE:
            x = CL_HUGE
        while i < n and (v[i] == 32 or v[i] == 9):
            i += 1
        if d == 0 or (i < n and v[i] != 44):
            b.cl_state = CL_BAD
            return
        if b.cl_state == CL_VALID and b.cl != x:
            b.cl_state = CL_BAD
            return
        if b.cl_state == CL_NONE:
            b.cl_state = CL_VALID
            b.cl = x
        if i >= n:
            return
        i += 1                                    # the comma


cdef inline void _te_value(const uint8_t *v, uint32_t n, BodyInfo *b) noexcept nogil:
    """One Transfer-Encoding field value: its last coding decides (RFC 9112 6.3 item 4)."""
    cdef uint32_t e = n, k
    while e > 0 and (v[e - 1] == 32 or v[e - 1] == 9):
        e -= 1
    k = e
    while k > 0 and v[k - 1] != 44 and v[k - 1] != 32 and v[k - 1] != 9:
        k -= 1
    if e - k == 0:
        return                                   # an empty value: no coding named
    b.te = TE_CHUNKED if _name_is(v + k, e - k, b"chunked", 7) else TE_OTHER


cdef inline bint _is_hex(uint8_t c) noexcept nogil:
    return (c >= 48 and c <= 57) or (c >= 65 and c <= 70) or (c >= 97 and c <= 102)


cdef inline int _chunked_end(const uint8_t *q, uint64_t pos, uint32_t n, uint32_t wire,
                             uint64_t *end) noexcept nogil:
    """A chunked body (RFC 9112 7.1) starting at q[pos], in a message whose bytes in this
    segment are q[0:n] (wire on the wire): END_KNOWN with *end just past the last chunk's
    trailer section, END_CONTINUES when the chunks run past the segment, END_UNKNOWN when the
    bytes are not chunks or the capture cut them. Lines end at CRLF or LF (tshark's and Zeek's
    tolerance). Each round consumes at least three bytes: the work is linear in n."""
    cdef uint64_t size
    cdef uint32_t digits, e
    while True:
        if pos >= n:
            return END_CONTINUES if n == wire else END_UNKNOWN
        size = 0
        digits = 0
        while pos < n and _is_hex(q[pos]):
            if digits < 15:
                size = size * 16 + (q[pos] - 48 if q[pos] <= 57 else (q[pos] | 32) - 87)
            else:
                size = CL_HUGE
            digits += 1
            pos += 1
        if pos >= n:
            return END_CONTINUES if n == wire else END_UNKNOWN
        if digits == 0 or not (q[pos] == 59 or q[pos] == 32 or q[pos] == 9 or _is_eol(q[pos])):
            return END_UNKNOWN
        e = _line_end(q, <uint32_t>pos, n)       # chunk extensions end with the line
        if e >= n or (q[e] == 13 and e + 1 >= n):
            return END_CONTINUES if n == wire else END_UNKNOWN
        pos = _next_line(q, e, n)
        if size == 0:                             # last-chunk: the trailer section, then CRLF
            while True:
                if pos >= n:
                    return END_CONTINUES if n == wire else END_UNKNOWN
                e = _line_end(q, <uint32_t>pos, n)
                if e >= n or (q[e] == 13 and e + 1 >= n):
                    return END_CONTINUES if n == wire else END_UNKNOWN
                if e == pos:
                    end[0] = _next_line(q, e, n)
                    return END_KNOWN
                pos = _next_line(q, e, n)
        pos += size
        if pos >= n:
            return END_CONTINUES if pos >= wire or n == wire else END_UNKNOWN
        if q[pos] == 13:
            if pos + 1 >= n:
                return END_CONTINUES if n == wire else END_UNKNOWN
            if q[pos + 1] != 10:
                return END_UNKNOWN
            pos += 2
        elif q[pos] == 10:
            pos += 1
        else:
            return END_UNKNOWN


cdef inline bint _status_line_at(const uint8_t *q, uint32_t pos, uint32_t n) noexcept nogil:
    """q[pos:] starts "HTTP/" DIGIT "." DIGIT SP DIGIT DIGIT DIGIT: a status line."""
    return (n - pos >= 13 and memcmp(q + pos, b"HTTP/", 5) == 0 and q[pos + 5] >= 48
            and q[pos + 5] <= 57 and q[pos + 6] == 46 and q[pos + 7] >= 48 and q[pos + 7] <= 57
            and q[pos + 8] == 32 and q[pos + 9] >= 48 and q[pos + 9] <= 57 and q[pos + 10] >= 48
            and q[pos + 10] <= 57 and q[pos + 11] >= 48 and q[pos + 11] <= 57)


cdef inline int _msg_end(const uint8_t *q, uint32_t n, uint32_t wire, const HttpMsg *m,
                         const BodyInfo *b, uint64_t *end) noexcept nogil:
    """Where the message m, whose bytes in this segment are q[0:n] (wire on the wire) and whose
    header block ends at b.hdr_end, ends: RFC 9112 6.3 read with this packet alone.
      - a response 1xx (but 101), 204 or 304: no body; a response whose header block is
        followed at once by a status line: no body either, whatever its Content-Length says
        (the answer to a HEAD, RFC 9110 9.3.2: its request is not in this packet);
      - 101, a CONNECT request: a tunnel follows (END_CLOSE);
      - Transfer-Encoding with chunked last: the chunks; without: a response runs to the close
        (END_CLOSE), a request is invalid (END_UNKNOWN); it overrides Content-Length;
      - a valid Content-Length: that many bytes; an invalid one: END_UNKNOWN;
      - neither: a request has no body, a response runs to the close (END_CLOSE).
    A message whose header block holds a line too long to parse: END_UNKNOWN (the line may be
    the length's)."""
    cdef uint32_t h = b.hdr_end
    cdef uint64_t e
    if m.flags & MSGF_LINE_TOO_LONG:
        return END_UNKNOWN if h < wire else END_CLOSE
    if m.kind == MSG_RESPONSE:
        if (m.status >= 100 and m.status < 200 and m.status != 101) or m.status == 204 \
                or m.status == 304:
            end[0] = h
            return END_KNOWN
        if m.status == 101:
            return END_CLOSE
        if _status_line_at(q, h, n):
            end[0] = h
            return END_KNOWN
    elif m.method_id == METHOD_CONNECT:
        return END_CLOSE
    if b.te == TE_CHUNKED:
        return _chunked_end(q, h, n, wire, end)
    if b.te == TE_OTHER:
        return END_CLOSE if m.kind == MSG_RESPONSE else END_UNKNOWN
    if b.cl_state == CL_BAD:
        return END_UNKNOWN if h < wire else END_CLOSE
    if b.cl_state == CL_VALID:
        e = h + b.cl
        if e > wire:
            return END_CONTINUES
        end[0] = e
        return END_KNOWN
    if m.kind == MSG_REQUEST:
        end[0] = h
        return END_KNOWN
    return END_CLOSE
