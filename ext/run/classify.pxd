# The feeder's reader pass, beside the dissector: which packets of a batch are HTTP first
# packets, their kind, consumer hash (Eq. 3) and 1xx routing, without parsing the messages.
# It walks exactly what ext/walk/dissect.pyx walks: link/IP/TCP (ext/walk/l34.pxd) and the first bytes of
# the payload (ext/walk/httpstart.pxd, the dissector's own rule), so it takes exactly the packets the
# dissector makes messages of; the consumers dissect them. ext/run/feeder.pyx wraps it
# (classify_batch, feed_dtype) and routes its output (Dispatcher.feed_packets).
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset

from packet cimport PacketRef
from message cimport (MSG_REQUEST, DR_PACKETS, DR_LINK_TRUNCATED, DR_NOT_HTTP, DR_HTTP_REQUEST,
                     DR_HTTP_RESPONSE, DR_PAYLOAD_TRUNCATED, DR_LINE_SPLIT, DR_CONT_UNKNOWN)
from l34 cimport L34, L34Cfg, L34_DATA, batch_caplen, l34_parse, l34_count_encap
from httpstart cimport http_start, http_status_code, http_split_start, WT_MAX_METHOD_LEN
from httpcont cimport http_after_continuation, CONT_UNKNOWN
from hashes cimport eq3_of

# One HTTP first packet as the reader found it: where it lies, and what routing needs.
ctypedef struct FeedPkt:
    PacketRef ref        # the packet (offset into the batch buffer, caplen clipped to it)
    uint8_t src_ip[16]   # addresses in the HttpMsg layout (IPv4 in bytes 0-3, zeros after)
    uint8_t dst_ip[16]
    uint32_t seq
    uint32_t hash        # Eq. 3 before the modulo (key: ACK of a request, SEQ of a response)
    uint32_t next_seq    # a 1xx response: SEQ + payload length, where its final response starts
    uint16_t src_port
    uint16_t dst_port
    uint8_t kind         # MSG_REQUEST / MSG_RESPONSE
    uint8_t interim      # 1: a 1xx response other than 101
    uint8_t ip_version
    uint8_t _pad[5]


cdef inline size_t classify_packets(const PacketRef *refs, size_t n, const uint8_t *base,
                                    uint64_t size, FeedPkt *out, uint64_t *cnt,
                                    const L34Cfg *cfg) noexcept nogil:
    """The HTTP first packets of refs[0:n] (bytes in base[0:size]) into out[], in packet order;
    returns how many. cnt (indexed by DissectReason) gets the dissector's counters for the
    batch except uri_truncated, headers_incomplete, line_too_long and those of the messages
    after a first one in a segment, which only parsing the message can tell (the consumers
    count those: httpanalyzer.feeder.MESSAGE_COUNTERS). A payload that starts no message but
    continues a header block after which the packet tells a message starts
    (ext/walk/httpcont.pxd) is routed by that message; continuation_unknown is counted here
    (such packets are not routed)."""
    cdef size_t i, k = 0
    cdef uint64_t caplen
    cdef const uint8_t *p
    cdef L34 l
    cdef int r, kind, mid = 0, code
    cdef uint32_t s = 0, t = 0, e = 0, alen, at
    cdef FeedPkt *f
    for i in range(n):
        caplen = batch_caplen(refs, i, n, base, size)
        cnt[<int>DR_PACKETS] += 1
        if caplen == 0:
            cnt[<int>DR_LINK_TRUNCATED] += 1
            continue
        p = base + refs[i].offset
        r = l34_parse(p, <uint32_t>caplen, refs[i].linktype, &l, cfg)
        if l.encap_depth != 0:
            l34_count_encap(cnt, &l)
        if r != L34_DATA:
            cnt[r] += 1
            continue
        at = 0
        kind = http_start(p + l.payload_off, l.payload_caplen, l.payload_len, &s, &t, &mid)
        if kind == 0:
            cnt[<int>DR_NOT_HTTP] += 1
            if l.payload_caplen <= <uint32_t>WT_MAX_METHOD_LEN + 2 and \
                    http_split_start(p + l.payload_off, l.payload_caplen, l.payload_len):
                cnt[<int>DR_LINE_SPLIT] += 1
            kind = http_after_continuation(p + l.payload_off, l.payload_caplen, l.payload_len,
                                           &at, &s, &t, &mid)
            if kind <= 0:
                if kind == CONT_UNKNOWN:
                    cnt[<int>DR_CONT_UNKNOWN] += 1
                continue
        f = &out[k]
        k += 1
        memcpy(&f.ref, &refs[i], sizeof(PacketRef))
        f.ref.caplen = <uint32_t>caplen
        memset(f.src_ip, 0, 32)
        alen = 4 if l.ip_version == 4 else 16
        memcpy(f.src_ip, l.src, alen)
        memcpy(f.dst_ip, l.dst, alen)
        f.seq = l.seq + at
        f.src_port = l.src_port
        f.dst_port = l.dst_port
        f.ip_version = l.ip_version
        f.kind = <uint8_t>kind
        f.interim = 0
        f.next_seq = 0
        memset(f._pad, 0, 5)
        if l.payload_caplen < l.payload_len:
            cnt[<int>DR_PAYLOAD_TRUNCATED] += 1
        if at != 0:
            pass                # a message after a continued block: the packet stays not_http
        elif kind == MSG_REQUEST:
            cnt[<int>DR_HTTP_REQUEST] += 1
        else:
            cnt[<int>DR_HTTP_RESPONSE] += 1
        if kind == MSG_REQUEST:
            f.hash = eq3_of(f.src_ip, f.src_port, f.dst_ip, f.dst_port, f.ip_version, l.ack)
        else:
            f.hash = eq3_of(f.src_ip, f.src_port, f.dst_ip, f.dst_port, f.ip_version, f.seq)
            code = http_status_code(p + l.payload_off + at, s, l.payload_caplen - at, &e, &t)
            if code >= 100 and code < 200 and code != 101:
                f.interim = 1
                f.next_seq = l.seq + l.payload_len
    return k
