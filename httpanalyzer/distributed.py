"""Traces larger than one machine: chunks analysed on a Dask cluster, boundaries repaired exactly.

    >>> from httpanalyzer.distributed import run                      # doctest: +SKIP
    >>> res = run(["big.pcap"], "out.parquet", scheduler="local:2")
    >>> pandas.read_parquet("out.parquet")                            # or dask / DuckDB / Spark

Three steps (docs/DISTRIBUTED.md tells why each is exact):

1. **Plan** (here): each trace is scanned once, record headers only, with the reader one
   process uses. Chunk boundaries are byte offsets at packet records (pcap) or blocks (pcapng);
   at each the reader's state (byte order, interfaces, packet index) is exported, so a worker
   resumes there without rewriting the file. A file's capture clock is its HTTP messages' (the
   one-process run does not move it on other packets), so where a chunk or a batch ends never
   changes a record. A gzip'd trace cannot be entered in the middle without inflating everything before: it is one
   chunk (several gzip'd files still run in parallel).
2. **Map** (workers): a chunk is read, dissected and paired in a table of its own, starting
   empty. Its records after its *checkpoint* (the first event at least two GC windows after its
   first message) go straight to the Parquet dataset; it returns the records and the messages
   before the checkpoint, its table's waiting entries at the checkpoint and at its end, and its
   capture clock.
3. **Repair** (here, in stream order): a real pairing table is seeded with the entries really
   waiting at the end of the previous chunk and the capture clock there, and replays the
   chunk's messages up to the checkpoint. Anything the previous chunks could change starts in
   the first window (every entry carried over is paired or collected by its end), and the
   chunk's own entries that met them are collected in the second; if the replayed
   table then equals the chunk's own table at its checkpoint, entry for entry in the same order,
   the rest of the chunk's records are exactly those of one pass. If not (a cascade outliving the
   window, a clock running backwards over the boundary), the chunk is run again, seeded: exact
   in every case, and counted.

The result is the multiset of records of ``httpanalyzer.analyze`` on the same input, unmatched
ones included. Several traces form one stream as in the one-process CLI when they follow each
other in capture time (a rotating capture); traces that overlap in time are refused with a
clear error (one process merges them message by message; see docs/DISTRIBUTED.md).
"""
from __future__ import annotations

import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from httpanalyzer.errors import OverlappingTraces, WorkersLost
from httpanalyzer.pairing import Pairer
from httpanalyzer.stream import Summary
from webtap._ext.pairing import PairingTable
from webtap import rangeplan
from webtap.capture import ChunkStart, counter_warnings, open_trace, plan_chunks, progress_bar
from webtap.pipeline import Pipeline
from webtap.rangeplan import FileRange
from webtap.errors import BpfError
from webtap.records import http as records
from webtap.records.httppandas import to_pandas
from webtap.parquetsink import with_pandas_metadata

__all__ = ["run", "plan", "DistributedResult", "OverlappingTraces", "WorkersLost",
           "parse_scheduler"]

#: Chunk size of the sequential plan (bytes of the file) when none is chosen; boundaries fall
#: on the next batch end. The parallel plan sizes its ranges from the file and the workers
#: (webtap.rangeplan.ranges).
DEFAULT_CHUNK_BYTES = 256 << 20

# ----------------------------------------------------------------------------------- the plan

@dataclass
class Chunk:
    """One piece of one trace: where it starts, the reader state there, how many packets."""

    index: int                  # position in the stream (chunks of all traces, in time order)
    path: str
    trace: int                  # position of the trace among the inputs (request_trace ...)
    start: int                  # byte offset in the file where the chunk's first record begins
    state: tuple | None         # FileReader.export_state() there; None: the file's start
    npackets: int               # packets (passing the BPF filter) in the chunk; -1: to the end
    gzip: bool = False
    end: int = -1               # parallel plan: where the chunk's last record ends; -1: none
    host: str | None = None     # the worker that surveyed the range (its pages are cached there)


