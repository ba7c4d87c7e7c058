# cython: freethreading_compatible = False
"""Request/response exchanges inside TLS over TCP (issue 33): the paper's first-packet rule
without reading the payload: a client burst (its first application-data packet with a new ACK)
pairs with the server's first application-data packet whose SEQ equals that ACK.

Run by the dissector's walk itself (ExchangeTable.tap, ext/walk/message.pxd SegmentTap,
`dissect_batch(..., segment_tap=...)`): one TcpEvent per TCP segment with payload, FIN or RST,
in packet order, as the walk dissects it; the TLS record headers are read in place from the
batch buffer (`payload_at`). No payload is decrypted: the stage follows each
direction's record boundaries (type and length are in clear) to tell the handshake's flights,
alerts and TLS 1.3 session tickets from application data. The rules, each with the case that
shows it, are in docs/TLS.md "Exchanges".

Two tables: the connections (a PendIndex keyed by the flow: per direction the record walk, the
TLS version, the handshake's end, the last burst's ACK), and the waiting requests, the paper's
Eq. 2 table (ext/pair/pendtable.pxd: collision chains in arrival order, capture-time GC, cap), keyed
by the 4-tuple and the request's ACK; a server burst looks up its SEQ.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset
from libc.stdlib cimport free
from cpython.pycapsule cimport PyCapsule_New, PyCapsule_GetPointer

cimport numpy as cnp
import numpy as np

from exchange cimport *             # XRecord, its reasons and flags (exchange.pxd)
from message cimport TcpEvent, SegmentTap
from pendtable cimport (PendLinks, PendIndex, pt_cells_for, pt_init, pt_release_all, pt_at,
                       pt_alloc, pt_free, pt_cell, pt_first, pt_oldest, pt_link, pt_unlink,
                       pt_full, pt_grow)
from hashes cimport eq1_of, eq2_hash, fold_ip
from tls cimport tls_payload_server_version, TLS_OK, TLS_HELLO_CAP
from util cimport wt_alloc, wt_zalloc, wt_realloc, wt_be16, wt_eq16

cnp.import_array()


cdef enum:
    TCP_FIN = 0x01
    TCP_SYN = 0x02
    TCP_RST = 0x04

    REC_CCS = 20
    REC_ALERT = 21
    REC_HANDSHAKE = 22
    REC_APP = 23

    # a TLS 1.3 record of this length carries a 2-byte alert (+1 inner type + 16-byte AEAD tag):
    # close_notify and the other alerts, never a request (RFC 8446 5.2, 6)
    TLS13_ALERT_LEN = 19
    # TLS 1.3 NewSessionTicket candidates: the server's first post-handshake records this long at
    # most (lifetime, age_add, nonce, ticket, extensions + type + tag; OpenSSL's are ~250 bytes)
    NST_MAX = 1024
    # record length sanity (RFC 8446 5.2: 2^14 + 256 at most) for resynchronisation
    REC_MAX = 16384 + 2048

    # counters
    XC_EVENTS = 0
    XC_DATA
    XC_CONNS
    XC_CONN_CAP
    XC_CONN_GC
    XC_REQUESTS
    XC_RESPONSES
    XC_MATCHED
    XC_NO_REQUEST
    XC_GC
    XC_END
    XC_CAP
    XC_REPEATED
    XC_RETRANS
    XC_GAPS
    XC_RESYNC
    XC_TICKET_RECORDS
    XC_ALERTS
    XC_HS_RECORDS
    XC_EARLY
    XC_NO_HELLO
    XC_N

_COUNTER_NAMES = ("events", "data_segments", "connections", "connections_evicted_cap",
                  "connections_gc", "requests", "responses", "matched", "responses_without_request",
                  "unmatched_gc", "unmatched_end", "unmatched_cap", "repeated_request",
                  "retransmissions", "gaps", "resynchronised", "ticket_records", "alert_records",
                  "handshake_records", "early_data_requests", "tls_data_without_hello")

ctypedef struct XDir:
    uint32_t next_seq           # next byte expected (has_seq)
    uint32_t rec_left           # bytes of the current record's body still to come
    uint32_t last_ack           # ACK of this direction's last burst start (has_burst)
    uint8_t hdr[5]              # a record header cut by the segment's end
    uint8_t hdr_n
    uint8_t cur_app             # the current record is application data
    uint8_t has_seq
    uint8_t synced              # record boundaries known
    uint8_t has_burst
    uint8_t ccs                 # ChangeCipherSpec seen
    uint8_t fin                 # FIN seen
    uint32_t n23                # type-23 records seen
    int64_t hdr_ts              # the packet where a cut record header began (hdr_n > 0):
    uint64_t hdr_frame          # the record's first packet, should it be application data
    uint32_t hdr_ack


ctypedef struct XConn:
    PendLinks links             # first member (ext/pair/pendtable.pxd)
    uint8_t cip[16]
    uint8_t sip[16]
    uint16_t cport
    uint16_t sport
    uint8_t ipv
    uint8_t sh_seen             # ServerHello seen (version decided or not)
    uint16_t version            # 0x0303 / 0x0304; 0 unknown
    uint64_t ch_frame
    int64_t last_ts
    uint32_t n_ex               # exchanges (requests) so far
    uint32_t s_hs_end           # TLS 1.3: server's handshake end (the ACK of the client's Finished)
    uint8_t has_hs_end
    uint8_t c_fin_seen          # TLS 1.3: the client's Finished record passed
    uint8_t nst_state           # 1 first post-handshake server record expected, 2 candidates held
    uint8_t unsynced            # a direction lost its record boundaries once
    uint8_t had_early           # TLS 1.3 early data before the ServerHello
    uint8_t eoed_seen           # its EndOfEarlyData passed
    uint32_t nst_start          # SEQ where the candidate tickets start
    uint32_t nst_len            # their record length
    uint32_t nst_count
    int64_t h_ts                # the first candidate's packet (a response if they were not tickets)
    uint64_t h_frame
    uint32_t h_ack
    uint32_t h_reclen
    XDir c
    XDir s


ctypedef struct XPend:
    PendLinks links             # first member
    uint8_t cip[16]
    uint8_t sip[16]
    uint16_t cport
    uint16_t sport
    uint8_t ipv
    uint8_t flags
    uint16_t version
    uint32_t ack
    uint32_t index
    uint32_t rec_len
    int64_t ts
    uint64_t frame
    uint64_t ch_frame


def sizeof_exchange_record():
    return sizeof(XRecord)


def counter_names():
    return _COUNTER_NAMES


cdef inline bint _same_flow(const XConn *c, const uint8_t *a, uint16_t ap, const uint8_t *b,
                            uint16_t bp, uint8_t ipv) noexcept nogil:
    # all 16 bytes: an IPv4 address has zeros after its 4 (TcpEvent, XConn)
    return c.cport == ap and c.sport == bp and c.ipv == ipv and wt_eq16(c.cip, a) \
        and wt_eq16(c.sip, b)


cdef inline bint _seq_lt(uint32_t a, uint32_t b) noexcept nogil:
    return <int32_t>(a - b) < 0


cdef inline bint _looks_record(const uint8_t *p, uint32_t n) noexcept nogil:
    """A plausible TLS record header at p (for resynchronising after a gap)."""
    return n >= 5 and 20 <= p[0] <= 23 and p[1] == 3 and p[2] <= 4 and wt_be16(p + 3) <= REC_MAX


# The stage's state: a plain struct, so that the walk can run the stage in its own loop through
# a SegmentTap (ext/walk/message.pxd) whose state points here; ExchangeTable owns one.
ctypedef struct XTable:
    PendIndex cx                # connections
    PendIndex px                # waiting requests (Eq. 2)
    int64_t gc_timeout_ns
    int64_t max_pending
    int64_t max_conns
    int64_t now
    XRecord *recs
    size_t nrec
    size_t rec_cap
    uint64_t cnt[<int>XC_N]
    uint8_t *scratch
    uint32_t *nst_cache         # learned ticket record length per server (direct-mapped)
    uint32_t *nst_tag
    uint64_t next_pkt           # the packet index after the last segment fed (ready_before)
    uint8_t frames_back         # a segment's packet index went back (the next trace)
    SegmentTap tap              # the stage as the walk runs it (ExchangeTable.tap)


cdef class ExchangeTable:
    """The exchange stage's tables, fed by the walk itself, segment by segment, through `tap`
    (webtap.dissect.dissect(segment_tap=...): no event array, the payload read while the walk
    has the packet in its cache). The caller serialises: one thread at a time walks, flushes or
    takes (httpanalyzer.tls ExchangeRun holds a lock around each)."""
    cdef XTable t

    def __cinit__(self, double gc_timeout=60.0, int64_t max_pending=1 << 15,
                  int64_t max_conns=1 << 16):
        if max_pending < 1 or max_conns < 1:
            raise ValueError("max_pending and max_conns must be >= 1")
        self.t.gc_timeout_ns = <int64_t>(gc_timeout * 1e9)
        self.t.max_pending = max_pending
        self.t.max_conns = max_conns
        pt_init(&self.t.cx, sizeof(XConn), 256, <int32_t>max_conns,
                pt_cells_for(max_conns, 256) if max_conns < 256 else 256, pt_cells_for(max_conns, 256))
        pt_init(&self.t.px, sizeof(XPend), 256, <int32_t>max_pending,
                pt_cells_for(max_pending, 256) if max_pending < 256 else 256, pt_cells_for(max_pending, 256))
        self.t.scratch = <uint8_t *>wt_alloc(TLS_HELLO_CAP)
        self.t.nst_cache = <uint32_t *>wt_zalloc(4096, sizeof(uint32_t))
        self.t.nst_tag = <uint32_t *>wt_zalloc(4096, sizeof(uint32_t))
        self.t.tap.state = &self.t
        self.t.tap.segment = _tap_segment

    def __dealloc__(self):
        pt_release_all(&self.t.cx)
        pt_release_all(&self.t.px)
        free(self.t.recs)
        free(self.t.scratch)
        free(self.t.nst_cache)
        free(self.t.nst_tag)

    @property
    def gc_timeout_ns(self):
        return self.t.gc_timeout_ns

    @property
    def max_pending(self):
        return self.t.max_pending

    @property
    def max_conns(self):
        return self.t.max_conns

    @property
    def tap(self):
        """The stage as the walk's segment tap (a capsule, webtap.dissect.dissect(segment_tap=)):
        valid while this table lives."""
        return PyCapsule_New(&self.t.tap, b"webtap.SegmentTap", NULL)

    def flush(self):
        """End of input: the held ticket candidates decided, every waiting request a record
        with reason `end`."""
        cdef int32_t i
        with nogil:
            while True:
                i = pt_oldest(&self.t.cx)
                if i == -1:
                    break
                _close_conn(&self.t, i)
            while True:
                i = pt_oldest(&self.t.px)
                if i == -1:
                    break
                _drop_pend(&self.t, i, XR_END)

    @property
    def records(self):
        """The records made since the last take."""
        return self.t.nrec

    def take(self):
        """The records made since the last take, as raw bytes (XRecord rows): the table's own
        buffer, handed over (no copy: a run takes its records once at the end, or once per
        streamed row group, not per packet batch); the next record starts a new one."""
        cdef cnp.npy_intp n = <cnp.npy_intp>(self.t.nrec * sizeof(XRecord))
        if self.t.nrec == 0:
            return np.empty(0, dtype=np.uint8)
        cap = PyCapsule_New(self.t.recs, b"webtap.XRecords", _free_records)
        self.t.recs = NULL
        self.t.nrec = 0
        self.t.rec_cap = 0
        out = cnp.PyArray_SimpleNewFromData(1, &n, cnp.NPY_UINT8, PyCapsule_GetPointer(cap, b"webtap.XRecords"))
        cnp.set_array_base(out, cap)        # the array keeps the buffer; the capsule frees it
        return out

    def bounds(self):
        """(ready_before, next_hello, hellos). ready_before: a packet index (0-based) below which
        no record is still to come: every record made later has its first frame (the
        request's, else the response's) at or after it, being a request waiting now, a packet
        held in a connection (a record header cut by a segment's end, TLS 1.3 ticket
        candidates) or one not fed yet; records taken so far below it can be written out in
        frame order before the rest (httpanalyzer.tls.ExchangeRun streams them). hellos: the
        ClientHello frames (1-based, uint64, repeats possible) of the connections a later record
        can belong to, a waiting request's or an open connection's; next_hello: the frame of the
        next packet, where the connections not seen yet start. Together they say which
        handshakes the join still needs (webtap.records.exchange.JoinedHandshakes). A scan of
        the waiting state: call it per take, not per packet. ready_before is 0 for good once the
        packet indexes went back (several traces in a row number their frames each from 1)."""
        cdef uint64_t b = self.t.next_pkt
        cdef int32_t j
        cdef const XPend *p
        cdef const XConn *c
        hellos = np.empty(self.t.px.n + self.t.cx.n, np.uint64)
        cdef uint64_t *h = <uint64_t *>cnp.PyArray_DATA(hellos)
        cdef Py_ssize_t k = 0, cap = hellos.shape[0]
        with nogil:
            j = pt_oldest(&self.t.px)
            while j != -1 and k < cap:
                p = <const XPend *>pt_at(&self.t.px, j)
                if p.frame < b:
                    b = p.frame
                h[k] = p.ch_frame
                k += 1
                j = p.links.age_next
            j = pt_oldest(&self.t.cx)
            while j != -1 and k < cap:
                c = <const XConn *>pt_at(&self.t.cx, j)
                if c.c.hdr_n and c.c.hdr_frame < b:
                    b = c.c.hdr_frame
                if c.s.hdr_n and c.s.hdr_frame < b:
                    b = c.s.hdr_frame
                if c.nst_state >= 2 and c.h_frame < b:
                    b = c.h_frame
                h[k] = c.ch_frame
                k += 1
                j = c.links.age_next
        return (0 if self.t.frames_back else b), self.t.next_pkt + 1, hellos[:k]

    def counters(self):
        d = {name: int(self.t.cnt[k]) for k, name in enumerate(_COUNTER_NAMES)}
        d["pending"] = int(self.t.px.n)
        d["open_connections"] = int(self.t.cx.n)
        return d


cdef void _free_records(object cap) noexcept:
    """A taken record buffer's end (ExchangeTable.take: the array's base)."""
    free(PyCapsule_GetPointer(cap, b"webtap.XRecords"))


cdef int _tap_segment(void *state, const TcpEvent *e, const uint8_t *buf,
                      uint64_t size) except -1 nogil:
    """The walk's call for one TCP segment with payload, FIN or RST (SegmentTap.segment)."""
    return _event(<XTable *>state, e, buf, size)


