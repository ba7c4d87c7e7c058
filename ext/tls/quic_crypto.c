/* The compiled half of quic_crypto.h (what the header declares); compiled once into the wtc
 * static library (ext/meson.build), not into each module that includes the header. */
/* SHA-256's own functions (SHA256_Init/Update/Final, deprecated since OpenSSL 3.0 but kept;
 * the default provider's SHA-256 calls them) for the HMACs of the key derivation: see
 * "OpenSSL objects" below */
#define OPENSSL_SUPPRESS_DEPRECATED
#include "quic_crypto.h"
#include "digest.h"
#include <openssl/sha.h>
#ifdef OPENSSL_NO_DEPRECATED_3_0
#error "ext/tls/quic_crypto.c needs libcrypto's SHA256_Init/Update/Final (an OpenSSL built with no-deprecated lacks them)"
#endif

static const uint8_t quic_salt_v1[20] = {   /* RFC 9001 5.2 */
    0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17,
    0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad, 0xcc, 0xbb, 0x7f, 0x0a};
static const uint8_t quic_salt_v2[20] = {   /* RFC 9369 3.3.1 */
    0x0d, 0xed, 0xe3, 0xde, 0xf7, 0x00, 0xa6, 0xdb, 0x81, 0x93,
    0x81, 0xbe, 0x6e, 0x26, 0x9d, 0xcb, 0xf9, 0xbd, 0x2e, 0xd9};

static const uint8_t quic_salt_draft29[20] = {   /* draft-ietf-quic-tls-29 5.2 */
    0xaf, 0xbf, 0xec, 0x28, 0x99, 0x93, 0xd2, 0x4c, 0x9e, 0x97,
    0x86, 0xf1, 0x9c, 0x61, 0x11, 0xe0, 0x43, 0x90, 0xa8, 0x99};

/* ---- OpenSSL objects, fetched once per module; contexts made once per thread ------------ */
/*
 * Why it is built this way (measured, thread CPU time, OpenSSL 3.0): the first version called
 * OpenSSL's "HKDF" EVP_KDF and "HMAC" EVP_MAC per label and initialised its ciphers by
 * algorithm per call; one side's Initial keys took 3.3 us, of which almost all was OpenSSL 3's
 * per-call parameter and provider plumbing, not SHA-256 (86 ns per digest call). So:
 *   - AES-128-GCM and AES-128-ECB (EVP_CIPHER) are fetched once per module;
 *   - HMAC-SHA256 (RFC 2104) is assembled over libcrypto's SHA-256: the SHA-256 states after
 *     the key XOR ipad / opad blocks are kept, and each HMAC copies them, so a key used for
 *     several labels is absorbed once; the three salts' states are made once per thread. The
 *     states are SHA256_CTX structures (SHA256_Init/Update/Final), copied by assignment: an
 *     EVP_MD_CTX_copy_ex frees and duplicates the provider's context (a malloc and a free) at
 *     every copy, and with the EVP calls' dispatch both sides' keys of a new DCID took 2.83 us,
 *     over SHA256_CTX 1.68 us (a C loop of 200,000 DCIDs; 26 SHA-256 blocks either way);
 *   - HKDF-Extract and HKDF-Expand (RFC 5869 2.2, 2.3) are those HMACs;
 *   - the cipher contexts are kept per thread with their algorithm set, and each call only
 *     re-keys them (EVP_CipherInit_ex2 with a NULL cipher);
 *   - the keys of the last QUIC_KEY_CACHE DCIDs are kept per thread (quic_initial_keys), so a
 *     connection's keys are derived once: the filter opens the client's Initials with them and
 *     forges the close with the server's, the analyzer opens both sides' packets.
 * Nothing here is a cipher or a hash: SHA-256 and AES are libcrypto's. The results are checked
 * byte for byte against RFC 9001 A.1-A.3 and RFC 9369 A.1-A.3 and against Python's hmac and
 * cryptography's HKDFExpand / AESGCM on random DCIDs (tests/quic/test_quic_crypto.py).
 */

