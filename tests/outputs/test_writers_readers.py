"""JSON lines and Zeek logs read back by their readers (pandas, zat) on every shared trace, and
the outputs of the command line (-o OUT.jsonl / OUT.log / OUT.parquet) against each other."""
from __future__ import annotations

import io
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from webtap.records import http as records
from httpanalyzer.zeek import FROM_RECORD, HTTP_FIELDS, http_log_view
from webtap.jsonl import JsonLinesWriter
from webtap.zeeklog import ZeekLogWriter

HEADERS = ["Referer", "Content-Type", "Server"]


def _write(writer_cls, table, view=None) -> bytes:
    buf = io.BytesIO()
    w = writer_cls(buf)
    for b in table.to_batches(max_chunksize=5000):
        w.write(view(b) if view else b)
    w.close({})
    return buf.getvalue()


def _values(table: pa.Table, name: str) -> list:
    """A column as Python values: timestamps/durations as int ns."""
    col = table.column(name)
    if pa.types.is_timestamp(col.type) or pa.types.is_duration(col.type):
        col = col.cast(pa.int64())
    return col.to_pylist()


def _na(v) -> bool:
    return v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA or v is pd.NaT


def test_jsonl_read_back_by_pandas_is_the_parquet_records(shared_records, tmp_path):
    t = shared_records
    data = _write(JsonLinesWriter, t)
    assert data.count(b"\n") == t.num_rows
    # as documented (README): pandas would read the versions "1.1", "1.0" as numbers
    df = pd.read_json(io.BytesIO(data), lines=True, dtype={"http_version": "string"})
    assert list(df.columns) == t.column_names
    assert len(df) == t.num_rows
    for name in t.column_names:
        want = _values(t, name)
        got = df[name].tolist()
        typ = t.schema.field(name).type
        if pa.types.is_timestamp(typ):
            conv = pd.to_datetime(df[name], utc=True)
            got = [None if _na(v) else v.value for v in conv]
        elif pa.types.is_duration(typ):
            got = [None if _na(v) else int(round(v * 1e9)) for v in got]
        else:
            got = [None if _na(v) else v for v in got]
        if pa.types.is_integer(typ):
            got = [None if v is None else int(v) for v in got]
        bad = [(i, w, g) for i, (w, g) in enumerate(zip(want, got)) if w != g]
        assert not bad, (name, bad[:5])


def test_jsonl_escaping_of_every_control_character():
    text = "".join(chr(c) for c in range(32)) + '"\\\u2028é\x7f'
    t = pa.table({"s": pa.array([text, None, ""]), "n": pa.array([1, None, 3], pa.uint16())})
    data = _write(JsonLinesWriter, t)
    df = pd.read_json(io.BytesIO(data), lines=True, dtype=False)
    assert df["s"][0] == text and _na(df["s"][1]) and df["s"][2] == ""
    assert data.count(b"\n") == 3


_UNESC = re.compile(r"\\x([0-9a-f]{2})")


def _zeek_text(v):
    """A zat text value back to the record's text (Zeek's \\xNN escapes, (empty))."""
    if _na(v):
        return None
    v = str(v)
    return "" if v == "(empty)" else _UNESC.sub(lambda m: chr(int(m.group(1), 16)), v)


# pandas' CSV reader (zat) also reads these texts as missing values
_PANDAS_NA = {"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
              "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"}


