/* First CR or LF in a byte range: the line-end scan of the HTTP header walks, called once per
   header line (inline here, as the per-packet loops' byte helpers are; included by msglen.h,
   whose .pxd declares it for ext/walk/dissect.pyx; used by msglen.c and httpcont.c). */
#ifndef WT_LINEEND_H
#define WT_LINEEND_H

#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
/* First CR or LF in p[pos:n], or n: eight bytes per step. (v - 0x01..) & ~v & 0x80.. sets
   the top bit of every zero byte of v and possibly of bytes above the first zero (borrows),
   never below it, so the lowest set bit of x|y is the first CR or LF (little-endian). */
static inline uint32_t wt_line_end(const uint8_t *p, uint32_t pos, uint32_t n) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
#ifdef __SSE2__
    const __m128i cr = _mm_set1_epi8(13), lf = _mm_set1_epi8(10);
    while (pos + 16 <= n) {
        __m128i v = _mm_loadu_si128((const __m128i *)(p + pos));
        unsigned mask = (unsigned)_mm_movemask_epi8(
            _mm_or_si128(_mm_cmpeq_epi8(v, cr), _mm_cmpeq_epi8(v, lf)));
        if (mask)
            return pos + (uint32_t)__builtin_ctz(mask);
        pos += 16;
    }
#endif
    while (pos + 8 <= n) {
        uint64_t v, x, y, h;
        memcpy(&v, p + pos, 8);
        x = v ^ (ones * 10);
        y = v ^ (ones * 13);
        h = ((x - ones) & ~x & highs) | ((y - ones) & ~y & highs);
        if (h)
            return pos + (uint32_t)(__builtin_ctzll(h) >> 3);
        pos += 8;
    }
    while (pos < n && p[pos] != 10 && p[pos] != 13)
        pos++;
    return pos;
}

#endif
