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

from httpanalyzer import records
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
    df = pd.read_json(io.BytesIO(data), lines=True)
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
