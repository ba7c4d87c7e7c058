/* Chosen headers (`--headers NAME,...`): the values of named header fields in a message's first
 * packet, as spans (offset, length) into the packet, found by one pass over the header block.
 * The header-block rules are the dissector's (ext/walk/dissect.pyx _parse_message): lines end
 * at CR, LF or CRLF; the block ends at the empty line or at the first line without a colon; a
 * name matches case-insensitively and exactly (no blank before the colon); the value is trimmed
 * of blanks (SP, HT) on both sides; lines over WT_HDR_MAX_LINE bytes are skipped; a line cut by
 * the end of the packet is read as far as it goes. The first occurrence of a name wins.
 *
 * Used by the pairing table (ext/pair/pairing.pyx feed: values stored with the waiting message
 * and emitted as request_<name> / response_<name> columns). Nothing is added to HttpMsg: the
 * pass reads the packet again. Body in httphdr.c (the wtc library); declared in httphdr.pxd. */
#ifndef WT_HTTPHDR_H
#define WT_HTTPHDR_H
#include <stdint.h>

#define WT_HDR_MAX_LINE 8192     /* = msglen.h WT_MAX_HEADER_LINE */
#define WT_HDR_MAX_NAMES 64      /* chosen names per run */

/* = ext/walk/message.pxd Span: (offset from the packet's first byte, length) */
typedef struct { uint32_t off; uint32_t len; } wt_span_t;

/* Fill out[0:nnames] with the spans (packet-relative, as HttpMsg's) of the chosen names' values
   in the message whose packet's bytes are pkt[0:avail]: its payload at pkt[payload_off:
   payload_off + payload_caplen], its first line starting at first_off (a request's method span,
   a response's version span); len 0 when absent. uri_cut: a request whose line had no end in
   the packet (MSGF_URI_TRUNCATED): nothing is read. names holds the lower-case names back to
   back, name k at names[name_off[k]:name_off[k+1]]. Returns the number of names found. */
int wt_hdr_scan(const uint8_t *pkt, uint64_t avail, uint32_t payload_off,
                uint32_t payload_caplen, uint32_t first_off, int uri_cut,
                const uint8_t *names, const uint32_t *name_off, int nnames, wt_span_t *out);
#endif
