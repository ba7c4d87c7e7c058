# The exchange stage's record (ext/pair/exchange.pyx makes it; ext/out/xcolumns.pyx turns rows
# of it into Arrow columns): declarations only.
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t

cdef enum:
    # XRecord.reason
    XR_MATCHED = 0
    XR_GC = 1
    XR_END = 2
    XR_CAP = 3
    XR_NO_REQUEST = 4

    # XRecord.flags
    XF_TICKETS = 1          # TLS 1.3 session tickets came between the request and the response
    XF_UNSYNCED = 2         # a direction had lost its record boundaries (capture gap)
    XF_EARLY = 4            # the request is TLS 1.3 early data (before the ServerHello)
    XF_SAME_ACK_TAIL = 8    # (reserved)


# One exchange record (httpanalyzer.tls.EXCHANGE_RECORD_DTYPE mirrors it; a test checks sizes)
ctypedef struct XRecord:
    int64_t req_ts
    int64_t resp_ts
    uint64_t req_frame          # 1-based; 0 when absent
    uint64_t resp_frame
    uint64_t ch_frame           # the connection's ClientHello frame (joins the handshake record)
    uint8_t client_ip[16]
    uint8_t server_ip[16]
    uint16_t client_port
    uint16_t server_port
    uint32_t index              # the exchange's index in its connection (0-based)
    uint32_t req_rec_len        # length of the request's first application-data record when its
                                # header is in the request's first packet; else 0
    uint32_t resp_rec_len
    uint32_t key                # the request's ACK (= the response's SEQ)
    uint16_t version            # the connection's TLS version as the stage saw it (0 unknown)
    uint8_t ip_version
    uint8_t reason
    uint8_t flags
    uint8_t has_req
    uint8_t has_resp
    uint8_t _pad
