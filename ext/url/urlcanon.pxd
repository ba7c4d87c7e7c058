# Cython view of urlcanon.h, the C canonicaliser (rules R1-R9 are documented in the header).
# The code is urlcanon.c in the wtc static library (ext/meson.build), linked into each module
# that calls it; no symbol crosses extension modules at run time.
from libc.stddef cimport ptrdiff_t
from libc.stdint cimport uint8_t

cdef extern from "urlcanon.h" nogil:
    enum:
        CANON_EMPTY       # nothing left after trimming white space
        CANON_BAD_CHAR    # NUL, control byte or interior white space
        CANON_BAD_HOST    # empty host, non-ASCII or forbidden byte in the host
        CANON_BAD_PORT    # port is not a number in 0..65535
        CANON_TOO_LONG    # output larger than the caller's buffer
        CANON_KEY         # flag: emit the key form (host labels reversed)
        CANON_FULL        # flag: skip the fast path (tests compare it with the full rules)
        CANON_FAST_ONLY   # flag: the fast path alone; -100 where it would fall back (tests)
    # Canonicalise src[0:n] into out[0:cap]; returns the output length or a negative CANON_* code.
    # 3 * n + 8 bytes of output are always enough.
    ptrdiff_t webtap_canon(const uint8_t *src, size_t n, uint8_t *out, size_t cap, int flags)
    # Convert a canonical URL to its key form or back, in place (reverses the host's labels).
    void webtap_key_flip(uint8_t *s, size_t n)
    # Length of the host part of a canonical URL or key (up to ':', '/' or '?').
    size_t webtap_host_len(const uint8_t *s, size_t n)
