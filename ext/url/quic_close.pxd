# The forged server Initial close of the URL filter's QUIC cut (ext/url/quic_close.h, issue 18).
# Modules that cimport this need the libcrypto dependency in ext/meson.build.
from libc.stdint cimport uint8_t

cdef extern from "quic_close.h" nogil:
    const char *QUIC_CLOSE_REASON
    int QUIC_CLOSE_ERROR
    int QUIC_CLOSE_SCID_LEN
    int QUIC_CLOSE_MAX
    void quic_close_scid(const uint8_t *dcid, size_t dcid_len, uint8_t *out)
    int QUIC_CLOSE_FOLLOW_PN
    int quic_forge_close(const uint8_t *pkt, size_t n, uint8_t *out, size_t cap)
    int quic_forge_close_as(const uint8_t *pkt, size_t n, const uint8_t *odcid, size_t odcid_len,
                            uint8_t *out, size_t cap)
