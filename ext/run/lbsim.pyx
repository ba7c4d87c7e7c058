# cython: freethreading_compatible = False
"""Load-balancing strategies of OpenGate (Qi et al.) beside the paper's Eq. 1 and Eq. 3, over
the HTTP messages of a trace (issue 34; httpanalyzer.balance): the flow hashes and the queues,
as sequential loops in C without the GIL.

* flow_hash(msgs, n_tuple): a symmetric hash of the 2-tuple (the two addresses) or the 5-tuple
  (addresses, ports, protocol TCP) of each message: the two endpoints in a fixed order (the
  smaller (address, port) first), FNV-1a 64 over their bytes, then a 64-bit finaliser
  (MurmurHash3's fmix64), the low 32 bits. A request and its response give the same value.
* queues(t_ns, cost_ns, assign, n): N FIFO single-server queues. Message i arrives at t_ns[i]
  (in time order) at consumer assign[i] and needs cost_ns[i] of it: it starts when the
  consumer is free, finishes cost_ns later. Returns each message's queue depth at its arrival
  (messages at its consumer not yet finished, itself not counted) and its waiting time.
* jsq(t_ns, cost_ns, n, flow): join-the-shortest-queue: each message (or, with flow ids, each
  flow's first message; its later ones follow it) goes to the consumer with the fewest
  unfinished messages at its arrival; on a tie, the first such consumer after the one chosen
  last (round robin: idle consumers share the messages in turn). Returns the assignment and
  the same depth and wait as queues().
"""
import numpy as np

cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcmp

from message cimport HttpMsg

cnp.import_array()

from webtap.records.message import MESSAGE_DTYPE as _MESSAGE_DTYPE


cdef inline uint64_t _fnv(uint64_t h, const uint8_t *p, int n) noexcept nogil:
    cdef int i
    for i in range(n):
        h ^= p[i]
        h *= <uint64_t>0x100000001b3
    return h


cdef inline uint64_t _fmix64(uint64_t k) noexcept nogil:
    k ^= k >> 33
    k *= <uint64_t>0xff51afd7ed558ccd
    k ^= k >> 33
    k *= <uint64_t>0xc4ceb9fe1a85ec53
    k ^= k >> 33
    return k


def flow_hash(msgs, int n_tuple):
    """Symmetric 2-tuple (n_tuple=2) or 5-tuple (n_tuple=5) hash of each message, uint32."""
    if n_tuple not in (2, 5):
        raise ValueError("n_tuple must be 2 or 5")
    arr = np.ascontiguousarray(msgs)
    if arr.dtype != _MESSAGE_DTYPE:
        raise TypeError("msgs must be a webtap.records.message.MESSAGE_DTYPE array")
    cdef Py_ssize_t n = len(arr), i
    out = np.empty(n, np.uint32)
    cdef uint32_t[::1] o = out
    if n == 0:
        return out
    cdef const uint8_t[::1] raw = arr.view(np.uint8).reshape(-1)
    cdef const HttpMsg *m = <const HttpMsg *>&raw[0]
    cdef const uint8_t *a
    cdef const uint8_t *b
    cdef uint8_t pa[2]
    cdef uint8_t pb[2]
    cdef uint8_t proto = 6
    cdef uint16_t sp, dp, tmp
    cdef int c, alen
    cdef uint64_t h
    with nogil:
        for i in range(n):
            alen = 4 if m[i].ip_version == 4 else 16
            c = memcmp(m[i].src_ip, m[i].dst_ip, alen)
            sp = m[i].src_port
            dp = m[i].dst_port
            if n_tuple == 5 and c == 0:
                c = -1 if sp < dp else (1 if sp > dp else 0)
            if c <= 0:
                a = m[i].src_ip
                b = m[i].dst_ip
            else:
                a = m[i].dst_ip
                b = m[i].src_ip
                tmp = sp
                sp = dp
                dp = tmp
            h = <uint64_t>0xcbf29ce484222325
            h = _fnv(h, a, alen)
            h = _fnv(h, b, alen)
            if n_tuple == 5:
                pa[0] = sp >> 8
                pa[1] = sp & 0xFF
                pb[0] = dp >> 8
                pb[1] = dp & 0xFF
                h = _fnv(h, pa, 2)
                h = _fnv(h, pb, 2)
                h = _fnv(h, &proto, 1)
            o[i] = <uint32_t>_fmix64(h)
    return out



