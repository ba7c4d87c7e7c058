"""OpenGate's strategies beside Eq. 1 and Eq. 3 (issue 34; ext/run/lbsim.pyx, httpanalyzer.balance).

Expectations are worked by hand from the queue and JSQ rules, from the definitions of FNV-1a and
MurmurHash3's fmix64 (transcribed here in Python), and from the records of the single-process
pairing (the transactions) with the pairing condition checked independently (the request's ACK
is the response's SEQ on the same connection)."""
from __future__ import annotations

import numpy as np
import pytest

from httpanalyzer import balance
from tests.conftest import SHARED, require_shared
from tests.msgbuild import MsgBuilder
from webtap._ext import lbsim
from webtap.records.message import MSG_REQUEST, MSG_RESPONSE, MSGF_MID_SEGMENT

TRACE = SHARED / "traces" / "elcabezzonn-pcaps" / "aug16_part2.pcap.gz"


def test_fifo_queues_by_hand():
    # cost 50 each; c0 gets messages 0, 1, 3, 4; c1 gets message 2
    t = [0, 0, 0, 10, 100]
    depth, wait = lbsim.queues(t, [50] * 5, [0, 0, 1, 0, 0], 2)
    # m0 idle; m1 behind m0 (ends 100); m2 alone on c1; m3 behind m0, m1 (starts 100);
    # m4 at 100: m0 (50) and m1 (100) done, m3 (ends 150) waiting
    assert list(depth) == [0, 1, 0, 2, 1]
    assert list(wait) == [0, 50, 0, 90, 50]
    with pytest.raises(ValueError):
        lbsim.queues([0, 1], [1, 1], [0, 2], 2)
    with pytest.raises(ValueError):
        lbsim.queues([1, 0], [1, 1], [0, 0], 2)


def test_join_the_shortest_queue_by_hand():
    t = [0, 0, 0, 10, 100]
    a, depth, wait = lbsim.jsq(t, [50] * 5, 2)
    # m0: tie -> c0; m1: c1 empty; m2: tie 1-1 -> c0 (after c1, round robin); m3 at 10: c0 holds
    # 2, c1 1 -> c1 (m1 ends 50: waits 40); m4 at 100: both idle, next after c1 -> c0
    assert list(a) == [0, 1, 0, 1, 0]
    assert list(depth) == [0, 0, 1, 1, 0]
    assert list(wait) == [0, 0, 50, 40, 0]
    # per flow: flow 0's three messages follow its first (c0); flow 1 starts at 10 on idle c1
    a, depth, wait = lbsim.jsq(t, [50] * 5, 2, flow=[0, 0, 0, 1, 1])
    assert list(a) == [0, 0, 0, 1, 1]
    assert list(wait) == [0, 50, 100, 0, 0]


def _fnv1a64(h, data):
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & (2**64 - 1)
    return h


def _fmix64(k):
    m = 2**64 - 1
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & m
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & m
    k ^= k >> 33
    return k


def _ref_hash(src, sport, dst, dport, n_tuple):
    import ipaddress

    a, b = ipaddress.ip_address(src).packed, ipaddress.ip_address(dst).packed
    ea, eb = (a, sport), (b, dport)
    if n_tuple == 2:
        lo, hi = (ea, eb) if a <= b else (eb, ea)
        return _fmix64(_fnv1a64(_fnv1a64(0xCBF29CE484222325, lo[0]), hi[0])) & 0xFFFFFFFF
    lo, hi = (ea, eb) if (a, sport) <= (b, dport) else (eb, ea)
    h = _fnv1a64(_fnv1a64(0xCBF29CE484222325, lo[0]), hi[0])
    h = _fnv1a64(h, lo[1].to_bytes(2, "big") + hi[1].to_bytes(2, "big") + b"\x06")
    return _fmix64(h) & 0xFFFFFFFF


def test_fnv1a_reference_is_fnv1a():
    # the published FNV-1a 64 test vectors (Fowler/Noll/Vo): "" and "a"
    assert _fnv1a64(0xCBF29CE484222325, b"") == 0xCBF29CE484222325
    assert _fnv1a64(0xCBF29CE484222325, b"a") == 0xAF63DC4C8601EC8C


