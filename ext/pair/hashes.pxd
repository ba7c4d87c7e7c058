# Declarations of ext/pair/hashes.h: the paper's three hash equations (Eq. 1, 2, 3 of Vega et al.
# 2017; what each is, in the header). cimported by the pairing table (ext/pair/pairing.pyx), the
# TLS hello table (ext/tls/tls.pyx), the exchange stage (ext/pair/exchange.pyx) and the feeder
# (ext/run/feeder.pyx).
from libc.stdint cimport uint8_t, uint16_t, uint32_t

cdef extern from "hashes.h" nogil:
    uint32_t fold_ip(const uint8_t *a, uint8_t ip_version)
    uint32_t eq1_of(const uint8_t *src_ip, uint16_t src_port, const uint8_t *dst_ip,
                    uint16_t dst_port, uint8_t ip_version)
    uint32_t eq2_hash(const uint8_t *src_ip, uint16_t src_port, const uint8_t *dst_ip,
                      uint16_t dst_port, uint32_t key, uint8_t ip_version)
    uint32_t eq3_of(const uint8_t *src_ip, uint16_t src_port, const uint8_t *dst_ip,
                    uint16_t dst_port, uint8_t ip_version, uint32_t key)
