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
import sys

from httpanalyzer.consumers import choose_consumers, max_consumers
from httpanalyzer.errors import ConsumerFailed
from httpanalyzer.writers import VIEWS, fields_views
from webtap import clikit
from webtap.errors import BpfError

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
\\x7c, \\r, \\n, \\xHH, so every line has 13 fields; httpanalyzer.writers.read_lines undoes it).

Outputs are replaced only when the run succeeds; a run stopped by Ctrl-C/SIGTERM writes the
records so far to OUT.partial.EXT. Exit codes: 0 success (damage in a trace is reported on
stderr and what could be read is kept; an unreadable file among several is reported and
skipped); 1 nothing could be read, or the run failed; 2 usage error (bad option, number, output
path or format, BPF filter); 130/143 interrupted by SIGINT/SIGTERM. See docs/CLI.md."""


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="httpanalyzer", description=__doc__,
                                 epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
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


def _check_plots_dir(d) -> None:
    import os

    if d is not None and os.path.exists(d) and not os.path.isdir(d):
        raise clikit.UsageError(f"--plots needs a folder, {d}")


def _report_inputs(run, summary, n_sources: int) -> None:
    """One stderr line per trace that lost anything (unless --quiet); one error line per trace
    that could not be read. RunError when none could."""
    run.warn_traces(summary.warnings)
    for u in summary.unreadable:
        run.error(clikit.what_where(u))
    if summary.unreadable and len(summary.unreadable) == n_sources:
        raise clikit.Exit(1)           # nothing could be read (each file said why)


def _empty_schema(out, headers):
    """The columns an output without records still shows (CSV header row, Zeek #fields,
    Parquet schema): the records' schema as the output's view has it."""
    import os

    ext = os.path.splitext(out or "-")[1].lower()
    fmt = clikit.OUTPUTS.get(ext)
    if fmt is None or fmt.name in ("lines", "jsonl"):
        return None        # these write nothing without records: no schema, and no pyarrow
    from webtap.records import http as records     # (imported at the first batch otherwise)

    ext = (out or "").lower()
    if ext.endswith((".parquet", ".pq")):
        return records.schema_for(headers)
    view = VIEWS["zeek"] if ext.endswith(".log") else VIEWS["csv"]
    return view(records.empty_batch(headers)).schema


def _views(a, out):
    """The output's views: httpanalyzer.writers.VIEWS, or with --fields the chosen columns
    (checked here, before anything is read: a name that is no record column, or a binary
    output, is a usage error)."""
    import os

    if a.fields is None:
        return VIEWS
    fields = [n.strip() for n in a.fields.split(",") if n.strip()]
    ext = os.path.splitext(out or "-")[1].lower()
    fmt = clikit.OUTPUTS.get(ext)
    if out not in (None, "-") and (fmt is None or fmt.name not in ("lines", "csv", "jsonl")):
        raise clikit.UsageError(f"--fields is for the text outputs (lines, .txt, .csv, .jsonl), not {out}")
    from webtap.records.http import schema_for

    known = schema_for(a.headers).names
    bad = [n for n in fields if n not in known]
    if bad or not fields:
        raise clikit.UsageError(f"--fields: no record column {', '.join(bad) or '(none given)'}; "
                                f"the columns are {', '.join(known)}")
    return dict(VIEWS, **fields_views(fields))


def _fields_schema(a, out, headers):
    """_empty_schema, or with --fields the chosen columns as the output's view shows them (the
    line format's header line, the CSV header row, even without records)."""
    if a.fields is None:
        return _empty_schema(out, headers)
    import os

    from webtap.records import http as records

    fmt = clikit.OUTPUTS.get(os.path.splitext(out or "-")[1].lower())
    return _views(a, out)[fmt.name if fmt is not None else "lines"](records.empty_batch(headers)).schema


def _header_list(text: str) -> tuple:
    from webtap.records.http import header_column_names

    names = tuple(n.strip() for n in text.split(",") if n.strip())
    try:
        header_column_names(names)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return names


