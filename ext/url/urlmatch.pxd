# The URL analyzer's and session controller's C contract (ext/url/urlmatch.pyx, issue 8).
#
# Counters of the GET extraction (FilterReason), the per-connection handshake record that the
# timing condition reads (ConnTiming; webtap.records.urlhit.CONN_DTYPE mirrors it and a test checks
# the sizes agree), and the forge options.
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t

# Why a message did or did not become a URL to match. Index into the extraction counters;
# urlfilter.analyzer.FILTER_REASONS names them in this order.
cdef enum FilterReason:
    FR_MESSAGES = 0           # HTTP messages offered (requests and responses)
    FR_NOT_REQUEST            # responses: nothing to filter
    FR_NOT_GET                # requests whose method is not GET (POST, HEAD, ...)
    FR_GET                    # GET requests seen
    FR_URI_TRUNCATED          # GET whose request line ends beyond the packet: URL unknown
    FR_NO_HOST                # origin-form GET without a Host header in a complete header block
    FR_HOST_LATER             # origin-form GET, no Host in this packet, headers go on (split GET)
    FR_BAD_TARGET             # asterisk-form, authority-form or otherwise unusable request-target
    FR_BAD_CHECKSUM           # IPv4 header or TCP checksum wrong (the server drops it: no action)
    FR_CHECKSUM_UNVERIFIED    # captured payload shorter than on the wire: checksum not checked
    FR_CANON_FAILED           # Host + URI has no canonical form (bad host, bad port, ...)
    FR_ABSOLUTE_FORM          # GETs with an absolute-form URI (proxy style); matched on the URI
    FR_EXTRACTED              # URLs handed to the matcher
    FR_N                      # number of counters

# One TCP connection seen from the filter's position, keyed by its 4-tuple in the client ->
# server direction (the direction of the SYN). Times are capture times, ns since the epoch;
# 0 means "not seen".
ctypedef struct ConnTiming:
    uint8_t client_ip[16]   # IPv4 in bytes 0-3, zeros after; IPv6 all 16 bytes
    uint8_t server_ip[16]   # same layout
    uint16_t client_port    # host order
    uint16_t server_port    # host order
    uint8_t ip_version      # 4 or 6; 0 marks a free slot of the hash table
    uint8_t state           # CS_* bits below
    uint16_t _pad           # zero
    uint32_t client_isn     # sequence number of the SYN
    uint32_t server_isn     # sequence number of the SYN/ACK
    int64_t t_syn           # first SYN
    int64_t t_synack        # first SYN/ACK answering it
    int64_t t_ack           # first ACK of the client acknowledging server_isn + 1
    int64_t t_req           # first client packet with payload
    int64_t t_resp          # first server packet with payload after t_req
    int64_t t_last          # last packet of the connection (for eviction)

cdef enum ConnState:
    CS_SYN = 1
    CS_SYNACK = 2
    CS_ACK = 4
    CS_REQ = 8
    CS_RESP = 16
