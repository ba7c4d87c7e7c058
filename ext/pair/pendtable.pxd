# The Eq. 2 pending table's index: the one home of its mechanics, shared by the HTTP pairing
# table (ext/pair/pairing.pyx PairingTable: requests <-> responses) and the TLS handshake table
# (ext/tls/tls.pyx TlsTable: ClientHello <-> ServerHello). Here: the entry pool with its free list,
# the cells with a head and a tail each, the collision chains in arrival order, the age list in
# order of last change, link / unlink, the oldest entry, doubling the cells (rehash: pt_full,
# pt_grow). Each table keeps its own entry payload, hash (the cell value it passes in), matching
# predicate (it walks a chain with pt_first / .next and compares its own fields), GC predicate,
# cap and per-key policy, reasons, counters and records.
#
# House rule (ext/walk/l34.pxd, ext/tls/hellostream.pxd): everything here is `cdef inline`, compiled into
# each module that cimports it, `nogil`; the functions that allocate (pt_init, pt_alloc, pt_grow)
# go through ext/common/util.pxd's checked allocator and are `except -1` / `except -2`
# (MemoryError with the GIL taken), the rest `noexcept`.
#
# Layout choice: the links are EMBEDDED, a PendLinks struct that is the FIRST member of each
# table's entry struct (PendEntry in ext/pair/pairing.pxd, Pend in ext/tls/tls.pyx), and the index owns
# the pool as bytes: base pointer + stride (sizeof the entry). Why not a parallel links array
# indexed like the pool: a chain walk reads the link (next) and the table's own key fields of
# the same entry at every step; embedded, both are in the entry (the HTTP entry's links and its
# key/ports/addresses share its first cache lines), while a parallel array would touch a second
# array per step. The stride costs one multiply per access; the tables keep a typed alias of
# the pool (refreshed after pt_alloc, the only call that moves it) for their own fields.
#
# The rules (they are what the records depend on; do not change them):
# - A chain holds the entries of one cell in the order they were linked (pt_link appends at the
#   cell's tail), so a walk from pt_first meets the oldest same-key entry first.
# - The age list holds every linked entry in the order it was linked: its head (pt_oldest) is
#   the entry whose last change is oldest. An entry that changes (HTTP: a request re-keyed after
#   a 1xx) is unlinked and linked again, so it moves to the tail of both lists.
# - The cell of an entry is its hash & (ncells - 1); the hash is stored in its links when it is
#   linked, so unlinking and rehashing never recompute it. pt_grow doubles the cells and relinks
#   every entry in age-list order, which keeps each chain in arrival order.
# - The pool grows by doubling from first_cap up to limit entries; a free entry's `next` threads
#   the free list (last freed first out). Indices are stable while the entry is allocated.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free

from util cimport wt_alloc, wt_realloc

# The first member of every entry struct of a table that uses this index.
ctypedef struct PendLinks:
    int64_t stamp               # capture clock at the entry's last change (pt_link): GC age base
    uint32_t hash               # the table's hash of the entry's key; cell: hash & (ncells - 1)
    int32_t next                # next in the cell's chain (-1: end); in the free list, next free
    int32_t age_prev            # neighbour towards older entries in the age list; -1 at the head
    int32_t age_next            # neighbour towards newer entries; -1 at the tail

ctypedef struct PendIndex:
    uint8_t *pool               # pool_cap entries of `stride` bytes, PendLinks first
    size_t stride               # sizeof the table's entry struct
    int32_t pool_cap            # entries allocated (linked or free)
    int32_t first_cap           # entries of the first allocation
    int32_t limit               # most entries the pool may hold
    int32_t free_head           # first free entry; -1 when none
    int64_t n                   # linked (waiting) entries
    int32_t *cell_head          # first entry of each cell's chain; -1 when empty
    int32_t *cell_tail          # last entry of each cell's chain; -1 when empty
    uint32_t ncells             # a power of two
    uint32_t max_cells          # the cells never double beyond this
    int32_t age_head            # oldest linked entry; -1 when none
    int32_t age_tail            # newest linked entry; -1 when none


cdef inline uint32_t pt_cells_for(int64_t max_pending, uint32_t initial_cells) noexcept nogil:
    """The most cells a table of max_pending entries needs at load factor 1: the smallest power
    of two >= max_pending (16 .. 2^30), at least initial_cells."""
    cdef uint32_t c = 1 << 30
    while c > 16 and c // 2 >= <uint64_t>max_pending:
        c //= 2
    return c if c > initial_cells else initial_cells


cdef inline int pt_init(PendIndex *t, size_t stride, int32_t first_cap, int32_t limit,
                        uint32_t ncells, uint32_t max_cells) except -1 nogil:
    """An empty index of ncells cells (a power of two) for entries of `stride` bytes; the pool is
    allocated on the first pt_alloc. Raises MemoryError."""
    cdef uint32_t i
    t.pool = NULL
    t.stride = stride
    t.pool_cap = 0
    t.first_cap = first_cap
    t.limit = limit
    t.free_head = -1
    t.n = 0
    t.age_head = -1
    t.age_tail = -1
    t.ncells = ncells
    t.max_cells = max_cells if max_cells > ncells else ncells
    t.cell_head = NULL
    t.cell_tail = NULL
    t.cell_head = <int32_t *>wt_alloc(ncells * sizeof(int32_t))
    t.cell_tail = <int32_t *>wt_alloc(ncells * sizeof(int32_t))
    for i in range(ncells):
        t.cell_head[i] = -1
        t.cell_tail[i] = -1
    return 0


cdef inline void pt_release_all(PendIndex *t) noexcept nogil:
    """Free the pool and the cells (the table's own per-entry resources first)."""
    free(t.pool)
    free(t.cell_head)
    free(t.cell_tail)
    t.pool = NULL
    t.cell_head = NULL
    t.cell_tail = NULL
    t.pool_cap = 0
    t.free_head = -1


