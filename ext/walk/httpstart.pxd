# Does a TCP payload start an HTTP message, and which kind: declarations of ext/walk/httpstart.h
# (bodies in httpstart.c, the wtc library; the rules are stated there). The one rule the
# dissector (ext/walk/dissect.pyx, which then parses the message) and the feeder's reader
# (ext/run/classify.c, which only routes the packet) share, so both always take the same packets
# for messages. The method table is static C data in ext/walk/httpmethods.h.
from libc.stdint cimport uint8_t, uint32_t

cdef extern from "httpmethods.h" nogil:
    ctypedef struct wt_method_t:
        const char *name
        uint32_t len
    const wt_method_t wt_methods[]
    int WT_N_METHODS
    int WT_MAX_METHOD_LEN
    bint wt_method_char(uint8_t c)

cdef extern from "httpstart.h" nogil:
    enum:
        WT_MSG_REQUEST
        WT_MSG_RESPONSE
        HTTP_SCHEME_MAX "WT_HTTP_SCHEME_MAX"
    int http_method_id "wt_http_method_id"(const uint8_t *p, uint32_t n)
    bint _line_ends_with_version "wt_line_ends_with_version"(const uint8_t *q, uint32_t k,
                                                              uint32_t n)
    bint http_lower_status "wt_http_lower_status"(const uint8_t *q, uint32_t n)
    bint http_split_start "wt_http_split_start"(const uint8_t *q, uint32_t n, uint32_t wire_len)
    int http_start "wt_http_start"(const uint8_t *q, uint32_t n, uint32_t wire_len,
                                   uint32_t *start, uint32_t *tok_end, int *method_id)
    int http_status_code "wt_http_status_code"(const uint8_t *q, uint32_t s, uint32_t n,
                                               uint32_t *ver_end, uint32_t *code_end)
