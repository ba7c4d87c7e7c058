# Does a TCP payload start an HTTP message, and which kind: the one rule the dissector
# (ext/dissect.pyx, which then parses the message) and the feeder's reader (ext/feeder.pyx,
# which only routes the packet) share, so both always take the same packets for messages.
# Inline functions only (house rule for .pxd sharing); the method table is static C data in
# ext/httpmethods.h.
from libc.stdint cimport uint8_t, uint32_t
from libc.string cimport memcmp

from message cimport MSG_REQUEST, MSG_RESPONSE

cdef extern from "httpmethods.h" nogil:
    ctypedef struct wt_method_t:
        const char *name
        uint32_t len
    const wt_method_t wt_methods[]
    int WT_N_METHODS
    int WT_MAX_METHOD_LEN
    bint wt_method_char(uint8_t c)


cdef inline int http_method_id(const uint8_t *p, uint32_t n) noexcept nogil:
    """MethodId of the token p[0:n], or -1 when it is not a known method (case-sensitive)."""
    cdef int i
    if n == 0 or n > <uint32_t>WT_MAX_METHOD_LEN:
        return -1
    for i in range(1, WT_N_METHODS):
        if wt_methods[i].len == n and memcmp(p, wt_methods[i].name, n) == 0:
            return i
    return -1


cdef inline int http_start(const uint8_t *q, uint32_t n, uint32_t wire_len, uint32_t *start,
                           uint32_t *tok_end, int *method_id) noexcept nogil:
    """Classify the TCP payload q[0:n] (wire_len bytes on the wire): MSG_RESPONSE when it starts
    with "HTTP/", MSG_REQUEST when it starts with a known method token (RFC 2774's "M-" prefix
    accepted, as tshark does) followed by a space, 0 otherwise. *start: where the first line
    begins (one leading CRLF is skipped, as tshark does when more than 3 bytes are on the wire;
    RFC 9112 2.2); for a request *tok_end is the space after the method and *method_id its
    MethodId. Looks at no more than the first 22 bytes: message bodies are rejected cheaply."""
    cdef uint32_t s = 0, base, t
    cdef int mid
    if wire_len > 3 and n >= 2 and q[0] == 13 and q[1] == 10:
        s = 2
    if s >= n:
        return 0
    start[0] = s
    if n - s >= 5 and memcmp(q + s, b"HTTP/", 5) == 0:
        return MSG_RESPONSE
    base = s
    if n - s >= 2 and q[s] == 77 and q[s + 1] == 45:      # "M-"
        base = s + 2
    # The token runs to the first space; any byte that no method contains ends the search
    # (what the dissector would then find is no known method either).
    t = base
    while t < n and t - base <= <uint32_t>WT_MAX_METHOD_LEN and wt_method_char(q[t]):
        t += 1
    if t >= n or q[t] != 32:
        return 0
    mid = http_method_id(q + base, t - base)
    if mid < 0:
        return 0
    tok_end[0] = t
    method_id[0] = mid
    return MSG_REQUEST


cdef inline int http_status_code(const uint8_t *q, uint32_t s, uint32_t n, uint32_t *ver_end,
                                 uint32_t *code_end) noexcept nogil:
    """Status line starting at q[s] (a payload of n bytes that starts "HTTP/" there): the
    version token ends at *ver_end (first space, CR or LF), the code is the next token (after
    spaces), ending at *code_end. Returns the code when that token is exactly three digits,
    else 0."""
    cdef uint32_t t = s, k
    while t < n and q[t] != 32 and q[t] != 13 and q[t] != 10:
        t += 1
    ver_end[0] = t
    while t < n and q[t] == 32:
        t += 1
    k = t
    while t < n and q[t] != 32 and q[t] != 13 and q[t] != 10:
        t += 1
    code_end[0] = t
    if (t - k == 3 and q[k] >= 48 and q[k] <= 57 and q[k + 1] >= 48 and q[k + 1] <= 57
            and q[k + 2] >= 48 and q[k + 2] <= 57):
        return (q[k] - 48) * 100 + (q[k + 1] - 48) * 10 + (q[k + 2] - 48)
    return -1
