/* The compiled half of communityid.h; compiled once into the wtc static library. */
#include "communityid.h"
#include "digest.h"

#include <openssl/evp.h>
#include <string.h>

int wt_community_id(uint16_t seed, const uint8_t *a, uint16_t ap, const uint8_t *b, uint16_t bp,
                    int alen, uint8_t proto, uint8_t *out) {
    uint8_t buf[2 + 16 + 16 + 1 + 1 + 2 + 2];
    uint8_t dig[EVP_MAX_MD_SIZE];
    uint8_t b64[32];
    int c = memcmp(a, b, (size_t)alen), k;
    if (c > 0 || (c == 0 && ap > bp)) {
        const uint8_t *t = a;
        uint16_t tp = ap;
        a = b;
        b = t;
        ap = bp;
        bp = tp;
    }
    buf[0] = (uint8_t)(seed >> 8);
    buf[1] = (uint8_t)(seed & 0xFF);
    k = 2;
    memcpy(buf + k, a, (size_t)alen);
    k += alen;
    memcpy(buf + k, b, (size_t)alen);
    k += alen;
    buf[k] = proto;
    buf[k + 1] = 0;
    buf[k + 2] = (uint8_t)(ap >> 8);
    buf[k + 3] = (uint8_t)(ap & 0xFF);
    buf[k + 4] = (uint8_t)(bp >> 8);
    buf[k + 5] = (uint8_t)(bp & 0xFF);
    k += 6;
    if (wt_digest(WT_SHA1, buf, (size_t)k, dig) != 20)
        return -1;
    out[0] = '1';
    out[1] = ':';
    /* EVP_EncodeBlock writes 28 characters and a NUL: into a scratch buffer, not past the id */
    if (EVP_EncodeBlock(b64, dig, 20) != 28)
        return -1;
    memcpy(out + 2, b64, 28);
    return 0;
}
