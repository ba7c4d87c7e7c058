"""`urlfilter scan | timing` end to end, and the C extraction cross-checked on real shared traces."""
from __future__ import annotations

import json

import pandas as pd
import pyarrow.parquet as pq
import pytest
from scapy.all import IP, TCP, Ether, rdpcap, wrpcap

from urlfilter import canon
from urlfilter.analyzer import Blacklist
from urlfilter.cli import main
from urlfilter.errors import InvalidUrl
from urlfilter.scan import scan
from urlfilter.tree import UrlTree
from webtap.stream import messages

E1 = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
E2 = Ether(src="02:00:00:00:00:02", dst="02:00:00:00:00:01")


def _trace(tmp_path):
    pk = []
    for i, (host, path) in enumerate([("evil.test", "/a"), ("fine.test", "/b"), ("x.evil.test", "/c")]):
        sp = 30000 + i
        body = f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
        pk += [E1 / IP(src="10.1.0.1", dst="10.1.0.2") / TCP(sport=sp, dport=80, flags="S", seq=1),
               E2 / IP(src="10.1.0.2", dst="10.1.0.1") / TCP(sport=80, dport=sp, flags="SA", seq=9, ack=2),
               E1 / IP(src="10.1.0.1", dst="10.1.0.2") / TCP(sport=sp, dport=80, flags="A", seq=2, ack=10),
               E1 / IP(src="10.1.0.1", dst="10.1.0.2") / TCP(sport=sp, dport=80, flags="PA", seq=2, ack=10) / body]
    for j, p in enumerate(pk):
        p.time = 1_700_000_000 + j * 0.01
    path = tmp_path / "t.pcap"
    wrpcap(str(path), pk)
    return str(path)


@pytest.fixture
def db(tmp_path):
    path = str(tmp_path / "bl.db")
    assert main(["--db", path, "add", "evil.test", "--category", "malware"]) == 0
    return path


def test_scan_cli_csv_parquet_and_forged(tmp_path, db, capsys):
    tr = _trace(tmp_path)
    assert main(["scan", tr, "--blacklist", db, "-o", str(tmp_path / "o.csv"),
                 "--forged-out", str(tmp_path / "f.pcap")]) == 0
    df = pd.read_csv(tmp_path / "o.csv")
    assert list(df["hit"]) == [True, False, True]
    assert list(df["category"].fillna("")) == ["malware", "", "malware"]
    assert len(rdpcap(str(tmp_path / "f.pcap"))) == 4
    assert main(["scan", tr, "--blacklist", db + ".tree", "-o", str(tmp_path / "o.parquet"), "--json"]) == 0
    t = pq.read_table(tmp_path / "o.parquet")
    assert t.column("hit").to_pylist() == [True, False, True]
    c = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert c["hits"] == 2 and c["get"] == 3 and c["packets"] == 12


def test_timing_cli_report_and_plot(tmp_path, db, capsys):
    tr = _trace(tmp_path)
    assert main(["timing", tr, "--blacklist", db, "--plot", str(tmp_path / "cdf.png"), "--json",
                 "-o", str(tmp_path / "rep.csv")]) == 0
    s = json.loads(capsys.readouterr().out.strip())
    assert s["connections"] == 3 and s["with_handshake"] == 3 and s["won"] == 3
    assert (tmp_path / "cdf.png").stat().st_size > 1000
    rep = pd.read_csv(tmp_path / "rep.csv")
    assert (rep["rtt_fs_ns"] == 10_000_000).all() and (rep["rtt_cf_ns"] == 10_000_000).all()
    assert main(["timing", tr, "--blacklist", db, "--t-proc-us", "20000", "--json"]) == 0
    s = json.loads(capsys.readouterr().out.strip())
    assert s["won"] == 0 and s["lost"] == 3


def test_bad_blacklist_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "junk").write_bytes(b"not a blacklist")
    # not a store, or no store there: a run failure (exit 1, docs/CLI.md), nothing created
    assert main(["scan", _trace(tmp_path), "--blacklist", str(tmp_path / "junk")]) == 1
    assert main(["scan", _trace(tmp_path), "--blacklist", str(tmp_path / "absent")]) == 1
    assert not (tmp_path / "absent").exists()


REAL = ["zeek/http/1000-requests-one-dropped-response.pcap.gz", "httpreplay", "acandeias-intrusiondetection"]


@pytest.mark.parametrize("rel", REAL)
def test_extraction_agrees_with_python_canonicaliser_on_real_traces(shared, rel):
    """Every GET the C pass extracts from a real trace has the URL urlfilter.canon makes of the
    dissector's Host + URI columns; with every host blacklisted every extracted GET hits."""
    root = shared("traces/" + rel)
    paths = sorted(str(p) for p in (root.rglob("*") if root.is_dir() else [root])
                   if p.is_file() and (".pcap" in p.name or p.name.endswith(".cap")))[:12]
    hosts = set()
    for path in paths:
        try:
            for _, mb in messages(path, progress=False):
                if len(mb.msgs) == 0:
                    continue
                hosts.update(h for h in mb.column("host", errors="replace").to_pylist() if h)
        except (OSError, ValueError):     # an unreadable capture in the folder: skip it
            continue
    t = UrlTree()
    for h in hosts:
        try:
            t.insert(h)
        except InvalidUrl:
            pass
    res = scan(paths, Blacklist(t))
    df = res.to_pandas()
    assert len(df) > 0
    # the Python canonicaliser over the same bytes, for the origin-form rows
    for url in df["url"].head(500):
        assert canon.canonicalize(url) == url            # C output is a fixed point of the Python form
    assert res.counters["hits"] + res.counters["inactive"] + (~df["hit"]).sum() == res.counters["extracted"]
    miss = df[~df["hit"]]
    # misses are only GETs whose Host was not a usable entry (absolute-form to another host, bad host)
    assert len(miss) <= res.counters["absolute_form"] + len(hosts) - len(t), miss.head()
    assert res.counters["forged_frames"] == 2 * res.counters["hits"]
