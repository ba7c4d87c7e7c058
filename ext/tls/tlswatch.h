/* The TLS stage's watch list, read by the dissector's walk (ext/walk/dissect.pyx): the flows (one
 * direction) whose split hello the stage is reassembling, so that the one pass over the packets
 * hands the stage their next segments as MSG_TLS messages (ext/walk/message.pxd) even when those
 * do not start a hello. A set of 64-bit flow hashes (open addressing, 0 = empty): a false
 * positive only hands the stage a segment it ignores. The dissector adds the flow of every hello
 * start that does not end in its first record and segment (the stage may start reassembling it
 * while the batch is still being walked); the stage rebuilds the set from its reassembly table
 * after each batch. When more flows arrive in one batch than the set takes, `overflow` makes the
 * walk hand over every TCP payload until the next rebuild (correct, only slower).
 * Few-line helpers of the per-packet walk: static inline here, declared for Cython in
 * ext/tls/tls.pxd. */
#ifndef WEBTAP_TLSWATCH_H
#define WEBTAP_TLSWATCH_H

#include <stdint.h>

#include "tls_hello.h"

typedef struct {
    uint64_t *keys;             /* cap slots */
    uint32_t cap;               /* a power of two */
    uint32_t n;                 /* slots in use */
    uint32_t overflow;          /* 1: hand every TCP payload to the stage */
    uint64_t udp;               /* UDP datagrams the walk located (the stage reads and clears it) */
} TlsWatch;

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

static inline void tls_watch_add(TlsWatch *w, uint64_t k) {
    uint32_t m = w->cap - 1, i = (uint32_t)(k ^ (k >> 32)) & m;
    if (w->overflow)
        return;
    while (w->keys[i]) {
        if (w->keys[i] == k)
            return;
        i = (i + 1) & m;
    }
    if (2 * (w->n + 1) > w->cap) {
        w->overflow = 1;        /* at most half full: probes stay short */
        return;
    }
    w->keys[i] = k;
    w->n += 1;
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
