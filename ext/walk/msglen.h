/* What one packet says about an HTTP message's length (RFC 9112 6.3), and the byte helpers of
 * the header walks: shared by the dissector (ext/walk/dissect.pyx: messages after another in a
 * segment) and the continuation rule (ext/walk/httpcont.c: the message after a header block
 * continued from an earlier segment), which the feeder's reader (ext/run/classify.c) runs too.
 * Bodies of any size in msglen.c (the wtc library); here the types and the few-line byte
 * helpers of the per-line loops. Declared for Cython in msglen.pxd. */
#ifndef WT_MSGLEN_H
#define WT_MSGLEN_H
#include <stdint.h>
#include <string.h>
#include "lineend.h"

/* header lines longer than this are flagged, not parsed (nginx's default
   large_client_header_buffers size) */
#define WT_MAX_HEADER_LINE 8192

/* = ext/walk/message.pxd's MSGF_LINE_TOO_LONG and METHOD_CONNECT (dissect.pyx checks at import) */
#define WT_MSGF_LINE_TOO_LONG 16
#define WT_METHOD_CONNECT 6

/* What the header block says about the body. */
typedef struct {
    uint32_t hdr_end;   /* offset (from the message's first byte) just past the header block's
                           empty line; 0 when the block does not end in the packet */
    uint64_t cl;        /* Content-Length value (cl_state == WT_CL_VALID) */
    uint8_t cl_state;   /* WT_CL_NONE / WT_CL_VALID / WT_CL_BAD (not digits, or two different
                           values) */
    uint8_t te;         /* WT_TE_NONE / WT_TE_CHUNKED (chunked is the final coding) / WT_TE_OTHER */
} wt_body_info_t;

enum {
    WT_CL_NONE = 0, WT_CL_VALID = 1, WT_CL_BAD = 2,
    WT_TE_NONE = 0, WT_TE_CHUNKED = 1, WT_TE_OTHER = 2,
};
/* Content-Length values of more digits than this are kept as this (> any packet) */
#define WT_CL_HUGE 1000000000000000ULL

/* wt_msg_end's outcomes */
enum {
    WT_END_KNOWN = 0,      /* *end: the message's last byte + 1 (it may lie past the captured bytes) */
    WT_END_CONTINUES = 1,  /* the body runs past the segment on the wire */
    WT_END_UNKNOWN = 2,    /* bytes follow whose extent the packet cannot tell (counted) */
    WT_END_CLOSE = 3,      /* nothing HTTP can follow in the connection: a response delimited by
                              the close, 101 Switching Protocols, CONNECT (a tunnel) */
};

/* ---- byte helpers of the per-line loops */
static inline int wt_is_eol(uint8_t c) { return c == 13 || c == 10; }

static inline uint8_t wt_lower(uint8_t c) { return (c >= 65 && c <= 90) ? (uint8_t)(c + 32) : c; }

/* Case-insensitive ASCII comparison of p[0:n] with the lower-case name lname[0:ln]. */
static inline int wt_name_is(const uint8_t *p, uint32_t n, const char *lname, uint32_t ln) {
    uint32_t i;
    if (n != ln)
        return 0;
    for (i = 0; i < n; i++)
        if (wt_lower(p[i]) != (uint8_t)lname[i])
            return 0;
    return 1;
}

/* Start of the line after the terminator at eol (eol < n). */
static inline uint32_t wt_next_line(const uint8_t *p, uint32_t eol, uint32_t n) {
    return (p[eol] == 13 && eol + 1 < n && p[eol + 1] == 10) ? eol + 2 : eol + 1;
}

/* p[0:n] is exactly HTTP/d.d */
static inline int wt_is_version(const uint8_t *p, uint32_t n) {
    return n == 8 && memcmp(p, "HTTP/", 5) == 0 && p[5] >= 48 && p[5] <= 57 && p[6] == 46
           && p[7] >= 48 && p[7] <= 57;
}

/* ---- message length (RFC 9112 6.3) from one packet (msglen.c) */

/* One Content-Length field value: 1*DIGIT, or a list of equal ones ("5, 5"; RFC 9110 8.6).
   A value that is not that, or that differs from an earlier one, makes the length unknown. */
void wt_cl_value(const uint8_t *v, uint32_t n, wt_body_info_t *b);

/* One Transfer-Encoding field value: its last coding decides (RFC 9112 6.3 item 4). */
void wt_te_value(const uint8_t *v, uint32_t n, wt_body_info_t *b);

/* A chunked body (RFC 9112 7.1) starting at q[pos], in a message whose bytes in this segment
   are q[0:n] (wire on the wire): WT_END_KNOWN with *end just past the last chunk's trailer
   section, WT_END_CONTINUES when the chunks run past the segment, WT_END_UNKNOWN when the bytes
   are not chunks or the capture cut them. Lines end at CRLF or LF (tshark's and Zeek's
   tolerance). Each round consumes at least three bytes: the work is linear in n. */
int wt_chunked_end(const uint8_t *q, uint64_t pos, uint32_t n, uint32_t wire, uint64_t *end);

/* q[pos:] starts "HTTP/" DIGIT "." DIGIT SP DIGIT DIGIT DIGIT: a status line. */
int wt_status_line_at(const uint8_t *q, uint32_t pos, uint32_t n);

/* Where the message (kind, status, method_id, flags: its HttpMsg's), whose bytes in this
   segment are q[0:n] (wire on the wire) and whose header block ends at b->hdr_end, ends:
   RFC 9112 6.3 read with this packet alone.
     - a response 1xx (but 101), 204 or 304: no body; a response whose header block is
       followed at once by a status line: no body either, whatever its Content-Length says
       (the answer to a HEAD, RFC 9110 9.3.2: its request is not in this packet);
     - 101, a CONNECT request: a tunnel follows (WT_END_CLOSE);
     - Transfer-Encoding with chunked last: the chunks; without: a response runs to the close
       (WT_END_CLOSE), a request is invalid (WT_END_UNKNOWN); it overrides Content-Length;
     - a valid Content-Length: that many bytes; an invalid one: WT_END_UNKNOWN;
     - neither: a request has no body, a response runs to the close (WT_END_CLOSE).
   A message whose header block holds a line too long to parse: WT_END_UNKNOWN (the line may be
   the length's). */
int wt_msg_end(const uint8_t *q, uint32_t n, uint32_t wire, int kind, uint32_t status,
               uint32_t method_id, uint32_t flags, const wt_body_info_t *b, uint64_t *end);
#endif
