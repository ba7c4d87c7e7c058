/* The compiled half of tls_hello.h (what the header declares); compiled once into the wtc
 * static library (ext/meson.build), not into each module that includes the header. */
#include "tls_hello.h"

static const uint8_t tls_hrr_random[32] = {
    0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11, 0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91,
    0xC2, 0xA2, 0x11, 0x16, 0x7A, 0xBB, 0x8C, 0x5E, 0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C};

int tls_gather(const uint8_t *p, uint32_t n, uint8_t *out, uint32_t cap,
                             uint32_t *out_len, uint32_t *hs_len) {
    uint32_t pos = 0, o = 0, need, rl, take;
    *out_len = 0;
    *hs_len = 0;
    while (1) {
        if (n - pos < 5) {
            *out_len = o;
            return TLS_INCOMPLETE;
        }
        if (p[pos] != 22 || p[pos + 1] != 3 || p[pos + 2] > 4) {
            *out_len = o;
            return TLS_BAD_RECORD;
        }
        rl = tls_be16(p + pos + 3);
        if (rl == 0) {
            *out_len = o;
            return TLS_BAD_LENGTH;
        }
        pos += 5;
        take = rl < n - pos ? rl : n - pos;
        if (take > cap - o)
            take = cap - o;
        memcpy(out + o, p + pos, take);
        o += take;
        if (o >= 4) {
            need = 4 + tls_be24(out + 1);
            *hs_len = need - 4;
            if (o >= need) {            /* the message is whole (the rest: later messages) */
                *out_len = need;
                return TLS_OK;
            }
            if (need > cap) {
                *out_len = o;
                return TLS_TOO_LONG;
            }
        }
        if (take < rl) {                /* the stream ends inside this record */
            *out_len = o;
            return TLS_INCOMPLETE;
        }
        pos += rl;
    }
}

