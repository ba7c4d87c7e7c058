/* The static base of the URL store (issue 35): the sorted set of canonical URL keys in
 * front-coded blocks with a sampled index and a static symbol code for the key bytes.
 * C, no Python (the opening check in urlbase.c, the searches inline here): ext/url/avl.pyx (urlstore.pxi) builds, maps and searches it without the
 * GIL, and the fuzz target's corrupt inputs go through wt_base_open, which checks everything a
 * search relies on, so that a search of an accepted image never reads outside it.
 *
 * Image layout (little-endian; every section 8-byte aligned; the snapshot file is this image):
 *
 *   WtBaseHeader (64 B)
 *   symbols    256 x 8 B: the bytes of symbol c (1..8 used)          } the static code
 *   symlen     256 x 1 B: length of symbol c (0: code c unused)      }
 *   palette    pal_n x (uint32 category, uint32 period)
 *   index      (n_blocks + 1) x 20 B, packed (read with memcpy): per block its head, bytes 0-7
 *              and 8-15 of its first key as two uint64, each big-endian as an integer (zero
 *              padded), so comparing heads compares the keys' first 16 bytes, then the uint32
 *              byte offset of the block in the record bytes. Entry n_blocks: heads all ones,
 *              the offset blob_bytes (the end of the last block). The binary search reads a
 *              block's head and offset in one place: one cache miss to find the block, one to
 *              read it (format 01 kept the offsets in an array of their own: a third miss).
 *   payload    ceil(n * pal_bits / 64) x uint64: key i's palette index, pal_bits bits each
 *   records    blob_bytes: per key, varint (lcp << 1 | np), varint (code bytes), code bytes
 *
 * A key is key(i-1)[:lcp] + decode(codes); the first key of a block is its head's first lcp
 * bytes + decode(codes), lcp = min(16, its length) (a block decodes on its own, and its first
 * record does not repeat the bytes its head holds). np = 1: no other key of the base is a
 * proper prefix of this one (the AVL tree's no-prefix flag, same use). A code byte c < 255
 * stands for symbol c; 255 is an escape: the next byte is literal.
 */
#ifndef WEBTAP_URLBASE_H
#define WEBTAP_URLBASE_H

#include <stdint.h>
#include <stddef.h>
#include <string.h>

#include "urlcanon.h"
#include "util.h"

#define WT_BASE_MAGIC "WTURLB02"
#define WT_BASE_IDX 20      /* bytes per index entry */
#define WT_BASE_HEAD 16     /* key bytes a head holds */
#define WT_BASE_ESC 255
#define WT_BASE_MAX_KEY 65536

typedef struct {
    char magic[8];
    uint64_t n;            /* keys */
    uint64_t blob_bytes;   /* bytes of the record section */
    uint64_t tag;          /* the caller's number (urlfilter: the store's replayed change sequence) */
    uint32_t block;        /* keys per block (>= 1) */
    uint32_t n_blocks;     /* ceil(n / block) */
    uint32_t pal_n;        /* palette entries */
    uint32_t pal_bits;     /* bits per key in payload (0..32) */
    uint32_t max_key;      /* longest key, bytes */
    uint32_t crc32;        /* CRC-32 of the image with this field 0 (checked by the loader) */
    uint64_t raw_bytes;    /* sum of the key lengths */
} WtBaseHeader;

typedef struct {
    const WtBaseHeader *h;
    const uint8_t *sym;      /* 256 x 8 */
    const uint8_t *symlen;   /* 256 */
    const uint32_t *palette; /* pal_n x 2 */
    const uint8_t *idx;      /* (n_blocks + 1) x WT_BASE_IDX */
    const uint64_t *payload;
    const uint8_t *blob;
    uint64_t n;
    uint32_t block, n_blocks, pal_bits, max_key;
    size_t image_bytes;
    const uint64_t *top;     /* the sampled first level (wt_base_top_fill), NULL: none */
    uint32_t top_n;          /* its samples */
    uint32_t ties_n;         /* tie runs (wt_base_ties_build), 0: none */
    const uint32_t *ties_start;  /* ties_n: the first block of each tie run, ascending */
    const uint32_t *ties_first;  /* ties_n + 1: run t's entries are ties_ent[first[t] .. first[t + 1]) */
    const uint64_t *ties_ent;    /* per block of a tie run: one word (below) */
} WtBase;

/* Tie runs (in memory, built when an image is opened, as the sampled first level; not part of
 * the image; wt_base_ties_build, wt_base_ties_attach). A run of at least WT_TIE_MIN consecutive blocks whose 16-byte heads are equal:
 * the head does not tell its blocks apart, and finding the block of a query whose head ties
 * took a binary search that decoded one block's first key per step, each a cache miss in
 * another block (UT1 URLs: a host with thousands of listed paths gives runs of up to 362
 * blocks; the queries landing in runs of >= 4 blocks were 18 % of the benchmark's and 82 % of
 * its slowest 1 %). Per block of a run, one word: the lcp of its first key with the previous
 * block's first key (the run's first block: 16, the head), clamped to 0xFFFF, in the top 16
 * bits, and the 6 key bytes from there, big-endian, zero padded. A scan of those words finds the
 * block as the block scan finds a key (m = lcp with q; l > m: below q, l < m: above, l == m: the
 * 6 bytes decide), decoding a first key only when the 6 bytes cannot decide (the key goes on
 * equal to q past them, or holds a zero byte). 8 B per block in a run: 0.05 B/key on the UT1
 * URLs, counted with the first level in held_bytes. */
#define WT_TIE_MIN 4
#define WT_TIE_WIN 6
#define WT_TIE_LMAX 0xFFFFu

/* The sampled first level of the block index (not part of the image: built in memory, by each
 * process, when an image is opened): the heads (h1, h2) of blocks 0, S, 2S, ... (S =
 * WT_BASE_TOP_STEP), 16 B per sample, ~0.03 B/key. The binary search over all heads took one
 * dependent miss per step into an index of 20 B x n/32 (540 KB on the UT1 URLs); the samples
 * (27 KB there) stay in L1/L2 between lookups, and the last step searches S entries whose 320
 * bytes are prefetched at once. */
