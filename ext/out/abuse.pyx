# cython: freethreading_compatible = False
"""Abuse analytics' sequential loops (issue 34; httpanalyzer.abuse): nginx's limit_req leaky
bucket and per-group sliding-window counts, over column arrays, without the GIL.

limit_req follows ngx_http_limit_req_module.c of nginx 1.15.7 and later (1.22 here), one zone and
one limit per location (the only limit of the location is the accounted one):

* the zone's rate is kept in milli-requests per second, `rate = r * 1000 / scale` (scale 1 for
  r/s, 60 for r/m, integer division); burst and delay in milli-requests (`burst * 1000`);
  nodelay is a delay larger than any excess;
* the clock is nginx's cached millisecond clock (ngx_current_msec), one value per event-loop turn;
  here: the request's time in ms, as the caller gives it;
* a key seen before: `ms = now - last` (below -60000: 1; below 0: 0), `excess = max(0, excess -
  rate * ms / 1000 + 1000)` (C integer division); excess > burst: rejected, the node unchanged;
  else stored (`last = now` when ms != 0), and the request waits `(excess - delay) * 1000 / rate`
  ms when excess > delay (delayed when that is not 0);
* a new key: before its node is made, up to two least recently used nodes idle for 60 s or more
  whose excess has drained (`excess - rate * |ms| / 1000 <= 0`) are dropped (the zone's expiry
  on allocation); the new node starts at excess 0, last = now, and the request passes.

A zone that runs out of memory (nginx then drops its oldest node by force) is not modelled: the
simulation's zone holds every key.
"""
import numpy as np

cimport numpy as cnp
from libc.stdint cimport int64_t, uint8_t

cnp.import_array()

#: limit_req outcomes, in code order
LIMIT_REQ_OUTCOMES = ("passed", "delayed", "rejected")

cdef enum:
    LR_PASSED = 0
    LR_DELAYED = 1
    LR_REJECTED = 2


def limit_req(const int64_t[::1] key, const int64_t[::1] now_ms, int64_t nkeys, int64_t rate,
              int64_t burst, int64_t delay):
    """Run nginx's limit_req over requests in the order nginx handled them.

    key: the zone key of each request as an id in 0 .. nkeys-1 (the client address, factorised
    by the caller); now_ms: each request's time on nginx's millisecond clock; rate: the zone's
    rate in milli-requests per second (> 0); burst, delay: in milli-requests (>= 0).

    Returns (outcome uint8: 0 passed, 1 delayed, 2 rejected; excess int64: the excess in
    milli-requests nginx computed for the request, what its "limiting requests, excess: X.XXX"
    and "delaying request" log lines print; delay_ms int64: how long a delayed request waits).
    """
    cdef Py_ssize_t n = key.shape[0], i
    if now_ms.shape[0] != n:
        raise ValueError("key and now_ms must have the same length")
    if rate <= 0:
        raise ValueError("rate must be > 0 milli-requests per second")
    if burst < 0 or delay < 0 or nkeys < 0:
        raise ValueError("burst, delay and nkeys must be >= 0")
    out_a = np.zeros(n, np.uint8)
    exc_a = np.zeros(n, np.int64)
    dly_a = np.zeros(n, np.int64)
    cdef uint8_t[::1] out = out_a
    cdef int64_t[::1] exc = exc_a
    cdef int64_t[::1] dly = dly_a
    # the zone: per key, whether it has a node, its excess and last time, and the LRU queue
    # (prev/next links; head = most recently used) that nginx's expiry walks from the tail
    exists_a = np.zeros(max(nkeys, 1), np.uint8)
    excess_a = np.zeros(max(nkeys, 1), np.int64)
    last_a = np.zeros(max(nkeys, 1), np.int64)
    prev_a = np.full(max(nkeys, 1), -1, np.int64)
    next_a = np.full(max(nkeys, 1), -1, np.int64)
    cdef uint8_t[::1] exists = exists_a
    cdef int64_t[::1] excess = excess_a
    cdef int64_t[::1] last = last_a
    cdef int64_t[::1] prv = prev_a
    cdef int64_t[::1] nxt = next_a
    cdef int64_t head = -1, tail = -1, k, t, now, ms, e, d, tries
    i = 0
    with nogil:
        for i in range(n):
            k = key[i]
            if k < 0 or k >= nkeys:
                break
            now = now_ms[i]
            if exists[k]:
                # to the head of the LRU queue (nginx bumps the node on every lookup)
                if head != k:
                    nxt[prv[k]] = nxt[k]
                    if nxt[k] >= 0:
                        prv[nxt[k]] = prv[k]
                    else:
                        tail = prv[k]
                    prv[k] = -1
                    nxt[k] = head
                    prv[head] = k
                    head = k
                ms = now - last[k]
                if ms < -60000:
                    ms = 1
                elif ms < 0:
                    ms = 0
                e = excess[k] - rate * ms / 1000 + 1000
                if e < 0:
                    e = 0
                exc[i] = e
                if e > burst:
                    out[i] = LR_REJECTED
                    continue
                excess[k] = e
                if ms != 0:
                    last[k] = now
                if e > delay:
                    d = (e - delay) * 1000 / rate
                    dly[i] = d
                    if d != 0:
                        out[i] = LR_DELAYED
                continue
            # a new key: the expiry on allocation (at most two drained nodes idle >= 60 s)
            tries = 0
            while tries < 2 and tail >= 0:
                t = tail
                ms = now - last[t]
                if ms < 0:
                    ms = -ms
                if ms < 60000:
                    break
                if excess[t] - rate * ms / 1000 > 0:
                    break
                tail = prv[t]
                if tail >= 0:
                    nxt[tail] = -1
                else:
                    head = -1
                prv[t] = -1
                exists[t] = 0
                tries += 1
            exists[k] = 1
            excess[k] = 0
            last[k] = now
            prv[k] = -1
            nxt[k] = head
            if head >= 0:
                prv[head] = k
            head = k
            if tail < 0:
                tail = k
    if i < n and n > 0 and (key[i] < 0 or key[i] >= nkeys):
        raise ValueError(f"key[{i}] = {key[i]} is not in 0 .. {nkeys - 1}")
    return out_a, exc_a, dly_a


def window_counts(const int64_t[::1] group, const int64_t[::1] t, int64_t width):
    """Per event i of arrays sorted by (group, t): how many events j of the same group have
    t[i] - width < t[j] <= t[i] (the sliding window that ends at event i, event i included).
    Events at equal times all count each other (the count of the last of them is the window's)."""
    cdef Py_ssize_t n = group.shape[0], i, lo = 0, hi = 0
    if t.shape[0] != n:
        raise ValueError("group and t must have the same length")
    if width <= 0:
        raise ValueError("width must be > 0")
    out_a = np.zeros(n, np.int64)
    cdef int64_t[::1] out = out_a
    with nogil:
        for i in range(n):
            if i > 0 and group[i] != group[i - 1]:
                lo = i
                hi = i
            if hi < i:
                hi = i
            # every event at the same time as event i is inside its window
            while hi + 1 < n and group[hi + 1] == group[i] and t[hi + 1] == t[i]:
                hi += 1
            while t[lo] <= t[i] - width:
                lo += 1
            out[i] = hi - lo + 1
    return out_a
