# TLS first flight, C-level API (issue 17): declarations only. The parser is plain C in
# ext/tls/tls_hello.c (no allocation, bounds-checked, spans into the message), the fingerprints in
# ext/tls/tls_fp.c (JA3/JA3S/JA4 with libcrypto's MD5/SHA-256), both compiled once into the static
# library `wtc`; the watch list's few-line helpers are static inline in ext/tls/tlswatch.h. Any
# module may cimport this file; one that uses the fingerprints links libcrypto (meson:
# dependency('libcrypto')).
#
# Typical use (e.g. the URL filter matching an SNI):
#     cdef tls_hello h
#     cdef const uint8_t *msg
#     if tls_parse_payload(payload, n, scratch, TLS_HELLO_CAP, &h, &msg) == TLS_OK and h.hs_type == 1:
#         sni = msg + h.sni.off, h.sni.len     (h.sni.len == 0: no SNI)
#         alpn list = msg + h.alpn.off, h.alpn.len ((u8 len, name)*), versions = h.version,
#         ECH = h.flags & TLSF_ECH
from libc.stdint cimport uint8_t, uint16_t, uint32_t

cdef extern from "tls_hello.h" nogil:
    ctypedef struct tls_span:
        uint32_t off              # offset from the handshake message's first byte
        uint32_t len              # bytes; 0 when absent

    ctypedef struct tls_hello:
        uint8_t hs_type           # 1 ClientHello, 2 ServerHello
        uint16_t flags            # TLSF_*
        uint32_t hs_len           # declared handshake body length
        uint16_t legacy_version   # client_version / server_version field
        uint16_t version          # CH: highest non-GREASE supported_versions else legacy; SH: selected
        uint16_t cipher           # SH: selected cipher suite
        uint16_t n_exts           # extensions (GREASE included)
        tls_span random
        tls_span session_id
        tls_span ciphers          # CH: cipher_suites body (2 bytes each); SH: the 2-byte cipher
        tls_span compression
        tls_span exts             # extensions block body: (type u16, len u16, data)*
        tls_span sni              # first host_name of server_name
        tls_span alpn             # protocol_name_list body: (len u8, name)*
        tls_span versions         # CH: supported_versions body (2 bytes each); SH: 2 bytes
        tls_span groups           # supported_groups body
        tls_span point_formats    # ec_point_formats body (1 byte each)
        tls_span sig_algs         # signature_algorithms body
        tls_span key_share        # CH: client_shares body; SH: the entry

    enum:
        TLS_OK
        TLS_INCOMPLETE            # message continues past the bytes given
        TLS_NOT_TLS               # not a TLS handshake record starting a hello
        TLS_NOT_HELLO
        TLS_BAD_LENGTH            # a length disagrees with its container
        TLS_TOO_LONG              # declared length above the cap
        TLS_BAD_RECORD            # a non-handshake record inside the message

    enum:
        TLSF_HRR
        TLSF_ECH
        TLSF_SNI
        TLSF_ALPN
        TLSF_SUPPORTED_VERSIONS
        TLSF_NO_EXTENSIONS
        TLSF_EXT_TRUNCATED
        TLSF_TRAILING
        TLSF_ESNI
        TLSF_SSLV2                # SSLv2-format ClientHello: spans index the record, 3-byte specs

    uint32_t tls_be16(const uint8_t *p)
    uint32_t tls_be24(const uint8_t *p)
    int tls_is_grease(uint32_t v)
    int tls_looks_hello(const uint8_t *p, uint32_t n)
    uint32_t tls_hello_start(const uint8_t *p, uint32_t n, int *hs_type)
    uint32_t tls_sslv2_hello_len(const uint8_t *p, uint32_t n)
    int tls_skippable_record(const uint8_t *p, uint32_t n)
    int tls_parse_sslv2(const uint8_t *p, uint32_t n, tls_hello *h)
    int tls_gather(const uint8_t *p, uint32_t n, uint8_t *out, uint32_t cap, uint32_t *out_len,
                   uint32_t *hs_len)
    int tls_parse_hello(const uint8_t *p, uint32_t n, tls_hello *h)
    int tls_parse_payload(const uint8_t *p, uint32_t n, uint8_t *scratch, uint32_t cap,
                          tls_hello *h, const uint8_t **msg)
    int tls_server_version(const uint8_t *p, uint32_t n, uint16_t *version, int *hrr)
    int tls_payload_server_version(const uint8_t *p, uint32_t n, uint8_t *scratch, uint32_t cap,
                                   uint16_t *version, int *hrr)
    uint32_t tls_key_share_groups(const uint8_t *p, const tls_hello *h, uint16_t *out, uint32_t cap)

cdef extern from "tls_fp.h" nogil:
    uint32_t tls_ext_types(const uint8_t *p, const tls_hello *h, uint16_t *out, uint32_t cap)
    uint32_t tls_ja3_string(const uint8_t *p, const tls_hello *h, char *buf, uint32_t cap)
    int tls_md5_hex(const char *s, uint32_t n, char *out)
    int tls_ja4(const uint8_t *p, const tls_hello *h, char proto, uint16_t *scratch, char *text,
                uint32_t text_cap, char *out, char *raw, uint32_t raw_cap)
    # a memo of recent digests (tls_fp.h): the same fingerprints, repeated inputs not hashed again
    ctypedef struct tls_fp_memo:
        pass
    int tls_md5_hex_m(tls_fp_memo *m, const char *s, uint32_t n, char *out)
    int tls_ja4_m(const uint8_t *p, const tls_hello *h, char proto, uint16_t *scratch, char *text,
                  uint32_t text_cap, char *out, char *raw, uint32_t raw_cap, tls_fp_memo *m)

cdef extern from "tls_hello.h" nogil:
    enum: TLS_HELLO_CAP           # largest handshake message reassembled / gathered (bytes)


# The TLS stage's watch list, shared by the dissector's walk and the stage (what it is, and which
# thread writes what: ext/tls/tlswatch.h; tlswatch.c).
from libc.stdint cimport uint64_t

cdef extern from "tlswatch.h" nogil:
    ctypedef struct TlsWatch:
        uint32_t cap              # a power of two
        uint32_t n                # slots in use (the walk's)
        uint32_t overflow         # 1: the walk hands every TCP payload to the stage
    int tls_watch_init(TlsWatch *w, uint32_t min_cap)
    void tls_watch_free(TlsWatch *w)
    TlsWatch *tls_watch_new(uint32_t min_cap) except NULL
    void tls_watch_begin(TlsWatch *w)
    void tls_watch_publish_begin(TlsWatch *w)
    void tls_watch_publish_add(TlsWatch *w, uint64_t k)
    void tls_watch_publish_end(TlsWatch *w)
    uint64_t tls_flow_hash(const uint8_t *src, uint16_t sport, const uint8_t *dst, uint16_t dport,
                           uint8_t ipv)
    bint tls_watch_has(const TlsWatch *w, uint64_t k)
    void tls_watch_add(TlsWatch *w, uint64_t k)
    void tls_watch_udp_add(TlsWatch *w, uint64_t n)
    uint64_t tls_watch_udp_take(TlsWatch *w)
    bint tls_hello_fits(const uint8_t *p, uint32_t n)

cdef extern from "tlswatch.h":
    # the capsule that hands a watch list (tls_watch_new) to the walk and owns it (tlswatch.h)
    object tls_watch_capsule(TlsWatch *w)
