"""The truth of issue 33 checked two independent ways (tests/tlsx/truth.py is the first: its own
decryption of every record with the key log).

* tshark 4.0 decrypting with the same key log: the frames where it shows each HTTP/1.1 request
  and response (http.request / http.response) and each h2 HEADERS frame (stream id) are exactly
  the frames where the truth says the record holding the message ends (tshark shows a decrypted
  message where its record, or for an HTTP/1.1 response its last record, completes).
* nginx's access log: as many requests per connection, with the same request lines (HTTP/1.1),
  and the TLS version the server reports.
"""
from __future__ import annotations

import collections
import subprocess

import pytest

from tests.tlsx.gen_truth import SCENARIOS
from tests.tlsx.truth import truth

pytestmark = pytest.mark.tshark


def _tshark(pcap, keys, *args):
    r = subprocess.run(["tshark", "-r", str(pcap), "-o", f"tls.keylog_file:{keys}", "-T", "fields",
                        "-e", "frame.number", *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_truth_agrees_with_tshark_and_nginx(tlsx_captures, scenario):
    pcap, keys = tlsx_captures / f"{scenario}.pcap", tlsx_captures / f"{scenario}.keys"
    conns = truth(pcap, keys)
    msgs = [m for c in conns for m in c.messages]
    reqs = [m for m in msgs if m.direction == "request"]
    assert reqs and len(reqs) == sum(m.direction == "response" for m in msgs)
    h2 = conns[0].alpn == "h2"
    if h2:
        seen = set()
        for line in _tshark(pcap, keys, "-e", "http2.type", "-e", "http2.streamid", "-Y", "http2.type == 1").splitlines():
            f, types, sids = line.split("\t")
            seen |= {(int(f), int(i)) for t, i in zip(types.split(","), sids.split(",")) if t == "1"}
        assert seen == {(m.shown_frame, m.stream_id) for m in msgs}
    else:
        rq = [int(x) for x in _tshark(pcap, keys, "-Y", "http.request").split()]
        rs = [int(x) for x in _tshark(pcap, keys, "-Y", "http.response").split()]
        assert rq == sorted(m.shown_frame for m in reqs)
        assert rs == sorted(m.end_frame for m in msgs if m.direction == "response")
    log = (tlsx_captures / f"{scenario}.access.log").read_text().splitlines()
    per_conn = collections.Counter(line.split()[1] for line in log)
    assert sorted(per_conn.values()) == sorted(sum(m.direction == "request" for m in c.messages) for c in conns)
    if not h2:
        assert sorted(line.split('"')[1] for line in log) == sorted(m.text for m in reqs)
    versions = {"TLSv1.2": 0x0303, "TLSv1.3": 0x0304}
    assert sorted(versions[line.split()[4]] for line in log) == sorted(
        c.version for c in conns for m in c.messages if m.direction == "request")
    if scenario == "h1_resume":          # curl's session cache: every connection after the first resumes
        assert [line.split()[5] for line in log] == [".", "r", "r", "r"] * 2
