/* The message after a header block continued from an earlier segment (the rule's text in
 * httpcont.h). */
#include "httpcont.h"
#include "httpstart.h"
#include "msglen.h"
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* First byte of p[0:n] that is a control byte other than HTAB (0x00-0x08, 0x0A-0x1F, 0x7F: CR
   and LF among them), n if none: where a line of header text ends, or the byte that shows it is
   none (a field line, a request line and a status line hold no other control byte: RFC 9110
   5.5, RFC 9112 3 and 4). Sixteen bytes per step; a binary payload stops within a few bytes. */
static inline uint32_t text_end(const uint8_t *p, uint32_t n) {
    uint32_t pos = 0;
#ifdef __SSE2__
    const __m128i lim = _mm_set1_epi8(0x1F), tab = _mm_set1_epi8(9), del = _mm_set1_epi8(0x7F);
    while (pos + 16 <= n) {
        __m128i v = _mm_loadu_si128((const __m128i *)(p + pos));
        __m128i ctl = _mm_cmpeq_epi8(_mm_min_epu8(v, lim), v);          /* v <= 0x1F */
        ctl = _mm_or_si128(_mm_andnot_si128(_mm_cmpeq_epi8(v, tab), ctl), _mm_cmpeq_epi8(v, del));
        unsigned mask = (unsigned)_mm_movemask_epi8(ctl);
        if (mask)
            return pos + (uint32_t)__builtin_ctz(mask);
        pos += 16;
    }
#endif
    while (pos < n && (p[pos] >= 32 || p[pos] == 9) && p[pos] != 127)
        pos++;
    return pos;
}

