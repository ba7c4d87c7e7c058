# cython: freethreading_compatible = False
"""URL analyzer and session controller of the pass-by filter (issue 8; PAPERS.md section 2).

Three nogil passes over one batch, driven by urlfilter.analyzer.UrlAnalyzer:

* ``ConnTable.feed(packets, data)``: link -> IP -> TCP of every packet, SYN / SYN-ACK / ACK and
  first request / response payload times per connection (open-addressing hash table keyed by the
  4-tuple in the SYN's direction). The timing condition reads it.
* ``extract(msgs, data, verify)``: every GET of the dissector's message batch (any port) becomes a
  URL in the tree's *key form* (ext/url/urlcanon.h) built straight from the packet bytes: origin-form
  ``Host + URI``, or the URI alone when it is absolute-form. Everything skipped is counted by
  FilterReason (ext/url/urlmatch.pxd). The keys go to ``UrlTree.match_batch(canonical=False)`` in one
  call per batch.
* ``forge(msgs, data, rows)``: for each hit, a FIN+ACK server -> client and an RST+ACK client ->
  server, written into one buffer (frames back to back, offsets beside them).

Why Linux accepts the forged segments
-------------------------------------
Let the request segment carry SEQ=s, ACK=a, payload length L (plus 1 if it had FIN set).

* FIN+ACK to the client: source = server address/port, ``seq = a`` and ``ack = s + L``. The client's
  ACK field a is, by definition, the next byte it expects from the server, i.e. its RCV.NXT when the
  request left (the server has not sent anything since: it is still reading the request). RFC 793 /
  RFC 9293 accept a segment whose seq lies in [RCV.NXT, RCV.NXT + RCV.WND); seq == RCV.NXT is the
  one value that is always in window, even with a zero window, and the FIN is processed in order at
  once (tcp_validate_incoming -> tcp_sequence() then tcp_fin()). ``ack = s + L`` acknowledges exactly
  the bytes the client has sent, so the ACK check (SND.UNA <= ack <= SND.NXT, RFC 5961 section 5)
  passes; an ACK beyond SND.NXT would be dropped with a challenge ACK.
* RST+ACK to the server: source = client, ``seq = s + L``. After the request arrives the server's
  RCV.NXT is exactly s + L. RFC 5961 section 3 (Linux: tcp_validate_incoming, "RFC 5961 3.2") resets
  the connection only when seq == RCV.NXT; any other in-window value draws a challenge ACK and the
  connection lives on. That is why the RST must be forged from the request itself (not from an
  earlier packet) and after the whole first request segment: the seq then equals what the server
  expects as long as the request fits in one segment, which is the case the paper targets. ``ack``
  is a (the server's SND.NXT); RST with ACK set is what a stack sends for an established connection.
* If the request had not reached the server (bad checksum, dropped), s + L would be ahead of the
  server's RCV.NXT and the RST would only draw a challenge ACK: so extract() verifies the IPv4 and
  TCP checksums of the request and skips packets that fail (FR_BAD_CHECKSUM).

Other fields: IPv4 without options, ID 0, DF, TTL 64 (Linux's default; the real path length is
unknown), IPv6 with hop limit 64 and flow label 0; TCP without options, window = the request's
window for the FIN (a window the peer just advertised is plausible in either direction) and 0 for
the RST (what Linux puts in its own resets). The link header (Ethernet, with every VLAN tag, or
any other link type) is copied from the request; for Ethernet the two MAC addresses are swapped
in the frame that goes to the client.

Link/IP/TCP parsing is ext/walk/l34.pxd, the walk ext/walk/dissect.pyx and the feeder's reader use: the
same rules everywhere (VLAN tags, IPv6 extension headers, IP fragments skipped).
"""
from libc.stddef cimport ptrdiff_t
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcmp, memcpy, memset
from util cimport wt_alloc, wt_now_ns, wt_realloc, wt_zalloc, wt_prefetch_keep, wt_u32_dec

import numpy as np

# the NumPy mirrors of the structs this module reads (the core's one home for them; it imports
# numpy only)
from webtap.records.message import MESSAGE_DTYPE as _MESSAGE_DTYPE

from packet cimport PacketRef, LINKTYPE_ETHERNET
from l34 cimport l34_shared_cfg, L34, L34Cfg, L34_MAX_UDP_PORTS, L34_DATA, be16, be32, l34_parse, l34_msg_encap
from message cimport DR_NOT_TCP
from message cimport (
    HttpMsg, TcpEvent, MSG_REQUEST, MSG_TLS, MSG_QUIC, METHOD_GET, MSGF_URI_TRUNCATED,
    MSGF_HEADERS_INCOMPLETE, MSGF_PAYLOAD_TRUNCATED,
)
from urlcanon cimport CANON_KEY, webtap_canon, webtap_key_flip, webtap_host_len
from urlmatch cimport (
    ConnTiming, CS_SYN, CS_SYNACK, CS_ACK, CS_REQ, CS_RESP,
    FR_MESSAGES, FR_NOT_REQUEST, FR_NOT_GET, FR_GET, FR_URI_TRUNCATED, FR_NO_HOST, FR_HOST_LATER,
    FR_BAD_TARGET, FR_BAD_CHECKSUM, FR_CHECKSUM_UNVERIFIED, FR_CANON_FAILED, FR_ABSOLUTE_FORM,
    FR_EXTRACTED, FR_N,
)

FILTER_REASONS = ("messages", "not_request", "not_get", "get", "uri_truncated", "no_host",
                  "host_later", "bad_target", "bad_checksum", "checksum_unverified",
                  "canon_failed", "absolute_form", "extracted")
assert len(FILTER_REASONS) == FR_N

cdef enum:
    MAX_URL = 8192            # Host + URI longer than this are not matched (FR_CANON_FAILED)
    FORGE_TTL = 64



def sizeof_conn_timing():
    return sizeof(ConnTiming)


def sizeof_http_msg():
    return sizeof(HttpMsg)


def sizeof_packet_ref():
    return sizeof(PacketRef)


cdef inline void _put16(uint8_t *p, uint16_t v) noexcept nogil:
    p[0] = v >> 8
    p[1] = v & 0xFF


cdef inline void _put32(uint8_t *p, uint32_t v) noexcept nogil:
    p[0] = v >> 24
    p[1] = (v >> 16) & 0xFF
    p[2] = (v >> 8) & 0xFF
    p[3] = v & 0xFF


# ---------------------------------------------------------------------------------------------
# Checksums (RFC 1071 one's complement sum)
# ---------------------------------------------------------------------------------------------
cdef inline uint32_t _sum(const uint8_t *p, size_t n, uint32_t acc) noexcept nogil:
    cdef size_t i = 0
    while i + 1 < n:
        acc += (<uint32_t>p[i] << 8) | p[i + 1]
        i += 2
    if i < n:
        acc += <uint32_t>p[i] << 8
    return acc


cdef inline uint16_t _fold(uint32_t acc) noexcept nogil:
    while acc >> 16:
        acc = (acc & 0xFFFF) + (acc >> 16)
    return <uint16_t>(~acc & 0xFFFF)


cdef uint32_t _pseudo(int ver, const uint8_t *src, const uint8_t *dst, uint32_t tcp_len) noexcept nogil:
    """Sum of the TCP pseudo-header (RFC 9293 3.1 / RFC 8200 8.1)."""
    cdef uint32_t acc = 0
    if ver == 4:
        acc = _sum(src, 4, acc)
        acc = _sum(dst, 4, acc)
    else:
        acc = _sum(src, 16, acc)
        acc = _sum(dst, 16, acc)
    acc += 6
    acc += tcp_len & 0xFFFF
    acc += tcp_len >> 16
    return acc


# User-named UDP tunnel ports: the one setting in ext/walk/dissect.pyx (webtap.dissect.set_tunnel_ports).
cdef const L34Cfg *_tunnel_cfg = l34_shared_cfg()


# ---------------------------------------------------------------------------------------------
# Link -> IP -> TCP of one packet, for the handshake table
# ---------------------------------------------------------------------------------------------
cdef inline int _locate(const uint8_t *p, uint32_t caplen, uint16_t linktype, L34 *s) noexcept nogil:
    """Fill *s for a TCP segment whose fixed header is in the capture (ext/walk/l34.pxd: the
    dissector's own walk, so both take the same packets for TCP). Returns 0, or -1 for anything
    else (not TCP, truncated, fragment). TCP options cut by the snaplen do not matter here."""
    l34_parse(p, caplen, linktype, s, _tunnel_cfg)
    return 0 if s.tcp_ok else -1



# ---------------------------------------------------------------------------------------------
# Handshake table
# ---------------------------------------------------------------------------------------------
cdef inline uint64_t _mix(uint64_t h, uint64_t v) noexcept nogil:
    h ^= v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2)
    return h


cdef uint64_t _hash(const uint8_t *cip, const uint8_t *sip, uint16_t cport, uint16_t sport) noexcept nogil:
    cdef uint64_t h = 0x84222325CBF29CE4ULL, a, b
    cdef int i
    for i in range(0, 16, 8):
        memcpy(&a, cip + i, 8)
        memcpy(&b, sip + i, 8)
        h = _mix(h, a)
        h = _mix(h, b)
    h = _mix(h, (<uint64_t>cport << 16) | sport)
    h ^= h >> 33
    h *= 0xFF51AFD7ED558CCDULL
    h ^= h >> 33
    return h


