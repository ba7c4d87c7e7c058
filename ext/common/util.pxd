# The one home of the small C helpers every extension module uses (ext/common/util.h), and the one
# checked allocator. cimport from here; never write a second prefetch, clock, byte-order read,
# UTF-8 check, address formatter or malloc-and-check in a module.
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t

cdef extern from "util.h" nogil:
    void wt_prefetch(const void *p)
    void wt_prefetch_keep(const void *p)
    int64_t wt_now_ns()
    bint wt_eq16(const uint8_t *a, const uint8_t *b)
    uint16_t wt_be16(const uint8_t *p)
    uint32_t wt_be24(const uint8_t *p)
    uint32_t wt_be32(const uint8_t *p)
    uint16_t wt_le16(const uint8_t *p)
    uint32_t wt_le32(const uint8_t *p)
    uint16_t wt_rd16(const uint8_t *p, int swap)
    uint32_t wt_rd32(const uint8_t *p, int swap)
    uint64_t wt_rd64(const uint8_t *p, int swap)
    size_t wt_utf8_seq(const uint8_t *p, size_t avail)
    enum: WT_IP_TEXT
    size_t wt_ip_text(const uint8_t *ip, int v6, char *out)
    size_t wt_u32_dec(uint32_t v, char *out)


cdef extern from "alloc.h" nogil:
    # The checked allocator (code in ext/common/alloc.c): MemoryError (the GIL taken) and NULL
    # on failure; wt_realloc's block then stays valid and owned by the caller.
    void *wt_realloc(void *p, size_t nbytes) except NULL
    void *wt_alloc(size_t nbytes) except NULL
    void *wt_zalloc(size_t count, size_t size) except NULL
