# cython: freethreading_compatible = False
"""Dissect stage: packet batch -> HTTP message batch (one HttpMsg per HTTP first packet).

Link -> IP -> TCP -> "does this TCP payload start an HTTP request or response?", and for those
packets the request/status line and the Host and User-Agent headers held in that one packet.
Everything runs without the GIL over the batch's byte buffer; text fields leave as Spans
(offset, length) into the packet, never as copies. Rules and their tshark counterparts are
written down in docs/ACCURACY.md.

Every per-packet helper here is `noexcept nogil`: nothing in it can fail except by reading bad
input, and bad input is an outcome (a DissectReason code, counted), never an exception.
"""
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.string cimport memchr, memcmp, memcpy, memset

cimport numpy as cnp
from cpython.pycapsule cimport PyCapsule_New, PyCapsule_GetPointer
import numpy as np

# the NumPy mirrors of the structs this module reads (the core's one home for them; it imports
# numpy only)
from webtap.records.message import MESSAGE_DTYPE as _MESSAGE_DTYPE, PACKET_DTYPE as _PACKET_DTYPE

from packet cimport PacketRef
from util cimport WT_IP_TEXT, wt_ip_text, wt_utf8_seq
from l34 cimport (L34, L34Cfg, L34_DATA, L34_MAX_UDP_PORTS, batch_caplen, l34_parse, l34_msg_encap,
                 l34_count_encap, ENC_N)
from msglen cimport (BodyInfo, _is_eol, _name_is, _line_end, _next_line, _is_version, _cl_value,
                    _te_value, _msg_end, END_CONTINUES, END_UNKNOWN, END_CLOSE, CL_NONE, TE_NONE,
                    MAX_HEADER_LINE, WT_MSGF_LINE_TOO_LONG, WT_METHOD_CONNECT)
from httpcont cimport http_after_continuation, CONT_UNKNOWN
from httpstart cimport (wt_methods, WT_N_METHODS, WT_MAX_METHOD_LEN, http_start,
                        http_status_code, http_split_start, WT_MSG_REQUEST, WT_MSG_RESPONSE)
from tls cimport (TlsWatch, tls_flow_hash, tls_watch_has, tls_watch_add, tls_watch_begin,
                 tls_watch_udp_add, tls_hello_start, tls_hello_fits)
from hellostream cimport hs_may_start
from evasion cimport (EV_MAX_LINE, EV_MAX_FIELDS, ev_double_encoded,
                      ev_absolute_host_differs)
from quic_initial cimport quic_udp_locate
from message cimport (
    HttpMsg, Span, TcpEvent, SegmentTap,
    MSG_REQUEST, MSG_RESPONSE, MSG_TLS, MSG_QUIC,
    MSGF_URI_TRUNCATED, MSGF_HEADERS_INCOMPLETE, MSGF_PAYLOAD_TRUNCATED, MSGF_HOST_REPEATED,
    MSGF_LINE_TOO_LONG, MSGF_BAD_VERSION, MSGF_BAD_STATUS, MSGF_MID_SEGMENT,
    MSGF_AFTER_CONTINUATION,
    MSGF_EV_HOST_MISMATCH, MSGF_EV_DOUBLE_ENCODED, MSGF_EV_LONG_REQUEST_LINE,
    MSGF_EV_LONG_HEADER_LINE, MSGF_EV_MANY_FIELDS,
    METHOD_OTHER, METHOD_HEAD, METHOD_CONNECT,
    DR_PACKETS, DR_LINK_UNSUPPORTED, DR_LINK_TRUNCATED, DR_NOT_IP, DR_IP_TRUNCATED,
    DR_IP_BAD_HEADER, DR_IP_FRAGMENT, DR_NOT_TCP, DR_TCP_TRUNCATED, DR_TCP_BAD_OFFSET,
    DR_NO_PAYLOAD, DR_NOT_HTTP, DR_HTTP_REQUEST, DR_HTTP_RESPONSE, DR_URI_TRUNCATED,
    DR_HEADERS_INCOMPLETE, DR_LINE_TOO_LONG, DR_PAYLOAD_TRUNCATED, DR_MID_REQUEST,
    DR_MID_RESPONSE, DR_BODY_CONTINUES, DR_LENGTH_UNKNOWN, DR_REST_NOT_HTTP, DR_LINE_SPLIT,
    DR_AFTER_CONT_REQUEST, DR_AFTER_CONT_RESPONSE, DR_CONT_UNKNOWN, DR_N,
)

cnp.import_array()

# The C of the HTTP rules (ext/walk/httpstart.h, msglen.h) spells the few message.pxd values it
# needs; they must agree.
if (WT_MSG_REQUEST != MSG_REQUEST or WT_MSG_RESPONSE != MSG_RESPONSE
        or WT_MSGF_LINE_TOO_LONG != MSGF_LINE_TOO_LONG or WT_METHOD_CONNECT != METHOD_CONNECT):
    raise ImportError("ext/walk/httpstart.h or msglen.h disagrees with ext/walk/message.pxd")

# Bounds. Work per packet is linear in its captured bytes whatever they hold; the loops that could
# otherwise be driven by hostile headers are bounded: header lines (MAX_HEADER_LINE,
# ext/walk/msglen.h), VLAN tags and IPv6 extension headers (ext/walk/l34.pxd), method tokens
# (ext/walk/httpmethods.h).

# Link types: LINKTYPE_* of ext/read/packet.pxd, walked by ext/walk/l34.pxd. Methods: ext/walk/httpmethods.h
# (index = MethodId; mirrors webtap.records.message.METHOD_NAMES, a test checks).


# User-named UDP tunnel ports (set_tunnel_ports); zero-initialised: none. The one copy in the
# process: the other walks (feeder, urlmatch, tls) read it through l34_shared_cfg().
cdef L34Cfg _tunnel_cfg


def tunnel_cfg_capsule():
    """The address of this module's L34Cfg, for ext/walk/l34.pxd l34_shared_cfg()."""
    return PyCapsule_New(&_tunnel_cfg, b"webtap.L34Cfg", NULL)


def set_tunnel_ports(pairs):
    """Set the user-named UDP tunnel ports of every walk in the process: pairs of (port,
    EncapKind code) (webtap.dissect.set_tunnel_ports maps names to codes)."""
    pairs = [(int(a), int(b)) for a, b in pairs]
    if len(pairs) > L34_MAX_UDP_PORTS:
        raise ValueError(f"at most {L34_MAX_UDP_PORTS} tunnel ports")
    for port, kind in pairs:
        if not 0 < port < 65536 or not 0 < kind < ENC_N:
            raise ValueError(f"bad tunnel port {port} or kind {kind}")
    _tunnel_cfg.n = 0
    for port, kind in pairs:
        _tunnel_cfg.port[_tunnel_cfg.n] = port
        _tunnel_cfg.kind[_tunnel_cfg.n] = kind
        _tunnel_cfg.n += 1


