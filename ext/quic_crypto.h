/* QUIC Initial packet protection (RFC 9001 section 5, RFC 9369 section 3) on OpenSSL's libcrypto.
 *
 * Header-only: every function is static, so each extension module that includes this header
 * (through ext/quic_crypto.pxd) gets its own copy; there is no shared state but the OpenSSL
 * algorithm handles fetched once per module (pthread_once) and one set of OpenSSL contexts per
 * thread (HMAC, HKDF, AES-GCM, AES-ECB; kept for the thread's life, a few KB). Every function is
 * thread-safe and may run without the GIL.
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
 * Nothing cryptographic is written here: HKDF-Expand is OpenSSL's "HKDF" KDF, HKDF-Extract its
 * HMAC-SHA256 (see quic_initial_secrets), AES-ECB and AES-GCM are OpenSSL ciphers. Only HKDF-Expand-Label's label encoding
 * (RFC 8446 7.1: uint16 length, "tls13 " + label, empty context) is built here.
 *
 * Return values: 0 success; negative values are QUIC_E_* below (for the counters by reason).
 */
#ifndef WEBTAP_QUIC_CRYPTO_H
#define WEBTAP_QUIC_CRYPTO_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <pthread.h>

#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/hmac.h>
#include <openssl/core_names.h>
#include <openssl/params.h>

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

static const uint8_t quic_salt_v1[20] = {   /* RFC 9001 5.2 */
    0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17,
    0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad, 0xcc, 0xbb, 0x7f, 0x0a};
static const uint8_t quic_salt_v2[20] = {   /* RFC 9369 3.3.1 */
    0x0d, 0xed, 0xe3, 0xde, 0xf7, 0x00, 0xa6, 0xdb, 0x81, 0x93,
    0x81, 0xbe, 0x6e, 0x26, 0x9d, 0xcb, 0xf9, 0xbd, 0x2e, 0xd9};

static const uint8_t quic_salt_draft29[20] = {   /* draft-ietf-quic-tls-29 5.2 */
    0xaf, 0xbf, 0xec, 0x28, 0x99, 0x93, 0xd2, 0x4c, 0x9e, 0x97,
    0x86, 0xf1, 0x9c, 0x61, 0x11, 0xe0, 0x43, 0x90, 0xa8, 0x99};

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

/* ---- OpenSSL handles, fetched once per module ------------------------------------------ */

static EVP_KDF *quic__hkdf;
static EVP_CIPHER *quic__gcm, *quic__ecb;
static pthread_once_t quic__once = PTHREAD_ONCE_INIT;

static EVP_MAC *quic__hmac;
/* Per-thread contexts, made on first use and kept: creating them per call (and OpenSSL 3.0's
 * name lookups behind it) cost several microseconds per packet. */
static __thread EVP_MAC_CTX *quic__tls_hmac;
static __thread EVP_CIPHER_CTX *quic__tls_gcm, *quic__tls_ecb;

static void quic__init(void)
{
    quic__hmac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    quic__hkdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
    quic__gcm = EVP_CIPHER_fetch(NULL, "AES-128-GCM", NULL);
    quic__ecb = EVP_CIPHER_fetch(NULL, "AES-128-ECB", NULL);
}

static inline int quic__ready(void)
{
    pthread_once(&quic__once, quic__init);
    return quic__hmac && quic__hkdf && quic__gcm && quic__ecb;
}

/* HKDF-Expand (SHA-256) of key with info. One context per thread, made from the template's
 * settings once (OpenSSL 3.0 cannot duplicate an HKDF context); each call sets key and info. */
static __thread EVP_KDF_CTX *quic__tls_expand;

