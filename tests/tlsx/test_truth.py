"""The truth of issue 33 checked two independent ways (httpanalyzer/tls_truth.py is the first:
its own decryption of every record with the key log, `cryptography`'s AEADs checking the tags).

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

from httpanalyzer.tls_truth import read_keylog, truth
from tests.tlsx.gen_truth import SCENARIOS

#: the suites each scenario's connections negotiated (the generator's curl options; nginx
#: prefers TLS_AES_128_GCM_SHA256 / ECDHE-ECDSA-AES128-GCM-SHA256 when a client offers it)
SUITES = {"h1_suites": [(0x0303, 0xC02C), (0x0303, 0xCCA9), (0x0304, 0x1302), (0x0304, 0x1303)],
          "h1_cbc": [(0x0303, 0xC023)]}

pytestmark = pytest.mark.tshark


def _tshark(pcap, keys, *args):
    r = subprocess.run(["tshark", "-r", str(pcap), "-o", f"tls.keylog_file:{keys}", "-T", "fields",
                        "-e", "frame.number", *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s != "h1_cbc"])
def test_truth_agrees_with_tshark_and_nginx(tlsx_captures, scenario):
    pcap, keys = tlsx_captures / f"{scenario}.pcap", tlsx_captures / f"{scenario}.keys"
    t = truth(pcap, keys)
    conns = t.connections
    assert t.skipped == {} and all(c.skipped == "" for c in conns)
    if scenario in SUITES:
        assert [(c.version, c.cipher) for c in conns] == SUITES[scenario]
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


def test_truth_says_what_it_cannot_open(tlsx_captures, tmp_path):
    """A CBC suite is outside the truth's AEADs, a key log without the connection's keys opens
    nothing: each connection is left out with its reason, never guessed. tshark decrypts the
    CBC connection (its two requests are there to compare, not by the truth)."""
    pcap, keys = tlsx_captures / "h1_cbc.pcap", tlsx_captures / "h1_cbc.keys"
    t = truth(pcap, keys)
    assert [(c.version, c.cipher) for c in t.connections] == SUITES["h1_cbc"]
    assert t.skipped == {"cipher_not_supported_0xc023": 1} and t.messages == []
    assert len(_tshark(pcap, keys, "-Y", "http.request").split()) == 2
    other = tlsx_captures / "h1_tls13.keys"
    t = truth(tlsx_captures / "h1_tls12.pcap", other)
    assert t.skipped == {"no_keys_in_log": 1} and t.messages == []
    # several key logs: their keys merged
    both = read_keylog([keys, other])
    assert set(both) == set(read_keylog(keys)) | set(read_keylog(other))
    t = truth(tlsx_captures / "h1_tls13.pcap", [keys, other])
    assert t.skipped == {} and len(t.messages) == 56
