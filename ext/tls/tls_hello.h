/* TLS first flight: ClientHello / ServerHello parser (SSL 3.0 .. TLS 1.3, HelloRetryRequest).
 *
 * Plain C, no allocation, no globals: every function reads only the bytes it is given and never
 * past them (each length field is checked against what is left before it is used). Text leaves
 * as spans (offset, length) into the handshake message buffer; nothing is copied. Shared by the
 * TLS record stage (ext/tls/tls.pyx) and, through ext/tls/tls.pxd, by any module that wants the SNI of a
 * ClientHello (the URL filter). Specifications: RFC 8446 (TLS 1.3, HRR random in 4.1.3), RFC 5246
 * (TLS 1.2), RFC 6066 (SNI), RFC 7301 (ALPN), RFC 8701 (GREASE), draft-ietf-tls-esni (ECH 0xfe0d).
 */
#ifndef WT_TLS_HELLO_H
#define WT_TLS_HELLO_H

#include <stdint.h>
#include <string.h>

typedef struct { uint32_t off, len; } tls_span;

/* Largest handshake message reassembled / gathered (bytes). */
#define TLS_HELLO_CAP 16384

/* tls_parse_hello / tls_gather results */
enum {
    TLS_OK = 0,            /* a complete ClientHello or ServerHello was parsed */
    TLS_INCOMPLETE = 1,    /* the bytes end before the declared length: more segments needed */
    TLS_NOT_TLS = 2,       /* the bytes do not start a TLS handshake record */
    TLS_NOT_HELLO = 3,     /* a handshake, but neither ClientHello nor ServerHello */
    TLS_BAD_LENGTH = 4,    /* a length field disagrees with its container (record, message, vector) */
    TLS_TOO_LONG = 5,      /* declared handshake length above the caller's cap */
    TLS_BAD_RECORD = 6,    /* a record that is not a handshake record interrupts the message */
};

/* tls_hello.flags */
enum {
    TLSF_HRR = 1,             /* ServerHello whose random is the HelloRetryRequest value */
    TLSF_ECH = 2,             /* ClientHello carries encrypted_client_hello (0xfe0d; real or GREASE) */
    TLSF_SNI = 4,             /* server_name extension present */
    TLSF_ALPN = 8,            /* ALPN extension present */
    TLSF_SUPPORTED_VERSIONS = 16, /* supported_versions extension present */
    TLSF_NO_EXTENSIONS = 32,  /* hello ends after compression methods (SSL 3.0 style) */
    TLSF_EXT_TRUNCATED = 64,  /* an extension's length ran past the extensions block (walk stopped) */
    TLSF_TRAILING = 128,      /* bytes after the extensions block inside the message */
    TLSF_ESNI = 256,          /* encrypted_server_name draft extension 0xffce */
    TLSF_SSLV2 = 512,         /* SSLv2-format ClientHello (tls_parse_sslv2): spans index the
                                 record, `ciphers` holds 3-byte cipher specs */
};

typedef struct {
    uint8_t  hs_type;          /* 1 ClientHello, 2 ServerHello */
    uint8_t  _pad;
    uint16_t flags;            /* TLSF_* */
    uint32_t hs_len;           /* declared handshake body length (message is hs_len + 4 bytes) */
    uint16_t legacy_version;   /* client_version / server_version field */
    uint16_t version;          /* CH: highest non-GREASE supported_versions entry, else legacy;
                                  SH: supported_versions selection, else legacy */
    uint16_t cipher;           /* SH: selected cipher suite */
    uint16_t n_exts;           /* extensions in the block (GREASE included) */
    tls_span random;           /* 32 bytes */
    tls_span session_id;
    tls_span ciphers;          /* CH: cipher_suites body, 2 bytes each; SH: the 2-byte cipher */
    tls_span compression;      /* CH: compression_methods body; SH: the 1-byte method */
    tls_span exts;             /* extensions block body: (type u16, len u16, data)* */
    tls_span sni;              /* first host_name of server_name (text) */
    tls_span alpn;             /* ALPN protocol_name_list body: (len u8, name)* */
    tls_span versions;         /* CH: supported_versions list body (2 bytes each); SH: 2 bytes */
    tls_span groups;           /* supported_groups list body (2 bytes each) */
    tls_span point_formats;    /* ec_point_formats list body (1 byte each) */
    tls_span sig_algs;         /* signature_algorithms list body (2 bytes each) */
    tls_span key_share;        /* CH: client_shares body ((group, len, key)*); SH: the entry */
} tls_hello;

static inline uint32_t tls_be16(const uint8_t *p) { return ((uint32_t)p[0] << 8) | p[1]; }
static inline uint32_t tls_be24(const uint8_t *p) { return ((uint32_t)p[0] << 16) | ((uint32_t)p[1] << 8) | p[2]; }