def _main_dask(a, run) -> int:
    """`httpanalyzer TRACE... --dask SCHED`: chunks on a Dask cluster, records as a Parquet
    dataset (-o OUT.parquet) or, for the other outputs, streamed from a temporary dataset."""
    import os
    import shutil
    import tempfile

    from httpanalyzer import distributed
    from webtap.records import http as records

    out = a.output
    dataset_out = out not in (None, "-") and os.path.splitext(out)[1].lower() in (".parquet", ".pq")
    _check_scheduler(a.dask)
    if dataset_out:
        o = run.output(out, directory=True)
    else:
        o = run.output(out or "-", views=_views(a, out),
                       schema=_fields_schema(a, out, a.headers))
    tmp = None if dataset_out else tempfile.mkdtemp(prefix="httpanalyzer-dask-")
    target = o.target if dataset_out else os.path.join(tmp, "records")
    progress = None if not a.no_progress else False
    try:
        try:
            res = distributed.run(a.traces, target, scheduler=a.dask, bpf=a.bpf,
                                  gc_timeout=a.gc_timeout, max_pending=a.max_pending,
                                  chunk_packets=a.chunk_packets,
                                  chunk_bytes=int(a.chunk_mb * (1 << 20)) if a.chunk_mb else None,
                                  progress=progress, headers=a.headers)
        except distributed.OverlappingTraces as e:
            raise clikit.UsageError(clikit.describe(e)) from None
        except (ValueError, RuntimeError) as e:
            raise clikit.RunError(clikit.describe(e)) from None
        summary = res.summary
        summary.detailed = a.summary
        import pyarrow.dataset as ds

        dataset = ds.dataset(target, format="parquet", partitioning="hive")
        # a dataset output is only counted here: the columns the summary reads, not the records
        cols = None if not dataset_out else (
            ["matched", "interim", "outcome", "status", "method", "response_time"] if a.summary
            else ["matched"])
        for batch in dataset.to_batches(columns=cols):
            batch = batch.drop_columns(["chunk"]) if "chunk" in batch.schema.names else batch
            summary.add(batch)
            if not dataset_out:
                o.write(batch)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    _report_inputs(run, summary, len(a.traces))
    o.commit()
    if a.summary:
        dest = sys.stderr if out in (None, "-") else sys.stdout
        print(summary.table(), file=dest)
        print(f"\nDask: {res.chunks} chunks, {res.boundaries_replayed} boundaries replayed "
              f"({res.replayed_messages} messages), {res.reruns} chunks re-run; seconds: "
              + ", ".join(f"{k} {v:.2f}" for k, v in res.seconds.items()), file=dest)
        print(f"Executor: {summary.executor}", file=dest)
    return 0


def _check_scheduler(spec: str) -> None:
    """--dask takes 'local', 'local:N' or a scheduler address; anything else is a usage error
    here (and not a network error after seconds of trying)."""
    import re

    if spec == "local" or spec.startswith("local:"):
        n = spec[len("local:"):] if spec != "local" else "1"
        hi = max_consumers()
        if not (n.isdigit() and 1 <= int(n) <= hi):
            raise clikit.UsageError(f"--dask local:N needs N in 1 .. {hi} worker processes "
                                    f"(4 per core, at most 64), {spec!r}")
        return
    if re.fullmatch(r"(tcp|tls|ws|wss|ucx)://[^\s:/]+(:[0-9]+)?/?|[^\s:/]+:[0-9]+", spec):
        return
    raise clikit.UsageError(f"--dask needs 'local', 'local:N' or a scheduler address "
                            f"(tcp://host:8786), {spec!r}")


