# Link -> IP -> TCP of one packet: the one walk the dissector (ext/walk/dissect.pyx), the pass-by
# filter's handshake table (ext/url/urlmatch.pyx) and the feeder's reader (ext/run/classify.pxd) share.
#
# House rule: modules share structs, enums and inline functions through .pxd files, never
# cdef functions through runtime cimports; everything here is `cdef inline ... noexcept nogil`
# and is compiled into each module that cimports it. The rules (and their tshark counterparts)
# are written down in docs/ACCURACY.md; tests/dissect/test_link_ip_tcp.py pins them.
from libc.stddef cimport size_t
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t
from cpython.pycapsule cimport PyCapsule_GetPointer
# be16 / be32 / le16 / le32: the byte-order reads of ext/common/util.h, under the names the walk (and the
# modules that cimport them from here) use
from util cimport wt_be16 as be16, wt_be32 as be32, wt_le16 as le16, wt_le32 as le32, wt_prefetch

from packet cimport (PacketRef, LINKTYPE_NULL, LINKTYPE_ETHERNET, DLT_RAW_ALT, DLT_RAW_ALT2, LINKTYPE_RAW,
                    LINKTYPE_LOOP, LINKTYPE_LINUX_SLL, LINKTYPE_IPV4, LINKTYPE_IPV6,
                    LINKTYPE_LINUX_SLL2, LINKTYPE_NFLOG, LINKTYPE_ATM_RFC1483, LINKTYPE_PPP,
                    LINKTYPE_PPP_HDLC, LINKTYPE_PPP_ETHER, LINKTYPE_C_HDLC)
from libc.string cimport memcpy, memset

from message cimport HttpMsg
from message cimport (DR_LINK_UNSUPPORTED, DR_LINK_TRUNCATED, DR_NOT_IP, DR_IP_TRUNCATED,
                     DR_IP_BAD_HEADER, DR_IP_FRAGMENT, DR_NOT_TCP, DR_TCP_TRUNCATED,
                     DR_TCP_BAD_OFFSET, DR_NO_PAYLOAD, DR_ENCAP_TOO_DEEP, DR_ENC_GRE)

# What l34_parse found: pointers into the packet for the addresses (nothing is copied), the TCP
# fields in host order, and where the payload lies. Behind tunnels (GRE, VXLAN, ...) every field
# is the innermost packet's; the layers crossed are in `encap` and the tunnel's outer addresses in
# outer_src/outer_dst.
ctypedef struct L34:
    const uint8_t *src       # source address in the packet: 4 bytes (IPv4) or 16 (IPv6)
    const uint8_t *dst       # destination address, same length
    const uint8_t *outer_src # addresses of the outermost IP header that carries a tunnel
    const uint8_t *outer_dst # (valid when outer_ip_version != 0)
    uint64_t encap           # layers crossed to reach the innermost IP: one EncapKind per byte,
                             # outermost in the lowest byte; 0 for a packet without tunnel
    uint32_t seq             # TCP sequence number
    uint32_t ack             # TCP acknowledgement number
    uint32_t tunnel_id       # id the outermost identified tunnel layer carries (see EncapKind)
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
    uint8_t outer_ip_version # 4 or 6: outer_src/outer_dst are set; 0: no IP header carries a tunnel
    uint8_t encap_depth      # number of layers in `encap`

cdef enum:
    L34_DATA = 0x100         # l34_parse result: a TCP segment with payload in the capture
    L34_MAX_VLAN_TAGS = 8    # 802.1Q/802.1ad tags followed before giving up (not_ip)
    L34_MAX_IP6_EXT = 8      # IPv6 extension headers followed before ip_bad_header
    L34_MAX_ENCAP = 8        # encapsulation layers followed (one byte each in L34.encap); a
                             # deeper packet is not_ip and counted encap_too_deep
    L34_MAX_MPLS = 16        # MPLS labels followed before giving up (not_ip)
    L34_MAX_GTP_EXT = 8      # GTP-U extension headers followed before giving up (not_tcp)
    L34_MAX_UDP_PORTS = 16   # user-named UDP tunnel ports (L34Cfg)

