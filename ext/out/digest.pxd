# One-shot digests and libcrypto's thread end / exit clean-up (ext/out/digest.h: the contracts,
# and why a worker thread ends its libcrypto state itself). A module that cimports this needs the
# libcrypto dependency in ext/meson.build.
cdef extern from "digest.h" nogil:
    enum:
        WT_MD5
        WT_SHA1
        WT_SHA256
    unsigned int wt_digest(int which, const void *d, size_t n, unsigned char *out)
    int wt_crypto_no_atexit()
    void wt_crypto_thread_end()