cdef class ConnTable:
    """Per-connection handshake and first-payload times, in C (ConnTiming, ext/url/urlmatch.pxd).

    Open addressing with linear probing, at most half full; when it would pass that, the table is
    rebuilt at twice the size, dropping connections idle for more than ``idle_ns`` of capture
    time (0 keeps everything, as the offline timing report wants).
    """
    cdef ConnTiming *slots
    cdef size_t cap, used
    cdef readonly int64_t idle_ns
    cdef readonly uint64_t evicted
    cdef readonly uint64_t packets_walked   # packets this table walked itself (feed)

    def __cinit__(self, size_t capacity=4096, int64_t idle_ns=0):
        cdef size_t c = 1024
        while c < capacity:
            c <<= 1
        self.slots = <ConnTiming *>wt_zalloc(c, sizeof(ConnTiming))
        self.cap = c
        self.used = 0
        self.idle_ns = idle_ns

    def __dealloc__(self):
        free(self.slots)

    def __len__(self):
        return self.used

    cdef ConnTiming *_find(self, const uint8_t *cip, const uint8_t *sip, uint16_t cport,
                           uint16_t sport, int ver, bint create) noexcept nogil:
        cdef size_t mask = self.cap - 1, i
        cdef size_t alen = 4 if ver == 4 else 16
        cdef ConnTiming *e
        cdef uint8_t ca[16]
        cdef uint8_t sa[16]
        memset(ca, 0, 16)
        memset(sa, 0, 16)
        memcpy(ca, cip, alen)
        memcpy(sa, sip, alen)
        i = _hash(ca, sa, cport, sport) & mask
        while True:
            e = &self.slots[i]
            if e.ip_version == 0:
                if not create:
                    return NULL
                memcpy(e.client_ip, ca, 16)
                memcpy(e.server_ip, sa, 16)
                e.client_port = cport
                e.server_port = sport
                e.ip_version = <uint8_t>ver
                self.used += 1
                return e
            if (e.client_port == cport and e.server_port == sport and e.ip_version == ver
                    and memcmp(e.client_ip, ca, 16) == 0 and memcmp(e.server_ip, sa, 16) == 0):
                return e
            i = (i + 1) & mask

    cdef int _rebuild(self, int64_t now) except -1 nogil:
        """Grow to twice the size, keeping connections active within idle_ns. Returns 0."""
        cdef ConnTiming *old = self.slots
        cdef size_t oldcap = self.cap, i, keep = 0, c
        cdef ConnTiming *e
        for i in range(oldcap):
            if old[i].ip_version and (self.idle_ns == 0 or now - old[i].t_last <= self.idle_ns):
                keep += 1
        c = 1024
        while c < 4 * keep + 4:
            c <<= 1
        self.slots = <ConnTiming *>wt_zalloc(c, sizeof(ConnTiming))   # raises: slots stay old
        self.cap = c
        self.used = 0
        for i in range(oldcap):
            if old[i].ip_version == 0:
                continue
            if self.idle_ns and now - old[i].t_last > self.idle_ns:
                self.evicted += 1
                continue
            e = self._find(old[i].client_ip, old[i].server_ip, old[i].client_port, old[i].server_port,
                           old[i].ip_version, True)
            memcpy(e, &old[i], sizeof(ConnTiming))
        free(old)
        return 0

    cdef void _update(self, const uint8_t *src, const uint8_t *dst, uint16_t sport, uint16_t dport,
                      uint32_t seq, uint32_t ack, uint8_t flags, uint8_t ipv, uint32_t payload_len,
                      int64_t ts) noexcept nogil:
        """One TCP segment (addresses 4 or 16 bytes as ipv says)."""
        cdef ConnTiming *e
        cdef bint fwd
        if (flags & 0x12) == 0x02:          # SYN without ACK: a new connection
            if 2 * (self.used + 1) > self.cap:
                self._rebuild(ts)
            e = self._find(src, dst, sport, dport, ipv, True)
            if e.state & CS_SYN and e.client_isn != seq:   # port reuse: start over
                memset(&e.state, 0, sizeof(ConnTiming) - (<size_t>&e.state - <size_t>e))
            if not (e.state & CS_SYN):
                e.state = CS_SYN
                e.client_isn = seq
                e.t_syn = ts
            e.t_last = ts
            return
        fwd = True
        e = self._find(src, dst, sport, dport, ipv, False)
        if e == NULL:
            fwd = False
            e = self._find(dst, src, dport, sport, ipv, False)
            if e == NULL:
                return
        e.t_last = ts
        if not fwd:
            if (flags & 0x12) == 0x12:
                if not (e.state & CS_SYNACK) and ack == e.client_isn + 1:
                    e.state |= CS_SYNACK
                    e.server_isn = seq
                    e.t_synack = ts
            elif payload_len and (e.state & CS_REQ) and not (e.state & CS_RESP):
                e.state |= CS_RESP
                e.t_resp = ts
        else:
            if ((e.state & CS_SYNACK) and not (e.state & CS_ACK) and (flags & 0x10)
                    and ack == e.server_isn + 1):
                e.state |= CS_ACK
                e.t_ack = ts
            if payload_len and not (e.state & CS_REQ):
                e.state |= CS_REQ
                e.t_req = ts

    def feed(self, packets, const uint8_t[::1] data):
        """Update the table with every TCP segment of a packet batch (PACKET_DTYPE array),
        walking the packets itself; feed_events takes them from the dissector's walk."""
        cdef const uint8_t[::1] pk = np.ascontiguousarray(packets).view(np.uint8)
        cdef Py_ssize_t n = pk.shape[0] // sizeof(PacketRef), i
        cdef const PacketRef *refs = <const PacketRef *>&pk[0] if n else NULL
        cdef const uint8_t *base = &data[0] if data.shape[0] else NULL
        cdef size_t dlen = data.shape[0]
        cdef L34 s
        self.packets_walked += n
        with nogil:
            for i in range(n):
                if refs[i].offset + refs[i].caplen > dlen:
                    continue
                if _locate(base + refs[i].offset, refs[i].caplen, refs[i].linktype, &s) != 0:
                    continue
                self._update(s.src, s.dst, s.src_port, s.dst_port, s.seq, s.ack, s.tcp_flags,
                             s.ip_version, s.payload_len, refs[i].ts_ns)

    def feed_events(self, const uint8_t[::1] events):
        """Update the table with the TCP segments of a batch as the dissector's walk reported
        them (dissect_batch(tcp_events=True): TcpEvent records, ext/walk/message.pxd)."""
        cdef Py_ssize_t n = events.shape[0] // sizeof(TcpEvent), i
        cdef const TcpEvent *ev = <const TcpEvent *>&events[0] if n else NULL
        with nogil:
            for i in range(n):
                self._update(ev[i].src, ev[i].dst, ev[i].src_port, ev[i].dst_port, ev[i].seq,
                             ev[i].ack, ev[i].tcp_flags, ev[i].ip_version, ev[i].payload_len,
                             ev[i].ts_ns)

    def entries(self):
        """A copy of every connection as a uint8 array of ConnTiming records (see CONN_DTYPE)."""
        out = np.empty(self.used * sizeof(ConnTiming), dtype=np.uint8)
        cdef uint8_t[::1] o = out
        cdef size_t i, k = 0
        with nogil:
            for i in range(self.cap):
                if self.slots[i].ip_version:
                    memcpy(&o[k * sizeof(ConnTiming)], &self.slots[i], sizeof(ConnTiming))
                    k += 1
        return out

    def lookup(self, msgs, rows):
        """ConnTiming records (uint8 array) of the connections of messages msgs[rows] (requests,
        so client -> server direction); ip_version 0 where the handshake was not seen."""
        cdef const uint8_t[::1] mv = _msg_bytes(msgs)
        cdef const int64_t[::1] r = np.ascontiguousarray(rows, dtype=np.int64)
        cdef Py_ssize_t n = r.shape[0], i, nm = mv.shape[0] // sizeof(HttpMsg)
        out = np.zeros(n * sizeof(ConnTiming), dtype=np.uint8)
        cdef uint8_t[::1] o = out
        cdef const HttpMsg *m
        cdef ConnTiming *e
        with nogil:
            for i in range(n):
                if r[i] < 0 or r[i] >= nm:
                    continue
                m = <const HttpMsg *>&mv[r[i] * sizeof(HttpMsg)]
                e = self._find(m.src_ip, m.dst_ip, m.src_port, m.dst_port, m.ip_version, False)
                if e != NULL:
                    memcpy(&o[i * sizeof(ConnTiming)], e, sizeof(ConnTiming))
        return out


cdef const uint8_t[::1] _msg_bytes(msgs) except *:
    arr = np.ascontiguousarray(msgs)
    if arr.dtype.itemsize != sizeof(HttpMsg):
        raise TypeError("msgs must be a MESSAGE_DTYPE array")
    if arr.size == 0:
        return np.zeros(1, np.uint8)[:0]
    return arr.view(np.uint8).reshape(-1)


# ---------------------------------------------------------------------------------------------
# GET extraction
# ---------------------------------------------------------------------------------------------
cdef int _checksum_ok(const uint8_t *p, const HttpMsg *m) noexcept nogil:
    """1 when the IPv4 header checksum and the TCP checksum are right, 0 when one is wrong,
    -1 when the capture is too short to tell (payload cut by the snaplen)."""
    cdef uint32_t hl, tcp_len, acc
    if m.payload_caplen < m.payload_len:
        return -1
    tcp_len = m.payload_off - m.tcp_off + m.payload_len
    if m.ip_version == 4:
        hl = (p[m.ip_off] & 0x0F) * 4
        if _fold(_sum(p + m.ip_off, hl, 0)) != 0:
            return 0
        acc = _pseudo(4, p + m.ip_off + 12, p + m.ip_off + 16, tcp_len)
    else:
        acc = _pseudo(6, p + m.ip_off + 8, p + m.ip_off + 24, tcp_len)
    return 1 if _fold(_sum(p + m.tcp_off, tcp_len, acc)) == 0 else 0


cdef inline bint _is_absolute(const uint8_t *u, uint32_t n) noexcept nogil:
    """scheme "://" at the start of the request-target (RFC 9112 3.2.2 absolute-form)."""
    cdef uint32_t i = 0
    cdef uint8_t c
    if n == 0 or not ((u[0] | 0x20) >= 97 and (u[0] | 0x20) <= 122):
        return False
    while i < n:
        c = u[i]
        if c == 58:     # ':'
            return i + 2 < n and u[i + 1] == 47 and u[i + 2] == 47
        if not ((c | 0x20) >= 97 and (c | 0x20) <= 122 or c >= 48 and c <= 57 or c == 43 or c == 45 or c == 46):
            return False
        i += 1
    return False


