# cython: freethreading_compatible = False
"""The compressed AVL URL tree (issue 7; paper section 2 of ../shared/docs/PAPERS.md).

Keys
----
A key is a URL in canonical *key form* (ext/url/urlcanon.h: scheme, default port, fragment dropped,
percent-encoding normalised, dot segments resolved, host labels reversed: ``com.example.www/a/b``).
Reversing the host makes every kind of blacklist hit a prefix relation on component boundaries:
a domain entry ``com.example`` is a prefix of ``com.example.www/x`` (boundary '.'), of
``com.example:8080`` (':') and of ``com.example/x`` ('/'); a URL entry ``com.example/a`` is a prefix
of ``com.example/a/b`` ('/') and of ``com.example/a?x`` ('?'). Boundaries are '.' and ':' inside the
host, every '/' after it and the first '?'; nothing inside the query.

The three arrays (as in the paper)
----------------------------------
* ``TreeNode[id]`` (8 bytes, ext/url/urltree.pxd): left and right child as 28-bit ids; the 6-bit AVL
  height (below 64: an AVL tree of 2^28 nodes is < 40 high) in left's top nibble and right's bits
  28-29; right's bit 31 is the no-prefix flag (see "Prefix match"), bit 30 is 0. id 0 means "no
  node", so at most 2^28 - 1 URLs.
* ``DataPtr[id]`` (4 bytes): byte offset of the node's record in CompressedURL (0xFFFFFFFF: free id).
  The URL id *is* the node id, so lookup by id is one array read plus a decode.
* ``CompressedURL``: records, each ``varint (cPrefix << 1 | side) | varint len | DiffURL bytes |
  varint RefID | varint (category << 1 | has_period) [| varint period]``. The search reads only
  the first three fields. RefID is stored as the zig-zag coded difference id - RefID (one byte
  for most nodes after optimize()).

Encoding: every node is encoded against the closer of its two flanking ancestors
-------------------------------------------------------------------------------
The flanking ancestors of x are lo(x), the nearest ancestor with x in its right subtree (the
greatest ancestor key below key(x)), and hi(x), the nearest with x in its left subtree (0 when
there is none). The parent is always one of them. Invariant: ``RefID(x)`` is 0 (the record holds
the whole key; the root, and any node sharing nothing with both) or the flank named by ``side``
(0: lo, 1: hi), and ``key(x) = key(RefID)[:cPrefix] + DiffURL`` with cPrefix the exact lcp. The
better flank is chosen when a node is encoded. For a leaf the flanks are its neighbours in key
order, so this reaches the sorted-predecessor floor of front coding: on the three UT1 URL lists
21.6 DiffURL bytes per URL against 25.1 with the parent (benchmarks/urltree_bytes.py).

A search for q keeps ``mlo = lcp(q, key(lo))`` and ``mhi = lcp(q, key(hi))`` of the current
node's flanks (q lies strictly between those keys); at node x, with ``mref`` the one its side
bit names:

* ``cPrefix > mref``: key(x) agrees with its reference beyond the point where q leaves it, so q is
  on the same side of key(x) as of the reference: right of a low flank, left of a high one; lcp
  stays mref. *No key byte is read.*
* ``cPrefix <= mref``: q and key(x) agree on the first cPrefix bytes; compare q[cPrefix:] with
  DiffURL only, which gives the new lcp and direction.

Going left, x becomes the high flank (mhi = the new lcp); going right, the low one. So a match
never decodes a reference chain; it reads each visited record's header and at most the bytes of
its DiffURL that differ from what is already known. Insertion gets the new leaf's encoding for
free: its flanks are its key-order neighbours and both lcps are known from the descent.

Keeping the encoding valid
--------------------------
Flanks change only for the nodes a rotation moves and the nodes whose flank a delete removes:
a rotation of a (flanks lo, hi) with child b gives b (lo, hi) and a (b, hi) or (lo, b), and the
subtree passed between them keeps (b, a) -- every other node keeps its flanks. A delete removes
the flank of exactly the right spine of the removed node's left subtree and the left spine of
its right subtree (O(height) nodes); the successor that replaces it takes its flanks. ``_fix``
re-encodes a node only when its RefID is no longer one of its flanks; _rotate fixes b before a,
and _del fixes the successor before the spines, so new references always point up the tree and
chains cannot loop (``_reencode`` still detects a reference that would lead back to the node and
first rewrites that reference as a full key). Re-encoding decodes both keys by following RefIDs
up to the root (O(height) diffs, for the few nodes an operation moves) and rewrites the record in
place when it fits, else appends it; the old bytes become dead.

Compaction copies live records into a fresh buffer in one pass (O(live bytes), ~10 ms per
million URLs; lookups are blocked only for that pass) when dead bytes exceed the live ones, or on
``compact()``/``save()``.

Prefix match (longest entry that is a prefix of q on a boundary)
----------------------------------------------------------------
Is the longest blacklisted prefix of q always on q's search path? No: with entries ``a``,
``a/b``, ``a/c`` and the root ``a/b`` (children ``a``, ``a/c``), q = ``a/d`` visits ``a/b`` and
``a/c`` only. What does hold: if an entry p is a proper prefix of q, every key between p and q
starts with p (p <= k <= q and q starts with p), so p is pred(q) -- the greatest key below q, the
last node where q's descent turned right -- or a proper prefix of pred(q), of length at most
``lcp(q, pred(q))``. Hence the **no-prefix flag** NP(x) (TreeNode.right bit 31): set only if no
entry of one byte or more is a proper prefix of key(x). One descent for q (the exact-match one,
no path recording) ends in one of: q found; pred(q) a prefix of q on a boundary (the answer);
NP(pred) = 1 (no answer); else a further round. 79 % of the UT1 URL-list keys have the flag, and
on the bench queries 90 % end after the one descent (40 % listed, ~19 % pred is the answer,
~31 % NP(pred)).

A round searches the next candidate length t (the greatest boundary <= lcp(q, pred), below it
when pred itself is a prefix but not on a boundary) and applies the same test to the
predecessor of q[:t]; t falls each round, so it ends. The search for q[:t] need not restart: it
agrees with q's path down to Z, the first right turn whose key shares >= t bytes with q (every
earlier right turn is below q[:t], every left turn above q), and goes left at Z (key(Z) starts
with q[:t]; if key(Z) is q[:t], that is the answer). The descent records the right turns that
raise the lcp (``Turn``, a few per query), so a round walks only Z's left subtree (_lpm_sub).

Keeping NP: rotations do not change it (it belongs to the key; it travels with the node's slot).
An insert computes the new key's flag from what the descent saw -- pred = lo: 1 if none, 0 if an
ancestor is a prefix of k, 1 if NP(lo) (candidates are prefixes of lo), 0 if lo's or hi's
reference is a prefix of k (two record headers), 1 if hi shares >= lcp(k, lo) bytes and NP(hi) --
and otherwise (~10 % of the UT1 inserts) by the rounds above with every length a candidate. A new
key that is a prefix of its successor clears the flag of every key that starts with it (an
in-order walk from it). A delete leaves the other flags alone: a 0 that could now be 1 costs only
a round. optimize() and build_sorted() recompute every flag exactly in key order (_np_scan),
check() verifies that no set flag lies. Format WTAVL004 added the flag; older files are refused.

Thread safety: readers may run concurrently (batch calls release the GIL), writers need exclusive
access. A tree loaded from a snapshot maps the file read-only (shared by every process that loads
it) and copies the arrays into private memory on its first modification.
"""
import mmap
import zlib
import os
import struct

import numpy as np

from libc.stddef cimport ptrdiff_t
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free
from libc.string cimport memchr, memcmp, memcpy, memset
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE

from urlcanon cimport CANON_KEY, webtap_canon, webtap_host_len, webtap_key_flip
from urltree cimport SnapshotHeader, TreeNode
from util cimport wt_alloc, wt_now_ns, wt_prefetch_keep, wt_realloc

cdef enum:
    ID_MASK = 0x0FFFFFFF
    RH_MASK = 0x30000000      # TreeNode.right bits 28-29: height >> 4 (heights stay below 64)
    NP_BIT = 0x80000000       # TreeNode.right bit 31: no entry is a proper prefix of this key
    MAX_ID = 0x0FFFFFFF       # ids are 28 bits; 0 is "none"
    MAX_DEPTH = 96            # AVL height of 2^28 nodes is < 40
    MAX_KEY = 65536           # longest key accepted for insertion, in bytes
    LEFT = -1
    RIGHT = 1

cdef enum:
    # return codes of the batch functions, next to the CANON_* codes (-1..-5)
    TREE_DUPLICATE = 1        # insert: the key was already present (id is the existing one)
    TREE_TOO_LONG = -6        # insert: canonical key longer than MAX_KEY
    TREE_FULL = -7            # insert: no id left (2^28 - 1 URLs)

cdef uint32_t FREE_PTR = 0xFFFFFFFFU
cdef size_t BLOB_LIMIT = 0xFFFFFFF0U   # CompressedURL must stay addressable by 32-bit DataPtr
SNAPSHOT_MAGIC = b"WTAVL004"   # 002: cPrefix carries the side bit, RefID is a flanking ancestor;
                               # 003: CRC-32 of header and body in the header, checked at load;
                               # 004: TreeNode.right bit 31 is the no-prefix flag (NP_BIT)
HEADER = struct.Struct("<8sQQQQIIQI4x")   # SnapshotHeader (urltree.pxd): ..., tag, crc32, pad
MAX_URLS = MAX_ID
MAX_KEY_BYTES = MAX_KEY

# NumPy mirror of TreeNode (ext/url/urltree.pxd); tests check itemsize == sizeof(TreeNode).
TREE_NODE_DTYPE = np.dtype([("left", "<u4"), ("right", "<u4")])


def sizeof_tree_node():
    return sizeof(TreeNode)


def sizeof_snapshot_header():
    return sizeof(SnapshotHeader)


ctypedef struct Rec:
    uint32_t cp          # bytes shared with key(ref)
    uint32_t side        # 0: ref is the low flanking ancestor (key(ref) < key(x)), 1: the high one
    uint32_t dlen        # bytes of DiffURL
    const uint8_t *diff  # DiffURL (points into CompressedURL: valid until the next write)
    uint32_t ref         # RefID, 0 for a full key
    uint32_t cat         # category id (payload)
    uint32_t period      # filtering period id (payload), 0 = always
    uint32_t size        # bytes of the whole record


ctypedef struct QBounds:
    size_t host_end      # end of the host in the query key (webtap_host_len)
    size_t qpos          # position of the first '?' after the host, or the key's length
    bint ready           # computed (only prefix matches that need a boundary test do)


ctypedef struct NPScan:
    const uint8_t *prev  # the previous key in ascending order
    size_t prevn
    uint32_t *lens       # lengths of the entries that are prefixes of prev (prev included), ascending
    size_t nl


cdef inline bint _np_scan(NPScan *s, const uint8_t *k, size_t n) noexcept nogil:
    """Exact no-prefix flag of k, the next key in ascending order (optimize, build_sorted): an
    entry p that is a proper prefix of k lies between p and k, so every key in between -- prev
    included -- starts with p; the stack holds the lengths of the entries prev starts with. The
    caller sets s.prev = k afterwards (copying it when its buffer is reused)."""
    cdef size_t l = 0
    cdef bint r
    while l < n and l < s.prevn and k[l] == s.prev[l]:
        l += 1
    while s.nl > 0 and s.lens[s.nl - 1] > l:
        s.nl -= 1
    r = s.nl == 0
    if n > 0:
        s.lens[s.nl] = <uint32_t>n
        s.nl += 1
    s.prevn = n
    return r


ctypedef struct Turn:
    uint32_t x           # a node where the descent for q turned right, sharing more with q than
    uint32_t m           # every earlier right turn: m = lcp(q, key(x))
    uint32_t lo          # x's low flank (the previous right turn), lcp(q, key(lo)), and whether
    uint32_t mlo         # key(lo) is a prefix of q
    int kplo
    int kp               # key(x) is a prefix of q


cdef uint32_t LPM_MORE = 0xFFFFFFFFU    # _lpm_next: no answer yet, search the next length


cdef inline const uint8_t *_get_varint(const uint8_t *p, uint32_t *v) noexcept nogil:
    cdef uint32_t r = p[0]
    cdef int shift = 7
    if r < 0x80:
        v[0] = r
        return p + 1
    r &= 0x7f
    while True:
        p += 1
        r |= (<uint32_t>(p[0] & 0x7f)) << shift
        if p[0] < 0x80:
            v[0] = r
            return p + 1
        shift += 7