# ---------------------------------------------------------------------------------------------
# the stage's work, on its XTable (module functions: the walk calls them too): records out
cdef XRecord *_rec(XTable *xt) except NULL nogil:
    if xt.nrec == xt.rec_cap:
        xt.rec_cap = xt.rec_cap * 2 if xt.rec_cap else 1024
        xt.recs = <XRecord *>wt_realloc(xt.recs, xt.rec_cap * sizeof(XRecord))
    cdef XRecord *r = &xt.recs[xt.nrec]
    xt.nrec += 1
    memset(r, 0, sizeof(XRecord))
    return r


cdef int _emit_pend(XTable *xt, int32_t i, uint8_t reason) except -1 nogil:
    cdef XPend *p = <XPend *>pt_at(&xt.px, i)
    cdef XRecord *r = _rec(xt)
    r.req_ts = p.ts
    r.req_frame = p.frame + 1
    r.ch_frame = p.ch_frame
    memcpy(r.client_ip, p.cip, 16)
    memcpy(r.server_ip, p.sip, 16)
    r.client_port = p.cport
    r.server_port = p.sport
    r.index = p.index
    r.req_rec_len = p.rec_len
    r.key = p.ack
    r.version = p.version
    r.ip_version = p.ipv
    r.reason = reason
    r.flags = p.flags
    r.has_req = 1
    return 0


