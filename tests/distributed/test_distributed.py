"""httpanalyzer.distributed: chunked analysis on Dask equals the one-process analyze() exactly.

Equality is the multiset of records, paired and unmatched, every column. The sweeps run the
tasks in this process (scheduler=None: the very functions the workers run, one after the
other); the cluster tests start a real LocalCluster of worker processes, and one of them kills
a worker in the middle of a run. Chunks of a few packets force a boundary every few packets;
a small GC timeout puts checkpoints inside chunks, so the replay-and-compare path and the
seeded re-run are both exercised (the tests assert they were).
"""
from __future__ import annotations

import os
import pathlib
import shutil
import signal
from collections import Counter

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

import httpanalyzer
from httpanalyzer import distributed as D
from webtap.records import http as records
from httpanalyzer.stream import Summary
from tests.conftest import TRACES, shared_trace_files
from webtap.capture import Batch, open_trace, write_pcap
from webtap._ext.pairing import PairingTable


def multiset(df: pd.DataFrame) -> Counter:
    df = df.drop(columns=[c for c in ("chunk",) if c in df.columns])
    return Counter(map(tuple, df.astype(str).values.tolist()))


def loose(df: pd.DataFrame) -> Counter:
    """Multiset of rows read by another library (its own dtypes): nulls as None, integral
    floats as ints, timestamps as ns integers, categories as their values."""
    df = df.drop(columns=[c for c in ("chunk",) if c in df.columns])
    cols = {}
    for c in df.columns:
        s = df[c]
        if isinstance(s.dtype, pd.CategoricalDtype):
            s = s.astype(object)
        if pd.api.types.is_datetime64_any_dtype(s.dtype) or pd.api.types.is_timedelta64_dtype(s.dtype):
            v = [None if pd.isna(x) else int(x.value) for x in s]
        else:
            v = [None if (x is None or (not isinstance(x, str) and pd.isna(x))) else
                 (int(x) if isinstance(x, (float, np.floating)) and float(x).is_integer() else
                  (bool(x) if isinstance(x, (bool, np.bool_)) else
                   (int(x) if isinstance(x, (np.integer,)) else x))) for x in s]
        cols[c] = v
    return Counter(zip(*cols.values()))


def _sorted(t: pa.Table) -> pa.Table:
    t = t.drop_columns([c for c in ("chunk",) if c in t.column_names]).cast(records.SCHEMA)
    return t.sort_by([(c, "ascending") for c in t.column_names])


def same(paths, tmp, reference=None, **kw):
    """Run both ways and compare every column of every record, as a multiset (both sorted on
    all columns). reference: the one-process (Arrow table, Summary) if already known.
    Returns (distributed result, one-process records as a DataFrame)."""
    if reference is None:
        s = Summary()
        ref = pa.Table.from_batches(list(httpanalyzer.iter_record_batches(
            paths, summary=s, gc_timeout=kw.get("gc_timeout", 60.0), bpf=kw.get("bpf"))),
            schema=records.SCHEMA)
    else:
        ref, s = reference
    out = str(tmp / f"ds{len(list(tmp.iterdir()))}")
    res = D.run(paths, out, **kw)
    got = ds.dataset(out, format="parquet", partitioning="hive").to_table()
    assert got.num_rows == ref.num_rows, (paths, kw)
    assert _sorted(got).equals(_sorted(ref)), (paths, kw)
    for k in ("messages", "paired", "paired_after_interim", "request_repeat",
              "response_repeat", "request_unmatched_gc", "response_unmatched_gc",
              "request_unmatched_end", "response_unmatched_end", "clock_reset",
              "final_response_missing"):
        assert res.summary.pairing.get(k, 0) == s.pairing[k], (k, paths, kw)
    assert res.summary.source["packets"] == s.source["packets"]
    assert res.summary.dissect == s.dissect
    assert res.summary.source == s.source
    assert sorted(res.summary.warnings) == sorted(s.warnings)
    assert res.summary.unreadable == s.unreadable
    return res, records.to_pandas(ref)


@pytest.fixture(scope="module")
def traces():
    files = shared_trace_files()
    if not files:
        pytest.skip(f"shared traces absent: {TRACES}")
    return files