def extract(msgs, const uint8_t[::1] data, bint verify_checksums=True):
    """Key-form URLs of the GET requests of one message batch.

    Returns (rows int64, keys uint8, offsets int64, counters uint64[FR_N]): rows[i] is the message
    row of URL i, whose key is keys[offsets[i]:offsets[i+1]]. Only GETs that yield a key are
    returned; every other message is counted under one FilterReason (FILTER_REASONS names them).
    Raises MemoryError only when the key buffer cannot grow.
    """
    cdef const uint8_t[::1] mv = _msg_bytes(msgs)
    cdef Py_ssize_t n = mv.shape[0] // sizeof(HttpMsg), i, k = 0
    cdef const uint8_t *base = &data[0] if data.shape[0] else NULL
    cdef size_t dlen = data.shape[0]
    rows_a = np.empty(n, dtype=np.int64)
    off_a = np.zeros(n + 1, dtype=np.int64)
    cnt_a = np.zeros(FR_N, dtype=np.uint64)
    cdef int64_t[::1] rows = rows_a
    cdef int64_t[::1] offs = off_a
    cdef uint64_t[::1] cnt = cnt_a
    cdef size_t cap = 4096, used = 0, need
    cdef uint8_t *keys = NULL
    cdef uint8_t *scratch = NULL
    cdef const HttpMsg *m
    cdef const uint8_t *p
    cdef const uint8_t *u
    cdef ptrdiff_t r
    cdef int ck
    cdef uint8_t[::1] kv
    try:
        keys = <uint8_t *>wt_alloc(cap)
        scratch = <uint8_t *>wt_alloc(MAX_URL + 16)
        with nogil:
            for i in range(n):
                m = <const HttpMsg *>&mv[i * sizeof(HttpMsg)]
                cnt[<int>FR_MESSAGES] += 1
                if m.kind != MSG_REQUEST:
                    cnt[<int>FR_NOT_REQUEST] += 1
                    continue
                if m.method_id != METHOD_GET:
                    cnt[<int>FR_NOT_GET] += 1
                    continue
                cnt[<int>FR_GET] += 1
                if m.pkt_offset + m.payload_off > dlen:
                    cnt[<int>FR_BAD_TARGET] += 1
                    continue
                p = base + m.pkt_offset
                if m.flags & MSGF_URI_TRUNCATED:
                    cnt[<int>FR_URI_TRUNCATED] += 1
                    continue
                u = p + m.uri.off
                if verify_checksums:
                    ck = _checksum_ok(p, m)
                    if ck == 0:
                        cnt[<int>FR_BAD_CHECKSUM] += 1
                        continue
                    if ck < 0:
                        cnt[<int>FR_CHECKSUM_UNVERIFIED] += 1
                if m.uri.len > 0 and _is_absolute(u, m.uri.len):
                    cnt[<int>FR_ABSOLUTE_FORM] += 1
                    need = m.uri.len
                    if need > MAX_URL:
                        cnt[<int>FR_CANON_FAILED] += 1
                        continue
                    memcpy(scratch, u, need)
                elif m.uri.len > 0 and u[0] == 47:      # origin-form "/..."
                    if m.host.len == 0:
                        if m.flags & MSGF_HEADERS_INCOMPLETE:
                            cnt[<int>FR_HOST_LATER] += 1
                        else:
                            cnt[<int>FR_NO_HOST] += 1
                        continue
                    need = m.host.len + m.uri.len
                    if need > MAX_URL:
                        cnt[<int>FR_CANON_FAILED] += 1
                        continue
                    memcpy(scratch, p + m.host.off, m.host.len)
                    memcpy(scratch + m.host.len, u, m.uri.len)
                else:                                   # "*", authority-form, empty, garbage
                    cnt[<int>FR_BAD_TARGET] += 1
                    continue
                if used + 3 * need + 8 > cap:
                    cap = 2 * cap + 3 * need + 8
                    keys = <uint8_t *>wt_realloc(keys, cap)     # raises; finally frees the old
                r = webtap_canon(scratch, need, keys + used, cap - used, CANON_KEY)
                if r < 0:
                    cnt[<int>FR_CANON_FAILED] += 1
                    continue
                used += r
                rows[k] = i
                k += 1
                offs[k] = used
                cnt[<int>FR_EXTRACTED] += 1
        kb = np.empty(used, dtype=np.uint8)
        kv = kb
        if used:
            memcpy(&kv[0], keys, used)
        return rows_a[:k].copy(), kb, off_a[:k + 1].copy(), cnt_a
    finally:
        free(keys)
        free(scratch)


def flip_keys(const uint8_t[::1] keys, offsets):
    """Key form -> canonical form (host labels back in order) of a batch; a new uint8 array."""
    out = np.array(keys, dtype=np.uint8, copy=True)
    cdef uint8_t[::1] o = out
    cdef const int64_t[::1] off = np.ascontiguousarray(offsets, dtype=np.int64)
    cdef Py_ssize_t i, n = off.shape[0] - 1
    if n > 0 and (off[0] < 0 or off[n] > o.shape[0]):
        raise ValueError("offsets outside the buffer")
    with nogil:
        for i in range(n):
            if off[i + 1] > off[i]:
                webtap_key_flip(&o[off[i]], off[i + 1] - off[i])
    return out


# ---------------------------------------------------------------------------------------------
# Session controller: forge FIN+ACK to the client, RST+ACK to the server
# ---------------------------------------------------------------------------------------------
cdef size_t _forge_pair(const uint8_t *p, const HttpMsg *m, uint8_t *o) noexcept nogil:
    """The FIN+ACK to the client at o and the RST+ACK to the server right after it, for request m
    (packet p); returns the length of one frame (both have it). Layout as in the module docstring.
    The checksums (RFC 1071) are sums of the field values, not of the bytes written: both frames
    carry the same addresses, ports and sequence numbers, swapped, and a one's complement sum
    does not see the order, so one sum serves both frames but for their flags and window.
    The former version built each frame alone and summed the bytes it had just written (most
    likely its vector loads over byte stores still in flight made it slow): 114-119 ns per pair
    against 66-73 now (in-process A/B, bench_sni's rounds and cold caches; identical frames on
    4,000 random hits)."""
    cdef uint32_t link = m.ip_off, ip_len, tcp_at, seq_end, na, acc, ip_sum = 0, k
    cdef uint8_t *f
    cdef bint v4 = m.ip_version == 4
    seq_end = m.seq + m.payload_len + (1 if m.tcp_flags & 0x01 else 0)
    na = 4 if v4 else 16
    ip_len = 20 if v4 else 40
    tcp_at = link + ip_len
    acc = _sum(<const uint8_t *>&m.src_ip[0], na, 0) + _sum(<const uint8_t *>&m.dst_ip[0], na, 0)
    if v4:     # version/IHL, total length 40, ID 0 (allowed with DF, RFC 6864), DF, TTL/protocol
        ip_sum = _fold(acc + 0x4500 + 40 + 0x4000 + ((<uint32_t>FORGE_TTL << 8) | 6))
    # pseudo-header (protocol 6, TCP length 20) + ports + both sequence numbers + data offset
    acc += 6 + 20 + m.src_port + m.dst_port + (seq_end >> 16) + (seq_end & 0xFFFF) \
        + (m.ack >> 16) + (m.ack & 0xFFFF) + 0x5000
    for k in range(2):
        f = o + k * (tcp_at + 20)
        if k == 0 and m.linktype == LINKTYPE_ETHERNET and link >= 12:
            memcpy(f, p + 6, 6)           # to the client: the MAC addresses swapped
            memcpy(f + 6, p, 6)
            memcpy(f + 12, p + 12, link - 12)
        else:
            memcpy(f, p, link)
        if v4:
            _put32(f + link, 0x45000028)
            _put32(f + link + 4, 0x00004000)
            f[link + 8] = FORGE_TTL
            f[link + 9] = 6
            _put16(f + link + 10, ip_sum)
        else:
            _put32(f + link, 0x60000000)
            _put16(f + link + 4, 20)
            f[link + 6] = 6
            f[link + 7] = FORGE_TTL
        if k == 0:     # FIN+ACK from the server to the client
            memcpy(f + link + (12 if v4 else 8), &m.dst_ip[0], na)
            memcpy(f + link + (12 if v4 else 8) + na, &m.src_ip[0], na)
            _put16(f + tcp_at, m.dst_port)
            _put16(f + tcp_at + 2, m.src_port)
            _put32(f + tcp_at + 4, m.ack)
            _put32(f + tcp_at + 8, seq_end)
            f[tcp_at + 13] = 0x11
            _put16(f + tcp_at + 14, m.window)
            _put16(f + tcp_at + 16, _fold(acc + 0x11 + m.window))
        else:          # RST+ACK from the client to the server, window 0
            memcpy(f + link + (12 if v4 else 8), &m.src_ip[0], na)
            memcpy(f + link + (12 if v4 else 8) + na, &m.dst_ip[0], na)
            _put16(f + tcp_at, m.src_port)
            _put16(f + tcp_at + 2, m.dst_port)
            _put32(f + tcp_at + 4, seq_end)
            _put32(f + tcp_at + 8, m.ack)
            f[tcp_at + 13] = 0x14
            _put16(f + tcp_at + 14, 0)
            _put16(f + tcp_at + 16, _fold(acc + 0x14))
        f[tcp_at + 12] = 0x50             # data offset 5 words, no options
        _put16(f + tcp_at + 18, 0)        # urgent pointer
    return tcp_at + 20


def forge(msgs, const uint8_t[::1] data, rows):
    """Forged frames for the requests msgs[rows]: for hit i, frame 2i is the FIN+ACK to the
    client and frame 2i+1 the RST+ACK to the server.

    Returns (frames uint8, offsets int64 [2n+1], forge_ns int64 [n]): forge_ns is the time spent
    forging each pair, from the end of the previous pair (the loop's start for the first) to its
    own end: one clock read per pair, as UrlTree.match_batch times its lookups (a second read
    cost ~20 ns, a sixth of the ~0.13 us a pair took then).
    """
    cdef const uint8_t[::1] mv = _msg_bytes(msgs)
    cdef const int64_t[::1] r = np.ascontiguousarray(rows, dtype=np.int64)
    cdef Py_ssize_t n = r.shape[0], i, nm = mv.shape[0] // sizeof(HttpMsg)
    cdef const uint8_t *base = &data[0] if data.shape[0] else NULL
    cdef size_t dlen = data.shape[0], total = 0, at = 0
    cdef const HttpMsg *m
    cdef const HttpMsg *mn
    for i in range(n):
        if r[i] < 0 or r[i] >= nm:
            raise IndexError(f"row {r[i]} outside the message batch")
        m = <const HttpMsg *>&mv[r[i] * sizeof(HttpMsg)]
        if m.pkt_offset + m.payload_off > dlen or m.ip_version not in (4, 6):
            raise ValueError(f"message row {r[i]} does not point into the data buffer")
        total += 2 * (m.ip_off + 60)
    frames = np.empty(total, dtype=np.uint8)
    offs_a = np.zeros(2 * n + 1, dtype=np.int64)
    ns_a = np.zeros(n, dtype=np.int64)
    cdef uint8_t[::1] f = frames
    cdef int64_t[::1] offs = offs_a
    cdef int64_t[::1] ns = ns_a
    cdef int64_t t0, t1
    cdef size_t k
    with nogil:
        t0 = wt_now_ns()
        for i in range(n):
            m = <const HttpMsg *>&mv[r[i] * sizeof(HttpMsg)]
            if i + 1 < n:        # the next hit's row and frame: -5 % per hit, in-process A/B
                mn = <const HttpMsg *>&mv[r[i + 1] * sizeof(HttpMsg)]
                wt_prefetch_keep(mn)
                wt_prefetch_keep(base + mn.pkt_offset)
            k = _forge_pair(base + m.pkt_offset, m, &f[at])
            offs[2 * i + 1] = at + k
            at += 2 * k
            offs[2 * i + 2] = at
            t1 = wt_now_ns()
            ns[i] = t1 - t0
            t0 = t1
    return frames[:at], offs_a, ns_a


