"""TLS handshake records (issue 17): traces -> capture -> TLS first flight (ext/tls/tls.pyx: parse,
bounded reassembly of split hellos, Eq. 2 pairing) -> Arrow record batches -> DataFrame.

    import httpanalyzer
    df = httpanalyzer.analyze_tls("trace.pcap")     # one row per handshake

Columns (first ones fixed by the issue, more after them): webtap.records.tls (COLUMNS / SCHEMA,
re-exported here for the package's API).
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import threading
from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa

from httpanalyzer.zeek import ssl_log_view
from webtap.figures import save_figures
from webtap import clikit
from webtap._ext.dissect import dissect_batch
from webtap._ext.exchange import ExchangeTable, sizeof_exchange_record
from webtap._ext.textout import seconds_text, text_array
from webtap._ext.tls import TlsTable, thread_end
from webtap.capture import compile_filter
from webtap.errors import BpfError
from webtap.inflight import InFlight
from webtap.pipeline import Pipeline
from webtap.records.exchange import (EXCHANGE_COLUMNS, EXCHANGE_FIELDS, EXCHANGE_REASONS,
                                     EXCHANGE_RECORD_DTYPE, EXCHANGE_SCHEMA, ExchangeRows,
                                     JoinedHandshakes, exchange_table)
from webtap.records.tls import (COLUMNS, FIELDS, SCHEMA, TLS_OUT_DTYPE, empty_table, sorted_table,
                                to_table)
from webtap.writers import empty_batch_of

__all__ = ["analyze_tls", "iter_tls_batches", "TlsRun", "ExchangeRun", "COLUMNS", "SCHEMA", "TLS_OUT_DTYPE",
           "EXCHANGE_COLUMNS", "EXCHANGE_FIELDS", "EXCHANGE_RECORD_DTYPE", "EXCHANGE_REASONS",
           "EXCHANGE_SCHEMA", "ExchangeStage"]

class TlsRun:
    """One TLS record stage over a stream of packet batches (several traces in a row). The
    batches are processed in a thread of the stage's own, in order, while the caller goes on
    (the HTTP pairing, the next batch's walk): feed() hands a batch over, finish() and counters()
    wait for every batch handed over."""

    #: packet batches handed to the stage's thread before feed() waits for the oldest (each
    #: keeps its packets' bytes alive until done)
    JOBS_AHEAD = 3

    def __init__(self, gc_timeout: float = 60.0, max_pending: int = 1 << 15,
                 max_reassembly: int = 1024, stream: bool = False):

        self.table = TlsTable(gc_timeout=gc_timeout, max_pending=max_pending,
                              max_reassembly=max_reassembly)
        self._parts: list = []                      # TlsTable.take() results, in emit order
        # stream=True: the records whose place in frame order is settled leave as Arrow tables
        # while the run goes on (ready_tables), in order; the rest wait as numpy parts
        self.stream = stream
        self._next_try = self.STREAM_ROWS
        self._ready: collections.deque = collections.deque()
        self.handed_before = 0             # ready_tables: every handshake below it handed out
        # its thread frees its libcrypto state itself when it ends (thread_end), and finish()
        # waits for that: an exit right after could otherwise race the thread's exit destructors
        # (ext/out/digest.h)
        self._jobs = InFlight("tls-stage", self.JOBS_AHEAD, at_end=thread_end)

    #: records the C table gathers before they are taken out as numpy parts: the take has a
    #: fixed cost per call, which per packet batch was a fifth of the HTTP pass's time
    CONVERT_EVERY = 1 << 16

    #: with stream=True: records taken out of the C table at once, and the rows of a table handed
    #: out by ready_tables at least (one Parquet row group each, OnePass): the TLS Parquet file
    #: is encoded while the run goes on, not all after the last packet (issue 29)
    STREAM_ROWS = 1 << 12

    @property
    def watch(self):
        """The stage's watch list (a capsule) for webtap.dissect.dissect(tls_watch=...)."""
        return self.table.watch

    def feed(self, packets, data, msgs=None) -> None:
        """One packet batch; msgs: the stage's messages of it from the HTTP dissector's walk
        (MessageBatch.tls), else the stage walks the batch itself. Handed to the stage's thread
        (an earlier batch's error is raised here). The records wait as numpy parts; finish()
        makes the table, in frame order, once."""
        self._jobs.submit(self._feed, packets, data, msgs)

    def _feed(self, packets, data, msgs) -> None:
        """One batch, in the stage's thread (see feed)."""
        if msgs is None:
            self.table.feed(packets, data)
        else:
            self.table.feed_messages(msgs, data, len(packets))
        if self.stream:
            if self.table.records_waiting >= self._next_try:
                # the records below the bound, when there are STREAM_ROWS of them; the others
                # stay in the C table (tried again after STREAM_ROWS more records)
                before = self.table.ready_before
                part = self.table.take(before=before, min_rows=self.STREAM_ROWS)
                if part is not None:
                    self._ready.append((to_table(*part), before))
                self._next_try = self.table.records_waiting + self.STREAM_ROWS
        elif self.table.records_waiting >= self.CONVERT_EVERY:
            self._parts.append(self.table.take(ordered=True))

    def finish(self) -> pa.Table | None:
        """End of input (the waiting hellos leave as unmatched): every record so far as one
        table of SCHEMA in the order of its first frame (None if there is none). Called again
        (an interrupted run's partial output), it gives the records since. The stage's thread
        has ended when it returns (a later feed starts another)."""
        self._jobs.close()
        self.table.flush()
        if self.table.records_waiting:
            self._parts.append(self.table.take(ordered=True))
        parts, self._parts = self._parts, []
        tabs = self.ready_tables()
        if parts:
            tabs.append(sorted_table(parts))
        return _concat(tabs)

    def ready_tables(self) -> list:
        """With stream=True: the tables of records made since the last call whose place in frame
        order is settled (TlsTable.ready_before), in order: written now, they precede every
        record finish() gives. Called by the thread that feeds (the stage's thread appends).
        Then handed_before: the packet index below which every handshake has been handed out
        (the exchanges' join waits for it, OnePass)."""
        out = []
        while self._ready:
            tab, self.handed_before = self._ready.popleft()
            out.append(tab)
        return out

    def counters(self) -> dict:
        self._jobs.wait()
        return self.table.counters()


class TlsStage:
    """TlsRun as a stage of webtap.pipeline.Pipeline: its watch list goes to the walk, each
    batch's TLS messages come back from it; outputs are Arrow tables of handshakes."""

    def __init__(self, run: TlsRun):
        self.run = run

    @property
    def tls_watch(self):
        return self.run.watch

    def feed(self, batch, mb):
        return self.run.feed(batch.packets, batch.data, _own_tls(mb, self.run.watch))

    def finish(self):
        return self.run.finish()


def _own_tls(mb, watch):
    """The TLS stage's messages of a walked batch when the walk used this watch list (else
    None: the stage walks the batch itself)."""
    if mb is None or getattr(mb, "tls_watch", None) is not watch:
        return None
    return mb.tls


def iter_tls_batches(traces: str | os.PathLike | Iterable, bpf: str | None = None,
                     gc_timeout: float = 60.0, max_pending: int = 1 << 15,
                     max_reassembly: int = 1024, counters: dict | None = None,
                     progress: bool | None = False,
                     warnings: list | None = None) -> Iterator[pa.RecordBatch]:
    """Record batches of TLS handshakes of one or more traces (read in the order given, one
    table: a handshake may span files), through the one pipeline (webtap.pipeline). warnings:
    receives each trace's damage ('path: what')."""
    run = TlsRun(gc_timeout=gc_timeout, max_pending=max_pending, max_reassembly=max_reassembly)
    pipe = Pipeline(traces, [TlsStage(run)], bpf=bpf, progress=progress)
    try:
        for tab in pipe.outputs():
            yield from tab.to_batches()
    finally:
        if warnings is not None:
            warnings.extend(pipe.totals.warnings)
    if counters is not None:
        counters.update(run.counters())


def analyze_tls(traces, bpf: str | None = None, gc_timeout: float = 60.0,
                max_pending: int = 1 << 15, max_reassembly: int = 1024,
                counters: dict | None = None, warnings: list | None = None):
    """One row per TLS handshake (ClientHello <-> ServerHello) of the traces, as a DataFrame
    ordered by ClientHello (else ServerHello) frame."""
    batches = list(iter_tls_batches(traces, bpf=bpf, gc_timeout=gc_timeout,
                                    max_pending=max_pending, max_reassembly=max_reassembly,
                                    counters=counters, warnings=warnings))
    tab = pa.Table.from_batches(batches, schema=SCHEMA)      # in frame order (TlsRun.finish)
    return tab.to_pandas(types_mapper=None)


# ---------------------------------------------------------------------------------------------
# Output: text views (lists comma-joined) for CSV and the line format; Parquet keeps lists
# ---------------------------------------------------------------------------------------------
def text_view(batch: pa.RecordBatch | pa.Table) -> pa.Table:
    """Lists comma-joined, timestamps (epoch) and durations as seconds with 9 decimals (as the
    HTTP records).
    Written by C over the buffers (webtap._ext.textout): no pyarrow.compute, whose first call
    imports pandas (~0.2 s, ~40 MB of a text run)."""

    tab = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    cols = []
    for name in tab.column_names:
        col = tab[name]                # (combine_chunks would copy every column)
        t = col.type
        if pa.types.is_list(t):
            col = text_array(col, "raw")
        elif pa.types.is_timestamp(t) or pa.types.is_duration(t):
            col = seconds_text(col)
        cols.append(col)
    return pa.table(cols, names=tab.column_names)


TEXT_SCHEMA = None


def _text_schema() -> pa.Schema:
    global TEXT_SCHEMA
    if TEXT_SCHEMA is None:
        TEXT_SCHEMA = text_view(empty_table()).schema
    return TEXT_SCHEMA


def _ssl_log(batch: pa.RecordBatch | pa.Table) -> pa.RecordBatch:
    """Zeek's ssl.log view (httpanalyzer.zeek) of the records, which the TLS stage hands over as
    a Table (one per run), not a RecordBatch."""
    if isinstance(batch, pa.Table):
        batch = pa.RecordBatch.from_arrays(   # (a column without chunks: no pa.array, no pandas)
            [c.combine_chunks() if c.num_chunks else pa.nulls(0, c.type) for c in batch.columns],
            schema=batch.schema)
    return ssl_log_view(batch)


def _views() -> dict:
    return {"csv": text_view, "lines": text_view, "zeek": _ssl_log}


def open_output(run, path: str):
    """The records' output through the shared CLI layer (webtap.clikit: extension table, atomic
    write): Parquet keeps list columns, CSV and the line format get text_view."""
    parquet = path.endswith((".parquet", ".pq"))
    return run.output(path, views=_views(), schema=SCHEMA if parquet else _text_schema())


class ExchangeRun:
    """One exchange stage over a stream of packet batches (several traces in a row). The walk
    runs it (webtap.dissect.dissect(segment_tap=run)): segment by segment, in the walking
    thread, as it dissects each packet; walk() is the walk for a batch no walk ran it over
    (feeder consumers, --dask). Its records are taken from the C table in the caller's thread
    (collect, finish) under `lock`, which the walk holds for each batch.

    stream=True (one trace or a live capture: frame numbers that only grow): ready() hands out
    the records whose place in frame order is settled while the run goes on (OnePass writes
    them, a row group each), as TlsRun does the handshakes; finish() gives the rest."""

    #: with stream=True: the records ready() hands out at once at least: a Parquet row group
    #: of the size the HTTP records get (webtap.parquetsink.ParquetWriter.ROW_GROUP_ROWS, not
    #: imported: pyarrow.parquet is loaded only for a Parquet output; a test keeps the two
    #: equal). ready() looks when STREAM_ROWS more records came, and when the handshakes the
    #: join needs moved on (TlsRun handed out a table). Each row group costs a column writer,
    #: a dictionary page and a zstd context per column: 4,096-record groups, as the
    #: handshakes', were measured slower on the TLS bench trace; 8,192 (72 % of its exchanges
    #: then written while the run goes on, at the handshakes' one hand-out) was no faster in
    #: wall time and took 3 % more CPU: the walk's two cores are as busy as the end's
    #: (docs/PERFORMANCE.md "Fourteenth session", "Fifteenth session")
    STREAM_ROWS = 1 << 15

    def __init__(self, gc_timeout: float = 60.0, max_pending: int = 1 << 15,
                 max_conns: int = 1 << 16, stream: bool = False):
        if sizeof_exchange_record() != EXCHANGE_RECORD_DTYPE.itemsize:
            raise RuntimeError("EXCHANGE_RECORD_DTYPE does not match ext/pair/exchange.pyx XRecord")
        self.table = ExchangeTable(gc_timeout=gc_timeout, max_pending=max_pending,
                                   max_conns=max_conns)
        self.tap = self.table.tap              # the C stage, for the walk (ext/walk/message.pxd)
        self.lock = threading.Lock()
        self.stream = stream
        self._raw: list = []                   # records taken, not handed out (raw rows)
        self._nraw = 0
        self._next_try = self.STREAM_ROWS
        # the C table's bounds (ExchangeTable.bounds) when the records in _raw were taken
        self._before = 0
        self._next_hello = 0
        self._hellos = np.zeros(0, np.uint64)
        self._tried = 0                        # the bound ready() looked below last
        #: after ready(): (the ClientHello frames of the connections a record not handed out
        #: yet can belong to, the frame from which the connections not seen yet start): the
        #: other handshakes are no longer needed (JoinedHandshakes.keep)
        self.needed = (np.zeros(0, np.uint64), 0)
        self._rows: ExchangeRows | None = None     # start_rows()'s result
        self._job: InFlight | None = None

    def walk(self, packets, data, tls_watch=None):
        """A batch no walk ran this stage over: walked here for it (and for the TLS stage when
        its watch list is given: that stage's messages are returned)."""
        with self.lock:
            res = dissect_batch(packets, np.asarray(data), None, tls_watch, 0, None, None, self.tap)
        self.collect()
        return res[2] if tls_watch is not None else None

    def collect(self, force: bool = False) -> None:
        """stream: when STREAM_ROWS more records may be ready, the records made so far taken out
        of the C table with its bounds, when the walk is not in it (never waits for the walk:
        tried again at the next call). Otherwise they stay in the table's own buffer, taken
        once (finish) or once per row group handed out: one buffer handed over, not a part per
        packet batch to be joined at the end. force (ready(moved=True)): now, waiting for the
        walk's batch, when there are STREAM_ROWS records in all."""
        if not self.stream:
            return
        if self.lock.acquire(blocking=force):
            try:
                if self._nraw + self.table.records < (self.STREAM_ROWS if force else self._next_try):
                    return
                raw = self.table.take()
                self._before, self._next_hello, self._hellos = self.table.bounds()
            finally:
                self.lock.release()
            self._raw.append(raw)
            self._nraw += raw.size // EXCHANGE_RECORD_DTYPE.itemsize

    def ready(self, limit: int, moved: bool = False) -> np.ndarray | None:
        """stream: the records taken so far whose first frame (the request's, else the
        response's) is below both the stage's bound and `limit` (a packet index: the handshakes
        handed out so far, for the join), raw (EXCHANGE_RECORD_DTYPE), when there are
        STREAM_ROWS of them; every record handed out later sorts after them. None otherwise
        (tried again after STREAM_ROWS more records, or when `moved`: the limit moved on)."""
        if not self.stream:
            return None
        if moved:
            self.collect(force=True)
        elif self._nraw < self._next_try:
            return None
        if self._nraw < self.STREAM_ROWS:
            return None
        bound = min(self._before, limit)
        if bound <= self._tried:
            # no record taken since can start below a bound that did not move (each starts at
            # or after the bound read when it was taken): nothing to look at again (a request
            # that waits its GC timeout holds the bound, and the records behind it pile up)
            self._next_try = self._nraw + self.STREAM_ROWS
            return None
        self._tried = bound
        return self._below(bound, self.STREAM_ROWS)

    def _below(self, bound: int, min_rows: int) -> np.ndarray | None:
        """The records of _raw whose first frame (1-based) is at most `bound` (a 0-based packet
        index) when there are min_rows of them; the others stay."""
        raw = np.concatenate(self._raw).view(EXCHANGE_RECORD_DTYPE) if len(self._raw) > 1 \
            else self._raw[0].view(EXCHANGE_RECORD_DTYPE)
        first = np.where(raw["has_req"] == 1, raw["req_frame"], raw["resp_frame"])
        below = first <= np.uint64(bound)
        out = None
        if np.count_nonzero(below) >= min_rows:
            out, raw = raw[below], raw[~below]
        self._raw = [raw.view(np.uint8).reshape(-1)] if len(raw) else []
        self._nraw = len(raw)
        self._next_try = self._nraw + self.STREAM_ROWS
        if out is not None:
            # the connections of the records still held, waiting or open when they were taken
            self.needed = (np.unique(np.concatenate([self._hellos, raw["ch_frame"]])),
                           self._next_hello)
        return out

    def finish(self) -> np.ndarray | ExchangeRows:
        """End of input (the walk done, or stopped: an interrupted run): every record not
        handed out (by ready), raw (EXCHANGE_RECORD_DTYPE), or as ExchangeRows when
        start_rows() ran (exchange_table takes either)."""
        if self._job is not None:
            self._job.close()
            self._job = None
        rows, self._rows = self._rows, None
        return rows if rows is not None else self._finish_raw()

    def start_rows(self) -> None:
        """End of input: the waiting requests flushed, the records taken and put in frame order
        (ExchangeRows) in a thread of their own while the caller finishes the other stages and
        puts the handshakes in order; finish() hands them over. Once: a second call does
        nothing."""
        if self._job is not None or self._rows is not None:
            return
        self._job = InFlight("webtap-exchange", depth=1)
        self._job.submit(self._rows_job)

    def _rows_job(self) -> None:
        self._rows = ExchangeRows(self._finish_raw())

    def _finish_raw(self) -> np.ndarray:
        with self.lock:
            self.table.flush()
            raw = self.table.take()
        if self._raw:                  # held back by ready() (stream)
            raw = np.concatenate(self._raw + [raw])
        self._raw = []
        self._nraw = 0
        return raw.view(EXCHANGE_RECORD_DTYPE)

    def counters(self) -> dict:
        with self.lock:
            return self.table.counters()


class ExchangeStage:
    """ExchangeRun as a stage of webtap.pipeline.Pipeline: the walk runs it (segment_tap); its
    records are taken as the batches come and at the end (finish)."""

    def __init__(self, run: ExchangeRun):
        self.run = run
        self.segment_tap = run
        self.raw = None

    def feed(self, batch, mb):
        if getattr(mb, "segment_tap", None) is not self.run:
            self.run.walk(batch.packets, batch.data)
        else:
            self.run.collect()

    def finish(self):
        self.raw = self.run.finish()


def open_exchange_output(run, path: str):
    """The exchange records' output through the shared CLI layer (webtap.clikit: extension
    table, atomic write, .partial on interrupt): Parquet keeps the list column, CSV and the line
    format get httpanalyzer.tls.text_view (lists comma-joined, times as seconds)."""
    parquet = path.endswith((".parquet", ".pq"))
    views = {"csv": text_view, "lines": text_view}
    schema = EXCHANGE_SCHEMA if parquet else text_view(empty_exchange_table()).schema
    return run.output(path, views=views, schema=schema)


def empty_exchange_table() -> pa.Table:
    return pa.Table.from_batches([empty_batch_of(EXCHANGE_SCHEMA)])


class OnePass:
    """`httpanalyzer TRACE -o http.parquet --tls-out tls.parquet`: the TLS stage fed with the
    packet batches the HTTP pass reads (iter_record_batches(packet_hook=...)), in this process
    whatever the HTTP pairing mode (one process, feeder consumers): the same records as
    `httpanalyzer tls`."""

    def __init__(self, run, out: str | None, gc_timeout: float = 60.0, max_pending: int = 1 << 15,
                 max_reassembly: int = 1024, exchanges_out: str | None = None,
                 stream: bool = False, keep: bool = True):
        self.o = open_output(run, out) if out is not None else None
        self.xo = open_exchange_output(run, exchanges_out) if exchanges_out is not None else None
        # stream (one trace or a live capture: frame numbers that only grow), with an output:
        # the handshakes and the exchanges whose place in frame order is settled are written
        # while the run goes on (TlsRun.ready_tables, ExchangeRun.ready), a row group each;
        # only the rest is made and encoded after the last packet. Several traces number their
        # frames each from 1, and the records of all are sorted by frame at the end (as before)
        stream = stream and (self.o is not None or self.xo is not None)
        self.run = TlsRun(gc_timeout=gc_timeout, max_pending=max_pending,
                          max_reassembly=max_reassembly, stream=stream)
        self.written: list = []            # the tables written so far (prepare joins them)
        # keep: the tables written while the run goes on are kept for prepare()'s whole tables
        # (--plots); else dropped once written, so that a long live capture holds only the
        # records still waiting for their place (prepare() gives the rest) and the handshakes
        # an exchange still to come may be joined to (JoinedHandshakes)
        self.keep = keep
        self.streamed = 0                  # tables written while the run went on
        self.x = self.xtab = None
        self.xwritten: list = []           # with keep: the exchange tables written so far
        self.hs = JoinedHandshakes()       # the handshakes the exchanges are joined to
        self.tab = None                    # the handshakes, once prepare() made them
        if self.xo is not None:
            self.x = ExchangeRun(gc_timeout=gc_timeout, max_pending=max_pending, stream=stream)
        self.packets = 0                   # packets fed (for `interrupted ... after N packets`)
        self.cli = run
        run.on_interrupt(self._keep)       # SIGINT/SIGTERM: the records so far, as partial

    def _keep(self) -> None:
        """The run was interrupted: the handshakes so far (the waiting hellos flushed as
        unmatched, as the HTTP records' are) into the output, which clikit keeps as
        OUT.partial.EXT (the exchanges so far likewise)."""
        if (self.o is None or self.o.done) and (self.xo is None or self.xo.done):
            return
        tab = self.run.finish()
        if self.o is not None and not self.o.done and tab is not None and tab.num_rows:
            self.o.write(tab)
        if self.xo is not None and not self.xo.done:
            self.hs.add(tab)
            xt = exchange_table(self.x.finish(), self.hs.table())
            if xt.num_rows:
                self.xo.write(xt)

    @property
    def tls_watch(self):
        """Read by httpanalyzer.stream: the HTTP pass's dissector then finds this stage's
        messages in the same walk over the packets."""
        return self.run.watch

    @property
    def segment_tap(self):
        """Read by the pipeline's walk (webtap.pipeline): it runs the exchange stage itself,
        segment by segment (--exchanges-out); None: no exchange stage."""
        return self.x

    def feed(self, batch, mb=None) -> None:
        """A stage of the pipeline (webtap.pipeline): one packet batch and its walked batch."""
        packets, data = batch.packets, batch.data
        self.packets += len(packets)
        msgs = _own_tls(mb, self.run.watch)
        if self.x is not None:
            if getattr(mb, "segment_tap", None) is self.x:
                self.x.collect()
            else:
                # no walk ran the exchange stage over this batch (feeder consumers, --dask): one
                # walk here for it, and for the TLS stage if no walk found its messages either
                found = self.x.walk(packets, data, self.run.watch if msgs is None else None)
                if msgs is None:
                    msgs = found
        self.run.feed(packets, data, msgs)
        if self.run.stream:
            # a signal does not cut this short (it takes effect at the next check): records
            # handed out and not yet written would be in neither the output nor what _keep
            # writes of an interrupted run
            with self.cli.shielded():
                self._stream()

    def _stream(self) -> None:
        """stream: the handshakes and exchanges whose place is settled written (a row group
        each, encoded in the writer's thread)."""
        tabs = self.run.ready_tables()
        for tab in tabs:
            if self.o is not None:
                self.o.write(tab)
                self.o.flush()             # one row group, encoded in the writer's thread
                self.streamed += 1
            if self.keep:
                self.written.append(tab)
            if self.x is not None:
                self.hs.add(tab)
        if self.x is not None:
            raw = self.x.ready(self.run.handed_before, moved=bool(tabs))
            if raw is not None:
                self._write_exchanges(raw, self.hs.table())
                self.hs.keep(*self.x.needed)

    def _write_exchanges(self, raw, hs) -> None:
        xt = exchange_table(raw, hs)
        self.xo.write(xt)
        self.xo.flush()                    # one row group, encoded in the writer's thread
        if self.keep:
            self.xwritten.append(xt)

    def finish(self) -> None:
        """The end of the input (a stage's finish, webtap.pipeline; the HTTP pass calls it when
        its input ends, httpanalyzer.stream): the exchanges still held are put in frame order in
        a thread of their own (ExchangeRun.start_rows) while the HTTP pass makes its last
        records; the outputs are written by prepare() and commit() (after the HTTP records)."""
        if self.x is not None:
            self.x.start_rows()

    def prepare(self) -> pa.Table:
        """The end of the run, before the outputs are committed: the handshakes as one table in
        frame order (with keep=False, those not written while the run went on) and the
        exchanges not written yet joined to them, each handed to its output, whose Parquet
        encoding starts in the output's writer thread (Output.flush). The caller commits the
        HTTP records meanwhile, then commit() waits for these and puts them in place: the three
        files are encoded at once instead of one after another (issue 29, 33)."""
        if self.tab is None:
            if self.x is not None:
                self.x.start_rows()        # in a thread of its own, unless finish() started it
            tab = self.run.finish()
            if self.o is not None and (tab is not None or not self.streamed):
                self.o.write(tab if tab is not None else empty_table())
                self.o.flush()
            if self.xo is not None:
                self.hs.add(tab)
                xt = exchange_table(self.x.finish(), self.hs.table())
                if xt.num_rows or not self.xo.rows:
                    self.xo.write(xt)
                    self.xo.flush()
                # every exchange with keep (--plots), else those not written while it went on
                self.xtab = _concat(self.xwritten + [xt])
            tab = _concat(self.written + ([tab] if tab is not None else []))
            self.tab = tab if tab is not None else empty_table()
        return self.tab

    def commit(self) -> pa.Table:
        """The outputs in place (after prepare(), which it calls if the caller did not)."""
        tab = self.prepare()
        if self.o is not None:
            self.o.commit()
        if self.xo is not None:
            self.xo.commit()
        return tab

    def counters(self) -> dict:
        c = self.run.counters()
        if self.x is not None:
            c.update({f"exchange_{k}": v for k, v in self.x.counters().items()})
        return c


def _concat(tabs: list) -> pa.Table | None:
    """The tables one after another (None when there is none)."""
    if not tabs:
        return None
    return tabs[0] if len(tabs) == 1 else pa.concat_tables(tabs)


def feed_traces(one: OnePass, traces, bpf: str | None = None, warnings: list | None = None):
    """Read the traces into a OnePass through the one pipeline; returns (the unreadable ones as
    'path: why' lines, the pipeline's totals). warnings: receives the damage each trace showed
    ('path: what')."""
    pipe = Pipeline(traces, [one], bpf=bpf, skip_unreadable=True)
    try:
        pipe.run()
    finally:
        if warnings is not None:
            warnings.extend(pipe.totals.warnings)
    return pipe.totals.unreadable, pipe.totals


def build_parser():
    ap = argparse.ArgumentParser(
        prog="httpanalyzer tls",
        description="TLS handshake records: one row per ClientHello/ServerHello pair (SNI, ALPN, "
                    "versions, cipher, JA3/JA3S/JA4, handshake time), paired like HTTP "
                    "transactions (ServerHello SEQ = ClientHello ACK). Exit codes: 0 success, "
                    "1 nothing could be read, 2 usage error.")
    ap.add_argument("traces", nargs="+", metavar="TRACE")
    ap.add_argument("-f", "--filter", dest="bpf", metavar="BPF", help="BPF filter (tcpdump syntax)")
    ap.add_argument("-o", "--output", metavar="OUT",
                    help=clikit.output_help("handshake records") + "; default: lines on stdout")
    clikit.add_gc_timeout(ap, "a hello")
    ap.add_argument("--max-pending", type=clikit.max_pending, default=1 << 15, metavar="N",
                    help="waiting hellos at most (oldest evicted, reason cap; 1 .. 2**30; "
                         "default 32768)")
    ap.add_argument("--max-reassembly", type=clikit.number(int, 1, 1 << 20), default=1024,
                    metavar="N",
                    help="split hellos reassembled at once (32 KiB each at most; 1 .. 2**20; "
                         "default 1024)")
    ap.add_argument("--exchanges-out", metavar="OUT",
                    help="also write the request/response exchanges inside TLS over TCP (one row "
                         "per request's first packet paired by ACK = SEQ, docs/TLS.md "
                         "\"Exchanges\") to OUT (.csv, .parquet, .txt, .jsonl, .log), from the "
                         "same walk over the packets")
    ap.add_argument("--summary", action="store_true", help="print the counters to stderr")
    ap.add_argument("--plots", metavar="DIR",
                    help="write the figures (handshake-time CCDF TCP vs QUIC, versions, ALPN, "
                         "top SNIs, ECH share, ClientHello segments; with --exchanges-out the "
                         "exchanges' response-time CCDF per SNI and per ALPN) as PNG to DIR")
    clikit.add_common(ap)
    clikit.files(ap, inputs=("traces",), outputs={"output": "-", "exchanges_out": None})
    return ap


def handle(a, run, parts=None) -> int:
    """parts: the registry's optional parts (httpanalyzer.cli.Parts): the figures of --plots
    (httpanalyzer.tls_plot: matplotlib, pandas) come from it, loaded only when asked."""
    if a.plots is not None and parts is None:
        raise clikit.UsageError("--plots needs the httpanalyzer command (its registry loads the figures)")
    a.traces = [clikit.trace_path(t) for t in a.traces]
    if a.bpf:
        try:
            compile_filter(a.bpf)
        except BpfError as e:
            raise clikit.UsageError(f"bad filter: {clikit.describe(e)}, -f {a.bpf!r}") from None
    one = OnePass(run, a.output or "-", gc_timeout=a.gc_timeout, max_pending=a.max_pending,
                  max_reassembly=a.max_reassembly, exchanges_out=a.exchanges_out,
                  stream=len(a.traces) == 1, keep=bool(a.plots))
    run.packets = lambda: one.packets
    damage: list = []
    bad, totals = feed_traces(one, a.traces, bpf=a.bpf, warnings=damage)
    run.warn_traces(damage)
    for b in bad:
        run.error(clikit.what_where(b))
    if len(bad) == len(a.traces):
        raise clikit.Exit(1)
    tab = one.commit()
    if a.plots:
        figs = parts.tls_plot.tls_figures(tab.to_pandas())
        if one.xo is not None:
            figs.update(parts.tls_plot.exchange_figures(one.xtab.to_pandas()))
        for p in save_figures(figs, a.plots):
            run.note(f"wrote {p}")
    if a.summary:
        for k, v in one.counters().items():
            print(f"{k:28s} {v}", file=sys.stderr)
        print(f"{'executor':28s} {totals.executor}", file=sys.stderr)
    return 0


def cli(argv=None, parts=None) -> int:
    """`httpanalyzer tls TRACE... [-f BPF] [-o OUT.{csv,parquet,txt}]`; parts: the registry's
    optional parts (httpanalyzer.cli.Parts), which the httpanalyzer command hands in."""
    return clikit.main("httpanalyzer tls", build_parser(), lambda a, run: handle(a, run, parts),
                       list(argv or []))
