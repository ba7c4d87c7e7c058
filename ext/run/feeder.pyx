# cython: freethreading_compatible = False
"""Packet feeder core: the consumer hashes, the reader's classification, the shared-memory rings
and the dispatcher. Its parts live where they belong: the paper's three hash equations in
ext/pair/hashes.pxd, the reader's pass in ext/run/feeder.pyx classify_packets (beside the dissector), the SPSC ring
protocol in ext/run/spsc.h / ext/run/spsc.pxd (C11 acquire/release atomics, no locks).

* hash_eq1 / hash_eq2 / hash_eq3 give, for an array of HttpMsg (webtap.records.message.MESSAGE_DTYPE),
  the paper's 4-tuple hash (Eq. 1), table hash (Eq. 2) and consumer hash (Eq. 3), before the
  modulo, as uint32 arrays (for notebooks and the balance report).
* classify_batch / feed_dtype: the reader's pass over a packet batch (its HTTP first packets).
* Dispatcher (the feeder's side): per batch of HTTP first packets, picks each one's consumer
  with Eq. 3, computes the capture clock the single-process table would have before the message
  (so every consumer's GC sees the same clock), groups the packets by consumer and writes one
  PKTS frame per consumer into its ring: the PacketRef records (offset rewritten), one clock
  per packet and the packets' bytes. Capture-clock ticks and clock resets are broadcast to
  every ring. A full ring blocks the feeder (offline) or drops the frame, counted (live).
* Ring (a consumer's side): the next frame as numpy views into shared memory, no copy.
"""
import numpy as np

# the NumPy mirrors of the structs this module reads (the core's one home for them; it imports
# numpy only)
from webtap.records.message import MESSAGE_DTYPE as _MESSAGE_DTYPE, PACKET_DTYPE as _PACKET_DTYPE

cimport cython
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free
from libc.string cimport memcpy, memset

from message cimport HttpMsg, MSG_REQUEST, MSG_RESPONSE, same_ip, DR_N
from packet cimport PacketRef
from l34 cimport l34_shared_cfg, L34Cfg
from hashes cimport eq1_of, eq2_hash, eq3_of
from classify cimport FeedPkt
from message cimport (DR_PACKETS, DR_LINK_TRUNCATED, DR_NOT_HTTP, DR_HTTP_REQUEST,
                     DR_HTTP_RESPONSE, DR_PAYLOAD_TRUNCATED, DR_LINE_SPLIT, DR_CONT_UNKNOWN)
from l34 cimport L34, L34_DATA, batch_caplen, l34_parse, l34_count_encap
from httpstart cimport http_start, http_status_code, http_split_start, WT_MAX_METHOD_LEN
from httpcont cimport http_after_continuation, CONT_UNKNOWN
from spsc cimport *
from util cimport wt_alloc, wt_now_ns, wt_realloc, wt_zalloc


FRAME_TICK = SPSC_FRAME_TICK
FRAME_END = SPSC_FRAME_END
FRAME_PKTS = SPSC_FRAME_PKTS
RING_HEADER_BYTES = SPSC_HDR
FRAME_HEADER_BYTES = sizeof(spsc_frame)

# Per-consumer statistics of a Dispatcher, columns of Dispatcher.stats.
STAT_NAMES = ("messages", "requests", "responses", "packet_bytes", "frames", "ticks",
              "stall_ns", "dropped_messages", "dropped_ticks", "interim_routed")
cdef enum:
    S_MSGS = 0
    S_REQ = 1
    S_RESP = 2
    S_BYTES = 3
    S_FRAMES = 4
    S_TICKS = 5
    S_STALL_NS = 6
    S_DROP_MSGS = 7
    S_DROP_TICKS = 8
    S_INTERIM = 9
    S_N = 10


# ---------------------------------------------------------------------------------- hashes

cdef inline uint32_t msg_key(const HttpMsg *m) noexcept nogil:
    """The number the pairing condition compares: ACK of a request, SEQ of a response."""
    return m.ack if m.kind == MSG_REQUEST else m.seq


cdef const HttpMsg *_msgs_ptr(msgs, size_t *n) except NULL:
    if msgs.dtype != _MESSAGE_DTYPE or msgs.dtype.itemsize != sizeof(HttpMsg):
        raise TypeError("msgs must be a webtap.records.message.MESSAGE_DTYPE array")
    if not msgs.flags.c_contiguous:
        raise ValueError("msgs must be C-contiguous")
    n[0] = len(msgs)
    if n[0] == 0:
        return <const HttpMsg *>1   # never dereferenced
    cdef const uint8_t[::1] raw = msgs.view(np.uint8).reshape(-1)
    return <const HttpMsg *>&raw[0]


