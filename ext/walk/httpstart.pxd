# Does a TCP payload start an HTTP message, and which kind: the one rule the dissector
# (ext/walk/dissect.pyx, which then parses the message) and the feeder's reader (ext/run/feeder.pyx,
# which only routes the packet) share, so both always take the same packets for messages.
# Inline functions only (house rule for .pxd sharing); the method table is static C data in
# ext/walk/httpmethods.h.
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


cdef enum:
    HTTP_SCHEME_MAX = 32         # longest URI scheme the absolute-form check looks at


cdef inline bint _is_alpha(uint8_t c) noexcept nogil:
    return (c >= 65 and c <= 90) or (c >= 97 and c <= 122)


cdef inline bint _is_digit(uint8_t c) noexcept nogil:
    return c >= 48 and c <= 57


cdef inline bint _ends_field(const uint8_t *q, uint32_t k, uint32_t n) noexcept nogil:
    """q[k] ends a request-line field: SP, CR, LF, or the payload's end."""
    return k >= n or q[k] == 32 or q[k] == 13 or q[k] == 10


cdef inline bint _target_shape(const uint8_t *q, uint32_t k, uint32_t n) noexcept nogil:
    """The request-target starting at q[k] has one of RFC 9112's forms (3.2): origin form
    ("/..."), asterisk form ("*"), absolute form (scheme "://"), authority form (host ":" port;
    CONNECT's), or is absent ("HTTP/" follows the method: the version). Reads at most
    HTTP_SCHEME_MAX + 3 bytes, or the authority."""
    cdef uint8_t c = q[k]
    cdef uint32_t j
    if c == 47:                                           # "/"
        return True
    if c == 42:                                           # "*"
        return _ends_field(q, k + 1, n)
    if n - k >= 5 and memcmp(q + k, b"HTTP/", 5) == 0:  # no target, the version follows
        return True
    if _is_alpha(c):
        # absolute form: scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ), then "://"
        j = k + 1
        while j < n and j - k < HTTP_SCHEME_MAX and (_is_alpha(q[j]) or _is_digit(q[j]) or q[j] == 43
                                                     or q[j] == 45 or q[j] == 46):
            j += 1
        if n - j >= 3 and q[j] == 58 and q[j + 1] == 47 and q[j + 2] == 47:
            return True
    # authority form: host (reg-name, IPv4 or [IPv6]) ":" port digits, then the field ends
    j = k
    if c == 91:                                           # "[" IPv6 "]"
        j += 1
        while j < n and (_is_digit(q[j]) or _is_alpha(q[j]) or q[j] == 58 or q[j] == 46):
            j += 1
        if j >= n or q[j] != 93:
            return False
        j += 1
    else:
        while j < n and (_is_alpha(q[j]) or _is_digit(q[j]) or q[j] == 45 or q[j] == 46
                         or q[j] == 95 or q[j] == 126):
            j += 1
        if j == k:
            return False
    if j >= n or q[j] != 58:
        return False
    j += 1
    if j >= n or not _is_digit(q[j]):
        return False
    while j < n and _is_digit(q[j]):
        j += 1
    return _ends_field(q, j, n)


cdef inline bint _line_ends_with_version(const uint8_t *q, uint32_t k, uint32_t n) noexcept nogil:
    """The line from q[k] ends (CR or LF, in the payload) with SP "HTTP/" DIGIT "." DIGIT."""
    cdef uint32_t e = k
    while e < n and q[e] != 13 and q[e] != 10:
        e += 1
    if e >= n or e - k < 10:
        return False
    return (q[e - 9] == 32 and memcmp(q + e - 8, b"HTTP/", 5) == 0 and _is_digit(q[e - 3])
            and q[e - 2] == 46 and _is_digit(q[e - 1]))


