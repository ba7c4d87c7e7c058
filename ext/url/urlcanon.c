/* The compiled half of urlcanon.h (what the header declares); compiled once into the wtc
 * static library (ext/meson.build), not into each module that includes the header. */
#include "urlcanon.h"

const uint8_t _canon_cls[256] = {
    [0 ... 0x20] = CC_BAD, [0x7f] = CC_BAD,
    ['\t'] = CC_BAD | CC_WS, ['\n'] = CC_BAD | CC_WS, ['\v'] = CC_BAD | CC_WS, ['\f'] = CC_BAD | CC_WS,
    ['\r'] = CC_BAD | CC_WS, [' '] = CC_BAD | CC_WS,
    ['a' ... 'z'] = CC_UNRES | CC_HOST | CC_SEG, ['A' ... 'Z'] = CC_UNRES | CC_HOST | CC_SEG | CC_UPPER,
    ['0' ... '9'] = CC_UNRES | CC_HOST | CC_SEG,
    ['-'] = CC_UNRES | CC_HOST | CC_SEG, ['.'] = CC_UNRES | CC_HOST | CC_SEG, ['_'] = CC_UNRES | CC_HOST | CC_SEG,
    ['~'] = CC_UNRES | CC_SEG,
    ['!'] = CC_KEEP | CC_SEG, ['$'] = CC_KEEP | CC_SEG, ['&'] = CC_KEEP | CC_SEG, ['\''] = CC_KEEP | CC_SEG,
    ['('] = CC_KEEP | CC_SEG, [')'] = CC_KEEP | CC_SEG, ['*'] = CC_KEEP | CC_SEG, ['+'] = CC_KEEP | CC_SEG,
    [','] = CC_KEEP | CC_SEG, [';'] = CC_KEEP | CC_SEG, ['='] = CC_KEEP | CC_SEG, [':'] = CC_KEEP | CC_SEG,
    ['@'] = CC_KEEP | CC_SEG, ['/'] = CC_KEEP | CC_AEND, ['?'] = CC_KEEP | CC_AEND, ['#'] = CC_AEND,
};
static const char _canon_hex[] = "0123456789ABCDEF";

/* An IPv6 literal host, out[0:*o] = "[...]" (already lower case), rewritten in place to the
 * RFC 5952 text: hex groups without leading zeros, the longest run of two or more zero groups
 * (the first of equal runs) as "::", an embedded dotted IPv4 tail as two hex groups, except in
 * an IPv4-mapped address (::ffff:0:0/96), which RFC 5952 section 5 writes with its IPv4 tail
 * dotted: [::FFFF:c000:0201] is [::ffff:192.0.2.1]. So [2001:DB8:0::1] and [2001:db8::1] are
 * one host. 0 or CANON_BAD_HOST / CANON_TOO_LONG. */
