"""The `webtap` subcommands (info, dissect) and their helpers: what webtap.cli's registry loads
once the arguments are parsed and checked, so that `webtap --help` and a usage error never load
numpy or the compiled reader (start-up <= 90 ms). Imports at the top; pyarrow is not one of them:
dissect's line and Zeek views of the messages are the message kind's (webtap.records.messageview,
through the record-kind table): `webtap info` never loads it, `webtap dissect` with its first
message batch (or, when there was none, for the empty table it writes at the end)."""
from __future__ import annotations

import sys
import time

import numpy as np

from webtap import clikit
from webtap import records as kinds
from webtap._ext.source import linktype_name
from webtap.capture import compile_filter  # noqa: F401 (webtap.cli checks -f with it)
from webtap.dissect import dissect, set_tunnel_ports
from webtap.errors import BpfError, CaptureError, NotACapture
from webtap.pipeline import Pipeline
from webtap.records.message import PACKET_DTYPE
from webtap.stream import Totals

COMMANDS = {}   # filled below: subcommand name -> function(args, run)


def _line_view(batch):
    """A message line (stdout and .txt): webtap.records.messageview.line_view. The batch came
    from that module (MessageBatch.to_arrow), so the record-kind table names it loaded."""
    return kinds.messageview.line_view(batch)


def _zeek_view(batch):
    """`dissect -o x.log`: webtap.records.messageview.zeek_view (as _line_view)."""
    return kinds.messageview.zeek_view(batch)


class _PacketStats:
    """Per-file packet figures for `webtap info` (what capinfos gives first), summed over the
    batches with numpy: packets per interface, earliest and latest timestamp."""

    def __init__(self):
        self.per_iface = np.zeros(0, dtype=np.int64)
        self.first = self.last = None

    def feed(self, batch, mb) -> None:
        """A stage of the pipeline (webtap.pipeline): one packet batch."""
        self.add(batch.packets)

    def finish(self) -> None:
        return None

    def add(self, packets) -> None:
        if len(packets) == 0:
            return
        c = np.bincount(packets["iface"].astype(np.int64))
        if len(c) > len(self.per_iface):
            c[:len(self.per_iface)] += self.per_iface
            self.per_iface = c
        else:
            self.per_iface[:len(c)] += c
        lo, hi = int(packets["ts_ns"].min()), int(packets["ts_ns"].max())
        self.first = lo if self.first is None else min(self.first, lo)
        self.last = hi if self.last is None else max(self.last, hi)

    @property
    def packets(self) -> int:
        return int(self.per_iface.sum())


_PRECISION = {6: "microseconds", 9: "nanoseconds", 3: "milliseconds", 0: "seconds"}