def test_flow_hashes_are_symmetric_and_match_the_definition():
    mb = MsgBuilder()
    tup = [("10.0.0.1", 40000, "10.0.0.2", 80), ("10.0.0.1", 40001, "10.0.0.2", 80),
           ("2001:db8::5", 50000, "2001:db8::1", 443), ("10.0.0.9", 80, "10.0.0.9", 81)]
    for i, (s, sp, d, dp) in enumerate(tup):
        mb.req(i, s, sp, d, dp, 1, 2)
        mb.resp(i + 1, d, dp, s, sp, 2, 2)
    msgs, _ = mb.build()
    for nt in (2, 5):
        h = lbsim.flow_hash(msgs, nt)
        assert (h[0::2] == h[1::2]).all()                 # request and response: one value
        want = [_ref_hash(s, sp, d, dp, nt) for s, sp, d, dp in tup]
        assert list(h[0::2]) == want
    h2, h5 = lbsim.flow_hash(msgs, 2), lbsim.flow_hash(msgs, 5)
    assert h2[0] == h2[2] and h5[0] != h5[2]              # ports count only in the 5-tuple


@pytest.fixture(scope="module")
def mc():
    require_shared(TRACE)
    return balance.message_costs(str(TRACE))


def test_costs_and_transactions_of_a_real_trace(mc):
    import httpanalyzer

    m = mc.msgs
    assert len(m) == len(mc.cost_ns) == mc.how["messages"] > 0
    assert (mc.cost_ns > 0).all()
    assert mc.how["walk_ns"] > 0 and mc.how["pair_ns"] > 0
    # every pair meets the pairing condition (Eq. 2's key): the request's ACK is the response's
    # SEQ, on one connection (the tuple reversed)
    rq, rs = m[mc.pairs[:, 0]], m[mc.pairs[:, 1]]
    assert (rq["kind"] == MSG_REQUEST).all() and (rs["kind"] == MSG_RESPONSE).all()
    assert (rq["ack"] == rs["seq"]).all()
    assert (rq["src_ip"] == rs["dst_ip"]).all() and (rq["src_port"] == rs["dst_port"]).all()
    assert len(np.unique(mc.pairs[:, 0])) == len(mc.pairs)
    # the transactions are the single-process records' paired ones, less those whose request or
    # response starts inside a segment after another message (mapped by frame to the first)
    rec = httpanalyzer.analyze(str(TRACE), consumers=0)
    mid = int(((m["flags"] & MSGF_MID_SEGMENT) != 0).sum())
    assert int(rec["matched"].sum()) - mid <= len(mc.pairs) <= int(rec["matched"].sum())


def test_strategies_over_a_real_trace(mc):
    runs = balance.strategies(mc, 4, speedup=1000)
    tab = balance.strategy_table(mc, runs)
    n = len(mc.msgs)
    for s in balance.STRATEGIES:
        t = tab.loc[s]
        assert t["messages"].sum() == n
        assert t["transactions"].sum() + t["lost"].iloc[0] == len(mc.pairs)
        a, depth, wait = runs[s]
        assert t["lost"].iloc[0] == int((a[mc.pairs[:, 0]] != a[mc.pairs[:, 1]]).sum())
    # what keeps a connection on one consumer, or (Eq. 3) a request with its response, loses none
    for s in ("eq1", "eq3", "hash2", "hash5", "jsq_flow"):
        assert tab.loc[s]["lost"].iloc[0] == 0, s
    # per-message JSQ splits transactions
    assert tab.loc["jsq"]["lost"].iloc[0] > 0
    # Eq. 1 / Eq. 3 are the feeder's choice
    from httpanalyzer.feeder import hash_eq1, hash_eq3

    assert (runs["eq3"][0] == hash_eq3(mc.msgs) % 4).all()
    assert (runs["eq1"][0] == hash_eq1(mc.msgs) % 4).all()
    d = balance.depth_over_time(mc, runs["jsq"], bins=10, speedup=1000)
    assert d.shape == (10, 4) and d.to_numpy().max() == runs["jsq"][1].max()
