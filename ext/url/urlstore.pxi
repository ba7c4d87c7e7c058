# The URL store of issue 35: a static base (ext/url/urlbase.h: the sorted keys in front-coded
# blocks, a sampled index and a static symbol code) with the compressed AVL tree of this module
# as its dynamic delta. Included by ext/url/avl.pyx, so that its nogil loops call the tree's C
# methods directly.
#
# * Static runs, log-structured (as an LSM tree): runs[0] is the base; runs[1..] are delta runs,
#   the same encoding, built when the tree fills (flush(): at max(4096, live / 64) keys, up to
#   65536) and merged by size tiers (the newest RUN_FANOUT runs when their sizes are within 2x
#   of each other; into the base when run 1 reaches the base's size), so a delta of 10 %
#   costs ~ the base's bytes per key, and each key is rewritten O(log) times, not the base per
#   merge. Each delta run has a key filter (ext/url/urlbase.h) that skips it for most queries.
# * A key lives in exactly one place: a live run key (its bit not in that run's tombstones) or
#   the delta tree. insert: a key live anywhere is a duplicate; anything else goes to the tree
#   (a deleted run key too: runs never change). delete: from the tree, else a tombstone bit.
# * Lookups ask all: exact = the tree's or a live run's; prefix = the longest of the tree's and
#   each run's answer (ext/url/urlbase.h wt_base_lpm, which skips dead keys).
# * Ids: key i of run r is roff[r] + i + 1 (the base's: i + 1); tree id x is n_static + x. A
#   flush or merge renumbers (as optimize() does for the tree; the SQLite store never keeps ids).
# * merge() folds the runs, the tree and the tombstones into a new base (sequential decode, a
#   k-way merge, encode: O(n)); save() merges first, so a snapshot file is a base image alone,
#   mapped read-only by load().
from libc.string cimport memmove

cdef extern from "urlbase.h" nogil:
    ctypedef struct WtBaseHeader:
        char magic[8]
        uint64_t n
        uint64_t blob_bytes
        uint64_t tag
        uint32_t block
        uint32_t n_blocks
        uint32_t pal_n
        uint32_t pal_bits
        uint32_t max_key
        uint32_t crc32
        uint64_t raw_bytes
    ctypedef struct WtBase:
        const WtBaseHeader *h
        const uint8_t *sym
        const uint8_t *symlen
        const uint32_t *palette
        uint64_t n
        uint32_t block, n_blocks, pal_bits, max_key
        size_t image_bytes
        const uint64_t *top
        uint32_t top_n
        uint32_t ties_n
    ctypedef struct WtBaseCoder:
        pass
    int wt_base_layout(uint64_t n, uint32_t block, uint32_t pal_n, uint32_t pal_bits,
                       uint64_t blob_bytes, size_t *off)
    uint64_t wt_base_head(const uint8_t *k, size_t n)
    uint64_t wt_base_head2(const uint8_t *k, size_t n)
    int64_t wt_base_lpm(const WtBase *b, const uint64_t *tomb, const uint8_t *q, size_t qn,
                        int exact_only, size_t *len)
    ptrdiff_t wt_base_key(const WtBase *b, uint64_t i, uint8_t *out, size_t cap)
    uint64_t wt_base_dump(const WtBase *b, const uint64_t *tomb, uint8_t *data, int64_t *offs,
                          uint64_t *idx, uint8_t *kbuf)
    const char *wt_base_open(WtBase *b, const uint8_t *mem, size_t size, uint8_t *kbuf,
                             uint8_t *kbuf2, uint32_t *lens)
    uint32_t wt_base_payload_index(const WtBase *b, uint64_t i)
    void wt_base_coder_init(WtBaseCoder *cd, const uint8_t *sym, const uint8_t *symlen, int nsym)
    size_t wt_base_encode(const WtBaseCoder *cd, const uint8_t *s, size_t n, uint8_t *out)
    uint8_t *wt_base_put_varint(uint8_t *p, uint32_t v)
    int WT_BASE_MAX_KEY
    int WT_BASE_HEAD
    int WT_BASE_IDX
    int WT_PSIG_MAX
    uint64_t wt_key_sig(const uint8_t *k, size_t n)
    int wt_pfx_sigs(const uint8_t *q, size_t qn, size_t above, uint64_t *sig)
    void wt_filt_add(uint64_t *f, uint64_t nbits, const uint8_t *k, size_t n)
    uint64_t wt_filts_maybe(const uint64_t *const *f, const uint64_t *nbits, int nf,
                            const uint64_t *sig, int ns)
    int wt_base_view(WtBase *b, const uint8_t *mem, size_t size)
    uint32_t wt_base_top_count(uint32_t n_blocks)
    void wt_base_top_fill(const WtBase *b, uint64_t *top)
    size_t wt_base_ties_build(const WtBase *b, uint64_t *w, uint32_t *runs, uint8_t *kbuf,
                              uint8_t *kbuf2)
    void wt_base_ties_attach(WtBase *b, const uint64_t *w)
    int WT_DFILT_BITS

BASE_MAGIC = b"WTURLB02"
# the index entry of a block (ext/url/urlbase.h): its head (first 16 key bytes, two big-endian
# integers) and its record offset, packed
IDX_DTYPE = np.dtype([("h1", "<u8"), ("h2", "<u8"), ("off", "<u4")])
BASE_HEADER = struct.Struct("<8sQQQIIIIIIQ")       # WtBaseHeader (ext/url/urlbase.h)
BASE_BLOCK = 32                                     # keys per front-coded block (docs/urlfilter.md)
cdef uint64_t MAX_BASE = 0x7FFFFFFF - MAX_ID        # ids n_base + tree id must fit int32


def sizeof_base_header():
    return sizeof(WtBaseHeader)


def key_signature(const uint8_t[::1] key):
    """The delta filters' signature of a whole key (ext/url/urlbase.h wt_key_sig); for tests."""
    return wt_key_sig(&key[0] if key.shape[0] else <const uint8_t *>b"", key.shape[0])


def prefix_signatures(const uint8_t[::1] key, size_t above=0):
    """The signatures a prefix lookup of key probes (wt_pfx_sigs: key[:b] for each component
    boundary b > above, then key), or None when key has too many such boundaries to filter; for
    tests."""
    cdef uint64_t sigs[64]
    if above >= <size_t>key.shape[0] and key.shape[0]:
        raise ValueError("above must be below the key's length")
    cdef int ns = wt_pfx_sigs(&key[0] if key.shape[0] else <const uint8_t *>b"", key.shape[0], above, sigs)
    return None if ns < 0 else [sigs[i] for i in range(ns)]


