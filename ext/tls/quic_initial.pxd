# The QUIC Initial first flight, shared by the handshake records (ext/tls/tls.pyx, TlsTable) and the
# pass-by filter's SNI pass (ext/url/urlmatch.pyx, SniTable): locating the UDP datagram behind the
# link layer (quic_udp_locate, C in ext/walk/l34.c: it rides on the walk's l34_parse) and, in C
# (ext/tls/quic_initial.h / .c, the wtc library), walking the frames of an opened Initial
# (PADDING, PING, ACK skipped; CRYPTO listed) and gathering CRYPTO data into a bounded buffer
# with its coverage bitmap. Packet protection itself is ext/tls/quic_crypto.h. Each table keeps
# its own connection lookup, buffers, caps and counters.
from libc.stddef cimport size_t
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t

# quic_udp_locate is C (ext/walk/l34.c, declared in l34.h beside the walk it rides on)
from l34 cimport quic_udp_locate


cdef extern from "quic_initial.h" nogil:
    enum:
        QF_END
        QF_CRYPTO
        QF_OTHER
        QF_BAD_ACK
        QF_BAD_OFFSET
        QF_BAD_LENGTH
        QF_BEYOND
        QF_MANY
        QUIC_MAX_FRAMES
        QUIC_PACKET_FRAMES
    ctypedef struct quic_frame:
        uint32_t pos
        uint32_t coff
        uint32_t len
    int quic_next_crypto(const uint8_t *b, size_t n, size_t *fo, uint64_t *coff, uint64_t *clen)
    int quic_crypto_frames(const uint8_t *plain, size_t pl, uint32_t cap, quic_frame *fr, int max,
                           int *nf, size_t *stop)
    void quic_frames_put(uint8_t *buf, uint8_t *have, const uint8_t *plain, const quic_frame *fr,
                         int nf)
    void quic_crypto_put(uint8_t *buf, uint8_t *have, uint64_t coff, const uint8_t *data,
                         uint64_t clen)
    uint32_t quic_crypto_whole(const uint8_t *buf, const uint8_t *have, uint32_t cap, uint32_t base)
    const uint8_t *quic_frames_message(const uint8_t *plain, const quic_frame *fr, int nf,
                                       uint8_t *scratch, uint32_t cap, uint32_t *need)