cdef int _drop_pend(XTable *xt, int32_t i, uint8_t reason) except -1 nogil:
    _emit_pend(xt, i, reason)
    pt_unlink(&xt.px, i)
    pt_free(&xt.px, i)
    xt.cnt[XC_GC if reason == XR_GC else (XC_END if reason == XR_END else XC_CAP)] += 1
    return 0


cdef int _gc(XTable *xt) except -1 nogil:
    cdef int32_t i
    cdef XConn *c
    while True:
        i = pt_oldest(&xt.px)
        if i == -1 or xt.now - pt_at(&xt.px, i).stamp <= xt.gc_timeout_ns:
            break
        _drop_pend(xt, i, XR_GC)
    while True:
        i = pt_oldest(&xt.cx)
        if i == -1:
            break
        c = <XConn *>pt_at(&xt.cx, i)
        if xt.now - c.last_ts <= xt.gc_timeout_ns:
            if xt.now - pt_at(&xt.cx, i).stamp <= xt.gc_timeout_ns:
                break
            # active but stamped long ago: move it to the young end of the age list
            pt_unlink(&xt.cx, i)
            pt_link(&xt.cx, i, c.links.hash, c.last_ts)
            continue
        _close_conn(xt, i)
        xt.cnt[XC_CONN_GC] += 1
    return 0


