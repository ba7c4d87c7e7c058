# cython: freethreading_compatible = False
"""URL analyzer and session controller of the pass-by filter (issue 8; PAPERS.md section 2).

Three nogil passes over one batch, driven by urlfilter.analyzer.UrlAnalyzer:

* ``ConnTable.feed(packets, data)``: link -> IP -> TCP of every packet, SYN / SYN-ACK / ACK and
  first request / response payload times per connection (open-addressing hash table keyed by the
  4-tuple in the SYN's direction). The timing condition reads it.
* ``extract(msgs, data, verify)``: every GET of the dissector's message batch (any port) becomes a
  URL in the tree's *key form* (ext/urlcanon.h) built straight from the packet bytes: origin-form
  ``Host + URI``, or the URI alone when it is absolute-form. Everything skipped is counted by
  FilterReason (ext/urlmatch.pxd). The keys go to ``UrlTree.match_batch(canonical=False)`` in one
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

Link/IP/TCP parsing is ext/l34.pxd, the walk ext/dissect.pyx and the feeder's reader use: the
same rules everywhere (VLAN tags, IPv6 extension headers, IP fragments skipped).
"""
from libc.stddef cimport ptrdiff_t
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcmp, memcpy, memset
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

import numpy as np

from packet cimport PacketRef, LINKTYPE_ETHERNET
from l34 cimport L34, L34Cfg, L34_MAX_UDP_PORTS, be16, be32, l34_parse
from message cimport (
    HttpMsg, MSG_REQUEST, METHOD_GET, MSGF_URI_TRUNCATED, MSGF_HEADERS_INCOMPLETE,
    MSGF_PAYLOAD_TRUNCATED,
)
from urlcanon cimport CANON_KEY, webtap_canon, webtap_key_flip
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


cdef inline int64_t _mono_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <int64_t>ts.tv_sec * 1000000000 + ts.tv_nsec


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


# User-named UDP tunnel ports, as in ext/dissect.pyx (webtap.dissect.set_tunnel_ports sets all).
cdef L34Cfg _tunnel_cfg


def set_tunnel_ports(pairs):
    """Pairs of (port, EncapKind code); see ext/dissect.pyx set_tunnel_ports."""
    pairs = [(int(a), int(b)) for a, b in pairs]
    if len(pairs) > L34_MAX_UDP_PORTS:
        raise ValueError(f"at most {L34_MAX_UDP_PORTS} tunnel ports")
    _tunnel_cfg.n = 0
    for port, kind in pairs:
        _tunnel_cfg.port[_tunnel_cfg.n] = port
        _tunnel_cfg.kind[_tunnel_cfg.n] = kind
        _tunnel_cfg.n += 1


