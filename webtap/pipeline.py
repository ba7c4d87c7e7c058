"""The one pipeline: sources -> the walk -> stages, run by an executor chosen explicitly.

    from webtap.pipeline import Pipeline
    p = Pipeline(["a.pcap", "b.pcap"], [pairing, tls_records, matcher])
    for out in p.outputs():        # what the stages hand back (record tables), as they come
        ...
    print(p.executor, p.why)       # which executor ran, and why it was chosen

- **Sources**: trace files, read in the order given as one stream (an unreadable one is skipped
  and listed in `totals.unreadable` when `skip_unreadable`), or one live interface (`live`;
  `on_ready` once its filter is in place, `tick` before every read, traffic or not), or source
  objects that open themselves (webtap.rangeplan.FileRange: bytes a..b of a file, the Dask
  map's source).
- **The walk**: webtap.dissect.dissect once per packet batch, with what the stages ask of it: the
  first stage that has a `tls_watch` (the TLS stage's watch list) gets the TLS and QUIC messages
  in the same walk (MessageBatch.tls); a stage with `tcp_events = True` (the URL filter's timing
  table) gets the TCP events; a stage's `segment_tap` (the TLS exchange stage) is run by the walk
  itself, segment by segment, in the walking thread (MessageBatch.segments: what it made). `dissector=` replaces the walk (the feeder's reader only
  classifies packets: its consumers dissect).
- **Stages**: objects with `feed(batch, mb)` and `finish()`; a non-None return value of either is
  an output of the run (`outputs()` yields it). The stages of a run see every batch in order,
  in this thread.
- **Executors**: the core's are `inline` (this thread reads, walks and feeds) and `readahead`: a
  thread reads and parses a few batches ahead, a second thread walks them (both release the
  GIL), and the stages run here, so reading, walking, pairing and writing overlap. A TLS
  stage's watch list does not hold the walk back: the walk adds the flows it sees start a
  split hello, and takes the stage's own list as the stage publishes it after each batch
  (ext/tls/tlswatch.h). When the caller gives its own walk, the walk runs here instead, after
  the reading thread. The
  analyzer adds `feeder` and `fanout` (consumer processes: httpanalyzer.stream) and `dask`
  (chunks of one trace over workers: httpanalyzer.distributed); its HTTP pairing merges several
  traces' messages by capture time on top of one Pipeline per trace. `choose_executor` names the
  default and the reason; the commands print both with `--summary`.
"""
from __future__ import annotations

import functools
import os
import stat
from typing import Iterable, Iterator, Protocol

from webtap.capture import Batch, window_of
from webtap.dissect import EventBuffers, MessageBatch, TlsMessageBuffers, dissect
from webtap.errors import CaptureError
from webtap.stream import Totals, messages, read_ahead

__all__ = ["Pipeline", "Stage", "EXECUTORS", "choose_executor", "is_pipe"]

#: readahead: walked batches that may wait for the stages (each holds its packets' bytes: a
#: mapped window or a read chunk is kept while a batch over it waits; 8 was no faster on the
#: bench trace and held 40 MiB more, and with 4 the peak RSS grew with the trace: tests/bench
#: test_rss, tests/robustness test_hostile_memory)
WALKED_AHEAD = 2

#: the executors of the core (the analyzer's are named in its own summary: feeder, fanout, dask)
EXECUTORS = ("inline", "readahead")


class Stage(Protocol):
    """What a Pipeline drives: feed per packet batch, finish once; either may return an output."""

    def feed(self, batch: Batch, mb: MessageBatch): ...

    def finish(self): ...


def is_pipe(path) -> bool:
    """Whether a trace argument is a pipe, FIFO or terminal (not a regular file)."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def choose_executor(sources: list, live: bool) -> tuple[str, str]:
    """(executor, why) of the core's two for these sources."""
    if live:
        return "inline", "live capture: Ctrl-C must reach the capture loop, in the main thread"
    if len(sources) == 1:
        return "readahead", "one input: a thread reads ahead while this one runs the stages"
    return "inline", f"{len(sources)} inputs read one after another as one stream"


