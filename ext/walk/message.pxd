# The dissect stage's output contract: an HTTP message batch.
#
# One fixed-size HttpMsg per packet whose TCP payload starts an HTTP request or response (the
# paper's "first packet" of a message). Text fields are Spans, (offset, length) pairs into the
# packet (relative to the packet's first byte, which sits at `pkt_offset` in the batch buffer):
# the dissector never copies packet bytes. Every later stage (pairing, URL matching, forging)
# reads this struct; webtap.records.message.MESSAGE_DTYPE mirrors it and a test asserts the sizes agree.
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t

ctypedef struct Span:
    uint32_t off         # offset of the first byte, from the start of the packet
    uint32_t len         # length in bytes; 0 when the field is absent

ctypedef struct HttpMsg:
    int64_t ts_ns        # capture time of the packet, ns since the Unix epoch
    uint64_t pkt_index   # 0-based position of the packet in the trace (tshark frame.number - 1)
    uint64_t pkt_offset  # byte offset of the packet's first byte in the batch buffer
    uint8_t src_ip[16]   # source address; IPv4 in bytes 0-3 and zeros after, IPv6 all 16 bytes
    uint8_t dst_ip[16]   # destination address, same layout
    uint32_t seq         # TCP sequence number (host order)
    uint32_t ack         # TCP acknowledgement number (host order)
    uint16_t src_port    # TCP source port (host order)
    uint16_t dst_port    # TCP destination port (host order)
    uint16_t window      # TCP window field, unscaled (host order)
    uint16_t ip_off      # offset of the IP header from the start of the packet
    uint16_t tcp_off     # offset of the TCP header from the start of the packet
    uint16_t vlan        # outermost 802.1Q VLAN id, or 0xFFFF when untagged
    uint32_t payload_off    # offset of the TCP payload from the start of the packet (of the
                            # message's first byte when it starts mid-segment: MSGF_MID_SEGMENT)
    uint32_t payload_caplen # payload bytes present in the capture (up to the next message's
                            # first byte when another message follows in the segment)
    uint32_t payload_len    # payload bytes on the wire, from the IP length fields (likewise)
    Span method          # request method token (requests only)
    Span uri             # request-target as sent (requests only)
    Span version         # "HTTP/1.x" of the request line or of the status line
    Span host            # Host header value, trimmed of surrounding whitespace
    Span user_agent      # User-Agent header value, trimmed
    Span reason          # reason phrase of a response, may be empty
    uint16_t status      # response status code (100-999); 0 for requests
    uint16_t flags       # MSGF_* bits below
    uint16_t linktype    # LINKTYPE_* of the packet
    uint8_t kind         # MSG_REQUEST or MSG_RESPONSE
    uint8_t method_id    # METHOD_* value of the request method; METHOD_OTHER for responses
    uint8_t ip_version   # 4 or 6
    uint8_t tcp_flags    # TCP flag bits (FIN=0x01 SYN=0x02 RST=0x04 PSH=0x08 ACK=0x10 URG=0x20 ...)
    uint8_t ttl          # IPv4 TTL or IPv6 hop limit
    uint8_t _reserved    # zero
    # Encapsulation (ext/walk/l34.c; docs/ACCURACY.md "Encapsulations"). Added at the end.
    uint64_t encap           # layers crossed (EncapKind, one per byte, outermost lowest); 0: none
    uint8_t outer_src[16]    # source address of the outermost IP header carrying a tunnel
    uint8_t outer_dst[16]    # its destination (layout as src_ip); zeros when outer_ip_version is 0
    uint32_t tunnel_id       # VNI (VXLAN, Geneve), GRE key, ERSPAN session, GTP-U TEID, PPPoE
                             # session or bottom MPLS label of the outermost such layer; else 0
    uint8_t outer_ip_version # 4 or 6; 0 when no IP header carries the packet's tunnel
    uint8_t encap_depth      # number of layers in encap
    uint16_t seg_off         # offset of the message's first byte in its TCP payload: 0, or
                             # where a message inside a segment starts (MSGF_MID_SEGMENT): seq
                             # - seg_off is the packet's SEQ (docs/PAIRING.md)

