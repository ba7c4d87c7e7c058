"""Messages after a header block continued from an earlier segment (issue 31; docs/ACCURACY.md
"After a continued header block") through the whole product: paired, equal through the feeder
(--consumers 2) and Dask to the one-process run, and compared with the real tshark.

Every connection is built here; the server answers request /x with the reason phrase "x", so
which response belongs to which request is known from the bytes, not from webtap's pairing.
"""
from __future__ import annotations

import shutil
from collections import Counter

import pytest

import httpanalyzer
from httpanalyzer import compare
from tests.conftest import TRACES
from tests.distributed.test_distributed import same
from tests.httpanalyzer import compare_traces as ct
from tests.httpanalyzer.test_mid_segment_pairing import get, resp, send

NODUP = TRACES / "suricata-verify" / "http-protocol-nodup" / "input.pcap"


def split_request_then_pipelined(out, port):
    """GET /a whose header block is split after "User-Agen"; the second segment holds its tail
    and GET /b, GET /c; the server answers all three in one segment (SEQ = the requests' ACK)."""
    c = ct.Conn(out, ct.T0, port)
    a = b"GET /a HTTP/1.1\r\nHost: example.com\r\nUser-Agent: t\r\n\r\n"
    cut = a.index(b"t: t")
    send(c, "c", a[:cut])
    send(c, "c", a[cut:] + get("/b") + get("/c"))
    send(c, "s", resp("a") + resp("b") + resp("c", 404, b""))


def split_response_then_next(out, port):
    """Two pipelined GETs; the first answer's header block is split over two server segments,
    the second answer follows the first's body in the second segment: found, but it waits on
    its own SEQ, which is no request's ACK (both requests carry the ACK of the first answer)."""
    c = ct.Conn(out, ct.T0 + 1, port)
    send(c, "c", get("/a") + get("/b"))
    ra = resp("a", 200, b"abcd")
    cut = ra.index(b"th: 4")
    send(c, "s", ra[:cut])
    send(c, "s", ra[cut:] + resp("b"))


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    out: list = []
    split_request_then_pipelined(out, 42001)
    split_response_then_next(out, 42002)
    out.sort(key=lambda p: p.time)
    return ct.write(tmp_path_factory.mktemp("cont") / "after_continuation.pcap", out)


def records(path, port):
    df = httpanalyzer.analyze(path)
    return df[df.client_port == port]


def test_requests_after_a_split_header_block_pair_with_their_answers(trace):
    df = records(trace, 42001)
    paired = df[df.matched]
    assert sorted(zip(paired.uri, paired.reason, paired.status.astype(int))) == [
        ("/a", "a", 200), ("/b", "b", 200), ("/c", "c", 404)]
    assert len(df) == 3
    # /b and /c carry the second segment's ACK (5000, the server's first SEQ), and the
    # answers start 0, len(a), len(a) + len(b) into the server's segment
    assert set(paired.request_ack.astype(int)) == {5000}
    la = len(resp("a"))
    assert sorted(paired.response_seq.astype(int)) == [5000, 5000 + la, 5000 + 2 * la]


def test_response_after_a_split_header_block_is_found_not_paired(trace):
    df = records(trace, 42002)
    # "th: 4" is the tail of the Content-Length name: doubt, the answer to /b is not taken
    assert sorted(df[df.matched].uri) == ["/a"]
    assert len(df) == 2 and sorted(df[~df.matched].uri.dropna()) == ["/b"]


def multiset(df) -> Counter:
    return Counter(map(tuple, df.astype(str).values.tolist()))


@pytest.mark.parametrize("which", ["built", "nodup"])
def test_feeder_and_dask_equal_one_process(trace, which, tmp_path):
    path = str(trace if which == "built" else NODUP)
    if which == "nodup" and not NODUP.exists():
        pytest.skip(f"shared traces absent: {TRACES}")
    one = httpanalyzer.analyze(path)
    assert multiset(httpanalyzer.analyze(path, consumers=2)) == multiset(one)
    same([path], tmp_path, chunk_packets=3)
    same([path], tmp_path, chunk_packets=7)


@pytest.mark.tshark
@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not on PATH")
def test_tshark_reassembly_finds_the_same_messages(trace):
    """tshark's reassembly mode finds every message webtap finds after the continued block;
    its first-packet mode shows the segment as a continuation (category after_continuation)."""
    cmp = compare.compare_traces(trace)
    t = cmp.transactions
    re_ = t[(t["mode"] == "reassembly") & (t.client_port == 42001)]
    assert not (re_.side == "only_webtap").any()
    fp = t[(t["mode"] == "first_packet") & (t.client_port == 42001)]
    # (the first segment ends inside "User-Agen": tshark throws there, tshark_header_exception)
    assert set(fp[fp.differs].category) <= {"after_continuation", "tshark_no_request_in",
                                             "tshark_header_exception"}
    assert (fp.category == "after_continuation").sum() >= 2
    assert cmp.unexplained == 0