cdef object _hash_column(msgs, int eq):
    """Eq. `eq` (1, 2 or 3) of every message, uint32, before the modulo."""
    cdef size_t n, i
    cdef const HttpMsg *m = _msgs_ptr(msgs, &n)
    out = np.empty(n, dtype=np.uint32)
    cdef uint32_t[::1] o = out
    with nogil:
        for i in range(n):
            if eq == 1:
                o[i] = eq1_of(m[i].src_ip, m[i].src_port, m[i].dst_ip, m[i].dst_port, m[i].ip_version)
            elif eq == 2:
                o[i] = eq2_hash(m[i].src_ip, m[i].src_port, m[i].dst_ip, m[i].dst_port,
                                msg_key(&m[i]), m[i].ip_version)
            else:
                o[i] = eq3_of(m[i].src_ip, m[i].src_port, m[i].dst_ip, m[i].dst_port,
                              m[i].ip_version, msg_key(&m[i]))
    return out


def hash_eq1(msgs):
    """Eq. 1 (4-tuple XOR) per message, uint32, before the modulo."""
    return _hash_column(msgs, 1)


def hash_eq2(msgs):
    """Eq. 2 (the pairing table's hash) per message, uint32, before the modulo."""
    return _hash_column(msgs, 2)


def hash_eq3(msgs):
    """Eq. 3 (the consumer hash) per message, uint32, before the modulo: the consumer of a
    message among n is hash_eq3(msgs) % n."""
    return _hash_column(msgs, 3)


# ---------------------------------------------------------------------------------- reader: packets

# The reader's pass over a batch: which packets are HTTP first packets, their kind, consumer hash
# (Eq. 3) and 1xx routing, without parsing the messages. It walks exactly what
# ext/walk/dissect.pyx walks: link/IP/TCP (ext/walk/l34.pxd) and the first bytes of the payload
# (ext/walk/httpstart.c, the dissector's own rule), so it takes exactly the packets the dissector
# makes messages of. (Here, not in C, while the link/IP/TCP walk is Cython inlines.)
cdef size_t classify_packets(const PacketRef *refs, size_t n, const uint8_t *base,
                                    uint64_t size, FeedPkt *out, uint64_t *cnt,
                                    const L34Cfg *cfg) noexcept nogil:
    """The HTTP first packets of refs[0:n] (bytes in base[0:size]) into out[], in packet order;
    returns how many. cnt (indexed by DissectReason) gets the dissector's counters for the
    batch except uri_truncated, headers_incomplete, line_too_long and those of the messages
    after a first one in a segment, which only parsing the message can tell (the consumers
    count those: httpanalyzer.feeder.MESSAGE_COUNTERS). A payload that starts no message but
    continues a header block after which the packet tells a message starts
    (ext/walk/httpcont.c) is routed by that message; continuation_unknown is counted here
    (such packets are not routed)."""
    cdef size_t i, k = 0
    cdef uint64_t caplen
    cdef const uint8_t *p
    cdef L34 l
    cdef int r, kind, mid = 0, code
    cdef uint32_t s = 0, t = 0, e = 0, alen, at
    cdef FeedPkt *f
    for i in range(n):
        caplen = batch_caplen(refs, i, n, base, size)
        cnt[<int>DR_PACKETS] += 1
        if caplen == 0:
            cnt[<int>DR_LINK_TRUNCATED] += 1
            continue
        p = base + refs[i].offset
        r = l34_parse(p, <uint32_t>caplen, refs[i].linktype, &l, cfg)
        if l.encap_depth != 0:
            l34_count_encap(cnt, &l)
        if r != L34_DATA:
            cnt[r] += 1
            continue
        at = 0
        kind = http_start(p + l.payload_off, l.payload_caplen, l.payload_len, &s, &t, &mid)
        if kind == 0:
            cnt[<int>DR_NOT_HTTP] += 1
            if l.payload_caplen <= <uint32_t>WT_MAX_METHOD_LEN + 2 and \
                    http_split_start(p + l.payload_off, l.payload_caplen, l.payload_len):
                cnt[<int>DR_LINE_SPLIT] += 1
            kind = http_after_continuation(p + l.payload_off, l.payload_caplen, l.payload_len,
                                           &at, &s, &t, &mid)
            if kind <= 0:
                if kind == CONT_UNKNOWN:
                    cnt[<int>DR_CONT_UNKNOWN] += 1
                continue
        f = &out[k]
        k += 1
        memcpy(&f.ref, &refs[i], sizeof(PacketRef))
        f.ref.caplen = <uint32_t>caplen
        memset(f.src_ip, 0, 32)
        alen = 4 if l.ip_version == 4 else 16
        memcpy(f.src_ip, l.src, alen)
        memcpy(f.dst_ip, l.dst, alen)
        f.seq = l.seq + at
        f.src_port = l.src_port
        f.dst_port = l.dst_port
        f.ip_version = l.ip_version
        f.kind = <uint8_t>kind
        f.interim = 0
        f.next_seq = 0
        memset(f._pad, 0, 5)
        if l.payload_caplen < l.payload_len:
            cnt[<int>DR_PAYLOAD_TRUNCATED] += 1
        if at != 0:
            pass                # a message after a continued block: the packet stays not_http
        elif kind == MSG_REQUEST:
            cnt[<int>DR_HTTP_REQUEST] += 1
        else:
            cnt[<int>DR_HTTP_RESPONSE] += 1
        if kind == MSG_REQUEST:
            f.hash = eq3_of(f.src_ip, f.src_port, f.dst_ip, f.dst_port, f.ip_version, l.ack)
        else:
            f.hash = eq3_of(f.src_ip, f.src_port, f.dst_ip, f.dst_port, f.ip_version, f.seq)
            code = http_status_code(p + l.payload_off + at, s, l.payload_caplen - at, &e, &t)
            if code >= 100 and code < 200 and code != 101:
                f.interim = 1
                f.next_seq = l.seq + l.payload_len
    return k


