/* One-shot message digests from OpenSSL's libcrypto, in one place: MD5 and SHA-256 for the TLS
 * fingerprints (ext/tls_fp.h: JA3/JA3S, JA4) and SHA-1 for the Community ID (ext/communityid.pyx).
 *
 * Why not EVP_Digest(..., EVP_md5(), NULL): with OpenSSL 3 a digest named by EVP_md5() /
 * EVP_sha1() is fetched from the provider again on every initialisation, and EVP_Digest also
 * allocates and frees a context per call. Measured on this machine for a 38-byte SHA-1 (the
 * Community ID input): ~450-660 ns per digest that way, ~130 ns with the algorithm fetched
 * once and a context reused. So, as ext/quic_crypto.h does for its SHA-256: every algorithm is
 * fetched once per module (pthread_once), and each thread keeps one EVP_MD_CTX, re-initialised
 * per digest (EVP_DigestInit_ex2) and freed with its thread (pthread key).
 */
#ifndef WEBTAP_DIGEST_H
#define WEBTAP_DIGEST_H

#include <openssl/evp.h>
#include <pthread.h>
#include <stddef.h>

enum { WT_MD5 = 0, WT_SHA1 = 1, WT_SHA256 = 2, WT_N_DIGESTS = 3 };

static pthread_once_t wt__digest_once = PTHREAD_ONCE_INIT;
static EVP_MD *wt__digest_md[WT_N_DIGESTS];
static pthread_key_t wt__digest_key;
static int wt__digest_key_ok;
static __thread EVP_MD_CTX *wt__digest_ctx;

static void wt__digest_free_ctx(void *ctx) { EVP_MD_CTX_free((EVP_MD_CTX *)ctx); }

static void wt__digest_init(void) {
    static const char *names[WT_N_DIGESTS] = {"MD5", "SHA1", "SHA256"};
    int i;
    for (i = 0; i < WT_N_DIGESTS; i++)
        wt__digest_md[i] = EVP_MD_fetch(NULL, names[i], NULL);   /* NULL: not offered (FIPS) */
    wt__digest_key_ok = pthread_key_create(&wt__digest_key, wt__digest_free_ctx) == 0;
}

/* Digest `which` (WT_MD5, WT_SHA1, WT_SHA256) of d[0:n] into out (EVP_MAX_MD_SIZE bytes of room);
 * returns the digest's length (16, 20, 32), or 0 when libcrypto cannot give it. No GIL needed. */
static inline unsigned int wt_digest(int which, const void *d, size_t n, unsigned char *out) {
    unsigned int len = 0;
    EVP_MD_CTX *ctx;
    pthread_once(&wt__digest_once, wt__digest_init);
    if (which < 0 || which >= WT_N_DIGESTS || wt__digest_md[which] == NULL)
        return 0;
    ctx = wt__digest_ctx;
    if (ctx == NULL) {
        ctx = EVP_MD_CTX_new();
        if (ctx == NULL)
            return 0;
        if (wt__digest_key_ok)
            pthread_setspecific(wt__digest_key, ctx);
        wt__digest_ctx = ctx;
    }
    if (EVP_DigestInit_ex2(ctx, wt__digest_md[which], NULL) != 1 || EVP_DigestUpdate(ctx, d, n) != 1
            || EVP_DigestFinal_ex(ctx, out, &len) != 1)
        return 0;
    return len;
}

#endif
