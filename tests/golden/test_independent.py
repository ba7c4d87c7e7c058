"""The golden records against sources that are not webtap (issue 32): a regenerated golden file
(`python -m tests.golden.golden --write`) must not carry a wrong value unnoticed.

- **HTTP records against tshark's own fields.** For a sample of the records of every golden
  trace (all of them on the small traces, an evenly spread hundred on the large one), the frame
  each record names is looked up in `tshark -T fields` of the same trace, read packet by packet
  (`tcp.desegment_tcp_streams:FALSE`: webtap's messages are single packets too; and
  `tcp.analyze_sequence_numbers:FALSE`, else tshark leaves a retransmission's payload
  undissected), and the
  record's time, addresses, ports, method, URI, Host, status and the pairing key (the request's
  ACK, the response's SEQ) must be tshark's; response_time must be the difference of the two
  times, in decimal, exactly; the VLAN the outermost tag.
- **URL hits against a plain Python reference.** For every HTTP row of the golden scan records,
  Host and URI are taken from tshark at the row's frame, put into canonical key form by
  tests/urlfilter/canon_reference.py (written from the rules R1-R9, not from the C code), and
  matched against tests/golden/blacklist.txt with the longest-prefix-on-a-boundary rule of
  docs/urlfilter.md (tests/strategies.py `naive_prefix`); the row's url, hit and entry must be
  what that gives, and every GET tshark sees must have its row.
"""
from __future__ import annotations

import csv
import ipaddress
import shutil
import subprocess
from decimal import Decimal

import pytest

from tests.golden import golden
from tests.golden.test_golden import _require
from tests.strategies import naive_prefix
from tests.urlfilter.canon_reference import Rejected, reference

FIELDS = ("frame.number", "frame.time_epoch", "ip.src", "ipv6.src", "ip.dst", "ipv6.dst",
          "tcp.srcport", "tcp.dstport", "tcp.seq_raw", "tcp.ack_raw", "http.request.method",
          "http.request.uri", "http.host", "http.response.code", "vlan.id")
SAMPLE = 100


def tshark_frame(record_frame: str) -> int:
    """tshark's frame number of a record's request_frame/response_frame: the records carry
    tshark's 1-based number itself (docs/CLI.md, "Frame numbers")."""
    return int(record_frame)


def scan_frame(frame: str) -> int:
    """tshark's frame number of a scan row's `frame` (1-based, as tshark's)."""
    return int(frame)


_CACHE: dict = {}


def tshark_fields(rel: str) -> dict[int, dict[str, str]]:
    """{frame number: {field: value}} of every frame of the trace (HTTP decoded on any port:
    http's heuristic dissector on, so that 10.25.10.120:1551 is HTTP as it is to webtap)."""
    if rel not in _CACHE:
        cmd = ["tshark", "-n", "-r", str(golden.shared_traces() / rel),
               "-o", "tcp.desegment_tcp_streams:FALSE", "--enable-heuristic", "http_tcp",
               # a retransmission's payload is dissected like any other (webtap reads it)
               "-o", "tcp.analyze_sequence_numbers:FALSE",
               "-T", "fields", "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=,"]
        for f in FIELDS:
            cmd += ["-e", f]
        out = subprocess.run(cmd, capture_output=True, check=True, timeout=600).stdout
        rows = {}
        for line in out.decode("utf-8", "surrogateescape").split("\n"):
            if line:
                v = dict(zip(FIELDS, line.split("\t")))
                rows[int(v["frame.number"])] = v
        _CACHE[rel] = rows
    return _CACHE[rel]


def _addr(v: dict, side: str) -> str:
    """The innermost IPv4 or IPv6 address of one side (tunnels list the outer one first)."""
    a = v[f"ipv6.{side}"] or v[f"ip.{side}"]
    return str(ipaddress.ip_address(a.split(",")[-1]))


def _last(s: str) -> str:
    return s.split(",")[-1]


def _first(s: str) -> str:
    return s.split(",")[0]


