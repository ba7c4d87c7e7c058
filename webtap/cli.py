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
from webtap.errors import BpfError

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

def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="webtap", description=__doc__,
                                 epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="{info,dissect}")
    p = sub.add_parser("info", help="what each trace holds and what was skipped")
    p.add_argument("traces", nargs="+", metavar="TRACE", type=clikit.trace_path,
                   help="pcap / pcapng files (gzip'd too; '-' for stdin)")
    p = sub.add_parser("dissect", help="HTTP first packets as a table (or lines on stdout)")
    p.add_argument("traces", nargs="*", metavar="TRACE", type=clikit.trace_path,
                   help="pcap / pcapng files (gzip'd too; '-' for stdin), read as one stream")
    p.add_argument("-i", "--interface", metavar="IFACE", help="capture live on this interface")
    p.add_argument("-o", "--output", metavar="OUT",
                   help=clikit.output_help("messages") + "; default: lines on stdout")
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


def _handle(args, run) -> int:
    # the command registry: the subcommands' module (numpy, the compiled reader and walk) is
    # loaded only now, after the arguments were parsed
    from webtap import commands

    if args.tunnel_port:
        commands.tunnel_ports(args.tunnel_port)
    if args.filter:
        try:
            commands.compile_filter(args.filter)    # before any output is touched
        except BpfError as e:
            raise clikit.UsageError(f"bad filter: {clikit.describe(e)}, -f {args.filter!r}") \
                from None
    return commands.COMMANDS[args.cmd](args, run)


def main(argv=None) -> int:
    return clikit.main("webtap", build_parser(), _handle, argv)


if __name__ == "__main__":
    sys.exit(main())
