"""Properties of the pairing table: order independence within the GC window, bounded memory."""
import ipaddress
from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from webtap.records import http as records
from httpanalyzer.pairing import Pairer
from tests.msgbuild import MsgBuilder
from tests.strategies import S, T0, transactions
from webtap.records.message import MSG_REQUEST, MSG_RESPONSE


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


# ---- the table against a reference pairer -------------------------------------------------
# A small pairer written here from the rule in docs/PAIRING.md, with a plain dict where the table
# has hashed cells: the key is what the paper's Eq. 2 combines (client IP and port, server IP and
# port, the request's ACK = the response's SEQ), kept whole instead of XOR-folded into a cell
# index; FIFO per key (a message pairs with the oldest waiting counterpart, else waits); a 1xx
# other than 101 pairs with its request, which then waits on SEQ of the 1xx + its payload length.
# Messages are far fewer than any cap and all within the 60 s GC window: nothing is evicted.

def reference_pairs(rows, order) -> Counter:
    waiting: dict = {}                    # key -> (kind, [messages in arrival order])
    out = Counter()

    def key_of(m):
        if m["kind"] == MSG_REQUEST:
            return (bytes(m["src_ip"]), m["src_port"], bytes(m["dst_ip"]), m["dst_port"], m["ack"])
        return (bytes(m["dst_ip"]), m["dst_port"], bytes(m["src_ip"]), m["src_port"], m["seq"])

    def arrive(m, key):
        kind, queue = waiting.get(key, (m["kind"], []))
        if queue and kind != m["kind"]:
            other = queue.pop(0)
            if not queue:
                del waiting[key]
            req, resp = (m, other) if m["kind"] == MSG_REQUEST else (other, m)
            out[record(req, resp)] += 1
            if 100 <= resp["status"] < 200 and resp["status"] != 101:
                arrive(req, dict_key_after_interim(req, resp))
            return
        queue.append(m)
        waiting[key] = (m["kind"], queue)

    def dict_key_after_interim(req, resp):
        k = key_of(req)
        return k[:4] + ((resp["seq"] + resp["payload_len"]) % 2**32,)

    def record(req, resp):
        return (str(ipaddress.ip_address(bytes(req["src_ip"][:4 if req["ip_version"] == 4 else 16]))),
                str(req["src_port"]),
                str(ipaddress.ip_address(bytes(req["dst_ip"][:4 if req["ip_version"] == 4 else 16]))),
                str(req["dst_port"]), str(req["ack"]), str(resp["seq"]), req["method"], req["uri"],
                str(resp["status"]))

    for i in order:
        m = rows[i]
        arrive(m, key_of(m))
    return out


def _rows_for_reference(b: MsgBuilder) -> list[dict]:
    """The builder's rows with what the reference needs as plain values (method and URI text)."""
    rows = []
    for r in b.rows:
        d = dict(r)
        start = r["pkt_offset"] + 54
        sp = r["spans"]
        text = lambda f: bytes(b.buf[start + sp[f][0]:start + sp[f][0] + sp[f][1]]).decode() if f in sp else None
        d["method"], d["uri"] = text("method"), text("uri")
        rows.append(d)
    return rows


@st.composite
def messy_streams(draw, max_msgs=60, span_ns=50 * S):
    """Requests and responses drawn independently from small pools of clients, ports and
    ACK/SEQ values, in any order: keys collide, several messages wait on one key, responses come
    before their requests, some never find a counterpart; some responses are 100 Continue."""
    b = MsgBuilder()
    clients = [("10.0.0.1", "10.9.9.9"), ("10.0.0.2", "10.9.9.9"), ("2001:db8::1", "2001:db8::80")]
    for _ in range(draw(st.integers(1, max_msgs))):
        client, server = draw(st.sampled_from(clients))
        cport = draw(st.integers(1024, 1026))
        num = draw(st.sampled_from([0, 1, 2, 2**32 - 1, 7, 7 + 40]))
        ts = T0 + draw(st.integers(0, span_ns))
        if draw(st.booleans()):
            b.req(ts, client, cport, server, 80, draw(st.integers(0, 2**32 - 1)), num,
                  uri=f"/r{len(b.rows)}")
        else:
            status = draw(st.sampled_from([200, 404, 100]))
            b.resp(ts, server, 80, client, cport, num, draw(st.integers(0, 2**32 - 1)), status=status,
                   reason="Continue" if status == 100 else "OK")
    return b


def _check_against_reference(b: MsgBuilder):
    n = len(b.rows)
    by_time = sorted(range(n), key=lambda i: (b.rows[i]["ts_ns"], i))
    p = Pairer()
    p.feed(*b.build(by_time))
    p.flush()
    df = p.take().to_pandas()
    df = df[df.matched]
    cols = ["client_ip", "client_port", "server_ip", "server_port", "request_ack", "response_seq",
            "method", "uri", "status"]
    got = Counter(tuple(str(int(v)) if isinstance(v, float) else str(v) for v in row)
                  for row in df[cols].itertuples(index=False))
    want = reference_pairs(_rows_for_reference(b), by_time)
    assert got == want, (sorted((got - want).items())[:5], sorted((want - got).items())[:5])
    return want


@settings(max_examples=200, deadline=None)
@given(b=transactions())
def test_pairs_equal_reference_pairer_on_transactions(b):
    want = _check_against_reference(b)
    # every transaction has a request, so any response pairs: a table that never pairs fails
    assert sum(want.values()) > 0 or not any(r["kind"] == MSG_RESPONSE for r in b.rows)


@settings(max_examples=300, deadline=None)
@given(b=messy_streams())
def test_pairs_equal_reference_pairer_on_messy_streams(b):
    _check_against_reference(b)
