# The QUIC Initial first flight, shared by the handshake records (ext/tls/tls.pyx, TlsTable) and the
# pass-by filter's SNI pass (ext/url/urlmatch.pyx, SniTable): locating the UDP datagram behind the
# link layer, walking the frames of an opened Initial (PADDING, PING, ACK skipped; CRYPTO
# reported) and gathering CRYPTO data into a bounded buffer with its coverage bitmap. Packet
# protection itself is ext/quic_crypto.h. Each table keeps its own buffers, caps and counters.
#
# House rule (ext/walk/l34.pxd): everything here is `cdef inline ... noexcept nogil`, compiled into
# each module that cimports it.
from libc.stddef cimport size_t
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy

from l34 cimport L34, L34Cfg, be16, l34_parse
from message cimport DR_NOT_TCP
from quic_crypto cimport quic_varint


cdef inline bint quic_udp_locate(const uint8_t *p, uint32_t caplen, uint16_t linktype,
                                 const L34Cfg *cfg, L34 *l, bint udp_len) noexcept nogil:
    """The UDP datagram after link/IP: l34_parse walks the link layer (and the tunnels, cfg: the
    user-named UDP tunnel ports or NULL) and reports DR_NOT_TCP with the innermost IP header
    found; this reads that header. IPv4 (not a fragment) or IPv6 without extension headers.
    Fills l's ip_version, src, dst, ttl, tcp_off (the UDP header), ports and payload_off/len/
    caplen (ip_off and vlan from l34_parse; seq/ack unused). udp_len: the datagram also ends
    with the UDP length field when that is shorter than the IP length. False: not UDP."""
    cdef int r = l34_parse(p, caplen, linktype, l, cfg)
    cdef uint32_t ip, hl, tot, udp, ulen
    if r != DR_NOT_TCP:
        return False
    ip = l.ip_off
    if caplen < ip + 20:
        return False
    if (p[ip] >> 4) == 4:
        hl = (p[ip] & 0x0F) * 4
        tot = be16(p + ip + 2)
        if p[ip + 9] != 17 or hl < 20 or (be16(p + ip + 6) & 0x3FFF):
            return False
        if tot == 0:
            tot = caplen - ip
        if tot < hl + 8:
            return False
        l.ip_version = 4
        l.src = p + ip + 12
        l.dst = p + ip + 16
        l.ttl = p[ip + 8]
        udp = ip + hl
        ulen = tot - hl
    else:
        if caplen < ip + 40 or p[ip + 6] != 17:
            return False
        l.ip_version = 6
        l.src = p + ip + 8
        l.dst = p + ip + 24
        l.ttl = p[ip + 7]
        udp = ip + 40
        ulen = be16(p + ip + 4)
    if caplen < udp + 8 or ulen < 8:
        return False
    if udp_len and be16(p + udp + 4) < ulen and be16(p + udp + 4) >= 8:
        ulen = be16(p + udp + 4)
    l.tcp_off = udp
    l.src_port = be16(p + udp)
    l.dst_port = be16(p + udp + 2)
    l.payload_off = udp + 8
    l.payload_len = ulen - 8
    l.payload_caplen = caplen - (udp + 8) if caplen - (udp + 8) < ulen - 8 else ulen - 8
    return True


cdef inline bint quic_skip_ack(const uint8_t *b, size_t n, size_t *fo, bint ecn) noexcept nogil:
    """Skip an ACK frame's body at b[fo] (RFC 9000 19.3): largest, delay, range count, first
    range, count x (gap, length), and the three ECN counts of type 0x03. At most 256 ranges."""
    cdef uint64_t v, ranges = 0, i, total
    cdef size_t k
    for i in range(4):
        k = quic_varint(b + fo[0], n - fo[0], &v)
        if k == 0:
            return False
        fo[0] += k
        if i == 2:
            ranges = v
    if ranges > 256:
        return False
    total = 2 * ranges + (3 if ecn else 0)
    for i in range(total):
        k = quic_varint(b + fo[0], n - fo[0], &v)
        if k == 0:
            return False
        fo[0] += k
    return True


