/* Expected message boundaries: see segbound.h. */
#include <stdlib.h>
#include <string.h>

#include "segbound.h"

void wt_sb_init(wt_sb *t, uint32_t capacity, int64_t timeout_ns) {
    uint32_t sets = 1;
    memset(t, 0, sizeof(*t));
    t->timeout_ns = timeout_ns;
    if (capacity == 0)
        return;
    while ((uint64_t)sets * WT_SB_WAYS < capacity && sets < (1u << 24))
        sets <<= 1;
    t->sets = sets;
}

void wt_sb_free(wt_sb *t) {
    free(t->e);
    free(t->tags);
    free(t->pend);
    t->e = NULL;
    t->tags = NULL;
    t->pend = NULL;
    t->live = 0;
}

static inline void pend_add(wt_sb *t, const wt_sb_entry *e, int d) {
    uint32_t q;
    if (e->h == 0 || e->used)
        return;                            /* only occupied, unused entries are counted */
    q = wt_sb_quick(e->src, e->dst, e->sport, e->dport, e->ver);
    t->pend[q] += (uint32_t)d;
}

void wt_sb_use(wt_sb *t, wt_sb_entry *e, uint32_t origin_end) {
    pend_add(t, e, -1);
    e->used = 1;
    e->origin_end = origin_end;
}

static inline uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h;
}

uint64_t wt_sb_hash(const uint8_t *src, const uint8_t *dst, uint16_t sport, uint16_t dport,
                    uint8_t ver) {
    uint64_t a[4] = {0, 0, 0, 0}, h = ver;
    size_t n = ver == 4 ? 4 : 16;
    memcpy((uint8_t *)a, src, n);
    memcpy((uint8_t *)a + 16, dst, n);
    h = mix(h, ((uint64_t)sport << 16) | dport);
    for (int i = 0; i < 4; i++)
        h = mix(h, a[i] * 0xff51afd7ed558ccdULL);
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h | 1;                 /* never 0 (an empty slot); the set index takes bits 40.. */
}

static inline int same_key(const wt_sb_entry *e, uint64_t h, const uint8_t *src, const uint8_t *dst,
                           uint16_t sport, uint16_t dport, uint8_t ver) {
    size_t n = ver == 4 ? 4 : 16;
    return e->h == h && e->sport == sport && e->dport == dport && e->ver == ver
           && memcmp(e->src, src, n) == 0 && memcmp(e->dst, dst, n) == 0;
}

static inline int expired(const wt_sb *t, const wt_sb_entry *e, int64_t now) {
    return now > e->ts_ns && now - e->ts_ns >= t->timeout_ns;
}

wt_sb_entry *wt_sb_find(wt_sb *t, uint64_t h, const uint8_t *src, const uint8_t *dst,
                        uint16_t sport, uint16_t dport, uint8_t ver, int64_t now) {
    wt_sb_entry *set;
    const uint64_t *tg;
    size_t base;
    if (t->e == NULL || t->live == 0)
        return NULL;
    base = (size_t)((h >> 40) & (t->sets - 1)) * WT_SB_WAYS;
    set = t->e + base;
    tg = t->tags + base;
    for (int i = 0; i < WT_SB_WAYS; i++) {
        if (tg[i] == h && same_key(&set[i], h, src, dst, sport, dport, ver)) {
            if (expired(t, &set[i], now)) {
                wt_sb_drop(t, &set[i]);
                return NULL;
            }
            return &set[i];
        }
    }
    return NULL;
}

int wt_sb_put(wt_sb *t, uint64_t h, const uint8_t *src, const uint8_t *dst, uint16_t sport,
              uint16_t dport, uint8_t ver, uint32_t seq, uint32_t origin_end, int64_t now) {
    wt_sb_entry *set, *slot = NULL;
    uint64_t *tg;
    size_t base;
    int evicted = 0;
    size_t n = ver == 4 ? 4 : 16;
    if (t->sets == 0 || t->e == NULL || t->tags == NULL || t->pend == NULL)
        return -1;                        /* a table of no room */
    base = (size_t)((h >> 40) & (t->sets - 1)) * WT_SB_WAYS;
    set = t->e + base;
    tg = t->tags + base;
    for (int i = 0; i < WT_SB_WAYS; i++) {
        if (tg[i] == h && same_key(&set[i], h, src, dst, sport, dport, ver)) {
            slot = &set[i];
            break;
        }
    }
    if (slot == NULL) {
        for (int i = 0; i < WT_SB_WAYS && slot == NULL; i++)
            if (tg[i] == 0)
                slot = &set[i];
        for (int i = 0; i < WT_SB_WAYS && slot == NULL; i++)
            if (expired(t, &set[i], now) || set[i].used)
                slot = &set[i];
        if (slot == NULL) {
            slot = &set[0];
            for (int i = 1; i < WT_SB_WAYS; i++)
                if (set[i].ts_ns < slot->ts_ns)
                    slot = &set[i];
            evicted = 1;
        }
        if (slot->h == 0)
            t->live++;
    }
    pend_add(t, slot, -1);                 /* what the slot held, if unused */
    memset(slot, 0, sizeof(*slot));
    slot->h = h;
    slot->ts_ns = now;
    slot->seq = seq;
    slot->origin_end = origin_end;
    slot->sport = sport;
    slot->dport = dport;
    slot->ver = ver;
    memcpy(slot->src, src, n);
    memcpy(slot->dst, dst, n);
    t->tags[slot - t->e] = h;
    pend_add(t, slot, 1);
    return evicted;
}

void wt_sb_drop(wt_sb *t, wt_sb_entry *e) {
    if (e->h != 0 && t->live > 0)
        t->live--;
    pend_add(t, e, -1);
    t->tags[e - t->e] = 0;
    memset(e, 0, sizeof(*e));
}