cdef enum MsgKind:
    MSG_REQUEST = 1
    MSG_RESPONSE = 2
    # The TLS stage's messages (issue 17), from the same walk when the caller asks for them
    # (dissect_batch's tls_watch), in their own array beside the HTTP messages: the HTTP stages
    # never see them. No text spans: the stage parses the hello from the payload span
    # (payload_off, payload_caplen) in place, and keeps only what a waiting hello needs.
    MSG_TLS = 3          # a TCP payload that starts a TLS hello (ClientHello / ServerHello,
                         # after at most four ChangeCipherSpec records), or the next segment of a
                         # flow whose split hello the stage reassembles (ext/tls/tls.pxd TlsWatch)
    MSG_QUIC = 4         # a UDP datagram whose payload starts with a QUIC long header; the
                         # addresses, ports and payload are the UDP datagram's (seq/ack unused)

# The TCP events of the walk (issue 29's one walk): one per TCP segment whose fixed header is in
# the capture (L34.tcp_ok), in packet order, when the caller asks for them (dissect_batch's
# tcp_events): what a per-connection stage that watches handshakes needs (urlfilter's timing
# table, ext/url/urlmatch.pyx ConnTable.feed_events) without walking the packets again.
ctypedef struct TcpEvent:
    int64_t ts_ns
    uint8_t src[16]          # IPv4 in the first 4 bytes, the rest zero
    uint8_t dst[16]
    uint32_t seq
    uint32_t ack
    uint32_t payload_len     # on the wire
    uint16_t src_port
    uint16_t dst_port
    uint8_t tcp_flags
    uint8_t ip_version
    uint16_t window          # TCP window field, unscaled (issue 34: zero-window readers)
    uint8_t _pad[4]
    # added for the TLS exchange stage (issue 33, ext/pair/exchange.pyx), which reads the TLS record
    # headers in the payload in place
    uint64_t pkt_index       # 0-based position of the packet in the trace (frame.number - 1)
    uint64_t payload_at      # offset of the TCP payload's first byte in the batch buffer
    uint32_t payload_caplen  # payload bytes present in the capture
    uint8_t head[8]          # the payload's first min(8, payload_caplen) bytes, zeros after them:
                             # the exchange stage reads a record header at the segment's start
                             # from here (added when it read the events in another thread, where
                             # the payload in place was a cache miss; run by the walk now, it
                             # reads the same bytes still hot: kept, an 8-byte copy)
    uint32_t _pad2

# A stage the walk runs in its own loop (issue 33): `segment(state, &event, buffer, size)` for
# each TCP segment with payload, FIN or RST, in packet order, right after the walk dissected it
# (the event on the walk's stack, its payload_at an offset into the batch's buffer). The TLS
# exchange stage (ext/pair/exchange.pyx) is one: handed the events in an array, it paid for
# writing 96 bytes per segment and reading them back in another thread. The stage keeps what it
# makes until its owner takes it (webtap.dissect).
ctypedef int (*segment_fn)(void *state, const TcpEvent *e, const uint8_t *buf,
                           uint64_t size) except -1 nogil

ctypedef struct SegmentTap:
    void *state
    segment_fn segment