cdef int _run(const int64_t *t, const int64_t *cost, int32_t *assign, Py_ssize_t n, int k,
              const int64_t *flow, int64_t nflows, int32_t *flow_to, int jsq, int32_t *depth,
              int64_t *wait, int64_t *free_at, int64_t *fin, int64_t *nxt, int64_t *head,
              int64_t *tail, int64_t *inq) noexcept nogil:
    """The queues; jsq: pick each message's (or flow's) consumer by the shortest queue.
    Returns -1 when an assignment is outside 0..k-1."""
    cdef Py_ssize_t i
    cdef int c, best, j, rr = 0
    cdef int64_t h, start
    for c in range(k):
        free_at[c] = -(1LL << 62)
        head[c] = -1
        tail[c] = -1
        inq[c] = 0
    for i in range(n):
        # every consumer's finished messages leave its queue
        for c in range(k):
            h = head[c]
            while h >= 0 and fin[h] <= t[i]:
                h = nxt[h]
                inq[c] -= 1
            head[c] = h
            if h < 0:
                tail[c] = -1
        if jsq:
            if flow != NULL and flow[i] >= 0 and flow[i] < nflows and flow_to[flow[i]] >= 0:
                best = flow_to[flow[i]]
            else:
                # ties: the first such consumer after the last one chosen (round robin)
                best = rr
                for j in range(1, k):
                    c = (rr + j) % k
                    if inq[c] < inq[best]:
                        best = c
                rr = (best + 1) % k
                if flow != NULL and flow[i] >= 0 and flow[i] < nflows:
                    flow_to[flow[i]] = best
            assign[i] = best
        c = assign[i]
        if c < 0 or c >= k:
            return -1
        depth[i] = <int32_t>inq[c]
        start = t[i] if t[i] > free_at[c] else free_at[c]
        wait[i] = start - t[i]
        fin[i] = start + cost[i]
        free_at[c] = fin[i]
        nxt[i] = -1
        if tail[c] >= 0:
            nxt[tail[c]] = i
        else:
            head[c] = i
        tail[c] = i
        inq[c] += 1
    return 0


def _common(t_ns, cost_ns, int n):
    t = np.ascontiguousarray(t_ns, np.int64)
    cost = np.ascontiguousarray(cost_ns, np.int64)
    if t.shape != cost.shape or t.ndim != 1:
        raise ValueError("t_ns and cost_ns must be 1-D and of one length")
    if n < 1:
        raise ValueError("n must be >= 1")
    if len(t) > 1 and (np.diff(t) < 0).any():
        raise ValueError("t_ns must be in time order")
    if (cost < 0).any():
        raise ValueError("cost_ns must be >= 0")
    return t, cost


def _go(t, cost, assign, int n, flow, bint jsq):
    cdef Py_ssize_t m = len(t)
    depth = np.zeros(m, np.int32)
    wait = np.zeros(m, np.int64)
    fin = np.zeros(max(m, 1), np.int64)
    nxt = np.zeros(max(m, 1), np.int64)
    ks = np.zeros(n, np.int64)
    free_at, head, tail, inq = ks.copy(), ks.copy(), ks.copy(), ks.copy()
    cdef int64_t nflows = 0
    fl = None
    if flow is not None:
        fl = np.ascontiguousarray(flow, np.int64)
        if fl.shape != t.shape:
            raise ValueError("flow must have one id per message")
        nflows = int(fl.max()) + 1 if m else 0
    flow_to = np.full(max(nflows, 1), -1, np.int32)
    cdef int64_t[::1] tv = t if m else np.zeros(1, np.int64)
    cdef int64_t[::1] cv = cost if m else np.zeros(1, np.int64)
    cdef int32_t[::1] av = assign if m else np.zeros(1, np.int32)
    cdef int32_t[::1] dv = depth if m else np.zeros(1, np.int32)
    cdef int64_t[::1] wv = wait if m else np.zeros(1, np.int64)
    cdef int64_t[::1] fv = fin, nv = nxt, frv = free_at, hv = head, tlv = tail, iv = inq
    cdef int32_t[::1] ftv = flow_to
    cdef int64_t[::1] flv
    cdef const int64_t *flp = NULL
    if fl is not None and m:
        flv = fl
        flp = &flv[0]
    cdef int r
    with nogil:
        r = _run(&tv[0], &cv[0], &av[0], m, n, flp, nflows, &ftv[0], jsq, &dv[0], &wv[0],
                 &frv[0], &fv[0], &nv[0], &hv[0], &tlv[0], &iv[0])
    if r < 0:
        raise ValueError(f"assign must be in 0 .. {n - 1}")
    return depth, wait


def queues(t_ns, cost_ns, assign, int n):
    """Depth at arrival (int32) and wait (int64 ns) of each message through N FIFO queues."""
    t, cost = _common(t_ns, cost_ns, n)
    a = np.ascontiguousarray(assign, np.int32).copy()
    if a.shape != t.shape:
        raise ValueError("assign must have one consumer per message")
    return _go(t, cost, a, n, None, False)


def jsq(t_ns, cost_ns, int n, flow=None):
    """Join-the-shortest-queue: (assign int32, depth int32, wait int64 ns) per message; with
    flow ids (int64 >= 0 per message), a flow stays where its first message went."""
    t, cost = _common(t_ns, cost_ns, n)
    a = np.zeros(len(t), np.int32)
    depth, wait = _go(t, cost, a, n, flow, True)
    return a, depth, wait
