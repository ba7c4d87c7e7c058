/* The URL filter's QUIC cut (issue 18): a server Initial packet that closes the connection,
 * forged from the client's first Initial. Code in quic_close.c (wtc), nogil, thread-safe; crypto is
 * quic_crypto.h (OpenSSL). Why a real client accepts it and what it does next: docs/urlfilter.md,
 * "QUIC cut".
 *
 * The packet (RFC 9000 17.2.2, RFC 9369 3.2 for v2's type code):
 *   first byte  1 1 TT 00 00: long header, fixed bit, Initial type of the client's version,
 *               packet number length 1 (low bits 00)
 *   version     the client's
 *   DCID        the client's Source Connection ID (RFC 9000 7.2: a server addresses the client
 *               by the SCID it chose)
 *   SCID        8 bytes derived from the client's DCID (what a server would choose at random;
 *               derived so that the output is reproducible); the server's chosen ID when the
 *               client's Initial already carries it (quic_forge_close_as)
 *   token       length 0 (a server Initial MUST NOT carry a token, RFC 9000 17.2.2)
 *   length      packet number + frames + 16-byte AEAD tag
 *   pn          0 (the server's first Initial packet number); QUIC_CLOSE_FOLLOW_PN in 2 bytes
 *               after the server's own Initial (quic_forge_close_as)
 *   frames      CONNECTION_CLOSE type 0x1c (RFC 9000 19.19): error CONNECTION_REFUSED (0x02),
 *               frame type 0, reason phrase QUIC_CLOSE_REASON
 * protected with the server Initial keys derived from the client's DCID (RFC 9001 5.2), header
 * protection included.
 */
#ifndef WEBTAP_QUIC_CLOSE_H
#define WEBTAP_QUIC_CLOSE_H

#include "quic_crypto.h"

#define QUIC_CLOSE_REASON "blocked by URL filter"
#define QUIC_CLOSE_ERROR 0x02             /* CONNECTION_REFUSED (RFC 9000 20.1) */
#define QUIC_CLOSE_SCID_LEN 8
/* Packet number of a close that follows the server's own Initial (quic_forge_close_as): past
 * the few Initial packets a server sends, so that the client does not drop it as a duplicate
 * (RFC 9000 12.3); sent in 2 bytes, which the client decodes exactly (RFC 9000 A.3). */
#define QUIC_CLOSE_FOLLOW_PN 0x100
/* Largest packet the forge writes: header 7 + DCID 20 + SCID 20 + token length 1 + length 2 +
 * packet number 2, frames 4 + reason, tag */
#define QUIC_CLOSE_MAX (52 + 4 + (sizeof(QUIC_CLOSE_REASON) - 1) + 16)

/* The server SCID for a client DCID: 8 bytes of a 64-bit mix of it (not secret, not random:
 * the forged packet must only look like a server's, and tests want the same bytes twice). */
static inline void quic_close_scid(const uint8_t *dcid, size_t dcid_len, uint8_t out[8])
{
    uint64_t h = 0xcbf29ce484222325ULL ^ dcid_len;
    size_t i;
    for (i = 0; i < dcid_len; i++) h = (h ^ dcid[i]) * 0x100000001b3ULL;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    for (i = 0; i < 8; i++) out[i] = (uint8_t)(h >> (56 - 8 * i));
}

/* Forge the close for the client Initial at pkt (n bytes: the UDP payload from this packet on).
 * Writes the protected server Initial to out (cap bytes, QUIC_CLOSE_MAX suffice) and returns its
 * length, or a QUIC_E_* error (< 0) when pkt is not a client Initial of a known version. Nothing
 * is decrypted: the header alone gives the version, DCID and SCID.
 *
 * odcid: the client's first DCID, whose keys protect every Initial of the connection (RFC 9001
 * 5.2), when pkt carries another one: a client Initial sent after the server's first Initial
 * carries the server's chosen SCID as its DCID (RFC 9000 7.2). The close then answers as that
 * server: its SCID is that chosen ID (the client drops server packets with any other SCID,
 * RFC 9000 7.2), its packet number QUIC_CLOSE_FOLLOW_PN. NULL: pkt's own DCID is the first. */
int quic_forge_close_as(const uint8_t *pkt, size_t n, const uint8_t *odcid, size_t odcid_len,
                               uint8_t *out, size_t cap);

/* The close for a client Initial that carries the connection's first DCID (see above). */
int quic_forge_close(const uint8_t *pkt, size_t n, uint8_t *out, size_t cap);

#endif /* WEBTAP_QUIC_CLOSE_H */