#define WT_BASE_TOP_STEP 16

static inline size_t wt_base_align8(size_t x) { return (x + 7) & ~(size_t)7; }

/* Byte sizes of the sections for given counts: returns the image size, fills section offsets. */
static inline int wt_base_layout(uint64_t n, uint32_t block, uint32_t pal_n, uint32_t pal_bits,
                                 uint64_t blob_bytes, size_t off[8])
{
    uint64_t nb;
    if (block == 0) return -1;
    nb = (n + block - 1) / block;
    if (nb > 0xFFFFFFF0u || n > 0x7FFFFFFFu || pal_bits > 32 || pal_n > 0x1000000u ||
        blob_bytes > 0xFFFFFFF0u)
        return -1;
    off[0] = sizeof(WtBaseHeader);
    off[1] = off[0] + 256 * 8;                          /* symlen */
    off[2] = wt_base_align8(off[1] + 256);              /* palette */
    off[3] = wt_base_align8(off[2] + (size_t)pal_n * 8); /* index */
    off[4] = off[3] + ((size_t)nb + 1) * WT_BASE_IDX;   /* end of the index */
    off[5] = wt_base_align8(off[4]);                    /* payload */
    off[6] = off[5] + (size_t)((n * pal_bits + 63) / 64) * 8; /* records */
    off[7] = wt_base_align8(off[6] + (size_t)blob_bytes);    /* end */
    return 0;
}

static inline uint64_t wt_base_head(const uint8_t *k, size_t n)
{
    uint64_t h = 0;
    size_t i;
    if (n >= 8) {
        (void)h;
        return wt_rd64(k, 1);           /* big-endian read (util.h): k's first 8 bytes in order */
    }
    for (i = 0; i < 8; i++)
        h = (h << 8) | (i < n ? k[i] : 0);
    return h;
}

static inline uint64_t wt_base_head2(const uint8_t *k, size_t n)
{
    return n > 8 ? wt_base_head(k + 8, n - 8) : 0;
}

/* Varint reader bounded by end: NULL when the varint runs past end or exceeds 32 bits. */
static inline const uint8_t *wt_base_varint_chk(const uint8_t *p, const uint8_t *end, uint32_t *v)
{
    uint32_t r = 0;
    int shift = 0;
    while (p < end) {
        uint8_t b = *p++;
        if (shift == 28 && (b & 0x70)) return NULL;
        r |= (uint32_t)(b & 0x7f) << shift;
        if (b < 0x80) { *v = r; return p; }
        shift += 7;
        if (shift > 28) return NULL;
    }
    return NULL;
}

static inline const uint8_t *wt_base_varint(const uint8_t *p, uint32_t *v)
{
    uint32_t r = p[0];
    int shift = 7;
    if (r < 0x80) { *v = r; return p + 1; }
    r &= 0x7f;
    for (;;) {
        p++;
        r |= (uint32_t)(p[0] & 0x7f) << shift;
        if (p[0] < 0x80) { *v = r; return p + 1; }
        shift += 7;
    }
}

static inline uint32_t wt_base_payload_index(const WtBase *b, uint64_t i)
{
    uint64_t bit, w;
    uint32_t s, r;
    if (b->pal_bits == 0) return 0;
    bit = i * b->pal_bits;
    w = bit >> 6;
    s = (uint32_t)(bit & 63);
    r = (uint32_t)(b->payload[w] >> s);
    if (s + b->pal_bits > 64) r |= (uint32_t)(b->payload[w + 1] << (64 - s));
    return b->pal_bits == 32 ? r : (r & ((1u << b->pal_bits) - 1));
}

/* Decode codes[0..nc) after out[0..pos) (the shared prefix); returns the key length or -1 when
 * it would exceed cap. */
static inline ptrdiff_t wt_base_decode_codes(const WtBase *b, const uint8_t *codes, uint32_t nc,
                                             uint8_t *out, size_t pos, size_t cap)
{
    const uint8_t *e = codes + nc;
    while (codes < e) {
        uint8_t c = *codes++;
        if (c == WT_BASE_ESC) {
            if (pos + 1 > cap) return -1;
            out[pos++] = *codes++;
        } else {
            uint32_t L = b->symlen[c];
            if (pos + 8 > cap) {
                if (pos + L > cap) return -1;
                memcpy(out + pos, b->sym + 8 * (size_t)c, L);
            } else {
                memcpy(out + pos, b->sym + 8 * (size_t)c, 8);
            }
            pos += L;
        }
    }
    return (ptrdiff_t)pos;
}

/* Compare the key whose bytes are q[0..start) + decode(codes) with q[0..qn). Returns -1 (key <
 * q), 0 (equal) or 1 (key > q) and sets *m = lcp(key, q) and *klen = the key's length when it was
 * decoded to the end (a key that is a prefix of q; else *klen = 0). */
static inline int wt_base_cmp_codes(const WtBase *b, const uint8_t *codes, uint32_t nc,
                                    const uint8_t *q, size_t qn, size_t start, size_t *m, size_t *klen)
{
    const uint8_t *e = codes + nc;
    size_t pos = start;
    *klen = 0;
    while (codes < e) {
        uint8_t c = *codes++;
        const uint8_t *s;
        uint32_t L, j;
        uint8_t lit;
        if (c == WT_BASE_ESC) { lit = *codes++; s = &lit; L = 1; }
        else { s = b->sym + 8 * (size_t)c; L = b->symlen[c]; }
        if (pos + 8 <= qn && c != WT_BASE_ESC) {
            uint64_t x, y;
            memcpy(&x, s, 8);
            memcpy(&y, q + pos, 8);
            x ^= y;
            if (L < 8) x &= (((uint64_t)1) << (8 * L)) - 1;
            if (x) {
                j = (uint32_t)(__builtin_ctzll(x) >> 3);
                *m = pos + j;
                return s[j] < q[pos + j] ? -1 : 1;
            }
        } else {
            for (j = 0; j < L; j++) {
                if (pos + j >= qn) { *m = pos + j; return 1; }      /* q is a proper prefix of key */
                if (s[j] != q[pos + j]) {
                    *m = pos + j;
                    return s[j] < q[pos + j] ? -1 : 1;
                }
            }
        }
        pos += L;
    }
    *m = pos;
    *klen = pos;
    return pos == qn ? 0 : -1;                                   /* key is a prefix of q */
}