@pytest.mark.parametrize("part", range(3))
def test_every_shared_trace(traces, tmp_path, part):
    """Every shared trace (pcap, pcapng, gzip'd, damaged; a third per test so that xdist
    spreads them): ~6 chunks each, and chunks of 3 packets on every trace small enough for
    that to stay quick."""
    tiny = 0
    mine = traces[part::3]
    for k, p in enumerate(mine):
        s = Summary()
        ref = pa.Table.from_batches(list(httpanalyzer.iter_record_batches([p], summary=s)),
                                    schema=records.SCHEMA)
        n = s.packets
        same([p], tmp_path, reference=(ref, s), chunk_packets=max(1, n // 6 + 1))
        if 0 < n <= 200:
            res, _ = same([p], tmp_path, reference=(ref, s), chunk_packets=3)
            tiny += res.chunks > 1
        if k % 20 == 19:
            shutil.rmtree(tmp_path)
            tmp_path.mkdir()
    assert tiny > 10


@pytest.mark.parametrize("chunk_packets,gc", [(1013, 60.0), (5000, 60.0), (1500, 0.5), (40000, 2.0)])
def test_clock_jumps(jumpy, tmp_path, chunk_packets, gc):
    res, ref = same([str(jumpy)], tmp_path, chunk_packets=chunk_packets, gc_timeout=gc)
    assert res.chunks > 3 and res.boundaries_replayed > 0
    assert (ref.unmatched_reason == "clock_reset").any() and (ref.unmatched_reason == "gc").any()


def test_bpf_filter(jumpy, tmp_path):
    """With a BPF filter the batches (and the clock advances at their ends) are those of the
    filtered packets, in both runs."""
    res, ref = same([str(jumpy)], tmp_path, chunk_packets=2500, gc_timeout=1.0,
                    bpf="tcp port 80 or tcp port 8080")
    assert res.summary.source["bpf_rejected"] > 1000 and len(ref) > 1000


def test_checkpoints_and_reruns_are_exercised(jumpy, tmp_path):
    """With a short GC window most chunks reach their checkpoint: the replayed table must equal
    the chunk's own there (accepted), and some boundaries cannot (clock going back over them)."""
    res, _ = same([str(jumpy)], tmp_path, chunk_packets=800, gc_timeout=0.2)
    assert res.boundaries_replayed > 10
    assert res.reruns_clock >= 1        # the concatenation's clock runs back at file borders
    accepted = res.boundaries_replayed - res.reruns
    assert accepted > 20
    # two windows are enough for the tables to agree again (responses whose request was carried
    # over outlive the first window in the chunk's own table)
    assert res.reruns_mismatch <= res.boundaries_replayed // 10


def _split(src: pathlib.Path, dst: pathlib.Path, parts: int) -> list[str]:
    """One capture cut into `parts` consecutive files (a rotating capture)."""
    with open_trace(src) as t:
        batches = list(t)
        lt = t.interfaces[0][0]
    n = sum(len(b) for b in batches)
    edges = np.linspace(0, n, parts + 1).astype(int)
    files = []
    for k in range(parts):
        sel, pos = [], 0
        for b in batches:
            idx = np.arange(pos, pos + len(b))
            m = (idx >= edges[k]) & (idx < edges[k + 1])
            if m.any():
                sel.append(Batch(b.packets[m], b.data, b.source))
            pos += len(b)
        f = dst / f"part{k}.pcap"
        write_pcap(f, sel, linktype=lt)
        files.append(str(f))
    return files


def test_folder_of_consecutive_traces(traces, tmp_path):
    """A folder of consecutive files, given out of order: one stream in capture-time order, as
    the one-process CLI reads several traces (trace numbers follow the command line)."""
    src = next(p for p in traces if p.name == "blackholev2.pcap")
    d = tmp_path / "folder"
    d.mkdir()
    files = _split(src, d, 4)
    order = [files[2], files[0], files[3], files[1]]
    for cp in (7, 600, None):
        res, ref = same(order, tmp_path, chunk_packets=cp)
        assert ref.request_trace.nunique() > 1
    # a gzip'd trace is one chunk (it cannot be entered in the middle)
    gz = next(p for p in traces if p.name.endswith(".pcap.gz"))
    res, _ = same([str(gz)], tmp_path, chunk_packets=5)
    assert res.chunks == 1


def test_folder_ending_with_a_trace_without_http(traces, tmp_path):
    """The trace latest in time has no HTTP: its packets do not move the capture clock, in one
    process as in the chunks, so the records are still those of one process."""
    src = next(p for p in traces if p.name == "blackholev2.pcap")
    quiet = next(p for p in traces if p.name == "telegram.pcap")
    d = tmp_path / "folder"
    d.mkdir()
    files = _split(src, d, 3)
    with open_trace(src) as t:
        end = max(int(b.packets["ts_ns"].max()) for b in t)
    with open_trace(quiet) as t:
        bs = list(t)
    shift = end - min(int(b.packets["ts_ns"].min()) for b in bs) + 10**9
    moved = []
    for b in bs:
        pk = b.packets.copy()
        pk["ts_ns"] += shift
        moved.append(Batch(pk, b.data, b.source))
    later = d / "later.pcap"
    write_pcap(later, moved, linktype=1)
    for cp, gc in ((50, 60.0), (50, 0.3), (50, 0.01)):
        res, ref = same([str(later)] + files, tmp_path, chunk_packets=cp, gc_timeout=gc)
        assert res.summary.source["packets"] > sum(len(b) for b in bs)


def test_overlapping_traces_are_refused(traces, tmp_path):
    a = next(p for p in traces if p.name == "blackholev2.pcap")
    d = tmp_path / "f"
    d.mkdir()
    files = _split(a, d, 2)
    with pytest.raises(D.OverlappingTraces):
        D.run([files[0], files[1], files[0]], str(tmp_path / "o"))
    assert not (tmp_path / "o").exists()        # no partial dataset


def test_table_hand_over_roundtrip(jumpy):
    """export_pending/import_pending keep every waiting entry, in order, with its text."""
    from httpanalyzer.pairing import Pairer
    from webtap.stream import messages

    p = Pairer(gc_timeout=3600)
    for _, mb in messages(str(jumpy)):
        # in slices: how many wait at a batch's end depends on where the batch ends
        for i in range(0, len(mb.msgs), 50):
            p.feed(mb.msgs[i:i + 50], mb.data)
            if p.pending > 200:
                break
        if p.pending > 200:
            break
    st = p.table.export_pending()
    q = PairingTable(gc_timeout_ns=3600 * 10**9)
    q.import_pending(*st)
    assert q.pending == p.pending > 200
    assert D.same_state(q.export_pending(), st)
    p.flush()
    q.flush()
    from webtap.records.http import to_record_batch

    a = to_record_batch(*q.take()).to_pandas()
    b = p.take().to_pandas()
    assert (a.unmatched_reason == "end").all()
    tail = b[b.unmatched_reason == "end"]
    assert loose(a) == loose(tail.reset_index(drop=True))


# ------------------------------------------------------------------------- a real cluster

@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    pytest.importorskip("dask.distributed")
    from dask.distributed import Client, LocalCluster

    kill_dir = tmp_path_factory.mktemp("kill")
    c = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = Client(c)
    try:
        yield client, kill_dir
    finally:
        client.close()
        c.close()


try:
    from distributed import WorkerPlugin as _WorkerPlugin
except ImportError:                     # the cluster fixture skips (importorskip) then
    _WorkerPlugin = object


class KillOnce(_WorkerPlugin):
    """A Dask worker plugin (the test's, not the product's): the first worker to start its
    second chunk task creates `marker` (with its pid) and kills its own process, SIGKILL, in the
    middle of the run; the nanny restarts it and Dask retries the task elsewhere."""

    name = "webtap-test-kill-once"

    def __init__(self, marker: str):
        self.marker = marker
        self.started = 0

    def setup(self, worker):
        self.started = 0

    def teardown(self, worker):
        pass

    def transition(self, key, start, finish, **kwargs):
        name = key[0] if isinstance(key, tuple) else key
        if finish != "executing" or not str(name).startswith("analyze_chunk"):
            return
        self.started += 1
        if self.started < 2:
            return
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return                      # done once already
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)


def test_local_cluster_dataset(cluster, jumpy, tmp_path):
    """Two worker processes; the dataset is read back by pandas and by dask.dataframe."""
    import dask.dataframe as dd

    client, _ = cluster
    res, ref = same([str(jumpy)], tmp_path, scheduler=client, chunk_packets=20000)
    assert res.chunks > 3
    pdf = pd.read_parquet(res.out_dir)
    assert "chunk" in pdf.columns and pdf["chunk"].nunique() > 1
    assert loose(pdf) == loose(ref)
    ddf = dd.read_parquet(res.out_dir)
    assert ddf.npartitions > 1
    assert loose(ddf.compute()) == loose(ref)


def test_worker_killed_mid_run(cluster, jumpy, tmp_path):
    client, kill_dir = cluster
    marker = kill_dir / "marker"
    before = set(client.scheduler_info()["workers"])
    client.register_plugin(KillOnce(str(marker)))
    try:
        res, ref = same([str(jumpy)], tmp_path, scheduler=client, chunk_packets=9000)
    finally:
        client.unregister_worker_plugin(KillOnce.name)
    assert marker.exists(), "no worker started a second chunk task"
    pid = int(marker.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)                 # that worker process is gone
    assert set(client.scheduler_info()["workers"]) != before   # the nanny restarted it
    # retried without a duplicate: records equal (checked in same()), no temporary file left
    assert res.chunks > 3 and not list(pathlib.Path(res.out_dir).rglob("*.tmp"))


def test_cli_scheduler_address(cluster, traces, tmp_path):
    """`httpanalyzer TRACE --dask ADDRESS`: the same lines as one process; -o OUT.parquet is a
    partitioned dataset; a bad filter is a usage error either way."""
    from httpanalyzer import cli

    client, _ = cluster
    addr = client.scheduler.address
    src = next(p for p in traces if p.name == "blackholev2.pcap")
    one, dist = tmp_path / "one.csv", tmp_path / "dist.csv"
    assert cli.main([str(src), "-o", str(one), "--consumers", "0", "--no-progress"]) == 0
    assert cli.main([str(src), "-o", str(dist), "--dask", addr, "--chunk-packets", "700",
                     "--no-progress"]) == 0
    a = one.read_text().splitlines()
    b = dist.read_text().splitlines()
    assert a[0] == b[0] and sorted(a[1:]) == sorted(b[1:]) and len(a) > 30
    pq_out = tmp_path / "recs.parquet"
    assert cli.main([str(src), "-o", str(pq_out), "--dask", addr, "--no-progress"]) == 0
    assert pq_out.is_dir() and list(pq_out.glob("chunk=*/*.parquet"))
    assert len(pd.read_parquet(pq_out)) == len(a) - 1
    assert cli.main([str(src), "--dask", addr, "-f", "tcp port", "-o", str(dist)]) == 2


def test_cli_chunk_mb_sets_the_chunks(cluster, traces, tmp_path):
    """`--chunk-mb` (documented in README.md and docs/DISTRIBUTED.md, untested before): smaller
    chunks give more chunk partitions, a chunk larger than the trace gives one, and the records
    are those of one process either way."""
    from httpanalyzer import cli

    client, _ = cluster
    addr = client.scheduler.address
    src = next(p for p in traces if p.name == "blackholev2.pcap")      # 3.9 MB
    one = tmp_path / "one.csv"
    assert cli.main([str(src), "-o", str(one), "--consumers", "0", "--no-progress"]) == 0
    want = pd.read_csv(one)
    chunks = {}
    for mb in ("0.25", "64"):
        out = tmp_path / f"recs-{mb}.parquet"
        assert cli.main([str(src), "-o", str(out), "--dask", addr, "--chunk-mb", mb, "--no-progress"]) == 0
        chunks[mb] = {p.name for p in out.glob("chunk=*") if any(p.glob("*.parquet"))}
        got = pd.read_parquet(out)
        assert len(got) == len(want) > 30
        assert sorted(map(str, got["uri"].tolist())) == sorted(map(str, want["uri"].tolist()))
    # 3.9 MB in 0.25 MiB byte ranges (the parallel plan, docs/DISTRIBUTED.md): several chunks
    # (16 ranges; those holding records); in 64 MiB ranges: one
    assert len(chunks["64"]) == 1 and len(chunks["0.25"]) > 1, chunks
    # a usage error: exit 2 (docs/CLI.md), one line naming the option
    assert cli.main([str(src), "--dask", addr, "--chunk-mb", "0", "-o", str(tmp_path / "x.csv")]) == 2


def test_dask_dataset_read_by_duckdb(cluster, jumpy, tmp_path):
    """docs/DISTRIBUTED.md says DuckDB reads the dataset with hive partitioning: the same rows as
    one process, every column (DuckDB's own types, compared loosely as for pandas)."""
    duckdb = pytest.importorskip("duckdb")
    client, _ = cluster
    res, ref = same([str(jumpy)], tmp_path, scheduler=client, chunk_packets=20000)
    con = duckdb.connect()
    df = con.execute(f"SELECT * FROM read_parquet('{res.out_dir}/**/*.parquet', hive_partitioning=true)").df()
    assert "chunk" in df.columns and df["chunk"].nunique() > 1
    assert len(df) == len(ref)
    assert loose(df) == loose(ref)
    # and a query over it: transactions per status, as pandas counts them
    by_status = dict(con.execute(f"SELECT status, count(*) FROM read_parquet('{res.out_dir}/**/*.parquet', "
                                 "hive_partitioning=true) WHERE matched GROUP BY status").fetchall())
    want = ref[ref.matched].groupby("status", observed=True).size()
    assert by_status == {int(k): int(v) for k, v in want.items()}


def _tcp_frame(src: str, sport: int, dst: str, dport: int, seq: int, ack: int, payload: bytes) -> bytes:
    """One Ethernet/IPv4/TCP frame (PSH|ACK) with right checksums (RFC 791, RFC 9293)."""
    import socket
    import struct

    def csum(b: bytes) -> int:
        b += b"\x00" * (len(b) & 1)
        s = sum(struct.unpack(f"!{len(b) // 2}H", b))
        while s >> 16:
            s = (s & 0xFFFF) + (s >> 16)
        return ~s & 0xFFFF
    s, d = socket.inet_aton(src), socket.inet_aton(dst)
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 0x50, 0x18, 65535, 0, 0) + payload
    tcp = tcp[:16] + struct.pack("!H", csum(s + d + struct.pack("!xBH", 6, len(tcp)) + tcp)) + tcp[18:]
    ip = struct.pack("!BBHHHBBH", 0x45, 0, 20 + len(tcp), 0, 0x4000, 64, 6, 0) + s + d
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    return b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00" + ip + tcp


