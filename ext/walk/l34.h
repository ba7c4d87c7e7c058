/* Link -> IP -> TCP of one packet: the one walk the dissector (ext/walk/dissect.pyx), the pass-by
 * filter's handshake and SNI passes (ext/url/urlmatch.pyx), the TLS stage's QUIC gathering and
 * the feeder's reader (ext/run/classify.pxd) share. The code is ext/walk/l34.c, compiled once
 * into the static library `wtc` (ext/meson.build); declared for Cython in ext/walk/l34.pxd under
 * the same names. The rules (and their tshark counterparts) are written down in
 * docs/ACCURACY.md; tests/dissect/test_link_ip_tcp.py and tests/dissect/test_encap.py pin them.
 * Here: the structs, the limits, the encapsulation codes, and batch_caplen, the few lines every
 * batch loop runs per packet (static inline). */
#ifndef WT_L34_H
#define WT_L34_H
#include <stddef.h>
#include <stdint.h>

#include "packet.h"
#include "reasons.h"
#include "util.h"

/* What l34_parse found: pointers into the packet for the addresses (nothing is copied), the TCP
 * fields in host order, and where the payload lies. Behind tunnels (GRE, VXLAN, ...) every field
 * is the innermost packet's; the layers crossed are in `encap` and the tunnel's outer addresses
 * in outer_src/outer_dst. */
typedef struct {
    const uint8_t *src;        /* source address in the packet: 4 bytes (IPv4) or 16 (IPv6) */
    const uint8_t *dst;        /* destination address, same length */
    const uint8_t *outer_src;  /* addresses of the outermost IP header that carries a tunnel */
    const uint8_t *outer_dst;  /* (valid when outer_ip_version != 0) */
    uint64_t encap;            /* layers crossed to reach the innermost IP: one EncapKind per byte,
                                  outermost in the lowest byte; 0 for a packet without tunnel */
    uint32_t seq;              /* TCP sequence number */
    uint32_t ack;              /* TCP acknowledgement number */
    uint32_t tunnel_id;        /* id the outermost identified tunnel layer carries (see EncapKind) */
    uint16_t src_port;
    uint16_t dst_port;
    uint16_t window;           /* TCP window field, unscaled */
    uint16_t vlan;             /* outermost 802.1Q VLAN id, 0xFFFF when untagged */
    uint32_t ip_off;           /* offset of the IP header from the packet's first byte */
    uint32_t tcp_off;          /* offset of the TCP header */
    uint32_t payload_off;      /* offset of the TCP payload */
    uint32_t payload_caplen;   /* payload bytes present in the capture */
    uint32_t payload_len;      /* payload bytes on the wire (from the IP length fields) */
    uint8_t ip_version;        /* 4 or 6 (valid once the IP header was read) */
    uint8_t ttl;               /* IPv4 TTL / IPv6 hop limit */
    uint8_t tcp_flags;         /* FIN=0x01 SYN=0x02 RST=0x04 PSH=0x08 ACK=0x10 ... */
    uint8_t tcp_ok;            /* 1: the fixed 20-byte TCP header is in the capture and the data
                                  offset fits the wire length, so ports/seq/ack/flags/payload_len
                                  are valid (also when options are cut: DR_TCP_TRUNCATED) */
    uint8_t outer_ip_version;  /* 4 or 6: outer_src/outer_dst are set; 0: no IP header carries a tunnel */
    uint8_t encap_depth;       /* number of layers in `encap` */
} L34;

enum {
    L34_DATA = 0x100,          /* l34_parse result: a TCP segment with payload in the capture */
    L34_MAX_VLAN_TAGS = 8,     /* 802.1Q/802.1ad tags followed before giving up (not_ip) */
    L34_MAX_IP6_EXT = 8,       /* IPv6 extension headers followed before ip_bad_header */
    L34_MAX_ENCAP = 8,         /* encapsulation layers followed (one byte each in L34.encap); a
                                  deeper packet is not_ip and counted encap_too_deep */
    L34_MAX_MPLS = 16,         /* MPLS labels followed before giving up (not_ip) */
    L34_MAX_GTP_EXT = 8,       /* GTP-U extension headers followed before giving up (not_tcp) */
    L34_MAX_UDP_PORTS = 16,    /* user-named UDP tunnel ports (L34Cfg) */
    L34_TOO_DEEP = 0xFF,       /* L34.encap_depth when the walk gave up at L34_MAX_ENCAP layers */
};

/* Encapsulation layers, the codes in L34.encap and HttpMsg.encap
 * (webtap.records.message.ENCAP_NAMES names them; docs/ACCURACY.md "Encapsulations"). A layer
 * is listed once per header crossed. */
enum EncapKind {
    ENC_NONE = 0,
    ENC_GRE = 1,      /* GRE (RFC 2784/2890; key -> tunnel_id), also GRE-in-UDP (RFC 8086) */
    ENC_ERSPAN = 2,   /* ERSPAN type I, II or III (session id -> tunnel_id) */
    ENC_ETH = 3,      /* an Ethernet frame inside a tunnel (VXLAN, Geneve, GRE TEB, ERSPAN) */
    ENC_VXLAN = 4,    /* VXLAN (VNI -> tunnel_id) */
    ENC_GENEVE = 5,   /* Geneve (VNI -> tunnel_id) */
    ENC_GTPU = 6,     /* GTP-U v1 G-PDU (TEID -> tunnel_id) */
    ENC_TEREDO = 7,   /* Teredo (IPv6 in UDP) */
    ENC_AYIYA = 8,    /* AYIYA (IP in UDP) */
    ENC_4IN4 = 9,     /* IPv4 carrying IPv4 (IP protocol 4) */
    ENC_6IN4 = 10,    /* IPv4 carrying IPv6 (protocol 41) */
    ENC_4IN6 = 11,    /* IPv6 carrying IPv4 */
    ENC_6IN6 = 12,    /* IPv6 carrying IPv6 */
    ENC_PPPOE = 13,   /* PPPoE session + PPP (session id -> tunnel_id) */
    ENC_MPLS = 14,    /* an MPLS label stack (bottom label -> tunnel_id) */
    ENC_LLC = 15,     /* 802.2 LLC/SNAP */
    ENC_WLAN = 16,    /* an 802.11 data frame (Aruba's GRE) */
    ENC_PPP = 17,     /* PPP inside GRE version 1 (PPTP) */
    ENC_N
};

