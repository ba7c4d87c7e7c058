"""`urlfilter scan | timing` end to end, and the C extraction cross-checked on real shared traces."""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from scapy.all import IP, TCP, Ether, rdpcap, wrpcap

from tests.urlfilter.canon_reference import reference
from urlfilter.analyzer import Blacklist
from urlfilter.cli import main
from urlfilter.errors import InvalidUrl
from urlfilter.scan import scan
from urlfilter.tree import UrlTree
from webtap.records.message import METHOD_NAMES, MSG_REQUEST
from webtap.stream import messages

METHOD_GET = METHOD_NAMES.index("GET")
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


def test_timing_default_output_is_reproducible(tmp_path, db, capsys):
    # issue 30: the measured match+forge time changed the default output from run to run; now
    # it is in measured_* columns only with --measured, and a given T_proc is reproducible
    tr = _trace(tmp_path)
    outs = []
    for i in range(2):
        assert main(["timing", tr, "--blacklist", db, "-o", str(tmp_path / f"r{i}.csv")]) == 0
        outs.append((tmp_path / f"r{i}.csv").read_bytes())
    assert outs[0] == outs[1]
    rep = pd.read_csv(tmp_path / "r0.csv")
    assert not {"t_proc_ns", "margin_ns", "win"} & set(rep.columns)
    assert not any(c.startswith("measured_") for c in rep.columns)
    # rtt_cs - rtt_cf: SYN/ACK 10 ms after the SYN, no response seen (server_wait 0)
    assert list(rep["t_proc_budget_ns"]) == [10_000_000] * 3
    for i in range(2):
        assert main(["timing", tr, "--blacklist", db, "--t-proc-us", "9999", "-o", str(tmp_path / f"g{i}.csv")]) == 0
    assert (tmp_path / "g0.csv").read_bytes() == (tmp_path / "g1.csv").read_bytes()
    g = pd.read_csv(tmp_path / "g0.csv")
    assert list(g["t_proc_ns"]) == [9_999_000] * 3 and list(g["margin_ns"]) == [1_000] * 3
    assert list(g["win"]) == [True] * 3
    assert main(["timing", tr, "--blacklist", db, "--measured", "-o", str(tmp_path / "m.csv")]) == 0
    m = pd.read_csv(tmp_path / "m.csv")
    assert {"measured_t_proc_ns", "measured_margin_ns", "measured_win"} <= set(m.columns)
    assert not {"t_proc_ns", "margin_ns", "win"} & set(m.columns)
    assert (m["measured_t_proc_ns"] > 0).all()
    assert (m["measured_margin_ns"] == m["t_proc_budget_ns"] - m["measured_t_proc_ns"]).all()
    assert "measured T_proc median" in capsys.readouterr().err


def test_bad_blacklist_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "junk").write_bytes(b"not a blacklist")
    # not a store, or no store there: a run failure (exit 1, docs/CLI.md), nothing created
    assert main(["scan", _trace(tmp_path), "--blacklist", str(tmp_path / "junk")]) == 1
    assert main(["scan", _trace(tmp_path), "--blacklist", str(tmp_path / "absent")]) == 1
    assert not (tmp_path / "absent").exists()


REAL = ["zeek/http/1000-requests-one-dropped-response.pcap.gz", "httpreplay", "acandeias-intrusiondetection"]


def _get_targets(path) -> dict[int, tuple[bytes, bytes]]:
    """pkt_index -> (raw Host bytes, raw request-target bytes) of every GET the dissector found
    in one capture, read from the batch buffer by the spans (no text decoding)."""
    out = {}
    for _, mb in messages(path, progress=False):
        m, data = mb.msgs, mb.data
        for i in np.flatnonzero((m["kind"] == MSG_REQUEST) & (m["method_id"] == METHOD_GET)):
            base = int(m["pkt_offset"][i])
            span = lambda f: bytes(data[base + int(m[f]["off"][i]):base + int(m[f]["off"][i]) + int(m[f]["len"][i])])
            out[int(m["pkt_index"][i])] = (span("host"), span("uri"))
    return out