# FeedPkt (ext/run/feeder.pyx classify_packets): one HTTP first packet as the reader found it.

cdef object _FEED_DTYPE = None


def feed_dtype():
    """numpy dtype of FeedPkt: the PacketRef fields (ts_ns, index, offset, caplen, ...) then
    src_ip, dst_ip, seq, hash, next_seq, src_port, dst_port, kind, interim, ip_version."""
    global _FEED_DTYPE
    cdef FeedPkt x
    cdef size_t b = <size_t>&x
    if _FEED_DTYPE is None:
        if _PACKET_DTYPE.itemsize != sizeof(PacketRef):
            raise RuntimeError("webtap.records.message.PACKET_DTYPE does not match ext/read/packet.pxd")
        names, formats, offsets = [], [], []
        for name in _PACKET_DTYPE.names:
            dt, off = _PACKET_DTYPE.fields[name][:2]
            names.append(name); formats.append(dt); offsets.append(off)
        for name, dt, off in (
                ("src_ip", ("u1", 16), <size_t>&x.src_ip - b), ("dst_ip", ("u1", 16), <size_t>&x.dst_ip - b),
                ("seq", "<u4", <size_t>&x.seq - b), ("hash", "<u4", <size_t>&x.hash - b),
                ("next_seq", "<u4", <size_t>&x.next_seq - b), ("src_port", "<u2", <size_t>&x.src_port - b),
                ("dst_port", "<u2", <size_t>&x.dst_port - b), ("kind", "u1", <size_t>&x.kind - b),
                ("interim", "u1", <size_t>&x.interim - b), ("ip_version", "u1", <size_t>&x.ip_version - b)):
            names.append(name); formats.append(dt); offsets.append(off)
        _FEED_DTYPE = np.dtype({"names": names, "formats": formats, "offsets": offsets,
                                "itemsize": sizeof(FeedPkt)})
    return _FEED_DTYPE


# User-named UDP tunnel ports: the one setting in ext/walk/dissect.pyx (webtap.dissect.set_tunnel_ports).
cdef const L34Cfg *_tunnel_cfg = l34_shared_cfg()


