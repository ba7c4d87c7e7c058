/* The TLS stage's watch list, read by the dissector's walk (ext/walk/dissect.pyx): the flows (one
 * direction) whose split hello the stage is reassembling, so that the one pass over the packets
 * hands the stage their next segments as MSG_TLS messages (ext/walk/message.pxd) even when those
 * do not start a hello. A set of 64-bit flow hashes (open addressing, 0 = empty): a false
 * positive only hands the stage a segment it ignores.
 *
 * Two threads may share it: the walk may run ahead of the stage (webtap.pipeline's readahead
 * executor walks in a thread of its own). The set is the walk's: only the walking thread reads
 * and writes `keys`, `gens`, `n`, `overflow`. The walk adds the flow of every hello start that
 * does not end in its first record and segment, tagged with the number of the batch it walks
 * (`gens`: the stage may start reassembling it while that batch is still ahead of it). After
 * each batch the stage *publishes* the flows it reassembles (tls_watch_publish_*, under `lock`);
 * before each batch the walk takes the newest publication (tls_watch_begin): it keeps the flows
 * the stage reassembles and every flow added in a batch the stage has not yet seen, and drops
 * the rest. So a flow leaves the set only once the stage has seen every batch that added it and
 * no longer reassembles it; walked in step (inline), this is the stage's own set, as before.
 * When more flows arrive than the set takes, `overflow` makes the walk hand over every TCP
 * payload (correct, only slower) until the stage has seen every batch walked meanwhile.
 * Few-line helpers of the per-packet walk: static inline here, declared for Cython in
 * ext/tls/tls.pxd; the rest in tlswatch.c. */
#ifndef WEBTAP_TLSWATCH_H
#define WEBTAP_TLSWATCH_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdint.h>

#include "tls_hello.h"

typedef struct {
    /* the walk's (its thread only) */
    uint64_t *keys;             /* cap slots */
    uint64_t *gens;             /* cap slots: the walked batch that last added the key */
    uint64_t *spare;            /* cap slots: survivors while the set is rebuilt */
    uint32_t cap;               /* a power of two */
    uint32_t n;                 /* slots in use */
    uint32_t overflow;          /* 1: hand every TCP payload to the stage */
    uint64_t overflow_gen;      /* the last batch walked while overflow was set */
    uint64_t walked;            /* batches begun by the walk (1-based numbers of the batches) */
    uint64_t udp;               /* UDP datagrams the walk located (atomic: the stage takes them) */
    /* the stage's publication (under lock) */
    pthread_mutex_t lock;
    uint64_t *pub;              /* cap / 2 keys at most */
    uint32_t pub_n;
    uint32_t pub_full;          /* the stage had more flows than the set takes */
    uint32_t pub_new;           /* not yet taken by the walk */
    uint64_t fed;               /* batches the stage has finished (numbered as the walk's) */
    uint64_t pub_gen;           /* the publication is the stage's set after batch pub_gen */
} TlsWatch;

/* 0, or -1 with MemoryError set (nothing to free then). cap: at least min_cap, a power of two. */
int tls_watch_init(TlsWatch *w, uint32_t min_cap);
void tls_watch_free(TlsWatch *w);
/* A watch list in a block of its own (tls_watch_init), NULL with MemoryError set. */
TlsWatch *tls_watch_new(uint32_t min_cap);
/* The capsule ("webtap.TlsWatch") that hands w to the walk, and owns it: w is freed with the
 * capsule's last reference, not with the stage that publishes into it, so a capsule kept after
 * its stage (a MessageBatch's tls_watch, a caller's variable) never points at freed memory.
 * NULL with an exception set, w freed then. */
PyObject *tls_watch_capsule(TlsWatch *w);
/* The walk, before each batch it walks with this set: takes the stage's newest publication. */
void tls_watch_begin(TlsWatch *w);
/* The stage, after each batch it has finished: begin, one add per flow it reassembles, end. */
void tls_watch_publish_begin(TlsWatch *w);
void tls_watch_publish_add(TlsWatch *w, uint64_t k);
void tls_watch_publish_end(TlsWatch *w);

/* One direction of a flow (addresses 4 or 16 bytes as ipv says) -> nonzero 64-bit hash. */
static inline uint64_t tls_flow_hash(const uint8_t *src, uint16_t sport, const uint8_t *dst,
                                     uint16_t dport, uint8_t ipv) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (((uint64_t)sport << 16) | dport) ^ ((uint64_t)ipv << 40);
    int i, n = ipv == 4 ? 4 : 16;
    for (i = 0; i < n; i++)
        h = (h ^ src[i]) * 0x100000001B3ULL;
    for (i = 0; i < n; i++)
        h = (h ^ dst[i]) * 0x100000001B3ULL;
    h ^= h >> 29;
    return h ? h : 1;
}

static inline int tls_watch_has(const TlsWatch *w, uint64_t k) {
    uint32_t m = w->cap - 1, i = (uint32_t)(k ^ (k >> 32)) & m;
    while (w->keys[i]) {
        if (w->keys[i] == k)
            return 1;
        i = (i + 1) & m;
    }
    return 0;
}

/* Add (or re-tag) k with generation g; 0, or -1 when the set is half full (not added). */
static inline int tls_watch_put(TlsWatch *w, uint64_t k, uint64_t g) {
    uint32_t m = w->cap - 1, i = (uint32_t)(k ^ (k >> 32)) & m;
    while (w->keys[i]) {
        if (w->keys[i] == k) {
            if (g > w->gens[i])
                w->gens[i] = g;
            return 0;
        }
        i = (i + 1) & m;
    }
    if (2 * (w->n + 1) > w->cap)
        return -1;              /* at most half full: probes stay short */
    w->keys[i] = k;
    w->gens[i] = g;
    w->n += 1;
    return 0;
}

/* The walk: the flow k starts a hello in the batch being walked. */
static inline void tls_watch_add(TlsWatch *w, uint64_t k) {
    if (w->overflow)
        return;
    if (tls_watch_put(w, k, w->walked) != 0) {
        w->overflow = 1;
        w->overflow_gen = w->walked;
    }
}

static inline void tls_watch_udp_add(TlsWatch *w, uint64_t n) {
    __atomic_fetch_add(&w->udp, n, __ATOMIC_RELAXED);
}

/* The stage: the UDP datagrams the walk located since the last call. */
static inline uint64_t tls_watch_udp_take(TlsWatch *w) {
    return __atomic_exchange_n(&w->udp, 0, __ATOMIC_RELAXED);
}

/* Whether the hello starting p[0:n] (a handshake record at offset 0, or an SSLv2-format
 * ClientHello) ends inside its first record and inside these bytes: then the stage never
 * reassembles it (an SSLv2 hello is never reassembled: it always "fits"). */
static inline int tls_hello_fits(const uint8_t *p, uint32_t n) {
    uint32_t rl;
    if (n > 0 && (p[0] & 0x80))
        return 1;
    if (n < 9)
        return 0;
    rl = tls_be16(p + 3);
    return 5 + rl <= n && 4 + tls_be24(p + 6) <= rl;
}

#endif
