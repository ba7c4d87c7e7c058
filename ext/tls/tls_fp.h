/* TLS fingerprints of a parsed hello (ext/tls/tls_hello.h): JA3 and JA3S (salesforce/ja3, MD5 of the
 * decimal string) and JA4 (FoxIO-LLC/ja4 technical_details/JA4.md, the BSD-3-Clause TLS client
 * fingerprint only; none of the JA4+ family). Digests come from OpenSSL's libcrypto (EVP one-shot
 * calls): a well-kept implementation instead of a hand-written MD5 / SHA-256.
 *
 * Strings are written into caller buffers with a capacity; a string that would not fit is
 * reported (return 0) and never written past the end.
 */
#ifndef WT_TLS_FP_H
#define WT_TLS_FP_H

#include <stdint.h>
#include <string.h>
#include "digest.h"        /* MD5 / SHA-256: libcrypto's low-level one-shot functions */
#include "util.h"          /* wt_u32_dec */

#include "tls_hello.h"

typedef struct { char *b; uint32_t cap, n; int over; } tls_sb;

static inline void tls_sb_c(tls_sb *s, char c) {
    if (s->n + 1 >= s->cap) { s->over = 1; return; }
    s->b[s->n++] = c;
}
/* tls_sb_dec / tls_sb_hex4 write in place when the room is there (the common case: one
 * capacity test instead of one per character); else character by character, as tls_sb_c,
 * so a string that does not fit ends the same way */
static inline void tls_sb_dec(tls_sb *s, uint32_t v) {
    char t[10];
    size_t k, i;
    if (s->n + 10 < s->cap) { s->n += (uint32_t)wt_u32_dec(v, s->b + s->n); return; }
    k = wt_u32_dec(v, t);
    for (i = 0; i < k; i++) tls_sb_c(s, t[i]);
}
static inline void tls_sb_hex4(tls_sb *s, uint32_t v) {
    static const char hx[] = "0123456789abcdef";
    if (s->n + 4 < s->cap) {
        char *o = s->b + s->n;
        o[0] = hx[(v >> 12) & 15]; o[1] = hx[(v >> 8) & 15];
        o[2] = hx[(v >> 4) & 15]; o[3] = hx[v & 15];
        s->n += 4;
        return;
    }
    tls_sb_c(s, hx[(v >> 12) & 15]); tls_sb_c(s, hx[(v >> 8) & 15]);
    tls_sb_c(s, hx[(v >> 4) & 15]); tls_sb_c(s, hx[v & 15]);
}
static inline void tls_hex(const uint8_t *d, uint32_t n, char *out) {
    static const char hx[] = "0123456789abcdef";
    uint32_t i;
    for (i = 0; i < n; i++) { out[2 * i] = hx[d[i] >> 4]; out[2 * i + 1] = hx[d[i] & 15]; }
    out[2 * n] = 0;
}

/* Extension types of the hello in wire order (GREASE kept) into out[0:cap]; returns the count
 * (stops at cap). */
static inline uint32_t tls_ext_types(const uint8_t *p, const tls_hello *h, uint16_t *out, uint32_t cap) {
    uint32_t q = h->exts.off, qe = q + h->exts.len, k = 0, el;
    while (qe - q >= 4 && k < cap) {
        el = tls_be16(p + q + 2);
        if (qe - q - 4 < el) break;
        out[k++] = (uint16_t)tls_be16(p + q);
        q += 4 + el;
    }
    return k;
}

/* Append the 16-bit values of span sp (2 bytes each), GREASE skipped when skip_grease, decimal
 * joined by '-' (JA3) */
static inline void tls_sb_list16(tls_sb *s, const uint8_t *p, tls_span sp, int skip_grease) {
    uint32_t k, v, first = 1;
    for (k = 0; k + 1 < sp.len; k += 2) {
        v = tls_be16(p + sp.off + k);
        if (skip_grease && tls_is_grease(v)) continue;
        if (!first) tls_sb_c(s, '-');
        tls_sb_dec(s, v);
        first = 0;
    }
}

/* JA3 (ClientHello) or JA3S (ServerHello) string into buf[0:cap] (NUL-terminated); returns its
 * length, 0 when it did not fit. JA3: SSLVersion,Ciphers,Extensions,EllipticCurves,
 * EllipticCurvePointFormats; JA3S: SSLVersion,Cipher,Extensions. Decimal, '-'-joined, GREASE
 * (RFC 8701) removed from every list. */
uint32_t tls_ja3_string(const uint8_t *p, const tls_hello *h, char *buf, uint32_t cap);