static int _canon_ipv6(uint8_t *out, size_t *o, size_t cap) {
    const uint8_t *s = out + 1;
    size_t n, i = 0, k;
    uint16_t g[8];
    int ng = 0, gap = -1, best = -1, bestlen = 0, run, j;
    uint8_t tmp[48];
    if (*o < 3 || out[*o - 1] != ']') return CANON_BAD_HOST;
    n = *o - 2;
    if (n >= 2 && s[0] == ':' && s[1] == ':') {
        gap = 0;
        i = 2;
    } else if (n && s[0] == ':') {
        return CANON_BAD_HOST;
    }
    while (i < n) {
        size_t st = i;
        uint32_t v = 0;
        int dig = 0, h;
        while (i < n && dig < 5 && (h = _canon_hexval(s[i])) >= 0) { v = v * 16 + (uint32_t)h; i++; dig++; }
        if (i < n && s[i] == '.') {                       /* dotted IPv4 tail: the last 32 bits */
            uint32_t ip = 0, oct;
            int parts = 0, d;
            if (ng > 6) return CANON_BAD_HOST;
            i = st;
            while (parts < 4) {
                oct = 0; d = 0;
                while (i < n && s[i] >= '0' && s[i] <= '9' && d < 4) { oct = oct * 10 + (s[i] - '0'); i++; d++; }
                if (d == 0 || d > 3 || oct > 255) return CANON_BAD_HOST;
                ip = (ip << 8) | oct;
                parts++;
                if (parts < 4) {
                    if (i >= n || s[i] != '.') return CANON_BAD_HOST;
                    i++;
                }
            }
            if (i != n) return CANON_BAD_HOST;
            g[ng++] = (uint16_t)(ip >> 16);
            g[ng++] = (uint16_t)(ip & 0xFFFF);
            break;
        }
        if (dig == 0 || dig > 4 || ng >= 8) return CANON_BAD_HOST;
        g[ng++] = (uint16_t)v;
        if (i == n) break;
        if (s[i] != ':') return CANON_BAD_HOST;
        i++;
        if (i < n && s[i] == ':') {
            if (gap >= 0) return CANON_BAD_HOST;
            gap = ng;
            i++;
        } else if (i == n) {
            return CANON_BAD_HOST;                        /* a trailing single ':' */
        }
    }
    if (gap >= 0) {
        if (ng > 7) return CANON_BAD_HOST;
        for (j = ng - 1; j >= gap; j--) g[j + 8 - ng] = g[j];
        for (j = gap; j < gap + 8 - ng; j++) g[j] = 0;
    } else if (ng != 8) {
        return CANON_BAD_HOST;
    }
    for (j = 0; j < 8; j++) {
        if (g[j]) continue;
        run = 0;
        while (j + run < 8 && g[j + run] == 0) run++;
        if (run > bestlen) { bestlen = run; best = j; }
        j += run - 1;
    }
    if (bestlen < 2) best = -1;
    k = 0;
    tmp[k++] = '[';
    if (!g[0] && !g[1] && !g[2] && !g[3] && !g[4] && g[5] == 0xFFFF) {
        /* RFC 5952 section 5: an IPv4-mapped address keeps its IPv4 tail dotted */
        static const char pre[] = "::ffff:";
        int q;
        memcpy(tmp + k, pre, 7);
        k += 7;
        for (q = 0; q < 4; q++) {
            unsigned oct = (q < 2 ? g[6] : g[7]) >> (q % 2 ? 0 : 8) & 0xFF;
            if (q) tmp[k++] = '.';
            if (oct >= 100) tmp[k++] = (uint8_t)('0' + oct / 100);
            if (oct >= 10) tmp[k++] = (uint8_t)('0' + oct / 10 % 10);
            tmp[k++] = (uint8_t)('0' + oct % 10);
        }
        best = 8;                                         /* the groups are written */
    }
    for (j = 0; j < 8 && best < 8; j++) {
        if (j == best) {
            tmp[k++] = ':';
            tmp[k++] = ':';
            j += bestlen - 1;
            continue;
        }
        if (j && !(best >= 0 && j == best + bestlen)) tmp[k++] = ':';
        {
            static const char hx[] = "0123456789abcdef";
            int sh = 12, started = 0;
            for (; sh >= 0; sh -= 4) {
                int d = (g[j] >> sh) & 0xF;
                if (d || started || sh == 0) { tmp[k++] = (uint8_t)hx[d]; started = 1; }
            }
        }
    }
    tmp[k++] = ']';
    if (k > cap) return CANON_TOO_LONG;
    memcpy(out, tmp, k);
    *o = k;
    return 0;
}