/* User-named UDP ports for tunnels (webtap.dissect.set_tunnel_ports): port[i] carries kind[i]
 * (ENC_VXLAN, ENC_GENEVE, ENC_GTPU, ENC_TEREDO, ENC_AYIYA or ENC_GRE), checked after the
 * standard ports. */
typedef struct {
    uint16_t port[L34_MAX_UDP_PORTS];
    uint8_t kind[L34_MAX_UDP_PORTS];
    int n;
} L34Cfg;

/* The process's one L34Cfg: it lives in webtap._ext.dissect (set_tunnel_ports there, named by
 * webtap.dissect.set_tunnel_ports; its capsule "webtap.L34Cfg" from tunnel_cfg_capsule()); every
 * other module that walks packets (feeder, urlmatch, tls) takes its address once, at import, so
 * one setting reaches every walk. NULL with a Python exception set when that module does not
 * load. Needs the GIL. */
const L34Cfg *l34_shared_cfg(void);

/* Walk p[0:caplen] (a packet of link type `linktype`) to its TCP payload, opening the
 * encapsulations of EncapKind on the way (at most L34_MAX_ENCAP layers). Returns L34_DATA for a
 * TCP segment with payload in the capture, else the DissectReason that stops the walk
 * (DR_NO_PAYLOAD for SYN, pure ACK...). *l is filled as far as the walk got (l->vlan, l->encap,
 * l->encap_depth, l->outer_ip_version and l->tcp_ok always). cfg: user-named UDP tunnel ports,
 * or NULL. */
int l34_parse(const uint8_t *p, uint32_t caplen, uint16_t linktype, L34 *l, const L34Cfg *cfg);

/* Count the layers a packet's walk crossed (DR_ENC_* + kind - 1) and a walk given up for depth
 * (DR_ENCAP_TOO_DEEP). Call only when l->encap_depth != 0. */
void l34_count_encap(uint64_t *cnt, const L34 *l);

/* A message's encapsulation fields from its packet's walk: the layers, their depth, the tunnel
 * id and the outer addresses (16 bytes each, IPv4 in the first 4); all zero without a tunnel. A
 * plain UDP datagram's walk has looked for a tunnel inside it (outer_ip_version set, encap 0):
 * that is no tunnel. */
void l34_encap_fields(const L34 *l, uint64_t *encap, uint8_t *encap_depth, uint32_t *tunnel_id,
                      uint8_t *outer_ip_version, uint8_t *outer_src, uint8_t *outer_dst);

/* l34_encap_fields into a message m (HttpMsg, ext/walk/message.pxd: the dissector's HTTP
 * messages, the URL filter's SNI rows), by its field names. */
#define l34_msg_encap(m, l) \
    l34_encap_fields((l), &(m)->encap, &(m)->encap_depth, &(m)->tunnel_id, \
                     &(m)->outer_ip_version, (m)->outer_src, (m)->outer_dst)

/* The UDP datagram after link/IP (QUIC Initials: ext/tls/quic_initial.pxd declares it):
 * l34_parse walks the link layer (and the tunnels, cfg: the user-named UDP tunnel ports or NULL)
 * and reports DR_NOT_TCP with the innermost IP header found; this reads that header. IPv4 (not a
 * fragment) or IPv6 without extension headers. Fills l's ip_version, src, dst, ttl, tcp_off (the
 * UDP header), ports and payload_off/len/caplen (ip_off and vlan from l34_parse; seq, ack,
 * window and tcp_flags zero). udp_len: the datagram also ends with the UDP length field when that is shorter than
 * the IP length. 0: not UDP. */
int quic_udp_locate(const uint8_t *p, uint32_t caplen, uint16_t linktype, const L34Cfg *cfg,
                    L34 *l, int udp_len);

/* Bytes of packet i of a capture batch that lie in its buffer (base, size): caplen clamped to
 * the buffer, 0 when the offset is outside it. Asks first for the first two cache lines of
 * packet i + 4: a batch's packets are scattered over megabytes, so the loops that walk them
 * (dissect_batch, the feeder's classify_batch) hide the misses by looking a few ahead. */
static inline uint64_t batch_caplen(const PacketRef *refs, size_t i, size_t n, const uint8_t *base,
                                    uint64_t size) {
    uint64_t poff, caplen;
    if (i + 4 < n && refs[i + 4].offset + 128 <= size) {
        wt_prefetch(base + refs[i + 4].offset);
        wt_prefetch(base + refs[i + 4].offset + 64);
    }
    poff = refs[i].offset;
    caplen = refs[i].caplen;
    if (poff >= size)
        return 0;
    if (caplen > size - poff)
        return size - poff;
    return caplen;
}

#endif