#define QUIC_KEY_CACHE 64      /* DCIDs whose keys each thread keeps (direct-mapped) */

typedef struct {
    SHA256_CTX in, out;        /* SHA-256 after (key ^ ipad), after (key ^ opad) */
} quic__hmac_key_t;

typedef struct {
    uint32_t version;          /* 0: empty */
    uint8_t dcid_len;
    uint8_t have;              /* 1 client keys, 2 server keys */
    uint8_t dcid[QUIC_MAX_CID];
    uint8_t initial[32];       /* initial_secret */
    quic_keys_t client, server;
} quic__cache_t;

typedef struct {
    quic__hmac_key_t salt[3];  /* v1, v2, draft-29 */
    quic__hmac_key_t key;      /* the key of the HMACs under way */
    EVP_CIPHER_CTX *seal, *open[2], *ecb;
    /* the keys `open[i]` and `ecb` hold (valid when *_keyed): a packet under the same key only
     * sets the nonce (GCM) or nothing (ECB), skipping the AES key schedule and GHASH set-up.
     * Two GCM contexts, the one used last and the other: a connection's client and server
     * Initials come in turns under two keys, and one context was re-keyed at almost every
     * packet (a 1,200-byte Initial opened in 0.48 us under the key held, 0.65 us re-keying) */
    uint8_t open_key[2][16], ecb_key[16];
    int open_keyed[2], ecb_keyed, open_last;
    quic__cache_t cache[QUIC_KEY_CACHE];
} quic__thread_t;

static EVP_CIPHER *quic__gcm, *quic__ecb;
static pthread_once_t quic__once = PTHREAD_ONCE_INIT;
static pthread_key_t quic__key;            /* frees a thread's contexts when it ends */
static int quic__key_ok;
static __thread quic__thread_t *quic__t;
static __thread int quic__t_failed;

static void quic__free_thread(void *arg)
{
    quic__thread_t *t = (quic__thread_t *)arg;
    if (!t) return;
    EVP_CIPHER_CTX_free(t->seal);
    EVP_CIPHER_CTX_free(t->open[0]);
    EVP_CIPHER_CTX_free(t->open[1]);
    EVP_CIPHER_CTX_free(t->ecb);
    OPENSSL_cleanse(t, sizeof *t);      /* the cached keys and the HMAC states */
    free(t);
}

static void quic__init(void)
{
    quic__gcm = EVP_CIPHER_fetch(NULL, "AES-128-GCM", NULL);
    quic__ecb = EVP_CIPHER_fetch(NULL, "AES-128-ECB", NULL);
    quic__key_ok = pthread_key_create(&quic__key, quic__free_thread) == 0;
}

void quic_thread_end(void)
{
    quic__thread_t *t = quic__t;
    quic__t = NULL;
    quic__t_failed = 0;
    if (t) {
        if (quic__key_ok) pthread_setspecific(quic__key, NULL);
        quic__free_thread(t);
    }
    wt_crypto_thread_end();
}

/* HMAC-SHA256 key (at most 64 bytes, as all of ours are) into the ipad / opad states. */
static int quic__hmac_setkey(quic__hmac_key_t *hk, const uint8_t *key, size_t keylen)
{
    uint8_t pad[64];
    size_t i;
    int ok;
    if (keylen > 64) return QUIC_E_ARG;
    memset(pad, 0x36, 64);
    for (i = 0; i < keylen; i++) pad[i] ^= key[i];
    ok = SHA256_Init(&hk->in) == 1 && SHA256_Update(&hk->in, pad, 64) == 1;
    for (i = 0; i < 64; i++) pad[i] ^= 0x36 ^ 0x5c;
    ok = ok && SHA256_Init(&hk->out) == 1 && SHA256_Update(&hk->out, pad, 64) == 1;
    OPENSSL_cleanse(pad, sizeof pad);
    return ok ? QUIC_OK : QUIC_E_CRYPTO;
}

