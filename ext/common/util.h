/* The small C helpers every extension module uses, in one place (declared for Cython in
 * ext/common/util.pxd, which adds the checked allocator). Each exists once: a module that needs a
 * prefetch, a clock, a byte-order read, a UTF-8 check or an address as text uses these.
 */
#ifndef WEBTAP_UTIL_H
#define WEBTAP_UTIL_H

#include <arpa/inet.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* Prefetch for reading. wt_prefetch: data read once while streaming through a buffer (packets
 * of a capture batch, the bytes ahead of a file reader): no temporal locality, so it does not
 * push out what stays hot. wt_prefetch_keep: data read again soon (tree nodes of a lockstep
 * descent): kept in every cache level. */
#define wt_prefetch(p) __builtin_prefetch((const void *)(p), 0, 0)
#define wt_prefetch_keep(p) __builtin_prefetch((const void *)(p), 0, 3)

/* CLOCK_MONOTONIC in nanoseconds: timeouts, stall times, per-query timings (never a capture
 * time stamp: those come from the packets). */
static inline int64_t wt_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Whether two 16-byte address fields are equal (IPv4 in the first 4 bytes and zeros after, as
 * every record kind stores it, so one rule for both versions): two 8-byte loads a side, where
 * memcmp with a length chosen at run time is a call into libc (the exchange stage's connection
 * lookup spent 4 ms of a TLS bench run in it). */
static inline int wt_eq16(const uint8_t *a, const uint8_t *b) {
    uint64_t a0, a1, b0, b1;
    memcpy(&a0, a, 8);
    memcpy(&a1, a + 8, 8);
    memcpy(&b0, b, 8);
    memcpy(&b1, b + 8, 8);
    return ((a0 ^ b0) | (a1 ^ b1)) == 0;
}

/* Network byte order (big endian) reads of unaligned bytes, and the little-endian ones. */
static inline uint16_t wt_be16(const uint8_t *p) { return (uint16_t)(((uint16_t)p[0] << 8) | p[1]); }
static inline uint32_t wt_be24(const uint8_t *p) {
    return ((uint32_t)p[0] << 16) | ((uint32_t)p[1] << 8) | p[2];
}
static inline uint32_t wt_be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline uint16_t wt_le16(const uint8_t *p) { return (uint16_t)(((uint16_t)p[1] << 8) | p[0]); }
static inline uint32_t wt_le32(const uint8_t *p) {
    return ((uint32_t)p[3] << 24) | ((uint32_t)p[2] << 16) | ((uint32_t)p[1] << 8) | p[0];
}

/* Reads in a file's own byte order (pcap / pcapng headers): the host's, byte-swapped when
 * `swap` (the file was written on a machine of the other endianness). */
static inline uint16_t wt_rd16(const uint8_t *p, int swap) {
    uint16_t v; memcpy(&v, p, 2); return swap ? __builtin_bswap16(v) : v; }
static inline uint32_t wt_rd32(const uint8_t *p, int swap) {
    uint32_t v; memcpy(&v, p, 4); return swap ? __builtin_bswap32(v) : v; }
static inline uint64_t wt_rd64(const uint8_t *p, int swap) {
    uint64_t v; memcpy(&v, p, 8); return swap ? __builtin_bswap64(v) : v; }

/* Length (1-4) of the well-formed UTF-8 sequence at p, of which `avail` bytes exist; 0 when p
 * does not start one (RFC 3629: no overlong forms, no UTF-16 surrogates, nothing above
 * U+10FFFF). The text repairs (dissector spans, pairing's record columns) replace what this
 * refuses, one byte at a time. */
static inline size_t wt_utf8_seq(const uint8_t *p, size_t avail) {
    uint8_t b = p[0];
    size_t n, i;
    if (b < 0x80)
        return 1;
    if (b >= 0xC2 && b <= 0xDF)
        n = 2;
    else if (b >= 0xE0 && b <= 0xEF)
        n = 3;
    else if (b >= 0xF0 && b <= 0xF4)
        n = 4;
    else
        return 0;
    if (avail < n)
        return 0;
    for (i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80)
            return 0;
    if (b == 0xE0 && p[1] < 0xA0) return 0;   /* overlong */
    if (b == 0xED && p[1] > 0x9F) return 0;   /* UTF-16 surrogate */
    if (b == 0xF0 && p[1] < 0x90) return 0;   /* overlong */
    if (b == 0xF4 && p[1] > 0x8F) return 0;   /* above U+10FFFF */
    return n;
}