def test_repair_state_check_fails_and_the_chunk_is_run_again(tmp_path):
    """docs/DISTRIBUTED.md, repair: when the replayed table differs from the chunk's own at the
    checkpoint, the chunk is run again, seeded. Input built so that the tables MUST differ: 100
    pipelined requests on one connection, all on the same ACK (one pairing key), each answered
    0.2 s later, the next request 0.4 s later, with a GC window of 1 s. In one pass every
    response pairs with its own request (FIFO on the key). A chunk that starts between a request
    and its response (every odd chunk of 25 packets) does not see that request in its own table:
    its first response waits, pairs with the NEXT request, and that shift lasts as long as the
    chain, past the checkpoint two windows later (the tables differ there). Only the rerun gives
    the right records: each of the 100 requests paired with its own response."""
    from tests.pcapbuild import pcap

    S = 1_000_000_000
    t0 = 1_700_000_000 * S
    C, SV, ACK = "10.0.0.1", "10.0.0.2", 7000
    frames = []
    seq = 1000
    for i in range(100):
        req = f"GET /r{i} HTTP/1.1\r\nHost: a.test\r\n\r\n".encode()
        frames.append((t0 + i * 400_000_000, _tcp_frame(C, 40000, SV, 80, seq, ACK, req)))
        seq += len(req)
        resp = f"HTTP/1.1 200 OK{i}\r\nContent-Length: 0\r\n\r\n".encode()
        frames.append((t0 + i * 400_000_000 + 200_000_000, _tcp_frame(SV, 80, C, 40000, ACK, seq, resp)))
    path = tmp_path / "chain.pcap"
    path.write_bytes(pcap(frames, nano=True))
    res, ref = same([str(path)], tmp_path, chunk_packets=25, gc_timeout=1.0)
    # the one pass: request i with response i, every one of them
    assert len(ref) == 100 and ref.matched.all()
    assert (ref.uri.astype(str) == ref.reason.astype(str).str.replace("OK", "/r")).all()
    # 8 chunks of 25 packets (the plan may add an empty last one); chunks 1, 3, 5, 7 start on a response whose request waits in the previous chunk
    assert res.boundaries_replayed == 4
    assert res.reruns_mismatch == 4 and res.reruns == 4 and res.reruns_clock == 0