# Encapsulation layers, the codes in L34.encap and HttpMsg.encap (webtap.records.message.ENCAP_NAMES names
# them; docs/ACCURACY.md "Encapsulations"). A layer is listed once per header crossed.
cdef enum EncapKind:
    ENC_NONE = 0
    ENC_GRE = 1              # GRE (RFC 2784/2890; key -> tunnel_id), also GRE-in-UDP (RFC 8086)
    ENC_ERSPAN = 2           # ERSPAN type I, II or III (session id -> tunnel_id)
    ENC_ETH = 3              # an Ethernet frame inside a tunnel (VXLAN, Geneve, GRE TEB, ERSPAN)
    ENC_VXLAN = 4            # VXLAN (VNI -> tunnel_id)
    ENC_GENEVE = 5           # Geneve (VNI -> tunnel_id)
    ENC_GTPU = 6             # GTP-U v1 G-PDU (TEID -> tunnel_id)
    ENC_TEREDO = 7           # Teredo (IPv6 in UDP)
    ENC_AYIYA = 8            # AYIYA (IP in UDP)
    ENC_4IN4 = 9             # IPv4 carrying IPv4 (IP protocol 4)
    ENC_6IN4 = 10            # IPv4 carrying IPv6 (protocol 41)
    ENC_4IN6 = 11            # IPv6 carrying IPv4
    ENC_6IN6 = 12            # IPv6 carrying IPv6
    ENC_PPPOE = 13           # PPPoE session + PPP (session id -> tunnel_id)
    ENC_MPLS = 14            # an MPLS label stack (bottom label -> tunnel_id)
    ENC_LLC = 15             # 802.2 LLC/SNAP
    ENC_WLAN = 16            # an 802.11 data frame (Aruba's GRE)
    ENC_PPP = 17             # PPP inside GRE version 1 (PPTP)
    ENC_N

# User-named UDP ports for tunnels (webtap.dissect.set_tunnel_ports): port[i] carries kind[i]
# (ENC_VXLAN, ENC_GENEVE, ENC_GTPU, ENC_TEREDO, ENC_AYIYA or ENC_GRE), checked after the
# standard ports.
ctypedef struct L34Cfg:
    uint16_t port[L34_MAX_UDP_PORTS]
    uint8_t kind[L34_MAX_UDP_PORTS]
    int n


cdef inline const L34Cfg *l34_shared_cfg() except NULL:
    """The process's one L34Cfg: it lives in webtap._ext.dissect (set_tunnel_ports there, named
    by webtap.dissect.set_tunnel_ports); every other module that walks packets (feeder, urlmatch,
    tls) takes its address once, at import, so one setting reaches every walk."""
    from webtap._ext import dissect as _owner
    return <const L34Cfg *>PyCapsule_GetPointer(_owner.tunnel_cfg_capsule(), b"webtap.L34Cfg")


cdef inline uint64_t batch_caplen(const PacketRef *refs, size_t i, size_t n, const uint8_t *base,
                                  uint64_t size) noexcept nogil:
    """Bytes of packet i of a capture batch that lie in its buffer (base, size): caplen clamped
    to the buffer, 0 when the offset is outside it. Asks first for the first two cache lines of
    packet i + 4: a batch's packets are scattered over megabytes, so the loops that walk them
    (dissect_batch, the feeder's classify_batch) hide the misses by looking a few ahead."""
    if i + 4 < n and refs[i + 4].offset + 128 <= size:
        wt_prefetch(base + refs[i + 4].offset)
        wt_prefetch(base + refs[i + 4].offset + 64)
    cdef uint64_t poff = refs[i].offset, caplen = refs[i].caplen
    if poff >= size:
        return 0
    if caplen > size - poff:
        return size - poff
    return caplen


cdef enum:
    # where the walk of l34_parse stands
    L34_AT_ETH = 0           # an Ethernet header (dst, src, type/length) at off
    L34_AT_ETYPE = 1         # an ethertype `etype` read; what it names starts at off
    L34_AT_IP = 2            # an IP header at off (net: 4, 6, or 0 = the version nibble decides)
    L34_AT_LLC = 3           # an 802.2 LLC header at off
    L34_AT_GRE = 4           # a GRE header at off
    L34_AT_WLAN = 5          # an 802.11 frame at off (Aruba's GRE)
    L34_TOO_DEEP = 0xFF      # L34.encap_depth when the walk gave up at L34_MAX_ENCAP layers