cdef inline uint8_t *_put_varint(uint8_t *p, uint32_t v) noexcept nogil:
    while v >= 0x80:
        p[0] = <uint8_t>(v | 0x80)
        v >>= 7
        p += 1
    p[0] = <uint8_t>v
    return p + 1


cdef inline uint32_t _zigzag(uint32_t x, uint32_t ref) noexcept nogil:
    """RefID is stored as the zig-zag coded difference x - ref: after optimize() (pre-order ids)
    a left child is x - 1 and most right children are close too, so it is usually one byte."""
    cdef int64_t d = <int64_t>x - <int64_t>ref
    # shift the unsigned bits: d << 1 of a negative d is undefined in C (UBSan, make fuzz)
    return <uint32_t>((<uint64_t>d << 1) ^ <uint64_t>(d >> 63))


cdef inline uint8_t *_put_payload(uint8_t *p, uint32_t cat, uint32_t period) noexcept nogil:
    """Payload: varint (category << 1 | has_period), then varint period when it is not 0."""
    p = _put_varint(p, (cat << 1) | (1 if period else 0))
    if period:
        p = _put_varint(p, period)
    return p


cdef inline void _read_rec(const uint8_t *p, uint32_t x, Rec *r) noexcept nogil:
    cdef const uint8_t *s = p
    cdef uint32_t v
    p = _get_varint(p, &v)
    r.cp = v >> 1
    r.side = v & 1
    p = _get_varint(p, &r.dlen)
    r.diff = p
    p += r.dlen
    p = _get_varint(p, &v)
    r.ref = <uint32_t>(<int64_t>x - ((<int64_t>(v >> 1)) ^ (-<int64_t>(v & 1))))
    p = _get_varint(p, &v)
    r.cat = v >> 1
    r.period = 0
    if v & 1:
        p = _get_varint(p, &r.period)
    r.size = <uint32_t>(p - s)


cdef inline bint _is_boundary(const uint8_t *q, size_t b, size_t host_end, size_t qpos) noexcept nogil:
    """Is q[:b] a component prefix of q (b < len(q))? '.' inside the host, the end of the host,
    '/' in the path and the first '?'; never inside the query."""
    if b < host_end:
        return q[b] == b'.' and q[0] != b'['
    if b == host_end:
        return True
    if b > qpos:
        return False
    return q[b] == b'/' or b == qpos


cdef inline bint _boundary_at(const uint8_t *q, size_t b) noexcept nogil:
    """_is_boundary for one position b (< len(q)), reading only q[:b + 1]: the host ends at the
    first ':', '/' or '?' (after ']' for "[...]"), so a host end beyond b is all it needs to know;
    after the host, b must be '/' or the first '?'."""
    cdef size_t host_end = webtap_host_len(q, b + 1)
    if host_end > b:
        return q[b] == b'.' and q[0] != b'['
    if host_end == b:
        return True
    if q[b] != b'/' and q[b] != b'?':
        return False
    return memchr(q + host_end, b'?', b - host_end) == NULL


cdef inline void _qb_init(const uint8_t *q, size_t qn, QBounds *qb) noexcept nogil:
    qb.host_end = webtap_host_len(q, qn)
    qb.qpos = qb.host_end
    while qb.qpos < qn and q[qb.qpos] != b'?':
        qb.qpos += 1
    qb.ready = True


cdef extern from "sys/mman.h" nogil:
    int madvise(void *addr, size_t length, int advice)
    int MADV_HUGEPAGE

cdef extern from "stdlib.h" nogil:
    int posix_memalign(void **memptr, size_t alignment, size_t size)

cdef enum:
    HUGE_PAGE = 2 * 1024 * 1024
    KCACHE_SLOTS = 128            # KeyCache: direct-mapped by id, per insert/delete
    GROUP = 16                    # queries matched in lockstep by match_batch (_match_group)
    KCACHE_ARENA = 256 * 1024
    KSTRIDE = MAX_KEY + 8         # optimize(): one decoded ancestor key per depth


cdef void *_checked_grow(void *p, size_t used, size_t n) except NULL nogil:
    """Allocator of the big arrays: a fresh block of n bytes holding p's first `used` bytes.
    Blocks of 4 MiB or more are 2 MiB aligned and advised as transparent huge pages (the kernel
    here uses THP in madvise mode): a descent touches ~24 random nodes, and with 4 KiB pages each
    of them is also a TLB miss."""
    cdef void *r = NULL
    if n >= 2 * HUGE_PAGE and posix_memalign(&r, HUGE_PAGE, n) == 0:
        madvise(r, n, MADV_HUGEPAGE)
    else:
        r = wt_alloc(n)             # the checked allocator (ext/common/util.pxd) raises MemoryError
    if p != NULL:
        memcpy(r, p, used)
        free(p)
    return r


cdef int64_t[::1] _timing_view(timings, Py_ssize_t n):
    if timings is None:
        return None
    cdef int64_t[::1] tv = timings
    if tv.shape[0] < n:
        raise ValueError("timings array shorter than the batch")
    return tv


# urlfilter's base error and the tree's own live in webtap.errors (the bottom of the core)
from webtap.errors import TreeCorrupt, UrlFilterError


cdef int64_t _longest_span(const int64_t[::1] off, Py_ssize_t n, Py_ssize_t data_len) except -1:
    """Check the offsets of an Arrow-layout batch of n strings over data_len bytes (inside the
    buffer, never decreasing) and return the longest string's length. Raises ValueError."""
    cdef Py_ssize_t i
    cdef int64_t maxlen = 0
    if off[0] < 0 or off[n] > data_len:
        raise ValueError("offsets outside the data buffer")
    for i in range(n):
        if off[i + 1] < off[i]:
            raise ValueError(f"offsets decrease at {i}")
        if off[i + 1] - off[i] > maxlen:
            maxlen = off[i + 1] - off[i]
    return maxlen

