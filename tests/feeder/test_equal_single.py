"""The feeder's records equal the single-process run's, as a multiset, paired and unmatched.

Real traces: every shared trace as one stream (their clocks jump back and forth between files:
GC, clock resets and 1xx all occur) for N = 1..4, and trace by trace for N = 2 on a sample.
Synthetic: shuffled, time-jumping transactions with 100 Continue, as real packets, through the
product's two paths: classify_packets -> FeederPairer (the consumers dissect and pair), and
dissect -> one Pairer (the single-process run).
"""
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import httpanalyzer
from webtap.records import http as records
from httpanalyzer.feeder import FeederPairer, classify_packets
from httpanalyzer.pairing import Pairer
from httpanalyzer.stream import Summary
from tests.conftest import TRACES, shared_trace_files
from tests.strategies import S, transactions
from webtap.dissect import dissect


def multiset(df) -> Counter:
    return Counter(map(tuple, df.astype(str).values.tolist()))


@pytest.fixture(scope="module")
def all_traces():
    files = [str(p) for p in shared_trace_files()]
    if not files:
        pytest.skip(f"shared traces absent: {TRACES}")
    s = Summary()
    df = httpanalyzer.analyze(files, summary=s)
    return files, df, s


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_all_traces_as_one_stream(all_traces, n):
    files, single, s1 = all_traces
    s = Summary()
    fb = {}
    df = httpanalyzer.analyze(files, consumers=n, summary=s, feeder=fb)
    assert len(df) == len(single) > 1000
    assert multiset(df) == multiset(single)
    # the stream exercises what the clock broadcast is for
    assert s1.pairing["request_unmatched_gc"] + s1.pairing["response_unmatched_gc"] > 100
    assert s1.pairing["clock_reset"] >= 1 and s1.pairing["paired_after_interim"] >= 1
    # the counters that do not depend on how the table is split add up
    for k in ("messages", "paired", "paired_after_interim", "request_repeat", "response_repeat"):
        assert s.pairing[k] == s1.pairing[k], k
    # the reader counts what it walked, the consumers what only parsing tells: same totals
    assert dict(s.dissect) == dict(s1.dissect)
    assert (s.dissect["http_request"] + s.dissect["http_response"] + s.dissect["mid_segment_request"]
            + s.dissect["mid_segment_response"] + s.dissect["after_continuation_request"]
            + s.dissect["after_continuation_response"]) == s1.pairing["messages"]
    rows = fb["consumers"]
    # the feeder sends packets (their first messages); the messages after a first one in a
    # segment (issue 31) are found by the consumer that dissects the packet
    assert sum(r["messages"] for r in rows) == (s1.pairing["messages"] - s.dissect["mid_segment_request"]
                                                - s.dissect["mid_segment_response"])
    assert sum(r["transactions"] for r in rows) == s1.pairing["paired"]
    assert sum(r["records"] for r in rows) == len(single)
    # merged output is sorted by request time (response time for response-only records)
    t = df.request_ts.fillna(df.response_ts)
    assert t.is_monotonic_increasing


def test_trace_by_trace_two_consumers():
    files = shared_trace_files()
    if not files:
        pytest.skip(f"shared traces absent: {TRACES}")
    sample = files[::10]
    compared = 0
    for p in sample:
        try:
            single = httpanalyzer.analyze(str(p))
        except (OSError, ValueError, RuntimeError):
            continue
        two = httpanalyzer.analyze(str(p), consumers=2)
        assert multiset(two) == multiset(single), p
        compared += len(single)
    assert compared > 300


def _records(pairer, batches):
    """Feed (msgs, data, tick) batches with a clock tick after each (as the stream does)."""
    out = []
    for msgs, data, tick in batches:
        pairer.feed(msgs, data)
        out.append(pairer.take())
        pairer.advance(tick)
    pairer.flush()
    out.append(pairer.take())
    return records.to_pandas(pa.Table.from_batches(out, schema=records.SCHEMA))


def interim_first(msgs):
    """The one order the feeder does not reproduce (docs/FEEDER.md): a final response captured
    before the 1xx it follows. Returns the positions of msgs with each such 1xx moved just
    before its final response."""
    rows = list(range(len(msgs)))
    for i in range(len(msgs)):
        m = msgs[i]
        if m["kind"] == 2 and 100 <= m["status"] < 200 and m["status"] != 101:
            nxt = (int(m["seq"]) + int(m["payload_len"])) & 0xFFFFFFFF
            for j in range(i):
                f = msgs[j]
                if (f["kind"] == 2 and int(f["seq"]) == nxt and f["src_port"] == m["src_port"]
                        and f["dst_port"] == m["dst_port"] and bytes(f["src_ip"]) == bytes(m["src_ip"])):
                    rows.remove(i)
                    rows.insert(rows.index(j), i)
                    break
    return np.array(rows, dtype=np.int64)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(b=transactions(max_txn=40, span_ns=200 * S), seed=st.integers(0, 2**32 - 1),
       n=st.integers(2, 4), jumps=st.lists(st.integers(-500, 500), min_size=0, max_size=3))
def test_shuffled_time_jumping_streams(b, seed, n, jumps):
    """Out-of-order messages (the clock goes back), jumps of hundreds of seconds both ways
    (clock resets, mass GC), ticks between batches: records equal one table's."""
    msgs, _ = b.build()
    rng = np.random.default_rng(seed)
    rows = rng.permutation(len(msgs))
    rows = rows[interim_first(msgs[rows])]
    pk, data = b.packets(rows)                     # real frames, in that capture order
    for j in jumps:
        at = int(rng.integers(0, len(pk)))
        pk["ts_ns"][at:] += j * S
    cuts = sorted(set([0, len(pk)] + [int(x) for x in rng.integers(0, len(pk) + 1, size=3)]))
    spans = [(pk[a:z], int(pk["ts_ns"][a:z].max())) for a, z in zip(cuts[:-1], cuts[1:])]
    single = _records(Pairer(), [(dissect(p, data).msgs, data, t) for p, t in spans])
    assert len(single) > 0
    with FeederPairer(n, ring_bytes=1 << 16) as fp:   # small rings: back-pressure happens
        multi = _records(fp, [(classify_packets(p, data).msgs, data, t) for p, t in spans])
    assert multiset(multi) == multiset(single)
