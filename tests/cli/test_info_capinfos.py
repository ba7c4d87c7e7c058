"""`webtap info` gives what capinfos gives first (issue 30): format, timestamp precision,
interfaces with link type, snaplen and packet count, the packet count, the earliest and latest
packet time and the duration. Checked against the real capinfos (wireshark-common) on shared
traces and on built ones (a big-endian nanosecond pcap)."""
from __future__ import annotations

import calendar
import re
import shutil
import subprocess
import time
from decimal import Decimal

import pytest

from tests import pcapbuild
from tests.cli import contract as C
from tests.conftest import SHARED

pytestmark = pytest.mark.skipif(shutil.which("capinfos") is None, reason="capinfos not installed")

TRACES = ["traces/httpreplay/2015-10-12-Angler-EK-sends-Bedep-traffic.pcap",    # pcap, us
          "traces/ndpi/http_asymmetric.pcapng",                                  # 2 interfaces
          "traces/zeek/http/1000-requests-one-dropped-response.pcap.gz"]         # gzip'd


def capinfos(path) -> dict:
    out = subprocess.run(["capinfos", "-M", "-S", str(path)], capture_output=True, text=True,
                         check=True).stdout
    top = dict(re.findall(r"^([A-Z][^:\n]*):\s+(.*)$", out, re.M))
    ifaces = []
    for block in out.split("Interface #")[1:]:
        kv = dict(re.findall(r"^\s+([A-Za-z ]+) = (.*)$", block, re.M))
        ifaces.append({"snaplen": int(kv["Capture length"]), "packets": int(kv["Number of packets"]),
                       "precision": int(re.search(r"\((\d+)\)", kv["Time precision"]).group(1)),
                       "encap": kv["Encapsulation"]})
    return {"type": top["File type"], "packets": int(top["Number of packets"]),
            "first": Decimal(top["First packet time"]), "last": Decimal(top["Last packet time"]),
            "duration": Decimal(top["Capture duration"].split()[0]), "ifaces": ifaces}


def ours(path) -> dict:
    r = C.run(["webtap.cli", "info", path])
    assert r.returncode == 0, r.stderr
    text = r.stdout

    def epoch(s):
        m = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\.(\d{9}) UTC", s)
        return Decimal(calendar.timegm(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S"))) + Decimal("0." + m.group(2))

    fmt = re.search(r"format:\s+(\w+)( \(gzip-compressed\))?, (\w+)-endian, timestamps in (.*)", text)
    ifaces = [{"name": m[0], "linktype": int(m[1]), "snaplen": int(m[2]), "packets": int(m[3])}
              for m in re.findall(r"#\d+: link type (\S+) \(.*, (\d+)\), snaplen (\d+), (\d+) packets", text)]
    return {"format": fmt.group(1), "gzip": bool(fmt.group(2)), "endian": fmt.group(3),
            "precisions": [int(x) for x in re.findall(r"\((\d+)\)", fmt.group(4))],
            "interfaces": int(re.search(r"interfaces: (\d+)", text).group(1)), "ifaces": ifaces,
            "packets": int(re.search(r"packets:\s+(\d+)", text).group(1)),
            "first": epoch(re.search(r"earliest:\s+(.*)", text).group(1)),
            "last": epoch(re.search(r"latest:\s+(.*)", text).group(1)),
            "duration": Decimal(re.search(r"duration:\s+([\d.]+) s", text).group(1))}


def _agree(path):
    want, got = capinfos(path), ours(path)
    assert got["packets"] == want["packets"]
    assert got["interfaces"] == len(want["ifaces"]) == len(got["ifaces"])
    for g, w in zip(got["ifaces"], want["ifaces"]):
        assert (g["snaplen"], g["packets"]) == (w["snaplen"], w["packets"])
        if w["encap"].startswith("Ethernet"):
            assert (g["name"], g["linktype"]) == ("EN10MB", 1)
    assert sorted(set(got["precisions"])) == sorted({w["precision"] for w in want["ifaces"]})
    # capinfos prints the file's precision: compare at that many digits
    digits = max(w["precision"] for w in want["ifaces"])
    q = Decimal(1).scaleb(-digits)
    assert got["first"].quantize(q) == want["first"] and got["last"].quantize(q) == want["last"]
    assert got["duration"].quantize(q) == want["duration"]
    kind = {"pcap": "nsecpcap" if digits == 9 else "pcap", "pcapng": "pcapng"}[got["format"]]
    assert want["type"] == kind + (" (gzip compressed)" if got["gzip"] else "")
    return got


@pytest.mark.parametrize("rel", TRACES)
def test_info_agrees_with_capinfos_on_shared_traces(rel):
    path = SHARED / rel
    if not path.exists():
        pytest.skip(f"{rel} not in ../shared")
    got = _agree(path)
    assert got["endian"] == "little"


def test_info_agrees_with_capinfos_on_a_big_endian_nanosecond_pcap(tmp_path):
    from tests.httpanalyzer import compare_traces as ct

    out: list = []
    c = ct.Conn(out, ct.T0, 40001)
    c.request("/x")
    c.response()
    t0 = 1_700_000_000_123_456_789
    p = tmp_path / "be-ns.pcap"
    p.write_bytes(pcapbuild.pcap([(t0 + i * 1_000_000_001, bytes(x)) for i, x in enumerate(out)],
                                 nano=True, big_endian=True, snaplen=9000))
    got = _agree(p)
    assert got["endian"] == "big" and got["precisions"] == [9]
    assert got["first"] == Decimal("1700000000.123456789")
    assert got["duration"] == Decimal("4.000000004")
