# cython: freethreading_compatible = False
"""Streaming TCP connection table of the abuse analytics (issue 34; httpanalyzer.abuse): the
walk's TCP events (ext/walk/message.pxd TcpEvent) go in batch by batch, in capture order; one
state per live connection holds what the connection table and the slow-HTTP indicators need;
a connection leaves the table as one row when a new SYN (another ISN) opens its flow again, when
it has been silent for `gc_ns` of capture time (the clock is the latest event's time), or at
the end. Memory: the live connections (ConnState) plus one ReqRow per HTTP request and one
ConnRow per finished connection; nothing per TCP segment.

Per connection (the rules of httpanalyzer.abuse.connections, applied as the events come):
* the flow: the two endpoints in order (address bytes, then port: the smaller first, "lo");
  dir 0: a segment sent by lo, dir 1: by hi;
* a SYN without ACK opens a new connection unless it repeats the ISN of the connection's SYN;
  start: the first SYN's time, else the first segment's; end (on output): the first FIN or
  RST, else the last segment;
* the client: the SYN's sender; else the sender of the first HTTP request (`req` bit 1); else
  decided on output (the endpoint with the higher port);
* per side: data bytes and segments; zero windows advertised (segments without SYN or RST):
  count, and time from each to that side's next such segment (or the end);
* idle: per side, the longest gap from its data segment to the other side's next data segment;
  the last data segment's time and side (the gap after it is closed on output);
* requests: a request first packet (`req` bit 1; bit 2: its header block was cut by the end of
  the segment; bit 4: POST / PUT / PATCH) whose SEQ is not among the connection's last 8
  requests' gives a ReqRow; its wait ends at the server's next data segment (or the
  connection's end), and the client's data segments and bytes between count as the trickle.
"""
import numpy as np

cimport numpy as cnp
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free
from libc.string cimport memcmp, memcpy, memset

from message cimport TcpEvent
from util cimport wt_alloc, wt_realloc

cnp.import_array()

cdef enum:
    NSEQ = 8
    F_FIN = 0x01
    F_SYN = 0x02
    F_RST = 0x04
    F_ACK = 0x10

cdef int64_t NONE = -(1LL << 62)
cdef int64_t BIG = (1LL << 62)

ctypedef struct ConnRow:
    int64_t id
    int64_t start_ts
    int64_t first_ts
    int64_t last_ts
    int64_t fin_ts           # first FIN/RST, BIG without one
    int64_t first_req_ts     # NONE without a request
    int64_t last_data_ts     # NONE without data
    int64_t nreq
    int64_t bytes[2]
    int64_t segs[2]
    int64_t zw_n[2]
    int64_t zw_ns[2]
    int64_t idle[2]
    uint8_t lo_ip[16]
    uint8_t hi_ip[16]
    uint16_t lo_port
    uint16_t hi_port
    uint8_t ver
    int8_t client            # -1 unknown, 0 lo, 1 hi
    uint8_t syn_seen
    int8_t last_data_dir     # -1 none
    uint8_t _pad[8]

ctypedef struct ConnState:
    ConnRow r
    int64_t zw_open[2]
    int64_t pend_head
    int64_t pend_tail
    int64_t lru_prev
    int64_t lru_next
    int64_t hnext
    uint64_t h
    uint32_t syn_seq
    uint32_t seqs[NSEQ]
    int32_t nseq
    int32_t seqpos
    uint8_t used

ctypedef struct ReqRow:
    int64_t conn
    int64_t ts
    int64_t end_ts           # NONE while waiting
    int64_t segs
    int64_t bytes
    int64_t at_segs          # the client's data segments / bytes at the request
    int64_t at_bytes
    int64_t next             # the next waiting request of the connection
    uint8_t flags
    uint8_t answered
    uint8_t _pad[6]

CONN_ROW_DTYPE = np.dtype(
    [(n, "<i8") for n in ("id", "start_ts", "first_ts", "last_ts", "fin_ts", "first_req_ts",
                          "last_data_ts", "nreq")]
    + [(n, "<i8", (2,)) for n in ("bytes", "segs", "zw_n", "zw_ns", "idle")]
    + [("lo_ip", "u1", (16,)), ("hi_ip", "u1", (16,)), ("lo_port", "<u2"), ("hi_port", "<u2"),
       ("ver", "u1"), ("client", "i1"), ("syn_seen", "u1"), ("last_data_dir", "i1"),
       ("_pad", "u1", (8,))])
REQ_ROW_DTYPE = np.dtype([(n, "<i8") for n in ("conn", "ts", "end_ts", "segs", "bytes", "at_segs",
                                                "at_bytes", "next")]
                         + [("flags", "u1"), ("answered", "u1"), ("_pad", "u1", (6,))])
NO_TIME = NONE
NO_END = BIG


