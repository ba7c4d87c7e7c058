/* Does a TCP payload start an HTTP message, and which kind: the one rule the dissector
 * (ext/walk/dissect.pyx, which then parses the message) and the feeder's reader (ext/run/classify.c,
 * which only routes the packet) share, so both always take the same packets for messages.
 * Bodies in httpstart.c (the wtc library); declared for Cython in httpstart.pxd. The method
 * table is static C data in httpmethods.h. */
#ifndef WT_HTTPSTART_H
#define WT_HTTPSTART_H
#include <stdint.h>
#include "httpmethods.h"

/* = ext/walk/message.pxd MsgKind's MSG_REQUEST / MSG_RESPONSE (dissect.pyx checks at import) */
#define WT_MSG_REQUEST 1
#define WT_MSG_RESPONSE 2
/* longest URI scheme the absolute-form check looks at */
#define WT_HTTP_SCHEME_MAX 32

/* MethodId of the token p[0:n], or -1 when it is not a known method (case-sensitive). */
int wt_http_method_id(const uint8_t *p, uint32_t n);

/* The line from q[k] ends (CR or LF, in the payload) with SP "HTTP/" DIGIT "." DIGIT. */
int wt_line_ends_with_version(const uint8_t *q, uint32_t k, uint32_t n);

/* q[0:n] starts a status line whose version is in lower case: "http/" DIGIT "." DIGIT SP
 * (Zeek reads it as a response, tshark 4.0 as a continuation; docs/ACCURACY.md "Status
 * lines"). The whole shape is required, so a body that merely begins "http/" is not one. */
int wt_http_lower_status(const uint8_t *q, uint32_t n);

/* The whole TCP payload q[0:n] (n == wire_len) is only the beginning of a request line or a
 * status line: a proper prefix of a method token (with or without RFC 2774's "M-") or of
 * "HTTP/" ("G", then "ET / HTTP/1.1" in the next segment). Such a message is not read (no
 * reassembly); the dissector counts it (request_line_split). Looks at at most 19 bytes. */
int wt_http_split_start(const uint8_t *q, uint32_t n, uint32_t wire_len);

/* Classify the TCP payload q[0:n] (wire_len bytes on the wire): WT_MSG_RESPONSE when it starts
 * with "HTTP/" (or a status line in lower case, wt_http_lower_status), WT_MSG_REQUEST when it
 * starts a request line, 0 otherwise. *start: where the first line begins (one leading CRLF is
 * skipped, as tshark does when more than 3 bytes are on the wire; RFC 9112 2.2); for a request
 * *tok_end is where the method ends and *method_id its MethodId.
 *
 * A request line (docs/ACCURACY.md, "Request lines") is a known method token (case-sensitive;
 * RFC 2774's "M-" prefix accepted, as tshark does) followed by
 *   - SP and a request-target in origin, asterisk, absolute or authority form, or no target
 *     and the version ("OPTIONS HTTP/1.1"); spaces after the method are skipped first
 *     (tshark's reading of "GET  /x HTTP/1.1": an empty URI);
 *   - SP and a target of another shape only when the line ends with SP HTTP/d.d
 *     ("GET index.html HTTP/1.0");
 *   - the end of the line or of the payload: a method alone (tshark takes it for a request).
 * Anything else ("POST request received successfully!", a response body) is not a request,
 * whatever its first word. Looks at the first ~60 bytes, more only for a target of another
 * shape (up to the line's end). */
int wt_http_start(const uint8_t *q, uint32_t n, uint32_t wire_len, uint32_t *start,
                  uint32_t *tok_end, int *method_id);

/* Status line starting at q[s] (a payload of n bytes that starts "HTTP/" there): the version
 * token ends at *ver_end (first space, CR or LF), the code is the next token (after spaces),
 * ending at *code_end. Returns the code when that token is exactly three digits, else -1. */
int wt_http_status_code(const uint8_t *q, uint32_t s, uint32_t n, uint32_t *ver_end,
                        uint32_t *code_end);
#endif
