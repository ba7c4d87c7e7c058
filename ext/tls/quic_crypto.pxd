# QUIC Initial packet protection (ext/tls/quic_crypto.h): key derivation v1/v2, header protection,
# AEAD_AES_128_GCM seal/open, long header parsing, all on OpenSSL's libcrypto. Every function is
# thread-safe and callable without the GIL. A module that cimports this needs the libcrypto
# dependency in ext/meson.build. See the header for the contracts.
from libc.stdint cimport uint8_t, uint32_t, uint64_t

cdef extern from "quic_crypto.h" nogil:
    uint32_t QUIC_V1
    uint32_t QUIC_V2
    uint32_t QUIC_DRAFT29
    int QUIC_MAX_CID
    int QUIC_TAG_LEN
    int QUIC_SAMPLE_LEN

    enum:
        QUIC_PT_INITIAL
        QUIC_PT_0RTT
        QUIC_PT_HANDSHAKE
        QUIC_PT_RETRY
        QUIC_PT_VERSION_NEG

    enum:
        QUIC_OK
        QUIC_E_SHORT
        QUIC_E_NOT_LONG
        QUIC_E_VERSION
        QUIC_E_CID
        QUIC_E_TRUNCATED
        QUIC_E_DECRYPT
        QUIC_E_CRYPTO
        QUIC_E_FIXED_BIT
        QUIC_E_ARG

    ctypedef struct quic_keys_t:
        uint8_t key[16]
        uint8_t iv[12]
        uint8_t hp[16]

    ctypedef struct quic_long_hdr_t:
        uint32_t version
        uint8_t first
        uint8_t type
        uint8_t dcid_len
        uint8_t scid_len
        size_t dcid_off
        size_t scid_off
        size_t token_off
        uint64_t token_len
        uint64_t length
        size_t pn_off
        size_t end

    bint quic_version_known(uint32_t v)
    int quic_type_bits(uint32_t v, int pt)
    int quic_type_from_bits(uint32_t v, int bits)

    int quic_hkdf_expand_label(const uint8_t *secret, const char *label, uint8_t *out, size_t outlen)
    int quic_initial_secrets(uint32_t version, const uint8_t *dcid, size_t dcid_len,
                             uint8_t *client_secret, uint8_t *server_secret)
    int quic_keys_from_secret(uint32_t version, const uint8_t *secret, quic_keys_t *k)
    int quic_initial_keys(uint32_t version, const uint8_t *dcid, size_t dcid_len,
                          quic_keys_t *client, quic_keys_t *server)
    int quic_hp_mask(const uint8_t *hp, const uint8_t *sample, uint8_t *mask)
    int quic_aead_seal(const quic_keys_t *k, uint64_t pn, const uint8_t *aad, size_t aadlen,
                       const uint8_t *pt, size_t ptlen, uint8_t *ct)
    int quic_aead_open(const quic_keys_t *k, uint64_t pn, const uint8_t *aad, size_t aadlen,
                       const uint8_t *ct, size_t ctlen, uint8_t *pt)

    size_t quic_varint(const uint8_t *p, size_t n, uint64_t *v)
    size_t quic_varint_size(uint64_t v)
    void quic_varint_put(uint8_t *p, uint64_t v, size_t len)
    int quic_parse_long(const uint8_t *p, size_t n, quic_long_hdr_t *h)
    void quic_thread_end()
    int quic_open_packet(const uint8_t *pkt, const quic_long_hdr_t *h, const quic_keys_t *k,
                         uint8_t *hdr, size_t *hdr_len, uint8_t *pt, size_t *pt_len, uint64_t *pn)
    int quic_protect(uint8_t *pkt, size_t pn_off, size_t pn_len, size_t ptlen,
                     const quic_keys_t *k, uint64_t pn)
