# A message that starts inside a TCP segment whose first bytes CONTINUE a message begun in an
# earlier segment (issue 31; docs/ACCURACY.md "After a continued header block"): the request
# whose header block was split over two segments, then the next pipelined request in the second
# one. Decided from the packet alone, with no state, by the dissector (ext/walk/dissect.pyx,
# which then parses the message and the ones after it) and the feeder's reader
# (ext/run/classify.pxd, which only routes the packet), so both take the same packets.
# Inline functions only (house rule for .pxd sharing).
from libc.stdint cimport uint8_t, uint32_t, uint64_t

from message cimport MSG_REQUEST, MSG_RESPONSE
from msglen cimport (BodyInfo, _is_eol, _lower, _name_is, _line_end, _next_line, _cl_value,
                     _te_value, _chunked_end, _status_line_at, MAX_HEADER_LINE, CL_NONE, CL_VALID,
                     CL_BAD, TE_NONE, TE_CHUNKED, TE_OTHER, END_KNOWN)
from httpstart cimport http_start, _line_ends_with_version

cdef enum:
    CONT_NONE = 0          # not a continued header block, or nothing after it: nothing counted
    CONT_UNKNOWN = -1      # a continued header block ends in the packet and a message may start
                           # after it (the bytes there, or after the body, begin like one), but
                           # the packet does not tell (counted)
    CONT_MAX_OFFSET = 0xFFFF   # seg_off is 16 bits


cdef inline bint _tchar(uint8_t c) noexcept nogil:
    """RFC 9110 5.6.2 tchar (a field name's bytes)."""
    return ((c >= 48 and c <= 57) or (c >= 65 and c <= 90) or (c >= 97 and c <= 122) or c == 33
            or (c >= 35 and c <= 39) or c == 42 or c == 43 or c == 45 or c == 46 or c == 94
            or c == 95 or c == 96 or c == 124 or c == 126)


cdef inline uint32_t _field_name(const uint8_t *q, uint32_t pos, uint32_t eol) noexcept nogil:
    """Length of the field name of the line q[pos:eol] (1*tchar then ":"), 0 when the line is
    not a header field line."""
    cdef uint32_t i = pos
    while i < eol and _tchar(q[i]):
        i += 1
    if i == pos or i >= eol or q[i] != 58:
        return 0
    return i - pos


cdef inline bint _name_suffix(const uint8_t *p, uint32_t n, const char *lname, uint32_t ln) noexcept nogil:
    """p[0:n] is a case-insensitive suffix (possibly empty) of the lower-case name lname[0:ln]:
    the tail of that name cut by the segment's start."""
    cdef uint32_t i
    if n > ln:
        return False
    for i in range(n):
        if _lower(p[i]) != <uint8_t>lname[ln - n + i]:
            return False
    return True


cdef inline bint _value_starts(const uint8_t *v, uint32_t n, const char *lval, uint32_t ln) noexcept nogil:
    """The field value v[0:n] starts with the lower-case lval[0:ln] (case-insensitive)."""
    cdef uint32_t i
    if n < ln:
        return False
    for i in range(ln):
        if _lower(v[i]) != <uint8_t>lval[i]:
            return False
    return True


cdef inline int _strict_start(const uint8_t *q, uint32_t n, uint32_t wire, uint32_t *start,
                              uint32_t *tok_end, int *method_id) noexcept nogil:
    """http_start's kind for q[0:n] when its first line is whole in the packet and complete:
    a status line "HTTP/" DIGIT "." DIGIT SP 3DIGIT, or a request line that ends with SP
    "HTTP/" DIGIT "." DIGIT; 0 otherwise (a cut line, a method alone, a lower-case status
    line)."""
    cdef int kind = http_start(q, n, wire, start, tok_end, method_id)
    if kind == MSG_RESPONSE:
        if _status_line_at(q, start[0], n) and _line_end(q, start[0], n) < n:
            return kind
        return 0
    if kind == MSG_REQUEST and _line_ends_with_version(q, tok_end[0], n):
        return kind
    return 0


cdef inline int _doubt(const uint8_t *q, uint32_t n, uint32_t wire, uint64_t pos) noexcept nogil:
    """CONT_UNKNOWN when q[pos:] begins like a message (http_start, not strictly), else
    CONT_NONE: a body after the block, which is no doubt about a message."""
    cdef uint32_t s = 0, t = 0
    cdef int mid = 0
    if pos >= n:
        return CONT_NONE
    return CONT_UNKNOWN if http_start(q + pos, n - <uint32_t>pos, wire - <uint32_t>pos, &s, &t,
                                      &mid) != 0 else CONT_NONE


