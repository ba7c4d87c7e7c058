/* Why a packet produced no message, or what was odd about it: the dissector's counters
 * (DissectCounters.n in ext/walk/message.pxd), and the result of the walk (ext/walk/l34.c),
 * which returns these codes. C, so that the walk's C and the Cython modules read one enum;
 * declared for Cython in ext/walk/message.pxd. webtap.records.message.DISSECT_REASONS names
 * them in this order. */
#ifndef WT_REASONS_H
#define WT_REASONS_H

enum DissectReason {
    DR_PACKETS = 0, /* packets offered to the dissector */
    DR_LINK_UNSUPPORTED, /* link type webtap does not dissect */
    DR_LINK_TRUNCATED, /* link header cut short */
    DR_NOT_IP, /* ethertype / family is not IPv4 or IPv6 (ARP, ...) */
    DR_IP_TRUNCATED, /* IP header cut short */
    DR_IP_BAD_HEADER, /* bad version, header length or total length */
    DR_IP_FRAGMENT, /* a fragment (first or later): flagged and skipped */
    DR_NOT_TCP, /* IP payload is not TCP */
    DR_TCP_TRUNCATED, /* TCP header cut short */
    DR_TCP_BAD_OFFSET, /* TCP data offset < 5 or past the end of the packet */
    DR_NO_PAYLOAD, /* TCP segment without payload (SYN, pure ACK, ...) */
    DR_NOT_HTTP, /* payload does not start an HTTP request or response */
    DR_HTTP_REQUEST, /* request first packets found */
    DR_HTTP_RESPONSE, /* response first packets found */
    DR_URI_TRUNCATED, /* requests whose URI was cut by the end of the packet */
    DR_HEADERS_INCOMPLETE, /* messages whose header block continues in a later packet */
    DR_LINE_TOO_LONG, /* header lines over the per-line bound (not parsed) */
    DR_PAYLOAD_TRUNCATED, /* messages whose payload was cut by the snaplen */
    /* Messages after another in one segment (ext/walk/dissect.pyx _more_messages; docs/ACCURACY.md */
    /* "Messages inside a segment"), and why no further message was looked for. */
    DR_MID_REQUEST, /* requests found after another message's end in the same segment */
    DR_MID_RESPONSE, /* responses found likewise */
    DR_BODY_CONTINUES, /* messages whose body (known length or chunks) runs past the segment */
    DR_LENGTH_UNKNOWN, /* messages followed in their segment by bytes whose extent the */
    /* packet cannot tell (bad Content-Length, a request's Transfer- */
    /* Encoding without chunked, bad chunks, an unparsed long header */
    /* line) or that the snaplen cut */
    DR_REST_NOT_HTTP, /* a message's end is known and the bytes after it start no message */
    DR_LINE_SPLIT, /* a whole payload that is only the beginning of a request or status */
    /* line ("G", then the rest): not read (no reassembly) */
    /* Messages after a header block continued from an earlier segment (ext/walk/httpcont.c; */
    /* docs/ACCURACY.md "After a continued header block") */
    DR_AFTER_CONT_REQUEST, /* requests found after a continued header block */
    DR_AFTER_CONT_RESPONSE, /* responses found likewise */
    DR_CONT_UNKNOWN, /* continued header blocks followed by bytes the packet does not */
    /* tell to be a message's start (not looked at) */
    /* Encapsulations (ext/walk/l34.c EncapKind): packets whose walk crossed each layer, whatever */
    /* their outcome; DR_ENC_GRE + kind - 1, in EncapKind order. */
    DR_ENCAP_TOO_DEEP, /* walks given up after L34_MAX_ENCAP layers (counted not_ip too) */
    DR_ENC_GRE,
    DR_ENC_ERSPAN,
    DR_ENC_ETH,
    DR_ENC_VXLAN,
    DR_ENC_GENEVE,
    DR_ENC_GTPU,
    DR_ENC_TEREDO,
    DR_ENC_AYIYA,
    DR_ENC_4IN4,
    DR_ENC_6IN4,
    DR_ENC_4IN6,
    DR_ENC_6IN6,
    DR_ENC_PPPOE,
    DR_ENC_MPLS,
    DR_ENC_LLC,
    DR_ENC_WLAN,
    DR_ENC_PPP,
    DR_N, /* number of counters */
};

#endif