cdef inline bint _l34_eth_type(uint16_t t) noexcept nogil:
    """An ethertype the walk follows towards IP (for the pseudowire check)."""
    return (t == 0x0800 or t == 0x86DD or t == 0x8100 or t == 0x88A8 or t == 0x9100
            or t == 0x8847 or t == 0x8848 or t == 0x8864)


cdef inline bint _l34_push(L34 *l, uint8_t kind) noexcept nogil:
    """Record one encapsulation layer; False when L34_MAX_ENCAP layers are already recorded."""
    if l.encap_depth >= L34_MAX_ENCAP:
        l.encap_depth = L34_TOO_DEEP
        return False
    l.encap |= (<uint64_t>kind) << (8 * l.encap_depth)
    l.encap_depth += 1
    return True


cdef inline uint8_t _l34_udp_kind(uint16_t sport, uint16_t dport, const L34Cfg *cfg) noexcept nogil:
    """Which tunnel a UDP datagram carries, by its ports: the IANA ports first (destination, then
    source: tshark tries the lower port first and these are all below the ephemeral range), then
    the user's (L34Cfg). ENC_NONE for any other datagram."""
    cdef int i, k
    cdef uint16_t q
    for k in range(2):
        q = dport if k == 0 else sport
        if q == 4789:
            return ENC_VXLAN
        if q == 6081:
            return ENC_GENEVE
        if q == 2152:
            return ENC_GTPU
        if q == 3544:
            return ENC_TEREDO
        if q == 5072:
            return ENC_AYIYA
        if q == 4754:
            return ENC_GRE
    if cfg != NULL:
        for k in range(2):
            q = dport if k == 0 else sport
            for i in range(cfg.n):
                if cfg.port[i] == q:
                    return cfg.kind[i]
    return ENC_NONE


cdef inline uint32_t _l34_teredo_hdr(const uint8_t *p, uint32_t u, uint32_t end) noexcept nogil:
    """Length of Teredo's optional authentication and origin-indication headers at p[u:end]
    (RFC 4380 5.1.1), 0xFFFFFFFF when they run past end."""
    cdef uint32_t h = 0
    if u + 2 <= end and p[u] == 0 and p[u + 1] == 1:
        if u + 4 > end:
            return <uint32_t>0xFFFFFFFF
        h = 13 + <uint32_t>p[u + 2] + <uint32_t>p[u + 3]
    if u + h + 2 <= end and p[u + h] == 0 and p[u + h + 1] == 0:
        h += 8
    if u + h > end:
        return <uint32_t>0xFFFFFFFF
    return h


cdef inline bint _l34_teredo_heur(const uint8_t *p, uint32_t u, uint32_t end) noexcept nogil:
    """A UDP payload p[u:end] on another port is Teredo when it is exactly one IPv6 packet
    (after the optional Teredo headers): version 6, one end in 2001:0000::/32, and the IPv6
    payload length plus the 40-byte header fills the datagram (tshark's "heuristic_teredo"
    preference checks the shape, not the prefix)."""
    cdef uint32_t h = _l34_teredo_hdr(p, u, end)
    if h == <uint32_t>0xFFFFFFFF or u + h + 40 > end:
        return False
    if (p[u + h] >> 4) != 6:
        return False
    # one end is a Teredo address (2001:0000::/32, RFC 4380 2.14): what keeps other UDP
    # payloads whose first nibble is 6 (a QUIC short header, ...) from passing for Teredo
    if not ((p[u + h + 8] == 0x20 and p[u + h + 9] == 0x01 and p[u + h + 10] == 0 and p[u + h + 11] == 0)
            or (p[u + h + 24] == 0x20 and p[u + h + 25] == 0x01 and p[u + h + 26] == 0
                and p[u + h + 27] == 0)):
        return False
    return u + h + 40 + be16(p + u + h + 4) == end