def iter_plan(paths: Iterable, unreadable: list, bpf: str | None = None,
              chunk_packets: int | None = None, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
              progress: bool = False) -> Iterator[Chunk]:
    """Chunks of every trace in stream order; traces that cannot be read go to `unreadable`.
    One trace: each chunk as soon as the scan has passed it. Several: after all are scanned
    (they are put in capture-time order by their first packets; checked on the messages later)."""
    paths = [os.fspath(p) for p in paths]
    single = len(paths) == 1
    files = []
    n = 0
    for i, p in enumerate(paths):
        info: dict = {}
        got = []
        try:
            for off, state, npk, gz, _ in plan_chunks(p, bpf, chunk_packets, chunk_bytes,
                                                      single, info, progress=progress):
                if single:
                    yield Chunk(n, p, i, off, state, npk, gz)
                    n += 1
                else:
                    got.append((off, state, npk, gz))
        except BpfError:
            raise
        except (OSError, ValueError, RuntimeError) as exc:
            if single and n:
                raise
            unreadable.append(f"{p}: {exc}")
            continue
        files.append((info.get("first_ts"), i, p, got))
    if single:
        return
    files.sort(key=lambda f: (f[0] if f[0] is not None else np.iinfo(np.int64).max, f[1]))
    for _, i, p, got in files:
        for off, state, npk, gz in got:
            yield Chunk(n, p, i, off, state, npk, gz)
            n += 1


def _first_ts(path: str, bpf: str | None) -> int | None:
    """The time of the file's first packet passing the filter (orders several traces)."""
    with open_trace(path, bpf=bpf, progress=False) as t:
        for b in t:
            if len(b):
                return int(b.packets["ts_ns"][0])
    return None


def _scan_plan(path: str, bpf: str | None, chunk_bytes: int) -> list:
    """The sequential plan of one file (run on a worker when its ranges cannot be planned
    apart: webtap.rangeplan.Irregular)."""
    return list(plan_chunks(path, bpf, None, chunk_bytes, True, {}))


def iter_range_plan(paths: Iterable, unreadable: list, ex, bpf: str | None = None,
                    chunk_bytes: int | None = None, stats: dict | None = None) -> Iterator[Chunk]:
    """Chunks of every trace in stream order, planned in parallel (webtap.rangeplan): the
    client reads each file's first 28 bytes; workers survey the byte ranges by path and the
    client checks that they meet, re-planning a wrong guess. A gzip'd trace is one chunk; a
    trace with records the reader reads only in sequence (corrupt ones) is planned by the
    sequential scan, on a worker. Traces that cannot be read go to `unreadable`."""
    stats = stats if stats is not None else {}
    paths = [os.fspath(p) for p in paths]
    single = len(paths) == 1
    workers = ex.workers()
    files = []
    for i, p in enumerate(paths):
        try:
            size, gz = rangeplan.head(p, bpf)
        except BpfError:
            raise
        except (OSError, ValueError, RuntimeError) as exc:
            unreadable.append(f"{p}: {exc}")
            continue
        rs = [] if gz else rangeplan.ranges(size, workers, chunk_bytes)
        # every survey of every file is submitted now: they run in parallel on the workers
        surveys = ex.many(rangeplan.survey, [(p, lo, hi) for lo, hi in rs])
        first = None if single else ex.many(_first_ts, [(p, bpf)])
        files.append((i, p, gz, surveys, first))
    planned = []
    for i, p, gz, surveys, first in files:
        if gz:
            got = [(ChunkStart(0, None, -1, True), None)]
        else:
            try:
                got = list(rangeplan.check(
                    p, surveys, lambda lo, hi, st, sw, p=p: ex.one(rangeplan.survey, p, lo, hi, st, sw),
                    stats))
            except rangeplan.Irregular:
                stats["sequential"] = stats.get("sequential", 0) + 1
                got = [(c, None) for c in ex.one(_scan_plan, p, bpf,
                                                 chunk_bytes or DEFAULT_CHUNK_BYTES)]
        ts = None if first is None else next(iter(first))
        planned.append((ts, i, p, got))
    if not single:
        planned.sort(key=lambda f: (f[0] if f[0] is not None else np.iinfo(np.int64).max, f[1]))
    n = 0
    for _, i, p, got in planned:
        for c, host in got:
            yield Chunk(n, p, i, c.start, c.state, c.npackets, c.gzip, c.end, host)
            n += 1


