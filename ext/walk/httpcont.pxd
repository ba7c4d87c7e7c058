# A message that starts inside a TCP segment whose first bytes continue a message begun in an
# earlier segment (issue 31; docs/ACCURACY.md "After a continued header block"): declarations of
# ext/walk/httpcont.h (body in httpcont.c, the wtc library; the rule is stated there), for the
# dissector (ext/walk/dissect.pyx). The feeder's reader (ext/run/classify.c) calls it in C.
from libc.stdint cimport uint8_t, uint32_t

cdef extern from "httpcont.h" nogil:
    enum:
        CONT_NONE "WT_CONT_NONE"
        CONT_UNKNOWN "WT_CONT_UNKNOWN"
        CONT_MAX_OFFSET "WT_CONT_MAX_OFFSET"
    int http_after_continuation "wt_http_after_continuation"(
        const uint8_t *q, uint32_t n, uint32_t wire, uint32_t *at, uint32_t *start,
        uint32_t *tok_end, int *method_id)
