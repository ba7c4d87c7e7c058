"""Live capture through the kernel's packet fanout: one AF_PACKET TPACKET_V3 ring per consumer.

``FanoutRing`` is one socket of a PACKET_FANOUT group with its memory-mapped ring (ext/read/afpacket.h).
The kernel picks the socket of every packet: with ``mode="eq3"`` by the classic-BPF program
``eq3_program()`` (PACKET_FANOUT_CBPF), which computes the paper's Eq. 3 on the packet itself,
so that an HTTP request (key: its ACK) and its response (key: its SEQ, equal to that ACK) land
in the same socket; with ``mode="hash"`` by the kernel's flow hash (PACKET_FANOUT_HASH, symmetric
in the 4-tuple, which sends a connection's both directions to one socket as well).

``next_block(packets)`` waits (GIL released) for the next block the kernel hands over and
describes its packets in ``packets`` (webtap.records.message.PACKET_DTYPE) with offsets into ``data``, a
numpy view of the whole ring: nothing is copied. The block goes back to the kernel on the next
call (or ``release()``), so whatever reads the packets (the dissector, the pairing table, which
copies the text it keeps) must be done with them by then.

Open the sockets of a group with ``open_group`` before any of them is used: each socket carries
a drop-all filter until every member has joined, then they all get the user's filter; a packet
therefore never reaches a socket outside the group (it would be seen twice).
"""
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy
from libc.stdlib cimport free
from util cimport wt_alloc

from libpcap cimport *
from packet cimport *

import os

import numpy as np

from webtap.errors import BpfError

cdef extern from "<linux/filter.h>" nogil:
    cdef struct sock_filter:
        uint16_t code
        uint8_t jt
        uint8_t jf
        uint32_t k

cdef extern from "<linux/if_packet.h>" nogil:
    cdef struct tpacket_block_desc:
        pass
    cdef struct tpacket3_hdr:
        uint32_t tp_next_offset
        uint32_t tp_sec
        uint32_t tp_nsec
        uint32_t tp_snaplen
        uint32_t tp_len
        uint32_t tp_status
        uint16_t tp_mac
        uint16_t tp_net
    enum: PACKET_FANOUT_HASH
    enum: PACKET_FANOUT_CBPF

cdef extern from "<net/if.h>" nogil:
    unsigned int if_nametoindex(const char *ifname)

cdef extern from "afpacket.h" nogil:
    ctypedef struct wt_ring:
        int fd
        uint8_t *ring
        size_t ring_len
        unsigned block_size
        unsigned block_nr
        uint64_t packets
        uint64_t blocks
        uint64_t kernel_packets
        uint64_t kernel_drops
        uint64_t freeze_q
    int wt_ring_open(wt_ring *r, int ifindex, unsigned block_size, unsigned block_nr,
                     unsigned frame_size, unsigned retire_ms)
    void wt_ring_close(wt_ring *r)
    int wt_ring_set_filter(wt_ring *r, const sock_filter *insns, unsigned n)
    int wt_ring_accept_all(wt_ring *r)
    int wt_ring_join(wt_ring *r, unsigned group, unsigned mode)
    int wt_ring_fanout_program(wt_ring *r, const sock_filter *insns, unsigned n)
    int wt_ring_stats(wt_ring *r)
    void wt_ring_release(wt_ring *r)
    int64_t wt_ring_next(wt_ring *r, tpacket_block_desc **out, int timeout_ms)
    tpacket3_hdr *wt_block_first(tpacket_block_desc *b)
    tpacket3_hdr *wt_pkt_next(tpacket3_hdr *h)


# ------------------------------------------------------------------ the Eq. 3 fanout program

# classic BPF opcodes (linux/filter.h, linux/bpf_common.h)
_LD, _LDX, _ST, _ALU, _JMP, _RET, _MISC = 0x00, 0x01, 0x02, 0x04, 0x05, 0x06, 0x07
_W, _H, _B = 0x00, 0x08, 0x10
_IMM, _ABS, _IND, _MEM, _MSH = 0x00, 0x20, 0x40, 0x60, 0xa0
_ADD, _SUB, _AND, _RSH, _XOR = 0x00, 0x10, 0x50, 0x70, 0xa0
_JA, _JEQ, _JGE, _JSET = 0x00, 0x10, 0x30, 0x40
_K, _X = 0x00, 0x08
_RA = 0x10
_TAX, _TXA = 0x00, 0x80
#: SKF_NET_OFF: loads relative to the network header, wherever the link header ends (the
#: fanout program runs before the kernel moves skb->data to the link header, and outgoing and
#: incoming packets differ there; the network header is the same for both)
_NET = (-0x100000) & 0xFFFFFFFF
_HTTP = 0x48545450          # "HTTP"


