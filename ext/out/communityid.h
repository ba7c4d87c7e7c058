/* Community ID v1 of one flow (Corelight's spec, "Community ID Flow Hashing"):
 *
 *     "1:" + base64(SHA-1(seed . saddr . daddr . proto . 0 . sport . dport))
 *
 * The endpoints are ordered first (the smaller (address, port) goes first), so both directions
 * of a flow get the same id. SHA-1 through digest.h, base64 by libcrypto's EVP_EncodeBlock.
 * Declarations only; the code is communityid.c, compiled once into the static library `wtc`
 * (ext/meson.build): the column function of ext/out/communityid.pyx and the exchange records'
 * columns (ext/out/xcolumns.pyx) call it. A module that calls it needs the libcrypto
 * dependency. */
#ifndef WEBTAP_COMMUNITYID_H
#define WEBTAP_COMMUNITYID_H

#include <stdint.h>

enum { WT_CID_LEN = 30 };     /* "1:" + 28 base64 characters (20-byte digest, one '=') */

/* One id into out[0:WT_CID_LEN] (not NUL-terminated): addresses a and b of alen bytes (4 or
 * 16), ports ap and bp in host order, proto the IP protocol number. Returns 0, or -1 when
 * libcrypto fails. No GIL needed, no shared state. */
int wt_community_id(uint16_t seed, const uint8_t *a, uint16_t ap, const uint8_t *b, uint16_t bp,
                    int alen, uint8_t proto, uint8_t *out);

#endif
