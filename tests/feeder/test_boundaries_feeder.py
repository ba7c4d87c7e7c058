"""Expected message boundaries (issue 31) and the feeder executor (docs/FEEDER.md "Known
differences"): the reader routes only packets whose payload starts a message, so the later
segment that holds a boundary reaches no consumer. With consumers, the message there is not
found and each consumer counts the boundary it could not keep (boundary_unwatched); one process
finds it. Built connection: a POST whose 3000-byte body spans three segments, a GET pipelined
in the third, the server's two answers (RFC 9112 framing; SEQs by hand)."""
from __future__ import annotations

import httpanalyzer
from httpanalyzer.stream import Summary
from tests.httpanalyzer import compare_traces as ct


def build(path):
    out: list = []
    c = ct.Conn(out, ct.T0, 41500)
    head = b"POST /p HTTP/1.1\r\nHost: example.com\r\nContent-Length: 3000\r\n\r\n"
    get = b"GET /g HTTP/1.1\r\nHost: example.com\r\n\r\n"
    for part in (head + b"a" * 1000, b"b" * 1000, b"c" * 1000 + get):
        c._pkt("c", "PA", part, c.cseq, c.sseq)
        c.cseq += len(part)
    for reason in ("p", "g"):
        r = f"HTTP/1.1 200 {reason}\r\nContent-Length: 2\r\n\r\nok".encode()
        c._pkt("s", "PA", r, c.sseq, c.cseq)
        c.sseq += len(r)
    return ct.write(path, out), 1000 + len(head) + 3000


def test_one_process_finds_it_the_feeder_counts_it(tmp_path):
    path, _ = build(tmp_path / "bound.pcap")
    s1 = Summary()
    one = httpanalyzer.analyze(path, summary=s1)
    assert sorted(one.uri.dropna()) == ["/g", "/p"]
    g = one[one.uri == "/g"].iloc[0]
    assert int(g.request_frame) == 6            # handshake 1-3, the POST's segments 4-6
    assert s1.dissect["boundary_kept"] == 1 and s1.dissect["boundary_message"] == 1
    for n in (1, 2):
        s = Summary()
        multi = httpanalyzer.analyze(path, consumers=n, summary=s)
        assert sorted(multi.uri.dropna()) == ["/p"], n
        assert s.dissect["boundary_unwatched"] == 1 and s.dissect["boundary_message"] == 0, n
        # what the feeder gives is the single process's without the table
        assert len(multi) == len(httpanalyzer.analyze(path, boundaries=False)), n
