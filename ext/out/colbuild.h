/* Arrow-layout column builders: string columns (int32 offsets + bytes) and list columns (int32
 * list offsets over a child column) appended one row at a time by the record stages, handed
 * to Python as buffers (pyarrow.Array.from_buffers) with no Python object per value.
 *
 * Declarations only; the code is colbuild.c, compiled once into the project's static C library
 * (ext/meson.build `wtc`). Every function returns 0, or -1 when memory ran out (the column is
 * then unchanged and still valid). Validity is the caller's: it passes a bitmap beside them. */
#ifndef WEBTAP_COLBUILD_H
#define WEBTAP_COLBUILD_H

#include <stddef.h>
#include <stdint.h>

/* utf8: values are UTF-8 strings; offs has n + 1 entries (offs[0] = 0) */
typedef struct {
    uint8_t *data;
    size_t len, cap;            /* bytes used / allocated in data */
    int32_t *offs;
    size_t n, ncap;             /* rows / allocated offsets */
} wt_strcol;

/* list<string>: loffs (n + 1) index the child's rows */
typedef struct {
    int32_t *loffs;
    size_t n, ncap;
    wt_strcol items;
} wt_strlist;

/* list<uint16>: loffs (n + 1) index vals */
typedef struct {
    int32_t *loffs;
    size_t n, ncap;
    uint16_t *vals;
    size_t nv, vcap;
} wt_u16list;

int wt_strcol_push(wt_strcol *c, const void *p, size_t n);
void wt_strcol_clear(wt_strcol *c);
void wt_strcol_free(wt_strcol *c);

/* one list row from text p[0:n] of items separated by sep (an empty text: an empty list) */
int wt_strlist_push_split(wt_strlist *c, const char *p, size_t n, char sep);
void wt_strlist_clear(wt_strlist *c);
void wt_strlist_free(wt_strlist *c);

/* one list row from decimal numbers 0..65535 separated by sep (as the TLS stage writes
 * extension types) */
int wt_u16list_push_dec(wt_u16list *c, const char *p, size_t n, char sep);
void wt_u16list_clear(wt_u16list *c);
void wt_u16list_free(wt_u16list *c);

/* rows[0:m] (ascending) stay, in that order, in place; the other rows are dropped (the TLS
 * stage keeps the records it does not hand out yet: TlsTable.take(before=...)) */
void wt_strcol_keep(wt_strcol *c, const uint32_t *rows, size_t m);
void wt_strlist_keep(wt_strlist *c, const uint32_t *rows, size_t m);
void wt_u16list_keep(wt_u16list *c, const uint32_t *rows, size_t m);

#endif
