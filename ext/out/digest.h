/* One-shot message digests from OpenSSL's libcrypto, in one place: MD5 and SHA-256 for the TLS
 * fingerprints (ext/tls/tls_fp.h: JA3/JA3S, JA4) and SHA-1 for the Community ID (ext/out/communityid.pyx).
 *
 * Through the digests' own functions (MD5_Init/Update/Final, SHA1_*, SHA256_*: deprecated in
 * OpenSSL 3.0 but kept, and the code the default provider itself runs), on a context on the
 * stack. Not EVP_Digest(..., EVP_md5(), NULL), which fetches the algorithm from the provider on
 * every call and allocates a context (~450-660 ns for a 38-byte SHA-1), nor the one-shot MD5() /
 * SHA256(), which OpenSSL 3 runs through a fetch as well; and no longer an EVP_MD_CTX per thread
 * re-initialised per digest (algorithms fetched once): its dispatch cost ~50 ns a digest more
 * (C loop on this machine, 38-250 bytes: SHA-1 of 38 bytes 122 -> 67 ns, MD5 of 150 bytes
 * 359 -> 309 ns, SHA-256 of 150 bytes 199 -> 162 ns). No shared state: thread-safe. An OpenSSL
 * built without its deprecated functions (OPENSSL_NO_DEPRECATED_3_0) gets that EVP path.
 */
#ifndef WEBTAP_DIGEST_H
#define WEBTAP_DIGEST_H

#include <openssl/evp.h>      /* EVP_MAX_MD_SIZE, for the callers' buffers */
#include <stddef.h>

enum { WT_MD5 = 0, WT_SHA1 = 1, WT_SHA256 = 2, WT_N_DIGESTS = 3 };

/* Digest `which` (WT_MD5, WT_SHA1, WT_SHA256) of d[0:n] into out (EVP_MAX_MD_SIZE bytes of room);
 * returns the digest's length (16, 20, 32), or 0 when libcrypto cannot give it. No GIL needed. */
unsigned int wt_digest(int which, const void *d, size_t n, unsigned char *out);

/* libcrypto at a thread's end and at the process's exit (openssl/openssl#6214).
 *
 * OpenSSL frees its global state at exit (OPENSSL_cleanup, an atexit handler), and a thread's
 * state in the thread's exit destructors (as quic_crypto.c and the EVP path here free their
 * per-thread contexts). A Python thread's join() returns when its Python state is gone, before
 * those destructors run, and a stage thread that nobody joins ends when the process does. So
 * the process's exit could run OPENSSL_cleanup while a stage thread's destructors ran: a
 * segfault or a heap corruption at exit, after the outputs were written (1 full TLS bench run
 * in 150 here, 1 in 30-76 with glibc's mmap threshold raised). Two guards:
 *   - wt_crypto_no_atexit(): no clean-up at exit (the system frees the process's memory).
 *     It takes effect only as the process's first initialisation of libcrypto; the extension
 *     modules that link it call it when they are imported (before `ssl`, which pyarrow's file
 *     systems import). Returns OPENSSL_init_crypto's result.
 *   - wt_crypto_thread_end(): this thread's libcrypto state freed now (the EVP path's digest
 *     context, OPENSSL_thread_stop), called by a worker thread as its last step, so that what
 *     remains of its end touches no libcrypto (webtap.inflight: at_end, then join).
 */
int wt_crypto_no_atexit(void);
void wt_crypto_thread_end(void);

#endif
