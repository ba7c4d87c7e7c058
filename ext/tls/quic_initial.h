/* The QUIC Initial first flight, gathered one way for every table that wants a hello from it:
 * the handshake records' TLS stage (ext/tls/tls.pyx, both sides of a connection) and the pass-by
 * filter's SNI pass (ext/url/urlmatch.pyx, the client's first flight). Packet protection is
 * quic_crypto.h; each table keeps its own connection lookup, buffers, caps and counters, and all
 * of them walk an opened Initial's frames, put CRYPTO data into a stream buffer and find a whole
 * handshake message with the functions here (quic_initial.c, in the wtc library).
 *
 * A CRYPTO stream buffer is `cap` bytes of stream data and a coverage bitmap of cap / 8 bytes
 * (one bit per stream byte), so frames may arrive in any order, repeat or overlap (RFC 9000
 * 19.6: CRYPTO data is an ordered byte stream whose frames may be lost and re-sent).
 */
#ifndef WT_QUIC_INITIAL_H
#define WT_QUIC_INITIAL_H

#include <stddef.h>
#include <stdint.h>

/* How a walk over an opened Initial's frames ended (quic_next_crypto, quic_crypto_frames) */
enum {
    QF_END = 0,         /* no frame left: the whole payload was walked */
    QF_CRYPTO = 1,      /* quic_next_crypto: a CRYPTO frame (coff/clen set, data at b[fo:fo+clen]) */
    QF_OTHER = 2,       /* another frame type (CONNECTION_CLOSE, ...): the walk stops at its type */
    QF_BAD_ACK = 3,     /* an ACK frame that does not parse */
    QF_BAD_OFFSET = 4,  /* a CRYPTO offset varint cut */
    QF_BAD_LENGTH = 5,  /* a CRYPTO length varint cut, or a length past the packet */
    QF_BEYOND = 6,      /* quic_crypto_frames: a CRYPTO frame reaching past the buffer's cap */
    QF_MANY = 7,        /* quic_crypto_frames: more CRYPTO frames than the list has room for */
};

/* One CRYPTO frame of an opened Initial: its data at plain + pos, stream offset coff, len bytes */
typedef struct { uint32_t pos, coff, len; } quic_frame;

/* CRYPTO frames an Initial can hold: each takes at least 3 bytes (type, offset, length) and the
 * tables open packets of at most 65536 bytes */
#define QUIC_MAX_FRAMES (65536 / 3 + 1)

/* Frames quic_frames_message reads a message from (a client's first Initial carries a few) */
#define QUIC_PACKET_FRAMES 16

/* Skip an ACK frame's body at b[*fo] (RFC 9000 19.3): largest, delay, range count, first range,
 * count x (gap, length), and the three ECN counts of type 0x03. At most 256 ranges. */
int quic_skip_ack(const uint8_t *b, size_t n, size_t *fo, int ecn);

/* The next CRYPTO frame of an opened Initial's payload b[0:n] from b[*fo], skipping PADDING,
 * PING and ACK frames (the frames an Initial may carry besides CONNECTION_CLOSE, RFC 9000
 * 17.2.2). Returns a QF_* code; the caller advances *fo by *clen after using the data. */
int quic_next_crypto(const uint8_t *b, size_t n, size_t *fo, uint64_t *coff, uint64_t *clen);

/* Every CRYPTO frame of an opened Initial's payload plain[0:pl], in packet order, into fr (room
 * for max frames; QUIC_MAX_FRAMES always suffice): *nf frames are listed, those before the
 * point where the walk ended, and *stop is that point (pl when the whole payload was walked).
 * Returns QF_END when the whole payload was walked, else why it stopped (QF_OTHER, QF_BAD_*,
 * QF_BEYOND for a frame past stream offset cap, QF_MANY). */
int quic_crypto_frames(const uint8_t *plain, size_t pl, uint32_t cap, quic_frame *fr, int max,
                       int *nf, size_t *stop);

/* The nf frames' data into a CRYPTO stream buffer (buf, coverage bitmap have); quic_crypto_frames
 * checked each against the buffer's cap. */
void quic_frames_put(uint8_t *buf, uint8_t *have, const uint8_t *plain, const quic_frame *fr, int nf);

/* CRYPTO data of stream offsets [coff, coff+clen) into buf, marked in the coverage bitmap have.
 * The caller has checked coff + clen against its buffer's size. */
void quic_crypto_put(uint8_t *buf, uint8_t *have, uint64_t coff, const uint8_t *data, uint64_t clen);

/* Length of the whole handshake message (4-byte header + body) at stream offset base of a CRYPTO
 * buffer of cap bytes; 0 while bytes are missing, 0xFFFFFFFF when it cannot fit under the cap. */
uint32_t quic_crypto_whole(const uint8_t *buf, const uint8_t *have, uint32_t cap, uint32_t base);

/* The whole handshake message at stream offset 0 when one packet's nf frames (quic_crypto_frames,
 * at most QUIC_PACKET_FRAMES) hold all of it, without a stream buffer: a pointer into plain when
 * one frame does, else into scratch (cap bytes, the frames' cap) where the frames are put in
 * stream order; its length in *need. NULL: bytes are missing (earlier or later packets hold
 * them), more than QUIC_PACKET_FRAMES frames, or a message longer than cap. */
const uint8_t *quic_frames_message(const uint8_t *plain, const quic_frame *fr, int nf,
                                   uint8_t *scratch, uint32_t cap, uint32_t *need);

#endif