static int quic__hkdf_expand(const uint8_t *key, size_t keylen, const uint8_t *info, size_t infolen,
                             uint8_t *out, size_t outlen)
{
    OSSL_PARAM params[5];
    int mode = EVP_KDF_HKDF_MODE_EXPAND_ONLY;
    if (!quic__ready()) return QUIC_E_CRYPTO;
    if (!quic__tls_expand) {
        if (!(quic__tls_expand = EVP_KDF_CTX_new(quic__hkdf))) return QUIC_E_CRYPTO;
        params[0] = OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode);
        params[1] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA256", 0);
        params[2] = OSSL_PARAM_construct_end();
        if (EVP_KDF_CTX_set_params(quic__tls_expand, params) != 1) {
            EVP_KDF_CTX_free(quic__tls_expand);
            quic__tls_expand = NULL;
            return QUIC_E_CRYPTO;
        }
    }
    params[0] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)key, keylen);
    params[1] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info, infolen);
    params[2] = OSSL_PARAM_construct_end();
    return EVP_KDF_derive(quic__tls_expand, out, outlen, params) == 1 ? QUIC_OK : QUIC_E_CRYPTO;
}

/* HKDF-Expand-Label(secret, label, "", outlen) (RFC 8446 7.1), secret of 32 bytes. */
static int quic_hkdf_expand_label(const uint8_t secret[32], const char *label,
                                  uint8_t *out, size_t outlen)
{
    uint8_t info[2 + 1 + 6 + 64 + 1];
    size_t n = strlen(label);
    if (n > 64 || outlen > 255) return QUIC_E_ARG;
    info[0] = (uint8_t)(outlen >> 8);
    info[1] = (uint8_t)outlen;
    info[2] = (uint8_t)(6 + n);
    memcpy(info + 3, "tls13 ", 6);
    memcpy(info + 9, label, n);
    info[9 + n] = 0;                       /* empty context */
    return quic__hkdf_expand(secret, 32, info, 10 + n, out, outlen);
}

/* Client and server Initial secrets (32 bytes each; either may be NULL). */
static int quic_initial_secrets(uint32_t version, const uint8_t *dcid, size_t dcid_len,
                                uint8_t *client_secret, uint8_t *server_secret)
{
    uint8_t initial[32];
    size_t outlen = 0;
    int rc;
    const uint8_t *salt = version == QUIC_V1 ? quic_salt_v1 : version == QUIC_V2 ? quic_salt_v2
                        : version == QUIC_DRAFT29 ? quic_salt_draft29 : NULL;
    if (!salt) return QUIC_E_VERSION;
    if (dcid_len > QUIC_MAX_CID) return QUIC_E_CID;
    /* HKDF-Extract(salt, IKM) is HMAC-SHA256 keyed with the salt (RFC 5869 2.2). OpenSSL's HKDF
     * KDF refuses an empty IKM, which a zero-length DCID gives (legal after a Retry), so the
     * extract step calls OpenSSL's HMAC itself. */
    if (!quic__ready()) return QUIC_E_CRYPTO;
    if (!quic__tls_hmac) {
        OSSL_PARAM mp[2];
        if (!(quic__tls_hmac = EVP_MAC_CTX_new(quic__hmac))) return QUIC_E_CRYPTO;
        mp[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0);
        mp[1] = OSSL_PARAM_construct_end();
        if (EVP_MAC_CTX_set_params(quic__tls_hmac, mp) != 1) {
            EVP_MAC_CTX_free(quic__tls_hmac);
            quic__tls_hmac = NULL;
            return QUIC_E_CRYPTO;
        }
    }
    if (EVP_MAC_init(quic__tls_hmac, salt, 20, NULL) != 1
        || (dcid_len && EVP_MAC_update(quic__tls_hmac, dcid, dcid_len) != 1)
        || EVP_MAC_final(quic__tls_hmac, initial, &outlen, 32) != 1 || outlen != 32)
        return QUIC_E_CRYPTO;
    if (client_secret && (rc = quic_hkdf_expand_label(initial, "client in", client_secret, 32)))
        return rc;
    if (server_secret && (rc = quic_hkdf_expand_label(initial, "server in", server_secret, 32)))
        return rc;
    return QUIC_OK;
}

