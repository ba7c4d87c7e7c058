"""The abuse analytics' streaming connection table (issue 34; ext/out/abuseconn.pyx): the same
connections and slow-HTTP indicators as the batch computation over every kept TCP event
(httpanalyzer.abuse.connections, whose rules tests/abuse/test_abuse.py works by hand), with
memory bounded by the live connections: nothing per segment, a connection silent for the GC
timeout of capture time leaves the table."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from httpanalyzer import abuse
from tests.conftest import SHARED, require_shared
from tests.pcapbuild import pcap
from tests.quic.hello import frame
from webtap._ext import abuseconn

KEY = ["client_ip", "client_port", "server_ip", "server_port", "start_ts"]
CONN_COLS = ["client_ip", "client_port", "server_ip", "server_port", "start_ts", "end_ts",
             "syn_seen", "closed", "client_bytes", "server_bytes", "client_segments",
             "server_segments", "requests", "first_request_ts", "zero_window_segments",
             "zero_window_s"]
SLOW_COLS = ["wait_s", "trickle_segments", "trickle_rate", "idle_s"] + list(abuse.SLOW_KINDS)


def test_row_dtypes_mirror_the_structs():
    assert abuseconn.sizes() == (abuseconn.CONN_ROW_DTYPE.itemsize, abuseconn.REQ_ROW_DTYPE.itemsize)


REAL = ["suricata-verify/http-protocol-nodup/input.pcap",
        "elcabezzonn-pcaps/aug16_part2.pcap.gz",
        "zeek/http/pipelined-requests.pcap",
        "arkime/http-100-continue.pcap"]


@pytest.mark.parametrize("rel", REAL)
def test_streaming_equals_batch_on_real_traces(rel):
    path = SHARED / "traces" / rel
    require_shared(path)
    # a GC longer than the trace: no connection leaves the table early, so both must agree
    # row for row (the GC's own effect: the next test)
    s = abuse.collect(str(path), gc_timeout=1e7)
    b = abuse.collect(str(path), keep_events=True, gc_timeout=1e7)
    assert len(s.events) == 0 and len(b.events) > 0
    _compare(s, b)


def test_a_connection_silent_past_the_gc_leaves_the_table():
    # aug16_part2: two connections whose last segment (a FIN, a RST) comes 61 and 82 s after
    # the one before: with the 60 s GC each ends before it, and the late segment makes a row of
    # its own (no SYN, no data, closed)
    path = SHARED / "traces" / "elcabezzonn-pcaps" / "aug16_part2.pcap.gz"
    require_shared(path)
    s = abuse.collect(str(path)).conns
    b = abuse.collect(str(path), keep_events=True).conns
    assert len(s) == len(b) + 2
    late = s[(s["client_segments"] + s["server_segments"] == 0) & ~s["syn_seen"] & s["closed"]]
    assert sorted(late["client_port"]) == [49168, 49250]
    assert (late["start_ts"] == late["end_ts"]).all()


def _compare(s, b):
    ka = s.conns.sort_values(KEY, kind="stable").reset_index(drop=True)
    kb = b.conns.sort_values(KEY, kind="stable").reset_index(drop=True)
    assert len(ka) == len(kb)
    for col in CONN_COLS:
        if ka[col].dtype.kind == "f":
            assert np.allclose(ka[col].to_numpy(), kb[col].to_numpy()), col
        else:
            assert ka[col].tolist() == kb[col].tolist(), col
    sa = abuse.slow_http(s).sort_values(KEY, kind="stable").reset_index(drop=True)
    sb = abuse.slow_http(b).sort_values(KEY, kind="stable").reset_index(drop=True)
    for col in SLOW_COLS:
        assert np.allclose(sa[col].to_numpy(float), sb[col].to_numpy(float), equal_nan=True), col
    ra, rb = abuse.rates(s), abuse.rates(b)
    assert ra.to_dict() == rb.to_dict()


def _long_trace(path, conns: int, spacing_s: float):
    """`conns` connections one after another, `spacing_s` apart (each: handshake, a GET, its
    answer, FIN from both sides within 20 ms)."""
    frames = []
    t0 = 1_700_000_000_000_000_000
    for i in range(conns):
        t = t0 + int(i * spacing_s * 1e9)
        sp = 1024 + i % 60000
        cs, ss = 1000 + i, 900000 + i
        req = f"GET /{i} HTTP/1.1\r\nHost: h{i % 50}.test\r\n\r\n".encode()
        resp = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        frames += [
            (t, frame(b"", sport=sp, dport=80, seq=cs, ack=0, flags=0x02)),
            (t + 100_000, _rev(frame(b"", sport=80, dport=sp, seq=ss, ack=cs + 1, flags=0x12))),
            (t + 200_000, frame(b"", sport=sp, dport=80, seq=cs + 1, ack=ss + 1, flags=0x10)),
            (t + 300_000, frame(req, sport=sp, dport=80, seq=cs + 1, ack=ss + 1)),
            (t + 5_000_000, _rev(frame(resp, sport=80, dport=sp, seq=ss + 1, ack=cs + 1 + len(req)))),
            (t + 10_000_000, frame(b"", sport=sp, dport=80, seq=cs + 1 + len(req), ack=ss + 1 + len(resp), flags=0x11)),
            (t + 20_000_000, _rev(frame(b"", sport=80, dport=sp, seq=ss + 1 + len(resp), ack=cs + 2 + len(req), flags=0x11))),
        ]
    path.write_bytes(pcap(frames, nano=True))
    return path


def _rev(fr: bytes) -> bytes:
    """The server's frame: the builder's addresses swapped (10.0.0.2 -> 10.0.0.1), checksums
    left as built (the walk does not check them)."""
    b = bytearray(fr)
    ip = 14
    b[ip + 12:ip + 16], b[ip + 16:ip + 20] = fr[ip + 16:ip + 20], fr[ip + 12:ip + 16]
    return bytes(b)


def test_memory_is_bounded_by_live_connections_not_trace_length(tmp_path):
    # 3000 connections over 3000 s of capture time; each lives 20 ms, then sits in the table
    # until the GC (60 s of silence) takes it: at most ~61 live at once, whatever the length
    path = _long_trace(tmp_path / "long.pcap", 3000, 1.0)
    run = abuse.collect(str(path))
    st = run.table_stats
    assert st["events"] == 3000 * 7
    assert len(run.conns) == 3000 and (run.conns["requests"] == 1).all()
    assert st["peak_live"] <= 62, st
    assert st["capacity"] == 256, st            # the first allocation, never grown
    assert len(run.events) == 0
    # the same trace four times as long (12000 connections): the same bound
    path = _long_trace(tmp_path / "longer.pcap", 12000, 1.0)
    run = abuse.collect(str(path))
    assert len(run.conns) == 12000
    assert run.table_stats["peak_live"] <= 62 and run.table_stats["capacity"] == 256
    # a shorter GC keeps fewer
    run = abuse.collect(str(path), gc_timeout=5.0)
    assert run.table_stats["peak_live"] <= 7


def test_streaming_equals_batch_on_the_long_trace(tmp_path):
    path = _long_trace(tmp_path / "long.pcap", 300, 0.5)
    _compare(abuse.collect(str(path)), abuse.collect(str(path), keep_events=True))