cdef inline int _l34_ppp(const uint8_t *p, uint32_t caplen, uint32_t *off, bint acf) noexcept nogil:
    """The PPP protocol field at p[*off] (RFC 1661 6.5: one byte when compressed, an odd first
    byte), after the address and control bytes FF 03 when `acf` and they are there (RFC 1662;
    PPP links and PPTP may elide them, PPPoE never sends them). Moves *off past it. Returns 4
    (0x0021 IPv4), 6 (0x0057 IPv6), 0 for another protocol, -1 when the packet ends first."""
    cdef uint32_t o = off[0]
    cdef uint32_t k
    if acf and caplen >= o + 2 and p[o] == 0xFF and p[o + 1] == 0x03:
        o += 2
    if caplen < o + 1:
        return -1
    if p[o] & 1:
        k = p[o]
        o += 1
    else:
        if caplen < o + 2:
            return -1
        k = be16(p + o)
        o += 2
    off[0] = o
    return 4 if k == 0x21 else 6 if k == 0x57 else 0


cdef inline int l34_parse(const uint8_t *p, uint32_t caplen, uint16_t linktype, L34 *l,
                          const L34Cfg *cfg=NULL) noexcept nogil:
    """Walk p[0:caplen] (a packet of link type `linktype`) to its TCP payload, opening the
    encapsulations of EncapKind on the way (at most L34_MAX_ENCAP layers). Returns L34_DATA for a
    TCP segment with payload in the capture, else the DissectReason that stops the walk
    (DR_NO_PAYLOAD for SYN, pure ACK...). *l is filled as far as the walk got (l.vlan, l.encap,
    l.encap_depth, l.outer_ip_version and l.tcp_ok always). cfg: user-named UDP tunnel ports,
    or NULL."""
    cdef uint32_t off = 0, ip_off, ip_end_wire, ip_end_cap, hl, tot, frag, tcp_off, doff
    cdef uint32_t pay_off, plen, ext_len, af_le, af_be, u, h, lim = <uint32_t>0xFFFFFFFF, tl
    cdef uint16_t etype = 0, gfl, sport, dport
    cdef int net = 0, nxt, tags = 0, vtags = 0, ver, at, k
    cdef uint8_t kind
    l.vlan = 0xFFFF
    l.tcp_ok = 0
    l.encap = 0
    l.encap_depth = 0
    l.outer_ip_version = 0
    l.tunnel_id = 0

    # --- link layer -------------------------------------------------------------------------
    if linktype == LINKTYPE_ETHERNET:
        at = L34_AT_ETH
    elif linktype == LINKTYPE_LINUX_SLL or linktype == LINKTYPE_LINUX_SLL2:
        if linktype == LINKTYPE_LINUX_SLL:
            if caplen < 16:
                return DR_LINK_TRUNCATED
            etype = be16(p + 14)
            off = 16
        else:
            if caplen < 20:
                return DR_LINK_TRUNCATED
            etype = be16(p)
            off = 20
        at = L34_AT_LLC if etype == 0x0004 else L34_AT_ETYPE   # 0x0004: an 802.2 LLC frame
    elif linktype == LINKTYPE_RAW or linktype == DLT_RAW_ALT or linktype == DLT_RAW_ALT2:
        at = L34_AT_IP
        net = 0
    elif linktype == LINKTYPE_IPV4:
        at = L34_AT_IP
        net = 4
    elif linktype == LINKTYPE_IPV6:
        at = L34_AT_IP
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
        at = L34_AT_IP
    elif linktype == LINKTYPE_NFLOG:
        # Linux NFLOG: family, version, resource id, then TLVs (length incl. the 4-byte TLV
        # header, type; both in the capturing host's byte order, read as little-endian unless
        # that makes no sense; padded to 4 bytes) until NFULA_PAYLOAD (type 9) holds the packet.
        if caplen < 4:
            return DR_LINK_TRUNCATED
        net = 4 if p[0] == 2 else (6 if p[0] == 10 else 0)
        off = 4
        while True:
            if caplen < off + 4:
                return DR_LINK_TRUNCATED
            tl = le16(p + off)
            k = le16(p + off + 2) & 0x7FFF
            if tl < 4 or off + tl > caplen + 3:
                tl = be16(p + off)
                k = be16(p + off + 2) & 0x7FFF
                if tl < 4:
                    return DR_LINK_TRUNCATED
            if k == 9:
                off += 4
                lim = off + tl - 4           # the packet ends with its TLV
                break
            off += (tl + 3) & ~(<uint32_t>3)
        at = L34_AT_IP
    elif linktype == LINKTYPE_ATM_RFC1483:
        at = L34_AT_LLC                    # 802.2 LLC/SNAP straight away (RFC 2684)
    elif linktype == LINKTYPE_PPP or linktype == LINKTYPE_PPP_HDLC or linktype == LINKTYPE_C_HDLC:
        if caplen < 2:
            return DR_LINK_TRUNCATED
        if (p[0] == 0x0F or p[0] == 0x8F) and linktype != LINKTYPE_PPP:
            # Cisco HDLC (link type 104, and Cisco PPP framing of 50: RFC 1547 4.3.1): address,
            # control, then an ethertype
            if caplen < 4:
                return DR_LINK_TRUNCATED
            etype = be16(p + 2)
            off = 4
            at = L34_AT_ETYPE
        elif linktype == LINKTYPE_C_HDLC:
            return DR_NOT_IP
        else:
            # PPP (RFC 1661): address FF and control 03 when present (RFC 1662 framing; link
            # type 9 may omit them), then the protocol, one byte when compressed (odd first
            # byte, RFC 1661 6.5): 0x0021 IPv4, 0x0057 IPv6
            net = _l34_ppp(p, caplen, &off, True)
            if net < 0:
                return DR_LINK_TRUNCATED
            if net == 0:
                return DR_NOT_IP
            at = L34_AT_IP
    elif linktype == LINKTYPE_PPP_ETHER:
        etype = 0x8864                     # a PPPoE session header first (no Ethernet header)
        at = L34_AT_ETYPE
    else:
        return DR_LINK_UNSUPPORTED

    # --- encapsulations, down to the innermost IP header carrying TCP -------------------------
    while True:
        if at == L34_AT_ETH:
            if caplen < off + 14:
                return DR_LINK_TRUNCATED
            etype = be16(p + off + 12)
            off += 14
            if etype <= 1500:              # 802.3 length field: an 802.2 LLC header follows
                at = L34_AT_LLC
            else:
                at = L34_AT_ETYPE
        if at == L34_AT_LLC:
            # 802.2 LLC: only SNAP (AA AA 03, OUI, ethertype) carries IP as an ethertype.
            if caplen < off + 3:
                return DR_LINK_TRUNCATED
            if p[off] != 0xAA or p[off + 1] != 0xAA or p[off + 2] != 0x03:
                return DR_NOT_IP
            if caplen < off + 8:
                return DR_LINK_TRUNCATED
            if not _l34_push(l, ENC_LLC):
                return DR_NOT_IP
            etype = be16(p + off + 6)
            off += 8
            at = L34_AT_ETYPE
        elif at == L34_AT_WLAN:
            # 802.11 data frame (Aruba's GRE): 24-byte header, + address 4 (to and from DS),
            # + QoS control (QoS subtypes), + HT control (QoS with the order bit); LLC follows.
            if caplen < off + 24:
                return DR_LINK_TRUNCATED
            if ((p[off] >> 2) & 3) != 2 or (p[off] & 0x40) or (p[off + 1] & 0x40):
                return DR_NOT_IP           # not data, a null-data subtype, or encrypted
            h = 24
            if (p[off + 1] & 3) == 3:
                h += 6
            if p[off] & 0x80:
                h += 2
                if p[off + 1] & 0x80:
                    h += 4
            if not _l34_push(l, ENC_WLAN):
                return DR_NOT_IP
            off += h
            at = L34_AT_LLC
            continue
        elif at == L34_AT_GRE:
            # GRE (RFC 2784/2890): flags+version, protocol type, then checksum+reserved (C),
            # key (K), sequence number (S). Version 1 is PPTP's enhanced GRE (RFC 2637).
            if caplen < off + 4:
                return DR_LINK_TRUNCATED
            gfl = be16(p + off)
            etype = be16(p + off + 2)
            h = 4
            if (gfl & 7) == 0:
                if gfl & 0x4000:
                    return DR_NOT_IP       # source routing (RFC 1701): obsolete, not followed
                if gfl & 0x8000:
                    h += 4
                if gfl & 0x2000:
                    if caplen < off + h + 4:
                        return DR_LINK_TRUNCATED
                    if l.encap == 0:
                        l.tunnel_id = be32(p + off + h)
                    h += 4
                if gfl & 0x1000:
                    h += 4
            elif (gfl & 7) == 1 and etype == 0x880B:
                h = 8 + (4 if gfl & 0x1000 else 0) + (4 if gfl & 0x0080 else 0)
            else:
                return DR_NOT_IP
            if caplen < off + h:
                return DR_LINK_TRUNCATED
            if not _l34_push(l, ENC_GRE):
                return DR_NOT_IP
            off += h
            if etype == 0x6558:                        # transparent Ethernet bridging
                if not _l34_push(l, ENC_ETH):
                    return DR_NOT_IP
                at = L34_AT_ETH
            elif etype == 0x88BE or etype == 0x22EB:
                # ERSPAN: type I (0x88BE without a sequence number) has no header of its own;
                # type II (0x88BE) has 8 bytes, type III (0x22EB) 12 + 8 when its O bit is set
                # and carries other frames than Ethernet when its frame type is not 0.
                h = 0
                if etype == 0x22EB:
                    if caplen < off + 12:
                        return DR_LINK_TRUNCATED
                    if (p[off + 10] >> 2) & 0x1F:
                        return DR_NOT_IP
                    h = 20 if p[off + 11] & 1 else 12
                elif gfl & 0x1000:
                    h = 8
                if caplen < off + h:
                    return DR_LINK_TRUNCATED
                if h and l.encap_depth == 1:
                    l.tunnel_id = be16(p + off + 2) & 0x3FF
                if not _l34_push(l, ENC_ERSPAN) or not _l34_push(l, ENC_ETH):
                    return DR_NOT_IP
                off += h
                at = L34_AT_ETH
            elif etype == 0x8200:                      # Aruba: an 802.11 frame
                at = L34_AT_WLAN
            elif etype == 0x880B:                      # PPP (PPTP)
                if caplen < off + 2:
                    return DR_LINK_TRUNCATED
                net = _l34_ppp(p, caplen, &off, True)
                if net < 0:
                    return DR_LINK_TRUNCATED
                if not _l34_push(l, ENC_PPP) or net == 0:
                    return DR_NOT_IP
                at = L34_AT_IP
            else:
                at = L34_AT_ETYPE                      # IPv4, IPv6, MPLS, ... by ethertype
            if at != L34_AT_ETYPE and at != L34_AT_IP:
                continue
        if at == L34_AT_ETYPE:
            # 802.1Q (0x8100), 802.1ad (0x88a8) and the pre-standard QinQ types 0x9100/0x9200.
            while etype == 0x8100 or etype == 0x88A8 or etype == 0x9100 or etype == 0x9200:
                if vtags == L34_MAX_VLAN_TAGS:
                    return DR_NOT_IP
                if caplen < off + 4:
                    return DR_LINK_TRUNCATED
                if l.vlan == 0xFFFF:
                    l.vlan = be16(p + off) & 0x0FFF
                etype = be16(p + off + 2)
                off += 4
                vtags += 1
            if etype == 0x0800:
                net = 4
            elif etype == 0x86DD:
                net = 6
            elif etype == 0x8847 or etype == 0x8848:
                # MPLS label stack down to the bottom-of-stack bit; then IPv4/IPv6 by the version
                # nibble, or an Ethernet pseudowire.
                if not _l34_push(l, ENC_MPLS):
                    return DR_NOT_IP
                k = 0
                while True:
                    if k == L34_MAX_MPLS:
                        return DR_NOT_IP
                    if caplen < off + 4:
                        return DR_LINK_TRUNCATED
                    if l.encap_depth == 1:
                        l.tunnel_id = be32(p + off) >> 12
                    off += 4
                    k += 1
                    if p[off - 2] & 1:
                        break
                if caplen <= off:
                    return DR_IP_TRUNCATED
                ver = p[off] >> 4
                if ver == 4 or ver == 6:
                    net = ver
                else:
                    # An Ethernet pseudowire (RFC 4448): the frame, or a control word (first
                    # nibble 0) and the frame; told apart by where an IP-carrying ethertype
                    # sits (tshark asks its OUI table whether the MAC addresses look real).
                    if caplen >= off + 14 and _l34_eth_type(be16(p + off + 12)):
                        pass
                    elif ver == 0 and caplen >= off + 18 and _l34_eth_type(be16(p + off + 16)):
                        off += 4
                    else:
                        return DR_NOT_IP
                    if not _l34_push(l, ENC_ETH):
                        return DR_NOT_IP
                    at = L34_AT_ETH
                    continue
            elif etype == 0x8864:
                # PPPoE session stage (RFC 2516): ver/type 0x11, code 0, session id, length,
                # then the PPP protocol (0x0021 IPv4, 0x0057 IPv6; one byte when compressed).
                if caplen < off + 8:
                    return DR_LINK_TRUNCATED
                if p[off] != 0x11 or p[off + 1] != 0:
                    return DR_NOT_IP
                if l.encap == 0:
                    l.tunnel_id = be16(p + off + 2)
                if off + 6 + be16(p + off + 4) < lim:
                    lim = off + 6 + be16(p + off + 4)  # the PPP frame ends with the PPPoE length
                if not _l34_push(l, ENC_PPPOE):
                    return DR_NOT_IP
                off += 6
                net = _l34_ppp(p, caplen, &off, False)    # caplen >= off + 2 checked above
                if net <= 0:
                    return DR_NOT_IP
            else:
                return DR_NOT_IP
            at = L34_AT_IP

        # --- IP -----------------------------------------------------------------------------
        ip_off = off
        if caplen <= ip_off:
            return DR_IP_TRUNCATED
        if ip_off > 0xFFFF - 60:
            return DR_IP_BAD_HEADER        # HttpMsg keeps header offsets in 16 bits
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
            nxt = p[ip_off + 9]
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
            while nxt == 0 or nxt == 43 or nxt == 60 or nxt == 51 or nxt == 44:
                if nxt == 44:
                    return DR_IP_FRAGMENT
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
            l.ip_version = 6
            l.ttl = p[ip_off + 7]
            l.src = p + ip_off + 8
            l.dst = p + ip_off + 24
        if ip_end_wire > lim:
            ip_end_wire = lim                  # longer than what carries it: cut, as tshark does
        if nxt == 6:
            break

        # --- a tunnel inside this IP packet? ------------------------------------------------
        if l.outer_ip_version == 0:
            l.outer_ip_version = l.ip_version
            l.outer_src = l.src
            l.outer_dst = l.dst
        lim = ip_end_wire
        off = tcp_off
        if nxt == 4 or nxt == 41:                      # IP in IP (RFC 2003, RFC 4213)
            if net == 4:
                kind = ENC_4IN4 if nxt == 4 else ENC_6IN4
            else:
                kind = ENC_4IN6 if nxt == 4 else ENC_6IN6
            if not _l34_push(l, kind):
                return DR_NOT_IP
            net = 4 if nxt == 4 else 6
            continue
        if nxt == 47:
            at = L34_AT_GRE
            continue
        if nxt != 17:
            return DR_NOT_TCP
        # UDP tunnels, by port
        if caplen < off + 8:
            return DR_NOT_TCP
        sport = be16(p + off)
        dport = be16(p + off + 2)
        if be16(p + off + 4) >= 8 and off + be16(p + off + 4) < lim:
            lim = off + be16(p + off + 4)              # the datagram ends with the UDP length
        kind = _l34_udp_kind(sport, dport, cfg)
        u = off + 8
        ip_end_cap = lim if lim < caplen else caplen
        if kind == ENC_NONE:
            if not _l34_teredo_heur(p, u, ip_end_cap):
                return DR_NOT_TCP
            kind = ENC_TEREDO
        if kind == ENC_GRE:                            # GRE in UDP (RFC 8086)
            off = u
            at = L34_AT_GRE
            continue
        if not _l34_push(l, kind):
            return DR_NOT_IP
        if kind == ENC_VXLAN:
            # VXLAN (RFC 7348): flags, reserved, VNI, reserved; an Ethernet frame follows.
            if caplen < u + 8:
                return DR_LINK_TRUNCATED
            if l.encap_depth == 1:
                l.tunnel_id = be32(p + u + 4) >> 8
            off = u + 8
            if not _l34_push(l, ENC_ETH):
                return DR_NOT_IP
            at = L34_AT_ETH
        elif kind == ENC_GENEVE:
            # Geneve (RFC 8926): version 0, option length in 4-byte words, protocol type, VNI.
            if caplen < u + 8:
                return DR_LINK_TRUNCATED
            if (p[u] >> 6) != 0:
                return DR_NOT_IP
            if l.encap_depth == 1:
                l.tunnel_id = be32(p + u + 4) >> 8
            etype = be16(p + u + 2)
            off = u + 8 + (p[u] & 0x3F) * 4
            if etype == 0x6558:
                if not _l34_push(l, ENC_ETH):
                    return DR_NOT_IP
                at = L34_AT_ETH
            else:
                at = L34_AT_ETYPE
        elif kind == ENC_GTPU:
            # GTP-U v1 (3GPP TS 29.281): only G-PDUs (type 255) carry user packets. Sequence
            # number, N-PDU number and next-extension type follow when any of E/S/PN is set;
            # extension headers chain by their last byte, their length in 4-byte units.
            if caplen < u + 8:
                return DR_LINK_TRUNCATED
            if (p[u] >> 5) != 1 or not (p[u] & 0x10) or p[u + 1] != 0xFF:
                return DR_NOT_TCP
            if l.encap_depth == 1:
                l.tunnel_id = be32(p + u + 4)
            h = 8
            if p[u] & 0x07:
                if caplen < u + 12:
                    return DR_LINK_TRUNCATED
                h = 12
                k = p[u + 11]
                tags = 0
                while k != 0:
                    if tags == L34_MAX_GTP_EXT:
                        return DR_NOT_TCP
                    if caplen < u + h + 1:
                        return DR_LINK_TRUNCATED
                    tl = <uint32_t>p[u + h] * 4
                    if tl == 0 or caplen < u + h + tl:
                        return DR_LINK_TRUNCATED
                    k = p[u + h + tl - 1]
                    h += tl
                    tags += 1
            off = u + h
            net = 0
            at = L34_AT_IP
        elif kind == ENC_TEREDO:
            h = _l34_teredo_hdr(p, u, ip_end_cap)
            if h == <uint32_t>0xFFFFFFFF:
                return DR_LINK_TRUNCATED
            off = u + h
            net = 6
            at = L34_AT_IP
        elif kind == ENC_AYIYA:
            # AYIYA: identity length 2^n and type, signature length in 4-byte words and hash
            # method, authentication method and opcode (1 = forward), next header, epoch;
            # then identity and signature.
            if caplen < u + 8:
                return DR_LINK_TRUNCATED
            if (p[u + 2] & 0x0F) != 1:
                return DR_NOT_TCP
            k = p[u + 3]
            if k == 41:
                net = 6
            elif k == 4:
                net = 4
            else:
                return DR_NOT_TCP
            off = u + 8 + (<uint32_t>1 << (p[u] >> 4)) + (p[u + 1] >> 4) * 4
            at = L34_AT_IP
        else:
            return DR_NOT_TCP

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