def method_names():
    """The method table in MethodId order (None for METHOD_OTHER), for schema checks."""
    return (None,) + tuple(wt_methods[i].name[:wt_methods[i].len].decode()
                           for i in range(1, WT_N_METHODS))


def sizeof_http_msg():
    """sizeof(HttpMsg) in C: must equal webtap.records.message.MESSAGE_DTYPE.itemsize."""
    return sizeof(HttpMsg)


def sizeof_packet_ref():
    """sizeof(PacketRef) in C: must equal webtap.records.message.PACKET_DTYPE.itemsize."""
    return sizeof(PacketRef)


# ---------------------------------------------------------------------------------------------
# HTTP: classify and parse the first line and the header block held in this packet.
# p points at the packet's first byte; the payload is p[off : off+n]; spans are packet-relative.
# Returns DR_HTTP_REQUEST, DR_HTTP_RESPONSE or DR_NOT_HTTP; *lines_too_long gets the number of
# header lines over MAX_HEADER_LINE.
# ---------------------------------------------------------------------------------------------
cdef int _parse_http(const uint8_t *p, uint32_t off, uint32_t n, uint32_t wire_len,
                     HttpMsg *m, uint32_t *lines_too_long, BodyInfo *b) noexcept nogil:
    """Classify (ext/walk/httpstart.c) and parse; for parse_http_payload."""
    cdef uint32_t s = 0, t = 0
    cdef int mid = 0, kind
    lines_too_long[0] = 0
    kind = http_start(p + off, n, wire_len, &s, &t, &mid)
    if kind == 0:
        return DR_NOT_HTTP
    return _parse_message(p, off, n, kind, s, t, mid, m, lines_too_long, b)


cdef int _parse_message(const uint8_t *p, uint32_t off, uint32_t n, int kind, uint32_t s,
                        uint32_t t, int mid, HttpMsg *m, uint32_t *lines_too_long,
                        BodyInfo *b) noexcept nogil:
    """Parse the message http_start found in the payload p[off:off+n]: kind, first-line start
    s, and for a request the space after the method (t) and its MethodId. *b gets what the
    header block says about the message's length (cleared first)."""
    cdef uint32_t e, eol, line_start, colon, v0, v1, k, ln, nfields = 0
    cdef int code
    cdef bint have_host = False, have_ua = False, line_complete
    cdef const uint8_t *q = p + off
    cdef const uint8_t *hit
    lines_too_long[0] = 0
    b.hdr_end = 0
    b.cl = 0
    b.cl_state = CL_NONE
    b.te = TE_NONE
    # Classified on the first bytes (http_start) before looking for the end of the line: most
    # payloads are message bodies, and scanning a 1460-byte body for a CR/LF it may not have
    # would cost more than the rest of the dissection.
    if kind == MSG_RESPONSE:
        eol = _line_end(q, s, n)
        line_complete = eol < n
        # Status line: version SP+ code SP+ reason. Any payload starting "HTTP/" is a response
        # (the paper's filter and tshark agree); a bad version or code is flagged, not dropped.
        m.kind = MSG_RESPONSE
        m.method_id = METHOD_OTHER
        code = http_status_code(q, s, n, &e, &t)
        m.version.off = off + s
        m.version.len = e - s
        if not _is_version(q + s, e - s):
            m.flags |= MSGF_BAD_VERSION
        if code < 0:
            m.status = 0
            m.flags |= MSGF_BAD_STATUS
        else:
            m.status = <uint16_t>code
        while t < eol and q[t] == 32:
            t += 1
        m.reason.off = off + t
        m.reason.len = eol - t
    else:
        # Request line: method [SP request-target [SP HTTP-version]] (http_start found the
        # method and checked the shape; t is where the method ends: SP, CR, LF or the end).
        eol = _line_end(q, t, n)          # no CR/LF before t: the token scan stopped there
        line_complete = eol < n
        m.kind = MSG_REQUEST
        m.method_id = <uint8_t>mid
        m.method.off = off + s
        m.method.len = t - s
        # Request-target: after one space. Two or more spaces mean an empty target, the rest of
        # the line being the version (tshark's reading of "GET  HTTP/1.1"); no target before
        # the version ("OPTIONS HTTP/1.1": "HTTP/..." is the last field of the line) is an
        # empty one too (as Zeek reads it; tshark 4.0 takes the version for the URI). A field
        # starting "HTTP/" with another field after it is the target ("GET HTTP/ HTTP/1.1",
        # as tshark reads it). A method alone has neither.
        k = t
        while k < eol and q[k] == 32:
            k += 1
        if k - t >= 2 or (eol - k >= 5 and memcmp(q + k, b"HTTP/", 5) == 0
                          and memchr(q + k, 32, eol - k) == NULL):
            m.uri.off = off + k
            m.uri.len = 0
            v0 = k
        else:
            v0 = k
            while v0 < eol and q[v0] != 32:
                v0 += 1
            m.uri.off = off + k
            m.uri.len = v0 - k
            while v0 < eol and q[v0] == 32:
                v0 += 1
        m.version.off = off + v0
        m.version.len = eol - v0
        if not line_complete:
            m.flags |= MSGF_URI_TRUNCATED
        elif not _is_version(q + v0, eol - v0):
            m.flags |= MSGF_BAD_VERSION
        # evasion indicators of the request line (ext/walk/evasion.c)
        if eol - s > EV_MAX_LINE:
            m.flags |= MSGF_EV_LONG_REQUEST_LINE
        if m.uri.len >= 5 and ev_double_encoded(p + m.uri.off, m.uri.len):
            m.flags |= MSGF_EV_DOUBLE_ENCODED
    if not line_complete:
        m.flags |= MSGF_HEADERS_INCOMPLETE
        return DR_HTTP_REQUEST if m.kind == MSG_REQUEST else DR_HTTP_RESPONSE
    # Header block: one field per line until the empty line. Like tshark, stop at the first line
    # without a colon; a name matches case-insensitively and exactly (no space before the colon).
    line_start = _next_line(q, eol, n)
    while True:
        if line_start >= n:
            m.flags |= MSGF_HEADERS_INCOMPLETE
            break
        eol = _line_end(q, line_start, n)
        line_complete = eol < n
        ln = eol - line_start
        if line_complete and ln == 0:
            b.hdr_end = _next_line(q, eol, n)                 # end of the header block
            break
        if not line_complete:
            m.flags |= MSGF_HEADERS_INCOMPLETE
        if ln > EV_MAX_LINE and m.kind == MSG_REQUEST:
            m.flags |= MSGF_EV_LONG_HEADER_LINE
        if ln > MAX_HEADER_LINE:
            nfields += 1
            m.flags |= MSGF_LINE_TOO_LONG
            lines_too_long[0] += 1
        else:
            hit = <const uint8_t *>memchr(q + line_start, 58, ln)
            colon = <uint32_t>(hit - q) if hit != NULL else eol
            if colon >= eol:
                break                                         # not a header line: block ends
            nfields += 1
            v0 = colon + 1
            while v0 < eol and (q[v0] == 32 or q[v0] == 9):
                v0 += 1
            v1 = eol
            while v1 > v0 and (q[v1 - 1] == 32 or q[v1 - 1] == 9):
                v1 -= 1
            if _name_is(q + line_start, colon - line_start, b"host", 4):
                if have_host:
                    m.flags |= MSGF_HOST_REPEATED
                else:
                    have_host = True
                    m.host.off = off + v0
                    m.host.len = v1 - v0
            elif _name_is(q + line_start, colon - line_start, b"user-agent", 10):
                if not have_ua:
                    have_ua = True
                    m.user_agent.off = off + v0
                    m.user_agent.len = v1 - v0
            elif not line_complete:
                pass                                          # a value cut by the packet's end
            elif _name_is(q + line_start, colon - line_start, b"content-length", 14):
                _cl_value(q + v0, v1 - v0, b)
            elif _name_is(q + line_start, colon - line_start, b"transfer-encoding", 17):
                _te_value(q + v0, v1 - v0, b)
        if not line_complete:
            break
        line_start = _next_line(q, eol, n)
    if m.kind == MSG_REQUEST:
        if nfields > EV_MAX_FIELDS:
            m.flags |= MSGF_EV_MANY_FIELDS
        if have_host and ev_absolute_host_differs(p + m.uri.off, m.uri.len, p + m.host.off,
                                                  m.host.len):
            m.flags |= MSGF_EV_HOST_MISMATCH
        return DR_HTTP_REQUEST
    return DR_HTTP_RESPONSE