/* Normalise one path segment or the query from in[0:n] into out at *o (R6). */
static int _canon_pct(const uint8_t *in, size_t n, uint8_t *out, size_t cap, size_t *o) {
    size_t i, oo = *o;
    if (oo + 3 * n <= cap) {          /* fast path: cannot overflow, copy plain runs directly */
        for (i = 0; i < n && (_canon_cls[in[i]] & (CC_UNRES | CC_KEEP)); i++) out[oo + i] = in[i];
        *o = oo + i;
        in += i;
        n -= i;
        if (n == 0) return 0;
    }
    for (i = 0; i < n; i++) {
        uint8_t c = in[i];
        if (*o + 3 > cap) return CANON_TOO_LONG;
        if (_canon_cls[c] & (CC_UNRES | CC_KEEP)) {
            out[(*o)++] = c;
        } else if (c == '%') {
            int h, l;
            if (i + 2 < n && (h = _canon_hexval(in[i + 1])) >= 0 &&
                (l = _canon_hexval(in[i + 2])) >= 0) {
                uint8_t v = (uint8_t)(h * 16 + l);
                i += 2;
                if (_canon_unreserved(v)) { out[(*o)++] = v; continue; }
                out[(*o)++] = '%'; out[(*o)++] = _canon_hex[v >> 4]; out[(*o)++] = _canon_hex[v & 15];
                continue;
            }
            out[(*o)++] = '%'; out[(*o)++] = '2'; out[(*o)++] = '5';
        } else {
            out[(*o)++] = '%'; out[(*o)++] = _canon_hex[c >> 4]; out[(*o)++] = _canon_hex[c & 15];
        }
    }
    return 0;
}

#if defined(__SSE2__)
#include <emmintrin.h>
/* 16 bytes at a time (SSE2, every x86-64): a bit per byte of p[0:16) in the class, by signed
 * byte compares (bytes >= 0x80 are negative: in no class), the classes of _canon_cls written
 * out. A host byte these compares missed would only hand the rest of the host to the byte
 * loop (slower, the same result); a segment byte missed, or any byte taken in wrongly, changes
 * what the fast path answers: tests/urlfilter/test_canon.py puts every byte value at every
 * offset of a long host and a long segment against the full rules and the classes' rule. */
static inline __m128i _canon_rng(__m128i v, char lo, char hi) {
    return _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8((char)(lo - 1))),
                         _mm_cmplt_epi8(v, _mm_set1_epi8((char)(hi + 1))));
}
static inline __m128i _canon_is(__m128i v, char c) { return _mm_cmpeq_epi8(v, _mm_set1_epi8(c)); }
/* CC_HOST: a-z A-Z 0-9 - . _ */
static inline unsigned _canon_host16(__m128i v) {
    __m128i m = _mm_or_si128(_mm_or_si128(_canon_rng(v, 'a', 'z'), _canon_rng(v, 'A', 'Z')),
                             _mm_or_si128(_canon_rng(v, '-', '.'), _canon_rng(v, '0', '9')));
    return (unsigned)_mm_movemask_epi8(_mm_or_si128(m, _canon_is(v, '_')));
}
/* CC_SEG: a-z A-Z 0-9 - . _ ~ ! $ & ' ( ) * + , ; = : @ */
static inline unsigned _canon_seg16(__m128i v) {
    __m128i m = _mm_or_si128(_mm_or_si128(_canon_rng(v, 'a', 'z'), _canon_rng(v, '@', 'Z')),
                             _mm_or_si128(_canon_rng(v, '&', '.'), _canon_rng(v, '0', ';')));
    m = _mm_or_si128(m, _mm_or_si128(_mm_or_si128(_canon_is(v, '_'), _canon_is(v, '~')),
                                     _mm_or_si128(_canon_is(v, '!'), _canon_is(v, '$'))));
    return (unsigned)_mm_movemask_epi8(_mm_or_si128(m, _canon_is(v, '=')));
}
#endif

/* The end of the path segment that starts at i: the first byte at or after i that is not
 * CC_SEG, or b. */
static inline size_t _canon_seg_end(const uint8_t *in, size_t i, size_t b) {
#if defined(__SSE2__)
    while (i + 16 <= b) {
        unsigned m = ~_canon_seg16(_mm_loadu_si128((const __m128i *)(in + i))) & 0xffffu;
        if (m) return i + (size_t)__builtin_ctz(m);
        i += 16;
    }
#endif
    while (i < b && (_canon_cls[in[i]] & CC_SEG)) i++;
    return i;
}

