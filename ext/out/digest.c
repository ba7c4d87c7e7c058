/* The compiled half of digest.h (what the header declares); compiled once into the wtc
 * static library (ext/meson.build), not into each module that includes the header. */
/* MD5_* / SHA*_ are deprecated in OpenSSL 3.0 in favour of EVP, but still libcrypto's own
 * implementations; see digest.h for why they are used here */
#define OPENSSL_SUPPRESS_DEPRECATED
#include "digest.h"

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
    default:
        return 0;
    }
}