/* HMAC-SHA256(key of hk, a || b || c) (each part may be empty). */
static int quic__hmac(const quic__hmac_key_t *hk, const uint8_t *a, size_t an,
                      const uint8_t *b, size_t bn, const uint8_t *c, size_t cn, uint8_t out[32])
{
    uint8_t inner[32];
    SHA256_CTX w = hk->in;
    int ok = (an == 0 || SHA256_Update(&w, a, an) == 1)
             && (bn == 0 || SHA256_Update(&w, b, bn) == 1)
             && (cn == 0 || SHA256_Update(&w, c, cn) == 1)
             && SHA256_Final(inner, &w) == 1;
    w = hk->out;
    ok = ok && SHA256_Update(&w, inner, 32) == 1 && SHA256_Final(out, &w) == 1;
    return ok ? QUIC_OK : QUIC_E_CRYPTO;
}

/* This thread's contexts, made on its first call (NULL: OpenSSL refused; not retried). */
static quic__thread_t *quic__thread(void)
{
    quic__thread_t *t = quic__t;
    const uint8_t *salts[3];
    int i, ok;
    if (t) return t;
    if (quic__t_failed) return NULL;
    pthread_once(&quic__once, quic__init);
    quic__t_failed = 1;
    if (!quic__gcm || !quic__ecb) return NULL;
    if (!(t = (quic__thread_t *)calloc(1, sizeof *t))) return NULL;
    ok = (t->seal = EVP_CIPHER_CTX_new()) && (t->open[0] = EVP_CIPHER_CTX_new())
         && (t->open[1] = EVP_CIPHER_CTX_new()) && (t->ecb = EVP_CIPHER_CTX_new());
    ok = ok && EVP_EncryptInit_ex2(t->seal, quic__gcm, NULL, NULL, NULL) == 1
         && EVP_DecryptInit_ex2(t->open[0], quic__gcm, NULL, NULL, NULL) == 1
         && EVP_DecryptInit_ex2(t->open[1], quic__gcm, NULL, NULL, NULL) == 1
         && EVP_EncryptInit_ex2(t->ecb, quic__ecb, NULL, NULL, NULL) == 1
         && EVP_CIPHER_CTX_set_padding(t->ecb, 0) == 1;
    salts[0] = quic_salt_v1;
    salts[1] = quic_salt_v2;
    salts[2] = quic_salt_draft29;
    for (i = 0; ok && i < 3; i++)
        ok = quic__hmac_setkey(&t->salt[i], salts[i], 20) == QUIC_OK;
    if (!ok) {
        quic__free_thread(t);
        return NULL;
    }
    if (quic__key_ok) pthread_setspecific(quic__key, t);
    quic__t_failed = 0;
    quic__t = t;
    return t;
}

/* HKDF-Expand(PRK = the key of t->key, info, outlen) (RFC 5869 2.3), outlen <= 255 * 32. */
static int quic__expand(quic__thread_t *t, const uint8_t *info, size_t infolen, uint8_t *out, size_t outlen)
{
    uint8_t T[32], ctr = 1;
    size_t have = 0, take;
    int rc;
    while (have < outlen) {
        if ((rc = quic__hmac(&t->key, T, ctr == 1 ? 0 : 32, info, infolen, &ctr, 1, T))) return rc;
        take = outlen - have < 32 ? outlen - have : 32;
        memcpy(out + have, T, take);
        have += take;
        ctr++;
    }
    return QUIC_OK;
}

