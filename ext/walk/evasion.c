/* Evasion indicators of a request's first packet: see evasion.h. */
#include <string.h>
#include "evasion.h"

static int ev_hex(uint8_t c)
{
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f');
}

int ev_double_encoded(const uint8_t *u, uint32_t n)
{
    const uint8_t *p = u, *end = u + n;
    while (end - p >= 5) {
        p = memchr(p, '%', (size_t)(end - p - 4));
        if (p == NULL)
            return 0;
        if (p[1] == '2' && p[2] == '5' && ev_hex(p[3]) && ev_hex(p[4]))
            return 1;
        p++;
    }
    return 0;
}

uint32_t ev_host_part(const uint8_t *a, uint32_t n, uint32_t *start)
{
    uint32_t i = n, s = 0, e;
    while (i > 0) {                         /* the last '@' ends the userinfo */
        i--;
        if (a[i] == '@') {
            s = i + 1;
            break;
        }
    }
    if (s < n && a[s] == '[') {             /* '[' IP-literal ']' */
        e = s;
        while (e < n && a[e] != ']')
            e++;
        if (e < n)
            e++;
    } else {
        e = s;
        while (e < n && a[e] != ':')
            e++;
    }
    *start = s;
    return e - s;
}

static int ev_alpha(uint8_t c)
{
    return (c | 32) >= 'a' && (c | 32) <= 'z';
}

static uint8_t ev_lower(uint8_t c)
{
    return c >= 'A' && c <= 'Z' ? (uint8_t)(c + 32) : c;
}

int ev_absolute_host_differs(const uint8_t *u, uint32_t n, const uint8_t *h, uint32_t hn)
{
    uint32_t i, a0, a1, s1 = 0, s2 = 0, l1, l2, k;
    if (n == 0 || !ev_alpha(u[0]))
        return 0;
    for (i = 1; i < n; i++) {               /* scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) */
        uint8_t c = u[i];
        if (!(ev_alpha(c) || (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.'))
            break;
    }
    if (i + 3 > n || u[i] != ':' || u[i + 1] != '/' || u[i + 2] != '/')
        return 0;
    a0 = i + 3;
    a1 = a0;
    while (a1 < n && u[a1] != '/' && u[a1] != '?' && u[a1] != '#')
        a1++;
    l1 = ev_host_part(u + a0, a1 - a0, &s1);
    l2 = ev_host_part(h, hn, &s2);
    if (l1 != l2)
        return 1;
    for (k = 0; k < l1; k++)
        if (ev_lower(u[a0 + s1 + k]) != ev_lower(h[s2 + k]))
            return 1;
    return 0;
}
