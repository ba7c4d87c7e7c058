"""Properties of the pairing table: order independence within the GC window, bounded memory."""
from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from httpanalyzer import records
from httpanalyzer.pairing import Pairer
from tests.msgbuild import MsgBuilder
from tests.strategies import S, T0, transactions


def paired_set(b, order):
    p = Pairer()
    p.feed(*b.build(order))
    p.flush()
    df = p.take().to_pandas()
    df = df[df.matched]
    key = ["client_ip", "client_port", "server_ip", "server_port", "request_ack", "response_seq",
           "method", "uri", "status"]
    return Counter(map(tuple, df[key].astype(str).values.tolist())), p.counters()


@settings(max_examples=150, deadline=None)
@given(b=transactions(), seed=st.integers(0, 2**32 - 1))
def test_shuffling_within_gc_window_keeps_paired_records(b, seed):
    n = len(b.rows)
    by_time = sorted(range(n), key=lambda i: b.rows[i]["ts_ns"])
    shuffled = list(np.random.default_rng(seed).permutation(n))
    a, ca = paired_set(b, by_time)
    s, cs = paired_set(b, shuffled)
    assert a == s
    # every message is accounted for: in a pair or in an unmatched record; a request paired with
    # a 1xx appears again in its final pair (or is counted final_response_missing)
    unmatched = sum(v for k, v in cs.items() if "unmatched" in k)
    assert (2 * cs["paired"] - cs["paired_after_interim"] + unmatched == cs["messages"] == n)
    assert cs["paired_interim"] == cs["paired_after_interim"] + cs["final_response_missing"]


def test_flood_of_unanswered_requests_stays_bounded():
    """500k unanswered requests over 100 s on one connection and on many: the cap (here 20k) and
    the GC bound the table; every request comes out as a counted unmatched record."""
    p = Pairer(max_pending=20_000, max_per_key=64, gc_timeout=60)
    total = 0
    peak_pool = peak_arena = 0
    b = MsgBuilder()
    b.req(T0, "10.0.0.1", 1024, "10.0.0.2", 80, 0, 0, uri="/flood/" + "a" * 200)
    one, data = b.build()
    i = np.arange(10_000)
    for batch in range(50):
        k = batch * 10_000 + i
        msgs = np.repeat(one, len(i))
        # half on one key (same connection, same ACK), half spread over many connections
        msgs["ts_ns"] = T0 + k * 200_000
        msgs["seq"] = k
        msgs["ack"] = np.where(i % 2 == 1, 7, k)
        msgs["src_port"] = np.where(i % 2 == 1, 1024, 1024 + k % 50000)
        msgs["pkt_index"] = k
        p.feed(msgs, data)
        total += 10_000
        assert p.pending <= 20_000
        peak_pool = max(peak_pool, p.table.pool_capacity)
        peak_arena = max(peak_arena, p.table.arena_bytes)
        rb = p.take()
        assert rb.num_rows <= 20_000 + 10_000
    p.flush()
    p.take()
    c = p.counters()
    assert peak_pool <= 20_001
    assert peak_arena <= 20_001 * 512 + (1 << 20)
    assert c["request_unmatched_key_limit"] > 0 and c["request_unmatched_cap"] > 0
    out = sum(v for k, v in c.items() if k.startswith("request_unmatched"))
    assert out == total == c["requests"]
    assert c["peak_pending"] <= 20_000
