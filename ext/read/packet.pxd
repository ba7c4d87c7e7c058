# The capture stage's output contract: a packet batch.
#
# A batch is a C array of PacketRef plus one byte buffer. For offline files the buffer is the
# memory-mapped file itself (no copy); for live capture it is a buffer the batch owns. Python
# sees both as numpy arrays without a copy: webtap.records.message.PACKET_DTYPE mirrors PacketRef and a
# test asserts the two have the same size.
from libc.stdint cimport int64_t, uint16_t, uint32_t, uint64_t

ctypedef struct PacketRef:
    int64_t ts_ns        # capture time, nanoseconds since the Unix epoch (UTC)
    uint64_t index       # 0-based position of the packet in its trace (tshark's frame.number - 1)
    uint64_t offset      # byte offset of the first captured byte in the batch buffer
    uint32_t caplen      # bytes captured (present in the buffer)
    uint32_t wirelen     # bytes the packet had on the wire
    uint16_t linktype    # LINKTYPE_* value of the packet's interface (pcap-linktype(7))
    uint16_t iface       # pcapng interface id; 0 for pcap files and live capture
    uint32_t flags       # PKTF_* bits below

cdef enum PacketFlags:
    PKTF_CAPLEN_GT_SNAPLEN = 1    # caplen exceeds the interface snaplen (kept, as tshark keeps it)
    PKTF_CAPLEN_GT_WIRELEN = 2    # caplen exceeds the wire length (kept; wirelen is then unreliable)

# Link types webtap dissects (values from pcap-linktype(7) / LINKTYPE_*).
cdef enum LinkType:
    LINKTYPE_NULL = 0             # BSD loopback, 4-byte address family in host byte order
    LINKTYPE_ETHERNET = 1
    LINKTYPE_RAW = 101            # raw IPv4 or IPv6 (version nibble decides)
    LINKTYPE_LOOP = 108           # OpenBSD loopback, address family in network byte order
    LINKTYPE_LINUX_SLL = 113      # Linux cooked capture v1
    LINKTYPE_IPV4 = 228
    LINKTYPE_IPV6 = 229
    LINKTYPE_LINUX_SLL2 = 276     # Linux cooked capture v2
    LINKTYPE_NFLOG = 239          # Linux NFLOG (nflog: captures): TLVs, the packet in NFULA_PAYLOAD
    LINKTYPE_ATM_RFC1483 = 100    # 802.2 LLC/SNAP-encapsulated frames (RFC 2684)
    LINKTYPE_PPP = 9              # PPP (RFC 1661), with or without the RFC 1662 FF 03 header
    LINKTYPE_PPP_HDLC = 50        # PPP in HDLC-like framing (RFC 1662), or Cisco PPP (0x0F/0x8F)
    LINKTYPE_PPP_ETHER = 51       # PPPoE session header (RFC 2516) + PPP, no Ethernet header
    LINKTYPE_C_HDLC = 104         # Cisco HDLC: address 0x0F/0x8F, control, ethertype
    DLT_RAW_ALT = 12              # DLT_RAW as written by some BSDs (also raw IP)
    DLT_RAW_ALT2 = 14             # DLT_RAW on OpenBSD (also raw IP)

# What the capture stage read, skipped, and why. Index into the reader's counters array;
# webtap.records.message.SOURCE_REASONS names them in this order.
cdef enum SourceReason:
    SR_PACKETS = 0            # packets handed on (after the BPF filter)
    SR_CAPTURED_BYTES         # bytes of those packets present in the capture (sum of caplen)
    SR_WIRE_BYTES             # bytes those packets had on the wire (sum of wirelen)
    SR_BPF_REJECTED           # packets the BPF filter rejected
    SR_CAPLEN_GT_SNAPLEN      # packets longer than the interface snaplen (kept)
    SR_CAPLEN_GT_WIRELEN      # packets whose caplen exceeds their wire length (kept)
    SR_BAD_RECORD             # record/block headers that could not be valid (absurd length...)
    SR_SKIPPED_BYTES          # bytes skipped while resynchronising after a bad record/block
    SR_TRUNCATED              # 1 when the file ends in the middle of a record or block
    SR_UNKNOWN_BLOCKS         # pcapng blocks of a type webtap does not read (skipped)
    SR_BAD_INTERFACE          # pcapng packets naming an interface no IDB described
    SR_SECTIONS               # pcapng sections (SHB) read
    SR_INTERFACES             # pcapng interfaces (IDB) read
    SR_N                      # number of counters
