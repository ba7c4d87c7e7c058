"""The parts the one pipeline (webtap.pipeline) is built from: sources read as one stream of
(packet batch, walked batch) pairs (`messages`), the running totals of the capture and walk
stages (`Totals`), a reader thread a batch or two ahead (`read_ahead`), and the k-way merge of
several traces' messages by capture time (`merge_by_time`, what `httpanalyzer a.pcap b.pcap`
pairs over). Nothing re-reads a trace, as the integrated-gateway paper argues: every stage
receives the same batches (webtap.pipeline.Pipeline drives them).
"""
from __future__ import annotations

import os
import queue
import threading
from typing import Iterable, Iterator

import numpy as np

from webtap.capture import Batch, LiveCapture, Trace, open_live, open_trace
from webtap.dissect import MessageBatch, dissect
from webtap.errors import BpfError
from webtap.runctx import RunContext, current
from webtap.records.message import DISSECT_REASONS, SOURCE_REASONS

__all__ = ["Totals", "messages", "open_source", "read_ahead", "merge_by_time"]


def _reason(exc: BaseException) -> str:
    """Why a file could not be read, in words (an OSError's text without its repr'd path)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)


class Totals:
    """What every stage read, skipped and found so far, summed over the sources.

    A plain class, not a dataclass: the dataclass decorator compiles its generated methods
    with exec() at import, ~0.3 ms of every command's start-up (issue 29)."""

    __match_args__ = ("source", "dissect", "warnings", "unreadable", "files", "executor")

    def __init__(self, source: dict[str, int] | None = None, dissect: dict[str, int] | None = None,
                 warnings: list[str] | None = None, unreadable: list[str] | None = None,
                 files: int = 0, executor: str = "") -> None:
        self.source = dict.fromkeys(SOURCE_REASONS, 0) if source is None else source
        self.dissect = dict.fromkeys(DISSECT_REASONS, 0) if dissect is None else dissect
        self.warnings = [] if warnings is None else warnings
        self.unreadable = [] if unreadable is None else unreadable   # "path: reason" of files skipped
        self.files = files
        self.executor = executor    # "name: why" of the executor that ran (webtap.pipeline)

    def _fields(self) -> tuple:
        return (self.source, self.dissect, self.warnings, self.unreadable, self.files, self.executor)

    def __eq__(self, other):
        return self._fields() == other._fields() if other.__class__ is self.__class__ else NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return (f"Totals(source={self.source!r}, dissect={self.dissect!r}, warnings={self.warnings!r}, "
                f"unreadable={self.unreadable!r}, files={self.files!r}, executor={self.executor!r})")

    def add_source(self, counters: dict[str, int]) -> None:
        for k, v in counters.items():
            if k == "truncated":
                self.source[k] += int(bool(v))
            else:
                self.source[k] += v

    def add_dissect(self, counters: dict[str, int]) -> None:
        for k, v in counters.items():
            self.dissect[k] += v


def open_source(src: str | os.PathLike, bpf: str | None = None, live: bool = False,
                progress: bool | None = None, on_ready=None, **kw) -> Trace | LiveCapture:
    """A trace file, or with live=True an interface name. on_ready (live only): called with the
    capture once it is open and filtered (LiveCapture), e.g. to print its readiness line."""
    if live:
        return open_live(str(src), bpf=bpf, on_ready=on_ready, **kw)
    if not isinstance(src, (str, os.PathLike)):
        return src          # a source object that opens itself (webtap.rangeplan.FileRange)
    return open_trace(src, bpf=bpf, progress=progress, **kw)


def messages(sources: str | os.PathLike | Iterable[str | os.PathLike], bpf: str | None = None,
             totals: Totals | None = None, live: bool = False, progress: bool | None = None,
             skip_unreadable: bool = False, dissector=None, on_source=None, tick=None,
             **kw) -> Iterator[tuple[Batch, MessageBatch]]:
    """Yield (packet batch, HTTP message batch) for every batch of every source.

    dissector: what turns (packets, data) into the second item (default webtap.dissect.dissect;
    anything returning an object with a `counters` dict, e.g. the feeder reader's
    httpanalyzer.feeder.classify_packets, which only finds the HTTP first packets).
    skip_unreadable: a file that cannot be opened (missing, not a capture) is recorded in
    `totals.unreadable` and the others are still read; a bad BPF filter always raises, since
    it would fail for every file. on_source: called with each source once it is open (a Trace
    or LiveCapture), e.g. to read its format and interfaces after the pass (webtap info).
    tick: for a live source, called before every read (at least every read timeout, traffic or
    not): timers and status lines of a live command; a true answer ends the capture as stop()
    does (what the kernel holds is still read).
    """
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    totals = totals if totals is not None else Totals()
    dissector = dissector if dissector is not None else dissect
    # the run's context is taken now, where the caller runs, not when the generator first
    # resumes (read_ahead resumes it in its own thread)
    return _messages(current(), sources, bpf, totals, live, progress, skip_unreadable, dissector,
                     on_source, tick, kw)


