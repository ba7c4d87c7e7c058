"""The HTTP version of a record (issue 30): the digits after "HTTP/" of the request line, of the
status line when the record has no request, null when the token is not HTTP/d.d or the request
line has no end in its packet. It travels numerically (TxnRecord.http_version) through the
pairing table's waiting entries, the feeder's consumers and the Dask repair, and fills Zeek's
http.log `version` (Zeek writes the token after "HTTP/", e.g. 1.1)."""
from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds

from httpanalyzer import distributed, iter_record_batches
from httpanalyzer.cli import main as http_main
from tests.httpanalyzer import compare_traces as ct
from tests.outputs.test_zeek_fields import read_log, zat


class _Conn(ct.Conn):
    def send(self, side, text: bytes, dt=0.001):
        if side == "c":
            self._pkt("c", "PA", text, self.cseq, self.sseq, dt)
            self.cseq += len(text)
        else:
            self._pkt("s", "PA", text, self.sseq, self.cseq, dt)
            self.sseq += len(text)


def _req(target: str, version: str) -> bytes:
    return f"GET {target} {version}\r\nHost: example.com\r\n\r\n".encode()


def _resp(version: str, status=200) -> bytes:
    return f"{version} {status} X\r\nContent-Length: 0\r\n\r\n".encode()


#: client port -> (what the client sends, what the server sends, the expected http_version)
CASES = {
    40001: (_req("/a", "HTTP/1.0"), _resp("HTTP/1.0"), "1.0"),
    40002: (_req("/b", "HTTP/1.1"), _resp("HTTP/1.0"), "1.1"),    # the request line's version
    40003: (None, _resp("HTTP/1.1", 404), "1.1"),                  # response only: status line's
    40004: (_req("/d", "HTTP/1.0"), None, "1.0"),                  # request only
    40005: (_req("/e", "HTTP/11"), _resp("HTTP/1.1"), None),       # not HTTP/d.d: unknown
    40006: (b"GET /f HTTP/1.1", _resp("HTTP/1.1"), None),          # request line without its end
    40007: (None, _resp("HTTP/1.1x"), None),                       # response only, bad token
}


def _trace(tmp_path) -> str:
    out: list = []
    for i, (port, (req, resp, _)) in enumerate(CASES.items()):
        c = _Conn(out, ct.T0 + i, port)
        if req is not None:
            c.send("c", req)
        if resp is not None:
            c.send("s", resp)
    return ct.write(tmp_path / "versions.pcap", sorted(out, key=lambda p: p.time))


def _by_port(table: pa.Table) -> dict:
    return dict(zip(table.column("client_port").to_pylist(), table.column("http_version").to_pylist()))


def _sorted(t: pa.Table) -> pa.Table:
    return t.sort_by([("client_port", "ascending")])


def test_http_version_values_and_consumers(tmp_path):
    path = _trace(tmp_path)
    one = pa.Table.from_batches(list(iter_record_batches(path, consumers=0)))
    assert one.schema.field("http_version").type == pa.string()
    assert _by_port(one) == {p: v for p, (_, _, v) in CASES.items()}
    assert dict(zip(one.column("client_port").to_pylist(), one.column("outcome").to_pylist()))[40003] \
        == "response_only"
    fed = pa.Table.from_batches(list(iter_record_batches(path, consumers=2)))
    assert _sorted(fed).column("http_version").equals(_sorted(one).column("http_version"))
    assert _sorted(fed).equals(_sorted(one))


def test_http_version_over_dask_chunk_boundaries(tmp_path):
    """Chunks of 3 packets: requests wait at a chunk's end and pair in the next chunk's table
    (export_pending / import_pending carry the entry's version)."""
    path = _trace(tmp_path)
    one = _sorted(pa.Table.from_batches(list(iter_record_batches(path, consumers=0))))
    out = tmp_path / "ds"
    distributed.run([path], str(out), chunk_packets=3, gc_timeout=60)
    t = ds.dataset(str(out), format="parquet", partitioning="hive").to_table()
    t = _sorted(t.drop_columns(["chunk"]).select(one.schema.names).cast(one.schema))
    assert t.column("http_version").equals(one.column("http_version"))
    assert t.equals(one)


def test_http_log_version_read_back_with_zat(tmp_path):
    log = tmp_path / "http.log"
    assert http_main([_trace(tmp_path), "-o", str(log), "--consumers", "0"]) == 0
    fields, types, rows = read_log(log)
    assert types[fields.index("version")] == "string"
    assert "http_version" not in fields            # it is Zeek's `version`, not a column of its own
    want = {str(p): (v if v is not None else "-") for p, (_, _, v) in CASES.items()}
    assert {r["id.orig_p"]: r["version"] for r in rows} == want
    df = zat(log)
    # zat reads a Zeek `string` column as a pandas category whose categories pandas infers: the
    # versions come back as the numbers 1.0 and 1.1 (as from a log Zeek wrote), unset as NaN
    got = {int(p): (None if pd.isna(v) else str(v)) for p, v in zip(df["id.orig_p"], df["version"])}
    assert got == {p: v for p, (_, _, v) in CASES.items()}
