/* The checked allocator every extension module uses (code in alloc.c, compiled once into the
 * static library `wtc`; declared for Cython in ext/common/util.pxd). On failure each function
 * sets MemoryError (taking the GIL, so it may be called with the GIL released) and returns NULL;
 * the block passed to wt_realloc then stays valid and owned by the caller, so
 * `x = wt_realloc(x, n)` never loses x. Cython declares them `except NULL`. */
#ifndef WEBTAP_ALLOC_H
#define WEBTAP_ALLOC_H

#include <stddef.h>

/* realloc p (NULL: a fresh block) to nbytes (0 counts as 1). */
void *wt_realloc(void *p, size_t nbytes);
/* A fresh block of nbytes. */
void *wt_alloc(size_t nbytes);
/* A fresh zeroed block of count * size bytes (calloc: the product is checked for overflow). */
void *wt_zalloc(size_t count, size_t size);

#endif