# ---------------------------------------------------------------------------------------------
# One packet: link -> IP -> TCP -> HTTP. Returns the DissectReason that decided its fate:
# DR_HTTP_REQUEST / DR_HTTP_RESPONSE when *m now holds a message, another DR_* otherwise.
# ---------------------------------------------------------------------------------------------
cdef inline void _copy_addrs(uint8_t *src, uint8_t *dst, const L34 *l) noexcept nogil:
    """A walked packet's addresses into two 16-byte fields of a cleared record (IPv4: the first 4
    bytes, zeros after them). Copies of a size the compiler sees: a length chosen at run time is
    a call into libc."""
    if l.ip_version == 4:
        memcpy(src, l.src, 4)
        memcpy(dst, l.dst, 4)
    else:
        memcpy(src, l.src, 16)
        memcpy(dst, l.dst, 16)


cdef inline void _fill_l34(HttpMsg *m, const L34 *l) noexcept nogil:
    """A message's walk fields (cleared first): addresses, ports, TCP numbers, payload and
    encapsulation; the one copy for HTTP and TLS messages."""
    _clear_msg(m)
    m.vlan = l.vlan
    m.ip_version = l.ip_version
    m.ttl = l.ttl
    _copy_addrs(m.src_ip, m.dst_ip, l)
    m.ip_off = <uint16_t>l.ip_off
    m.tcp_off = <uint16_t>l.tcp_off
    m.src_port = l.src_port
    m.dst_port = l.dst_port
    m.seq = l.seq
    m.ack = l.ack
    m.tcp_flags = l.tcp_flags
    m.window = l.window
    m.payload_off = l.payload_off
    m.payload_len = l.payload_len
    m.payload_caplen = l.payload_caplen
    l34_msg_encap(m, l)


cdef int _dissect_packet(const uint8_t *p, uint32_t caplen, uint16_t linktype,
                         HttpMsg *m, uint32_t *lines_too_long, uint64_t *cnt, L34 *lp,
                         BodyInfo *b) noexcept nogil:
    """Link, IP and TCP by ext/walk/l34.pxd, the HTTP decision by ext/walk/httpstart.c (the walk and
    the rule the feeder's reader shares), then the message's fields. Only an HTTP first
    packet writes *m (cleared first); any other packet leaves it untouched. *lp gets the walk
    (for the TLS messages of the same pass)."""
    cdef L34 *l = lp
    cdef uint32_t s = 0, t = 0
    cdef int mid = 0, kind, r
    lines_too_long[0] = 0
    r = l34_parse(p, caplen, linktype, l, &_tunnel_cfg)
    if l.encap_depth != 0:
        l34_count_encap(cnt, l)
    if r != L34_DATA:
        return r
    kind = http_start(p + l.payload_off, l.payload_caplen, l.payload_len, &s, &t, &mid)
    if kind == 0:
        if l.payload_caplen <= <uint32_t>WT_MAX_METHOD_LEN + 2 and \
                http_split_start(p + l.payload_off, l.payload_caplen, l.payload_len):
            cnt[<int>DR_LINE_SPLIT] += 1
        return DR_NOT_HTTP
    _fill_l34(m, l)
    if l.payload_caplen < l.payload_len:
        m.flags |= MSGF_PAYLOAD_TRUNCATED
    return _parse_message(p, l.payload_off, l.payload_caplen, kind, s, t, mid, m, lines_too_long, b)


cdef inline void _inside(const uint8_t *p, const L34 *l, HttpMsg *m, uint32_t at, uint16_t flags,
                         int kind, uint32_t s, uint32_t t, int mid, BodyInfo *b, uint64_t *cnt,
                         int dr_request, int dr_response, int64_t ts_ns, uint64_t pkt_index,
                         uint64_t pkt_offset, uint16_t linktype) noexcept nogil:
    """m: the message of `kind` that starts `at` bytes into the segment's payload (a message
    after another in the segment, or after a continued header block): its seq, seg_off and
    payload_* from its first byte, parsed, its packet's time and place, counted under
    dr_request / dr_response (and its over-long header lines)."""
    cdef uint32_t ltl = 0
    _fill_l34(m, l)
    m.flags = flags
    m.seq = l.seq + at
    m.seg_off = <uint16_t>at
    m.payload_off = l.payload_off + at
    m.payload_caplen = l.payload_caplen - at
    m.payload_len = l.payload_len - at
    if m.payload_caplen < m.payload_len:
        m.flags |= MSGF_PAYLOAD_TRUNCATED
    _parse_message(p, l.payload_off + at, l.payload_caplen - at, kind, s, t, mid, m, &ltl, b)
    m.ts_ns = ts_ns
    m.pkt_index = pkt_index
    m.pkt_offset = pkt_offset
    m.linktype = linktype
    cnt[dr_request if kind == MSG_REQUEST else dr_response] += 1
    cnt[<int>DR_LINE_TOO_LONG] += ltl