cdef enum:
    QF_END = 0         # no frame left: fo == n
    QF_CRYPTO = 1      # a CRYPTO frame: coff/clen set, its data at b[fo:fo+clen] (inside b)
    QF_OTHER = 2       # another frame type (CONNECTION_CLOSE, ...): fo at its type byte
    QF_BAD_ACK = 3     # an ACK frame that does not parse (fo where the walk stopped)
    QF_BAD_OFFSET = 4  # CRYPTO offset varint cut (fo after the type byte)
    QF_BAD_LENGTH = 5  # CRYPTO length varint cut (fo after the offset) or longer than the
                       # packet (fo after the length)


cdef inline int quic_next_crypto(const uint8_t *b, size_t n, size_t *fo, uint64_t *coff,
                                 uint64_t *clen) noexcept nogil:
    """The next CRYPTO frame of an opened Initial's payload b[0:n] from b[fo], skipping PADDING,
    PING and ACK frames (the frames an Initial may carry besides CONNECTION_CLOSE, RFC 9000
    17.2.2). Returns a QF_* code; the caller advances fo by clen after using the data."""
    cdef uint8_t ftype
    cdef size_t k
    cdef uint64_t w
    while fo[0] < n:
        ftype = b[fo[0]]
        if ftype == 0x00:                              # PADDING: runs of zeros, 8 at a time
            fo[0] += 1
            while fo[0] + 8 <= n:
                memcpy(&w, b + fo[0], 8)
                if w != 0:
                    break
                fo[0] += 8
            continue
        if ftype == 0x01:                              # PING
            fo[0] += 1
            continue
        if ftype == 0x02 or ftype == 0x03:             # ACK (ranges skipped)
            fo[0] += 1
            if not quic_skip_ack(b, n, fo, ftype == 0x03):
                return QF_BAD_ACK
            continue
        if ftype != 0x06:
            return QF_OTHER
        fo[0] += 1
        k = quic_varint(b + fo[0], n - fo[0], coff)
        if k == 0:
            return QF_BAD_OFFSET
        fo[0] += k
        k = quic_varint(b + fo[0], n - fo[0], clen)
        if k == 0:
            return QF_BAD_LENGTH
        fo[0] += k
        if clen[0] > n - fo[0]:
            return QF_BAD_LENGTH
        return QF_CRYPTO
    return QF_END


cdef inline void quic_crypto_put(uint8_t *buf, uint8_t *have, uint64_t coff, const uint8_t *data,
                                 uint64_t clen) noexcept nogil:
    """CRYPTO data of stream offsets [coff, coff+clen) into buf, marked in the coverage bitmap
    have (one bit per byte). The caller has checked coff + clen against its buffer's size."""
    cdef uint64_t x
    memcpy(buf + coff, data, clen)
    for x in range(coff, coff + clen):
        have[x >> 3] |= <uint8_t>(1 << (x & 7))


cdef inline uint32_t quic_crypto_whole(const uint8_t *buf, const uint8_t *have, uint32_t cap,
                                       uint32_t base) noexcept nogil:
    """Length of the whole handshake message (4-byte header + body) at stream offset base of a
    CRYPTO buffer of cap bytes with coverage bitmap have; 0 while bytes are missing, 0xFFFFFFFF
    when the message cannot fit under the cap."""
    cdef uint32_t need, i
    if base + 4 > cap:
        return 0
    for i in range(base, base + 4):
        if not (have[i >> 3] & (1 << (i & 7))):
            return 0
    need = 4 + ((<uint32_t>buf[base + 1] << 16) | (<uint32_t>buf[base + 2] << 8) | buf[base + 3])
    if need > cap - base:
        return 0xFFFFFFFFu
    for i in range(base, base + need):
        if not (have[i >> 3] & (1 << (i & 7))):
            return 0
    return need
