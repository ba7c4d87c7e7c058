"""Capture stage: packet batches from offline files and live interfaces.

Two kinds of source fill the same packet batch (ext/read/packet.pxd: an array of PacketRef plus one
byte buffer):

* ``FileReader`` parses classic pcap (both byte orders, micro- and nanosecond timestamps) and
  pcapng (several sections and interfaces, either byte order, any ``if_tsresol``) out of large
  chunks of the file (webtap.capture fills them with one read() each, or inflates gzip into
  them) and describes the packets in place: no per-packet copy, no per-packet call, which is
  how read+dissect beats a bare ``pcap_next_ex`` loop. (A regular file's chunks are mapped
  windows of the file, ext/read/mapped.pyx; gzip, pipes and FIFOs are read into reused
  buffers: docs/CAPTURE.md.) A BPF filter is compiled by libpcap per link type and applied with
  ``pcap_offline_filter``, so a user's filter means exactly what it means to tcpdump.
  libpcap itself is loaded then (ext/read/pcapload.h): a file read without a filter never maps
  it.
  Bad records are counted by reason and skipped: the reader re-synchronises on the next
  plausible record (pcap) or block (pcapng) instead of giving up on the rest of the file.
* ``PcapHandle`` wraps a real libpcap handle: live capture on an interface (kernel BPF with
  ``pcap_setfilter``, nanosecond timestamps when the platform has them, ``pcap_inject``) or an
  offline file opened by libpcap itself, which the tests use as an independent reference for
  the mmap reader. Packets are copied into a buffer the batch owns.

Every read loop runs with the GIL released and returns a count; Python only sees whole batches.
Return codes of the ``nogil`` helpers are documented at each function.
"""
from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset
from libc.stdlib cimport malloc, realloc, free

from libpcap cimport *
from pcapload cimport wt_pcap, wt_pcap_load
from packet cimport *
from util cimport wt_prefetch, wt_rd16, wt_rd32, wt_rd64, wt_realloc

import sys

import numpy as np

cdef extern from "<poll.h>" nogil:
    cdef struct pollfd:
        int fd
        short events
        short revents
    int poll(pollfd *fds, unsigned long nfds, int timeout)
    enum: POLLIN



# ---------------------------------------------------------------------------------------------
# Limits and format constants

from pcapfmt cimport (MAX_CAPLEN, MAX_BLOCK, BT_SHB, BT_IDB, BT_OPB, BT_SPB, BT_NRB, BT_ISB,
                     BT_EPB, BT_DSB, BYTE_ORDER_MAGIC)
DEF MAX_IFACES = 65535           # pcapng interfaces per section webtap tracks
DEF PREFETCH_AHEAD = 4096        # bytes of the file requested into cache ahead of the parser
# In a chunk that is not the file's last, a record or block is parsed when it lies wholly in
# the chunk; otherwise the reader asks for more (RD_NEED_MORE) and the caller carries the tail
# over. Deciding that a header is corrupt, and resynchronising, waits until this much of the
# file lies ahead: one whole record plus the next header that the resynchronisation checks.
# (A fixed look-ahead for every record was simpler, but with 4 MiB chunks it carried 12 % of
# every chunk over: 55 MB of copies on a 383 MB trace.)
cdef enum:
    PCAP_LOOKAHEAD = 2 * (MAX_CAPLEN + 16) + 16
    PCAPNG_LOOKAHEAD = MAX_CAPLEN + 64

DEF FMT_PCAP = 1
DEF FMT_PCAPNG = 2


# read_batch return codes
DEF RD_MORE = 0                  # the batch is full; call again
DEF RD_EOF = 1                   # end of file reached (possibly after a truncated record)
DEF RD_NEW_IFACE = 2             # a pcapng IDB needs a BPF program compiled (GIL needed)
DEF RD_NEED_MORE = 3             # the chunk ends before the next record: give the next chunk


# the core's errors live in webtap.errors (pure Python, at the bottom of the core); re-exported
# here for callers that imported them from this module
from webtap.errors import BpfError, CaptureError, NotACapture, WebtapError


cdef int _load_libpcap() except -1:
    """Load libpcap's entry points (ext/read/pcapload.h) the first time one is needed: a BPF
    filter compiled, a handle opened, the version asked. A run over a file without a filter
    never maps libpcap and the nine libraries it links."""
    cdef char err[256]
    if wt_pcap_load(err, sizeof(err)) != 0:
        raise CaptureError(err.decode(errors="replace"))
    return 0


cdef struct Iface:
    uint16_t linktype            # LINKTYPE_* of the interface
    uint32_t snaplen             # interface snaplen (0: unknown / unlimited)
    int64_t ts_mul               # timestamp units -> ns: multiply by this (decimal, <= ns)
    int64_t ts_div               # ... or divide by this (decimal, finer than ns)
    int ts_pow2                  # > 0: units are 2^-ts_pow2 seconds
    int64_t ts_offset_ns         # if_tsoffset, in ns
    int prog                     # index of the BPF program for this link type, -1: none yet


