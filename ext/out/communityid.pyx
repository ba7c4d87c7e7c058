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

cnp.import_array()

from communityid cimport WT_CID_LEN as C_ID_LEN, wt_community_id
from digest cimport wt_crypto_no_atexit

wt_crypto_no_atexit()   # no libcrypto clean-up at exit, when first (ext/out/digest.h)

#: bytes of one id: "1:" + 28 base64 characters (20-byte SHA-1 digest, one '=' of padding);
#: the hash of one id is ext/out/communityid.c's wt_community_id
ID_LEN = 30


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
            if wt_community_id(sd, &sa[i, 0], sp[i], &da[i, 0], dp[i], 4 if ver[i] == 4 else 16,
                               prs[i], &tv[i * C_ID_LEN]) != 0:
                bad = 1
                break
    if bad:
        raise RuntimeError("community_id: libcrypto SHA-1 failed")
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offs),
                                                  pa.py_buffer(text[:n * C_ID_LEN])], null_count=0)
