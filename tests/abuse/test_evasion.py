"""Evasion flags (issue 34; ext/walk/evasion.c, httpanalyzer.abuse.evasion).

The expectations come from the rules and from tshark, not from the code under test:

* built requests at the thresholds' edges (Apache httpd's LimitRequestLine /
  LimitRequestFieldSize 8190 and LimitRequestFields 100; nginx's 8k header buffer holds 8190
  bytes of line plus CRLF), one per flag;
* real captures read by tshark (no TCP reassembly, as webtap's first packets): per request
  frame, how many Host fields tshark parsed (http.host occurrences against http.request.method
  occurrences), and its http.request.uri, on which the flags' definitions are applied here in
  plain Python (RFC 3986 authority, "%25" + two hex digits).
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from httpanalyzer import abuse
from tests.conftest import SHARED, require_shared
from webtap._ext import dissect

F = abuse.EVASION_FLAGS


def _flags(payload: bytes) -> set[str]:
    r, m = dissect.parse_http_payload(payload)
    return {k for k, b in F.items() if int(m["flags"]) & b}


def test_each_flag_on_a_built_request_and_at_its_threshold():
    assert _flags(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n") == set()
    assert _flags(b"GET / HTTP/1.1\r\nHost: a\r\nhOST: b\r\n\r\n") == {"host_repeated"}
    assert _flags(b"GET http://evil.example/x HTTP/1.1\r\nHost: good.example\r\n\r\n") == {"host_mismatch"}
    # the same host: case, port, userinfo do not make a mismatch (RFC 3986 3.2)
    assert _flags(b"GET HTTP://u:p@Good.Example:8080/x HTTP/1.1\r\nHost: good.example\r\n\r\n") == set()
    assert _flags(b"GET http://[2001:db8::1]:80/ HTTP/1.1\r\nHost: [2001:DB8::1]\r\n\r\n") == set()
    assert _flags(b"GET http://[2001:db8::1]/ HTTP/1.1\r\nHost: [2001:db8::2]\r\n\r\n") == {"host_mismatch"}
    # an authority with no host against a named Host differs; origin-form never does
    assert _flags(b"GET http:///x HTTP/1.1\r\nHost: a\r\n\r\n") == {"host_mismatch"}
    assert _flags(b"GET /http://b/ HTTP/1.1\r\nHost: a\r\n\r\n") == set()
    # no Host at all: nothing to compare (the records' no-host case)
    assert _flags(b"GET http://b/ HTTP/1.1\r\n\r\n") == set()
    assert _flags(b"GET /a%252e%252E/ HTTP/1.1\r\nHost: a\r\n\r\n") == {"double_encoded"}
    assert _flags(b"GET /a%25 HTTP/1.1\r\nHost: a\r\n\r\n") == set()
    assert _flags(b"GET /a%25g1 HTTP/1.1\r\nHost: a\r\n\r\n") == set()
    assert _flags(b"GET /%2e%2e/ HTTP/1.1\r\nHost: a\r\n\r\n") == set()
    assert _flags(b"GET /x?%25Ff HTTP/1.1\r\nHost: a\r\n\r\n") == {"double_encoded"}
    # request line of exactly 8190 bytes, then 8191 ("GET /" + path + " HTTP/1.1" = 14 + path)
    assert _flags(b"GET /" + b"a" * 8176 + b" HTTP/1.1\r\nHost: a\r\n\r\n") == set()
    assert _flags(b"GET /" + b"a" * 8177 + b" HTTP/1.1\r\nHost: a\r\n\r\n") == {"long_request_line"}
    # a request line longer than that without its end in the packet is already too long
    assert _flags(b"GET /" + b"a" * 9000) == {"long_request_line"}
    # a header line of 8190 bytes ("X: " + 8187), then 8191
    assert _flags(b"GET / HTTP/1.1\r\nX: " + b"a" * 8187 + b"\r\n\r\n") == set()
    assert _flags(b"GET / HTTP/1.1\r\nX: " + b"a" * 8188 + b"\r\n\r\n") == {"long_header_line"}
    # 100 fields, then 101
    assert _flags(b"GET / HTTP/1.1\r\n" + b"X: 1\r\n" * 100 + b"\r\n") == set()
    assert _flags(b"GET / HTTP/1.1\r\n" + b"X: 1\r\n" * 101 + b"\r\n") == {"many_fields"}
    # responses never carry the request-only bits
    r, m = dissect.parse_http_payload(b"HTTP/1.1 200 OK\r\nX: " + b"a" * 9000 + b"\r\n" +
                                      b"Y: 1\r\n" * 120 + b"\r\n")
    assert int(m["flags"]) & (sum(F.values()) - F["host_repeated"]) == 0


def _built_trace(tmp_path):
    scapy = pytest.importorskip("scapy.all")
    Ether, IP, TCP, Raw = scapy.Ether, scapy.IP, scapy.TCP, scapy.Raw
    reqs = [
        b"GET / HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n",
        b"GET http://evil.example/ HTTP/1.1\r\nHost: good.example\r\n\r\n",
        b"GET /%252e%252e/etc HTTP/1.1\r\nHost: a.example\r\n\r\n",
        b"GET /" + b"a" * 8177 + b" HTTP/1.1\r\nHost: a.example\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a.example\r\nCookie: " + b"c" * 8200 + b"\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a.example\r\n" + b"X-F: 1\r\n" * 101 + b"\r\n",
        b"GET /plain HTTP/1.1\r\nHost: a.example\r\n\r\n",
    ]
    pk = []
    for i, r in enumerate(reqs):
        p = (Ether() / IP(src="10.0.0.1", dst="10.0.0.2") /
             TCP(sport=40000 + i, dport=80, flags="PA", seq=1000, ack=1) / Raw(r))
        p.time = 1_700_000_000 + i
        pk.append(p)
    # a retransmission of the first request: counted once
    again = pk[0].copy()
    again.time = 1_700_000_000.5
    pk.insert(1, again)
    path = tmp_path / "evasion.pcap"
    scapy.wrpcap(str(path), pk)
    return path


def test_built_trace_api_and_cli(tmp_path):
    path = _built_trace(tmp_path)
    df = abuse.evasion(abuse.collect(str(path), evasion=True))
    got = [{k for k in F if row[k]} for _, row in df.iterrows()]
    assert got == [{"host_repeated"}, {"host_mismatch"}, {"double_encoded"},
                   {"long_request_line"}, {"long_header_line"}, {"many_fields"}, set()]
    assert list(df["request_frame"]) == [1, 3, 4, 5, 6, 7, 8]
    assert list(df["evasion"]) == [F["host_repeated"], F["host_mismatch"], F["double_encoded"],
                                   F["long_request_line"], F["long_header_line"],
                                   F["many_fields"], 0]
    assert df["host"].iloc[1] == "good.example" and df["uri"].iloc[1] == "http://evil.example/"
    if shutil.which("tshark"):
        # tshark's reading of the built frames: two Host fields in frame 1, one in the others
        ts = _tshark_view(path)
        assert [len(ts[f][1]) for f in (1, 3, 4, 8)] == [2, 1, 1, 1]
        assert ts[3][2] == ["http://evil.example/"] and ts[3][1] == ["good.example"]
        assert ts[4][2] == ["/%252e%252e/etc"]
    out = tmp_path / "ev.csv"
    p = subprocess.run([sys.executable, "-m", "httpanalyzer", "abuse", "evasion", str(path), "--flagged", "-o", str(out)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "7 requests: 1 host_repeated, 1 host_mismatch, 1 double_encoded" in p.stderr
    assert len(out.read_text().splitlines()) == 1 + 6


def test_collect_without_evasion_refuses():
    run = abuse.AbuseRun(records=abuse.pd.DataFrame({"request_ts": []}), events=abuse.np.zeros(0, abuse._EV_DTYPE),
                         request_msgs=abuse.np.zeros(0, abuse.np.uint8))
    with pytest.raises(ValueError, match="evasion=True"):
        abuse.evasion(run)


# Real captures: tshark's parse of each request frame, the flags' rules applied to it here.
REAL = [
    "ndpi/WebattackRCE.pcap",                       # double encoding (%255c, %2527)
    "suricata-verify/http-raw-header/input.pcap",   # absolute form, same host as Host
    "suricata-verify/http-sha256-drop-02/input.pcap",  # absolute form (proxy), same host
    "suricata-verify/http-protocol-nodup/input.pcap",  # pipelined requests: a Host each
    "suricata-verify/http-multiple-cl/input.pcap",  # two requests in one frame
    "suricata-verify/http-request-header-multi/input.pcap",
    "suricata-verify/http-uri-spaces/input.pcap",
    "elcabezzonn-pcaps/malware_infection.pcap.gz",  # legitimate %25-encoded tracking URLs
]
_ABS = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*)")
_DBL = re.compile(r"%25[0-9A-Fa-f]{2}")


def _host_of(authority: str) -> str:
    a = authority.rsplit("@", 1)[-1]
    if a.startswith("["):
        return a[: a.index("]") + 1].lower() if "]" in a else a.lower()
    return a.split(":", 1)[0].lower()


def _tshark_view(path):
    p = subprocess.run(
        ["tshark", "-r", str(path), "-o", "tcp.desegment_tcp_streams:FALSE", "-Y", "http.request",
         "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=\x01", "-e", "frame.number",
         "-e", "http.request.method", "-e", "http.host", "-e", "http.request.uri"],
        capture_output=True, text=True, check=True)
    out = {}
    for line in p.stdout.splitlines():
        fr, meth, hosts, uris = (line.split("\t") + ["", "", ""])[:4]
        out[int(fr)] = (meth.split("\x01"), hosts.split("\x01") if hosts else [],
                        uris.split("\x01") if uris else [])
    return out


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not on PATH")
@pytest.mark.parametrize("rel", REAL)
def test_real_captures_agree_with_tshark(rel):
    path = SHARED / "traces" / rel
    require_shared(path)
    ts = _tshark_view(path)
    df = abuse.evasion(abuse.collect(str(path), evasion=True))
    # one request per frame: the frames where tshark and the walk both see exactly one
    single = {fr: v for fr, v in ts.items() if len(v[0]) == 1 and len(v[2]) == 1}
    mine = df.groupby("request_frame")
    checked = 0
    for fr, (meth, hosts, uris) in single.items():
        if fr not in mine.groups:
            continue
        rows = mine.get_group(fr)
        if len(rows) != 1:
            continue
        row = rows.iloc[0]
        uri = uris[0]
        if row["uri"] != uri:        # tshark cut or decoded the URI differently: not comparable
            continue
        checked += 1
        assert bool(row["host_repeated"]) == (len(hosts) > 1), (fr, hosts)
        assert bool(row["double_encoded"]) == bool(_DBL.search(uri)), (fr, uri)
        m = _ABS.match(uri)
        want_mis = bool(m and hosts and _host_of(m.group(1)) != _host_of(hosts[0]))
        assert bool(row["host_mismatch"]) == want_mis, (fr, uri, hosts)
    # frames with several requests (pipelining): one Host each is no repetition
    for fr, (meth, hosts, uris) in ts.items():
        if len(meth) > 1 and fr in mine.groups and len(hosts) == len(meth):
            assert not mine.get_group(fr)["host_repeated"].any(), fr
            checked += 1
    assert checked >= 1
    if rel == "ndpi/WebattackRCE.pcap":
        assert int(df["double_encoded"].sum()) == sum(bool(_DBL.search(v[2][0])) for v in single.values())
