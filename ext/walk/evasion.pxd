# Evasion indicators of an HTTP request's first packet (issue 34; docs/ABUSE.md "Evasion
# flags"): what an IDS and the server behind it may read differently. Inline checks the
# dissector (ext/walk/dissect.pyx _parse_message) runs on request first packets only, over the
# bytes it has already delimited: the request-target span and the Host value. They set the
# MSGF_EV_* bits of HttpMsg.flags (ext/walk/message.pxd).
from libc.stdint cimport uint8_t, uint32_t
from libc.string cimport memchr

cdef enum:
    # Apache httpd's LimitRequestLine and LimitRequestFieldSize default to 8190 bytes, and
    # nginx's large_client_header_buffers (default 4 8k) hold a request line or a header field
    # with its CRLF in one 8192-byte buffer: 8190 bytes of line. Longer: 414 / 400 from both.
    EV_MAX_LINE = 8190
    # Apache httpd's LimitRequestFields: at most 100 header fields (400 beyond).
    EV_MAX_FIELDS = 100


cdef inline bint _ev_hex(uint8_t c) noexcept nogil:
    return (c >= 48 and c <= 57) or (c >= 65 and c <= 70) or (c >= 97 and c <= 102)


cdef inline bint ev_double_encoded(const uint8_t *u, uint32_t n) noexcept nogil:
    """u[0:n] holds "%25" followed by two hex digits: a percent-encoded '%' whose decoding is
    itself an escape (decoded once, "%252e" is "%2e"; twice, "."), case-insensitive hex."""
    cdef const uint8_t *p = u
    cdef const uint8_t *end = u + n
    while end - p >= 5:
        p = <const uint8_t *>memchr(p, 37, <size_t>(end - p - 4))
        if p == NULL:
            return False
        if p[1] == 50 and p[2] == 53 and _ev_hex(p[3]) and _ev_hex(p[4]):
            return True
        p += 1
    return False


cdef inline uint32_t ev_host_part(const uint8_t *a, uint32_t n, uint32_t *start) noexcept nogil:
    """The host of an authority a[0:n] (RFC 3986 3.2: [userinfo@]host[:port]): its start in
    *start and its length; an IP-literal keeps its brackets."""
    cdef uint32_t i, s = 0, e
    i = n
    while i > 0:                       # the last '@' ends the userinfo
        i -= 1
        if a[i] == 64:
            s = i + 1
            break
    if s < n and a[s] == 91:           # '[' IP-literal ']'
        e = s
        while e < n and a[e] != 93:
            e += 1
        if e < n:
            e += 1
    else:
        e = s
        while e < n and a[e] != 58:
            e += 1
    start[0] = s
    return e - s


cdef inline bint ev_absolute_host_differs(const uint8_t *u, uint32_t n, const uint8_t *h,
                                          uint32_t hn) noexcept nogil:
    """u[0:n] is an absolute-form request-target (RFC 9112 3.2.2: scheme "://" authority ...)
    whose host differs, ASCII case-insensitively, from the host of the Host value h[0:hn]
    (ports are not compared). A server takes the target's host and ignores Host (RFC 9112
    3.2.2); a monitor that reads Host sees another site."""
    cdef uint32_t i = 0, a0, a1, s1 = 0, s2 = 0, l1, l2, k
    cdef uint8_t c, d
    if n == 0 or not ((u[0] | 32) >= 97 and (u[0] | 32) <= 122):
        return False
    i = 1
    while i < n:
        c = u[i]
        if (c | 32) >= 97 and (c | 32) <= 122 or (c >= 48 and c <= 57) or c == 43 or c == 45 \
                or c == 46:
            i += 1
        else:
            break
    if i + 3 > n or u[i] != 58 or u[i + 1] != 47 or u[i + 2] != 47:
        return False
    a0 = i + 3
    a1 = a0
    while a1 < n and u[a1] != 47 and u[a1] != 63 and u[a1] != 35:
        a1 += 1
    l1 = ev_host_part(u + a0, a1 - a0, &s1)
    l2 = ev_host_part(h, hn, &s2)
    if l1 != l2:
        return True
    for k in range(l1):
        c = u[a0 + s1 + k]
        d = h[s2 + k]
        if c >= 65 and c <= 90:
            c += 32
        if d >= 65 and d <= 90:
            d += 32
        if c != d:
            return True
    return False
