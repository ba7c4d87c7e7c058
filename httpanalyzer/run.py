"""`httpanalyzer TRACE... [options]`: the HTTP run, what httpanalyzer.cli's registry loads once
the arguments are parsed (so that `--help` and a usage error never load numpy or the compiled
walk). Its imports stand at the top; what only an option needs (the TLS stage of --tls-out, Dask,
the feeder's balance table, the figures of --plots; the --dask run is httpanalyzer.run_dask)
comes from the registry (`parts`), and the
HTTP record kind (webtap.records.http, pyarrow) from the record-kind table webtap.records, at the
first record: a run that ends before its first record (a header-only trace) loads neither."""
from __future__ import annotations

import os
import sys

from httpanalyzer.consumers import choose_consumers
from httpanalyzer.errors import ConsumerFailed
from httpanalyzer.stream import Summary, iter_record_batches
from httpanalyzer.writers import VIEWS, fields_views
from webtap import clikit
from webtap import records as kinds
from webtap.capture import compile_filter
from webtap.errors import BpfError
from webtap.pipeline import is_pipe


def _check_plots_dir(d) -> None:
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


def _output_views(out, parts) -> dict:
    """httpanalyzer.writers.VIEWS, and for a Zeek log (-o OUT.log) its http.log view from the
    registry (parts.zeek: httpanalyzer.zeek, pyarrow, loaded for that output only)."""
    views = dict(VIEWS)
    if (out or "").lower().endswith(".log"):
        views["zeek"] = parts.zeek.http_log_view
    return views


def _empty_schema(out, headers, views):
    """The columns an output without records still shows (CSV header row, Zeek #fields,
    Parquet schema): the records' schema as the output's view (of `views`) has it."""
    ext = os.path.splitext(out or "-")[1].lower()
    fmt = clikit.OUTPUTS.get(ext)
    if fmt is None or fmt.name in ("lines", "jsonl"):
        return None        # these write nothing without records: no schema, and no pyarrow
    records = kinds.http   # (loaded at the first batch otherwise)
    ext = (out or "").lower()
    if ext.endswith((".parquet", ".pq")):
        return records.schema_for(headers)
    view = views["zeek"] if ext.endswith(".log") else views["csv"]
    return view(records.empty_batch(headers)).schema


def _views(a, out, parts):
    """The output's views (_output_views), or with --fields the chosen columns (checked here,
    before anything is read: a name that is no record column, or a binary output, is a usage
    error)."""
    if a.fields is None:
        return _output_views(out, parts)
    fields = [n.strip() for n in a.fields.split(",") if n.strip()]
    ext = os.path.splitext(out or "-")[1].lower()
    fmt = clikit.OUTPUTS.get(ext)
    if out not in (None, "-") and (fmt is None or fmt.name not in ("lines", "csv", "jsonl")):
        raise clikit.UsageError(f"--fields is for the text outputs (lines, .txt, .csv, .jsonl), not {out}")
    known = kinds.http.schema_for(a.headers).names
    bad = [n for n in fields if n not in known]
    if bad or not fields:
        raise clikit.UsageError(f"--fields: no record column {', '.join(bad) or '(none given)'}; "
                                f"the columns are {', '.join(known)}")
    return dict(VIEWS, **fields_views(fields))


def _fields_schema(a, out, headers, parts):
    """_empty_schema, or with --fields the chosen columns as the output's view shows them (the
    line format's header line, the CSV header row, even without records)."""
    if a.fields is None:
        return _empty_schema(out, headers, _output_views(out, parts))
    fmt = clikit.OUTPUTS.get(os.path.splitext(out or "-")[1].lower())
    return _views(a, out, parts)[fmt.name if fmt is not None else "lines"](kinds.http.empty_batch(headers)).schema


def handle(a, run, parts) -> int:
    """`httpanalyzer TRACE... [options]`. parts: the registry's optional parts
    (httpanalyzer.cli.Parts: the TLS stage, Dask, the feeder's balance table, the figures),
    each loaded only when an option asks for it."""
    if bool(a.traces) == bool(a.interface):
        raise clikit.UsageError("give TRACE files or -i IFACE (not both)")
    a.traces = [clikit.trace_path(t) for t in a.traces]
    _check_plots_dir(a.plots)
    if a.bpf:
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
        rc = parts.dask.main(a, run, parts)
        if rc == 0 and (a.tls_out or a.exchanges_out):
            # the handshakes are few: one TLS pass over the traces here (not on the workers)
            tls_mod = parts.tls
            tls = tls_mod.OnePass(run, a.tls_out, gc_timeout=a.gc_timeout,
                                  exchanges_out=a.exchanges_out)
            tls_mod.feed_traces(tls, a.traces, bpf=a.bpf)
            tls.commit()
        return rc
    if a.chunk_mb is not None or a.chunk_packets is not None:
        raise clikit.UsageError("--chunk-mb and --chunk-packets need --dask")
    out = a.output or "-"
    o = run.output(out, views=_views(a, out, parts),
                   schema=_fields_schema(a, out, a.headers, parts))
    summary = Summary(detailed=a.summary)
    run.packets = lambda: max(summary.packets, run.ctx.packets)
    progress = None if not a.no_progress else False    # None: a bar when stderr is a terminal
    live = a.interface is not None
    run.live = live
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
        tls = parts.tls.OnePass(run, a.tls_out, gc_timeout=a.gc_timeout,
                              exchanges_out=a.exchanges_out,
                              stream=live or len(a.traces) == 1,   # frame numbers only grow
                              keep=False)         # the handshakes' table is not used after
    held: list = []                    # --sort: every record batch, written sorted at the end

    def write_held():
        if held:
            tab = kinds.http.sort_records(held)
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
            df = parts.balance.balance_table(balance)
            cols = ["messages", "messages_pct", "transactions", "transactions_pct", "packet_bytes",
                    "stall_ns", "dropped_messages"]
            if capture == "fanout":
                cols = ["packets", "messages", "messages_pct", "transactions", "transactions_pct",
                        "kernel_packets", "kernel_drops"]
            print("\nFeeder balance (paper Table 3)\n" + df[cols].round(2).to_string(), file=dest)
    if a.plots:
        for p in parts.plots.record_figures(kept, balance, a.plots):
            run.note(f"wrote {p}")
    return 0