int tls_parse_hello(const uint8_t *p, uint32_t n, tls_hello *h) {
    uint32_t end, pos, l, et, el, e_end, k, best = 0;
    memset(h, 0, sizeof(*h));
    if (n < 4)
        return TLS_INCOMPLETE;
    h->hs_type = p[0];
    if (p[0] != 1 && p[0] != 2)
        return TLS_NOT_HELLO;
    h->hs_len = tls_be24(p + 1);
    if (n - 4 < h->hs_len)
        return TLS_INCOMPLETE;
    end = 4 + h->hs_len;
    pos = 4;
    if (end - pos < 2 + 32 + 1)
        return TLS_BAD_LENGTH;
    h->legacy_version = (uint16_t)tls_be16(p + pos);
    h->version = h->legacy_version;
    pos += 2;
    h->random.off = pos; h->random.len = 32;
    if (h->hs_type == 2 && memcmp(p + pos, tls_hrr_random, 32) == 0)
        h->flags |= TLSF_HRR;
    pos += 32;
    if (h->hs_type == 2 && ((tls13_draft(h->legacy_version) > 0 && tls13_draft(h->legacy_version) < 22)
                            || h->legacy_version == 0x0304)) {
        /* TLS 1.3 drafts before 22: version, random, cipher_suite, extensions (no session id
           echo, no compression method). 0x0304 in the field is such a draft too: early
           implementations wrote the final number there, and a final TLS 1.3 ServerHello always
           carries 0x0303 (RFC 8446 4.1.3), so the draft layout is the only reading. */
        h->session_id.off = pos; h->session_id.len = 0;
        if (end - pos < 2) return TLS_BAD_LENGTH;
        h->cipher = (uint16_t)tls_be16(p + pos);
        h->ciphers.off = pos; h->ciphers.len = 2;
        pos += 2;
        h->compression.off = pos; h->compression.len = 0;
        goto extensions;
    }
    l = p[pos++];
    if (l > 32 || end - pos < l)
        return TLS_BAD_LENGTH;
    h->session_id.off = pos; h->session_id.len = l;
    pos += l;
    if (h->hs_type == 1) {
        if (end - pos < 2) return TLS_BAD_LENGTH;
        l = tls_be16(p + pos); pos += 2;
        if ((l & 1) || end - pos < l) return TLS_BAD_LENGTH;
        h->ciphers.off = pos; h->ciphers.len = l;
        pos += l;
        if (end - pos < 1) return TLS_BAD_LENGTH;
        l = p[pos++];
        if (end - pos < l) return TLS_BAD_LENGTH;
        h->compression.off = pos; h->compression.len = l;
        pos += l;
    } else {
        if (end - pos < 3) return TLS_BAD_LENGTH;
        h->cipher = (uint16_t)tls_be16(p + pos);
        h->ciphers.off = pos; h->ciphers.len = 2;
        pos += 2;
        h->compression.off = pos; h->compression.len = 1;
        pos += 1;
    }
extensions:
    if (pos == end) {
        h->flags |= TLSF_NO_EXTENSIONS;
        return TLS_OK;
    }
    if (end - pos < 2) return TLS_BAD_LENGTH;
    l = tls_be16(p + pos); pos += 2;
    if (end - pos < l) return TLS_BAD_LENGTH;
    if (end - pos > l) h->flags |= TLSF_TRAILING;
    h->exts.off = pos; h->exts.len = l;
    e_end = pos + l;
    while (pos < e_end) {
        if (e_end - pos < 4) { h->flags |= TLSF_EXT_TRUNCATED; break; }
        et = tls_be16(p + pos); el = tls_be16(p + pos + 2);
        pos += 4;
        if (e_end - pos < el) { h->flags |= TLSF_EXT_TRUNCATED; break; }
        h->n_exts++;
        switch (et) {
        case 0:       /* server_name: list_len u16, (type u8, len u16, name)* */
            h->flags |= TLSF_SNI;
            if (h->hs_type == 1 && el >= 5) {
                uint32_t ll = tls_be16(p + pos), q = pos + 2, qe;
                if (ll > el - 2) ll = el - 2;
                qe = q + ll;
                while (qe - q >= 3) {
                    uint32_t nt = p[q], nl = tls_be16(p + q + 1);
                    q += 3;
                    if (qe - q < nl) break;
                    if (nt == 0 && h->sni.len == 0 && nl > 0) { h->sni.off = q; h->sni.len = nl; }
                    q += nl;
                }
            }
            break;
        case 16:      /* ALPN: list_len u16, (len u8, name)* */
            h->flags |= TLSF_ALPN;
            if (el >= 2) {
                uint32_t ll = tls_be16(p + pos);
                if (ll <= el - 2) { h->alpn.off = pos + 2; h->alpn.len = ll; }
            }
            break;
        case 43:      /* supported_versions: CH list_len u8, versions; SH the selected one */
            h->flags |= TLSF_SUPPORTED_VERSIONS;
            if (h->hs_type == 1) {
                if (el >= 1) {
                    uint32_t ll = p[pos];
                    if (ll <= el - 1) {
                        ll &= ~1u;
                        h->versions.off = pos + 1; h->versions.len = ll;
                        for (k = 0; k < ll; k += 2) {
                            uint32_t v = tls_be16(p + pos + 1 + k);
                            if (!tls_is_grease(v) && v > best) best = v;
                        }
                        if (best) h->version = (uint16_t)best;
                    }
                }
            } else if (el >= 2) {
                h->versions.off = pos; h->versions.len = 2;
                h->version = (uint16_t)tls_be16(p + pos);
            }
            break;
        case 10:      /* supported_groups: list_len u16, groups */
            if (el >= 2) {
                uint32_t ll = tls_be16(p + pos);
                if (ll <= el - 2) { h->groups.off = pos + 2; h->groups.len = ll & ~1u; }
            }
            break;
        case 11:      /* ec_point_formats: list_len u8, formats */
            if (el >= 1) {
                uint32_t ll = p[pos];
                if (ll <= el - 1) { h->point_formats.off = pos + 1; h->point_formats.len = ll; }
            }
            break;
        case 13:      /* signature_algorithms: list_len u16, algorithms */
            if (el >= 2) {
                uint32_t ll = tls_be16(p + pos);
                if (ll <= el - 2) { h->sig_algs.off = pos + 2; h->sig_algs.len = ll & ~1u; }
            }
            break;
        case 51:      /* key_share: CH list_len u16, entries; SH one entry (HRR: the group) */
            if (h->hs_type == 1) {
                if (el >= 2) {
                    uint32_t ll = tls_be16(p + pos);
                    if (ll <= el - 2) { h->key_share.off = pos + 2; h->key_share.len = ll; }
                }
            } else {
                h->key_share.off = pos; h->key_share.len = el;
            }
            break;
        case 0xfe0d:
            h->flags |= TLSF_ECH;
            break;
        case 0xffce:
            h->flags |= TLSF_ESNI;
            break;
        }
        pos += el;
    }
    return TLS_OK;
}

int tls_parse_sslv2(const uint8_t *p, uint32_t n, tls_hello *h) {
    uint32_t hl = tls_sslv2_hello_len(p, n), cs, sl, cl;
    memset(h, 0, sizeof(*h));
    if (hl == 0)
        return TLS_NOT_TLS;
    h->hs_type = 1;
    h->flags = TLSF_SSLV2 | TLSF_NO_EXTENSIONS;
    if (n < hl) {
        h->hs_len = hl - 3;
        return TLS_INCOMPLETE;
    }
    h->hs_len = hl - 3;
    h->legacy_version = h->version = (uint16_t)tls_be16(p + 3);
    cs = tls_be16(p + 5); sl = tls_be16(p + 7); cl = tls_be16(p + 9);
    h->ciphers.off = 11; h->ciphers.len = cs;
    h->session_id.off = 11 + cs; h->session_id.len = sl;
    h->random.off = 11 + cs + sl; h->random.len = cl;
    h->compression.off = hl; h->compression.len = 0;
    h->exts.off = hl; h->exts.len = 0;
    return TLS_OK;
}