def plan(paths: Iterable, bpf: str | None = None, chunk_packets: int | None = None,
         chunk_bytes: int = DEFAULT_CHUNK_BYTES,
         progress: bool = False) -> tuple[list[Chunk], list[str]]:
    """Chunks of every trace in stream order, and the traces that could not be read."""
    unreadable: list = []
    chunks = list(iter_plan(paths, unreadable, bpf=bpf, chunk_packets=chunk_packets,
                            chunk_bytes=chunk_bytes, progress=progress))
    return chunks, unreadable


# ------------------------------------------------------------------------------ the map step

#: records a chunk's table holds before they are taken as one Arrow batch
TAKE_EVERY = 65536

@dataclass
class ChunkResult:
    index: int
    trace: int
    seeded: bool
    first_event: int | None     # the first clock event of the chunk (its first message's ts)
    end_clock: int | None
    checkpoint: bool            # reached: window_* cover only the first two GC windows
    window_events: list         # ("m", msgs, data) | ("a", value), in order
    window_records: pa.RecordBatch | None
    ckpt_state: tuple | None
    ckpt_counters: dict | None
    end_state: tuple
    end_counters: dict
    source: dict
    dissect: dict
    warnings: list
    messages: int
    msg_first_ts: int | None
    msg_max_ts: int | None
    packets: int
    seconds: float
    cpu_seconds: float
    post_rows: int


