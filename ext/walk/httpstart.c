/* The start rule of an HTTP message in a TCP payload (declarations and the rules' text in
 * httpstart.h). */
#include <string.h>
#include "httpstart.h"

static inline int is_alpha(uint8_t c) { return (c >= 65 && c <= 90) || (c >= 97 && c <= 122); }
static inline int is_digit(uint8_t c) { return c >= 48 && c <= 57; }

/* q[k] ends a request-line field: SP, CR, LF, or the payload's end. */
static inline int ends_field(const uint8_t *q, uint32_t k, uint32_t n) {
    return k >= n || q[k] == 32 || q[k] == 13 || q[k] == 10;
}

int wt_http_method_id(const uint8_t *p, uint32_t n) {
    int i;
    if (n == 0 || n > (uint32_t)WT_MAX_METHOD_LEN)
        return -1;
    for (i = 1; i < WT_N_METHODS; i++)
        if (wt_methods[i].len == n && memcmp(p, wt_methods[i].name, n) == 0)
            return i;
    return -1;
}

/* The request-target starting at q[k] has one of RFC 9112's forms (3.2): origin form
 * ("/..."), asterisk form ("*"), absolute form (scheme "://"), authority form (host ":" port;
 * CONNECT's), or is absent ("HTTP/" follows the method: the version). Reads at most
 * WT_HTTP_SCHEME_MAX + 3 bytes, or the authority. */
static int target_shape(const uint8_t *q, uint32_t k, uint32_t n) {
    uint8_t c = q[k];
    uint32_t j;
    if (c == 47)                                            /* "/" */
        return 1;
    if (c == 42)                                            /* "*" */
        return ends_field(q, k + 1, n);
    if (n - k >= 5 && memcmp(q + k, "HTTP/", 5) == 0)      /* no target, the version follows */
        return 1;
    if (is_alpha(c)) {
        /* absolute form: scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ), then "://" */
        j = k + 1;
        while (j < n && j - k < WT_HTTP_SCHEME_MAX && (is_alpha(q[j]) || is_digit(q[j])
                                                       || q[j] == 43 || q[j] == 45 || q[j] == 46))
            j++;
        if (n - j >= 3 && q[j] == 58 && q[j + 1] == 47 && q[j + 2] == 47)
            return 1;
    }
    /* authority form: host (reg-name, IPv4 or [IPv6]) ":" port digits, then the field ends */
    j = k;
    if (c == 91) {                                          /* "[" IPv6 "]" */
        j++;
        while (j < n && (is_digit(q[j]) || is_alpha(q[j]) || q[j] == 58 || q[j] == 46))
            j++;
        if (j >= n || q[j] != 93)
            return 0;
        j++;
    } else {
        while (j < n && (is_alpha(q[j]) || is_digit(q[j]) || q[j] == 45 || q[j] == 46
                         || q[j] == 95 || q[j] == 126))
            j++;
        if (j == k)
            return 0;
    }
    if (j >= n || q[j] != 58)
        return 0;
    j++;
    if (j >= n || !is_digit(q[j]))
        return 0;
    while (j < n && is_digit(q[j]))
        j++;
    return ends_field(q, j, n);
}

int wt_line_ends_with_version(const uint8_t *q, uint32_t k, uint32_t n) {
    uint32_t e = k;
    while (e < n && q[e] != 13 && q[e] != 10)
        e++;
    if (e >= n || e - k < 10)
        return 0;
    return q[e - 9] == 32 && memcmp(q + e - 8, "HTTP/", 5) == 0 && is_digit(q[e - 3])
           && q[e - 2] == 46 && is_digit(q[e - 1]);
}

int wt_http_lower_status(const uint8_t *q, uint32_t n) {
    return n >= 9 && memcmp(q, "http/", 5) == 0 && is_digit(q[5]) && q[6] == 46
           && is_digit(q[7]) && q[8] == 32;
}

int wt_http_split_start(const uint8_t *q, uint32_t n, uint32_t wire_len) {
    int i;
    uint32_t b = 0;
    if (n == 0 || n != wire_len || n > (uint32_t)WT_MAX_METHOD_LEN + 2)
        return 0;
    if (n < 5 && memcmp(q, "HTTP/", n) == 0)
        return 1;
    if (n >= 2 && q[0] == 77 && q[1] == 45)                 /* "M-" */
        b = 2;
    if (n == b)
        return 1;
    for (i = 1; i < WT_N_METHODS; i++)
        if (wt_methods[i].len > n - b && memcmp(q + b, wt_methods[i].name, n - b) == 0)
            return 1;
    return 0;
}

int wt_http_start(const uint8_t *q, uint32_t n, uint32_t wire_len, uint32_t *start,
                  uint32_t *tok_end, int *method_id) {
    uint32_t s = 0, base, t, k;
    int mid;
    if (wire_len > 3 && n >= 2 && q[0] == 13 && q[1] == 10)
        s = 2;
    if (s >= n)
        return 0;
    *start = s;
    if (n - s >= 5 && memcmp(q + s, "HTTP/", 5) == 0)
        return WT_MSG_RESPONSE;
    if (q[s] == 104 && wt_http_lower_status(q + s, n - s))
        return WT_MSG_RESPONSE;
    base = s;
    if (n - s >= 2 && q[s] == 77 && q[s + 1] == 45)         /* "M-" */
        base = s + 2;
    /* The token runs to the first byte no method contains. */
    t = base;
    while (t < n && t - base <= (uint32_t)WT_MAX_METHOD_LEN && wt_method_char(q[t]))
        t++;
    if (t < n && q[t] != 32 && q[t] != 13 && q[t] != 10)
        return 0;
    mid = wt_http_method_id(q + base, t - base);
    if (mid < 0)
        return 0;
    k = t;
    while (k < n && q[k] == 32)
        k++;
    if (k < n && q[k] != 13 && q[k] != 10) {
        if (k == t)
            return 0;                                       /* cannot happen: q[t] is SP here */
        if (!target_shape(q, k, n) && !wt_line_ends_with_version(q, k, n))
            return 0;
    }
    *tok_end = t;
    *method_id = mid;
    return WT_MSG_REQUEST;
}

int wt_http_status_code(const uint8_t *q, uint32_t s, uint32_t n, uint32_t *ver_end,
                        uint32_t *code_end) {
    uint32_t t = s, k;
    while (t < n && q[t] != 32 && q[t] != 13 && q[t] != 10)
        t++;
    *ver_end = t;
    while (t < n && q[t] == 32)
        t++;
    k = t;
    while (t < n && q[t] != 32 && q[t] != 13 && q[t] != 10)
        t++;
    *code_end = t;
    if (t - k == 3 && q[k] >= 48 && q[k] <= 57 && q[k + 1] >= 48 && q[k + 1] <= 57
        && q[k + 2] >= 48 && q[k + 2] <= 57)
        return (q[k] - 48) * 100 + (q[k + 1] - 48) * 10 + (q[k + 2] - 48);
    return -1;
}