def _messages(ctx: RunContext, sources, bpf, totals, live, progress, skip_unreadable, dissector,
              on_source, tick, kw) -> Iterator[tuple[Batch, MessageBatch]]:
    for src in sources:
        try:
            s = open_source(src, bpf=bpf, live=live, progress=progress, **kw)
        except BpfError:
            raise
        except (OSError, ValueError, RuntimeError) as exc:
            if not skip_unreadable or live:
                raise
            totals.unreadable.append(f"{src}: {_reason(exc)}")
            continue
        if live and isinstance(s, LiveCapture):
            # a Ctrl-C of the command line (which does not interrupt a live run) ends the
            # capture at its next read, after what the kernel already holds
            if tick is None:
                s.stop_check = lambda: ctx.stop_requested
            else:
                s.stop_check = lambda: ctx.stop_requested or bool(tick())
        if on_source is not None:
            on_source(s)
        with s:
            totals.files += 1
            try:
                for batch in s:
                    if ctx.stop_requested:
                        if not (live and isinstance(s, LiveCapture)):
                            raise ctx.deliver_stop()
                        # live: the packets captured before Ctrl-C are kept; the capture
                        # drains the kernel's ring and ends (LiveCapture.stop), then we stop
                        s.stop()
                    ctx.packets += len(batch)
                    mb = dissector(batch.packets, batch.data)
                    totals.add_dissect(mb.counters)
                    yield batch, mb
                if ctx.stop_requested and live and isinstance(s, LiveCapture):
                    raise ctx.deliver_stop()
            finally:
                totals.add_source(s.counters)
                totals.warnings.extend(f"{src}: {w}" for w in getattr(s, "warnings", []))


def read_ahead(gen: Iterator, depth: int = 2) -> Iterator:
    """Run `gen` (e.g. messages(...)) in a thread, `depth` items ahead: capture and dissect
    release the GIL, so the reading thread works while the caller pairs, matches or dispatches.
    Exceptions are re-raised here; closing this generator stops the thread and closes `gen`.
    Not for live capture: Ctrl-C must reach the capture loop, which only the main thread sees."""
    return _read_ahead(current(), gen, depth)


def _read_ahead(ctx: RunContext, gen: Iterator, depth: int) -> Iterator:

    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    END = object()

    def work():
        try:
            for item in gen:
                while not stop.is_set():
                    try:
                        q.put(("item", item), timeout=0.1)
                        break
                    except queue.Full:
                        pass
                if stop.is_set():
                    break
            q.put(("end", END))
        except BaseException as e:          # noqa: BLE001 - handed to the caller
            q.put(("error", e))
        finally:
            gen.close()

    t = threading.Thread(target=work, name="webtap-reader", daemon=True)
    t.start()
    abandon = False
    try:
        while True:
            try:
                # with a timeout: a stop asked for while this thread was busy elsewhere (see
                # the run context) must end a wait on a reader blocked in a read
                kind, item = q.get(timeout=0.25)
            except queue.Empty:
                if ctx.stop_requested:
                    raise ctx.deliver_stop() from None
                continue
            if kind == "end":
                return
            if kind == "error":
                raise item
            yield item
    except KeyboardInterrupt:
        # a signal (Ctrl-C, SIGTERM via webtap.clikit): the thread may sit in a read that
        # never returns (a FIFO, a stalled pipe); it is a daemon, so leave it and go on
        abandon = True
        raise
    finally:
        stop.set()
        if abandon or ctx.stop_requested:     # also when closed after a stop elsewhere
            t = None
        while t is not None and t.is_alive():
            try:
                q.get(timeout=0.05)        # unblock a put
            except queue.Empty:
                pass
        if t is not None:
            t.join()


def merge_by_time(sources: list, feed, after=None, idle=None, stop=None,
                  interrupted=None) -> Iterator:
    """k-way merge of several message streams by capture time, as one stream.

    sources: iterators of (msgs, data, last_ts_ns) per batch (msgs: a MESSAGE_DTYPE batch, or
    any structured array with a `ts_ns` field in time order within its source; last_ts_ns: the
    time of the batch's last packet). The merge calls feed(i, msgs[a:b], data, last) for runs
    of source i's messages that no other source's next message precedes (last: last_ts_ns when
    the run ends its batch, else None), then `after()` after each run. A batch without
    messages calls idle(last_ts_ns) (a live source's clock moves on). `after` and `idle` return
    an iterable (or None) of items this generator yields: the caller's outputs (record
    batches), in the order they are produced. stop(): when true, the merge ends as at the end
    of the input; a KeyboardInterrupt while reading ends it too, after interrupted()."""
    heads: list = [None] * len(sources)     # per source: [msgs, data, pos, last_ts]
    ready: list = []                        # outputs of idle() while refilling

    def refill(i):
        while True:
            if stop is not None and stop():
                heads[i] = None
                return
            try:
                msgs, data, last = next(sources[i])
            except StopIteration:
                heads[i] = None
                return
            except KeyboardInterrupt:
                # Ctrl-C ends the input (live capture): the caller flushes what waits.
                if interrupted is not None:
                    interrupted()
                for j in range(len(heads)):
                    heads[j] = None
                return
            if len(msgs):
                heads[i] = [msgs, data, 0, last]
                return
            if idle is not None:
                ready.extend(idle(last) or ())

    for i in range(len(sources)):
        refill(i)
    while True:
        yield from ready
        ready.clear()
        active = [i for i, h in enumerate(heads) if h is not None]
        if not active:
            return
        i = min(active, key=lambda j: heads[j][0]["ts_ns"][heads[j][2]])
        msgs, data, pos, last = heads[i]
        ts = msgs["ts_ns"]
        others = [heads[j][0]["ts_ns"][heads[j][2]] for j in active if j != i]
        if others:
            later = np.flatnonzero(ts[pos:] > min(others))
            end = pos + int(later[0]) if len(later) else len(msgs)
            end = max(end, pos + 1)
        else:
            end = len(msgs)
        feed(i, msgs[pos:end], data, last if end == len(msgs) else None)
        if end < len(msgs):
            heads[i][2] = end
        # what the run completed leaves before the next read, which on a pipe may wait long
        if after is not None:
            yield from after() or ()
        if end == len(msgs):
            refill(i)