def test_zeek_log_read_back_by_zat(shared_records, tmp_path):
    from zat.log_to_dataframe import LogToDataFrame
    from zat.zeek_log_reader import ZeekLogReader

    t = shared_records
    data = _write(ZeekLogWriter, t, http_log_view)
    path = tmp_path / "http.log"
    path.write_bytes(data)
    lines = data.decode().split("\n")
    assert lines[0] == "#separator \\x09"
    assert [ln.split("\t")[0] for ln in lines[1:8]] == [
        "#set_separator", "#empty_field", "#unset_field", "#path", "#open", "#fields", "#types"]
    assert lines[4] == "#path\thttp" and lines[-2].startswith("#close\t") and lines[-1] == ""
    fields = lines[6].split("\t")[1:]
    assert fields[:len(HTTP_FIELDS)] == [n for n, _ in HTTP_FIELDS]
    rows = [ln for ln in lines if ln and not ln.startswith("#")]
    assert len(rows) == t.num_rows
    assert all(r.count("\t") == len(fields) - 1 for r in rows)      # zeek-cut's assumption

    df = LogToDataFrame().create_dataframe(str(path), ts_index=False)
    assert len(df) == t.num_rows
    for zname, rname in FROM_RECORD.items():
        if rname not in t.column_names:
            assert df[zname].isna().all()
            continue
        want = _values(t, rname)
        got = df[zname].tolist()
        for i, (w, g) in enumerate(zip(want, got)):
            if isinstance(w, str):
                g = _zeek_text(g)
                if zname in ("referrer", "origin") and w == "":
                    w = None                              # absent header: unset, as in Zeek
                if g is None and w is not None and w in _PANDAS_NA:
                    continue
            else:
                g = None if _na(g) else int(g)
            assert w == g, (zname, i, w, g)
    ts = _values(t, "request_ts")
    ts = [a if a is not None else b for a, b in zip(ts, _values(t, "response_ts"))]
    zts = df["ts"].astype("int64").tolist()
    assert max(abs(a - b) for a, b in zip(ts, zts)) < 1000             # 6 decimals, as Zeek
    rt = _values(t, "response_time")
    zrt = df["response_time"].tolist()
    assert all((a is None) == _na(b) for a, b in zip(rt, zrt))
    assert max(abs(a - b.value) for a, b in zip(rt, zrt) if a is not None) < 1000
    assert df["community_id"].astype(str).tolist() == t.column("community_id").to_pylist()
    # zat's streaming reader sees the same rows
    n = sum(1 for _ in ZeekLogReader(str(path)).readrows())
    assert n == t.num_rows


def test_zeek_escaping():
    from webtap.zeeklog import escape

    got = escape(pa.array(["a\tb", "-", "(empty)", "", "x\\y#\"", "\n\x7f", None])).to_pylist()
    assert got == ["a\\x09b", "\\x2d", "\\x28empty)", "(empty)", "x\\x5cy\\x23\\x22",
                   "\\x0a\\x7f", None]


def _cli(*args):
    p = subprocess.run([sys.executable, "-m", "httpanalyzer.cli", *args], capture_output=True)
    assert p.returncode == 0, p.stderr.decode()[-2000:]


def test_command_line_outputs_agree(traces_dir, tmp_path):
    import pyarrow.parquet as pq
    from zat.log_to_dataframe import LogToDataFrame

    trace = traces_dir / "chrissanders-packets"
    files = sorted(str(p) for p in trace.iterdir())[:8]
    outs = {ext: tmp_path / f"out.{ext}" for ext in ("parquet", "jsonl", "log")}
    for p in outs.values():
        _cli(*files, "--consumers", "0", "--headers", ",".join(HEADERS), "-o", str(p))
    t = pq.read_table(outs["parquet"])
    assert t.schema.names == records.schema_for(HEADERS).names and t.num_rows > 30
    j = pd.read_json(outs["jsonl"], lines=True)
    assert len(j) == t.num_rows
    assert j["community_id"].tolist() == t.column("community_id").to_pylist()
    assert [None if _na(v) else v for v in j["response_server"]] == t.column("response_server").to_pylist()
    z = LogToDataFrame().create_dataframe(str(outs["log"]), ts_index=False)
    assert len(z) == t.num_rows
    ref = [None if v == "" else v for v in t.column("request_referer").to_pylist()]
    assert [_zeek_text(v) for v in z["referrer"]] == ref
    assert sum(v is not None for v in ref) > 5


def test_empty_zeek_log_has_its_header(traces_dir, tmp_path):
    out = tmp_path / "none.log"
    _cli(str(traces_dir / "tcpdump" / "accecn_handshake.pcap"), "--consumers", "0",
         "-f", "port 1", "-o", str(out))
    lines = out.read_text().split("\n")
    assert lines[6].split("\t")[1:4] == ["ts", "uid", "id.orig_h"]
    assert lines[8].startswith("#close")


def _tls_batch() -> pa.RecordBatch:
    """Records with the TLS records' columns (httpanalyzer.tls.SCHEMA's names and types)."""
    ts = pa.timestamp("ns", tz="UTC")
    return pa.record_batch({
        "client_ip": ["10.0.0.1", "2001:db8::1", "10.0.0.3"],
        "client_port": pa.array([50000, 50001, 50002], pa.uint16()),
        "server_ip": ["10.0.0.2", "2001:db8::2", "10.0.0.4"],
        "server_port": pa.array([443, 443, 8443], pa.uint16()),
        "transport": ["tcp", "quic", "tcp"],
        "client_hello_ts": pa.array([1_700_000_000_123_456_789, 1_700_000_001_000_000_000, None], ts),
        "server_hello_ts": pa.array([1_700_000_000_223_456_789, None, 1_700_000_002_500_000_000], ts),
        "sni": ["example.com", "quic.example", None],
        "alpn": pa.array([["h2", "http/1.1"], ["h3"], None], pa.list_(pa.string())),
        "server_version": ["0x0304", None, "0x7f1c"],
        "cipher": ["0x1301", None, "0xc02f"],
        "ja3": ["a" * 32, "b" * 32, None], "ja3s": ["c" * 32, None, "d" * 32],
        "ja4": ["t13d1516h2_8daaf6152771_b0da82dd1658", "q13d0310h3_55b375c5d22e_cd85d2d88918", None],
        "extensions": pa.array([[0, 16, 43], [], None], pa.list_(pa.uint16())),
        "matched": [True, False, False],
    })