# ---------------------------------------------------------------------------------------------
# connections
cdef int32_t _find_conn(XTable *xt, const TcpEvent *e, uint32_t h, bint *client) noexcept nogil:
    """The connection of e's flow (h: its eq1_of) and e's direction in it; -1: none."""
    cdef int32_t j = pt_first(&xt.cx, pt_cell(&xt.cx, h))
    cdef XConn *c
    while j != -1:
        c = <XConn *>pt_at(&xt.cx, j)
        if _same_flow(c, e.src, e.src_port, e.dst, e.dst_port, e.ip_version):
            client[0] = True
            return j
        if _same_flow(c, e.dst, e.dst_port, e.src, e.src_port, e.ip_version):
            client[0] = False
            return j
        j = c.links.next
    return -1


cdef int _close_conn(XTable *xt, int32_t i) except -1 nogil:
    cdef XConn *c = <XConn *>pt_at(&xt.cx, i)
    if c.nst_state == 2:
        _decide_tickets(xt, c, True, 0, 0, 0, 0)
    pt_unlink(&xt.cx, i)
    pt_free(&xt.cx, i)
    return 0


cdef int32_t _new_conn(XTable *xt, const TcpEvent *e, uint32_t h) except -2 nogil:
    cdef int32_t i
    cdef XConn *c
    if xt.cx.n >= xt.max_conns:
        _close_conn(xt, pt_oldest(&xt.cx))
        xt.cnt[XC_CONN_CAP] += 1
    i = pt_alloc(&xt.cx)
    c = <XConn *>pt_at(&xt.cx, i)
    memset(<uint8_t *>c + sizeof(PendLinks), 0, sizeof(XConn) - sizeof(PendLinks))
    memcpy(c.cip, e.src, 16)
    memcpy(c.sip, e.dst, 16)
    c.cport = e.src_port
    c.sport = e.dst_port
    c.ipv = e.ip_version
    c.ch_frame = e.pkt_index + 1
    c.last_ts = e.ts_ns
    pt_link(&xt.cx, i, h, e.ts_ns)
    if pt_full(&xt.cx):
        pt_grow(&xt.cx)
    xt.cnt[XC_CONNS] += 1
    return i


