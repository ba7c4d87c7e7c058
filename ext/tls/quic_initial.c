/* The compiled half of quic_initial.h (the QUIC Initial first flight's frames and CRYPTO
 * stream), compiled once into the wtc static library (ext/meson.build). */
#include <string.h>

#include "quic_crypto.h"      /* quic_varint */
#include "quic_initial.h"

int quic_skip_ack(const uint8_t *b, size_t n, size_t *fo, int ecn)
{
    uint64_t v, ranges = 0, i, total;
    size_t k;
    for (i = 0; i < 4; i++) {
        k = quic_varint(b + *fo, n - *fo, &v);
        if (k == 0) return 0;
        *fo += k;
        if (i == 2) ranges = v;
    }
    if (ranges > 256) return 0;
    total = 2 * ranges + (ecn ? 3 : 0);
    for (i = 0; i < total; i++) {
        k = quic_varint(b + *fo, n - *fo, &v);
        if (k == 0) return 0;
        *fo += k;
    }
    return 1;
}

int quic_next_crypto(const uint8_t *b, size_t n, size_t *fo, uint64_t *coff, uint64_t *clen)
{
    uint8_t ftype;
    size_t k;
    uint64_t w;
    while (*fo < n) {
        ftype = b[*fo];
        if (ftype == 0x00) {                            /* PADDING: runs of zeros, 8 at a time */
            *fo += 1;
            while (*fo + 8 <= n) {
                memcpy(&w, b + *fo, 8);
                if (w != 0) break;
                *fo += 8;
            }
            continue;
        }
        if (ftype == 0x01) {                            /* PING */
            *fo += 1;
            continue;
        }
        if (ftype == 0x02 || ftype == 0x03) {           /* ACK (ranges skipped) */
            *fo += 1;
            if (!quic_skip_ack(b, n, fo, ftype == 0x03)) return QF_BAD_ACK;
            continue;
        }
        if (ftype != 0x06) return QF_OTHER;
        *fo += 1;
        k = quic_varint(b + *fo, n - *fo, coff);
        if (k == 0) return QF_BAD_OFFSET;
        *fo += k;
        k = quic_varint(b + *fo, n - *fo, clen);
        if (k == 0) return QF_BAD_LENGTH;
        *fo += k;
        if (*clen > n - *fo) return QF_BAD_LENGTH;
        return QF_CRYPTO;
    }
    return QF_END;
}

int quic_crypto_frames(const uint8_t *plain, size_t pl, uint32_t cap, quic_frame *fr, int max,
                       int *nf, size_t *stop)
{
    size_t fo = 0;
    uint64_t coff, clen;
    int r;
    *nf = 0;
    for (;;) {
        r = quic_next_crypto(plain, pl, &fo, &coff, &clen);
        *stop = fo;
        if (r != QF_CRYPTO) return r;
        if (coff >= cap || clen > cap - coff) return QF_BEYOND;
        if (*nf == max) return QF_MANY;
        fr[*nf].pos = (uint32_t)fo;
        fr[*nf].coff = (uint32_t)coff;
        fr[*nf].len = (uint32_t)clen;
        *nf += 1;
        fo += clen;
    }
}

void quic_crypto_put(uint8_t *buf, uint8_t *have, uint64_t coff, const uint8_t *data, uint64_t clen)
{
    uint64_t x = coff, end = coff + clen;
    memcpy(buf + coff, data, clen);
    for (; x < end && (x & 7); x++)                     /* bits up to a byte boundary */
        have[x >> 3] |= (uint8_t)(1u << (x & 7));
    if (x + 8 <= end) {                                 /* whole bytes of the bitmap */
        memset(have + (x >> 3), 0xFF, (end - x) >> 3);
        x += (end - x) & ~(uint64_t)7;
    }
    for (; x < end; x++)
        have[x >> 3] |= (uint8_t)(1u << (x & 7));
}

void quic_frames_put(uint8_t *buf, uint8_t *have, const uint8_t *plain, const quic_frame *fr, int nf)
{
    int i;
    for (i = 0; i < nf; i++)
        quic_crypto_put(buf, have, fr[i].coff, plain + fr[i].pos, fr[i].len);
}

/* 1 when every bit of stream offsets [x, end) is set in the coverage bitmap: bit by bit up to a
 * byte boundary, whole bitmap bytes 8 at a time, then bit by bit */
static int quic__covered(const uint8_t *have, uint32_t x, uint32_t end)
{
    uint64_t w;
    for (; x < end && (x & 7); x++)
        if (!(have[x >> 3] & (1u << (x & 7)))) return 0;
    for (; x + 64 <= end; x += 64) {
        memcpy(&w, have + (x >> 3), 8);
        if (w != ~(uint64_t)0) return 0;
    }
    for (; x + 8 <= end; x += 8)
        if (have[x >> 3] != 0xFF) return 0;
    for (; x < end; x++)
        if (!(have[x >> 3] & (1u << (x & 7)))) return 0;
    return 1;
}

uint32_t quic_crypto_whole(const uint8_t *buf, const uint8_t *have, uint32_t cap, uint32_t base)
{
    uint32_t need;
    if (base + 4 > cap) return 0;
    if (!quic__covered(have, base, base + 4)) return 0;
    need = 4 + (((uint32_t)buf[base + 1] << 16) | ((uint32_t)buf[base + 2] << 8) | buf[base + 3]);
    if (need > cap - base) return 0xFFFFFFFFu;
    if (!quic__covered(have, base + 4, base + need)) return 0;
    return need;
}

const uint8_t *quic_frames_message(const uint8_t *plain, const quic_frame *fr, int nf,
                                   uint8_t *scratch, uint32_t cap, uint32_t *need)
{
    int order[QUIC_PACKET_FRAMES];
    int i, j, t;
    uint32_t have = 0, end = 0;
    if (nf > QUIC_PACKET_FRAMES) return NULL;
    for (i = 0; i < nf; i++) {                  /* stable insertion sort of a few frames by offset */
        order[i] = i;
        for (j = i; j > 0 && fr[order[j - 1]].coff > fr[order[j]].coff; j--) {
            t = order[j]; order[j] = order[j - 1]; order[j - 1] = t;
        }
    }
    for (i = 0; i < nf; i++) {                  /* the bytes from 0 on without a hole */
        const quic_frame *f = &fr[order[i]];
        if (f->coff > have) break;
        if (f->coff + f->len > have) have = f->coff + f->len;
    }
    if (have < 4) return NULL;
    /* the 4-byte header in the first frame from offset 0 that holds it: the message is read in
     * place when that frame holds all of it */
    for (i = 0; i < nf; i++) {
        const quic_frame *f = &fr[order[i]];
        if (f->coff == 0 && f->len >= 4) {
            const uint8_t *m = plain + f->pos;
            end = 4 + (((uint32_t)m[1] << 16) | ((uint32_t)m[2] << 8) | m[3]);
            if (end > have || end > cap) return NULL;
            *need = end;
            if (f->len >= end) return m;
            break;
        }
    }
    for (i = 0; i < nf; i++) {                  /* else assembled in stream order */
        const quic_frame *f = &fr[order[i]];
        if (f->coff < have)
            memcpy(scratch + f->coff, plain + f->pos, f->len);   /* coff + len <= cap: checked */
    }
    if (end == 0) {                             /* the header is split over frames */
        end = 4 + (((uint32_t)scratch[1] << 16) | ((uint32_t)scratch[2] << 8) | scratch[3]);
        if (end > have || end > cap) return NULL;
        *need = end;
    }
    return scratch;
}