def sizes():
    """(sizeof(ConnRow), sizeof(ReqRow)): the dtypes above mirror them (a test checks)."""
    return sizeof(ConnRow), sizeof(ReqRow)


cdef inline uint64_t _mix(uint64_t h, const uint8_t *p, int n) noexcept nogil:
    cdef int i
    for i in range(n):
        h ^= p[i]
        h *= <uint64_t>0x100000001b3
    return h


cdef class ConnTable:
    """The live connections; feed(events, req) per batch, then finish(); rows() and requests()."""
    cdef ConnState *slots
    cdef int64_t cap, nlive, free_head, lru_head, lru_tail, next_id
    cdef int64_t *buckets
    cdef int64_t nbuckets
    cdef ConnRow *out
    cdef int64_t nout, outcap
    cdef ReqRow *reqs
    cdef int64_t nreqs, reqcap
    cdef public int64_t gc_ns
    cdef public int64_t now
    cdef public int64_t peak_live
    cdef public int64_t events

    def __cinit__(self, int64_t gc_ns=60_000_000_000):
        if gc_ns <= 0:
            raise ValueError("gc_ns must be > 0")
        self.gc_ns = gc_ns
        self.now = NONE
        self.cap = 0
        self.slots = NULL
        self.free_head = -1
        self.lru_head = -1
        self.lru_tail = -1
        self.nbuckets = 1024
        self.buckets = <int64_t *>wt_alloc(self.nbuckets * sizeof(int64_t))
        for i in range(self.nbuckets):
            self.buckets[i] = -1

    def __dealloc__(self):
        free(self.slots)
        free(self.buckets)
        free(self.out)
        free(self.reqs)

    @property
    def live(self):
        return self.nlive

    @property
    def capacity(self):
        """Connection states allocated (grows to the peak of live ones, never per segment)."""
        return self.cap

    cdef int _grow_slots(self) except -1 nogil:
        cdef int64_t nc = self.cap * 2 if self.cap else 256, i
        cdef ConnState *s = <ConnState *>wt_realloc(self.slots, nc * sizeof(ConnState))
        self.slots = s
        for i in range(nc - 1, self.cap - 1, -1):
            s[i].used = 0
            s[i].hnext = self.free_head
            self.free_head = i
        self.cap = nc
        return 0

    cdef int _rehash(self) except -1 nogil:
        cdef int64_t nb = self.nbuckets * 2, i, b
        cdef int64_t *bk = <int64_t *>wt_alloc(nb * sizeof(int64_t))
        for i in range(nb):
            bk[i] = -1
        for i in range(self.cap):
            if self.slots[i].used:
                b = <int64_t>(self.slots[i].h & <uint64_t>(nb - 1))
                self.slots[i].hnext = bk[b]
                bk[b] = i
        free(self.buckets)
        self.buckets = bk
        self.nbuckets = nb
        return 0

    cdef int _push_out(self, ConnRow *r) except -1 nogil:
        cdef ConnRow *o
        cdef int64_t nc
        if self.nout == self.outcap:
            nc = self.outcap * 2 if self.outcap else 256
            o = <ConnRow *>wt_realloc(self.out, nc * sizeof(ConnRow))
            self.out = o
            self.outcap = nc
        memcpy(&self.out[self.nout], r, sizeof(ConnRow))
        self.nout += 1
        return 0

    cdef int64_t _push_req(self) except -1 nogil:
        cdef ReqRow *o
        cdef int64_t nc
        if self.nreqs == self.reqcap:
            nc = self.reqcap * 2 if self.reqcap else 256
            o = <ReqRow *>wt_realloc(self.reqs, nc * sizeof(ReqRow))
            self.reqs = o
            self.reqcap = nc
        memset(&self.reqs[self.nreqs], 0, sizeof(ReqRow))
        self.nreqs += 1
        return self.nreqs - 1

    cdef void _lru_drop(self, int64_t k) noexcept nogil:
        cdef ConnState *c = &self.slots[k]
        if c.lru_prev >= 0:
            self.slots[c.lru_prev].lru_next = c.lru_next
        else:
            self.lru_head = c.lru_next
        if c.lru_next >= 0:
            self.slots[c.lru_next].lru_prev = c.lru_prev
        else:
            self.lru_tail = c.lru_prev
        c.lru_prev = -1
        c.lru_next = -1

    cdef void _lru_append(self, int64_t k) noexcept nogil:
        cdef ConnState *c = &self.slots[k]
        c.lru_prev = self.lru_tail
        c.lru_next = -1
        if self.lru_tail >= 0:
            self.slots[self.lru_tail].lru_next = k
        else:
            self.lru_head = k
        self.lru_tail = k

    cdef void _answer(self, ConnState *c, int64_t ts, bint at_end) noexcept nogil:
        """The waiting requests end: at the server's data segment at ts, or the connection's end."""
        cdef int64_t p = c.pend_head
        cdef int cl = c.r.client if c.r.client >= 0 else 0
        while p >= 0:
            self.reqs[p].end_ts = ts
            self.reqs[p].segs = c.r.segs[cl] - self.reqs[p].at_segs
            self.reqs[p].bytes = c.r.bytes[cl] - self.reqs[p].at_bytes
            self.reqs[p].answered = 0 if at_end else 1
            p = self.reqs[p].next
        c.pend_head = -1
        c.pend_tail = -1

    cdef int _emit(self, int64_t k) except -1 nogil:
        cdef ConnState *c = &self.slots[k]
        cdef int64_t end = c.r.fin_ts if c.r.fin_ts != BIG else c.r.last_ts, b, j, prev
        cdef int d
        for d in range(2):
            if c.zw_open[d] != NONE:
                if end > c.zw_open[d]:
                    c.r.zw_ns[d] += end - c.zw_open[d]
                c.zw_open[d] = NONE
        self._answer(c, end, True)
        self._push_out(&c.r)
        # out of the hash chain and the LRU list, back to the free list
        b = <int64_t>(c.h & <uint64_t>(self.nbuckets - 1))
        j = self.buckets[b]
        prev = -1
        while j >= 0 and j != k:
            prev = j
            j = self.slots[j].hnext
        if j == k:
            if prev >= 0:
                self.slots[prev].hnext = c.hnext
            else:
                self.buckets[b] = c.hnext
        self._lru_drop(k)
        c.used = 0
        c.hnext = self.free_head
        self.free_head = k
        self.nlive -= 1
        return 0

    cdef int64_t _new(self, const uint8_t *lo, const uint8_t *hi, uint16_t lp, uint16_t hp,
                      uint8_t ver, uint64_t h, int64_t ts) except -1 nogil:
        cdef int64_t k, b
        cdef ConnState *c
        if self.free_head < 0:
            self._grow_slots()
        if self.nlive + 1 > self.nbuckets * 3 // 4:
            self._rehash()
        k = self.free_head
        c = &self.slots[k]
        self.free_head = c.hnext
        memset(c, 0, sizeof(ConnState))
        c.used = 1
        c.h = h
        memcpy(c.r.lo_ip, lo, 16)
        memcpy(c.r.hi_ip, hi, 16)
        c.r.lo_port = lp
        c.r.hi_port = hp
        c.r.ver = ver
        c.r.id = self.next_id
        self.next_id += 1
        c.r.start_ts = ts
        c.r.first_ts = ts
        c.r.last_ts = ts
        c.r.fin_ts = BIG
        c.r.first_req_ts = NONE
        c.r.last_data_ts = NONE
        c.r.client = -1
        c.r.last_data_dir = -1
        c.zw_open[0] = NONE
        c.zw_open[1] = NONE
        c.pend_head = -1
        c.pend_tail = -1
        c.lru_prev = -1
        c.lru_next = -1
        b = <int64_t>(h & <uint64_t>(self.nbuckets - 1))
        c.hnext = self.buckets[b]
        self.buckets[b] = k
        self._lru_append(k)
        self.nlive += 1
        if self.nlive > self.peak_live:
            self.peak_live = self.nlive
        return k

    cdef int _one(self, const TcpEvent *e, uint8_t req) except -1 nogil:
        cdef const uint8_t *lo
        cdef const uint8_t *hi
        cdef uint16_t lp, hp
        cdef int d, cmp, cl, i
        cdef uint64_t h
        cdef int64_t k, b, ts = e.ts_ns, p
        cdef ConnState *c
        cdef bint syn, data, dup
        cmp = memcmp(e.src, e.dst, 16)
        if cmp == 0:
            cmp = -1 if e.src_port < e.dst_port else (1 if e.src_port > e.dst_port else 0)
        if cmp <= 0:
            lo, hi, lp, hp, d = e.src, e.dst, e.src_port, e.dst_port, 0
        else:
            lo, hi, lp, hp, d = e.dst, e.src, e.dst_port, e.src_port, 1
        if ts > self.now:
            self.now = ts
        # capture-time GC: connections silent for gc_ns leave as rows
        while self.lru_head >= 0 and self.slots[self.lru_head].r.last_ts + self.gc_ns < self.now:
            self._emit(self.lru_head)
        h = <uint64_t>0xcbf29ce484222325
        h = _mix(h, lo, 16)
        h = _mix(h, hi, 16)
        h = _mix(h, <const uint8_t *>&lp, 2)
        h = _mix(h, <const uint8_t *>&hp, 2)
        h = _mix(h, &e.ip_version, 1)
        h ^= h >> 29
        b = <int64_t>(h & <uint64_t>(self.nbuckets - 1))
        k = self.buckets[b]
        while k >= 0:
            c = &self.slots[k]
            if (c.h == h and c.r.lo_port == lp and c.r.hi_port == hp and c.r.ver == e.ip_version
                    and memcmp(c.r.lo_ip, lo, 16) == 0 and memcmp(c.r.hi_ip, hi, 16) == 0):
                break
            k = c.hnext
        syn = (e.tcp_flags & (F_SYN | F_ACK)) == F_SYN
        if k >= 0 and syn and not (self.slots[k].r.syn_seen and self.slots[k].syn_seq == e.seq):
            self._emit(k)
            k = -1
        if k < 0:
            k = self._new(lo, hi, lp, hp, e.ip_version, h, ts)
        else:
            self._lru_drop(k)
            self._lru_append(k)
        c = &self.slots[k]
        if ts > c.r.last_ts:
            c.r.last_ts = ts
        if syn and not c.r.syn_seen:
            c.r.syn_seen = 1
            c.syn_seq = e.seq
            c.r.start_ts = ts
            c.r.client = d
        if (e.tcp_flags & (F_FIN | F_RST)) and ts < c.r.fin_ts:
            c.r.fin_ts = ts
        if (req & 1) and c.r.client < 0:
            c.r.client = d
        if (req & 1) and c.r.first_req_ts == NONE:
            c.r.first_req_ts = ts
        # zero windows: per side, segments without SYN or RST
        if (e.tcp_flags & (F_SYN | F_RST)) == 0:
            if c.zw_open[d] != NONE:
                if ts > c.zw_open[d]:
                    c.r.zw_ns[d] += ts - c.zw_open[d]
                c.zw_open[d] = NONE
            if e.window == 0:
                c.r.zw_n[d] += 1
                c.zw_open[d] = ts
        data = e.payload_len > 0
        cl = c.r.client
        if data:
            if c.r.last_data_dir >= 0 and c.r.last_data_dir != d and ts > c.r.last_data_ts:
                if ts - c.r.last_data_ts > c.r.idle[c.r.last_data_dir]:
                    c.r.idle[c.r.last_data_dir] = ts - c.r.last_data_ts
            c.r.last_data_dir = d
            c.r.last_data_ts = ts
            if cl >= 0 and d != cl and c.pend_head >= 0:
                self._answer(c, ts, False)
            c.r.bytes[d] += e.payload_len
            c.r.segs[d] += 1
        if req & 1:
            dup = False
            for i in range(c.nseq):
                if c.seqs[i] == e.seq:
                    dup = True
                    break
            if not dup:
                c.seqs[c.seqpos] = e.seq
                c.seqpos = (c.seqpos + 1) % NSEQ
                if c.nseq < NSEQ:
                    c.nseq += 1
                c.r.nreq += 1
                p = self._push_req()
                self.reqs[p].conn = c.r.id
                self.reqs[p].ts = ts
                self.reqs[p].end_ts = NONE
                self.reqs[p].flags = req
                self.reqs[p].next = -1
                self.reqs[p].at_segs = c.r.segs[cl if cl >= 0 else d]
                self.reqs[p].at_bytes = c.r.bytes[cl if cl >= 0 else d]
                if c.pend_tail >= 0:
                    self.reqs[c.pend_tail].next = p
                else:
                    c.pend_head = p
                c.pend_tail = p
        return 0

    def feed(self, const uint8_t[::1] events, const uint8_t[::1] req):
        """One batch of TcpEvent records (bytes) and, per event, its request bits (module
        docstring), in capture order."""
        cdef Py_ssize_t n = events.shape[0] // sizeof(TcpEvent), i
        if events.shape[0] % sizeof(TcpEvent):
            raise ValueError("events must be whole TcpEvent records")
        if req.shape[0] != n:
            raise ValueError("one request byte per event")
        if n == 0:
            return
        cdef const TcpEvent *ev = <const TcpEvent *>&events[0]
        with nogil:
            for i in range(n):
                self._one(&ev[i], req[i])
        self.events += n

    def finish(self):
        """Every live connection leaves as a row (the end of the input)."""
        with nogil:
            while self.lru_head >= 0:
                self._emit(self.lru_head)

    def rows(self):
        """The finished connections so far (CONN_ROW_DTYPE), in the order they left."""
        a = np.empty(self.nout, CONN_ROW_DTYPE)
        if self.nout:
            memcpy(cnp.PyArray_DATA(a), self.out, self.nout * sizeof(ConnRow))
        return a

    def requests(self):
        """Every request row (REQ_ROW_DTYPE), in capture order; end_ts is NO_TIME for a request
        of a connection still live."""
        a = np.empty(self.nreqs, REQ_ROW_DTYPE)
        if self.nreqs:
            memcpy(cnp.PyArray_DATA(a), self.reqs, self.nreqs * sizeof(ReqRow))
        return a
