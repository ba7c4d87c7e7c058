# The capture stage's output contract: a packet batch.
#
# A batch is a C array of PacketRef plus one byte buffer. For offline files the buffer is the
# memory-mapped file itself (no copy); for live capture it is a buffer the batch owns. Python
# sees both as numpy arrays without a copy: webtap.records.message.PACKET_DTYPE mirrors PacketRef and a
# test asserts the two have the same size.
from libc.stdint cimport int64_t, uint16_t, uint32_t, uint64_t

# PacketRef, its flags and the link types are C (ext/read/packet.h), so that the walk's C
# (ext/walk/l34.c) reads the same definitions.
cdef extern from "packet.h" nogil:
    ctypedef struct PacketRef:
        int64_t ts_ns
        uint64_t index
        uint64_t offset
        uint32_t caplen
        uint32_t wirelen
        uint16_t linktype
        uint16_t iface
        uint32_t flags

    enum PacketFlags:
        PKTF_CAPLEN_GT_SNAPLEN
        PKTF_CAPLEN_GT_WIRELEN

    enum LinkType:
        LINKTYPE_NULL
        LINKTYPE_ETHERNET
        LINKTYPE_RAW
        LINKTYPE_LOOP
        LINKTYPE_LINUX_SLL
        LINKTYPE_IPV4
        LINKTYPE_IPV6
        LINKTYPE_LINUX_SLL2
        LINKTYPE_NFLOG
        LINKTYPE_ATM_RFC1483
        LINKTYPE_PPP
        LINKTYPE_PPP_HDLC
        LINKTYPE_PPP_ETHER
        LINKTYPE_C_HDLC
        DLT_RAW_ALT
        DLT_RAW_ALT2

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