cdef bint _l4_checksum_ok(const uint8_t *p, int ip_off, uint32_t proto_extra) noexcept nogil:
    """IPv4 header and TCP/UDP checksums of a frame whose IP header is at ip_off. _pseudo sums
    the pseudo-header with TCP's protocol number (6); proto_extra adds what another protocol
    needs on top (UDP, 17: 11)."""
    cdef uint32_t hl, l4_len, acc
    if p[ip_off] >> 4 == 4:
        hl = (p[ip_off] & 0x0F) * 4
        if _fold(_sum(p + ip_off, hl, 0)) != 0:
            return False
        l4_len = be16(p + ip_off + 2) - hl
        acc = _pseudo(4, p + ip_off + 12, p + ip_off + 16, l4_len) + proto_extra
    else:
        hl = 40
        l4_len = be16(p + ip_off + 4)
        acc = _pseudo(6, p + ip_off + 8, p + ip_off + 24, l4_len) + proto_extra
    return _fold(_sum(p + ip_off + hl, l4_len, acc)) == 0


def tcp_checksum_ok(const uint8_t[::1] frame, int ip_off):
    """True when the IPv4 header and TCP checksums of a frame (IP at ip_off) are right (tests)."""
    return _l4_checksum_ok(&frame[0], ip_off, 0)

# =============================================================================================
# HTTPS and QUIC (issue 18): the SNI of every ClientHello -> key-form host, QUIC close forge
# =============================================================================================
# One nogil pass over a packet batch (not over the HTTP dissector's messages: a ClientHello is no
# HTTP message). For each TLS ClientHello over TCP (any port; split over segments: reassembled
# in SniTable's bounded table) and each QUIC client Initial (v1/v2; CRYPTO frames gathered over
# packets and datagrams, bounded), the SNI goes through the same canonicaliser as the GET's Host
# (ext/url/urlcanon.h, key form: lower case, trailing dot dropped, IP literals), followed by the
# server's port when it is neither 443 nor 80 (as https://host:8443/ names it), so the tree's domain
# entries cover subdomains and every port, an entry host:port matches that port, and path entries
# never match. The ClientHello parser is tls's
# (ext/tls/tls.pxd); QUIC Initial decryption is ext/tls/quic_crypto.h. Each lookup leaves as one HttpMsg
# row (the packet that completed the ClientHello: addresses, ports, TCP seq/ack/len, for the
# same FIN/RST forge as a GET) plus proto, flags, key and SNI text.
from tls cimport tls_hello, tls_parse_payload, tls_hello_start, TLS_OK, TLS_INCOMPLETE, TLS_TOO_LONG, TLS_HELLO_CAP, TLSF_ECH, tls_parse_hello
from tls cimport (TlsWatch, tls_flow_hash, tls_watch_new, tls_watch_capsule, tls_watch_publish_begin,
                  tls_watch_publish_add, tls_watch_publish_end, tls_watch_udp_take, tls_ja4)
from quic_crypto cimport (
    quic_keys_t, quic_long_hdr_t, quic_parse_long, quic_initial_keys, quic_open_packet,
    QUIC_OK, QUIC_E_VERSION, QUIC_E_DECRYPT, QUIC_E_NOT_LONG, QUIC_PT_INITIAL, QUIC_PT_RETRY,
    QUIC_PT_VERSION_NEG, QUIC_MAX_CID,
)
from digest cimport wt_crypto_no_atexit

wt_crypto_no_atexit()   # no libcrypto clean-up at exit, when first (ext/out/digest.h)
from quic_close cimport quic_forge_close_as, QUIC_CLOSE_MAX
from quic_initial cimport (quic_udp_locate, quic_frame, quic_crypto_frames, quic_frames_put, quic_crypto_whole,
                          quic_frames_message, QF_END, QF_BAD_LENGTH, QUIC_MAX_FRAMES,
                          QUIC_PACKET_FRAMES)
from hellostream cimport (HelloStream, hs_start, hs_offer, hs_may_start, HS_STREAM_CAP, HS_MORE,
                          HS_WHOLE, HS_RETRANSMISSION, HS_GAP, HS_CUT, HS_TOO_LONG, HS_MALFORMED,
                          HS_NOT_HELLO)

SNI_REASONS = ("tls_hello_segments", "tls_split", "tls_bad", "tls_too_long", "tls_gap",
               "tls_bad_checksum", "udp_datagrams", "quic_long", "quic_version_neg", "quic_retry",
               "quic_other_version", "quic_not_initial", "quic_malformed", "quic_undecryptable",
               "quic_initials", "quic_crypto_bad", "quic_hello_bad", "client_hellos", "no_sni",
               "sni_non_ascii", "sni_bad", "ech", "sni_extracted", "quic_server_cid")

cdef enum SniReason:
    SN_TLS_HELLO_SEG = 0   # TCP segments that start a TLS ClientHello record
    SN_TLS_SPLIT           # ClientHellos over TCP completed from more than one segment
    SN_TLS_BAD             # TLS bytes that do not parse as a ClientHello (length, record, type)
    SN_TLS_TOO_LONG        # ClientHello longer than TLS_HELLO_CAP (a 64 KiB SNI), or its records
                           # over HS_STREAM_CAP stream bytes: not matched
    SN_TLS_GAP             # split ClientHello abandoned: a later segment missing or out of order,
                           # cut by the snaplen, the table full, or the connection idle too long
    SN_BAD_CHECKSUM        # completing TCP segment with a wrong checksum (the server drops it)
    SN_UDP                 # UDP datagrams seen
    SN_QUIC_LONG           # QUIC long header packets (coalesced ones counted each)
    SN_QUIC_VN             # version negotiation packets
    SN_QUIC_RETRY          # Retry packets
    SN_QUIC_OTHER_VERSION  # long header of a version without known Initial keys
    SN_QUIC_NOT_INITIAL    # 0-RTT and Handshake packets
    SN_QUIC_MALFORMED      # truncated, CID > 20 bytes, fixed bit 0
    SN_QUIC_UNDECRYPTABLE  # Initial that does not open with the client keys of its DCID (a
                           # server's Initial, a client's after the server answered, or damage)
    SN_QUIC_INITIAL        # client Initials opened
    SN_QUIC_CRYPTO_BAD     # unknown frame, CRYPTO beyond TLS_HELLO_CAP, or table full
    SN_QUIC_HELLO_BAD      # CRYPTO stream whole but not a ClientHello
    SN_CLIENT_HELLOS       # complete ClientHellos (TLS and QUIC)
    SN_NO_SNI              # ... without a host_name
    SN_SNI_NON_ASCII       # ... whose SNI has bytes >= 0x80 (RFC 6066: A-labels only)
    SN_SNI_BAD             # ... whose SNI has bytes no host name has, or no canonical form
    SN_ECH                 # ... with encrypted_client_hello: the outer SNI is matched
    SN_EXTRACTED           # SNIs handed to the matcher
    SN_QUIC_SERVER_CID     # client Initials under the server's chosen CID, opened with the keys
                           # of the DCID of the hello waiting for them (counted in quic_initials)
    SN_N

assert len(SNI_REASONS) == SN_N

PROTO_NAMES = ("http", "tls", "quic")
cdef enum:
    PROTO_TLS = 1
    PROTO_QUIC = 2
    SNIF_ECH = 1
    SNIF_SPLIT = 2
    SNIF_SERVER_CID = 4    # QUIC: completed by an Initial under the server's chosen CID
    MAX_SNI = 255
    QUIC_PER_TUPLE = 4     # QUIC hellos waiting under different DCIDs for one client 4-tuple


ctypedef struct HelloSlot:
    uint8_t cip[16]
    uint8_t sip[16]
    uint16_t cport
    uint16_t sport
    uint8_t ver            # 0 free
    uint8_t proto          # PROTO_TLS / PROTO_QUIC
    uint8_t dcid_len
    uint8_t _pad
    uint8_t dcid[20]
    uint32_t used          # QUIC: handshake message length once known
    int64_t t_last
    uint8_t *buf           # TLS: HS_STREAM_CAP stream bytes; QUIC: TLS_HELLO_CAP message bytes
    uint8_t *have          # QUIC: coverage bitmap of buf (TLS_HELLO_CAP / 8 bytes)
    HelloStream tcp        # TLS: the split ClientHello's stream over buf (ext/tls/hellostream.h:
                           # the rules, shared with the handshake records)


cdef inline bint _host_byte(uint8_t c) noexcept nogil:
    return (48 <= c <= 57) or (97 <= c <= 122) or (65 <= c <= 90) or c == 45 or c == 46 or c == 95


# SNI byte classes for _emit, one load per byte: 0 host name byte (_host_byte), 1 ':' (IP
# literal), 2 >= 0x80 (RFC 6066 wants A-labels), 3 any other byte
cdef uint8_t _SNI_CLASS[256]
for _c in range(256):
    _SNI_CLASS[_c] = 0 if _host_byte(_c) else 1 if _c == 58 else 2 if _c >= 0x80 else 3


ctypedef struct _Out:
    HttpMsg *msgs
    uint8_t *proto
    uint8_t *flags
    uint8_t *keys
    int64_t *koff
    uint8_t *sni
    int64_t *soff
    uint8_t *dcids          # per row: length (0xFF: TLS) + 20 bytes of the connection's first DCID
    size_t n, ncap, kused, kcap, sused, scap
    bint oom
    # JA4 per row (issue 34: rules on JA4), only when asked (SniTable.want_ja4): 37 bytes a row,
    # NUL-terminated, "" when the hello has none; scratch of tls_ja4 (kept by _out_free)
    bint want_ja4
    uint8_t *ja4
    size_t ja4cap
    uint16_t *s16
    char *text