/* Index entry k: the head's two integers and the block's offset (packed, unaligned). */
static inline const uint8_t *wt_base_ix(const WtBase *b, uint32_t k) { return b->idx + (size_t)k * WT_BASE_IDX; }
static inline uint64_t wt_ix_h1(const uint8_t *e) { uint64_t x; memcpy(&x, e, 8); return x; }
static inline uint64_t wt_ix_h2(const uint8_t *e) { uint64_t x; memcpy(&x, e + 8, 8); return x; }
static inline uint32_t wt_ix_off(const uint8_t *e) { uint32_t x; memcpy(&x, e + 16, 4); return x; }

/* Byte j (< 16) of a head. */
static inline uint8_t wt_head_byte(uint64_t h1, uint64_t h2, size_t j)
{
    return (uint8_t)((j < 8 ? h1 >> (56 - 8 * j) : h2 >> (56 - 8 * (j - 8))) & 0xff);
}

/* The head's first l bytes into out. */
static inline void wt_head_bytes(const uint8_t *e, uint32_t l, uint8_t *out)
{
    uint8_t hb[16];
    uint64_t x = wt_rd64(e, 1), y = wt_rd64(e + 8, 1);     /* the heads' bytes in key order */
    memcpy(hb, &x, 8);
    memcpy(hb + 8, &y, 8);
    memcpy(out, hb, l);
}

/* Compare the first key of block k (its head's first l bytes + its codes) with q (qh, qh2: q's
 * head, wt_base_head / wt_base_head2). Sets *c (-1, 0, 1), *m, *klen as wt_base_cmp_codes, *v
 * = the record's first varint; returns the pointer past the record. */
static inline const uint8_t *wt_base_first(const WtBase *b, uint32_t k, const uint8_t *q, size_t qn,
                                           uint64_t qh, uint64_t qh2, int *c, size_t *m, size_t *klen,
                                           uint32_t *v)
{
    const uint8_t *e = wt_base_ix(b, k), *p = b->blob + wt_ix_off(e);
    uint64_t h1 = wt_ix_h1(e), h2 = wt_ix_h2(e), d;
    uint32_t nc, l;
    size_t j;
    p = wt_base_varint(p, v);
    p = wt_base_varint(p, &nc);
    l = *v >> 1;
    /* j = lcp of the zero-padded heads, then of the real strings' first l bytes */
    d = h1 ^ qh;
    if (d) j = (size_t)(__builtin_clzll(d) >> 3);
    else { d = h2 ^ qh2; j = d ? 8 + (size_t)(__builtin_clzll(d) >> 3) : 16; }
    if (j > qn) j = qn;
    if (j < l) {
        *m = j; *klen = 0;
        if (j == qn) *c = 1;                                    /* q is a proper prefix of key */
        else *c = wt_head_byte(h1, h2, j) < q[j] ? -1 : 1;
        return p + nc;
    }
    *c = wt_base_cmp_codes(b, p, nc, q, qn, l, m, klen);
    return p + nc;
}

typedef struct {
    int64_t pred;     /* index of the greatest key <= q, -1 when none */
    size_t m;         /* lcp(q, key(pred)) */
    int is_prefix;    /* key(pred) == q[:m] (a prefix of q, or q itself when m == qn) */
    int np;           /* the no-prefix flag of pred */
} WtBasePred;

static inline uint32_t wt_base_top_count(uint32_t n_blocks)
{
    return (n_blocks + WT_BASE_TOP_STEP - 1) / WT_BASE_TOP_STEP;
}

/* top: room for 2 x wt_base_top_count(b->n_blocks) words. */
static inline void wt_base_top_fill(const WtBase *b, uint64_t *top)
{
    uint32_t j, n = wt_base_top_count(b->n_blocks);
    for (j = 0; j < n; j++) {
        const uint8_t *e = b->idx + (size_t)j * WT_BASE_TOP_STEP * WT_BASE_IDX;
        top[2 * j] = wt_ix_h1(e);
        top[2 * j + 1] = wt_ix_h2(e);
    }
}

/* k[l..l + 6) as a tie word's low 48 bits (zero padded past n; l <= n): the head of k + l. */
static inline uint64_t wt_tie_win(const uint8_t *k, size_t n, size_t l)
{
    return wt_base_head(k + l, n - l) >> (8 * (8 - WT_TIE_WIN));
}

/* The tie run that starts at block a, -1 when none. */
static __attribute__((noinline, unused)) int64_t wt_tie_find(const WtBase *b, uint32_t a)
{
    uint32_t lo = 0, hi = b->ties_n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (b->ties_start[mid] < a) lo = mid + 1; else hi = mid;
    }
    return (lo < b->ties_n && b->ties_start[lo] == a) ? (int64_t)lo : -1;
}

/* The last block of tie run t whose first key is <= q, else the block before the run (-1 when
 * the run starts at block 0); q's head equals the run's and qn >= 16. Not inlined: few queries
 * take it (0.3 % of the benchmark trace's GETs), and inlined into wt_base_pred it made every
 * other lookup slower (bench_urlstore_get +7 %, paired wheels). */
