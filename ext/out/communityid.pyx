# cython: freethreading_compatible = False
"""Community ID v1 flow hashes over record columns (Corelight's spec, "Community ID Flow Hashing").

    "1:" + base64(SHA-1(seed . saddr . daddr . proto . 0 . sport . dport))

seed: 2 bytes, network order; addresses: 4 (IPv4) or 16 (IPv6) bytes; proto: 1 byte; one zero
byte of padding; ports: 2 bytes each, network order. The endpoints are ordered first: the
(address, port) pair that is smaller (address bytes compared as unsigned big-endian numbers,
then the port) goes first, so both directions of a flow get the same id. SHA-1 and base64 come
from OpenSSL's libcrypto (EVP), the one crypto library the project links.

One function over column arrays (addresses in webtap's 16-byte layout, IPv4 in bytes 0-3),
so HTTP records and TLS records share it; the loop runs without the GIL and the result leaves as
one Arrow string array built from C buffers (every value has the same 30 bytes).
"""
import numpy as np

cimport numpy as cnp
from libc.stdint cimport int32_t, uint8_t, uint16_t
from libc.string cimport memcmp, memcpy

cnp.import_array()

cdef extern from "<openssl/evp.h>" nogil:
    int EVP_EncodeBlock(unsigned char *t, const unsigned char *f, int n)

# SHA-1 through ext/out/digest.h: libcrypto's SHA1_Init/Update/Final on a stack context (an
# implicit EVP_sha1() fetch per record cost ~3-4x the digest itself under OpenSSL 3)
from digest cimport WT_SHA1, wt_digest, wt_crypto_no_atexit

wt_crypto_no_atexit()   # no libcrypto clean-up at exit, when first (ext/out/digest.h)

#: bytes of one id: "1:" + 28 base64 characters (20-byte SHA-1 digest, one '=' of padding)
ID_LEN = 30
cdef enum:
    C_ID_LEN = 30


cdef inline int _hash_one(uint16_t seed,
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


def community_id(src_ip, src_port, dst_ip, dst_port, ip_version, proto=6, int seed=0):
    """Community ID v1 of every flow, as a pyarrow string array (no nulls).

    src_ip, dst_ip: uint8 arrays of shape (n, 16), IPv4 in bytes 0-3 (HttpMsg / TxnRecord layout);
    src_port, dst_port: uint16 (n,); ip_version: uint8 (n,), 4 or 6 (anything else is hashed
    as IPv6); proto: IP protocol number (6 = TCP, 17 = UDP), one for all rows or a uint8 array
    (n,) (TLS records: TCP, QUIC records: UDP); seed: 0-65535.
    Which endpoint is "source" does not matter (the spec orders them)."""
    import pyarrow as pa
    if not 0 <= seed <= 0xFFFF:
        raise ValueError("seed must be in 0 .. 65535")
    pr_arr = np.asarray(proto)
    if pr_arr.size and (pr_arr.min() < 0 or pr_arr.max() > 255):
        raise ValueError("proto must be in 0 .. 255")
    cdef const uint8_t[:, ::1] sa = np.ascontiguousarray(src_ip, dtype=np.uint8)
    cdef const uint8_t[:, ::1] da = np.ascontiguousarray(dst_ip, dtype=np.uint8)
    cdef const uint16_t[::1] sp = np.ascontiguousarray(src_port, dtype=np.uint16)
    cdef const uint16_t[::1] dp = np.ascontiguousarray(dst_port, dtype=np.uint16)
    cdef const uint8_t[::1] ver = np.ascontiguousarray(ip_version, dtype=np.uint8)
    cdef Py_ssize_t n = sp.shape[0], i
    cdef const uint8_t[::1] prs = np.ascontiguousarray(
        np.broadcast_to(pr_arr, (n,)) if pr_arr.ndim == 0 else pr_arr, dtype=np.uint8)
    if prs.shape[0] != n:
        raise ValueError("community_id: proto must be one number or one per row")
    if (sa.shape[0] != n or da.shape[0] != n or dp.shape[0] != n or ver.shape[0] != n
            or (n and (sa.shape[1] != 16 or da.shape[1] != 16))):
        raise ValueError("community_id: columns of different lengths, or addresses not 16 bytes")
    if n > 0x7FFFFFFF // C_ID_LEN:
        raise ValueError("community_id: too many rows for one string array")
    text = np.empty(max(n, 1) * C_ID_LEN, dtype=np.uint8)
    offs = np.arange(0, (n + 1) * C_ID_LEN, C_ID_LEN, dtype=np.int32)
    cdef uint8_t[::1] tv = text
    cdef int bad = 0
    cdef uint16_t sd = <uint16_t>seed
    with nogil:
        for i in range(n):
            if _hash_one(sd, &sa[i, 0], sp[i], &da[i, 0], dp[i], 4 if ver[i] == 4 else 16,
                         prs[i], &tv[i * C_ID_LEN]) != 0:
                bad = 1
                break
    if bad:
        raise RuntimeError("community_id: libcrypto SHA-1 failed")
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offs),
                                                  pa.py_buffer(text[:n * C_ID_LEN])], null_count=0)