cdef inline void _fill_tcp(HttpMsg *m, const L34 *s) noexcept nogil:
    memset(m.src_ip, 0, 16)
    memset(m.dst_ip, 0, 16)
    memcpy(m.src_ip, s.src, 4 if s.ip_version == 4 else 16)
    memcpy(m.dst_ip, s.dst, 4 if s.ip_version == 4 else 16)
    m.ip_version = s.ip_version
    m.seq = s.seq
    m.ack = s.ack
    m.src_port = s.src_port
    m.dst_port = s.dst_port
    m.window = s.window
    m.ip_off = s.ip_off
    m.tcp_off = s.tcp_off
    m.vlan = s.vlan
    m.payload_off = s.payload_off
    m.payload_caplen = s.payload_caplen
    m.payload_len = s.payload_len
    m.tcp_flags = s.tcp_flags
    m.ttl = s.ttl
    # the encapsulation, as the dissector fills it for a GET (the forge guard reads m.encap: a
    # tunnelled hit is matched but not forged). A plain UDP datagram's walk has looked for a
    # tunnel inside it (outer_ip_version set, encap 0): that is no tunnel.
    l34_msg_encap(m, s)


cdef inline int _udp_locate(const uint8_t *p, uint32_t caplen, uint16_t linktype, HttpMsg *m) noexcept nogil:
    """Fill m's addresses, ports, offsets for a UDP datagram (ext/tls/quic_initial.pxd; the datagram
    ends with the UDP length, tunnels by the user-named ports too). 0, or -1 when not UDP."""
    cdef L34 s
    memset(&s, 0, sizeof(L34))           # the TCP fields (seq, ack, window, flags) stay 0
    if not quic_udp_locate(p, caplen, linktype, _tunnel_cfg, &s, True):
        return -1
    _fill_tcp(m, &s)
    return 0
    m.kind = MSG_REQUEST


cdef int _emit(const HttpMsg *m, const tls_hello *h, const uint8_t *msg, uint8_t proto,
               uint8_t flags, bint verify, const uint8_t *p, uint64_t *cnt, _Out *o,
               const uint8_t *dcid, uint8_t dcid_len) noexcept nogil:
    """One complete ClientHello: count it, check its SNI, append the row (0; -1 out of memory).
    dcid: QUIC, the DCID whose Initial keys protect the connection (0xFF: TLS, none)."""
    cdef const uint8_t *sni = msg + h.sni.off
    cdef uint32_t sl = h.sni.len, j
    cdef uint8_t buf[MAX_SNI + 8]             # [sni]:65535
    cdef uint32_t bl = 0
    cdef uint8_t c
    cdef int colons = 0
    cdef ptrdiff_t r
    cdef size_t nc
    cnt[<int>SN_CLIENT_HELLOS] += 1
    if h.flags & TLSF_ECH:
        cnt[<int>SN_ECH] += 1
        flags |= SNIF_ECH
    if sl == 0:
        cnt[<int>SN_NO_SNI] += 1
        return 0
    for j in range(sl):                         # the first byte that is not a host byte decides
        c = _SNI_CLASS[sni[j]]
        if c == 0:
            continue
        if c == 1:
            colons += 1
        elif c == 2:
            cnt[<int>SN_SNI_NON_ASCII] += 1
            return 0
        else:
            cnt[<int>SN_SNI_BAD] += 1
            return 0
    if sl > MAX_SNI or colons == 1:             # RFC 6066 HostName: no port (server4:443)
        cnt[<int>SN_SNI_BAD] += 1
        return 0
    if colons > 1:                              # IPv6 literal: the canonicaliser wants [..]
        buf[0] = 91
        memcpy(buf + 1, sni, sl)
        buf[sl + 1] = 93
        bl = sl + 2
    else:
        memcpy(buf, sni, sl)
        bl = sl
    # then the server's port, as the URL of the connection names it (https://host:8443/): the
    # canonicaliser reads host:port as for a GET's Host header and drops 80 and 443 (urlcanon.h
    # R5), so an entry host:8443 matches a ClientHello to port 8443 only, and a host entry every
    # port (its key ends at the host, a component boundary)
    buf[bl] = 58
    bl += 1 + wt_u32_dec(m.dst_port, <char *>buf + bl + 1)
    if verify and proto == PROTO_TLS and _checksum_ok(p, m) == 0:
        cnt[<int>SN_BAD_CHECKSUM] += 1
        return 0
    if o.n == o.ncap:
        nc = 2 * o.ncap + 16
        if not _grow(<void **>&o.msgs, nc * sizeof(HttpMsg)) or not _grow(<void **>&o.proto, nc) \
                or not _grow(<void **>&o.flags, nc) or not _grow(<void **>&o.koff, nc * 8) \
                or not _grow(<void **>&o.soff, nc * 8) or not _grow(<void **>&o.dcids, nc * 21):
            o.oom = True
            return -1
        o.ncap = nc
    if o.kused + 3 * bl + 16 > o.kcap:
        nc = 2 * o.kcap + 3 * bl + 16
        if not _grow(<void **>&o.keys, nc):
            o.oom = True
            return -1
        o.kcap = nc
    if o.sused + sl > o.scap:
        nc = 2 * o.scap + sl
        if not _grow(<void **>&o.sni, nc):
            o.oom = True
            return -1
        o.scap = nc
    r = webtap_canon(buf, bl, o.keys + o.kused, o.kcap - o.kused, CANON_KEY)
    if r < 0:
        cnt[<int>SN_SNI_BAD] += 1
        return 0
    o.kused += r
    if o.want_ja4:
        if o.ja4cap <= o.n:
            if not _grow(<void **>&o.ja4, o.ncap * 37):
                o.oom = True
                return -1
            o.ja4cap = o.ncap
        if not tls_ja4(msg, h, 113 if proto == PROTO_QUIC else 116, o.s16, o.text,
                       6 * 32768 + 16, <char *>o.ja4 + 37 * o.n, NULL, 0):
            o.ja4[37 * o.n] = 0
    memcpy(o.sni + o.sused, sni, sl)
    o.sused += sl
    o.msgs[o.n] = m[0]
    o.proto[o.n] = proto
    o.flags[o.n] = flags
    o.koff[o.n] = o.kused
    o.soff[o.n] = o.sused
    o.dcids[21 * o.n] = dcid_len
    if dcid_len <= 20:
        memcpy(o.dcids + 21 * o.n + 1, dcid, dcid_len)
    o.n += 1
    cnt[<int>SN_EXTRACTED] += 1
    return 0


cdef inline bint _grow(void **p, size_t size) noexcept nogil:
    cdef void *q = realloc(p[0], size)
    if q == NULL:
        return False
    p[0] = q
    return True


cdef object _u8_copy(const uint8_t *p, size_t n):
    a = np.empty(n, dtype=np.uint8)
    cdef uint8_t[::1] v = a
    if n:
        memcpy(&v[0], p, n)
    return a


cdef void _out_free(_Out *o) noexcept nogil:
    cdef bint want = o.want_ja4
    cdef uint16_t *s16 = o.s16
    cdef char *text = o.text
    free(o.ja4)
    free(o.dcids)
    free(o.msgs)
    free(o.proto)
    free(o.flags)
    free(o.keys)
    free(o.koff)
    free(o.sni)
    free(o.soff)
    memset(o, 0, sizeof(_Out))
    o.want_ja4, o.s16, o.text = want, s16, text