/* Fast path for the common input that is canonical already up to the scheme, the host's case
 * and empty path segments: in[a:b] (trimmed, scheme and "//" dropped, no bad byte) with a host
 * of [A-Za-z0-9-_.] only (no leading, trailing or repeated dot; so no userinfo, port or IPv6
 * literal), then path segments and a query of bytes that R6 keeps as they are (no '%', no '#',
 * nothing to encode), and no "." or ".." segment. One scan of the host (its labels then copied),
 * one of the path (then copied whole, or segment by segment when one is empty); empty
 * segments are skipped and an empty query dropped exactly as R7/R8 do. Returns the output
 * length, or _CANON_SLOW as soon as anything else shows up (the caller then runs the full rules,
 * which give byte-identical output for the inputs accepted here: tests/urlfilter/test_canon.py
 * compares the two). The output is never longer than in[a:b]. */
static ptrdiff_t _canon_fast(const uint8_t *in, size_t a, size_t b, uint8_t *out, size_t cap, int flags) {
    size_t i = a, o, s, j, e, dot[64], nd = 0, t;
    uint8_t seen = 0, k;
    int holes = 0;                                     /* the path has an empty segment */
    if (b - a > cap) return _CANON_SLOW;             /* let the full path report CANON_TOO_LONG */
    /* R4: the host is in[a:e]; labels are copied (in reverse order for the key form) while
     * looking for empty ones (a leading, trailing or repeated dot: the full path's business).
     * The one forward scan records the dots (more than 63: the full path), so the labels are
     * copied without a second, backward scan for them (2026-11-28: -0.017 us per URL, paired) */
#if defined(__SSE2__)
    while (i + 16 <= b) {                              /* 16 bytes at a time, then the rest */
        __m128i v = _mm_loadu_si128((const __m128i *)(in + i));
        unsigned stop = ~_canon_host16(v) & 0xffffu, in_host = stop ? (stop & -stop) - 1 : 0xffffu;
        unsigned dots = (unsigned)_mm_movemask_epi8(_canon_is(v, '.')) & in_host;
        if ((unsigned)_mm_movemask_epi8(_canon_rng(v, 'A', 'Z')) & in_host) seen |= CC_UPPER;
        for (; dots; dots &= dots - 1) {
            dot[nd & 63] = i + (size_t)__builtin_ctz(dots);
            nd++;
        }
        if (stop) {
            i += (size_t)__builtin_ctz(stop);
            break;
        }
        i += 16;
    }
#endif
    while (i < b && ((k = _canon_cls[in[i]]) & CC_HOST)) {
        seen |= k;
        dot[nd & 63] = i;
        nd += in[i] == '.';
        i++;
    }
    if (i == a || nd > 63 || (i < b && in[i] != '/' && in[i] != '?')) return _CANON_SLOW;
    e = i;
    dot[nd] = e;
    if (flags & CANON_KEY) {
        o = 0;
        for (t = nd + 1; t-- > 0;) {                   /* label t is (dot[t - 1], dot[t]) */
            s = t ? dot[t - 1] + 1 : a;
            if (s == dot[t]) return _CANON_SLOW;       /* empty label */
            memcpy(out + o, in + s, dot[t] - s);
            o += dot[t] - s;
            if (t) out[o++] = '.';
        }
    } else {
        for (t = 0; t <= nd; t++)
            if ((t ? dot[t - 1] + 1 : a) == dot[t]) return _CANON_SLOW;
        memcpy(out, in + a, e - a);
    }
    o = e - a;
    if (seen & CC_UPPER)
        for (j = 0; j < o; j++) if (out[j] >= 'A' && out[j] <= 'Z') out[j] |= 0x20;
    /* R6, R7: the path's segments. A path without an empty segment is copied as it is, in one
     * copy after the scan (a copy per segment was a sixth of the fast path's time: 2026-11-29,
     * the URL store's bench queries in a C loop) */
    t = i;
    while (i < b && in[i] == '/') {
        s = ++i;
        i = _canon_seg_end(in, i, b);
        if (i < b && in[i] != '/' && in[i] != '?') return _CANON_SLOW;
        if (i == s) { holes = 1; continue; }           /* empty segment */
        if (in[s] == '.' && (i - s == 1 || (i - s == 2 && in[s + 1] == '.'))) return _CANON_SLOW;
    }
    if (!holes) {
        memcpy(out + o, in + t, i - t);
        o += i - t;
    } else {
        for (j = t; j < i;) {                          /* again, each segment on its own */
            s = ++j;
            while (j < i && in[j] != '/') j++;
            if (j == s) continue;
            out[o++] = '/';
            memcpy(out + o, in + s, j - s);
            o += j - s;
        }
    }
    if (i < b) {                                       /* in[i] == '?': R6, R8: the query */
        s = ++i;
        while (i < b && (_canon_cls[in[i]] & (CC_UNRES | CC_KEEP))) i++;
        if (i < b) return _CANON_SLOW;
        if (b > s) {
            out[o++] = '?';
            memcpy(out + o, in + s, b - s);
            o += b - s;
        }
    }
    return (ptrdiff_t)o;
}

