"""Messages that start inside a segment, after another message's end (ext/walk/dissect.pyx
_more_messages; docs/ACCURACY.md "Messages inside a segment"). Expected offsets come from RFC 9112
section 6.3 (message body length) applied by hand to the bytes each test builds."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.dissect.packets import Ether, one, tcp4
from webtap.dissect import parse_http
from webtap.records.message import MSGF_BAD_VERSION, MSGF_MID_SEGMENT, MSGF_PAYLOAD_TRUNCATED

SEQ = 1000            # tcp4()'s sequence number
PAY = 54              # Ethernet 14 + IPv4 20 + TCP 20: the payload's offset in the packet

GET_A = b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n"
GET_B = b"GET /b HTTP/1.1\r\nHost: h\r\n\r\n"


def msgs(payload):
    """The messages of one Ethernet/IPv4/TCP packet carrying payload (SEQ 1000)."""
    return one(Ether() / tcp4(payload))[0]


def rows(b):
    return [(int(m["kind"]), int(m["seq"]) - SEQ, int(m["payload_len"]),
             bool(int(m["flags"]) & MSGF_MID_SEGMENT)) for m in b.msgs]


def test_pipelined_gets():
    b = msgs(GET_A + GET_B + GET_A)
    n = len(GET_A)
    assert rows(b) == [(1, 0, n, False), (1, n, n, True), (1, 2 * n, n, True)]
    # seg_off: where each message starts in the payload; seq - seg_off is the packet's SEQ
    assert [int(m["seg_off"]) for m in b.msgs] == [0, n, 2 * n]
    assert [int(m["payload_off"]) for m in b.msgs] == [PAY, PAY + n, PAY + 2 * n]
    assert {int(m["ack"]) for m in b.msgs} == {2000}            # tcp4()'s ACK, for every one
    assert b.column("uri").to_pylist() == ["/a", "/b", "/a"]
    assert b.counters["http_request"] == 1 and b.counters["mid_segment_request"] == 2


def test_request_after_a_content_length_body():
    post = b"POST /p HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"
    b = msgs(post + GET_B)
    assert rows(b) == [(1, 0, len(post), False), (1, len(post), len(GET_B), True)]
    assert b.column("uri").to_pylist() == ["/p", "/b"]


def test_request_after_a_chunked_body_with_extension_and_trailer():
    post = (b"POST /p HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 99\r\n\r\n"
            b"3;name=v\r\nabc\r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\n")
    b = msgs(post + GET_B)
    # Transfer-Encoding overrides Content-Length (RFC 9112 6.3 item 3)
    assert rows(b) == [(1, 0, len(post), False), (1, len(post), len(GET_B), True)]


def test_several_responses_1xx_204_304_have_no_body():
    cont = b"HTTP/1.1 100 Continue\r\n\r\n"
    nc = b"HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n"      # 204: no body whatever CL says
    nm = b"HTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\n\r\n"
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"
    b = msgs(cont + nc + nm + ok)
    o = [0, len(cont), len(cont) + len(nc), len(cont) + len(nc) + len(nm)]
    assert [r[1] for r in rows(b)] == o
    assert [int(m["status"]) for m in b.msgs] == [100, 204, 304, 200]
    assert b.counters["mid_segment_response"] == 3


def test_head_response_followed_by_a_status_line():
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"   # the answer to a HEAD
    ok = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
    b = msgs(head + ok)
    assert rows(b) == [(2, 0, len(head), False), (2, len(head), len(ok), True)]


def test_body_that_continues_is_counted_and_nothing_else_is_looked_for():
    b = msgs(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"<html>GET / HTTP/1.1\r\n\r\n")
    assert len(b) == 1 and b.counters["body_continues"] == 1
    b = msgs(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab")
    assert len(b) == 1 and b.counters["body_continues"] == 1


@pytest.mark.parametrize("payload, counter", [
    (b"POST / HTTP/1.1\r\nContent-Length: 3x\r\n\r\nabcGET / HTTP/1.1\r\n\r\n", "length_unknown"),
    (b"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcdGET /\r\n\r\n",
     "length_unknown"),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\nabc", "length_unknown"),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "length_unknown"),
    (b"GET / HTTP/1.1\r\n\r\nnot a request", "rest_not_http"),
])
def test_why_no_next_message_is_counted(payload, counter):
    b = msgs(payload)
    assert len(b) == 1 and b.counters[counter] == 1


@pytest.mark.parametrize("payload", [
    b"HTTP/1.0 200 OK\r\n\r\nbody to the close GET / HTTP/1.1\r\n\r\n",    # delimited by the close
    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n\x81\x05hello",
    b"CONNECT a:443 HTTP/1.1\r\n\r\n\x16\x03\x01\x00\x05hello",
    GET_A + b"\r\n",                                                         # a stray CRLF
])
def test_nothing_can_follow_and_nothing_is_counted(payload):
    b = msgs(payload)
    assert len(b) == 1
    assert all(b.counters[k] == 0 for k in ("body_continues", "length_unknown", "rest_not_http"))


def test_content_length_list_of_equal_values():
    post = b"POST / HTTP/1.1\r\nContent-Length: 2, 2\r\n\r\nab"
    assert [r[1] for r in rows(msgs(post + GET_B))] == [0, len(post)]


def test_seq_wraps_and_snaplen_cut_stops_the_chain():
    from scapy.all import IP, TCP, Raw

    p = Ether() / IP(src="192.0.2.1", dst="198.51.100.2") / TCP(
        sport=40000, dport=80, seq=0xFFFFFFF0, ack=1, flags="PA") / Raw(GET_A + GET_B)
    b, _ = one(p)
    assert [int(m["seq"]) for m in b.msgs] == [0xFFFFFFF0, (0xFFFFFFF0 + len(GET_A)) % (1 << 32)]
    raw = bytes(p)
    b, _ = one(raw[:PAY + len(GET_A) + 5], wirelen=len(raw))     # second message cut by the snaplen
    assert len(b) == 2 and int(b.msgs[1]["flags"]) & MSGF_PAYLOAD_TRUNCATED
    assert not int(b.msgs[0]["flags"]) & MSGF_PAYLOAD_TRUNCATED
    b, _ = one(raw[:PAY + len(GET_A)], wirelen=len(raw))          # nothing of it captured
    assert len(b) == 1 and b.counters["length_unknown"] == 1


def test_lower_case_status_line():
    m = parse_http(b"http/1.1 200 OK\r\n\r\n")
    assert m["kind"] == "response" and m["status"] == 200 and m["flags"] & MSGF_BAD_VERSION
    assert parse_http(b"http/ not a status line\r\n") is None
    assert parse_http(b"http://example.org/\r\n") is None


@pytest.mark.parametrize("payload, split", [
    (b"G", True), (b"GE", True), (b"M-", True), (b"M-SEA", True), (b"HTTP", True), (b"H", True),
    (b"X", False), (b"GET", False), (b"g", False), (b"GETX", False),
])
def test_request_line_split_counted(payload, split):
    b, r = one(Ether() / tcp4(payload))
    assert b.counters["request_line_split"] == int(split)
    assert len(b) == int(payload == b"GET")


# ----- properties: concatenation and splitting never put a message at a wrong offset ---------

def _message(kind, body, n_chunks):
    if kind == 0:
        return GET_A
    if kind == 1:
        return b"POST /x HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    if kind == 2:
        # a chunk of size 0 is the last chunk (RFC 9112 7.1): no chunks for an empty body
        chunks = b"".join(b"%x\r\n" % len(body) + body + b"\r\n" for _ in range(n_chunks if body else 0))
        return b"POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body


_msg = st.builds(_message, st.integers(0, 3), st.binary(max_size=40).filter(
    lambda b: not b[:5].upper().startswith(b"HTTP/")), st.integers(0, 3))


@settings(max_examples=200, deadline=None)
@given(st.lists(_msg, min_size=1, max_size=6), st.data())
def test_concatenation_and_cuts_give_only_true_boundaries(parts, data):
    requests = [p for p in parts if not p.startswith(b"HTTP/")]
    parts = requests or parts
    seg = b"".join(parts)
    bounds = np.cumsum([0] + [len(p) for p in parts])[:-1].tolist()
    b = msgs(seg)
    assert [r[1] for r in rows(b)] == bounds        # every message, each at its own offset
    cut = data.draw(st.integers(1, len(seg)))        # the segment ends early: a prefix
    b = msgs(seg[:cut])
    got = [r[1] for r in rows(b)]
    assert got == [x for x in bounds if x < cut][:len(got)]


def test_head_response_without_a_following_status_line_uses_its_content_length():
    """The HEAD rule needs the status line right after the header block: otherwise the
    Content-Length counts (here 4 bytes "abcd"), so the bytes after it are looked at."""
    r1 = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nabcd"
    r2 = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
    assert rows(msgs(r1 + r2)) == [(2, 0, len(r1), False), (2, len(r1), len(r2), True)]
    # a body that itself begins like a status line is taken for the next response (documented:
    # the dissector has no request to tell a HEAD from a GET)
    b = msgs(b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHTTP/1.1 200 ")
    assert len(b) == 2


def test_response_without_length_runs_to_the_close():
    # RFC 9112 6.3 item 8: no Transfer-Encoding, no Content-Length: the body ends at the close,
    # so a request line inside it is body, and nothing is counted
    b = msgs(b"HTTP/1.1 200 OK\r\n\r\n" + b"<p>GET / HTTP/1.1\r\n\r\n")
    assert len(b) == 1
    assert all(b.counters[k] == 0 for k in ("body_continues", "length_unknown", "rest_not_http"))
    # a request without either has no body (item 7): the next request follows at once
    assert [r[1] for r in rows(msgs(GET_A + GET_B))] == [0, len(GET_A)]


def test_transfer_encoding_overrides_content_length_and_other_codings():
    # a response whose final coding is not chunked runs to the close (RFC 9112 6.3 item 4)
    b = msgs(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 2\r\n\r\nhi"
             + b"HTTP/1.1 200 OK\r\n\r\n")
    assert len(b) == 1 and b.counters["length_unknown"] == 0
    # chunked with LF-only lines and an upper-case hex size
    post = b"POST / HTTP/1.1\nTransfer-Encoding: chunked\n\nA\n0123456789\n0\n\n"
    assert [r[1] for r in rows(msgs(post + GET_B))] == [0, len(post)]