cdef class SniTable:
    """Per-capture state of the SNI pass: split TLS ClientHellos and QUIC CRYPTO streams waiting
    for their next part (at most `capacity` of each kind together, TLS_HELLO_CAP bytes each;
    a part that does not continue a waiting hello in order abandons it, counted as tls_gap)."""
    cdef HelloSlot *slots
    cdef size_t cap
    cdef readonly size_t used
    cdef readonly int64_t idle_ns
    cdef readonly uint64_t evicted
    cdef uint8_t *scratch
    cdef uint8_t *plain
    cdef quic_frame *frames         # the CRYPTO frames of the Initial being read (quic_initial.h)
    cdef uint8_t *qmsg          # a QUIC ClientHello put together from one packet's frames
    cdef uint8_t *hdr
    cdef HttpMsg *undec         # Initials that did not open with client keys (server Initials)
    cdef size_t n_undec, cap_undec
    cdef public bint keep_undecryptable
    cdef readonly object last_dcids  # uint8 [rows, 21] of the last extract: see extract
    cdef readonly object last_ja4    # uint8 [rows, 37] of the last extract (want_ja4), else None
    cdef _Out out                    # extract's output buffers, kept between batches
    cdef TlsWatch *watch_            # the flows whose split ClientHello waits (ext/tls/tls.pxd);
                                     # owned by _watch_capsule (tls_watch_capsule)
    cdef object _watch_capsule
    cdef readonly uint64_t packets_walked   # packets this table walked itself (extract)

    def __cinit__(self, size_t capacity=1024, int64_t idle_ns=10_000_000_000):
        cdef size_t c = 16
        cdef TlsWatch *w
        while c < 2 * capacity:
            c <<= 1
        self.cap = c
        self.slots = <HelloSlot *>calloc(c, sizeof(HelloSlot))
        self.scratch = <uint8_t *>malloc(TLS_HELLO_CAP)
        self.plain = <uint8_t *>malloc(65536 + 64)
        self.frames = <quic_frame *>malloc(QUIC_MAX_FRAMES * sizeof(quic_frame))
        self.hdr = <uint8_t *>malloc(65536 + 64)      # header incl. token: < one datagram
        self.qmsg = <uint8_t *>malloc(TLS_HELLO_CAP)
        # the watch list holds at most the waiting TLS slots (<= cap / 2): at most half full
        if self.slots == NULL or self.scratch == NULL or self.plain == NULL or self.hdr == NULL \
                or self.frames == NULL or self.qmsg == NULL:
            raise MemoryError()
        w = tls_watch_new(2 * c)
        self._watch_capsule = tls_watch_capsule(w)     # owns w from here, even on failure
        self.watch_ = w
        self.idle_ns = idle_ns

    def __dealloc__(self):
        cdef size_t i
        if self.slots != NULL:
            for i in range(self.cap):
                free(self.slots[i].buf)
                free(self.slots[i].have)
            free(self.slots)
        free(self.scratch)
        free(self.plain)
        free(self.frames)
        free(self.hdr)
        free(self.qmsg)
        free(self.undec)
        # the watch list goes with its capsule's last reference (a MessageBatch may still hold it)
        _out_free(&self.out)
        free(self.out.s16)
        free(self.out.text)

    def __len__(self):
        return self.used

    @property
    def want_ja4(self):
        """Compute each row's JA4 (`last_ja4`), for rules on JA4 (urlfilter.policy); off by
        default: it sorts and hashes the hello's lists (tls_fp.h)."""
        return bool(self.out.want_ja4)

    @want_ja4.setter
    def want_ja4(self, bint on):
        if on and self.out.s16 == NULL:
            self.out.s16 = <uint16_t *>malloc(2 * 32768 * sizeof(uint16_t))
            self.out.text = <char *>malloc(6 * 32768 + 16)
            if self.out.s16 == NULL or self.out.text == NULL:
                raise MemoryError()
        self.out.want_ja4 = on

    cdef HelloSlot *_slot(self, const HttpMsg *m, uint8_t proto, const uint8_t *dcid,
                          uint8_t dcid_len, bint create, int64_t now) noexcept nogil:
        """The slot of (addresses, ports, proto[, DCID]); created when asked (NULL: full)."""
        cdef size_t mask = self.cap - 1, i, j, probes = 0
        # hashed by addresses, ports and proto only: the QUIC slots of one client's 4-tuple
        # lie in one probe run whatever their DCID (_quic_any)
        cdef uint64_t h = _hash(m.src_ip, m.dst_ip, m.src_port, m.dst_port) ^ proto
        cdef HelloSlot *e
        cdef HelloSlot *free_e = NULL
        cdef int same = 0
        i = h & mask
        while probes < self.cap:
            e = &self.slots[i]
            if e.ver == 0:
                break
            if (e.proto == proto and e.ver == m.ip_version and e.cport == m.src_port
                    and e.sport == m.dst_port and memcmp(e.cip, m.src_ip, 16) == 0
                    and memcmp(e.sip, m.dst_ip, 16) == 0):
                if e.dcid_len == dcid_len and (dcid_len == 0 or memcmp(e.dcid, dcid, dcid_len) == 0):
                    return e
                same += 1
            i = (i + 1) & mask
            probes += 1
        if not create:
            return NULL
        if same >= QUIC_PER_TUPLE:
            # the slots of one 4-tuple share a probe run: a flood of DCIDs from one client
            # address and port must not make it long (a real client has one or two)
            return NULL
        if self.used * 2 >= self.cap:
            self._expire(now)
            if self.used * 2 >= self.cap:
                return NULL
            return self._slot(m, proto, dcid, dcid_len, True, now)
        e = &self.slots[i]
        memset(e, 0, sizeof(HelloSlot))
        e.buf = <uint8_t *>malloc(HS_STREAM_CAP if proto == PROTO_TLS else TLS_HELLO_CAP)
        if proto == PROTO_QUIC:
            e.have = <uint8_t *>calloc(TLS_HELLO_CAP // 8, 1)
        if e.buf == NULL or (proto == PROTO_QUIC and e.have == NULL):
            free(e.buf)
            free(e.have)
            e.buf = NULL
            e.have = NULL
            return NULL
        memcpy(e.cip, m.src_ip, 16)
        memcpy(e.sip, m.dst_ip, 16)
        e.cport = m.src_port
        e.sport = m.dst_port
        e.ver = m.ip_version
        e.proto = proto
        e.dcid_len = dcid_len
        if dcid_len:
            memcpy(e.dcid, dcid, dcid_len)
        e.t_last = now
        self.used += 1
        return e

    cdef void _drop(self, HelloSlot *e) noexcept nogil:
        """Free a slot and re-insert the probe run after it (linear probing deletion)."""
        cdef size_t mask = self.cap - 1, i = <size_t>(e - self.slots), j
        cdef HelloSlot tmp
        cdef HelloSlot *d
        free(e.buf)
        free(e.have)
        memset(e, 0, sizeof(HelloSlot))
        self.used -= 1
        j = (i + 1) & mask
        while self.slots[j].ver != 0:
            tmp = self.slots[j]
            memset(&self.slots[j], 0, sizeof(HelloSlot))
            self.used -= 1
            d = self._reinsert(&tmp)
            j = (j + 1) & mask

    cdef HelloSlot *_reinsert(self, HelloSlot *src) noexcept nogil:
        cdef size_t mask = self.cap - 1, i, k
        cdef uint64_t h = _hash(src.cip, src.sip, src.cport, src.sport) ^ src.proto
        i = h & mask
        while self.slots[i].ver != 0:
            i = (i + 1) & mask
        self.slots[i] = src[0]
        self.used += 1
        return &self.slots[i]

    cdef void _expire(self, int64_t now) noexcept nogil:
        cdef size_t i
        cdef bint again = True
        while again:
            again = False
            for i in range(self.cap):
                if self.slots[i].ver != 0 and now - self.slots[i].t_last > self.idle_ns:
                    self._drop(&self.slots[i])
                    self.evicted += 1
                    again = True
                    break

    def take_undecryptable(self):
        """The packets (MESSAGE_DTYPE rows) whose first QUIC packet was an Initial that did not
        open with the client keys of its DCID since the last call -- the servers' Initials among
        them give the QUIC timing condition (urlfilter.timing). Kept only with
        keep_undecryptable = True."""
        out = np.zeros(self.n_undec, dtype=_MESSAGE_DTYPE)
        cdef uint8_t[::1] v
        if self.n_undec:
            v = out.view(np.uint8)
            memcpy(&v[0], self.undec, self.n_undec * sizeof(HttpMsg))
        self.n_undec = 0
        return out

    def extract(self, packets, const uint8_t[::1] data, bint verify_checksums=True):
        """SNIs of the ClientHellos (TLS over TCP, QUIC Initials) completed in this batch.

        Returns (msgs _MESSAGE_DTYPE rows: the packet that completed each ClientHello, proto uint8
        (1 tls, 2 quic), flags uint8 (1 ech, 2 split), keys uint8 + key offsets int64 (key form
        of the SNI host), sni uint8 + sni offsets int64 (the SNI as sent), counters uint64[SN_N]).
        `last_dcids` then holds, per row, the length (0xFF for TLS) and bytes of the DCID whose
        Initial keys protect the QUIC connection (the client's first; flags 4 when the completing
        Initial carried the server's chosen CID instead): forge_quic's `dcids`.
        """
        cdef const uint8_t[::1] pk = np.ascontiguousarray(packets).view(np.uint8)
        cdef Py_ssize_t n = pk.shape[0] // sizeof(PacketRef), i
        cdef const PacketRef *refs = <const PacketRef *>&pk[0] if n else NULL
        cdef const uint8_t *base = &data[0] if data.shape[0] else NULL
        cdef size_t dlen = data.shape[0]
        cnt_a = self._begin()
        cdef uint64_t[::1] cnt = cnt_a
        cdef _Out *o = &self.out
        cdef const uint8_t *p
        cdef uint32_t caplen
        cdef HttpMsg m
        cdef L34 s
        cdef int r
        cdef uint8_t[::1] mv8
        cdef int64_t[::1] k64
        # cleared once: every packet that can give a row sets the same fields (the packet's
        # below, _fill_tcp's), and no other field is ever written
        memset(&m, 0, sizeof(HttpMsg))
        self.packets_walked += n
        try:
            with nogil:
                for i in range(n):
                    if refs[i].offset >= dlen:
                        continue
                    p = base + refs[i].offset
                    caplen = refs[i].caplen
                    if caplen > dlen - refs[i].offset:
                        caplen = dlen - refs[i].offset
                    m.ts_ns = refs[i].ts_ns
                    m.pkt_index = refs[i].index
                    m.pkt_offset = refs[i].offset
                    m.linktype = refs[i].linktype
                    r = l34_parse(p, caplen, refs[i].linktype, &s, _tunnel_cfg)
                    if r == L34_DATA:
                        _fill_tcp(&m, &s)
                        if self._tcp(p, &m, verify_checksums, &cnt[0], o) < 0:
                            break
                    elif r == DR_NOT_TCP and _udp_locate(p, caplen, refs[i].linktype, &m) == 0:
                        cnt[<int>SN_UDP] += 1
                        if self._udp(p, &m, &cnt[0], o) < 0:
                            break
            return self._output(o, cnt_a)
        finally:
            if o.ncap > 65536 or o.oom:           # a batch of unusual size: do not keep it
                _out_free(o)

    @property
    def watch(self):
        """The watch list (ext/tls/tls.pxd TlsWatch) as a capsule, for webtap.dissect.dissect(
        tls_watch=): the HTTP dissector's walk then also hands over this table's candidates
        (MessageBatch.tls), for extract_messages."""
        return self._watch_capsule

    def extract_messages(self, msgs, const uint8_t[::1] data, bint verify_checksums=True):
        """As extract, from the candidates the dissector's one walk found (MSG_TLS / MSG_QUIC rows
        of MessageBatch.tls, dissected with tls_watch=self.watch) instead of walking every packet
        again: TCP segments that start a hello, may start one, or continue a watched flow; UDP
        datagrams with a long header. The batch's UDP datagrams are the walk's count (the watch
        list's `udp`, read and cleared here). Rebuilds the watch list for the next batch."""
        arr = np.ascontiguousarray(np.asarray(msgs))
        if arr.dtype != _MESSAGE_DTYPE or arr.ndim != 1:
            raise TypeError("msgs must be a 1-D MESSAGE_DTYPE array")
        cdef const uint8_t[::1] mb = arr.view(np.uint8)
        cdef Py_ssize_t n = arr.shape[0], i
        cdef const HttpMsg *rows = <const HttpMsg *>&mb[0] if n else NULL
        cdef const uint8_t *base = &data[0] if data.shape[0] else NULL
        cdef size_t dlen = data.shape[0]
        cnt_a = self._begin()
        cdef uint64_t[::1] cnt = cnt_a
        cdef _Out *o = &self.out
        cdef const uint8_t *p
        cdef uint32_t caplen
        cdef HttpMsg m
        cnt[<int>SN_UDP] += tls_watch_udp_take(self.watch_)
        try:
            with nogil:
                for i in range(n):
                    if rows[i].pkt_offset + rows[i].payload_off + rows[i].payload_caplen > dlen:
                        continue                     # not this batch's message
                    p = base + rows[i].pkt_offset
                    m = rows[i]
                    if m.kind == MSG_TLS:
                        m.kind = 0                   # as extract's rows (no HTTP kind)
                        if self._tcp(p, &m, verify_checksums, &cnt[0], o) < 0:
                            break
                    elif m.kind == MSG_QUIC:
                        # the walk located the datagram by its IP length; the SNI pass also ends
                        # it at the UDP length (quic_udp_locate's udp_len): that one packet's
                        # headers are read again here, not the batch's
                        caplen = m.payload_off + m.payload_caplen
                        memset(&m, 0, sizeof(HttpMsg))
                        m.ts_ns = rows[i].ts_ns
                        m.pkt_index = rows[i].pkt_index
                        m.pkt_offset = rows[i].pkt_offset
                        m.linktype = rows[i].linktype
                        if _udp_locate(p, caplen, m.linktype, &m) == 0:
                            if self._udp(p, &m, &cnt[0], o) < 0:
                                break
                self._rebuild_watch()
            return self._output(o, cnt_a)
        finally:
            if o.ncap > 65536 or o.oom:
                _out_free(o)

    cdef _begin(self):
        """Start one extract: the output buffers emptied (they are the table's, kept from batch
        to batch: growing them by doubling in every batch cost ~10 % of a TLS extract in realloc
        copies, perf) and a fresh counter array (returned)."""
        self.out.n = self.out.kused = self.out.sused = 0
        self.out.oom = False
        return np.zeros(SN_N, dtype=np.uint64)

    cdef void _rebuild_watch(self) noexcept nogil:
        """After a batch: the client flows whose split ClientHello waits in a TLS slot, published
        to the walk (which may be batches ahead: ext/tls/tlswatch.h)."""
        cdef size_t i
        cdef HelloSlot *e
        tls_watch_publish_begin(self.watch_)
        if self.used != 0:
            for i in range(self.cap):
                e = &self.slots[i]
                if e.ver != 0 and e.proto == PROTO_TLS:
                    tls_watch_publish_add(self.watch_, tls_flow_hash(e.cip, e.cport, e.sip, e.sport, e.ver))
        tls_watch_publish_end(self.watch_)

    cdef _output(self, _Out *o, cnt_a):
        """The arrays of one extract (see extract)."""
        cdef uint8_t[::1] mv8
        cdef int64_t[::1] k64
        if True:
            if o.oom:
                raise MemoryError()
            msgs = np.zeros(o.n, dtype=_MESSAGE_DTYPE)
            if o.n:
                mv8 = msgs.view(np.uint8)
                memcpy(&mv8[0], o.msgs, o.n * sizeof(HttpMsg))
            proto = _u8_copy(o.proto, o.n)
            flags = _u8_copy(o.flags, o.n)
            keys = _u8_copy(o.keys, o.kused)
            koff = np.zeros(o.n + 1, dtype=np.int64)
            sni = _u8_copy(o.sni, o.sused)
            soff = np.zeros(o.n + 1, dtype=np.int64)
            if o.n:
                k64 = koff
                memcpy(&k64[1], o.koff, o.n * 8)
                k64 = soff
                memcpy(&k64[1], o.soff, o.n * 8)
            self.last_dcids = _u8_copy(o.dcids, 21 * o.n).reshape(o.n, 21)
            self.last_ja4 = _u8_copy(o.ja4, 37 * o.n).reshape(o.n, 37) if o.want_ja4 else None
            return msgs, proto, flags, keys, koff, sni, soff, cnt_a


    cdef int _tcp(self, const uint8_t *p, HttpMsg *m, bint verify, uint64_t *cnt, _Out *o) noexcept nogil:
        cdef const uint8_t *pay = p + m.payload_off
        cdef uint32_t plen = m.payload_caplen, start, got
        cdef int hs_type = 0, r = 0, res
        cdef uint8_t typed
        cdef tls_hello h
        cdef const uint8_t *msg = NULL
        cdef HelloSlot *e
        if plen == 0:
            return 0
        if self.used:
            e = self._slot(m, PROTO_TLS, NULL, 0, False, 0)
            if e != NULL:
                # the stream's rules are ext/tls/hellostream.h's (shared with the handshake records)
                typed = e.tcp.hs_type
                res = hs_offer(&e.tcp, m.seq, m.payload_len, pay, plen, self.scratch, &got)
                if res == HS_RETRANSMISSION:
                    return 0                        # a part already held
                if res != HS_GAP:
                    e.t_last = m.ts_ns
                    if e.tcp.hs_type == 1 and typed == 0:
                        cnt[<int>SN_TLS_HELLO_SEG] += 1     # a record header cut by the segment
                    if res == HS_MORE and e.tcp.hs_type != 2:
                        return 0
                    if e.tcp.hs_type == 2 or res == HS_NOT_HELLO:
                        pass                        # not a ClientHello: nothing to say
                    elif res == HS_WHOLE:
                        if tls_parse_hello(self.scratch, got, &h) == TLS_OK:
                            r = _emit(m, &h, self.scratch, PROTO_TLS, SNIF_SPLIT, verify, p, cnt, o,
                                      NULL, 0xFF)
                            cnt[<int>SN_TLS_SPLIT] += 1
                        else:
                            cnt[<int>SN_TLS_BAD] += 1
                    elif res == HS_TOO_LONG:
                        cnt[<int>SN_TLS_TOO_LONG] += 1
                    elif res == HS_CUT:
                        cnt[<int>SN_TLS_GAP] += 1
                    else:
                        cnt[<int>SN_TLS_BAD] += 1
                    self._drop(e)
                    return r if r < 0 else 0
                cnt[<int>SN_TLS_GAP] += 1
                self._drop(e)
                # fall through: this segment may itself start a hello
        if plen == m.payload_len and hs_may_start(pay, plen):
            # a segment shorter than a record header + handshake type: may start a hello
            e = self._slot(m, PROTO_TLS, NULL, 0, True, m.ts_ns)
            if e != NULL:
                hs_start(&e.tcp, e.buf, m.seq, m.payload_len, pay, plen, 0, self.scratch, &got)
            return 0
        start = tls_hello_start(pay, plen, &hs_type)
        if hs_type != 1 or (plen > 0 and pay[0] & 0x80):
            return 0          # not a ClientHello, or an SSLv2-format one (no SNI to match)
        cnt[<int>SN_TLS_HELLO_SEG] += 1
        r = tls_parse_payload(pay, plen, self.scratch, TLS_HELLO_CAP, &h, &msg)
        if r == TLS_OK and h.hs_type == 1:
            return _emit(m, &h, msg, PROTO_TLS, 0, verify, p, cnt, o, NULL, 0xFF)
        if r == TLS_INCOMPLETE and plen == m.payload_len:
            e = self._slot(m, PROTO_TLS, NULL, 0, True, m.ts_ns)
            if e == NULL:
                cnt[<int>SN_TLS_GAP] += 1
                return 0
            res = hs_start(&e.tcp, e.buf, m.seq, m.payload_len, pay, plen, start, self.scratch, &got)
            if res != HS_MORE:
                cnt[<int>SN_TLS_TOO_LONG if res == HS_TOO_LONG else SN_TLS_BAD] += 1
                self._drop(e)
            return 0
        if r == TLS_TOO_LONG:
            cnt[<int>SN_TLS_TOO_LONG] += 1
        elif r == TLS_INCOMPLETE:
            cnt[<int>SN_TLS_GAP] += 1                # payload cut by the snaplen
        else:
            cnt[<int>SN_TLS_BAD] += 1
        return 0

    cdef HelloSlot *_quic_any(self, const HttpMsg *m, const uint8_t *dcid, uint8_t dcid_len) noexcept nogil:
        """A QUIC slot of this client 4-tuple under another DCID than (dcid, dcid_len): the
        connection whose first Initial(s) were gathered under the client's first DCID. NULL:
        none."""
        cdef size_t mask = self.cap - 1, i, probes = 0
        cdef HelloSlot *e
        i = (_hash(m.src_ip, m.dst_ip, m.src_port, m.dst_port) ^ PROTO_QUIC) & mask
        while probes < self.cap:
            e = &self.slots[i]
            if e.ver == 0:
                return NULL
            if (e.proto == PROTO_QUIC and e.ver == m.ip_version and e.cport == m.src_port
                    and e.sport == m.dst_port and memcmp(e.cip, m.src_ip, 16) == 0
                    and memcmp(e.sip, m.dst_ip, 16) == 0
                    and (e.dcid_len != dcid_len or memcmp(e.dcid, dcid, dcid_len) != 0)):
                return e
            i = (i + 1) & mask
            probes += 1
        return NULL

    cdef HelloSlot *_quic_slot(self, const HttpMsg *m, const uint8_t *dcid, uint8_t dcid_len,
                               int nf) noexcept nogil:
        """The slot of (addresses, DCID), created when new, with this packet's nf CRYPTO frames
        (self.frames, data in self.plain) put in. NULL: the table is full."""
        cdef HelloSlot *e = self._slot(m, PROTO_QUIC, dcid, dcid_len, True, m.ts_ns)
        if e == NULL:
            return NULL
        e.t_last = m.ts_ns
        quic_frames_put(e.buf, e.have, self.plain, self.frames, nf)
        return e

    cdef int _udp(self, const uint8_t *p, HttpMsg *m, uint64_t *cnt, _Out *o) noexcept nogil:
        cdef const uint8_t *d = p + m.payload_off
        cdef size_t n = m.payload_caplen, off = 0, pl = 0, hl = 0, fo
        cdef quic_long_hdr_t h
        cdef quic_keys_t ck
        cdef uint64_t pn
        cdef int r, rc, fr
        cdef bint bad
        cdef HelloSlot *e
        cdef tls_hello th
        cdef const uint8_t *msg
        cdef uint32_t first_off = m.payload_off, need = 0
        cdef int nf
        cdef const uint8_t *odcid              # the DCID whose keys open this connection's Initials
        cdef uint8_t odlen, sflags
        cdef uint8_t fdcid[20]
        cdef uint8_t fdcid_len
        while off < n:
            r = quic_parse_long(d + off, n - off, &h)
            if r == QUIC_E_NOT_LONG or (r != 0 and off == 0 and (d[0] & 0x80) == 0):
                return 0                             # short header (1-RTT) or not QUIC
            if r == QUIC_E_VERSION:
                if off == 0:
                    cnt[<int>SN_QUIC_OTHER_VERSION] += 1
                return 0
            if r != QUIC_OK:
                cnt[<int>SN_QUIC_MALFORMED] += 1
                return 0
            cnt[<int>SN_QUIC_LONG] += 1
            if h.type == QUIC_PT_VERSION_NEG:
                cnt[<int>SN_QUIC_VN] += 1
                return 0
            if h.type == QUIC_PT_RETRY:
                cnt[<int>SN_QUIC_RETRY] += 1
                return 0
            if h.type != QUIC_PT_INITIAL:
                cnt[<int>SN_QUIC_NOT_INITIAL] += 1
                off += h.end                # h.end is relative to the packet at d + off
                continue
            if h.length > 65536 or quic_initial_keys(h.version, d + off + h.dcid_off, h.dcid_len, &ck, NULL) != QUIC_OK:
                cnt[<int>SN_QUIC_MALFORMED] += 1
                return 0
            rc = quic_open_packet(d + off, &h, &ck, self.hdr, &hl, self.plain, &pl, &pn)
            odcid = d + off + h.dcid_off
            odlen = h.dcid_len
            sflags = 0
            if rc == QUIC_E_DECRYPT and self.used:
                # A client Initial sent after the server's first Initial carries the server's
                # chosen SCID as DCID (RFC 9000 7.2) but keeps the keys of the client's first
                # DCID (RFC 9001 5.2): a hello waiting under another DCID of this 4-tuple gives them.
                e = self._quic_any(m, odcid, odlen)
                if e != NULL:
                    fdcid_len = e.dcid_len
                    memcpy(fdcid, e.dcid, e.dcid_len)
                    if quic_initial_keys(h.version, fdcid, fdcid_len, &ck, NULL) == QUIC_OK and \
                            quic_open_packet(d + off, &h, &ck, self.hdr, &hl, self.plain, &pl, &pn) == QUIC_OK:
                        rc = QUIC_OK
                        odcid = fdcid
                        odlen = fdcid_len
                        sflags = SNIF_SERVER_CID
                        cnt[<int>SN_QUIC_SERVER_CID] += 1
            if rc != QUIC_OK:
                cnt[<int>(SN_QUIC_UNDECRYPTABLE if rc == QUIC_E_DECRYPT else SN_QUIC_MALFORMED)] += 1
                if rc == QUIC_E_DECRYPT and self.keep_undecryptable and off == 0:
                    if self.n_undec == self.cap_undec:
                        if not _grow(<void **>&self.undec, (2 * self.cap_undec + 64) * sizeof(HttpMsg)):
                            return -1
                        self.cap_undec = 2 * self.cap_undec + 64
                    self.undec[self.n_undec] = m[0]
                    self.n_undec += 1
                off += h.end                # h.end is relative to the packet at d + off
                continue
            cnt[<int>SN_QUIC_INITIAL] += 1
            m.payload_off = first_off + <uint32_t>off   # the Initial the close answers
            # The CRYPTO frames (quic_initial.h: the one gatherer of the filter and the TLS
            # stage). A packet of a few frames may hold the whole ClientHello by itself (the
            # common case: no slot, no copy when one frame holds it); else the frames go to the
            # slot of (addresses, DCID) with the earlier packets' parts.
            e = NULL
            fr = quic_crypto_frames(self.plain, pl, TLS_HELLO_CAP, self.frames, QUIC_MAX_FRAMES, &nf, &fo)
            # bad: a frame that does not parse before the payload's end, or one past the cap
            bad = fr > QF_BAD_LENGTH or (fr != QF_END and fo != pl)
            if not bad and nf > QUIC_PACKET_FRAMES:
                e = self._quic_slot(m, odcid, odlen, nf)
                bad = e == NULL                          # no room for the hello's parts
            if bad:
                cnt[<int>SN_QUIC_CRYPTO_BAD] += 1
                if e == NULL and nf and self.used:      # parts held from earlier packets
                    e = self._slot(m, PROTO_QUIC, odcid, odlen, False, 0)
                if e != NULL:
                    self._drop(e)
                return 0
            msg = NULL
            if e == NULL and nf:
                msg = quic_frames_message(self.plain, self.frames, nf, self.qmsg, TLS_HELLO_CAP, &need)
                if msg == NULL:
                    e = self._quic_slot(m, odcid, odlen, nf)
                    if e == NULL:
                        cnt[<int>SN_QUIC_CRYPTO_BAD] += 1
                        return 0
                elif self.used:                           # parts held from earlier packets
                    e = self._slot(m, PROTO_QUIC, odcid, odlen, False, 0)
            if msg == NULL and e != NULL and _crypto_whole(e):
                msg = e.buf
                need = e.used
            if msg != NULL:
                r = tls_parse_hello(msg, need, &th)
                if r == TLS_OK and th.hs_type == 1:
                    r = _emit(m, &th, msg, PROTO_QUIC, sflags, False, p, cnt, o, odcid, odlen)
                else:
                    cnt[<int>SN_QUIC_HELLO_BAD] += 1
                    r = 0
                if e != NULL:
                    self._drop(e)
                if r < 0:
                    return r
            off += h.end                # h.end is relative to the packet at d + off
        return 0


cdef inline bint _crypto_whole(HelloSlot *e) noexcept nogil:
    """The CRYPTO stream holds a whole handshake message from offset 0 (its length in e.used)."""
    cdef uint32_t need = quic_crypto_whole(e.buf, e.have, TLS_HELLO_CAP, 0)
    if need == 0 or need == 0xFFFFFFFFu:
        return False
    e.used = need
    return True


cdef size_t _forge_quic_one(const uint8_t *p, const HttpMsg *m, uint8_t *o, const uint8_t *odcid,
                            uint8_t odlen) noexcept nogil:
    """The UDP datagram server -> client carrying the forged server Initial close
    (ext/url/quic_close.h) for the client Initial of row m; returns its frame length, 0 if the
    Initial cannot be answered. Link header copied (MACs swapped), IP and UDP as the TCP forge."""
    cdef uint32_t link = m.ip_off, ip_len, udp, at_init, avail
    cdef uint8_t tmp[6]
    cdef int qn
    cdef uint32_t acc
    at_init = m.payload_off - (m.tcp_off + 8)
    if at_init >= m.payload_caplen:
        return 0
    avail = m.payload_caplen - at_init
    ip_len = 20 if m.ip_version == 4 else 40
    udp = link + ip_len
    qn = quic_forge_close_as(p + m.payload_off, avail, odcid, odlen, o + udp + 8, QUIC_CLOSE_MAX)
    if qn <= 0:
        return 0
    memcpy(o, p, link)
    if m.linktype == LINKTYPE_ETHERNET and link >= 12:
        memcpy(tmp, o, 6)
        memcpy(o, o + 6, 6)
        memcpy(o + 6, tmp, 6)
    if m.ip_version == 4:
        o[link] = 0x45
        o[link + 1] = 0
        _put16(o + link + 2, 20 + 8 + qn)
        _put16(o + link + 4, 0)
        _put16(o + link + 6, 0x4000)
        o[link + 8] = FORGE_TTL
        o[link + 9] = 17
        _put16(o + link + 10, 0)
        memcpy(o + link + 12, m.dst_ip, 4)
        memcpy(o + link + 16, m.src_ip, 4)
        _put16(o + link + 10, _fold(_sum(o + link, 20, 0)))
    else:
        _put32(o + link, 0x60000000)
        _put16(o + link + 4, 8 + qn)
        o[link + 6] = 17
        o[link + 7] = FORGE_TTL
        memcpy(o + link + 8, m.dst_ip, 16)
        memcpy(o + link + 24, m.src_ip, 16)
    _put16(o + udp, m.dst_port)
    _put16(o + udp + 2, m.src_port)
    _put16(o + udp + 4, 8 + qn)
    _put16(o + udp + 6, 0)
    # pseudo-header sum with protocol 17: _pseudo adds 6 for TCP, so 11 more
    acc = _pseudo(m.ip_version, o + link + (12 if m.ip_version == 4 else 8),
                  o + link + (16 if m.ip_version == 4 else 24), 8 + qn) + 11
    acc = _fold(_sum(o + udp, 8 + qn, acc))
    _put16(o + udp + 6, acc if acc != 0 else 0xFFFF)     # RFC 768: 0 is sent as all ones
    return udp + 8 + qn


def forge_quic(msgs, const uint8_t[::1] data, rows, dcids=None):
    """Forged server Initial closes for the QUIC rows msgs[rows] of SniTable.extract: one frame
    per hit. dcids: SniTable.last_dcids of that extract (uint8 [len(msgs), 21]), the DCID whose
    keys protect each connection; without it, each packet's own DCID (right unless the hello was
    completed under the server's chosen CID). Returns (frames uint8, offsets int64 [n+1],
    forge_ns int64 [n]); a row whose packet is not a client Initial any more (cannot happen for
    extract's rows) gives an empty frame."""
    cdef const uint8_t[::1] mv = _msg_bytes(msgs)
    cdef const uint8_t[:, ::1] dc = None
    cdef const uint8_t *odcid = NULL
    cdef uint8_t odlen = 0
    cdef const int64_t[::1] r = np.ascontiguousarray(rows, dtype=np.int64)
    cdef Py_ssize_t n = r.shape[0], i, nm = mv.shape[0] // sizeof(HttpMsg)
    cdef const uint8_t *base = &data[0] if data.shape[0] else NULL
    cdef size_t dlen = data.shape[0], total = 0, at = 0
    cdef const HttpMsg *m
    for i in range(n):
        if r[i] < 0 or r[i] >= nm:
            raise IndexError(f"row {r[i]} outside the message batch")
        m = <const HttpMsg *>&mv[r[i] * sizeof(HttpMsg)]
        if m.pkt_offset + m.payload_off + m.payload_caplen > dlen or m.ip_version not in (4, 6) \
                or m.payload_off < m.tcp_off + 8:
            raise ValueError(f"message row {r[i]} does not point into the data buffer")
        total += m.ip_off + 48 + QUIC_CLOSE_MAX
    if dcids is not None:
        dc = np.ascontiguousarray(dcids, dtype=np.uint8)
        if dc.shape[0] != nm or dc.shape[1] != 21:
            raise ValueError("dcids: one row of 21 bytes per message")
    frames = np.empty(total, dtype=np.uint8)
    offs_a = np.zeros(n + 1, dtype=np.int64)
    ns_a = np.zeros(n, dtype=np.int64)
    cdef uint8_t[::1] f = frames
    cdef int64_t[::1] offs = offs_a
    cdef int64_t[::1] ns = ns_a
    cdef int64_t t0, t1
    with nogil:
        t0 = wt_now_ns()           # one clock read per close, as forge
        for i in range(n):
            m = <const HttpMsg *>&mv[r[i] * sizeof(HttpMsg)]
            odcid = NULL
            odlen = 0
            if dc is not None and dc[r[i], 0] <= 20:
                odlen = dc[r[i], 0]
                odcid = &dc[r[i], 1]
            at += _forge_quic_one(base + m.pkt_offset, m, &f[at], odcid, odlen)
            offs[i + 1] = at
            t1 = wt_now_ns()
            ns[i] = t1 - t0
            t0 = t1
    return frames[:at], offs_a, ns_a


def udp_checksum_ok(const uint8_t[::1] frame, int ip_off):
    """True when the IPv4 header and UDP checksums of a frame (IP at ip_off) are right (tests)."""
    return _l4_checksum_ok(&frame[0], ip_off, 11)
