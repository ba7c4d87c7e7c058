"""webtap against the real tshark, every difference explained (issue 5).

`compare_traces(paths)` runs webtap and tshark in its first-packet mode and its reassembly mode,
joins them per transaction and puts every difference in a category (CATEGORIES); `Comparison`
holds the DataFrames, the JSON summary and the report.

    httpanalyzer compare TRACE... [--report DIR] [--json]

The parts, one job each (no module imports a module above it):

    httpanalyzer.tshark          tshark's command lines, chunking, the one runner (exit status)
    httpanalyzer.compare_join    transactions, the join, CATEGORIES and the explainer
    httpanalyzer.compare_report  Comparison: JSON summary, Markdown/HTML report, figures
    httpanalyzer.compare         this: one trace / many traces, and the command line

The pair-level comparison of issue 4 (REASONS) is a test tool: tests/tools/pair_table.py.

Frame numbers: records and reports carry tshark's 1-based frame.number (-1 in a report: none);
the join inside works on 0-based packet indices.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys

import numpy as np
import pandas as pd

import httpanalyzer
from httpanalyzer.compare_join import (CATEGORIES, FIELDS, compare_modes,  # noqa: F401
                                       join_transactions, tshark_transactions, webtap_transactions)
from httpanalyzer.compare_report import Comparison, count_table, ks_distance  # noqa: F401
from httpanalyzer.errors import TsharkError  # noqa: F401
from webtap.figures import save_figures
from httpanalyzer.stream import Summary
from httpanalyzer.tshark import (MODES, NO_TIME, TSHARK_FIRST_PACKET, chunk_trace,  # noqa: F401
                                 tshark_explain, tshark_http, tshark_version)
from webtap import clikit, runctx
from webtap.capture import open_trace

__all__ = ["compare_traces", "compare_trace", "Comparison", "CATEGORIES", "FIELDS", "MODES",
           "TSHARK_FIRST_PACKET", "TsharkError", "ks_distance", "count_table", "cli"]


def _ns_of(rows: pd.DataFrame) -> np.ndarray:
    """The exact response times (int64 ns) of transaction rows that have one."""
    ns = rows.time_ns.to_numpy(np.int64)
    return ns[ns != NO_TIME]


def compare_trace(path: str, tshark: str = "tshark", chunk_packets: int = 1_000_000,
                  jobs: int = 2, records: pd.DataFrame | None = None, gc_timeout: float = 60.0,
                  warnings: list | None = None):
    """One trace: (transactions, field_diffs, w rows, {mode: tshark rows}, commands).
    warnings: receives the damage webtap's read of the trace showed ('path: what')."""

    if records is None:
        s = Summary()
        try:
            records = httpanalyzer.analyze(path, gc_timeout=gc_timeout, summary=s)
        finally:
            if warnings is not None:
                warnings.extend(s.warnings)
        if runctx.current().stop_requested:   # analyze() ended its input on Ctrl-C / SIGTERM
            raise KeyboardInterrupt("stop requested")
    frames, cmds, chunks = tshark_http(path, tuple(MODES), tshark=tshark,
                                       chunk_packets=chunk_packets, jobs=jobs)
    w = webtap_transactions(records)
    tx = {m: tshark_transactions(frames[m], m) for m in MODES}
    fp = frames["first_packet"]
    w_frames = set(w.q[w.q >= 0]) | set(w.r[w.r >= 0])
    t_frames = set().union(*(set(f.first_frame) for f in frames.values()))
    need = sorted((w_frames - set(fp.first_frame)) | (t_frames - w_frames))
    starts = [off for _, off in chunks]
    info_df = tshark_explain(path, [int(x) for x in need], starts, tshark=tshark,
                             chunk_packets=chunk_packets, commands=cmds)
    info = {int(r.frame): r for r in info_df.itertuples(index=False)}
    trans, fd = compare_modes(w, tx, frames, info, starts)
    return trans, fd, w, tx, cmds