static __attribute__((noinline, unused)) int64_t wt_tie_scan(const WtBase *b, int64_t t, const uint8_t *q, size_t qn,
                                                          uint64_t qh, uint64_t qh2)
{
    uint32_t s = b->ties_start[t], i0 = b->ties_first[t], i1 = b->ties_first[t + 1], i, l, v;
    size_t m = WT_BASE_HEAD, mm, klen;
    int64_t pred = (int64_t)s - 1;
    int c;
    for (i = i0; i < i1; i++) {
        uint64_t e, w, qw, x;
        if (m < WT_TIE_LMAX) {
            /* the entries that agree with their predecessor beyond m (l > m: a word of at least
             * (m + 1) << 48) are below q as their predecessor is: skipped in a tight loop (a run
             * holds up to hundreds of blocks) */
            uint64_t lim = (uint64_t)(m + 1) << 48;
            uint32_t j = i;
            while (j < i1 && b->ties_ent[j] >= lim) j++;
            if (j > i) {
                pred = (int64_t)s + (j - 1 - i0);
                if (j == i1) break;
                i = j;
            }
            e = b->ties_ent[i];
            l = (uint32_t)(e >> 48);
            if (l < m) break;                                        /* above q */
            /* l == m */
            w = e & 0xFFFFFFFFFFFFull;
            qw = wt_tie_win(q, qn, m);
            x = w ^ qw;
            if (x) {
                uint32_t d = (uint32_t)(__builtin_clzll(x << 16) >> 3);
                uint8_t sb = (uint8_t)(w >> (40 - 8 * d)), qb = (uint8_t)(qw >> (40 - 8 * d));
                if (sb != 0) {
                    if (m + d >= qn || sb > qb) break;   /* q ends there, or its byte is lower */
                    pred = (int64_t)s + (i - i0);        /* below q: lcp m + d exactly */
                    m += d;
                    continue;
                }
            }
        }
        /* the 6 bytes cannot decide: the first key itself */
        wt_base_first(b, s + (i - i0), q, qn, qh, qh2, &c, &mm, &klen, &v);
        if (c > 0) break;
        pred = (int64_t)s + (i - i0);
        if (c == 0) break;
        m = mm;
    }
    return pred;
}

#define WT_IXH1(k) wt_ix_h1(X + (size_t)(k) * WT_BASE_IDX)
#define WT_IXH2(k) wt_ix_h2(X + (size_t)(k) * WT_BASE_IDX)
#define WT_IXLT(k) (WT_IXH1(k) < qh || (WT_IXH1(k) == qh && WT_IXH2(k) < qh2))

/* The greatest key <= q[0..qn). */
static inline void wt_base_pred(const WtBase *b, const uint8_t *q, size_t qn, WtBasePred *r)
{
    uint64_t qh = wt_base_head(q, qn), qh2 = wt_base_head2(q, qn);
    uint32_t lo = 0, hi = b->n_blocks, a, z, k, i, off, endo, tied = 0;
    size_t m, klen, mm;
    const uint8_t *p, *end;
    int c;
    uint32_t v, nc;
    const uint8_t *X = b->idx;
    r->pred = -1; r->m = 0; r->is_prefix = 0; r->np = 0;
    if (b->n == 0) return;
    /* heads: [a, z) are the blocks whose 16-byte head equals q's (lower and upper bound) */
    if (b->top != NULL) {
        /* j = the samples whose head is < q's; the first block whose head is >= q's is in
         * ((j - 1) S, j S] (block (j - 1) S is below q, block j S is not) */
        const uint64_t *T = b->top;
        uint32_t len = b->top_n, base = 0, j, l, h;
        int pf = 0;
        while (len > 1) {
            uint32_t half = len / 2, mid = base + half;
            wt_prefetch_keep(T + 2 * (size_t)(base + half / 2));
            wt_prefetch_keep(T + 2 * (size_t)(mid + half / 2));
            base = (T[2 * mid] < qh || (T[2 * mid] == qh && T[2 * mid + 1] < qh2)) ? mid : base;
            len -= half;
        }
        j = base + (T[2 * base] < qh || (T[2 * base] == qh && T[2 * base + 1] < qh2));
        if (j == 0) {
            a = 0;
        } else {
            l = (j - 1) * WT_BASE_TOP_STEP;
            h = j * WT_BASE_TOP_STEP < b->n_blocks ? j * WT_BASE_TOP_STEP : b->n_blocks;
            for (i = 0; i <= WT_BASE_TOP_STEP * WT_BASE_IDX; i += 64)
                wt_prefetch_keep(X + (size_t)l * WT_BASE_IDX + i);
            while (h - l > 1) {            /* WT_IXLT(l) holds, the answer is in (l, h] */
                uint32_t mid = l + (h - l) / 2;
                if (h - l <= 4 && !pf) {
                    /* the block is one of these 4: fetch their first lines while the last two
                     * steps run (the chosen block's line was a miss after the search) */
                    uint32_t kk;
                    for (kk = l; kk < h; kk++) wt_prefetch_keep(b->blob + wt_ix_off(X + (size_t)kk * WT_BASE_IDX));
                    pf = 1;
                }
                if (WT_IXLT(mid)) l = mid; else h = mid;
            }
            a = h;
        }
    } else {
        uint32_t len = b->n_blocks, base = 0;
        while (len > 1) {
            uint32_t half = len / 2, mid = base + half;
            wt_prefetch_keep(X + (size_t)(base + half / 2) * WT_BASE_IDX);
            wt_prefetch_keep(X + (size_t)(mid + half / 2) * WT_BASE_IDX);
            base = WT_IXLT(mid) ? mid : base;
            len -= half;
        }
        a = base + WT_IXLT(base);
    }
    z = a;
    while (z < b->n_blocks && WT_IXH1(z) == qh && WT_IXH2(z) == qh2) {
        if (z == a && b->ties_n && qn >= WT_BASE_HEAD) {
            /* the first block whose head equals q's: a tie run starts here, or none */
            int64_t t = wt_tie_find(b, a), kk;
            if (t >= 0) {
                kk = wt_tie_scan(b, t, q, qn, qh, qh2);
                if (kk < 0) return;        /* q is below every key */
                tied = (uint32_t)kk + 1;
                break;
            }
        }
        z++;
        if (z - a == 8) {                  /* a long run of equal heads: binary search its end */
            lo = z; hi = b->n_blocks;
            while (lo < hi) {
                uint32_t mid = lo + (hi - lo) / 2;
                if (WT_IXH1(mid) < qh || (WT_IXH1(mid) == qh && WT_IXH2(mid) <= qh2)) lo = mid + 1; else hi = mid;
            }
            z = lo;
            break;
        }
    }
    if (tied) {
        lo = tied;                       /* the tie run's scan found the block */
    } else {
        /* the last block in [a, z) whose first key is <= q, else a - 1 */
        lo = a; hi = z;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            wt_base_first(b, mid, q, qn, qh, qh2, &c, &m, &klen, &v);
            if (c <= 0) lo = mid + 1; else hi = mid;
        }
        if (lo == 0) return;             /* q is below every key */
    }
    k = lo - 1;
    off = wt_ix_off(X + (size_t)k * WT_BASE_IDX);
    endo = wt_ix_off(X + (size_t)(k + 1) * WT_BASE_IDX);
    p = b->blob + off;
    end = b->blob + endo;
    for (i = 64; p + i < end; i += 64) wt_prefetch(p + i);
    /* first key of the block: <= q by the choice of k */
    p = wt_base_first(b, k, q, qn, qh, qh2, &c, &m, &klen, &v);
    r->pred = (int64_t)k * b->block;
    r->m = m; r->np = v & 1;
    r->is_prefix = klen > 0;             /* keys are never empty: decoded to the end = a prefix of q */
    if (c == 0) return;
    i = 1;
    while (p < end) {
        uint32_t l;
        if ((p[0] | p[1]) < 0x80) {       /* both header varints one byte: the common case */
            v = p[0]; nc = p[1]; p += 2;
        } else {
            p = wt_base_varint(p, &v);
            p = wt_base_varint(p, &nc);
        }
        l = v >> 1;
        if (l > m) {                      /* agrees with the previous key beyond q: still < q */
            p += nc;
            r->pred = (int64_t)k * b->block + i;
            r->is_prefix = 0; r->np = v & 1;  /* lcp stays m; longer than m, so not a prefix */
            i++;
            continue;
        }
        if (l < m) break;                 /* leaves the previous key (which equals q there) upwards */
        c = wt_base_cmp_codes(b, p, nc, q, qn, l, &mm, &klen);
        if (c > 0) break;
        p += nc;
        r->pred = (int64_t)k * b->block + i;
        r->m = mm; r->np = v & 1;
        r->is_prefix = klen > 0;
        if (c == 0) return;
        m = mm;
        i++;
    }
}