/* v in decimal at out (at most 10 bytes, no NUL); returns the number of bytes written. */
static inline size_t wt_u32_dec(uint32_t v, char *out) {
    char t[10];
    size_t k = 0, i;
    do { t[k++] = (char)('0' + v % 10); v /= 10; } while (v);
    for (i = 0; i < k; i++) out[i] = t[k - 1 - i];
    return k;
}

/* Room for an address as text, NUL included (INET6_ADDRSTRLEN). */
#define WT_IP_TEXT 46

/* Whether two 16-byte address fields of HttpMsg (IPv4 in bytes 0-3, zeros after) are equal (the
 * pairing table's and the feeder's one comparison; Cython: ext/walk/message.pxd same_ip). */
static inline int wt_same_ip(const uint8_t *a, const uint8_t *b) {
    return memcmp(a, b, 16) == 0;
}

/* The dotted quad of 4 bytes at ip into out; returns its length (no NUL). */
static inline size_t wt_ip4_text(const uint8_t *ip, char *out) {
    size_t n = 0;
    int i;
    for (i = 0; i < 4; i++) {
        uint8_t b = ip[i];
        if (b >= 100)
            out[n++] = (char)('0' + b / 100);
        if (b >= 10)
            out[n++] = (char)('0' + (b / 10) % 10);
        out[n++] = (char)('0' + b % 10);
        out[n++] = '.';
    }
    return n - 1;
}

/* An address in the HttpMsg layout (IPv4 in bytes 0-3) as text into out[WT_IP_TEXT], NUL
 * terminated; returns its length. IPv6 in RFC 5952 form, written here character for character as
 * glibc's inet_ntop writes it (which formatted it before: its sprintf per group was ~4 % of the TLS
 * stage's TCP path and 350 ns per address of a record table): groups in lower-case hex without
 * leading zeros, the first longest run of two or more zero groups as "::", and the last 32 bits
 * as a dotted quad when the first 96 are ::ffff:0:0/96 (IPv4-mapped) or zero with a non-zero
 * seventh group (IPv4-compatible, "::a.b.c.d"). tests/outputs/test_ip_text.py checks it against
 * socket.inet_ntop. */
static inline size_t wt_ip_text(const uint8_t *ip, int v6, char *out) {
    static const char hex[] = "0123456789abcdef";
    uint16_t w[8];
    int i, best = -1, best_len = 0, cur = -1, cur_len = 0;
    size_t n = 0;
    if (!v6) {
        n = wt_ip4_text(ip, out);
        out[n] = 0;
        return n;
    }
    for (i = 0; i < 8; i++) {
        w[i] = (uint16_t)((ip[2 * i] << 8) | ip[2 * i + 1]);
        if (w[i] == 0) {
            if (cur < 0) {
                cur = i;
                cur_len = 1;
            } else {
                cur_len++;
            }
        } else if (cur >= 0) {
            if (best < 0 || cur_len > best_len) {
                best = cur;
                best_len = cur_len;
            }
            cur = -1;
        }
    }
    if (cur >= 0 && (best < 0 || cur_len > best_len)) {
        best = cur;
        best_len = cur_len;
    }
    if (best >= 0 && best_len < 2)
        best = -1;
    for (i = 0; i < 8; i++) {
        if (best >= 0 && i >= best && i < best + best_len) {
            if (i == best)
                out[n++] = ':';
            continue;
        }
        if (i != 0)
            out[n++] = ':';
        if (i == 6 && best == 0 && (best_len == 6 || (best_len == 5 && w[5] == 0xffff))) {
            n += wt_ip4_text(ip + 12, out + n);
            out[n] = 0;
            return n;
        }
        {
            uint16_t v = w[i];
            if (v >= 0x1000)
                out[n++] = hex[v >> 12];
            if (v >= 0x100)
                out[n++] = hex[(v >> 8) & 15];
            if (v >= 0x10)
                out[n++] = hex[(v >> 4) & 15];
            out[n++] = hex[v & 15];
        }
    }
    if (best >= 0 && best + best_len == 8)
        out[n++] = ':';
    out[n] = 0;
    return n;
}

#endif
