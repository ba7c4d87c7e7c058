# cython: freethreading_compatible = False
"""Canonical URL form (rules R1-R9 in ext/url/urlcanon.h), one URL or a whole Arrow-layout batch.

The batch function runs one C loop without the GIL; importers use it for whole list files and
the packet-side matcher will call webtap_canon() itself (cimport urlcanon).
"""
import numpy as np

from libc.stddef cimport ptrdiff_t
from libc.stdint cimport int8_t, int64_t, uint8_t
from libc.stdlib cimport free

from util cimport wt_alloc
from urlcanon cimport CANON_FAST_ONLY, CANON_FULL, CANON_KEY, CANON_TOO_LONG, webtap_canon, webtap_key_flip

# The one table of the canonicaliser's error names: the negative return codes of webtap_canon()
# (-1..-5, urlcanon.h), then the URL tree's insert codes that share the range (-6, -7: ext/url/avl.pyx
# TREE_TOO_LONG, TREE_FULL). avl.pyx and urlfilter.canon name codes with it.
CODES = {-1: "empty", -2: "bad_char", -3: "bad_host", -4: "bad_port", -5: "too_long",
         -6: "too_long", -7: "tree_full"}


cdef int _path_flags(int path) except -1:
    if path not in (0, 1, 2):
        raise ValueError("path is 0 (fast, then full), 1 (full only) or 2 (fast only)")
    return CANON_FULL if path == 1 else (CANON_FAST_ONLY if path == 2 else 0)


def canonicalize_bytes(const uint8_t[::1] url, bint key=False, int path=0):
    """Canonical form of one URL (bytes -> bytes). Returns (result, code): code 0 = ok, else a
    negative CANON_* code and result b"". path (for tests that compare the header's two paths):
    0 fast path, falling back to the full rules; 1 full rules only; 2 fast path only (code -100
    where it would fall back)."""
    cdef int flags = (CANON_KEY if key else 0) | _path_flags(path)
    cdef size_t n = url.shape[0], cap = 3 * url.shape[0] + 16
    cdef uint8_t *out = <uint8_t *>wt_alloc(cap)
    cdef ptrdiff_t k
    try:
        with nogil:
            k = webtap_canon(&url[0] if n else <const uint8_t *>b"", n, out, cap, flags)
        if k < 0:
            return b"", <int>k
        return (<char *>out)[:k], 0
    finally:
        free(out)


def canonicalize_batch(const uint8_t[::1] data, offsets, bint key=False, int sep=-1, int path=0):
    """Canonicalise data[offsets[i]:offsets[i+1]] for every i without the GIL.

    Returns (out, out_offsets, codes): out is bytes holding the results back to back (rejected
    URLs are empty), out_offsets int64 (n + 1), codes int8 (0 ok, else a CANON_* code).
    sep >= 0 writes that byte after every result (item i is then out[oo[i]:oo[i+1] - 1]), so that
    out.split(bytes([sep])) yields one item per input. path: as in canonicalize_bytes.
    """
    cdef int64_t[::1] off = np.ascontiguousarray(offsets, dtype=np.int64)
    cdef Py_ssize_t n = off.shape[0] - 1, i
    cdef int64_t total = 0, o = 0
    cdef ptrdiff_t k
    cdef const uint8_t *base = &data[0] if data.shape[0] else <const uint8_t *>b""
    cdef int flags = (CANON_KEY if key else 0) | _path_flags(path)
    if n < 0:
        raise ValueError("offsets must hold at least one value")
    if n and (off[0] < 0 or off[n] > data.shape[0]):
        raise ValueError("offsets outside the data buffer")
    for i in range(n):
        if off[i + 1] < off[i]:
            raise ValueError(f"offsets decrease at {i}")
    total = 3 * (off[n] - off[0]) + 16 + (n if sep >= 0 else 0)
    out_a = np.empty(total, dtype=np.uint8)
    oo_a = np.zeros(n + 1, dtype=np.int64)
    codes_a = np.zeros(n, dtype=np.int8)
    cdef uint8_t[::1] out = out_a
    cdef int64_t[::1] oo = oo_a
    cdef int8_t[::1] codes = codes_a
    with nogil:
        for i in range(n):
            k = webtap_canon(base + off[i], off[i + 1] - off[i], &out[o], total - o - 1, flags)
            if k < 0:
                codes[i] = <int8_t>k
                k = 0
            o += k
            if sep >= 0:
                out[o] = <uint8_t>sep
                o += 1
            oo[i + 1] = o
    return out_a[:o].tobytes(), oo_a, codes_a


def key_flip(const uint8_t[::1] s):
    """Canonical URL <-> key form (reverses the host's labels)."""
    cdef bytearray b = bytearray(s)
    cdef uint8_t *p = b
    webtap_key_flip(p, len(b))
    return bytes(b)
