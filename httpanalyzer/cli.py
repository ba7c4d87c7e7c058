"""httpanalyzer command line: HTTP transaction records from packet traces, without TCP
reassembly (first request packet <-> first response packet, as Vega et al. 2017)."""
from __future__ import annotations

import argparse
import sys

from httpanalyzer import writers
from webtap.errors import BpfError
from httpanalyzer.stream import Summary, iter_record_batches

EPILOG = """examples:
  httpanalyzer trace.pcap                       paper line format on stdout
  httpanalyzer a.pcap b.pcapng.gz -o out.parquet   two traces as one stream, to Parquet
  httpanalyzer trace.pcap -f 'port 8080' -o out.csv --summary
  httpanalyzer trace.pcap --gc-timeout 120 -o out.txt
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
not exist for an unmatched record are empty).

Exit codes: 0 success (an unreadable file among several is reported and skipped); 1 nothing could
be read; 2 usage error (bad option, output format or BPF filter)."""


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="httpanalyzer", description=__doc__,
                                 epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="*", metavar="TRACE",
                    help="pcap / pcapng files (gzip'd too); several form one stream in time order")
    ap.add_argument("-i", "--interface", metavar="IFACE",
                    help="capture live on IFACE until Ctrl-C (then everything waiting is flushed)")
    ap.add_argument("-f", "--filter", dest="bpf", metavar="BPF", help="BPF filter (tcpdump syntax)")
    ap.add_argument("-o", "--output", metavar="OUT",
                    help="OUT.txt (line format), OUT.csv or OUT.parquet; default: lines on stdout")
    ap.add_argument("--gc-timeout", type=float, default=60.0, metavar="S",
                    help="seconds of capture time a message waits for its counterpart (default 60)")
    ap.add_argument("--max-pending", type=int, default=1 << 20, metavar="N",
                    help="hard cap on waiting messages (oldest evicted, counted; default 1048576)")
    ap.add_argument("--consumers", type=int, default=None, metavar="N",
                    help="pair in N consumer processes fed through shared memory (the paper's "
                         "packet feeder; with -i: N AF_PACKET fanout rings, the kernel splitting "
                         "the traffic by Eq. 3); 0: in this process; default: chosen from the "
                         "cores (0 below 4 cores; --summary says what and why)")
    ap.add_argument("--dask", metavar="SCHEDULER",
                    help="run on Dask: 'local' or 'local:N' (a LocalCluster of N worker "
                         "processes) or a scheduler address (tcp://host:8786); the trace is "
                         "split into chunks and the boundaries repaired (docs/DISTRIBUTED.md). "
                         "-o OUT.parquet is then a dataset directory partitioned by chunk")
    ap.add_argument("--chunk-mb", type=float, default=256, metavar="MB",
                    help="with --dask: chunk size in MiB of the trace (default 256)")
    ap.add_argument("--chunk-packets", type=int, default=None, metavar="N",
                    help="with --dask: chunks of N packets instead of --chunk-mb")
    ap.add_argument("--summary", action="store_true",
                    help="print a summary table (to stderr when records go to stdout)")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    ap.add_argument("--plots", metavar="DIR",
                    help="write the figures of the records (httpanalyzer.plot.analysis_figures, "
                         "and the consumers' balance when there are consumers) as PNG to DIR; "
                         "keeps the records in memory until the end")
    return ap


def _main_dask(a, ap) -> int:
    """`httpanalyzer TRACE... --dask SCHED`: chunks on a Dask cluster, records as a Parquet
    dataset (-o OUT.parquet) or, for the other outputs, streamed from a temporary dataset."""
    import os
    import shutil
    import tempfile

    import pyarrow.dataset as ds

    from httpanalyzer import distributed

    if a.chunk_packets is not None and a.chunk_packets < 1:
        ap.error("--chunk-packets must be >= 1")
    if not a.chunk_mb > 0:
        ap.error("--chunk-mb must be > 0")
    out = a.output
    dataset_out = out not in (None, "-") and os.path.splitext(out)[1].lower() in (".parquet", ".pq")
    try:
        w = None if dataset_out else writers.writer_for(out)
    except ValueError as e:
        print(f"httpanalyzer: {e}", file=sys.stderr)
        return 2
    tmp = None if dataset_out else tempfile.mkdtemp(prefix="httpanalyzer-dask-")
    target = out if dataset_out else os.path.join(tmp, "records")
    progress = None if not a.no_progress else False
    try:
        try:
            res = distributed.run(a.traces, target, scheduler=a.dask, bpf=a.bpf,
                                  gc_timeout=a.gc_timeout, max_pending=a.max_pending,
                                  chunk_packets=a.chunk_packets,
                                  chunk_bytes=int(a.chunk_mb * (1 << 20)), progress=progress)
        except (OSError, ValueError, RuntimeError) as e:
            return _failed(e)
        summary = res.summary
        summary.detailed = a.summary
        dataset = ds.dataset(target, format="parquet", partitioning="hive")
        for batch in dataset.to_batches():
            batch = batch.drop_columns(["chunk"]) if "chunk" in batch.schema.names else batch
            summary.add(batch)
            if w is not None:
                w.write(batch)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    finally:
        if w is not None:
            try:
                w.close()
            except BrokenPipeError:
                pass
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    for u in summary.unreadable:
        print(f"httpanalyzer: skipped {u}", file=sys.stderr)
    if a.summary:
        dest = sys.stderr if out in (None, "-") else sys.stdout
        print(summary.table(), file=dest)
        print(f"\nDask: {res.chunks} chunks, {res.boundaries_replayed} boundaries replayed "
              f"({res.replayed_messages} messages), {res.reruns} chunks re-run; seconds: "
              + ", ".join(f"{k} {v:.2f}" for k, v in res.seconds.items()), file=dest)
    if summary.unreadable and len(summary.unreadable) == len(a.traces):
        return 1
    return 0



