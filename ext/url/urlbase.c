/* The compiled half of urlbase.h (what the header declares); compiled once into the wtc
 * static library (ext/meson.build), not into each module that includes the header. */
#include "urlbase.h"

const char *wt_base_open(WtBase *b, const uint8_t *mem, size_t size, uint8_t *kbuf,
                                       uint8_t *kbuf2, uint32_t *lens)
{
    const WtBaseHeader *h = (const WtBaseHeader *)mem;
    size_t off[8];
    uint64_t i, nkeys = 0, raw = 0;
    uint32_t k, c, maxk = 0, nl = 0;
    uint8_t *prev = kbuf2, *cur = kbuf, *tmp;
    size_t prevn = 0;
    if (size < sizeof(WtBaseHeader)) return "shorter than its header";
    if (memcmp(h->magic, WT_BASE_MAGIC, 8) != 0) return "not a URL base (magic)";
    if (h->block == 0 || h->block > 4096) return "bad block size";
    if (wt_base_layout(h->n, h->block, h->pal_n, h->pal_bits, h->blob_bytes, off) != 0)
        return "counts out of range";
    if ((uint64_t)h->n_blocks != (h->n + h->block - 1) / h->block) return "block count does not match";
    if (off[7] != size) return "size does not match its header";
    if (h->max_key > WT_BASE_MAX_KEY) return "max_key too large";
    if (h->pal_bits < 32 && h->pal_n > (1u << h->pal_bits) && h->pal_n > 1) return "palette larger than its index width";
    if (h->n > 0 && h->pal_n == 0) return "empty palette";
    wt_base_bind(b, mem, size, off);
    for (c = 0; c < 256; c++)
        if (b->symlen[c] > 8 || (c == WT_BASE_ESC && b->symlen[c] != 0)) return "bad symbol length";
    if (wt_ix_off(wt_base_ix(b, 0)) != 0 || wt_ix_off(wt_base_ix(b, b->n_blocks)) != h->blob_bytes)
        return "block offsets do not cover the records";
    if (wt_ix_h1(wt_base_ix(b, b->n_blocks)) != UINT64_MAX || wt_ix_h2(wt_base_ix(b, b->n_blocks)) != UINT64_MAX)
        return "index end entry wrong";
    for (k = 0; k < b->n_blocks; k++) {
        const uint8_t *p, *end;
        uint32_t cnt = (k + 1 < b->n_blocks) ? b->block : (uint32_t)(h->n - (uint64_t)k * b->block);
        uint32_t o0 = wt_ix_off(wt_base_ix(b, k)), o1 = wt_ix_off(wt_base_ix(b, k + 1));
        if (o1 < o0) return "block offsets decrease";
        /* (checked here, before the block is read: a later block's check comes too late for
         * an offset past the records, which the fuzz target found reading outside the image) */
        if (o1 > h->blob_bytes) return "block offset past the records";
        p = b->blob + o0;
        end = b->blob + o1;
        for (i = 0; i < cnt; i++) {
            uint32_t v, nc, l, pos, mm;
            const uint8_t *ce;
            int np;
            p = wt_base_varint_chk(p, end, &v);
            if (p == NULL) return "record header runs past its block";
            p = wt_base_varint_chk(p, end, &nc);
            if (p == NULL || nc > (size_t)(end - p)) return "record runs past its block";
            l = v >> 1;
            np = v & 1;
            if (i == 0) {
                if (l > WT_BASE_HEAD) return "first key of a block takes more than its head";
                wt_head_bytes(wt_base_ix(b, k), l, cur);
            } else {
                if (l > prevn) return "shared prefix longer than the previous key";
                if (l > 0) memcpy(cur, prev, l);
            }
            pos = l;
            ce = p + nc;
            while (p < ce) {
                c = *p++;
                if (c == WT_BASE_ESC) {
                    if (p >= ce) return "escape at the end of a record";
                    if (pos >= WT_BASE_MAX_KEY) return "key too long";
                    cur[pos++] = *p++;
                } else {
                    uint32_t L = b->symlen[c];
                    if (L == 0) return "unused code";
                    if (pos + L > WT_BASE_MAX_KEY) return "key too long";
                    memcpy(cur + pos, b->sym + 8 * (size_t)c, L);
                    pos += L;
                }
            }
            if (pos == 0) return "empty key";
            if (pos > h->max_key) return "key longer than max_key";
            if (pos > maxk) maxk = pos;
            raw += pos;
            /* strictly ascending, and lcp with the previous key exactly l inside a block */
            mm = 0;
            while (mm < pos && mm < prevn && cur[mm] == prev[mm]) mm++;
            if (nkeys > 0 && !(mm < pos && (mm == prevn || cur[mm] > prev[mm]))) return "keys not ascending";
            if (i > 0 && mm != l) return "shared prefix not the exact lcp";
            if (i == 0 && (wt_ix_h1(wt_base_ix(b, k)) != wt_base_head(cur, pos) ||
                           wt_ix_h2(wt_base_ix(b, k)) != wt_base_head2(cur, pos)))
                return "block head does not match its key";
            /* np exact: the stack of lengths of the entries prev starts with (as in avl's _np_scan) */
            while (nl > 0 && lens[nl - 1] > mm) nl--;
            if (np != (nl == 0)) return "no-prefix flag wrong";
            lens[nl++] = pos;
            if (wt_base_payload_index(b, nkeys) >= (h->pal_n ? h->pal_n : 1)) return "payload index outside the palette";
            tmp = prev; prev = cur; cur = tmp;
            prevn = pos;
            nkeys++;
        }
        if (p != end) return "bytes left at the end of a block";
    }
    if (maxk != h->max_key) return "max_key does not match the keys";
    if (nkeys != h->n) return "key count does not match";
    if (raw != h->raw_bytes) return "raw_bytes does not match the keys";
    return NULL;
}

