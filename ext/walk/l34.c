/* Link -> IP -> TCP of one packet (declarations, structs and codes: l34.h). Compiled once into
 * the static library `wtc`; every module that walks packets links it. The rules, and their
 * tshark counterparts: docs/ACCURACY.md; pinned by tests/dissect/test_link_ip_tcp.py and
 * tests/dissect/test_encap.py. */
#include <Python.h>
#include <string.h>

#include "l34.h"

#define be16 wt_be16
#define be32 wt_be32
#define le16 wt_le16
#define le32 wt_le32

const L34Cfg *l34_shared_cfg(void) {
    PyObject *mod, *cap;
    void *cfg;
    mod = PyImport_ImportModule("webtap._ext.dissect");
    if (mod == NULL)
        return NULL;
    cap = PyObject_CallMethod(mod, "tunnel_cfg_capsule", NULL);
    Py_DECREF(mod);
    if (cap == NULL)
        return NULL;
    cfg = PyCapsule_GetPointer(cap, "webtap.L34Cfg");
    Py_DECREF(cap);
    return (const L34Cfg *)cfg;
}

/* where the walk of l34_parse stands */
enum {
    L34_AT_ETH = 0,    /* an Ethernet header (dst, src, type/length) at off */
    L34_AT_ETYPE = 1,  /* an ethertype `etype` read; what it names starts at off */
    L34_AT_IP = 2,     /* an IP header at off (net: 4, 6, or 0 = the version nibble decides) */
    L34_AT_LLC = 3,    /* an 802.2 LLC header at off */
    L34_AT_GRE = 4,    /* a GRE header at off */
    L34_AT_WLAN = 5,   /* an 802.11 frame at off (Aruba's GRE) */
};

/* An ethertype the walk follows towards IP (for the pseudowire check). */
static inline int l34_eth_type(uint16_t t) {
    return (t == 0x0800 || t == 0x86DD || t == 0x8100 || t == 0x88A8 || t == 0x9100
            || t == 0x8847 || t == 0x8848 || t == 0x8864);
}

/* Record one encapsulation layer; 0 when L34_MAX_ENCAP layers are already recorded. */
static inline int l34_push(L34 *l, uint8_t kind) {
    if (l->encap_depth >= L34_MAX_ENCAP) {
        l->encap_depth = L34_TOO_DEEP;
        return 0;
    }
    l->encap |= ((uint64_t)kind) << (8 * l->encap_depth);
    l->encap_depth += 1;
    return 1;
}

/* Which tunnel a UDP datagram carries, by its ports: the IANA ports first (destination, then
 * source: tshark tries the lower port first and these are all below the ephemeral range), then
 * the user's (L34Cfg). ENC_NONE for any other datagram. */
static inline uint8_t l34_udp_kind(uint16_t sport, uint16_t dport, const L34Cfg *cfg) {
    int i, k;
    uint16_t q;
    for (k = 0; k < 2; k++) {
        q = k == 0 ? dport : sport;
        if (q == 4789)
            return ENC_VXLAN;
        if (q == 6081)
            return ENC_GENEVE;
        if (q == 2152)
            return ENC_GTPU;
        if (q == 3544)
            return ENC_TEREDO;
        if (q == 5072)
            return ENC_AYIYA;
        if (q == 4754)
            return ENC_GRE;
    }
    if (cfg != NULL) {
        for (k = 0; k < 2; k++) {
            q = k == 0 ? dport : sport;
            for (i = 0; i < cfg->n; i++)
                if (cfg->port[i] == q)
                    return cfg->kind[i];
        }
    }
    return ENC_NONE;
}

/* Length of Teredo's optional authentication and origin-indication headers at p[u:end]
 * (RFC 4380 5.1.1), 0xFFFFFFFF when they run past end. */
static inline uint32_t l34_teredo_hdr(const uint8_t *p, uint32_t u, uint32_t end) {
    uint32_t h = 0;
    if (u + 2 <= end && p[u] == 0 && p[u + 1] == 1) {
        if (u + 4 > end)
            return (uint32_t)0xFFFFFFFF;
        h = 13 + (uint32_t)p[u + 2] + (uint32_t)p[u + 3];
    }
    if (u + h + 2 <= end && p[u + h] == 0 && p[u + h + 1] == 0)
        h += 8;
    if (u + h > end)
        return (uint32_t)0xFFFFFFFF;
    return h;
}

