/* QUIC Initial packet protection (RFC 9001 section 5, RFC 9369 section 3) on OpenSSL's libcrypto.
 *
 * Declarations here, the code in quic_crypto.c (compiled once into the wtc static library; each
 * extension module that calls it links its own copy of the object, symbols hidden). There is no
 * shared state but the OpenSSL algorithms fetched once per module (pthread_once) and, per
 * thread, one set of OpenSSL contexts
 * and a small cache of the last DCIDs' keys (made on first use, freed when the thread ends;
 * about 14 KB). Every function is thread-safe and may run without the GIL.
 *
 * What is here (the primitives the URL filter's QUIC cut and the TLS/QUIC analyzer share):
 *   - quic_initial_keys(): initial secret from the client's first Destination Connection ID,
 *     client and server key / iv / hp, for QUIC v1 (RFC 9001 5.2) and v2 (RFC 9369 3.3);
 *   - quic_hp_mask(): header protection mask, AES-128-ECB of the 16-byte sample (RFC 9001 5.4.3);
 *   - quic_aead_seal() / quic_aead_open(): AEAD_AES_128_GCM with the nonce iv XOR packet number
 *     (RFC 9001 5.3);
 *   - quic_parse_long(): long header fields up to the Packet Number (RFC 9000 17.2), with the
 *     version's packet type codes mapped to QUIC_PT_* (RFC 9369 3.2);
 *   - quic_open_initial(): remove header protection and open one Initial packet;
 *   - quic_protect(): seal a packet in place and apply its header protection.
 *
 * Nothing cryptographic is written here: SHA-256, AES-ECB and AES-GCM are libcrypto's. HMAC
 * (RFC 2104) and HKDF (RFC 5869) are assembled over libcrypto's SHA-256 because OpenSSL 3's
 * EVP_MAC / EVP_KDF objects cost microseconds per call (measured; see "OpenSSL objects" below);
 * HKDF-Expand-Label's label encoding (RFC 8446 7.1) is built here.
 *
 * Return values: 0 success; negative values are QUIC_E_* below (for the counters by reason).
 */
#ifndef WEBTAP_QUIC_CRYPTO_H
#define WEBTAP_QUIC_CRYPTO_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <pthread.h>

#include <stdlib.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#define QUIC_V1 0x00000001u
#define QUIC_V2 0x6b3343cfu
#define QUIC_DRAFT29 0xff00001du   /* draft-ietf-quic-tls-29: v1's format and labels, its own salt
                                      (Chrome and others sent it in 2020-2021; shared traces hold it) */

#define QUIC_MAX_CID 20        /* RFC 9000 17.2: v1/v2 connection IDs are at most 20 bytes */
#define QUIC_TAG_LEN 16
#define QUIC_SAMPLE_LEN 16

/* Long header packet types, in v1 numbering (RFC 9000 17.2); v2 codes are mapped onto these. */
enum {
    QUIC_PT_INITIAL = 0,
    QUIC_PT_0RTT = 1,
    QUIC_PT_HANDSHAKE = 2,
    QUIC_PT_RETRY = 3,
    QUIC_PT_VERSION_NEG = 4    /* version 0 (RFC 9000 17.2.1) */
};

/* Errors (negative), in the order of the analyzers' reason counters. */
enum {
    QUIC_OK = 0,
    QUIC_E_SHORT = -1,          /* not even a long header's fixed part */
    QUIC_E_NOT_LONG = -2,       /* header form bit 0: short header (1-RTT) */
    QUIC_E_VERSION = -3,        /* a version whose Initial protection we do not know */
    QUIC_E_CID = -4,            /* connection ID longer than 20 bytes */
    QUIC_E_TRUNCATED = -5,      /* token / length / packet ends beyond the datagram */
    QUIC_E_DECRYPT = -6,        /* AEAD tag check failed */
    QUIC_E_CRYPTO = -7,         /* OpenSSL refused (out of memory, missing algorithm) */
    QUIC_E_FIXED_BIT = -8,      /* fixed bit 0 (RFC 9000 17.2: such packets are discarded) */
    QUIC_E_ARG = -9             /* caller's buffer too small or bad argument */
};

typedef struct {
    uint8_t key[16];    /* AEAD_AES_128_GCM key */
    uint8_t iv[12];     /* nonce base */
    uint8_t hp[16];     /* header protection key (AES-128-ECB) */
} quic_keys_t;

typedef struct {
    uint32_t version;
    uint8_t first;          /* first byte as on the wire (still header-protected) */
    uint8_t type;           /* QUIC_PT_*, version-independent */
    uint8_t dcid_len, scid_len;
    size_t dcid_off, scid_off;    /* offsets into the packet */
    size_t token_off;
    uint64_t token_len;           /* Initial only */
    uint64_t length;              /* Length field: packet number + payload (Initial/0-RTT/Handshake) */
    size_t pn_off;                /* offset of the Packet Number field */
    size_t end;                   /* offset one past this packet (coalesced packets follow) */
} quic_long_hdr_t;

/* ---- version table ---------------------------------------------------------------------- */

static inline int quic_version_known(uint32_t v)
{
    return v == QUIC_V1 || v == QUIC_V2 || v == QUIC_DRAFT29;
}

/* Wire type bits (first byte bits 4-5) of a QUIC_PT_* for this version; -1 if unknown. */
static inline int quic_type_bits(uint32_t v, int pt)
{
    if (v == QUIC_V1 || v == QUIC_DRAFT29) return pt & 3;
    if (v == QUIC_V2) return (pt + 1) & 3;   /* RFC 9369 3.2: Initial 1, 0-RTT 2, Handshake 3, Retry 0 */
    return -1;
}