def _assemble(prog):
    """[(code, k, jt_label, jf_label) | label string] -> [(code, jt, jf, k)] with forward offsets."""
    where, pc = {}, 0
    for ins in prog:
        if isinstance(ins, str):
            where[ins] = pc
        else:
            pc += 1
    out, pc = [], 0
    for ins in prog:
        if isinstance(ins, str):
            continue
        code, k, jt, jf = (tuple(ins) + (None, None))[:4]
        def rel(lbl):
            if lbl is None:
                return 0
            d = where[lbl] - pc - 1
            assert 0 <= d < 256, (lbl, d)
            return d
        if code == _JMP | _JA:
            k, jt_, jf_ = rel(jt), 0, 0
        else:
            jt_, jf_ = rel(jt), rel(jf)
        out.append((code, jt_, jf_, k & 0xFFFFFFFF))
        pc += 1
    return out


def eq3_program():
    """The classic-BPF fanout program: the paper's Eq. 3 of an IPv4/IPv6 TCP packet, exactly as
    ext/run/feeder.pyx computes it (`eq3_of`): src ^ sport ^ dst ^ dport ^ key ^ fold(key), addresses
    folded to 32 bits big-endian, key = SEQ when the payload starts with "HTTP" (a response;
    one leading CRLF skipped, as the dissector does), else ACK (a request). The kernel takes the
    value modulo the group size. Packets the program cannot read (not IP/TCP, a later IPv4
    fragment, IPv6 with extension headers, VLAN tags left in the frame, tunnels) return 0: they
    all go to socket 0, which is correct (a request and its response still meet) but not
    balanced. Returns a list of (code, jt, jf, k)."""
    N = _NET
    p = [
        (_LD | _B | _ABS, N + 0), (_ALU | _RSH | _K, 4),
        (_JMP | _JEQ | _K, 4, "v4", None),
        (_JMP | _JEQ | _K, 6, "v6", "ret0"),
        "v4",
        (_LD | _B | _ABS, N + 9), (_JMP | _JEQ | _K, 6, None, "ret0"),
        (_LD | _H | _ABS, N + 6), (_JMP | _JSET | _K, 0x1FFF, "ret0", None),
        (_LD | _W | _ABS, N + 12), (_ST, 0),
        (_LD | _W | _ABS, N + 16), (_MISC | _TAX, 0), (_LD | _MEM, 0), (_ALU | _XOR | _X, 0), (_ST, 0),
        (_LD | _H | _ABS, N + 2), (_ST, 7),
        (_LDX | _B | _MSH, N + 0),
        (_JMP | _JA, 0, "tcp"),
        "v6",
        (_LD | _B | _ABS, N + 6), (_JMP | _JEQ | _K, 6, None, "ret0"),
        (_LD | _W | _ABS, N + 8), (_ST, 0),
    ]
    for off in range(12, 40, 4):
        p += [(_LD | _W | _ABS, N + off), (_MISC | _TAX, 0), (_LD | _MEM, 0), (_ALU | _XOR | _X, 0),
              (_ST, 0)]
    p += [
        (_LD | _H | _ABS, N + 4), (_ALU | _ADD | _K, 40), (_ST, 7),
        (_LDX | _W | _IMM, 40),
        "tcp",
        (_LD | _H | _IND, N + 0), (_ST, 1),
        (_LD | _H | _IND, N + 2), (_ST, 2),
        (_LD | _W | _IND, N + 4), (_ST, 3),
        (_LD | _W | _IND, N + 8), (_ST, 4),
        (_LD | _B | _IND, N + 12), (_ALU | _RSH | _K, 2), (_ALU | _AND | _K, 0x3C),
        (_ALU | _ADD | _X, 0), (_ST, 8),
        # payload length (IP total length - payload offset) < 4: no HTTP start; key = ACK
        (_LD | _MEM, 7), (_LDX | _MEM, 8), (_ALU | _SUB | _X, 0),
        (_JMP | _JGE | _K, 4, None, "req"),
        (_LD | _IND | _W, N + 0),
        (_MISC | _TAX, 0), (_ALU | _RSH | _K, 16),
        (_JMP | _JEQ | _K, 0x0D0A, "crlf", None),
        (_MISC | _TXA, 0), (_JMP | _JEQ | _K, _HTTP, "resp", "req"),
        "crlf",
        (_LDX | _MEM, 8), (_LD | _IND | _W, N + 2), (_JMP | _JEQ | _K, _HTTP, "resp", "req"),
        "resp",
        (_LD | _MEM, 3), (_JMP | _JA, 0, "key"),
        "req",
        (_LD | _MEM, 4),
        "key",
        (_ST, 5),
        (_ALU | _RSH | _K, 8), (_MISC | _TAX, 0), (_LD | _MEM, 5), (_ALU | _XOR | _X, 0), (_ST, 6),
        (_LD | _MEM, 5), (_ALU | _RSH | _K, 16), (_MISC | _TAX, 0), (_LD | _MEM, 6),
        (_ALU | _XOR | _X, 0), (_ST, 6),
        (_LD | _MEM, 5), (_ALU | _RSH | _K, 24), (_MISC | _TAX, 0), (_LD | _MEM, 6),
        (_ALU | _XOR | _X, 0), (_ALU | _AND | _K, 0xFF), (_ST, 6),
        (_LD | _MEM, 0), (_LDX | _MEM, 1), (_ALU | _XOR | _X, 0), (_LDX | _MEM, 2),
        (_ALU | _XOR | _X, 0), (_LDX | _MEM, 5), (_ALU | _XOR | _X, 0), (_LDX | _MEM, 6),
        (_ALU | _XOR | _X, 0),
        (_RET | _RA, 0),
        "ret0",
        (_RET | _K, 0),
    ]
    return _assemble(p)