/* HKDF-Expand-Label's info (RFC 8446 7.1: uint16 length, "tls13 " + label, empty context). */
static size_t quic__label(uint8_t info[2 + 1 + 6 + 64 + 1], const char *label, size_t outlen)
{
    size_t n = strlen(label);
    if (n > 64) return 0;
    info[0] = (uint8_t)(outlen >> 8);
    info[1] = (uint8_t)outlen;
    info[2] = (uint8_t)(6 + n);
    memcpy(info + 3, "tls13 ", 6);
    memcpy(info + 9, label, n);
    info[9 + n] = 0;                       /* empty context */
    return 10 + n;
}

int quic_hkdf_expand_label(const uint8_t secret[32], const char *label,
                                  uint8_t *out, size_t outlen)
{
    uint8_t info[2 + 1 + 6 + 64 + 1];
    size_t il = quic__label(info, label, outlen);
    quic__thread_t *t = quic__thread();
    int rc;
    if (!il || outlen > 255) return QUIC_E_ARG;
    if (!t) return QUIC_E_CRYPTO;
    if ((rc = quic__hmac_setkey(&t->key, secret, 32))) return rc;
    return quic__expand(t, info, il, out, outlen);
}

static int quic__salt_index(uint32_t version)
{
    return version == QUIC_V1 ? 0 : version == QUIC_V2 ? 1 : version == QUIC_DRAFT29 ? 2 : -1;
}

/* initial_secret = HKDF-Extract(salt, DCID) (RFC 9001 5.2): HMAC keyed with the version's salt.
 * A zero-length DCID (legal after a Retry) is an empty message. */
static int quic__extract(quic__thread_t *t, uint32_t version, const uint8_t *dcid, size_t dcid_len,
                         uint8_t initial[32])
{
    int s = quic__salt_index(version);
    if (s < 0) return QUIC_E_VERSION;
    if (dcid_len > QUIC_MAX_CID) return QUIC_E_CID;
    return quic__hmac(&t->salt[s], dcid, dcid_len, NULL, 0, NULL, 0, initial);
}

/* One side's secret from initial_secret, then its key / iv / hp with the version's labels
 * (RFC 9001 5.1-5.2, RFC 9369 3.3.2). The secret is absorbed once for the three labels. */
static int quic__side(quic__thread_t *t, uint32_t version, const uint8_t initial[32], int server,
                      uint8_t *secret_out, quic_keys_t *k)
{
    uint8_t info[2 + 1 + 6 + 64 + 1], secret[32];
    int v2 = version == QUIC_V2, rc;
    size_t il;
    if ((rc = quic__hmac_setkey(&t->key, initial, 32))) return rc;
    il = quic__label(info, server ? "server in" : "client in", 32);
    if ((rc = quic__expand(t, info, il, secret, 32))) return rc;
    if (secret_out) memcpy(secret_out, secret, 32);
    if (k) {
        if ((rc = quic__hmac_setkey(&t->key, secret, 32))) return rc;
        il = quic__label(info, v2 ? "quicv2 key" : "quic key", 16);
        if ((rc = quic__expand(t, info, il, k->key, 16))) return rc;
        il = quic__label(info, v2 ? "quicv2 iv" : "quic iv", 12);
        if ((rc = quic__expand(t, info, il, k->iv, 12))) return rc;
        il = quic__label(info, v2 ? "quicv2 hp" : "quic hp", 16);
        if ((rc = quic__expand(t, info, il, k->hp, 16))) return rc;
    }
    OPENSSL_cleanse(secret, sizeof secret);
    return QUIC_OK;
}

int quic_initial_secrets(uint32_t version, const uint8_t *dcid, size_t dcid_len,
                                uint8_t *client_secret, uint8_t *server_secret)
{
    uint8_t initial[32];
    quic__thread_t *t;
    int rc;
    if (quic__salt_index(version) < 0) return QUIC_E_VERSION;
    if (dcid_len > QUIC_MAX_CID) return QUIC_E_CID;
    if (!(t = quic__thread())) return QUIC_E_CRYPTO;
    if ((rc = quic__extract(t, version, dcid, dcid_len, initial))) return rc;
    if (client_secret && (rc = quic__side(t, version, initial, 0, client_secret, NULL))) return rc;
    if (server_secret && (rc = quic__side(t, version, initial, 1, server_secret, NULL))) return rc;
    return QUIC_OK;
}