# ---------------------------------------------------------------------------------------------
# Link -> IP -> TCP of one packet, for the handshake table
# ---------------------------------------------------------------------------------------------
cdef inline int _locate(const uint8_t *p, uint32_t caplen, uint16_t linktype, L34 *s) noexcept nogil:
    """Fill *s for a TCP segment whose fixed header is in the capture (ext/l34.pxd: the
    dissector's own walk, so both take the same packets for TCP). Returns 0, or -1 for anything
    else (not TCP, truncated, fragment). TCP options cut by the snaplen do not matter here."""
    l34_parse(p, caplen, linktype, s, &_tunnel_cfg)
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
    """Per-connection handshake and first-payload times, in C (ConnTiming, ext/urlmatch.pxd).

    Open addressing with linear probing, at most half full; when it would pass that, the table is
    rebuilt at twice the size, dropping connections idle for more than ``idle_ns`` of capture
    time (0 keeps everything, as the offline timing report wants).
    """
    cdef ConnTiming *slots
    cdef size_t cap, used
    cdef readonly int64_t idle_ns
    cdef readonly uint64_t evicted

    def __cinit__(self, size_t capacity=4096, int64_t idle_ns=0):
        cdef size_t c = 1024
        while c < capacity:
            c <<= 1
        self.slots = <ConnTiming *>calloc(c, sizeof(ConnTiming))
        if self.slots == NULL:
            raise MemoryError()
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
        self.slots = <ConnTiming *>calloc(c, sizeof(ConnTiming))
        if self.slots == NULL:
            self.slots = old
            with gil:
                raise MemoryError()
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

    def feed(self, packets, const uint8_t[::1] data):
        """Update the table with every TCP segment of a packet batch (PACKET_DTYPE array)."""
        cdef const uint8_t[::1] pk = np.ascontiguousarray(packets).view(np.uint8)
        cdef Py_ssize_t n = pk.shape[0] // sizeof(PacketRef), i
        cdef const PacketRef *refs = <const PacketRef *>&pk[0] if n else NULL
        cdef const uint8_t *base = &data[0] if data.shape[0] else NULL
        cdef size_t dlen = data.shape[0]
        cdef L34 s
        cdef ConnTiming *e
        cdef bint fwd
        with nogil:
            for i in range(n):
                if refs[i].offset + refs[i].caplen > dlen:
                    continue
                if _locate(base + refs[i].offset, refs[i].caplen, refs[i].linktype, &s) != 0:
                    continue
                if (s.tcp_flags & 0x12) == 0x02:          # SYN without ACK: a new connection
                    if 2 * (self.used + 1) > self.cap:
                        self._rebuild(refs[i].ts_ns)
                    e = self._find(s.src, s.dst, s.src_port, s.dst_port, s.ip_version, True)
                    if e.state & CS_SYN and e.client_isn != s.seq:   # port reuse: start over
                        memset(&e.state, 0, sizeof(ConnTiming) - (<size_t>&e.state - <size_t>e))
                    if not (e.state & CS_SYN):
                        e.state = CS_SYN
                        e.client_isn = s.seq
                        e.t_syn = refs[i].ts_ns
                    e.t_last = refs[i].ts_ns
                    continue
                fwd = True
                e = self._find(s.src, s.dst, s.src_port, s.dst_port, s.ip_version, False)
                if e == NULL:
                    fwd = False
                    e = self._find(s.dst, s.src, s.dst_port, s.src_port, s.ip_version, False)
                    if e == NULL:
                        continue
                e.t_last = refs[i].ts_ns
                if not fwd:
                    if (s.tcp_flags & 0x12) == 0x12:
                        if not (e.state & CS_SYNACK) and s.ack == e.client_isn + 1:
                            e.state |= CS_SYNACK
                            e.server_isn = s.seq
                            e.t_synack = refs[i].ts_ns
                    elif s.payload_len and (e.state & CS_REQ) and not (e.state & CS_RESP):
                        e.state |= CS_RESP
                        e.t_resp = refs[i].ts_ns
                else:
                    if ((e.state & CS_SYNACK) and not (e.state & CS_ACK) and (s.tcp_flags & 0x10)
                            and s.ack == e.server_isn + 1):
                        e.state |= CS_ACK
                        e.t_ack = refs[i].ts_ns
                    if s.payload_len and not (e.state & CS_REQ):
                        e.state |= CS_REQ
                        e.t_req = refs[i].ts_ns

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
    cdef uint8_t *keys = <uint8_t *>malloc(cap)
    cdef uint8_t *scratch = <uint8_t *>malloc(MAX_URL + 16)
    cdef uint8_t *nk
    cdef const HttpMsg *m
    cdef const uint8_t *p
    cdef const uint8_t *u
    cdef ptrdiff_t r
    cdef int ck
    cdef bint oom = False
    cdef uint8_t[::1] kv
    if keys == NULL or scratch == NULL:
        free(keys)
        free(scratch)
        raise MemoryError()
    try:
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
                    nk = <uint8_t *>realloc(keys, cap)
                    if nk == NULL:
                        oom = True
                        break
                    keys = nk
                r = webtap_canon(scratch, need, keys + used, cap - used, CANON_KEY)
                if r < 0:
                    cnt[<int>FR_CANON_FAILED] += 1
                    continue
                used += r
                rows[k] = i
                k += 1
                offs[k] = used
                cnt[<int>FR_EXTRACTED] += 1
        if oom:
            raise MemoryError()
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
cdef size_t _forge_one(const uint8_t *p, const HttpMsg *m, uint8_t *o, bint to_client) noexcept nogil:
    """Write one frame for request m (packet p) at o; returns its length. Layout as in the
    module docstring."""
    cdef uint32_t link = m.ip_off, ip_len, tcp_at, seq_end
    cdef uint8_t tmp[6]
    cdef uint32_t acc
    cdef const uint8_t *sip
    cdef const uint8_t *dip
    cdef uint16_t sport, dport
    seq_end = m.seq + m.payload_len + (1 if m.tcp_flags & 0x01 else 0)
    memcpy(o, p, link)
    if to_client:
        if m.linktype == LINKTYPE_ETHERNET and link >= 12:
            memcpy(tmp, o, 6)
            memcpy(o, o + 6, 6)
            memcpy(o + 6, tmp, 6)
        sip = <const uint8_t *>&m.dst_ip[0]
        dip = <const uint8_t *>&m.src_ip[0]
        sport, dport = m.dst_port, m.src_port
    else:
        sip = <const uint8_t *>&m.src_ip[0]
        dip = <const uint8_t *>&m.dst_ip[0]
        sport, dport = m.src_port, m.dst_port
    if m.ip_version == 4:
        ip_len = 20
        o[link] = 0x45
        o[link + 1] = 0
        _put16(o + link + 2, 40)
        _put16(o + link + 4, 0)           # ID 0: allowed with DF set (RFC 6864)
        _put16(o + link + 6, 0x4000)      # DF
        o[link + 8] = FORGE_TTL
        o[link + 9] = 6
        _put16(o + link + 10, 0)
        memcpy(o + link + 12, sip, 4)
        memcpy(o + link + 16, dip, 4)
        _put16(o + link + 10, _fold(_sum(o + link, 20, 0)))
    else:
        ip_len = 40
        _put32(o + link, 0x60000000)
        _put16(o + link + 4, 20)
        o[link + 6] = 6
        o[link + 7] = FORGE_TTL
        memcpy(o + link + 8, sip, 16)
        memcpy(o + link + 24, dip, 16)
    tcp_at = link + ip_len
    _put16(o + tcp_at, sport)
    _put16(o + tcp_at + 2, dport)
    if to_client:
        _put32(o + tcp_at + 4, m.ack)
        _put32(o + tcp_at + 8, seq_end)
        o[tcp_at + 13] = 0x11             # FIN + ACK
        _put16(o + tcp_at + 14, m.window)
    else:
        _put32(o + tcp_at + 4, seq_end)
        _put32(o + tcp_at + 8, m.ack)
        o[tcp_at + 13] = 0x14             # RST + ACK
        _put16(o + tcp_at + 14, 0)
    o[tcp_at + 12] = 0x50                 # data offset 5 words, no options
    _put16(o + tcp_at + 16, 0)
    _put16(o + tcp_at + 18, 0)            # urgent pointer
    acc = _pseudo(m.ip_version, o + tcp_at - ip_len + (12 if m.ip_version == 4 else 8),
                  o + tcp_at - ip_len + (16 if m.ip_version == 4 else 24), 20)
    _put16(o + tcp_at + 16, _fold(_sum(o + tcp_at, 20, acc)))
    return tcp_at + 20


