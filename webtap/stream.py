"""One pass over the packets, any number of consumers.

The capture stage yields packet batches, the dissect stage turns each into an HTTP message
batch once, and every consumer (the httpanalyzer pairing table, the urlfilter matcher, a
writer) receives both. Nothing re-reads the trace, as the integrated-gateway paper argues:

    >>> for pb, mb in webtap.stream.messages("trace.pcap.gz"):     # doctest: +SKIP
    ...     table.feed(mb); matcher.feed(mb)

Several traces are read one after another as one stream (in the order given; sort them by
capture time first if they overlap). The running totals of every stage are in `Totals`.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Protocol

from webtap.capture import Batch, LiveCapture, Trace, open_live, open_trace
from webtap.dissect import MessageBatch, dissect
from webtap.errors import BpfError
from webtap.schema import DISSECT_REASONS, SOURCE_REASONS

__all__ = ["Consumer", "Totals", "messages", "run", "open_source", "TALLY"]


class _Tally:
    """Packets read so far by this process (every source, every call of messages()); the
    command line reports it when a signal stops a run. One addition per batch."""

    packets = 0


TALLY = _Tally()


def _reason(exc: BaseException) -> str:
    """Why a file could not be read, in words (an OSError's text without its repr'd path)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)


class Consumer(Protocol):
    """What the one-pass runner drives: `feed` per batch, `finish` once at the end."""

    def feed(self, packets: Batch, msgs: MessageBatch) -> None: ...

    def finish(self) -> None: ...


@dataclass
class Totals:
    """What every stage read, skipped and found so far, summed over the sources."""

    source: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SOURCE_REASONS, 0))
    dissect: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DISSECT_REASONS, 0))
    warnings: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)   # "path: reason" of files skipped
    files: int = 0

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
                progress: bool | None = None, **kw) -> Trace | LiveCapture:
    """A trace file, or with live=True an interface name."""
    if live:
        return open_live(str(src), bpf=bpf, **kw)
    return open_trace(src, bpf=bpf, progress=progress, **kw)


def messages(sources: str | os.PathLike | Iterable[str | os.PathLike], bpf: str | None = None,
             totals: Totals | None = None, live: bool = False, progress: bool | None = None,
             skip_unreadable: bool = False, dissector=None, **kw) -> Iterator[tuple[Batch, MessageBatch]]:
    """Yield (packet batch, HTTP message batch) for every batch of every source.

    dissector: what turns (packets, data) into the second item (default webtap.dissect.dissect;
    anything returning an object with a `counters` dict, e.g. the feeder reader's
    httpanalyzer.feeder.classify_packets, which only finds the HTTP first packets).
    skip_unreadable: a file that cannot be opened (missing, not a capture) is recorded in
    `totals.unreadable` and the others are still read; a bad BPF filter always raises, since
    it would fail for every file.
    """
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    totals = totals if totals is not None else Totals()
    dissector = dissector if dissector is not None else dissect
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
        with s:
            totals.files += 1
            try:
                for batch in s:
                    TALLY.packets += len(batch)
                    mb = dissector(batch.packets, batch.data)
                    totals.add_dissect(mb.counters)
                    yield batch, mb
            finally:
                totals.add_source(s.counters)
                totals.warnings.extend(f"{src}: {w}" for w in getattr(s, "warnings", []))


def run(sources, consumers: Iterable[Consumer], bpf: str | None = None,
        totals: Totals | None = None, **kw) -> Totals:
    """Drive every consumer over one pass of `sources`; returns the stage totals (`totals`,
    if given, is filled as the pass goes, so a caller still has them after an exception)."""
    consumers = list(consumers)
    totals = totals if totals is not None else Totals()
    for batch, mb in messages(sources, bpf=bpf, totals=totals, **kw):
        for c in consumers:
            c.feed(batch, mb)
    for c in consumers:
        c.finish()
    return totals