def _compact(msgs: np.ndarray, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The messages with only the bytes their spans can point into (packet start to the end of
    the captured payload), packed into a new buffer; pkt_offset rebased. No Python per message."""
    msgs = msgs.copy()
    n = len(msgs)
    if n == 0:
        return msgs, np.empty(0, np.uint8)
    ln = (msgs["payload_off"].astype(np.int64) + msgs["payload_caplen"].astype(np.int64))
    src = msgs["pkt_offset"].astype(np.int64)
    dst = np.concatenate(([0], np.cumsum(ln)[:-1]))
    total = int(ln.sum())
    idx = np.repeat(src - dst, ln) + np.arange(total)
    out = data[idx] if total else np.empty(0, np.uint8)
    msgs["pkt_offset"] = dst.astype(np.uint64)
    return msgs, np.ascontiguousarray(out)


def _chunk_dir(out_dir: str, index: int) -> str:
    return os.path.join(out_dir, f"chunk={index:06d}")


def _write(out_dir: str, index: int, name: str, batches: list, always: bool = False) -> int:
    """Write record batches as one Parquet file of chunk `index`, atomically (a retried task
    replaces its own file: nothing is duplicated). Nothing is written for no records, unless
    `always` (the end file: the dataset then always has a file and its schema)."""
    batches = [b for b in batches if b is not None]
    # the batches' own schema: with chosen headers (table option `headers`) it has more columns
    table = pa.Table.from_batches(batches, schema=batches[0].schema if batches else records.SCHEMA)
    if table.num_rows == 0 and not always:
        _remove(out_dir, index, name)
        return 0
    d = _chunk_dir(out_dir, index)
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, f".{name}.{os.getpid()}.tmp")
    pq.write_table(table.replace_schema_metadata(with_pandas_metadata(table.schema).metadata), tmp)
    os.replace(tmp, os.path.join(d, f"{name}.parquet"))
    return table.num_rows


def analyze_chunk(ch: Chunk, out_dir: str, bpf: str | None, table_options: dict,
                  seed: tuple | None = None) -> ChunkResult:
    """The map task: read, dissect and pair one chunk (see the module docstring). seed:
    (entries, text, clock) the chunk's table starts from -- then the whole chunk is exact and
    all its records are written; without, records up to the checkpoint are returned."""

    t0 = time.perf_counter()
    c0 = time.process_time()
    pairer = Pairer(**table_options)
    table = pairer.table
    table.trace = ch.trace
    T = table.gc_timeout_ns
    if seed is not None:
        table.import_pending(seed[0], seed[1])
        if seed[2] is not None:
            table.set_clock(seed[2])
    totals = {"source": {}, "dissect": {}, "warnings": []}
    st = dict(first_event=None, threshold=None, ckpt=seed is not None, msgs=0, mfirst=None,
              mmax=None, packets=0)
    window: list = []
    window_recs = None
    ckpt_state = ckpt_counters = None

    def first(v):
        if st["first_event"] is None:
            st["first_event"] = int(v)
            # Two windows: by then every entry carried over has left (first window) and so has
            # every entry of this chunk that met one of them (second), in both tables.
            st["threshold"] = int(v) + 2 * T

    def checkpoint():
        nonlocal window_recs, ckpt_state, ckpt_counters
        st["ckpt"] = True
        window_recs = pairer.take()
        ckpt_state = table.export_pending()
        ckpt_counters = table.counters()

    def feed(msgs, data):
        if not len(msgs):
            return
        first(msgs["ts_ns"][0])
        if not st["ckpt"]:
            ts = msgs["ts_ns"]
            over = np.flatnonzero(ts >= st["threshold"])
            j = int(over[0]) if len(over) else len(msgs)
            if j:
                window.append(("m",) + _compact(msgs[:j], data))
                table.feed(msgs[:j], data)
            if j < len(msgs):
                window.append(("a", int(ts[j])))    # the replay ends with the same GC
                table.advance(int(ts[j]))
                checkpoint()
                table.feed(msgs[j:], data)
        else:
            table.feed(msgs, data)

    post: list = []

    def on_batch(batch, mb):
        st["packets"] += len(batch.packets)
        msgs = mb.msgs
        if len(msgs):
            st["msgs"] += len(msgs)
            mts = msgs["ts_ns"]
            st["mfirst"] = int(mts[0]) if st["mfirst"] is None else st["mfirst"]
            mx = int(mts.max())
            st["mmax"] = mx if st["mmax"] is None else max(st["mmax"], mx)
        feed(msgs, mb.data)
        # records after the checkpoint are taken every TAKE_EVERY records waiting and at the
        # end (one Arrow batch per take: per packet batch they cost more than they hold)
        if st["ckpt"] and table.records_waiting >= TAKE_EVERY:
            post.append(pairer.take())

    # the one Pipeline (webtap.pipeline): this chunk of the file as its source, the dissector's
    # walk, the chunk's pairing as its stage
    src = FileRange(ch.path, ChunkStart(ch.start, ch.state, ch.npackets, ch.gzip, ch.end), bpf)
    pipe = Pipeline([src], [_EachBatch(on_batch)], executor="inline")
    pipe.run()
    if st["ckpt"]:
        b = pairer.take()
        if b.num_rows:
            post.append(b)
    totals["source"] = src.counters
    totals["dissect"] = dict(pipe.totals.dissect)
    totals["warnings"] = src.warnings
    if not st["ckpt"]:
        window_recs = pairer.take()
    end_state = table.export_pending()
    rows = _write(out_dir, ch.index, "part-post", post) if (post or st["ckpt"]) else 0
    if not st["ckpt"]:
        _remove(out_dir, ch.index, "part-post")
    return ChunkResult(
        index=ch.index, trace=ch.trace, seeded=seed is not None, first_event=st["first_event"],
        end_clock=table.clock, checkpoint=st["ckpt"] and seed is None,
        window_events=window if seed is None else [],
        window_records=window_recs if seed is None else None,
        ckpt_state=ckpt_state, ckpt_counters=ckpt_counters, end_state=end_state,
        end_counters=table.counters(), source=totals["source"], dissect=totals["dissect"],
        warnings=totals["warnings"], messages=st["msgs"], msg_first_ts=st["mfirst"],
        msg_max_ts=st["mmax"], packets=st["packets"], seconds=time.perf_counter() - t0,
        cpu_seconds=time.process_time() - c0, post_rows=rows)


class _EachBatch:
    """A Pipeline stage handing each (packet batch, its messages) to a function."""

    def __init__(self, fn):
        self.fn = fn

    def feed(self, batch, mb):
        self.fn(batch, mb)

    def finish(self):
        return None


def _remove(out_dir: str, index: int, name: str) -> None:
    try:
        os.remove(os.path.join(_chunk_dir(out_dir, index), f"{name}.parquet"))
    except FileNotFoundError:
        pass


# ------------------------------------------------------------------------------- the repair

_LAYOUT = PairingTable.pending_layout()


def _entry_mask() -> np.ndarray:
    """Bytes of a PendEntry that carry state (not pointers, links or padding)."""
    size, offs = _LAYOUT
    widths = {"ts_ns": 8, "stamp_ns": 8, "pkt_index": 8, "src_ip": 16, "dst_ip": 16, "tlen": 20,
              "seq": 4, "ack": 4, "key": 4, "payload_len": 4, "src_port": 2, "dst_port": 2,
              "status": 2, "vlan": 2, "msg_flags": 2, "rflags": 2, "kind": 1, "method_id": 1,
              "ip_version": 1, "interim_done": 1, "trace": 2, "encap": 8, "outer_src": 16,
              "outer_dst": 16, "tunnel_id": 4, "outer_ip_version": 1,
              "http_version": 1}
    mask = np.zeros(size, dtype=bool)
    for k, o in offs.items():
        mask[o: o + widths[k]] = True
    return mask


_MASK = _entry_mask()


def same_state(a: tuple, b: tuple) -> bool:
    """Whether two exported tables wait on the same entries in the same order, field for field
    (the pairing rules then treat every later message the same)."""
    ea, ta = a
    eb, tb = b
    if len(ea) != len(eb) or len(ta) != len(tb):
        return False
    size = _LAYOUT[0]
    return (np.array_equal(ea.reshape(-1, size)[:, _MASK], eb.reshape(-1, size)[:, _MASK])
            and np.array_equal(ta, tb))


def _seeded_pairer(table_options: dict, state: tuple, clock: int | None, trace: int) -> Pairer:
    p = Pairer(**table_options)
    p.table.import_pending(state[0], state[1])
    if clock is not None:
        p.table.set_clock(clock)
    p.table.trace = trace
    return p


def _npending(state: tuple) -> int:
    return len(state[0]) // _LAYOUT[0]


_ADDITIVE_SKIP = ("peak_pending", "grows")


def _add_counters(acc: dict, d: dict, sign: int = 1) -> None:
    for k, v in d.items():
        if k in _ADDITIVE_SKIP:
            acc[k] = max(acc.get(k, 0), v)
        else:
            acc[k] = acc.get(k, 0) + sign * v


@dataclass
class DistributedResult:
    out_dir: str
    summary: Summary
    chunks: int = 0
    boundaries_replayed: int = 0          # boundaries with entries carried over (replayed)
    reruns: int = 0                       # chunks run again, seeded: the two causes below
    reruns_clock: int = 0                 # the clock ran back over the boundary
    reruns_mismatch: int = 0              # replayed table != the chunk's own at its checkpoint
    replayed_messages: int = 0
    planner: str = "ranges"               # 'ranges' (parallel) or 'scan' (sequential)
    plan_stats: dict = field(default_factory=dict)  # ranges, resurveyed, sequential (files)
    seconds: dict = field(default_factory=dict)   # plan, map, repair, total
    chunk_seconds: list = field(default_factory=list)      # wall time of each chunk's task
    chunk_cpu_seconds: list = field(default_factory=list)  # its CPU time

    def read_pandas(self):
        """The dataset as one DataFrame (records.to_pandas dtypes; the partition column dropped)."""
        t = open_dataset(self.out_dir).to_table()
        return to_pandas(t.drop_columns(["chunk"]) if "chunk" in t.column_names else t)


def open_dataset(path):
    """The records dataset `run` wrote (Parquet, partitioned by chunk: hive)."""
    return ds.dataset(path, format="parquet", partitioning="hive")


# ------------------------------------------------------------------------------ scheduling

def parse_scheduler(spec):
    """A dask.distributed Client for 'local', 'local:N' (a LocalCluster of N worker processes,
    one thread each) or a scheduler address ('tcp://host:8786'); (client, owned cluster)."""
    from dask.distributed import Client, LocalCluster

    if spec.startswith("local"):
        n = int(spec.split(":", 1)[1]) if ":" in spec else (os.cpu_count() or 1)
        if n < 1:
            raise ValueError("local:N needs N >= 1")
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        return Client(cluster), cluster
    return Client(spec), None


class _InProcess:
    """Runs the tasks here, one after the other (the same functions as on a cluster)."""

    def map_chunks(self, fn, chunks, *args, progress=None):
        for ch in chunks:
            yield fn(ch, *args)

    def one(self, fn, *args):
        return fn(*args)

    def many(self, fn, arglist):
        """fn(*args) for each, in order (here: computed as the results are taken)."""
        return (fn(*a) for a in arglist)

    def workers(self) -> int:
        return 1


def _result(fut):
    """fut.result(), a KilledWorker told as WorkersLost (one line: which task, how often)."""
    from distributed.scheduler import KilledWorker

    try:
        return fut.result()
    except KilledWorker as e:
        raise WorkersLost(f"Dask workers died running {str(fut.key).split('-')[0]} (more often "
                          "than the scheduler's distributed.scheduler.allowed-failures)") from e


class _OnDask:
    def __init__(self, client):
        self.client = client

    def map_chunks(self, fn, chunks, *args, progress=None):
        from dask.distributed import as_completed

        # `chunks` may be the plan itself, still scanning: each chunk is submitted as soon as
        # it is known, so the workers start while the client scans on
        futs = [self.client.submit(fn, ch, *args, pure=False,
                                   **({"workers": [ch.host], "allow_other_workers": True}
                                      if getattr(ch, "host", None) else {}))
                for ch in chunks]
        bar = progress_bar(len(futs), "dask map", unit="chunk", leave=True) if progress else None
        try:
            for fut in as_completed(futs):
                res = _result(fut)
                fut.release()
                if bar is not None:
                    bar.update(1)
                yield res
        finally:
            if bar is not None:
                bar.close()

    def one(self, fn, *args):
        return _result(self.client.submit(fn, *args, pure=False))

    def many(self, fn, arglist):
        """fn(*args) for each, submitted now (they run in parallel), taken in order."""
        futs = [self.client.submit(fn, *a, pure=False) for a in arglist]
        return (_result(f) for f in futs)

    def workers(self) -> int:
        return max(1, len(self.client.scheduler_info().get("workers", {})))


def run(paths, out_dir: str, scheduler=None, bpf: str | None = None, gc_timeout: float = 60.0,
        chunk_packets: int | None = None, chunk_bytes: int | None = None,
        progress: bool | None = False, overwrite: bool = True, planner: str | None = None,
        **table_options) -> DistributedResult:
    """Analyse traces as chunks on Dask and write the records as a Parquet dataset partitioned
    by chunk (``out_dir/chunk=NNNNNN/*.parquet``). scheduler: None (tasks run in this process),
    a dask.distributed Client, 'local[:N]' or a scheduler address. Workers must see the traces
    and out_dir at the same paths (one machine, or a shared file system).
    planner: 'ranges' (byte ranges surveyed by the workers, webtap.rangeplan: the default) or
    'scan' (the client's sequential header scan; the one for chunk_packets). chunk_bytes: the
    size of a chunk; None: from the file's size and the number of workers ('ranges'),
    DEFAULT_CHUNK_BYTES ('scan')."""
    if planner is None:
        planner = "scan" if chunk_packets else "ranges"
    if planner not in ("ranges", "scan") or (planner == "ranges" and chunk_packets):
        raise ValueError(f"planner {planner!r}: 'ranges' (without chunk_packets) or 'scan'")
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise ValueError("no traces")
    if progress is None:
        progress = sys.stderr.isatty()
    t_start = time.perf_counter()
    opts = dict(gc_timeout=gc_timeout, **table_options)
    if os.path.lexists(out_dir):
        if not overwrite:
            raise FileExistsError(out_dir)
        if os.path.isdir(out_dir) and not os.path.islink(out_dir):
            shutil.rmtree(out_dir)
        else:
            os.remove(out_dir)                  # e.g. a one-process run's OUT.parquet file
    os.makedirs(out_dir)
    owned = None
    client = None
    if scheduler is None:
        ex = _InProcess()
    else:
        if isinstance(scheduler, str):
            client, owned = parse_scheduler(scheduler)
        else:
            client = scheduler
        ex = _OnDask(client)
    try:
        return _run(paths, out_dir, ex, bpf, opts, chunk_packets, chunk_bytes, progress, t_start,
                    planner)
    except BaseException:
        shutil.rmtree(out_dir, ignore_errors=True)      # no partial dataset left behind
        raise
    finally:
        if owned is not None:
            client.close()
            owned.close()


def _run(paths, out_dir, ex, bpf, opts, chunk_packets, chunk_bytes, progress, t_start,
         planner="ranges"):
    summary = Summary()
    res = DistributedResult(out_dir=out_dir, summary=summary, planner=planner)
    workers = ex.workers()
    summary.executor = (f"dask: {workers} worker{'s' if workers != 1 else ''}"
                        f"{' (in this process)' if isinstance(ex, _InProcess) else ''}; "
                        + ("byte ranges planned by the workers, chunks of one trace mapped "
                           "over them, boundaries repaired here" if planner == "ranges" else
                           "chunks planned by a header scan here, mapped over the workers, "
                           "boundaries repaired here"))
    t0 = time.perf_counter()
    chunks: list[Chunk] = []
    unreadable: list = []

    def planned():
        if planner == "ranges":
            it = iter_range_plan(paths, unreadable, ex, bpf=bpf, chunk_bytes=chunk_bytes,
                                 stats=res.plan_stats)
        else:
            it = iter_plan(paths, unreadable, bpf=bpf, chunk_packets=chunk_packets,
                           chunk_bytes=chunk_bytes or DEFAULT_CHUNK_BYTES, progress=progress)
        for ch in it:
            chunks.append(ch)
            yield ch
        res.seconds["plan"] = time.perf_counter() - t0

    results: dict[int, ChunkResult] = {}
    arrivals = ex.map_chunks(analyze_chunk, planned(), out_dir, bpf, opts, progress=progress)
    t_map = t0
    busy = [0.0]        # the client's own repair time (it overlaps the map of later chunks)

    def arrive() -> bool:
        nonlocal t_map
        r = next(arrivals, None)
        if r is None:
            return False
        results[r.index] = r
        t_map = time.perf_counter()
        return True

    def in_order():
        """The chunks in stream order, each once its map result is here: one trace's chunks are
        repaired as their results arrive; several traces' order is checked on all first."""
        if len(paths) > 1:
            while arrive():
                pass
            _check_order(chunks, results)
        k = 0
        while True:
            while k >= len(chunks) or chunks[k].index not in results:
                if not arrive():
                    if k >= len(chunks):
                        return
                    raise RuntimeError(f"no result for chunk {k}")
            t = time.perf_counter()
            yield chunks[k]
            busy[0] += time.perf_counter() - t
            k += 1

    pairing: dict = {}
    E = (np.empty(0, np.uint8), np.empty(0, np.uint8))
    clock = None
    for ch in in_order():
        r = results[ch.index]
        valid = r.first_event is None or clock is None or r.first_event >= clock
        if not valid or r.seeded:
            # The clock runs backwards over the boundary: the chunk's own clock differed.
            if not r.seeded:
                r = ex.one(analyze_chunk, ch, out_dir, bpf, opts, (E[0], E[1], clock))
                res.reruns += 1
                res.reruns_clock += 1
            _remove(out_dir, ch.index, "part-window")
            _add_counters(pairing, r.end_counters)
        elif _npending(E) == 0:
            # Nothing carried over and the same clock: the chunk's own run is the one pass.
            _write(out_dir, ch.index, "part-window", [r.window_records])
            _add_counters(pairing, r.end_counters)
        else:
            res.boundaries_replayed += 1
            p = _seeded_pairer(opts, E, clock, ch.trace)
            for ev in r.window_events:
                if ev[0] == "m":
                    p.feed(ev[1], ev[2], trace=ch.trace)
                    res.replayed_messages += len(ev[1])
                else:
                    p.advance(ev[1])
            if r.checkpoint:
                if same_state(p.table.export_pending(), r.ckpt_state):
                    _write(out_dir, ch.index, "part-window", [p.take()])
                    _add_counters(pairing, p.counters())
                    _add_counters(pairing, r.end_counters)
                    _add_counters(pairing, {k: v for k, v in r.ckpt_counters.items()
                                            if k not in _ADDITIVE_SKIP}, -1)
                else:
                    r = ex.one(analyze_chunk, ch, out_dir, bpf, opts, (E[0], E[1], clock))
                    res.reruns += 1
                    res.reruns_mismatch += 1
                    _remove(out_dir, ch.index, "part-window")
                    _add_counters(pairing, r.end_counters)
            else:
                # The whole chunk lies before its checkpoint: the replay is the one pass.
                _write(out_dir, ch.index, "part-window", [p.take()])
                _add_counters(pairing, p.counters())
                r.end_state = p.table.export_pending()
                r.end_clock = p.table.clock
        E = r.end_state
        if r.end_clock is not None:
            clock = r.end_clock
        results[ch.index] = r
    # the map overlaps the plan (chunks are submitted as the surveys are checked) and the
    # repair overlaps the map (each chunk is repaired as soon as its predecessors are)
    res.seconds["map"] = t_map - t0
    summary.unreadable.extend(unreadable)
    res.chunks = len(chunks)
    t0 = time.perf_counter()
    # End of the stream: what still waits leaves as unmatched records (reason 'end').
    last = chunks[-1].index if chunks else 0
    p = _seeded_pairer(opts, E, clock, 0)
    p.flush()
    _write(out_dir, last, "part-end", [p.take()], always=True)
    c = p.counters()
    for k in ("request_unmatched_end", "response_unmatched_end", "final_response_missing"):
        pairing[k] = pairing.get(k, 0) + c.get(k, 0)
    res.seconds["repair"] = busy[0] + time.perf_counter() - t0

    per_file: dict = {}
    for ch in chunks:
        r = results[ch.index]
        f = per_file.setdefault(ch.trace, (ch.path, {}, []))
        for k, v in r.source.items():
            f[1][k] = f[1].get(k, 0) + v
        for k, v in r.dissect.items():
            summary.dissect[k] += v
        f[2].extend(r.warnings)
        res.chunk_seconds.append(r.seconds)
        res.chunk_cpu_seconds.append(r.cpu_seconds)
    for t in sorted(per_file):
        path, counters, warnings = per_file[t]
        # the warnings one process gives for this file, from its counters summed over chunks
        summary.warnings.extend(f"{path}: {w}" for w in warnings + counter_warnings(counters))
        for k, v in counters.items():
            summary.source[k] += int(bool(v)) if k == "truncated" else v
    summary.packets = summary.source.get("packets", 0)
    summary.bytes = summary.source.get("wire_bytes", 0)
    summary.pairing = pairing
    res.seconds["total"] = time.perf_counter() - t_start
    return res


def _check_order(chunks, results):
    """Several traces are one stream only when each follows the previous in capture time (as
    the one-process merge would feed them): check it on the messages."""
    order: list[int] = []
    seen: dict = {}
    for ch in chunks:
        r = results[ch.index]
        d = seen.setdefault(ch.trace, {"first": None, "max": None, "n": 0, "pos": len(seen)})
        if r.messages:
            d["first"] = r.msg_first_ts if d["first"] is None else d["first"]
            d["max"] = r.msg_max_ts if d["max"] is None else max(d["max"], r.msg_max_ts)
            d["n"] += r.messages
        if ch.trace not in order:
            order.append(ch.trace)
    with_msgs = [t for t in order if seen[t]["n"]]
    key = sorted(with_msgs, key=lambda t: (seen[t]["first"], t))
    if key != with_msgs:
        raise OverlappingTraces("traces overlap in capture time (their first HTTP messages are "
                                "in another order than their first packets); run them without "
                                "--dask, which merges them message by message")
    hi = None
    names = {ch.trace: ch.path for ch in chunks}
    for t in with_msgs:
        if hi is not None and seen[t]["first"] < hi[0]:
            raise OverlappingTraces(f"{names[hi[1]]} and {names[t]} overlap in capture time; "
                                    "run them without --dask, which merges them message by "
                                    "message")
        hi = (seen[t]["max"], t) if hi is None or seen[t]["max"] >= hi[0] else hi
