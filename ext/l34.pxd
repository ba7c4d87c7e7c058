# Link -> IP -> TCP of one packet: the one walk the dissector (ext/dissect.pyx), the pass-by
# filter's handshake table (ext/urlmatch.pyx) and the feeder's reader (ext/feeder.pyx) share.
#
# House rule: modules share structs, enums and inline functions through .pxd files, never
# cdef functions through runtime cimports; everything here is `cdef inline ... noexcept nogil`
# and is compiled into each module that cimports it. The rules (and their tshark counterparts)
# are written down in docs/ACCURACY.md; tests/dissect/test_link_ip_tcp.py pins them.
from libc.stddef cimport size_t
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t

from packet cimport (PacketRef, LINKTYPE_NULL, LINKTYPE_ETHERNET, DLT_RAW_ALT, DLT_RAW_ALT2, LINKTYPE_RAW,
                    LINKTYPE_LOOP, LINKTYPE_LINUX_SLL, LINKTYPE_IPV4, LINKTYPE_IPV6,
                    LINKTYPE_LINUX_SLL2)
from message cimport (DR_LINK_UNSUPPORTED, DR_LINK_TRUNCATED, DR_NOT_IP, DR_IP_TRUNCATED,
                     DR_IP_BAD_HEADER, DR_IP_FRAGMENT, DR_NOT_TCP, DR_TCP_TRUNCATED,
                     DR_TCP_BAD_OFFSET, DR_NO_PAYLOAD)

# What l34_parse found: pointers into the packet for the addresses (nothing is copied), the TCP
# fields in host order, and where the payload lies.
ctypedef struct L34:
    const uint8_t *src       # source address in the packet: 4 bytes (IPv4) or 16 (IPv6)
    const uint8_t *dst       # destination address, same length
    uint32_t seq             # TCP sequence number
    uint32_t ack             # TCP acknowledgement number
    uint16_t src_port
    uint16_t dst_port
    uint16_t window          # TCP window field, unscaled
    uint16_t vlan            # outermost 802.1Q VLAN id, 0xFFFF when untagged
    uint32_t ip_off          # offset of the IP header from the packet's first byte
    uint32_t tcp_off         # offset of the TCP header
    uint32_t payload_off     # offset of the TCP payload
    uint32_t payload_caplen  # payload bytes present in the capture
    uint32_t payload_len     # payload bytes on the wire (from the IP length fields)
    uint8_t ip_version       # 4 or 6 (valid once the IP header was read)
    uint8_t ttl              # IPv4 TTL / IPv6 hop limit
    uint8_t tcp_flags        # FIN=0x01 SYN=0x02 RST=0x04 PSH=0x08 ACK=0x10 ...
    uint8_t tcp_ok           # 1: the fixed 20-byte TCP header is in the capture and the data
                             # offset fits the wire length, so ports/seq/ack/flags/payload_len
                             # are valid (also when options are cut: DR_TCP_TRUNCATED)

cdef enum:
    L34_DATA = 0x100         # l34_parse result: a TCP segment with payload in the capture
    L34_MAX_VLAN_TAGS = 8    # 802.1Q/802.1ad tags followed before giving up (not_ip)
    L34_MAX_IP6_EXT = 8      # IPv6 extension headers followed before ip_bad_header


cdef extern from *:
    """
    #define wt_l34_prefetch(p) __builtin_prefetch((const void *)(p), 0, 0)
    """
    void l34_prefetch "wt_l34_prefetch"(const void *p) noexcept nogil


cdef inline uint64_t batch_caplen(const PacketRef *refs, size_t i, size_t n, const uint8_t *base,
                                  uint64_t size) noexcept nogil:
    """Bytes of packet i of a capture batch that lie in its buffer (base, size): caplen clamped
    to the buffer, 0 when the offset is outside it. Asks first for the first two cache lines of
    packet i + 4: a batch's packets are scattered over megabytes, so the loops that walk them
    (dissect_batch, the feeder's classify_batch) hide the misses by looking a few ahead."""
    if i + 4 < n and refs[i + 4].offset + 128 <= size:
        l34_prefetch(base + refs[i + 4].offset)
        l34_prefetch(base + refs[i + 4].offset + 64)
    cdef uint64_t poff = refs[i].offset, caplen = refs[i].caplen
    if poff >= size:
        return 0
    if caplen > size - poff:
        return size - poff
    return caplen


