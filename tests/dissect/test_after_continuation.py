"""Messages after a header block continued from an earlier segment (ext/walk/httpcont.c;
docs/ACCURACY.md "After a continued header block"): the segment's first bytes continue a message
begun in an earlier segment, and the next message starts inside it. Offsets, SEQ and payload
spans are worked out by hand from the bytes each test builds (RFC 9112 2.2 lines, 6.3 lengths,
7.1 chunks)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.dissect.packets import Ether, one, tcp4
from webtap.records.message import (MSGF_AFTER_CONTINUATION, MSGF_MID_SEGMENT,
                                    MSGF_PAYLOAD_TRUNCATED)

SEQ = 1000            # tcp4()'s sequence number
PAY = 54              # Ethernet 14 + IPv4 20 + TCP 20: the payload's offset in the packet

GET_B = b"GET /b HTTP/1.1\r\nHost: h\r\n\r\n"                 # 28 bytes
GET_C = b"GET /c HTTP/1.1\r\nHost: h\r\n\r\n"
OK_0 = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"  # 45 bytes


def msgs(payload, wirelen=None):
    """(batch, reason) of one Ethernet/IPv4/TCP packet carrying payload (SEQ 1000)."""
    raw = bytes(Ether() / tcp4(payload))
    return one(raw, wirelen=None if wirelen is None else len(raw) + wirelen - len(payload))


def rows(b):
    """(kind, seg_off, seq - SEQ, payload_len, flags & (AFTER_CONTINUATION | MID_SEGMENT))."""
    return [(int(m["kind"]), int(m["seg_off"]), int(m["seq"]) - SEQ, int(m["payload_len"]),
             int(m["flags"]) & (MSGF_AFTER_CONTINUATION | MSGF_MID_SEGMENT)) for m in b.msgs]


AC, MID = MSGF_AFTER_CONTINUATION, MSGF_MID_SEGMENT


def test_request_whose_header_block_continues_then_pipelined_requests():
    # "User-Agen" ended the previous segment: "t: x\r\n" is the fragment (6 bytes), then
    # "Accept: */*\r\n" (13) and the empty line (2): the next request at 21, the one after at 49
    tail = b"t: x\r\nAccept: */*\r\n\r\n"
    assert len(tail) == 6 + 13 + 2
    b, reason = msgs(tail + GET_B + GET_C)
    assert reason == "not_http"                       # the payload starts no message
    assert rows(b) == [(1, 21, 21, 28, AC), (1, 49, 49, 28, AC | MID)]
    assert [int(m["payload_off"]) for m in b.msgs] == [PAY + 21, PAY + 49]
    assert [int(m["payload_caplen"]) for m in b.msgs] == [28, 28]
    assert {int(m["ack"]) for m in b.msgs} == {2000}
    assert b.column("uri").to_pylist() == ["/b", "/c"]
    assert b.column("host").to_pylist() == ["h", "h"]
    c = b.counters
    assert (c["after_continuation_request"], c["mid_segment_request"], c["http_request"],
            c["continuation_unknown"]) == (1, 1, 0, 0)


def test_request_line_tail_fragment_as_in_the_nmap_burst():
    # "GE" ended the previous segment; "T /x HTTP/1.1" is this one's fragment
    tail = b"T /x HTTP/1.1\r\nHost: h\r\n\r\n"
    b, _ = msgs(tail + GET_B)
    assert rows(b) == [(1, len(tail), len(tail), 28, AC)]


def test_fragment_empty_segment_starts_with_the_line_end():
    # the previous segment ended inside the last header line: "\r\n" ends it, "\r\n" is the
    # empty line (a payload starting CRLF CRLF: http_start skips one CRLF, "\r\nGET" is no start)
    b, _ = msgs(b"\r\n\r\n" + GET_B)
    assert rows(b) == [(1, 4, 4, 28, AC)]


def test_segment_starting_with_the_lf_of_a_split_crlf():
    # the previous segment ended "...\r\n\r": the LF completes the empty line
    b, _ = msgs(b"\n" + GET_B)
    assert rows(b) == [(1, 1, 1, 28, AC)]
    # and CRLF then a request is the first-packet rule (one leading CRLF skipped): not flagged
    b, _ = msgs(b"\r\n" + GET_B)
    assert rows(b) == [(1, 0, 0, 30, 0)]


def test_response_continued_with_content_length_then_status_lines():
    # as frame 19 of suricata-verify/http-protocol-nodup: "Type: text/html" is the fragment,
    # Content-Length 4 counts from the empty line, then the next response
    tail = b"Type: text/html\r\nContent-Length: 4\r\n\r\nbody"
    assert len(tail) == 17 + 19 + 2 + 4
    b, _ = msgs(tail + OK_0 + OK_0)
    assert rows(b) == [(2, 42, 42, 45, AC), (2, 87, 87, 45, AC | MID)]
    assert [int(m["status"]) for m in b.msgs] == [404, 404]
    assert b.counters["after_continuation_response"] == 1
    assert b.counters["mid_segment_response"] == 1


def test_continued_chunked_body_ends_in_the_packet():
    tail = b"ding: chunked\r\nX: y\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
    # "ding" may be the tail of "Transfer-Encoding": doubt, nothing taken (and not counted:
    # the bytes after the empty line, a chunk, do not begin like a message)
    b, _ = msgs(tail + GET_B)
    assert len(b) == 0 and b.counters["continuation_unknown"] == 0
    tail = b"X-A: 1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
    b, _ = msgs(tail + GET_B)
    assert rows(b) == [(1, len(tail), len(tail), 28, AC)]


def test_head_or_304_answer_continued_then_a_status_line():
    # a status line right after the empty line: no body whatever Content-Length says (_msg_end's
    # rule for responses; the continued message is a response since one follows it)
    tail = b"e: 1\r\nContent-Length: 500\r\n\r\n"
    b, _ = msgs(tail + OK_0)
    assert rows(b) == [(2, len(tail), len(tail), 45, AC)]


@pytest.mark.parametrize("payload", [
    # a Content-Length in the continued lines: the bytes after the 3-byte body begin like a
    # request but not strictly (no version), nor do the bytes after the empty line
    b"t: x\r\nContent-Length: 3\r\n\r\nabcGET /x\r\n\r\n",
    # a Content-Length in the continued lines whose body runs past the segment
    b"t: x\r\nContent-Length: 300\r\n\r\n" + GET_B,
    # a request line cut by the segment's end
    b"t: x\r\n\r\nGET /next HT",
    # a method alone, or a request line without a version: not strict
    b"t: x\r\n\r\nGET /next\r\nHost: h\r\n\r\n",
    # a lower-case status line: not strict
    b"t: x\r\n\r\nhttp/1.1 200 OK\r\n\r\n",
    # a request line without its version (HTTP/0.9 shape, or cut): not strict
    b"t: x\r\n\r\nGET /b\r\n\r\n",
    # the fragment holds a cut Content-Length name ("ngth: 9")
    b"ngth: 9\r\n\r\n" + GET_B,
    b": 9\r\n\r\n" + GET_B,
    # a bad Content-Length, a Transfer-Encoding without chunked
    b"t: x\r\nContent-Length: 1x\r\n\r\n" + GET_B,
    b"t: x\r\nTransfer-Encoding: gzip\r\n\r\n" + GET_B,
    # chunked, but the bytes after the empty line are no chunk (a request line)
    b"t: x\r\nTransfer-Encoding: chunked\r\n\r\n" + GET_B,
    # a MIME part that carries an HTTP message (a multipart batch body, OData $batch)
    b"--batch_1\r\nContent-Type: application/http\r\n\r\n" + GET_B,
    b"--b\r\nContent-Transfer-Encoding: binary\r\n\r\n" + GET_B,
])
def test_doubt_takes_nothing_and_is_counted(payload):
    b, reason = msgs(payload)
    assert reason == "not_http"
    assert len(b) == 0
    assert b.counters["continuation_unknown"] == 1


@pytest.mark.parametrize("payload", [
    # a first line with a control byte (not the tail of a header, request or status line: RFC
    # 9110 5.5), though header lines and a request follow
    b"t\x01x\r\nAccept: */*\r\n\r\n" + GET_B,
    b"\x17\x03\x03\x00\x05x\r\nA: b\r\n\r\n" + GET_B,
    b"t: x\x7f\r\n\r\n" + GET_B,
    # a continuation without any empty line
    b"t: x\r\nAccept: */*\r\nGET /b HTTP/1.1\r\n",
    b"<html><body>GET / HTTP/1.1</body></html>",
    # a status line inside a body: the lines before it are not header lines
    b"x</center>\r\n</body>\r\n</html>\r\n" + OK_0,
    # a body with an empty line whose lines are not header lines
    b"para one\r\nstill one\r\n\r\n" + GET_B,
    # the continued block ends the segment: nothing follows
    b"t: x\r\nAccept: */*\r\n\r\n",
    # a stray CRLF after the block
    b"t: x\r\n\r\n\r\n",
    # a body after the empty line (its length is in the earlier segment): no start there
    b"t: x\r\n\r\n{\"a\": 1}" + GET_B,
    # a Content-Length in the continued lines: the bytes after the body start nothing
    b"t: x\r\nContent-Length: 3\r\n\r\nabcdef" + GET_B,
    # a MIME part (multipart body) whose content is no HTTP message
    b"art\r\nContent-Type: text/plain\r\nContent-Transfer-Encoding: 7bit\r\n\r\nPart 1\r\n",
    # no line end at all
    b"ET /x HTTP/1.1",
])
def test_not_a_continued_block_nothing_taken_nothing_counted(payload):
    b, _ = msgs(payload)
    assert len(b) == 0
    assert b.counters["continuation_unknown"] == 0
    assert b.counters["after_continuation_request"] == b.counters["after_continuation_response"] == 0


def test_snaplen_cut_and_seq_wrap():
    tail = b"t: x\r\n\r\n"
    # the capture holds the block and 10 bytes of the request: its line is not whole
    full = tail + GET_B
    raw = bytes(Ether() / tcp4(full))
    from tests.dissect._scapy_batches import batch_from_raw
    from webtap.dissect import dissect
    cut = len(raw) - len(full) + len(tail) + 10
    pk, data = batch_from_raw([(raw[:cut], 1, 0, len(raw))])
    b = dissect(pk, data, np.zeros(1, np.uint8))
    assert len(b) == 0 and b.counters["continuation_unknown"] == 1
    # whole request captured, the rest cut: taken, flagged payload_truncated
    cut = len(raw) - len(full) + len(tail) + len(GET_B) - 2
    pk, data = batch_from_raw([(raw[:cut], 1, 0, len(raw))])
    b = dissect(pk, data, np.zeros(1, np.uint8))
    assert len(b) == 1 and int(b.msgs["flags"][0]) & MSGF_PAYLOAD_TRUNCATED
    # SEQ + seg_off wraps modulo 2^32
    p = Ether() / tcp4(tail + GET_B)
    p["TCP"].seq = 2**32 - 3
    b, _ = one(bytes(p))
    assert int(b.msgs["seq"][0]) == (2**32 - 3 + len(tail)) % 2**32


# ----- property: the messages partition the segment from the first found; none off a start ----

_REQ = st.sampled_from([GET_B, GET_C, b"POST /p HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi",
                        b"GET /l HTTP/1.0\nHost: h\n\n"])
_TAIL = st.sampled_from([b"t: x\r\n\r\n", b"T /x HTTP/1.1\r\nHost: h\r\n\r\n", b"\r\n\r\n",
                         b"ost: h\r\nAccept: a\r\n\r\n", b"x\n\n"])


@settings(max_examples=200, deadline=None)
@given(_TAIL, st.lists(_REQ, min_size=1, max_size=5), st.data())
def test_messages_partition_the_segment_and_start_only_at_boundaries(tail, reqs, data):
    seg = tail + b"".join(reqs)
    bounds = np.cumsum([len(tail)] + [len(r) for r in reqs])[:-1].tolist()
    b, _ = msgs(seg)
    got = rows(b)
    assert [r[1] for r in got] == bounds
    # seq + payload_len is the next one's seq; the last reaches the segment's end
    ends = [r[2] + r[3] for r in got]
    assert ends == [r[2] for r in got[1:]] + [len(seg)]
    cut = data.draw(st.integers(1, len(seg)))
    b, _ = msgs(seg[:cut])
    offs = [r[1] for r in rows(b)]
    assert set(offs) <= set(bounds)
    assert offs == sorted(offs)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=120), st.data())
def test_arbitrary_bytes_never_give_a_message_off_a_strict_start(junk, data):
    """Whatever bytes precede, a message found after a continued block starts a whole request
    line ending in HTTP/d.d or a status line HTTP/d.d SP 3DIGIT (the strict start)."""
    ins = data.draw(st.sampled_from([b"", b"\r\n\r\n", b"\n\n", b"\r\n\r\n" + GET_B]))
    b, _ = msgs(junk + ins)
    pay = junk + ins
    for m in b.msgs:
        if int(m["flags"]) & MSGF_AFTER_CONTINUATION and not int(m["flags"]) & MSGF_MID_SEGMENT:
            rest = pay[int(m["seg_off"]):]
            if rest.startswith(b"\r\n"):
                rest = rest[2:]
            line = rest.split(b"\n")[0].split(b"\r")[0]
            assert (line[:5] == b"HTTP/" and line[8:9] == b" " and line[9:12].isdigit()) or \
                (b" " in line and line[-9:-3] == b" HTTP/" and line[-1:].isdigit())
