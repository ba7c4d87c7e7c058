"""httpanalyzer command line: HTTP transaction records from packet traces, without TCP
reassembly (first request packet <-> first response packet, as Vega et al. 2017).

subcommands:
  httpanalyzer TRACE... [options]     records of the traces (this help)
  httpanalyzer tls TRACE...           TLS and QUIC handshake records (httpanalyzer tls --help)
  httpanalyzer compare TRACE...       accuracy against tshark (httpanalyzer compare --help)
  httpanalyzer abuse WHAT TRACE...    per-client rates, nginx limit_req replay, slow-HTTP
                                      indicators, evasion flags (httpanalyzer abuse --help)"""
from __future__ import annotations

import argparse
import importlib
import sys

from httpanalyzer.consumers import max_consumers
from webtap import clikit
from webtap import records as kinds

EPILOG = """examples:
  httpanalyzer trace.pcap                       paper line format on stdout
  httpanalyzer a.pcap b.pcapng.gz -o out.parquet   two traces as one stream, to Parquet
  httpanalyzer trace.pcap -f 'port 8080' -o out.csv --summary
  httpanalyzer trace.pcap --gc-timeout 120 -o out.txt
  cat trace.pcap | httpanalyzer - -o out.csv    the trace on stdin
  httpanalyzer -i eth0 -f 'tcp port 80' -o live.csv   live, until Ctrl-C
  httpanalyzer big.pcap --dask local:2 -o out.parquet   chunks on a 2-worker Dask cluster;
                                                        out.parquet/ is a partitioned dataset
  httpanalyzer compare trace.pcap --report out/ --json   accuracy against tshark (see
                                                          httpanalyzer compare --help)
  httpanalyzer big.pcap --consumers 4 -o out.parquet --summary   four pairing processes
  httpanalyzer trace.pcap -o out.csv --plots figs/   + response-time CCDF, codes and methods,
                                                     URL length, slowest hosts/URIs, unmatched
                                                     over time (and the consumer balance) as PNG

Line format: client IP|client port|server IP|server port|request ts|response ts|
response time|reason|status|method|user agent|host|URI  (seconds with 9 decimals; fields that do
not exist for an unmatched record are empty; \\ | CR LF and control characters escaped as \\\\,
\\x7c, \\r, \\n, \\xHH, so every line has 13 fields; httpanalyzer.lines.read_lines undoes it).

Outputs are replaced only when the run succeeds; a run stopped by Ctrl-C/SIGTERM writes the
records so far to OUT.partial.EXT. Exit codes: 0 success (damage in a trace is reported on
stderr and what could be read is kept; an unreadable file among several is reported and
skipped); 1 nothing could be read, or the run failed; 2 usage error (bad option, number, output
path or format, BPF filter); 130/143 interrupted by SIGINT/SIGTERM. See docs/CLI.md."""


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="httpanalyzer", description=__doc__,
                                 epilog=EPILOG, formatter_class=clikit.HelpFormatter)
    ap.add_argument("traces", nargs="*", metavar="TRACE",
                    help="pcap / pcapng files (gzip'd too; '-' for stdin); several form one "
                         "stream in time order")
    ap.add_argument("-i", "--interface", metavar="IFACE",
                    help="capture live on IFACE until Ctrl-C (then everything waiting is flushed)")
    ap.add_argument("-f", "--filter", "--bpf", dest="bpf", metavar="BPF",
                    help="BPF filter (tcpdump syntax; --bpf is an old spelling)")
    ap.add_argument("-o", "--output", metavar="OUT",
                    help=clikit.output_help() + "; default: lines on stdout")
    ap.add_argument("--headers", metavar="NAME[,NAME...]", type=_header_list, default=(),
                    help="add per header NAME the columns request_<name> and response_<name> "
                         "(lower case, '-' -> '_'): its value in the message's first packet, "
                         "empty when absent there; request/response_headers_incomplete say the "
                         "header block went on in a later packet")
    ap.add_argument("--fields", metavar="NAME[,NAME...]", default=None,
                    help="text outputs (lines, .txt, .csv, .jsonl): only these record columns, in "
                         "this order (tshark's -T fields -e); the line format then starts with a "
                         "line of the names")
    ap.add_argument("--sort", action="store_true",
                    help="write the records in time order (request time, else response time) at "
                         "the end of the run, instead of as they complete (holds them in memory)")
    clikit.add_gc_timeout(ap, "a message")
    ap.add_argument("--max-pending", type=clikit.max_pending, default=1 << 20, metavar="N",
                    help="hard cap on waiting messages (oldest evicted, counted; 1 .. 2**30; "
                         "default 1048576)")
    ap.add_argument("--consumers", type=clikit.number(int, 0, max_consumers()), default=None,
                    metavar="N",
                    help="pair in N consumer processes fed through shared memory (the paper's "
                         "packet feeder; with -i: N AF_PACKET fanout rings, the kernel splitting "
                         "the traffic by Eq. 3); 0: in this process; default: chosen from the "
                         "cores (0 below 4 cores; --summary says what and why); at most 4 per "
                         f"core and 64 ({max_consumers()} here)")
    ap.add_argument("--dask", metavar="SCHEDULER",
                    help="run on Dask: 'local' or 'local:N' (a LocalCluster of N worker "
                         "processes) or a scheduler address (tcp://host:8786); the trace is "
                         "split into chunks and the boundaries repaired (docs/DISTRIBUTED.md). "
                         "-o OUT.parquet is then a dataset directory partitioned by chunk")
    ap.add_argument("--chunk-mb", type=clikit.number(float, 0, 1 << 20, lo_open=True),
                    default=None, metavar="MB",
                    help="with --dask: chunk size in MiB of the trace (> 0 and <= 2**20; "
                         "default 256)")
    ap.add_argument("--chunk-packets", type=clikit.number(int, 1, 1 << 40), default=None,
                    metavar="N",
                    help="with --dask: chunks of N packets instead of --chunk-mb (1 .. 2**40)")
    ap.add_argument("--summary", action="store_true",
                    help="print a summary table (to stderr when records go to stdout)")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    ap.add_argument("--plots", metavar="DIR",
                    help="write the figures of the records (httpanalyzer.plot.analysis_figures, "
                         "and the consumers' balance when there are consumers) as PNG to DIR; "
                         "keeps the records in memory until the end")
    ap.add_argument("--tls-out", metavar="OUT",
                    help="also write TLS handshake records (httpanalyzer tls) to OUT.csv / "
                         ".parquet / .txt, from the same pass over the packets")
    ap.add_argument("--exchanges-out", metavar="OUT",
                    help="also write the request/response exchanges inside TLS over TCP "
                         "(httpanalyzer tls --exchanges-out) to OUT, from the same pass")
    clikit.add_common(ap)
    clikit.files(ap, inputs=("traces",), outputs={"output": "-", "tls_out": None,
                                                  "exchanges_out": None})
    return ap


