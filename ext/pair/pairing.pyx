# cython: freethreading_compatible = False
"""Pairing stage: the paper's request/response table over HTTP message batches.

Rules (documented in docs/PAIRING.md, tested in tests/httpanalyzer/test_pairing.py):

* Cell = Eq. 2 value mod the number of cells (a power of two). A request and a response pair when
  their 4-tuples are reversed and response SEQ == request ACK, whichever arrives first.
* A cell's collision list keeps arrival order. An arriving message pairs with the OLDEST waiting
  counterpart of its key; if none waits it is appended and waits for its own counterpart
  (retransmissions, duplicates and pipelined requests on the same ACK therefore pair first-in,
  first-out). At any time the messages waiting on one key are all of one kind.
* An interim 1xx response (not 101) pairs with its request and emits a record; the request then
  waits on for the final response, whose SEQ is the 1xx's SEQ plus the 1xx's TCP payload length.
* The GC runs on capture time: before each message the clock advances to max(clock, ts) and every
  entry whose last change is >= gc_timeout old leaves as an unmatched record. A message earlier
  than the clock is counted (clock_backwards); one earlier by MORE than gc_timeout is a clock
  reset: everything waiting is flushed and the clock restarts at the message's time.
* At most max_pending messages wait (oldest evicted first), at most max_per_key of one kind on one
  key (oldest of them evicted). Every eviction is a flagged, counted unmatched record.

All work runs without the GIL; the GIL is taken only to raise on a failed allocation.
"""
import numpy as np

# the NumPy mirrors of the structs this module reads (the core's one home for them; it imports
# numpy only)
from webtap.records.message import MESSAGE_DTYPE as _MESSAGE_DTYPE

cimport cython
from libc.stdint cimport INT64_MIN, UINT64_MAX, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcmp, memcpy, memset

from message cimport (HttpMsg, Span, MSG_REQUEST, MSG_RESPONSE, MSGF_URI_TRUNCATED,
                      MSGF_HEADERS_INCOMPLETE, MSGF_MID_SEGMENT,
                      MSGF_AFTER_CONTINUATION, same_ip)
from pairing cimport *
from pendtable cimport (PendIndex, pt_alloc, pt_cell, pt_cells_for, pt_first, pt_free, pt_full,
                        pt_grow, pt_init, pt_link, pt_oldest, pt_release_all, pt_unlink)
from httphdr cimport HdrSpan, hdr_scan, HDR_MAX_NAMES
from util cimport WT_IP_TEXT, wt_alloc, wt_ip_text, wt_realloc, wt_utf8_seq, wt_zalloc


# Text fields kept per message, in arena order.
cdef enum:
    T_METHOD = 0
    T_URI = 1
    T_HOST = 2
    T_UA = 3
    T_REASON = 4
    T_N = 5

# Per-field bounds on stored and emitted text (bytes). The URI gets what the others leave of
# MAX_TEXT, so one message never needs more than the largest arena class.
cdef enum:
    MAX_TEXT = 65536
    MAX_METHOD = 64
    MAX_HOST = 1024
    MAX_UA = 2048
    MAX_REASON = 256
    MAX_XVALUE = 4096           # one chosen header's value (--headers)
    MAX_XTOTAL = 16384          # all chosen headers' values of one message

# Arena: size classes of 64 << k bytes, carved from 1 MiB chunks, recycled on free lists.
cdef enum:
    N_CLASSES = 11
    CLASS0 = 64
    CHUNK = 1 << 20
    NO_CLASS = 0xFFFFFFFF

# Output string columns, in schema order.
cdef enum:
    C_CLIENT_IP = 0
    C_SERVER_IP = 1
    C_METHOD = 2
    C_URI = 3
    C_HOST = 4
    C_UA = 5
    C_REASON = 6
    C_OUTER_SRC = 7
    C_OUTER_DST = 8
    C_N = 9

STRING_COLUMNS = ("client_ip", "server_ip", "method", "uri", "host", "user_agent", "reason",
                  "outer_src_ip", "outer_dst_ip")

COUNTER_NAMES = (
    "messages", "requests", "responses", "bad_kind", "bad_span", "paired", "paired_interim",
    "paired_after_interim", "out_of_order", "request_repeat", "response_repeat",
    "request_unmatched_gc", "response_unmatched_gc", "request_unmatched_end",
    "response_unmatched_end", "request_unmatched_cap", "response_unmatched_cap",
    "request_unmatched_key_limit", "response_unmatched_key_limit", "request_unmatched_clock_reset",
    "response_unmatched_clock_reset", "final_response_missing", "clock_backwards", "clock_reset",
    "no_host", "status_odd", "text_clipped", "text_latin1", "arena_full", "grows", "peak_pending",
)
assert len(COUNTER_NAMES) == PC_N

cdef struct TextView:
    const uint8_t *p[5]         # start of each text field
    uint32_t n[5]               # its length

cdef struct StrCol:
    uint8_t *data               # concatenated values
    size_t len                  # bytes used in data
    size_t cap                  # bytes allocated
    int32_t *offs               # rows + 1 offsets into data (Arrow layout)
    uint8_t *valid              # one byte per row: 1 valid, 0 null


@cython.final

cdef inline uint8_t _version_code(const HttpMsg *m, const uint8_t *buf, size_t buflen) noexcept nogil:
    """major * 10 + minor of the message's version token when it is exactly HTTP/d.d (the
    dissector's MSGF_BAD_VERSION test), 0 otherwise: not HTTP/d.d, span outside the buffer, or a
    request line without its end in the packet (the token may go on). HTTP/0.0 reads as 0."""
    cdef uint64_t start = m.pkt_offset + m.version.off
    cdef const uint8_t *p
    if buf == NULL or m.version.len != 8 or start > buflen or buflen - start < 8:
        return 0
    if m.kind == MSG_REQUEST and (m.flags & MSGF_URI_TRUNCATED):
        return 0
    p = buf + start
    if (memcmp(p, b"HTTP/", 5) != 0 or p[5] < 48 or p[5] > 57 or p[6] != 46
            or p[7] < 48 or p[7] > 57):
        return 0
    return <uint8_t>((p[5] - 48) * 10 + (p[7] - 48))


cdef inline bint _is_ascii(const uint8_t *p, size_t n) noexcept nogil:
    """No byte of p[0:n] has its top bit set: eight bytes a step."""
    cdef uint64_t acc = 0, w
    cdef size_t k = 0
    while k + 8 <= n:
        memcpy(&w, p + k, 8)
        acc |= w
        k += 8
    while k < n:
        acc |= p[k]
        k += 1
    return (acc & 0x8080808080808080ULL) == 0