cdef enum MsgFlags:
    MSGF_URI_TRUNCATED = 1        # the request line had no end in the packet: URI cut at packet end
    MSGF_HEADERS_INCOMPLETE = 2   # the header block did not end in this packet (no empty line)
    MSGF_PAYLOAD_TRUNCATED = 4    # caplen cut the TCP payload short of its wire length
    MSGF_HOST_REPEATED = 8        # more than one Host header (the first is kept)
    MSGF_LINE_TOO_LONG = 16       # a header line exceeded the per-line bound and was not parsed
    MSGF_BAD_VERSION = 32         # the HTTP version token (request or status line) is not HTTP/d.d
    MSGF_BAD_STATUS = 64          # status line whose code is not exactly three digits (status = 0)
    MSGF_MID_SEGMENT = 128        # the message starts after another message's end in its segment
                                  # (seq, payload_* are from its first byte; docs/PAIRING.md)
    # Evasion indicators of requests (issue 34, ext/walk/evasion.pxd; docs/ABUSE.md); never set
    # on responses. With MSGF_HOST_REPEATED they make the abuse table's `evasion` bits.
    MSGF_EV_HOST_MISMATCH = 256   # absolute-form target whose host differs from Host's
    MSGF_EV_DOUBLE_ENCODED = 512  # the target holds "%25" + two hex digits
    MSGF_EV_LONG_REQUEST_LINE = 1024  # request line over EV_MAX_LINE (8190) bytes
    MSGF_EV_LONG_HEADER_LINE = 2048   # a header line over EV_MAX_LINE (8190) bytes
    MSGF_EV_MANY_FIELDS = 4096    # more than EV_MAX_FIELDS (100) header fields in the packet
    MSGF_AFTER_CONTINUATION = 8192  # the message is in a segment whose first bytes continue a
                                  # message begun in an earlier segment (ext/walk/httpcont.c;
                                  # docs/ACCURACY.md "After a continued header block")

# Request methods: RFC 9110 section 9, PATCH (RFC 5789), WebDAV (RFC 4918, 3253, 3648, 4791,
# 5323, 5842) and the few non-standard ones common in real traffic. METHOD_OTHER: responses.
cdef enum MethodId:
    METHOD_OTHER = 0
    METHOD_GET = 1
    METHOD_HEAD = 2
    METHOD_POST = 3
    METHOD_PUT = 4
    METHOD_DELETE = 5
    METHOD_CONNECT = 6
    METHOD_OPTIONS = 7
    METHOD_TRACE = 8
    METHOD_PATCH = 9
    # WebDAV and friends: ids 10 and up, named in webtap.records.message.METHOD_NAMES

# Why a packet produced no message, or what was odd about it. Index into DissectCounters.n. C
# (ext/walk/reasons.h: each code's meaning there), since the walk's C returns these codes.
cdef extern from "reasons.h" nogil:
    enum DissectReason:
        DR_PACKETS
        DR_LINK_UNSUPPORTED
        DR_LINK_TRUNCATED
        DR_NOT_IP
        DR_IP_TRUNCATED
        DR_IP_BAD_HEADER
        DR_IP_FRAGMENT
        DR_NOT_TCP
        DR_TCP_TRUNCATED
        DR_TCP_BAD_OFFSET
        DR_NO_PAYLOAD
        DR_NOT_HTTP
        DR_HTTP_REQUEST
        DR_HTTP_RESPONSE
        DR_URI_TRUNCATED
        DR_HEADERS_INCOMPLETE
        DR_LINE_TOO_LONG
        DR_PAYLOAD_TRUNCATED
        DR_MID_REQUEST
        DR_MID_RESPONSE
        DR_BODY_CONTINUES
        DR_LENGTH_UNKNOWN
        DR_REST_NOT_HTTP
        DR_LINE_SPLIT
        DR_AFTER_CONT_REQUEST
        DR_AFTER_CONT_RESPONSE
        DR_CONT_UNKNOWN
        DR_ENCAP_TOO_DEEP
        DR_ENC_GRE
        DR_ENC_ERSPAN
        DR_ENC_ETH
        DR_ENC_VXLAN
        DR_ENC_GENEVE
        DR_ENC_GTPU
        DR_ENC_TEREDO
        DR_ENC_AYIYA
        DR_ENC_4IN4
        DR_ENC_6IN4
        DR_ENC_4IN6
        DR_ENC_6IN6
        DR_ENC_PPPOE
        DR_ENC_MPLS
        DR_ENC_LLC
        DR_ENC_WLAN
        DR_ENC_PPP
        DR_N

ctypedef struct DissectCounters:
    uint64_t n[<int>DR_N]    # n[reason]: packets (or messages) counted under each DissectReason


cdef extern from "util.h" nogil:
    # Whether two 16-byte address fields of HttpMsg (IPv4 in bytes 0-3, zeros after) are equal;
    # the one comparison the pairing table and the feeder both make.
    bint same_ip "wt_same_ip"(const uint8_t *a, const uint8_t *b)
