"""analyze(): traces -> capture -> dissect -> pairing -> Arrow record batches -> DataFrame.

Several traces form one stream in capture-time order: their message batches are merged by
timestamp (a k-way merge over runs of messages, so traces that do not overlap in time cost one
feed per batch), and one pairing table sees them all; a request in one file can pair with its
response in the next.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:                   # annotations only
    import pyarrow as pa

import os
from collections import Counter
from typing import Iterable, Iterator

import numpy as np

import httpanalyzer as executors
from httpanalyzer.errors import ConsumerFailed
from httpanalyzer.pairing import Pairer
from webtap import records as kinds
from webtap.pipeline import Pipeline, is_pipe
from webtap.stream import Totals, merge_by_time

# pyarrow (webtap.records.http, which builds the schema with it, and webtap.records.httpcompute)
# is loaded through the record-kind table (webtap.records) where a record batch is first made or
# counted, not here: a run reads its first packet before it has any record, and start-up is
# part of every run. The executors with consumer processes (httpanalyzer.feeder and
# httpanalyzer.fanout: multiprocessing, pyarrow) come from the package's executor table
# (httpanalyzer.EXECUTORS) when chosen (consumers >= 1).

__all__ = ["analyze", "iter_record_batches", "Summary"]


def _message_batches(path: str, bpf: str | None, stats: "Summary", live: bool = False,
                     progress: bool | None = None, executor: str | None = None,
                     dissector=None, packet_hook=None, on_ready=None) -> Iterator[tuple]:
    """(msgs, data, last_packet_ts_ns) per packet batch of one trace (or live interface), from
    the one pipeline (webtap.pipeline); its totals land in `stats` when the source ends. One
    unreadable file does not end the stream: it is listed in stats.unreadable and the others
    are read. dissector: the walk (default: the pipeline's, which also finds the TLS stage's
    messages when packet_hook has a watch list; the feeder's reader passes classify_packets:
    msgs are then the HTTP first packets, which its consumers dissect). packet_hook: a stage of
    the same pipeline (the one-pass TLS records). on_ready (live): called with the capture once
    it is open and filtered."""
    pipe = Pipeline(path, [packet_hook] if packet_hook is not None else [], bpf=bpf, live=live,
                    executor=executor, progress=progress, skip_unreadable=True,
                    dissector=dissector, on_ready=on_ready)
    if not stats.executor:
        stats.executor = f"{pipe.executor}: {pipe.why}"
    gen = pipe.batches()
    try:
        for batch, mb in gen:
            pk = batch.packets
            if packet_hook is not None:
                packet_hook.feed(batch, mb)     # the same batch, a second stage (TLS records)
            if len(pk):
                yield mb.msgs, batch.data, int(pk["ts_ns"].max())
    finally:
        gen.close()
        stats.absorb(pipe.totals)


class Summary:
    """Counts and distributions of one run (filled while the batches stream).

    A plain class, not a dataclass, as webtap.stream.Totals: the dataclass decorator compiles
    its generated methods with exec() at import, part of every command's start-up (issue 29).
    detailed: distributions (status, methods, response-time percentiles) cost a few ms per
    batch; without them only record and outcome counts are kept (the CLI asks with --summary).
    executor: "name: why" of the executor that ran (webtap.pipeline's or feeder/fanout)."""

    _FIELDS = ("packets", "bytes", "records", "outcomes", "status", "methods", "dissect", "source",
               "warnings", "unreadable", "interrupted", "executor", "pairing", "_rt", "detailed")
    __match_args__ = _FIELDS

    def __init__(self, packets: int = 0, bytes: int = 0, records: int = 0,
                 outcomes: Counter | None = None, status: Counter | None = None,
                 methods: Counter | None = None, dissect: Counter | None = None,
                 source: Counter | None = None, warnings: list | None = None,
                 unreadable: list | None = None, interrupted: bool = False, executor: str = "",
                 pairing: dict | None = None, _rt: list | None = None,
                 detailed: bool = True) -> None:
        self.packets = packets
        self.bytes = bytes
        self.records = records
        self.outcomes = Counter() if outcomes is None else outcomes
        self.status = Counter() if status is None else status
        self.methods = Counter() if methods is None else methods
        self.dissect = Counter() if dissect is None else dissect
        self.source = Counter() if source is None else source
        self.warnings = [] if warnings is None else warnings
        self.unreadable = [] if unreadable is None else unreadable
        self.interrupted = interrupted
        self.executor = executor
        self.pairing = {} if pairing is None else pairing
        self._rt = [] if _rt is None else _rt
        self.detailed = detailed

    def _values(self) -> tuple:
        return tuple(getattr(self, f) for f in self._FIELDS)

    def __eq__(self, other):
        return self._values() == other._values() if other.__class__ is self.__class__ else NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return "Summary(" + ", ".join(f"{f}={getattr(self, f)!r}" for f in self._FIELDS) + ")"

    def absorb(self, totals) -> None:
        """Add what the capture and dissect stages counted for one source (webtap.stream.Totals)."""
        self.packets += totals.source["packets"]
        self.bytes += totals.source["wire_bytes"]
        for k, v in totals.source.items():
            self.source[k] += v
        for k, v in totals.dissect.items():
            self.dissect[k] += v
        self.warnings.extend(totals.warnings)
        self.unreadable.extend(totals.unreadable)

    def add(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        self.records += batch.num_rows
        if not self.detailed:
            n_paired = batch.column("matched").true_count
            self.outcomes["paired"] += n_paired
            self.outcomes["unmatched"] += batch.num_rows - n_paired
            return
        # pyarrow.compute (~40 ms of import the plain stream does not need): webtap.records.httpcompute
        counts, rt = kinds.httpcompute.tally(batch)
        for name, col in (("outcome", self.outcomes), ("status", self.status),
                          ("method", self.methods)):
            col.update(counts[name])
        self._rt.append(rt)

    def response_time_percentiles(self, qs=(50, 90, 99, 99.9)) -> dict[float, float]:
        rt = np.concatenate(self._rt) if self._rt else np.empty(0, np.int64)
        if len(rt) == 0:
            return {}
        return {q: float(np.percentile(rt, q)) / 1e9 for q in qs}

    def not_paired(self) -> dict[str, int]:
        """Every HTTP message that did not end up in a paired record, by reason."""
        return {k: v for k, v in self.pairing.items()
                if ("unmatched" in k or k in ("final_response_missing", "bad_kind")) and v}

    def table(self) -> str:
        rows = [("packets", self.packets), ("bytes on the wire", self.bytes),
                ("HTTP messages", self.pairing.get("messages", 0)),
                ("records", self.records)]
        rows += [(f"  {k}", v) for k, v in sorted(self.outcomes.items())]
        rows += [("paired (after a 1xx)", self.pairing.get("paired_after_interim", 0)),
                 ("out of order", self.pairing.get("out_of_order", 0))]
        out = _fmt("Transactions", rows)
        pct = self.response_time_percentiles()
        if pct:
            out += _fmt("Response time (s, final responses)", [(f"p{q:g}", f"{v:.6f}") for q, v in pct.items()])
        out += _fmt("Top status codes", self.status.most_common(10))
        out += _fmt("Top methods", self.methods.most_common(10))
        out += _fmt("HTTP messages not in a paired record, by reason",
                    sorted(self.not_paired().items()) or [("(none)", 0)])
        other = {k: v for k, v in self.pairing.items() if v and k in (
            "request_repeat", "response_repeat", "clock_backwards", "clock_reset", "no_host",
            "status_odd", "bad_span", "text_clipped", "text_latin1", "arena_full", "peak_pending")}
        if other:
            out += _fmt("Pairing events", sorted(other.items()))
        for title, d in (("Capture counters", self.source), ("Dissector counters", self.dissect)):
            nz = {k: v for k, v in d.items() if v}
            if nz:
                out += _fmt(title, sorted(nz.items()))
        for w in self.warnings:
            out += f"warning: {w}\n"
        for w in self.unreadable:
            out += f"unreadable: {w}\n"
        return out


def _fmt(title: str, rows) -> str:
    rows = [(str(k), str(v)) for k, v in rows]
    w = max([len(k) for k, _ in rows] + [10])
    v = max([len(x) for _, x in rows] + [5])
    return f"\n{title}\n{'-' * (w + v + 2)}\n" + "".join(f"{k:<{w}}  {x:>{v}}\n" for k, x in rows)


def iter_record_batches(sources: str | os.PathLike | Iterable, bpf: str | None = None,
                        gc_timeout: float = 60.0, summary: Summary | None = None,
                        progress: bool | None = False, live: bool = False,
                        consumers: int | None = None, feeder: dict | None = None,
                        feeder_options: dict | None = None, packet_hook=None,
                        capture: str | None = None, max_packets: int | None = None,
                        on_ready=None, **table_options) -> Iterator[pa.RecordBatch]:
    """Stream records as Arrow batches (records.SCHEMA) from one trace or several (merged by
    capture time as one stream), or with live=True from one interface until Ctrl-C (which ends
    the input: everything waiting is flushed and yielded). Memory is bounded by the GC window
    and the table's caps, not by the trace size. progress: a bar per file (None: on a tty).

    consumers=N (>= 1) pairs in N consumer processes fed through shared-memory rings
    (httpanalyzer.feeder; same records as one process, in another order); None or 0: here.
    feeder: a dict that receives the feeder's balance report (httpanalyzer.balance.balance_table);
    feeder_options: more FeederPairer arguments (ring_bytes, start_method, drain_only).
    packet_hook: a stage (webtap.pipeline) fed every packet batch read, in this process (the
    one-pass TLS records of `--tls-out`: httpanalyzer.tls.OnePass), its finish() called when the
    input ends (not when a signal ended it), before the last records are made. When it has a
    `tls_watch` (a TLS stage's watch list) and the HTTP dissector runs here, the one walk also
    finds the TLS stage's messages (MessageBatch.tls); otherwise (the feeder's reader only
    classifies packets) the hook walks the batch itself.
    capture="fanout" (live with consumers only): the kernel splits the traffic over N AF_PACKET
    rings, one per consumer process (httpanalyzer.fanout; feeder_options: mode 'hash' or 'eq3',
    on_ready); `feeder` then receives the per consumer packets, messages and the kernel's
    drop counters; max_packets ends the capture
    once the consumers have processed that many packets (else Ctrl-C ends it).
    on_ready (live): called once the capture is ready to keep every packet -- with the
    LiveCapture (its describe() is the readiness line), or with None for a fanout capture once
    every consumer reads its ring."""
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    sources = [os.fspath(s) for s in sources]
    if live and len(sources) != 1:
        raise ValueError("live capture takes exactly one interface")
    stats = summary if summary is not None else Summary()
    if capture not in (None, "feeder", "fanout"):
        raise ValueError(f"unknown capture {capture!r} (use 'feeder' or 'fanout')")
    if capture == "fanout":
        if not (live and consumers):
            raise ValueError("capture='fanout' is live capture with consumers >= 1")
        options = dict(feeder_options or {})
        if on_ready is not None:
            options["on_ready"] = lambda: on_ready(None)
        stats.executor = f"fanout: {consumers} consumer processes, each reading its AF_PACKET ring"
        yield from _fanout_batches(sources[0], consumers, bpf, gc_timeout, stats, feeder,
                                   max_packets, options, table_options)
        return
    dissector = None
    if consumers:
        FeederPairer, classify_packets = executors.feeder.FeederPairer, executors.feeder.classify_packets
        pairer = FeederPairer(consumers, gc_timeout=gc_timeout, live=live,
                              **(feeder_options or {}), **table_options)
        # The paper's split: the reader walks each packet to TCP and the first payload bytes
        # (the dissector's own rule), routes the HTTP first packets; the consumers dissect them.
        dissector = classify_packets
        stats.executor = (f"feeder: {consumers} consumer process{'es' if consumers > 1 else ''} "
                          "pair what the reader routes to them")
    else:
        pairer = Pairer(gc_timeout=gc_timeout, **table_options)
    if len(sources) == 1 and not live:
        # The pipeline's readahead executor (its default for one file): one thread reads a few
        # batches ahead, a second walks them, and this one pairs and hands records to the sink
        # (with consumers: the walk is classify_packets, here, and this thread dispatches).
        # Not live: Ctrl-C must reach the capture loop, which only the main thread sees.
        gens = [_message_batches(sources[0], bpf, stats, progress=progress, executor=None,
                                 dissector=dissector, packet_hook=packet_hook)]
    else:
        gens = [_message_batches(p, bpf, stats, live=live, progress=progress, executor="inline",
                                 dissector=dissector, packet_hook=packet_hook, on_ready=on_ready)
                for p in sources]
        if len(sources) > 1 and not stats.executor:
            stats.executor = (f"inline: {len(sources)} inputs, their messages merged by capture "
                              "time for one pairing table")

    def feed(i, msgs, data, last):
        pairer.feed(msgs, data, trace=i)
        if last is not None and live:
            # On an interface the clock also moves across stretches without HTTP (and on wall
            # time when idle). A file's clock is its HTTP messages' alone: the records then do
            # not depend on how the reader cuts it into batches.
            pairer.advance(last)

    def taken():
        b = pairer.take()
        stats.add(b)
        return [b] if b.num_rows else []

    # A pipe or FIFO (`tcpdump -w - | httpanalyzer -`) streams: the records a batch completed
    # leave at once, since the next batch may come much later (a file's records leave in
    # large batches: due()).
    # (With consumers, each sends what it paired after SEND_EVERY_S.)
    streaming = not live and not consumers and any(is_pipe(s) for s in sources)

    def after():
        return taken() if pairer.due() or (streaming and pairer.table.records_waiting) else ()

    def idle(last):
        if not live:
            return ()
        pairer.advance(last)
        return taken() if pairer.due() else ()

    def interrupted():
        stats.interrupted = True

    try:
        try:
            yield from merge_by_time(gens, feed, after, idle, stop=lambda: stats.interrupted,
                                     interrupted=interrupted)
        except KeyboardInterrupt:
            # Ctrl-C / SIGTERM while dissecting or pairing (not only while reading): the input
            # ends here too, and what waits is flushed below
            stats.interrupted = True
        if packet_hook is not None and not stats.interrupted:
            # the input ended: a stage with work at the end starts it (the one-pass TLS stage's
            # exchanges put in order in a thread of their own) while the records below are made
            packet_hook.finish()
        pairer.flush()
        # nothing waiting (a run without records): no empty batch, so such a run never imports
        # pyarrow and the record schema (start-up of a header-only trace, issue 21)
        if consumers or pairer.table.records_waiting:
            b = pairer.take()
            stats.add(b)
            if b.num_rows:
                yield b
    except ConsumerFailed:
        # Records the surviving consumers hold are not lost: they flush and we pass them on.
        b = pairer.salvage()
        stats.add(b)
        if b.num_rows:
            yield b
        raise
    finally:
        stats.pairing = pairer.counters()
        if consumers:
            dc = pairer.dissect_counters()
            for k in executors.feeder.MESSAGE_COUNTERS:
                stats.dissect[k] += dc[k]
            if feeder is not None:
                feeder.update(pairer.balance())
            pairer.close()
        for g in gens:
            g.close()


def _fanout_batches(iface, consumers, bpf, gc_timeout, stats, feeder, max_packets, options,
                    table_options):
    iter_fanout_batches = executors.fanout.iter_fanout_batches
    totals = Totals()
    balance: dict = {}
    try:
        for b in iter_fanout_batches(iface, consumers, bpf=bpf, gc_timeout=gc_timeout,
                                     totals=totals, max_packets=max_packets, balance=balance,
                                     **options, **table_options):
            stats.add(b)
            yield b
    finally:
        stats.absorb(totals)
        stats.pairing = balance.pop("pairing", {})
        stats.interrupted = stats.interrupted or balance.get("interrupted", False)
        if feeder is not None:
            feeder.update(balance)


def analyze(path_or_iface, bpf: str | None = None, gc_timeout: float = 60.0,
            summary: Summary | None = None, live: bool = False, consumers: int | None = None,
            feeder: dict | None = None, **table_options):
    """All records of one or several traces (or, live=True, of an interface until Ctrl-C) as a
    DataFrame (see webtap.records.http for the columns and dtypes). For traces larger than
    memory use iter_record_batches(). consumers=N: pair in N feeder consumer processes; the
    merged records are then sorted by request time (unmatched responses by response time).
    headers=["Referer", ...]: per name the columns request_referer / response_referer (the value
    in the message's first packet, '' when absent there) and the two *_headers_incomplete flags."""
    batches = list(iter_record_batches(path_or_iface, bpf=bpf, gc_timeout=gc_timeout,
                                       summary=summary, live=live, consumers=consumers,
                                       feeder=feeder, **table_options))
    table = kinds.httpcompute.table(batches, kinds.http.schema_for(table_options.get("headers")))
    if consumers:
        table = kinds.httpcompute.sort_by_time(table)
    return kinds.http.to_pandas(table)
