# The feeder's reader pass, beside the dissector: one HTTP first packet as the reader found it
# (FeedPkt, a declaration). The pass itself (classify_packets) is in ext/run/feeder.pyx: it walks
# link/IP/TCP with ext/walk/l34.pxd's inlines and decides on the payload with the dissector's own
# C rules (ext/walk/httpstart.c, httpcont.c), so it takes exactly the packets the dissector makes
# messages of; the consumers dissect them.
from libc.stdint cimport uint8_t, uint16_t, uint32_t

from packet cimport PacketRef

# One HTTP first packet as the reader found it: where it lies, and what routing needs.
ctypedef struct FeedPkt:
    PacketRef ref        # the packet (offset into the batch buffer, caplen clipped to it)
    uint8_t src_ip[16]   # addresses in the HttpMsg layout (IPv4 in bytes 0-3, zeros after)
    uint8_t dst_ip[16]
    uint32_t seq
    uint32_t hash        # Eq. 3 before the modulo (key: ACK of a request, SEQ of a response)
    uint32_t next_seq    # a 1xx response: SEQ + payload length, where its final response starts
    uint16_t src_port
    uint16_t dst_port
    uint8_t kind         # MSG_REQUEST / MSG_RESPONSE
    uint8_t interim      # 1: a 1xx response other than 101
    uint8_t ip_version
    uint8_t _pad[5]