int quic_keys_from_secret(uint32_t version, const uint8_t secret[32], quic_keys_t *k)
{
    int v2 = version == QUIC_V2, rc;
    if (!quic_version_known(version)) return QUIC_E_VERSION;
    if ((rc = quic_hkdf_expand_label(secret, v2 ? "quicv2 key" : "quic key", k->key, 16))) return rc;
    if ((rc = quic_hkdf_expand_label(secret, v2 ? "quicv2 iv" : "quic iv", k->iv, 12))) return rc;
    return quic_hkdf_expand_label(secret, v2 ? "quicv2 hp" : "quic hp", k->hp, 16);
}

int quic_initial_keys(uint32_t version, const uint8_t *dcid, size_t dcid_len,
                             quic_keys_t *client, quic_keys_t *server)
{
    quic__thread_t *t;
    quic__cache_t *e;
    uint32_t h = 2166136261u ^ version;
    size_t i;
    int rc;
    if (quic__salt_index(version) < 0) return QUIC_E_VERSION;
    if (dcid_len > QUIC_MAX_CID) return QUIC_E_CID;
    if (!(t = quic__thread())) return QUIC_E_CRYPTO;
    for (i = 0; i < dcid_len; i++) h = (h ^ dcid[i]) * 16777619u;
    e = &t->cache[(h ^ (h >> 16)) % QUIC_KEY_CACHE];
    if (e->version != version || e->dcid_len != dcid_len || memcmp(e->dcid, dcid, dcid_len) != 0) {
        e->version = 0;
        e->have = 0;
        if ((rc = quic__extract(t, version, dcid, dcid_len, e->initial))) return rc;
        e->dcid_len = (uint8_t)dcid_len;
        if (dcid_len) memcpy(e->dcid, dcid, dcid_len);
        e->version = version;
    }
    if (client && !(e->have & 1)) {
        if ((rc = quic__side(t, version, e->initial, 0, NULL, &e->client))) return rc;
        e->have |= 1;
    }
    if (server && !(e->have & 2)) {
        if ((rc = quic__side(t, version, e->initial, 1, NULL, &e->server))) return rc;
        e->have |= 2;
    }
    if (client) *client = e->client;
    if (server) *server = e->server;
    return QUIC_OK;
}

int quic_hp_mask(const uint8_t hp[16], const uint8_t *sample, uint8_t mask[5])
{
    uint8_t block[32];
    int outl = 0;
    quic__thread_t *t = quic__thread();
    if (!t) return QUIC_E_CRYPTO;
    if (!t->ecb_keyed || memcmp(t->ecb_key, hp, 16) != 0) {
        t->ecb_keyed = 0;
        if (EVP_EncryptInit_ex2(t->ecb, NULL, hp, NULL, NULL) != 1) return QUIC_E_CRYPTO;
        memcpy(t->ecb_key, hp, 16);
        t->ecb_keyed = 1;
    }
    if (EVP_EncryptUpdate(t->ecb, block, &outl, sample, 16) != 1 || outl != 16) {
        t->ecb_keyed = 0;
        return QUIC_E_CRYPTO;
    }
    memcpy(mask, block, 5);
    return QUIC_OK;
}

static void quic__nonce(const quic_keys_t *k, uint64_t pn, uint8_t nonce[12])
{
    int i;
    memcpy(nonce, k->iv, 12);
    for (i = 0; i < 8; i++) nonce[11 - i] ^= (uint8_t)(pn >> (8 * i));
}

