/* The compiled half of digest.h (what the header declares); compiled once into the wtc
 * static library (ext/meson.build), not into each module that includes the header. */
#define OPENSSL_SUPPRESS_DEPRECATED     /* MD5_Init & co.: deprecated in OpenSSL 3.0, kept */
#include "digest.h"
#include <openssl/crypto.h>

#ifndef OPENSSL_NO_DEPRECATED_3_0
#include <openssl/md5.h>
#include <openssl/sha.h>

unsigned int wt_digest(int which, const void *d, size_t n, unsigned char *out) {
    switch (which) {
    case WT_MD5: {
        MD5_CTX c;
        if (MD5_Init(&c) != 1 || MD5_Update(&c, d, n) != 1 || MD5_Final(out, &c) != 1)
            return 0;
        return 16;
    }
    case WT_SHA1: {
        SHA_CTX c;
        if (SHA1_Init(&c) != 1 || SHA1_Update(&c, d, n) != 1 || SHA1_Final(out, &c) != 1)
            return 0;
        return 20;
    }
    case WT_SHA256: {
        SHA256_CTX c;
        if (SHA256_Init(&c) != 1 || SHA256_Update(&c, d, n) != 1 || SHA256_Final(out, &c) != 1)
            return 0;
        return 32;
    }
    }
    return 0;
}

#else   /* an OpenSSL built without its deprecated functions: fetched once, a context per thread */
#include <pthread.h>

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

unsigned int wt_digest(int which, const void *d, size_t n, unsigned char *out) {
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

int wt_crypto_no_atexit(void) {
    return OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL);
}

void wt_crypto_thread_end(void) {
#ifdef OPENSSL_NO_DEPRECATED_3_0
    EVP_MD_CTX *ctx = wt__digest_ctx;
    wt__digest_ctx = NULL;
    if (ctx != NULL) {
        if (wt__digest_key_ok)
            pthread_setspecific(wt__digest_key, NULL);
        EVP_MD_CTX_free(ctx);
    }
#endif
    OPENSSL_thread_stop();
}
