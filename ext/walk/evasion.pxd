# Evasion indicators of an HTTP request's first packet (issue 34): declarations of
# ext/walk/evasion.h (bodies in evasion.c, the wtc library), cimported by the dissector.
from libc.stdint cimport uint8_t, uint32_t

cdef extern from "evasion.h" nogil:
    enum:
        EV_MAX_LINE
        EV_MAX_FIELDS
    bint ev_double_encoded(const uint8_t *u, uint32_t n)
    uint32_t ev_host_part(const uint8_t *a, uint32_t n, uint32_t *start)
    bint ev_absolute_host_differs(const uint8_t *u, uint32_t n, const uint8_t *h, uint32_t hn)
