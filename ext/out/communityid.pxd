# Declarations of ext/out/communityid.h (Community ID v1 of one flow; code in communityid.c,
# compiled once into the static library `wtc`): declarations only. A module that cimports this
# needs the libcrypto dependency in ext/meson.build.
from libc.stdint cimport uint8_t, uint16_t

cdef extern from "communityid.h" nogil:
    enum:
        WT_CID_LEN
    int wt_community_id(uint16_t seed, const uint8_t *a, uint16_t ap, const uint8_t *b,
                        uint16_t bp, int alen, uint8_t proto, uint8_t *out)