/* tls_parse_payload's framing: the first hello's handshake message in a payload (in place when
 * one record holds it whole and captured, else gathered into scratch). TLS_OK with *msg, *len;
 * PM_SSLV2 for an SSLv2-format ClientHello at p; TLS_NOT_TLS; or tls_gather's error, *t and *hl
 * then the handshake type and declared length as far as known. */
enum { PM_SSLV2 = -1 };

static int payload_message(const uint8_t *p, uint32_t n, uint8_t *scratch, uint32_t cap,
                           const uint8_t **msg, uint32_t *len, int *t, uint32_t *hl) {
    int r;
    uint32_t off = tls_hello_start(p, n, t), got;
    *hl = 0;
    if (*t == 0)
        return TLS_NOT_TLS;
    if (p[0] & 0x80)                    /* SSLv2-format ClientHello: one record, never split */
        return PM_SSLV2;
    p += off;
    n -= off;
    /* common case: the whole message inside the first record and the captured bytes */
    if (n >= 9) {
        uint32_t rl = tls_be16(p + 3), ml = 4 + tls_be24(p + 6);
        if (ml <= rl && 5 + ml <= n) {
            *msg = p + 5;
            *len = ml;
            return TLS_OK;
        }
    }
    r = tls_gather(p, n, scratch, cap, &got, hl);
    if (r != TLS_OK)
        return r;
    *msg = scratch;
    *len = got;
    return TLS_OK;
}

int tls_parse_payload(const uint8_t *p, uint32_t n, uint8_t *scratch, uint32_t cap,
                                    tls_hello *h, const uint8_t **msg) {
    int t, r;
    uint32_t len = 0, hl;
    const uint8_t *m = NULL;
    r = payload_message(p, n, scratch, cap, &m, &len, &t, &hl);
    memset(h, 0, sizeof(*h));
    *msg = NULL;
    if (r == PM_SSLV2) {
        *msg = p;
        return tls_parse_sslv2(p, n, h);
    }
    if (r != TLS_OK) {
        if (r != TLS_NOT_TLS) {
            h->hs_type = (uint8_t)t;
            h->hs_len = hl;
        }
        return r;
    }
    *msg = m;
    return tls_parse_hello(m, len, h);
}

int tls_server_version(const uint8_t *p, uint32_t n, uint16_t *version, int *hrr) {
    uint32_t end, pos, l, el, e_end, legacy;
    *version = 0;
    *hrr = 0;
    if (n < 4)
        return TLS_INCOMPLETE;
    if (p[0] != 2)
        return TLS_NOT_HELLO;
    l = tls_be24(p + 1);
    if (n - 4 < l)
        return TLS_INCOMPLETE;
    end = 4 + l;
    pos = 4;
    if (end - pos < 2 + 32 + 1)
        return TLS_BAD_LENGTH;
    legacy = tls_be16(p + pos);
    *version = (uint16_t)legacy;
    pos += 2;
    *hrr = memcmp(p + pos, tls_hrr_random, 32) == 0;
    pos += 32;
    if ((tls13_draft(legacy) > 0 && tls13_draft(legacy) < 22) || legacy == 0x0304) {
        /* the drafts' layout (tls_parse_hello): cipher suite, then the extensions */
        if (end - pos < 2) return TLS_BAD_LENGTH;
        pos += 2;
    } else {
        l = p[pos++];
        if (l > 32 || end - pos < l)
            return TLS_BAD_LENGTH;
        pos += l;
        if (end - pos < 3) return TLS_BAD_LENGTH;
        pos += 3;                       /* cipher suite, compression method */
    }
    if (pos == end)
        return TLS_OK;
    if (end - pos < 2) return TLS_BAD_LENGTH;
    l = tls_be16(p + pos); pos += 2;
    if (end - pos < l) return TLS_BAD_LENGTH;
    e_end = pos + l;
    while (e_end - pos >= 4) {          /* a truncated extension ends the walk, as there */
        el = tls_be16(p + pos + 2);
        if (e_end - pos - 4 < el)
            break;
        if (tls_be16(p + pos) == 43 && el >= 2)
            *version = (uint16_t)tls_be16(p + pos + 4);
        pos += 4 + el;
    }
    return TLS_OK;
}

int tls_payload_server_version(const uint8_t *p, uint32_t n, uint8_t *scratch, uint32_t cap,
                               uint16_t *version, int *hrr) {
    int t, r;
    uint32_t len = 0, hl;
    const uint8_t *m = NULL;
    *version = 0;
    *hrr = 0;
    r = payload_message(p, n, scratch, cap, &m, &len, &t, &hl);
    if (r == PM_SSLV2)
        return TLS_NOT_HELLO;
    if (r != TLS_OK)
        return r;
    return tls_server_version(m, len, version, hrr);
}