# ---------------------------------------------------------------------------------------------
# the server cache of learned ticket lengths
cdef inline uint32_t _srv_hash(XTable *xt, const XConn *c) noexcept nogil:
    cdef uint32_t h = (fold_ip(c.sip, c.ipv) * 2654435761u) ^ (<uint32_t>c.sport * 40503u)
    return h if h else 1


cdef inline uint32_t _learned(XTable *xt, const XConn *c) noexcept nogil:
    cdef uint32_t h = _srv_hash(xt, c)
    return xt.nst_cache[h >> 20] if xt.nst_tag[h >> 20] == h else 0


cdef inline void _learn(XTable *xt, const XConn *c, uint32_t ln) noexcept nogil:
    cdef uint32_t h = _srv_hash(xt, c)
    xt.nst_tag[h >> 20] = h
    xt.nst_cache[h >> 20] = ln


# ---------------------------------------------------------------------------------------------
# requests and responses
cdef int _request(XTable *xt, XConn *c, uint32_t ack, int64_t ts, uint64_t pkt_index, uint32_t rec_len,
                  uint8_t flags) except -1 nogil:
    cdef uint32_t hv = eq2_hash(c.cip, c.cport, c.sip, c.sport, ack, c.ipv)
    cdef int32_t j = pt_first(&xt.px, pt_cell(&xt.px, hv)), i
    cdef XPend *p
    while j != -1:                 # the same connection and ACK waiting: a repeat
        p = <XPend *>pt_at(&xt.px, j)
        if p.ack == ack and p.cport == c.cport and p.sport == c.sport and p.ipv == c.ipv \
                and wt_eq16(p.cip, c.cip) and wt_eq16(p.sip, c.sip):
            xt.cnt[XC_REPEATED] += 1
            return 0
        j = p.links.next
    if xt.px.n >= xt.max_pending:
        _drop_pend(xt, pt_oldest(&xt.px), XR_CAP)
    i = pt_alloc(&xt.px)
    p = <XPend *>pt_at(&xt.px, i)
    memcpy(p.cip, c.cip, 16)
    memcpy(p.sip, c.sip, 16)
    p.cport = c.cport
    p.sport = c.sport
    p.ipv = c.ipv
    p.flags = flags | (XF_UNSYNCED if c.unsynced else 0)
    p.version = c.version
    p.ack = ack
    p.index = c.n_ex
    p.rec_len = rec_len
    p.ts = ts
    p.frame = pkt_index
    p.ch_frame = c.ch_frame
    c.n_ex += 1
    pt_link(&xt.px, i, hv, ts)
    if pt_full(&xt.px):
        pt_grow(&xt.px)
    xt.cnt[XC_REQUESTS] += 1
    return 0