/* RFC 8701: 0x0A0A, 0x1A1A, ..., 0xFAFA */
static inline int tls_is_grease(uint32_t v) { return (v & 0x0f0f) == 0x0a0a && (v >> 8) == (v & 0xff); }


/* Draft number of a TLS 1.3 draft version (0x7fNN; Facebook's 0xfbNN; Google's experiment
 * 0x7e01/0x7e02 = draft 18 with changes, as tshark reads them), else 0. */
static inline int tls13_draft(uint32_t v) {
    if ((v >> 8) == 0x7f) return (int)(v & 0xff);
    if ((v >> 8) == 0xfb) return (int)(v & 0xff);
    if (v == 0x7e01 || v == 0x7e02) return 18;
    return 0;
}

/* Is v a version a hello's version field can hold (SSL 3.0 .. TLS 1.3 and the 1.3 drafts)? A
 * TLS 1.2 encrypted Finished record also starts with type 22 and, by chance, a byte 1 or 2:
 * this check on the bytes after the handshake header tells the two apart (5 in 65536 random
 * values pass). */
static inline int tls_version_plausible(uint32_t v) {
    return ((v >> 8) == 3 && (v & 0xff) <= 4) || tls13_draft(v) > 0;
}

/* Does p[0:n] (n >= 6) look like the start of a TLS handshake record carrying a hello? Record
 * type 22, major version 3, minor 0..4, then the handshake type 1 or 2. Returns the handshake type
 * or 0. (Whole records of other types before the hello are skipped by tls_hello_start.) */
static inline int tls_looks_hello(const uint8_t *p, uint32_t n) {
    if (n < 6 || p[0] != 22 || p[1] != 3 || p[2] > 4)
        return 0;
    if (p[5] == 1 || p[5] == 2)
        return p[5];
    return 0;
}

/* An SSLv2-format ClientHello (SSL 2.0 draft, "Client-Hello"; RFC 5246 E.2 for the v3-compatible
 * form) at p[0:n]: a 2-byte record header with the top bit set (length in the low 15 bits), then
 * msg type 1, version (0x0002 or 3.x), cipher_spec_length, session_id_length, challenge_length
 * (each u16), cipher specs (3 bytes each), session id, challenge. Only the header's 11 bytes are
 * looked at: the lengths must add up to the record length exactly, cipher specs be a positive
 * multiple of 3, the session id 0..32 bytes and the challenge 16..32 (what Wireshark's and
 * Zeek's SSLv2 parsers accept). Returns the record length + 2 (the bytes the hello takes), else
 * 0. */
static inline uint32_t tls_sslv2_hello_len(const uint8_t *p, uint32_t n) {
    uint32_t rl, v, cs, sl, cl;
    if (n < 11 || !(p[0] & 0x80) || p[2] != 1)
        return 0;
    rl = ((uint32_t)(p[0] & 0x7f) << 8) | p[1];
    v = tls_be16(p + 3);
    if (v != 0x0002 && !((v >> 8) == 3 && (v & 0xff) <= 4))
        return 0;
    cs = tls_be16(p + 5); sl = tls_be16(p + 7); cl = tls_be16(p + 9);
    if (cs == 0 || cs % 3 != 0 || sl > 32 || cl < 16 || cl > 32 || rl != 9 + cs + sl + cl)
        return 0;
    return rl + 2;
}

/* Records a server's (or client's) first flight may carry whole before its hello: ChangeCipherSpec
 * (20; a TLS 1.3 client sends one before its second ClientHello), alert (21; a server's warning
 * unrecognized_name before its ServerHello), heartbeat (24). */
static inline int tls_skippable_record(const uint8_t *p, uint32_t n) {
    return n >= 5 && (p[0] == 20 || p[0] == 21 || p[0] == 24) && p[1] == 3 && p[2] <= 4
           && tls_be16(p + 3) > 0 && 5 + tls_be16(p + 3) <= n;
}

/* Offset of the first handshake record in a TCP payload that starts with TLS records: 0, or
 * past at most four whole records of other types (tls_skippable_record) that precede it.
 * Returns the offset and the handshake type (1/2) in *hs_type, or 0 type when the payload does
 * not start a hello. An SSLv2-format ClientHello (tls_sslv2_hello_len) at offset 0 gives type 1
 * at offset 0 (tls_parse_payload tells it by its first byte). */