/* A UDP payload p[u:end] on another port is Teredo when it is exactly one IPv6 packet (after the
 * optional Teredo headers): version 6, one end in 2001:0000::/32, and the IPv6 payload length
 * plus the 40-byte header fills the datagram (tshark's "heuristic_teredo" preference checks the
 * shape, not the prefix). */
static inline int l34_teredo_heur(const uint8_t *p, uint32_t u, uint32_t end) {
    uint32_t h = l34_teredo_hdr(p, u, end);
    if (h == (uint32_t)0xFFFFFFFF || u + h + 40 > end)
        return 0;
    if ((p[u + h] >> 4) != 6)
        return 0;
    /* one end is a Teredo address (2001:0000::/32, RFC 4380 2.14): what keeps other UDP payloads
     * whose first nibble is 6 (a QUIC short header, ...) from passing for Teredo */
    if (!((p[u + h + 8] == 0x20 && p[u + h + 9] == 0x01 && p[u + h + 10] == 0 && p[u + h + 11] == 0)
          || (p[u + h + 24] == 0x20 && p[u + h + 25] == 0x01 && p[u + h + 26] == 0
              && p[u + h + 27] == 0)))
        return 0;
    return u + h + 40 + be16(p + u + h + 4) == end;
}

/* The PPP protocol field at p[*off] (RFC 1661 6.5: one byte when compressed, an odd first byte),
 * after the address and control bytes FF 03 when `acf` and they are there (RFC 1662; PPP links
 * and PPTP may elide them, PPPoE never sends them). Moves *off past it. Returns 4 (0x0021 IPv4),
 * 6 (0x0057 IPv6), 0 for another protocol, -1 when the packet ends first. */
static inline int l34_ppp(const uint8_t *p, uint32_t caplen, uint32_t *off, int acf) {
    uint32_t o = *off;
    uint32_t k;
    if (acf && caplen >= o + 2 && p[o] == 0xFF && p[o + 1] == 0x03)
        o += 2;
    if (caplen < o + 1)
        return -1;
    if (p[o] & 1) {
        k = p[o];
        o += 1;
    } else {
        if (caplen < o + 2)
            return -1;
        k = be16(p + o);
        o += 2;
    }
    *off = o;
    return k == 0x21 ? 4 : k == 0x57 ? 6 : 0;
}

