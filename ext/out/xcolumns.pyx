# cython: freethreading_compatible = False
"""The exchange records' Arrow columns (issue 33), written by C without the GIL: the exchange
stage's rows (ext/pair/exchange.pxd XRecord) in a given order, their own columns (addresses,
Community ID, times, frames, lengths, flags) and the connection's handshake fields joined from
the handshake records (the same ClientHello frame and client and server ports; the first such
record when several have them).

It replaced a numpy column at a time under the GIL (webtap.records.exchange before 2026-11-29),
which ran beside the handshakes' finish and the other outputs' encoding at the end of a run
and, held the GIL there, made them wait (docs/PERFORMANCE.md "Fourteenth session"). The Python
side (webtap.records.exchange.exchange_table) hands the buffers to pyarrow, one call a column.
"""
import numpy as np

cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free
from libc.string cimport memcmp, memcpy

from communityid cimport WT_CID_LEN as C_ID_LEN, wt_community_id
from digest cimport wt_crypto_no_atexit
from exchange cimport XRecord, XF_EARLY, XF_TICKETS, XF_UNSYNCED
from util cimport WT_IP_TEXT, wt_alloc, wt_ip_text, wt_zalloc

cnp.import_array()
wt_crypto_no_atexit()   # no libcrypto clean-up at exit, when first (ext/out/digest.h)

#: unmatched_reason by XRecord.reason (httpanalyzer.tls.EXCHANGE_REASONS)
REASONS = (None, "gc", "end", "cap", "no_request")
cdef const char *_REASON_TEXT = b"gcendcapno_request"      # REASONS[1:] one after another
cdef int _REASON_AT[5]
cdef int _REASON_LEN[5]
_REASON_AT[:] = [0, 0, 2, 5, 8]
_REASON_LEN[:] = [0, 2, 3, 3, 10]
cdef const char *_HEX = b"0123456789abcdef"

#: the joined string columns, in the order of the handshake parts handed in
JOINED = ("sni", "alpn", "version", "ja4")      # alpn: the server's choice (server_alpn)


cdef struct StrIn:
    const int64_t *offs
    const uint8_t *data
    const uint8_t *valid


cdef struct StrOut:
    int32_t *offs
    uint8_t *data
    uint8_t *bits
    int64_t nulls


# A connection's texts and Community ID, cached: its records share them (the TLS bench trace:
# 25,778 records of 9,565 connections; the id's SHA-1 and the two address texts were ~3.5 ms)
cdef struct Flow:
    uint8_t cip[16]
    uint8_t sip[16]
    uint16_t cport
    uint16_t sport
    uint8_t ipv
    uint8_t used
    uint8_t clen
    uint8_t slen
    char ctext[WT_IP_TEXT]
    char stext[WT_IP_TEXT]
    uint8_t cid[C_ID_LEN]

cdef enum:
    FLOW_SLOTS = 2048          # direct-mapped, by the flow's hash


cdef inline uint64_t _load64(const uint8_t *p) noexcept nogil:
    cdef uint64_t v
    memcpy(&v, p, 8)
    return v


cdef inline Py_ssize_t _flow_slot(const XRecord *r) noexcept nogil:
    return <Py_ssize_t>(_mix(_load64(r.client_ip) ^ (_load64(r.client_ip + 8) * 3)
                             ^ (_load64(r.server_ip) * 5) ^ (_load64(r.server_ip + 8) * 7)
                             ^ ((<uint64_t>r.client_port << 16) | r.server_port)
                             ^ (<uint64_t>r.ip_version << 40)) & (FLOW_SLOTS - 1))


cdef inline bint _same_flow(const Flow *f, const XRecord *r) noexcept nogil:
    return (f.used and f.cport == r.client_port and f.sport == r.server_port
            and f.ipv == r.ip_version and memcmp(f.cip, r.client_ip, 16) == 0
            and memcmp(f.sip, r.server_ip, 16) == 0)


cdef int _flow_fill(Flow *f, const XRecord *r) noexcept nogil:
    """The flow's texts and id (0, or -1 when libcrypto fails)."""
    memcpy(f.cip, r.client_ip, 16)
    memcpy(f.sip, r.server_ip, 16)
    f.cport = r.client_port
    f.sport = r.server_port
    f.ipv = r.ip_version
    f.used = 1
    f.clen = <uint8_t>wt_ip_text(r.client_ip, r.ip_version != 4, f.ctext)
    f.slen = <uint8_t>wt_ip_text(r.server_ip, r.ip_version != 4, f.stext)
    return wt_community_id(0, r.client_ip, r.client_port, r.server_ip, r.server_port,
                           4 if r.ip_version == 4 else 16, 6, f.cid)


