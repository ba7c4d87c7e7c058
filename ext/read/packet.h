/* The capture stage's output contract in C: one captured packet of a batch (PacketRef) and the
 * link types webtap dissects. Declared for Cython in ext/read/packet.pxd (which adds the capture
 * stage's counters); the C of the walk (ext/walk/l34.c) reads the same definitions.
 * webtap.records.message.PACKET_DTYPE mirrors PacketRef and a test asserts the sizes agree. */
#ifndef WT_PACKET_H
#define WT_PACKET_H
#include <stdint.h>

typedef struct {
    int64_t ts_ns;       /* capture time, nanoseconds since the Unix epoch (UTC) */
    uint64_t index;      /* 0-based position of the packet in its trace (tshark's frame.number - 1) */
    uint64_t offset;     /* byte offset of the first captured byte in the batch buffer */
    uint32_t caplen;     /* bytes captured (present in the buffer) */
    uint32_t wirelen;    /* bytes the packet had on the wire */
    uint16_t linktype;   /* LINKTYPE_* value of the packet's interface (pcap-linktype(7)) */
    uint16_t iface;      /* pcapng interface id; 0 for pcap files and live capture */
    uint32_t flags;      /* PKTF_* bits below */
} PacketRef;

enum PacketFlags {
    PKTF_CAPLEN_GT_SNAPLEN = 1,   /* caplen exceeds the interface snaplen (kept, as tshark keeps it) */
    PKTF_CAPLEN_GT_WIRELEN = 2,   /* caplen exceeds the wire length (kept; wirelen is then unreliable) */
};

/* Link types webtap dissects (values from pcap-linktype(7) / LINKTYPE_*). */
enum LinkType {
    LINKTYPE_NULL = 0,            /* BSD loopback, 4-byte address family in host byte order */
    LINKTYPE_ETHERNET = 1,
    LINKTYPE_RAW = 101,           /* raw IPv4 or IPv6 (version nibble decides) */
    LINKTYPE_LOOP = 108,          /* OpenBSD loopback, address family in network byte order */
    LINKTYPE_LINUX_SLL = 113,     /* Linux cooked capture v1 */
    LINKTYPE_IPV4 = 228,
    LINKTYPE_IPV6 = 229,
    LINKTYPE_LINUX_SLL2 = 276,    /* Linux cooked capture v2 */
    LINKTYPE_NFLOG = 239,         /* Linux NFLOG (nflog: captures): TLVs, the packet in NFULA_PAYLOAD */
    LINKTYPE_ATM_RFC1483 = 100,   /* 802.2 LLC/SNAP-encapsulated frames (RFC 2684) */
    LINKTYPE_PPP = 9,             /* PPP (RFC 1661), with or without the RFC 1662 FF 03 header */
    LINKTYPE_PPP_HDLC = 50,       /* PPP in HDLC-like framing (RFC 1662), or Cisco PPP (0x0F/0x8F) */
    LINKTYPE_PPP_ETHER = 51,      /* PPPoE session header (RFC 2516) + PPP, no Ethernet header */
    LINKTYPE_C_HDLC = 104,        /* Cisco HDLC: address 0x0F/0x8F, control, ethertype */
    DLT_RAW_ALT = 12,             /* DLT_RAW as written by some BSDs (also raw IP) */
    DLT_RAW_ALT2 = 14,            /* DLT_RAW on OpenBSD (also raw IP) */
};

#endif