def classify_batch(packets, const uint8_t[::1] data):
    """The reader's pass over one packet batch (PACKET_DTYPE array, its byte buffer): which
    packets are HTTP first packets, their kind, consumer hash and 1xx routing. Returns
    (pkts, counters): pkts, a feed_dtype() array in packet order; counters, uint64 indexed by
    DissectReason, equal to the dissector's for the same batch except uri_truncated,
    headers_incomplete and line_too_long, which only parsing the message can tell (the
    consumers count those)."""
    pk = np.ascontiguousarray(np.asarray(packets))
    if pk.dtype != _PACKET_DTYPE or pk.ndim != 1:
        raise TypeError("packets must be a 1-D webtap.records.message.PACKET_DTYPE array")
    cdef Py_ssize_t n = pk.shape[0], k
    out = np.empty(n, dtype=feed_dtype())
    counters = np.zeros(<int>DR_N, dtype=np.uint64)
    cdef const uint8_t[::1] pkb = pk.view(np.uint8).reshape(-1)
    cdef uint8_t[::1] outb = out.view(np.uint8).reshape(-1)
    cdef uint64_t[::1] cntv = counters
    cdef const PacketRef *refs = <const PacketRef *>&pkb[0] if n else NULL
    cdef FeedPkt *fp = <FeedPkt *>&outb[0] if n else NULL
    cdef uint64_t size = data.shape[0]
    cdef const uint8_t *base = &data[0] if size > 0 else NULL
    with nogil:
        k = <Py_ssize_t>classify_packets(refs, <size_t>n, base, size, fp, &cntv[0], _tunnel_cfg)
    return out[:k], counters


# ---------------------------------------------------------------------------------- rings

cdef spsc_ctl *_attach(uint8_t[::1] mv, bint init) except NULL:
    if mv.shape[0] < SPSC_HDR + 4096:
        raise ValueError("ring region too small")
    if init:
        return spsc_init(&mv[0], mv.shape[0])
    cdef spsc_ctl *c = <spsc_ctl *>&mv[0]
    if c.magic != SPSC_MAGIC:
        raise ValueError("not an initialised ring region")
    return c


@cython.final
cdef class Ring:
    """A SPSC ring over a writable buffer (an mmap of shared memory). init=True lays out an
    empty ring; the other side attaches with init=False. The feeder writes with a Dispatcher;
    a consumer reads with next_frame / release."""
    cdef spsc_ctl *c
    cdef uint8_t[::1] mv

    def __cinit__(self, buf, bint init=False):
        self.mv = buf
        self.c = _attach(self.mv, init)

    @property
    def capacity(self):
        return self.c.capacity

    @property
    def max_frame(self):
        """Largest frame (header + body) the ring takes."""
        return spsc_max_frame(self.c)

    @property
    def used(self):
        return spsc_used(self.c)

    @property
    def msgs_done(self):
        return spsc_msgs_done(self.c)

    @property
    def frames_done(self):
        return spsc_frames_done(self.c)

    def next_frame(self, double timeout=0.1):
        """Consumer: wait up to `timeout` s for the next frame; None if none came. Returns
        (kind, trace, tick_ns, pkts, clocks, data, size): pkts (PACKET_DTYPE, offsets into
        data), clocks (int64) and data (uint8) are views into the ring, valid until
        release(size, npkts). A TICK or END frame has no packets."""
        cdef spsc_frame *f = NULL
        cdef int spins = 0
        cdef int64_t deadline = wt_now_ns() + <int64_t>(timeout * 1e9)
        with nogil:
            while True:
                f = spsc_peek(self.c)
                if f != NULL or wt_now_ns() >= deadline:
                    break
                spsc_backoff(&spins)
        if f == NULL:
            return None
        cdef size_t base = <uint8_t *>f - &self.mv[0]
        cdef size_t mo = base + sizeof(spsc_frame)
        cdef size_t co = mo + f.nmsgs * sizeof(PacketRef)
        cdef size_t do = co + f.nmsgs * sizeof(int64_t)
        arr = np.asarray(self.mv)
        msgs = arr[mo:co].view(_PACKET_DTYPE)
        clocks = arr[co:do].view(np.int64)
        data = arr[do:do + f.data_len]
        return f.kind, f.trace, f.tick_ns, msgs, clocks, data, f.size

    def release(self, uint64_t size, uint64_t nmsgs=0):
        """Consumer: give back the frame returned by next_frame; count its packets (HTTP
        messages) as done."""
        spsc_release(self.c, size)
        spsc_progress(self.c, nmsgs)


# ---------------------------------------------------------------------------------- routing of 1xx

