/* The Eq. 2 pending table's index: the one home of its mechanics, shared by the HTTP pairing
 * table (ext/pair/pairing.pyx PairingTable: requests <-> responses) and the TLS handshake table
 * (ext/tls/tls.pyx TlsTable: ClientHello <-> ServerHello). Here: the entry pool with its free list,
 * the cells with a head and a tail each, the collision chains in arrival order, the age list in
 * order of last change, link / unlink, the oldest entry, doubling the cells (rehash: pt_full,
 * pt_grow). Each table keeps its own entry payload, hash (the cell value it passes in), matching
 * predicate (it walks a chain with pt_first / .next and compares its own fields), GC predicate,
 * cap and per-key policy, reasons, counters and records.
 *
 * The code is C: the functions in ext/pair/pendtable.c, compiled once into the static library
 * `wtc`; the few-line accessors of the per-message loops (pt_at, pt_cell, pt_first, pt_oldest,
 * pt_full) static inline here. Declared for Cython in ext/pair/pendtable.pxd. Nothing takes the
 * GIL but an error path: the functions that allocate (pt_init, pt_alloc, pt_grow) use the checked
 * allocator (ext/common/alloc.h) and return -1 / -2 with MemoryError (or RuntimeError) set.
 *
 * Layout choice: the links are EMBEDDED, a PendLinks struct that is the FIRST member of each
 * table's entry struct (PendEntry in ext/pair/pairing.pxd, Pend in ext/tls/tls.pyx), and the index owns
 * the pool as bytes: base pointer + stride (sizeof the entry). Why not a parallel links array
 * indexed like the pool: a chain walk reads the link (next) and the table's own key fields of
 * the same entry at every step; embedded, both are in the entry (the HTTP entry's links and its
 * key/ports/addresses share its first cache lines), while a parallel array would touch a second
 * array per step. The stride costs one multiply per access; the tables keep a typed alias of
 * the pool (refreshed after pt_alloc, the only call that moves it) for their own fields.
 *
 * The rules (they are what the records depend on; do not change them):
 * - A chain holds the entries of one cell in the order they were linked (pt_link appends at the
 *   cell's tail), so a walk from pt_first meets the oldest same-key entry first.
 * - The age list holds every linked entry in the order it was linked: its head (pt_oldest) is
 *   the entry whose last change is oldest. An entry that changes (HTTP: a request re-keyed after
 *   a 1xx) is unlinked and linked again, so it moves to the tail of both lists.
 * - The cell of an entry is its hash & (ncells - 1); the hash is stored in its links when it is
 *   linked, so unlinking and rehashing never recompute it. pt_grow doubles the cells and relinks
 *   every entry in age-list order, which keeps each chain in arrival order.
 * - The pool grows by doubling from first_cap up to limit entries; a free entry's `next` threads
 *   the free list (last freed first out). Indices are stable while the entry is allocated. */
#ifndef WEBTAP_PENDTABLE_H
#define WEBTAP_PENDTABLE_H

#include <stddef.h>
#include <stdint.h>

/* The first member of every entry struct of a table that uses this index. */
typedef struct {
    int64_t stamp;              /* capture clock at the entry's last change (pt_link): GC age base */
    uint32_t hash;              /* the table's hash of the entry's key; cell: hash & (ncells - 1) */
    int32_t next;               /* next in the cell's chain (-1: end); in the free list, next free */
    int32_t age_prev;           /* neighbour towards older entries in the age list; -1 at the head */
    int32_t age_next;           /* neighbour towards newer entries; -1 at the tail */
} PendLinks;

typedef struct {
    uint8_t *pool;              /* pool_cap entries of `stride` bytes, PendLinks first */
    size_t stride;              /* sizeof the table's entry struct */
    int32_t pool_cap;           /* entries allocated (linked or free) */
    int32_t first_cap;          /* entries of the first allocation */
    int32_t limit;              /* most entries the pool may hold */
    int32_t free_head;          /* first free entry; -1 when none */
    int64_t n;                  /* linked (waiting) entries */
    int32_t *cell_head;         /* first entry of each cell's chain; -1 when empty */
    int32_t *cell_tail;         /* last entry of each cell's chain; -1 when empty */
    uint32_t ncells;            /* a power of two */
    uint32_t max_cells;         /* the cells never double beyond this */
    int32_t age_head;           /* oldest linked entry; -1 when none */
    int32_t age_tail;           /* newest linked entry; -1 when none */
} PendIndex;

/* The most cells a table of max_pending entries needs at load factor 1: the smallest power of
 * two >= max_pending (16 .. 2^30), at least initial_cells. */
uint32_t pt_cells_for(int64_t max_pending, uint32_t initial_cells);

/* An empty index of ncells cells (a power of two) for entries of `stride` bytes; the pool is
 * allocated on the first pt_alloc. 0, or -1 with MemoryError set. */
int pt_init(PendIndex *t, size_t stride, int32_t first_cap, int32_t limit, uint32_t ncells,
            uint32_t max_cells);

/* Free the pool and the cells (the table's own per-entry resources first). */
void pt_release_all(PendIndex *t);

/* Entry i's links (= the entry: PendLinks is its first member). */
static inline PendLinks *pt_at(const PendIndex *t, int32_t i) {
    return (PendLinks *)(t->pool + (size_t)i * t->stride);
}

/* A free entry (not linked, its payload as it was left), growing the pool by doubling up to
 * `limit` entries. Moves t->pool when it grows. -2 with MemoryError set, or with RuntimeError
 * when the pool is at its limit (the table did not enforce its cap: a bug). */
int32_t pt_alloc(PendIndex *t);

/* Return an unlinked entry to the free list. */
void pt_free(PendIndex *t, int32_t i);

/* The cell of a key's hash. */
static inline uint32_t pt_cell(const PendIndex *t, uint32_t hash) {
    return hash & (t->ncells - 1);
}

/* The oldest entry of a cell's chain (-1: none); walk on with pt_at(t, j)->next. */
static inline int32_t pt_first(const PendIndex *t, uint32_t cell) {
    return t->cell_head[cell];
}

/* The entry whose last change is oldest (the age list's head); -1 when none waits. The GC and
 * the cap evict it; the age list goes on with pt_at(t, j)->age_next. */
static inline int32_t pt_oldest(const PendIndex *t) {
    return t->age_head;
}

/* Make entry i wait: append it to the chain of hash's cell and to the age list (newest end),
 * stamped with the capture clock `stamp`. */
void pt_link(PendIndex *t, int32_t i, uint32_t hash, int64_t stamp);

/* Remove a linked entry from its chain and the age list (it stays allocated: pt_free). */
void pt_unlink(PendIndex *t, int32_t i);

/* More entries wait than there are cells (load factor 1) and the cells may still double: call
 * pt_grow. Test it after each pt_link. */
static inline int pt_full(const PendIndex *t) {
    return t->n > (int64_t)t->ncells && t->ncells < t->max_cells;
}

/* Double the cells while pt_full; each doubling relinks every waiting entry, oldest first, so
 * each chain keeps arrival order. The number of doublings, or -1 with MemoryError set. */
int pt_grow(PendIndex *t);

#endif