cdef sock_filter *_insns(list prog) except NULL:
    cdef sock_filter *f = <sock_filter *>wt_alloc(max(1, len(prog)) * sizeof(sock_filter))
    for i, (code, jt, jf, k) in enumerate(prog):
        f[i].code = code
        f[i].jt = jt
        f[i].jf = jf
        f[i].k = k
    return f


def _compile(expr, int linktype, int snaplen):
    """A user's filter compiled by libpcap for `linktype`, as (code, jt, jf, k) tuples."""
    cdef pcap_t *dead = pcap_open_dead(linktype, snaplen)
    cdef bpf_program prog
    cdef bytes b = expr.encode()
    cdef sock_filter *ins
    if dead == NULL:
        raise MemoryError()
    try:
        if pcap_compile(dead, &prog, b, 1, PCAP_NETMASK_UNKNOWN) != 0:
            raise BpfError(f"BPF filter {expr!r} (link type {linktype}): "
                           f"{pcap_geterr(dead).decode(errors='replace')}")
    finally:
        pcap_close(dead)
    ins = <sock_filter *>prog.bf_insns      # struct bpf_insn has sock_filter's layout
    out = [(ins[i].code, ins[i].jt, ins[i].jf, ins[i].k) for i in range(prog.bf_len)]
    pcap_freecode(&prog)
    return out


def _check(int rc, what):
    if rc < 0:
        raise OSError(-rc, f"{what}: {os.strerror(-rc)}")


MODES = {"eq3": PACKET_FANOUT_CBPF, "hash": PACKET_FANOUT_HASH}


