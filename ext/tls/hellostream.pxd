# Declarations of ext/tls/hellostream.h: a TLS hello split over TCP segments, the one set of
# reassembly rules shared by the handshake records (ext/tls/tls.pyx) and the pass-by filter's SNI
# pass (ext/url/urlmatch.pyx). The rules, and where the two old copies differed: the header; the
# code: ext/tls/hellostream.c (static library `wtc`), hs_may_start static inline in the header.
from libc.stdint cimport uint8_t, uint16_t, uint32_t

cdef extern from "hellostream.h" nogil:
    enum:
        HS_STREAM_CAP             # stream bytes held per split hello (records add 5 each)
        HS_HEAD                   # record header + handshake type: the stream's type known
        HS_VERSION_END            # ... + handshake length + the hello's version field

    enum:
        HS_MORE
        HS_WHOLE
        HS_RETRANSMISSION
        HS_GAP
        HS_CUT
        HS_TOO_LONG
        HS_MALFORMED
        HS_NOT_HELLO

    ctypedef struct HelloStream:
        uint8_t *buf
        uint32_t len
        uint32_t next_seq
        uint16_t segs
        uint8_t hs_type

    bint hs_may_start(const uint8_t *p, uint32_t n)
    int hs_start(HelloStream *s, uint8_t *buf, uint32_t seq, uint32_t wire_len, const uint8_t *p,
                 uint32_t caplen, uint32_t off, uint8_t *scratch, uint32_t *msg_len)
    int hs_offer(HelloStream *s, uint32_t seq, uint32_t wire_len, const uint8_t *p,
                 uint32_t caplen, uint8_t *scratch, uint32_t *msg_len)
