/* The compiled half of quic_close.h (what the header declares); compiled once into the wtc
 * static library (ext/meson.build), not into each module that includes the header. */
#include "quic_close.h"

int quic_forge_close_as(const uint8_t *pkt, size_t n, const uint8_t *odcid, size_t odcid_len,
                               uint8_t *out, size_t cap)
{
    quic_long_hdr_t h;
    quic_keys_t server;
    size_t off = 0, pn_off, pn_len, frames, reason_len = sizeof(QUIC_CLOSE_REASON) - 1;
    int follow, rc = quic_parse_long(pkt, n, &h);
    if (rc) return rc;
    if (h.type != QUIC_PT_INITIAL) return QUIC_E_ARG;
    if (cap < QUIC_CLOSE_MAX) return QUIC_E_ARG;
    if (!odcid) {
        odcid = pkt + h.dcid_off;
        odcid_len = h.dcid_len;
    }
    follow = odcid_len != h.dcid_len || memcmp(odcid, pkt + h.dcid_off, odcid_len) != 0;
    pn_len = follow ? 2 : 1;
    if ((rc = quic_initial_keys(h.version, odcid, odcid_len, NULL, &server))) return rc;
    frames = 1 + 1 + 1 + 1 + reason_len;          /* type, error, frame type, reason length */
    out[off++] = (uint8_t)(0xc0 | (quic_type_bits(h.version, QUIC_PT_INITIAL) << 4) | (pn_len - 1));
    out[off++] = (uint8_t)(h.version >> 24);
    out[off++] = (uint8_t)(h.version >> 16);
    out[off++] = (uint8_t)(h.version >> 8);
    out[off++] = (uint8_t)h.version;
    out[off++] = h.scid_len;
    memcpy(out + off, pkt + h.scid_off, h.scid_len);
    off += h.scid_len;
    if (follow) {                                  /* the SCID the server chose */
        out[off++] = h.dcid_len;
        memcpy(out + off, pkt + h.dcid_off, h.dcid_len);
        off += h.dcid_len;
    } else {
        out[off++] = QUIC_CLOSE_SCID_LEN;
        quic_close_scid(odcid, odcid_len, out + off);
        off += QUIC_CLOSE_SCID_LEN;
    }
    out[off++] = 0;                                /* token length */
    quic_varint_put(out + off, pn_len + frames + QUIC_TAG_LEN, 2);
    off += 2;
    pn_off = off;
    if (follow) {
        out[off++] = (uint8_t)(QUIC_CLOSE_FOLLOW_PN >> 8);
        out[off++] = (uint8_t)QUIC_CLOSE_FOLLOW_PN;
    } else {
        out[off++] = 0;                            /* packet number 0 */
    }
    out[off++] = 0x1c;                             /* CONNECTION_CLOSE (transport) */
    out[off++] = QUIC_CLOSE_ERROR;
    out[off++] = 0;                                /* frame type: unknown */
    out[off++] = (uint8_t)reason_len;
    memcpy(out + off, QUIC_CLOSE_REASON, reason_len);
    off += reason_len;
    if ((rc = quic_protect(out, pn_off, pn_len, frames, &server,
                           follow ? QUIC_CLOSE_FOLLOW_PN : 0))) return rc;
    return (int)(off + QUIC_TAG_LEN);
}

int quic_forge_close(const uint8_t *pkt, size_t n, uint8_t *out, size_t cap)
{
    return quic_forge_close_as(pkt, n, NULL, 0, out, cap);
}
