"""Handshake records from built captures: pairing (Eq. 2), split ClientHellos (bounded
reassembly), unmatched reasons, bad input counted and bounded."""
from __future__ import annotations

import pandas as pd
import pyarrow.parquet as pq
import pytest

from httpanalyzer import analyze_tls
from httpanalyzer.tls import COLUMNS, TLS_OUT_DTYPE
from tests.tls import hellobuild as hb

ISSUE_COLUMNS = ("client_ip client_port server_ip server_port transport client_hello_ts "
                 "server_hello_ts handshake_time sni alpn client_versions server_version cipher "
                 "ja3 ja3s ja4 ech ch_segments matched unmatched_reason request_frame "
                 "response_frame").split()


def _sh():
    return hb.records(hb.server_hello(cipher=0x1302, exts=[hb.ext(43, b"\x03\x04")]))


def test_record_layout_matches_c():
    from webtap._ext.tls import sizeof_tls_record, tls_out_layout

    assert sizeof_tls_record() == TLS_OUT_DTYPE.itemsize
    layout = tls_out_layout()
    assert list(layout) == list(TLS_OUT_DTYPE.names)
    assert {k: TLS_OUT_DTYPE.fields[k][1] for k in layout} == layout


def test_issue_columns_first():
    assert COLUMNS[:len(ISSUE_COLUMNS)] == ISSUE_COLUMNS


def test_paired_handshake(tmp_path):
    p = tmp_path / "hs.pcap"
    hb.handshake_pcap(p, [{"ch": hb.records(hb.chrome_like(sni=b"a.example")), "sh": _sh(),
                           "dt_ns": 25_000_000}])
    df = analyze_tls(str(p))
    assert len(df) == 1
    r = df.iloc[0]
    assert r.matched and r.sni == "a.example" and r.cipher == "0x1302" and r.server_version == "0x0304"
    assert list(r.alpn) == ["h2", "http/1.1"] and r.ech
    # 1 us after the segment, then 25 ms; a duration in ns like HTTP's response_time (issue 30)
    assert r.handshake_time == pd.Timedelta(25_001_000, "ns")
    assert r.request_frame == 1 and r.response_frame == 2 and r.ch_segments == 1


def test_sni_in_third_segment(tmp_path):
    """A PQ ClientHello split in three segments, extension order putting the SNI last."""
    msg = hb.client_hello(exts=[hb.keyshare_ext([(0x11EC, b"\x01" * 1216)]), hb.ext(21, b"\0" * 900),
                                hb.sni_ext(b"late.example")])
    stream = hb.records(msg)
    p = tmp_path / "split.pcap"
    hb.handshake_pcap(p, [{"ch": stream, "ch_split": [1000, 1000, len(stream) - 2000], "sh": _sh()}])
    c = {}
    df = analyze_tls(str(p), counters=c)
    assert len(df) == 1
    r = df.iloc[0]
    assert r.sni == "late.example" and r.ch_segments == 3 and r.matched
    assert r.request_frame == 1 and r.response_frame == 4
    assert c["split_hello"] == 1 and c["reassembly_started"] == 1


def test_split_hello_that_never_completes(tmp_path):
    stream = hb.records(hb.chrome_like())
    p = tmp_path / "cut.pcap"
    # only the first of two segments is in the capture
    hb.handshake_pcap(p, [{"ch": stream[:1000], "sh": None}])
    c = {}
    df = analyze_tls(str(p), counters=c)
    assert len(df) == 1
    assert not df.iloc[0].matched and df.iloc[0].unmatched_reason == "incomplete"
    assert c["incomplete"] == 1


def test_16mib_hello_is_a_record_with_reason(tmp_path):
    p = tmp_path / "big.pcap"
    bad = b"\x16\x03\x01\x00\x40" + b"\x01\xff\xff\xff\x03\x03" + b"\x00" * 58
    hb.handshake_pcap(p, [{"ch": bad, "sh": None}])
    c = {}
    df = analyze_tls(str(p), counters=c)
    assert list(df.unmatched_reason) == ["too_long"] and c["too_long"] == 1


def test_record_and_handshake_lengths_disagree(tmp_path):
    msg = bytearray(hb.chrome_like(pq=False))
    msg[4 + 2 + 32 + 1 + 32:4 + 2 + 32 + 1 + 32 + 2] = b"\x7f\xf0"    # cipher list past the end
    p = tmp_path / "bad.pcap"
    hb.handshake_pcap(p, [{"ch": hb.records(bytes(msg)), "sh": _sh()}])
    c = {}
    df = analyze_tls(str(p), counters=c)
    assert c["malformed"] == 1
    assert "malformed" in set(df.unmatched_reason)


