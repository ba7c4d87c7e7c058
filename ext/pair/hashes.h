/* The paper's three hash equations (Vega et al. 2017, section 2.1), their one home. Each is a
 * XOR over the 4-tuple, so a request and its response (the tuple reversed) give the same value:
 *   Eq. 1  srcIP ^ srcPort ^ dstIP ^ dstPort                       (flow hash)
 *   Eq. 2  Eq. 1 ^ key                                             (the pairing table's cell)
 *   Eq. 3  Eq. 1 ^ key ^ (key's four bytes XOR'ed together)        (the feeder's consumer)
 * key: the ACK of a request, the SEQ of a response (the number the pairing condition compares).
 * Addresses are in the HttpMsg layout (IPv4 in bytes 0-3). Few-line helpers of the per-message
 * loops, so static inline here (declared for Cython in ext/pair/hashes.pxd); used by the pairing
 * table (ext/pair/pairing.pyx), the TLS hello table (ext/tls/tls.pyx), the exchange stage and the
 * feeder (ext/run/feeder.pyx); the live fanout writes Eq. 3 as classic BPF (ext/read/afpacket.h),
 * checked against this one by tests. */
#ifndef WEBTAP_HASHES_H
#define WEBTAP_HASHES_H

#include <stdint.h>

#include "util.h"

/* An address folded to 32 bits: IPv4 is bytes 0-3 (big-endian), IPv6 the XOR of its four
 * big-endian 32-bit words. */
static inline uint32_t fold_ip(const uint8_t *a, uint8_t ip_version) {
    uint32_t h = wt_be32(a);
    if (ip_version == 6)
        h ^= wt_be32(a + 4) ^ wt_be32(a + 8) ^ wt_be32(a + 12);
    return h;
}

/* Eq. 1: srcIP ^ srcPort ^ dstIP ^ dstPort. */
static inline uint32_t eq1_of(const uint8_t *src_ip, uint16_t src_port, const uint8_t *dst_ip,
                              uint16_t dst_port, uint8_t ip_version) {
    return fold_ip(src_ip, ip_version) ^ src_port ^ fold_ip(dst_ip, ip_version) ^ dst_port;
}

/* Eq. 2: Eq. 1 ^ (ACK of a request | SEQ of a response). */
static inline uint32_t eq2_hash(const uint8_t *src_ip, uint16_t src_port, const uint8_t *dst_ip,
                                uint16_t dst_port, uint32_t key, uint8_t ip_version) {
    return eq1_of(src_ip, src_port, dst_ip, dst_port, ip_version) ^ key;
}

/* Eq. 3: Eq. 2 ^ (key's four bytes XOR'ed together); folding the bytes stirs the low bits that
 * the modulo (consumer = Eq. 3 mod N) keeps. */
static inline uint32_t eq3_of(const uint8_t *src_ip, uint16_t src_port, const uint8_t *dst_ip,
                              uint16_t dst_port, uint8_t ip_version, uint32_t key) {
    uint32_t fold = (key ^ (key >> 8) ^ (key >> 16) ^ (key >> 24)) & 0xFF;
    return eq2_hash(src_ip, src_port, dst_ip, dst_port, key, ip_version) ^ fold;
}

#endif
