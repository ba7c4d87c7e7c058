"""Expected message boundaries (issue 31; ext/walk/segbound.h, ext/walk/dissect.pyx _sb_first and
_sb_segment; docs/ACCURACY.md "Messages inside a segment"): a message whose first packet tells
its whole length (the header block ends there, then Content-Length bytes, or no body) but that
continues past the packet ends at a known SEQ; the next message of that direction starts there,
inside a later segment, and is found with the table.

Every expected SEQ below is RFC 9112 6.3 arithmetic done by hand on the bytes the test builds:
the first byte's SEQ + the header block's length + Content-Length (modulo 2^32, RFC 9293 3.4)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scapy.all import IP, TCP, Ether, Raw

from tests.dissect._scapy_batches import batch_from_raw
from webtap._ext.dissect import SegBounds
from webtap.dissect import dissect
from webtap.records.message import MSGF_MID_SEGMENT

CLIENT, SERVER = "192.0.2.1", "198.51.100.2"
M32 = 1 << 32


def seg(payload: bytes, seq: int, *, server: bool = False, cport: int = 40000, ack: int = 7):
    """One Ethernet/IPv4/TCP segment of the client (or the server) of connection cport."""
    src, dst, sp, dp = (SERVER, CLIENT, 80, cport) if server else (CLIENT, SERVER, cport, 80)
    return bytes(Ether() / IP(src=src, dst=dst) / TCP(sport=sp, dport=dp, seq=seq % M32, ack=ack,
                                                      flags="PA") / Raw(payload))


def walk(frames, bounds=None, ts=None, batches=1):
    """Dissect the frames in order (in `batches` batches) with one table; (msgs rows, counters)."""
    if bounds is None:
        bounds = SegBounds()
    recs = [(f, 1, (ts[i] if ts else i * 1000), len(f)) for i, f in enumerate(frames)]
    cut = np.array_split(np.arange(len(recs)), batches)
    rows, cnt = [], {}
    for idx in cut:
        pk, data = batch_from_raw([recs[j] for j in idx])
        mb = dissect(pk, data, seg_bounds=bounds)
        uris = mb.column("uri").to_pylist()
        reasons = mb.column("reason").to_pylist()
        for m, u, r in zip(mb.msgs, uris, reasons):
            rows.append((int(m["seq"]), u if int(m["kind"]) == 1 else r,
                         bool(int(m["flags"]) & MSGF_MID_SEGMENT), int(m["seg_off"]),
                         int(idx[int(m["pkt_index"])])))
        for k, v in mb.counters.items():
            cnt[k] = cnt.get(k, 0) + v
    return rows, cnt


def post(uri: str, n: int) -> bytes:
    return f"POST {uri} HTTP/1.1\r\nHost: h\r\nContent-Length: {n}\r\n\r\n".encode()


def get(uri: str) -> bytes:
    return f"GET {uri} HTTP/1.1\r\nHost: h\r\n\r\n".encode()


def resp(reason: str, n: int) -> bytes:
    return f"HTTP/1.1 200 {reason}\r\nContent-Length: {n}\r\n\r\n".encode()


ISN = 1000


def post_three_segments(isn=ISN):
    """A POST whose 3000-byte body spans three segments, then a pipelined GET in the third."""
    h = post("/p", 3000)
    s1 = h + b"a" * 1000
    s2 = b"b" * 1000
    s3 = b"c" * 1000 + get("/g")
    seqs = [isn, isn + len(s1), isn + len(s1) + len(s2)]
    # the GET's first byte: ISN + header block + Content-Length (RFC 9112 6.3 item 6)
    return [seg(s1, seqs[0]), seg(s2, seqs[1]), seg(s3, seqs[2])], (isn + len(h) + 3000) % M32


def test_post_body_over_three_segments_then_a_pipelined_get():
    frames, at = post_three_segments()
    rows, c = walk(frames)
    assert [(r[0], r[1], r[2], r[3], r[4]) for r in rows] == [
        (ISN, "/p", False, 0, 0), (at, "/g", True, 1000, 2)]
    assert c["boundary_kept"] == 1 and c["boundary_message"] == 1
    assert c["mid_segment_request"] == 1 and c["http_request"] == 1
    # without the table: the paper's first packets only
    pk, data = batch_from_raw([(f, 1, i, len(f)) for i, f in enumerate(frames)])
    assert len(dissect(pk, data)) == 1


def test_table_across_batches():
    frames, at = post_three_segments()
    rows, c = walk(frames, batches=3)
    assert [r[:2] for r in rows] == [(ISN, "/p"), (at, "/g")]


def test_several_responses_the_first_body_spans_packets():
    """R1 (2000-byte body) starts in segment 1; segment 2 ends its body, holds R2 whole and R3's
    head with 100 of its 1000 bytes; segment 3 ends R3 and holds R4."""
    r1, r2, r3, r4 = resp("one", 2000), resp("two", 5), resp("three", 1000), resp("four", 2)
    s1 = r1 + b"x" * 500
    s2 = b"x" * 1500 + r2 + b"y" * 5 + r3 + b"z" * 100
    s3 = b"z" * 900 + r4 + b"ok"
    base = 5000
    frames = [seg(s1, base, server=True), seg(s2, base + len(s1), server=True),
              seg(s3, base + len(s1) + len(s2), server=True)]
    rows, c = walk(frames)
    at2 = base + len(r1) + 2000
    at3 = at2 + len(r2) + 5
    at4 = at3 + len(r3) + 1000
    assert [r[:4] for r in rows] == [(base, "one", False, 0), (at2, "two", True, 1500),
                                     (at3, "three", True, 1500 + len(r2) + 5), (at4, "four", True, 900)]
    assert c["boundary_kept"] == 2 and c["boundary_message"] == 2
    assert c["mid_segment_response"] == 3


def test_out_of_order_continuation_segments():
    """The segment holding the boundary before the one between: the entry needs only the first
    packet."""
    frames, at = post_three_segments()
    rows, _ = walk([frames[0], frames[2], frames[1]])
    assert [r[:2] for r in rows] == [(ISN, "/p"), (at, "/g")]


def test_boundary_segment_before_the_first_packet_is_not_found():
    """Documented limit: the table keeps boundaries, not segments. A segment that arrives
    before the first packet that tells its boundary is not looked at again; the entry stays
    (counted kept, never used) until the direction moves on or the GC."""
    frames, _ = post_three_segments()
    b = SegBounds()
    rows, c = walk([frames[2], frames[0], frames[1]], bounds=b)
    assert [r[1] for r in rows] == ["/p"]
    assert c["boundary_kept"] == 1 and c["boundary_message"] == 0 and b.live == 1


@pytest.mark.parametrize("order", [
    [0, 1, 2, 2],          # the boundary's segment retransmitted
    [0, 0, 1, 2],          # the first packet retransmitted before
    [0, 1, 2, 0],          # the first packet retransmitted after the boundary was used
    [0, 1, 2, 0, 1, 2],    # the whole flight again
])
def test_retransmissions_make_no_duplicate(order):
    frames, at = post_three_segments()
    rows, c = walk([frames[i] for i in order])
    got = [r[:2] for r in rows if r[1] == "/g"]
    assert got == [(at, "/g")]
    assert c["boundary_message"] == 1


def test_sequence_wrap_around():
    """The header block and body straddle 2^32: the GET is at (ISN + h + 3000) mod 2^32."""
    isn = M32 - len(post("/p", 3000)) - 1500
    frames, at = post_three_segments(isn)
    assert at < 5000                                       # it did wrap
    rows, _ = walk(frames)
    assert [r[:4] for r in rows] == [(isn, "/p", False, 0), (at, "/g", True, 1000)]


def test_boundary_inside_bytes_that_start_no_message_is_counted():
    h = post("/p", 1500)
    frames = [seg(h + b"a" * 1000, ISN), seg(b"a" * 500 + b"not a message at all", ISN + len(h) + 1000)]
    rows, c = walk(frames)
    assert [r[1] for r in rows] == ["/p"]
    assert c["rest_not_http"] == 1 and c["boundary_kept"] == 1 and c["boundary_message"] == 0


def test_chunked_body_keeps_no_boundary():
    """Chunks that run past the packet do not tell where the body ends: nothing kept."""
    h = b"POST /p HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
    frames = [seg(h + b"10\r\n0123", ISN), seg(b"456789abcdef\r\n0\r\n\r\n" + get("/g"), ISN + len(h) + 8)]
    rows, c = walk(frames)
    assert [r[1] for r in rows] == ["/p"] and c["boundary_kept"] == 0 and c["body_continues"] == 1


def test_headers_that_do_not_end_in_the_first_packet_keep_no_boundary():
    h = post("/p", 10)
    frames = [seg(h[:20], ISN), seg(h[20:] + b"0123456789" + get("/g"), ISN + 20)]
    rows, c = walk(frames)
    assert [r[1] for r in rows] == ["/p"] and c["boundary_kept"] == 0


def test_head_answer_content_length_is_replaced_by_the_next_answer():
    """An answer to HEAD (Content-Length 1000, no body) ends its segment; the next answer starts
    the next segment, at the end of the segment that made the entry: the entry is dropped."""
    head = resp("head", 1000)
    nxt = resp("next", 2) + b"ok"
    b = SegBounds()
    rows, c = walk([seg(head, 5000, server=True), seg(nxt, 5000 + len(head), server=True)], bounds=b)
    assert [r[1] for r in rows] == ["head", "next"]
    assert c["boundary_kept"] == 1 and b.live == 0


def test_stale_boundary_is_not_used_after_the_gc_window():
    frames, _ = post_three_segments()
    b = SegBounds(gc_timeout_ns=1_000_000_000)
    rows, _ = walk(frames, bounds=b, ts=[0, 10, 2_000_000_000])
    assert [r[1] for r in rows] == ["/p"] and b.live == 0


def test_cap_evicts_the_oldest_and_counts_it():
    """A table of 8 entries (one set): nine connections each leave a boundary; the first is
    pushed out (counted), the eight others still find their GET."""
    b = SegBounds(capacity=8)
    assert b.capacity == 8
    h = post("/p", 100)
    firsts = [seg(h + b"a" * 50, ISN, cport=41000 + i) for i in range(9)]
    seconds = [seg(b"a" * 50 + get(f"/g{i}"), ISN + len(h) + 50, cport=41000 + i) for i in range(9)]
    rows, c = walk(firsts + seconds, bounds=b)
    assert c["boundary_kept"] == 9 and c["boundary_evicted"] == 1
    assert sorted(r[1] for r in rows if r[2]) == [f"/g{i}" for i in range(1, 9)]


def test_flood_of_flows_stays_within_the_cap():
    b = SegBounds(capacity=64)
    h = post("/p", 100)
    rows, c = walk([seg(h, ISN, cport=20000 + i) for i in range(1000)], bounds=b)
    assert b.live <= b.capacity == 64
    assert c["boundary_kept"] == 1000 and c["boundary_evicted"] == 1000 - 64


def test_table_of_no_room_counts_unwatched():
    frames, _ = post_three_segments()
    rows, c = walk(frames, bounds=SegBounds(0))
    assert [r[1] for r in rows] == ["/p"]
    assert c["boundary_unwatched"] == 1 and c["boundary_kept"] == 0


def test_bad_arguments():
    with pytest.raises(ValueError):
        SegBounds(capacity=-1)
    with pytest.raises(ValueError):
        SegBounds(gc_timeout_ns=0)


# ---------------------------------------------------------------------------------------------
# Property: well-formed messages of one direction, cut into segments at random points. The
# oracle is RFC 9112's framing alone: message i is at its exact SEQ when it starts a segment,
# or when message i - 1 was found and its header block ends in the segment where it starts
# (its length is then known from that packet).

_body = st.integers(0, 400)


@st.composite
def stream(draw):
    kinds = draw(st.lists(st.tuples(st.booleans(), _body), min_size=1, max_size=8))
    msgs = []
    for i, (is_get, n) in enumerate(kinds):
        if is_get:
            msgs.append((get(f"/m{i}"), b"", f"/m{i}"))
        else:
            msgs.append((post(f"/m{i}", n), b"b" * n, f"/m{i}"))
    data = b"".join(h + body for h, body, _ in msgs)
    starts, hdr_ends, o = [], [], 0
    for h, body, _ in msgs:
        starts.append(o)
        hdr_ends.append(o + len(h))
        o += len(h) + len(body)
    # cuts anywhere but within a message's first 20 bytes (a request line cut that short is
    # not a message's first packet: request_line_split)
    # (nor at a header block's final CRLF: one leading CRLF is skipped, RFC 9112 2.2)
    allowed = [x for x in range(1, len(data))
               if not any(s < x < s + 20 for s in starts) and x + 2 not in hdr_ends]
    cuts = sorted(set(draw(st.lists(st.sampled_from(allowed), max_size=6)))) if allowed else []
    isn = draw(st.sampled_from([0, 1000, M32 - 300, M32 - 1, 0x7FFFFFF0]))
    return msgs, data, starts, hdr_ends, cuts, isn


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream())
def test_property_each_message_after_a_known_length_is_at_its_seq(s):
    msgs, data, starts, hdr_ends, cuts, isn = s
    bounds_ = [0] + cuts + [len(data)]
    frames = [seg(data[a:b], isn + a) for a, b in zip(bounds_, bounds_[1:])]

    def seg_end(x):                    # end of the segment holding byte x
        return next(b for b in bounds_[1:] if x < b)

    found = []
    for i, st_ in enumerate(starts):
        if st_ in bounds_[:-1]:
            found.append(True)
        else:
            found.append(i > 0 and found[i - 1] and hdr_ends[i - 1] <= seg_end(starts[i - 1]))
    expect = [((isn + st_) % M32, msgs[i][2]) for i, st_ in enumerate(starts) if found[i]]
    rows, _ = walk(frames)
    assert [r[:2] for r in rows] == expect