@pytest.mark.parametrize("rel", REAL)
def test_extraction_agrees_with_reference_canonicaliser_on_real_traces(shared, rel):
    """Every GET the C pass extracts from a real trace has the URL that an independent reading of
    the canonical-form rules (tests/urlfilter/canon_reference.py, not the C function) makes of the
    dissector's Host + request-target (the target alone in absolute form); with every host
    blacklisted every extracted GET hits."""
    root = shared("traces/" + rel)
    paths = sorted(str(p) for p in (root.rglob("*") if root.is_dir() else [root])
                   if p.is_file() and (".pcap" in p.name or p.name.endswith(".cap")))[:12]
    hosts, targets = set(), {}
    for path in paths:
        try:
            targets[path] = _get_targets(path)
        except (OSError, ValueError):     # an unreadable capture in the folder: not scanned below
            continue
        hosts.update(h.decode("latin-1") for h, _ in targets[path].values() if h)
    assert sum(len(t) for t in targets.values()) > 0, f"no GET found in {rel}"
    t = UrlTree()
    for h in hosts:
        try:
            t.insert(h)
        except InvalidUrl:
            pass
    compared = 0
    for path, gets in targets.items():
        res = scan([path], Blacklist(t), sni=False)    # GETs only; TLS/QUIC lookups: tests/quic
        df = res.to_pandas()
        for fr, url in zip(df["frame"], df["url"]):
            idx = int(fr) - 1                          # records: 1-based frames; gets: 0-based
            host, uri = gets[idx]
            raw = uri if re.match(rb"[A-Za-z][A-Za-z0-9+.-]*://", uri) else host + uri
            assert url == reference(raw).decode("ascii"), (path, int(idx), raw)
            compared += 1
        assert res.counters["hits"] + res.counters["inactive"] + (~df["hit"]).sum() == res.counters["extracted"]
        miss = df[~df["hit"]]
        # misses are only GETs whose Host was not a usable entry (absolute-form to another host, bad host)
        assert len(miss) <= res.counters["absolute_form"] + len(hosts) - len(t), miss.head()
        assert res.counters["forged_frames"] == 2 * res.counters["hits"]
    assert compared > 0


def _mixed_trace(tmp_path):
    """3 GETs (_trace: evil.test, fine.test, x.evil.test), 2 TLS ClientHellos (SNI evil.test,
    ok.test) and 1 QUIC client Initial (SNI sub.evil.test)."""
    from scapy.utils import rdpcap as _rd

    from tests import pcapbuild
    from tests.quic import hello

    frames = [bytes(p) for p in _rd(_trace(tmp_path))]
    for i, name in enumerate((b"evil.test", b"ok.test")):
        frames.append(hello.frame(hello.records(hello.client_hello(hello.sni_ext(name))), sport=41000 + i))
    ch = hello.client_hello(hello.sni_ext(b"sub.evil.test"), quic=True)
    frames.append(hello.frame(hello.initial(hello.crypto(0, ch), dcid=bytes(range(8))), sport=42000, udp=True))
    path = tmp_path / "mixed.pcap"
    path.write_bytes(pcapbuild.pcap([(1_700_000_000_000_000_000 + i * 1_000_000, f) for i, f in enumerate(frames)]))
    return str(path)


def test_scan_counters_named_for_what_they_count(tmp_path, db, capsys):
    # issue 30: one set of counters; `hits` counted GET and SNI hits together beside "GETs"
    from urlfilter.plot import lookups_title

    tr = _mixed_trace(tmp_path)
    assert main(["scan", tr, "--blacklist", db, "-o", str(tmp_path / "o.csv"), "--json"]) == 0
    c = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    want = dict(get=3, get_lookups=3, extracted=3, get_hits=2, tls_lookups=2, tls_hits=1,
                quic_lookups=1, quic_hits=1, sni_lookups=3, sni_hits=2, lookups=6, hits=4)
    assert {k: c[k] for k in want} == want
    assert main(["scan", tr, "--blacklist", db, "-o", str(tmp_path / "o2.csv")]) == 0
    err = capsys.readouterr().err
    assert ("3 GETs seen, 3 GETs looked up, 2 GET hits; 2 TLS SNIs looked up, 1 TLS SNI hits; "
            "1 QUIC SNIs looked up, 1 QUIC SNI hits; total 6 lookups, 4 hits, ") in err, err
    df = pd.read_csv(tmp_path / "o.csv")
    assert lookups_title(df) == "6 lookups: 3 GETs, 2 TLS SNIs, 1 QUIC SNIs"