cdef inline bint http_lower_status(const uint8_t *q, uint32_t n) noexcept nogil:
    """q[0:n] starts a status line whose version is in lower case: "http/" DIGIT "." DIGIT SP
    (Zeek reads it as a response, tshark 4.0 as a continuation; docs/ACCURACY.md "Status
    lines"). The whole shape is required, so a body that merely begins "http/" is not one."""
    return (n >= 9 and memcmp(q, b"http/", 5) == 0 and _is_digit(q[5]) and q[6] == 46
            and _is_digit(q[7]) and q[8] == 32)


cdef inline bint http_split_start(const uint8_t *q, uint32_t n, uint32_t wire_len) noexcept nogil:
    """The whole TCP payload q[0:n] (n == wire_len) is only the beginning of a request line or
    a status line: a proper prefix of a method token (with or without RFC 2774's "M-") or of
    "HTTP/" ("G", then "ET / HTTP/1.1" in the next segment). Such a message is not read (no
    reassembly); the dissector counts it (request_line_split). Looks at at most 19 bytes."""
    cdef int i
    cdef uint32_t b = 0
    if n == 0 or n != wire_len or n > <uint32_t>WT_MAX_METHOD_LEN + 2:
        return False
    if n < 5 and memcmp(q, b"HTTP/", n) == 0:
        return True
    if n >= 2 and q[0] == 77 and q[1] == 45:              # "M-"
        b = 2
    if n == b:
        return True
    for i in range(1, WT_N_METHODS):
        if wt_methods[i].len > n - b and memcmp(q + b, wt_methods[i].name, n - b) == 0:
            return True
    return False


cdef inline int http_start(const uint8_t *q, uint32_t n, uint32_t wire_len, uint32_t *start,
                           uint32_t *tok_end, int *method_id) noexcept nogil:
    """Classify the TCP payload q[0:n] (wire_len bytes on the wire): MSG_RESPONSE when it starts
    with "HTTP/" (or a status line in lower case, http_lower_status), MSG_REQUEST when it starts a request line, 0 otherwise. *start: where the first
    line begins (one leading CRLF is skipped, as tshark does when more than 3 bytes are on the
    wire; RFC 9112 2.2); for a request *tok_end is where the method ends and *method_id its
    MethodId.

    A request line (docs/ACCURACY.md, "Request lines") is a known method token (case-sensitive;
    RFC 2774's "M-" prefix accepted, as tshark does) followed by
      - SP and a request-target in origin, asterisk, absolute or authority form, or no target
        and the version ("OPTIONS HTTP/1.1"); spaces after the method are skipped first
        (tshark's reading of "GET  /x HTTP/1.1": an empty URI);
      - SP and a target of another shape only when the line ends with SP HTTP/d.d
        ("GET index.html HTTP/1.0");
      - the end of the line or of the payload: a method alone (tshark takes it for a request).
    Anything else ("POST request received successfully!", a response body) is not a request,
    whatever its first word. Looks at the first ~60 bytes, more only for a target of another
    shape (up to the line's end)."""
    cdef uint32_t s = 0, base, t, k
    cdef int mid
    if wire_len > 3 and n >= 2 and q[0] == 13 and q[1] == 10:
        s = 2
    if s >= n:
        return 0
    start[0] = s
    if n - s >= 5 and memcmp(q + s, b"HTTP/", 5) == 0:
        return MSG_RESPONSE
    if q[s] == 104 and http_lower_status(q + s, n - s):
        return MSG_RESPONSE
    base = s
    if n - s >= 2 and q[s] == 77 and q[s + 1] == 45:      # "M-"
        base = s + 2
    # The token runs to the first byte no method contains.
    t = base
    while t < n and t - base <= <uint32_t>WT_MAX_METHOD_LEN and wt_method_char(q[t]):
        t += 1
    if t < n and q[t] != 32 and q[t] != 13 and q[t] != 10:
        return 0
    mid = http_method_id(q + base, t - base)
    if mid < 0:
        return 0
    k = t
    while k < n and q[k] == 32:
        k += 1
    if k < n and q[k] != 13 and q[k] != 10:
        if k == t:
            return 0                                      # cannot happen: q[t] is SP here
        if not _target_shape(q, k, n) and not _line_ends_with_version(q, k, n):
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