cdef class FanoutRing:
    """One socket of a fanout group and its TPACKET_V3 ring (see the module docstring)."""
    cdef wt_ring r
    cdef tpacket_block_desc *blk
    cdef readonly str iface
    cdef readonly int linktype
    cdef readonly int consumer
    cdef object _data

    def __cinit__(self):
        self.r.fd = -1
        self.r.ring = NULL
        self.blk = NULL

    def __init__(self, str iface, int consumer=0, unsigned block_size=1 << 20,
                 unsigned block_nr=32, unsigned retire_ms=20):
        cdef unsigned idx = if_nametoindex(iface.encode())
        if idx == 0:
            raise OSError(f"{iface}: no such interface")
        self.iface = iface
        self.consumer = consumer
        # ARPHRD of the interface: Ethernet (1) and loopback (772) frames start with an
        # Ethernet header; other link types are not supported here (libpcap capture is)
        with open(f"/sys/class/net/{iface}/type") as f:
            arphrd = int(f.read())
        if arphrd not in (1, 772):
            raise OSError(f"{iface}: fanout capture needs an Ethernet interface (ARPHRD {arphrd})")
        self.linktype = LINKTYPE_ETHERNET
        _check(wt_ring_open(&self.r, idx, block_size, block_nr, 2048, retire_ms),
               f"{iface}: AF_PACKET TPACKET_V3 ring")
        self._data = np.asarray(<uint8_t[:self.r.ring_len]>self.r.ring)

    def join(self, unsigned group, str mode):
        """Join fanout group `group` in `mode` ('eq3' or 'hash')."""
        _check(wt_ring_join(&self.r, group, MODES[mode]), f"{self.iface}: PACKET_FANOUT")

    def set_fanout_program(self, list prog):
        cdef sock_filter *f = _insns(prog)
        try:
            _check(wt_ring_fanout_program(&self.r, f, len(prog)), f"{self.iface}: PACKET_FANOUT_DATA")
        finally:
            free(f)

    def set_filter(self, expr):
        """The user's BPF filter (tcpdump syntax, compiled by libpcap), or None: everything."""
        cdef sock_filter *f
        if not expr:
            _check(wt_ring_accept_all(&self.r), f"{self.iface}: SO_ATTACH_FILTER")
            return
        prog = _compile(expr, self.linktype, 262144)
        f = _insns(prog)
        try:
            _check(wt_ring_set_filter(&self.r, f, len(prog)), f"{self.iface}: SO_ATTACH_FILTER")
        finally:
            free(f)

    @property
    def data(self):
        """The whole ring as a uint8 array (packets' offsets point into it)."""
        return self._data

    def next_block(self, packets, int timeout_ms=100):
        """Release the block held (if any), wait up to timeout_ms for the next one and describe
        its packets in `packets` (PACKET_DTYPE, at least `block_size // 32` rows). Returns the
        number of packets (0: none arrived in time)."""
        cdef tpacket_block_desc *b
        cdef tpacket3_hdr *h
        cdef int64_t n
        cdef uint32_t i
        cdef uint64_t first
        cdef uint16_t lt = <uint16_t>self.linktype
        cdef PacketRef *o
        cdef size_t cap
        cdef uint8_t[::1] raw
        if self.r.fd < 0:
            raise ValueError("ring closed")
        if packets.dtype.itemsize != sizeof(PacketRef) or not packets.flags.c_contiguous:
            raise ValueError("packets must be a contiguous PACKET_DTYPE array")
        cap = len(packets)
        raw = packets.view(np.uint8)
        o = <PacketRef *>&raw[0]
        with nogil:
            n = wt_ring_next(&self.r, &b, timeout_ms)
            if n > 0 and <size_t>n <= cap:
                h = wt_block_first(b)
                first = self.r.packets
                for i in range(<uint32_t>n):
                    o[i].ts_ns = <int64_t>h.tp_sec * 1000000000 + h.tp_nsec
                    o[i].index = first + i
                    o[i].offset = <uint64_t>((<uint8_t *>h + h.tp_mac) - self.r.ring)
                    o[i].caplen = h.tp_snaplen
                    o[i].wirelen = h.tp_len
                    o[i].linktype = lt
                    o[i].iface = 0
                    o[i].flags = 2 if h.tp_snaplen > h.tp_len else 0
                    h = wt_pkt_next(h)
                self.r.packets += <uint64_t>n
        _check(n, f"{self.iface}: poll")
        if <size_t>n > cap:
            raise ValueError(f"a block of {n} packets does not fit in {cap} rows")
        return n

    def release(self):
        with nogil:
            wt_ring_release(&self.r)

    def stats(self):
        """Packets handed to this process, blocks, and the kernel's PACKET_STATISTICS totals
        (packets the socket received and the packets it dropped because its ring was full)."""
        if self.r.fd >= 0:
            _check(wt_ring_stats(&self.r), f"{self.iface}: PACKET_STATISTICS")
        return {"packets": self.r.packets, "blocks": self.r.blocks,
                "kernel_packets": self.r.kernel_packets, "kernel_drops": self.r.kernel_drops,
                "freeze_q": self.r.freeze_q}

    @property
    def max_packets_per_block(self):
        return self.r.block_size // 32

    def fileno(self):
        return self.r.fd

    def close(self):
        self._data = None
        wt_ring_close(&self.r)

    def __dealloc__(self):
        wt_ring_close(&self.r)


def open_group(str iface, int n, str mode="hash", bpf=None, group=None, **ring_options):
    """n FanoutRing sockets on `iface` joined to one fanout group (id `group`, default from the
    process id), the Eq. 3 program set when mode='eq3', then the user's filter on each."""
    if n < 1:
        raise ValueError("a fanout group needs at least one socket")
    if mode not in MODES:
        raise ValueError(f"unknown fanout mode {mode!r} (use 'eq3' or 'hash')")
    if bpf:
        _compile(bpf, LINKTYPE_ETHERNET, 262144)          # a bad filter fails before any socket
    rings = []
    try:
        base = (os.getpid() * 7) & 0xFFFF if group is None else group
        for i in range(n):
            r = FanoutRing(iface, consumer=i, **ring_options)
            rings.append(r)
        for attempt in range(64):
            gid = (base + attempt) & 0xFFFF
            try:
                rings[0].join(gid, mode)
                break
            except OSError as e:                 # the id is another group's: take the next
                if group is not None or attempt == 63:
                    raise
                r0 = rings[0]
                r0.close()
                rings[0] = FanoutRing(iface, consumer=0, **ring_options)
        if mode == "eq3":
            rings[0].set_fanout_program(eq3_program())
        for r in rings[1:]:
            r.join(gid, mode)
        for r in rings:
            r.set_filter(bpf)
        return rings
    except BaseException:
        for r in rings:
            r.close()
        raise
