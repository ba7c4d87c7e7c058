# What one packet says about an HTTP message's length (RFC 9112 6.3), and the byte helpers of
# the header walks: declarations of ext/walk/msglen.h (bodies in msglen.c, the wtc library; the
# rules are stated there), for the dissector (ext/walk/dissect.pyx: messages after another in a
# segment). The continuation rule (ext/walk/httpcont.c) and the feeder's reader
# (ext/run/classify.c) use them in C.
from libc.stdint cimport uint8_t, uint32_t, uint64_t

cdef extern from "msglen.h" nogil:
    enum:
        MAX_HEADER_LINE "WT_MAX_HEADER_LINE"
        WT_MSGF_LINE_TOO_LONG
        WT_METHOD_CONNECT
        CL_NONE "WT_CL_NONE"
        CL_VALID "WT_CL_VALID"
        CL_BAD "WT_CL_BAD"
        TE_NONE "WT_TE_NONE"
        TE_CHUNKED "WT_TE_CHUNKED"
        TE_OTHER "WT_TE_OTHER"
        END_KNOWN "WT_END_KNOWN"
        END_CONTINUES "WT_END_CONTINUES"
        END_UNKNOWN "WT_END_UNKNOWN"
        END_CLOSE "WT_END_CLOSE"

    ctypedef struct BodyInfo "wt_body_info_t":
        uint32_t hdr_end
        uint64_t cl
        uint8_t cl_state
        uint8_t te

    # byte helpers (inline in the header)
    bint _is_eol "wt_is_eol"(uint8_t c)
    uint8_t _lower "wt_lower"(uint8_t c)
    bint _name_is "wt_name_is"(const uint8_t *p, uint32_t n, const char *lname, uint32_t ln)
    uint32_t _line_end "wt_line_end"(const uint8_t *p, uint32_t pos, uint32_t n)
    uint32_t _next_line "wt_next_line"(const uint8_t *p, uint32_t eol, uint32_t n)
    bint _is_version "wt_is_version"(const uint8_t *p, uint32_t n)

    # msglen.c
    void _cl_value "wt_cl_value"(const uint8_t *v, uint32_t n, BodyInfo *b)
    void _te_value "wt_te_value"(const uint8_t *v, uint32_t n, BodyInfo *b)
    int _chunked_end "wt_chunked_end"(const uint8_t *q, uint64_t pos, uint32_t n, uint32_t wire,
                                      uint64_t *end)
    bint _status_line_at "wt_status_line_at"(const uint8_t *q, uint32_t pos, uint32_t n)
    int _msg_end "wt_msg_end"(const uint8_t *q, uint32_t n, uint32_t wire, int kind,
                              uint32_t status, uint32_t method_id, uint32_t flags,
                              const BodyInfo *b, uint64_t *end)
