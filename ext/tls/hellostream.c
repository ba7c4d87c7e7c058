/* A TLS hello split over TCP segments (the rules and why: hellostream.h). */
#include <string.h>

#include "hellostream.h"

static int judge(HelloStream *s, int cut, uint8_t *scratch, uint32_t *msg_len) {
    int t = 0, st;
    uint32_t got = 0, hl = 0;
    *msg_len = 0;
    if (s->len < HS_HEAD)
        return cut ? HS_CUT : HS_MORE;
    /* the record header, handshake type and (once held) the hello's version field */
    tls_hello_start(s->buf, s->len < HS_VERSION_END ? s->len : HS_VERSION_END, &t);
    if (t == 0)
        return HS_NOT_HELLO;
    s->hs_type = (uint8_t)t;
    st = tls_gather(s->buf, s->len, scratch, TLS_HELLO_CAP, &got, &hl);
    if (st == TLS_OK) {
        *msg_len = got;
        return HS_WHOLE;
    }
    if (st == TLS_INCOMPLETE) {
        if (s->len >= HS_STREAM_CAP)
            return HS_TOO_LONG;
        return cut ? HS_CUT : HS_MORE;
    }
    if (st == TLS_TOO_LONG)
        return HS_TOO_LONG;
    return HS_MALFORMED;
}

static void append(HelloStream *s, const uint8_t *p, uint32_t n) {
    uint32_t room = (uint32_t)HS_STREAM_CAP - s->len;
    uint32_t take = n < room ? n : room;
    if (take) {
        memcpy(s->buf + s->len, p, take);
        s->len += take;
    }
}

int hs_start(HelloStream *s, uint8_t *buf, uint32_t seq, uint32_t wire_len, const uint8_t *p,
             uint32_t caplen, uint32_t off, uint8_t *scratch, uint32_t *msg_len) {
    s->buf = buf;
    s->len = 0;
    s->segs = 1;
    s->hs_type = 0;
    s->next_seq = seq + wire_len;
    if (off < caplen)
        append(s, p + off, caplen - off);
    return judge(s, caplen < wire_len, scratch, msg_len);
}

int hs_offer(HelloStream *s, uint32_t seq, uint32_t wire_len, const uint8_t *p, uint32_t caplen,
             uint8_t *scratch, uint32_t *msg_len) {
    int32_t d = (int32_t)(seq - s->next_seq);
    uint32_t skip = 0;
    *msg_len = 0;
    if (d > 0)
        return HS_GAP;
    if (d < 0) {
        skip = s->next_seq - seq;               /* bytes of this segment the stream holds already */
        if (wire_len <= skip)
            return HS_RETRANSMISSION;
    } else if (wire_len == 0) {
        return HS_RETRANSMISSION;
    }
    s->next_seq = seq + wire_len;
    s->segs += 1;
    if (caplen > skip)
        append(s, p + skip, caplen - skip);
    return judge(s, caplen < wire_len, scratch, msg_len);
}
