/* Arrow-layout column builders (declared and described in colbuild.h). */
#include "colbuild.h"

#include <stdlib.h>
#include <string.h>

/* room for one more entry in an int32 offsets array of *cap entries */
static int grow_offs(int32_t **offs, size_t *cap, size_t need) {
    size_t nc;
    int32_t *q;
    if (need <= *cap)
        return 0;
    nc = *cap ? *cap : 1024;
    while (nc < need)
        nc *= 2;
    q = (int32_t *)realloc(*offs, nc * sizeof(int32_t));
    if (q == NULL)
        return -1;
    *offs = q;
    *cap = nc;
    return 0;
}

static int grow_bytes(uint8_t **data, size_t *cap, size_t need) {
    size_t nc;
    uint8_t *q;
    if (need <= *cap)
        return 0;
    nc = *cap ? *cap : 65536;
    while (nc < need)
        nc *= 2;
    q = (uint8_t *)realloc(*data, nc);
    if (q == NULL)
        return -1;
    *data = q;
    *cap = nc;
    return 0;
}

int wt_strcol_push(wt_strcol *c, const void *p, size_t n) {
    if (c->len + n > 0x7FFFFFFF)
        return -1;                               /* int32 offsets: one batch stays below 2 GiB */
    if (grow_offs(&c->offs, &c->ncap, c->n + 2) || grow_bytes(&c->data, &c->cap, c->len + n))
        return -1;
    if (c->n == 0)
        c->offs[0] = 0;
    if (n)
        memcpy(c->data + c->len, p, n);
    c->len += n;
    c->n += 1;
    c->offs[c->n] = (int32_t)c->len;
    return 0;
}

void wt_strcol_clear(wt_strcol *c) {
    c->n = 0;
    c->len = 0;
}

void wt_strcol_free(wt_strcol *c) {
    free(c->data);
    free(c->offs);
    memset(c, 0, sizeof(*c));
}

int wt_strlist_push_split(wt_strlist *c, const char *p, size_t n, char sep) {
    /* one pass over the text, the room for the whole row reserved first (at most n bytes and
       n + 1 items): no capacity test per item, and the column is unchanged when memory ran
       out. Was a wt_strcol_push per item (two capacity tests and a memcpy call for each
       6-byte cipher suite): the TLS records' five list<string> columns, 1.2 % of the stage's
       samples */
    wt_strcol *it = &c->items;
    size_t i, k, o;
    uint8_t *d;
    int32_t *offs;
    if (grow_offs(&c->loffs, &c->ncap, c->n + 2))
        return -1;
    if (n) {
        if (it->len + n > 0x7FFFFFFF)
            return -1;                           /* int32 offsets: one batch stays below 2 GiB */
        if (grow_offs(&it->offs, &it->ncap, it->n + n + 2) || grow_bytes(&it->data, &it->cap, it->len + n))
            return -1;
        if (it->n == 0)
            it->offs[0] = 0;
        d = it->data;
        offs = it->offs;
        k = it->n;
        o = it->len;
        for (i = 0; i < n; i++) {
            if (p[i] == sep)
                offs[++k] = (int32_t)o;
            else
                d[o++] = (uint8_t)p[i];
        }
        offs[++k] = (int32_t)o;
        it->n = k;
        it->len = o;
    }
    if (c->n == 0)
        c->loffs[0] = 0;
    c->n += 1;
    c->loffs[c->n] = (int32_t)it->n;
    return 0;
}

void wt_strlist_clear(wt_strlist *c) {
    c->n = 0;
    wt_strcol_clear(&c->items);
}

void wt_strlist_free(wt_strlist *c) {
    free(c->loffs);
    wt_strcol_free(&c->items);
    memset(c, 0, sizeof(*c));
}