def _failed(e: BaseException) -> int:
    """Report a run that could not go on; the exit code: 2 for a bad BPF filter (a usage
    error), 1 for anything else (unreadable input, a consumer that died, ...)."""
    print(f"httpanalyzer: {e}", file=sys.stderr)
    return 2 if isinstance(e, BpfError) else 1

def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["compare"]:
        # `httpanalyzer compare TRACE...` (issue 5); a trace literally named "compare" is
        # still read as `httpanalyzer ./compare`
        from httpanalyzer import compare

        return compare.cli(args[1:])
    ap = build_parser()
    a = ap.parse_args(args)
    if bool(a.traces) == bool(a.interface):
        ap.error("give TRACE files or -i IFACE (not both)")
    if a.dask:
        if a.interface:
            ap.error("--dask reads trace files, not a live interface")
        return _main_dask(a, ap)
    try:
        w = writers.writer_for(a.output)
    except ValueError as e:
        print(f"httpanalyzer: {e}", file=sys.stderr)
        return 2
    summary = Summary(detailed=a.summary)
    progress = None if not a.no_progress else False    # None: a bar when stderr is a terminal
    live = a.interface is not None
    if a.consumers is None:
        from httpanalyzer.consumers import choose_consumers

        consumers, why = choose_consumers()
    else:
        consumers, why = a.consumers, "--consumers"
    if consumers < 0:
        ap.error("--consumers must be >= 0")
    if consumers:                      # the feeder's modules only when there are consumers
        from httpanalyzer.feeder import ConsumerFailed
    else:
        class ConsumerFailed(Exception):
            pass
    capture = "fanout" if live and consumers else None
    balance: dict = {}
    kept: list = []                    # record batches, for --plots
    try:
        for batch in iter_record_batches([a.interface] if live else a.traces, bpf=a.bpf,
                                         gc_timeout=a.gc_timeout, summary=summary,
                                         progress=progress, live=live,
                                         max_pending=a.max_pending, consumers=consumers,
                                         feeder=balance, capture=capture):
            w.write(batch)
            if a.plots:
                kept.append(batch)
    except BrokenPipeError:
        # stdout closed early (`httpanalyzer t.pcap | head`): stop quietly, as Unix tools do
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (ConsumerFailed, OSError, ValueError, RuntimeError) as e:
        return _failed(e)
    except KeyboardInterrupt:
        print("httpanalyzer: interrupted; records so far were written", file=sys.stderr)
    finally:
        try:
            w.close()
        except BrokenPipeError:
            pass
    for u in summary.unreadable:
        print(f"httpanalyzer: skipped {u}", file=sys.stderr)
    if a.summary:
        out = sys.stderr if a.output in (None, "-") else sys.stdout
        print(summary.table(), file=out)
        how = ("one process" if not consumers else
               f"{consumers} consumer process{'es' if consumers > 1 else ''}"
               + (" on AF_PACKET fanout rings" if capture == "fanout" else " fed by the reader"))
        print(f"\nConsumers: {how} ({why})", file=out)
        if balance.get("consumers"):
            from httpanalyzer.feeder import balance_table

            df = balance_table(balance)
            cols = ["messages", "messages_pct", "transactions", "transactions_pct", "packet_bytes",
                    "stall_ns", "dropped_messages"]
            if capture == "fanout":
                cols = ["packets", "messages", "messages_pct", "transactions", "transactions_pct",
                        "kernel_packets", "kernel_drops"]
            print("\nFeeder balance (paper Table 3)\n" + df[cols].round(2).to_string(), file=out)
    if a.plots:
        for p in write_plots(kept, balance, a.plots):
            print(f"httpanalyzer: wrote {p}", file=sys.stderr)
    if summary.unreadable and len(summary.unreadable) == len(a.traces or []):
        return 1                       # nothing could be read at all
    return 0


def write_plots(batches, balance: dict, directory) -> list:
    """The records' figures (and the feeder's balance) as DIR/*.png; returns the paths."""
    import pyarrow as pa

    from httpanalyzer import plot
    from httpanalyzer.records import SCHEMA, to_pandas

    df = to_pandas(pa.Table.from_batches(batches, schema=SCHEMA))
    figs = plot.analysis_figures(df)
    if balance.get("consumers"):
        from matplotlib.figure import Figure

        from httpanalyzer.feeder import balance_table

        fig = Figure(figsize=(6, 3.8))
        plot.balance_figure(balance_table(balance), ax=fig.add_subplot())
        fig.tight_layout()
        figs["consumer_balance"] = fig
    return plot.save_figures(figs, directory)


if __name__ == "__main__":
    sys.exit(main())