cdef int _response(XTable *xt, XConn *c, uint32_t key, uint32_t key2, int64_t ts, uint64_t pkt_index,
                   uint32_t rec_len, uint8_t flags, uint32_t step=0) except -1 nogil:
    """A server burst: its first application-data packet (ts, pkt_index), looked up by key
    (its SEQ, or where the session tickets before it started), then, when step is not 0, at
    every step bytes after key up to key2 (the boundaries between the session tickets: the
    client may have acknowledged some of them before its request), and then key2."""
    cdef uint32_t hv, k = key
    cdef int32_t j
    cdef int t = 0
    cdef XPend *p
    cdef XRecord *r
    xt.cnt[XC_RESPONSES] += 1
    while True:
        if t > 0:
            if k == key2:
                break
            # the next ticket boundary, or key2 when none is left before it
            k = k + step if step != 0 and t < 64 and _seq_lt(k + step, key2) else key2
        t += 1
        hv = eq2_hash(c.cip, c.cport, c.sip, c.sport, k, c.ipv)
        j = pt_first(&xt.px, pt_cell(&xt.px, hv))
        while j != -1:
            p = <XPend *>pt_at(&xt.px, j)
            if p.ack == k and p.cport == c.cport and p.sport == c.sport and p.ipv == c.ipv \
                    and wt_eq16(p.cip, c.cip) and wt_eq16(p.sip, c.sip):
                _emit_pend(xt, j, XR_MATCHED)
                r = &xt.recs[xt.nrec - 1]
                r.resp_ts = ts
                r.resp_frame = pkt_index + 1
                r.resp_rec_len = rec_len
                r.has_resp = 1
                r.flags |= flags | (XF_UNSYNCED if c.unsynced else 0)
                r.version = c.version
                pt_unlink(&xt.px, j)
                pt_free(&xt.px, j)
                xt.cnt[XC_MATCHED] += 1
                return 0
            j = p.links.next
    r = _rec(xt)
    r.resp_ts = ts
    r.resp_frame = pkt_index + 1
    r.ch_frame = c.ch_frame
    memcpy(r.client_ip, c.cip, 16)
    memcpy(r.server_ip, c.sip, 16)
    r.client_port = c.cport
    r.server_port = c.sport
    r.index = 0xFFFFFFFF
    r.resp_rec_len = rec_len
    r.key = key
    r.version = c.version
    r.ip_version = c.ipv
    r.reason = XR_NO_REQUEST
    r.flags = flags | (XF_UNSYNCED if c.unsynced else 0)
    r.has_resp = 1
    xt.cnt[XC_NO_REQUEST] += 1
    return 0


cdef int _decide_tickets(XTable *xt, XConn *c, bint at_end, int64_t ts, uint64_t pkt_index,
                         uint32_t next_seq, uint32_t rec_len) except -1 nogil:
    """Returns 1 when they were tickets, 0 when the first was the response."""
    """TLS 1.3: the held candidate records after the handshake (all of length nst_len) were
    session tickets when there were two or more of them, or one of the length this server's
    tickets had before; then the response starts at the record after them (ts, pkt_index,
    next_seq: none at the end); else the first candidate was the response."""
    cdef uint32_t learned = _learned(xt, c)
    c.nst_state = 0
    if c.nst_count >= 2 or (learned != 0 and learned == c.nst_len):
        if c.nst_count >= 2:
            _learn(xt, c, c.nst_len)
        xt.cnt[XC_TICKET_RECORDS] += c.nst_count
        if not at_end:
            _response(xt, c, c.nst_start, next_seq, ts, pkt_index, rec_len, XF_TICKETS,
                           c.nst_len + 5)
        return 1
    _response(xt, c, c.nst_start, c.nst_start, c.h_ts, c.h_frame, c.h_reclen, 0)
    return 0