def test_half_open_handshakes_bounded(tmp_path):
    """10^5 ClientHellos that never get an answer: pending stays under max_pending, the rest
    leave as records with reason cap, every one counted."""
    msg = hb.records(hb.chrome_like(pq=False, sni=b"x.example"))
    conns = [{"ch": msg, "sh": None, "client": (f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}", 1024 + i % 60000)}
             for i in range(100_000)]
    p = tmp_path / "halfopen.pcap"
    hb.handshake_pcap(p, conns)
    c = {}
    df = analyze_tls(str(p), max_pending=1000, counters=c)
    assert len(df) == 100_000
    assert c["peak_pending"] <= 1000
    assert c["evicted_cap"] == 99_000
    assert (df.unmatched_reason == "cap").sum() == 99_000 and (df.unmatched_reason == "end").sum() == 1000


def test_retransmitted_client_hello_counted_once(tmp_path):
    msg = hb.records(hb.chrome_like(pq=False))
    p = tmp_path / "rt.pcap"
    from tests.pcapbuild import pcap

    a = hb.tcp_packet("10.0.0.1", "10.0.0.2", 40000, 443, 100, 900, msg)
    s = hb.tcp_packet("10.0.0.2", "10.0.0.1", 443, 40000, 900, 100 + len(msg), _sh())
    p.write_bytes(pcap([(10**18, a), (10**18 + 10**6, a), (10**18 + 2 * 10**6, s)]))
    c = {}
    df = analyze_tls(str(p), counters=c)
    assert len(df) == 1 and df.iloc[0].matched and df.iloc[0].request_frame == 1
    assert c["client_hello_repeat"] == 1


def test_cli_outputs(tmp_path):
    from httpanalyzer.cli import main

    p = tmp_path / "hs.pcap"
    hb.handshake_pcap(p, [{"ch": hb.records(hb.chrome_like()), "sh": _sh()}])
    for ext in ("csv", "parquet", "txt"):
        assert main(["tls", str(p), "-o", str(tmp_path / f"o.{ext}")]) == 0
    t = pq.read_table(tmp_path / "o.parquet")
    assert t.column_names[:len(ISSUE_COLUMNS)] == ISSUE_COLUMNS and t.num_rows == 1
    assert t["alpn"].to_pylist() == [["h2", "http/1.1"]]
    head = (tmp_path / "o.csv").read_text().splitlines()
    assert head[0].replace('"', "").split(",")[:len(ISSUE_COLUMNS)] == ISSUE_COLUMNS
    assert '"h2,http/1.1"' in head[1]
    assert (tmp_path / "o.txt").read_text().count("\n") == 1
    assert main(["tls", str(tmp_path / "missing.pcap")]) == 1
    assert main(["tls", str(p), "-o", str(tmp_path / "o.xls")]) == 2
    assert main(["tls", str(p), "-f", "not a filter ((("]) == 2


def test_many_extensions_clip_text_not_records(tmp_path):
    """A ClientHello with 400 extensions: the extensions text is clipped at its width (flagged),
    the record and its JA3/JA4 are whole (found on a synthetic capture, which crashed the
    list column with an empty element)."""
    exts = [hb.sni_ext(b"many.example")] + [hb.ext(1000 + i, b"") for i in range(400)]
    p = tmp_path / "many.pcap"
    hb.handshake_pcap(p, [{"ch": hb.records(hb.client_hello(exts=exts)), "sh": _sh()}])
    df = analyze_tls(str(p))
    r = df.iloc[0]
    assert r.sni == "many.example" and r.text_clipped and r.matched
    assert 0 < len(r.extensions) < 401 and list(r.extensions[:3]) == [0, 1000, 1001]
    assert r.ja4.startswith("t12d0299")


def test_parquet_records_without_pandas(tmp_path):
    """`httpanalyzer tls -o X.parquet` builds its Arrow columns from buffers: pyarrow 26 imports
    pandas (~0.2 s) on the first pa.array / pa.scalar / to_numpy, and nothing here needs it."""
    import subprocess
    import sys

    p = tmp_path / "hs.pcap"
    hb.handshake_pcap(p, [{"ch": hb.records(hb.chrome_like(sni=b"a.example")), "sh": _sh()},
                          {"ch": hb.records(hb.chrome_like(sni=b"b.example")), "sh": None}])
    out = tmp_path / "o.parquet"
    code = ("import sys; from httpanalyzer.cli import main; rc = main(['tls', sys.argv[1], '-o', "
            "sys.argv[2]]); print(rc, 'pandas' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code, str(p), str(out)], capture_output=True, text=True)
    assert r.stdout.split() == ["0", "False"], r.stderr[-2000:]
    t = pq.read_table(out)
    assert t.num_rows == 2 and t["sni"].to_pylist() == ["a.example", "b.example"]
    assert t["matched"].to_pylist() == [True, False] and t["unmatched_reason"].to_pylist() == [None, "end"]
