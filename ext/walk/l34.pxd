# Link -> IP -> TCP of one packet: the one walk the dissector (ext/walk/dissect.pyx), the pass-by
# filter's handshake table (ext/url/urlmatch.pyx) and the feeder's reader (ext/run/classify.pxd)
# share. Declarations only: the structs, limits and codes are ext/walk/l34.h, the code
# ext/walk/l34.c (compiled once into the static library `wtc`, linked by each module that walks
# packets). The rules (and their tshark counterparts) are written down in docs/ACCURACY.md;
# tests/dissect/test_link_ip_tcp.py pins them.
from libc.stddef cimport size_t
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t
# be16 / be32 / le16 / le32: the byte-order reads of ext/common/util.h, under the names the walk's
# callers (urlmatch) cimport from here
from util cimport wt_be16 as be16, wt_be32 as be32, wt_le16 as le16, wt_le32 as le32

from packet cimport PacketRef
from message cimport HttpMsg

cdef extern from "l34.h" nogil:
    ctypedef struct L34:
        const uint8_t *src
        const uint8_t *dst
        const uint8_t *outer_src
        const uint8_t *outer_dst
        uint64_t encap
        uint32_t seq
        uint32_t ack
        uint32_t tunnel_id
        uint16_t src_port
        uint16_t dst_port
        uint16_t window
        uint16_t vlan
        uint32_t ip_off
        uint32_t tcp_off
        uint32_t payload_off
        uint32_t payload_caplen
        uint32_t payload_len
        uint8_t ip_version
        uint8_t ttl
        uint8_t tcp_flags
        uint8_t tcp_ok
        uint8_t outer_ip_version
        uint8_t encap_depth

    enum:
        L34_DATA
        L34_MAX_VLAN_TAGS
        L34_MAX_IP6_EXT
        L34_MAX_ENCAP
        L34_MAX_MPLS
        L34_MAX_GTP_EXT
        L34_MAX_UDP_PORTS
        L34_TOO_DEEP

    enum EncapKind:
        ENC_NONE
        ENC_GRE
        ENC_ERSPAN
        ENC_ETH
        ENC_VXLAN
        ENC_GENEVE
        ENC_GTPU
        ENC_TEREDO
        ENC_AYIYA
        ENC_4IN4
        ENC_6IN4
        ENC_4IN6
        ENC_6IN6
        ENC_PPPOE
        ENC_MPLS
        ENC_LLC
        ENC_WLAN
        ENC_PPP
        ENC_N

    ctypedef struct L34Cfg:
        uint16_t port[L34_MAX_UDP_PORTS]
        uint8_t kind[L34_MAX_UDP_PORTS]
        int n

    uint64_t batch_caplen(const PacketRef *refs, size_t i, size_t n, const uint8_t *base,
                          uint64_t size)
    int l34_parse(const uint8_t *p, uint32_t caplen, uint16_t linktype, L34 *l,
                  const L34Cfg *cfg)
    void l34_count_encap(uint64_t *cnt, const L34 *l)
    # a macro over l34_encap_fields: m's encap, encap_depth, tunnel_id, outer_* fields
    void l34_msg_encap(HttpMsg *m, const L34 *l)
    bint quic_udp_locate(const uint8_t *p, uint32_t caplen, uint16_t linktype, const L34Cfg *cfg,
                         L34 *l, bint udp_len)

cdef extern from "l34.h":
    # the process's one L34Cfg (webtap._ext.dissect's), taken at import; needs the GIL
    const L34Cfg *l34_shared_cfg() except NULL