def test_repair_rerun_when_the_clock_runs_back_over_a_boundary(tmp_path):
    """docs/DISTRIBUTED.md, repair: a chunk whose first message is earlier than the clock carried
    in is run again, seeded with that clock (its own clock was wrong from its start). Built so
    that it matters: the second chunk's request is 0.55 s behind the clock (not a reset, the
    window is 1 s), so one pass stamps it with the clock and its response 1.2 s later (0.65 s
    after the clock) pairs; stamped with its own time it would be collected first."""
    from tests.pcapbuild import pcap

    S = 1_000_000_000
    t0 = 1_700_000_000 * S
    C, SV = "10.0.0.1", "10.0.0.2"
    req = lambda u: f"GET /{u} HTTP/1.1\r\nHost: a.test\r\n\r\n".encode()   # noqa: E731
    resp = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
    ms = lambda s: t0 + int(s * S)                                            # noqa: E731
    frames = [  # chunk 0 (4 packets): two pairs, the clock ends at 10.05 s
        (ms(0.0), _tcp_frame(C, 40001, SV, 80, 100, 900, req("a"))),
        (ms(0.1), _tcp_frame(SV, 80, C, 40001, 900, 140, resp)),
        (ms(10.0), _tcp_frame(C, 40002, SV, 80, 100, 700, req("x"))),
        (ms(10.05), _tcp_frame(SV, 80, C, 40002, 700, 140, resp)),
        # chunk 1: starts 0.55 s behind the clock; the response 1.2 s after its request
        (ms(9.5), _tcp_frame(C, 40003, SV, 80, 100, 500, req("b"))),
        (ms(10.7), _tcp_frame(SV, 80, C, 40003, 500, 140, resp)),
    ]
    path = tmp_path / "back.pcap"
    path.write_bytes(pcap(frames, nano=True))
    res, ref = same([str(path)], tmp_path, chunk_packets=4, gc_timeout=1.0)
    assert len(ref) == 3 and ref.matched.all() and sorted(ref.uri) == ["/a", "/b", "/x"]
    assert res.reruns_clock == 1 and res.reruns == 1 and res.reruns_mismatch == 0