int quic_aead_seal(const quic_keys_t *k, uint64_t pn, const uint8_t *aad, size_t aadlen,
                          const uint8_t *pt, size_t ptlen, uint8_t *ct)
{
    uint8_t nonce[12];
    int outl = 0, fin = 0;
    quic__thread_t *t;
    EVP_CIPHER_CTX *c;
    if (ptlen > 0x7fffffff || aadlen > 0x7fffffff) return QUIC_E_ARG;
    if (!(t = quic__thread())) return QUIC_E_CRYPTO;
    c = t->seal;
    quic__nonce(k, pn, nonce);
    if (EVP_EncryptInit_ex2(c, NULL, k->key, nonce, NULL) == 1 &&
        (aadlen == 0 || EVP_EncryptUpdate(c, NULL, &outl, aad, (int)aadlen) == 1) &&
        (ptlen == 0 || EVP_EncryptUpdate(c, ct, &outl, pt, (int)ptlen) == 1) &&
        EVP_EncryptFinal_ex(c, ct + (ptlen ? outl : 0), &fin) == 1 &&
        EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_GET_TAG, QUIC_TAG_LEN, ct + ptlen) == 1)
        return QUIC_OK;
    return QUIC_E_CRYPTO;
}

int quic_aead_open(const quic_keys_t *k, uint64_t pn, const uint8_t *aad, size_t aadlen,
                          const uint8_t *ct, size_t ctlen, uint8_t *pt)
{
    uint8_t nonce[12], tag[QUIC_TAG_LEN];
    int outl = 0, fin = 0;
    quic__thread_t *t;
    EVP_CIPHER_CTX *c;
    int i;
    if (ctlen < QUIC_TAG_LEN) return QUIC_E_TRUNCATED;
    if (ctlen > 0x7fffffff || aadlen > 0x7fffffff) return QUIC_E_ARG;
    if (!(t = quic__thread())) return QUIC_E_CRYPTO;
    quic__nonce(k, pn, nonce);
    memcpy(tag, ct + ctlen - QUIC_TAG_LEN, QUIC_TAG_LEN);
    /* the context holding this key, the last used first; else the other one is re-keyed */
    i = t->open_last;
    if (!(t->open_keyed[i] && memcmp(t->open_key[i], k->key, 16) == 0))
        i ^= 1;
    c = t->open[i];
    t->open_last = i;
    if (t->open_keyed[i] && memcmp(t->open_key[i], k->key, 16) == 0) {
        if (EVP_DecryptInit_ex2(c, NULL, NULL, nonce, NULL) != 1) {
            t->open_keyed[i] = 0;
            return QUIC_E_CRYPTO;
        }
    } else {
        t->open_keyed[i] = 0;
        if (EVP_DecryptInit_ex2(c, NULL, k->key, nonce, NULL) != 1) return QUIC_E_CRYPTO;
        memcpy(t->open_key[i], k->key, 16);
        t->open_keyed[i] = 1;
    }
    if (
        (aadlen == 0 || EVP_DecryptUpdate(c, NULL, &outl, aad, (int)aadlen) == 1) &&
        (ctlen == QUIC_TAG_LEN || EVP_DecryptUpdate(c, pt, &outl, ct, (int)(ctlen - QUIC_TAG_LEN)) == 1) &&
        EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_SET_TAG, QUIC_TAG_LEN, tag) == 1)
        return EVP_DecryptFinal_ex(c, pt + (ctlen == QUIC_TAG_LEN ? 0 : outl), &fin) == 1
               ? QUIC_OK : QUIC_E_DECRYPT;
    t->open_keyed[i] = 0;       /* keyed again next time, whatever state this left */
    return QUIC_E_CRYPTO;
}

int quic_parse_long(const uint8_t *p, size_t n, quic_long_hdr_t *h)
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

int quic_open_packet(const uint8_t *pkt, const quic_long_hdr_t *h, const quic_keys_t *k,
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

int quic_protect(uint8_t *pkt, size_t pn_off, size_t pn_len, size_t ptlen,
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