int l34_parse(const uint8_t *p, uint32_t caplen, uint16_t linktype, L34 *l, const L34Cfg *cfg) {
    uint32_t off = 0, ip_off, ip_end_wire = 0, ip_end_cap, hl, tot, frag, tcp_off = 0, doff;
    uint32_t pay_off, plen, ext_len, af_le, af_be, u, h, lim = (uint32_t)0xFFFFFFFF, tl;
    uint16_t etype = 0, gfl, sport, dport;
    int net = 0, nxt, tags = 0, vtags = 0, ver, at, k;
    uint8_t kind;
    l->vlan = 0xFFFF;
    l->tcp_ok = 0;
    l->encap = 0;
    l->encap_depth = 0;
    l->outer_ip_version = 0;
    l->tunnel_id = 0;

    /* --- link layer ------------------------------------------------------------------------ */
    if (linktype == LINKTYPE_ETHERNET) {
        at = L34_AT_ETH;
    } else if (linktype == LINKTYPE_LINUX_SLL || linktype == LINKTYPE_LINUX_SLL2) {
        if (linktype == LINKTYPE_LINUX_SLL) {
            if (caplen < 16)
                return DR_LINK_TRUNCATED;
            etype = be16(p + 14);
            off = 16;
        } else {
            if (caplen < 20)
                return DR_LINK_TRUNCATED;
            etype = be16(p);
            off = 20;
        }
        at = etype == 0x0004 ? L34_AT_LLC : L34_AT_ETYPE;   /* 0x0004: an 802.2 LLC frame */
    } else if (linktype == LINKTYPE_RAW || linktype == DLT_RAW_ALT || linktype == DLT_RAW_ALT2) {
        at = L34_AT_IP;
        net = 0;
    } else if (linktype == LINKTYPE_IPV4) {
        at = L34_AT_IP;
        net = 4;
    } else if (linktype == LINKTYPE_IPV6) {
        at = L34_AT_IP;
        net = 6;
    } else if (linktype == LINKTYPE_NULL || linktype == LINKTYPE_LOOP) {
        if (caplen < 4)
            return DR_LINK_TRUNCATED;
        af_be = be32(p);
        af_le = le32(p);
        if (linktype == LINKTYPE_LOOP)
            af_le = af_be;                 /* LOOP: network byte order only */
        /* NULL: host byte order of the capturing machine, unknown to us: accept either. */
        if (af_be == 2 || af_le == 2)
            net = 4;
        else if (af_be == 24 || af_be == 28 || af_be == 30 || af_be == 10 ||
                 af_le == 24 || af_le == 28 || af_le == 30 || af_le == 10)
            net = 6;
        else
            return DR_NOT_IP;
        off = 4;
        at = L34_AT_IP;
    } else if (linktype == LINKTYPE_NFLOG) {
        /* Linux NFLOG: family, version, resource id, then TLVs (length incl. the 4-byte TLV
         * header, type; both in the capturing host's byte order, read as little-endian unless
         * that makes no sense; padded to 4 bytes) until NFULA_PAYLOAD (type 9) holds the packet. */
        if (caplen < 4)
            return DR_LINK_TRUNCATED;
        net = p[0] == 2 ? 4 : (p[0] == 10 ? 6 : 0);
        off = 4;
        for (;;) {
            if (caplen < off + 4)
                return DR_LINK_TRUNCATED;
            tl = le16(p + off);
            k = le16(p + off + 2) & 0x7FFF;
            if (tl < 4 || off + tl > caplen + 3) {
                tl = be16(p + off);
                k = be16(p + off + 2) & 0x7FFF;
                if (tl < 4)
                    return DR_LINK_TRUNCATED;
            }
            if (k == 9) {
                off += 4;
                lim = off + tl - 4;        /* the packet ends with its TLV */
                break;
            }
            off += (tl + 3) & ~((uint32_t)3);
        }
        at = L34_AT_IP;
    } else if (linktype == LINKTYPE_ATM_RFC1483) {
        at = L34_AT_LLC;                   /* 802.2 LLC/SNAP straight away (RFC 2684) */
    } else if (linktype == LINKTYPE_PPP || linktype == LINKTYPE_PPP_HDLC || linktype == LINKTYPE_C_HDLC) {
        if (caplen < 2)
            return DR_LINK_TRUNCATED;
        if ((p[0] == 0x0F || p[0] == 0x8F) && linktype != LINKTYPE_PPP) {
            /* Cisco HDLC (link type 104, and Cisco PPP framing of 50: RFC 1547 4.3.1): address,
             * control, then an ethertype */
            if (caplen < 4)
                return DR_LINK_TRUNCATED;
            etype = be16(p + 2);
            off = 4;
            at = L34_AT_ETYPE;
        } else if (linktype == LINKTYPE_C_HDLC) {
            return DR_NOT_IP;
        } else {
            /* PPP (RFC 1661): address FF and control 03 when present (RFC 1662 framing; link
             * type 9 may omit them), then the protocol, one byte when compressed (odd first
             * byte, RFC 1661 6.5): 0x0021 IPv4, 0x0057 IPv6 */
            net = l34_ppp(p, caplen, &off, 1);
            if (net < 0)
                return DR_LINK_TRUNCATED;
            if (net == 0)
                return DR_NOT_IP;
            at = L34_AT_IP;
        }
    } else if (linktype == LINKTYPE_PPP_ETHER) {
        etype = 0x8864;                    /* a PPPoE session header first (no Ethernet header) */
        at = L34_AT_ETYPE;
    } else {
        return DR_LINK_UNSUPPORTED;
    }

    /* --- encapsulations, down to the innermost IP header carrying TCP ----------------------- */
    for (;;) {
        if (at == L34_AT_ETH) {
            if (caplen < off + 14)
                return DR_LINK_TRUNCATED;
            etype = be16(p + off + 12);
            off += 14;
            if (etype <= 1500)             /* 802.3 length field: an 802.2 LLC header follows */
                at = L34_AT_LLC;
            else
                at = L34_AT_ETYPE;
        }
        if (at == L34_AT_LLC) {
            /* 802.2 LLC: only SNAP (AA AA 03, OUI, ethertype) carries IP as an ethertype. */
            if (caplen < off + 3)
                return DR_LINK_TRUNCATED;
            if (p[off] != 0xAA || p[off + 1] != 0xAA || p[off + 2] != 0x03)
                return DR_NOT_IP;
            if (caplen < off + 8)
                return DR_LINK_TRUNCATED;
            if (!l34_push(l, ENC_LLC))
                return DR_NOT_IP;
            etype = be16(p + off + 6);
            off += 8;
            at = L34_AT_ETYPE;
        } else if (at == L34_AT_WLAN) {
            /* 802.11 data frame (Aruba's GRE): 24-byte header, + address 4 (to and from DS),
             * + QoS control (QoS subtypes), + HT control (QoS with the order bit); LLC follows. */
            if (caplen < off + 24)
                return DR_LINK_TRUNCATED;
            if (((p[off] >> 2) & 3) != 2 || (p[off] & 0x40) || (p[off + 1] & 0x40))
                return DR_NOT_IP;          /* not data, a null-data subtype, or encrypted */
            h = 24;
            if ((p[off + 1] & 3) == 3)
                h += 6;
            if (p[off] & 0x80) {
                h += 2;
                if (p[off + 1] & 0x80)
                    h += 4;
            }
            if (!l34_push(l, ENC_WLAN))
                return DR_NOT_IP;
            off += h;
            at = L34_AT_LLC;
            continue;
        } else if (at == L34_AT_GRE) {
            /* GRE (RFC 2784/2890): flags+version, protocol type, then checksum+reserved (C), key
             * (K), sequence number (S). Version 1 is PPTP's enhanced GRE (RFC 2637). */
            if (caplen < off + 4)
                return DR_LINK_TRUNCATED;
            gfl = be16(p + off);
            etype = be16(p + off + 2);
            h = 4;
            if ((gfl & 7) == 0) {
                if (gfl & 0x4000)
                    return DR_NOT_IP;      /* source routing (RFC 1701): obsolete, not followed */
                if (gfl & 0x8000)
                    h += 4;
                if (gfl & 0x2000) {
                    if (caplen < off + h + 4)
                        return DR_LINK_TRUNCATED;
                    if (l->encap == 0)
                        l->tunnel_id = be32(p + off + h);
                    h += 4;
                }
                if (gfl & 0x1000)
                    h += 4;
            } else if ((gfl & 7) == 1 && etype == 0x880B) {
                h = 8 + ((gfl & 0x1000) ? 4 : 0) + ((gfl & 0x0080) ? 4 : 0);
            } else {
                return DR_NOT_IP;
            }
            if (caplen < off + h)
                return DR_LINK_TRUNCATED;
            if (!l34_push(l, ENC_GRE))
                return DR_NOT_IP;
            off += h;
            if (etype == 0x6558) {                         /* transparent Ethernet bridging */
                if (!l34_push(l, ENC_ETH))
                    return DR_NOT_IP;
                at = L34_AT_ETH;
            } else if (etype == 0x88BE || etype == 0x22EB) {
                /* ERSPAN: type I (0x88BE without a sequence number) has no header of its own;
                 * type II (0x88BE) has 8 bytes, type III (0x22EB) 12 + 8 when its O bit is set
                 * and carries other frames than Ethernet when its frame type is not 0. */
                h = 0;
                if (etype == 0x22EB) {
                    if (caplen < off + 12)
                        return DR_LINK_TRUNCATED;
                    if ((p[off + 10] >> 2) & 0x1F)
                        return DR_NOT_IP;
                    h = (p[off + 11] & 1) ? 20 : 12;
                } else if (gfl & 0x1000) {
                    h = 8;
                }
                if (caplen < off + h)
                    return DR_LINK_TRUNCATED;
                if (h && l->encap_depth == 1)
                    l->tunnel_id = be16(p + off + 2) & 0x3FF;
                if (!l34_push(l, ENC_ERSPAN) || !l34_push(l, ENC_ETH))
                    return DR_NOT_IP;
                off += h;
                at = L34_AT_ETH;
            } else if (etype == 0x8200) {                  /* Aruba: an 802.11 frame */
                at = L34_AT_WLAN;
            } else if (etype == 0x880B) {                  /* PPP (PPTP) */
                if (caplen < off + 2)
                    return DR_LINK_TRUNCATED;
                net = l34_ppp(p, caplen, &off, 1);
                if (net < 0)
                    return DR_LINK_TRUNCATED;
                if (!l34_push(l, ENC_PPP) || net == 0)
                    return DR_NOT_IP;
                at = L34_AT_IP;
            } else {
                at = L34_AT_ETYPE;                         /* IPv4, IPv6, MPLS, ... by ethertype */
            }
            if (at != L34_AT_ETYPE && at != L34_AT_IP)
                continue;
        }
        if (at == L34_AT_ETYPE) {
            /* 802.1Q (0x8100), 802.1ad (0x88a8) and the pre-standard QinQ types 0x9100/0x9200. */
            while (etype == 0x8100 || etype == 0x88A8 || etype == 0x9100 || etype == 0x9200) {
                if (vtags == L34_MAX_VLAN_TAGS)
                    return DR_NOT_IP;
                if (caplen < off + 4)
                    return DR_LINK_TRUNCATED;
                if (l->vlan == 0xFFFF)
                    l->vlan = be16(p + off) & 0x0FFF;
                etype = be16(p + off + 2);
                off += 4;
                vtags += 1;
            }
            if (etype == 0x0800) {
                net = 4;
            } else if (etype == 0x86DD) {
                net = 6;
            } else if (etype == 0x8847 || etype == 0x8848) {
                /* MPLS label stack down to the bottom-of-stack bit; then IPv4/IPv6 by the version
                 * nibble, or an Ethernet pseudowire. */
                if (!l34_push(l, ENC_MPLS))
                    return DR_NOT_IP;
                k = 0;
                for (;;) {
                    if (k == L34_MAX_MPLS)
                        return DR_NOT_IP;
                    if (caplen < off + 4)
                        return DR_LINK_TRUNCATED;
                    if (l->encap_depth == 1)
                        l->tunnel_id = be32(p + off) >> 12;
                    off += 4;
                    k += 1;
                    if (p[off - 2] & 1)
                        break;
                }
                if (caplen <= off)
                    return DR_IP_TRUNCATED;
                ver = p[off] >> 4;
                if (ver == 4 || ver == 6) {
                    net = ver;
                } else {
                    /* An Ethernet pseudowire (RFC 4448): the frame, or a control word (first
                     * nibble 0) and the frame; told apart by where an IP-carrying ethertype sits
                     * (tshark asks its OUI table whether the MAC addresses look real). */
                    if (caplen >= off + 14 && l34_eth_type(be16(p + off + 12)))
                        ;
                    else if (ver == 0 && caplen >= off + 18 && l34_eth_type(be16(p + off + 16)))
                        off += 4;
                    else
                        return DR_NOT_IP;
                    if (!l34_push(l, ENC_ETH))
                        return DR_NOT_IP;
                    at = L34_AT_ETH;
                    continue;
                }
            } else if (etype == 0x8864) {
                /* PPPoE session stage (RFC 2516): ver/type 0x11, code 0, session id, length, then
                 * the PPP protocol (0x0021 IPv4, 0x0057 IPv6; one byte when compressed). */
                if (caplen < off + 8)
                    return DR_LINK_TRUNCATED;
                if (p[off] != 0x11 || p[off + 1] != 0)
                    return DR_NOT_IP;
                if (l->encap == 0)
                    l->tunnel_id = be16(p + off + 2);
                if (off + 6 + be16(p + off + 4) < lim)
                    lim = off + 6 + be16(p + off + 4);     /* the PPP frame ends with the PPPoE length */
                if (!l34_push(l, ENC_PPPOE))
                    return DR_NOT_IP;
                off += 6;
                net = l34_ppp(p, caplen, &off, 0);          /* caplen >= off + 2 checked above */
                if (net <= 0)
                    return DR_NOT_IP;
            } else {
                return DR_NOT_IP;
            }
            at = L34_AT_IP;
        }

        /* --- IP ------------------------------------------------------------------------------ */
        ip_off = off;
        if (caplen <= ip_off)
            return DR_IP_TRUNCATED;
        if (ip_off > 0xFFFF - 60)
            return DR_IP_BAD_HEADER;       /* HttpMsg keeps header offsets in 16 bits */
        ver = p[ip_off] >> 4;
        if (net == 0) {
            if (ver == 4 || ver == 6)
                net = ver;
            else
                return DR_IP_BAD_HEADER;
        }
        if (ver != net)
            return DR_IP_BAD_HEADER;
        l->ip_off = ip_off;
        if (net == 4) {
            if (caplen < ip_off + 20)
                return DR_IP_TRUNCATED;
            hl = (p[ip_off] & 0x0F) * 4;
            if (hl < 20)
                return DR_IP_BAD_HEADER;
            tot = be16(p + ip_off + 2);
            if (tot == 0)
                tot = caplen - ip_off;     /* TSO/GSO capture: length left 0, trust the capture */
            if (tot < hl)
                return DR_IP_BAD_HEADER;
            if (caplen < ip_off + hl)
                return DR_IP_TRUNCATED;
            frag = be16(p + ip_off + 6);
            if ((frag & 0x2000) || (frag & 0x1FFF))
                return DR_IP_FRAGMENT;
            nxt = p[ip_off + 9];
            l->ip_version = 4;
            l->ttl = p[ip_off + 8];
            l->src = p + ip_off + 12;
            l->dst = p + ip_off + 16;
            tcp_off = ip_off + hl;
            ip_end_wire = ip_off + tot;
        } else {
            if (caplen < ip_off + 40)
                return DR_IP_TRUNCATED;
            plen = be16(p + ip_off + 4);
            if (plen == 0)
                plen = caplen - ip_off - 40;   /* jumbogram or TSO capture: trust the capture */
            ip_end_wire = ip_off + 40 + plen;
            nxt = p[ip_off + 6];
            tcp_off = ip_off + 40;
            tags = 0;
            while (nxt == 0 || nxt == 43 || nxt == 60 || nxt == 51 || nxt == 44) {
                if (nxt == 44)
                    return DR_IP_FRAGMENT;
                if (tags == L34_MAX_IP6_EXT)
                    return DR_IP_BAD_HEADER;
                if (caplen < tcp_off + 8)
                    return DR_IP_TRUNCATED;
                if (nxt == 51)
                    ext_len = ((uint32_t)p[tcp_off + 1] + 2) * 4;
                else
                    ext_len = ((uint32_t)p[tcp_off + 1] + 1) * 8;
                if (tcp_off + ext_len > ip_end_wire)
                    return DR_IP_BAD_HEADER;
                nxt = p[tcp_off];
                tcp_off += ext_len;
                tags += 1;
            }
            l->ip_version = 6;
            l->ttl = p[ip_off + 7];
            l->src = p + ip_off + 8;
            l->dst = p + ip_off + 24;
        }
        if (ip_end_wire > lim)
            ip_end_wire = lim;             /* longer than what carries it: cut, as tshark does */
        if (nxt == 6)
            break;

        /* --- a tunnel inside this IP packet? ------------------------------------------------- */
        if (l->outer_ip_version == 0) {
            l->outer_ip_version = l->ip_version;
            l->outer_src = l->src;
            l->outer_dst = l->dst;
        }
        lim = ip_end_wire;
        off = tcp_off;
        if (nxt == 4 || nxt == 41) {                       /* IP in IP (RFC 2003, RFC 4213) */
            if (net == 4)
                kind = nxt == 4 ? ENC_4IN4 : ENC_6IN4;
            else
                kind = nxt == 4 ? ENC_4IN6 : ENC_6IN6;
            if (!l34_push(l, kind))
                return DR_NOT_IP;
            net = nxt == 4 ? 4 : 6;
            continue;
        }
        if (nxt == 47) {
            at = L34_AT_GRE;
            continue;
        }
        if (nxt != 17)
            return DR_NOT_TCP;
        /* UDP tunnels, by port */
        if (caplen < off + 8)
            return DR_NOT_TCP;
        sport = be16(p + off);
        dport = be16(p + off + 2);
        if (be16(p + off + 4) >= 8 && off + be16(p + off + 4) < lim)
            lim = off + be16(p + off + 4);                 /* the datagram ends with the UDP length */
        kind = l34_udp_kind(sport, dport, cfg);
        u = off + 8;
        ip_end_cap = lim < caplen ? lim : caplen;
        if (kind == ENC_NONE) {
            if (!l34_teredo_heur(p, u, ip_end_cap))
                return DR_NOT_TCP;
            kind = ENC_TEREDO;
        }
        if (kind == ENC_GRE) {                             /* GRE in UDP (RFC 8086) */
            off = u;
            at = L34_AT_GRE;
            continue;
        }
        if (!l34_push(l, kind))
            return DR_NOT_IP;
        if (kind == ENC_VXLAN) {
            /* VXLAN (RFC 7348): flags, reserved, VNI, reserved; an Ethernet frame follows. */
            if (caplen < u + 8)
                return DR_LINK_TRUNCATED;
            if (l->encap_depth == 1)
                l->tunnel_id = be32(p + u + 4) >> 8;
            off = u + 8;
            if (!l34_push(l, ENC_ETH))
                return DR_NOT_IP;
            at = L34_AT_ETH;
        } else if (kind == ENC_GENEVE) {
            /* Geneve (RFC 8926): version 0, option length in 4-byte words, protocol type, VNI. */
            if (caplen < u + 8)
                return DR_LINK_TRUNCATED;
            if ((p[u] >> 6) != 0)
                return DR_NOT_IP;
            if (l->encap_depth == 1)
                l->tunnel_id = be32(p + u + 4) >> 8;
            etype = be16(p + u + 2);
            off = u + 8 + (p[u] & 0x3F) * 4;
            if (etype == 0x6558) {
                if (!l34_push(l, ENC_ETH))
                    return DR_NOT_IP;
                at = L34_AT_ETH;
            } else {
                at = L34_AT_ETYPE;
            }
        } else if (kind == ENC_GTPU) {
            /* GTP-U v1 (3GPP TS 29.281): only G-PDUs (type 255) carry user packets. Sequence
             * number, N-PDU number and next-extension type follow when any of E/S/PN is set;
             * extension headers chain by their last byte, their length in 4-byte units. */
            if (caplen < u + 8)
                return DR_LINK_TRUNCATED;
            if ((p[u] >> 5) != 1 || !(p[u] & 0x10) || p[u + 1] != 0xFF)
                return DR_NOT_TCP;
            if (l->encap_depth == 1)
                l->tunnel_id = be32(p + u + 4);
            h = 8;
            if (p[u] & 0x07) {
                if (caplen < u + 12)
                    return DR_LINK_TRUNCATED;
                h = 12;
                k = p[u + 11];
                tags = 0;
                while (k != 0) {
                    if (tags == L34_MAX_GTP_EXT)
                        return DR_NOT_TCP;
                    if (caplen < u + h + 1)
                        return DR_LINK_TRUNCATED;
                    tl = (uint32_t)p[u + h] * 4;
                    if (tl == 0 || caplen < u + h + tl)
                        return DR_LINK_TRUNCATED;
                    k = p[u + h + tl - 1];
                    h += tl;
                    tags += 1;
                }
            }
            off = u + h;
            net = 0;
            at = L34_AT_IP;
        } else if (kind == ENC_TEREDO) {
            h = l34_teredo_hdr(p, u, ip_end_cap);
            if (h == (uint32_t)0xFFFFFFFF)
                return DR_LINK_TRUNCATED;
            off = u + h;
            net = 6;
            at = L34_AT_IP;
        } else if (kind == ENC_AYIYA) {
            /* AYIYA: identity length 2^n and type, signature length in 4-byte words and hash
             * method, authentication method and opcode (1 = forward), next header, epoch; then
             * identity and signature. */
            if (caplen < u + 8)
                return DR_LINK_TRUNCATED;
            if ((p[u + 2] & 0x0F) != 1)
                return DR_NOT_TCP;
            k = p[u + 3];
            if (k == 41)
                net = 6;
            else if (k == 4)
                net = 4;
            else
                return DR_NOT_TCP;
            off = u + 8 + ((uint32_t)1 << (p[u] >> 4)) + (p[u + 1] >> 4) * 4;
            at = L34_AT_IP;
        } else {
            return DR_NOT_TCP;
        }
    }

    /* --- TCP -------------------------------------------------------------------------------- */
    ip_end_cap = ip_end_wire < caplen ? ip_end_wire : caplen;     /* drops Ethernet padding */
    if (tcp_off + 20 > ip_end_wire)
        return tcp_off + 20 <= caplen ? DR_TCP_BAD_OFFSET : DR_TCP_TRUNCATED;
    if (tcp_off + 20 > ip_end_cap)
        return DR_TCP_TRUNCATED;
    doff = (p[tcp_off + 12] >> 4) * 4;
    if (doff < 20 || tcp_off + doff > ip_end_wire)
        return DR_TCP_BAD_OFFSET;
    l->tcp_off = tcp_off;
    l->src_port = be16(p + tcp_off);
    l->dst_port = be16(p + tcp_off + 2);
    l->seq = be32(p + tcp_off + 4);
    l->ack = be32(p + tcp_off + 8);
    l->tcp_flags = p[tcp_off + 13];
    l->window = be16(p + tcp_off + 14);
    pay_off = tcp_off + doff;
    l->payload_off = pay_off;
    l->payload_len = ip_end_wire - pay_off;
    l->tcp_ok = 1;
    if (pay_off > ip_end_cap) {
        l->payload_caplen = 0;
        return DR_TCP_TRUNCATED;           /* options cut by the snaplen: the fixed header is valid */
    }
    l->payload_caplen = ip_end_cap - pay_off;
    if (l->payload_len == 0 || l->payload_caplen == 0)
        return DR_NO_PAYLOAD;
    return L34_DATA;
}