/* A memo of recent digests (optional: NULL everywhere means none). Clients repeat their hellos:
 * the same JA3 string, the same sorted cipher list and extension list come back connection after
 * connection, and each is an MD5 or SHA-256 of ~250 ns. The memo is direct-mapped by a hash of the
 * input, and a hit is an input equal byte for byte (kind, length, bytes) to the one whose digest
 * the slot holds: the digest given is the one libcrypto would give. Inputs longer than
 * TLS_FP_MEMO_IN are not kept. One per table (TlsTable), zeroed before use; ~134 KB. */
#define TLS_FP_MEMO_SLOTS 256
#define TLS_FP_MEMO_IN 480
typedef struct {
    uint32_t n;                 /* input length */
    uint32_t which;             /* WT_MD5 / WT_SHA256 + 1; 0: empty slot */
    unsigned char dig[32];
    char in[TLS_FP_MEMO_IN];
} tls_fp_memo_slot;
typedef struct { tls_fp_memo_slot s[TLS_FP_MEMO_SLOTS]; } tls_fp_memo;

/* wt_digest through the memo m (NULL: no memo); returns the digest's length, 0 on failure */
unsigned int tls_fp_digest(tls_fp_memo *m, int which, const char *s, uint32_t n, unsigned char *out);

static inline int tls_md5_hex_m(tls_fp_memo *m, const char *s, uint32_t n, char *out) {
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int dl = 0;
    if ((dl = tls_fp_digest(m, WT_MD5, s, n, d)) != 16) { out[0] = 0; return 0; }
    tls_hex(d, 16, out);
    return 1;
}

/* MD5 of s[0:n] as 32 lower-case hex characters + NUL into out[33]; 0 on failure. */
static inline int tls_md5_hex(const char *s, uint32_t n, char *out) {
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int dl = 0;
    if ((dl = wt_digest(WT_MD5, s, n, d)) != 16) { out[0] = 0; return 0; }
    tls_hex(d, 16, out);
    return 1;
}

/* First 12 hex characters of SHA-256(s[0:n]) + NUL into out[13]; "000000000000" when n == 0
 * (JA4: an empty list hashes to zeros). */
static inline int tls_sha12(tls_fp_memo *m, const char *s, uint32_t n, char *out) {
    unsigned char d[EVP_MAX_MD_SIZE];
    char hx[65];
    unsigned int dl = 0;
    if (n == 0) { memcpy(out, "000000000000", 13); return 1; }
    if ((dl = tls_fp_digest(m, WT_SHA256, s, n, d)) != 32) { out[0] = 0; return 0; }
    tls_hex(d, 32, hx);
    memcpy(out, hx, 12);
    out[12] = 0;
    return 1;
}

static inline void tls_sort16(uint16_t *a, uint32_t n) {
    uint32_t i, j;
    uint16_t v;
    for (i = 1; i < n; i++) {          /* insertion sort: lists are short (tens of entries) */
        v = a[i];
        for (j = i; j > 0 && a[j - 1] > v; j--) a[j] = a[j - 1];
        a[j] = v;
    }
}

/* JA4 version characters for a TLS/DTLS version value */
static inline void tls_ja4_version(uint32_t v, char *o) {
    switch (v) {
    case 0x0304: o[0] = '1'; o[1] = '3'; break;
    case 0x0303: o[0] = '1'; o[1] = '2'; break;
    case 0x0302: o[0] = '1'; o[1] = '1'; break;
    case 0x0301: o[0] = '1'; o[1] = '0'; break;
    case 0x0300: o[0] = 's'; o[1] = '3'; break;
    case 0x0002: o[0] = 's'; o[1] = '2'; break;
    case 0xfeff: o[0] = 'd'; o[1] = '1'; break;
    case 0xfefd: o[0] = 'd'; o[1] = '2'; break;
    case 0xfefc: o[0] = 'd'; o[1] = '3'; break;
    default: o[0] = '0'; o[1] = '0';
    }
}

static inline int tls_alnum(uint8_t c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

/* JA4 of a ClientHello into out[37] ("t13d1516h2_8daaf6152771_b186095e22b6" + NUL); raw, when
 * not NULL, gets the JA4_r string (sorted lists, unhashed) within raw_cap. proto: 't' TCP,
 * 'q' QUIC. scratch: room for 2 * 32768 uint16 values; text: scratch characters, text_cap of
 * them (6 per list entry suffice). Returns 1, or 0 when something did not fit. */
int tls_ja4(const uint8_t *p, const tls_hello *h, char proto, uint16_t *scratch,
                          char *text, uint32_t text_cap, char *out, char *raw, uint32_t raw_cap);
/* tls_ja4 with its two SHA-256 through the memo m (NULL: none) */
int tls_ja4_m(const uint8_t *p, const tls_hello *h, char proto, uint16_t *scratch,
              char *text, uint32_t text_cap, char *out, char *raw, uint32_t raw_cap,
              tls_fp_memo *m);

#endif
