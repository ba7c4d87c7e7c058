"""``urlfilter``: the URL Manager's command line (store in SQLite, tree snapshot beside it).

subcommands (urlfilter COMMAND --help for each):
  urlfilter [--db DB] import PATH... [--format auto|ut1|list|csv] [--category NAME] [--json]
  urlfilter [--db DB] add URL... --category NAME [--from TS] [--until TS] [--daily HH:MM-HH:MM]
  urlfilter [--db DB] delete URL...
  urlfilter [--db DB] list [--category NAME] [--limit N]
  urlfilter [--db DB] match [--json] URL...
  urlfilter [--db DB] stats [--json]
  urlfilter [--db DB] export CSV | backup PATH | snapshot
  urlfilter [--db DB] allow add URL... | delete URL... | list | import PATH...
  urlfilter [--db DB] rules load FILE | add RULE... [--at N] | delete N... | list | clear | check FILE
  urlfilter [--db DB] scan TRACE... [-o OUT] [--forged-out forged.pcap] [--plots DIR]
  urlfilter [--db DB] run -i IFACE [--inject-iface IFACE2] [--duration S] [-o HITS]
  urlfilter [--db DB] timing TRACE... [--t-proc-us US] [-o OUT] [--plots DIR] [--json]

DB: a store made with `urlfilter --db DB import ...` (scan, run and timing also take its
snapshot DB.tree). --db may come before or after the command; --blacklist is an old spelling.
Only import, add, allow add/import and rules load/add create a store; the other commands
refuse one that does not exist.

Policy (docs/urlfilter.md "Allow list and rules"): rules first (first match wins: cut, allow,
or log and go on to the lists), then the allow list over the blacklist's hits, then the
blacklist. A rule: ACTION [KEY=VALUE[,VALUE...]]... with ACTION cut|log|allow and KEY client
(address/CIDR), port (N or N-M, server), url (prefix, as an entry), ua (User-Agent substring),
sni (name or parent domain), ja4, ext (path extension), proto (http|tls|quic), e.g.
  cut client=10.0.0.0/8 ua=curl          allow url=example.com/help        log ext=exe,msi
"""
from __future__ import annotations

import argparse
import importlib
import sys
from datetime import datetime, timezone

from urlfilter.paths import default_db_path
from webtap import clikit

#: the command registry: subcommand -> its module (with a `handle(args, run)`), loaded by _handle
#: once the arguments are parsed -- the one place urlfilter loads lazily (issue 29)
COMMANDS = {"timing": "urlfilter.timing_command"}      # pandas: this subcommand only
DEFAULT = "urlfilter.commands"                         # the store's subcommands, scan, run
PLOTS = "urlfilter.plot"                               # --plots only (matplotlib, pandas)

EPILOG = """Exit status: 0 ok; 1 a match with no hit (match only), an import that imported
nothing, a run that could not read its input or a store that does not exist; 2 usage error
(bad option, number, output path or format, BPF filter, URL); 130/143 interrupted by
SIGINT/SIGTERM (scan and timing keep nothing but OUT.partial.EXT of the records so far; `run`
ends normally on either signal). Errors are one line on stderr; --debug (or WEBTAP_DEBUG=1)
adds the traceback. See docs/CLI.md."""


