/* urlcanon.h: the canonical form of a URL, in C, for the URL tree (ext/url/avl.pyx), the batch
 * canonicaliser (ext/url/canon.pyx) and a later packet-side matcher that runs in a nogil loop.
 *
 * Declarations and the one-line byte-class helpers here; the code in urlcanon.c, compiled once
 * into the wtc static library and linked into the modules that call it (no symbol crosses
 * extension modules at run time). Declared for Cython in ext/url/urlcanon.pxd.
 *
 * Rules (each has a test in tests/urlfilter/test_canon.py); input is raw bytes, no decoding:
 *   R1  Leading and trailing ASCII white space is removed. Any other byte <= 0x20 or 0x7f (NUL,
 *       controls, interior space) rejects the URL: CANON_BAD_CHAR.
 *   R2  A scheme ("[A-Za-z][A-Za-z0-9+.-]*://") or a leading "//" is dropped.
 *   R3  The authority ends at the first '/', '?' or '#'. Userinfo (everything up to the last '@'
 *       in it) is dropped: "http://bank.com@evil.net/" is evil.net.
 *   R4  Host: %XX escapes are decoded, ASCII letters lower-cased, leading and trailing dots
 *       removed, runs of dots collapsed. Allowed bytes afterwards: a-z 0-9 '-' '_' '.'; an IPv6
 *       literal "[...]" may hold hex digits, ':' and '.'. Anything else (including raw UTF-8: IDN
 *       hosts must arrive in punycode, which urlfilter.canon does for Python callers) is
 *       CANON_BAD_HOST; an empty host too.
 *   R5  Port: an empty port, 80 and 443 are dropped (the scheme is gone, so both defaults go);
 *       other ports are kept without leading zeros. Non-digits or > 65535: CANON_BAD_PORT.
 *   R6  Path and query: "%XX" of an unreserved byte (A-Z a-z 0-9 - . _ ~) is decoded; any other
 *       valid escape is kept with upper-case hex; a '%' not followed by two hex digits becomes
 *       "%25". Bytes outside unreserved, sub-delims and ":@/?" (e.g. raw UTF-8, '"', '<', '\')
 *       are percent-encoded. Path case is kept (paths are case-sensitive).
 *   R7  Path: empty segments are dropped (repeated slashes collapse, a trailing slash goes),
 *       "." segments are removed and ".." removes the previous segment (never above the root);
 *       this runs after R6, so "%2e%2E" is "..". "/" alone is the empty path.
 *   R8  The fragment ('#' onwards) is dropped; an empty query ("?" at the end) is dropped.
 *   R9  The output is host[:port][/seg]*[?query]. Entries whose output has no path and no query
 *       are domain entries: they block the host and every subdomain.
 *   Key form (flag CANON_KEY): the host's labels are reversed ("www.example.com" ->
 *   "com.example.www"), so that a domain entry is a prefix of its subdomains and every match is a
 *   prefix match on the boundaries '.', ':' (in the host) and '/', '?' (after it).
 *   webtap_key_flip() converts between the two forms (it is its own inverse).
 * The output is always ASCII. Return: the output length (>= 0), or a negative CANON_* code;
 * CANON_TOO_LONG when the output would exceed `cap` (3 * n + 8 is always enough).
 */
#ifndef WEBTAP_URLCANON_H
#define WEBTAP_URLCANON_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum {
    CANON_EMPTY = -1,     /* nothing left after trimming */
    CANON_BAD_CHAR = -2,  /* NUL, control byte or interior white space */
    CANON_BAD_HOST = -3,  /* empty host, non-ASCII or forbidden byte in the host */
    CANON_BAD_PORT = -4,  /* port not a number in 0..65535 */
    CANON_TOO_LONG = -5,  /* output larger than the caller's buffer */
};
#define CANON_KEY 1       /* flag: emit the key form (host labels reversed) */
#define CANON_FULL 2      /* flag: skip the fast path (tests compare both paths) */
#define _CANON_SLOW (-100)    /* internal: the fast path cannot handle this input */
#define CANON_FAST_ONLY 4 /* flag: fast path only; returns _CANON_SLOW (-100) where it would fall back */

/* byte classes, one table lookup per byte (GNU range initialisers; the build uses gnu11) */
#define CC_UNRES 1   /* unreserved: A-Z a-z 0-9 - . _ ~ */
#define CC_KEEP 2    /* kept literally in path and query: sub-delims and : @ / ? */
#define CC_HOST 4    /* allowed in a host name after lower-casing: a-z A-Z 0-9 - _ . */
#define CC_BAD 8     /* rejected anywhere: <= 0x20 and 0x7f */
#define CC_WS 16     /* trimmed at both ends: space \t \r \n \v \f */
#define CC_AEND 32   /* ends the authority: / ? # */
#define CC_SEG 64    /* kept literally inside a path segment: unreserved and keep, but not / ? */
#define CC_UPPER 128 /* A-Z (the fast path lower-cases the host only when it saw one) */
extern const uint8_t _canon_cls[256];   /* character classes (urlcanon.c) */

static inline int _canon_hexval(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static inline int _canon_unreserved(uint8_t c) { return _canon_cls[c] & CC_UNRES; }

static inline int _canon_ws(uint8_t c) { return _canon_cls[c] & CC_WS; }


/* Any byte <= 0x20 or == 0x7f in s[0:n]? Eight bytes per step (exact as a yes/no answer:
 * "has a byte below 0x21" and "has a zero byte after xor 0x7f" are the classic bit tricks). */
static inline int _canon_has_bad(const uint8_t *s, size_t n) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x, y;
        memcpy(&x, s + i, 8);
        y = x ^ (0x7f * ones);
        if (((x - 0x21 * ones) & ~x & highs) | ((y - ones) & ~y & highs)) return 1;
    }
    for (; i < n; i++)
        if (_canon_cls[s[i]] & CC_BAD) return 1;
    return 0;
}

/* Reverse the order of the dot-separated labels in buf[0:n] in place (no-op for "[..]"). */
static inline void _canon_reverse_labels(uint8_t *buf, size_t n) {
    size_t i, j, s;
    uint8_t t;
    if (n == 0 || buf[0] == '[') return;
    for (i = 0, j = n - 1; i < j; i++, j--) { t = buf[i]; buf[i] = buf[j]; buf[j] = t; }
    s = 0;
    for (i = 0; i <= n; i++) {
        if (i == n || buf[i] == '.') {
            size_t a = s, b = i;
            while (a + 1 < b) { t = buf[a]; buf[a] = buf[b - 1]; buf[b - 1] = t; a++; b--; }
            s = i + 1;
        }
    }
}

/* Length of the host part of a canonical URL or key (up to ':', '/', '?' outside brackets). */
static inline size_t webtap_host_len(const uint8_t *s, size_t n) {
    size_t i = 0;
    if (n && s[0] == '[') {
        while (i < n && s[i] != ']') i++;
        return i < n ? i + 1 : n;
    }
    while (i < n && s[i] != ':' && s[i] != '/' && s[i] != '?') i++;
    return i;
}

/* Convert between the canonical URL and the key form, in place. */
static inline void webtap_key_flip(uint8_t *s, size_t n) {
    _canon_reverse_labels(s, webtap_host_len(s, n));
}




/* Canonicalise in[0:n] into out[0:cap] (rules R1-R9 above). Returns the length or a CANON_* code. */
ptrdiff_t webtap_canon(const uint8_t *in, size_t n, uint8_t *out, size_t cap, int flags);

#endif
