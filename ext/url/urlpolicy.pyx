# cython: freethreading_compatible = False
"""Cross-layer rules of the URL filter (issue 34), applied in the one pass.

``match_rules`` runs over one kind of lookup of a batch (the GETs that ``urlmatch.extract`` found,
or the ClientHellos of ``SniTable.extract*``) in one nogil loop and gives, per lookup, the
number of the first rule whose every condition holds (0: none) and that rule's action. The rules
come compiled by urlfilter.policy (the rule file's parser) as three NumPy arrays and one byte
blob; the semantics of each condition are documented there and in docs/urlfilter.md "Rules
across layers". No Python runs per lookup.

A rule is a conjunction of conditions; a condition holds when any of its values does:

* CLIENT: the client's (source) address lies in the value's CIDR (same IP version).
* PORT: the server's (destination) port lies in [lo, hi].
* URL: the value (a key, ext/url/urlcanon.h key form) is the lookup's key or a prefix of it on a
  component boundary -- the tree's prefix rule, urlbase.h wt_base_boundary.
* UA: the value (lower case) occurs in the GET's User-Agent value, ASCII case-insensitively.
  A lookup without a User-Agent (no header, a ClientHello) never holds.
* SNI: the ClientHello's server_name equals the value or ends with "." + value, ASCII
  case-insensitively. A GET never holds.
* JA4: the ClientHello's JA4 (36 characters) equals the value. A GET never holds.
* EXT: the last path segment of the key (before the first '?') ends with "." + value, ASCII
  case-insensitively, and has something before that dot.
* PROTO: the lookup's protocol (0 http, 1 tls, 2 quic) is the value.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t
from libc.string cimport memchr, memcmp

import numpy as np

from webtap.records.message import MESSAGE_DTYPE as _MESSAGE_DTYPE

from message cimport HttpMsg
from urlcanon cimport webtap_host_len
from util cimport wt_now_ns


cdef extern from "urlbase.h" nogil:
    int wt_base_boundary(const uint8_t *q, size_t b, size_t host_end, size_t qpos)


cdef enum:
    K_CLIENT = 1
    K_PORT = 2
    K_URL = 3
    K_UA = 4
    K_SNI = 5
    K_JA4 = 6
    K_EXT = 7
    K_PROTO = 8
    C_JA4_LEN = 36

KINDS = {"client": K_CLIENT, "port": K_PORT, "url": K_URL, "ua": K_UA, "sni": K_SNI,
         "ja4": K_JA4, "ext": K_EXT, "proto": K_PROTO}

ctypedef struct Rule:
    uint8_t action
    uint8_t _pad[3]
    uint32_t c0          # its conditions: conds[c0:c1]
    uint32_t c1

ctypedef struct Cond:
    uint8_t kind
    uint8_t _pad[3]
    uint32_t v0          # its values: vals[v0:v1]
    uint32_t v1

ctypedef struct Val:
    uint32_t off         # text values: blob[off:off + len]
    uint32_t len
    uint16_t lo          # PORT: range; PROTO: lo
    uint16_t hi
    uint8_t plen         # CLIENT: prefix length in bits
    uint8_t ver          # CLIENT: 4 or 6
    uint8_t _pad[2]
    uint8_t net[16]      # CLIENT: network address (IPv4 in bytes 0-3)

RULE_DTYPE = np.dtype([("action", "u1"), ("_pad", "u1", (3,)), ("c0", "<u4"), ("c1", "<u4")])
COND_DTYPE = np.dtype([("kind", "u1"), ("_pad", "u1", (3,)), ("v0", "<u4"), ("v1", "<u4")])
VAL_DTYPE = np.dtype([("off", "<u4"), ("len", "<u4"), ("lo", "<u2"), ("hi", "<u2"), ("plen", "u1"),
                      ("ver", "u1"), ("_pad", "u1", (2,)), ("net", "u1", (16,))])
assert RULE_DTYPE.itemsize == sizeof(Rule) and COND_DTYPE.itemsize == sizeof(Cond)
assert VAL_DTYPE.itemsize == sizeof(Val)

JA4_LEN = C_JA4_LEN


cdef inline uint8_t _lower(uint8_t c) noexcept nogil:
    return c + 32 if 65 <= c <= 90 else c


cdef inline bint _eq_ci(const uint8_t *a, const uint8_t *lower, size_t n) noexcept nogil:
    """a[:n] equals lower[:n] (already lower case), ASCII case-insensitively."""
    cdef size_t i
    for i in range(n):
        if _lower(a[i]) != lower[i]:
            return False
    return True


cdef inline bint _find_ci(const uint8_t *h, size_t hn, const uint8_t *v, size_t n) noexcept nogil:
    """v[:n] (lower case) occurs in h[:hn], ASCII case-insensitively: memchr (vectorised in libc)
    for each case of the first byte, then the rest compared. No per-byte loop over h."""
    cdef const uint8_t *p
    cdef const uint8_t *end = h + hn
    cdef uint8_t c = v[0]
    cdef int k
    if n == 0:
        return True
    for k in range(2):
        if k == 1:
            if not (97 <= c <= 122):
                break
            c -= 32
        p = h
        while <size_t>(end - p) >= n:
            p = <const uint8_t *>memchr(p, c, <size_t>(end - p) - n + 1)
            if p == NULL:
                break
            if _eq_ci(p + 1, v + 1, n - 1):
                return True
            p += 1
    return False


cdef inline bint _in_cidr(const uint8_t *a, const Val *v) noexcept nogil:
    cdef uint32_t full = v.plen >> 3, rest = v.plen & 7
    cdef uint8_t mask
    if full and memcmp(a, v.net, full) != 0:
        return False
    if rest:
        mask = <uint8_t>(0xFF << (8 - rest))
        return (a[full] & mask) == (v.net[full] & mask)
    return True


ctypedef struct _Row:
    const HttpMsg *m
    const uint8_t *key
    size_t kn
    size_t host_end      # computed on first need (bounds_ready)
    size_t qpos
    size_t ext0          # EXT: the extension after the last dot of the last segment, [ext0, qpos)
    bint bounds_ready
    bint has_ext
    const uint8_t *ua    # NULL: none
    size_t ua_n
    const uint8_t *sni   # NULL: none (a GET)
    size_t sni_n
    const uint8_t *ja4   # NULL: none
    uint8_t proto


cdef inline void _bounds(_Row *r) noexcept nogil:
    cdef size_t i, seg, dot
    if r.bounds_ready:
        return
    r.bounds_ready = True
    r.host_end = webtap_host_len(r.key, r.kn)
    r.qpos = r.host_end
    while r.qpos < r.kn and r.key[r.qpos] != 63:      # '?'
        r.qpos += 1
    r.has_ext = False
    seg = r.qpos
    while seg > r.host_end and r.key[seg - 1] != 47:  # '/': the last segment starts at seg
        seg -= 1
    if seg == r.host_end:                             # no path: no extension
        return
    dot = r.qpos
    while dot > seg and r.key[dot - 1] != 46:         # '.'
        dot -= 1
    if dot > seg + 1:                                 # a dot with a name before it
        r.has_ext = True
        r.ext0 = dot


cdef bint _cond(const Cond *c, const Val *vals, const uint8_t *blob, _Row *r) noexcept nogil:
    cdef uint32_t j
    cdef const Val *v
    cdef size_t L
    for j in range(c.v0, c.v1):
        v = &vals[j]
        if c.kind == K_CLIENT:
            if r.m.ip_version == v.ver and _in_cidr(r.m.src_ip, v):
                return True
        elif c.kind == K_PORT:
            if v.lo <= r.m.dst_port <= v.hi:
                return True
        elif c.kind == K_URL:
            L = v.len
            if L <= r.kn and memcmp(r.key, blob + v.off, L) == 0:
                if L == r.kn:
                    return True
                _bounds(r)
                if wt_base_boundary(r.key, L, r.host_end, r.qpos):
                    return True
        elif c.kind == K_UA:
            if r.ua != NULL and _find_ci(r.ua, r.ua_n, blob + v.off, v.len):
                return True
        elif c.kind == K_SNI:
            if r.sni != NULL:
                L = v.len
                if r.sni_n == L and _eq_ci(r.sni, blob + v.off, L):
                    return True
                if r.sni_n > L and r.sni[r.sni_n - L - 1] == 46 and \
                        _eq_ci(r.sni + r.sni_n - L, blob + v.off, L):
                    return True
        elif c.kind == K_JA4:
            if r.ja4 != NULL and r.ja4[0] != 0 and memcmp(r.ja4, blob + v.off, C_JA4_LEN) == 0:
                return True
        elif c.kind == K_EXT:
            _bounds(r)
            if r.has_ext and r.qpos - r.ext0 == v.len and _eq_ci(r.key + r.ext0, blob + v.off, v.len):
                return True
        elif c.kind == K_PROTO:
            if r.proto == v.lo:
                return True
    return False


def match_rules(rules, conds, vals, const uint8_t[::1] blob, msgs, const uint8_t[::1] data, rows,
                const uint8_t[::1] keys, koffs, proto, sni=None, ja4=None):
    """First matching rule of each lookup: (rule int32 1-based, 0 none; action uint8 of that
    rule, 0 none; ns int64: the loop's time, one clock read before and after).

    rules/conds/vals: RULE_DTYPE / COND_DTYPE / VAL_DTYPE arrays, blob their text values.
    msgs: MESSAGE_DTYPE rows, data: the batch's packet bytes (a GET's User-Agent is read there),
    rows: int64, lookup i is msgs[rows[i]]; keys + koffs (n + 1): lookup i's key; proto: a
    scalar or uint8 per lookup (0 http, 1 tls, 2 quic); sni: None (GETs) or (bytes uint8,
    offsets int64 n + 1); ja4: None or uint8 [n, 37] (NUL-terminated, "" = none)."""
    ra = np.ascontiguousarray(rules, dtype=RULE_DTYPE)
    ca = np.ascontiguousarray(conds, dtype=COND_DTYPE)
    va = np.ascontiguousarray(vals, dtype=VAL_DTYPE)
    ma = np.ascontiguousarray(msgs)
    if ma.dtype != _MESSAGE_DTYPE:
        raise TypeError("msgs must be MESSAGE_DTYPE rows")
    cdef const int64_t[::1] rw = np.ascontiguousarray(rows, dtype=np.int64)
    cdef Py_ssize_t n = rw.shape[0], i
    cdef const int64_t[::1] ko = np.ascontiguousarray(koffs, dtype=np.int64)
    if ko.shape[0] != n + 1:
        raise ValueError("koffs must have len(rows) + 1 entries")
    pa_ = np.full(n, proto, np.uint8) if np.isscalar(proto) else np.ascontiguousarray(proto, dtype=np.uint8)
    cdef const uint8_t[::1] pr = pa_
    if pr.shape[0] != n:
        raise ValueError("proto must be a scalar or have len(rows) entries")
    cdef const uint8_t[::1] sb
    cdef const int64_t[::1] so
    cdef bint has_sni = sni is not None
    if has_sni:
        sb = np.ascontiguousarray(sni[0], dtype=np.uint8)
        so = np.ascontiguousarray(sni[1], dtype=np.int64)
        if so.shape[0] != n + 1:
            raise ValueError("sni offsets must have len(rows) + 1 entries")
    cdef const uint8_t[:, ::1] jv
    cdef bint has_ja4 = ja4 is not None
    if has_ja4:
        jv = np.ascontiguousarray(ja4, dtype=np.uint8)
        if jv.shape[0] != n or jv.shape[1] < JA4_LEN + 1:
            raise ValueError("ja4 must be uint8 [len(rows), 37]")
    out_rule = np.zeros(n, np.int32)
    out_act = np.zeros(n, np.uint8)
    cdef int32_t[::1] orule = out_rule
    cdef uint8_t[::1] oact = out_act
    cdef const uint8_t[::1] rb = ra.view(np.uint8).reshape(-1)
    cdef const uint8_t[::1] cb = ca.view(np.uint8).reshape(-1)
    cdef const uint8_t[::1] vb = va.view(np.uint8).reshape(-1)
    cdef const uint8_t[::1] mb = ma.view(np.uint8).reshape(-1)
    cdef Py_ssize_t nrules = ra.shape[0], nmsgs = ma.shape[0], nconds = ca.shape[0], nvals = va.shape[0]
    cdef const Rule *R = <const Rule *>&rb[0] if nrules else NULL
    cdef const Cond *C = <const Cond *>&cb[0] if nconds else NULL
    cdef const Val *V = <const Val *>&vb[0] if nvals else NULL
    cdef const HttpMsg *M = <const HttpMsg *>&mb[0] if nmsgs else NULL
    cdef const uint8_t *B = &blob[0] if blob.shape[0] else NULL
    cdef const uint8_t *D = &data[0] if data.shape[0] else NULL
    cdef size_t dlen = data.shape[0], blen = blob.shape[0]
    cdef const uint8_t *K = &keys[0] if keys.shape[0] else NULL
    cdef size_t klen = keys.shape[0]
    cdef Py_ssize_t k, c
    cdef _Row r
    cdef bint ok
    cdef int64_t t0, t1
    # every index the loop follows is checked here once, so that the nogil loop cannot leave
    # the arrays whatever the caller passed
    for k in range(nrules):
        if R[k].c0 > R[k].c1 or R[k].c1 > nconds:
            raise ValueError("rule conditions out of range")
    for k in range(nconds):
        if C[k].v0 > C[k].v1 or C[k].v1 > nvals or not 1 <= C[k].kind <= K_PROTO:
            raise ValueError("condition values out of range")
        for c in range(C[k].v0, C[k].v1):
            if <size_t>V[c].off + V[c].len > blen or V[c].plen > 128 or \
                    (C[k].kind == K_JA4 and V[c].len != JA4_LEN):
                raise ValueError("value out of range")
    for i in range(n):
        if rw[i] < 0 or rw[i] >= nmsgs:
            raise IndexError("rows out of range")
        if ko[i] < 0 or ko[i] > ko[i + 1] or <size_t>ko[i + 1] > klen:
            raise ValueError("koffs out of range")
        if has_sni and (so[i] < 0 or so[i] > so[i + 1] or so[i + 1] > sb.shape[0]):
            raise ValueError("sni offsets out of range")
    with nogil:
        t0 = wt_now_ns()
        for i in range(n):
            r.m = &M[rw[i]]
            r.key = K + ko[i] if K != NULL else <const uint8_t *>""
            r.kn = <size_t>(ko[i + 1] - ko[i])
            r.bounds_ready = False
            r.proto = pr[i]
            r.ua = NULL
            r.ua_n = 0
            if r.proto == 0 and r.m.user_agent.len and r.m.pkt_offset + r.m.user_agent.off + r.m.user_agent.len <= dlen:
                r.ua = D + r.m.pkt_offset + r.m.user_agent.off
                r.ua_n = r.m.user_agent.len
            r.sni = NULL
            r.sni_n = 0
            if has_sni:
                r.sni = &sb[0] + so[i] if sb.shape[0] else <const uint8_t *>""
                r.sni_n = <size_t>(so[i + 1] - so[i])
            r.ja4 = &jv[i, 0] if has_ja4 else NULL
            for k in range(nrules):
                ok = True
                for c in range(R[k].c0, R[k].c1):
                    if not _cond(&C[c], V, B, &r):
                        ok = False
                        break
                if ok:
                    orule[i] = <int32_t>(k + 1)
                    oact[i] = R[k].action
                    break
        t1 = wt_now_ns()
    return out_rule, out_act, t1 - t0
