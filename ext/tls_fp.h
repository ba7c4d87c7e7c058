/* TLS fingerprints of a parsed hello (ext/tls_hello.h): JA3 and JA3S (salesforce/ja3, MD5 of the
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
#include "digest.h"        /* MD5 / SHA-256 fetched once, one context per thread */
#include "util.h"          /* wt_u32_dec */

#include "tls_hello.h"

typedef struct { char *b; uint32_t cap, n; int over; } tls_sb;

static inline void tls_sb_c(tls_sb *s, char c) {
    if (s->n + 1 >= s->cap) { s->over = 1; return; }
    s->b[s->n++] = c;
}
static inline void tls_sb_dec(tls_sb *s, uint32_t v) {
    char t[10];
    size_t k = wt_u32_dec(v, t), i;
    for (i = 0; i < k; i++) tls_sb_c(s, t[i]);
}
static inline void tls_sb_hex4(tls_sb *s, uint32_t v) {
    static const char hx[] = "0123456789abcdef";
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
static inline uint32_t tls_ja3_string(const uint8_t *p, const tls_hello *h, char *buf, uint32_t cap) {
    tls_sb s = {buf, cap, 0, 0};
    uint32_t q = h->exts.off, qe = q + h->exts.len, el, et, first = 1, k;
    if (cap == 0) return 0;
    /* an SSLv2-format ClientHello has no JA3: the reference reads TLS handshake records only (and
       tshark's tls.handshake.ja3 is empty for it); see docs/TLS.md */
    if (h->flags & TLSF_SSLV2) { buf[0] = 0; return 0; }
    tls_sb_dec(&s, h->legacy_version);
    tls_sb_c(&s, ',');
    if (h->hs_type == 1)
        tls_sb_list16(&s, p, h->ciphers, 1);
    else
        tls_sb_dec(&s, h->cipher);
    tls_sb_c(&s, ',');
    while (qe - q >= 4) {
        et = tls_be16(p + q); el = tls_be16(p + q + 2);
        if (qe - q - 4 < el) break;
        q += 4 + el;
        if (tls_is_grease(et)) continue;
        if (!first) tls_sb_c(&s, '-');
        tls_sb_dec(&s, et);
        first = 0;
    }
    if (h->hs_type == 1) {
        tls_sb_c(&s, ',');
        tls_sb_list16(&s, p, h->groups, 1);
        tls_sb_c(&s, ',');
        for (k = 0; k < h->point_formats.len; k++) {
            if (k) tls_sb_c(&s, '-');
            tls_sb_dec(&s, p[h->point_formats.off + k]);
        }
    }
    if (s.over) { buf[0] = 0; return 0; }
    buf[s.n] = 0;
    return s.n;
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
static inline int tls_sha12(const char *s, uint32_t n, char *out) {
    unsigned char d[EVP_MAX_MD_SIZE];
    char hx[65];
    unsigned int dl = 0;
    if (n == 0) { memcpy(out, "000000000000", 13); return 1; }
    if ((dl = wt_digest(WT_SHA256, s, n, d)) != 32) { out[0] = 0; return 0; }
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
static inline int tls_ja4(const uint8_t *p, const tls_hello *h, char proto, uint16_t *scratch,
                          char *text, uint32_t text_cap, char *out, char *raw, uint32_t raw_cap) {
    uint16_t *ci = scratch, *ex = scratch + 32768;
    uint32_t nci = 0, nex = 0, next_all = 0, k, v, q, qe, el;
    char ver[2], a0 = '0', a1 = '0', hb[13], hc[13];
    tls_sb s, rs = {0, 0, 0, 0};
    uint32_t blen, clen;
    /* JA4 is defined over a TLS ClientHello (2-byte cipher suites, extensions); an SSLv2-format
       hello has neither form: no JA4 (docs/TLS.md) */
    if (h->hs_type != 1 || (h->flags & TLSF_SSLV2)) return 0;
    for (k = 0; k + 1 < h->ciphers.len && nci < 32768; k += 2) {
        v = tls_be16(p + h->ciphers.off + k);
        if (!tls_is_grease(v)) ci[nci++] = (uint16_t)v;
    }
    q = h->exts.off; qe = q + h->exts.len;
    while (qe - q >= 4 && nex < 32768) {
        v = tls_be16(p + q); el = tls_be16(p + q + 2);
        if (qe - q - 4 < el) break;
        q += 4 + el;
        if (tls_is_grease(v)) continue;
        next_all++;
        if (v == 0 || v == 16) continue;       /* SNI and ALPN: counted, not hashed */
        ex[nex++] = (uint16_t)v;
    }
    tls_sort16(ci, nci);
    tls_sort16(ex, nex);
    tls_ja4_version(h->version, ver);
    /* first ALPN value: first and last character; hex digits of its first/last byte when either
       is not alphanumeric */
    if (h->alpn.len >= 1) {
        uint32_t al = p[h->alpn.off];
        if (al >= 1 && al <= h->alpn.len - 1) {
            uint8_t f = p[h->alpn.off + 1], l = p[h->alpn.off + al];
            /* The reference tool (FoxIO-LLC/ja4 python, whose published outputs the tests
               check) writes "99" when the value's first or last byte is not alphanumeric; a
               later revision of JA4.md prints hex digits instead. We follow the outputs. */
            if (tls_alnum(f) && tls_alnum(l)) { a0 = (char)f; a1 = (char)l; }
            else { a0 = '9'; a1 = '9'; }
        }
    }
    /* b: sorted ciphers */
    s = (tls_sb){text, text_cap, 0, 0};
    for (k = 0; k < nci; k++) { if (k) tls_sb_c(&s, ','); tls_sb_hex4(&s, ci[k]); }
    if (s.over) return 0;
    blen = s.n;
    if (!tls_sha12(text, blen, hb)) return 0;
    if (raw) {
        rs = (tls_sb){raw, raw_cap, 0, 0};
        for (k = 0; k < blen; k++) tls_sb_c(&rs, text[k]);   /* a is written at the end */
    }
    /* c: sorted extensions (no SNI/ALPN) '_' signature algorithms in wire order */
    s = (tls_sb){text, text_cap, 0, 0};
    for (k = 0; k < nex; k++) { if (k) tls_sb_c(&s, ','); tls_sb_hex4(&s, ex[k]); }
    if (h->sig_algs.len >= 2) {
        int first = 1;
        tls_sb_c(&s, '_');
        for (k = 0; k + 1 < h->sig_algs.len; k += 2) {
            v = tls_be16(p + h->sig_algs.off + k);
            if (tls_is_grease(v)) continue;
            if (!first) tls_sb_c(&s, ',');
            tls_sb_hex4(&s, v);
            first = 0;
        }
    }
    if (s.over) return 0;
    clen = s.n;
    if (nex == 0) { memcpy(hc, "000000000000", 13); }
    else if (!tls_sha12(text, clen, hc)) return 0;
    out[0] = proto; out[1] = ver[0]; out[2] = ver[1];
    out[3] = (h->flags & TLSF_SNI) ? 'd' : 'i';
    if (nci > 99) nci = 99;
    if (next_all > 99) next_all = 99;
    out[4] = (char)('0' + nci / 10); out[5] = (char)('0' + nci % 10);
    out[6] = (char)('0' + next_all / 10); out[7] = (char)('0' + next_all % 10);
    out[8] = a0; out[9] = a1; out[10] = '_';
    memcpy(out + 11, hb, 12); out[23] = '_';
    memcpy(out + 24, hc, 12); out[36] = 0;
    if (raw) {                 /* JA4_r: a _ sorted ciphers _ sorted extensions[_sigalgs] */
        uint32_t need = 11 + blen + 1 + clen + 1;
        if (need > raw_cap) { raw[0] = 0; return 1; }
        memmove(raw + 11, raw, blen);
        memcpy(raw, out, 11);
        raw[11 + blen] = '_';
        memcpy(raw + 12 + blen, text, clen);
        raw[12 + blen + clen] = 0;
    }
    return 1;
}

#endif