/* A tie word: lcp l with the previous first key (clamped) and key[l .. l + 6), zero padded. */
static uint64_t wt_tie_word(const uint8_t *k, size_t n, size_t l)
{
    return ((uint64_t)(l < WT_TIE_LMAX ? l : WT_TIE_LMAX) << 48) | wt_tie_win(k, n, l);
}

size_t wt_base_ties_build(const WtBase *b, uint64_t *w, uint32_t *runs, uint8_t *kbuf, uint8_t *kbuf2)
{
    uint32_t k = 0, z, i, nruns = 0;
    uint64_t nent = 0;
    uint32_t *start = NULL, *first = NULL;
    uint64_t *ent = NULL;
    size_t cap = (size_t)b->max_key + 16;
    if (w != NULL) {
        start = (uint32_t *)(w + 2);
        first = start + *runs;
        ent = w + 2 + ((size_t)*runs * 2 + 2) / 2;
    }
    while (k < b->n_blocks) {
        const uint8_t *e = wt_base_ix(b, k);
        uint64_t h1 = wt_ix_h1(e), h2 = wt_ix_h2(e);
        z = k + 1;
        while (z < b->n_blocks && wt_ix_h1(wt_base_ix(b, z)) == h1 && wt_ix_h2(wt_base_ix(b, z)) == h2)
            z++;
        if (z - k >= WT_TIE_MIN) {
            /* every first key of the run at least 16 bytes long and sharing them (keys without
             * zero bytes always do when their heads tie); else the run is left to the search.
             * Pass 0 checks, pass 1 writes the words (the fill call only). */
            int pass, ok = 1;
            for (pass = 0; pass < (w != NULL ? 2 : 1) && ok; pass++) {
                uint8_t *prev = kbuf, *cur = kbuf2, *tmp;
                ptrdiff_t pn = wt_base_key(b, (uint64_t)k * b->block, prev, cap), cn;
                if (pn < WT_BASE_HEAD) { ok = 0; break; }
                if (pass) ent[nent] = wt_tie_word(prev, (size_t)pn, WT_BASE_HEAD);
                for (i = k + 1; i < z; i++) {
                    size_t l = 0;
                    cn = wt_base_key(b, (uint64_t)i * b->block, cur, cap);
                    if (cn < WT_BASE_HEAD) { ok = 0; break; }
                    while (l < (size_t)pn && l < (size_t)cn && prev[l] == cur[l]) l++;
                    if (l < WT_BASE_HEAD) { ok = 0; break; }
                    if (pass) ent[nent + (i - k)] = wt_tie_word(cur, (size_t)cn, l);
                    tmp = prev; prev = cur; cur = tmp; pn = cn;
                }
            }
            if (ok) {
                if (w != NULL) {
                    start[nruns] = k;
                    first[nruns] = (uint32_t)nent;
                }
                nruns++;
                nent += z - k;
            }
        }
        k = z;
    }
    if (w == NULL) *runs = nruns;
    if (nruns == 0) return 0;
    if (w != NULL) {
        first[nruns] = (uint32_t)nent;
        w[0] = nruns;
        w[1] = nent;
    }
    return 2 + ((size_t)nruns * 2 + 2) / 2 + (size_t)nent;
}