cdef inline PendLinks *pt_at(const PendIndex *t, int32_t i) noexcept nogil:
    """Entry i's links (= the entry: PendLinks is its first member)."""
    return <PendLinks *>(t.pool + <size_t>i * t.stride)


cdef inline int32_t pt_alloc(PendIndex *t) except -2 nogil:
    """A free entry (not linked, its payload as it was left), growing the pool by doubling up to
    `limit` entries. Moves t.pool when it grows. Raises MemoryError, or RuntimeError when the
    pool is at its limit (the table did not enforce its cap: a bug)."""
    cdef int32_t i, nc
    if t.free_head == -1:
        nc = t.pool_cap * 2 if t.pool_cap else t.first_cap
        if nc > t.limit:
            nc = t.limit
        if nc <= t.pool_cap:
            with gil:
                raise RuntimeError("pending table: entry pool exhausted (bug: cap not enforced)")
        t.pool = <uint8_t *>wt_realloc(t.pool, <size_t>nc * t.stride)
        for i in range(t.pool_cap, nc):
            pt_at(t, i).next = i + 1 if i + 1 < nc else -1
        t.free_head = t.pool_cap
        t.pool_cap = nc
    i = t.free_head
    t.free_head = pt_at(t, i).next
    return i


cdef inline void pt_free(PendIndex *t, int32_t i) noexcept nogil:
    """Return an unlinked entry to the free list."""
    pt_at(t, i).next = t.free_head
    t.free_head = i


cdef inline uint32_t pt_cell(const PendIndex *t, uint32_t hash) noexcept nogil:
    """The cell of a key's hash."""
    return hash & (t.ncells - 1)


cdef inline int32_t pt_first(const PendIndex *t, uint32_t cell) noexcept nogil:
    """The oldest entry of a cell's chain (-1: none); walk on with pt_at(t, j).next."""
    return t.cell_head[cell]


cdef inline int32_t pt_oldest(const PendIndex *t) noexcept nogil:
    """The entry whose last change is oldest (the age list's head); -1 when none waits. The GC
    and the cap evict it; the age list goes on with pt_at(t, j).age_next."""
    return t.age_head


cdef inline void pt_chain_append(PendIndex *t, int32_t i, uint32_t cell) noexcept nogil:
    """Append entry i at the tail of cell's chain (the chains' arrival order: pt_link, pt_grow)."""
    pt_at(t, i).next = -1
    if t.cell_tail[cell] == -1:
        t.cell_head[cell] = i
    else:
        pt_at(t, t.cell_tail[cell]).next = i
    t.cell_tail[cell] = i


cdef inline void pt_link(PendIndex *t, int32_t i, uint32_t hash, int64_t stamp) noexcept nogil:
    """Make entry i wait: append it to the chain of hash's cell and to the age list (newest
    end), stamped with the capture clock `stamp`."""
    cdef PendLinks *e = pt_at(t, i)
    e.stamp = stamp
    e.hash = hash
    pt_chain_append(t, i, hash & (t.ncells - 1))
    e.age_next = -1
    e.age_prev = t.age_tail
    if t.age_tail == -1:
        t.age_head = i
    else:
        pt_at(t, t.age_tail).age_next = i
    t.age_tail = i
    t.n += 1


cdef inline void pt_unlink(PendIndex *t, int32_t i) noexcept nogil:
    """Remove a linked entry from its chain and the age list (it stays allocated: pt_free)."""
    cdef PendLinks *e = pt_at(t, i)
    cdef uint32_t cell = e.hash & (t.ncells - 1)
    cdef int32_t prev = -1
    cdef int32_t j = t.cell_head[cell]
    while j != i and j != -1:
        prev = j
        j = pt_at(t, j).next
    if j == i:
        if prev == -1:
            t.cell_head[cell] = e.next
        else:
            pt_at(t, prev).next = e.next
        if t.cell_tail[cell] == i:
            t.cell_tail[cell] = prev
    if e.age_prev == -1:
        t.age_head = e.age_next
    else:
        pt_at(t, e.age_prev).age_next = e.age_next
    if e.age_next == -1:
        t.age_tail = e.age_prev
    else:
        pt_at(t, e.age_next).age_prev = e.age_prev
    e.next = -1
    e.age_prev = -1
    e.age_next = -1
    t.n -= 1


cdef inline bint pt_full(const PendIndex *t) noexcept nogil:
    """More entries wait than there are cells (load factor 1) and the cells may still double:
    call pt_grow. Test it after each pt_link (a call of pt_grow, with its error path, is not
    inlined; this test is)."""
    return t.n > <int64_t>t.ncells and t.ncells < t.max_cells


cdef inline int pt_grow(PendIndex *t) except -1 nogil:
    """Double the cells while pt_full; each doubling relinks every waiting entry, oldest first,
    so each chain keeps arrival order. Returns the number of doublings. Raises MemoryError."""
    cdef uint32_t n, k
    cdef int32_t j
    cdef int grown = 0
    cdef PendLinks *e
    while pt_full(t):
        n = t.ncells * 2
        t.cell_head = <int32_t *>wt_realloc(t.cell_head, n * sizeof(int32_t))
        t.cell_tail = <int32_t *>wt_realloc(t.cell_tail, n * sizeof(int32_t))
        t.ncells = n
        grown += 1
        for k in range(n):
            t.cell_head[k] = -1
            t.cell_tail[k] = -1
        j = t.age_head
        while j != -1:
            e = pt_at(t, j)
            pt_chain_append(t, j, e.hash & (n - 1))
            j = e.age_next
    return grown