cdef Py_ssize_t _more_messages(const uint8_t *p, const L34 *l, HttpMsg *msgs, Py_ssize_t k,
                               Py_ssize_t kmax, BodyInfo *b, uint64_t *cnt,
                               uint32_t mstart) noexcept nogil:
    """The messages after msgs[k - 1], the packet's first message, which starts at mstart in the
    payload (p: the packet, *l: its walk, *b: the first message's BodyInfo), that start in the
    same segment: while a message's end is
    known from this packet (_msg_end) and bytes follow it, they are looked at as the start of a
    message (ext/walk/httpstart.c, as a payload's first bytes are) and, when they start one,
    parsed into msgs[k], msgs[k + 1], ... No reassembly, no state beyond the packet. A message
    found there is flagged MSGF_MID_SEGMENT; its seq is the packet's SEQ plus its offset in the
    payload, its payload_* span the segment from its first byte; the message before it gets
    payload_* up to it (messages partition the segment: seq + payload_len is the next one's
    seq). Why the chain stops is counted (body_continues, length_unknown, rest_not_http). They
    inherit MSGF_AFTER_CONTINUATION from the first (_after_continuation).
    The caller leaves room for 1 + caplen / 5 messages (each but the last takes at least five
    bytes: "GET\n\n"); msgs[kmax - 1] is the last row there is room for, whatever. Returns the
    new k."""
    cdef const uint8_t *q = p + l.payload_off
    cdef uint32_t n = l.payload_caplen, wire = l.payload_len, end, s, t
    cdef uint64_t e = 0
    cdef int st, kind, mid
    cdef HttpMsg *prev = &msgs[k - 1]
    cdef HttpMsg *m
    while b.hdr_end != 0:
        st = _msg_end(q + mstart, n - mstart, wire - mstart, prev.kind, prev.status, prev.method_id,
                      prev.flags, b, &e)
        if st == END_CONTINUES:
            cnt[<int>DR_BODY_CONTINUES] += 1
            break
        if st == END_UNKNOWN:
            cnt[<int>DR_LENGTH_UNKNOWN] += 1
            break
        if st == END_CLOSE or mstart + e >= wire:
            break                                   # nothing follows in the segment
        end = mstart + <uint32_t>e
        if end > 0xFFFF:
            cnt[<int>DR_LENGTH_UNKNOWN] += 1         # past what seg_off holds (a >64 KiB segment)
            break
        if end >= n:
            cnt[<int>DR_LENGTH_UNKNOWN] += 1         # what follows was not captured
            break
        if wire - end <= 2 and n == wire and _is_eol(q[end]) and (end + 1 >= n or _is_eol(q[end + 1])):
            break                                   # a stray CRLF after a body (RFC 9112 2.2)
        s = 0
        t = 0
        mid = 0
        kind = http_start(q + end, n - end, wire - end, &s, &t, &mid)
        if kind == 0:
            cnt[<int>DR_REST_NOT_HTTP] += 1
            break
        if k >= kmax:
            break                                   # cannot happen (see above); never overrun
        m = &msgs[k]
        prev.payload_caplen = end - mstart
        prev.payload_len = end - mstart
        prev.flags &= ~MSGF_PAYLOAD_TRUNCATED      # its bytes are all in the capture
        _inside(p, l, m, end, MSGF_MID_SEGMENT | (prev.flags & MSGF_AFTER_CONTINUATION), kind, s,
                t, mid, b, cnt, DR_MID_REQUEST, DR_MID_RESPONSE, prev.ts_ns, prev.pkt_index,
                prev.pkt_offset, prev.linktype)
        k += 1
        prev = m
        mstart = end
    return k


cdef Py_ssize_t _after_continuation(const uint8_t *p, const L34 *l, HttpMsg *msgs, Py_ssize_t k,
                                    Py_ssize_t kmax, BodyInfo *b, uint64_t *cnt,
                                    const PacketRef *ref) noexcept nogil:
    """A TCP segment (p: the packet, *l: its walk) whose payload starts no message: the message
    that starts after the header block its first bytes continue, when the packet tells
    (ext/walk/httpcont.c), parsed into msgs[k] and flagged MSGF_AFTER_CONTINUATION (seq,
    seg_off and payload_* from its first byte, as a message inside a segment), then the ones
    after it (_more_messages). Counted after_continuation_request/response, or
    continuation_unknown when the packet does not tell. Returns the new k."""
    cdef const uint8_t *q = p + l.payload_off
    cdef uint32_t n = l.payload_caplen, wire = l.payload_len, at = 0, s = 0, t = 0
    cdef int mid = 0
    cdef int kind = http_after_continuation(q, n, wire, &at, &s, &t, &mid)
    cdef HttpMsg *m
    if kind <= 0:
        if kind == CONT_UNKNOWN:
            cnt[<int>DR_CONT_UNKNOWN] += 1
        return k
    if k >= kmax:
        return k                                    # cannot happen (the caller leaves room)
    m = &msgs[k]
    _inside(p, l, m, at, MSGF_AFTER_CONTINUATION, kind, s, t, mid, b, cnt, DR_AFTER_CONT_REQUEST,
            DR_AFTER_CONT_RESPONSE, ref.ts_ns, ref.index, ref.offset, ref.linktype)
    k += 1
    if b.hdr_end != 0:
        k = _more_messages(p, l, msgs, k, kmax, b, cnt, at)
    return k