/* Is q[:b] a component prefix of q (0 < b < qn)? Same rule as ext/url/avl.pyx's _is_boundary: '.'
 * inside the host (not an IPv6 literal), the end of the host, '/' in the path, the first '?'. */
static inline int wt_base_boundary(const uint8_t *q, size_t b, size_t host_end, size_t qpos)
{
    if (b < host_end) return q[b] == '.' && q[0] != '[';
    if (b == host_end) return 1;
    if (b > qpos) return 0;
    return q[b] == '/' || b == qpos;
}

/* The greatest boundary of q that is < t (0 when none). */
static inline size_t wt_base_boundary_below(const uint8_t *q, size_t t, size_t host_end, size_t qpos)
{
    while (t > 1) {
        t--;
        if (wt_base_boundary(q, t, host_end, qpos)) return t;
    }
    return 0;
}

static inline int wt_base_dead(const uint64_t *tomb, int64_t i)
{
    return tomb != NULL && ((tomb[i >> 6] >> (i & 63)) & 1);
}

/* Longest live key (tomb: deleted bits, may be NULL) that equals q or is a prefix of q on a
 * component boundary; -1 when none; *len = its length. An entry p that is a proper prefix of q
 * lies between p and q in key order, so every key in between starts with p: it is pred(q) or a
 * proper prefix of pred(q) no longer than lcp(q, pred). np(pred) = 1 ends the search; else the
 * next candidate is the greatest boundary below, searched the same way (each round shorter). */
static inline int64_t wt_base_lpm(const WtBase *b, const uint64_t *tomb, const uint8_t *q, size_t qn,
                                  int exact_only, size_t *len)
{
    WtBasePred r;
    size_t t = qn, host_end, qpos;
    if (qn == 0 || b->n == 0) return -1;
    wt_base_pred(b, q, qn, &r);
    if (r.pred < 0) return -1;
    if (r.is_prefix && r.m == qn) {
        if (!wt_base_dead(tomb, r.pred)) { *len = qn; return r.pred; }
        if (exact_only) return -1;
    } else if (exact_only) {
        return -1;
    }
    if (!r.is_prefix && r.np) return -1;     /* the usual miss: no boundary work */
    host_end = webtap_host_len(q, qn);
    qpos = host_end;
    while (qpos < qn && q[qpos] != '?') qpos++;
    for (;;) {
        /* r is pred(q[:t]) */
        if (r.is_prefix) {
            if (r.m < qn && wt_base_boundary(q, r.m, host_end, qpos) && !wt_base_dead(tomb, r.pred)) {
                *len = r.m;
                return r.pred;
            }
            if (r.np) return -1;
            t = wt_base_boundary_below(q, r.m, host_end, qpos);
        } else {
            if (r.np) return -1;
            t = wt_base_boundary_below(q, r.m + 1, host_end, qpos);
        }
        if (t == 0) return -1;
        wt_base_pred(b, q, t, &r);
        if (r.pred < 0) return -1;
    }
}