/* RFC 9110 5.6.2 tchar (a field name's bytes). */
static inline int tchar(uint8_t c) {
    return (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c == 33
           || (c >= 35 && c <= 39) || c == 42 || c == 43 || c == 45 || c == 46 || c == 94
           || c == 95 || c == 96 || c == 124 || c == 126;
}

/* Length of the field name of the line q[pos:eol] (1*tchar then ":"), 0 when the line is not
   a header field line. */
static inline uint32_t field_name(const uint8_t *q, uint32_t pos, uint32_t eol) {
    uint32_t i = pos;
    while (i < eol && tchar(q[i]))
        i++;
    if (i == pos || i >= eol || q[i] != 58)
        return 0;
    return i - pos;
}

/* p[0:n] is a case-insensitive suffix (possibly empty) of the lower-case name lname[0:ln]: the
   tail of that name cut by the segment's start. */
static int name_suffix(const uint8_t *p, uint32_t n, const char *lname, uint32_t ln) {
    uint32_t i;
    if (n > ln)
        return 0;
    for (i = 0; i < n; i++)
        if (wt_lower(p[i]) != (uint8_t)lname[ln - n + i])
            return 0;
    return 1;
}

/* The field value v[0:n] starts with the lower-case lval[0:ln] (case-insensitive). */
static int value_starts(const uint8_t *v, uint32_t n, const char *lval, uint32_t ln) {
    uint32_t i;
    if (n < ln)
        return 0;
    for (i = 0; i < ln; i++)
        if (wt_lower(v[i]) != (uint8_t)lval[i])
            return 0;
    return 1;
}

/* wt_http_start's kind for q[0:n] when its first line is whole in the packet and complete: a
   status line "HTTP/" DIGIT "." DIGIT SP 3DIGIT, or a request line that ends with SP "HTTP/"
   DIGIT "." DIGIT; 0 otherwise (a cut line, a method alone, a lower-case status line). */
static int strict_start(const uint8_t *q, uint32_t n, uint32_t wire, uint32_t *start,
                        uint32_t *tok_end, int *method_id) {
    int kind = wt_http_start(q, n, wire, start, tok_end, method_id);
    if (kind == WT_MSG_RESPONSE) {
        if (wt_status_line_at(q, *start, n) && wt_line_end(q, *start, n) < n)
            return kind;
        return 0;
    }
    if (kind == WT_MSG_REQUEST && wt_line_ends_with_version(q, *tok_end, n))
        return kind;
    return 0;
}

/* WT_CONT_UNKNOWN when q[pos:] begins like a message (wt_http_start, not strictly), else
   WT_CONT_NONE: a body after the block, which is no doubt about a message. */
static int doubt_at(const uint8_t *q, uint32_t n, uint32_t wire, uint64_t pos) {
    uint32_t s = 0, t = 0;
    int mid = 0;
    if (pos >= n)
        return WT_CONT_NONE;
    return wt_http_start(q + pos, n - (uint32_t)pos, wire - (uint32_t)pos, &s, &t, &mid) != 0
           ? WT_CONT_UNKNOWN : WT_CONT_NONE;
}

int wt_http_after_continuation(const uint8_t *q, uint32_t n, uint32_t wire, uint32_t *at,
                               uint32_t *start, uint32_t *tok_end, int *method_id) {
    uint32_t e, pos, h, ln, nl, v0, v1;
    uint64_t end = 0;
    wt_body_info_t b;
    int kind, st, doubt = 0;
    if (n == 0)
        return WT_CONT_NONE;
    /* the fragment: up to the first line end; a control byte before it (binary data, a TLS
       record) is no tail of a header, request or status line */
    e = text_end(q, n);
    if (e >= n || !wt_is_eol(q[e]))
        return WT_CONT_NONE;
    if (e == 0 && q[0] == 10 && n > 1 && !wt_is_eol(q[1])) {
        kind = strict_start(q + 1, n - 1, wire - 1, start, tok_end, method_id);
        if (kind != 0) {
            *at = 1;
            return kind;
        }
    }
    /* a colon in the fragment after a tail of a length field's name: its value is here, its
       name was cut */
    ln = 0;
    while (ln < e && tchar(q[ln]))
        ln++;
    if (ln < e && q[ln] == 58 && (name_suffix(q, ln, "content-length", 14)
                                  || name_suffix(q, ln, "transfer-encoding", 17)))
        doubt = 1;
    b.hdr_end = 0;
    b.cl = 0;
    b.cl_state = WT_CL_NONE;
    b.te = WT_TE_NONE;
    pos = wt_next_line(q, e, n);
    for (;;) {
        if (pos >= n)
            return WT_CONT_NONE;                  /* no empty line in the packet */
        e = wt_line_end(q, pos, n);
        if (e >= n)
            return WT_CONT_NONE;                  /* a line cut by the packet's end */
        if (e == pos)
            break;
        if (e - pos > WT_MAX_HEADER_LINE)
            doubt = 1;
        nl = field_name(q, pos, e);
        if (nl == 0)
            return WT_CONT_NONE;                  /* not a header block: a body */
        v0 = pos + nl + 1;
        while (v0 < e && (q[v0] == 32 || q[v0] == 9))
            v0++;
        v1 = e;
        while (v1 > v0 && (q[v1 - 1] == 32 || q[v1 - 1] == 9))
            v1--;
        if (wt_name_is(q + pos, nl, "content-length", 14))
            wt_cl_value(q + v0, v1 - v0, &b);
        else if (wt_name_is(q + pos, nl, "transfer-encoding", 17))
            wt_te_value(q + v0, v1 - v0, &b);
        else if (wt_name_is(q + pos, nl, "content-transfer-encoding", 25)
                 || wt_name_is(q + pos, nl, "content-id", 10)
                 || (wt_name_is(q + pos, nl, "content-type", 12)
                     && value_starts(q + v0, v1 - v0, "application/http", 16)))
            doubt = 1;
        pos = wt_next_line(q, e, n);
    }
    h = wt_next_line(q, e, n);
    if (h >= wire)
        return WT_CONT_NONE;                      /* the segment ends with the block */
    if (h >= n)
        return WT_CONT_UNKNOWN;                   /* the snaplen cut what follows */
    if (doubt)
        return doubt_at(q, n, wire, h);
    if (wt_status_line_at(q, h, n)) {
        end = h;
    } else if (b.te == WT_TE_CHUNKED) {
        st = wt_chunked_end(q, h, n, wire, &end);
        if (st != WT_END_KNOWN)
            return doubt_at(q, n, wire, h);
    } else if (b.te == WT_TE_OTHER || b.cl_state == WT_CL_BAD) {
        return doubt_at(q, n, wire, h);
    } else if (b.cl_state == WT_CL_VALID) {
        end = (uint64_t)h + b.cl;
    } else {
        end = h;
    }
    if (end >= wire)
        return end == wire ? WT_CONT_NONE : doubt_at(q, n, wire, h);
    if (end >= n || end > WT_CONT_MAX_OFFSET)
        return WT_CONT_UNKNOWN;
    if (wire - end <= 2 && n == wire && wt_is_eol(q[end]) && (end + 1 >= n || wt_is_eol(q[end + 1])))
        return WT_CONT_NONE;                      /* a stray CRLF after the message */
    kind = strict_start(q + end, n - (uint32_t)end, wire - (uint32_t)end, start, tok_end, method_id);
    if (kind == 0) {
        st = doubt_at(q, n, wire, end);
        return (st != WT_CONT_NONE || end == h) ? st : doubt_at(q, n, wire, h);
    }
    *at = (uint32_t)end;
    return kind;
}