# ---------------------------------------------------------------------------------------------
# the record walk of one in-order segment of one direction
cdef int _segment(XTable *xt, XConn *c, bint client, const TcpEvent *e, const uint8_t *pl,
                  uint32_t n) except -1 nogil:
    cdef XDir *d = &c.c if client else &c.s
    cdef uint32_t pos = 0, take, ln, rseq
    cdef uint8_t typ
    cdef const uint8_t *h
    cdef bint app_any = False, app_boundary = False, is_app
    cdef uint32_t app_rec_len = 0, app_seq = 0
    cdef uint8_t xflags = 0
    cdef bint early_hdr = False
    cdef int64_t a_ts = e.ts_ns
    cdef uint64_t a_frame = e.pkt_index
    cdef uint32_t a_ack = e.ack
    cdef uint16_t sh_version = 0
    cdef int sh_hrr = 0
    if not d.synced:
        if _looks_record(e.head, n):          # the walk's copy of the first bytes
            d.synced = 1
            d.rec_left = 0
            d.hdr_n = 0
            xt.cnt[XC_RESYNC] += 1
        else:
            # boundaries unknown: every byte counts as application data (the paper's rule)
            app_any = True
            app_seq = e.seq
            pos = n
    while pos < n:
        if d.rec_left > 0:
            take = d.rec_left if d.rec_left < n - pos else n - pos
            if d.cur_app and not app_any:
                app_any = True
                app_seq = e.seq + pos
            d.rec_left -= take
            pos += take
            continue
        # a record header (perhaps cut by the previous segment's end)
        rseq = e.seq + pos - d.hdr_n
        if d.hdr_n == 0:
            d.hdr_ts = e.ts_ns
            d.hdr_frame = e.pkt_index
            d.hdr_ack = e.ack
            if n - pos >= 5:
                # the whole header in this segment (the usual case): read in place, from the
                # walk's copy of the first 8 bytes (TcpEvent.head) when it lies there
                if pos <= 3:
                    h = &e.head[pos]
                else:
                    h = pl + pos
                pos += 5
            else:
                h = NULL
        else:
            h = NULL
        if h == NULL:
            # a header cut by the segment's end: gathered byte by byte over the segments
            while d.hdr_n < 5 and pos < n:
                d.hdr[d.hdr_n] = e.head[pos] if pos < 8 else pl[pos]
                d.hdr_n += 1
                pos += 1
            if d.hdr_n < 5:
                break
            h = d.hdr
            d.hdr_n = 0
        typ = h[0]
        ln = wt_be16(h + 3)
        if typ < 20 or typ > 24 or h[1] != 3 or ln > REC_MAX:
            d.synced = 0               # not a record: boundaries lost until one shows again
            c.unsynced = 1
            break
        d.rec_left = ln
        is_app = False
        if typ == REC_APP:
            d.n23 += 1
            is_app = _classify_app(xt, c, client, e, ln, rseq)
        elif typ == REC_CCS:
            d.ccs = 1
        elif typ == REC_ALERT:
            xt.cnt[XC_ALERTS] += 1
        elif typ == REC_HANDSHAKE:
            xt.cnt[XC_HS_RECORDS] += 1
            if not client and not c.sh_seen:
                # the ServerHello: the selected version (a HelloRetryRequest waits for the
                # next); one not read here (not at the segment's start, cut) leaves the
                # version to the record types (_classify_app)
                if rseq == e.seq and tls_payload_server_version(
                        pl + (pos - 5), n - (pos - 5), xt.scratch, TLS_HELLO_CAP, &sh_version,
                        &sh_hrr) == TLS_OK:
                    if not sh_hrr:
                        c.sh_seen = 1
                        c.version = sh_version
                else:
                    c.sh_seen = 1
        d.cur_app = is_app
        if is_app and not app_any:
            app_any = True
            app_boundary = True
            app_rec_len = ln
            app_seq = rseq
            # the packet where its header began is the record's first (a header may be cut
            # by a segment's end)
            early_hdr = d.hdr_frame != e.pkt_index
            a_ts = d.hdr_ts
            a_frame = d.hdr_frame
            a_ack = d.hdr_ack
        if c.nst_state == 3:       # a ticket candidate was just held: not application data yet
            c.nst_state = 2
    if not app_any:
        return 0
    if client:
        if not d.has_burst or d.last_ack != a_ack:
            d.has_burst = 1
            d.last_ack = a_ack
            if c.version == 0 and not c.sh_seen:
                xflags = XF_EARLY
                xt.cnt[XC_EARLY] += 1
            _request(xt, c, a_ack, a_ts, a_frame, app_rec_len if app_boundary else 0, xflags)
    else:
        if c.nst_state == 2:
            # the record after the held candidates decides (it is application data here)
            d.has_burst = 1
            if _decide_tickets(xt, c, False, a_ts, a_frame, app_seq,
                                    app_rec_len if app_boundary else 0):
                d.last_ack = a_ack
                return 0
            d.last_ack = c.h_ack        # the held record was the response: this one may
        if not d.has_burst or d.last_ack != a_ack:   # start the next burst
            d.has_burst = 1
            d.last_ack = a_ack
            _response(xt, c, e.seq if not early_hdr else app_seq, app_seq, a_ts, a_frame,
                           app_rec_len if app_boundary else 0, 0)
    return 0


cdef bint _classify_app(XTable *xt, XConn *c, bint client, const TcpEvent *e, uint32_t ln,
                        uint32_t rseq) noexcept nogil:
    """Whether a type-23 record starting at rseq carries application data (docs/TLS.md
    "Exchanges": the handshake's own flights, alerts and TLS 1.3 tickets are not)."""
    cdef uint32_t learned
    if c.version == 0 and c.sh_seen == 0:
        if client:
            c.had_early = 1
            return True            # before any ServerHello: TLS 1.3 early data
        # a ServerHello not read (split): TLS 1.3 when the server encrypts before the client's CCS
        c.version = 0x0303 if c.c.ccs else 0x0304
        c.sh_seen = 1
    if c.version == 0 and c.sh_seen:
        c.version = 0x0303 if c.c.ccs else 0x0304
    if c.version != 0x0304:
        return True                # TLS <= 1.2: type 23 is application data only
    if ln == TLS13_ALERT_LEN:
        xt.cnt[XC_ALERTS] += 1
        return False
    if client:
        if c.had_early and not c.eoed_seen:
            # after early data the client's first encrypted record is its EndOfEarlyData
            c.eoed_seen = 1
            xt.cnt[XC_HS_RECORDS] += 1
            return False
        if not c.c_fin_seen:
            # the client's first encrypted record after the ServerHello: its Finished; the
            # packet's ACK is where the server's handshake flight ended
            c.c_fin_seen = 1
            c.s_hs_end = e.ack
            c.has_hs_end = 1
            c.nst_state = 1
            xt.cnt[XC_HS_RECORDS] += 1
            return False
        return True
    if not c.has_hs_end or _seq_lt(rseq, c.s_hs_end):
        xt.cnt[XC_HS_RECORDS] += 1   # EncryptedExtensions .. Finished
        return False
    if c.nst_state == 1:
        c.nst_state = 0
        if ln <= NST_MAX:
            c.nst_state = 3
            c.nst_start = rseq
            c.nst_len = ln
            c.nst_count = 1
            c.h_ts = c.s.hdr_ts            # the packet where its header began
            c.h_frame = c.s.hdr_frame
            c.h_ack = c.s.hdr_ack
            c.h_reclen = ln
            return False
        return True
    if c.nst_state == 2 and ln == c.nst_len:
        c.nst_count += 1
        c.nst_state = 3
        return False
    return True