/* Key i into out (cap bytes, cap >= max_key + 8); returns its length. */
static inline ptrdiff_t wt_base_key(const WtBase *b, uint64_t i, uint8_t *out, size_t cap)
{
    uint32_t k = (uint32_t)(i / b->block), j, v, nc, l;
    const uint8_t *p = b->blob + wt_ix_off(wt_base_ix(b, k));
    ptrdiff_t n = 0;
    for (j = 0; j <= (uint32_t)(i % b->block); j++) {
        p = wt_base_varint(p, &v);
        p = wt_base_varint(p, &nc);
        l = v >> 1;
        if (j == 0) wt_head_bytes(wt_base_ix(b, k), l, out);
        n = wt_base_decode_codes(b, p, nc, out, l, cap);
        if (n < 0) return -1;
        p += nc;
    }
    return n;
}

/* Every key in order into data (raw_bytes) with offs[n + 1] (offs[0] = 0); keys whose tomb bit
 * is set are skipped unless keep_dead. Returns the number of keys written. */
static inline uint64_t wt_base_dump(const WtBase *b, const uint64_t *tomb, uint8_t *data, int64_t *offs,
                                    uint64_t *idx, uint8_t *kbuf)
{
    uint32_t k, j, v, nc, l;
    uint64_t i = 0, w = 0;
    ptrdiff_t n = 0;
    int64_t o = 0;
    offs[0] = 0;
    for (k = 0; k < b->n_blocks; k++) {
        const uint8_t *p = b->blob + wt_ix_off(wt_base_ix(b, k)), *end = b->blob + wt_ix_off(wt_base_ix(b, k + 1));
        for (j = 0; p < end; j++, i++) {
            p = wt_base_varint(p, &v);
            p = wt_base_varint(p, &nc);
            l = v >> 1;
            if (j == 0) wt_head_bytes(wt_base_ix(b, k), l, kbuf);
            n = wt_base_decode_codes(b, p, nc, kbuf, l, WT_BASE_MAX_KEY + 16);
            p += nc;
            if (wt_base_dead(tomb, (int64_t)i)) continue;
            memcpy(data + o, kbuf, (size_t)n);
            o += n;
            idx[w] = i;
            offs[++w] = o;
        }
    }
    return w;
}

/* ---- the loader's checks: everything a search or decode relies on ---------------------- */

/* Check an image of size bytes at mem (8-byte aligned) and fill b; NULL or the reason. Decodes
 * every key once: O(image). crc is checked by the caller (Python's zlib). */
const char *wt_base_open(WtBase *b, const uint8_t *mem, size_t size, uint8_t *kbuf,
                                       uint8_t *kbuf2, uint32_t *lens);

/* ---- encoder (build) -------------------------------------------------------------------- */

typedef struct {
    uint8_t sym[256 * 8];
    uint8_t symlen[256];
    int16_t single[256];        /* code of the 1-byte symbol b, -1 when none (escape) */
    uint16_t start[65537];      /* symbols of >= 2 bytes by their first two bytes: */
    uint8_t codes[256];         /* codes[start[p]..start[p + 1]), longest first */
} WtBaseCoder;

/* symbols: codes 0..nsym-1 (nsym <= 255), lengths 1..8. */
static inline void wt_base_coder_init(WtBaseCoder *cd, const uint8_t *sym, const uint8_t *symlen, int nsym)
{
    int c, L;
    uint32_t p, cnt[65536], o = 0;
    memset(cd, 0, sizeof(*cd));
    memset(cnt, 0, sizeof(cnt));
    for (c = 0; c < 256; c++) cd->single[c] = -1;
    for (c = 0; c < nsym && c < 255; c++) {
        cd->symlen[c] = symlen[c];
        memcpy(cd->sym + 8 * c, sym + 8 * c, 8);
        if (symlen[c] == 1 && cd->single[sym[8 * c]] < 0) cd->single[sym[8 * c]] = (int16_t)c;
        if (symlen[c] >= 2) cnt[(uint32_t)sym[8 * c] << 8 | sym[8 * c + 1]]++;
    }
    for (p = 0; p < 65536; p++) { cd->start[p] = (uint16_t)o; o += cnt[p]; cnt[p] = 0; }
    cd->start[65536] = (uint16_t)o;
    for (L = 8; L >= 2; L--)
        for (c = 0; c < nsym && c < 255; c++)
            if (cd->symlen[c] == L) {
                p = (uint32_t)cd->sym[8 * c] << 8 | cd->sym[8 * c + 1];
                cd->codes[cd->start[p] + cnt[p]++] = (uint8_t)c;
            }
}

/* Greedy longest-match code of s[0..n) into out (room for 2n bytes); returns the code bytes. */
static inline size_t wt_base_encode(const WtBaseCoder *cd, const uint8_t *s, size_t n, uint8_t *out)
{
    size_t i = 0, o = 0;
    while (i < n) {
        int done = 0;
        if (i + 1 < n) {
            uint32_t p = (uint32_t)s[i] << 8 | s[i + 1], j;
            for (j = cd->start[p]; j < cd->start[p + 1]; j++) {
                uint8_t c = cd->codes[j];
                uint32_t L = cd->symlen[c];
                if (L <= n - i && memcmp(cd->sym + 8 * (size_t)c + 2, s + i + 2, L - 2) == 0) {
                    out[o++] = c;
                    i += L;
                    done = 1;
                    break;
                }
            }
        }
        if (!done) {
            if (cd->single[s[i]] >= 0) {
                out[o++] = (uint8_t)cd->single[s[i]];
            } else {
                out[o++] = WT_BASE_ESC;
                out[o++] = s[i];
            }
            i++;
        }
    }
    return o;
}

static inline uint8_t *wt_base_put_varint(uint8_t *p, uint32_t v)
{
    while (v >= 0x80) { *p++ = (uint8_t)(v | 0x80); v >>= 7; }
    *p++ = (uint8_t)v;
    return p;
}

