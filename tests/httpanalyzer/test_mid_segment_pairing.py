"""Messages inside a segment (issue 31) through the whole product: dissected, paired
(docs/PAIRING.md "Messages inside a segment"), and compared with the real tshark.

Every connection is built here; the server answers request /x with the reason phrase "x", so
which response belongs to which request is known from the bytes, not from webtap's pairing.
"""
from __future__ import annotations

import shutil

import pytest

import httpanalyzer
from httpanalyzer import compare
from tests.httpanalyzer import compare_traces as ct


def get(uri: str) -> bytes:
    return f"GET {uri} HTTP/1.1\r\nHost: example.com\r\n\r\n".encode()


def resp(reason: str, status: int = 200, body: bytes = b"hi") -> bytes:
    return f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body


def cont() -> bytes:
    return b"HTTP/1.1 100 Continue\r\n\r\n"


def send(c: ct.Conn, side: str, payload: bytes, dt: float = 0.001):
    if side == "c":
        c._pkt("c", "PA", payload, c.cseq, c.sseq, dt)
        c.cseq += len(payload)
    else:
        c._pkt("s", "PA", payload, c.sseq, c.cseq, dt)
        c.sseq += len(payload)


def pipelined_one_segment_each(out, port):
    """Three GETs in one segment, the three answers in one segment."""
    c = ct.Conn(out, ct.T0, port)
    send(c, "c", get("/a") + get("/b") + get("/c"))
    send(c, "s", resp("a") + resp("b", 404, b"") + resp("c", 200, b"xyz"))


def interim_then_final_one_segment(out, port):
    """A POST with Expect: 100-continue whose 100 and 200 arrive in one segment, then a GET
    answered in the next segment (seq after both)."""
    c = ct.Conn(out, ct.T0 + 1, port)
    send(c, "c", b"POST /p HTTP/1.1\r\nHost: example.com\r\nContent-Length: 2\r\n\r\nok")
    send(c, "s", cont() + resp("p"))
    send(c, "c", get("/q"))
    send(c, "s", resp("q"))


def answer_then_interim_then_final(out, port):
    """Two pipelined requests; one server segment holds /a's answer, then 100 and 200 for /b."""
    c = ct.Conn(out, ct.T0 + 2, port)
    send(c, "c", get("/a") + b"POST /b HTTP/1.1\r\nHost: example.com\r\nContent-Length: 0\r\n\r\n")
    send(c, "s", resp("a") + cont() + resp("b"))


def answers_split_over_segments(out, port):
    """Three pipelined GETs; /a's answer alone in one segment, /b's and /c's in the next: the
    paper's accepted loss (the second segment's SEQ is no request's ACK)."""
    c = ct.Conn(out, ct.T0 + 3, port)
    send(c, "c", get("/a") + get("/b") + get("/c"))
    send(c, "s", resp("a"))
    send(c, "s", resp("b") + resp("c"))


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    out: list = []
    pipelined_one_segment_each(out, 41001)
    interim_then_final_one_segment(out, 41002)
    answer_then_interim_then_final(out, 41003)
    answers_split_over_segments(out, 41004)
    out.sort(key=lambda p: p.time)
    return ct.write(tmp_path_factory.mktemp("mid") / "mid_segment.pcap", out)


def records(path, port):
    df = httpanalyzer.analyze(path)
    return df[df.client_port == port]


def test_pipelined_requests_and_answers_in_one_segment_each(trace):
    df = records(trace, 41001)
    paired = df[df.matched]
    assert sorted(zip(paired.uri, paired.reason, paired.status.astype(int))) == [
        ("/a", "a", 200), ("/b", "b", 404), ("/c", "c", 200)]
    assert len(df) == 3
    # each message keeps its own sequence numbers: the requests share their packet's ACK, the
    # responses start 0, len(a), len(a) + len(b) bytes into the server's segment
    seq0 = 5000
    la, lb = len(resp("a")), len(resp("b", 404, b""))
    assert sorted(paired.response_seq.astype(int)) == [seq0, seq0 + la, seq0 + la + lb]
    assert set(paired.request_ack.astype(int)) == {seq0}


def test_final_response_after_a_100_in_the_same_segment(trace):
    df = records(trace, 41002)
    got = sorted((r.uri, int(r.status), bool(r.interim), bool(r.after_interim))
                 for r in df.itertuples() if r.matched)
    assert got == [("/p", 100, True, False), ("/p", 200, False, True), ("/q", 200, False, False)]
    assert len(df) == 3


def test_interim_and_final_after_another_answer_in_one_segment(trace):
    df = records(trace, 41003)
    got = sorted((r.uri, int(r.status), r.reason) for r in df.itertuples() if r.matched)
    assert got == [("/a", 200, "a"), ("/b", 100, "Continue"), ("/b", 200, "b")]
    assert len(df) == 3


def test_answers_split_over_segments_stay_unmatched(trace):
    df = records(trace, 41004)
    paired = df[df.matched]
    assert list(zip(paired.uri, paired.reason)) == [("/a", "a")]
    # /b and /c wait as requests, their answers as responses (found, not paired)
    assert sorted(df[~df.matched].uri.dropna()) == ["/b", "/c"]
    assert sorted(df[~df.matched].reason.dropna()) == ["b", "c"]


@pytest.mark.tshark
@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not on PATH")
def test_tshark_finds_the_same_messages(trace):
    """tshark (4.0) dissects every message of a segment, in both modes, but gives
    http.request_in to a frame's first response only: every message webtap finds inside a
    segment is one tshark finds (no only_webtap row), the pairs tshark makes are webtap's, and
    the later responses of a frame are tshark_no_request_in (or interim), never unexplained."""
    cmp = compare.compare_traces(trace)
    t = cmp.transactions
    for mode in ("first_packet", "reassembly"):
        tm = t[t["mode"] == mode]
        assert not (tm.side == "only_webtap").any(), mode
        diff = tm[tm.differs]
        assert set(diff.category) <= {"tshark_no_request_in", "interim"}, (mode, diff)
        # the connection whose answers are split over segments: neither tool pairs /b nor /c
        assert not tm[tm.client_port == 41004].differs.any(), mode
        # tshark's own pairs (one per response frame here) are all webtap's
        both = tm[(tm.tshark_request_frame >= 0) & (tm.tshark_response_frame >= 0)]
        assert (both.how == "exact").all(), (mode, both)
        # one per response frame: /a (41001), the 100 for /p, /q, /a (41003), /a (41004)
        assert len(both) == 5
    assert cmp.unexplained == 0
    assert cmp.field_diffs.empty, cmp.field_diffs
