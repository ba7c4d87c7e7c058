/* A TLS hello split over TCP segments: the one set of reassembly rules, shared by the handshake
 * records (ext/tls/tls.pyx, TlsTable: ClientHello and ServerHello, keyed per direction, capture-time
 * GC) and the pass-by filter's SNI pass (ext/url/urlmatch.pyx, SniTable: ClientHellos, its slot
 * table, idle expiry). Each table keeps its own lookup, buffers (HS_STREAM_CAP bytes per stream,
 * allocated by the table), counters and reasons; what a stream does with a segment is decided
 * here, nowhere else. The hello itself is judged by the parser entry points of ext/tls/tls_hello.h
 * (tls_hello_start, tls_gather; the caller parses the gathered message with tls_parse_hello).
 *
 * The code is C: hs_start and hs_offer in ext/tls/hellostream.c (compiled once into the static
 * library `wtc`), hs_may_start static inline here; declared for Cython in ext/tls/hellostream.pxd.
 * Nothing allocates; sequence numbers are compared modulo 2^32.
 *
 * The rules
 * - Start: a segment whose hello does not end in it (tls_parse_payload: TLS_INCOMPLETE), held
 *   from the hello's first record, after at most four whole ChangeCipherSpec, alert or heartbeat
 *   records (tls_hello_start: a TLS 1.3 client sends a ChangeCipherSpec before its second
 *   ClientHello, and with a post-quantum key share that hello spans segments too; a server may
 *   send a warning alert before its ServerHello); or a segment of 1-5 bytes that can only be the beginning of a handshake record
 *   header (hs_may_start: the record header itself cut by the segment boundary, as DPI-evasion
 *   tools cut a ClientHello on purpose). The segment must be captured whole (a snaplen cut
 *   segment can neither start a stream nor continue one it does not complete).
 * - In TCP order only. A segment is offered by its seq:
 *     seq == next byte expected: appended;
 *     ends at or before the next byte expected: a retransmission of held bytes, ignored;
 *     starts before it and ends after it (a retransmission resegmented with new bytes, a
 *     coalesced resend): the bytes past the held end are appended, the held ones are kept;
 *     starts after it: a gap, the stream ends (the segment may itself start another hello).
 * - The handshake message is capped at TLS_HELLO_CAP (16 KiB, the declared length decides), the
 *   stream at HS_STREAM_CAP = 32 KiB of stream bytes (the message plus its record headers: a
 *   16 KiB message fits in records of 2.5 bytes of payload per header on average); bytes past the
 *   cap are not kept, and a stream that reaches the cap without its message whole is too long.
 * - Handshake records only between the fragments (any other record type, a zero-length record
 *   or a bad record version ends it as malformed: tls_gather).
 * - Whole when the held bytes hold the whole handshake message (tls_gather: TLS_OK); its type
 *   (1 ClientHello, 2 ServerHello) is known once 6 bytes are held, and a stream whose first
 *   11 bytes are not a hello's (tls_hello_start, which also checks the hello's version field)
 *   ends silently: no hello was ever there.
 *
 * Where the two old copies differed, and the rule chosen (tshark agrees with each choice: the
 * compare tests on the shared traces, tests/tls/test_compare_tls.py, tests/quic/test_sni_scan.py):
 * - Cap: the analyzer kept 32 KiB of stream bytes, the filter 16 KiB + 64 record headers, refused
 *   before appending. Chosen: the analyzer's 32 KiB, filled up to the cap and judged: a ClientHello
 *   under 16 KiB in many small records is no less a ClientHello (tshark reassembles it), and the
 *   filter must not let a client pass by cutting its hello into small records.
 * - Partial overlap: the analyzer ignored any segment starting before the next byte expected (the
 *   new bytes of a resegmented retransmission were lost and the stream then ended at the next
 *   segment, a gap); the filter abandoned the stream (tls_gap). Chosen: the new bytes are
 *   appended (what the receiving TCP does, and tshark).
 * - Gap: the analyzer ended the stream and tried the segment as a new hello; the filter ended it
 *   only. Chosen: the analyzer's; a new hello on the same 4-tuple is a hello.
 * - ChangeCipherSpec before the hello: the analyzer reassembled only a hello without CCS before
 *   it; the filter also one after CCS. Chosen: the filter's (the split second ClientHello of a
 *   TLS 1.3 HelloRetryRequest exchange is a ClientHello; tshark shows it).
 * - A first segment of 1-5 bytes (record header cut): only the filter held it. Chosen: both (the
 *   dissector's walk hands such a segment to the analyzer and watches its flow).
 * - Snaplen cut continuation: the analyzer appended the captured bytes and ended the stream only
 *   when the hello was still not whole; the filter ended it at once. Chosen: the analyzer's (the
 *   hello may end inside the captured bytes).
 * - Record headers between fragments: both through tls_gather already (the filter via
 *   tls_parse_payload); no difference. */
