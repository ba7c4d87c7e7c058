/* A message that starts inside a TCP segment whose first bytes CONTINUE a message begun in an
 * earlier segment (issue 31; docs/ACCURACY.md "After a continued header block"): the request
 * whose header block was split over two segments, then the next pipelined request in the second
 * one. Decided from the packet alone, with no state, by the dissector (ext/walk/dissect.pyx,
 * which then parses the message and the ones after it) and the feeder's reader
 * (ext/run/classify.c, which only routes the packet), so both take the same packets.
 * Body in httpcont.c (the wtc library); declared for Cython in httpcont.pxd. */
#ifndef WT_HTTPCONT_H
#define WT_HTTPCONT_H
#include <stdint.h>

enum {
    WT_CONT_NONE = 0,       /* not a continued header block, or nothing after it: nothing counted */
    WT_CONT_UNKNOWN = -1,   /* a continued header block ends in the packet and a message may
                               start after it (the bytes there, or after the body, begin like
                               one), but the packet does not tell (counted) */
    WT_CONT_MAX_OFFSET = 0xFFFF,  /* seg_off is 16 bits */
};

/* The TCP payload q[0:n] (wire bytes on the wire) does not start a message (wt_http_start said
   0). When its first bytes continue a header block begun in an earlier segment and the message
   they belong to ends in this packet, followed by the start of the next message: that
   message's kind (WT_MSG_REQUEST / WT_MSG_RESPONSE), *at its offset in the payload, *start /
   *tok_end / *method_id wt_http_start's for q[*at:]. WT_CONT_NONE when the payload does not
   look like a continued header block or no message can follow it; WT_CONT_UNKNOWN (counted
   continuation_unknown) when one ends in the packet and a message may start after it (right
   after the empty line or the body, the bytes begin like one: wt_http_start) but the packet
   does not tell.

   The rule (docs/ACCURACY.md "After a continued header block"):
     - the first line is a fragment (the tail of a header line or of the request/status line,
       possibly empty); if it holds a colon after a tail of "Content-Length" or
       "Transfer-Encoding" (the name was cut by the segment's start): doubt;
     - every further line up to the first empty one is a header field line (tchar name, colon;
       at most WT_MAX_HEADER_LINE bytes, else doubt), else WT_CONT_NONE (a body); a MIME part's
       own fields (Content-Transfer-Encoding, Content-ID, Content-Type application/http: a
       multipart batch body that carries HTTP messages) are doubt;
     - the message ends at the empty line when a status line follows at once (the answer to a
       HEAD, a 304, ...: wt_msg_end's rule), else as the continued lines' Content-Length /
       Transfer-Encoding tell (wt_msg_end's rules; chunks must all end in the packet), else at
       the empty line (a request without a body; a response without a length runs to the
       close, so only a message that starts there strictly is taken);
     - what follows must start a message strictly: a whole status line "HTTP/" DIGIT "." DIGIT
       SP 3DIGIT, or a request line that ends with SP "HTTP/" DIGIT "." DIGIT.
   Doubt, a length the packet cannot read (bad Content-Length, a coding other than chunked,
   chunks or a body past the segment) and a start that is not strict take nothing.
   A segment that starts with the LF completing a CRLF split at the segment's edge, followed by
   a strict start, is taken at offset 1. Linear in n; most bodies stop at their second line. */
int wt_http_after_continuation(const uint8_t *q, uint32_t n, uint32_t wire, uint32_t *at,
                               uint32_t *start, uint32_t *tok_end, int *method_id);
#endif