cdef inline bint _tls_message(const uint8_t *p, uint32_t caplen, uint16_t linktype, int r, L34 *l,
                              TlsWatch *w, HttpMsg *m) noexcept nogil:
    """Whether the packet (walked: r, *l) goes to the TLS stage, and then its message in *m:
    MSG_TLS for a TCP payload that starts a hello or continues a watched flow (ext/tls/tls.pxd
    TlsWatch; the flow of a hello that does not end in its first record and segment is added,
    also after ChangeCipherSpec records, and of a 1-5 byte payload that can begin a handshake
    record header: ext/tls/hellostream.pxd's starts), MSG_QUIC for a UDP datagram that starts
    with a QUIC long header."""
    cdef int t = 0
    cdef uint32_t off
    cdef uint64_t k = 0
    cdef const uint8_t *d
    cdef bint watched = False, starts = False
    if r == DR_NOT_HTTP or r == DR_HTTP_REQUEST or r == DR_HTTP_RESPONSE:
        d = p + l.payload_off
        if w.overflow:
            watched = True
        elif w.n != 0:
            k = tls_flow_hash(l.src, l.src_port, l.dst, l.dst_port, l.ip_version)
            watched = tls_watch_has(w, k)
        if r == DR_NOT_HTTP:
            off = tls_hello_start(d, l.payload_caplen, &t)
            if t != 0:
                starts = not tls_hello_fits(d + off, l.payload_caplen - off)
            else:
                starts = l.payload_caplen == l.payload_len and hs_may_start(d, l.payload_caplen)
            if starts:
                if k == 0:
                    k = tls_flow_hash(l.src, l.src_port, l.dst, l.dst_port, l.ip_version)
                tls_watch_add(w, k)
        if t == 0 and not starts and not watched:
            return False
        _fill_l34(m, l)
        m.kind = MSG_TLS
        return True
    if r == DR_NOT_TCP:
        if not quic_udp_locate(p, caplen, linktype, &_tunnel_cfg, l, False):
            return False
        tls_watch_udp_add(w, 1)
        if l.payload_caplen < 7 or not (p[l.payload_off] & 0x80):
            return False
        _fill_l34(m, l)
        m.kind = MSG_QUIC
        return True
    return False


cdef inline void _count_msg(uint64_t *cnt, const HttpMsg *m) noexcept nogil:
    if m.flags & MSGF_URI_TRUNCATED:
        cnt[<int>DR_URI_TRUNCATED] += 1
    if m.flags & MSGF_HEADERS_INCOMPLETE:
        cnt[<int>DR_HEADERS_INCOMPLETE] += 1
    if m.flags & MSGF_PAYLOAD_TRUNCATED:
        cnt[<int>DR_PAYLOAD_TRUNCATED] += 1


cdef inline void _clear_msg(HttpMsg *m) noexcept nogil:
    memset(m, 0, sizeof(HttpMsg))
    m.vlan = 0xFFFF


# ---------------------------------------------------------------------------------------------
# Python entry points
# ---------------------------------------------------------------------------------------------
if _MESSAGE_DTYPE.itemsize != sizeof(HttpMsg) or _PACKET_DTYPE.itemsize != sizeof(PacketRef):
    raise RuntimeError("webtap.records.message dtypes do not match ext/<stage>/*.pxd struct sizes")


cdef cnp.ndarray _as_packets(packets):
    arr = np.asarray(packets)
    if arr.dtype != _PACKET_DTYPE or arr.ndim != 1:
        raise TypeError(f"packets must be a 1-D array of webtap.records.message.PACKET_DTYPE, got {arr.dtype}")
    return np.ascontiguousarray(arr)


cdef inline void _tcp_event(TcpEvent *e, const L34 *l, int64_t ts, uint64_t index,
                            uint64_t poff, const uint8_t *p) noexcept nogil:
    """The TCP event of a walked segment (p: the packet's bytes, at poff in the batch)."""
    memset(e, 0, sizeof(TcpEvent))
    # a copy of a size the compiler sees (as _copy_addrs': the run-time lengths were ~3 ms of
    # a TLS bench run's walk with the exchange stage)
    if l.payload_caplen >= 8:
        memcpy(e.head, p + l.payload_off, 8)
    elif l.payload_caplen:
        memcpy(e.head, p + l.payload_off, l.payload_caplen)
    e.ts_ns = ts
    e.pkt_index = index
    e.payload_at = poff + l.payload_off
    e.payload_caplen = l.payload_caplen
    _copy_addrs(e.src, e.dst, l)
    e.seq = l.seq
    e.ack = l.ack
    e.payload_len = l.payload_len
    e.src_port = l.src_port
    e.dst_port = l.dst_port
    e.tcp_flags = l.tcp_flags
    e.ip_version = l.ip_version
    e.window = l.window


def tcp_event_size():
    """sizeof(TcpEvent) (ext/walk/message.pxd)."""
    return sizeof(TcpEvent)


