# Community ID v1 of one flow (Corelight's spec; communityid.pyx has the column function): an
# inline for each module that writes ids in its own C loop (ext/out/xcolumns.pyx, the exchange
# records). Needs the libcrypto dependency in ext/meson.build.
from libc.stdint cimport uint8_t, uint16_t
from libc.string cimport memcmp, memcpy

cdef extern from "<openssl/evp.h>" nogil:
    int EVP_EncodeBlock(unsigned char *t, const unsigned char *f, int n)

# SHA-1 through ext/out/digest.h: libcrypto's SHA1_Init/Update/Final on a stack context (an
# implicit EVP_sha1() fetch per record cost ~3-4x the digest itself under OpenSSL 3)
from digest cimport WT_SHA1, wt_digest

cdef enum:
    C_ID_LEN = 30      # "1:" + 28 base64 characters (20-byte SHA-1 digest, one '=' of padding)


cdef inline int cid_hash_one(uint16_t seed,
                             const uint8_t *a, uint16_t ap, const uint8_t *b, uint16_t bp,
                             int alen, uint8_t proto, uint8_t *out) noexcept nogil:
    """One id into out[0:30]; returns 0, or -1 when libcrypto fails."""
    cdef uint8_t buf[2 + 16 + 16 + 1 + 1 + 2 + 2]
    cdef uint8_t dig[64]
    cdef uint8_t b64[32]
    cdef int c, k = 0
    cdef const uint8_t *t
    cdef uint16_t tp
    c = memcmp(a, b, alen)
    if c > 0 or (c == 0 and ap > bp):
        t = a
        a = b
        b = t
        tp = ap
        ap = bp
        bp = tp
    buf[0] = seed >> 8
    buf[1] = seed & 0xFF
    k = 2
    memcpy(buf + k, a, alen)
    k += alen
    memcpy(buf + k, b, alen)
    k += alen
    buf[k] = proto
    buf[k + 1] = 0
    buf[k + 2] = ap >> 8
    buf[k + 3] = ap & 0xFF
    buf[k + 4] = bp >> 8
    buf[k + 5] = bp & 0xFF
    k += 6
    if wt_digest(WT_SHA1, buf, k, dig) != 20:
        return -1
    out[0] = 49   # '1'
    out[1] = 58   # ':'
    # EVP_EncodeBlock writes 28 characters and a NUL: into a scratch buffer, not past the id
    if EVP_EncodeBlock(b64, dig, 20) != 28:
        return -1
    memcpy(out + 2, b64, 28)
    return 0
