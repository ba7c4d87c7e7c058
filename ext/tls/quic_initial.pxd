# The QUIC Initial first flight, shared by the handshake records (ext/tls/tls.pyx, TlsTable) and the
# pass-by filter's SNI pass (ext/url/urlmatch.pyx, SniTable): locating the UDP datagram behind the
# link layer (quic_udp_locate, below: it rides on the walk's l34_parse) and, in C
# (ext/tls/quic_initial.h / .c, the wtc library), walking the frames of an opened Initial
# (PADDING, PING, ACK skipped; CRYPTO listed) and gathering CRYPTO data into a bounded buffer
# with its coverage bitmap. Packet protection itself is ext/tls/quic_crypto.h. Each table keeps
# its own connection lookup, buffers, caps and counters.
from libc.stddef cimport size_t
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t

from l34 cimport L34, L34Cfg, be16, l34_parse
from message cimport DR_NOT_TCP


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


cdef extern from "quic_initial.h" nogil:
    enum:
        QF_END
        QF_CRYPTO
        QF_OTHER
        QF_BAD_ACK
        QF_BAD_OFFSET
        QF_BAD_LENGTH
        QF_BEYOND
        QF_MANY
        QUIC_MAX_FRAMES
        QUIC_PACKET_FRAMES
    ctypedef struct quic_frame:
        uint32_t pos
        uint32_t coff
        uint32_t len
    int quic_next_crypto(const uint8_t *b, size_t n, size_t *fo, uint64_t *coff, uint64_t *clen)
    int quic_crypto_frames(const uint8_t *plain, size_t pl, uint32_t cap, quic_frame *fr, int max,
                           int *nf, size_t *stop)
    void quic_frames_put(uint8_t *buf, uint8_t *have, const uint8_t *plain, const quic_frame *fr,
                         int nf)
    void quic_crypto_put(uint8_t *buf, uint8_t *have, uint64_t coff, const uint8_t *data,
                         uint64_t clen)
    uint32_t quic_crypto_whole(const uint8_t *buf, const uint8_t *have, uint32_t cap, uint32_t base)
    const uint8_t *quic_frames_message(const uint8_t *plain, const quic_frame *fr, int nf,
                                       uint8_t *scratch, uint32_t cap, uint32_t *need)
