# Pairing stage (httpanalyzer): the paper's request/response table and the records it emits.
#
# The table pairs the first packet of an HTTP request with the first packet of its response when
# the 4-tuples match reversed and the response's SEQ equals the request's ACK (Vega et al. 2017,
# Eq. 2 picks the cell). Messages that wait keep a copy of their text in the table's own arena:
# the packet buffer they came from is gone once the batch is released.
#
# TxnRecord is the numeric half of one output record; webtap.records.http.RECORD_DTYPE mirrors
# it and a test asserts the sizes agree. The text half (addresses, method, URI, ...) leaves as
# Arrow-ready string columns (int32 offsets + bytes + validity), one per field.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
# Eq. 2 picks the cell: the paper's three equations live together in ext/pair/hashes.pxd
from hashes cimport eq2_hash, fold_ip
# the pending table's index (pool, free list, cells, chains, age list): one home, shared with TLS
from pendtable cimport PendLinks

ctypedef struct TxnRecord:
    int64_t request_ts_ns       # capture time of the request's first packet, ns; INT64_MIN if none
    int64_t response_ts_ns      # capture time of the response's first packet, ns; INT64_MIN if none
    uint64_t request_pkt_index  # 0-based index of the request packet in the trace; UINT64_MAX if none
    uint64_t response_pkt_index # same for the response packet
    uint8_t client_ip[16]       # client (request source) address, HttpMsg layout
    uint8_t server_ip[16]       # server (response source) address, HttpMsg layout
    uint32_t request_ack        # TCP ACK of the request packet (0 if none, see has_request)
    uint32_t response_seq       # TCP SEQ of the response packet (0 if none)
    uint16_t client_port        # client TCP port
    uint16_t server_port        # server TCP port
    uint16_t status             # response status code; 0 when there is no response
    uint16_t vlan               # outer VLAN id of the first message seen, 0xFFFF untagged
    uint16_t msg_flags          # MSGF_* bits of the request OR'ed with those of the response
    uint8_t ip_version          # 4 or 6
    uint8_t method_id           # METHOD_* of the request; METHOD_OTHER (0) when there is none
    uint8_t outcome             # RecOutcome
    uint8_t unmatched_reason    # UnmatchedReason; UR_NONE for paired records
    uint16_t rflags             # RF_* bits below
    uint16_t request_trace      # position of the request's trace among the inputs (0-based)
    uint16_t response_trace     # same for the response
    # Encapsulation (ext/walk/l34.pxd), added at the end: of the request's first packet, of the
    # response's when the record has no request.
    uint64_t encap              # EncapKind per byte, outermost lowest; 0: no tunnel
    uint8_t outer_src[16]       # source of the outermost IP header carrying the tunnel (HttpMsg layout)
    uint8_t outer_dst[16]       # its destination
    uint32_t tunnel_id          # HttpMsg.tunnel_id (VNI, GRE key, TEID, ...); 0 without encap
    uint8_t outer_ip_version    # 4 or 6; 0 when no IP header carries the tunnel
    # HTTP version (issue 30), added at the end: of the request line, of the status line when
    # the record has no request; major * 10 + minor of "HTTP/d.d", 0 when unknown (not HTTP/d.d,
    # or a request line without its end in the packet)
    uint8_t http_version

cdef enum RecOutcome:
    REC_PAIRED = 0              # request and response both present
    REC_REQUEST_ONLY = 1        # a request whose response never met it
    REC_RESPONSE_ONLY = 2       # a response whose request never met it

cdef enum UnmatchedReason:
    UR_NONE = 0                 # paired record
    UR_GC = 1                   # no counterpart within the GC window of capture time
    UR_END = 2                  # still waiting at the end of the trace (flush)
    UR_CAP = 3                  # evicted, oldest first, because the table hit max_pending
    UR_KEY_LIMIT = 4            # evicted because too many same-kind messages waited on one key
    UR_CLOCK_RESET = 5          # flushed because capture time jumped back by more than the window

cdef enum RecFlags:
    RF_URI_TRUNCATED = 1        # the URI ended at the packet's end (MSGF_URI_TRUNCATED) or arena clip
    RF_REQUEST_REPEAT = 2       # the request repeated one still waiting (same 4-tuple, SEQ, ACK)
    RF_RESPONSE_REPEAT = 4      # the response repeated one still waiting (same 4-tuple, SEQ, ACK)
    RF_INTERIM = 8              # the response is an interim 1xx (not 101): the request waits on
    RF_AFTER_INTERIM = 16       # final response found after a 1xx, at SEQ = 1xx SEQ + its length
    RF_TEXT_CLIPPED = 32        # some text was shortened to fit the table's per-message bound
    RF_NO_HOST = 64             # the request had no Host header
    RF_OUT_OF_ORDER = 128       # the response was captured before its request