def compare_traces(paths, tshark: str = "tshark", chunk_packets: int = 1_000_000, jobs: int = 2,
                   gc_timeout: float = 60.0, progress=None,
                   warnings: list | None = None) -> Comparison:
    """Compare webtap with tshark (first-packet and reassembly modes) on each trace; the traces
    are compared one by one (each its own webtap run and tshark runs) and the numbers pooled."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [str(p) for p in paths]
    trans, fds, cmds = [], [], []
    times = {"webtap": [], "tshark_first_packet": [], "tshark_reassembly": [], "webtap_dedup": []}
    status = {"webtap": [], "tshark_first_packet": [], "tshark_reassembly": [], "webtap_dedup": []}
    methods = {"webtap": [], "tshark_first_packet": [], "tshark_reassembly": [], "webtap_dedup": []}
    urls = {"webtap": [], "tshark_first_packet": [], "tshark_reassembly": [], "webtap_dedup": []}
    per, skipped = [], []
    for p in paths:
        try:
            t, fd, w, tx, c = compare_trace(p, tshark=tshark, chunk_packets=chunk_packets,
                                            jobs=jobs, gc_timeout=gc_timeout, warnings=warnings)
        except TsharkError:
            raise                   # a failing tshark is an error, never "nothing to compare"
        except (RuntimeError, OSError, ValueError) as e:
            skipped.append(f"{p}: {e}")
            continue
        t.insert(0, "trace", p)
        fd.insert(0, "trace", p)
        trans.append(t)
        fds.append(fd)
        cmds += c
        wp = w[(w.q >= 0) & (w.r >= 0)]
        times["webtap"].append(_ns_of(wp))
        status["webtap"].append(w.status[w.status >= 0].to_numpy())
        methods["webtap"] += [m for m in w.method if isinstance(m, str)]
        urls["webtap"].append(np.array([len(u) for u in w.uri if isinstance(u, str)], int))
        wd = w[~(w.request_repeat | w.response_repeat)]
        times["webtap_dedup"].append(_ns_of(wd[(wd.q >= 0) & (wd.r >= 0)]))
        status["webtap_dedup"].append(wd.status[wd.status >= 0].to_numpy())
        methods["webtap_dedup"] += [m for m in wd.method if isinstance(m, str)]
        urls["webtap_dedup"].append(np.array([len(u) for u in wd.uri if isinstance(u, str)], int))
        for m, rows in tx.items():
            k = f"tshark_{m}"
            times[k].append(_ns_of(rows[(rows.q >= 0) & (rows.r >= 0)]))
            status[k].append(rows.status[rows.status >= 0].to_numpy())
            methods[k] += [x for x in rows.method if isinstance(x, str)]
            urls[k].append(np.array([len(u) for u in rows.uri if isinstance(u, str)], int))
        fp = t[t["mode"] == "first_packet"]
        per.append({"trace": p, "webtap": len(w), "tshark_first_packet": len(tx["first_packet"]),
                    "tshark_reassembly": len(tx["reassembly"]),
                    "both": int((fp.side == "both").sum()),
                    "paired_differently": int(((fp.side == "both") & fp.differs).sum()),
                    "only_tshark": int((fp.side == "only_tshark").sum()),
                    "only_webtap": int((fp.side == "only_webtap").sum()),
                    "differences": ", ".join(f"{k} {v}" for k, v in sorted(
                        pd.concat([t[t.differs].category, fd.category]).value_counts().items())),
                    "unexplained": int((t.category == "unexplained").sum()
                                       + (fd.category == "unexplained").sum()),
                    "ks_first_packet": ks_distance(times["webtap"][-1],
                                                   times["tshark_first_packet"][-1]),
                    "ks_reassembly": ks_distance(times["webtap"][-1], times["tshark_reassembly"][-1]),
                    "paired_webtap": int(len(wp))})
        if progress:
            progress(p, per[-1])
    cat = lambda xs: np.concatenate(xs) if xs else np.zeros(0)  # noqa: E731
    times_ns = {k: np.concatenate(v) if v else np.zeros(0, np.int64) for k, v in times.items()}
    return Comparison(
        traces=paths, tshark_version=tshark_version(tshark), commands=cmds,
        transactions=pd.concat(trans, ignore_index=True) if trans else pd.DataFrame(),
        field_diffs=pd.concat(fds, ignore_index=True) if fds else pd.DataFrame(),
        response_times={k: v / 1e9 for k, v in times_ns.items()},
        response_times_ns=times_ns,
        status_counts=count_table({k: cat(v).astype(int) for k, v in status.items()}
                                  ).rename_axis("status"),
        method_counts=count_table(methods).rename_axis("method"),
        url_lengths={k: cat(v) for k, v in urls.items()},
        per_trace=pd.DataFrame(per), skipped=skipped)


def build_parser():
    ap = argparse.ArgumentParser(
        prog="httpanalyzer compare",
        description="Compare webtap's HTTP transactions with the real tshark, in its "
                    "first-packet mode and its reassembly mode; every difference gets a category "
                    "(docs/ACCURACY.md).",
        epilog="Exit codes: 0 compared; 1 a trace could not be read or tshark failed (one line "
               "naming it), or nothing to compare; 2 usage error; 130/143 interrupted by "
               "SIGINT/SIGTERM. See docs/CLI.md.")
    ap.add_argument("traces", nargs="+", metavar="TRACE",
                    help="pcap / pcapng files (gzip'd too), each compared on its own")
    ap.add_argument("--report", metavar="DIR", help="write summary.md/.html, PNG figures, CSVs")
    ap.add_argument("--plots", metavar="DIR",
                    help="write only the figures (the paper's Figs. 4-7: response-time CCDF, "
                         "status codes, methods, URL length) as PNG to DIR")
    ap.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    ap.add_argument("--chunk-packets", type=clikit.number(int, 1, 1 << 40), default=1_000_000,
                    metavar="N",
                    help="tshark reads traces longer than N packets in editcap chunks of N "
                         "(1 .. 2**40; default 1000000)")
    ap.add_argument("--jobs", type=clikit.number(int, 1, 2), default=2, metavar="N",
                    help="tshark processes at once (1 or 2; default 2)")
    ap.add_argument("--tshark", default="tshark", metavar="PATH",
                    help="tshark binary (default: on PATH)")
    clikit.add_gc_timeout(ap, "a message of webtap's records")
    ap.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                    help="a line per trace on stderr as it is done (default: when stderr is a "
                         "terminal)")
    clikit.add_common(ap)
    clikit.files(ap, inputs=("traces",), outputs=("report",))
    return ap


def _handle(a, run) -> int:
    for d in (a.report, a.plots):
        if d is not None and os.path.exists(d) and not os.path.isdir(d):
            raise clikit.UsageError(f"needs a folder, {d}")
    for p in a.traces:
        if not os.path.exists(p):
            raise clikit.RunError(f"No such file or directory, {p}")
        if os.path.isfile(p):          # (a FIFO is read once, by the comparison itself)
            with open_trace(p):        # NotACapture: one line, exit 1
                pass
    show = a.progress if a.progress is not None else (sys.stderr.isatty() and not a.quiet)
    n = len(a.traces)
    done = []

    def progress(path, row):
        done.append(path)
        if show:
            print(f"httpanalyzer compare: {len(done)}/{n} {path}", file=sys.stderr, flush=True)

    damage: list = []
    try:
        c = compare_traces(a.traces, tshark=a.tshark, chunk_packets=a.chunk_packets,
                           jobs=max(1, min(a.jobs, 2)), gc_timeout=a.gc_timeout,
                           progress=progress, warnings=damage)
    except TsharkError as e:
        raise clikit.RunError(clikit.describe(e)) from None
    except subprocess.CalledProcessError as e:
        raise clikit.RunError(f"{e.cmd[0]} exited with status {e.returncode}") from None
    finally:
        run.warn_traces(damage)
    for s in c.skipped:
        run.error(clikit.what_where(s))
    if len(c.skipped) == n:
        raise clikit.Exit(1)
    ks = c.ks()
    if all(isinstance(v, float) and math.isnan(v) for v in ks.values()):
        raise clikit.RunError("nothing to compare: no HTTP transactions, "
                              + ", ".join(a.traces))
    if a.report:
        c.write_report(a.report)
    if a.plots:
        for p in save_figures(c.figures(), a.plots):
            run.note(f"wrote {p}")
    if a.json:
        print(json.dumps(c.summary()))
    else:
        print(c.markdown().split("## Response time")[0].rstrip())
        print(f"\nKS first-packet {ks['ks_first_packet']:.4f}, reassembly {ks['ks_reassembly']:.4f}")
        if a.report:
            print(f"report: {os.path.join(a.report, 'summary.md')}")
        print(f"unexplained differences: {c.unexplained}")
    return 0                           # a trace skipped among several: said above


def cli(argv=None, parts=None) -> int:  # parts: httpanalyzer.cli.Parts (unused here)
    """`httpanalyzer compare TRACE... [--report DIR] [--json]` (the webtap.clikit contract)."""

    return clikit.main("httpanalyzer compare", build_parser(), _handle, argv)