def _ts(text):
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        try:
            d = datetime.fromisoformat(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a Unix time or ISO date: {text!r}") from None
        if d.tzinfo is None:
            d = d.replace(tzinfo=timezone.utc)
        return int(d.timestamp())


def _db_help():
    return f"the blacklist store (SQLite; default {default_db_path()})"


def _parser():
    p = argparse.ArgumentParser(prog="urlfilter", description=__doc__, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--db", default=None, metavar="DB", help=_db_help())
    clikit.add_common(p)
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    def cmd(name, help, blacklist_alias=False):
        s = sub.add_parser(name, help=help, description=help)
        names = ["--db", "--blacklist"] if blacklist_alias else ["--db"]
        s.add_argument(*names, dest="db", default=argparse.SUPPRESS, metavar="DB",
                       help="the blacklist store (as the global --db)"
                       + ("; --blacklist is an old spelling" if blacklist_alias else ""))
        s.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help=f"traceback after an error (also {clikit.DEBUG_ENV}=1)")
        s.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                       help="no warnings about damaged input, no progress or status line")
        return s

    s = cmd("import", "import blacklist files or UT1-style folders")
    s.add_argument("paths", nargs="+", metavar="PATH", help="list files (.gz too), CSV files or UT1 folders")
    s.add_argument("--format", default="auto", choices=["auto", "ut1", "list", "csv"],
                   help="how to read PATH (auto: a folder is UT1, *.csv is CSV, else a list)")
    s.add_argument("--category", help="category of every entry (default: from the file or folder name)")
    s.add_argument("--json", action="store_true", help="one JSON object per file on stdout")
    s = cmd("add", "add URLs")
    s.add_argument("urls", nargs="+", metavar="URL", help="URLs or host names to add")
    s.add_argument("--category", required=True, help="their category")
    s.add_argument("--from", dest="active_from", type=_ts, metavar="TS",
                   help="active from (Unix time or ISO date)")
    s.add_argument("--until", dest="active_until", type=_ts, metavar="TS",
                   help="active until (Unix time or ISO date)")
    s.add_argument("--daily", metavar="HH:MM-HH:MM", help="daily window HH:MM-HH:MM (UTC)")
    s = cmd("delete", "delete URLs")
    s.add_argument("urls", nargs="+", metavar="URL", help="URLs to delete")
    s = cmd("list", "list stored URLs")
    s.add_argument("--category", help="only this category")
    s.add_argument("--limit", type=clikit.positive_int, metavar="N",
                   help="at most N entries (1 .. 2**62)")
    s = cmd("match", "match URLs against the blacklist")
    s.add_argument("urls", nargs="+", metavar="URL", help="URLs to look up")
    s.add_argument("--json", action="store_true", help="one JSON object per URL")
    s = cmd("stats", "entries, bytes per URL, by category")
    s.add_argument("--json", action="store_true", help="one JSON object")
    s = cmd("export", "export the store as CSV")
    s.add_argument("path", metavar="CSV", help="the CSV file to write")
    clikit.files(s, inputs=("db",), outputs=("path",))
    s = cmd("backup", "copy the SQLite store")
    s.add_argument("path", metavar="PATH", help="where the copy goes")
    clikit.files(s, inputs=("db",), outputs=("path",))
    cmd("snapshot", "rebuild and save the tree snapshot (DB.tree)")
    s = cmd("allow", "the allow list: exceptions that override the blacklist (issue 34)")
    s.add_argument("action", choices=["add", "delete", "list", "import"],
                   help="add URL..., delete URL..., list, import PATH... (a list file, .gz too, "
                        "a UT1 folder such as liste_blanche or exceptions_liste_bu)")
    s.add_argument("items", nargs="*", metavar="URL|PATH", help="the URLs or list paths of the action")
    s.add_argument("--limit", type=clikit.positive_int, metavar="N", help="list: at most N entries")
    s.add_argument("--json", action="store_true", help="import: one JSON object per file")
    s = cmd("rules", "rules across layers (issue 34): first match wins, cut | log | allow")
    s.add_argument("action", choices=["load", "add", "delete", "list", "clear", "check"],
                   help="load FILE (replaces every rule), add RULE... (one argument per rule), "
                        "delete N... (positions), list (numbered, rule-file syntax), clear, "
                        "check FILE (parse only, no store)")
    s.add_argument("items", nargs="*", metavar="FILE|RULE|N",
                   help="the rule file, the rules (one argument each) or rule numbers of the action")
    s.add_argument("--at", type=clikit.positive_int, metavar="N",
                   help="add: insert before rule N (default: after the last)")
    s = cmd("scan", "match the GETs of traces offline", blacklist_alias=True)
    s.add_argument("traces", nargs="+", metavar="TRACE", type=clikit.trace_path,
                   help="pcap / pcapng files (gzip'd too; '-' for stdin), read as one stream")
    s.add_argument("-o", "--output", metavar="OUT",
                   help=clikit.output_help("GET records") + "; default: lines on stdout")
    s.add_argument("--forged-out", metavar="PCAP",
                   help="pcap of the FIN/RST frames the filter would have sent")
    s.add_argument("-f", "--filter", "--bpf", dest="bpf", metavar="BPF",
                   help="BPF filter (tcpdump syntax; --bpf is an old spelling)")
    s.add_argument("--verify-checksums", action="store_true",
                   help="skip GETs with a wrong IPv4/TCP checksum (off: endpoint captures carry offload checksums)")
    s.add_argument("--json", action="store_true", help="counters as JSON on stdout")
    s.add_argument("--plots", metavar="DIR",
                   help="write hits by category and the match-time histogram as PNG to DIR")
    s.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: when stderr is a terminal that the "
                        "records do not go to)")
    clikit.files(s, inputs=("traces", "db"), outputs={"output": "-", "forged_out": None})
    s = cmd("run", "live filter: capture, match, inject FIN/RST", blacklist_alias=True)
    s.add_argument("-i", "--iface", "--interface", dest="iface", required=True, metavar="IFACE",
                   help="interface to capture on")
    s.add_argument("--inject-iface", metavar="IFACE",
                   help="interface to send the FIN/RST frames on (default: the capture interface)")
    s.add_argument("-f", "--filter", "--bpf", dest="bpf", default="tcp or udp", metavar="BPF",
                   help="BPF filter (default 'tcp or udp': udp for the QUIC Initials; --bpf is an old spelling)")
    s.add_argument("--duration", type=clikit.positive_float, metavar="S",
                   help="stop after this many seconds (> 0 and <= 1e9; else at Ctrl-C or SIGTERM)")
    s.add_argument("-o", "--output", metavar="OUT",
                   help=clikit.output_help("hit records (+ reaction_ns)", {"csv", "parquet", "lines"})
                   + "; written at the end")
    s.add_argument("--verify-checksums", action="store_true",
                   help="skip GETs with bad checksums (off: local captures carry offload checksums)")
    clikit.files(s, inputs=("db",), outputs=("output",))
    s = cmd("timing", "timing condition per connection (T_proc + RTT_cf < RTT_cs)",
            blacklist_alias=True)
    s.add_argument("traces", nargs="+", metavar="TRACE", type=clikit.trace_path,
                   help="pcap / pcapng files (gzip'd too; '-' for stdin)")
    s.add_argument("--t-proc-us", type=clikit.positive_float, metavar="US",
                   help="use this T_proc: adds t_proc_ns, margin_ns, win (reproducible; > 0 and <= 1e9)")
    s.add_argument("--measured", action="store_true",
                   help="add measured_t_proc_ns, measured_margin_ns, measured_win: the match+forge "
                        "time measured on this machine (differs from run to run; default: left out)")
    s.add_argument("-o", "--output", metavar="OUT",
                   help=clikit.output_help("per-connection report") + "; default: lines on stdout")
    s.add_argument("--plots", metavar="DIR",
                   help="write the timing condition per connection (paper Fig. 11b) and the "
                        "margin's CDF as PNG to DIR")
    s.add_argument("-f", "--filter", "--bpf", dest="bpf", metavar="BPF",
                   help="BPF filter (tcpdump syntax; --bpf is an old spelling)")
    s.add_argument("--json", action="store_true", help="the summary as JSON on stdout")
    s.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: when stderr is a terminal that the "
                        "records do not go to)")
    clikit.files(s, inputs=("traces", "db"), outputs={"output": "-"})
    return p


def main(argv=None) -> int:
    return clikit.main("urlfilter", _parser(), _handle, argv)


def _handle(args, run) -> int:
    # the command registry: the subcommands' module (the store, numpy, the compiled filter)
    # is loaded only now, after the arguments were parsed
    command = importlib.import_module(COMMANDS.get(args.cmd, DEFAULT))
    plots = importlib.import_module(PLOTS) if getattr(args, "plots", None) else None
    return command.handle(args, run, plots)


if __name__ == "__main__":
    sys.exit(main())