cdef inline uint16_t be16(const uint8_t *p) noexcept nogil:
    return (<uint16_t>p[0] << 8) | p[1]


cdef inline uint32_t be32(const uint8_t *p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]


cdef inline uint32_t le32(const uint8_t *p) noexcept nogil:
    return (<uint32_t>p[3] << 24) | (<uint32_t>p[2] << 16) | (<uint32_t>p[1] << 8) | p[0]


cdef inline int l34_parse(const uint8_t *p, uint32_t caplen, uint16_t linktype, L34 *l) noexcept nogil:
    """Walk p[0:caplen] (a packet of link type `linktype`) to its TCP payload. Returns L34_DATA
    for a TCP segment with payload in the capture, else the DissectReason that stops the walk
    (DR_NO_PAYLOAD for SYN, pure ACK...). *l is filled as far as the walk got (l.vlan and
    l.tcp_ok always)."""
    cdef uint32_t off = 0, ip_off, ip_end_wire, ip_end_cap, hl, tot, frag, tcp_off, doff
    cdef uint32_t pay_off, plen, ext_len, af_le, af_be
    cdef uint16_t etype
    cdef int net = 0, nxt, tags = 0, ver          # net: 0 = raw IP (version nibble decides), 4, 6
    l.vlan = 0xFFFF
    l.tcp_ok = 0

    # --- link layer -------------------------------------------------------------------------
    if linktype == LINKTYPE_ETHERNET or linktype == LINKTYPE_LINUX_SLL or linktype == LINKTYPE_LINUX_SLL2:
        if linktype == LINKTYPE_ETHERNET:
            if caplen < 14:
                return DR_LINK_TRUNCATED
            etype = be16(p + 12)
            off = 14
        elif linktype == LINKTYPE_LINUX_SLL:
            if caplen < 16:
                return DR_LINK_TRUNCATED
            etype = be16(p + 14)
            off = 16
        else:
            if caplen < 20:
                return DR_LINK_TRUNCATED
            etype = be16(p)
            off = 20
        # 802.1Q (0x8100), 802.1ad (0x88a8) and the pre-standard QinQ types 0x9100/0x9200.
        while etype == 0x8100 or etype == 0x88A8 or etype == 0x9100 or etype == 0x9200:
            if tags == L34_MAX_VLAN_TAGS:
                return DR_NOT_IP
            if caplen < off + 4:
                return DR_LINK_TRUNCATED
            if tags == 0:
                l.vlan = be16(p + off) & 0x0FFF
            etype = be16(p + off + 2)
            off += 4
            tags += 1
        if etype == 0x0800:
            net = 4
        elif etype == 0x86DD:
            net = 6
        else:
            return DR_NOT_IP
    elif linktype == LINKTYPE_RAW or linktype == DLT_RAW_ALT or linktype == DLT_RAW_ALT2:
        net = 0
    elif linktype == LINKTYPE_IPV4:
        net = 4
    elif linktype == LINKTYPE_IPV6:
        net = 6
    elif linktype == LINKTYPE_NULL or linktype == LINKTYPE_LOOP:
        if caplen < 4:
            return DR_LINK_TRUNCATED
        af_be = be32(p)
        af_le = le32(p)
        if linktype == LINKTYPE_LOOP:
            af_le = af_be                  # LOOP: network byte order only
        # NULL: host byte order of the capturing machine, unknown to us: accept either.
        if af_be == 2 or af_le == 2:
            net = 4
        elif (af_be == 24 or af_be == 28 or af_be == 30 or af_be == 10 or
              af_le == 24 or af_le == 28 or af_le == 30 or af_le == 10):
            net = 6
        else:
            return DR_NOT_IP
        off = 4
    else:
        return DR_LINK_UNSUPPORTED

    # --- IP -----------------------------------------------------------------------------------
    ip_off = off
    if caplen <= ip_off:
        return DR_IP_TRUNCATED
    ver = p[ip_off] >> 4
    if net == 0:
        if ver == 4 or ver == 6:
            net = ver
        else:
            return DR_IP_BAD_HEADER
    if ver != net:
        return DR_IP_BAD_HEADER
    l.ip_off = ip_off
    if net == 4:
        if caplen < ip_off + 20:
            return DR_IP_TRUNCATED
        hl = (p[ip_off] & 0x0F) * 4
        if hl < 20:
            return DR_IP_BAD_HEADER
        tot = be16(p + ip_off + 2)
        if tot == 0:
            tot = caplen - ip_off          # TSO/GSO capture: length left 0, trust the capture
        if tot < hl:
            return DR_IP_BAD_HEADER
        if caplen < ip_off + hl:
            return DR_IP_TRUNCATED
        frag = be16(p + ip_off + 6)
        if (frag & 0x2000) or (frag & 0x1FFF):
            return DR_IP_FRAGMENT
        if p[ip_off + 9] != 6:
            return DR_NOT_TCP
        l.ip_version = 4
        l.ttl = p[ip_off + 8]
        l.src = p + ip_off + 12
        l.dst = p + ip_off + 16
        tcp_off = ip_off + hl
        ip_end_wire = ip_off + tot
    else:
        if caplen < ip_off + 40:
            return DR_IP_TRUNCATED
        plen = be16(p + ip_off + 4)
        if plen == 0:
            plen = caplen - ip_off - 40    # jumbogram or TSO capture: trust the capture
        ip_end_wire = ip_off + 40 + plen
        nxt = p[ip_off + 6]
        tcp_off = ip_off + 40
        tags = 0
        while nxt != 6:
            if nxt == 0 or nxt == 43 or nxt == 60 or nxt == 51:
                if tags == L34_MAX_IP6_EXT:
                    return DR_IP_BAD_HEADER
                if caplen < tcp_off + 8:
                    return DR_IP_TRUNCATED
                if nxt == 51:
                    ext_len = (<uint32_t>p[tcp_off + 1] + 2) * 4
                else:
                    ext_len = (<uint32_t>p[tcp_off + 1] + 1) * 8
                if tcp_off + ext_len > ip_end_wire:
                    return DR_IP_BAD_HEADER
                nxt = p[tcp_off]
                tcp_off += ext_len
                tags += 1
            elif nxt == 44:
                return DR_IP_FRAGMENT
            else:
                return DR_NOT_TCP
        l.ip_version = 6
        l.ttl = p[ip_off + 7]
        l.src = p + ip_off + 8
        l.dst = p + ip_off + 24

    # --- TCP ----------------------------------------------------------------------------------
    ip_end_cap = ip_end_wire if ip_end_wire < caplen else caplen   # drops Ethernet padding
    if tcp_off + 20 > ip_end_wire:
        return DR_TCP_BAD_OFFSET if tcp_off + 20 <= caplen else DR_TCP_TRUNCATED
    if tcp_off + 20 > ip_end_cap:
        return DR_TCP_TRUNCATED
    doff = (p[tcp_off + 12] >> 4) * 4
    if doff < 20 or tcp_off + doff > ip_end_wire:
        return DR_TCP_BAD_OFFSET
    l.tcp_off = tcp_off
    l.src_port = be16(p + tcp_off)
    l.dst_port = be16(p + tcp_off + 2)
    l.seq = be32(p + tcp_off + 4)
    l.ack = be32(p + tcp_off + 8)
    l.tcp_flags = p[tcp_off + 13]
    l.window = be16(p + tcp_off + 14)
    pay_off = tcp_off + doff
    l.payload_off = pay_off
    l.payload_len = ip_end_wire - pay_off
    l.tcp_ok = 1
    if pay_off > ip_end_cap:
        l.payload_caplen = 0
        return DR_TCP_TRUNCATED          # options cut by the snaplen: the fixed header is valid
    l.payload_caplen = ip_end_cap - pay_off
    if l.payload_len == 0 or l.payload_caplen == 0:
        return DR_NO_PAYLOAD
    return L34_DATA
