/* Evasion indicators of an HTTP request's first packet (issue 34; docs/ABUSE.md "Evasion
 * flags"): what an IDS and the server behind it may read differently. The dissector
 * (ext/walk/dissect.pyx _parse_message) runs them on request first packets only, over the bytes
 * it has already delimited (the request-target span, the Host value), and sets the MSGF_EV_*
 * bits of HttpMsg.flags (ext/walk/message.pxd). Bodies in evasion.c (the wtc library). */
#ifndef WT_EVASION_H
#define WT_EVASION_H
#include <stdint.h>

/* Apache httpd's LimitRequestLine and LimitRequestFieldSize default to 8190 bytes, and nginx's
 * large_client_header_buffers (default 4 8k) hold a request line or a header field with its
 * CRLF in one 8192-byte buffer: 8190 bytes of line. Longer: 414 / 400 from both. */
#define EV_MAX_LINE 8190
/* Apache httpd's LimitRequestFields: at most 100 header fields (400 beyond). */
#define EV_MAX_FIELDS 100

/* u[0:n] holds "%25" followed by two hex digits: a percent-encoded '%' whose decoding is itself
 * an escape (decoded once, "%252e" is "%2e"; twice, "."), case-insensitive hex. */
int ev_double_encoded(const uint8_t *u, uint32_t n);

/* The host of an authority a[0:n] (RFC 3986 3.2: [userinfo@]host[:port]): its start in *start
 * and its length; an IP-literal keeps its brackets. */
uint32_t ev_host_part(const uint8_t *a, uint32_t n, uint32_t *start);

/* u[0:n] is an absolute-form request-target (RFC 9112 3.2.2: scheme "://" authority ...) whose
 * host differs, ASCII case-insensitively, from the host of the Host value h[0:hn] (ports are
 * not compared). A server takes the target's host and ignores Host (RFC 9112 3.2.2); a monitor
 * that reads Host sees another site. */
int ev_absolute_host_differs(const uint8_t *u, uint32_t n, const uint8_t *h, uint32_t hn);

#endif