def forge(msgs, const uint8_t[::1] data, rows):
    """Forged frames for the requests msgs[rows]: for hit i, frame 2i is the FIN+ACK to the
    client and frame 2i+1 the RST+ACK to the server.

    Returns (frames uint8, offsets int64 [2n+1], forge_ns int64 [n]): forge_ns is the time spent
    forging each pair, measured around each pair inside the loop.
    """
    cdef const uint8_t[::1] mv = _msg_bytes(msgs)
    cdef const int64_t[::1] r = np.ascontiguousarray(rows, dtype=np.int64)
    cdef Py_ssize_t n = r.shape[0], i, nm = mv.shape[0] // sizeof(HttpMsg)
    cdef const uint8_t *base = &data[0] if data.shape[0] else NULL
    cdef size_t dlen = data.shape[0], total = 0, at = 0
    cdef const HttpMsg *m
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
    cdef int64_t t0
    with nogil:
        for i in range(n):
            t0 = _mono_ns()
            m = <const HttpMsg *>&mv[r[i] * sizeof(HttpMsg)]
            at += _forge_one(base + m.pkt_offset, m, &f[at], True)
            offs[2 * i + 1] = at
            at += _forge_one(base + m.pkt_offset, m, &f[at], False)
            offs[2 * i + 2] = at
            ns[i] = _mono_ns() - t0
    return frames[:at], offs_a, ns_a


def tcp_checksum_ok(const uint8_t[::1] frame, int ip_off):
    """True when the IPv4 header and TCP checksums of a frame (IP at ip_off) are right (tests)."""
    cdef const uint8_t *p = &frame[0]
    cdef uint32_t hl, tcp_len, acc
    cdef int ver = p[ip_off] >> 4
    if ver == 4:
        hl = (p[ip_off] & 0x0F) * 4
        if _fold(_sum(p + ip_off, hl, 0)) != 0:
            return False
        tcp_len = be16(p + ip_off + 2) - hl
        acc = _pseudo(4, p + ip_off + 12, p + ip_off + 16, tcp_len)
    else:
        hl = 40
        tcp_len = be16(p + ip_off + 4)
        acc = _pseudo(6, p + ip_off + 8, p + ip_off + 24, tcp_len)
    return _fold(_sum(p + ip_off + hl, tcp_len, acc)) == 0