#ifndef WEBTAP_HELLOSTREAM_H
#define WEBTAP_HELLOSTREAM_H

#include <stdint.h>

#include "tls_hello.h"

enum {
    HS_STREAM_CAP = 2 * TLS_HELLO_CAP,  /* stream bytes held per split hello (records add 5 each) */
    HS_HEAD = 6,                        /* record header + handshake type: the stream's type known */
    HS_VERSION_END = 11,                /* ... + handshake length + the hello's version field */
};

/* What a stream did with a segment (hs_start, hs_offer) */
enum {
    HS_MORE = 0,           /* held; the message is not whole yet */
    HS_WHOLE = 1,          /* the held bytes hold the whole message: gathered into scratch */
    HS_RETRANSMISSION = 2, /* nothing new (all its bytes held already): ignored, the stream goes on */
    HS_GAP = 3,            /* the segment starts past the next byte expected: the stream ends */
    HS_CUT = 4,            /* snaplen cut the segment and the message is not whole: the stream ends */
    HS_TOO_LONG = 5,       /* declared length above TLS_HELLO_CAP, or HS_STREAM_CAP bytes held
                            * without the message whole: the stream ends */
    HS_MALFORMED = 6,      /* a non-handshake record / zero-length record between fragments: ends */
    HS_NOT_HELLO = 7,      /* the held bytes do not start a hello after all: ends, silently */
};

typedef struct {
    uint8_t *buf;          /* HS_STREAM_CAP bytes (the table's): stream bytes from the hello's record */
    uint32_t len;          /* bytes held */
    uint32_t next_seq;     /* TCP seq of the next byte expected (modulo 2^32) */
    uint16_t segs;         /* segments that added bytes (the first included) */
    uint8_t hs_type;       /* 0 until HS_HEAD bytes are held; then 1 ClientHello, 2 ServerHello */
} HelloStream;

/* Whether a TCP payload of 1-5 bytes can be the beginning of a handshake record header (type 22,
 * major version 3, minor 0..4): a stream whose record header the segment boundary cuts. */
static inline int hs_may_start(const uint8_t *p, uint32_t n) {
    return 0 < n && n < HS_HEAD && p[0] == 22 && (n < 2 || p[1] == 3) && (n < 3 || p[2] <= 4);
}

/* Start a stream from its first segment (TCP seq, length on the wire, the captured bytes
 * p[0:caplen]); the hello's first record at p[off] (past the records skipped before it). buf: the
 * table's HS_STREAM_CAP bytes. Call it for a segment whose hello does not end in it
 * (tls_parse_payload said TLS_INCOMPLETE) or one hs_may_start accepts. Returns HS_MORE, or why
 * the stream ends at once (HS_CUT, HS_TOO_LONG, ...; HS_WHOLE is not expected here). */
int hs_start(HelloStream *s, uint8_t *buf, uint32_t seq, uint32_t wire_len, const uint8_t *p,
             uint32_t caplen, uint32_t off, uint8_t *scratch, uint32_t *msg_len);

/* Offer a later segment of the stream's direction (TCP seq, length on the wire, captured bytes
 * p[0:caplen]). Returns HS_RETRANSMISSION (ignored) or HS_GAP (nothing changed: the caller ends
 * the stream), else the bytes are taken and the result says whether the message is whole
 * (HS_WHOLE: scratch[0:*msg_len], TLS_HELLO_CAP bytes), wanted (HS_MORE) or the stream ends
 * (HS_CUT, HS_TOO_LONG, HS_MALFORMED, HS_NOT_HELLO). */
int hs_offer(HelloStream *s, uint32_t seq, uint32_t wire_len, const uint8_t *p, uint32_t caplen,
             uint8_t *scratch, uint32_t *msg_len);

#endif
