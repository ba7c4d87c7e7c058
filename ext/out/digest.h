/* One-shot message digests from OpenSSL's libcrypto, in one place: MD5 and SHA-256 for the TLS
 * fingerprints (ext/tls/tls_fp.h: JA3/JA3S, JA4) and SHA-1 for the Community ID (ext/out/communityid.pyx).
 *
 * Why not EVP_Digest(..., EVP_md5(), NULL): with OpenSSL 3 a digest named by EVP_md5() /
 * EVP_sha1() is fetched from the provider again on every initialisation, and EVP_Digest also
 * allocates and frees a context per call. Measured on this machine for a 38-byte SHA-1 (the
 * Community ID input): ~450-660 ns per digest that way, ~130 ns with the algorithm fetched
 * once and a context reused. Even that reused EVP context pays OpenSSL 3's provider plumbing
 * per digest (EVP_DigestInit_ex2 takes and drops references, Final goes through the provider):
 * a 150-byte MD5 took 353 ns that way and 307 ns with libcrypto's MD5_Init/Update/Final on a
 * stack context, a SHA-256 194 vs 145 ns (OpenSSL 3.0.19, thread CPU time), at four digests
 * per handshake. So the digests are libcrypto's low-level functions (deprecated in 3.0, not
 * removed; same algorithms, same bytes): no state, no allocation, any thread.
 */
#ifndef WEBTAP_DIGEST_H
#define WEBTAP_DIGEST_H

#include <openssl/evp.h>
#include <stddef.h>

enum { WT_MD5 = 0, WT_SHA1 = 1, WT_SHA256 = 2, WT_N_DIGESTS = 3 };

/* Digest `which` (WT_MD5, WT_SHA1, WT_SHA256) of d[0:n] into out (EVP_MAX_MD_SIZE bytes of room);
 * returns the digest's length (16, 20, 32), or 0 when libcrypto cannot give it. No GIL needed. */
unsigned int wt_digest(int which, const void *d, size_t n, unsigned char *out);

#endif