int wt_u16list_push_dec(wt_u16list *c, const char *p, size_t n, char sep) {
    /* one pass: room for the most values the text can hold (n + 1, every character a
       separator) reserved first, so the column is unchanged when memory ran out; was a pass
       counting the separators, then one parsing (a C loop over extension lists: 23-25 -> 18
       ns per row) */
    size_t i, k = c->nv, need;
    uint16_t v = 0;
    uint16_t *vals;
    if (grow_offs(&c->loffs, &c->ncap, c->n + 2))
        return -1;
    if (n) {
        need = c->nv + n + 1;
        if (need > c->vcap) {
            size_t nc = c->vcap ? c->vcap : 4096;
            uint16_t *q;
            while (nc < need)
                nc *= 2;
            q = (uint16_t *)realloc(c->vals, nc * sizeof(uint16_t));
            if (q == NULL)
                return -1;
            c->vals = q;
            c->vcap = nc;
        }
        vals = c->vals;
        for (i = 0; i < n; i++) {
            if (p[i] == sep) {
                vals[k++] = v;
                v = 0;
            } else {
                v = (uint16_t)(v * 10u + (uint16_t)(p[i] - '0'));
            }
        }
        vals[k++] = v;
        c->nv = k;
    }
    if (c->n == 0)
        c->loffs[0] = 0;
    c->n += 1;
    c->loffs[c->n] = (int32_t)c->nv;
    return 0;
}

void wt_u16list_clear(wt_u16list *c) {
    c->n = 0;
    c->nv = 0;
}

void wt_u16list_free(wt_u16list *c) {
    free(c->loffs);
    free(c->vals);
    memset(c, 0, sizeof(*c));
}

/* The spans rows[0:m] (ascending) of offs/data (elements of `size` bytes) moved down into
 * place, in that order: offs[0:m] rewritten; returns the elements kept. Each span moves down
 * at most, so one forward pass of memmove does it; an offset is overwritten only after every
 * later read of it (out index <= row index). */
static size_t wt__keep_spans(int32_t *offs, uint8_t *data, size_t size, const uint32_t *rows,
                             size_t m) {
    size_t i, o = 0;
    int32_t a, l;
    for (i = 0; i < m; i++) {
        a = offs[rows[i]];
        l = offs[rows[i] + 1] - a;
        if (l && (size_t)a != o)
            memmove(data + o * size, data + (size_t)a * size, (size_t)l * size);
        offs[i] = (int32_t)o;
        o += (size_t)l;
    }
    return o;
}

/* keep: rows[0:m] (ascending, each < n) stay, in that order, in place; the others are dropped. */
void wt_strcol_keep(wt_strcol *c, const uint32_t *rows, size_t m) {
    size_t o = wt__keep_spans(c->offs, (uint8_t *)c->data, 1, rows, m);
    if (c->ncap)
        c->offs[m] = (int32_t)o;
    c->n = m;
    c->len = o;
}

void wt_strlist_keep(wt_strlist *c, const uint32_t *rows, size_t m) {
    wt_strcol *it = &c->items;
    size_t i, io = 0, bo = 0;
    int32_t a, e, j, ia, il;
    for (i = 0; i < m; i++) {
        a = c->loffs[rows[i]];
        e = c->loffs[rows[i] + 1];
        c->loffs[i] = (int32_t)io;
        for (j = a; j < e; j++) {
            ia = it->offs[j];
            il = it->offs[j + 1] - ia;
            if (il && (size_t)ia != bo)
                memmove(it->data + bo, it->data + ia, (size_t)il);
            it->offs[io++] = (int32_t)bo;
            bo += (size_t)il;
        }
    }
    if (c->ncap)
        c->loffs[m] = (int32_t)io;
    if (it->ncap)
        it->offs[io] = (int32_t)bo;
    c->n = m;
    it->n = io;
    it->len = bo;
}

void wt_u16list_keep(wt_u16list *c, const uint32_t *rows, size_t m) {
    size_t vo = wt__keep_spans(c->loffs, (uint8_t *)c->vals, 2, rows, m);
    if (c->ncap)
        c->loffs[m] = (int32_t)vo;
    c->n = m;
    c->nv = vo;
}