def _utc(ns: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ns // 10**9)) + f".{ns % 10**9:09d} UTC"


def _capinfos_lines(src, st: _PacketStats, filtered: bool) -> list[str]:
    """format, interfaces (link type, snaplen, precision, packets), packets, earliest/latest
    time and duration: the first things capinfos prints (docs/CLI.md "webtap info")."""
    out = []
    if src is not None and hasattr(src, "interface_info"):
        fmt = src.format
        end = {True: ", big-endian", False: ", little-endian", None: ""}[src.big_endian]
        ifaces = src.interface_info
        prec = sorted({d for _, _, d in ifaces})
        ptxt = ", ".join(f"{_PRECISION.get(d, f'2^{d}' if d < 0 else f'10^-{d}')} ({d})" for d in prec)
        gz = " (gzip-compressed)" if getattr(src, "gzip", False) else ""
        out.append(f"format:     {fmt}{gz}{end}, timestamps in {ptxt}")
        out.append(f"interfaces: {len(ifaces)}")
        for i, (lt, snap, d) in enumerate(ifaces):
            name, desc = linktype_name(lt)
            n = int(st.per_iface[i]) if i < len(st.per_iface) else 0
            out.append(f"  #{i}: link type {name} ({desc or '?'}, {lt}), snaplen {snap}, "
                       f"{n} packets{' (after the filter)' if filtered else ''}")
    out.append(f"packets:    {st.packets}")
    if st.first is not None:
        d = st.last - st.first
        out.append(f"earliest:   {_utc(st.first)}")
        out.append(f"latest:     {_utc(st.last)}")
        out.append(f"duration:   {d // 10**9}.{d % 10**9:09d} s")
    return out


def _fmt_counters(d: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in d.items() if v)


def cmd_info(args, run) -> int:
    read_any = False
    for path in args.traces:
        totals = Totals()
        opened = []
        stats = _PacketStats()
        try:
            Pipeline(path, [stats], bpf=args.filter, totals=totals, progress=args.progress,
                     on_source=opened.append).run()
        except BpfError:
            raise
        except (NotACapture, OSError, CaptureError) as exc:
            run.error(f"{clikit.describe(exc)}" if str(path) in str(exc)
                      else f"{clikit.describe(exc)}, {path}")
            continue
        read_any = True
        print(f"{path}")
        for line in _capinfos_lines(opened[0] if opened else None, stats, bool(args.filter)):
            print(f"  {line}")
        print(f"  read:    {_fmt_counters(totals.source)}")
        print(f"  dissect: {_fmt_counters(totals.dissect)}")
        for w in totals.warnings:
            print(f"  warning: {w}")
        run.warn_traces(totals.warnings)
    return 0 if read_any else 1


class _MessageSink:
    """`webtap dissect`'s stage: every walked batch's messages into the output."""

    def __init__(self, out):
        self.out = out
        self.wrote = False

    def feed(self, batch, mb):
        if len(mb):
            self.out.write(mb.to_arrow())
            self.wrote = True

    def finish(self):
        return None


def cmd_dissect(args, run) -> int:
    live = args.interface is not None
    if bool(args.traces) == live:
        raise clikit.UsageError("give TRACE files or -i IFACE (not both)")
    run.live = live
    o = run.output(args.output or "-", views={"lines": _line_view, "zeek": _zeek_view})
    totals = Totals()
    sources = [args.interface] if live else args.traces
    sink = _MessageSink(o)
    try:
        # a trace that cannot be read is reported and skipped; the others are still dissected
        Pipeline(sources, [sink], bpf=args.filter, totals=totals, live=live,
                 progress=args.progress, skip_unreadable=True,
                 on_ready=run.on_ready(args.interface) if live else None).run()
    except KeyboardInterrupt:          # clikit.Interrupted, or a reader's stop at a batch end
        if not live:
            raise
        run.note(f"stopped by {run.stopped_by} after {totals.source['packets']} packets")
        run.signum = None              # the normal end of a live capture
    for u in totals.unreadable:
        run.error(clikit.what_where(u))
    run.warn_traces(totals.warnings)
    if not live and totals.unreadable and not totals.files:
        return 1                       # nothing could be read at all
    if not sink.wrote:                 # no message: still the columns (a CSV header, a
                                       # Parquet schema), not an empty file
        o.write(dissect(np.empty(0, PACKET_DTYPE), np.empty(0, np.uint8)).to_arrow())
    o.commit()
    if not args.quiet:
        print(f"read: {_fmt_counters(totals.source)}", file=sys.stderr)
        print(f"dissect: {_fmt_counters(totals.dissect)}", file=sys.stderr)
    return 0


def tunnel_ports(specs) -> None:
    """--tunnel-port KIND:PORT (repeatable) into the dissector's walk (issue 23)."""
    ports: dict[str, list[int]] = {}
    for spec in specs:
        kind, _, port = spec.partition(":")
        if not port.isdigit():
            raise clikit.UsageError(f"--tunnel-port wants KIND:PORT, not {spec!r}")
        ports.setdefault(kind, []).append(int(port))
    try:
        set_tunnel_ports(ports)
    except ValueError as exc:
        raise clikit.UsageError(f"--tunnel-port: {exc}") from None


COMMANDS.update(info=cmd_info, dissect=cmd_dissect)
