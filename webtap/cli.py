"""`webtap`: the capture and dissect stages from the command line.

subcommands:
  webtap info TRACE...                  what each file holds, and what was skipped and why
  webtap dissect TRACE... [-f BPF] [-o OUT]
                                        one row per HTTP request/response first packet; without
                                        -o one line per message on stdout, as it is read
  webtap dissect -i IFACE [-f BPF]      the same, live, until Ctrl-C
"""
from __future__ import annotations

import argparse
import sys

from webtap import clikit
from webtap._ext.textout import seconds_text
from webtap.errors import BpfError, CaptureError, NotACapture

EPILOG = """examples:
  webtap info ../shared/traces/zeek/http/*.pcap
  webtap dissect trace.pcap.gz -o messages.parquet
  webtap dissect trace.pcapng -f 'tcp port 8080' -o messages.csv
  webtap dissect trace.pcap | head          one line per message, as it is read
  webtap dissect -i eth0 -f 'tcp'

Lines (stdout, or -o OUT.txt): ts_ns|kind|src_ip|src_port|dst_ip|dst_port|vlan|method|status|
reason|host|uri|user_agent, escaped as httpanalyzer's line format (docs/CLI.md). vlan is empty
when untagged, status empty for a request.

Outputs are replaced only when the run succeeds (docs/CLI.md). Exit codes: 0 success (damage
in a file is reported on stderr, and what could be read is kept); 1 no file could be read at
all; 2 usage error (bad option, output path or format, BPF filter); 130/143 interrupted by
SIGINT/SIGTERM (the messages so far go to OUT.partial.EXT).
"""

#: the columns of a message line (stdout and .txt)
LINE_COLUMNS = ("ts_ns", "kind", "src_ip", "src_port", "dst_ip", "dst_port", "vlan", "method_name",
                "status", "reason", "host", "uri", "user_agent")


def _line_view(batch):
    import pyarrow as pa

    cols = []
    for n in LINE_COLUMNS:
        c = batch.column(n)
        if pa.types.is_dictionary(c.type):
            c = c.cast(pa.string())
        cols.append(c)
    return pa.RecordBatch.from_arrays(cols, names=list(LINE_COLUMNS))


def _zeek_view(batch):
    """`dissect -o x.log`: Zeek's `ts` (time; seconds with 9 decimals, the exact nanoseconds)
    in place of ts_ns, then the other message columns; #path dissect. (An integer ts_ns does not
    fit the 32-bit integers zat reads Zeek's `int` into.)"""
    import pyarrow as pa

    ts = seconds_text(batch.column("ts_ns"), 9)
    rest = [i for i, n in enumerate(batch.schema.names) if n != "ts_ns"]
    fields = [pa.field("ts", pa.string(), metadata={"zeek_type": "time"})] + [batch.schema.field(i) for i in rest]
    return pa.RecordBatch.from_arrays([ts] + [batch.column(i) for i in rest],
                                      schema=pa.schema(fields, metadata={"zeek_path": "dissect"}))


class _PacketStats:
    """Per-file packet figures for `webtap info` (what capinfos gives first), summed over the
    batches with numpy: packets per interface, earliest and latest timestamp."""

    def __init__(self):
        import numpy as np

        self.per_iface = np.zeros(0, dtype=np.int64)
        self.first = self.last = None

    def feed(self, batch, mb) -> None:
        """A stage of the pipeline (webtap.pipeline): one packet batch."""
        self.add(batch.packets)

    def finish(self) -> None:
        return None

    def add(self, packets) -> None:
        import numpy as np

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
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ns // 10**9)) + f".{ns % 10**9:09d} UTC"


def _capinfos_lines(src, st: _PacketStats, filtered: bool) -> list[str]:
    """format, interfaces (link type, snaplen, precision, packets), packets, earliest/latest
    time and duration: the first things capinfos prints (docs/CLI.md "webtap info")."""
    from webtap._ext.source import linktype_name

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
    from webtap.pipeline import Pipeline
    from webtap.stream import Totals

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
    from webtap.pipeline import Pipeline
    from webtap.stream import Totals

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
        import numpy as np             # Parquet schema), not an empty file

        from webtap.dissect import dissect
        from webtap.records.message import PACKET_DTYPE

        o.write(dissect(np.empty(0, PACKET_DTYPE), np.empty(0, np.uint8)).to_arrow())
    o.commit()
    if not args.quiet:
        print(f"read: {_fmt_counters(totals.source)}", file=sys.stderr)
        print(f"dissect: {_fmt_counters(totals.dissect)}", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="webtap", description=__doc__,
                                 epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="{info,dissect}")
    p = sub.add_parser("info", help="what each trace holds and what was skipped")
    p.add_argument("traces", nargs="+", metavar="TRACE", type=clikit.trace_path,
                   help="pcap / pcapng files (gzip'd too; '-' for stdin)")
    p.set_defaults(func=cmd_info)
    p = sub.add_parser("dissect", help="HTTP first packets as a table (or lines on stdout)")
    p.add_argument("traces", nargs="*", metavar="TRACE", type=clikit.trace_path,
                   help="pcap / pcapng files (gzip'd too; '-' for stdin), read as one stream")
    p.add_argument("-i", "--interface", metavar="IFACE", help="capture live on this interface")
    p.add_argument("-o", "--output", metavar="OUT",
                   help=clikit.output_help("messages") + "; default: lines on stdout")
    p.set_defaults(func=cmd_dissect)
    clikit.files(p, inputs=("traces",), outputs={"output": "-"})
    for p in sub.choices.values():
        p.add_argument("-f", "--filter", "--bpf", dest="filter", metavar="BPF",
                       help="BPF filter expression (libpcap syntax; --bpf is an old spelling)")
        p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                       help="progress bar (default: when stderr is a terminal)")
        # issue 23: tunnels on ports other than the IANA ones (docs/ACCURACY.md "Encapsulations")
        p.add_argument("--tunnel-port", action="append", default=[], metavar="KIND:PORT",
                       help="also open UDP PORT as a KIND tunnel (vxlan, geneve, gtpu, teredo, "
                            "ayiya, gre), e.g. vxlan:8472; repeatable")
        clikit.add_common(p)
    return ap


def _tunnel_ports(specs) -> None:
    """--tunnel-port KIND:PORT (repeatable) into the dissector's walk (issue 23)."""
    from webtap.dissect import set_tunnel_ports

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


def _handle(args, run) -> int:
    if args.tunnel_port:
        _tunnel_ports(args.tunnel_port)
    if args.filter:
        from webtap.capture import compile_filter

        try:
            compile_filter(args.filter)    # before any output is touched
        except BpfError as e:
            raise clikit.UsageError(f"bad filter: {clikit.describe(e)}, -f {args.filter!r}") \
                from None
    return args.func(args, run)


def main(argv=None) -> int:
    return clikit.main("webtap", build_parser(), _handle, argv)


if __name__ == "__main__":
    sys.exit(main())