cdef inline void _set(uint8_t *bits, Py_ssize_t i) noexcept nogil:
    bits[i >> 3] |= <uint8_t>(1 << (i & 7))


cdef inline uint64_t _mix(uint64_t k) noexcept nogil:
    k ^= k >> 33
    k *= 0xff51afd7ed558ccdULL
    k ^= k >> 33
    return k


cdef inline uint64_t _key(uint64_t frame, uint16_t cport, uint16_t sport) noexcept nogil:
    return (frame << 32) | (<uint64_t>cport << 16) | sport


def _bits(n):
    return np.zeros((n + 7) // 8 if n > 0 else 1, dtype=np.uint8)


def exchange_columns(raw, order, hs=None, bint own=True, bint joined=True):
    """The columns of the records raw[order] (raw: XRecord rows, EXCHANGE_RECORD_DTYPE or their
    bytes; order: row numbers, int64): their own (own) and the joined ones (joined: JOINED,
    alpn_offered, h2, version), as numpy buffers: {name: parts}, parts being (values,
    validity bitmap, nulls) for numbers, (value bits, validity bitmap, nulls) for booleans,
    (int32 offsets, bytes, validity bitmap, nulls) for strings and (int32 list offsets, int32
    item offsets, item bytes, validity bitmap, nulls) for alpn_offered; a bitmap is Arrow's
    (bit i of byte i // 8 set: valid), ignored when nulls is 0.

    hs: the handshake records' parts (webtap.records.exchange._handshake_parts), or None:
    (request_frame uint64, its validity uint8 0/1, client_port uint16, server_port uint16,
    then per JOINED column (int64 offsets[m + 1], bytes, validity uint8 0/1), then alpn (the
    client's offer) as (int64 list offsets[m + 1], int64 item offsets, item bytes, validity))."""
    cdef const uint8_t[::1] rb = np.ascontiguousarray(raw).view(np.uint8).reshape(-1)
    cdef const int64_t[::1] ordv = np.ascontiguousarray(order, dtype=np.int64)
    cdef Py_ssize_t nrec = rb.shape[0] // sizeof(XRecord), n = ordv.shape[0], i, m = 0, k
    cdef Py_ssize_t no = n if own else 0       # the own columns' rows (none when not asked)
    if rb.shape[0] % sizeof(XRecord):
        raise ValueError("exchange_columns: raw is not whole XRecord rows")
    if n > 0x7FFFFFFF // 46:
        raise ValueError("exchange_columns: too many rows for one string array")
    for i in range(n):
        if ordv[i] < 0 or ordv[i] >= nrec:
            raise IndexError("exchange_columns: a row outside the records")
    cdef const XRecord *recs = <const XRecord *>&rb[0] if nrec else NULL

    # -- the handshake parts ---------------------------------------------------------------
    cdef const uint64_t *hframe = NULL
    cdef const uint8_t *hfvalid = NULL
    cdef const uint16_t *hcport = NULL
    cdef const uint16_t *hsport = NULL
    cdef StrIn js[4]
    cdef const int64_t *lo = NULL
    cdef const int64_t *io = NULL
    cdef const uint8_t *idata = NULL
    cdef const uint8_t *lvalid = NULL
    keep = []                          # the parts' arrays, alive while C reads them
    if hs is not None and joined:
        arrs = [np.ascontiguousarray(hs[0], dtype=np.uint64), np.ascontiguousarray(hs[1], dtype=np.uint8),
                np.ascontiguousarray(hs[2], dtype=np.uint16), np.ascontiguousarray(hs[3], dtype=np.uint16)]
        m = arrs[0].shape[0]
        if any(a.shape[0] != m for a in arrs):
            raise ValueError("exchange_columns: handshake columns of different lengths")
        keep += arrs
        hframe = <const uint64_t *>cnp.PyArray_DATA(arrs[0])
        hfvalid = <const uint8_t *>cnp.PyArray_DATA(arrs[1])
        hcport = <const uint16_t *>cnp.PyArray_DATA(arrs[2])
        hsport = <const uint16_t *>cnp.PyArray_DATA(arrs[3])
        for k in range(4):
            offs, data, valid = hs[4 + k]
            offs = np.ascontiguousarray(offs, dtype=np.int64)
            data = np.ascontiguousarray(data, dtype=np.uint8)
            valid = np.ascontiguousarray(valid, dtype=np.uint8)
            if offs.shape[0] != m + 1 or valid.shape[0] != m or int(offs[m]) > data.shape[0]:
                raise ValueError("exchange_columns: a handshake string column's parts disagree")
            keep += [offs, data, valid]
            js[k].offs = <const int64_t *>cnp.PyArray_DATA(offs)
            js[k].data = <const uint8_t *>cnp.PyArray_DATA(data)
            js[k].valid = <const uint8_t *>cnp.PyArray_DATA(valid)
        loffs, ioffs, idat, lval = hs[8]
        loffs = np.ascontiguousarray(loffs, dtype=np.int64)
        ioffs = np.ascontiguousarray(ioffs, dtype=np.int64)
        idat = np.ascontiguousarray(idat, dtype=np.uint8)
        lval = np.ascontiguousarray(lval, dtype=np.uint8)
        if (loffs.shape[0] != m + 1 or lval.shape[0] != m or int(loffs[m]) >= ioffs.shape[0]
                or int(ioffs[ioffs.shape[0] - 1]) > idat.shape[0]):
            raise ValueError("exchange_columns: the handshake list column's parts disagree")
        keep += [loffs, ioffs, idat, lval]
        lo = <const int64_t *>cnp.PyArray_DATA(loffs)
        io = <const int64_t *>cnp.PyArray_DATA(ioffs)
        idata = <const uint8_t *>cnp.PyArray_DATA(idat)
        lvalid = <const uint8_t *>cnp.PyArray_DATA(lval)

    # -- the columns of fixed size -----------------------------------------------------------
    cip_o = np.zeros(no + 1, np.int32)
    cip_d = np.empty(no * 46 + 1, np.uint8)
    sip_o = np.zeros(no + 1, np.int32)
    sip_d = np.empty(no * 46 + 1, np.uint8)
    cid_o = np.arange(0, (no + 1) * C_ID_LEN, C_ID_LEN, dtype=np.int32)
    cid_d = np.empty(max(no, 1) * C_ID_LEN, np.uint8)
    cport = np.empty(no, np.uint16)
    sport = np.empty(no, np.uint16)
    req_ts = np.zeros(no, np.int64)
    resp_ts = np.zeros(no, np.int64)
    req_fr = np.zeros(no, np.uint64)
    resp_fr = np.zeros(no, np.uint64)
    rtime = np.zeros(no, np.int64)
    index = np.zeros(no, np.uint32)
    qlen = np.zeros(no, np.uint32)
    rlen = np.zeros(no, np.uint32)
    chf = np.empty(no, np.uint64)
    ipv = np.empty(no, np.uint8)
    hq_b, hr_b, both_b, ql_b, rl_b, why_b = _bits(no), _bits(no), _bits(no), _bits(no), _bits(no), _bits(no)
    matched, tickets, early, unsynced = _bits(no), _bits(no), _bits(no), _bits(no)
    why_o = np.zeros(no + 1, np.int32)
    why_d = np.empty(no * 10 + 1, np.uint8)
    jrow_a = np.full(n, -1, np.int64)
    cdef int32_t *p_cip_o = <int32_t *>cnp.PyArray_DATA(cip_o)
    cdef uint8_t *p_cip_d = <uint8_t *>cnp.PyArray_DATA(cip_d)
    cdef int32_t *p_sip_o = <int32_t *>cnp.PyArray_DATA(sip_o)
    cdef uint8_t *p_sip_d = <uint8_t *>cnp.PyArray_DATA(sip_d)
    cdef uint8_t *p_cid = <uint8_t *>cnp.PyArray_DATA(cid_d)
    cdef uint16_t *p_cport = <uint16_t *>cnp.PyArray_DATA(cport)
    cdef uint16_t *p_sport = <uint16_t *>cnp.PyArray_DATA(sport)
    cdef int64_t *p_qts = <int64_t *>cnp.PyArray_DATA(req_ts)
    cdef int64_t *p_rts = <int64_t *>cnp.PyArray_DATA(resp_ts)
    cdef uint64_t *p_qfr = <uint64_t *>cnp.PyArray_DATA(req_fr)
    cdef uint64_t *p_rfr = <uint64_t *>cnp.PyArray_DATA(resp_fr)
    cdef int64_t *p_rtime = <int64_t *>cnp.PyArray_DATA(rtime)
    cdef uint32_t *p_index = <uint32_t *>cnp.PyArray_DATA(index)
    cdef uint32_t *p_qlen = <uint32_t *>cnp.PyArray_DATA(qlen)
    cdef uint32_t *p_rlen = <uint32_t *>cnp.PyArray_DATA(rlen)
    cdef uint64_t *p_chf = <uint64_t *>cnp.PyArray_DATA(chf)
    cdef uint8_t *p_ipv = <uint8_t *>cnp.PyArray_DATA(ipv)
    cdef uint8_t *p_hq = <uint8_t *>cnp.PyArray_DATA(hq_b)
    cdef uint8_t *p_hr = <uint8_t *>cnp.PyArray_DATA(hr_b)
    cdef uint8_t *p_both = <uint8_t *>cnp.PyArray_DATA(both_b)
    cdef uint8_t *p_ql = <uint8_t *>cnp.PyArray_DATA(ql_b)
    cdef uint8_t *p_rl = <uint8_t *>cnp.PyArray_DATA(rl_b)
    cdef uint8_t *p_why_b = <uint8_t *>cnp.PyArray_DATA(why_b)
    cdef uint8_t *p_matched = <uint8_t *>cnp.PyArray_DATA(matched)
    cdef uint8_t *p_tickets = <uint8_t *>cnp.PyArray_DATA(tickets)
    cdef uint8_t *p_early = <uint8_t *>cnp.PyArray_DATA(early)
    cdef uint8_t *p_unsynced = <uint8_t *>cnp.PyArray_DATA(unsynced)
    cdef int32_t *p_why_o = <int32_t *>cnp.PyArray_DATA(why_o)
    cdef uint8_t *p_why_d = <uint8_t *>cnp.PyArray_DATA(why_d)
    cdef int64_t *jrow = <int64_t *>cnp.PyArray_DATA(jrow_a)

    cdef const XRecord *r
    cdef int32_t oc = 0, osp = 0, ow = 0, ln
    cdef int64_t n_hq = 0, n_hr = 0, n_both = 0, n_ql = 0, n_rl = 0, n_why = 0
    cdef int bad = 0
    cdef uint64_t cap = 1, h, key
    cdef uint64_t *hkeys = NULL
    cdef int64_t *hrows = NULL
    # the join's hash of the handshakes' keys (their first row for a key)
    cdef int64_t jsz[4]
    cdef int64_t n_items = 0, n_item_bytes = 0
    jsz[:] = [0, 0, 0, 0]
    cdef Flow *flows = NULL
    cdef Flow *fl
    while cap < <uint64_t>(2 * m):
        cap <<= 1
    try:
        # the checked allocator (MemoryError), with the GIL, before the pass
        if own:
            flows = <Flow *>wt_zalloc(FLOW_SLOTS, sizeof(Flow))
        if m:
            hkeys = <uint64_t *>wt_alloc(cap * sizeof(uint64_t))
            hrows = <int64_t *>wt_alloc(cap * sizeof(int64_t))
        with nogil:
            if m:
                for k in range(<Py_ssize_t>cap):
                    hrows[k] = -1
                for k in range(m):
                    # a row without a ClientHello frame has key 0, which no exchange has
                    key = _key(hframe[k], hcport[k], hsport[k]) if hfvalid[k] else 0
                    h = _mix(key) & (cap - 1)
                    while hrows[h] != -1 and hkeys[h] != key:
                        h = (h + 1) & (cap - 1)
                    if hrows[h] == -1:
                        hkeys[h] = key
                        hrows[h] = k
            for i in range(n):
                if bad:
                    break
                r = &recs[ordv[i]]
                if own:
                    fl = &flows[_flow_slot(r)]
                    if not _same_flow(fl, r) and _flow_fill(fl, r) != 0:
                        bad = 1
                        break
                    memcpy(p_cip_d + oc, fl.ctext, fl.clen)
                    oc += fl.clen
                    p_cip_o[i + 1] = oc
                    memcpy(p_sip_d + osp, fl.stext, fl.slen)
                    osp += fl.slen
                    p_sip_o[i + 1] = osp
                    memcpy(p_cid + i * C_ID_LEN, fl.cid, C_ID_LEN)
                    p_cport[i] = r.client_port
                    p_sport[i] = r.server_port
                    p_qts[i] = r.req_ts
                    p_rts[i] = r.resp_ts
                    p_qfr[i] = r.req_frame
                    p_rfr[i] = r.resp_frame
                    p_rtime[i] = r.resp_ts - r.req_ts
                    p_index[i] = r.index
                    p_qlen[i] = r.req_rec_len
                    p_rlen[i] = r.resp_rec_len
                    p_chf[i] = r.ch_frame
                    p_ipv[i] = r.ip_version
                    if r.has_req == 1:
                        _set(p_hq, i)
                        n_hq += 1
                        if r.req_rec_len != 0:
                            _set(p_ql, i)
                            n_ql += 1
                    if r.has_resp == 1:
                        _set(p_hr, i)
                        n_hr += 1
                        if r.resp_rec_len != 0:
                            _set(p_rl, i)
                            n_rl += 1
                        if r.has_req == 1:
                            _set(p_both, i)
                            n_both += 1
                    if r.reason > 4:
                        bad = 2
                        break
                    if r.reason == 0:
                        _set(p_matched, i)
                    else:
                        _set(p_why_b, i)
                        n_why += 1
                        memcpy(p_why_d + ow, _REASON_TEXT + _REASON_AT[r.reason], _REASON_LEN[r.reason])
                        ow += _REASON_LEN[r.reason]
                    p_why_o[i + 1] = ow
                    if r.flags & XF_TICKETS:
                        _set(p_tickets, i)
                    if r.flags & XF_EARLY:
                        _set(p_early, i)
                    if r.flags & XF_UNSYNCED:
                        _set(p_unsynced, i)
                if not joined:
                    continue
                # the handshake of its connection
                if m and r.ch_frame != 0:
                    key = _key(r.ch_frame, r.client_port, r.server_port)
                    h = _mix(key) & (cap - 1)
                    while hrows[h] != -1:
                        if hkeys[h] == key:
                            jrow[i] = hrows[h]
                            break
                        h = (h + 1) & (cap - 1)
                k = jrow[i]
                for ln in range(4):
                    if k >= 0 and js[ln].valid[k]:
                        jsz[ln] += js[ln].offs[k + 1] - js[ln].offs[k]
                if r.version != 0:
                    jsz[2] += 6 - ((js[2].offs[k + 1] - js[2].offs[k]) if k >= 0 and js[2].valid[k] else 0)
                if k >= 0 and lvalid[k]:
                    n_items += lo[k + 1] - lo[k]
                    n_item_bytes += io[lo[k + 1]] - io[lo[k]]
    finally:
        free(hkeys)
        free(hrows)
        free(flows)
    if bad == 1:
        raise RuntimeError("exchange_columns: libcrypto SHA-1 failed")
    if bad == 2:
        raise IndexError("exchange_columns: a reason outside the table")
    if max(jsz[0], jsz[1], jsz[2], jsz[3], n_item_bytes) >= 2**31 or n_items >= 2**31:
        raise OverflowError("exchange_columns: a string column of 2 GiB or more")

    # -- the joined columns ------------------------------------------------------------------
    out = {}
    cdef StrOut jo[4]
    joined_cols = []
    for k in range(4 if joined else 0):
        o_, d_, b_ = np.zeros(n + 1, np.int32), np.empty(max(jsz[k], 1), np.uint8), _bits(n)
        joined_cols.append((o_, d_, b_))
        jo[k].offs = <int32_t *>cnp.PyArray_DATA(o_)
        jo[k].data = <uint8_t *>cnp.PyArray_DATA(d_)
        jo[k].bits = <uint8_t *>cnp.PyArray_DATA(b_)
        jo[k].nulls = 0
    lo_out, io_out = np.zeros((n if joined else 0) + 1, np.int32), np.zeros(n_items + 1, np.int32)
    id_out, l_b = np.empty(max(n_item_bytes, 1), np.uint8), _bits(n if joined else 0)
    h2_v, h2_b = _bits(n if joined else 0), _bits(n if joined else 0)
    cdef int32_t *p_lo = <int32_t *>cnp.PyArray_DATA(lo_out)
    cdef int32_t *p_io = <int32_t *>cnp.PyArray_DATA(io_out)
    cdef uint8_t *p_id = <uint8_t *>cnp.PyArray_DATA(id_out)
    cdef uint8_t *p_lb = <uint8_t *>cnp.PyArray_DATA(l_b)
    cdef uint8_t *p_h2v = <uint8_t *>cnp.PyArray_DATA(h2_v)
    cdef uint8_t *p_h2b = <uint8_t *>cnp.PyArray_DATA(h2_b)
    cdef int64_t l_nulls = 0, h2_nulls = 0, a, b, t, o
    cdef int32_t nl = 0, nib = 0
    cdef uint16_t v
    cdef bint sa_ok, sa_h2, fo_ok, fo_h2
    cdef Py_ssize_t nj = n if joined else 0
    with nogil:
        for i in range(nj):
            k = jrow[i]
            r = &recs[ordv[i]]
            for ln in range(4):
                o = jo[ln].offs[i]
                if ln == 2 and r.version != 0:
                    # the version the stage read in the ServerHello, else the handshake record's
                    v = r.version
                    jo[ln].data[o] = 48            # '0'
                    jo[ln].data[o + 1] = 120       # 'x'
                    jo[ln].data[o + 2] = _HEX[(v >> 12) & 15]
                    jo[ln].data[o + 3] = _HEX[(v >> 8) & 15]
                    jo[ln].data[o + 4] = _HEX[(v >> 4) & 15]
                    jo[ln].data[o + 5] = _HEX[v & 15]
                    o += 6
                    _set(jo[ln].bits, i)
                elif k >= 0 and js[ln].valid[k]:
                    a = js[ln].offs[k]
                    b = js[ln].offs[k + 1]
                    memcpy(jo[ln].data + o, js[ln].data + a, b - a)
                    o += b - a
                    _set(jo[ln].bits, i)
                else:
                    jo[ln].nulls += 1
                jo[ln].offs[i + 1] = <int32_t>o
            # alpn_offered: the client's list
            fo_ok = fo_h2 = False
            if k >= 0 and lvalid[k]:
                _set(p_lb, i)
                for t in range(lo[k], lo[k + 1]):
                    a = io[t]
                    b = io[t + 1]
                    memcpy(p_id + nib, idata + a, b - a)
                    nib += <int32_t>(b - a)
                    nl += 1
                    p_io[nl] = nib
                if lo[k + 1] > lo[k]:
                    fo_ok = True
                    a = io[lo[k]]
                    fo_h2 = io[lo[k] + 1] - a == 2 and idata[a] == 104 and idata[a + 1] == 50
            else:
                l_nulls += 1
            p_lo[i + 1] = nl
            # h2: the server's choice where visible, else the client's first offer
            sa_ok = k >= 0 and js[1].valid[k]
            sa_h2 = False
            if sa_ok:
                a = js[1].offs[k]
                sa_h2 = js[1].offs[k + 1] - a == 2 and js[1].data[a] == 104 and js[1].data[a + 1] == 50
            if sa_ok or fo_ok:
                _set(p_h2b, i)
                if (sa_h2 if sa_ok else fo_h2):
                    _set(p_h2v, i)
            else:
                h2_nulls += 1

    if own:
        out.update({
            "client_ip": (cip_o, cip_d[:oc], None, 0),
            "client_port": (cport, None, 0),
            "server_ip": (sip_o, sip_d[:osp], None, 0),
            "server_port": (sport, None, 0),
            "community_id": (cid_o, cid_d[:n * C_ID_LEN], None, 0),
            "request_ts": (req_ts, hq_b, n - n_hq),
            "response_ts": (resp_ts, hr_b, n - n_hr),
            "request_frame": (req_fr, hq_b, n - n_hq),
            "response_frame": (resp_fr, hr_b, n - n_hr),
            "response_time": (rtime, both_b, n - n_both),
            "exchange_index": (index, hq_b, n - n_hq),
            "request_record_len": (qlen, ql_b, n - n_ql),
            "response_record_len": (rlen, rl_b, n - n_rl),
            "matched": (matched, None, 0),
            "unmatched_reason": (why_o, why_d[:ow], why_b, n - n_why),
            "tickets_skipped": (tickets, None, 0),
            "early_data": (early, None, 0),
            "unsynced": (unsynced, None, 0),
            "client_hello_frame": (chf, None, 0),
            "ip_version": (ipv, None, 0),
        })
    if joined:
        for k, name in enumerate(JOINED):
            o_, d_, b_ = joined_cols[k]
            out[name] = (o_, d_[:jsz[k]], b_, jo[k].nulls)
        out["alpn_offered"] = (lo_out, io_out, id_out[:nib], l_b, l_nulls)
        out["h2"] = (h2_v, h2_b, h2_nulls)
    del keep
    return out
