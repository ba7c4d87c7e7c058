/* An HTTP message's length from one packet (RFC 9112 6.3): declarations and the rules' text in
 * msglen.h. */
#include "msglen.h"
#include "httpstart.h"

void wt_cl_value(const uint8_t *v, uint32_t n, wt_body_info_t *b) {
    uint32_t i = 0, d;
    uint64_t x;
    for (;;) {
        while (i < n && (v[i] == 32 || v[i] == 9))
            i++;
        x = 0;
        d = 0;
        while (i < n && v[i] >= 48 && v[i] <= 57) {
            if (x < WT_CL_HUGE)
                x = x * 10 + (uint64_t)(v[i] - 48);
            d++;
            i++;
        }
        if (x > WT_CL_HUGE)
            x = WT_CL_HUGE;
        while (i < n && (v[i] == 32 || v[i] == 9))
            i++;
        if (d == 0 || (i < n && v[i] != 44)) {
            b->cl_state = WT_CL_BAD;
            return;
        }
        if (b->cl_state == WT_CL_VALID && b->cl != x) {
            b->cl_state = WT_CL_BAD;
            return;
        }
        if (b->cl_state == WT_CL_NONE) {
            b->cl_state = WT_CL_VALID;
            b->cl = x;
        }
        if (i >= n)
            return;
        i++;                                     /* the comma */
    }
}

void wt_te_value(const uint8_t *v, uint32_t n, wt_body_info_t *b) {
    uint32_t e = n, k;
    while (e > 0 && (v[e - 1] == 32 || v[e - 1] == 9))
        e--;
    k = e;
    while (k > 0 && v[k - 1] != 44 && v[k - 1] != 32 && v[k - 1] != 9)
        k--;
    if (e - k == 0)
        return;                                  /* an empty value: no coding named */
    b->te = wt_name_is(v + k, e - k, "chunked", 7) ? WT_TE_CHUNKED : WT_TE_OTHER;
}

static inline int is_hex(uint8_t c) {
    return (c >= 48 && c <= 57) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102);
}

int wt_chunked_end(const uint8_t *q, uint64_t pos, uint32_t n, uint32_t wire, uint64_t *end) {
    uint64_t size;
    uint32_t digits, e;
    for (;;) {
        if (pos >= n)
            return n == wire ? WT_END_CONTINUES : WT_END_UNKNOWN;
        size = 0;
        digits = 0;
        while (pos < n && is_hex(q[pos])) {
            if (digits < 15)
                size = size * 16 + (uint64_t)(q[pos] <= 57 ? q[pos] - 48 : (q[pos] | 32) - 87);
            else
                size = WT_CL_HUGE;
            digits++;
            pos++;
        }
        if (pos >= n)
            return n == wire ? WT_END_CONTINUES : WT_END_UNKNOWN;
        if (digits == 0 || !(q[pos] == 59 || q[pos] == 32 || q[pos] == 9 || wt_is_eol(q[pos])))
            return WT_END_UNKNOWN;
        e = wt_line_end(q, (uint32_t)pos, n);    /* chunk extensions end with the line */
        if (e >= n || (q[e] == 13 && e + 1 >= n))
            return n == wire ? WT_END_CONTINUES : WT_END_UNKNOWN;
        pos = wt_next_line(q, e, n);
        if (size == 0) {                         /* last-chunk: the trailer section, then CRLF */
            for (;;) {
                if (pos >= n)
                    return n == wire ? WT_END_CONTINUES : WT_END_UNKNOWN;
                e = wt_line_end(q, (uint32_t)pos, n);
                if (e >= n || (q[e] == 13 && e + 1 >= n))
                    return n == wire ? WT_END_CONTINUES : WT_END_UNKNOWN;
                if (e == pos) {
                    *end = wt_next_line(q, e, n);
                    return WT_END_KNOWN;
                }
                pos = wt_next_line(q, e, n);
            }
        }
        pos += size;
        if (pos >= n)
            return (pos >= wire || n == wire) ? WT_END_CONTINUES : WT_END_UNKNOWN;
        if (q[pos] == 13) {
            if (pos + 1 >= n)
                return n == wire ? WT_END_CONTINUES : WT_END_UNKNOWN;
            if (q[pos + 1] != 10)
                return WT_END_UNKNOWN;
            pos += 2;
        } else if (q[pos] == 10) {
            pos += 1;
        } else {
            return WT_END_UNKNOWN;
        }
    }
}

int wt_status_line_at(const uint8_t *q, uint32_t pos, uint32_t n) {
    return n - pos >= 13 && memcmp(q + pos, "HTTP/", 5) == 0 && q[pos + 5] >= 48
           && q[pos + 5] <= 57 && q[pos + 6] == 46 && q[pos + 7] >= 48 && q[pos + 7] <= 57
           && q[pos + 8] == 32 && q[pos + 9] >= 48 && q[pos + 9] <= 57 && q[pos + 10] >= 48
           && q[pos + 10] <= 57 && q[pos + 11] >= 48 && q[pos + 11] <= 57;
}

int wt_msg_end(const uint8_t *q, uint32_t n, uint32_t wire, int kind, uint32_t status,
               uint32_t method_id, uint32_t flags, const wt_body_info_t *b, uint64_t *end) {
    uint32_t h = b->hdr_end;
    uint64_t e;
    if (flags & WT_MSGF_LINE_TOO_LONG)
        return h < wire ? WT_END_UNKNOWN : WT_END_CLOSE;
    if (kind == WT_MSG_RESPONSE) {
        if ((status >= 100 && status < 200 && status != 101) || status == 204 || status == 304) {
            *end = h;
            return WT_END_KNOWN;
        }
        if (status == 101)
            return WT_END_CLOSE;
        if (wt_status_line_at(q, h, n)) {
            *end = h;
            return WT_END_KNOWN;
        }
    } else if (method_id == WT_METHOD_CONNECT) {
        return WT_END_CLOSE;
    }
    if (b->te == WT_TE_CHUNKED)
        return wt_chunked_end(q, h, n, wire, end);
    if (b->te == WT_TE_OTHER)
        return kind == WT_MSG_RESPONSE ? WT_END_CLOSE : WT_END_UNKNOWN;
    if (b->cl_state == WT_CL_BAD)
        return h < wire ? WT_END_UNKNOWN : WT_END_CLOSE;
    if (b->cl_state == WT_CL_VALID) {
        e = (uint64_t)h + b->cl;
        if (e > wire)
            return WT_END_CONTINUES;
        *end = e;
        return WT_END_KNOWN;
    }
    if (kind == WT_MSG_REQUEST) {
        *end = h;
        return WT_END_KNOWN;
    }
    return WT_END_CLOSE;
}