cdef inline int64_t _ts_ns(const Iface *ifc, uint64_t t) noexcept nogil:
    cdef uint64_t secs, frac
    if ifc.ts_pow2 > 0:
        secs = t >> ifc.ts_pow2
        frac = t & ((<uint64_t>1 << ifc.ts_pow2) - 1)
        if ifc.ts_pow2 <= 32:
            return <int64_t>(secs * 1000000000ULL + ((frac * 1000000000ULL) >> ifc.ts_pow2)) + ifc.ts_offset_ns
        return <int64_t>(secs * 1000000000ULL + <uint64_t>((<double>frac) * 1e9 / (<double>(<uint64_t>1 << ifc.ts_pow2)))) + ifc.ts_offset_ns
    if ifc.ts_div > 1:
        return <int64_t>(t // <uint64_t>ifc.ts_div) + ifc.ts_offset_ns
    return <int64_t>(t * <uint64_t>ifc.ts_mul) + ifc.ts_offset_ns


cdef class _Programs:
    """BPF programs compiled by libpcap, one per link type, owned here and freed once."""
    cdef bpf_program *progs
    cdef int *linktypes
    cdef int n
    cdef int cap
    cdef bytes expr
    cdef int snaplen

    def __cinit__(self, expr, int snaplen=MAX_CAPLEN):
        self.expr = expr.encode() if isinstance(expr, str) else bytes(expr)
        self.snaplen = snaplen
        self.n = 0
        self.cap = 0
        self.progs = NULL
        self.linktypes = NULL

    def __dealloc__(self):
        cdef int i
        for i in range(self.n):
            wt_pcap.pcap_freecode(&self.progs[i])
        free(self.progs)
        free(self.linktypes)

    cdef int index_for(self, int linktype) except -2:
        """Index of the program compiled for `linktype`, compiling it first if needed.

        Returns the index (>= 0); raises BpfError when libpcap rejects the expression for this
        link type (its error text included).
        """
        cdef int i
        cdef pcap_t *dead
        cdef bpf_program prog
        cdef bytes err
        for i in range(self.n):
            if self.linktypes[i] == linktype:
                return i
        _load_libpcap()
        dead = wt_pcap.pcap_open_dead(linktype, self.snaplen)
        if dead == NULL:
            raise MemoryError()
        try:
            if wt_pcap.pcap_compile(dead, &prog, self.expr, 1, PCAP_NETMASK_UNKNOWN) != 0:
                err = wt_pcap.pcap_geterr(dead)
                raise BpfError(f"BPF filter {self.expr.decode(errors='replace')!r} (link type {linktype}): "
                               f"{err.decode(errors='replace')}")
        finally:
            wt_pcap.pcap_close(dead)
        if self.n == self.cap:
            self.cap = self.cap * 2 + 4
            # the checked allocator: on failure the old arrays stay (and are freed as usual)
            self.progs = <bpf_program *>wt_realloc(self.progs, self.cap * sizeof(bpf_program))
            self.linktypes = <int *>wt_realloc(self.linktypes, self.cap * sizeof(int))
        self.progs[self.n] = prog
        self.linktypes[self.n] = linktype
        self.n += 1
        return self.n - 1


def compile_filter(expr, int linktype=LINKTYPE_ETHERNET, int snaplen=MAX_CAPLEN):
    """Compile `expr` with libpcap for `linktype`; raises BpfError with libpcap's text if invalid."""
    _Programs(expr, snaplen).index_for(linktype)


cdef inline int _bpf_pass(const bpf_program *prog, const uint8_t *pkt, uint32_t caplen,
                          uint32_t wirelen) noexcept nogil:
    cdef pcap_pkthdr h
    h.ts.tv_sec = 0
    h.ts.tv_usec = 0
    h.caplen = caplen
    h.len = wirelen
    return wt_pcap.pcap_offline_filter(prog, &h, pkt)


# ---------------------------------------------------------------------------------------------
# The offline file reader

cdef class FileReader:
    """Parse a pcap or pcapng file held in memory, whole or one chunk at a time.

    `buf` (any contiguous byte buffer, kept alive by the reader) holds the file's first bytes,
    or all of it with final=True. `read_into(packets)` fills a PACKET_DTYPE array and returns
    how many it filled; offsets index the current chunk. When `need_more` is set, the chunk's
    bytes from `position` on must start the next chunk, given with `set_buffer`.
    """
    cdef readonly object buf            # the exporter of the bytes (mmap, bytes, ndarray)
    cdef const uint8_t[::1] view
    cdef const uint8_t *base
    cdef size_t size
    cdef size_t pos
    cdef readonly int format            # 1: pcap, 2: pcapng
    cdef int swap                       # current section is in the other byte order
    cdef readonly int version_major
    cdef readonly int version_minor
    cdef Iface *ifaces                  # interfaces of the current pcapng section (pcap: one)
    cdef int n_ifaces
    cdef int cap_ifaces
    cdef size_t section_start           # pcapng: where the current section began
    cdef uint64_t next_index            # index of the next packet in file order
    cdef int64_t last_ts                # last timestamp handed out (SPB has none of its own)
    cdef uint64_t counters[<int>SR_N]
    cdef _Programs programs             # None: no BPF filter
    cdef int pending_iface              # pcapng: IDB whose program must be compiled, -1: none
    cdef readonly bint eof
    cdef readonly bint need_more        # stopped at the end of a chunk that is not the last
    cdef readonly bint final            # the current chunk ends the file
    cdef bint resyncing                 # skipping a corrupt region that spans chunks
    cdef size_t prefetched              # end of the range prefetched into the CPU cache

    def __cinit__(self):
        self.ifaces = NULL
        self.n_ifaces = 0
        self.cap_ifaces = 0

    def __dealloc__(self):
        free(self.ifaces)

    def __init__(self, buf, bpf=None, name="<buffer>", bint final=True):
        cdef uint32_t magic
        self.set_buffer(buf, 0, final)
        self.next_index = 0
        self.last_ts = 0
        self.eof = False
        self.resyncing = False
        self.pending_iface = -1
        memset(self.counters, 0, sizeof(self.counters))
        self.programs = _Programs(bpf) if bpf else None
        if self.size < 4:
            raise NotACapture(f"{name}: not a capture file ({self.size} bytes, too short for a header)")
        magic = wt_rd32(self.base, 0)
        if magic in (0xA1B2C3D4, 0xD4C3B2A1, 0xA1B23C4D, 0x4D3CB2A1):
            self._open_pcap(name, magic)
        elif magic == BT_SHB:
            self.format = FMT_PCAPNG
            if self.size < 28:
                raise NotACapture(f"{name}: pcapng file too short for a section header ({self.size} bytes)")
            magic = wt_rd32(self.base + 8, 0)
            if magic != BYTE_ORDER_MAGIC and magic != 0x4D3C2B1A:
                raise NotACapture(f"{name}: pcapng section header with a bad byte-order magic 0x{magic:08x}")
        else:
            raise NotACapture(f"{name}: not a pcap or pcapng capture (magic bytes "
                              f"{bytes(self.view[:4]).hex()})")

    def set_buffer(self, buf, Py_ssize_t start=0, bint final=True):
        """Go on parsing in `buf` from `start` (the unread bytes of the previous chunk must be
        at `start`). `final`: this chunk ends the file."""
        self.buf = buf
        self.view = memoryview(buf).cast("B") if not isinstance(buf, np.ndarray) else buf
        self.size = self.view.shape[0]
        self.base = &self.view[0] if self.size > 0 else NULL
        if start < 0 or <size_t>start > self.size:
            raise ValueError("start outside the buffer")
        self.pos = start
        self.prefetched = start
        self.final = final
        self.need_more = False

    def export_state(self):
        """The parser's state at `position`, which must lie between two records (pcap) or blocks
        (pcapng), e.g. right after read_into() filled its array: what a reader resuming there,
        in another process, needs (httpanalyzer.distributed splits a file with it). A picklable
        tuple; see resume()."""
        cdef bytes ifaces = (<char *>self.ifaces)[:self.n_ifaces * sizeof(Iface)] if self.n_ifaces else b""
        return (self.format, self.swap, self.version_major, self.version_minor, ifaces,
                self.next_index, self.last_ts)

    @staticmethod
    def resume(buf, state, bpf=None, name="<buffer>", bint final=True):
        """A reader over `buf`, the file's bytes from the position where `state` (export_state())
        was taken: packet indices, timestamps and interfaces go on as in one pass over the file.
        Counters start at zero, so the counters of readers over consecutive parts add up to
        those of one reader over the whole file."""
        cdef FileReader r = FileReader.__new__(FileReader)
        cdef bytes ifaces
        cdef int i
        fmt, swap, vmaj, vmin, ifaces, next_index, last_ts = state
        r.set_buffer(buf, 0, final)
        r.format = fmt
        r.swap = swap
        r.version_major = vmaj
        r.version_minor = vmin
        r.next_index = next_index
        r.last_ts = last_ts
        r.eof = False
        r.resyncing = False
        r.pending_iface = -1
        r.section_start = 0             # resumed at a block boundary: aligned to the section
        memset(r.counters, 0, sizeof(r.counters))
        r.programs = _Programs(bpf) if bpf else None
        if len(ifaces) % sizeof(Iface):
            raise ValueError("resume: interface state of the wrong size (another build?)")
        for i in range(len(ifaces) // sizeof(Iface)):
            r._add_iface()
            memcpy(&r.ifaces[i], <const char *>ifaces + i * sizeof(Iface), sizeof(Iface))
            r.ifaces[i].prog = r.programs.index_for(r.ifaces[i].linktype) if r.programs is not None else -1
        return r

    cdef _open_pcap(self, name, uint32_t magic):
        cdef Iface *ifc
        self.format = FMT_PCAP
        self.swap = magic in (0xD4C3B2A1, 0x4D3CB2A1)
        if self.size < 24:
            raise NotACapture(f"{name}: pcap file too short for its 24-byte header ({self.size} bytes)")
        self.version_major = wt_rd16(self.base + 4, self.swap)
        self.version_minor = wt_rd16(self.base + 6, self.swap)
        self._add_iface()
        ifc = &self.ifaces[0]
        ifc.snaplen = wt_rd32(self.base + 16, self.swap)
        # The link type is the low 16 bits; the upper bits carry the FCS length (pcap-savefile(5)).
        ifc.linktype = wt_rd32(self.base + 20, self.swap) & 0xFFFF
        if magic in (0xA1B23C4D, 0x4D3CB2A1):
            ifc.ts_mul = 1
        else:
            ifc.ts_mul = 1000
        self.pos = 24
        if self.programs is not None:
            ifc.prog = self.programs.index_for(ifc.linktype)

    cdef int _add_iface(self) except -1:
        """Append a default interface (microsecond timestamps). Returns 0; raises MemoryError."""
        if self.n_ifaces == self.cap_ifaces:
            self.ifaces = <Iface *>wt_realloc(self.ifaces, (self.cap_ifaces * 2 + 4) * sizeof(Iface))
            self.cap_ifaces = self.cap_ifaces * 2 + 4
        memset(&self.ifaces[self.n_ifaces], 0, sizeof(Iface))
        self.ifaces[self.n_ifaces].ts_mul = 1000
        self.ifaces[self.n_ifaces].ts_div = 1
        self.ifaces[self.n_ifaces].prog = -1
        self.n_ifaces += 1
        return 0

    @property
    def counters(self):
        return [self.counters[i] for i in range(<int>SR_N)]

    @property
    def position(self):
        """Byte offset up to which the file has been read."""
        return self.pos

    @property
    def size(self):
        return self.size

    @property
    def interfaces(self):
        """(linktype, snaplen) of each interface of the current section."""
        return [(self.ifaces[i].linktype, self.ifaces[i].snaplen) for i in range(self.n_ifaces)]

    @property
    def interface_info(self):
        """(linktype, snaplen, timestamp digits) of each interface of the current section: the
        digits of its time resolution (6: microseconds, 9: nanoseconds; -n for 2^-n units)."""
        cdef int i, d
        cdef int64_t m
        out = []
        for i in range(self.n_ifaces):
            if self.ifaces[i].ts_pow2 > 0:
                d = -self.ifaces[i].ts_pow2
            elif self.ifaces[i].ts_div > 1:
                d, m = 9, self.ifaces[i].ts_div
                while m >= 10:
                    m //= 10
                    d += 1
            else:
                d, m = 9, self.ifaces[i].ts_mul
                while m >= 10:
                    m //= 10
                    d -= 1
            out.append((self.ifaces[i].linktype, self.ifaces[i].snaplen, d))
        return out

    @property
    def big_endian(self):
        """The current section (pcap: the file) is big-endian."""
        return bool(self.swap) != (sys.byteorder == "big")

    def read_into(self, packets):
        """Fill the PACKET_DTYPE array `packets` from the current position; return the count.

        0 means the end of the file. The array's `offset` fields index this reader's buffer.
        """
        cdef uint8_t[::1] raw = packets.view(np.uint8)
        cdef PacketRef *out = <PacketRef *>&raw[0] if raw.shape[0] else NULL
        cdef Py_ssize_t n_max = packets.shape[0]
        cdef Py_ssize_t n = 0
        cdef int rc
        if self.eof or self.need_more or n_max == 0:
            return 0
        while True:
            with nogil:
                if self.format == FMT_PCAP:
                    rc = self._read_pcap(out, n_max, &n)
                else:
                    rc = self._read_pcapng(out, n_max, &n)
            if rc == RD_NEW_IFACE:
                # Compile the BPF program for the new interface's link type (needs the GIL).
                self.ifaces[self.pending_iface].prog = self.programs.index_for(
                    self.ifaces[self.pending_iface].linktype)
                self.pending_iface = -1
                continue
            if rc == RD_EOF:
                self.eof = True
            elif rc == RD_NEED_MORE:
                self.need_more = True
            return n

    cdef inline void _prefetch_to(self, size_t p) noexcept nogil:
        """Keep the bytes up to PREFETCH_AHEAD past `p` on their way into the CPU cache: record
        headers are hundreds of bytes apart, and each would otherwise be a cache miss that the
        next record's position depends on."""
        cdef size_t end = p + PREFETCH_AHEAD
        if end > self.size:
            end = self.size
        if self.prefetched < p:
            self.prefetched = p
        while self.prefetched < end:
            wt_prefetch(self.base + self.prefetched)
            self.prefetched += 64

    # ---- classic pcap ---------------------------------------------------------------------

    cdef inline bint _pcap_hdr_plausible(self, size_t p, int64_t near_sec) noexcept nogil:
        """Whether a pcap record header at `p` could be real (used only to resynchronise)."""
        cdef uint32_t sec, frac, caplen, wirelen
        if p + 16 > self.size:
            return False
        sec = wt_rd32(self.base + p, self.swap)
        frac = wt_rd32(self.base + p + 4, self.swap)
        caplen = wt_rd32(self.base + p + 8, self.swap)
        wirelen = wt_rd32(self.base + p + 12, self.swap)
        if caplen > MAX_CAPLEN or caplen > wirelen or wirelen > 16 * MAX_CAPLEN:
            return False
        if frac >= (1000000000 if self.ifaces[0].ts_mul == 1 else 1000000):
            return False
        if near_sec >= 0 and (<int64_t>sec < near_sec - 86400 or <int64_t>sec > near_sec + 86400):
            return False
        return p + 16 + caplen <= self.size

    cdef size_t _pcap_resync(self, size_t start) noexcept nogil:
        """First offset after `start` where two consecutive plausible records (or one that ends
        exactly at the end of the file) begin; self.size if there is none."""
        cdef size_t p = start
        cdef uint32_t caplen
        cdef size_t nxt
        cdef int64_t near = self.last_ts // 1000000000 if self.next_index > 0 else -1
        cdef size_t limit = self.size if self.final else self.size - PCAP_LOOKAHEAD
        while p + 16 <= self.size and p < limit:
            if self._pcap_hdr_plausible(p, near):
                caplen = wt_rd32(self.base + p + 8, self.swap)
                nxt = p + 16 + caplen
                if (nxt == self.size and self.final) or self._pcap_hdr_plausible(nxt, near):
                    return p
            p += 1
        return p if not self.final else self.size

    cdef int _read_pcap(self, PacketRef *out, Py_ssize_t n_max, Py_ssize_t *n) noexcept nogil:
        """Read records into out[*n:n_max]. Returns RD_MORE (batch full), RD_EOF, or
        RD_NEED_MORE (a chunk that is not the file's last ends inside the next record, or
        within PCAP_LOOKAHEAD of a corrupt header)."""
        cdef Iface *ifc = &self.ifaces[0]
        cdef uint32_t sec, frac, caplen, wirelen
        cdef size_t p, nxt
        cdef PacketRef *r
        cdef const bpf_program *prog = NULL
        if self.programs is not None and ifc.prog >= 0:
            prog = &self.programs.progs[ifc.prog]
        while n[0] < n_max:
            p = self.pos
            if not self.final and (self.size - p < 16 or
                                   (self.resyncing and self.size - p < PCAP_LOOKAHEAD)):
                return RD_NEED_MORE
            if p >= self.size:
                return RD_EOF
            self._prefetch_to(p)
            if self.size - p < 16:
                self.counters[<int>SR_TRUNCATED] = 1
                self.counters[<int>SR_SKIPPED_BYTES] += self.size - p
                self.pos = self.size
                return RD_EOF
            if self.resyncing:
                # Still skipping a corrupt region that the previous chunk ended in.
                nxt = self._pcap_resync(p)
                self.counters[<int>SR_SKIPPED_BYTES] += nxt - p
                self.pos = nxt
                if nxt != p:
                    continue
            sec = wt_rd32(self.base + p, self.swap)
            frac = wt_rd32(self.base + p + 4, self.swap)
            caplen = wt_rd32(self.base + p + 8, self.swap)
            wirelen = wt_rd32(self.base + p + 12, self.swap)
            if caplen > MAX_CAPLEN and caplen > ifc.snaplen:
                # No valid record is this long: the header is corrupt. Skip to the next
                # position where records look valid again and go on from there.
                if not self.final and self.size - p < PCAP_LOOKAHEAD:
                    return RD_NEED_MORE
                if not self.resyncing:
                    self.counters[<int>SR_BAD_RECORD] += 1
                self.resyncing = True
                nxt = self._pcap_resync(p + 1)
                self.counters[<int>SR_SKIPPED_BYTES] += nxt - p
                self.pos = nxt
                continue
            if caplen > self.size - p - 16:
                if not self.final:
                    return RD_NEED_MORE          # the record goes on in the next chunk
                # The file ends inside this packet (a capture cut short).
                self.counters[<int>SR_TRUNCATED] = 1
                self.counters[<int>SR_SKIPPED_BYTES] += self.size - p
                self.pos = self.size
                return RD_EOF
            self.pos = p + 16 + caplen
            self.resyncing = False
            self.next_index += 1
            if prog != NULL and not _bpf_pass(prog, self.base + p + 16, caplen, wirelen):
                self.counters[<int>SR_BPF_REJECTED] += 1
                continue
            r = &out[n[0]]
            n[0] += 1
            r.ts_ns = <int64_t>sec * 1000000000 + <int64_t>frac * ifc.ts_mul
            self.last_ts = r.ts_ns
            r.index = self.next_index - 1
            r.offset = p + 16
            r.caplen = caplen
            r.wirelen = wirelen
            r.linktype = ifc.linktype
            r.iface = 0
            r.flags = 0
            self._count_packet(r, ifc)
        return RD_MORE

    cdef inline void _count_packet(self, PacketRef *r, const Iface *ifc) noexcept nogil:
        self.counters[<int>SR_PACKETS] += 1
        self.counters[<int>SR_CAPTURED_BYTES] += r.caplen
        self.counters[<int>SR_WIRE_BYTES] += r.wirelen
        if ifc.snaplen and r.caplen > ifc.snaplen:
            r.flags |= PKTF_CAPLEN_GT_SNAPLEN
            self.counters[<int>SR_CAPLEN_GT_SNAPLEN] += 1
        if r.caplen > r.wirelen:
            r.flags |= PKTF_CAPLEN_GT_WIRELEN
            self.counters[<int>SR_CAPLEN_GT_WIRELEN] += 1

    # ---- pcapng ---------------------------------------------------------------------------

    cdef inline int _block_ok(self, size_t p, int swap) noexcept nogil:
        """1 when a well-formed block (length fields agree, fits in the file) starts at p."""
        cdef uint32_t btype, blen
        if p + 12 > self.size:
            return 0
        btype = wt_rd32(self.base + p, swap)
        if btype == BT_SHB:
            # The section header fixes the byte order for what follows.
            if p + 28 > self.size:
                return 0
            if wt_rd32(self.base + p + 8, 0) == BYTE_ORDER_MAGIC:
                swap = 0
            elif wt_rd32(self.base + p + 8, 0) == 0x4D3C2B1A:
                swap = 1
            else:
                return 0
        blen = wt_rd32(self.base + p + 4, swap)
        if blen < 12 or blen % 4 or blen > MAX_BLOCK or blen > self.size - p:
            return 0
        return wt_rd32(self.base + p + blen - 4, swap) == blen

    cdef size_t _pcapng_resync(self, size_t start) noexcept nogil:
        """Next 4-byte aligned offset (relative to the section) after `start` holding a
        well-formed block of a known type; self.size if none."""
        cdef size_t p = start
        cdef uint32_t btype
        cdef size_t limit = self.size if self.final else self.size - PCAPNG_LOOKAHEAD
        p += (4 - (p - self.section_start) % 4) % 4
        while p + 12 <= self.size and p < limit:
            btype = wt_rd32(self.base + p, self.swap)
            if (btype == BT_SHB or btype == BT_IDB or btype == BT_EPB or btype == BT_SPB or
                    btype == BT_ISB or btype == BT_NRB or btype == BT_OPB or btype == BT_DSB):
                if self._block_ok(p, self.swap):
                    return p
            p += 4
        return p if not self.final else self.size

    cdef int _parse_idb(self, size_t p, uint32_t blen) noexcept nogil:
        """Record the interface of the IDB at p. Returns 1 if a BPF program must be compiled
        for it, 0 if not, -1 if the block is malformed or there are too many interfaces."""
        cdef Iface *ifc
        cdef Iface *grown
        cdef size_t o, end
        cdef uint16_t code, olen
        cdef uint8_t res
        if blen < 20 or self.n_ifaces >= MAX_IFACES:
            return -1
        if self.n_ifaces == self.cap_ifaces:
            grown = <Iface *>realloc(self.ifaces, (self.cap_ifaces * 2 + 4) * sizeof(Iface))
            if grown == NULL:
                return -1
            self.ifaces = grown
            self.cap_ifaces = self.cap_ifaces * 2 + 4
        ifc = &self.ifaces[self.n_ifaces]
        memset(ifc, 0, sizeof(Iface))
        ifc.ts_mul = 1000
        ifc.ts_div = 1
        ifc.prog = -1
        ifc.linktype = wt_rd16(self.base + p + 8, self.swap)
        ifc.snaplen = wt_rd32(self.base + p + 12, self.swap)
        o = p + 16
        end = p + blen - 4
        while o + 4 <= end:
            code = wt_rd16(self.base + o, self.swap)
            olen = wt_rd16(self.base + o + 2, self.swap)
            if code == 0 or o + 4 + olen > end:
                break
            if code == 9 and olen >= 1:          # if_tsresol
                res = self.base[o + 4]
                if res & 0x80:
                    if (res & 0x7F) < 64:
                        ifc.ts_pow2 = res & 0x7F
                        if ifc.ts_pow2 == 0:
                            ifc.ts_mul = 1000000000
                else:
                    res = res & 0x7F
                    if res <= 9:
                        ifc.ts_mul = 1
                        while res < 9:
                            ifc.ts_mul *= 10
                            res += 1
                    elif res <= 18:
                        ifc.ts_mul = 1
                        ifc.ts_div = 1
                        while res > 9:
                            ifc.ts_div *= 10
                            res -= 1
            elif code == 14 and olen == 8:       # if_tsoffset, seconds
                ifc.ts_offset_ns = <int64_t>wt_rd64(self.base + o + 4, self.swap) * 1000000000
            o += 4 + ((olen + 3) & ~3)
        self.n_ifaces += 1
        self.counters[<int>SR_INTERFACES] += 1
        return 1 if self.programs is not None else 0

    cdef int _read_pcapng(self, PacketRef *out, Py_ssize_t n_max, Py_ssize_t *n) noexcept nogil:
        """Read blocks, packets into out[*n:n_max]. Returns RD_MORE (batch full), RD_EOF, or
        RD_NEW_IFACE (an IDB was read while a BPF filter is set; self.pending_iface names it)."""
        cdef size_t p, nxt
        cdef uint32_t btype, blen, iface, caplen, wirelen, hdr
        cdef uint64_t ts
        cdef int rc
        cdef Iface *ifc
        cdef PacketRef *r
        while n[0] < n_max:
            p = self.pos
            if not self.final and self.size - p < 28:      # an SHB's fixed part
                return RD_NEED_MORE
            if p >= self.size:
                return RD_EOF
            self._prefetch_to(p)
            if self.size - p < 12:
                self.counters[<int>SR_TRUNCATED] = 1
                self.counters[<int>SR_SKIPPED_BYTES] += self.size - p
                self.pos = self.size
                return RD_EOF
            btype = wt_rd32(self.base + p, self.swap)
            if btype == BT_SHB:
                if p + 12 <= self.size and wt_rd32(self.base + p + 8, 0) == BYTE_ORDER_MAGIC:
                    self.swap = 0
                elif p + 12 <= self.size and wt_rd32(self.base + p + 8, 0) == 0x4D3C2B1A:
                    self.swap = 1
            blen = wt_rd32(self.base + p + 4, self.swap)
            if not self._block_ok(p, self.swap):
                if not self.final and self.size - p < PCAPNG_LOOKAHEAD:
                    return RD_NEED_MORE          # decide with the whole look-ahead in hand
                if (not self.final and not self.resyncing and blen >= 12 and blen % 4 == 0
                        and blen <= MAX_BLOCK and blen > self.size - p):
                    return RD_NEED_MORE      # a long block: the caller grows the chunk
                if blen >= 12 and blen % 4 == 0 and blen <= MAX_BLOCK and blen > self.size - p:
                    # A plausible block cut off by the end of the file.
                    self.counters[<int>SR_TRUNCATED] = 1
                    self.counters[<int>SR_SKIPPED_BYTES] += self.size - p
                    self.pos = self.size
                    return RD_EOF
                if not self.resyncing:
                    self.counters[<int>SR_BAD_RECORD] += 1
                self.resyncing = True
                nxt = self._pcapng_resync(p + 4)
                self.counters[<int>SR_SKIPPED_BYTES] += nxt - p
                self.pos = nxt
                continue
            self.pos = p + blen
            self.resyncing = False
            if btype == BT_SHB:
                self.section_start = p
                self.n_ifaces = 0
                self.counters[<int>SR_SECTIONS] += 1
                self.version_major = wt_rd16(self.base + p + 12, self.swap)
                self.version_minor = wt_rd16(self.base + p + 14, self.swap)
            elif btype == BT_IDB:
                rc = self._parse_idb(p, blen)
                if rc < 0:
                    self.counters[<int>SR_BAD_RECORD] += 1
                elif rc == 1:
                    self.pending_iface = self.n_ifaces - 1
                    return RD_NEW_IFACE
            elif btype == BT_EPB or btype == BT_OPB or btype == BT_SPB:
                if btype == BT_SPB:
                    hdr = 12
                    if blen < 16:
                        self.counters[<int>SR_BAD_RECORD] += 1
                        continue
                    iface = 0
                    wirelen = wt_rd32(self.base + p + 8, self.swap)
                    caplen = blen - 16
                    if wirelen < caplen:
                        caplen = wirelen
                    ts = 0
                else:
                    hdr = 28
                    if blen < 32:
                        self.counters[<int>SR_BAD_RECORD] += 1
                        continue
                    if btype == BT_EPB:
                        iface = wt_rd32(self.base + p + 8, self.swap)
                    else:
                        iface = wt_rd16(self.base + p + 8, self.swap)
                    ts = (<uint64_t>wt_rd32(self.base + p + 12, self.swap) << 32) | \
                        wt_rd32(self.base + p + 16, self.swap)
                    caplen = wt_rd32(self.base + p + 20, self.swap)
                    wirelen = wt_rd32(self.base + p + 24, self.swap)
                    if caplen > blen - 32:
                        self.counters[<int>SR_BAD_RECORD] += 1
                        continue
                if iface >= <uint32_t>self.n_ifaces:
                    self.counters[<int>SR_BAD_INTERFACE] += 1
                    self.next_index += 1
                    continue
                ifc = &self.ifaces[iface]
                if btype == BT_SPB and ifc.snaplen and caplen > ifc.snaplen:
                    caplen = ifc.snaplen
                self.next_index += 1
                if ifc.prog >= 0 and not _bpf_pass(&self.programs.progs[ifc.prog],
                                                   self.base + p + hdr, caplen, wirelen):
                    self.counters[<int>SR_BPF_REJECTED] += 1
                    continue
                r = &out[n[0]]
                n[0] += 1
                r.ts_ns = _ts_ns(ifc, ts) if btype != BT_SPB else self.last_ts
                self.last_ts = r.ts_ns
                r.index = self.next_index - 1
                r.offset = p + hdr
                r.caplen = caplen
                r.wirelen = wirelen
                r.linktype = ifc.linktype
                r.iface = <uint16_t>iface
                r.flags = 0
                self._count_packet(r, ifc)
            elif not (btype == BT_NRB or btype == BT_ISB or btype == BT_DSB):
                self.counters[<int>SR_UNKNOWN_BLOCKS] += 1
        return RD_MORE


# ---------------------------------------------------------------------------------------------
# libpcap handles: live capture, and libpcap's own offline reader

cdef class PcapHandle:
    """A libpcap handle: live capture on an interface, or a file opened by libpcap itself.

    `read_into(packets, data)` copies packets into the caller's uint8 buffer `data` and fills
    the PACKET_DTYPE array `packets`; it returns early on the read timeout of a live capture
    so that the caller can check for Ctrl-C. Errors carry libpcap's own text.
    """
    cdef pcap_t *p
    cdef readonly str source
    cdef readonly bint live
    cdef readonly int linktype
    cdef readonly int snaplen
    cdef readonly bint nano
    cdef readonly bint eof
    cdef uint64_t next_index
    cdef uint64_t counters[<int>SR_N]
    cdef bpf_program prog
    cdef bint have_prog
    cdef readonly str error             # libpcap's text for a read error, if one ended reading
    cdef int fd                         # live: selectable fd polled in non-blocking mode
    cdef int timeout_ms                 # live: longest wait for the first packet of a batch

    def __cinit__(self):
        self.p = NULL
        self.have_prog = False

    def __dealloc__(self):
        if self.have_prog:
            wt_pcap.pcap_freecode(&self.prog)
        if self.p != NULL:
            wt_pcap.pcap_close(self.p)

    @staticmethod
    def open_offline(path):
        """Open a capture file with libpcap (nanosecond precision)."""
        cdef char errbuf[PCAP_ERRBUF_SIZE]
        cdef PcapHandle h = PcapHandle.__new__(PcapHandle)
        cdef bytes bpath = path.encode() if isinstance(path, str) else bytes(path)
        errbuf[0] = 0
        _load_libpcap()
        h.p = wt_pcap.pcap_open_offline_with_tstamp_precision(bpath, PCAP_TSTAMP_PRECISION_NANO, errbuf)
        if h.p == NULL:
            raise CaptureError(f"{path}: {errbuf.decode(errors='replace')}")
        h._init(str(path), False)
        return h

    @staticmethod
    def open_live(str iface, int snaplen=MAX_CAPLEN, bint promisc=True, int timeout_ms=100,
                  int buffer_size=32 * 1024 * 1024, bint immediate=False):
        """Open `iface` for live capture (root or CAP_NET_RAW needed)."""
        cdef char errbuf[PCAP_ERRBUF_SIZE]
        cdef PcapHandle h = PcapHandle.__new__(PcapHandle)
        cdef int rc
        errbuf[0] = 0
        _load_libpcap()
        h.p = wt_pcap.pcap_create(iface.encode(), errbuf)
        if h.p == NULL:
            raise CaptureError(f"{iface}: {errbuf.decode(errors='replace')}")
        wt_pcap.pcap_set_snaplen(h.p, snaplen)
        wt_pcap.pcap_set_promisc(h.p, promisc)
        wt_pcap.pcap_set_timeout(h.p, timeout_ms)
        wt_pcap.pcap_set_buffer_size(h.p, buffer_size)
        if immediate:
            wt_pcap.pcap_set_immediate_mode(h.p, 1)
        wt_pcap.pcap_set_tstamp_precision(h.p, PCAP_TSTAMP_PRECISION_NANO)   # micro if unsupported
        rc = wt_pcap.pcap_activate(h.p)
        if rc < 0:
            msg = wt_pcap.pcap_geterr(h.p).decode(errors="replace") or wt_pcap.pcap_statustostr(rc).decode()
            raise CaptureError(f"{iface}: {wt_pcap.pcap_statustostr(rc).decode()}: {msg}")
        h._init(iface, True)
        # Non-blocking reads plus poll(): with TPACKET_V3 a blocking read's timeout does not
        # expire while no packet arrives, which would make Ctrl-C wait for traffic.
        if wt_pcap.pcap_setnonblock(h.p, 1, errbuf) != 0:
            raise CaptureError(f"{iface}: {errbuf.decode(errors='replace')}")
        h.fd = wt_pcap.pcap_get_selectable_fd(h.p)
        h.timeout_ms = timeout_ms
        return h

    cdef _init(self, str source, bint live):
        self.source = source
        self.live = live
        # pcap_datalink() answers with a DLT_* value; the batch contract carries LINKTYPE_*
        # values as files do. They differ only for raw IP on this platform (DLT_RAW is 12 on
        # Linux, 14 on OpenBSD; LINKTYPE_RAW is 101).
        self.linktype = wt_pcap.pcap_datalink(self.p)
        if self.linktype == DLT_RAW_ALT or self.linktype == DLT_RAW_ALT2:
            self.linktype = LINKTYPE_RAW
        self.snaplen = wt_pcap.pcap_snapshot(self.p)
        self.nano = wt_pcap.pcap_get_tstamp_precision(self.p) == PCAP_TSTAMP_PRECISION_NANO
        self.eof = False
        self.next_index = 0
        self.error = None
        self.fd = -1
        self.timeout_ms = 0
        memset(self.counters, 0, sizeof(self.counters))

    def set_filter(self, expr):
        """Compile `expr` with libpcap and install it (in the kernel for live capture)."""
        cdef bytes b = expr.encode() if isinstance(expr, str) else bytes(expr)
        cdef bpf_program prog
        if wt_pcap.pcap_compile(self.p, &prog, b, 1, PCAP_NETMASK_UNKNOWN) != 0:
            raise BpfError(f"BPF filter {expr!r}: {wt_pcap.pcap_geterr(self.p).decode(errors='replace')}")
        if wt_pcap.pcap_setfilter(self.p, &prog) != 0:
            wt_pcap.pcap_freecode(&prog)
            raise CaptureError(f"{self.source}: {wt_pcap.pcap_geterr(self.p).decode(errors='replace')}")
        if self.have_prog:
            wt_pcap.pcap_freecode(&self.prog)
        self.prog = prog
        self.have_prog = True

    @property
    def counters(self):
        return [self.counters[i] for i in range(<int>SR_N)]

    def stats(self):
        """libpcap's statistics of a live capture: received, dropped by kernel, by interface."""
        cdef pcap_stat st
        if wt_pcap.pcap_stats(self.p, &st) != 0:
            raise CaptureError(f"{self.source}: {wt_pcap.pcap_geterr(self.p).decode(errors='replace')}")
        return {"received": st.ps_recv, "dropped": st.ps_drop, "if_dropped": st.ps_ifdrop}

    def inject(self, const uint8_t[::1] frame):
        """Send one link-layer frame on the interface; returns the bytes sent."""
        cdef int rc
        if frame.shape[0] == 0:
            raise ValueError("cannot inject an empty frame")
        with nogil:
            rc = wt_pcap.pcap_inject(self.p, &frame[0], frame.shape[0])
        if rc < 0:
            raise CaptureError(f"{self.source}: {wt_pcap.pcap_geterr(self.p).decode(errors='replace')}")
        return rc

    def inject_many(self, const uint8_t[::1] frames, offsets, sent_ns=None):
        """Send frames[offsets[i]:offsets[i+1]] one after another in one nogil loop (the forged
        FIN/RST pairs of urlfilter); returns (sent, failed). sent_ns: an int64 array that
        receives, for each frame, the CLOCK_REALTIME time (ns, the clock of capture timestamps)
        at which its pcap_inject call started (0 for a failed frame). The start, not the return:
        the frame is handed to the driver within the call, but on a busy machine the call can
        return milliseconds later because the scheduler first runs the receivers it woke."""
        cdef const int64_t[::1] o = np.ascontiguousarray(offsets, dtype=np.int64)
        cdef Py_ssize_t i, n = o.shape[0] - 1
        cdef int sent = 0, failed = 0
        cdef int64_t[::1] tv
        cdef bint timed = sent_ns is not None
        cdef timespec ts
        if n <= 0:
            return 0, 0
        if o[0] < 0 or o[n] > frames.shape[0]:
            raise ValueError("offsets outside the frame buffer")
        if timed:
            tv = sent_ns
            if tv.shape[0] < n:
                raise ValueError("sent_ns is shorter than the number of frames")
        with nogil:
            for i in range(n):
                if timed:
                    clock_gettime(CLOCK_REALTIME, &ts)
                    tv[i] = <int64_t>ts.tv_sec * 1000000000 + ts.tv_nsec
                if o[i + 1] <= o[i] or wt_pcap.pcap_inject(self.p, &frames[o[i]], o[i + 1] - o[i]) < 0:
                    failed += 1
                    if timed:
                        tv[i] = 0
                else:
                    sent += 1
        return sent, failed

    def breakloop(self):
        wt_pcap.pcap_breakloop(self.p)

    def read_into(self, packets, data):
        """Copy packets into `data` (uint8) and describe them in `packets` (PACKET_DTYPE).

        Returns the count. Stops when either array is full (leaving room for one packet of
        `snaplen` bytes), at end of file, or on a live read timeout.
        """
        cdef uint8_t[::1] raw = packets.view(np.uint8)
        cdef uint8_t[::1] buf = data
        cdef PacketRef *out = <PacketRef *>&raw[0] if raw.shape[0] else NULL
        cdef Py_ssize_t n_max = packets.shape[0]
        cdef size_t cap = buf.shape[0]
        cdef size_t used = 0
        cdef Py_ssize_t n = 0
        cdef int rc = 1
        cdef pcap_pkthdr *hdr
        cdef const uint8_t *pkt
        cdef PacketRef *r
        cdef uint32_t caplen
        cdef pollfd pfd
        cdef bint waited = False
        if self.eof:
            return 0
        with nogil:
            while n < n_max:
                if cap - used < <size_t>MAX_CAPLEN and cap - used < <size_t>self.snaplen:
                    break
                rc = wt_pcap.pcap_next_ex(self.p, &hdr, &pkt)
                if rc == 0 and self.fd >= 0 and n == 0 and not waited:
                    # Live, nothing pending: wait once for traffic, at most timeout_ms.
                    pfd.fd = self.fd
                    pfd.events = POLLIN
                    pfd.revents = 0
                    poll(&pfd, 1, self.timeout_ms)
                    waited = True
                    continue
                if rc != 1:
                    break
                caplen = hdr.caplen
                if caplen > cap - used:
                    caplen = <uint32_t>(cap - used)
                memcpy(&buf[used], pkt, caplen)
                r = &out[n]
                n += 1
                r.ts_ns = <int64_t>hdr.ts.tv_sec * 1000000000 + \
                    <int64_t>hdr.ts.tv_usec * (1 if self.nano else 1000)
                r.index = self.next_index
                self.next_index += 1
                r.offset = used
                r.caplen = caplen
                r.wirelen = hdr.len
                r.linktype = <uint16_t>self.linktype
                r.iface = 0
                r.flags = 0
                if r.caplen > r.wirelen:
                    r.flags |= PKTF_CAPLEN_GT_WIRELEN
                    self.counters[<int>SR_CAPLEN_GT_WIRELEN] += 1
                self.counters[<int>SR_PACKETS] += 1
                self.counters[<int>SR_CAPTURED_BYTES] += caplen
                self.counters[<int>SR_WIRE_BYTES] += hdr.len
                used += caplen
        if rc == PCAP_ERROR_BREAK:      # -2: end of file, or pcap_breakloop()
            self.eof = True
        elif rc == PCAP_ERROR:
            self.error = wt_pcap.pcap_geterr(self.p).decode(errors="replace")
            self.eof = True
            if not self.live:
                self.counters[<int>SR_TRUNCATED] = 1
        return n


def libpcap_version():
    """The version string of the libpcap the module loads (ext/read/pcapload.h)."""
    _load_libpcap()
    return wt_pcap.pcap_lib_version().decode()


def linktype_name(int linktype):
    """(name, description) of a LINKTYPE_* value as libpcap names it (tcpdump's words: "EN10MB",
    "Ethernet"); ("LINKTYPE_<n>", "") when libpcap does not know it."""
    cdef int dlt = 12 if linktype == LINKTYPE_RAW else linktype   # DLT_RAW on Linux
    cdef const char *name
    cdef const char *desc
    _load_libpcap()
    name = wt_pcap.pcap_datalink_val_to_name(dlt)
    desc = wt_pcap.pcap_datalink_val_to_description(dlt)
    return ((name.decode(errors="replace") if name != NULL else f"LINKTYPE_{linktype}"),
            (desc.decode(errors="replace") if desc != NULL else ""))


def packet_ref_size():
    """sizeof(PacketRef) in C, for the schema test."""
    return sizeof(PacketRef)


def source_reason_count():
    return <int>SR_N