# Why a message did not end up in a paired record, and other events. Index into the counters.
cdef enum:  # PairCounter (anonymous so values index arrays directly)
    PC_MESSAGES = 0             # messages offered to the table
    PC_REQUESTS                 # of which requests
    PC_RESPONSES                # of which responses
    PC_BAD_KIND                 # kind neither request nor response (ignored)
    PC_BAD_SPAN                 # a text span pointed outside the buffer (field dropped)
    PC_PAIRED                   # paired records emitted (including interim 1xx pairs)
    PC_PAIRED_INTERIM           # of which a 1xx interim response
    PC_PAIRED_AFTER_INTERIM     # of which a final response found after a 1xx
    PC_OUT_OF_ORDER             # paired records whose response arrived first
    PC_REQUEST_REPEAT           # requests that repeated a waiting request (retransmission)
    PC_RESPONSE_REPEAT          # responses that repeated a waiting response
    PC_REQ_UNMATCHED_GC         # requests that left unmatched by the GC
    PC_RESP_UNMATCHED_GC        # responses that left unmatched by the GC
    PC_REQ_UNMATCHED_END        # requests flushed at end of trace
    PC_RESP_UNMATCHED_END       # responses flushed at end of trace
    PC_REQ_UNMATCHED_CAP        # requests evicted by the max_pending cap
    PC_RESP_UNMATCHED_CAP       # responses evicted by the max_pending cap
    PC_REQ_UNMATCHED_KEY_LIMIT  # requests evicted by the per-key limit
    PC_RESP_UNMATCHED_KEY_LIMIT # responses evicted by the per-key limit
    PC_REQ_UNMATCHED_CLOCK      # requests flushed by a backwards clock jump
    PC_RESP_UNMATCHED_CLOCK     # responses flushed by a backwards clock jump
    PC_FINAL_MISSING            # requests paired with a 1xx whose final response never came
    PC_CLOCK_BACKWARDS          # messages captured earlier than an earlier message
    PC_CLOCK_RESET              # backwards jumps larger than the GC window
    PC_NO_HOST                  # requests without a Host header
    PC_STATUS_ODD               # responses with status outside 100-599 (paired all the same)
    PC_TEXT_CLIPPED             # messages whose stored text was clipped to the per-message bound
    PC_TEXT_LATIN1              # text bytes that were not UTF-8, written as ISO-8859-1 characters
    PC_ARENA_FULL               # messages stored without text: arena byte cap reached
    PC_GROWS                    # times the cell array doubled
    PC_PEAK_PENDING             # highest number of waiting messages at any time
    PC_N                        # number of counters

# One waiting message in the pool. Entries are linked twice, through the shared index of
# ext/pair/pendtable.pxd (its PendLinks first: the stamp, the key's hash, the chain and age-list
# neighbours): into their cell's collision list (arrival order, so the oldest same-key message
# is found first) and into the age list (order of last change, so the GC pops expired entries
# from the head in O(1)). links.stamp is the capture clock (monotonic) at the entry's last
# change, the GC's age base (`stamp_ns` in pending_layout()).
ctypedef struct PendEntry:
    PendLinks links             # ext/pair/pendtable.pxd: must stay the first member
    int64_t ts_ns               # capture time of the message's packet, ns
    uint64_t pkt_index          # packet index of the message
    uint8_t src_ip[16]          # source address as in HttpMsg
    uint8_t dst_ip[16]          # destination address
    uint8_t *text               # arena block: method, uri, host, user_agent, reason back to back
    uint32_t tlen[5]            # byte lengths of the five text fields in `text`
    uint32_t seq                # TCP SEQ of the packet
    uint32_t ack                # TCP ACK of the packet
    uint32_t key                # number the pairing condition compares: request ACK (or the SEQ
                                # expected of the final response after a 1xx), response SEQ
    uint32_t payload_len        # TCP payload length on the wire (a 1xx's length gives the next SEQ)
    uint32_t tcap               # arena size class of `text` (0xFFFFFFFF: no block)
    uint16_t src_port           # TCP source port
    uint16_t dst_port           # TCP destination port
    uint16_t status             # response status, 0 for requests
    uint16_t vlan               # outer VLAN id or 0xFFFF
    uint16_t msg_flags          # MSGF_* bits of the message
    uint16_t rflags             # RF_* bits collected so far (repeat, interim, ...)
    uint8_t kind                # MSG_REQUEST or MSG_RESPONSE
    uint8_t method_id           # METHOD_* for requests
    uint8_t ip_version          # 4 or 6
    uint8_t interim_done        # 1 when the request already appeared in a record with a 1xx
    uint16_t trace              # position of the message's trace among the inputs (0-based)
    # encapsulation of the message's packet (HttpMsg fields of the same names)
    uint64_t encap
    uint8_t outer_src[16]
    uint8_t outer_dst[16]
    uint32_t tunnel_id
    uint8_t outer_ip_version
    uint8_t http_version        # major * 10 + minor of the message's HTTP/d.d, 0 when unknown