ptrdiff_t webtap_canon(const uint8_t *in, size_t n, uint8_t *out, size_t cap, int flags) {
    size_t a = 0, b = n, i, o = 0, auth_end, host_s, host_e, port_s = 0, port_e = 0, path_start;
    int has_port = 0, rc;
    /* R1 */
    while (a < b && _canon_ws(in[a])) a++;
    while (b > a && _canon_ws(in[b - 1])) b--;
    if (a == b) return CANON_EMPTY;
    /* R2 */
    i = a;
    {   /* a scheme is at most 32 bytes: look for "://" there instead of scanning the host */
        const uint8_t *colon = (const uint8_t *)memchr(in + a, ':', (b - a) < 33 ? (b - a) : 33);
        if (colon && (size_t)(colon - in) + 2 < b && colon[1] == '/' && colon[2] == '/' &&
            ((in[a] | 0x20) >= 'a' && (in[a] | 0x20) <= 'z')) {
            size_t j = a + 1, c_at = (size_t)(colon - in);
            while (j < c_at && (((in[j] | 0x20) >= 'a' && (in[j] | 0x20) <= 'z') || (in[j] >= '0' && in[j] <= '9') ||
                                in[j] == '+' || in[j] == '-' || in[j] == '.'))
                j++;
            if (j == c_at) a = c_at + 3;
        }
    }
    if (a == i && a + 1 < b && in[a] == '/' && in[a + 1] == '/') a += 2;
    if (!(flags & CANON_FULL)) {
        ptrdiff_t r = _canon_fast(in, a, b, out, cap, flags);
        if (r != _CANON_SLOW || (flags & CANON_FAST_ONLY)) return r;
    }
    /* R1, checked only now: the fast path has looked at every byte of in[a:b] (and R2 at those
     * before a) and accepts none that is bad */
    if (_canon_has_bad(in + i, b - i)) return CANON_BAD_CHAR;
    /* R3 */
    auth_end = a;
    while (auth_end < b && !(_canon_cls[in[auth_end]] & CC_AEND)) auth_end++;
    host_s = a;
    if (auth_end > a && memchr(in + a, '@', auth_end - a))
        for (i = a; i < auth_end; i++)
            if (in[i] == '@') host_s = i + 1;
    host_e = auth_end;
    /* R5: find the port */
    if (host_s < auth_end && in[host_s] == '[') {
        for (i = host_s; i < auth_end && in[i] != ']'; i++) {}
        if (i == auth_end) return CANON_BAD_HOST;
        host_e = i + 1;
        if (host_e < auth_end) {
            if (in[host_e] != ':') return CANON_BAD_HOST;
            has_port = 1; port_s = host_e + 1; port_e = auth_end;
        }
    } else {
        for (i = auth_end; i > host_s; i--)
            if (in[i - 1] == ':') { has_port = 1; host_e = i - 1; port_s = i; port_e = auth_end; break; }
    }
    /* R4: the host */
    for (i = host_s; i < host_e; i++) {
        uint8_t c = in[i];
        if (c == '%') {
            int h, l;
            if (i + 2 < host_e && (h = _canon_hexval(in[i + 1])) >= 0 && (l = _canon_hexval(in[i + 2])) >= 0) {
                c = (uint8_t)(h * 16 + l);
                i += 2;
            } else {
                return CANON_BAD_HOST;
            }
        }
        if (c >= 'A' && c <= 'Z') c |= 0x20;
        if (c == '.') {
            if (o == 0 || out[o - 1] == '.') continue;  /* leading dots, runs of dots */
        } else if (in[host_s] == '[' ? !(_canon_hexval(c) >= 0 || c == ':' || (c == '[' && i == host_s) ||
                                         (c == ']' && i + 1 == host_e))
                                     : !(_canon_cls[c] & CC_HOST)) {
            return CANON_BAD_HOST;      /* an IPv6 literal holds hex digits, ':' and '.' only */
        }
        if (o >= cap) return CANON_TOO_LONG;
        out[o++] = c;
    }
    while (o > 0 && out[o - 1] == '.') o--;
    if (o == 0 || (out[0] == '[' && o < 3)) return CANON_BAD_HOST;
    if (out[0] == '[') {
        int r6 = _canon_ipv6(out, &o, cap);
        if (r6) return r6;
    }
    if (flags & CANON_KEY) _canon_reverse_labels(out, o);
    if (has_port) {
        uint32_t port = 0;
        size_t digits = 0;
        for (i = port_s; i < port_e; i++) {
            if (in[i] < '0' || in[i] > '9') return CANON_BAD_PORT;
            port = port * 10 + (in[i] - '0');
            if (port > 65535) return CANON_BAD_PORT;
            digits++;
        }
        if (digits && port != 80 && port != 443) {
            char tmp[8];
            int k = 0;
            if (o + 6 > cap) return CANON_TOO_LONG;
            out[o++] = ':';
            do { tmp[k++] = (char)('0' + port % 10); port /= 10; } while (port);
            while (k) out[o++] = (uint8_t)tmp[--k];
        }
    }
    /* R6, R7, R8: path, query, fragment */
    path_start = o;
    i = auth_end;
    {
        size_t end, q;
        const uint8_t *hit = i < b ? (const uint8_t *)memchr(in + i, '#', b - i) : NULL;
        end = hit ? (size_t)(hit - in) : b;                /* R8: fragment */
        hit = i < end ? (const uint8_t *)memchr(in + i, '?', end - i) : NULL;
        q = hit ? (size_t)(hit - in) : end;                /* query start */
        while (i < q) {
            size_t s, e, seg_o;
            while (i < q && in[i] == '/') i++;             /* R7: empty segments */
            if (i >= q) break;
            s = i;
            {
                const uint8_t *slash = (const uint8_t *)memchr(in + i, '/', q - i);
                i = slash ? (size_t)(slash - in) : q;
            }
            e = i;
            if (o >= cap) return CANON_TOO_LONG;
            seg_o = o;
            out[o++] = '/';
            if ((rc = _canon_pct(in + s, e - s, out, cap, &o)) < 0) return rc;
            if (o - seg_o == 2 && out[seg_o + 1] == '.') {
                o = seg_o;                                 /* "." */
            } else if (o - seg_o == 3 && out[seg_o + 1] == '.' && out[seg_o + 2] == '.') {
                o = seg_o;                                 /* ".." */
                while (o > path_start && out[o - 1] != '/') o--;
                if (o > path_start) o--;
            } else if (o - seg_o == 1) {
                o = seg_o;                                 /* cannot happen: empty segment */
            }
        }
        if (q + 1 < end) {
            if (o >= cap) return CANON_TOO_LONG;
            out[o++] = '?';
            if ((rc = _canon_pct(in + q + 1, end - q - 1, out, cap, &o)) < 0) return rc;
        }
    }
    return (ptrdiff_t)o;
}
