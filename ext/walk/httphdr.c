/* The chosen headers' pass over a first packet's header block (the rules in httphdr.h). */
#include <string.h>
#include "httphdr.h"

/* First CR or LF at or after pos; n if none. */
static inline uint32_t hdr_line_end(const uint8_t *q, uint32_t pos, uint32_t n) {
    const uint8_t *a, *b;
    if (pos >= n)
        return n;
    a = memchr(q + pos, 10, n - pos);
    b = memchr(q + pos, 13, a != NULL ? (size_t)(a - q - pos) : n - pos);
    if (b != NULL)
        return (uint32_t)(b - q);
    if (a != NULL)
        return (uint32_t)(a - q);
    return n;
}

static inline uint32_t hdr_next_line(const uint8_t *q, uint32_t eol, uint32_t n) {
    return (q[eol] == 13 && eol + 1 < n && q[eol + 1] == 10) ? eol + 2 : eol + 1;
}

/* p[0:n] equals the lower-case name lname[0:ln], ASCII case-insensitively. */
static inline int hdr_name_is(const uint8_t *p, uint32_t n, const uint8_t *lname, uint32_t ln) {
    uint32_t i;
    uint8_t c;
    if (n != ln)
        return 0;
    for (i = 0; i < n; i++) {
        c = p[i];
        if (c >= 65 && c <= 90)
            c += 32;
        if (c != lname[i])
            return 0;
    }
    return 1;
}

int wt_hdr_scan(const uint8_t *pkt, uint64_t avail, uint32_t payload_off,
                uint32_t payload_caplen, uint32_t first_off, int uri_cut,
                const uint8_t *names, const uint32_t *name_off, int nnames, wt_span_t *out) {
    uint32_t off = payload_off, n = payload_caplen, s, eol, line_start, ln, colon, v0, v1;
    int k, found = 0, complete;
    const uint8_t *q, *hit;
    for (k = 0; k < nnames; k++) {
        out[k].off = 0;
        out[k].len = 0;
    }
    if ((uint64_t)off + n > avail)                /* bytes not all there: nothing to read */
        return 0;
    q = pkt + off;
    if (uri_cut)
        return 0;
    s = first_off >= off ? first_off - off : 0;
    eol = hdr_line_end(q, s, n);
    if (eol >= n)
        return 0;                                 /* the first line is all this packet holds */
    line_start = hdr_next_line(q, eol, n);
    while (found < nnames && line_start < n) {
        eol = hdr_line_end(q, line_start, n);
        complete = eol < n;
        ln = eol - line_start;
        if (complete && ln == 0)
            break;                                /* end of the header block */
        if (ln <= WT_HDR_MAX_LINE) {
            hit = memchr(q + line_start, 58, ln);
            if (hit == NULL)
                break;                            /* not a header line: the block ends */
            colon = (uint32_t)(hit - q);
            v0 = colon + 1;
            while (v0 < eol && (q[v0] == 32 || q[v0] == 9))
                v0++;
            v1 = eol;
            while (v1 > v0 && (q[v1 - 1] == 32 || q[v1 - 1] == 9))
                v1--;
            for (k = 0; k < nnames; k++) {
                if (out[k].len == 0 && out[k].off == 0
                    && hdr_name_is(q + line_start, colon - line_start, names + name_off[k],
                                   name_off[k + 1] - name_off[k])) {
                    out[k].off = off + v0;        /* > 0 even for an empty value: found */
                    out[k].len = v1 - v0;
                    found++;
                    break;
                }
            }
        }
        if (!complete)
            break;
        line_start = hdr_next_line(q, eol, n);
    }
    return found;
}
