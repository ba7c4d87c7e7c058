/* One-shot message digests from OpenSSL's libcrypto, in one place: MD5 and SHA-256 for the TLS
 * fingerprints (ext/tls/tls_fp.h: JA3/JA3S, JA4) and SHA-1 for the Community ID (ext/out/communityid.pyx).
 *
 * Why not EVP_Digest(..., EVP_md5(), NULL): with OpenSSL 3 a digest named by EVP_md5() /
 * EVP_sha1() is fetched from the provider again on every initialisation, and EVP_Digest also
 * allocates and frees a context per call. Measured on this machine for a 38-byte SHA-1 (the
 * Community ID input): ~450-660 ns per digest that way, ~130 ns with the algorithm fetched
 * once and a context reused. So, as ext/tls/quic_crypto.h does for its SHA-256: every algorithm is
 * fetched once per module (pthread_once), and each thread keeps one EVP_MD_CTX, re-initialised
 * per digest (EVP_DigestInit_ex2) and freed with its thread (pthread key).
 */
#ifndef WEBTAP_DIGEST_H
#define WEBTAP_DIGEST_H

#include <openssl/evp.h>
#include <pthread.h>
#include <stddef.h>

enum { WT_MD5 = 0, WT_SHA1 = 1, WT_SHA256 = 2, WT_N_DIGESTS = 3 };

/* Digest `which` (WT_MD5, WT_SHA1, WT_SHA256) of d[0:n] into out (EVP_MAX_MD_SIZE bytes of room);
 * returns the digest's length (16, 20, 32), or 0 when libcrypto cannot give it. No GIL needed. */
unsigned int wt_digest(int which, const void *d, size_t n, unsigned char *out);

#endif