void l34_count_encap(uint64_t *cnt, const L34 *l) {
    uint64_t e = l->encap;
    if (l->encap_depth == L34_TOO_DEEP)
        cnt[(int)DR_ENCAP_TOO_DEEP] += 1;
    while (e != 0) {
        cnt[(int)DR_ENC_GRE + (int)(e & 0xFF) - 1] += 1;
        e >>= 8;
    }
}

void l34_encap_fields(const L34 *l, uint64_t *encap, uint8_t *encap_depth, uint32_t *tunnel_id,
                      uint8_t *outer_ip_version, uint8_t *outer_src, uint8_t *outer_dst) {
    *encap = l->encap;
    *encap_depth = l->encap ? l->encap_depth : 0;
    *tunnel_id = l->encap ? l->tunnel_id : 0;
    *outer_ip_version = l->encap ? l->outer_ip_version : 0;
    memset(outer_src, 0, 16);
    memset(outer_dst, 0, 16);
    if (*outer_ip_version) {
        memcpy(outer_src, l->outer_src, l->outer_ip_version == 4 ? 4 : 16);
        memcpy(outer_dst, l->outer_dst, l->outer_ip_version == 4 ? 4 : 16);
    }
}

int quic_udp_locate(const uint8_t *p, uint32_t caplen, uint16_t linktype, const L34Cfg *cfg,
                    L34 *l, int udp_len) {
    int r = l34_parse(p, caplen, linktype, l, cfg);
    uint32_t ip, hl, tot, udp, ulen;
    if (r != DR_NOT_TCP)
        return 0;
    ip = l->ip_off;
    if (caplen < ip + 20)
        return 0;
    if ((p[ip] >> 4) == 4) {
        hl = (p[ip] & 0x0F) * 4;
        tot = be16(p + ip + 2);
        if (p[ip + 9] != 17 || hl < 20 || (be16(p + ip + 6) & 0x3FFF))
            return 0;
        if (tot == 0)
            tot = caplen - ip;
        if (tot < hl + 8)
            return 0;
        l->ip_version = 4;
        l->src = p + ip + 12;
        l->dst = p + ip + 16;
        l->ttl = p[ip + 8];
        udp = ip + hl;
        ulen = tot - hl;
    } else {
        if (caplen < ip + 40 || p[ip + 6] != 17)
            return 0;
        l->ip_version = 6;
        l->src = p + ip + 8;
        l->dst = p + ip + 24;
        l->ttl = p[ip + 7];
        udp = ip + 40;
        ulen = be16(p + ip + 4);
    }
    if (caplen < udp + 8 || ulen < 8)
        return 0;
    if (udp_len && be16(p + udp + 4) < ulen && be16(p + udp + 4) >= 8)
        ulen = be16(p + udp + 4);
    l->tcp_off = udp;
    /* no TCP here: its fields zero, not what the walk's previous packet left in *l (a MSG_QUIC
     * message's seq, ack, window and flags were that packet's, or stack garbage) */
    l->seq = l->ack = 0;
    l->window = 0;
    l->tcp_flags = 0;
    l->src_port = be16(p + udp);
    l->dst_port = be16(p + udp + 2);
    l->payload_off = udp + 8;
    l->payload_len = ulen - 8;
    l->payload_caplen = caplen - (udp + 8) < ulen - 8 ? caplen - (udp + 8) : ulen - 8;
    return 1;
}
