# Chosen headers (`--headers NAME,...`): declarations of ext/walk/httphdr.h (body in httphdr.c,
# the wtc library; the header-block rules are stated there), for the pairing table
# (ext/pair/pairing.pyx feed: values stored with the waiting message and emitted as
# request_<name> / response_<name> columns).
from libc.stdint cimport uint8_t, uint32_t, uint64_t

cdef extern from "httphdr.h" nogil:
    enum:
        HDR_MAX_LINE "WT_HDR_MAX_LINE"
        HDR_MAX_NAMES "WT_HDR_MAX_NAMES"
    # message.pxd's Span, as C sees it
    ctypedef struct HdrSpan "wt_span_t":
        uint32_t off
        uint32_t len
    int hdr_scan "wt_hdr_scan"(const uint8_t *pkt, uint64_t avail, uint32_t payload_off,
                               uint32_t payload_caplen, uint32_t first_off, bint uri_cut,
                               const uint8_t *names, const uint32_t *name_off, int nnames,
                               HdrSpan *out)