/* ---- the delta's filters -------------------------------------------------------------------
 * An entry e that equals q or is a prefix of q on a component boundary is q[:b] for a boundary
 * b of q (wt_base_boundary) or q itself. Each delta run has a filter of its keys' signatures
 * (a hash of the whole key), and the tree one of its keys; a query computes the signatures of
 * its candidate entries, q[:b] for every boundary b and q (one pass over q's bytes, once for all
 * filters), and searches a run or the tree only when the filter may hold one of them (an exact
 * lookup asks for q's alone). The filter is a blocked Bloom filter: a signature sets 3 bits of
 * one 64-bit word, so a probe is one load (~2-3 % false positives at 10 bits per key). Until
 * 2026-11-28 the filters held the first two host labels: on the URL lists most listed queries
 * share those with some delta key (65 % at a 10 % delta), so most lookups searched every run. */
#define WT_PSIG_MAX 64

static inline uint64_t wt_sig_mix(uint64_t h)
{
    h ^= h >> 33; h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33; h *= 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 33);
}

/* Signatures hash 8 bytes at a time (a prefix's last, partial word zero padded), so that the
 * signatures of all of q's prefixes cost one pass over q's words and one step per boundary. */
static inline uint64_t wt_sig_fold(uint64_t h, uint64_t w)
{
    h = (h ^ w) * 0x9E3779B97F4A7C15ULL;
    return h ^ (h >> 32);
}

/* k[c..n) (0 < n - c < 8) as a little-endian word, zero padded; reads k[0..n) only, without a
 * variable-length copy when the key has 8 bytes or more (its last 8 bytes, shifted down). */
static inline uint64_t wt_sig_tail(const uint8_t *k, size_t c, size_t n)
{
    uint64_t x = 0;
    size_t i;
    if (n >= 8) {
        memcpy(&x, k + n - 8, 8);
        return x >> (8 * (8 - (n - c)));
    }
    for (i = n; i > c; i--) x = (x << 8) | k[i - 1];
    return x;
}

#define WT_SIG_SEED 0xcbf29ce484222325ULL

/* The signature of the whole key k. */
static inline uint64_t wt_key_sig(const uint8_t *k, size_t n)
{
    uint64_t h = WT_SIG_SEED, w;
    size_t c = 0;
    for (; c + 8 <= n; c += 8) { memcpy(&w, k + c, 8); h = wt_sig_fold(h, w); }
    if (c < n) h = wt_sig_fold(h, wt_sig_tail(k, c, n));
    return wt_sig_mix(h ^ n);
}

/* 0x80 in each byte of t that is zero (exact: no borrow between bytes). */
static inline uint64_t wt_zero_bytes(uint64_t t)
{
    const uint64_t lo7 = 0x7F7F7F7F7F7F7F7FULL;
    return ~(((t & lo7) + lo7) | t | lo7);
}

static inline uint64_t wt_eq_bytes(uint64_t x, uint8_t c)
{
    return wt_zero_bytes(x ^ (0x0101010101010101ULL * c));
}

/* 0x80 in the bytes [a, 8) of a word (none when a >= 8). */
static inline uint64_t wt_bytes_from(size_t a)
{
    return a >= 8 ? 0 : 0x8080808080808080ULL << (8 * a);
}

/* The path's boundaries in a word x from its byte j on, as 0x80 bytes: with `end`, byte j is
 * the host's end (a boundary itself) and the path starts after it; without, the word lies in
 * the path from byte j = 0. Then each '/' and the first '?' ('?' at the host's end included);
 * after a '?' *state becomes 2 (no boundary follows), else 1. */
static inline uint64_t wt_path_bounds(uint64_t x, size_t j, int end, int *state)
{
    uint64_t m = end ? (uint64_t)0x80 << (8 * j) : 0, t = wt_eq_bytes(x, '?') & wt_bytes_from(j);
    size_t from = end ? j + 1 : j;
    if (t) {
        size_t k = (size_t)(__builtin_ctzll(t) >> 3);
        *state = 2;
        return m | (wt_eq_bytes(x, '/') & wt_bytes_from(from) & ~wt_bytes_from(k)) | ((uint64_t)0x80 << (8 * k));
    }
    *state = 1;
    return m | (wt_eq_bytes(x, '/') & wt_bytes_from(from));
}

/* The signatures of q's candidate entries longer than above bytes (q[:b] for each boundary b >
 * above, then q; above < qn) into sig; their count, or -1 when q has more than WT_PSIG_MAX - 1
 * such boundaries (the caller then searches every run: a filter never drops a candidate). A
 * prefix lookup passes the length of the base's answer: a delta entry can only win by being
 * longer (a key lives in one place), so a base hit on q itself skips the delta, and a hit on a
 * shorter prefix leaves only the boundaries beyond it to probe. Each equals wt_key_sig of that
 * prefix. The boundaries (wt_base_boundary's rule: '.' in a host that is not an IPv6 literal,
 * the host's end, '/' in the path, the first '?') are found 8 bytes at a time in one pass: the
 * host's end is the first ':', '/' or '?' (webtap_host_len; an IPv6 literal's is found first).
 * Every prefix lookup the delta cannot rule out by q's own signature pays this: one pass with
 * no call (no byte loop for the host, no memchr, no variable-length copy) took a benign
 * query's signatures from 53 to 36 ns (docs/urlfilter.md, "Twelfth session"). */
