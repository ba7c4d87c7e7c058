# Declarations of ext/pair/pendtable.h: the Eq. 2 pending table's index shared by the HTTP pairing
# table (ext/pair/pairing.pyx), the TLS handshake table (ext/tls/tls.pyx) and the exchange stage
# (ext/pair/exchange.pyx). What it is and the rules the records depend on: the header; the code:
# ext/pair/pendtable.c (static library `wtc`), its few-line accessors static inline in the header.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t

cdef extern from "pendtable.h" nogil:
    ctypedef struct PendLinks:
        int64_t stamp
        uint32_t hash
        int32_t next
        int32_t age_prev
        int32_t age_next

    ctypedef struct PendIndex:
        uint8_t *pool
        size_t stride
        int32_t pool_cap
        int32_t first_cap
        int32_t limit
        int32_t free_head
        int64_t n
        int32_t *cell_head
        int32_t *cell_tail
        uint32_t ncells
        uint32_t max_cells
        int32_t age_head
        int32_t age_tail

    uint32_t pt_cells_for(int64_t max_pending, uint32_t initial_cells)
    int pt_init(PendIndex *t, size_t stride, int32_t first_cap, int32_t limit, uint32_t ncells,
                uint32_t max_cells) except -1
    void pt_release_all(PendIndex *t)
    PendLinks *pt_at(const PendIndex *t, int32_t i)
    int32_t pt_alloc(PendIndex *t) except -2
    void pt_free(PendIndex *t, int32_t i)
    uint32_t pt_cell(const PendIndex *t, uint32_t hash)
    int32_t pt_first(const PendIndex *t, uint32_t cell)
    int32_t pt_oldest(const PendIndex *t)
    void pt_link(PendIndex *t, int32_t i, uint32_t hash, int64_t stamp)
    void pt_unlink(PendIndex *t, int32_t i)
    bint pt_full(const PendIndex *t)
    int pt_grow(PendIndex *t) except -1