def dissect_batch(packets, const uint8_t[::1] data, reasons=None, tls_watch=None,
                  int tcp_events=0, events_out=None, tls_out=None, segment_tap=None):
    """Dissect one packet batch.

    packets: 1-D array of PACKET_DTYPE; packet i's bytes are data[offset : offset + caplen].
    data: the batch's byte buffer (uint8, contiguous; read-only buffers are fine).
    reasons: optional uint8 array of len(packets) that receives each packet's DissectReason.

    tls_watch: the TLS stage's watch list (ext/tls/tls.pyx TlsTable.watch, a capsule): the same walk
    then also finds the TLS stage's messages (MSG_TLS, MSG_QUIC), returned as a third item. Each
    call is one batch of the watch list's numbering: the stage is to be fed these messages, in
    the order of the calls, and may be fed them while later batches are walked in another thread
    (ext/tls/tlswatch.h).

    Returns (msgs, counters): msgs, a view of a MESSAGE_DTYPE array holding one HttpMsg per HTTP
    first packet, then one per message that starts after another's end in the same segment
    (_more_messages), in packet order and, within a packet, in byte order; counters, a uint64
    array indexed by DissectReason. A PacketRef whose bytes lie (partly) outside `data` is
    dissected over the bytes that exist. With tls_watch: (msgs, counters, tls_msgs), tls_msgs in
    packet order (the HTTP counters are those of the walk without it). With tcp_events: (msgs,
    counters, tls_msgs or None, events), events a uint8 array of TcpEvent records
    (ext/walk/message.pxd), one per TCP segment, in packet order. events_out: a uint8 array
    the events are written into when it holds one per packet (the events returned are then a
    view of it: webtap.dissect.EventBuffers reuses warm buffers), else a new array. tls_out: likewise for the TLS stage's messages (a
    uint8 array of at least one HttpMsg per packet; the tls_msgs returned are then a view of it,
    webtap.dissect.TlsMessageBuffers), else a new array. segment_tap: a stage the walk runs
    itself (a capsule of ext/walk/message.pxd SegmentTap, e.g. the TLS exchange stage's
    ExchangeTable.tap), called with each TCP segment that carries payload, FIN or RST, in packet
    order, as the walk dissects it; it adds nothing to the result.
    """
    cdef cnp.ndarray pk = _as_packets(packets)
    cdef Py_ssize_t n = pk.shape[0], i = 0, k = 0, k0, j
    # Room for one message per packet and a few segments' worth of messages after a first one;
    # grown (outside the nogil loop) when a packet could hold more than what is left.
    cdef Py_ssize_t cap = n + 2048
    cdef cnp.ndarray out = np.empty(cap, dtype=_MESSAGE_DTYPE)   # every row used is cleared by _clear_msg
    cdef cnp.ndarray counters = np.zeros(<int>DR_N, dtype=np.uint64)
    cdef const PacketRef *refs = <const PacketRef *>cnp.PyArray_DATA(pk)
    cdef HttpMsg *msgs = <HttpMsg *>cnp.PyArray_DATA(out)
    cdef uint64_t *cnt = <uint64_t *>cnp.PyArray_DATA(counters)
    cdef uint8_t[::1] rs
    cdef uint8_t *rsp = NULL
    cdef uint64_t size = data.shape[0], caplen = 0, poff
    cdef const uint8_t *base = &data[0] if size > 0 else NULL
    cdef uint32_t ltl = 0
    cdef int r
    cdef L34 l
    cdef BodyInfo bi
    cdef TlsWatch *w = NULL
    cdef cnp.ndarray tout = None
    cdef HttpMsg *tm = NULL
    cdef Py_ssize_t kt = 0
    cdef cnp.ndarray eout = None
    cdef TcpEvent *ev = NULL
    cdef Py_ssize_t ke = 0
    cdef SegmentTap *tap = NULL
    cdef TcpEvent te
    if segment_tap is not None:
        tap = <SegmentTap *>PyCapsule_GetPointer(segment_tap, b"webtap.SegmentTap")
    if tcp_events:
        if (events_out is not None and isinstance(events_out, cnp.ndarray)
                and (<cnp.ndarray>events_out).dtype == np.uint8 and (<cnp.ndarray>events_out).ndim == 1
                and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>events_out)
                and cnp.PyArray_ISWRITEABLE(<cnp.ndarray>events_out)
                and (<cnp.ndarray>events_out).shape[0] >= n * <Py_ssize_t>sizeof(TcpEvent)):
            eout = events_out
        else:
            eout = np.empty(n * sizeof(TcpEvent), dtype=np.uint8)
        ev = <TcpEvent *>cnp.PyArray_DATA(eout)
    if tls_watch is not None:
        w = <TlsWatch *>PyCapsule_GetPointer(tls_watch, b"webtap.TlsWatch")
        with nogil:
            tls_watch_begin(w)          # the stage's newest publication (ext/tls/tlswatch.h)
        if (tls_out is not None and isinstance(tls_out, cnp.ndarray)
                and (<cnp.ndarray>tls_out).dtype == np.uint8 and (<cnp.ndarray>tls_out).ndim == 1
                and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>tls_out)
                and cnp.PyArray_ISWRITEABLE(<cnp.ndarray>tls_out)
                and (<size_t>cnp.PyArray_DATA(<cnp.ndarray>tls_out)) % 8 == 0
                and (<cnp.ndarray>tls_out).shape[0] >= n * <Py_ssize_t>sizeof(HttpMsg)):
            tout = tls_out
        else:
            tout = np.empty(n * sizeof(HttpMsg), dtype=np.uint8)
        tm = <HttpMsg *>cnp.PyArray_DATA(tout)
    if reasons is not None:
        rs = reasons
        if rs.shape[0] != n:
            raise ValueError("reasons must have one entry per packet")
        if n > 0:
            rsp = &rs[0]
    while True:
        with nogil:
            while i < n:
                caplen = batch_caplen(refs, i, n, base, size)
                if cap - k < 1 + <Py_ssize_t>(caplen // 5):
                    break                           # grow first (below), then this packet
                poff = refs[i].offset
                bi.hdr_end = 0
                if caplen == 0:
                    r = DR_LINK_TRUNCATED
                else:
                    r = _dissect_packet(base + poff, <uint32_t>caplen, refs[i].linktype, &msgs[k], &ltl, cnt, &l, &bi)
                    if ev != NULL and l.tcp_ok:
                        _tcp_event(&ev[ke], &l, refs[i].ts_ns, refs[i].index, poff, base + poff)
                        ke += 1
                    if tap != NULL and l.tcp_ok and (l.payload_len != 0 or (l.tcp_flags & 0x05) != 0):
                        _tcp_event(&te, &l, refs[i].ts_ns, refs[i].index, poff, base + poff)
                        tap.segment(tap.state, &te, base, size)
                    if w != NULL and _tls_message(base + poff, <uint32_t>caplen, refs[i].linktype, r, &l, w, &tm[kt]):
                        tm[kt].ts_ns = refs[i].ts_ns
                        tm[kt].pkt_index = refs[i].index
                        tm[kt].pkt_offset = poff
                        tm[kt].linktype = refs[i].linktype
                        kt += 1
                cnt[<int>DR_PACKETS] += 1
                cnt[r] += 1
                if rsp != NULL:
                    rsp[i] = <uint8_t>r
                if r == DR_HTTP_REQUEST or r == DR_HTTP_RESPONSE:
                    msgs[k].ts_ns = refs[i].ts_ns
                    msgs[k].pkt_index = refs[i].index
                    msgs[k].pkt_offset = poff
                    msgs[k].linktype = refs[i].linktype
                    cnt[<int>DR_LINE_TOO_LONG] += ltl
                    k0 = k
                    k += 1
                    if bi.hdr_end != 0:
                        k = _more_messages(base + poff, &l, msgs, k, cap, &bi, cnt, 0)
                    for j in range(k0, k):
                        _count_msg(cnt, &msgs[j])
                elif r == DR_NOT_HTTP:
                    k0 = k
                    k = _after_continuation(base + poff, &l, msgs, k, cap, &bi, cnt, &refs[i])
                    for j in range(k0, k):
                        _count_msg(cnt, &msgs[j])
                i += 1
        if i >= n:
            break
        cap = max(2 * cap, k + 1 + <Py_ssize_t>(caplen // 5) + (n - i))
        grown = np.empty(cap, dtype=_MESSAGE_DTYPE)
        grown[:k] = out[:k]
        out = grown
        msgs = <HttpMsg *>cnp.PyArray_DATA(out)
    if w != NULL:
        tout = tout[:kt * <Py_ssize_t>sizeof(HttpMsg)].view(_MESSAGE_DTYPE)
    if ev != NULL:
        return out[:k], counters, (tout if w != NULL else None), eout[:ke * sizeof(TcpEvent)]
    if w != NULL:
        return out[:k], counters, tout
    return out[:k], counters


def l34_batch(packets, const uint8_t[::1] data):
    """The link/IP/TCP walk (ext/walk/l34.pxd) of every packet of a batch (tests, tools): a
    structured array with, per packet, the walk's result (a DissectReason, or 255 for a TCP
    segment with payload), tcp_ok, the encapsulation layers, the innermost ports, sequence
    number, payload length on the wire, IP version and the tunnel id."""
    cdef cnp.ndarray pk = _as_packets(packets)
    cdef Py_ssize_t n = pk.shape[0], i
    dt = np.dtype([("reason", "u1"), ("tcp_ok", "u1"), ("ip_version", "u1"), ("encap_depth", "u1"),
                   ("src_port", "<u2"), ("dst_port", "<u2"), ("seq", "<u4"), ("payload_len", "<u4"),
                   ("tunnel_id", "<u4"), ("encap", "<u8")])
    out = np.zeros(n, dtype=dt)
    cdef const PacketRef *refs = <const PacketRef *>cnp.PyArray_DATA(pk)
    cdef uint64_t size = data.shape[0], caplen
    cdef const uint8_t *base = &data[0] if size > 0 else NULL
    cdef uint8_t[::1] reason = out["reason"].copy()
    cdef uint8_t[::1] ok = out["tcp_ok"].copy()
    cdef uint8_t[::1] ipv = out["ip_version"].copy()
    cdef uint8_t[::1] dep = out["encap_depth"].copy()
    cdef uint16_t[::1] sp = out["src_port"].copy()
    cdef uint16_t[::1] dp = out["dst_port"].copy()
    cdef uint32_t[::1] sq = out["seq"].copy()
    cdef uint32_t[::1] pl = out["payload_len"].copy()
    cdef uint32_t[::1] tid = out["tunnel_id"].copy()
    cdef uint64_t[::1] enc = out["encap"].copy()
    cdef L34 l
    cdef int r
    with nogil:
        for i in range(n):
            caplen = batch_caplen(refs, i, n, base, size)
            if caplen == 0:
                reason[i] = DR_LINK_TRUNCATED
                continue
            r = l34_parse(base + refs[i].offset, <uint32_t>caplen, refs[i].linktype, &l, &_tunnel_cfg)
            reason[i] = 255 if r == L34_DATA else <uint8_t>r
            ok[i] = l.tcp_ok
            dep[i] = l.encap_depth
            enc[i] = l.encap
            tid[i] = l.tunnel_id
            if l.tcp_ok:
                ipv[i] = l.ip_version
                sp[i] = l.src_port
                dp[i] = l.dst_port
                sq[i] = l.seq
                pl[i] = l.payload_len
    for name, col in (("reason", reason), ("tcp_ok", ok), ("ip_version", ipv), ("encap_depth", dep),
                      ("src_port", sp), ("dst_port", dp), ("seq", sq), ("payload_len", pl),
                      ("tunnel_id", tid), ("encap", enc)):
        out[name] = np.asarray(col)
    return out


def parse_http_payload(const uint8_t[::1] payload, wire_len=None):
    """Classify and parse one TCP payload (test helper): returns (reason, HttpMsg record).

    Spans are relative to the start of `payload`; wire_len defaults to len(payload).
    """
    cdef cnp.ndarray out = np.zeros(1, dtype=_MESSAGE_DTYPE)
    cdef HttpMsg *m = <HttpMsg *>cnp.PyArray_DATA(out)
    cdef uint32_t n = payload.shape[0], wl, ltl = 0
    cdef int r
    cdef BodyInfo bi
    wl = n if wire_len is None else wire_len
    _clear_msg(m)
    if n == 0:
        return DR_NO_PAYLOAD, out[0]
    with nogil:
        m.payload_len = wl
        m.payload_caplen = n
        if n < wl:
            m.flags |= MSGF_PAYLOAD_TRUNCATED
        r = _parse_http(&payload[0], 0, n, wl, m, &ltl, &bi)
    return r, out[0]


# ---------------------------------------------------------------------------------------------
# Strings out: one span column -> pyarrow string array, built in C.
# ---------------------------------------------------------------------------------------------
cdef enum:
    TEXT_UTF8 = 0      # valid UTF-8 kept; every byte not part of a valid sequence -> U+FFFD
    TEXT_TSHARK = 1    # tshark 4.0's ENC_ASCII: every byte >= 0x80 -> U+FFFD; NUL ends the text

_TEXT_MODES = {"replace": TEXT_UTF8, "tshark": TEXT_TSHARK}


cdef uint64_t _text_len(const uint8_t *s, uint32_t n, int mode) noexcept nogil:
    """Bytes the repaired text of s[0:n] takes."""
    cdef uint32_t i = 0, q
    cdef uint64_t out = 0
    while i < n:
        if mode == TEXT_TSHARK:
            if s[i] == 0:
                break
            out += 1 if s[i] < 0x80 else 3
            i += 1
        else:
            q = <uint32_t>wt_utf8_seq(s + i, n - i)
            if q == 0:
                out += 3
                i += 1
            else:
                out += q
                i += q
    return out


cdef uint64_t _text_copy(const uint8_t *s, uint32_t n, int mode, uint8_t *dst) noexcept nogil:
    cdef uint32_t i = 0, q
    cdef uint64_t o = 0
    while i < n:
        if mode == TEXT_TSHARK:
            if s[i] == 0:
                break
            q = 1 if s[i] < 0x80 else 0
        else:
            q = <uint32_t>wt_utf8_seq(s + i, n - i)
        if q == 0:
            dst[o] = 0xEF
            dst[o + 1] = 0xBF
            dst[o + 2] = 0xBD
            o += 3
            i += 1
        else:
            memcpy(dst + o, s + i, q)
            o += q
            i += q
    return o


def span_to_arrow(msgs, const uint8_t[::1] data, str field, str errors="replace"):
    """One Span field of a message batch as a pyarrow string array (null where the span is empty).

    msgs: MESSAGE_DTYPE array whose pkt_offset values index `data` (the batch buffer).
    errors: "replace" keeps valid UTF-8 and turns each byte that is not part of a valid sequence
    into U+FFFD; "tshark" reproduces tshark 4.0's -T fields text (every byte >= 0x80 becomes
    U+FFFD, a NUL byte ends the string).
    Offsets and data buffers are built in C; the result is int32-offset `string` when the text
    fits, `large_string` otherwise.
    """
    import pyarrow as pa
    if field not in _MESSAGE_DTYPE.fields or _MESSAGE_DTYPE.fields[field][0].names != ("off", "len"):
        raise KeyError(f"{field!r} is not a Span field of HttpMsg")
    if errors not in _TEXT_MODES:
        raise ValueError(f"errors must be one of {sorted(_TEXT_MODES)}")
    cdef int mode = _TEXT_MODES[errors]
    arr = np.asarray(msgs)
    if arr.dtype != _MESSAGE_DTYPE or arr.ndim != 1:
        raise TypeError("msgs must be a 1-D MESSAGE_DTYPE array")
    arr = np.ascontiguousarray(arr)
    cdef cnp.ndarray ma = arr
    cdef Py_ssize_t n = ma.shape[0], i
    cdef size_t field_off = _MESSAGE_DTYPE.fields[field][1]
    cdef const uint8_t *mbase = <const uint8_t *>cnp.PyArray_DATA(ma)
    cdef const HttpMsg *mm
    cdef const Span *sp
    cdef uint64_t size = data.shape[0], total = 0, o, poff
    cdef const uint8_t *dbase = &data[0] if size > 0 else NULL
    cdef cnp.ndarray lens = np.zeros(n, dtype=np.uint64)
    cdef uint64_t *lp = <uint64_t *>cnp.PyArray_DATA(lens)
    cdef cnp.ndarray valid = np.zeros((n + 7) // 8 if n > 0 else 1, dtype=np.uint8)
    cdef uint8_t *vp = <uint8_t *>cnp.PyArray_DATA(valid)
    cdef Py_ssize_t nulls = 0
    with nogil:
        for i in range(n):
            mm = <const HttpMsg *>(mbase + i * sizeof(HttpMsg))
            sp = <const Span *>(mbase + i * sizeof(HttpMsg) + field_off)
            poff = mm.pkt_offset
            if sp.len == 0 or poff + sp.off + sp.len > size:
                lp[i] = 0
                nulls += 1
                continue
            vp[i >> 3] |= <uint8_t>(1 << (i & 7))
            lp[i] = _text_len(dbase + poff + sp.off, sp.len, mode)
            total += lp[i]
    cdef bint large = total > 0x7FFFFFFF
    cdef cnp.ndarray offsets = np.zeros(n + 1, dtype=np.int64 if large else np.int32)
    cdef cnp.ndarray text = np.empty(total if total > 0 else 1, dtype=np.uint8)
    cdef int64_t *o64 = <int64_t *>cnp.PyArray_DATA(offsets)
    cdef int *o32 = <int *>cnp.PyArray_DATA(offsets)
    cdef uint8_t *tp = <uint8_t *>cnp.PyArray_DATA(text)
    with nogil:
        o = 0
        for i in range(n):
            if lp[i] > 0:
                mm = <const HttpMsg *>(mbase + i * sizeof(HttpMsg))
                sp = <const Span *>(mbase + i * sizeof(HttpMsg) + field_off)
                o += _text_copy(dbase + mm.pkt_offset + sp.off, sp.len, mode, tp + o)
            if large:
                o64[i + 1] = o
            else:
                o32[i + 1] = <int>o
    typ = pa.large_string() if large else pa.string()
    return pa.Array.from_buffers(
        typ, n, [pa.py_buffer(valid) if nulls else None, pa.py_buffer(offsets), pa.py_buffer(text)],
        null_count=nulls)


cdef object _ip_column(const uint8_t *addr, Py_ssize_t astride, const uint8_t *ver,
                       Py_ssize_t vstride, Py_ssize_t n, bint zero_is_null):
    """n addresses (16 bytes each at addr + i * astride, IPv4 in the first 4) as a pyarrow
    string array, by the version byte at ver + i * vstride (ext/common/util.h wt_ip_text: dotted
    quad, RFC 5952); version 0 is null when zero_is_null."""
    import pyarrow as pa
    cdef cnp.ndarray offsets = np.zeros(n + 1, dtype=np.int32)
    cdef cnp.ndarray text = np.empty(n * 46 + 1, dtype=np.uint8)   # INET6_ADDRSTRLEN = 46
    cdef cnp.ndarray valid = np.zeros((n + 7) // 8 if n > 0 else 1, dtype=np.uint8)
    cdef uint8_t *vp = <uint8_t *>cnp.PyArray_DATA(valid)
    cdef int *op = <int *>cnp.PyArray_DATA(offsets)
    cdef char *tp = <char *>cnp.PyArray_DATA(text)
    cdef int o = 0, ln, v
    cdef Py_ssize_t nulls = 0, i
    cdef char buf[WT_IP_TEXT]
    with nogil:
        for i in range(n):
            v = ver[i * vstride]
            buf[0] = 0
            if zero_is_null and v == 0:
                nulls += 1
            else:
                vp[i >> 3] |= <uint8_t>(1 << (i & 7))
                wt_ip_text(addr + i * astride, v != 4, buf)
            ln = 0
            while buf[ln] != 0:
                tp[o + ln] = buf[ln]
                ln += 1
            o += ln
            op[i + 1] = o
    return pa.Array.from_buffers(pa.string(), n, [pa.py_buffer(valid) if nulls else None,
                                                  pa.py_buffer(offsets), pa.py_buffer(text[:o])],
                                 null_count=nulls)


def ip_to_arrow(msgs, str field):
    """src_ip, dst_ip, outer_src or outer_dst of a message batch as a pyarrow string array
    (dotted quad, RFC 5952 for IPv6: ext/common/util.h wt_ip_text); outer_* is null where the message
    has no outer IP header."""
    if field not in ("src_ip", "dst_ip", "outer_src", "outer_dst"):
        raise KeyError(field)
    arr = np.ascontiguousarray(np.asarray(msgs))
    if arr.dtype != _MESSAGE_DTYPE or arr.ndim != 1:
        raise TypeError("msgs must be a 1-D MESSAGE_DTYPE array")
    cdef cnp.ndarray ma = arr
    cdef bint outer = field.startswith("outer")
    cdef const uint8_t *mbase = <const uint8_t *>cnp.PyArray_DATA(ma)
    cdef size_t voff = _MESSAGE_DTYPE.fields["outer_ip_version" if outer else "ip_version"][1]
    return _ip_column(mbase + <size_t>_MESSAGE_DTYPE.fields[field][1], sizeof(HttpMsg),
                      mbase + voff, sizeof(HttpMsg), ma.shape[0], outer)


def ip_text(addrs, versions):
    """Addresses as a pyarrow string array: addrs an n x 16 uint8 array (IPv4 in the first 4
    bytes, the layout of every record kind's address fields), versions n values 4 or 6. The
    text every record kind's address columns carry (ext/common/util.h wt_ip_text)."""
    a = np.ascontiguousarray(addrs, dtype=np.uint8)
    v = np.ascontiguousarray(versions, dtype=np.uint8)
    if a.ndim != 2 or a.shape[1] != 16 or v.ndim != 1 or v.shape[0] != a.shape[0]:
        raise ValueError("addrs must be n x 16 uint8 and versions n values")
    cdef cnp.ndarray aa = a, va = v
    return _ip_column(<const uint8_t *>cnp.PyArray_DATA(aa), 16,
                      <const uint8_t *>cnp.PyArray_DATA(va), 1, a.shape[0], False)