# A response after an interim 1xx starts at the 1xx's SEQ + its length, not at the request's ACK,
# so Eq. 3 would send it elsewhere; the dispatcher remembers where each 1xx went.
cdef struct IRoute:
    uint8_t src[16]
    uint8_t dst[16]
    int64_t stamp
    uint32_t seq
    int32_t cons          # -1: free
    uint16_t sport
    uint16_t dport
    uint8_t ipv

cdef enum:
    IR_BUCKETS = 1 << 12
    IR_WAYS = 4


@cython.final
cdef class Dispatcher:
    """The feeder's side of N rings: route HTTP messages with Eq. 3, stamp them with the shared
    capture clock, write them as frames. check: a Python callable run every few ms while a ring
    is full (it raises to abort, e.g. when a consumer died). live: drop (and count) instead of
    waiting when a ring is full."""
    cdef spsc_ctl **rings
    cdef list _keep
    cdef readonly int n
    cdef int64_t now
    cdef bint has_now
    cdef readonly int64_t gc_timeout_ns
    cdef readonly bint live
    cdef object check
    cdef uint64_t[:, ::1] st
    cdef readonly object stats
    cdef IRoute *iroute
    cdef readonly uint64_t interim_overwritten
    cdef int32_t *cons
    cdef int64_t *clk
    cdef uint32_t *ext
    cdef int32_t *order
    cdef size_t scratch_cap

    def __cinit__(self, list bufs, int64_t gc_timeout_ns=60_000_000_000, bint live=False, check=None):
        cdef int c
        cdef uint8_t[::1] mv
        if not bufs:
            raise ValueError("at least one ring")
        self.n = len(bufs)
        self.rings = <spsc_ctl **>wt_zalloc(self.n, sizeof(spsc_ctl *))
        self.iroute = <IRoute *>wt_alloc(IR_BUCKETS * IR_WAYS * sizeof(IRoute))
        for c in range(IR_BUCKETS * IR_WAYS):
            self.iroute[c].cons = -1
        self._keep = []
        for c in range(self.n):
            mv = bufs[c]
            self.rings[c] = _attach(mv, False)
            self._keep.append(mv)
        self.gc_timeout_ns = gc_timeout_ns
        self.live = live
        self.check = check
        self.stats = np.zeros((self.n, S_N), dtype=np.uint64)
        self.st = self.stats
        self.has_now = False

    def __dealloc__(self):
        free(self.rings)
        free(self.iroute)
        free(self.cons)
        free(self.clk)
        free(self.ext)
        free(self.order)

    # -------------------------------------------------------------- waiting for room

    cdef int _reserve(self, int c, uint64_t size, spsc_frame **out, bint must=False) except -1 nogil:
        """Room for a frame in ring c. Returns 1 with *out set, or 0 when live and full (drop)
        unless `must` (END frames are never dropped). Otherwise waits (back-pressure), calling
        check() every ~20 ms; check() raising aborts."""
        cdef int spins = 0
        cdef int64_t t0 = 0, last = 0, t
        cdef spsc_frame *f
        while True:
            f = spsc_reserve(self.rings[c], size)
            if f != NULL:
                if t0:
                    self.st[c, S_STALL_NS] += wt_now_ns() - t0
                out[0] = f
                return 1
            if self.live and not must:
                return 0
            if t0 == 0:
                t0 = wt_now_ns()
                last = t0
            spsc_backoff(&spins)
            t = wt_now_ns()
            if t - last > 20_000_000:
                last = t
                if self.check is not None:
                    with gil:
                        self.check()

    cdef int _tick_one(self, int c, int64_t ts, uint32_t kind) except -1 nogil:
        cdef spsc_frame *f
        cdef uint64_t size = sizeof(spsc_frame)
        if not self._reserve(c, size, &f, kind == SPSC_FRAME_END):
            self.st[c, S_DROP_TICKS] += 1
            return 0
        f.size = size
        f.kind = kind
        f.trace = 0
        f.nmsgs = 0
        f.data_len = 0
        f.tick_ns = ts
        spsc_commit(self.rings[c], size)
        self.st[c, S_TICKS] += 1
        return 0

    cdef int _broadcast(self, int64_t ts) except -1 nogil:
        cdef int c
        for c in range(self.n):
            self._tick_one(c, ts, SPSC_FRAME_TICK)
        return 0

    # -------------------------------------------------------------- clock (pairing.pyx _advance)

    cdef int _clock_to(self, int64_t ts) except -1 nogil:
        """Move the shared clock as PairingTable._advance does. On a clock reset (ts earlier
        than the clock by more than the GC window) every consumer is first brought to the old
        clock, then sent ts: each one's own table resets exactly as the single table would."""
        if not self.has_now:
            self.has_now = True
            self.now = ts
        elif ts < self.now:
            if self.now - ts > self.gc_timeout_ns:
                self._broadcast(self.now)
                self._broadcast(ts)
                self.now = ts
        else:
            self.now = ts
        return 0

    # -------------------------------------------------------------- interim routes

    cdef inline uint32_t _ir_bucket(self, const uint8_t *src, uint16_t sport, const uint8_t *dst,
                                    uint16_t dport, uint32_t seq, uint8_t ipv) noexcept nogil:
        cdef uint32_t h = eq2_hash(src, sport, dst, dport, seq, ipv)
        h ^= h >> 16
        h *= 0x45d9f3b
        h ^= h >> 16
        return h & (IR_BUCKETS - 1)

    cdef int32_t _ir_find(self, const uint8_t *src, uint16_t sport, const uint8_t *dst,
                          uint16_t dport, uint32_t seq, uint8_t ipv) noexcept nogil:
        """The consumer a response at this 4-tuple and SEQ must go to after a 1xx; -1: none."""
        cdef uint32_t b = self._ir_bucket(src, sport, dst, dport, seq, ipv)
        cdef IRoute *r
        cdef int w
        for w in range(IR_WAYS):
            r = &self.iroute[b * IR_WAYS + w]
            if (r.cons >= 0 and r.seq == seq and r.sport == sport and r.dport == dport
                    and r.ipv == ipv and same_ip(r.src, src) and same_ip(r.dst, dst)):
                return r.cons
        return -1

    cdef void _ir_add(self, const uint8_t *src, uint16_t sport, const uint8_t *dst, uint16_t dport,
                      uint32_t seq, uint8_t ipv, int32_t c) noexcept nogil:
        """A 1xx went to c: its final response starts at `seq` (1xx SEQ + its payload length)."""
        cdef uint32_t b = self._ir_bucket(src, sport, dst, dport, seq, ipv)
        cdef IRoute *r
        cdef IRoute *victim = NULL
        cdef int w
        for w in range(IR_WAYS):
            r = &self.iroute[b * IR_WAYS + w]
            if r.cons < 0:
                victim = r
                break
            if (r.seq == seq and r.sport == sport and r.dport == dport
                    and same_ip(r.src, src) and same_ip(r.dst, dst)):
                victim = r
                break
            if victim == NULL or r.stamp < victim.stamp:
                victim = r
        if victim.cons >= 0 and not (victim.seq == seq and victim.sport == sport):
            self.interim_overwritten += 1
        memcpy(victim.src, src, 16)
        memcpy(victim.dst, dst, 16)
        victim.seq = seq
        victim.sport = sport
        victim.dport = dport
        victim.ipv = ipv
        victim.stamp = self.now
        victim.cons = c

    # -------------------------------------------------------------- messages

    cdef int _scratch(self, size_t n) except -1:
        if n <= self.scratch_cap:
            return 0
        self.cons = <int32_t *>wt_realloc(self.cons, n * sizeof(int32_t))
        self.clk = <int64_t *>wt_realloc(self.clk, n * sizeof(int64_t))
        self.ext = <uint32_t *>wt_realloc(self.ext, n * sizeof(uint32_t))
        self.order = <int32_t *>wt_realloc(self.order, n * sizeof(int32_t))
        self.scratch_cap = n
        return 0

    def tick(self, int64_t ts):
        """Advance the shared capture clock without a message (PairingTable.advance) and tell
        every consumer."""
        with nogil:
            self._clock_to(ts)
            self._broadcast(self.now)

    def end(self):
        """No more input: every consumer is brought to the shared clock (a consumer the last
        messages did not reach collects what the single table's GC collected by then), then an
        END frame (they flush and report)."""
        cdef int c
        with nogil:
            if self.has_now:
                self._broadcast(self.now)
            for c in range(self.n):
                self._tick_one(c, 0, SPSC_FRAME_END)
                spsc_set_done(self.rings[c])

    cdef inline int _clock_step(self, size_t i, size_t j, int64_t ts) except -1 nogil:
        """The single table's clock for message j of a segment that starts at i: 0 when a clock
        reset (ts earlier than the clock by more than the GC window) must start a new segment
        first; else clk[j] = the clock the single table has when j arrives, before its own
        step, and the clock moves on (a reset at j == i is broadcast by _clock_to)."""
        if self.has_now and ts < self.now and self.now - ts > self.gc_timeout_ns:
            if j > i:
                return 0
            self._clock_to(ts)
        self.clk[j] = self.now if self.has_now else ts
        if not self.has_now or ts > self.now:
            self.now = ts
            self.has_now = True
        return 1

    cdef inline int32_t _route(self, uint8_t kind, const uint8_t *src, uint16_t sport,
                               const uint8_t *dst, uint16_t dport, uint32_t seq, uint8_t ipv,
                               uint32_t hash, bint interim, uint32_t next_seq) noexcept nogil:
        """The consumer of a message: where an earlier 1xx on this 4-tuple and SEQ went, else
        Eq. 3 (`hash`) mod N; a 1xx (`interim`) routes the final response at next_seq the same way."""
        cdef int32_t c = -1
        if kind == MSG_RESPONSE:
            c = self._ir_find(src, sport, dst, dport, seq, ipv)
            if c >= 0:
                self.st[c, S_INTERIM] += 1
        if c < 0:
            c = hash % <uint32_t>self.n
        if interim:
            self._ir_add(src, sport, dst, dport, next_seq, ipv, c)
        return c

    def feed_packets(self, pkts, const uint8_t[::1] data, uint32_t trace=0):
        """Dispatch the HTTP first packets classify_batch found (a feed_dtype() array whose
        offsets index `data`) as PKTS frames; the consumers dissect them. Every packet is one
        message of the single-process run, so the shared clock, Eq. 3 routing and the 1xx
        routes are those the single table sees."""
        if pkts.dtype != feed_dtype() or not pkts.flags.c_contiguous:
            raise TypeError("pkts must be a C-contiguous feed_dtype() array")
        cdef size_t n = len(pkts)
        if n == 0:
            return
        self._scratch(n)
        cdef const uint8_t[::1] raw = pkts.view(np.uint8).reshape(-1)
        cdef const FeedPkt *m = <const FeedPkt *>&raw[0]
        cdef const uint8_t *buf = &data[0] if data.shape[0] else NULL
        cdef size_t buflen = data.shape[0]
        with nogil:
            self._feed_pkts(m, n, buf, buflen, trace)

    cdef int _feed_pkts(self, const FeedPkt *m, size_t n, const uint8_t *buf, size_t buflen,
                        uint32_t trace) except -1 nogil:
        """Route packets 0..n-1, segment by segment (a clock reset ends a segment): every
        FeedPkt is a message (classify_batch's rule is the dissector's), so the clock moves
        exactly as over the dissected messages."""
        cdef size_t i = 0, j
        cdef const FeedPkt *x
        cdef uint64_t lim = (spsc_max_frame(self.rings[0]) - sizeof(spsc_frame)
                             - sizeof(PacketRef) - sizeof(int64_t)) & ~(<uint64_t>7)
        while i < n:
            j = i
            while j < n:
                x = &m[j]
                if not self._clock_step(i, j, x.ref.ts_ns):
                    break
                self.cons[j] = self._route(x.kind, x.src_ip, x.src_port, x.dst_ip, x.dst_port,
                                           x.seq, x.ip_version, x.hash, x.interim, x.next_seq)
                if x.ref.offset >= buflen:
                    self.ext[j] = 0
                elif x.ref.caplen > buflen - x.ref.offset:
                    self.ext[j] = <uint32_t>(buflen - x.ref.offset)
                else:
                    self.ext[j] = x.ref.caplen
                if self.ext[j] > lim:
                    # a packet larger than a frame (a snaplen over ~1 MiB): its first bytes
                    # hold the HTTP head, which is all the consumer's dissector reads
                    self.ext[j] = lim
                j += 1
            self._write_segment(m, i, j, buf, trace)
            i = j
        return 0

    cdef inline void _count(self, int c, uint8_t kind) noexcept nogil:
        """Consumer c's balance counters (Table 3) for one message sent to it."""
        self.st[c, S_MSGS] += 1
        if kind == MSG_REQUEST:
            self.st[c, S_REQ] += 1
        else:
            self.st[c, S_RESP] += 1

    cdef int _write_segment(self, const FeedPkt *pk, size_t i, size_t j, const uint8_t *buf,
                            uint32_t trace) except -1 nogil:
        """Frames for packets i..j-1 (no clock reset among them), one run per consumer."""
        cdef int c
        cdef size_t k, cnt, start
        cdef int64_t counts[64]
        cdef int64_t *cnts = counts
        if self.n > 64:
            cnts = <int64_t *>wt_zalloc(self.n * 2, sizeof(int64_t))
        else:
            memset(counts, 0, sizeof(counts))
        # counting sort of message indices by consumer (stable: arrival order kept per consumer)
        for k in range(i, j):
            if self.cons[k] >= 0:
                cnts[self.cons[k]] += 1
        start = i
        for c in range(self.n):
            cnt = cnts[c]
            cnts[c] = start
            start += cnt
        for k in range(i, j):
            if self.cons[k] >= 0:
                self.order[cnts[self.cons[k]]] = <int32_t>k
                cnts[self.cons[k]] += 1
        start = i
        for c in range(self.n):
            # after the scatter cnts[c] is the end of c's run
            self._write_run(c, pk, start, <size_t>cnts[c], buf, trace)
            start = cnts[c]
        if cnts != counts:
            free(cnts)
        return 0

    cdef int _write_run(self, int c, const FeedPkt *pk, size_t a, size_t b, const uint8_t *buf,
                        uint32_t trace) except -1 nogil:
        """Packets order[a:b] (all for consumer c) as one or more PKTS frames in ring c."""
        cdef uint64_t maxf = spsc_max_frame(self.rings[c])
        cdef uint64_t per_msg = sizeof(PacketRef) + sizeof(int64_t)
        cdef PacketRef *orf
        cdef const FeedPkt *y
        cdef uint64_t size, dlen, need, off
        cdef size_t e, k, q
        cdef spsc_frame *f
        cdef int64_t *oc
        cdef uint8_t *od
        while a < b:
            # as many packets as fit in one frame
            size = sizeof(spsc_frame)
            dlen = 0
            e = a
            while e < b:
                need = per_msg + self.ext[self.order[e]]
                if e > a and spsc_align8(size + need) > maxf:
                    break
                size += need
                dlen += self.ext[self.order[e]]
                e += 1
            size = spsc_align8(size)
            if size > maxf:
                with gil:
                    raise ValueError(f"one packet needs a {size}-byte frame; ring maximum {maxf}")
            if not self._reserve(c, size, &f):
                self.st[c, S_DROP_MSGS] += e - a
                a = e
                continue
            f.size = size
            f.kind = SPSC_FRAME_PKTS
            f.trace = trace
            f.nmsgs = e - a
            f.data_len = dlen
            f.tick_ns = 0
            orf = <PacketRef *>(<uint8_t *>f + sizeof(spsc_frame))
            oc = <int64_t *>(orf + (e - a))
            od = <uint8_t *>(oc + (e - a))
            off = 0
            for q in range(e - a):
                k = self.order[a + q]
                y = &pk[k]
                memcpy(&orf[q], &y.ref, sizeof(PacketRef))
                orf[q].offset = off
                orf[q].caplen = self.ext[k]
                oc[q] = self.clk[k]
                if self.ext[k]:
                    memcpy(od + off, buf + y.ref.offset, self.ext[k])
                off += self.ext[k]
                self._count(c, y.kind)
            self.st[c, S_BYTES] += dlen
            self.st[c, S_FRAMES] += 1
            spsc_commit(self.rings[c], size)
            a = e
        return 0



# ------------------------------------------------------------------------ consumer lifetime

cdef extern from "<sys/prctl.h>" nogil:
    int prctl(int option, ...)
    int PR_SET_PDEATHSIG

cdef extern from "<unistd.h>" nogil:
    int getppid()


def die_with_parent(int ppid, int sig=9):
    """In a consumer just forked by process `ppid`: ask the kernel to send `sig` (SIGKILL) to
    this process when its parent dies (prctl PR_SET_PDEATHSIG; Linux), so that no consumer
    outlives a killed run. Returns False when the parent is already gone (it died before the
    request took effect): the caller ends at once. Note the kernel's rule: "parent" is the
    thread that forked, so the feeder is started from a thread that lives as long as the run."""
    if prctl(PR_SET_PDEATHSIG, <unsigned long>sig, <unsigned long>0, <unsigned long>0,
             <unsigned long>0) != 0:
        raise OSError("prctl(PR_SET_PDEATHSIG) failed")
    return getppid() == ppid