cdef inline int http_after_continuation(const uint8_t *q, uint32_t n, uint32_t wire,
                                        uint32_t *at, uint32_t *start, uint32_t *tok_end,
                                        int *method_id) noexcept nogil:
    """The TCP payload q[0:n] (wire bytes on the wire) does not start a message
    (http_start said 0). When its first bytes continue a header block begun in an earlier
    segment and the message they belong to ends in this packet, followed by the start of the
    next message: that message's kind (MSG_REQUEST / MSG_RESPONSE), *at its offset in the
    payload, *start / *tok_end / *method_id http_start's for q[*at:]. CONT_NONE when the payload
    does not look like a continued header block or no message can follow it; CONT_UNKNOWN
    (counted continuation_unknown) when one ends in the packet and a message may start after it
    (right after the empty line or the body, the bytes begin like one: http_start) but the
    packet does not tell (_doubt).

    The rule (docs/ACCURACY.md "After a continued header block"):
      - the first line is a fragment (the tail of a header line or of the request/status line,
        possibly empty); if it holds a colon after a tail of "Content-Length" or
        "Transfer-Encoding" (the name was cut by the segment's start): doubt;
      - every further line up to the first empty one is a header field line (tchar name, colon;
        at most MAX_HEADER_LINE bytes, else doubt), else CONT_NONE (a body); a MIME part's own
        fields (Content-Transfer-Encoding, Content-ID, Content-Type application/http: a multipart
        batch body that carries HTTP messages) are doubt;
      - the message ends at the empty line when a status line follows at once (the answer to a
        HEAD, a 304, ...: _msg_end's rule), else as the continued lines' Content-Length /
        Transfer-Encoding tell (_msg_end's rules; chunks must all end in the packet), else at
        the empty line (a request without a body; a response without a length runs to the
        close, so only a message that starts there strictly is taken);
      - what follows must start a message strictly (_strict_start).
    Doubt, a length the packet cannot read (bad Content-Length, a coding other than chunked,
    chunks or a body past the segment) and a start that is not strict take nothing.
    A segment that starts with the LF completing a CRLF split at the segment's edge, followed by
    a strict start, is taken at offset 1. Linear in n; most bodies stop at their second line."""
    cdef uint32_t e, pos, h, ln, nl, v0, v1
    cdef uint64_t end = 0
    cdef const uint8_t *hit
    cdef BodyInfo b
    cdef int kind, st
    cdef bint doubt = False
    if n == 0:
        return CONT_NONE
    # the fragment: up to the first line end
    e = _line_end(q, 0, n)
    if e >= n:
        return CONT_NONE
    if e == 0 and q[0] == 10 and n > 1 and not _is_eol(q[1]):
        kind = _strict_start(q + 1, n - 1, wire - 1, start, tok_end, method_id)
        if kind != 0:
            at[0] = 1
            return kind
    # a colon in the fragment after a tail of a length field's name: its value is here, its
    # name was cut
    ln = 0
    while ln < e and _tchar(q[ln]):
        ln += 1
    if ln < e and q[ln] == 58 and (_name_suffix(q, ln, b"content-length", 14)
                                   or _name_suffix(q, ln, b"transfer-encoding", 17)):
        doubt = True
    b.hdr_end = 0
    b.cl = 0
    b.cl_state = CL_NONE
    b.te = TE_NONE
    pos = _next_line(q, e, n)
    while True:
        if pos >= n:
            return CONT_NONE                       # no empty line in the packet
        e = _line_end(q, pos, n)
        if e >= n:
            return CONT_NONE                       # a line cut by the packet's end
        if e == pos:
            break
        if e - pos > MAX_HEADER_LINE:
            doubt = True
        nl = _field_name(q, pos, e)
        if nl == 0:
            return CONT_NONE                       # not a header block: a body
        v0 = pos + nl + 1
        while v0 < e and (q[v0] == 32 or q[v0] == 9):
            v0 += 1
        v1 = e
        while v1 > v0 and (q[v1 - 1] == 32 or q[v1 - 1] == 9):
            v1 -= 1
        if _name_is(q + pos, nl, b"content-length", 14):
            _cl_value(q + v0, v1 - v0, &b)
        elif _name_is(q + pos, nl, b"transfer-encoding", 17):
            _te_value(q + v0, v1 - v0, &b)
        elif (_name_is(q + pos, nl, b"content-transfer-encoding", 25)
              or _name_is(q + pos, nl, b"content-id", 10)
              or (_name_is(q + pos, nl, b"content-type", 12)
                  and _value_starts(q + v0, v1 - v0, b"application/http", 16))):
            doubt = True
        pos = _next_line(q, e, n)
    h = _next_line(q, e, n)
    if h >= wire:
        return CONT_NONE                           # the segment ends with the block
    if h >= n:
        return CONT_UNKNOWN                        # the snaplen cut what follows
    if doubt:
        return _doubt(q, n, wire, h)
    if _status_line_at(q, h, n):
        end = h
    elif b.te == TE_CHUNKED:
        st = _chunked_end(q, h, n, wire, &end)
        if st != END_KNOWN:
            return _doubt(q, n, wire, h)
    elif b.te == TE_OTHER or b.cl_state == CL_BAD:
        return _doubt(q, n, wire, h)
    elif b.cl_state == CL_VALID:
        end = h + b.cl
    else:
        end = h
    if end >= wire:
        return CONT_NONE if end == wire else _doubt(q, n, wire, h)
    if end >= n or end > CONT_MAX_OFFSET:
        return CONT_UNKNOWN
    if wire - end <= 2 and n == wire and _is_eol(q[end]) and (end + 1 >= n or _is_eol(q[end + 1])):
        return CONT_NONE                           # a stray CRLF after the message
    kind = _strict_start(q + end, n - <uint32_t>end, wire - <uint32_t>end, start, tok_end, method_id)
    if kind == 0:
        st = _doubt(q, n, wire, end)
        return st if st != CONT_NONE or end == h else _doubt(q, n, wire, h)
    at[0] = <uint32_t>end
    return kind