cdef inline void l34_count_encap(uint64_t *cnt, const L34 *l) noexcept nogil:
    """Count the layers a packet's walk crossed (DR_ENC_* + kind - 1) and a walk given up for
    depth (DR_ENCAP_TOO_DEEP). Call only when l.encap_depth != 0."""
    cdef uint64_t e = l.encap
    if l.encap_depth == L34_TOO_DEEP:
        cnt[<int>DR_ENCAP_TOO_DEEP] += 1
    while e != 0:
        cnt[<int>DR_ENC_GRE + <int>(e & 0xFF) - 1] += 1
        e >>= 8


cdef inline void l34_msg_encap(HttpMsg *m, const L34 *l) noexcept nogil:
    """A message's encapsulation fields from its packet's walk (the dissector's HTTP messages,
    the URL filter's SNI rows): the layers, their depth, the tunnel id and the outer addresses;
    all zero without a tunnel. A plain UDP datagram's walk has looked for a tunnel inside it
    (outer_ip_version set, encap 0): that is no tunnel."""
    m.encap = l.encap
    m.encap_depth = l.encap_depth if l.encap else 0
    m.tunnel_id = l.tunnel_id if l.encap else 0
    m.outer_ip_version = l.outer_ip_version if l.encap else 0
    memset(m.outer_src, 0, 16)
    memset(m.outer_dst, 0, 16)
    if m.outer_ip_version:
        memcpy(m.outer_src, l.outer_src, 4 if l.outer_ip_version == 4 else 16)
        memcpy(m.outer_dst, l.outer_dst, 4 if l.outer_ip_version == 4 else 16)