static inline int wt_pfx_sigs(const uint8_t *q, size_t qn, size_t above, uint64_t *sig)
{
    uint64_t h = WT_SIG_SEED, x = 0, m, t;
    size_t c, j, he6 = (qn > 0 && q[0] == '[') ? webtap_host_len(q, qn) : 0;
    int n = 0, state = 0;          /* 0: in the host, 1: in the path, 2: past the first '?' */
    for (c = 0; c < qn; c += 8) {
        size_t r = qn - c < 8 ? qn - c : 8;
        if (r == 8) memcpy(&x, q + c, 8); else x = wt_sig_tail(q, c, qn);
        if (state == 0) {
            if (he6) {                                   /* an IPv6 literal: no '.' boundary */
                m = he6 < c + r ? wt_path_bounds(x, he6 - c, 1, &state) : 0;
            } else {
                t = wt_eq_bytes(x, '/') | wt_eq_bytes(x, '?') | wt_eq_bytes(x, ':');
                if (!t) {
                    m = wt_eq_bytes(x, '.');
                } else {
                    j = (size_t)(__builtin_ctzll(t) >> 3);
                    m = (wt_eq_bytes(x, '.') & ~wt_bytes_from(j)) | wt_path_bounds(x, j, 1, &state);
                }
            }
        } else {
            m = state == 1 ? wt_path_bounds(x, 0, 0, &state) : 0;
        }
        if (c == 0) m &= ~(uint64_t)0x80;                  /* b = 0 is no boundary */
        while (m) {
            j = (size_t)(__builtin_ctzll(m) >> 3);
            m &= m - 1;
            if (c + j <= above) continue;
            if (n == WT_PSIG_MAX - 1) return -1;
            sig[n++] = wt_sig_mix((j ? wt_sig_fold(h, x & ((((uint64_t)1) << (8 * j)) - 1)) : h) ^ (c + j));
        }
        if (r == 8) h = wt_sig_fold(h, x);
    }
    sig[n++] = wt_sig_mix((qn & 7 ? wt_sig_fold(h, x) : h) ^ qn);
    return n;
}

/* The bits of a filter of nbits bits (a multiple of 64): word (s * words) >> 64, bits from s's
 * low 18 bits. */
static inline uint64_t wt_filt_word(uint64_t s, uint64_t nbits)
{
    return (uint64_t)(((unsigned __int128)s * (nbits >> 6)) >> 64);
}

static inline uint64_t wt_filt_mask(uint64_t s)
{
    return ((uint64_t)1 << (s & 63)) | ((uint64_t)1 << ((s >> 6) & 63)) | ((uint64_t)1 << ((s >> 12) & 63));
}

static inline void wt_filt_add(uint64_t *f, uint64_t nbits, const uint8_t *k, size_t n)
{
    uint64_t s = wt_key_sig(k, n);
    f[wt_filt_word(s, nbits)] |= wt_filt_mask(s);
}

/* Which of the filters f[0..nf) (f[i] of nbits[i] bits; nf <= 64) may hold one of
 * sig[0..ns): bit i set (ns < 0: unknown, every one). A prefix lookup asks every delta run's
 * filter and the tree's for each of q's boundaries: one pass over the signatures computes each
 * one's bits once and loads the filters' words independently of each other (asked filter by
 * filter, each pass recomputed the bits and waited on its own branch). */
static inline uint64_t wt_filts_maybe(const uint64_t *const *f, const uint64_t *nbits, int nf,
                                      const uint64_t *sig, int ns)
{
    uint64_t hit = 0, all = nf >= 64 ? ~(uint64_t)0 : ((((uint64_t)1) << nf) - 1), m;
    int i, r;
    if (ns < 0) return all;
    for (i = 0; i < ns && hit != all; i++) {
        m = wt_filt_mask(sig[i]);
        for (r = 0; r < nf; r++)
            hit |= (uint64_t)((f[r][wt_filt_word(sig[i], nbits[r])] & m) == m) << r;
    }
    return hit;
}

#define WT_DFILT_BITS (1u << 17)

/* The section pointers of an image whose layout offsets (wt_base_layout) are known: one home
 * for wt_base_view and wt_base_open. */
static inline void wt_base_bind(WtBase *b, const uint8_t *mem, size_t size, const size_t off[8])
{
    const WtBaseHeader *h = (const WtBaseHeader *)mem;
    b->h = h;
    b->sym = mem + off[0];
    b->symlen = mem + off[1];
    b->palette = (const uint32_t *)(mem + off[2]);
    b->idx = mem + off[3];
    b->payload = (const uint64_t *)(mem + off[5]);
    b->blob = mem + off[6];
    b->n = h->n; b->block = h->block; b->n_blocks = h->n_blocks; b->pal_bits = h->pal_bits;
    b->max_key = h->max_key; b->image_bytes = size;
    b->top = NULL; b->top_n = 0;
    b->ties_n = 0; b->ties_start = b->ties_first = NULL; b->ties_ent = NULL;
}

/* The tie runs of b (WT_TIE_MIN above): with w == NULL, their count into *runs and the words
 * they take as the result (0: none); then, with w holding that many words and *runs as the first
 * call set it, the table itself. kbuf, kbuf2: room for a key each (max_key + 16). The image is
 * one this process built or one wt_base_open accepted. Layout: w[0] runs, w[1] entries, the
 * uint32 starts (runs) and firsts (runs + 1) packed, then the entries. */
size_t wt_base_ties_build(const WtBase *b, uint64_t *w, uint32_t *runs, uint8_t *kbuf, uint8_t *kbuf2);

/* Point b's tie fields at a table wt_base_ties_build wrote (words > 0). */
static inline void wt_base_ties_attach(WtBase *b, const uint64_t *w)
{
    b->ties_n = (uint32_t)w[0];
    b->ties_start = (const uint32_t *)(w + 2);
    b->ties_first = b->ties_start + b->ties_n;
    b->ties_ent = w + 2 + ((size_t)b->ties_n * 2 + 2) / 2;
}

/* The section pointers of an image this process built itself (build_base's output, trusted:
 * no O(n) check, which wt_base_open does for anything read from outside). */
static inline int wt_base_view(WtBase *b, const uint8_t *mem, size_t size)
{
    const WtBaseHeader *h = (const WtBaseHeader *)mem;
    size_t off[8];
    if (size < sizeof(WtBaseHeader) ||
        wt_base_layout(h->n, h->block, h->pal_n, h->pal_bits, h->blob_bytes, off) != 0 || off[7] != size)
        return -1;
    wt_base_bind(b, mem, size, off);
    return 0;
}

#endif
