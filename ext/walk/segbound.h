/* Expected message boundaries (issue 31): where, in a TCP flow direction, the next HTTP message
 * starts when the message before it told its whole length in its first packet (header block
 * ending there, Content-Length or no body) but continues past that packet. The dissector
 * (ext/walk/dissect.pyx) keeps one boundary per flow direction here and looks at the later
 * segment whose [seq, seq + len) holds it.
 *
 * A bounded set-associative table: WT_SB_WAYS slots per set, chosen by a hash of the direction's
 * addresses and ports; a slot holds the whole key (no false match), the boundary SEQ, the
 * capture time it was made and whether it was used. Memory is fixed at the capacity (zeroed
 * pages, touched as entries are made); when a set is full, an expired entry (capture time >= timeout old), else
 * the oldest is replaced (counted as evicted when it was live and unused). Work per lookup:
 * one hash and at most WT_SB_WAYS key comparisons. No locking: one walk owns a table. */
#ifndef WT_SEGBOUND_H
#define WT_SEGBOUND_H

#include <stdint.h>
#include <string.h>

#define WT_SB_WAYS 8

typedef struct {
    uint64_t h;          /* key hash | 1 (0: an empty slot) */
    int64_t ts_ns;       /* capture time of the packet that made (or last confirmed) the entry */
    uint32_t seq;        /* the boundary: SEQ of the next message's first byte */
    uint32_t origin_end; /* SEQ just past the segment that made the entry: a packet of the
                            direction that starts before it is an older one (a copy) */
    uint16_t sport, dport;
    uint8_t src[16], dst[16];  /* IPv4 in the first 4 bytes, zeros after */
    uint8_t ver;
    uint8_t used;        /* a segment holding the boundary was looked at: kept so that copies
                            (retransmitted segments, a retransmitted first packet) do nothing */
    uint8_t _pad[2];
} wt_sb_entry;

typedef struct {
    wt_sb_entry *e;      /* NULL until the first entry */
    uint64_t *tags;      /* each slot's key hash (0: empty), a set's 8 in one cache line: a
                            lookup reads that line and the matching entry only */
    uint32_t *pend;      /* WT_SB_QUICK counters: unused entries per quick hash (wt_sb_maybe) */
    uint32_t sets;       /* a power of two; 0: the table keeps nothing */
    uint32_t live;       /* occupied slots */
    int64_t timeout_ns;  /* capture time after which an entry is stale */
} wt_sb;

#define WT_SB_QUICK 16384

/* A cheap hash of a direction (ports, the addresses' last four bytes): which counter of pend. */
static inline uint32_t wt_sb_quick(const uint8_t *src, const uint8_t *dst, uint16_t sport,
                                   uint16_t dport, uint8_t ver) {
    uint32_t a, b, o = ver == 4 ? 0 : 12;
    memcpy(&a, src + o, 4);
    memcpy(&b, dst + o, 4);
    return ((a * 0x9E3779B1u) ^ (b * 0x85EBCA77u) ^ (((uint32_t)sport << 16 | dport) * 0xC2B2AE3Du))
           >> 18;
}

/* Whether the direction may have an unused entry (no false "no"): the walk asks this before
 * hashing a segment that starts no message, so that most segments cost a few instructions. */
static inline int wt_sb_maybe(const wt_sb *t, const uint8_t *src, const uint8_t *dst,
                              uint16_t sport, uint16_t dport, uint8_t ver) {
    return t->pend != NULL && t->pend[wt_sb_quick(src, dst, sport, dport, ver)] != 0;
}

/* Mark an entry used (a segment holding its boundary was looked at), from the segment ending
 * at SEQ origin_end. */
void wt_sb_use(wt_sb *t, wt_sb_entry *e, uint32_t origin_end);

/* capacity entries (rounded up to a power-of-two multiple of WT_SB_WAYS; 0: none kept). The
 * owner then gives e (sets * WT_SB_WAYS entries), tags (as many uint64_t) and pend (WT_SB_QUICK
 * uint32_t), zeroed, from the checked allocator (ext/common/util.pxd wt_zalloc); wt_sb_free
 * frees them. */
void wt_sb_init(wt_sb *t, uint32_t capacity, int64_t timeout_ns);
void wt_sb_free(wt_sb *t);
uint64_t wt_sb_hash(const uint8_t *src, const uint8_t *dst, uint16_t sport, uint16_t dport,
                    uint8_t ver);
/* The direction's entry, or NULL; an expired one (now - ts_ns >= timeout) is removed first. */
wt_sb_entry *wt_sb_find(wt_sb *t, uint64_t h, const uint8_t *src, const uint8_t *dst,
                        uint16_t sport, uint16_t dport, uint8_t ver, int64_t now);
/* Keep the boundary seq for the direction (replacing its entry), made by the segment that
 * ends at SEQ origin_end. Returns 1 when a live, unused entry of another direction was evicted
 * to make room, 0 when kept without that, -1 when not kept (a table of no room, no memory). */
int wt_sb_put(wt_sb *t, uint64_t h, const uint8_t *src, const uint8_t *dst, uint16_t sport,
              uint16_t dport, uint8_t ver, uint32_t seq, uint32_t origin_end, int64_t now);
void wt_sb_drop(wt_sb *t, wt_sb_entry *e);

#endif