/* key / iv / hp from a 32-byte secret with the version's labels (RFC 9001 5.1, RFC 9369 3.3.2). */
static int quic_keys_from_secret(uint32_t version, const uint8_t secret[32], quic_keys_t *k)
{
    int v2 = version == QUIC_V2, rc;
    if (!quic_version_known(version)) return QUIC_E_VERSION;
    if ((rc = quic_hkdf_expand_label(secret, v2 ? "quicv2 key" : "quic key", k->key, 16))) return rc;
    if ((rc = quic_hkdf_expand_label(secret, v2 ? "quicv2 iv" : "quic iv", k->iv, 12))) return rc;
    return quic_hkdf_expand_label(secret, v2 ? "quicv2 hp" : "quic hp", k->hp, 16);
}

/* Both sides' Initial keys from the client's first Destination Connection ID (either may be NULL). */
static int quic_initial_keys(uint32_t version, const uint8_t *dcid, size_t dcid_len,
                             quic_keys_t *client, quic_keys_t *server)
{
    uint8_t cs[32], ss[32];
    int rc = quic_initial_secrets(version, dcid, dcid_len, client ? cs : NULL, server ? ss : NULL);
    if (rc) return rc;
    if (client && (rc = quic_keys_from_secret(version, cs, client))) return rc;
    if (server && (rc = quic_keys_from_secret(version, ss, server))) return rc;
    return QUIC_OK;
}

/* mask = AES-ECB(hp, sample)[0..5] (RFC 9001 5.4.3). */
static int quic_hp_mask(const uint8_t hp[16], const uint8_t *sample, uint8_t mask[5])
{
    uint8_t block[32];
    int outl = 0, rc = QUIC_E_CRYPTO;
    EVP_CIPHER_CTX *c;
    if (!quic__ready()) return QUIC_E_CRYPTO;
    if (!quic__tls_ecb && !(quic__tls_ecb = EVP_CIPHER_CTX_new())) return QUIC_E_CRYPTO;
    c = quic__tls_ecb;
    if (EVP_EncryptInit_ex2(c, quic__ecb, hp, NULL, NULL) == 1 &&
        EVP_CIPHER_CTX_set_padding(c, 0) == 1 &&
        EVP_EncryptUpdate(c, block, &outl, sample, 16) == 1 && outl == 16) {
        memcpy(mask, block, 5);
        rc = QUIC_OK;
    }
    return rc;
}

static inline void quic__nonce(const quic_keys_t *k, uint64_t pn, uint8_t nonce[12])
{
    int i;
    memcpy(nonce, k->iv, 12);
    for (i = 0; i < 8; i++) nonce[11 - i] ^= (uint8_t)(pn >> (8 * i));
}

/* AEAD_AES_128_GCM seal: ct receives ptlen bytes of ciphertext then the 16-byte tag.
 * ct may equal pt (in place). */
static int quic_aead_seal(const quic_keys_t *k, uint64_t pn, const uint8_t *aad, size_t aadlen,
                          const uint8_t *pt, size_t ptlen, uint8_t *ct)
{
    uint8_t nonce[12];
    int outl = 0, fin = 0, rc = QUIC_E_CRYPTO;
    EVP_CIPHER_CTX *c;
    if (!quic__ready()) return QUIC_E_CRYPTO;
    if (ptlen > 0x7fffffff || aadlen > 0x7fffffff) return QUIC_E_ARG;
    quic__nonce(k, pn, nonce);
    if (!quic__tls_gcm && !(quic__tls_gcm = EVP_CIPHER_CTX_new())) return QUIC_E_CRYPTO;
    c = quic__tls_gcm;
    if (EVP_EncryptInit_ex2(c, quic__gcm, k->key, nonce, NULL) == 1 &&
        EVP_EncryptUpdate(c, NULL, &outl, aad, (int)aadlen) == 1 &&
        EVP_EncryptUpdate(c, ct, &outl, pt, (int)ptlen) == 1 &&
        EVP_EncryptFinal_ex(c, ct + outl, &fin) == 1 &&
        EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_GET_TAG, QUIC_TAG_LEN, ct + ptlen) == 1)
        rc = QUIC_OK;
    return rc;
}