cdef class PairingTable:
    """The paper's pairing table with a capture-time GC; emits records in column batches.

    Parameters: gc_timeout_ns (capture-time window, default 60 s), max_pending (hard cap on
    waiting messages), max_per_key (cap on same-kind messages waiting on one key), initial_cells
    (power of two), arena_max_bytes (cap on the text arena).
    """
    # the index (ext/pair/pendtable.pxd: pool, free list, cells, chains, age list) and a typed alias
    # of its pool, refreshed after pt_alloc (_alloc_entry), the only call that moves it
    cdef PendIndex ix
    cdef PendEntry *pool
    cdef int64_t now
    cdef bint has_now
    cdef readonly int64_t gc_timeout_ns
    cdef readonly int64_t max_pending
    cdef readonly int64_t max_per_key
    # arena
    cdef uint8_t *afree[N_CLASSES]
    cdef uint8_t **chunks
    cdef size_t nchunks
    cdef size_t chunk_used
    cdef readonly size_t arena_max_bytes
    # output
    cdef TxnRecord *recs
    cdef size_t nrec
    cdef size_t rec_cap
    cdef StrCol cols[C_N]
    cdef uint64_t cnt[<int>PC_N]
    cdef public uint16_t trace  # trace id stamped on the messages of the next feed()
    # chosen headers (`headers=`): extra text fields stored after the five in each arena block
    # (nx uint32 lengths, then the values) and emitted as 2*nx more string columns
    cdef int nx
    cdef uint8_t *xnames        # lower-case names back to back
    cdef uint32_t xname_off[HDR_MAX_NAMES + 1]
    cdef Span *xspans           # scratch: nx spans per message of the batch being fed
    cdef size_t xspans_cap
    cdef StrCol *xcols          # request value of name k at 2k, response value at 2k + 1
    cdef uint8_t *xflags        # per record: 1 request header block incomplete, 2 response's
    cdef readonly tuple headers

    def __cinit__(self, int64_t gc_timeout_ns=60_000_000_000, int64_t max_pending=1 << 20,
                  int64_t max_per_key=64, uint32_t initial_cells=1 << 12,
                  size_t arena_max_bytes=512 << 20, headers=()):
        cdef int i
        cdef bytes allnames
        if gc_timeout_ns <= 0:
            raise ValueError("gc_timeout_ns must be positive")
        if max_pending < 1 or max_pending > (1 << 30):
            raise ValueError("max_pending must be in 1 .. 2**30")
        if max_per_key < 1:
            raise ValueError("max_per_key must be >= 1")
        if initial_cells < 16 or (initial_cells & (initial_cells - 1)):
            raise ValueError("initial_cells must be a power of two >= 16")
        self.gc_timeout_ns = gc_timeout_ns
        self.max_pending = max_pending
        self.max_per_key = max_per_key
        self.arena_max_bytes = arena_max_bytes
        # the pool holds max_pending + 1 entries: one message may be in flight while max_pending wait
        pt_init(&self.ix, sizeof(PendEntry), 1024, <int32_t>(max_pending + 1), initial_cells,
                pt_cells_for(max_pending, initial_cells))
        self.pool = NULL
        self.has_now = False
        self.now = 0
        for i in range(N_CLASSES):
            self.afree[i] = NULL
        self.chunks = NULL
        self.nchunks = 0
        self.chunk_used = CHUNK
        self.recs = NULL
        self.trace = 0
        self.nrec = 0
        self.rec_cap = 0
        memset(self.cols, 0, sizeof(self.cols))
        memset(self.cnt, 0, sizeof(self.cnt))
        self.headers = tuple(headers)
        if len(self.headers) > HDR_MAX_NAMES:
            raise ValueError(f"at most {HDR_MAX_NAMES} chosen headers")
        lowered = []
        for h in self.headers:
            b = h.encode("ascii") if isinstance(h, str) else bytes(h)
            if not b or any(c <= 32 or c >= 127 or c in b'()<>@,;:\\"/[]?={}' for c in b):
                raise ValueError(f"not a header field name: {h!r}")
            lowered.append(b.lower())
        self.nx = len(lowered)
        allnames = b"".join(lowered)
        self.xnames = <uint8_t *>wt_alloc(len(allnames) + 1)
        self.xcols = <StrCol *>wt_zalloc(2 * self.nx + 1, sizeof(StrCol))
        if allnames:
            memcpy(self.xnames, <const char *>allnames, len(allnames))
        self.xname_off[0] = 0
        for i in range(self.nx):
            self.xname_off[i + 1] = self.xname_off[i] + len(lowered[i])

    def __dealloc__(self):
        cdef size_t i
        pt_release_all(&self.ix)
        self.pool = NULL
        for i in range(self.nchunks):
            free(self.chunks[i])
        free(self.chunks)
        free(self.recs)
        for i in range(C_N):
            free(self.cols[i].data)
            free(self.cols[i].offs)
            free(self.cols[i].valid)
        if self.xcols != NULL:
            for i in range(2 * self.nx):
                free(self.xcols[i].data)
                free(self.xcols[i].offs)
                free(self.xcols[i].valid)
        free(self.xcols)
        free(self.xnames)
        free(self.xspans)
        free(self.xflags)

    # ------------------------------------------------------------------ public API

    def feed(self, msgs, const uint8_t[::1] data, const int64_t[::1] clocks=None):
        """Offer one batch of HttpMsg (a MESSAGE_DTYPE array) whose spans point into `data`.
        Text that must outlive the batch is copied; nothing keeps a reference to `data`.
        clocks (feeder consumers): per message, the capture clock of the whole stream just
        before it; the table advances to it first, so its GC runs exactly as a single table
        fed every message of the stream would."""
        if msgs.dtype != _MESSAGE_DTYPE:
            raise TypeError("msgs must be a webtap.records.message.MESSAGE_DTYPE array")
        if msgs.dtype.itemsize != sizeof(HttpMsg):
            raise TypeError("MESSAGE_DTYPE does not match ext/walk/message.pxd HttpMsg")
        if len(msgs) == 0:
            return
        cdef const uint8_t[::1] raw = np.ascontiguousarray(msgs).view(np.uint8).reshape(-1)
        cdef const HttpMsg *m = <const HttpMsg *>&raw[0]
        cdef size_t n = len(msgs)
        cdef const uint8_t *buf = &data[0] if data.shape[0] else NULL
        cdef size_t buflen = data.shape[0]
        cdef const int64_t *clk = NULL
        if clocks is not None:
            if <size_t>clocks.shape[0] != n:
                raise ValueError("clocks must have one value per message")
            clk = &clocks[0]
        cdef size_t i
        if self.nx and n * self.nx > self.xspans_cap:
            self.xspans = <Span *>wt_realloc(self.xspans, n * self.nx * sizeof(Span))
            self.xspans_cap = n * self.nx
        with nogil:
            if self.nx:
                # the chosen headers: one pass over the batch's messages, spans into the packets
                for i in range(n):
                    hdr_scan(buf + m[i].pkt_offset if m[i].pkt_offset <= buflen else NULL,
                             buflen - m[i].pkt_offset if m[i].pkt_offset <= buflen else 0,
                             m[i].payload_off, m[i].payload_caplen,
                             m[i].method.off if m[i].kind == MSG_REQUEST else m[i].version.off,
                             m[i].kind == MSG_REQUEST and (m[i].flags & MSGF_URI_TRUNCATED) != 0,
                             self.xnames, self.xname_off, self.nx,
                             <HdrSpan *>(self.xspans + i * self.nx))
            self._feed(m, n, buf, buflen, clk)

    def advance(self, int64_t now_ns):
        """Move the capture clock to now_ns (e.g. the last packet of a batch without messages,
        or wall time on an idle live interface) and run the GC."""
        with nogil:
            self._advance(now_ns)

    def flush(self):
        """End of trace: every waiting message leaves as an unmatched record (reason 'end')."""
        with nogil:
            while pt_oldest(&self.ix) != -1:
                self._evict(pt_oldest(&self.ix), UR_END)

    def take(self):
        """Hand out the records emitted since the last take() and reset the builders.

        Returns (records, strings): a TxnRecord byte array (view it with RECORD_DTYPE) and, per
        name in STRING_COLUMNS, (offsets int32[n+1], data uint8[...], valid uint8[n]).
        The arrays own copies of their data."""
        cdef size_t n = self.nrec
        cdef size_t i
        cdef uint8_t[::1] rv
        cdef int32_t[::1] ov
        cdef uint8_t[::1] dv
        cdef uint8_t[::1] vv
        recs = np.empty(n * sizeof(TxnRecord), dtype=np.uint8)
        rv = recs
        if n:
            memcpy(&rv[0], self.recs, n * sizeof(TxnRecord))
        strings = {}
        for i in range(C_N):
            offs = np.zeros(n + 1, dtype=np.int32)
            vals = np.empty(self.cols[i].len, dtype=np.uint8)
            valid = np.empty(n, dtype=np.uint8)
            ov = offs
            dv = vals
            vv = valid
            if n:
                memcpy(&ov[0], self.cols[i].offs, (n + 1) * sizeof(int32_t))
                memcpy(&vv[0], self.cols[i].valid, n)
            if self.cols[i].len:
                memcpy(&dv[0], self.cols[i].data, self.cols[i].len)
            self.cols[i].len = 0
            strings[STRING_COLUMNS[i]] = (offs, vals, valid)
        for i in range(2 * <size_t>self.nx):
            offs = np.zeros(n + 1, dtype=np.int32)
            vals = np.empty(self.xcols[i].len, dtype=np.uint8)
            valid = np.empty(n, dtype=np.uint8)
            ov = offs
            dv = vals
            vv = valid
            if n:
                memcpy(&ov[0], self.xcols[i].offs, (n + 1) * sizeof(int32_t))
                memcpy(&vv[0], self.xcols[i].valid, n)
            if self.xcols[i].len:
                memcpy(&dv[0], self.xcols[i].data, self.xcols[i].len)
            self.xcols[i].len = 0
            strings[("response" if i & 1 else "request", i // 2)] = (offs, vals, valid)
        if self.nx:
            xf = np.empty(n, dtype=np.uint8)
            if n:
                vv = xf
                memcpy(&vv[0], self.xflags, n)
            strings["headers_incomplete"] = xf
        self.nrec = 0
        return recs, strings

    # ------------------------------------------------------------------ hand-over (distributed)
    # httpanalyzer.distributed runs one table per chunk of a trace and repairs the boundaries:
    # the entries still waiting at a chunk's end are exported, and a table for the next chunk
    # is seeded with them (and with the capture clock), so it goes on exactly as one table
    # over the whole trace would.

    @property
    def clock(self):
        """The capture clock (ns), or None before the first message or advance()."""
        return self.now if self.has_now else None

    def set_clock(self, int64_t now_ns):
        """Set the capture clock without running the GC (seeding a table that takes over)."""
        self.has_now = True
        self.now = now_ns

    @staticmethod
    def pending_layout():
        """(itemsize, {field: offset}) of the PendEntry struct that export_pending() hands out."""
        cdef PendEntry e
        cdef size_t b = <size_t>&e
        return sizeof(PendEntry), {
            "ts_ns": <size_t>&e.ts_ns - b, "stamp_ns": <size_t>&e.links.stamp - b,
            "pkt_index": <size_t>&e.pkt_index - b, "src_ip": <size_t>&e.src_ip - b,
            "dst_ip": <size_t>&e.dst_ip - b, "tlen": <size_t>&e.tlen - b, "seq": <size_t>&e.seq - b,
            "ack": <size_t>&e.ack - b, "key": <size_t>&e.key - b,
            "payload_len": <size_t>&e.payload_len - b, "src_port": <size_t>&e.src_port - b,
            "dst_port": <size_t>&e.dst_port - b, "status": <size_t>&e.status - b,
            "vlan": <size_t>&e.vlan - b, "msg_flags": <size_t>&e.msg_flags - b,
            "rflags": <size_t>&e.rflags - b, "kind": <size_t>&e.kind - b,
            "method_id": <size_t>&e.method_id - b, "ip_version": <size_t>&e.ip_version - b,
            "interim_done": <size_t>&e.interim_done - b, "trace": <size_t>&e.trace - b,
            "encap": <size_t>&e.encap - b, "outer_src": <size_t>&e.outer_src - b,
            "outer_dst": <size_t>&e.outer_dst - b, "tunnel_id": <size_t>&e.tunnel_id - b,
            "outer_ip_version": <size_t>&e.outer_ip_version - b,
            "http_version": <size_t>&e.http_version - b}

    def export_pending(self):
        """Every waiting entry, oldest change first (the age list; each collision list is that
        order restricted to its cell), as (entries, text): entries a uint8 array of PendEntry
        structs with the pointer and link fields zeroed, text their five text fields back to
        back (lengths in tlen). The table is not changed."""
        cdef size_t n = <size_t>self.ix.n
        cdef size_t total = 0, toff = 0, k = 0
        cdef int32_t j
        cdef int f
        cdef uint32_t tl, xl
        cdef PendEntry *o
        j = pt_oldest(&self.ix)
        while j != -1:
            for f in range(T_N):
                total += self.pool[j].tlen[f]
            total += self._xsize(&self.pool[j])
            j = self.pool[j].links.age_next
        ents = np.zeros(n * sizeof(PendEntry), dtype=np.uint8)
        text = np.empty(total, dtype=np.uint8)
        cdef uint8_t[::1] ev = ents
        cdef uint8_t[::1] tv = text
        j = pt_oldest(&self.ix)
        while j != -1:
            o = <PendEntry *>&ev[k * sizeof(PendEntry)]
            memcpy(o, &self.pool[j], sizeof(PendEntry))
            tl = 0
            for f in range(T_N):
                tl += o.tlen[f]
            if tl:
                memcpy(&tv[toff], self.pool[j].text, tl)
                toff += tl
            if self.nx:
                # the chosen headers' lengths (zeros when the entry has no block) and values
                xl = self._xsize(&self.pool[j])
                if self.pool[j].text != NULL:
                    memcpy(&tv[toff], self.pool[j].text + tl, xl)
                else:
                    memset(&tv[toff], 0, xl)
                toff += xl
            o.text = NULL
            o.tcap = 0
            o.links.hash = 0
            o.links.next = -1
            o.links.age_prev = -1
            o.links.age_next = -1
            k += 1
            j = self.pool[j].links.age_next
        return ents, text

    def import_pending(self, const uint8_t[::1] entries, const uint8_t[::1] text):
        """Append entries exported by export_pending() (of a table with the same rules) as
        waiting messages, in the order given, with their stamps, keys and flags unchanged."""
        cdef size_t n, i, toff = 0
        cdef int32_t idx
        cdef int f
        cdef PendEntry *e
        cdef TextView tv
        cdef const uint8_t *xp[HDR_MAX_NAMES]
        cdef uint32_t xn[HDR_MAX_NAMES]
        cdef int k
        if entries.shape[0] % sizeof(PendEntry):
            raise ValueError("import_pending: not a whole number of PendEntry structs")
        n = entries.shape[0] // sizeof(PendEntry)
        for i in range(n):
            idx = self._alloc_entry()
            e = &self.pool[idx]
            memcpy(e, &entries[i * sizeof(PendEntry)], sizeof(PendEntry))
            for f in range(T_N):
                if toff + e.tlen[f] > <size_t>text.shape[0]:
                    raise ValueError("import_pending: text shorter than the entries say")
                tv.p[f] = &text[toff] if e.tlen[f] else NULL
                tv.n[f] = e.tlen[f]
                toff += e.tlen[f]
            if self.nx:
                if toff + 4 * <size_t>self.nx > <size_t>text.shape[0]:
                    raise ValueError("import_pending: text shorter than the entries say")
                for k in range(self.nx):
                    memcpy(&xn[k], &text[toff + 4 * k], 4)
                toff += 4 * self.nx
                for k in range(self.nx):
                    if xn[k] > MAX_XVALUE or toff + xn[k] > <size_t>text.shape[0]:
                        raise ValueError("import_pending: bad chosen-header text")
                    xp[k] = &text[toff] if xn[k] else NULL
                    toff += xn[k]
            self._store_text(e, &tv, xp, xn)
            pt_link(&self.ix, idx, eq2_hash(e.src_ip, e.src_port, e.dst_ip, e.dst_port, e.key,
                                            e.ip_version), e.links.stamp)
            if <uint64_t>self.ix.n > self.cnt[PC_PEAK_PENDING]:
                self.cnt[PC_PEAK_PENDING] = self.ix.n
            self.cnt[PC_GROWS] += pt_grow(&self.ix)

    @property
    def pending(self):
        """Messages waiting in the table now."""
        return self.ix.n

    @property
    def cells(self):
        """Number of cells (a power of two)."""
        return self.ix.ncells

    @property
    def pool_capacity(self):
        """Entries allocated in the pool (waiting or free)."""
        return self.ix.pool_cap

    @property
    def arena_bytes(self):
        """Bytes allocated for the text arena."""
        return self.nchunks * CHUNK

    @property
    def records_waiting(self):
        """Records emitted and not yet taken."""
        return self.nrec

    def counters(self):
        """Counters by name (see COUNTER_NAMES / ext/pair/pairing.pxd PairCounter)."""
        cdef int i
        return {COUNTER_NAMES[i]: self.cnt[i] for i in range(PC_N)}

    @staticmethod
    def record_size():
        return sizeof(TxnRecord)

    @staticmethod
    def record_layout():
        """{field: offset} of the TxnRecord struct (webtap.records.http.RECORD_DTYPE mirrors it)."""
        cdef TxnRecord r
        cdef size_t b = <size_t>&r
        return {
            "request_ts_ns": <size_t>&r.request_ts_ns - b, "response_ts_ns": <size_t>&r.response_ts_ns - b,
            "request_pkt_index": <size_t>&r.request_pkt_index - b,
            "response_pkt_index": <size_t>&r.response_pkt_index - b,
            "client_ip": <size_t>&r.client_ip - b, "server_ip": <size_t>&r.server_ip - b,
            "request_ack": <size_t>&r.request_ack - b, "response_seq": <size_t>&r.response_seq - b,
            "client_port": <size_t>&r.client_port - b, "server_port": <size_t>&r.server_port - b,
            "status": <size_t>&r.status - b, "vlan": <size_t>&r.vlan - b,
            "msg_flags": <size_t>&r.msg_flags - b, "ip_version": <size_t>&r.ip_version - b,
            "method_id": <size_t>&r.method_id - b, "outcome": <size_t>&r.outcome - b,
            "unmatched_reason": <size_t>&r.unmatched_reason - b, "rflags": <size_t>&r.rflags - b,
            "request_trace": <size_t>&r.request_trace - b,
            "response_trace": <size_t>&r.response_trace - b, "encap": <size_t>&r.encap - b,
            "outer_src": <size_t>&r.outer_src - b, "outer_dst": <size_t>&r.outer_dst - b,
            "tunnel_id": <size_t>&r.tunnel_id - b, "outer_ip_version": <size_t>&r.outer_ip_version - b,
            "http_version": <size_t>&r.http_version - b}

    @staticmethod
    def hash_eq2(const uint8_t[::1] src_ip, uint16_t src_port, const uint8_t[::1] dst_ip,
                 uint16_t dst_port, uint32_t key, uint8_t ip_version):
        """The paper's Eq. 2 value (before mod), exposed for tests and hash histograms."""
        if src_ip.shape[0] != 16 or dst_ip.shape[0] != 16:
            raise ValueError("addresses are 16 bytes (HttpMsg layout)")
        return eq2_hash(&src_ip[0], src_port, &dst_ip[0], dst_port, key, ip_version)

    # ------------------------------------------------------------------ ingestion

    cdef int _feed(self, const HttpMsg *m, size_t n, const uint8_t *buf, size_t buflen,
                   const int64_t *clk) except -1 nogil:
        """Process n messages. Returns 0, or -1 with MemoryError set."""
        cdef size_t i
        cdef int32_t idx
        cdef TextView tv
        for i in range(n):
            self.cnt[PC_MESSAGES] += 1
            if m[i].kind == MSG_REQUEST:
                self.cnt[PC_REQUESTS] += 1
            elif m[i].kind == MSG_RESPONSE:
                self.cnt[PC_RESPONSES] += 1
            else:
                self.cnt[PC_BAD_KIND] += 1
                continue
            if clk != NULL:
                self._advance(clk[i])
            self._advance(m[i].ts_ns)
            idx = self._alloc_entry()
            self._fill_entry(&self.pool[idx], &m[i], buf, buflen,
                             self.xspans + i * self.nx if self.nx else NULL)
            # A response inside a segment after another one (MSGF_MID_SEGMENT) may also pair on
            # its packet's SEQ, unless the segment starts inside an earlier message
            # (MSGF_AFTER_CONTINUATION: that SEQ is no message's; docs/PAIRING.md "Messages
            # inside a segment")
            self._place(idx, m[i].seq - m[i].seg_off,
                        m[i].kind == MSG_RESPONSE and (m[i].flags & MSGF_MID_SEGMENT) != 0
                        and m[i].seg_off != 0 and (m[i].flags & MSGF_AFTER_CONTINUATION) == 0)
        return 0

    cdef void _span(self, TextView *tv, int f, const HttpMsg *m, Span s, const uint8_t *buf,
                    size_t buflen, uint32_t bound) noexcept nogil:
        cdef uint64_t start = m.pkt_offset + s.off
        tv.p[f] = NULL
        tv.n[f] = 0
        if s.len == 0:
            return
        if buf == NULL or start > buflen or s.len > buflen - start:
            self.cnt[PC_BAD_SPAN] += 1
            return
        tv.p[f] = buf + start
        tv.n[f] = s.len if s.len < bound else bound

    cdef void _fill_entry(self, PendEntry *e, const HttpMsg *m, const uint8_t *buf,
                          size_t buflen, const Span *xs) noexcept nogil:
        """Copy the numeric fields of m into e and its text (bounded) into the arena; xs: the
        spans of the chosen headers' values in m (NULL when none are chosen)."""
        cdef TextView tv
        cdef uint32_t others, f
        cdef bint clipped = False
        cdef const uint8_t *xp[HDR_MAX_NAMES]
        cdef uint32_t xn[HDR_MAX_NAMES]
        cdef uint32_t xtotal = 0
        cdef uint64_t start
        cdef int k
        for k in range(self.nx):
            xp[k] = NULL
            xn[k] = 0
            if xs == NULL or xs[k].len == 0:
                continue
            start = m.pkt_offset + xs[k].off
            if buf == NULL or start > buflen or xs[k].len > buflen - start:
                self.cnt[PC_BAD_SPAN] += 1
                continue
            xp[k] = buf + start
            xn[k] = xs[k].len
            if xn[k] > MAX_XVALUE:
                xn[k] = MAX_XVALUE
            if xn[k] > MAX_XTOTAL - xtotal:
                xn[k] = MAX_XTOTAL - xtotal
            if xn[k] < xs[k].len:
                clipped = True
            xtotal += xn[k]
        if self.nx:
            xtotal += 4 * self.nx
        e.ts_ns = m.ts_ns
        e.pkt_index = m.pkt_index
        memcpy(e.src_ip, m.src_ip, 16)
        memcpy(e.dst_ip, m.dst_ip, 16)
        e.seq = m.seq
        e.ack = m.ack
        e.kind = m.kind
        e.key = m.ack if m.kind == MSG_REQUEST else m.seq
        e.payload_len = m.payload_len
        e.src_port = m.src_port
        e.dst_port = m.dst_port
        e.status = m.status
        e.vlan = m.vlan
        e.msg_flags = m.flags
        e.rflags = 0
        e.method_id = m.method_id
        e.ip_version = m.ip_version
        e.interim_done = 0
        e.trace = self.trace
        e.encap = m.encap
        memcpy(e.outer_src, m.outer_src, 16)
        memcpy(e.outer_dst, m.outer_dst, 16)
        e.tunnel_id = m.tunnel_id
        e.outer_ip_version = m.outer_ip_version
        e.http_version = _version_code(m, buf, buflen)
        if m.kind == MSG_REQUEST:
            self._span(&tv, T_METHOD, m, m.method, buf, buflen, MAX_METHOD)
            self._span(&tv, T_HOST, m, m.host, buf, buflen, MAX_HOST)
            self._span(&tv, T_UA, m, m.user_agent, buf, buflen, MAX_UA)
            others = tv.n[T_METHOD] + tv.n[T_HOST] + tv.n[T_UA]
            self._span(&tv, T_URI, m, m.uri, buf, buflen, MAX_TEXT - others - xtotal)
            tv.p[T_REASON] = NULL
            tv.n[T_REASON] = 0
            clipped = (clipped or tv.n[T_METHOD] < m.method.len or tv.n[T_HOST] < m.host.len
                       or tv.n[T_UA] < m.user_agent.len)
            if tv.p[T_URI] != NULL and tv.n[T_URI] < m.uri.len:
                clipped = True
                e.rflags |= RF_URI_TRUNCATED
            if m.flags & MSGF_URI_TRUNCATED:
                e.rflags |= RF_URI_TRUNCATED
            if m.host.len == 0:
                e.rflags |= RF_NO_HOST
                self.cnt[PC_NO_HOST] += 1
        else:
            for f in range(T_REASON):
                tv.p[f] = NULL
                tv.n[f] = 0
            self._span(&tv, T_REASON, m, m.reason, buf, buflen, MAX_REASON)
            clipped = clipped or (tv.p[T_REASON] != NULL and tv.n[T_REASON] < m.reason.len)
            if m.status < 100 or m.status > 599:
                self.cnt[PC_STATUS_ODD] += 1
        if clipped:
            e.rflags |= RF_TEXT_CLIPPED
            self.cnt[PC_TEXT_CLIPPED] += 1
        self._store_text(e, &tv, xp, xn)

    # ------------------------------------------------------------------ the table

    cdef int _place(self, int32_t idx, uint32_t alt_key, bint has_alt) except -1 nogil:
        """Pair entry idx (allocated, not linked) with the oldest waiting counterpart of its key,
        or link it to wait. Loops when an interim 1xx re-keys the request. Returns 0 or -1.
        The chain walk and the links are ext/pair/pendtable.pxd's; the predicate is the paper's.
        has_alt (a response inside a segment after another response): when no request waits on
        its own SEQ, it takes alt_key, its packet's SEQ, and looks (or waits) there: pipelined
        requests carry the ACK the segment's first response answers."""
        cdef PendEntry *e
        cdef PendEntry *w
        cdef int32_t j, match, oldest_same, req, resp
        cdef uint32_t h
        cdef int64_t same
        cdef bint repeat
        while True:
            e = &self.pool[idx]
            h = eq2_hash(e.src_ip, e.src_port, e.dst_ip, e.dst_port, e.key, e.ip_version)
            match = -1
            oldest_same = -1
            same = 0
            repeat = False
            j = pt_first(&self.ix, pt_cell(&self.ix, h))
            while j != -1:
                w = &self.pool[j]
                if w.key == e.key and w.ip_version == e.ip_version:
                    if (w.kind != e.kind and w.src_port == e.dst_port and w.dst_port == e.src_port
                            and same_ip(w.src_ip, e.dst_ip) and same_ip(w.dst_ip, e.src_ip)):
                        match = j
                        break
                    if (w.kind == e.kind and w.src_port == e.src_port and w.dst_port == e.dst_port
                            and same_ip(w.src_ip, e.src_ip) and same_ip(w.dst_ip, e.dst_ip)):
                        same += 1
                        if oldest_same == -1:
                            oldest_same = j
                        if w.seq == e.seq and w.ack == e.ack and not w.interim_done:
                            repeat = True
                j = w.links.next
            if match == -1 and has_alt:
                has_alt = False
                e.key = alt_key
                continue
            has_alt = False
            if match == -1:
                if repeat:
                    if e.kind == MSG_REQUEST:
                        e.rflags |= RF_REQUEST_REPEAT
                        self.cnt[PC_REQUEST_REPEAT] += 1
                    else:
                        e.rflags |= RF_RESPONSE_REPEAT
                        self.cnt[PC_RESPONSE_REPEAT] += 1
                if same >= self.max_per_key:
                    self._evict(oldest_same, UR_KEY_LIMIT)
                pt_link(&self.ix, idx, h, self.now)
                if self.ix.n > self.max_pending:
                    self._evict(pt_oldest(&self.ix), UR_CAP)
                if <uint64_t>self.ix.n > self.cnt[PC_PEAK_PENDING]:
                    self.cnt[PC_PEAK_PENDING] = self.ix.n
                if pt_full(&self.ix):
                    self.cnt[PC_GROWS] += pt_grow(&self.ix)
                return 0
            pt_unlink(&self.ix, match)
            if e.kind == MSG_REQUEST:
                req = idx
                resp = match
                self.pool[req].rflags |= RF_OUT_OF_ORDER
            else:
                req = match
                resp = idx
            if self._emit(&self.pool[req], &self.pool[resp], REC_PAIRED, UR_NONE) < 0:
                return -1
            self.pool[req].rflags &= ~RF_OUT_OF_ORDER
            w = &self.pool[resp]
            if w.status >= 100 and w.status < 200 and w.status != 101:
                # Interim response: the request waits on for the final one, which starts where
                # the 1xx ends in the server's sequence space.
                e = &self.pool[req]
                e.key = w.seq + w.payload_len
                e.interim_done = 1
                e.rflags |= RF_AFTER_INTERIM
                self._free_entry(resp)
                idx = req
                continue
            self._free_entry(req)
            self._free_entry(resp)
            return 0

    cdef int _evict(self, int32_t idx, uint8_t reason) except -1 nogil:
        """Remove a waiting entry and emit it as an unmatched record for `reason` (UnmatchedReason).
        A request already reported with a 1xx emits nothing (counted as final_response_missing)."""
        cdef PendEntry *e = &self.pool[idx]
        cdef int base
        pt_unlink(&self.ix, idx)
        if e.interim_done:
            self.cnt[PC_FINAL_MISSING] += 1
        else:
            base = (PC_REQ_UNMATCHED_GC if reason == UR_GC else PC_REQ_UNMATCHED_END if reason == UR_END
                    else PC_REQ_UNMATCHED_CAP if reason == UR_CAP
                    else PC_REQ_UNMATCHED_KEY_LIMIT if reason == UR_KEY_LIMIT else PC_REQ_UNMATCHED_CLOCK)
            if e.kind == MSG_REQUEST:
                self.cnt[base] += 1
                self._emit(e, NULL, REC_REQUEST_ONLY, reason)
            else:
                self.cnt[base + 1] += 1
                self._emit(NULL, e, REC_RESPONSE_ONLY, reason)
        self._free_entry(idx)
        return 0

    cdef int _advance(self, int64_t ts) except -1 nogil:
        """Advance the capture clock to ts and run the GC (see the module docstring).
        Returns 0, or -1 with MemoryError set (emitting a record failed to allocate)."""
        cdef int32_t j
        if not self.has_now:
            self.has_now = True
            self.now = ts
        elif ts < self.now:
            self.cnt[PC_CLOCK_BACKWARDS] += 1
            if self.now - ts > self.gc_timeout_ns:
                self.cnt[PC_CLOCK_RESET] += 1
                while pt_oldest(&self.ix) != -1:
                    self._evict(pt_oldest(&self.ix), UR_CLOCK_RESET)
                self.now = ts
        else:
            self.now = ts
        j = pt_oldest(&self.ix)
        while j != -1 and self.now - self.pool[j].links.stamp >= self.gc_timeout_ns:
            self._evict(j, UR_GC)
            j = pt_oldest(&self.ix)
        return 0

    # ------------------------------------------------------------------ pools

    cdef int32_t _alloc_entry(self) except -2 nogil:
        """An entry from the index's free list (ext/pair/pendtable.pxd pt_alloc: the pool doubles, at
        most max_pending + 1 entries). Returns its index; self.pool follows the pool."""
        cdef int32_t idx = pt_alloc(&self.ix)
        self.pool = <PendEntry *>self.ix.pool
        return idx

    cdef void _free_entry(self, int32_t idx) noexcept nogil:
        cdef PendEntry *e = &self.pool[idx]
        if e.text != NULL:
            (<uint8_t **>e.text)[0] = self.afree[e.tcap]
            self.afree[e.tcap] = e.text
            e.text = NULL
            e.tcap = NO_CLASS
        pt_free(&self.ix, idx)

    cdef void _store_text(self, PendEntry *e, TextView *tv, const uint8_t **xp,
                          const uint32_t *xn) noexcept nogil:
        """Copy the five fields of tv into one arena block owned by e, followed (when headers
        are chosen) by the nx lengths xn (uint32) and the nx values xp."""
        cdef uint32_t total = 0
        cdef uint32_t f, k = 0, off = 0
        cdef uint8_t *blk
        cdef uint8_t **newchunks
        cdef int x
        for f in range(T_N):
            total += tv.n[f]
        for x in range(self.nx):
            total += xn[x]
        if self.nx and total:
            total += 4 * self.nx
        e.text = NULL
        e.tcap = NO_CLASS
        if total == 0:
            for f in range(T_N):
                e.tlen[f] = 0
            return
        while (<uint32_t>CLASS0 << k) < total:
            k += 1
        blk = self.afree[k]
        if blk != NULL:
            self.afree[k] = (<uint8_t **>blk)[0]
        else:
            if self.chunk_used + (<size_t>CLASS0 << k) > CHUNK:
                if (self.nchunks + 1) * <size_t>CHUNK > self.arena_max_bytes:
                    blk = NULL
                else:
                    newchunks = <uint8_t **>realloc(self.chunks, (self.nchunks + 1) * sizeof(uint8_t *))
                    if newchunks != NULL:
                        self.chunks = newchunks
                        blk = <uint8_t *>malloc(CHUNK)
                        if blk != NULL:
                            self.chunks[self.nchunks] = blk
                            self.nchunks += 1
                            self.chunk_used = 0
            if self.chunk_used + (<size_t>CLASS0 << k) <= CHUNK and self.nchunks:
                blk = self.chunks[self.nchunks - 1] + self.chunk_used
                self.chunk_used += <size_t>CLASS0 << k
            else:
                blk = NULL
        if blk == NULL:
            # Arena cap reached (or malloc failed): keep the message, drop its text.
            self.cnt[PC_ARENA_FULL] += 1
            e.rflags |= RF_TEXT_CLIPPED
            for f in range(T_N):
                e.tlen[f] = 0
            return
        e.text = blk
        e.tcap = k
        for f in range(T_N):
            e.tlen[f] = tv.n[f]
            if tv.n[f]:
                memcpy(blk + off, tv.p[f], tv.n[f])
                off += tv.n[f]
        if self.nx:
            memcpy(blk + off, xn, 4 * self.nx)
            off += 4 * self.nx
            for x in range(self.nx):
                if xn[x]:
                    memcpy(blk + off, xp[x], xn[x])
                    off += xn[x]

    cdef uint32_t _xsize(self, const PendEntry *e) noexcept nogil:
        """Bytes of the chosen headers' part of e's block (4 * nx even when e has no block)."""
        cdef uint32_t base = 0, n = 0, ln
        cdef int f
        if self.nx == 0:
            return 0
        if e.text != NULL:
            for f in range(T_N):
                base += e.tlen[f]
            for f in range(self.nx):
                memcpy(&ln, e.text + base + 4 * f, 4)
                n += ln
        return 4 * self.nx + n

    cdef uint32_t _xvalue(self, const PendEntry *e, int k, const uint8_t **p) noexcept nogil:
        """Length of chosen header k's value in e's block, and *p its first byte."""
        cdef uint32_t base = 0, ln = 0, voff
        cdef int f
        p[0] = NULL
        if e.text == NULL:
            return 0
        for f in range(T_N):
            base += e.tlen[f]
        voff = base + 4 * self.nx
        for f in range(k + 1):
            memcpy(&ln, e.text + base + 4 * f, 4)
            if f < k:
                voff += ln
        p[0] = e.text + voff
        return ln

    # ------------------------------------------------------------------ output

    cdef int _reserve_row(self) except -1 nogil:
        cdef size_t cap
        cdef int c
        if self.nrec < self.rec_cap:
            return 0
        cap = self.rec_cap * 2 if self.rec_cap else 4096
        self.recs = <TxnRecord *>wt_realloc(self.recs, cap * sizeof(TxnRecord))
        for c in range(C_N):
            self.cols[c].offs = <int32_t *>wt_realloc(self.cols[c].offs, (cap + 1) * sizeof(int32_t))
            self.cols[c].valid = <uint8_t *>wt_realloc(self.cols[c].valid, cap)
        if self.nx:
            for c in range(2 * self.nx):
                self.xcols[c].offs = <int32_t *>wt_realloc(self.xcols[c].offs, (cap + 1) * sizeof(int32_t))
                self.xcols[c].valid = <uint8_t *>wt_realloc(self.xcols[c].valid, cap)
            self.xflags = <uint8_t *>wt_realloc(self.xflags, cap)
        self.rec_cap = cap
        return 0

    cdef int _put(self, int c, const uint8_t *p, size_t n, bint valid) except -1 nogil:
        return self._put_col(&self.cols[c], p, n, valid)

    cdef int _put_col(self, StrCol *col, const uint8_t *p, size_t n, bint valid) except -1 nogil:
        """Append one value (or a null) to string column col at row self.nrec. Arrow strings are
        UTF-8: a byte that does not start a valid UTF-8 sequence is taken as ISO-8859-1 (the
        historical charset of HTTP header values) and written as its 2-byte UTF-8 form; counted
        as text_latin1."""
        cdef size_t cap, i = 0, k, need
        cdef uint8_t b
        cdef bint ascii = True
        if self.nrec == 0:
            col.offs[0] = 0
            col.len = 0
        if n and valid:
            ascii = _is_ascii(p, n)
            need = n if ascii else 2 * n
            if col.len + need > 0x7FFFFFFF:
                with gil:
                    raise OverflowError("pairing: string column over 2 GiB in one batch; take() more often")
            if col.len + need > col.cap:
                cap = col.cap * 2 if col.cap else 65536
                while cap < col.len + need:
                    cap *= 2
                col.data = <uint8_t *>wt_realloc(col.data, cap)
                col.cap = cap
            if ascii:
                memcpy(col.data + col.len, p, n)
                col.len += n
            else:
                while i < n:
                    k = wt_utf8_seq(p + i, n - i)
                    if k:
                        memcpy(col.data + col.len, p + i, k)
                        col.len += k
                        i += k
                    else:
                        b = p[i]
                        col.data[col.len] = 0xC0 | (b >> 6)
                        col.data[col.len + 1] = 0x80 | (b & 0x3F)
                        col.len += 2
                        i += 1
                        self.cnt[PC_TEXT_LATIN1] += 1
        col.valid[self.nrec] = valid
        col.offs[self.nrec + 1] = <int32_t>col.len
        return 0

    cdef int _put_ip(self, int c, const uint8_t *ip, uint8_t ver) except -1 nogil:
        """Append an address as text (ext/common/util.h wt_ip_text)."""
        cdef char buf[WT_IP_TEXT]
        cdef size_t n = wt_ip_text(ip, ver == 6, buf)
        return self._put(c, <const uint8_t *>buf, n, True)

    cdef int _put_text(self, int c, const PendEntry *e, int f, bint valid) except -1 nogil:
        cdef uint32_t off = 0
        cdef int g
        if e == NULL:
            return self._put(c, NULL, 0, False)
        for g in range(f):
            off += e.tlen[g]
        return self._put(c, e.text + off if e.text != NULL else NULL, e.tlen[f], valid)

    cdef int _emit(self, const PendEntry *req, const PendEntry *resp, uint8_t outcome,
                   uint8_t reason) except -1 nogil:
        """Append one record built from a request and/or a response entry."""
        cdef TxnRecord *r
        cdef int x
        cdef uint32_t xl
        cdef const uint8_t *xv
        cdef const PendEntry *first = req if req != NULL else resp
        self._reserve_row()
        r = &self.recs[self.nrec]
        memset(r, 0, sizeof(TxnRecord))
        r.outcome = outcome
        r.unmatched_reason = reason
        r.request_ts_ns = INT64_MIN
        r.response_ts_ns = INT64_MIN
        r.request_pkt_index = UINT64_MAX
        r.response_pkt_index = UINT64_MAX
        if req != NULL:
            memcpy(r.client_ip, req.src_ip, 16)
            memcpy(r.server_ip, req.dst_ip, 16)
            r.client_port = req.src_port
            r.server_port = req.dst_port
            r.ip_version = req.ip_version
            r.request_ts_ns = req.ts_ns
            r.request_pkt_index = req.pkt_index
            r.request_trace = req.trace
            r.request_ack = req.ack
            r.method_id = req.method_id
            r.http_version = req.http_version
            r.vlan = req.vlan
            r.msg_flags |= req.msg_flags
            r.rflags |= req.rflags & (RF_URI_TRUNCATED | RF_REQUEST_REPEAT | RF_TEXT_CLIPPED
                                      | RF_NO_HOST | RF_AFTER_INTERIM | RF_OUT_OF_ORDER)
        if resp != NULL:
            if req == NULL:
                memcpy(r.client_ip, resp.dst_ip, 16)
                memcpy(r.server_ip, resp.src_ip, 16)
                r.client_port = resp.dst_port
                r.server_port = resp.src_port
                r.ip_version = resp.ip_version
                r.vlan = resp.vlan
                r.http_version = resp.http_version
            r.response_ts_ns = resp.ts_ns
            r.response_pkt_index = resp.pkt_index
            r.response_trace = resp.trace
            r.response_seq = resp.seq
            r.status = resp.status
            r.msg_flags |= resp.msg_flags
            r.rflags |= resp.rflags & (RF_RESPONSE_REPEAT | RF_TEXT_CLIPPED)
            if resp.status >= 100 and resp.status < 200 and resp.status != 101:
                r.rflags |= RF_INTERIM
        if first != NULL:
            r.encap = first.encap
            r.tunnel_id = first.tunnel_id
            r.outer_ip_version = first.outer_ip_version
            memcpy(r.outer_src, first.outer_src, 16)
            memcpy(r.outer_dst, first.outer_dst, 16)
        if outcome == REC_PAIRED:
            self.cnt[PC_PAIRED] += 1
            if r.rflags & RF_INTERIM:
                self.cnt[PC_PAIRED_INTERIM] += 1
            if r.rflags & RF_AFTER_INTERIM:
                self.cnt[PC_PAIRED_AFTER_INTERIM] += 1
            if r.rflags & RF_OUT_OF_ORDER:
                self.cnt[PC_OUT_OF_ORDER] += 1
        self._put_ip(C_CLIENT_IP, r.client_ip, r.ip_version)
        self._put_ip(C_SERVER_IP, r.server_ip, r.ip_version)
        self._put_text(C_METHOD, req, T_METHOD, True)
        self._put_text(C_URI, req, T_URI, True)
        self._put_text(C_HOST, req, T_HOST, req != NULL and req.tlen[T_HOST] > 0)
        self._put_text(C_UA, req, T_UA, req != NULL and req.tlen[T_UA] > 0)
        self._put_text(C_REASON, resp, T_REASON, True)
        if r.outer_ip_version != 0:
            self._put_ip(C_OUTER_SRC, r.outer_src, r.outer_ip_version)
            self._put_ip(C_OUTER_DST, r.outer_dst, r.outer_ip_version)
        else:
            self._put(C_OUTER_SRC, NULL, 0, False)
            self._put(C_OUTER_DST, NULL, 0, False)
        if self.nx:
            # chosen headers: "" when absent from the message, null when there is no message
            for x in range(self.nx):
                if req != NULL:
                    xl = self._xvalue(req, x, &xv)
                    self._put_col(&self.xcols[2 * x], xv, xl, True)
                else:
                    self._put_col(&self.xcols[2 * x], NULL, 0, False)
                if resp != NULL:
                    xl = self._xvalue(resp, x, &xv)
                    self._put_col(&self.xcols[2 * x + 1], xv, xl, True)
                else:
                    self._put_col(&self.xcols[2 * x + 1], NULL, 0, False)
            self.xflags[self.nrec] = (
                (1 if req != NULL and req.msg_flags & MSGF_HEADERS_INCOMPLETE else 0)
                | (2 if resp != NULL and resp.msg_flags & MSGF_HEADERS_INCOMPLETE else 0))
        self.nrec += 1
        return 0