class Pipeline:
    """One run over `sources` (see the module docstring). `totals` (webtap.stream.Totals) is
    filled as the run goes, so a caller still has it after an exception."""

    def __init__(self, sources, stages: Iterable = (), *, bpf: str | None = None,
                 live: bool = False, executor: str | None = None, progress: bool | None = False,
                 skip_unreadable: bool = False, totals: Totals | None = None,
                 dissector=None, on_source=None, on_ready=None, tick=None, **open_kw):
        if isinstance(sources, (str, os.PathLike)):
            sources = [sources]
        # paths, or source objects that open themselves (webtap.rangeplan.FileRange: a chunk)
        self.sources = [os.fspath(s) if isinstance(s, (str, os.PathLike)) else s for s in sources]
        self.stages = list(stages)
        self.bpf = bpf
        self.live = live
        if executor is None:
            self.executor, self.why = choose_executor(self.sources, live)
        else:
            if executor not in EXECUTORS:
                raise ValueError(f"unknown executor {executor!r} (the core's: {', '.join(EXECUTORS)})")
            if executor == "readahead" and live:
                raise ValueError("readahead is not for live capture (Ctrl-C must reach its loop)")
            self.executor, self.why = executor, "chosen by the caller"
        self.progress = progress
        self.skip_unreadable = skip_unreadable
        self.totals = totals if totals is not None else Totals()
        self.on_source = on_source
        self.on_ready = on_ready
        self.tick = tick
        self.open_kw = open_kw
        self.walk = dissector if dissector is not None else self._walk()
        # readahead: a second thread walks when the walk is the core's own (a TLS stage's watch
        # list is shared by the walk and the stage across threads: ext/tls/tlswatch.h)
        self.walk_ahead = self.executor == "readahead" and dissector is None
        if self.walk_ahead:
            self.why += "; a second thread walks the read batches"
        elif self.executor == "readahead":
            self.why += "; the walk runs in the stages' thread (the caller's walk)"
        self.totals.executor = f"{self.executor}: {self.why}"

    def _walk(self):
        """webtap.dissect.dissect with what the stages ask of the walk."""
        watch = next((w for w in (getattr(s, "tls_watch", None) for s in self.stages)
                      if w is not None), None)
        # tcp_events: every TCP segment as an event (the filter's timing table)
        events = any(getattr(s, "tcp_events", False) for s in self.stages)
        # a stage the walk runs itself, segment by segment (the TLS exchange stage): one at most
        taps = [t for t in (getattr(s, "segment_tap", None) for s in self.stages) if t is not None]
        if len(taps) > 1:
            raise ValueError("one stage at most may be the walk's segment tap")
        tap = taps[0] if taps else None
        if watch is None and not events and tap is None:
            return dissect
        return functools.partial(dissect, tls_watch=watch, tcp_events=events,
                                 events=EventBuffers() if events else None,
                                 tls_msgs=TlsMessageBuffers() if watch is not None else None,
                                 segment_tap=tap)

    def batches(self) -> Iterator[tuple[Batch, MessageBatch]]:
        """(packet batch, its MessageBatch) for every batch of every source: the walk's output,
        before the stages."""
        kw = dict(bpf=self.bpf, totals=self.totals, live=self.live, progress=self.progress,
                  skip_unreadable=self.skip_unreadable, on_source=self.on_source, **self.open_kw)
        if self.live and self.on_ready is not None:
            kw["on_ready"] = self.on_ready
        if self.live and self.tick is not None:
            kw["tick"] = self.tick
        if self.executor == "inline":
            gen = messages(self.sources, dissector=self.walk, **kw)
            try:
                for batch, mb in gen:
                    yield batch, mb
                    _check_mapped(batch)
            finally:
                gen.close()
            return
        gen = messages(self.sources, dissector=_unwalked, **kw)
        reader = read_ahead(gen)
        walker = None
        if self.walk_ahead:
            # the walk needs nothing a stage changes while it runs: a second thread walks the
            # batches the reading thread parsed (both release the GIL), so reading, walking
            # and the stages here run at once, on as many cores as there are
            # and the stages' thread may stop for longer than a batch (its first records
            # import pyarrow; a row group is made): the walked batches wait in a deeper queue
            walker = read_ahead(_walked(reader, self.walk, self.totals), depth=WALKED_AHEAD)
        try:
            for batch, mb in (walker if walker is not None else reader):
                if walker is None:
                    mb = self.walk(batch.packets, batch.data)
                    self.totals.add_dissect(mb.counters)
                yield batch, mb
                _check_mapped(batch)
        finally:
            if walker is not None:
                walker.close()
            for g in (reader, gen):
                try:
                    g.close()
                except ValueError:
                    pass    # still running in an abandoned thread (an interrupted run)

    def outputs(self) -> Iterator:
        """Drive every stage over the run; yields what feed() and finish() return (not None)."""
        for batch, mb in self.batches():
            for s in self.stages:
                out = s.feed(batch, mb)
                if out is not None:
                    yield out
        for s in self.stages:
            out = s.finish()
            if out is not None:
                yield out

    def run(self) -> Totals:
        """Drive every stage over the run (their outputs are theirs to keep); the totals."""
        for _ in self.outputs():
            pass
        return self.totals


def _walked(reader: Iterator, walk, totals: Totals) -> Iterator[tuple[Batch, MessageBatch]]:
    """The read batches walked (in the walking thread of the readahead executor)."""
    try:
        for batch, _ in reader:
            mb = walk(batch.packets, batch.data)
            totals.add_dissect(mb.counters)
            yield batch, mb
    finally:
        try:
            reader.close()
        except ValueError:
            pass            # closed from the pipeline's thread at the same time


def _check_mapped(batch: Batch) -> None:
    """After the stages are done with a batch: its bytes were the file's own, not the zeros of
    pages past the end of a file that shrank under its mapped window (webtap.capture)."""
    w = window_of(batch.data)
    if w is not None:
        why = w.file.shrunk()
        if why:
            raise CaptureError(f"{batch.source}: {why}")


class _Unwalked:
    counters: dict = {}


def _unwalked(packets, data):
    """The read-ahead thread's walk: none (the pipeline's thread walks)."""
    return _Unwalked