def build_base(const uint8_t[::1] data, starts, ends, order, categories, periods,
               const uint8_t[::1] sym, const uint8_t[::1] symlen, uint32_t block=BASE_BLOCK,
               uint64_t tag=0):
    """The image of a base (ext/url/urlbase.h) holding the keys data[starts[o]:ends[o]] for o in
    order (ascending, none empty; ValueError otherwise; of equal keys the first listed is kept,
    as UrlTree.build_sorted does) with payloads
    categories[o], periods[o]; sym/symlen: the static code (256 x 8 bytes, 256 lengths; code 255
    unused). Returns a bytearray (8-byte aligned in a NumPy buffer)."""
    cdef int64_t[::1] st = np.ascontiguousarray(starts, dtype=np.int64)
    cdef int64_t[::1] en = np.ascontiguousarray(ends, dtype=np.int64)
    cdef int64_t[::1] od0 = np.ascontiguousarray(order, dtype=np.int64)
    cdef Py_ssize_t n = od0.shape[0], i, m = 0
    cdef size_t off[8]
    cdef int64_t a, b_, la, lb
    cdef int c0
    if en.shape[0] != st.shape[0]:
        raise ValueError("starts and ends differ in length")
    for i in range(n):
        a = od0[i]
        if a < 0 or a >= st.shape[0]:
            raise ValueError("order holds an index out of range")
        if st[a] < 0 or en[a] <= st[a] or en[a] > data.shape[0]:
            raise ValueError(f"key {a}: empty or outside the data")
    # among equal keys the first listed wins (a stable sort gives the first inserted, as the tree)
    uniq_a = np.zeros(n, np.int64)
    cdef int64_t[::1] od = uniq_a
    cdef const uint8_t *dp0 = &data[0] if data.shape[0] else <const uint8_t *>b""
    for i in range(n):
        a = od0[i]
        if i > 0:
            b_ = od0[i - 1]
            la, lb = en[a] - st[a], en[b_] - st[b_]
            c0 = memcmp(dp0 + st[b_], dp0 + st[a], <size_t>(la if la < lb else lb))
            if c0 == 0:
                c0 = -1 if lb < la else (1 if lb > la else 0)
            if c0 > 0:
                raise ValueError(f"order is not ascending at position {i}")
            if c0 == 0:
                continue
        od[m] = a
        m += 1
    n = m
    od = uniq_a[:m]
    cat_a = np.ascontiguousarray(np.broadcast_to(np.asarray(categories, np.uint32), (len(st),)))[uniq_a[:m]] if n else np.zeros(0, np.uint32)
    per_a = np.ascontiguousarray(np.broadcast_to(np.asarray(periods, np.uint32), (len(st),)))[uniq_a[:m]] if n else np.zeros(0, np.uint32)
    if sym.shape[0] != 256 * 8 or symlen.shape[0] != 256 or symlen[255] != 0:
        raise ValueError("symbol table: 256 x 8 bytes and 256 lengths, code 255 unused")
    if block < 1 or block > 4096:
        raise ValueError("block size 1..4096")
    if <uint64_t>n > MAX_BASE:
        raise OverflowError(f"more than {MAX_BASE} keys")
    pairs = (cat_a.astype(np.uint64) << np.uint64(32)) | per_a.astype(np.uint64)
    pal, inv = np.unique(pairs, return_inverse=True)
    if n == 0:
        pal = np.zeros(0, np.uint64)
    cdef uint32_t pal_n = len(pal), pal_bits = 0
    while pal_n > 1 and (1 << pal_bits) < pal_n:
        pal_bits += 1
    cdef uint32_t[::1] pidx = np.ascontiguousarray(inv, dtype=np.uint32).reshape(-1) if n else np.zeros(0, np.uint32)
    cdef uint32_t nb = <uint32_t>((n + block - 1) // block) if n else 0
    heads_a = np.zeros(2 * nb, np.uint64)
    offs_a = np.zeros(nb + 1, np.uint32)
    payload_a = np.zeros((n * pal_bits + 63) // 64 + 1, np.uint64)
    cdef uint64_t[::1] heads = heads_a, payload = payload_a
    cdef uint32_t[::1] offs = offs_a
    # worst case per key: two varints and two code bytes per key byte
    cdef int64_t total = 0, maxlen = 0, kn
    for i in range(n):
        kn = en[od[i]] - st[od[i]]
        if kn > WT_BASE_MAX_KEY:
            raise ValueError(f"key {i}: longer than {WT_BASE_MAX_KEY} bytes")
        total += kn
        if kn > maxlen:
            maxlen = kn
    rec_a = np.zeros(2 * total + 10 * n + 16, np.uint8)
    cdef uint8_t[::1] rec = rec_a
    cdef WtBaseCoder *cd = <WtBaseCoder *>wt_alloc(sizeof(WtBaseCoder))
    cdef int nsym = 255
    cdef uint32_t *lens = NULL
    cdef uint32_t nl = 0, lcp, j, v
    cdef const uint8_t *k
    cdef const uint8_t *prev = NULL
    cdef size_t prevn = 0, o = 0, nc
    cdef uint8_t *p
    cdef bint bad = False
    cdef uint64_t bit, w, s_
    cdef const uint8_t *dp = &data[0] if data.shape[0] else <const uint8_t *>b""
    try:
        wt_base_coder_init(cd, &sym[0], &symlen[0], nsym)
        lens = <uint32_t *>wt_alloc((maxlen + 2) * sizeof(uint32_t))
        with nogil:
            for i in range(n):
                k = dp + st[od[i]]
                kn = en[od[i]] - st[od[i]]
                lcp = 0
                while prev != NULL and lcp < <uint32_t>kn and lcp < prevn and k[lcp] == prev[lcp]:
                    lcp += 1
                if prev != NULL and not (lcp < <uint32_t>kn and (lcp == prevn or k[lcp] > prev[lcp])):
                    bad = True
                    break
                while nl > 0 and lens[nl - 1] > lcp:
                    nl -= 1
                v = 1 if nl == 0 else 0
                lens[nl] = <uint32_t>kn
                nl += 1
                if i % block == 0:
                    heads[2 * (i // block)] = wt_base_head(k, kn)
                    heads[2 * (i // block) + 1] = wt_base_head2(k, kn)
                    offs[i // block] = <uint32_t>o
                    lcp = <uint32_t>kn if kn < WT_BASE_HEAD else WT_BASE_HEAD   # the head holds these
                p = &rec[o]
                p = wt_base_put_varint(p, (lcp << 1) | v)
                nc = wt_base_encode(cd, k + lcp, kn - lcp, p + 5)
                memmove(wt_base_put_varint(p, <uint32_t>nc), p + 5, nc)
                p = wt_base_put_varint(p, <uint32_t>nc) + nc
                o = p - &rec[0]
                if pal_bits:
                    bit = <uint64_t>i * pal_bits
                    w = bit >> 6
                    s_ = bit & 63
                    payload[w] |= (<uint64_t>pidx[i]) << s_
                    if s_ + pal_bits > 64:
                        payload[w + 1] |= (<uint64_t>pidx[i]) >> (64 - s_)
                prev = k
                prevn = kn
            if nb:
                offs[nb] = <uint32_t>o
    finally:
        free(cd)
        free(lens)
    if bad:
        raise ValueError("keys not ascending (or duplicates)")
    if o > 0xFFFFFFF0U:
        raise OverflowError("record bytes above 4 GiB")
    if wt_base_layout(n, block, pal_n, pal_bits, o, off) != 0:
        raise OverflowError("base counts out of range")
    img_a = np.zeros(off[7] // 8, np.uint64)
    img = img_a.view(np.uint8)
    BASE_HEADER.pack_into(img, 0, BASE_MAGIC, n, o, tag, block, nb, pal_n, pal_bits, maxlen if n else 0, 0, total)
    img[off[0]:off[0] + 2048] = np.frombuffer(sym, np.uint8)
    img[off[1]:off[1] + 256] = np.frombuffer(symlen, np.uint8)
    palv = np.zeros(2 * pal_n, np.uint32)
    palv[0::2] = (pal >> np.uint64(32)).astype(np.uint32)
    palv[1::2] = (pal & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    img[off[2]:off[2] + 8 * pal_n] = palv.view(np.uint8)
    ix = np.zeros(nb + 1, IDX_DTYPE)
    ix["h1"][:nb] = heads_a[0::2]
    ix["h2"][:nb] = heads_a[1::2]
    ix["h1"][nb] = ix["h2"][nb] = np.uint64(0xFFFFFFFFFFFFFFFF)
    ix["off"] = offs_a
    img[off[3]:off[4]] = ix.view(np.uint8)
    pw = (n * pal_bits + 63) // 64
    img[off[5]:off[5] + 8 * pw] = payload_a[:pw].view(np.uint8)
    img[off[6]:off[6] + o] = rec_a[:o]
    crc = zlib.crc32(img)
    BASE_HEADER.pack_into(img, 0, BASE_MAGIC, n, o, tag, block, nb, pal_n, pal_bits, maxlen if n else 0, crc, total)
    return img


cdef inline void _set_bit(uint64_t *a, uint64_t i) noexcept nogil:
    a[i >> 6] |= (<uint64_t>1) << (i & 63)


cdef enum:
    MAX_RUNS = 32              # static runs (the base + delta runs); the merge policy keeps ~log2
    RUN_FILT_BITS_PER_KEY = 16 # key filter of a delta run: bits per key
    TREE_CAP_MIN = 4096        # the delta tree is flushed into a run at max(this, live / 64) keys
    TREE_CAP_MAX = 65536

if WT_PSIG_MAX != 64:                                # _prefix's signature buffer
    raise ImportError("urlbase.h WT_PSIG_MAX changed: resize UrlStore._prefix's sigs")
RUN_FANOUT = 4                 # merge the newest RUN_FANOUT runs of one size tier into one (UrlStore._compact)


cdef class UrlStore:
    """Static base + delta runs + compressed AVL delta (see the top of ext/url/urlstore.pxi).
    Ids: > 0 hit; the *_key methods take canonical key form, the others canonicalise."""
    cdef readonly UrlTree delta
    cdef WtBase runs[MAX_RUNS]    # runs[0] is the base (maybe a read-only mapping)
    cdef uint64_t *tombs[MAX_RUNS]   # deleted keys of run r (bit i: key i), NULL until its first delete
    cdef uint64_t dead[MAX_RUNS]
    cdef uint64_t *filt[MAX_RUNS]    # host filter of run r >= 1 (ext/url/urlbase.h), fbits[r] bits
    cdef uint64_t fbits[MAX_RUNS]
    cdef uint64_t roff[MAX_RUNS + 1] # ids of run r: roff[r] + 1 .. roff[r + 1]; tree x: roff[nr] + x
    cdef int nr
    cdef list _images             # the runs' images (NumPy arrays; the base may be an mmap)
    cdef list _tops               # the runs' sampled first levels and tie runs (NumPy uint64, _attach_top)
    cdef readonly bint mapped
    cdef readonly uint64_t n_dead
    cdef uint8_t *kbuf            # scratch for decoded keys (MAX_KEY + 16)
    cdef uint64_t *dfilt          # host filter of the delta tree, NULL while it is empty
    cdef public uint64_t tag
    cdef public uint32_t tree_cap    # 0: automatic (TREE_CAP_MIN..TREE_CAP_MAX)
    cdef public bint auto_merge      # flush the tree into runs and merge them as it fills
    cdef readonly uint64_t n_flushes, n_run_merges, merged_keys
    cdef object _pending          # insert_batch's ids so far, renumbered by flush() / _compact()
    cdef object _src_ix           # _sources(): the live key indices of each run it read
    cdef object _tree_ids         # _sources(): the tree ids in key order

    def __cinit__(self):
        self.delta = UrlTree()
        self.kbuf = <uint8_t *>wt_alloc(MAX_KEY + 16)
        memset(&self.runs[0], 0, sizeof(self.runs))
        memset(&self.tombs[0], 0, sizeof(self.tombs))
        memset(&self.filt[0], 0, sizeof(self.filt))
        memset(&self.dead[0], 0, sizeof(self.dead))
        memset(&self.roff[0], 0, sizeof(self.roff))
        self.nr = 1
        self._images = [None]
        self._tops = [None]
        self.tag = 0
        self.auto_merge = True

    def __init__(self):
        self._set_image(build_base(np.zeros(0, np.uint8), [], [], [], 0, 0, _EMPTY_SYM, _EMPTY_LEN), False)

    def __dealloc__(self):
        cdef int r
        for r in range(MAX_RUNS):
            free(self.tombs[r])
            free(self.filt[r])
        free(self.kbuf)
        free(self.dfilt)

    cdef _open(self, img, bint mapped, WtBase *out):
        cdef const uint8_t[::1] v = img
        cdef uint32_t *lens
        cdef uint8_t *k2
        cdef WtBase b
        cdef const char *err
        if v.shape[0] < sizeof(WtBaseHeader):
            raise ValueError("not a URL base (too short)")
        lens = <uint32_t *>wt_alloc((WT_BASE_MAX_KEY + 2) * sizeof(uint32_t))
        k2 = <uint8_t *>wt_alloc(WT_BASE_MAX_KEY + 16)
        try:
            with nogil:
                err = wt_base_open(&b, &v[0], v.shape[0], self.kbuf, k2, lens)
        finally:
            free(lens)
            free(k2)
        if err != NULL:
            raise ValueError(f"URL base corrupt: {err.decode()}")
        if b.n > MAX_BASE:
            raise ValueError("URL base corrupt: too many keys")
        out[0] = b

    cdef _clear_runs(self):
        cdef int r
        for r in range(MAX_RUNS):
            free(self.tombs[r])
            self.tombs[r] = NULL
            free(self.filt[r])
            self.filt[r] = NULL
            self.dead[r] = 0
        memset(&self.runs[0], 0, sizeof(self.runs))
        self.n_dead = 0

    cdef _set_image(self, img, bint mapped, bint check=True):
        """The store becomes this one image as its base, no delta runs; the tree is left to the
        caller. check: the whole structure (wt_base_open: an image from outside); else an image
        this process built (build_base), whose section pointers are taken as they are."""
        cdef WtBase b
        cdef const uint8_t[::1] v
        if check:
            self._open(img, mapped, &b)
        else:
            v = img
            if wt_base_view(&b, &v[0], v.shape[0]) != 0:
                raise ValueError("URL base: bad image")
        self._clear_runs()
        self.runs[0] = b
        self.nr = 1
        self._images = [img]
        self._tops = [None]
        self._attach_top(0)
        self.mapped = mapped
        self.tag = b.h.tag
        self._reoff()

    cdef _attach_top(self, int r):
        """Run r's sampled first level (urlbase.h wt_base_top_fill) and its tie runs
        (wt_base_ties_build), one array held in self._tops[r]: the top's 2 x top_n words, then
        the tie table's."""
        cdef uint32_t n = wt_base_top_count(self.runs[r].n_blocks), runs = 0
        cdef size_t nt
        cdef uint64_t[::1] t
        cdef uint8_t *k2
        self.runs[r].top = NULL
        self.runs[r].top_n = 0
        self.runs[r].ties_n = 0
        if n == 0:
            self._tops[r] = None
            return
        k2 = <uint8_t *>wt_alloc(MAX_KEY + 16)
        try:
            with nogil:
                nt = wt_base_ties_build(&self.runs[r], NULL, &runs, self.kbuf, k2)
            a = np.zeros(2 * n + nt, np.uint64)
            t = a
            with nogil:
                wt_base_top_fill(&self.runs[r], &t[0])
                if nt:
                    wt_base_ties_build(&self.runs[r], &t[2 * n], &runs, self.kbuf, k2)
        finally:
            free(k2)
        self._tops[r] = a
        self.runs[r].top = &t[0]
        self.runs[r].top_n = n
        if nt:
            wt_base_ties_attach(&self.runs[r], &t[2 * n])

    cdef void _reoff(self) noexcept:
        cdef int r
        self.roff[0] = 0
        for r in range(self.nr):
            self.roff[r + 1] = self.roff[r] + self.runs[r].n

    cdef inline uint64_t _nst(self) noexcept nogil:
        return self.roff[self.nr]

    cdef inline uint64_t _live(self, int r) noexcept nogil:
        return self.runs[r].n - self.dead[r]

    # ---- the C core -----------------------------------------------------------------------
    cdef int64_t _find(self, const uint8_t *q, size_t qn) noexcept nogil:
        cdef uint32_t x = 0
        cdef size_t ln
        cdef int64_t i
        cdef int r
        cdef uint64_t sig
        if self.nr > 1 or self.delta.count:
            i = self._find_delta(q, qn, wt_key_sig(q, qn))   # an exact lookup: q's signature alone
            if i:
                return i
        i = wt_base_lpm(&self.runs[0], self.tombs[0], q, qn, 1, &ln)
        return i + 1 if i >= 0 else 0

    cdef inline int _delta_filters(self, const uint64_t **fs, uint64_t *fb) noexcept nogil:
        """The delta's key filters for wt_filts_maybe: run r's at r - 1 (r = 1 .. nr - 1), then
        the tree's when it has one; their count."""
        cdef int r, nf = 0
        for r in range(1, self.nr):
            fs[nf] = self.filt[r]
            fb[nf] = self.fbits[r]
            nf += 1
        if self.dfilt != NULL:
            fs[nf] = self.dfilt
            fb[nf] = WT_DFILT_BITS
            nf += 1
        return nf

    cdef int64_t _find_delta(self, const uint8_t *q, size_t qn, uint64_t sig) noexcept nogil:
        """q's id if the delta (the tree or a run after the base) holds q itself live, else 0;
        each part is searched only when its key filter may hold sig (wt_key_sig of q)."""
        cdef uint32_t x = 0
        cdef size_t ln
        cdef int64_t i
        cdef int r, nf
        cdef const uint64_t *fs[MAX_RUNS]
        cdef uint64_t fb[MAX_RUNS]
        cdef uint64_t hit
        nf = self._delta_filters(fs, fb)
        hit = wt_filts_maybe(fs, fb, nf, &sig, 1)
        if self.delta.count and (self.dfilt == NULL or (hit >> (nf - 1)) & 1):
            x = self.delta._search(self.delta.root, q, qn, 0, 0)
            if x:
                return <int64_t>self._nst() + x
        for r in range(self.nr - 1, 0, -1):
            if (hit >> (r - 1)) & 1:
                i = wt_base_lpm(&self.runs[r], self.tombs[r], q, qn, 1, &ln)
                if i >= 0:
                    return <int64_t>self.roff[r] + i + 1
        return 0

    cdef int64_t _prefix(self, const uint8_t *q, size_t qn, uint8_t *buf) noexcept nogil:
        """Longest live entry equal to q or a prefix of q on a boundary: the longest of each
        run's answer and the tree's (a key lives in one place only, so lengths never tie)."""
        cdef uint32_t x = 0
        cdef size_t ln = 0, best_len = 0
        cdef Rec rec
        cdef int64_t i, best = 0
        cdef int r, ns
        cdef uint64_t sigs[64]                          # WT_PSIG_MAX
        cdef bint asked = False
        cdef int nf
        cdef const uint64_t *fs[MAX_RUNS]
        cdef uint64_t fb[MAX_RUNS]
        cdef uint64_t hit
        if self.nr > 1 or self.delta.count:
            # q itself in the delta is the longest answer there can be (a key lives in one
            # place only): found first, it spares the base's search, which would otherwise
            # come first for the queries the delta answers (the slowest 1 % of a store with a
            # 10 % delta were mostly those, docs/urlfilter.md)
            best = self._find_delta(q, qn, wt_key_sig(q, qn))
            if best:
                return best
            asked = True
        i = wt_base_lpm(&self.runs[0], self.tombs[0], q, qn, 0, &ln)
        if self.nr == 1 and self.delta.count == 0:      # a mapped snapshot: the base alone
            return i + 1 if i >= 0 else 0
        if i >= 0:
            best, best_len = i + 1, ln
            if ln == qn:                                # q itself: no delta entry is longer
                return best
        # q's candidate entries longer than the base's answer, once for all filters
        ns = wt_pfx_sigs(q, qn, best_len, sigs)
        if asked and ns > 0:
            ns -= 1        # the last is q's own signature: the delta was asked for q above
        nf = self._delta_filters(fs, fb)
        hit = wt_filts_maybe(fs, fb, nf, sigs, ns)
        for r in range(1, self.nr):
            if (hit >> (r - 1)) & 1:
                i = wt_base_lpm(&self.runs[r], self.tombs[r], q, qn, 0, &ln)
                if i >= 0 and ln > best_len:
                    best, best_len = <int64_t>self.roff[r] + i + 1, ln
                    if ln == qn:
                        return best
        if self.delta.count and (self.dfilt == NULL or (hit >> (nf - 1)) & 1):
            x = self.delta._prefix(q, qn)
            if x:
                _read_rec(self.delta.blob + self.delta.dataptr[x], x, &rec)   # key length = cPrefix + DiffURL
                if <size_t>(rec.cp + rec.dlen) > best_len:
                    best = <int64_t>self._nst() + x
        return best

    cdef int _insert(self, const uint8_t *k, size_t kn, uint32_t cat, uint32_t period, int64_t *hit) except -2 nogil:
        """1 inserted, 0 present (hit = its id), TREE_TOO_LONG; OverflowError when the delta's
        ids are used up (2^28 - 1: merge() first)."""
        cdef uint32_t x = 0
        cdef int64_t i
        cdef int rc
        if kn > MAX_KEY:
            return TREE_TOO_LONG
        i = self._find(k, kn)
        if i > 0:
            hit[0] = i
            return 0
        if self.dfilt == NULL:
            self.dfilt = <uint64_t *>wt_alloc(WT_DFILT_BITS // 8)
            memset(self.dfilt, 0, WT_DFILT_BITS // 8)
        rc = self.delta._insert_key(k, kn, cat, period, &x)
        if rc == TREE_TOO_LONG:
            return rc
        wt_filt_add(self.dfilt, WT_DFILT_BITS, k, kn)
        hit[0] = <int64_t>self._nst() + x
        return rc

    cdef int64_t _delete(self, const uint8_t *k, size_t kn) except -1 nogil:
        cdef uint32_t x = 0
        cdef int64_t i
        cdef size_t ln
        cdef int r
        if self.delta.count:
            x = self.delta._delete_key(k, kn)
            if x:
                return <int64_t>self._nst() + x
        for r in range(self.nr):
            if self.runs[r].n == 0:
                continue
            i = wt_base_lpm(&self.runs[r], self.tombs[r], k, kn, 1, &ln)
            if i < 0:
                continue
            if self.tombs[r] == NULL:
                self.tombs[r] = <uint64_t *>wt_alloc(((self.runs[r].n + 63) // 64) * 8 + 8)
                memset(self.tombs[r], 0, ((self.runs[r].n + 63) // 64) * 8 + 8)
            _set_bit(self.tombs[r], <uint64_t>i)
            self.dead[r] += 1
            self.n_dead += 1
            return <int64_t>self.roff[r] + i + 1
        return 0

    cdef inline int _locate(self, int64_t uid, int64_t *idx) noexcept nogil:
        """The run holding live static id uid (idx: its key index there), else -1."""
        cdef int r
        cdef int64_t i
        if uid <= 0 or uid > <int64_t>self._nst():
            return -1
        for r in range(self.nr):
            if uid <= <int64_t>self.roff[r + 1]:
                i = uid - 1 - <int64_t>self.roff[r]
                if self.tombs[r] != NULL and (self.tombs[r][i >> 6] >> (i & 63)) & 1:
                    return -1
                idx[0] = i
                return r
        return -1

    cdef inline bint _base_id(self, int64_t uid) noexcept nogil:
        cdef int64_t i
        return self._locate(uid, &i) >= 0

    cdef uint32_t _cap(self) noexcept nogil:
        cdef uint64_t c
        if self.tree_cap:
            return self.tree_cap
        c = (self._nst() - self.n_dead) // 64
        return <uint32_t>(TREE_CAP_MIN if c < TREE_CAP_MIN else (TREE_CAP_MAX if c > TREE_CAP_MAX else c))

    cdef inline bint _full(self) noexcept nogil:
        return self.auto_merge and self.delta.count >= self._cap()

    # ---- Python API (the UrlTree methods the manager, analyzer and tests use) -------------
    def __len__(self):
        return self._nst() - self.n_dead + self.delta.count

    @property
    def n_base(self):
        return self.runs[0].n

    @property
    def n_static(self):
        """Keys in the static runs (the base and the delta runs), dead ones included: tree
        ids start above it."""
        return self._nst()

    @property
    def n_runs(self):
        return self.nr

    @property
    def height(self):
        """Height of the delta tree (the runs have none: blocks and a sorted index)."""
        return self.delta.height

    def insert_key(self, const uint8_t[::1] key, uint32_t category=0, uint32_t period=0):
        """Insert a key (canonical key form). Returns (id, created); the id is valid until the
        next merge (a flush of the full tree happens before the insert, not after)."""
        cdef int64_t hit = 0
        cdef int rc
        if category >= 0x80000000:
            raise OverflowError("category ids are below 2^31")
        if key.shape[0] == 0:
            raise ValueError("empty key")
        if self._full():
            self.flush()
        rc = self._insert(&key[0], key.shape[0], category, period, &hit)
        if rc == TREE_TOO_LONG:
            raise ValueError(f"key longer than {MAX_KEY} bytes")
        return hit, bool(rc)

    def insert(self, url, uint32_t category=0, uint32_t period=0):
        cdef const uint8_t[::1] u = _as_bytes(url)
        cdef ptrdiff_t n = self.delta._canon_q(&u[0] if u.shape[0] else <const uint8_t *>b"", u.shape[0])
        if n < 0:
            raise _canon_error(n, url)
        return self.insert_key((<char *>self.delta.qbuf)[:n], category, period)

    def delete_key(self, const uint8_t[::1] key):
        """Remove a key; returns its id, or 0 when absent."""
        if key.shape[0] == 0:
            return 0
        return self._delete(&key[0], key.shape[0])

    def delete(self, url):
        cdef const uint8_t[::1] u = _as_bytes(url)
        cdef ptrdiff_t n = self.delta._canon_q(&u[0] if u.shape[0] else <const uint8_t *>b"", u.shape[0])
        if n < 0:
            raise _canon_error(n, url)
        return self.delete_key((<char *>self.delta.qbuf)[:n])

    def delete_id(self, int64_t uid):
        key = self.get_key(uid)
        if key is None:
            return False
        return self.delete_key(key) == uid

    def get_key(self, int64_t uid):
        """Key of id uid (bytes), or None."""
        cdef ptrdiff_t n
        cdef int64_t i
        cdef int r
        if uid > <int64_t>self._nst():
            return self.delta.get_key(<uint32_t>(uid - self._nst())) if uid - <int64_t>self._nst() <= MAX_ID else None
        r = self._locate(uid, &i)
        if r < 0:
            return None
        n = wt_base_key(&self.runs[r], i, self.kbuf, MAX_KEY + 16)
        return (<char *>self.kbuf)[:n]

    def get(self, int64_t uid):
        key = self.get_key(uid)
        return None if key is None else key_to_url(key)

    def payload(self, int64_t uid):
        """(category, period) of id uid, or None."""
        cdef uint32_t j
        cdef int64_t i
        cdef int r
        if uid > <int64_t>self._nst():
            return self.delta.payload(<uint32_t>(uid - self._nst())) if uid - <int64_t>self._nst() <= MAX_ID else None
        r = self._locate(uid, &i)
        if r < 0:
            return None
        j = wt_base_payload_index(&self.runs[r], i)
        return self.runs[r].palette[2 * j], self.runs[r].palette[2 * j + 1]

    def set_payload(self, int64_t uid, uint32_t category, uint32_t period):
        """Change the payload of id uid; returns its id afterwards: a key of a static run whose
        payload changes moves to the delta tree (runs are never written), so it gets a new id."""
        if category >= 0x80000000:
            raise OverflowError("category ids are below 2^31")
        if uid > <int64_t>self._nst():
            if uid - <int64_t>self._nst() > MAX_ID:
                raise KeyError(uid)
            self.delta.set_payload(<uint32_t>(uid - self._nst()), category, period)
            return uid
        old = self.payload(uid)
        if old is None:
            raise KeyError(uid)
        if old == (category, period):
            return uid
        key = self.get_key(uid)
        self.delete_key(key)
        return self.insert_key(key, category, period)[0]

    def rekey(self, int64_t uid, new_url):
        """Give id uid's entry a new URL (payload kept); returns its new id. KeyError if uid is
        unknown or the new URL is another entry's; ValueError if it has no canonical form."""
        cdef const uint8_t[::1] u = _as_bytes(new_url)
        cdef ptrdiff_t n
        old = self.get_key(uid)
        if old is None:
            raise KeyError(uid)
        n = self.delta._canon_q(&u[0] if u.shape[0] else <const uint8_t *>b"", u.shape[0])
        if n < 0:
            raise _canon_error(n, new_url)
        if n > MAX_KEY:
            raise ValueError(f"key longer than {MAX_KEY} bytes")
        new = (<char *>self.delta.qbuf)[:n]
        if new == old:
            return uid
        other = self.find_key(new)
        if other:
            raise KeyError(f"{key_to_url(new)!r} already has id {other}")
        cat, period = self.payload(uid)
        self.delete_key(old)
        return self.insert_key(new, cat, period)[0]

    def find_key(self, key):
        cdef bytes k = _qbytes(key)
        return self._find(<const uint8_t *>PyBytes_AS_STRING(k), PyBytes_GET_SIZE(k))

    def prefix_key(self, key):
        cdef bytes k = _qbytes(key)
        return self._prefix(<const uint8_t *>PyBytes_AS_STRING(k), PyBytes_GET_SIZE(k), self.kbuf)

    def find(self, url):
        """Exact match after canonicalisation: id, 0 (miss) or -code (no canonical form)."""
        cdef bytes u = _qbytes(url)
        cdef ptrdiff_t n = self.delta._canon_q(<const uint8_t *>PyBytes_AS_STRING(u), PyBytes_GET_SIZE(u))
        if n < 0:
            return <int>n
        return self._find(self.delta.qbuf, n)

    def match(self, url):
        """Prefix match after canonicalisation: id, 0 (miss) or -code (no canonical form)."""
        cdef bytes u = _qbytes(url)
        cdef ptrdiff_t n = self.delta._canon_q(<const uint8_t *>PyBytes_AS_STRING(u), PyBytes_GET_SIZE(u))
        if n < 0:
            return <int>n
        return self._prefix(self.delta.qbuf, n, self.kbuf)

    def match_batch(self, const uint8_t[::1] data, offsets, bint prefix=True, bint canonical=True,
                    timings=None):
        """As UrlTree.match_batch (int32 ids, > 0 hit, 0 miss, < 0 CANON_* code; timings: per
        URL ns, canonicalisation included, one clock read per URL), without the GIL."""
        cdef int64_t[::1] off = np.ascontiguousarray(offsets, dtype=np.int64)
        cdef Py_ssize_t n = off.shape[0] - 1, i
        res = np.zeros(max(n, 0), dtype=np.int32)
        cdef int32_t[::1] out = res
        cdef int64_t s, e, maxlen = 0
        cdef ptrdiff_t k
        cdef const uint8_t *base = &data[0] if data.shape[0] else <const uint8_t *>b""
        cdef uint8_t *buf = NULL
        cdef uint8_t *scratch = NULL
        cdef int64_t[::1] tv = _timing_view(timings, n)
        cdef bint timed = timings is not None
        cdef int64_t t0 = 0, t1
        if n <= 0:
            return res
        maxlen = _longest_span(off, n, data.shape[0])
        try:
            with nogil:
                buf = <uint8_t *>wt_alloc(3 * maxlen + 16)
                scratch = <uint8_t *>wt_alloc(MAX_KEY + 16)
                t0 = wt_now_ns() if timed else 0
                for i in range(n):
                    s, e = off[i], off[i + 1]
                    if canonical:
                        k = webtap_canon(base + s, e - s, buf, 3 * maxlen + 16, CANON_KEY)
                        if k < 0:
                            out[i] = <int32_t>k
                        else:
                            out[i] = <int32_t>(self._prefix(buf, k, scratch) if prefix else self._find(buf, k))
                    else:
                        out[i] = <int32_t>(self._prefix(base + s, e - s, scratch) if prefix
                                           else self._find(base + s, e - s))
                    if timed:
                        t1 = wt_now_ns()
                        tv[i] = t1 - t0
                        t0 = t1
        finally:
            free(buf)
            free(scratch)
        return res


    def insert_batch(self, const uint8_t[::1] data, offsets, categories=0, periods=0, bint canonical=True,
                     timings=None):
        """As UrlTree.insert_batch: (ids, codes); codes 0 inserted, 1 present, < 0 rejected. The
        tree is flushed into a run when it fills (auto_merge), which renumbers: the ids of the
        URLs before each flush are renumbered with it (flush() and _compact() map the batch's
        ids so far), so every id returned is valid when the call returns."""
        cdef int64_t[::1] off = np.ascontiguousarray(offsets, dtype=np.int64)
        cdef Py_ssize_t n = off.shape[0] - 1, i
        cdef uint32_t[::1] cats = np.broadcast_to(np.asarray(categories, dtype=np.uint32), (max(n, 0),)).copy()
        cdef uint32_t[::1] pers = np.broadcast_to(np.asarray(periods, dtype=np.uint32), (max(n, 0),)).copy()
        if n > 0 and np.asarray(cats).max() >= 0x80000000:
            raise OverflowError("category ids are below 2^31")
        ids_a = np.zeros(max(n, 0), dtype=np.int32)
        codes_a = np.zeros(max(n, 0), dtype=np.int32)
        cdef int32_t[::1] ids = ids_a, codes = codes_a
        cdef int64_t s, e, maxlen = 0, hit
        cdef ptrdiff_t k
        cdef int rc = 0
        cdef const uint8_t *base = &data[0] if data.shape[0] else <const uint8_t *>b""
        cdef const uint8_t *kp
        cdef uint8_t *buf = NULL
        cdef int64_t[::1] tv = _timing_view(timings, n)
        cdef bint timed = timings is not None
        cdef int64_t t0 = 0
        if n <= 0:
            return ids_a, codes_a
        maxlen = _longest_span(off, n, data.shape[0])
        self.delta._own()
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
                        kp = buf
                    else:
                        kp = base + s
                        k = e - s
                        if k == 0:
                            codes[i] = -1
                            continue
                    if self._full():
                        with gil:
                            self._pending = ids_a[:i]
                            try:
                                self.flush()
                            finally:
                                self._pending = None
                            self.delta._own()
                    rc = self._insert(kp, k, cats[i], pers[i], &hit)
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
        """As UrlTree.delete_batch: ids of the removed entries (0 absent, < 0 CANON_* code)."""
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
        self.delta._own()
        try:
            with nogil:
                buf = <uint8_t *>wt_alloc(3 * maxlen + 16)
                for i in range(n):
                    if timed:
                        t0 = wt_now_ns()
                    k = webtap_canon(base + off[i], off[i + 1] - off[i], buf, 3 * maxlen + 16, CANON_KEY)
                    out[i] = <int32_t>k if k < 0 else <int32_t>self._delete(buf, k)
                    if timed:
                        tv[i] = wt_now_ns() - t0
        finally:
            free(buf)
        return res


    def payload_batch(self, ids):
        """(category, period) uint32 arrays for an array of ids (0 / negative / dead -> 0, 0)."""
        cdef int32_t[::1] a = np.ascontiguousarray(ids, dtype=np.int32)
        cat_a = np.zeros(a.shape[0], dtype=np.uint32)
        per_a = np.zeros(a.shape[0], dtype=np.uint32)
        cdef uint32_t[::1] cat = cat_a, per = per_a
        cdef Py_ssize_t i
        cdef uint32_t j
        cdef int r
        cdef int64_t nst = self._nst(), ki
        dmask = np.asarray(a) > nst
        if dmask.any():
            dc, dp = self.delta.payload_batch(np.where(dmask, np.asarray(a) - nst, 0).astype(np.int32))
            cat_a[dmask] = dc[dmask]
            per_a[dmask] = dp[dmask]
        with nogil:
            for i in range(a.shape[0]):
                if a[i] > 0 and a[i] <= nst:
                    r = self._locate(a[i], &ki)
                    if r >= 0:
                        j = wt_base_payload_index(&self.runs[r], ki)
                        cat[i] = self.runs[r].palette[2 * j]
                        per[i] = self.runs[r].palette[2 * j + 1]
        return cat_a, per_a

    # ---- whole-store operations -----------------------------------------------------------
    def run_keys(self, int r=0, bint live=True):
        """(data uint8, offsets int64, key indices uint64) of run r's keys in order (the dead
        ones left out when live); run 0 is the base."""
        if r < 0 or r >= self.nr:
            raise IndexError(r)
        cdef uint64_t n = self.runs[r].n, w
        data_a = np.zeros(self.runs[r].h.raw_bytes + 16, np.uint8)
        offs_a = np.zeros(n + 1, np.int64)
        idx_a = np.zeros(n + 1, np.uint64)
        cdef uint8_t[::1] d = data_a
        cdef int64_t[::1] o = offs_a
        cdef uint64_t[::1] ix = idx_a
        cdef uint8_t *scratch = <uint8_t *>wt_alloc(MAX_KEY + 32)
        try:
            with nogil:
                w = wt_base_dump(&self.runs[r], self.tombs[r] if live else NULL, &d[0], &o[0], &ix[0], scratch)
        finally:
            free(scratch)
        return data_a, offs_a[:w + 1], idx_a[:w]

    def run_payloads(self, int r, idx):
        """(category, period) arrays of run r's key indices idx."""
        if r < 0 or r >= self.nr:
            raise IndexError(r)
        cdef uint64_t[::1] ix = np.ascontiguousarray(idx, dtype=np.uint64)
        cat_a = np.zeros(ix.shape[0], np.uint32)
        per_a = np.zeros(ix.shape[0], np.uint32)
        cdef uint32_t[::1] c = cat_a, p = per_a
        cdef Py_ssize_t i
        cdef uint32_t j
        with nogil:
            for i in range(ix.shape[0]):
                j = wt_base_payload_index(&self.runs[r], ix[i])
                c[i] = self.runs[r].palette[2 * j]
                p[i] = self.runs[r].palette[2 * j + 1]
        return cat_a, per_a

    def base_keys(self, bint live=True):
        """run_keys(0, live): the base's keys."""
        return self.run_keys(0, live)

    def base_payloads(self, idx):
        return self.run_payloads(0, idx)

    def tree_keys(self):
        """(data uint8, offsets int64, ids uint32) of the delta tree's keys in order (a flush's
        input), decoded in C in one in-order walk: a node's reference is one of its flanking
        ancestors (ext/url/avl.pyx), whose key the walk holds in the buffer of its depth, so each
        key costs its own bytes. (UrlTree._decode per key followed each reference chain up the
        tree: 10 % of an insert's CPU time at a 10 % delta on the UT1 URLs, perf.)"""
        cdef UrlTree t = self.delta
        cdef Py_ssize_t n = t.count, k = 0
        ids_a = np.zeros(n, np.uint32)
        offs_a = np.zeros(n + 1, np.int64)
        cdef uint32_t[::1] ids = ids_a
        cdef int64_t[::1] o = offs_a
        cdef size_t cap = 64 * <size_t>n + MAX_KEY + 16, used = 0, stride = MAX_KEY + 16
        cdef uint8_t *out = NULL
        cdef uint8_t *kb = NULL
        cdef uint32_t node[MAX_DEPTH]
        cdef int lo[MAX_DEPTH]
        cdef int hi[MAX_DEPTH]
        cdef int st[MAX_DEPTH]
        cdef size_t kl[MAX_DEPTH]
        cdef int d = 0, e, rd
        cdef uint32_t x, c
        cdef Rec r
        cdef bint bad = False
        if n == 0:
            return np.zeros(0, np.uint8), offs_a, ids_a
        out = <uint8_t *>wt_alloc(cap)
        kb = <uint8_t *>wt_alloc(stride * MAX_DEPTH)
        try:
            with nogil:
                node[0] = t.root
                lo[0] = -1
                hi[0] = -1
                st[0] = 0
                e = 0
                # decode node[e] (its reference is node[lo[e]] or node[hi[e]], or none)
                _read_rec(t.blob + t.dataptr[node[0]], node[0], &r)
                if r.ref != 0 or r.cp + r.dlen > MAX_KEY:
                    bad = True
                else:
                    memcpy(kb, r.diff, r.dlen)
                    kl[0] = r.dlen
                while d >= 0 and not bad:
                    x = node[d]
                    if d + 1 >= MAX_DEPTH:
                        bad = True
                        break
                    if st[d] == 0:
                        st[d] = 1
                        c = t._left(x)
                        if c == 0:
                            continue
                        e = d + 1
                        lo[e] = lo[d]
                        hi[e] = d
                    elif st[d] == 1:
                        if k >= n:
                            bad = True
                            break
                        if used + kl[d] > cap:
                            cap = 2 * cap + kl[d]
                            out = <uint8_t *>wt_realloc(out, cap)
                        memcpy(out + used, kb + <size_t>d * stride, kl[d])
                        used += kl[d]
                        ids[k] = x
                        k += 1
                        o[k] = <int64_t>used
                        st[d] = 2
                        c = t._right(x)
                        if c == 0:
                            continue
                        e = d + 1
                        lo[e] = d
                        hi[e] = hi[d]
                    else:
                        d -= 1
                        continue
                    node[e] = c
                    st[e] = 0
                    _read_rec(t.blob + t.dataptr[c], c, &r)
                    if r.ref == 0:
                        rd = -2
                    elif lo[e] >= 0 and node[lo[e]] == r.ref:
                        rd = lo[e]
                    elif hi[e] >= 0 and node[hi[e]] == r.ref:
                        rd = hi[e]
                    else:
                        rd = -1
                    if rd == -1 or r.cp + r.dlen > MAX_KEY or (rd >= 0 and r.cp > kl[rd]) or (rd == -2 and r.cp != 0):
                        bad = True
                        break
                    if rd >= 0:
                        memcpy(kb + <size_t>e * stride, kb + <size_t>rd * stride, r.cp)
                    memcpy(kb + <size_t>e * stride + r.cp, r.diff, r.dlen)
                    kl[e] = r.cp + r.dlen
                    d = e
            if bad or k != n:
                raise TreeCorrupt("delta tree: a reference that is not a flanking ancestor, or a count that does not match")
            data_a = np.frombuffer((<char *>out)[:used], np.uint8) if used else np.zeros(0, np.uint8)
        finally:
            free(out)
            free(kb)
        return data_a, offs_a, ids_a

    def symbols(self):
        """The base's static code: (sym 256 x 8 bytes, symlen 256) as uint8 arrays (copies)."""
        sym = np.frombuffer((<const char *>self.runs[0].sym)[:2048], np.uint8).copy()
        ln = np.frombuffer((<const char *>self.runs[0].symlen)[:256], np.uint8).copy()
        return sym, ln

    def _code_for(self, data, offsets):
        """The code a new run is built with: the base's (urlfilter.urlstore.UrlStore trains one
        on data/offsets when the base has none)."""
        return self.symbols()

    cdef _install(self, int r, img, data, starts, ends):
        """Run r becomes img (built here: its pointers taken without the O(n) check), with a
        host filter of the keys data[starts:ends] when r >= 1."""
        cdef WtBase b
        cdef const uint8_t[::1] v = img
        cdef const uint8_t[::1] d = data if len(data) else np.zeros(1, np.uint8)
        cdef int64_t[::1] st = np.ascontiguousarray(starts, np.int64)
        cdef int64_t[::1] en = np.ascontiguousarray(ends, np.int64)
        cdef uint64_t bits
        cdef uint64_t *f = NULL
        cdef Py_ssize_t i
        if wt_base_view(&b, &v[0], v.shape[0]) != 0:
            raise ValueError("URL base: bad image")
        if r >= 1:
            bits = (<uint64_t>RUN_FILT_BITS_PER_KEY * b.n + 64 + 63) // 64 * 64
            f = <uint64_t *>wt_alloc(bits // 8)
            memset(f, 0, bits // 8)
            with nogil:
                for i in range(st.shape[0]):
                    wt_filt_add(f, bits, &d[st[i]], <size_t>(en[i] - st[i]))
            self.fbits[r] = bits
        free(self.tombs[r])
        self.tombs[r] = NULL
        self.n_dead -= self.dead[r]
        self.dead[r] = 0
        free(self.filt[r])
        self.filt[r] = f
        self.runs[r] = b
        while len(self._images) <= r:
            self._images.append(None)
            self._tops.append(None)
        self._images[r] = img
        self._attach_top(r)
        if r == 0:
            self.mapped = False

    cdef _drop_runs(self, int a, int e):
        """Remove runs a .. e - 1; the runs after them move down."""
        cdef int r, k = e - a
        for r in range(a, e):
            free(self.tombs[r])
            free(self.filt[r])
            self.n_dead -= self.dead[r]
        for r in range(a, self.nr):
            if r + k < self.nr:
                self.tombs[r] = self.tombs[r + k]
                self.filt[r] = self.filt[r + k]
                self.fbits[r] = self.fbits[r + k]
                self.dead[r] = self.dead[r + k]
                self.runs[r] = self.runs[r + k]
            else:
                self.tombs[r] = NULL
                self.filt[r] = NULL
                self.fbits[r] = 0
                self.dead[r] = 0
                memset(&self.runs[r], 0, sizeof(WtBase))
        del self._images[a:e]
        del self._tops[a:e]
        self.nr -= k

    def _sources(self, runs, bint with_tree):
        """(data, starts, ends, cats, pers, bounds) of the live keys of the given runs and of the
        tree, each an ascending sequence, one after the other."""
        parts = []
        self._src_ix = []
        for r in runs:
            d, o, ix = self.run_keys(r, True)
            c, p = self.run_payloads(r, ix)
            parts.append((d[:o[len(o) - 1]], o, c, p))
            self._src_ix.append(ix)
        if with_tree and self.delta.count:
            d, o, ids = self.tree_keys()
            self._tree_ids = ids
            c, p = self.delta.payload_batch(ids.astype(np.int32))
            parts.append((d, o, c, p))
        if not parts:
            z = np.zeros(0, np.int64)
            return np.zeros(0, np.uint8), z, z, np.zeros(0, np.uint32), np.zeros(0, np.uint32), [0]
        base = 0
        starts, ends, bounds = [], [], [0]
        for d, o, c, p in parts:
            starts.append(o[:len(o) - 1] + base)
            ends.append(o[1:] + base)
            base += len(d)
            bounds.append(bounds[len(bounds) - 1] + len(o) - 1)   # (no wraparound in this module)
        return (np.concatenate([q[0] for q in parts]), np.concatenate(starts), np.concatenate(ends),
                np.concatenate([q[2] for q in parts]).astype(np.uint32),
                np.concatenate([q[3] for q in parts]).astype(np.uint32), bounds)

    def flush(self):
        """Write the delta tree into a new static run (keys in order, the base's code), then
        merge runs by the size-tier rule (_compact). Each key is so rewritten about
        log_RUN_FANOUT(n / tree cap) times: inserts cost that amortised, not
        a re-encode of the base per flush. Ids are renumbered."""
        if self.delta.count == 0:
            return
        if self.nr >= MAX_RUNS:     # not reached: the size rule keeps ~log2(n / 4096) runs
            if self._pending is not None:
                raise RuntimeError("URL store: too many runs inside a batch")
            self.merge()
            return
        data, st, en, cats, pers, bounds = self._sources([], True)
        sym, ln = self._code_for(data, np.append(st, en[len(en) - 1:]))
        order = np.arange(len(st), dtype=np.int64)
        img = build_base(data, st, en, order, cats, pers, sym, ln, BASE_BLOCK, self.tag)
        if self._pending is not None and len(self._pending):
            # tree id x (id nst + x) -> the new run's key rank(x) (id nst + rank + 1)
            nst = self._nst()
            rank = np.zeros(int(self.delta.n_slots) + 1, np.int64)
            rank[self._tree_ids.astype(np.int64)] = np.arange(1, len(self._tree_ids) + 1)
            P = self._pending
            m = P > nst
            P[m] = nst + rank[P[m] - nst]
        self.nr += 1
        self._install(self.nr - 1, img, data, st, en)
        self.delta = UrlTree()
        free(self.dfilt)
        self.dfilt = NULL
        self._reoff()
        self.n_flushes += 1
        self._compact()

    def _compact(self):
        """The size-tiered merge rule: the newest RUN_FANOUT delta runs become one when their
        live sizes are within 2x of each other (a tier: flushes of about one tree cap, then
        RUN_FANOUT caps, ...); run 1 (the largest) merges into the base when it is as large.
        Each key is so rewritten about log_RUN_FANOUT(n / cap) times, and a tier holds at most
        RUN_FANOUT - 1 runs between merges."""
        cdef int r, j
        cdef uint64_t lo_, hi_
        while self.nr >= 2:
            r = self.nr - RUN_FANOUT
            if r >= 1:
                lo_, hi_ = self._live(r), self._live(r)
                for j in range(r + 1, self.nr):
                    lo_, hi_ = min(lo_, self._live(j)), max(hi_, self._live(j))
                if hi_ > 2 * lo_:
                    r = -1
            if r < 1:
                if self._live(0) > self._live(1):
                    break
                if self.nr > 2:
                    # run 1 reached the base's size: base + run 1 (the newer runs stay)
                    self._merge_runs(0, 2)
                    continue
                r = 0
            self._merge_runs(r, self.nr)

    cdef _merge_runs(self, int r, int e):
        """Runs r .. e - 1 (consecutive) become one run at r; the runs after e move down."""
        cdef int j
        data, st, en, cats, pers, bounds = self._sources(list(range(r, e)), False)
        sym, ln = self._code_for(data, np.append(st, en[len(en) - 1:]))
        order = _kmerge_order(data, st, en, bounds)
        img = build_base(data, st, en, order, cats, pers, sym, ln, BASE_BLOCK, self.tag)
        if self._pending is not None and len(self._pending):
            # ids of runs r .. e - 1 -> their key's position in the merged run; later runs and
            # the tree shift down by the dead keys left out
            inv = np.zeros(len(order), np.int64)
            inv[order] = np.arange(len(order))
            lo = int(self.roff[r])
            P = self._pending
            m = (P > lo) & (P <= int(self.roff[e]))
            q = P[m].astype(np.int64)
            src = np.zeros(len(q), np.int64)
            for j in range(r, e):
                a = (q > int(self.roff[j])) & (q <= int(self.roff[j + 1]))
                if self.dead[j] == 0:      # every key of run j live: its key index is its rank
                    src[a] = bounds[j - r] + (q[a] - int(self.roff[j]) - 1)
                else:                      # (needles as uint64: int64 against the uint64 indices
                    src[a] = bounds[j - r] + np.searchsorted(    # would search both as float64)
                        self._src_ix[j - r], (q[a] - int(self.roff[j]) - 1).astype(np.uint64))
            P[m] = lo + inv[src] + 1
            after = P > int(self.roff[e])
            P[after] -= int(self.roff[e] - self.roff[r]) - len(order)
        self._drop_runs(r + 1, e)
        self._install(r, img, data, st, en)
        self._reoff()
        self.n_run_merges += 1
        self.merged_keys += len(st)

    def merge_with(self, sym, symlen, uint32_t block=BASE_BLOCK):
        """Fold the delta runs, the tree and the tombstones into a new base coded with
        sym/symlen (the facade's merge() chooses them). Ids are renumbered (key order, 1-based)."""
        data, st, en, cats, pers, bounds = self._sources(list(range(self.nr)), True)
        order = _kmerge_order(data, st, en, bounds)
        img = build_base(data, st, en, order, cats, pers, sym, symlen, block, self.tag)
        self._set_image(img, False, False)
        self.delta = UrlTree()
        free(self.dfilt)
        self.dfilt = NULL

    def build_from(self, const uint8_t[::1] data, starts, ends, order, categories, periods,
                   sym, symlen, uint32_t block=BASE_BLOCK):
        """Replace everything by a base of the given sorted keys (build_base's arguments)."""
        self._set_image(build_base(data, starts, ends, order, categories, periods, sym, symlen, block,
                                   self.tag), False, False)
        self.delta = UrlTree()
        free(self.dfilt)
        self.dfilt = NULL

    def merge(self):
        """Fold everything into a new base with the current code table
        (urlfilter.urlstore.UrlStore.merge retrains it when the set has grown)."""
        sym, ln = self.symbols()
        self.merge_with(sym, ln)

    def stats(self):
        """Sizes in bytes: the base image (index, code table, palette, payload indices, records),
        the delta runs' images and host filters, the delta tree (its paper_bytes), the tombstones;
        `held_bytes` = everything the matcher holds for its data, `allocated_bytes` adds the
        tree's slack and scratch."""
        ds = self.delta.stats()
        cdef int r
        tomb = 0
        runb = 0
        runf = 0
        run_urls = 0
        for r in range(self.nr):
            if self.tombs[r] != NULL:
                tomb += ((self.runs[r].n + 63) // 64) * 8 + 8
            if r >= 1:
                runb += self.runs[r].image_bytes
                runf += self.fbits[r] // 8
                run_urls += self.runs[r].n
        filt = WT_DFILT_BITS // 8 if self.dfilt != NULL else 0
        nb = self.runs[0].n_blocks
        h = self.runs[0].h
        top = sum(t.nbytes for t in self._tops if t is not None)
        held = self.runs[0].image_bytes + runb + runf + ds["paper_bytes"] + tomb + filt + top
        return {
            "urls": len(self),
            "height": ds["height"],           # of the delta tree
            "base_urls": self.runs[0].n,
            "dead": self.n_dead,
            "delta_urls": self.delta.count,
            "runs": self.nr - 1,              # delta runs (the base not counted)
            "run_urls": run_urls,
            "run_bytes": runb,
            "run_filter_bytes": runf,
            "base_bytes": self.runs[0].image_bytes,
            "base_record_bytes": h.blob_bytes,
            "base_index_bytes": (nb + 1) * WT_BASE_IDX,
            "top_bytes": top,                 # the runs' sampled first levels and tie runs (in memory, not in the image)
            "base_payload_bytes": (self.runs[0].n * self.runs[0].pal_bits + 63) // 64 * 8 + 8 * h.pal_n,
            "base_raw_key_bytes": h.raw_bytes,
            "delta_bytes": ds["paper_bytes"],
            "tomb_bytes": tomb,
            "delta_filter_bytes": filt,
            "held_bytes": held,
            "paper_bytes": held,
            "allocated_bytes": held - ds["paper_bytes"] + ds["allocated_bytes"] + MAX_KEY + 16,
            "mapped": bool(self.mapped),
            "flushes": self.n_flushes,
            "run_merges": self.n_run_merges,
            "merged_keys": self.merged_keys,
        }

    def save(self, path, uint64_t tag=0):
        """Merge (when there is anything beside a clean base), then write the base image
        atomically (write + rename), tag and CRC-32 in its header."""
        if self.delta.count or self.n_dead or self.nr > 1:
            self.merge()
        self.tag = tag
        img = np.frombuffer(self._images[0], np.uint8)
        hdr = bytearray(img[:BASE_HEADER.size].tobytes())
        f = list(BASE_HEADER.unpack_from(hdr, 0))
        f[3] = tag
        f[9] = 0
        BASE_HEADER.pack_into(hdr, 0, *f)
        crc = zlib.crc32(img[BASE_HEADER.size:], zlib.crc32(hdr))
        f[9] = crc
        BASE_HEADER.pack_into(hdr, 0, *f)
        tmp = os.fspath(path) + ".tmp"
        with open(tmp, "wb") as fh:
            fh.write(hdr)
            fh.write(img[BASE_HEADER.size:])
        os.replace(tmp, path)

    @classmethod
    def load(cls, path, bint verify=True):
        """Map a snapshot read-only (shared by every process that loads it). verify: check the
        CRC-32 too; the structure is always checked (one pass over the keys), so a damaged or
        hostile file gives ValueError, never a read outside it."""
        cdef UrlStore s = cls.__new__(cls)
        with open(path, "rb") as f:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if os.fstat(f.fileno()).st_size else None
        if mm is None or len(mm) < BASE_HEADER.size:
            if mm is not None:
                mm.close()
            raise ValueError(f"{path}: not a URL store snapshot (too short)")
        if mm[:8] != BASE_MAGIC:
            magic = mm[:8]
            mm.close()
            if magic[:5] == b"WTAVL":
                raise ValueError(f"{path}: an older URL tree snapshot ({magic.decode('ascii', 'replace')}), "
                                 f"this version reads {BASE_MAGIC.decode()}: rebuild it")
            if magic[:6] == b"WTURLB":
                raise ValueError(f"{path}: an older URL store snapshot format ({magic.decode('ascii', 'replace')}), "
                                 f"this version reads {BASE_MAGIC.decode()}: rebuild it")
            raise ValueError(f"{path}: not a URL store snapshot")
        if verify:
            whole = memoryview(mm)
            crc = BASE_HEADER.unpack_from(whole, 0)[9]
            hdr = bytearray(whole[:BASE_HEADER.size])
            struct.pack_into("<I", hdr, 52, 0)
            got = zlib.crc32(whole[BASE_HEADER.size:], zlib.crc32(hdr))
            whole.release()
            if got != crc:
                mm.close()
                raise ValueError(f"{path}: URL store snapshot damaged (CRC-32 {got:08x}, header says {crc:08x})")
        try:
            s._set_image(mm, True)
        except ValueError as e:
            mm.close()
            raise ValueError(f"{path}: {e}") from None
        return s

    @classmethod
    def from_image(cls, image):
        """A store over a base image in memory (bytes-like; checked as load() checks a file,
        without the CRC). For tests and the fuzz target."""
        cdef UrlStore s = cls.__new__(cls)
        a = np.frombuffer(image, np.uint8)
        b = np.zeros((len(a) + 7) // 8, np.uint64).view(np.uint8)[:len(a)]
        b[:] = a
        s._set_image(b, False)
        return s

    def ids(self):
        """Live ids in key order."""
        return np.array([i for _, i in self.keys_with_ids()], dtype=np.int64)

    def keys_with_ids(self):
        """[(key, id)] of every live entry in key order (tests and export, not hot paths)."""
        out = []
        for r in range(self.nr):
            d, o, ix = self.run_keys(r, True)
            out += [(bytes(d[o[j]:o[j + 1]]), int(ix[j]) + 1 + int(self.roff[r])) for j in range(len(ix))]
        nst = self._nst()
        out += [(self.delta.get_key(x), nst + int(x)) for x in self.delta.ids()]
        out.sort()
        return out

    def keys(self):
        return [k for k, _ in self.keys_with_ids()]

    def check(self):
        """The delta tree's invariants (UrlTree.check), and every live key in one place only
        (tree and runs). Raises TreeCorrupt; returns the number of live entries."""
        cdef size_t ln
        cdef bytes k
        cdef int r, r2
        self.delta.check()
        where = {}
        for r in range(self.nr):
            d, o, ix = self.run_keys(r, True)
            for j in range(len(ix)):
                k = bytes(d[o[j]:o[j + 1]])
                if k in where:
                    raise TreeCorrupt(f"key {k!r} live in runs {where[k]} and {r}")
                where[k] = r
        for x in self.delta.ids():
            k = self.delta.get_key(x)
            if k in where:
                raise TreeCorrupt(f"key {k!r} both in the delta and live in run {where[k]}")
        if len(where) + self.delta.count != len(self):
            raise TreeCorrupt("live count does not match the runs and the tree")
        return len(self)


def _kmerge_order(data, starts, ends, bounds):
    """Order of the union of k ascending runs of keys (run j: bounds[j]..bounds[j + 1] - 1) as one
    ascending sequence: a k-way merge by byte comparison (k is small: the heads are scanned)."""
    cdef const uint8_t[::1] d = np.ascontiguousarray(data, np.uint8) if len(data) else np.zeros(1, np.uint8)
    cdef int64_t[::1] st = np.ascontiguousarray(starts, np.int64)
    cdef int64_t[::1] en = np.ascontiguousarray(ends, np.int64)
    cdef int64_t[::1] bd = np.ascontiguousarray(bounds, np.int64)
    cdef Py_ssize_t k = bd.shape[0] - 1, n = st.shape[0], w, j, b
    res = np.zeros(n, np.int64)
    cdef int64_t[::1] out = res
    pos_a = np.array(list(bounds)[:k], np.int64) if k > 0 else np.zeros(0, np.int64)
    cdef int64_t[::1] pos = pos_a
    cdef int64_t la, lb, a
    cdef int c
    with nogil:
        for w in range(n):
            b = -1
            for j in range(k):
                if pos[j] >= bd[j + 1]:
                    continue
                if b < 0:
                    b = j
                    continue
                a = pos[j]
                la = en[a] - st[a]
                lb = en[pos[b]] - st[pos[b]]
                c = memcmp(&d[st[a]], &d[st[pos[b]]], <size_t>(la if la < lb else lb))
                if c < 0 or (c == 0 and la < lb):
                    b = j
            out[w] = pos[b]
            pos[b] += 1
    return res


def _merge_order(data, starts, ends, Py_ssize_t nb):
    """Two ascending runs (0..nb-1, nb..n-1): _kmerge_order of them."""
    return _kmerge_order(data, starts, ends, [0, nb, len(starts)])


_EMPTY_SYM = np.zeros(2048, np.uint8)
_EMPTY_LEN = np.zeros(256, np.uint8)



def train_code_c(const uint8_t[::1] data, starts, ends, uint32_t block, uint32_t sample):
    """The byte-pair code trainer of urlfilter.urlstore.train_code in C (the same table: the
    sample, the tails, the pair counts and their ties, the left-to-right replacement): keys
    data[starts[i]:ends[i]] in sorted order. Returns (sym uint8[2048], symlen uint8[256])."""
    cdef int64_t[::1] st = np.ascontiguousarray(starts, np.int64)
    cdef int64_t[::1] en = np.ascontiguousarray(ends, np.int64)
    cdef Py_ssize_t n = st.shape[0], i, L = 0, w, step, j
    sym_a = np.zeros(2048, np.uint8)
    ln_a = np.zeros(256, np.uint8)
    if n <= 0:
        return sym_a, ln_a
    step = max(1, n // max(1, sample))
    cdef const uint8_t *d = &data[0] if data.shape[0] else <const uint8_t *>b""
    # the sampled tails, -1 between them
    cdef int64_t total = 0, lcp, a0, b0, la, lb
    i = 0
    while i < n:
        total += en[i] - st[i] + 1
        i += step
    arr = np.zeros(total + 1, np.int32)
    cdef int32_t[::1] a = arr
    cdef int64_t bcnt[256]
    cdef int keepb[256]
    cdef uint8_t syms[512][8]
    cdef int slen[512]
    cdef int nxt = 256, nsyms = 0, c, p = 0, q = 0, k
    cdef uint32_t *cnt = NULL
    cdef uint32_t best
    cdef int32_t x, y
    memset(bcnt, 0, sizeof(bcnt))
    memset(slen, 0, sizeof(slen))
    memset(syms, 0, sizeof(syms))
    with nogil:
        i = -step
        while i + step < n:
            i += step
            a0, la = st[i], en[i] - st[i]
            lcp = 0
            if i % block:
                b0, lb = st[i - 1], en[i - 1] - st[i - 1]
                while lcp < la and lcp < lb and d[a0 + lcp] == d[b0 + lcp]:
                    lcp += 1
            if lcp < la:
                for j in range(lcp, la):
                    a[L] = d[a0 + j]
                    bcnt[d[a0 + j]] += 1
                    L += 1
                a[L] = -1
                L += 1
    for c in range(256):
        keepb[c] = bcnt[c] > 0
        nsyms += keepb[c]
    if nsyms > 255:                     # more distinct bytes than codes: the 200 most frequent
        order = sorted(range(256), key=lambda b: (-bcnt[b], b))[:200]
        for c in range(256):
            keepb[c] = 0
        for c in order:
            keepb[c] = 1
        nsyms = 200
        with nogil:
            for i in range(L):
                if a[i] >= 0 and not keepb[a[i]]:
                    a[i] = -1
    for c in range(256):
        if keepb[c]:
            syms[c][0] = <uint8_t>c
            slen[c] = 1
    cnt = <uint32_t *>wt_alloc(512 * 512 * sizeof(uint32_t))
    try:
        with nogil:
            while nsyms < 255 and L > 1:
                memset(cnt, 0, 512 * 512 * sizeof(uint32_t))
                for i in range(L - 1):
                    x = a[i]
                    y = a[i + 1]
                    if x >= 0 and y >= 0 and slen[x] + slen[y] <= 8:
                        cnt[x * 512 + y] += 1
                best = 0
                for k in range(512 * 512):
                    if cnt[k] > best:
                        best = cnt[k]
                        p = k // 512
                        q = k % 512
                if best < 3:
                    break
                w = 0
                i = 0
                while i < L:
                    if i + 1 < L and a[i] == p and a[i + 1] == q:
                        a[w] = nxt
                        i += 2
                    else:
                        a[w] = a[i]
                        i += 1
                    w += 1
                L = w
                memcpy(&syms[nxt][0], &syms[p][0], slen[p])
                memcpy(&syms[nxt][slen[p]], &syms[q][0], slen[q])
                slen[nxt] = slen[p] + slen[q]
                nxt += 1
                nsyms += 1
    finally:
        free(cnt)
    cdef uint8_t[::1] so = sym_a
    cdef uint8_t[::1] lo = ln_a
    k = 0
    for c in list(range(256)) + list(range(256, nxt)):
        if slen[c] == 0 or k >= 255:
            continue
        for j in range(slen[c]):
            so[8 * k + j] = syms[c][j]
        lo[k] = slen[c]
        k += 1
    return sym_a, ln_a