cdef class UrlTree:
    """Compressed AVL tree of canonical URL keys; see the module docstring for the design.

    Keys passed to the ``*_key`` methods are already in canonical key form (bytes); the other
    methods canonicalise their input with ext/url/urlcanon.h first.
    """
    cdef TreeNode *nodes          # TreeNode array, n_slots used, cap_slots allocated
    cdef uint32_t *dataptr        # DataPtr array, same length
    cdef uint8_t *blob            # CompressedURL bytes
    cdef size_t n_slots, cap_slots, blob_used, blob_cap, dead, count
    cdef uint32_t root, free_head
    cdef uint8_t *kbuf            # scratch: decoded keys (MAX_KEY + 8 bytes each)
    cdef uint8_t *kbuf2
    cdef uint8_t *qbuf            # scratch: canonicalised query
    cdef size_t qcap
    cdef bint mapped              # arrays point into a read-only snapshot mapping
    cdef object _mapping          # the mmap object that owns them
    cdef object _view             # the memoryview exported from it
    cdef public uint64_t tag      # number stored with the last snapshot saved or loaded
    cdef readonly uint32_t max_ids   # id limit: 2^28 - 1, lower only in tests of the refusal path
    # KeyCache (see _decode): keys decoded during the current insert or delete
    cdef uint32_t kc_id[KCACHE_SLOTS]
    cdef uint32_t kc_gen[KCACHE_SLOTS]
    cdef uint32_t kc_off[KCACHE_SLOTS]
    cdef uint32_t kc_len[KCACHE_SLOTS]
    cdef uint32_t kc_cur          # generation of the current operation
    cdef bint kc_on               # only inside _insert_key / _delete_key
    cdef size_t kc_used
    cdef uint8_t *kc_arena
    # no-prefix flag of the key being inserted (see _ins): work left for after the insert
    cdef bint np_mark             # the new key is a proper prefix of its successor (_mark_extensions)
    cdef Turn ins_turns[MAX_DEPTH]   # _ins: the right turns that raised the lcp with k
    cdef int ins_nt
    cdef bint ins_kpa             # _ins: some node on k's path is a proper prefix of k

    def __cinit__(self, uint32_t max_ids=MAX_ID):
        if max_ids > MAX_ID or max_ids == 0:
            raise ValueError(f"max_ids must be in 1..{MAX_ID}")
        self.max_ids = max_ids
        self.n_slots = 1
        self.cap_slots = 0
        self.kbuf = <uint8_t *>wt_alloc(MAX_KEY + 8)
        self.kbuf2 = <uint8_t *>wt_alloc(MAX_KEY + 8)
        self.qcap = 4096
        self.qbuf = <uint8_t *>wt_alloc(self.qcap)
        self.kc_arena = <uint8_t *>wt_alloc(KCACHE_ARENA)
        self._grow_slots(1024)
        self.nodes[0].left = 0
        self.nodes[0].right = 0
        self.dataptr[0] = FREE_PTR
        self._grow_blob(4096)

    def __dealloc__(self):
        if not self.mapped:
            free(self.nodes)
            free(self.dataptr)
            free(self.blob)
        free(self.kbuf)
        free(self.kbuf2)
        free(self.qbuf)
        free(self.kc_arena)

    # ---- memory -------------------------------------------------------------------------
    cdef int _grow_slots(self, size_t need) except -1 nogil:
        cdef size_t cap = self.cap_slots if self.cap_slots else 1024
        if need <= self.cap_slots:
            return 0
        while cap < need:
            cap = cap * 3 // 2 + 16
        self.nodes = <TreeNode *>_checked_grow(self.nodes, self.n_slots * sizeof(TreeNode), cap * sizeof(TreeNode))
        self.dataptr = <uint32_t *>_checked_grow(self.dataptr, self.n_slots * sizeof(uint32_t), cap * sizeof(uint32_t))
        self.cap_slots = cap
        return 0

    cdef int _grow_blob(self, size_t need) except -1 nogil:
        cdef size_t cap = self.blob_cap if self.blob_cap else 4096
        if need <= self.blob_cap:
            return 0
        if need > BLOB_LIMIT:
            with gil:
                raise OverflowError("CompressedURL would exceed 4 GiB (32-bit DataPtr); compact() first")
        while cap < need:
            cap = cap * 3 // 2 + 4096
        if cap > BLOB_LIMIT:
            cap = BLOB_LIMIT
        self.blob = <uint8_t *>_checked_grow(self.blob, self.blob_used, cap)
        self.blob_cap = cap
        return 0

    cdef int _own(self) except -1:
        """Copy a mapped snapshot's arrays into private memory before the first modification."""
        cdef TreeNode *n
        cdef uint32_t *d
        cdef uint8_t *b
        if not self.mapped:
            return 0
        n = <TreeNode *>_checked_grow(NULL, 0, self.n_slots * sizeof(TreeNode))
        d = <uint32_t *>_checked_grow(NULL, 0, self.n_slots * sizeof(uint32_t))
        b = <uint8_t *>_checked_grow(NULL, 0, self.blob_used + 16)
        memcpy(n, self.nodes, self.n_slots * sizeof(TreeNode))
        memcpy(d, self.dataptr, self.n_slots * sizeof(uint32_t))
        memcpy(b, self.blob, self.blob_used)
        self.nodes, self.dataptr, self.blob = n, d, b
        self.cap_slots = self.n_slots
        self.blob_cap = self.blob_used + 16
        self.mapped = False
        self._view = None
        self._mapping.close()
        self._mapping = None
        return 0

    cdef int _qreserve(self, size_t n) except -1 nogil:
        if n > self.qcap:
            self.qbuf = <uint8_t *>wt_realloc(self.qbuf, n)
            self.qcap = n
        return 0

    # ---- node fields ----------------------------------------------------------------------
    cdef inline uint32_t _left(self, uint32_t x) noexcept nogil:
        return self.nodes[x].left & ID_MASK

    cdef inline uint32_t _right(self, uint32_t x) noexcept nogil:
        return self.nodes[x].right & ID_MASK

    cdef inline uint32_t _child(self, uint32_t x, int side) noexcept nogil:
        return (self.nodes[x].left if side < 0 else self.nodes[x].right) & ID_MASK

    cdef inline int _height(self, uint32_t x) noexcept nogil:
        if x == 0:
            return 0
        return <int>((self.nodes[x].left >> 28) | (((self.nodes[x].right & RH_MASK) >> 28) << 4))

    cdef inline void _set_height(self, uint32_t x, int h) noexcept nogil:
        self.nodes[x].left = (self.nodes[x].left & ID_MASK) | ((<uint32_t>h & 15) << 28)
        self.nodes[x].right = (self.nodes[x].right & ~(<uint32_t>RH_MASK)) | ((<uint32_t>(h >> 4) & 3) << 28)

    cdef inline bint _np(self, uint32_t x) noexcept nogil:
        """The no-prefix flag: 1 guarantees that no entry (of one byte or more) is a proper
        prefix of key(x); 0 promises nothing (see "Prefix match" in the module docstring)."""
        return (self.nodes[x].right & NP_BIT) != 0

    cdef inline void _set_np(self, uint32_t x, bint v) noexcept nogil:
        if v:
            self.nodes[x].right |= NP_BIT
        else:
            self.nodes[x].right &= ~(<uint32_t>NP_BIT)

    cdef inline void _fix_height(self, uint32_t x) noexcept nogil:
        cdef int hl = self._height(self._left(x)), hr = self._height(self._right(x))
        self._set_height(x, (hl if hl > hr else hr) + 1)

    cdef inline uint32_t _ref(self, uint32_t x) noexcept nogil:
        cdef Rec r
        _read_rec(self.blob + self.dataptr[x], x, &r)
        return r.ref

    # ---- records --------------------------------------------------------------------------
    cdef ptrdiff_t _decode(self, uint32_t x, uint8_t *buf) except -1 nogil:
        """Full key of x into buf (MAX_KEY bytes); returns its length. Raises TreeCorrupt on a
        reference loop. Keys decoded during one insert or delete are remembered (KeyCache) so
        the re-encodes of a rotation, whose nodes share their reference chains, stop early."""
        cdef uint32_t chain[MAX_DEPTH * 2]
        cdef int depth = 0
        cdef Rec r
        cdef size_t n = 0, slot
        cdef uint32_t y = x
        while y != 0:
            slot = y & (KCACHE_SLOTS - 1)
            if self.kc_on and self.kc_id[slot] == y and self.kc_gen[slot] == self.kc_cur:
                n = self.kc_len[slot]
                memcpy(buf, self.kc_arena + self.kc_off[slot], n)
                break
            if depth >= MAX_DEPTH * 2 or self.dataptr[y] == FREE_PTR:
                with gil:
                    raise TreeCorrupt(f"bad reference chain at node {y}")
            chain[depth] = y
            depth += 1
            y = self._ref(y)
        while depth > 0:
            depth -= 1
            _read_rec(self.blob + self.dataptr[chain[depth]], chain[depth], &r)
            if r.cp > n or r.cp + r.dlen > MAX_KEY:
                with gil:
                    raise TreeCorrupt(f"bad record at node {chain[depth]}")
            memcpy(buf + r.cp, r.diff, r.dlen)
            n = r.cp + r.dlen
        if self.kc_on and self.kc_used + n <= KCACHE_ARENA:
            slot = x & (KCACHE_SLOTS - 1)
            memcpy(self.kc_arena + self.kc_used, buf, n)
            self.kc_id[slot] = x
            self.kc_gen[slot] = self.kc_cur
            self.kc_off[slot] = <uint32_t>self.kc_used
            self.kc_len[slot] = <uint32_t>n
            self.kc_used += n
        return <ptrdiff_t>n

    cdef inline void _kc_reset(self) noexcept nogil:
        """Start a new operation: forget the remembered keys (they stay valid only while no key
        changes, i.e. within one insert or delete)."""
        self.kc_cur += 1
        if self.kc_cur == 0:       # generation wrapped: clear for real
            memset(self.kc_gen, 0, sizeof(self.kc_gen))
            self.kc_cur = 1
        self.kc_used = 0

    cdef int _append(self, uint32_t x, uint32_t ref, uint32_t side, uint32_t cp, const uint8_t *diff,
                     uint32_t dlen, uint32_t cat, uint32_t period) except -1 nogil:
        """Write x's record (diff must not point into CompressedURL) and point DataPtr at it: in
        place when it fits in x's current record (the rest of that becomes dead bytes), else
        appended (the whole old record becomes dead). Rotations re-encode a few nodes per insert,
        and rewriting in place keeps most of that churn out of CompressedURL."""
        cdef Rec old
        cdef uint8_t tmp[32]
        cdef uint8_t *p
        cdef uint8_t *h
        cdef size_t hlen, tail, at
        h = _put_varint(tmp, (cp << 1) | side)
        h = _put_varint(h, dlen)
        hlen = <size_t>(h - tmp)
        h = _put_varint(h, _zigzag(x, ref))
        h = _put_payload(h, cat, period)
        tail = <size_t>(h - tmp) - hlen
        if self.dataptr[x] != FREE_PTR:
            _read_rec(self.blob + self.dataptr[x], x, &old)
            if hlen + dlen + tail <= old.size:
                at = self.dataptr[x]
                self.dead += old.size - (hlen + dlen + tail)
            else:
                self._grow_blob(self.blob_used + dlen + 32)
                self.dead += old.size
                at = self.blob_used
                self.blob_used += hlen + dlen + tail
        else:
            self._grow_blob(self.blob_used + dlen + 32)
            at = self.blob_used
            self.blob_used += hlen + dlen + tail
        p = self.blob + at
        memcpy(p, tmp, hlen)
        memcpy(p + hlen, diff, dlen)
        memcpy(p + hlen + dlen, tmp + hlen, tail)
        self.dataptr[x] = <uint32_t>at
        return 0

    cdef int _reencode(self, uint32_t x, uint32_t lo, uint32_t hi) except -1 nogil:
        """Re-encode x against whichever of lo and hi (its flanking ancestors, 0: none) shares the
        longer prefix with it; lo = hi = 0 stores the full key. Keeps the payload."""
        cdef Rec r
        cdef uint32_t y, p = 0, side = 0, cat, period
        cdef ptrdiff_t kn, pn
        cdef size_t m = 0, ml = 0, mh = 0
        cdef int steps = 0
        _read_rec(self.blob + self.dataptr[x], x, &r)
        cat, period = r.cat, r.period
        kn = self._decode(x, self.kbuf)
        if lo != 0:
            pn = self._decode(lo, self.kbuf2)
            while ml < <size_t>kn and ml < <size_t>pn and self.kbuf[ml] == self.kbuf2[ml]:
                ml += 1
        if hi != 0:
            pn = self._decode(hi, self.kbuf2)
            while mh < <size_t>kn and mh < <size_t>pn and self.kbuf[mh] == self.kbuf2[mh]:
                mh += 1
        if mh > ml:
            p, side, m = hi, 1, mh
        elif ml > 0:
            p, side, m = lo, 0, ml
        y = p
        while y != 0:            # would x's new reference lead back to x?
            if y == x:
                self._reencode(p, 0, 0)
                kn = self._decode(x, self.kbuf)    # kbuf was reused by the recursive call
                break
            y = self._ref(y)
            steps += 1
            if steps > MAX_DEPTH * 2:
                with gil:
                    raise TreeCorrupt("reference loop")
        self._append(x, p, side, <uint32_t>m, self.kbuf + m, <uint32_t>(kn - m), cat, period)
        return 0

    cdef inline bint _valid_ref(self, uint32_t x, uint32_t lo, uint32_t hi) noexcept nogil:
        """Is x's encoding valid at a position whose flanking ancestors are lo and hi? Its RefID
        must be 0 (a full key) or the flank its side bit names."""
        cdef Rec r
        _read_rec(self.blob + self.dataptr[x], x, &r)
        if r.ref == 0:
            return r.cp == 0
        return r.ref == (hi if r.side else lo)

    cdef int _fix(self, uint32_t x, uint32_t lo, uint32_t hi) except -1 nogil:
        """x now sits where lo and hi are its flanking ancestors: re-encode it if its RefID is
        neither (a rotation or delete moved it, or removed its reference)."""
        if x != 0 and not self._valid_ref(x, lo, hi):
            self._reencode(x, lo, hi)
        return 0

    cdef int _fix_spine(self, uint32_t y, int side, uint32_t lo, uint32_t hi) except -1 nogil:
        """_fix the spine of the subtree y (whose flanks are lo, hi) on `side`: after a delete the
        removed node was the flank of exactly these nodes (the right spine of its left subtree
        and the left spine of its right subtree)."""
        while y != 0:
            self._fix(y, lo, hi)
            if side > 0:
                lo = y
                y = self._right(y)
            else:
                hi = y
                y = self._left(y)
        return 0

    cdef inline void _link(self, uint32_t p, int side, uint32_t c) noexcept nogil:
        """Set a child pointer. The callers keep the encoding valid (_rotate, _del, _fix)."""
        if side < 0:
            self.nodes[p].left = (self.nodes[p].left & ~(<uint32_t>ID_MASK)) | c
        else:
            self.nodes[p].right = (self.nodes[p].right & ~(<uint32_t>ID_MASK)) | c

    cdef int _set_root(self, uint32_t c) except -1 nogil:
        self.root = c
        self._fix(c, 0, 0)
        return 0

    # ---- search ---------------------------------------------------------------------------
    cdef inline int _step(self, uint32_t x, const uint8_t *q, size_t qn, size_t mlo, size_t mhi,
                          size_t *m_out, int *kp) noexcept nogil:
        """Compare q with key(x) given mlo and mhi, q's lcp with the keys of x's low and high
        flanking ancestors (q lies between them): -1, 0, 1 and m_out = lcp(q, key(x))."""
        cdef const uint8_t *p = self.blob + self.dataptr[x]
        cdef uint32_t cp, dlen, h
        cdef size_t mref
        cdef size_t i = 0, n, rem
        cdef uint32_t r = self.nodes[x].right & ID_MASK
        cdef uint32_t l = self.nodes[x].left & ID_MASK, g
        # Software pipeline of the descent's dependent loads (TreeNode -> DataPtr -> record),
        # one level per stage, while this record is fetched: (1) the right child's slots (the
        # left child, x + 1 after optimize(), usually shares their cache lines already);
        # (2) both children's records, whose DataPtr entries stage (1) of the parent's step
        # fetched; (3) the grandchildren's slots (the right child's of each child; the left
        # one is adjacent again), so that stage (2) of the next step finds its DataPtr.
        # A/B on the idle machine (docs/urlfilter.md): (2) and (3) each took 5-10 % off the
        # median match time; also prefetching the grandchildren's records did not help further.
        wt_prefetch_keep(&self.nodes[r])
        wt_prefetch_keep(&self.dataptr[r])
        wt_prefetch_keep(self.blob + self.dataptr[r])
        wt_prefetch_keep(self.blob + self.dataptr[l])
        g = self.nodes[r].right & ID_MASK
        wt_prefetch_keep(&self.nodes[g])
        wt_prefetch_keep(&self.dataptr[g])
        g = self.nodes[l].right & ID_MASK
        wt_prefetch_keep(&self.nodes[g])
        wt_prefetch_keep(&self.dataptr[g])
        p = _get_varint(p, &h)
        cp = h >> 1
        mref = mhi if h & 1 else mlo
        if cp > mref:
            # key(x) agrees with its reference beyond where q leaves it, so q is on the same side
            # of key(x) as of the reference: below the high flank, above the low one
            m_out[0] = mref
            kp[0] = 0
            return -1 if h & 1 else 1
        p = _get_varint(p, &dlen)
        q += cp
        rem = qn - cp
        n = rem if rem < dlen else dlen
        while i < n and q[i] == p[i]:
            i += 1
        m_out[0] = cp + i
        kp[0] = 0
        if i < n:
            return -1 if q[i] < p[i] else 1
        if rem == dlen:
            kp[0] = 1
            return 0
        if rem < dlen:
            return -1
        kp[0] = 1
        return 1

    cdef uint32_t _search(self, uint32_t x, const uint8_t *q, size_t qn, size_t mlo, size_t mhi) noexcept nogil:
        """Exact search for q in the subtree x whose flanking ancestors share mlo and mhi bytes
        with q (0 and 0 from the root)."""
        cdef int c, kp
        cdef size_t m
        while x != 0:
            c = self._step(x, q, qn, mlo, mhi, &m, &kp)
            if c == 0:
                return x
            if c < 0:
                mhi = m
            else:
                mlo = m
            x = self._child(x, c)
        return 0

    cdef inline uint32_t _descend(self, uint32_t x, const uint8_t *q, size_t t, size_t mlo,
                                  size_t mhi, uint32_t *pred, size_t *mp, int *kpp, Turn *turns,
                                  int *nt) noexcept nogil:
        """Exact search for q[:t] from node x (the root: mlo = mhi = 0, *pred = 0, *kpp = 0,
        *nt = 0; a subtree: the lcps of its flanks, its low flank and turns so far). On a miss
        (0), pred is the greatest key below q[:t] (the last node where the descent turned right;
        0 if none), mp its lcp with q[:t] and kpp whether it is a prefix of q[:t]; turns[:nt] the
        right turns that raised the lcp."""
        cdef uint32_t p = pred[0]
        cdef size_t m
        cdef int c, kp, k = kpp[0], n = nt[0]
        while x != 0:
            c = self._step(x, q, t, mlo, mhi, &m, &kp)
            if c == 0:
                return x
            if c < 0:
                mhi = m
                x = self.nodes[x].left & ID_MASK
            else:
                if m > mlo and n < MAX_DEPTH:     # (a valid tree is < 64 high)
                    turns[n].x = x
                    turns[n].m = <uint32_t>m
                    turns[n].lo = p
                    turns[n].mlo = <uint32_t>mlo
                    turns[n].kplo = k
                    turns[n].kp = kp
                    n += 1
                mlo = m
                p = x
                k = kp
                x = self.nodes[x].right & ID_MASK
        pred[0] = p
        mp[0] = mlo
        kpp[0] = k
        nt[0] = n
        return 0

    cdef uint32_t _lpm_next(self, const uint8_t *q, size_t qn, uint32_t pred, size_t mp, int kpp,
                            bint anylen, QBounds *qb, size_t *t) noexcept nogil:
        """One round of the longest-prefix loop after the descent for q[:t] missed with
        predecessor pred (lcp mp, kpp: pred is a prefix of q[:t]): the answer (an id, or 0), or
        LPM_MORE with t lowered to the next candidate length. anylen: every length counts (the
        no-prefix flag of a new key), else only q's component boundaries."""
        cdef size_t b
        if pred == 0:
            return 0
        if kpp and mp > 0:
            if anylen or _boundary_at(q, mp):
                return pred
        if self.nodes[pred].right & NP_BIT:
            return 0             # no entry is a proper prefix of pred, so none of q[:t] but pred
        if mp == 0:
            return 0
        b = mp - 1 if kpp else mp
        if not anylen:
            if not qb.ready:
                _qb_init(q, qn, qb)
            while b > 0 and not _is_boundary(q, b, qb.host_end, qb.qpos):
                b -= 1
        if b == 0:
            return 0
        t[0] = b
        return LPM_MORE

    cdef uint32_t _lpm_sub(self, const uint8_t *q, size_t qn, uint32_t pred, size_t mp, int kpp,
                           bint anylen, Turn *turns, int nt, size_t known, size_t *tout) noexcept nogil:
        """The longest-prefix loop after a missed descent for q (pred, mp, kpp and turns[:nt] as
        _descend gives them). Each further round searches q[:t] for a shorter t, and that search
        follows q's path down to the first right turn Z sharing >= t bytes with q (turns: q[:t]
        is below key(Z), which starts with q[:t]) and goes left there: only the part below Z is
        walked. Returns the answer (0: none), or LPM_MORE with tout = t when t <= known (the
        caller recorded only the turns that share more than `known` bytes: _np_new)."""
        cdef QBounds qb
        cdef uint32_t y, r
        cdef size_t t = qn
        cdef int j
        qb.ready = False
        while True:
            r = self._lpm_next(q, qn, pred, mp, kpp, anylen, &qb, &t)
            if r != LPM_MORE:
                return r
            if t <= known:
                tout[0] = t
                return LPM_MORE
            j = 0
            while j < nt and turns[j].m < t:
                j += 1
            if j == nt:               # cannot happen: pred is a turn with lcp mp >= t
                return 0
            if turns[j].kp and turns[j].m == t:
                return turns[j].x     # key(Z) is q[:t] itself
            pred, kpp, nt = turns[j].lo, turns[j].kplo, j
            y = self._descend(self._left(turns[j].x), q, t, turns[j].mlo, t, &pred, &mp, &kpp,
                              turns, &nt)
            if y != 0:
                return y

    cdef uint32_t _lpm(self, const uint8_t *q, size_t qn, size_t t, bint anylen) noexcept nogil:
        """Longest entry q[:b], b <= t, that equals q or is a proper prefix of q on a component
        boundary (anylen: of any length >= 1; t must be qn or such a length); 0 if none. See
        "Prefix match" in the module docstring."""
        cdef Turn turns[MAX_DEPTH]
        cdef int nt = 0
        cdef uint32_t x, pred = 0
        cdef size_t mp
        cdef int kpp = 0
        x = self._descend(self.root, q, t, 0, 0, &pred, &mp, &kpp, turns, &nt)
        if x != 0:
            return x
        return self._lpm_sub(q, qn, pred, mp, kpp, anylen, turns, nt, 0, &mp)

    cdef uint32_t _prefix(self, const uint8_t *q, size_t qn) noexcept nogil:
        """Longest entry that equals q or is a prefix of q on a component boundary; 0 if none."""
        return self._lpm(q, qn, qn, False)

    cdef void _match_group(self, const uint8_t **qs, const size_t *qn, int32_t *out, int g,
                           bint prefix) noexcept nogil:
        """Match g queries (g <= GROUP) in lockstep: each round first prefetches every live
        query's next record, then takes one step for each, so one query's cache misses overlap
        with the others' work (the descents are independent)."""
        cdef uint32_t x[GROUP]
        cdef uint32_t pred[GROUP]
        cdef size_t mlo[GROUP]
        cdef size_t mhi[GROUP]
        cdef int kpp[GROUP]
        cdef int i, live = g, kp, cc
        cdef size_t m, t
        cdef uint32_t r
        cdef QBounds qb
        for i in range(g):
            x[i] = self.root
            pred[i] = 0
            mlo[i] = 0
            mhi[i] = 0
            kpp[i] = 0
            out[i] = -1          # still descending (ids are > 0; 0 is a miss)
            if x[i] == 0:
                out[i] = 0
                live -= 1
        while live > 0:
            for i in range(g):
                if x[i] != 0:
                    wt_prefetch_keep(self.blob + self.dataptr[x[i]])
            for i in range(g):
                if x[i] == 0:
                    continue
                cc = self._step(x[i], qs[i], qn[i], mlo[i], mhi[i], &m, &kp)
                if cc == 0:
                    out[i] = <int32_t>x[i]
                    x[i] = 0
                    live -= 1
                    continue
                if cc < 0:
                    mhi[i] = m
                else:
                    mlo[i] = m
                    pred[i] = x[i]
                    kpp[i] = kp
                x[i] = self._child(x[i], cc)
                if x[i] != 0:
                    wt_prefetch_keep(&self.dataptr[x[i]])
                    wt_prefetch_keep(&self.nodes[x[i]])
                else:
                    live -= 1
        for i in range(g):
            if out[i] >= 0:
                continue
            out[i] = 0
            if prefix:
                qb.ready = False
                t = qn[i]
                r = self._lpm_next(qs[i], qn[i], pred[i], mlo[i], kpp[i], False, &qb, &t)
                if r == LPM_MORE:      # rare: again from the root, recording the right turns
                    r = self._lpm(qs[i], qn[i], qn[i], False)
                out[i] = <int32_t>r

    # ---- insert / delete ------------------------------------------------------------------
    cdef uint32_t _alloc_id(self) except 0 nogil:
        cdef uint32_t x
        if self.free_head != 0:
            x = self.free_head
            self.free_head = self.nodes[x].left & ID_MASK
        else:
            if self.n_slots > self.max_ids:
                with gil:
                    raise OverflowError(f"the URL tree holds at most {self.max_ids} URLs (28-bit ids)")
            self._grow_slots(self.n_slots + 1)
            x = <uint32_t>self.n_slots
            self.n_slots += 1
        self.nodes[x].left = 0
        self.nodes[x].right = 0
        self.dataptr[x] = FREE_PTR
        return x

    cdef uint32_t _rotate(self, uint32_t a, int side, uint32_t lo, uint32_t hi) except? 0 nogil:
        """Rotate a (flanking ancestors lo, hi) towards `side` (RIGHT: a's left child b becomes the
        subtree root). Only a and b change flanks: b takes a's (lo, hi), a gets b and one of its
        own; the subtree moving between them keeps (b, a). b is fixed first, so a's new
        reference never leads back to a."""
        cdef uint32_t b = self._child(a, -side)
        self._fix(b, lo, hi)
        self._link(a, -side, self._child(b, side))
        self._fix_height(a)
        self._link(b, side, a)
        if side > 0:
            self._fix(a, b, hi)
        else:
            self._fix(a, lo, b)
        self._fix_height(b)
        return b

    cdef uint32_t _balance(self, uint32_t x, uint32_t lo, uint32_t hi) except? 0 nogil:
        cdef uint32_t l = self._left(x), r = self._right(x)
        cdef int hl = self._height(l), hr = self._height(r)
        if hl > hr + 1:
            if self._height(self._left(l)) < self._height(self._right(l)):
                self._link(x, LEFT, self._rotate(l, LEFT, lo, x))
            return self._rotate(x, RIGHT, lo, hi)
        if hr > hl + 1:
            if self._height(self._right(r)) < self._height(self._left(r)):
                self._link(x, RIGHT, self._rotate(r, RIGHT, x, hi))
            return self._rotate(x, LEFT, lo, hi)
        self._set_height(x, (hl if hl > hr else hr) + 1)
        return x

    cdef int _ins(self, uint32_t x, uint32_t lo, uint32_t hi, size_t mlo, size_t mhi,
                  const uint8_t *k, size_t kn, uint32_t cat, uint32_t period, uint32_t *out,
                  uint32_t *hit) except -1 nogil:
        """Insert k below x, whose flanking ancestors lo and hi share mlo and mhi bytes with k. out: new subtree root; hit: the node holding k (new or
        existing). Returns 1 when k was new, 0 when it existed. A new leaf's flanks are k's
        neighbours in key order, and its encoding against the closer one comes free from the
        descent; so does its no-prefix flag, unless its predecessor's flag is 0 (then
        _insert_key searches) -- and when k is a proper prefix of its successor, the keys that
        start with k lose theirs (_mark_extensions)."""
        cdef int c, kp, rc
        cdef uint32_t sub
        cdef size_t m
        cdef Turn *tp
        if x == 0:
            x = self._alloc_id()
            if mhi > mlo:
                self._append(x, hi, 1, <uint32_t>mhi, k + mhi, <uint32_t>(kn - mhi), cat, period)
            else:
                self._append(x, lo if mlo else 0, 0, <uint32_t>mlo, k + mlo, <uint32_t>(kn - mlo), cat, period)
            self._set_height(x, 1)
            # a proper prefix p of k (p != "") is <= lo, and every key from p to k starts with p
            if lo == 0:
                self._set_np(x, True)
            elif self.ins_kpa:
                self._set_np(x, False)            # an ancestor (often lo itself)
            elif self._np(lo) or mlo == 0:
                self._set_np(x, True)
            elif self._ref_is_prefix(lo, mlo):
                self._set_np(x, False)
            elif hi != 0 and mhi >= mlo and self._np(hi):
                self._set_np(x, True)             # k's candidates k[:b], b <= mlo, prefix hi too
            elif hi != 0 and self._ref_is_prefix(hi, mhi):
                self._set_np(x, False)            # hi's reference: hi[:cp] = k[:cp], not k
            else:                                 # lo has a prefix entry: is it one of k's?
                self._set_np(x, self._np_new(lo, k, kn, mlo))
            self.np_mark = hi != 0 and mhi == kn and kn > 0
            out[0] = x
            hit[0] = x
            self.count += 1
            return 1
        c = self._step(x, k, kn, mlo, mhi, &m, &kp)
        if c == 0:
            out[0] = x
            hit[0] = x
            return 0
        if c > 0 and m > mlo and self.ins_nt < MAX_DEPTH:
            tp = &self.ins_turns[self.ins_nt]
            tp.x = x
            tp.m = <uint32_t>m
            tp.lo = lo
            tp.mlo = <uint32_t>mlo
            self.ins_nt += 1
            if kp:
                self.ins_kpa = True
        if c < 0:
            rc = self._ins(self._left(x), lo, x, mlo, m, k, kn, cat, period, &sub, hit)
        else:
            rc = self._ins(self._right(x), x, hi, m, mhi, k, kn, cat, period, &sub, hit)
        if rc == 0:
            out[0] = x
            return 0
        self._link(x, c, sub)
        out[0] = self._balance(x, lo, hi)
        return 1

    cdef int _del_min(self, uint32_t x, uint32_t lo, uint32_t hi, uint32_t *out, uint32_t *s) except -1 nogil:
        """Unlink the smallest node of the subtree x (flanks lo, hi) into s; out: the new root.
        s's right child keeps its encoding: s is its low flank again once s replaces the
        deleted node, and _del fixes that spine."""
        cdef uint32_t sub
        if self._left(x) == 0:
            s[0] = x
            out[0] = self._right(x)
            return 0
        self._del_min(self._left(x), lo, x, &sub, s)
        self._link(x, LEFT, sub)
        out[0] = self._balance(x, lo, hi)
        return 0

    cdef int _del(self, uint32_t x, uint32_t lo, uint32_t hi, size_t mlo, size_t mhi, const uint8_t *k,
                  size_t kn, uint32_t *out, uint32_t *hit) except -1 nogil:
        """Remove k from the subtree x (flanks lo, hi); out: its new root; hit: the removed node
        (0: absent). The removed node was the flank of the right spine of its left subtree and
        the left spine of its right subtree only; those are re-encoded before it is released."""
        cdef int c, kp
        cdef uint32_t sub, s, l, r
        cdef size_t m
        if x == 0:
            out[0] = 0
            return 0
        c = self._step(x, k, kn, mlo, mhi, &m, &kp)
        if c != 0:
            if c < 0:
                self._del(self._left(x), lo, x, mlo, m, k, kn, &sub, hit)
            else:
                self._del(self._right(x), x, hi, m, mhi, k, kn, &sub, hit)
            if hit[0] == 0:
                out[0] = x
                return 0
            self._link(x, c, sub)
            out[0] = self._balance(x, lo, hi)
            return 0
        hit[0] = x
        l, r = self._left(x), self._right(x)
        if l == 0 or r == 0:
            if l != 0:
                self._fix_spine(l, RIGHT, lo, hi)
                out[0] = l
            else:
                self._fix_spine(r, LEFT, lo, hi)
                out[0] = r
            return 0
        self._del_min(r, x, hi, &sub, &s)
        self.nodes[s].left = 0
        self.nodes[s].right &= NP_BIT            # s's own no-prefix flag stays
        self._link(s, LEFT, l)
        self._link(s, RIGHT, sub)
        self._fix(s, lo, hi)
        self._fix_spine(l, RIGHT, lo, s)
        self._fix_spine(sub, LEFT, s, hi)
        out[0] = self._balance(s, lo, hi)
        return 0

    cdef int _release(self, uint32_t x) except -1 nogil:
        cdef Rec r
        _read_rec(self.blob + self.dataptr[x], x, &r)
        self.dead += r.size
        self.dataptr[x] = FREE_PTR
        self.nodes[x].right = 0
        self.nodes[x].left = self.free_head
        self.free_head = x
        self.count -= 1
        return 0

    cdef int _maybe_compact(self) except -1 nogil:
        if self.dead > (1 << 20) and self.dead > self.blob_used - self.dead:
            self._compact()
        return 0

    cdef int _compact(self) except -1 nogil:
        """Copy live records into a fresh CompressedURL in breadth-first tree order, so the top
        levels every search visits share a few cache lines and pages."""
        cdef uint8_t *nb
        cdef uint32_t *queue
        cdef size_t live = self.blob_used - self.dead, o = 0, head = 0, tail = 0
        cdef uint32_t x
        cdef Rec r
        nb = <uint8_t *>_checked_grow(NULL, 0, live + 4096)
        queue = <uint32_t *>wt_alloc((self.count + 1) * sizeof(uint32_t))
        if self.root != 0:
            queue[tail] = self.root
            tail += 1
        while head < tail:
            x = queue[head]
            head += 1
            _read_rec(self.blob + self.dataptr[x], x, &r)
            memcpy(nb + o, self.blob + self.dataptr[x], r.size)
            self.dataptr[x] = <uint32_t>o
            o += r.size
            if self._left(x) != 0 and tail < self.count:
                queue[tail] = self._left(x)
                tail += 1
            if self._right(x) != 0 and tail < self.count:
                queue[tail] = self._right(x)
                tail += 1
        free(queue)
        free(self.blob)
        self.blob = nb
        self.blob_cap = live + 4096
        self.blob_used = o
        self.dead = 0
        if head != self.count:
            with gil:
                raise TreeCorrupt(f"compaction reached {head} nodes, count is {self.count}")
        return 0

    cdef int _insert_key(self, const uint8_t *k, size_t kn, uint32_t cat, uint32_t period,
                         uint32_t *hit) except -2 nogil:
        """1: inserted, 0: already present (hit = its id), TREE_TOO_LONG."""
        cdef uint32_t out
        cdef int rc
        if kn > MAX_KEY:
            return TREE_TOO_LONG
        self._kc_reset()
        self.kc_on = True
        self.np_mark = False
        self.ins_kpa = False
        self.ins_nt = 0
        try:
            rc = self._ins(self.root, 0, 0, 0, 0, k, kn, cat, period, &out, hit)
            if rc:
                self._set_root(out)
                if self.np_mark:
                    self._mark_extensions(k, kn)
                self._maybe_compact()
        finally:
            self.kc_on = False
        return rc

    cdef bint _np_new(self, uint32_t lo, const uint8_t *k, size_t kn, size_t mlo) noexcept nogil:
        """No-prefix flag of a new key k (not linked yet) whose predecessor lo has flag 0 and no
        ancestor of which is a prefix of k (so every turn's kp and kplo are 0): is some k[:b],
        1 <= b <= mlo (k's lcp with lo), an entry? _lpm_sub with the turns _ins recorded."""
        cdef size_t t
        cdef int i
        for i in range(self.ins_nt):
            self.ins_turns[i].kplo = 0
            self.ins_turns[i].kp = 0
        return self._lpm_sub(k, kn, lo, mlo, 0, True, self.ins_turns, self.ins_nt, 0, &t) == 0

    cdef bint _ref_is_prefix(self, uint32_t y, size_t mk) noexcept nogil:
        """Is y's reference a prefix of key(y) of 1..mk bytes? (Then it is a proper prefix of every
        key that shares mk bytes with key(y).) Reads two record headers, no key bytes."""
        cdef Rec r
        cdef const uint8_t *p
        cdef uint32_t v, dlen
        _read_rec(self.blob + self.dataptr[y], y, &r)
        if r.ref == 0 or r.cp == 0 or r.cp > mk:
            return False
        p = _get_varint(self.blob + self.dataptr[r.ref], &v)
        _get_varint(p, &dlen)
        return (v >> 1) + dlen == r.cp

    cdef int _mark_extensions(self, const uint8_t *k, size_t kn) except -1 nogil:
        """k (in the tree) is a proper prefix of its successor: clear the no-prefix flag of every
        key that starts with k, the keys right after k in key order (walked in order from k)."""
        cdef uint32_t stack[MAX_DEPTH]
        cdef int sp = 0, c, kp
        cdef uint32_t x = self.root, y
        cdef size_t m, mlo = 0, mhi = 0
        cdef ptrdiff_t n
        while x != 0:
            c = self._step(x, k, kn, mlo, mhi, &m, &kp)
            if c == 0:
                break
            if c < 0:
                if sp == MAX_DEPTH:
                    with gil:
                        raise TreeCorrupt("tree deeper than MAX_DEPTH")
                stack[sp] = x          # an ancestor above k: visited after k's right subtree
                sp += 1
                mhi = m
            else:
                mlo = m
            x = self._child(x, c)
        if x == 0:
            with gil:
                raise TreeCorrupt("_mark_extensions: the key is not in the tree")
        sp = self._push_left_spine(self._right(x), stack, sp)
        while sp > 0:
            sp -= 1
            y = stack[sp]
            n = self._decode(y, self.kbuf)
            if <size_t>n <= kn or memcmp(self.kbuf, k, kn) != 0:
                break
            self._set_np(y, False)
            sp = self._push_left_spine(self._right(y), stack, sp)
        return 0

    cdef int _push_left_spine(self, uint32_t y, uint32_t *stack, int sp) except -1 nogil:
        """Push y and its left descendants (the next keys of an in-order walk); the new depth."""
        while y != 0:
            if sp == MAX_DEPTH:
                with gil:
                    raise TreeCorrupt("tree deeper than MAX_DEPTH")
            stack[sp] = y
            sp += 1
            y = self._left(y)
        return sp

    cdef uint32_t _delete_key(self, const uint8_t *k, size_t kn) except? 0 nogil:
        cdef uint32_t out, hit = 0
        self._kc_reset()
        self.kc_on = True
        try:
            self._del(self.root, 0, 0, 0, 0, k, kn, &out, &hit)
            if hit:
                self._set_root(out)
                self._release(hit)
                self._maybe_compact()
        finally:
            self.kc_on = False
        return hit

    # ---- Python API -----------------------------------------------------------------------
    cdef ptrdiff_t _canon_q(self, const uint8_t *s, size_t n) except -100 nogil:
        # not "except -2": that is CANON_BAD_CHAR, a normal answer (it made find("\x00") fail)
        self._qreserve(3 * n + 16)
        return webtap_canon(s, n, self.qbuf, self.qcap, CANON_KEY)

    def __len__(self):
        return self.count

    @property
    def height(self):
        return self._height(self.root)

    def insert_key(self, const uint8_t[::1] key, uint32_t category=0, uint32_t period=0):
        """Insert a key (canonical key form). Returns (id, created)."""
        cdef uint32_t hit = 0
        cdef int rc
        if category >= 0x80000000:
            raise OverflowError("category ids are below 2^31")
        self._own()
        rc = self._insert_key(&key[0] if key.shape[0] else <const uint8_t *>b"", key.shape[0],
                              category, period, &hit)
        if rc == TREE_TOO_LONG:
            raise ValueError(f"key longer than {MAX_KEY} bytes")
        return hit, bool(rc)

    def insert(self, url, uint32_t category=0, uint32_t period=0):
        """Canonicalise url (bytes or str) and insert it. Returns (id, created).

        Raises ValueError (with the CANON_* code as .code) for a URL that has no canonical form.
        """
        cdef const uint8_t[::1] u = _as_bytes(url)
        cdef ptrdiff_t n = self._canon_q(&u[0] if u.shape[0] else <const uint8_t *>b"", u.shape[0])
        if n < 0:
            raise _canon_error(n, url)
        return self.insert_key((<char *>self.qbuf)[:n], category, period)

    def delete_key(self, const uint8_t[::1] key):
        """Remove a key; returns its id, or 0 when absent."""
        self._own()
        return self._delete_key(&key[0] if key.shape[0] else <const uint8_t *>b"", key.shape[0])

    def delete(self, url):
        cdef const uint8_t[::1] u = _as_bytes(url)
        cdef ptrdiff_t n = self._canon_q(&u[0] if u.shape[0] else <const uint8_t *>b"", u.shape[0])
        if n < 0:
            raise _canon_error(n, url)
        return self.delete_key((<char *>self.qbuf)[:n])

    def delete_id(self, uint32_t uid):
        """Remove the URL with this id; returns True when it existed."""
        key = self.get_key(uid)
        if key is None:
            return False
        return self.delete_key(key) == uid

    def get_key(self, uint32_t uid):
        """Key of id uid (bytes), or None for a free or unknown id."""
        cdef ptrdiff_t n
        if uid == 0 or uid >= self.n_slots or self.dataptr[uid] == FREE_PTR:
            return None
        n = self._decode(uid, self.kbuf)
        return (<char *>self.kbuf)[:n]

    def get(self, uint32_t uid):
        """Canonical URL (str) of id uid, or None."""
        key = self.get_key(uid)
        if key is None:
            return None
        return key_to_url(key)

    def node(self, uint32_t uid):
        """The arrays' fields of id uid, for tests and inspection: (left, right, height, RefID,
        side, cPrefix, DiffURL length); None for a free or unknown id."""
        cdef Rec r
        if uid == 0 or uid >= self.n_slots or self.dataptr[uid] == FREE_PTR:
            return None
        _read_rec(self.blob + self.dataptr[uid], uid, &r)
        return (self._left(uid), self._right(uid), self._height(uid), r.ref, r.side, r.cp, r.dlen)

    def payload(self, uint32_t uid):
        """(category, period) of id uid, or None."""
        cdef Rec r
        if uid == 0 or uid >= self.n_slots or self.dataptr[uid] == FREE_PTR:
            return None
        _read_rec(self.blob + self.dataptr[uid], uid, &r)
        return r.cat, r.period

    def set_payload(self, uint32_t uid, uint32_t category, uint32_t period):
        """Change the category (< 2^31) and filtering period of id uid (no re-keying)."""
        cdef Rec r
        if category >= 0x80000000:
            raise OverflowError("category ids are below 2^31")
        if uid == 0 or uid >= self.n_slots or self.dataptr[uid] == FREE_PTR:
            raise KeyError(uid)
        self._own()
        _read_rec(self.blob + self.dataptr[uid], uid, &r)
        memcpy(self.kbuf, r.diff, r.dlen)
        self._append(uid, r.ref, r.side, r.cp, self.kbuf, r.dlen, category, period)
        self._maybe_compact()

    def rekey(self, uint32_t uid, new_url):
        """Give id uid a new URL (payload kept). Raises KeyError if uid is free or the new URL
        belongs to another id; ValueError if it has no canonical form."""
        cdef const uint8_t[::1] u = _as_bytes(new_url)
        cdef ptrdiff_t n
        cdef uint32_t other, hit = 0
        old = self.get_key(uid)
        if old is None:
            raise KeyError(uid)
        n = self._canon_q(&u[0] if u.shape[0] else <const uint8_t *>b"", u.shape[0])
        if n < 0:
            raise _canon_error(n, new_url)
        if n > MAX_KEY:
            raise ValueError(f"key longer than {MAX_KEY} bytes")
        new = (<char *>self.qbuf)[:n]
        if new == old:
            return
        other = self._search(self.root, <const uint8_t *><const char *>new, len(new), 0, 0)
        if other != 0:
            raise KeyError(f"{key_to_url(new)!r} already has id {other}")
        cat, period = self.payload(uid)
        self._own()
        self._delete_key(<const uint8_t *><const char *>old, len(old))       # frees uid: it is now the head of the free list
        self._insert_key(<const uint8_t *><const char *>new, len(new), cat, period, &hit)
        if hit != uid:
            raise TreeCorrupt(f"re-key gave id {hit}, expected {uid}")

    def find_key(self, key):
        """Exact match of a key (bytes or any buffer); id or 0."""
        cdef bytes k = _qbytes(key)
        return self._search(self.root, <const uint8_t *>PyBytes_AS_STRING(k), PyBytes_GET_SIZE(k), 0, 0)

    def prefix_key(self, key):
        """Prefix match of a key; id of the longest entry on a boundary, or 0."""
        cdef bytes k = _qbytes(key)
        return self._prefix(<const uint8_t *>PyBytes_AS_STRING(k), PyBytes_GET_SIZE(k))

    # find/match/find_key/prefix_key take the bytes object's own buffer: acquiring a typed
    # memoryview costs more than canonicalising a URL (single calls from Python, issue 7)
    def find(self, url):
        """Exact match after canonicalisation: id, 0 (miss) or -code (no canonical form)."""
        cdef bytes u = _qbytes(url)
        cdef ptrdiff_t n = self._canon_q(<const uint8_t *>PyBytes_AS_STRING(u), PyBytes_GET_SIZE(u))
        if n < 0:
            return <int>n
        return self._search(self.root, self.qbuf, n, 0, 0)

    def match(self, url):
        """Prefix match after canonicalisation: id, 0 (miss) or -code (no canonical form)."""
        cdef bytes u = _qbytes(url)
        cdef ptrdiff_t n = self._canon_q(<const uint8_t *>PyBytes_AS_STRING(u), PyBytes_GET_SIZE(u))
        if n < 0:
            return <int>n
        return self._prefix(self.qbuf, n)

    def match_batch(self, const uint8_t[::1] data, offsets, bint prefix=True, bint canonical=True,
                    timings=None):
        """Match every URL data[offsets[i]:offsets[i+1]] (Arrow layout), without the GIL.

        Returns int32 ids: > 0 hit, 0 miss, < 0 the CANON_* code of an URL with no canonical form.
        canonical=False treats the inputs as keys already. timings: an int64 array that receives
        each URL's time in ns (canonicalisation included), for latency distributions; without it
        URLs are matched GROUP at a time in lockstep, which hides memory latency (_match_group).
        The timed loop reads the clock once per URL: URL i's time runs from the end of URL i - 1
        (the start of the loop for the first) to its own end, so the loop's few instructions of
        bookkeeping count in it. A second clock read per URL (start and end) cost ~20 ns of a
        ~200 ns lookup on a 110,000-entry tree (in-process A/B, docs/urlfilter.md), a tenth of
        the time it was measuring.
        """
        cdef int64_t[::1] off = np.ascontiguousarray(offsets, dtype=np.int64)
        cdef Py_ssize_t n = off.shape[0] - 1, i
        res = np.zeros(max(n, 0), dtype=np.int32)
        cdef int32_t[::1] out = res
        cdef int64_t s, e, maxlen = 0
        cdef ptrdiff_t k
        cdef const uint8_t *base = &data[0] if data.shape[0] else <const uint8_t *>b""
        cdef uint8_t *buf
        cdef int64_t[::1] tv = _timing_view(timings, n)
        cdef bint timed = timings is not None
        cdef int64_t t0 = 0, t1
        cdef const uint8_t *qs[GROUP]
        cdef size_t qn[GROUP]
        cdef int32_t gout[GROUP]
        cdef Py_ssize_t slot[GROUP]
        cdef int g, j
        if n <= 0:
            return res
        maxlen = _longest_span(off, n, data.shape[0])
        with nogil:
            if timed:       # one query at a time, each timed
                buf = <uint8_t *>wt_alloc(3 * maxlen + 16)
                t0 = wt_now_ns()
                for i in range(n):
                    s, e = off[i], off[i + 1]
                    if canonical:
                        k = webtap_canon(base + s, e - s, buf, 3 * maxlen + 16, CANON_KEY)
                        if k < 0:
                            out[i] = <int32_t>k
                        else:
                            out[i] = <int32_t>(self._prefix(buf, k) if prefix else self._search(self.root, buf, k, 0, 0))
                    else:
                        out[i] = <int32_t>(self._prefix(base + s, e - s) if prefix
                                           else self._search(self.root, base + s, e - s, 0, 0))
                    t1 = wt_now_ns()
                    tv[i] = t1 - t0
                    t0 = t1
            else:           # groups of GROUP queries in lockstep (_match_group)
                buf = <uint8_t *>wt_alloc(GROUP * (3 * maxlen + 16))
                i = 0
                while i < n:
                    g = 0
                    while g < GROUP and i < n:
                        s, e = off[i], off[i + 1]
                        if canonical:
                            k = webtap_canon(base + s, e - s, buf + g * (3 * maxlen + 16), 3 * maxlen + 16, CANON_KEY)
                            if k < 0:
                                out[i] = <int32_t>k
                                i += 1
                                continue
                            qs[g] = buf + g * (3 * maxlen + 16)
                            qn[g] = <size_t>k
                        else:
                            qs[g] = base + s
                            qn[g] = <size_t>(e - s)
                        slot[g] = i
                        g += 1
                        i += 1
                    self._match_group(qs, qn, gout, g, prefix)
                    for j in range(g):
                        out[slot[j]] = gout[j]
            free(buf)
        return res

    def insert_batch(self, const uint8_t[::1] data, offsets, categories=0, periods=0, bint canonical=True,
                     timings=None):
        """Insert every URL of an Arrow-layout batch without the GIL.

        Returns (ids, codes), int32 each: codes 0 = inserted, 1 = already present (ids = existing
        id), < 0 = rejected (CANON_* codes, -6 too long; ids = 0). Raises OverflowError when the
        tree is full (everything before that URL is inserted). timings as in match_batch.
        """
        cdef int64_t[::1] off = np.ascontiguousarray(offsets, dtype=np.int64)
        cdef Py_ssize_t n = off.shape[0] - 1, i
        cdef uint32_t[::1] cats = np.broadcast_to(np.asarray(categories, dtype=np.uint32), (max(n, 0),)).copy()
        cdef uint32_t[::1] pers = np.broadcast_to(np.asarray(periods, dtype=np.uint32), (max(n, 0),)).copy()
        if n > 0 and np.asarray(cats).max() >= 0x80000000:
            raise OverflowError("category ids are below 2^31")
        ids_a = np.zeros(max(n, 0), dtype=np.int32)
        codes_a = np.zeros(max(n, 0), dtype=np.int32)
        cdef int32_t[::1] ids = ids_a, codes = codes_a
        cdef int64_t s, e, maxlen = 0
        cdef ptrdiff_t k
        cdef int rc
        cdef uint32_t hit
        cdef const uint8_t *base = &data[0] if data.shape[0] else <const uint8_t *>b""
        cdef uint8_t *buf = NULL
        cdef int64_t[::1] tv = _timing_view(timings, n)
        cdef bint timed = timings is not None
        cdef int64_t t0 = 0
        if n <= 0:
            return ids_a, codes_a
        maxlen = _longest_span(off, n, data.shape[0])
        self._own()
        try:
            with nogil:
                buf = <uint8_t *>wt_alloc(3 * maxlen + 16)
                for i in range(n):
                    if timed:
                        t0 = wt_now_ns()
                    s, e = off[i], off[i + 1]
                    if canonical:
                        k = webtap_canon(base + s, e - s, buf, 3 * maxlen + 16, CANON_KEY)
                        if k < 0:
                            codes[i] = <int32_t>k
                            continue
                        rc = self._insert_key(buf, k, cats[i], pers[i], &hit)
                    else:
                        rc = self._insert_key(base + s, e - s, cats[i], pers[i], &hit)
                    if rc == TREE_TOO_LONG:
                        codes[i] = TREE_TOO_LONG
                        continue
                    ids[i] = <int32_t>hit
                    codes[i] = 0 if rc == 1 else TREE_DUPLICATE
                    if timed:
                        tv[i] = wt_now_ns() - t0
        finally:
            free(buf)
        return ids_a, codes_a

    def delete_batch(self, const uint8_t[::1] data, offsets, timings=None):
        """Delete every URL of an Arrow-layout batch without the GIL; int32 ids of the removed
        entries (0: absent, < 0: CANON_* code). timings as in match_batch."""
        cdef int64_t[::1] off = np.ascontiguousarray(offsets, dtype=np.int64)
        cdef Py_ssize_t n = off.shape[0] - 1, i
        res = np.zeros(max(n, 0), dtype=np.int32)
        cdef int32_t[::1] out = res
        cdef int64_t maxlen = 0, t0 = 0
        cdef ptrdiff_t k
        cdef const uint8_t *base = &data[0] if data.shape[0] else <const uint8_t *>b""
        cdef uint8_t *buf = NULL
        cdef int64_t[::1] tv = _timing_view(timings, n)
        cdef bint timed = timings is not None
        if n <= 0:
            return res
        maxlen = _longest_span(off, n, data.shape[0])
        self._own()
        try:
            with nogil:
                buf = <uint8_t *>wt_alloc(3 * maxlen + 16)
                for i in range(n):
                    if timed:
                        t0 = wt_now_ns()
                    k = webtap_canon(base + off[i], off[i + 1] - off[i], buf, 3 * maxlen + 16, CANON_KEY)
                    out[i] = <int32_t>k if k < 0 else <int32_t>self._delete_key(buf, k)
                    if timed:
                        tv[i] = wt_now_ns() - t0
        finally:
            free(buf)
        return res

    def payload_batch(self, ids):
        """(category, period) uint32 arrays for an array of ids (0 / negative -> 0, 0)."""
        cdef int32_t[::1] a = np.ascontiguousarray(ids, dtype=np.int32)
        cat_a = np.zeros(a.shape[0], dtype=np.uint32)
        per_a = np.zeros(a.shape[0], dtype=np.uint32)
        cdef uint32_t[::1] cat = cat_a, per = per_a
        cdef Py_ssize_t i
        cdef Rec r
        with nogil:
            for i in range(a.shape[0]):
                if a[i] > 0 and <size_t>a[i] < self.n_slots and self.dataptr[a[i]] != FREE_PTR:
                    _read_rec(self.blob + self.dataptr[a[i]], a[i], &r)
                    cat[i] = r.cat
                    per[i] = r.period
        return cat_a, per_a

    def ids(self):
        """Live ids in key order (an in-order walk), as a uint32 array."""
        res = np.zeros(self.count, dtype=np.uint32)
        cdef uint32_t[::1] out = res
        cdef uint32_t stack[MAX_DEPTH]
        cdef int sp = 0
        cdef size_t k = 0
        cdef uint32_t x = self.root
        with nogil:
            while x != 0 or sp > 0:
                while x != 0:
                    stack[sp] = x
                    sp += 1
                    x = self._left(x)
                sp -= 1
                x = stack[sp]
                if k < self.count:
                    out[k] = x
                k += 1
                x = self._right(x)
        if k != self.count:
            raise TreeCorrupt(f"in-order walk found {k} nodes, count is {self.count}")
        return res

    def keys(self):
        """All keys in order (a list of bytes; for tests and export, not for hot paths)."""
        return [self.get_key(x) for x in self.ids()]

    def check(self):
        """Verify every invariant: AVL balance and heights, key order, RefID a flanking ancestor
        (side bit and cPrefix included), counts, the free list and DataPtr. Raises TreeCorrupt;
        returns the number of nodes checked."""
        cdef size_t seen = 0
        cdef Rec rec
        stack = [(self.root, 0, 0)]
        while stack:
            x, lo, hi = stack.pop()
            if x == 0:
                continue
            seen += 1
            if seen > self.count:
                raise TreeCorrupt("more nodes reachable than count")
            if self.dataptr[x] == FREE_PTR:
                raise TreeCorrupt(f"node {x} reachable but free")
            if not self._valid_ref(x, lo, hi):
                raise TreeCorrupt(f"node {x}: RefID {self._ref(x)} is not its flank {lo} or {hi}")
            _read_rec(self.blob + self.dataptr[x], x, &rec)
            if rec.ref != 0:
                kx, kr = self.get_key(x), self.get_key(rec.ref)
                if not (kr < kx if rec.side == 0 else kr > kx) or rec.cp != len(os.path.commonprefix([kx, kr])):
                    raise TreeCorrupt(f"node {x}: side bit or cPrefix disagree with its reference {rec.ref}")
            l, r = self._left(x), self._right(x)
            hl, hr = self._height(l), self._height(r)
            if abs(hl - hr) > 1 or self._height(x) != max(hl, hr) + 1:
                raise TreeCorrupt(f"node {x}: heights {hl}/{hr}/{self._height(x)}")
            stack.append((l, lo, x))
            stack.append((r, x, hi))
        if seen != self.count:
            raise TreeCorrupt(f"{seen} nodes reachable, count {self.count}")
        keys = self.keys()
        for a, b in zip(keys, keys[1:]):
            if not a < b:
                raise TreeCorrupt(f"keys out of order: {a!r} >= {b!r}")
        prefixes = []       # the entries that are prefixes of the previous key (nested)
        for x, key in zip(self.ids(), keys):
            while prefixes and not key.startswith(prefixes[len(prefixes) - 1]):
                prefixes.pop()
            if prefixes and self._np(x):
                raise TreeCorrupt(f"node {x}: no-prefix flag set, but {prefixes[len(prefixes) - 1]!r} "
                                  f"is a prefix of {key!r}")
            if key:
                prefixes.append(key)
        for x, key in zip(self.ids(), keys):
            if self.find_key(key) != x:
                raise TreeCorrupt(f"search for {key!r} does not reach node {x}")
        free_ids = 0
        x = self.free_head
        while x != 0:
            if self.dataptr[x] != FREE_PTR:
                raise TreeCorrupt(f"free id {x} has a record")
            free_ids += 1
            if free_ids > self.n_slots:
                raise TreeCorrupt("free list loops")
            x = self._left(x)
        if free_ids + self.count != self.n_slots - 1:
            raise TreeCorrupt(f"{free_ids} free + {self.count} live != {self.n_slots - 1} ids")
        return seen

    cdef int _opt_rec(self, uint32_t x, int depth, int dlo, int dhi, uint32_t *new_of, uint8_t *keys,
                      uint32_t *klen, uint32_t *kid, TreeNode *nn, uint32_t *nd, uint8_t *nb, size_t bcap,
                      size_t *o, uint32_t *next_id, NPScan *scan, uint8_t *prevbuf) except -1 nogil:
        """optimize()'s pre-order walk: give x the next id and write its record re-encoded against
        the better flank. keys[d * KSTRIDE]: the full key of the ancestor at depth d (klen, kid:
        its length and old id); dlo/dhi: the depths of x's flanks (-1: none). The no-prefix flags
        are recomputed exactly in key order on the way (scan; prevbuf holds the previous key)."""
        cdef Rec rec
        cdef bint npx
        cdef uint32_t nx = next_id[0], l, r, ref = 0, side = 0
        cdef uint8_t *kx = keys + <size_t>depth * KSTRIDE
        cdef uint8_t *p
        cdef size_t n, ml = 0, mh = 0, m = 0, src
        if depth >= MAX_DEPTH:
            with gil:
                raise TreeCorrupt("tree deeper than MAX_DEPTH")
        next_id[0] += 1
        new_of[x] = nx
        _read_rec(self.blob + self.dataptr[x], x, &rec)
        if rec.ref != 0:
            src = <size_t>(dhi if rec.side else dlo)
            if (dhi if rec.side else dlo) < 0 or kid[src] != rec.ref or rec.cp > klen[src]:
                with gil:
                    raise TreeCorrupt(f"node {x}: RefID {rec.ref} is not the flank its side bit names")
            memcpy(kx, keys + src * KSTRIDE, rec.cp)
        elif rec.cp != 0:
            with gil:
                raise TreeCorrupt(f"node {x}: full key with cPrefix {rec.cp}")
        if rec.cp + rec.dlen > MAX_KEY:
            with gil:
                raise TreeCorrupt(f"node {x}: key longer than {MAX_KEY} bytes")
        memcpy(kx + rec.cp, rec.diff, rec.dlen)
        n = rec.cp + rec.dlen
        klen[depth] = <uint32_t>n
        kid[depth] = x
        if dlo >= 0:
            p = keys + <size_t>dlo * KSTRIDE
            while ml < n and ml < klen[dlo] and kx[ml] == p[ml]:
                ml += 1
        if dhi >= 0:
            p = keys + <size_t>dhi * KSTRIDE
            while mh < n and mh < klen[dhi] and kx[mh] == p[mh]:
                mh += 1
        if mh > ml:
            ref, side, m = new_of[kid[dhi]], 1, mh
        elif ml > 0:
            ref, side, m = new_of[kid[dlo]], 0, ml
        if o[0] + n + 32 > bcap:
            with gil:
                raise TreeCorrupt("optimize: records larger than estimated")
        nd[nx] = <uint32_t>o[0]
        p = _put_varint(nb + o[0], <uint32_t>((m << 1) | side))
        p = _put_varint(p, <uint32_t>(n - m))
        memcpy(p, kx + m, n - m)
        p += n - m
        p = _put_varint(p, _zigzag(nx, ref))
        p = _put_payload(p, rec.cat, rec.period)
        o[0] = <size_t>(p - nb)
        l, r = self._left(x), self._right(x)
        if l != 0:
            self._opt_rec(l, depth + 1, dlo, depth, new_of, keys, klen, kid, nn, nd, nb, bcap, o, next_id,
                          scan, prevbuf)
        npx = _np_scan(scan, kx, n)
        memcpy(prevbuf, kx, n)
        if r != 0:
            self._opt_rec(r, depth + 1, depth, dhi, new_of, keys, klen, kid, nn, nd, nb, bcap, o, next_id,
                          scan, prevbuf)
        nn[nx].left = (self.nodes[x].left & ~(<uint32_t>ID_MASK)) | (new_of[l] if l else 0)
        nn[nx].right = ((self.nodes[x].right & <uint32_t>RH_MASK) | (new_of[r] if r else 0)
                        | (<uint32_t>NP_BIT if npx else 0))
        return 0

    cdef int _optimize(self, uint32_t *new_of) except -1 nogil:
        """Pre-order ids and records, every node re-encoded against its better flank (a tree
        built by inserts keeps some valid but second-best references after rotations)."""
        cdef size_t n = self.count, o = 0, bcap
        cdef uint32_t next_id = 1
        cdef TreeNode *nn
        cdef uint32_t *nd
        cdef uint8_t *nb
        cdef uint8_t *keys
        cdef uint32_t klen[MAX_DEPTH]
        cdef uint32_t kid[MAX_DEPTH]
        cdef bint ok = False
        cdef NPScan scan
        cdef uint8_t *prevbuf
        nn = <TreeNode *>_checked_grow(NULL, 0, (n + 1) * sizeof(TreeNode))
        nd = <uint32_t *>_checked_grow(NULL, 0, (n + 1) * sizeof(uint32_t))
        bcap = self.blob_used - self.dead + 6 * n + 4096
        nb = <uint8_t *>_checked_grow(NULL, 0, bcap)
        keys = <uint8_t *>wt_alloc(<size_t>(MAX_DEPTH + 1) * KSTRIDE)
        prevbuf = keys + <size_t>MAX_DEPTH * KSTRIDE
        scan.lens = <uint32_t *>wt_alloc((MAX_KEY + 1) * sizeof(uint32_t))
        scan.prev = prevbuf
        scan.prevn = 0
        scan.nl = 0
        nn[0].left = 0
        nn[0].right = 0
        nd[0] = FREE_PTR
        try:
            if self.root != 0:
                self._opt_rec(self.root, 0, -1, -1, new_of, keys, klen, kid, nn, nd, nb, bcap, &o, &next_id,
                              &scan, prevbuf)
            if next_id != n + 1:
                with gil:
                    raise TreeCorrupt(f"pre-order walk found {next_id - 1} nodes, count is {n}")
            ok = True
        finally:
            free(keys)
            free(scan.lens)
            if not ok:
                free(nn)
                free(nd)
                free(nb)
        nb = <uint8_t *>_checked_grow(nb, o, o + 4096)     # drop the estimate's slack (~6 B/URL)
        free(self.nodes)
        free(self.dataptr)
        free(self.blob)
        self.nodes, self.dataptr, self.blob = nn, nd, nb
        self.n_slots = self.cap_slots = n + 1
        self.blob_used = o
        self.blob_cap = o + 4096
        self.dead = 0
        self.free_head = 0
        self.root = 1 if n else 0
        return 0

    cdef uint32_t _build(self, const uint8_t *data, const int64_t *starts, const int64_t *ends,
                         const int64_t *uniq, const uint32_t *cats, const uint32_t *pers,
                         const uint8_t *npf, int64_t lo, int64_t hi, int64_t flo, int64_t fhi, uint32_t flo_id,
                         uint32_t fhi_id, uint32_t *next_id, int *height) except? 0 nogil:
        """Balanced subtree of the sorted unique keys uniq[lo:hi], ids in pre-order; flo/fhi are
        the positions (-1: none) and flo_id/fhi_id the ids of its flanking ancestors; npf[i]: the
        no-prefix flag of uniq[i]."""
        cdef int64_t mid, k
        cdef uint32_t x, l, r
        cdef int hl, hr
        cdef size_t ml = 0, mh = 0, kn, pn
        cdef const uint8_t *key
        cdef const uint8_t *pkey
        if lo >= hi:
            height[0] = 0
            return 0
        mid = lo + (hi - lo) // 2
        k = uniq[mid]
        x = next_id[0]
        next_id[0] += 1
        key = data + starts[k]
        kn = <size_t>(ends[k] - starts[k])
        if flo >= 0:
            pkey = data + starts[uniq[flo]]
            pn = <size_t>(ends[uniq[flo]] - starts[uniq[flo]])
            while ml < kn and ml < pn and key[ml] == pkey[ml]:
                ml += 1
        if fhi >= 0:
            pkey = data + starts[uniq[fhi]]
            pn = <size_t>(ends[uniq[fhi]] - starts[uniq[fhi]])
            while mh < kn and mh < pn and key[mh] == pkey[mh]:
                mh += 1
        self.dataptr[x] = FREE_PTR
        if mh > ml:
            memcpy(self.kbuf, key + mh, kn - mh)
            self._append(x, fhi_id, 1, <uint32_t>mh, self.kbuf, <uint32_t>(kn - mh), cats[k], pers[k])
        else:
            memcpy(self.kbuf, key + ml, kn - ml)
            self._append(x, flo_id if ml else 0, 0, <uint32_t>ml, self.kbuf, <uint32_t>(kn - ml), cats[k], pers[k])
        l = self._build(data, starts, ends, uniq, cats, pers, npf, lo, mid, flo, mid, flo_id, x, next_id, &hl)
        r = self._build(data, starts, ends, uniq, cats, pers, npf, mid + 1, hi, mid, fhi, x, fhi_id, next_id, &hr)
        self.nodes[x].left = l
        self.nodes[x].right = r | (<uint32_t>NP_BIT if npf[mid] else 0)
        height[0] = (hl if hl > hr else hr) + 1
        self._set_height(x, height[0])
        return x

    def build_sorted(self, const uint8_t[::1] data, starts, ends, order, categories=0, periods=0):
        """Bulk load an empty tree from keys data[starts[i]:ends[i]] (canonical key form), given
        `order`, their indices in ascending key order (a stable sort: among equal keys the first
        listed wins, as with inserts). Builds a perfectly balanced tree with pre-order ids in
        O(n); raises ValueError if order is not sorted or a key is too long. Returns the number
        of unique keys loaded."""
        cdef int64_t[::1] st = np.ascontiguousarray(starts, dtype=np.int64)
        cdef int64_t[::1] en = np.ascontiguousarray(ends, dtype=np.int64)
        cdef int64_t[::1] od = np.ascontiguousarray(order, dtype=np.int64)
        cdef Py_ssize_t n = od.shape[0], j, m = 0
        cdef uint32_t[::1] cats = np.broadcast_to(np.asarray(categories, dtype=np.uint32), (st.shape[0],)).copy()
        cdef uint32_t[::1] pers = np.broadcast_to(np.asarray(periods, dtype=np.uint32), (st.shape[0],)).copy()
        uniq_a = np.zeros(max(n, 1), dtype=np.int64)
        cdef int64_t[::1] uniq = uniq_a
        cdef int64_t a, b, la, lb, total = 0
        cdef int c = 0, h
        cdef uint32_t next_id = 1
        cdef const uint8_t *base = &data[0] if data.shape[0] else <const uint8_t *>b""
        npf_a = np.zeros(max(n, 1), dtype=np.uint8)
        cdef uint8_t[::1] npf = npf_a
        cdef NPScan scan
        lens_a = np.zeros(MAX_KEY + 1, dtype=np.uint32)
        cdef uint32_t[::1] lens = lens_a
        if self.count != 0:
            raise ValueError("build_sorted needs an empty tree")
        if cats.shape[0] and np.asarray(cats).max() >= 0x80000000:
            raise OverflowError("category ids are below 2^31")
        if en.shape[0] != st.shape[0]:
            raise ValueError("starts and ends differ in length")
        for j in range(n):
            if od[j] < 0 or od[j] >= st.shape[0]:
                raise ValueError("order holds an index out of range")
            a = od[j]
            if st[a] < 0 or en[a] < st[a] or en[a] > data.shape[0]:
                raise ValueError("key bounds outside the data buffer")
            if en[a] - st[a] > MAX_KEY:
                raise ValueError(f"key longer than {MAX_KEY} bytes")
        if n > self.max_ids:
            raise OverflowError(f"the URL tree holds at most {self.max_ids} URLs (28-bit ids)")
        self._own()
        with nogil:
            for j in range(n):
                a = od[j]
                if j > 0:
                    b = od[j - 1]
                    la, lb = en[a] - st[a], en[b] - st[b]
                    c = memcmp(base + st[b], base + st[a], <size_t>(la if la < lb else lb))
                    if c == 0:
                        c = -1 if lb < la else (1 if lb > la else 0)
                    if c > 0:
                        with gil:
                            raise ValueError(f"order is not ascending at position {j}")
                    if c == 0:
                        continue
                uniq[m] = a
                m += 1
                total += en[a] - st[a]
            scan.lens = &lens[0]
            scan.prev = NULL
            scan.prevn = 0
            scan.nl = 0
            for j in range(m):
                a = uniq[j]
                npf[j] = _np_scan(&scan, base + st[a], <size_t>(en[a] - st[a]))
                scan.prev = base + st[a]
            self._grow_slots(<size_t>m + 1)
            self._grow_blob(<size_t>total + 12 * <size_t>m + 64)
            self.n_slots = <size_t>m + 1
            self.root = self._build(base, &st[0] if st.shape[0] else NULL, &en[0] if en.shape[0] else NULL,
                                    &uniq[0], &cats[0] if cats.shape[0] else NULL,
                                    &pers[0] if pers.shape[0] else NULL, &npf[0], 0, m, -1, -1, 0, 0, &next_id, &h)
            self.count = <size_t>m
        return m

    cdef size_t _count_np(self) noexcept nogil:
        cdef size_t i, c = 0
        for i in range(1, self.n_slots):
            if self.dataptr[i] != FREE_PTR and self._np(<uint32_t>i):
                c += 1
        return c

    def no_prefix_flag(self, uint32_t uid):
        """The no-prefix flag of a live id (True: no entry is a proper prefix of its key)."""
        if uid == 0 or uid >= self.n_slots or self.dataptr[uid] == FREE_PTR:
            raise KeyError(uid)
        return bool(self._np(uid))

    def optimize(self):
        """Renumber ids in pre-order and rewrite CompressedURL in that order, without dead bytes.

        A subtree then occupies one contiguous range of ids and records, so the lower levels of a
        descent stay within a few pages, and most RefIDs (zig-zag differences) take one byte.
        Ids change: returns a uint32 array mapping each old id to its new one (0: was free).
        Also recomputes every no-prefix flag exactly (deletes leave some at 0 for nothing).
        urlfilter's manager calls this before saving a snapshot; its store never keeps tree ids.
        """
        self._own()
        mapping = np.zeros(self.n_slots, dtype=np.uint32)
        cdef uint32_t[::1] new_of = mapping
        with nogil:
            self._optimize(&new_of[0])
        return mapping

    def compact(self):
        """Rewrite CompressedURL without dead records."""
        self._own()
        self._compact()

    def stats(self):
        """Sizes in bytes. `paper_bytes` counts the three arrays as used (the paper's
        definition); `allocated_bytes` everything this tree holds in memory, slack included."""
        used_arrays = (self.n_slots) * (sizeof(TreeNode) + 4)
        return {
            "urls": self.count,
            "ids": self.n_slots - 1,
            "height": self._height(self.root),
            "no_prefix_flags": self._count_np(),
            "tree_node_bytes": self.n_slots * sizeof(TreeNode),
            "data_ptr_bytes": self.n_slots * 4,
            "compressed_url_bytes": self.blob_used - self.dead,
            "dead_bytes": self.dead,
            "paper_bytes": used_arrays + self.blob_used - self.dead,
            "allocated_bytes": (self.n_slots if self.mapped else self.cap_slots) * (sizeof(TreeNode) + 4)
                               + (self.blob_used if self.mapped else self.blob_cap) + 2 * (MAX_KEY + 8) + self.qcap,
            "mapped": bool(self.mapped),
        }

    # ---- snapshot -------------------------------------------------------------------------
    def save(self, path, uint64_t tag=0):
        """Write the three arrays to one file (compacted), atomically (write + rename).

        tag is a number stored in the header for the caller (urlfilter stores the store's change
        sequence number there); UrlTree.load() returns it as .tag."""
        if not self.mapped and self.dead:
            self._compact()
        if self.mapped and self.dead:   # a mapped tree with dead bytes cannot exist (mapped files are compact)
            raise TreeCorrupt("dead bytes in a mapped tree")
        cdef const uint8_t[:] nodes = <const uint8_t[:self.n_slots * sizeof(TreeNode)]>(<const uint8_t *>self.nodes)
        cdef const uint8_t[:] ptrs = <const uint8_t[:self.n_slots * 4]>(<const uint8_t *>self.dataptr)
        blob = <const uint8_t[:self.blob_used]>(<const uint8_t *>self.blob) if self.blob_used else b""
        fields = (SNAPSHOT_MAGIC, self.n_slots, self.count, self.blob_used, 0, self.root,
                  self.free_head, tag)
        crc = zlib.crc32(blob, zlib.crc32(ptrs, zlib.crc32(nodes, zlib.crc32(HEADER.pack(*fields, 0)))))
        tmp = os.fspath(path) + ".tmp"
        with open(tmp, "wb") as f:
            f.write(HEADER.pack(*fields, crc))
            f.write(nodes)
            f.write(ptrs)
            f.write(blob)
        os.replace(tmp, path)

    @classmethod
    def load(cls, path, bint verify=True):
        """Map a snapshot read-only (shared by every process that loads it).

        verify: check the CRC-32 the header carries over the header and the three arrays
        (~1 ms per 6 MB, reading the file once) so that a damaged snapshot is refused with a
        ValueError instead of letting a match read outside the arrays; verify=False maps it in
        O(1) (only for a file this process just checked or wrote)."""
        cdef UrlTree t = cls.__new__(cls)
        cdef const uint8_t[::1] v
        with open(path, "rb") as f:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        if len(mm) < HEADER.size:
            mm.close()
            raise ValueError(f"{path}: not a URL tree snapshot (too short)")
        magic, n_slots, count, blob_used, dead, root, free_head, tag, crc = HEADER.unpack_from(mm, 0)
        need = HEADER.size + n_slots * (sizeof(TreeNode) + 4) + blob_used
        if magic != SNAPSHOT_MAGIC or len(mm) != need or n_slots < 1 or root >= n_slots or dead:
            mm.close()
            if magic[:5] == SNAPSHOT_MAGIC[:5] and magic != SNAPSHOT_MAGIC:
                raise ValueError(f"{path}: URL tree snapshot format {magic[5:].decode('ascii', 'replace')}, "
                                 f"this version reads {SNAPSHOT_MAGIC[5:].decode()}: rebuild it")
            raise ValueError(f"{path}: not a URL tree snapshot or truncated")
        if verify:
            # the file's own header bytes with the crc32 field as zeros (pad bytes included), then
            # the body: what save() summed
            whole = memoryview(mm)
            got = zlib.crc32(whole[HEADER.size - 4:],
                             zlib.crc32(b"\0\0\0\0", zlib.crc32(whole[:HEADER.size - 8])))
            whole.release()
            if got != crc:
                mm.close()
                raise ValueError(f"{path}: URL tree snapshot damaged (CRC-32 {got:08x}, header says {crc:08x})")
        v = mm
        free(t.nodes)
        free(t.dataptr)
        free(t.blob)
        t.nodes = <TreeNode *><uint8_t *>(&v[HEADER.size])
        t.dataptr = <uint32_t *><uint8_t *>(&v[HEADER.size + n_slots * sizeof(TreeNode)])
        t.blob = <uint8_t *>(&v[HEADER.size + n_slots * (sizeof(TreeNode) + 4)]) if blob_used else \
            <uint8_t *>(&v[0])
        t.mapped = True
        t._mapping = mm
        t._view = v
        t.n_slots, t.cap_slots, t.count = n_slots, n_slots, count
        t.blob_used, t.blob_cap, t.dead = blob_used, blob_used, 0
        t.root, t.free_head = root, free_head
        t.tag = tag
        return t


cdef inline bytes _qbytes(url):
    """url as a bytes object (str: UTF-8 with surrogateescape, as _as_bytes)."""
    if type(url) is bytes:
        return <bytes>url
    if isinstance(url, str):
        return (<str>url).encode("utf-8", "surrogateescape")
    return bytes(url)


cdef const uint8_t[::1] _as_bytes(url):
    if isinstance(url, str):
        return url.encode("utf-8", "surrogateescape")
    return url


def _canon_error(code, url):
    from webtap._ext.canon import CODES     # the one table of the canonicaliser's error names
    e = ValueError(f"no canonical form ({CODES.get(code, code)}): {str(url)[:200]!r}")
    e.code = code
    return e


def key_to_url(key):
    """Canonical URL (str) of a key (bytes): the host's labels back in DNS order."""
    cdef bytearray b = bytearray(key)
    cdef uint8_t *p = b
    webtap_key_flip(p, len(b))
    return b.decode("ascii", "surrogateescape")


# the URL store of issue 35 (static base + this tree as its delta): its own file
include "urlstore.pxi"