cdef int _event(XTable *xt, const TcpEvent *e, const uint8_t *buf, uint64_t size) except -1 nogil:
    """One TCP segment with payload, FIN or RST (payload_at: into buf, size bytes)."""
    cdef uint32_t h = eq1_of(e.src, e.src_port, e.dst, e.dst_port, e.ip_version)
    cdef bint client = False
    cdef int32_t i
    cdef XConn *c
    cdef XDir *d
    cdef const uint8_t *pl = NULL
    cdef uint32_t n = e.payload_caplen, delta
    cdef int32_t oi
    xt.cnt[XC_EVENTS] += 1
    if e.pkt_index + 1 >= xt.next_pkt:
        xt.next_pkt = e.pkt_index + 1
    else:
        xt.frames_back = 1
    if e.ts_ns > xt.now:
        xt.now = e.ts_ns
        # the GC only when its oldest request or connection is past the window (the test
        # inline: most events find nothing to collect)
        oi = pt_oldest(&xt.px)
        if oi != -1 and xt.now - pt_at(&xt.px, oi).stamp > xt.gc_timeout_ns:
            _gc(xt)
        else:
            oi = pt_oldest(&xt.cx)
            if oi != -1 and (xt.now - pt_at(&xt.cx, oi).stamp > xt.gc_timeout_ns
                             or xt.now - (<XConn *>pt_at(&xt.cx, oi)).last_ts > xt.gc_timeout_ns):
                _gc(xt)
    if e.payload_len == 0 and not (e.tcp_flags & (TCP_FIN | TCP_RST)):
        return 0
    if n and e.payload_at + n <= size:
        pl = buf + e.payload_at
    else:
        n = 0
    i = _find_conn(xt, e, h, &client)
    if i == -1:
        # a connection starts with its ClientHello: a handshake record whose message is type 1
        # (the first bytes from the walk's copy, TcpEvent.head: no read of the payload)
        if n >= 6 and e.head[0] == REC_HANDSHAKE and e.head[1] == 3 and e.head[5] == 1:
            i = _new_conn(xt, e, h)
            client = True
        else:
            # TLS records of a connection whose ClientHello the capture does not hold (it
            # started before the capture, or the hello was lost): no exchange can be made of
            # it, counted by the segments that start with a TLS record header
            if n >= 5 and 20 <= e.head[0] <= 23 and e.head[1] == 3 and e.head[2] <= 4:
                xt.cnt[XC_NO_HELLO] += 1
            return 0
    c = <XConn *>pt_at(&xt.cx, i)
    c.last_ts = e.ts_ns
    if e.tcp_flags & TCP_RST:
        _close_conn(xt, i)
        return 0
    d = &c.c if client else &c.s
    if e.payload_len > 0:
        xt.cnt[XC_DATA] += 1
        if not d.has_seq:
            d.has_seq = 1
            d.synced = 1
            d.next_seq = e.seq
        if e.seq != d.next_seq:
            if _seq_lt(e.seq, d.next_seq):
                delta = d.next_seq - e.seq
                if delta >= e.payload_len:
                    xt.cnt[XC_RETRANS] += 1      # nothing new: a retransmission
                    return 0
                # overlap: only the new bytes are walked (as the first packet of nothing)
                xt.cnt[XC_RETRANS] += 1
                return 0
            xt.cnt[XC_GAPS] += 1
            d.synced = 0
            d.hdr_n = 0
            d.rec_left = 0
            c.unsynced = 1
        d.next_seq = e.seq + e.payload_len
        if n < e.payload_len:
            # snaplen cut: the walk cannot follow the records past the captured bytes
            _segment(xt, c, client, e, pl, n)
            if d.rec_left < e.payload_len - n or d.hdr_n:
                d.synced = 0
                c.unsynced = 1
            else:
                d.rec_left -= e.payload_len - n
        else:
            _segment(xt, c, client, e, pl, n)
    if e.tcp_flags & TCP_FIN:
        d.fin = 1
        if c.c.fin and c.s.fin:
            _close_conn(xt, i)
    return 0