static inline uint32_t tls_hello_start(const uint8_t *p, uint32_t n, int *hs_type) {
    uint32_t off = 0;
    int k;
    *hs_type = 0;
    if (n >= 11 && (p[0] & 0x80)) {
        if (tls_sslv2_hello_len(p, n))
            *hs_type = 1;
        return 0;
    }
    for (k = 0; k < 4; k++) {
        if (tls_skippable_record(p + off, n - off)) {
            off += 5 + tls_be16(p + off + 3);
            continue;
        }
        break;
    }
    *hs_type = tls_looks_hello(p + off, n - off);
    /* the hello's own version field, when captured, must be a version */
    if (*hs_type && n - off >= 11 && !tls_version_plausible(tls_be16(p + off + 9)))
        *hs_type = 0;
    return off;
}

/* Gather one handshake message from TLS records: p[0:n] are stream bytes starting at a record
 * header. Handshake record payloads are copied into out[0:cap] until the handshake message
 * (4-byte header + declared length) is whole. *out_len gets the bytes gathered, *hs_len the
 * declared body length once known, *used the stream bytes consumed (for appending later).
 * Returns TLS_OK, TLS_INCOMPLETE (stream ends first), TLS_TOO_LONG (4 + hs_len > cap: nothing
 * more is copied), TLS_BAD_RECORD (a non-handshake record or bad record version in between),
 * TLS_BAD_LENGTH (zero-length record). */
int tls_gather(const uint8_t *p, uint32_t n, uint8_t *out, uint32_t cap,
                             uint32_t *out_len, uint32_t *hs_len);

/* Parse one ClientHello or ServerHello message: p[0:n] starts at the 4-byte handshake header and
 * holds the whole message (n >= 4 + declared length; extra bytes after it are ignored). */
int tls_parse_hello(const uint8_t *p, uint32_t n, tls_hello *h);

/* Key-share groups of a ClientHello's client_shares (GREASE kept), into out[0:cap]; returns
 * how many were written. */
static inline uint32_t tls_key_share_groups(const uint8_t *p, const tls_hello *h, uint16_t *out,
                                            uint32_t cap) {
    uint32_t q = h->key_share.off, qe = q + h->key_share.len, k = 0;
    if (h->hs_type != 1) {
        if (h->key_share.len >= 2 && cap > 0) { out[0] = (uint16_t)tls_be16(p + q); return 1; }
        return 0;
    }
    while (qe - q >= 4 && k < cap) {
        uint32_t kl = tls_be16(p + q + 2);
        out[k++] = (uint16_t)tls_be16(p + q);
        q += 4;
        if (qe - q < kl) break;
        q += kl;
    }
    return k;
}

/* Parse an SSLv2-format ClientHello at p[0:n] (the record, tls_sslv2_hello_len > 0, all of it
 * captured). Spans index p: random = the challenge (RFC 5246 E.2 puts it right-aligned in the
 * TLS random), ciphers = the 3-byte cipher specs, session_id; no extensions (TLSF_NO_EXTENSIONS),
 * no compression methods. hs_len = the message's bytes after the msg type. */
int tls_parse_sslv2(const uint8_t *p, uint32_t n, tls_hello *h);

/* One TCP payload that starts a TLS hello (possibly after whole records of other types), or an
 * SSLv2-format ClientHello (parsed by tls_parse_sslv2, TLSF_SSLV2 set): gather the
 * handshake message into scratch[0:cap] when it spans records, else point into the payload, and
 * parse it. *msg gets the message start (spans in *h are relative to it). Returns TLS_OK,
 * TLS_INCOMPLETE (continues in a later segment), TLS_NOT_TLS, or an error code. */
int tls_parse_payload(const uint8_t *p, uint32_t n, uint8_t *scratch, uint32_t cap,
                                    tls_hello *h, const uint8_t **msg);

/* A ServerHello's selected version (supported_versions, else the legacy field) and whether it
 * is a HelloRetryRequest, read as tls_parse_hello reads them but without filling a tls_hello:
 * for a stage that needs only those (the TLS exchange stage, ext/pair/exchange.pyx; the full
 * parse was a fifth of its work). p[0:n] starts at the handshake header. Returns TLS_OK exactly
 * when tls_parse_hello returns TLS_OK with hs_type 2 (then with the same version and TLSF_HRR;
 * tests/tls/test_server_version.py), TLS_NOT_HELLO for any other handshake type, else
 * tls_parse_hello's error. */
int tls_server_version(const uint8_t *p, uint32_t n, uint16_t *version, int *hrr);

/* tls_server_version of the hello a TCP payload starts, framed as tls_parse_payload frames it
 * (records of other types skipped, a message spanning records gathered into scratch[0:cap]);
 * an SSLv2-format ClientHello gives TLS_NOT_HELLO. */
int tls_payload_server_version(const uint8_t *p, uint32_t n, uint8_t *scratch, uint32_t cap,
                               uint16_t *version, int *hrr);

#endif
