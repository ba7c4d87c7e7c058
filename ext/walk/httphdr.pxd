# Chosen headers (`--headers NAME,...`): the values of named header fields in a message's first
# packet, as Spans (offset, length) into the packet, found by one nogil pass over the header
# block. The header-block rules are the dissector's (ext/walk/dissect.pyx _parse_message): lines end
# at CR, LF or CRLF; the block ends at the empty line or at the first line without a colon; a
# name matches case-insensitively and exactly (no blank before the colon); the value is trimmed
# of blanks (SP, HT) on both sides; lines over HDR_MAX_LINE bytes are skipped; a line cut by the
# end of the packet is read as far as it goes. The first occurrence of a name wins.
#
# Used by the pairing table (ext/pair/pairing.pyx feed: values stored with the waiting message and
# emitted as request_<name> / response_<name> columns) and by ext/headers.pyx (message batches,
# for tests against tshark). Nothing is added to HttpMsg: the pass reads the packet again.
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.string cimport memchr

from message cimport HttpMsg, Span, MSG_REQUEST, MSGF_URI_TRUNCATED

cdef enum:
    HDR_MAX_LINE = 8192     # = dissect.pyx MAX_HEADER_LINE
    HDR_MAX_NAMES = 64      # chosen names per run


cdef inline uint32_t hdr_line_end(const uint8_t *q, uint32_t pos, uint32_t n) noexcept nogil:
    """First CR or LF at or after pos; n if none."""
    cdef const uint8_t *a
    cdef const uint8_t *b
    if pos >= n:
        return n
    a = <const uint8_t *>memchr(q + pos, 10, n - pos)
    b = <const uint8_t *>memchr(q + pos, 13, (a - q - pos) if a != NULL else n - pos)
    if b != NULL:
        return <uint32_t>(b - q)
    if a != NULL:
        return <uint32_t>(a - q)
    return n


cdef inline uint32_t hdr_next_line(const uint8_t *q, uint32_t eol, uint32_t n) noexcept nogil:
    if q[eol] == 13 and eol + 1 < n and q[eol + 1] == 10:
        return eol + 2
    return eol + 1


cdef inline bint hdr_name_is(const uint8_t *p, uint32_t n, const uint8_t *lname,
                             uint32_t ln) noexcept nogil:
    """p[0:n] equals the lower-case name lname[0:ln], ASCII case-insensitively."""
    cdef uint32_t i
    cdef uint8_t c
    if n != ln:
        return False
    for i in range(n):
        c = p[i]
        if c >= 65 and c <= 90:
            c += 32
        if c != lname[i]:
            return False
    return True


cdef inline int hdr_scan(const uint8_t *pkt, uint64_t avail, const HttpMsg *m,
                         const uint8_t *names, const uint32_t *name_off, int nnames,
                         Span *out) noexcept nogil:
    """Fill out[0:nnames] with the spans (packet-relative, as HttpMsg's) of the chosen names'
    values in message m, whose packet's bytes are pkt[0:avail]; len 0 when absent. names holds
    the lower-case names back to back, name k at names[name_off[k]:name_off[k+1]].
    Returns the number of names found."""
    cdef uint32_t off = m.payload_off, n = m.payload_caplen, s, eol, line_start, ln, colon
    cdef uint32_t v0, v1
    cdef int k, found = 0
    cdef bint complete
    cdef const uint8_t *q
    cdef const uint8_t *hit
    for k in range(nnames):
        out[k].off = 0
        out[k].len = 0
    if <uint64_t>off + n > avail:              # bytes not all there: nothing to read
        return 0
    q = pkt + off
    if m.kind == MSG_REQUEST:
        if m.flags & MSGF_URI_TRUNCATED:
            return 0
        s = m.method.off - off if m.method.off >= off else 0
    else:
        s = m.version.off - off if m.version.off >= off else 0
    eol = hdr_line_end(q, s, n)
    if eol >= n:
        return 0                               # the first line is all this packet holds
    line_start = hdr_next_line(q, eol, n)
    while found < nnames and line_start < n:
        eol = hdr_line_end(q, line_start, n)
        complete = eol < n
        ln = eol - line_start
        if complete and ln == 0:
            break                              # end of the header block
        if ln <= HDR_MAX_LINE:
            hit = <const uint8_t *>memchr(q + line_start, 58, ln)
            if hit == NULL:
                break                          # not a header line: the block ends
            colon = <uint32_t>(hit - q)
            v0 = colon + 1
            while v0 < eol and (q[v0] == 32 or q[v0] == 9):
                v0 += 1
            v1 = eol
            while v1 > v0 and (q[v1 - 1] == 32 or q[v1 - 1] == 9):
                v1 -= 1
            for k in range(nnames):
                if out[k].len == 0 and out[k].off == 0 and hdr_name_is(
                        q + line_start, colon - line_start, names + name_off[k],
                        name_off[k + 1] - name_off[k]):
                    out[k].off = off + v0        # > 0 even for an empty value: found
                    out[k].len = v1 - v0
                    found += 1
                    break
        if not complete:
            break
        line_start = hdr_next_line(q, eol, n)
    return found