/* QUIC_PT_* from the wire type bits; v1 numbering for unknown versions (RFC 8999 says nothing). */
static inline int quic_type_from_bits(uint32_t v, int bits)
{
    if (v == QUIC_V2) return (bits + 3) & 3;
    return bits & 3;
}

/* HKDF-Expand-Label(secret, label, "", outlen) (RFC 8446 7.1), secret of 32 bytes. */
int quic_hkdf_expand_label(const uint8_t secret[32], const char *label,
                                  uint8_t *out, size_t outlen);

/* Client and server Initial secrets (32 bytes each; either may be NULL). */
int quic_initial_secrets(uint32_t version, const uint8_t *dcid, size_t dcid_len,
                                uint8_t *client_secret, uint8_t *server_secret);

/* key / iv / hp from a 32-byte secret with the version's labels (RFC 9001 5.1, RFC 9369 3.3.2). */
int quic_keys_from_secret(uint32_t version, const uint8_t secret[32], quic_keys_t *k);

/* Both sides' Initial keys from the client's first Destination Connection ID (either may be
 * NULL). Served from this thread's cache of the last QUIC_KEY_CACHE DCIDs when it holds them:
 * a side is derived once per DCID (while its entry stays), the initial secret once. */
int quic_initial_keys(uint32_t version, const uint8_t *dcid, size_t dcid_len,
                             quic_keys_t *client, quic_keys_t *server);

/* mask = AES-ECB(hp, sample)[0..5] (RFC 9001 5.4.3). */
int quic_hp_mask(const uint8_t hp[16], const uint8_t *sample, uint8_t mask[5]);

/* AEAD_AES_128_GCM seal: ct receives ptlen bytes of ciphertext then the 16-byte tag.
 * ct may equal pt (in place). */
int quic_aead_seal(const quic_keys_t *k, uint64_t pn, const uint8_t *aad, size_t aadlen,
                          const uint8_t *pt, size_t ptlen, uint8_t *ct);

/* AEAD_AES_128_GCM open: ctlen includes the 16-byte tag; pt receives ctlen - 16 bytes.
 * QUIC_E_DECRYPT if the tag does not verify (pt's content is then undefined). */
int quic_aead_open(const quic_keys_t *k, uint64_t pn, const uint8_t *aad, size_t aadlen,
                          const uint8_t *ct, size_t ctlen, uint8_t *pt);

/* ---- packets ----------------------------------------------------------------------------- */

/* QUIC variable-length integer (RFC 9000 16): bytes used, 0 if it runs past n. */
static inline size_t quic_varint(const uint8_t *p, size_t n, uint64_t *v)
{
    size_t len, i;
    uint64_t x;
    if (n == 0) return 0;
    len = (size_t)1 << (p[0] >> 6);
    if (len > n) return 0;
    x = p[0] & 0x3f;
    for (i = 1; i < len; i++) x = (x << 8) | p[i];
    *v = x;
    return len;
}

/* Bytes the varint encoding of v takes (v < 2^62). */
static inline size_t quic_varint_size(uint64_t v)
{
    return v < 64 ? 1 : v < 16384 ? 2 : v < 1073741824 ? 4 : 8;
}

/* Write v in exactly `len` bytes (1, 2, 4 or 8; the caller checked it fits). */
static inline void quic_varint_put(uint8_t *p, uint64_t v, size_t len)
{
    size_t i;
    for (i = 0; i < len; i++) p[len - 1 - i] = (uint8_t)(v >> (8 * i));
    p[0] |= (uint8_t)((len == 1 ? 0 : len == 2 ? 1 : len == 4 ? 2 : 3) << 6);
}

/* Parse a long header packet at p (n bytes left in the datagram) up to its Packet Number.
 * Version negotiation (version 0) returns QUIC_OK with type QUIC_PT_VERSION_NEG and end = n.
 * Retry has no Length: end = n. Unknown versions: QUIC_E_VERSION after the connection IDs
 * (RFC 8999 invariants: version, DCID and SCID are still filled in). */
int quic_parse_long(const uint8_t *p, size_t n, quic_long_hdr_t *h);

/* Frees the calling thread's contexts and key cache now, then its libcrypto thread state
 * (OPENSSL_thread_stop), instead of in the thread's exit destructors: a worker thread calls it
 * as its last step, before whoever waits for it goes on (see wt_crypto_thread_end in digest.h
 * for why). The next call of any function here in the thread makes them again. */
void quic_thread_end(void);

/* Remove header protection from and open one Initial / Handshake / 0-RTT packet whose header
 * was parsed into h, with the keys of its sender. hdr receives the unprotected header
 * (h->pn_off + pn_len bytes, at most h->pn_off + 4), pt the plaintext (h->length - pn_len - 16
 * bytes; the caller gives h->length bytes of room). *pn is the truncated packet number as sent
 * (the first packets of a connection start at 0, so it is the full number there). */
int quic_open_packet(const uint8_t *pkt, const quic_long_hdr_t *h, const quic_keys_t *k,
                            uint8_t *hdr, size_t *hdr_len, uint8_t *pt, size_t *pt_len,
                            uint64_t *pn);

/* Protect a packet in place: pkt holds the unprotected header (first byte with the packet
 * number length in its low bits, pn_len bytes of packet number at pn_off), then ptlen bytes of
 * plaintext, then 16 bytes of room for the tag. Seals, then applies header protection. The
 * sample must lie inside the packet: pn_len + ptlen >= 4 + 16 - 16, i.e. ptlen + pn_len >= 4. */
int quic_protect(uint8_t *pkt, size_t pn_off, size_t pn_len, size_t ptlen,
                        const quic_keys_t *k, uint64_t pn);

#endif /* WEBTAP_QUIC_CRYPTO_H */