/* AEAD_AES_128_GCM open: ctlen includes the 16-byte tag; pt receives ctlen - 16 bytes.
 * QUIC_E_DECRYPT if the tag does not verify (pt's content is then undefined). */
static int quic_aead_open(const quic_keys_t *k, uint64_t pn, const uint8_t *aad, size_t aadlen,
                          const uint8_t *ct, size_t ctlen, uint8_t *pt)
{
    uint8_t nonce[12], tag[QUIC_TAG_LEN];
    int outl = 0, fin = 0, rc = QUIC_E_CRYPTO;
    EVP_CIPHER_CTX *c;
    if (ctlen < QUIC_TAG_LEN) return QUIC_E_TRUNCATED;
    if (!quic__ready()) return QUIC_E_CRYPTO;
    if (ctlen > 0x7fffffff || aadlen > 0x7fffffff) return QUIC_E_ARG;
    quic__nonce(k, pn, nonce);
    memcpy(tag, ct + ctlen - QUIC_TAG_LEN, QUIC_TAG_LEN);
    if (!quic__tls_gcm && !(quic__tls_gcm = EVP_CIPHER_CTX_new())) return QUIC_E_CRYPTO;
    c = quic__tls_gcm;
    if (EVP_DecryptInit_ex2(c, quic__gcm, k->key, nonce, NULL) == 1 &&
        EVP_DecryptUpdate(c, NULL, &outl, aad, (int)aadlen) == 1 &&
        EVP_DecryptUpdate(c, pt, &outl, ct, (int)(ctlen - QUIC_TAG_LEN)) == 1 &&
        EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_SET_TAG, QUIC_TAG_LEN, tag) == 1)
        rc = EVP_DecryptFinal_ex(c, pt + outl, &fin) == 1 ? QUIC_OK : QUIC_E_DECRYPT;
    return rc;
}

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
static int quic_parse_long(const uint8_t *p, size_t n, quic_long_hdr_t *h)
{
    size_t off;
    uint64_t v;
    size_t k;
    memset(h, 0, sizeof *h);
    if (n < 7) return QUIC_E_SHORT;
    h->first = p[0];
    if (!(p[0] & 0x80)) return QUIC_E_NOT_LONG;
    h->version = ((uint32_t)p[1] << 24) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 8) | p[4];
    h->dcid_len = p[5];
    if (h->dcid_len > QUIC_MAX_CID && h->version != 0 && quic_version_known(h->version))
        return QUIC_E_CID;
    h->dcid_off = 6;
    off = 6 + (size_t)h->dcid_len;
    if (off + 1 > n) return QUIC_E_TRUNCATED;
    h->scid_len = p[off];
    h->scid_off = off + 1;
    off += 1 + (size_t)h->scid_len;
    if (off > n) return QUIC_E_TRUNCATED;
    if (h->version == 0) {
        h->type = QUIC_PT_VERSION_NEG;
        h->end = n;
        return QUIC_OK;
    }
    if (h->scid_len > QUIC_MAX_CID && quic_version_known(h->version)) return QUIC_E_CID;
    h->type = (uint8_t)quic_type_from_bits(h->version, (p[0] >> 4) & 3);
    if (!quic_version_known(h->version)) return QUIC_E_VERSION;
    if (!(p[0] & 0x40)) return QUIC_E_FIXED_BIT;
    if (h->type == QUIC_PT_RETRY) {
        h->end = n;
        return QUIC_OK;
    }
    if (h->type == QUIC_PT_INITIAL) {
        if (!(k = quic_varint(p + off, n - off, &v))) return QUIC_E_TRUNCATED;
        off += k;
        if (v > n - off) return QUIC_E_TRUNCATED;
        h->token_off = off;
        h->token_len = v;
        off += (size_t)v;
    }
    if (!(k = quic_varint(p + off, n - off, &v))) return QUIC_E_TRUNCATED;
    off += k;
    if (v > n - off) return QUIC_E_TRUNCATED;
    h->length = v;
    h->pn_off = off;
    h->end = off + (size_t)v;
    return QUIC_OK;
}