def handle(a, run) -> int:
    if bool(a.traces) == bool(a.interface):
        raise clikit.UsageError("give TRACE files or -i IFACE (not both)")
    a.traces = [clikit.trace_path(t) for t in a.traces]
    _check_plots_dir(a.plots)
    if a.bpf:
        from webtap.capture import compile_filter

        try:
            compile_filter(a.bpf)          # before any output is touched
        except BpfError as e:
            raise clikit.UsageError(f"bad filter: {clikit.describe(e)}, -f {a.bpf!r}") from None
    if a.dask:
        if a.interface:
            raise clikit.UsageError("--dask reads trace files, not a live interface")
        if a.sort:
            raise clikit.UsageError("--sort and --dask: the dataset is partitioned by chunk in time "
                                    "order; sort the records when reading them")
        rc = _main_dask(a, run)
        if rc == 0 and (a.tls_out or a.exchanges_out):
            # the handshakes are few: one TLS pass over the traces here (not on the workers)
            from httpanalyzer import tls as tls_mod

            tls = tls_mod.OnePass(run, a.tls_out, gc_timeout=a.gc_timeout,
                                  exchanges_out=a.exchanges_out)
            tls_mod.feed_traces(tls, a.traces, bpf=a.bpf)
            tls.commit()
        return rc
    if a.chunk_mb is not None or a.chunk_packets is not None:
        raise clikit.UsageError("--chunk-mb and --chunk-packets need --dask")
    from httpanalyzer.stream import Summary, iter_record_batches

    out = a.output or "-"
    o = run.output(out, views=_views(a, out),
                   schema=_fields_schema(a, out, a.headers))
    summary = Summary(detailed=a.summary)
    run.packets = lambda: max(summary.packets, run.ctx.packets)
    progress = None if not a.no_progress else False    # None: a bar when stderr is a terminal
    live = a.interface is not None
    run.live = live
    from webtap.pipeline import is_pipe

    if a.consumers is None and not live and any(is_pipe(t) for t in a.traces):
        consumers, why = 0, "a pipe streams its records from one process"
    elif a.consumers is None:
        consumers, why = choose_consumers()
    else:
        consumers, why = a.consumers, "--consumers"

    capture = "fanout" if live and consumers else None
    balance: dict = {}
    kept: list = []                    # record batches, for --plots
    tls = None
    if a.tls_out or a.exchanges_out:
        from httpanalyzer import tls as tls_mod

        tls = tls_mod.OnePass(run, a.tls_out, gc_timeout=a.gc_timeout,
                              exchanges_out=a.exchanges_out)
    held: list = []                    # --sort: every record batch, written sorted at the end

    def write_held():
        if held:
            from webtap.records.http import sort_records

            tab = sort_records(held)
            held.clear()
            if tab is not None:
                for b in tab.to_batches():
                    o.write(b)
    try:
        for batch in iter_record_batches([a.interface] if live else a.traces, bpf=a.bpf,
                                         gc_timeout=a.gc_timeout, summary=summary,
                                         progress=progress, live=live,
                                         max_pending=a.max_pending, consumers=consumers,
                                         feeder=balance, headers=a.headers, capture=capture,
                                         packet_hook=tls,
                                         on_ready=run.on_ready(a.interface, f"{consumers} AF_PACKET "
                                                               "fanout sockets") if live else None):
            if a.sort:
                held.append(batch)
            else:
                o.write(batch)
            if a.plots:
                kept.append(batch)
    except ConsumerFailed as e:
        raise clikit.RunError(clikit.describe(e)) from None
    except KeyboardInterrupt:
        write_held()                   # the records so far, sorted, into OUT.partial.EXT
        raise
    write_held()
    if live and run.signum:
        run.note(f"stopped by {run.stopped_by} after {summary.packets} packets")
        run.signum = None              # the normal end of a live capture
    _report_inputs(run, summary, len(a.traces or [a.interface]))
    if tls is not None:
        # the HTTP records' last row group, the handshakes and the exchanges are encoded at
        # once (each output's writer thread); the files are put in place HTTP first, as before
        o.flush()
        tls.prepare()
    o.commit()
    if tls is not None:
        tls.commit()
    if a.summary:
        dest = sys.stderr if a.output in (None, "-") else sys.stdout
        print(summary.table(), file=dest)
        # the executor that ran (webtap.pipeline; feeder or fanout with consumers) and why
        print(f"\nExecutor: {summary.executor} (consumers: {consumers}, {why})", file=dest)
        if balance.get("consumers"):
            from httpanalyzer.balance import balance_table

            df = balance_table(balance)
            cols = ["messages", "messages_pct", "transactions", "transactions_pct", "packet_bytes",
                    "stall_ns", "dropped_messages"]
            if capture == "fanout":
                cols = ["packets", "messages", "messages_pct", "transactions", "transactions_pct",
                        "kernel_packets", "kernel_drops"]
            print("\nFeeder balance (paper Table 3)\n" + df[cols].round(2).to_string(), file=dest)
    if a.plots:
        for p in write_plots(kept, balance, a.plots):
            run.note(f"wrote {p}")
    return 0




def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["tls"]:
        # `httpanalyzer tls TRACE...` (issue 17): TLS handshake records
        from httpanalyzer import tls

        return tls.cli(args[1:])
    if args[:1] == ["abuse"]:
        # `httpanalyzer abuse {rates,limit-req,slow,evasion} TRACE...` (issue 34)
        from httpanalyzer import abuse

        return abuse.cli(args[1:])
    if args[:1] == ["compare"] and "--tls" in args[1:]:
        # `httpanalyzer compare --tls TRACE...` (issue 17): TLS handshakes against tshark
        from httpanalyzer import compare_tls

        return compare_tls.cli([x for x in args[1:] if x != "--tls"])
    if args[:1] == ["compare"]:
        # `httpanalyzer compare TRACE...` (issue 5); a trace literally named "compare" is
        # still read as `httpanalyzer ./compare`
        from httpanalyzer import compare

        return compare.cli(args[1:])
    return clikit.main("httpanalyzer", build_parser(), handle, args)


def write_plots(batches, balance: dict, directory) -> list:
    """The records' figures (and the feeder's balance) as DIR/*.png; returns the paths."""
    import pyarrow as pa

    from httpanalyzer import plot
    from webtap.records.http import SCHEMA, to_pandas

    df = to_pandas(pa.Table.from_batches(batches, schema=batches[0].schema if batches else SCHEMA))
    figs = plot.analysis_figures(df)
    if balance.get("consumers"):
        from matplotlib.figure import Figure

        from httpanalyzer.balance import balance_table

        fig = Figure(figsize=(6, 3.8))
        plot.balance_figure(balance_table(balance), ax=fig.add_subplot())
        fig.tight_layout()
        figs["consumer_balance"] = fig
    return plot.save_figures(figs, directory)


if __name__ == "__main__":
    sys.exit(main())