def test_repair_two_windows_suffice_without_rerun(tmp_path):
    """docs/DISTRIBUTED.md, repair: the checkpoint lies two GC windows after the chunk's first
    message because by then the chunk's own table has also collected what met an entry carried
    over (here a response whose request waits in the previous chunk: alone in the chunk's own
    table until the GC takes it, one window after it arrived). The replayed table then equals
    the chunk's own and the boundary is accepted without a rerun; a checkpoint one window after
    the first message would still see that response and rerun the chunk."""
    from tests.pcapbuild import pcap

    S = 1_000_000_000
    t0 = 1_700_000_000 * S
    C, SV = "10.0.0.1", "10.0.0.2"
    req = lambda u: f"GET /{u} HTTP/1.1\r\nHost: a.test\r\n\r\n".encode()   # noqa: E731
    resp = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
    ms = lambda s: t0 + int(s * S)                                            # noqa: E731
    frames = []
    for k in range(5):          # chunk 0 (11 packets): five pairs, then a request answered in chunk 1
        frames += [(ms(k), _tcp_frame(C, 40010 + k, SV, 80, 100, 900, req(f"a{k}"))),
                   (ms(k + 0.1), _tcp_frame(SV, 80, C, 40010 + k, 900, 140, resp))]
    frames += [
        (ms(9.7), _tcp_frame(C, 40002, SV, 80, 100, 700, req("c"))),
        # chunk 1: first message at 10.0 s; the carried request's response at 10.5 s
        (ms(10.0), _tcp_frame(C, 40003, SV, 80, 100, 500, req("x"))),
        (ms(10.05), _tcp_frame(SV, 80, C, 40003, 500, 140, resp)),
        (ms(10.5), _tcp_frame(SV, 80, C, 40002, 700, 140, resp)),
    ]
    for k in range(8):          # independent pairs every 0.5 s, past the checkpoint (12.0 s)
        frames += [(ms(11.0 + k / 2), _tcp_frame(C, 41000 + k, SV, 80, 100, 300, req(f"p{k}"))),
                   (ms(11.1 + k / 2), _tcp_frame(SV, 80, C, 41000 + k, 300, 140, resp))]
    path = tmp_path / "carry.pcap"
    path.write_bytes(pcap(frames, nano=True))
    res, ref = same([str(path)], tmp_path, chunk_packets=11, gc_timeout=1.0)
    assert len(ref) == 15 and ref.matched.all()
    # chunks of 11 packets (the second one passes its checkpoint at 12.0 s): only the boundary
    # after /c carries an entry over
    assert res.boundaries_replayed == 1 and res.reruns == 0
