/* The compiled half of tls_fp.h (what the header declares); compiled once into the wtc
 * static library (ext/meson.build), not into each module that includes the header. */
#include "tls_fp.h"

uint32_t tls_ja3_string(const uint8_t *p, const tls_hello *h, char *buf, uint32_t cap) {
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

unsigned int tls_fp_digest(tls_fp_memo *m, int which, const char *s, uint32_t n, unsigned char *out) {
    uint64_t x = 0x9E3779B97F4A7C15ull ^ n ^ ((uint64_t)which << 32), w;
    uint32_t k, len;
    tls_fp_memo_slot *e;
    if (m == NULL || n > TLS_FP_MEMO_IN)
        return wt_digest(which, s, n, out);
    for (k = 0; k + 8 <= n; k += 8) {          /* the slot: a multiply-xor hash, 8 bytes a step */
        memcpy(&w, s + k, 8);
        x = (x ^ w) * 0xBF58476D1CE4E5B9ull;
        x ^= x >> 31;
    }
    for (; k < n; k++)
        x = (x ^ (uint8_t)s[k]) * 0x94D049BB133111EBull;
    x ^= x >> 29;
    e = &m->s[(x * 0x9E3779B97F4A7C15ull) >> 56];
    len = which == WT_MD5 ? 16 : 32;
    if (e->which == (uint32_t)which + 1 && e->n == n && memcmp(e->in, s, n) == 0) {
        memcpy(out, e->dig, len);
        return len;
    }
    if (wt_digest(which, s, n, out) != len)
        return 0;
    e->which = (uint32_t)which + 1;
    e->n = n;
    memcpy(e->in, s, n);
    memcpy(e->dig, out, len);
    return len;
}

int tls_ja4(const uint8_t *p, const tls_hello *h, char proto, uint16_t *scratch,
            char *text, uint32_t text_cap, char *out, char *raw, uint32_t raw_cap) {
    return tls_ja4_m(p, h, proto, scratch, text, text_cap, out, raw, raw_cap, NULL);
}

int tls_ja4_m(const uint8_t *p, const tls_hello *h, char proto, uint16_t *scratch,
              char *text, uint32_t text_cap, char *out, char *raw, uint32_t raw_cap,
              tls_fp_memo *m) {
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
    if (!tls_sha12(m, text, blen, hb)) return 0;
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
    else if (!tls_sha12(m, text, clen, hc)) return 0;
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