def _header_list(text: str) -> tuple:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    try:
        kinds.http.header_column_names(names)     # the HTTP record kind (pyarrow): --headers only
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return names


class Parts:
    """The registry's table of what a run loads only when an option asks for it; `parts.NAME`
    imports the module on first use. With COMMANDS below, the one place where httpanalyzer
    loads a module lazily (issue 29): everything else imports at the top of its module."""

    TABLE = {
        "run": "httpanalyzer.run",             # the HTTP run (numpy, the compiled walk)
        "tls": "httpanalyzer.tls",             # --tls-out / --exchanges-out (pyarrow)
        "dask": "httpanalyzer.run_dask",       # --dask (httpanalyzer.distributed: the extra webtap[dask])
        "balance": "httpanalyzer.balance",     # the feeder's balance table (pandas): --summary
        "plots": "httpanalyzer.figures",       # --plots (matplotlib, pandas)
        "abuse_plot": "httpanalyzer.abuse_plot",   # `abuse --plots` (matplotlib)
        "tls_plot": "httpanalyzer.tls_plot",   # `tls --plots` (matplotlib, pandas)
        "zeek": "httpanalyzer.zeek",           # -o OUT.log: the Zeek http.log view (pyarrow)
    }

    def __getattr__(self, name):
        mod = self.TABLE.get(name)
        if mod is None:
            raise AttributeError(name)
        return importlib.import_module(mod)


#: the subcommands: argv[0] -> (module, its entry point taking the remaining arguments and, as
#: `parts`, the registry's table of optional parts)
COMMANDS = {
    "tls": ("httpanalyzer.tls", "cli"),            # TLS and QUIC handshake records (issue 17)
    "abuse": ("httpanalyzer.abuse", "cli"),        # {rates,limit-req,slow,evasion} (issue 34)
    "compare --tls": ("httpanalyzer.compare_tls", "cli"),   # TLS handshakes against tshark
    "compare": ("httpanalyzer.compare", "cli"),    # HTTP records against tshark (issue 5)
}


def _handle(a, run) -> int:
    parts = Parts()
    return parts.run.handle(a, run, parts)


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    cmd = args[0] if args else ""
    if cmd == "compare" and "--tls" in args[1:]:
        cmd, args = "compare --tls", [cmd] + [x for x in args[1:] if x != "--tls"]
    if cmd in COMMANDS:
        # a trace literally named "compare" is still read as `httpanalyzer ./compare`
        module, entry = COMMANDS[cmd]
        return getattr(importlib.import_module(module), entry)(args[1:], parts=Parts())
    return clikit.main("httpanalyzer", build_parser(), _handle, args)


if __name__ == "__main__":
    sys.exit(main())
