"""What `pd.read_parquet` gives for webtap's Parquet outputs (issue 30): integer columns that
hold nulls are pandas nullable integers (not float64), durations are timedeltas in both the
HTTP and the TLS records.

The trace is built here (tests/httpanalyzer/compare_traces.py): one answered request, one
request without an answer (status, response_frame, response_ts null), untagged (vlan null)."""
from __future__ import annotations

import pandas as pd
import pyarrow.parquet as pq

from httpanalyzer.cli import main as http_main
from httpanalyzer.tls import cli as tls_cli
from tests.httpanalyzer import compare_traces as ct
from tests.tls import hellobuild as hb
from webtap.cli import main as webtap_main


def _trace(tmp_path):
    out: list = []
    a = ct.Conn(out, ct.T0, 40001)
    a.request("/answered")
    a.response(status=404, reason="Not Found")
    b = ct.Conn(out, ct.T0 + 1, 40002)
    b.request("/no-answer")
    return ct.write(tmp_path / "t.pcap", out)


def test_http_records_read_back_with_nullable_integers(tmp_path):
    out = tmp_path / "r.parquet"
    assert http_main([_trace(tmp_path), "-o", str(out), "--consumers", "0"]) == 0
    df = pd.read_parquet(out).sort_values("request_ts", ignore_index=True)
    assert str(df.status.dtype) == "UInt16" and str(df.vlan.dtype) == "UInt16"
    assert str(df.response_frame.dtype) == "UInt64" and str(df.request_frame.dtype) == "UInt64"
    assert df.status[0] == 404 and df.status[1] is pd.NA
    assert df.vlan.isna().all()
    # frames (tshark's, 1-based): 3 handshake + request = 4, response = 5; the second
    # connection's request is frame 9 (after the first's 5 frames and its own 3 handshake frames)
    assert df.request_frame.tolist() == [4, 9]
    assert df.response_frame[0] == 5 and df.response_frame[1] is pd.NA
    assert df.response_time[0] == pd.Timedelta(10_000_000, "ns")   # Conn.response dt=0.01
    # the Arrow types are unchanged; other readers see them as before
    t = pq.read_table(out)
    assert str(t.schema.field("status").type) == "uint16"


def test_dissect_parquet_nullable_integers(tmp_path):
    out = tmp_path / "d.parquet"
    assert webtap_main(["dissect", _trace(tmp_path), "-o", str(out)]) == 0
    df = pd.read_parquet(out)
    assert str(df.status.dtype) == "UInt16"
    assert df.status.tolist()[:3] == [pd.NA, 404, pd.NA]       # request, response, request


def test_tls_handshake_time_is_a_duration_like_response_time(tmp_path):
    p = tmp_path / "hs.pcap"
    hb.handshake_pcap(p, [{"ch": hb.records(hb.chrome_like(sni=b"a.example")), "sh": hb.records(hb.server_hello(cipher=0x1302, exts=[hb.ext(43, b"\x03\x04")])),
                           "dt_ns": 25_000_000}])
    out = tmp_path / "tls.parquet"
    assert tls_cli([str(p), "-o", str(out)]) == 0
    df = pd.read_parquet(out)
    assert df.handshake_time.dtype == "timedelta64[ns]"
    assert df.handshake_time[0] == pd.Timedelta(25_001_000, "ns")
    assert str(pq.read_table(out).schema.field("handshake_time").type) == "duration[ns]"
    assert str(df.client_port.dtype) == "UInt16"
    csv = tmp_path / "tls.csv"
    assert tls_cli([str(p), "-o", str(csv)]) == 0
    assert pd.read_csv(csv).handshake_time[0] == 0.025001       # seconds, 9 decimals, like HTTP
    assert "0.025001000" in csv.read_text()