/* Remove header protection from and open one Initial / Handshake / 0-RTT packet whose header
 * was parsed into h, with the keys of its sender. hdr receives the unprotected header
 * (h->pn_off + pn_len bytes, at most h->pn_off + 4), pt the plaintext (h->length - pn_len - 16
 * bytes; the caller gives h->length bytes of room). *pn is the truncated packet number as sent
 * (the first packets of a connection start at 0, so it is the full number there). */
static int quic_open_packet(const uint8_t *pkt, const quic_long_hdr_t *h, const quic_keys_t *k,
                            uint8_t *hdr, size_t *hdr_len, uint8_t *pt, size_t *pt_len,
                            uint64_t *pn)
{
    uint8_t mask[5];
    size_t pn_len, i;
    uint64_t x = 0;
    int rc;
    if (h->length < 4 + QUIC_SAMPLE_LEN) return QUIC_E_TRUNCATED;   /* the sample must exist */
    if ((rc = quic_hp_mask(k->hp, pkt + h->pn_off + 4, mask))) return rc;
    memcpy(hdr, pkt, h->pn_off);
    hdr[0] = pkt[0] ^ (mask[0] & 0x0f);
    pn_len = (size_t)(hdr[0] & 3) + 1;
    if (h->length < pn_len + QUIC_TAG_LEN) return QUIC_E_TRUNCATED;
    for (i = 0; i < pn_len; i++) {
        hdr[h->pn_off + i] = pkt[h->pn_off + i] ^ mask[1 + i];
        x = (x << 8) | hdr[h->pn_off + i];
    }
    *hdr_len = h->pn_off + pn_len;
    *pn = x;
    *pt_len = (size_t)h->length - pn_len - QUIC_TAG_LEN;
    return quic_aead_open(k, x, hdr, *hdr_len, pkt + *hdr_len,
                          (size_t)h->length - pn_len, pt);
}

/* Protect a packet in place: pkt holds the unprotected header (first byte with the packet
 * number length in its low bits, pn_len bytes of packet number at pn_off), then ptlen bytes of
 * plaintext, then 16 bytes of room for the tag. Seals, then applies header protection. The
 * sample must lie inside the packet: pn_len + ptlen >= 4 + 16 - 16, i.e. ptlen + pn_len >= 4. */
static int quic_protect(uint8_t *pkt, size_t pn_off, size_t pn_len, size_t ptlen,
                        const quic_keys_t *k, uint64_t pn)
{
    uint8_t mask[5];
    size_t hdr_len = pn_off + pn_len, i;
    int rc;
    if (pn_len < 1 || pn_len > 4 || pn_len + ptlen < 4) return QUIC_E_ARG;
    if ((rc = quic_aead_seal(k, pn, pkt, hdr_len, pkt + hdr_len, ptlen, pkt + hdr_len))) return rc;
    if ((rc = quic_hp_mask(k->hp, pkt + pn_off + 4, mask))) return rc;
    pkt[0] ^= mask[0] & ((pkt[0] & 0x80) ? 0x0f : 0x1f);
    for (i = 0; i < pn_len; i++) pkt[pn_off + i] ^= mask[1 + i];
    return QUIC_OK;
}

#endif /* WEBTAP_QUIC_CRYPTO_H */