def test_tls_records_as_zeek_ssl_log(tmp_path):
    from zat.log_to_dataframe import LogToDataFrame

    from httpanalyzer.zeek import CIPHER_SUITES, SSL_FIELDS, ssl_log_view

    b = _tls_batch()
    path = tmp_path / "ssl.log"
    path.write_bytes(_write(ZeekLogWriter, pa.Table.from_batches([b]), ssl_log_view))
    text = path.read_text()
    assert "#path\tssl\n" in text
    df = LogToDataFrame().create_dataframe(str(path), ts_index=False)
    assert list(df.columns[:len(SSL_FIELDS)]) == [n for n, _ in SSL_FIELDS]
    assert df["server_name"].tolist()[:2] == ["example.com", "quic.example"] and _na(df["server_name"][2])
    assert df["version"].tolist()[0] == "TLSv13" and df["version"].tolist()[2] == "unknown-32540"
    assert df["cipher"].tolist()[0] == "TLS_AES_128_GCM_SHA256"
    assert df["cipher"].tolist()[2] == "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
    assert df["ja4"][1] == "q13d0310h3_55b375c5d22e_cd85d2d88918" and df["ja3s"][2] == "d" * 32
    want_ts = [1_700_000_000_123_456_000, 1_700_000_001_000_000_000, 1_700_000_002_500_000_000]
    assert all(abs(a - b) < 1000 for a, b in zip(df["ts"].astype("int64"), want_ts))   # float s
    assert df["alpn"].tolist()[:2] == ["h2,http/1.1", "h3"] and df["extensions"][1] == "(empty)"
    # the IANA names are the registry's (scapy carries the registry)
    from scapy.layers.tls.crypto.suites import _tls_cipher_suites

    assert {k: v for k, v in CIPHER_SUITES.items()} == {k: _tls_cipher_suites[k] for k in CIPHER_SUITES}
    # and JSON lines carry the lists as arrays
    from webtap.jsonl import format_jsonl

    j = pd.read_json(io.BytesIO(format_jsonl(b)), lines=True)
    assert j["alpn"].tolist()[:2] == [["h2", "http/1.1"], ["h3"]] and j["extensions"][0] == [0, 16, 43]


def test_tls_command_writes_ssl_log_and_jsonl(tmp_path):
    """`httpanalyzer tls TRACE -o OUT.log|OUT.jsonl` on a real capture: zat reads Zeek's ssl.log
    (server_name, version, cipher, ja3/ja4 by the record), pandas reads the JSON lines, and both
    carry the same handshakes as the Parquet output."""
    import pyarrow.parquet as pq
    from zat.log_to_dataframe import LogToDataFrame

    from httpanalyzer.zeek import SSL_FIELDS
    from tests.conftest import SHARED

    trace = SHARED / "traces-tls" / "pcapplusplus" / "ExamplesTest_pcap_examples_tls2.pcap"
    if not trace.exists():
        pytest.skip(f"shared data absent: {trace}")
    outs = {ext: tmp_path / f"tls.{ext}" for ext in ("parquet", "jsonl", "log")}
    for p in outs.values():
        _cli("tls", str(trace), "-o", str(p))
    t = pq.read_table(outs["parquet"])
    assert t.num_rows > 100
    z = LogToDataFrame().create_dataframe(str(outs["log"]), ts_index=False)
    assert list(z.columns[:len(SSL_FIELDS)]) == [n for n, _ in SSL_FIELDS] and len(z) == t.num_rows
    sni = [None if v is None else v for v in t.column("sni").to_pylist()]
    assert [None if _na(v) else v for v in z["server_name"]] == sni
    assert [None if _na(v) else v for v in z["ja4"]] == t.column("ja4").to_pylist()
    assert z["community_id"].tolist() == t.column("community_id").to_pylist()
    j = pd.read_json(outs["jsonl"], lines=True)
    assert len(j) == t.num_rows and j["community_id"].tolist() == t.column("community_id").to_pylist()