def _golden_rows(kind: str, rel: str) -> list[dict]:
    with open(golden.RECORDS / kind / f"{golden.name(rel)}.csv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _prereqs(rel: str) -> None:
    _require(golden.shared_traces().is_dir(), f"shared traces absent: {golden.shared_traces()}")
    _require((golden.shared_traces() / rel).exists(), f"shared trace absent: {rel}")
    _require(shutil.which("tshark") is not None, "tshark is not on PATH")


@pytest.mark.tshark
@pytest.mark.parametrize("rel", golden.traces())
def test_http_records_equal_tshark_fields(rel):
    _prereqs(rel)
    rows = _golden_rows("httpanalyzer", rel)
    assert rows, rel
    step = max(1, len(rows) // SAMPLE)
    t = tshark_fields(rel)
    bad = []
    for r in rows[::step]:
        def chk(what, got, want):
            if got != want:
                bad.append(f"{rel} {r['request_frame']}/{r['response_frame']} {what}: golden "
                           f"{got!r}, tshark {want!r}")
        client = str(ipaddress.ip_address(r["client_ip"]))
        server = str(ipaddress.ip_address(r["server_ip"]))
        if r["request_frame"]:
            v = t[tshark_frame(r["request_frame"])]
            chk("request_ts", r["request_ts"], v["frame.time_epoch"])
            chk("client", (client, r["client_port"]), (_addr(v, "src"), _last(v["tcp.srcport"])))
            chk("server", (server, r["server_port"]), (_addr(v, "dst"), _last(v["tcp.dstport"])))
            chk("method", r["method"], v["http.request.method"])
            chk("uri", r["uri"], v["http.request.uri"])
            chk("host", r["host"], v["http.host"])
            chk("request_ack", r["request_ack"], _last(v["tcp.ack_raw"]))
            if r["vlan"]:
                chk("vlan", r["vlan"], _first(v["vlan.id"]))
        if r["response_frame"]:
            v = t[tshark_frame(r["response_frame"])]
            chk("response_ts", r["response_ts"], v["frame.time_epoch"])
            chk("server->client", (server, r["server_port"], client, r["client_port"]),
                (_addr(v, "src"), _last(v["tcp.srcport"]), _addr(v, "dst"), _last(v["tcp.dstport"])))
            chk("status", r["status"], v["http.response.code"])
            chk("response_seq", r["response_seq"], _last(v["tcp.seq_raw"]))
        chk("matched", r["matched"], "true" if r["request_frame"] and r["response_frame"] else "false")
        if r["request_frame"] and r["response_frame"] and r["outcome"] == "paired":
            chk("response_time", Decimal(r["response_time"]),
                Decimal(r["response_ts"]) - Decimal(r["request_ts"]))
        if r["outcome"] == "paired" and r["after_interim"] == "false":
            # the pairing condition itself (docs/PAIRING.md): response SEQ == request ACK (a
            # final response after a 1xx starts where the 1xx ends instead)
            chk("key", r["response_seq"], r["request_ack"])
    assert not bad, "\n".join(bad[:30])


def _blacklist_keys() -> dict[bytes, bytes]:
    """{key form: display form} of tests/golden/blacklist.txt by the reference rules."""
    out = {}
    for line in (golden.HERE / "blacklist.txt").read_text().splitlines():
        if line.strip():
            out[reference(line.encode(), key=True)] = reference(line.encode())
    return out


@pytest.mark.tshark
@pytest.mark.parametrize("rel", golden.traces())
def test_url_hits_equal_a_reference_matcher(rel):
    _prereqs(rel)
    keys = _blacklist_keys()
    t = tshark_fields(rel)
    rows = [r for r in _golden_rows("scan", rel) if r["proto"] == "http"]
    bad = []
    for r in rows:
        v = t[scan_frame(r["frame"])]
        uri, host = v["http.request.uri"], v["http.host"]
        url = uri if "://" in uri[:12] else host + uri
        try:
            want_url = reference(url.encode("utf-8", "surrogateescape")).decode()
            k = reference(url.encode("utf-8", "surrogateescape"), key=True)
        except Rejected as e:
            bad.append(f"{rel} frame {r['frame']}: reference rejects {url!r} ({e.reason})")
            continue
        best = naive_prefix(keys, k)
        got = (r["url"], r["hit"], r["entry"])
        want = (want_url, "true" if best else "false", keys[best].decode() if best else "")
        if got != want:
            bad.append(f"{rel} frame {r['frame']}: golden {got}, reference {want}")
    # every GET tshark sees (with a Host) has its row
    gets = {n for n, v in t.items() if v["http.request.method"] == "GET" and v["http.host"]}
    have = {scan_frame(r["frame"]) for r in rows}
    if gets != have:
        bad.append(f"{rel}: GET frames only in tshark {sorted(gets - have)[:10]}, "
                   f"only in the golden rows {sorted(have - gets)[:10]}")
    assert not bad, "\n".join(bad[:30])


def test_reference_matcher_finds_the_documented_hits():
    """The reference itself, on the examples docs/urlfilter.md gives (so a broken reference
    cannot agree with a broken golden file by failing to match anything)."""
    keys = {reference(e, key=True): e for e in (b"example.com", b"example.com/a", b"x.org:8080")}
    m = lambda u: keys.get(naive_prefix(keys, reference(u, key=True)))       # noqa: E731
    assert m(b"http://www.Example.com/b") == b"example.com"
    assert m(b"example.com/a/b?c") == b"example.com/a"
    assert m(b"example.com/ab") == b"example.com"
    assert m(b"notexample.com/a") is None
    assert m(b"x.org:8080/p") == b"x.org:8080" and m(b"x.org/p") is None
