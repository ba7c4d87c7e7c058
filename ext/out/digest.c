/* The compiled half of digest.h (what the header declares); compiled once into the wtc
 * static library (ext/meson.build), not into each module that includes the header. */
#include "digest.h"

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
