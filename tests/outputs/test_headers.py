"""Chosen headers (`headers=[...]` / `--headers`): the rules on built packets, and the same
values whichever way the records are made (one process, feeder consumers, Dask chunks)."""
from __future__ import annotations

import pyarrow as pa
import pytest

from httpanalyzer import analyze
from webtap.records import http as records
from httpanalyzer.pairing import Pairer

scapy = pytest.importorskip("scapy.all")


def _pcap(tmp_path, segments, name="h.pcap"):
    """segments: (client->server?, seq, ack, payload) over one TCP connection, 1 ms apart."""
    from scapy.all import IP, TCP, Ether, wrpcap

    pkts = []
    for i, (up, seq, ack, pay) in enumerate(segments):
        ip = IP(src="10.0.0.1", dst="10.0.0.2") if up else IP(src="10.0.0.2", dst="10.0.0.1")
        tcp = TCP(sport=40000, dport=80, seq=seq, ack=ack, flags="PA") if up else \
            TCP(sport=80, dport=40000, seq=seq, ack=ack, flags="PA")
        p = Ether() / ip / tcp / pay
        p.time = 1_700_000_000 + i / 1000
        pkts.append(p)
    path = tmp_path / name
    wrpcap(str(path), pkts)
    return path


def test_values_absent_repeated_case_and_incomplete(tmp_path):
    req = (b"GET /a HTTP/1.1\r\nHost: x\r\nreferer:  http://r/ \t\r\nREFERER: second\r\n"
           b"X-Empty:\r\nAccept: */*\r\n\r\n")
    resp = b"HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Type: text/html; charset=utf-8\r\nX-Cut: par"
    path = _pcap(tmp_path, [(True, 1000, 5000, req), (False, 5000, 1000 + len(req), resp),
                            (True, 9000, 7777, b"GET /lonely HTTP/1.1\r\nHost: y\r\n")])
    df = analyze(str(path), consumers=0,
                 headers=["Referer", "Content-Type", "Server", "X-Empty", "X-Cut", "Accept"])
    paired = df[df.matched].iloc[0]
    assert paired.request_referer == "http://r/"               # first occurrence, trimmed
    assert paired.response_referer == ""                       # absent: empty
    assert paired.response_content_type == "text/html; charset=utf-8"
    assert paired.request_content_type == ""
    assert paired.response_server == "nginx"
    assert paired.request_x_empty == ""
    assert paired.response_x_cut == "par"                      # cut by the packet's end
    assert paired.request_accept == "*/*"
    assert not paired.request_headers_incomplete
    assert paired.response_headers_incomplete
    lonely = df[df.uri == "/lonely"].iloc[0]
    assert lonely.request_headers_incomplete                   # no empty line in the packet
    assert pd_isna(lonely.response_server) and pd_isna(lonely.response_headers_incomplete)
    assert lonely.request_server == ""
    assert list(df.columns[-14:]) == records.header_column_names(
        ["Referer", "Content-Type", "Server", "X-Empty", "X-Cut", "Accept"])


def pd_isna(v):
    import pandas as pd

    return pd.isna(v)


def test_block_ends_at_a_line_without_colon_and_long_values_are_clipped(tmp_path):
    long = b"v" * 5000
    req = b"GET / HTTP/1.1\r\nHost: x\r\nbroken line\r\nReferer: after\r\n\r\n"
    resp = b"HTTP/1.1 200 OK\r\nLocation: " + long + b"\r\n\r\n"
    path = _pcap(tmp_path, [(True, 1, 2, req), (False, 2, 1 + len(req), resp)])
    df = analyze(str(path), consumers=0, headers=["Referer", "Location"])
    r = df.iloc[0]
    assert r.request_referer == ""
    assert len(r.response_location) == 4096 and r.text_clipped     # MAX_XVALUE, flagged


def test_bad_header_lists():
    for bad in (["a b"], ["Referer", "referer"], ["ts"], ["frame"], [""], ["x:y"]):
        with pytest.raises(ValueError):
            Pairer(headers=bad)
    with pytest.raises(ValueError):
        Pairer(headers=[f"h{i}" for i in range(65)])


def test_no_headers_keeps_the_schema(tmp_path):
    path = _pcap(tmp_path, [(True, 1, 2, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")])
    df = analyze(str(path), consumers=0)
    assert list(df.columns) == records.SCHEMA.names


def _sorted(table: pa.Table) -> pa.Table:
    keys = [("request_frame", "ascending"), ("response_frame", "ascending")]
    return table.sort_by(keys)


def test_same_values_in_feeder_consumers_and_dask_chunks(jumpy, tmp_path):
    """The header values go with waiting messages into the table's arena, out of a chunk's
    table (export_pending) into the next (import_pending): the records are the same."""
    import pyarrow.dataset as ds

    from httpanalyzer import distributed, iter_record_batches

    names = ["Referer", "Content-Type", "Server", "Location", "Cookie"]
    one = _sorted(pa.Table.from_batches(list(iter_record_batches(str(jumpy), consumers=0,
                                                                headers=names))))
    assert one.num_rows > 5000
    assert pa.compute.sum(pa.compute.not_equal(one.column("response_content_type"), "")).as_py() > 1000
    fed = _sorted(pa.Table.from_batches(list(iter_record_batches(str(jumpy), consumers=2,
                                                                headers=names))))
    assert fed.equals(one)
    out = tmp_path / "ds"
    distributed.run([str(jumpy)], str(out), chunk_packets=20_000, headers=names, gc_timeout=60)
    t = ds.dataset(str(out), format="parquet", partitioning="hive").to_table()
    t = _sorted(t.drop_columns(["chunk"]).select(one.schema.names).cast(one.schema))
    assert t.equals(one)
