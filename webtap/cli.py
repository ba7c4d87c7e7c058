"""`webtap`: the capture and dissect stages from the command line.

    webtap info TRACE...                  what each file holds, and what was skipped and why
    webtap dissect TRACE... [-f BPF] [-o OUT.csv|OUT.parquet]
                                          one row per HTTP request/response first packet
    webtap dissect -i IFACE [-f BPF]      the same, live, until Ctrl-C

Exit codes: 0 success (problems in a file are reported, and what could be read is kept);
1 no file could be read at all; 2 usage error (bad option or BPF filter).
"""
from __future__ import annotations

import argparse
import signal
import sys

from webtap.errors import BpfError, CaptureError, NotACapture

EPILOG = """examples:
  webtap info ../shared/traces/zeek/http/*.pcap
  webtap dissect trace.pcap.gz -o messages.parquet
  webtap dissect trace.pcapng -f 'tcp port 8080' -o messages.csv
  webtap dissect -i eth0 -f 'tcp'
"""


def _fmt_counters(d: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in d.items() if v)


def cmd_info(args) -> int:
    from webtap.stream import Totals, messages

    read_any = False
    for path in args.traces:
        totals = Totals()
        try:
            for _ in messages(path, bpf=args.filter, totals=totals, progress=args.progress):
                pass
        except (NotACapture, OSError, CaptureError) as exc:
            print(f"{path}: error: {exc}", file=sys.stderr)
            continue
        read_any = True
        print(f"{path}")
        print(f"  read:    {_fmt_counters(totals.source)}")
        print(f"  dissect: {_fmt_counters(totals.dissect)}")
        for w in totals.warnings:
            print(f"  warning: {w}")
    return 0 if read_any else 1


def cmd_dissect(args) -> int:
    import pyarrow as pa

    from webtap.stream import Totals, messages

    totals = Totals()
    live = args.interface is not None
    sources = [args.interface] if live else args.traces
    tables, stop = [], []
    if live:
        signal.signal(signal.SIGINT, lambda *a: stop.append(True))
    try:
        # a trace that cannot be read is reported and skipped; the others are still dissected
        for _, mb in messages(sources, bpf=args.filter, totals=totals, live=live,
                              progress=args.progress, skip_unreadable=True):
            if len(mb):
                tables.append(pa.Table.from_pandas(mb.to_pandas(), preserve_index=False))
            if stop:
                break
    except (NotACapture, CaptureError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        if not tables:
            return 1
    for u in totals.unreadable:
        print(f"error: {u}", file=sys.stderr)
    if not live and totals.unreadable and not totals.files:
        return 1                       # nothing could be read at all
    table = pa.concat_tables(tables) if tables else None
    if args.output and table is not None:
        if args.output.endswith(".parquet"):
            import pyarrow.parquet as pq

            pq.write_table(table, args.output)
        else:
            table.to_pandas().to_csv(args.output, index=False)
    elif table is not None:
        print(table.to_pandas().to_string(max_rows=40))
    print(f"read: {_fmt_counters(totals.source)}", file=sys.stderr)
    print(f"dissect: {_fmt_counters(totals.dissect)}", file=sys.stderr)
    for w in totals.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="webtap", description=__doc__.splitlines()[0],
                                 epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("info", help="what each trace holds and what was skipped")
    p.add_argument("traces", nargs="+")
    p.set_defaults(func=cmd_info)
    p = sub.add_parser("dissect", help="HTTP first packets as a table")
    p.add_argument("traces", nargs="*")
    p.add_argument("-i", "--interface", help="capture live on this interface")
    p.add_argument("-o", "--output", help="write OUT.csv or OUT.parquet")
    p.set_defaults(func=cmd_dissect)
    for p in sub.choices.values():
        p.add_argument("-f", "--filter", help="BPF filter expression (libpcap syntax)")
        p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                       help="progress bar (default: when stderr is a terminal)")
        # issue 23: tunnels on ports other than the IANA ones (docs/ACCURACY.md "Encapsulations")
        p.add_argument("--tunnel-port", action="append", default=[], metavar="KIND:PORT",
                       help="also open UDP PORT as a KIND tunnel (vxlan, geneve, gtpu, teredo, "
                            "ayiya, gre), e.g. vxlan:8472; repeatable")
    args = ap.parse_args(argv)
    if args.tunnel_port:                                    # issue 23
        from webtap.dissect import set_tunnel_ports

        ports: dict[str, list[int]] = {}
        for spec in args.tunnel_port:
            kind, _, port = spec.partition(":")
            if not port.isdigit():
                ap.error(f"--tunnel-port wants KIND:PORT, not {spec!r}")
            ports.setdefault(kind, []).append(int(port))
        try:
            set_tunnel_ports(ports)
        except ValueError as exc:
            ap.error(f"--tunnel-port: {exc}")
    if args.cmd == "dissect" and not args.traces and not args.interface:
        ap.error("give TRACE files or -i IFACE")
    try:
        return args.func(args)
    except BpfError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
