"""`httpanalyzer compare` on every shared trace: the results table of docs/ACCURACY.md
("Transactions").

    python -m tests.tools.compare_table [TRACE_DIR] [--report DIR]
    python -m tests.tools.compare_table --traces-table DIR/per_trace.csv [TRACE_DIR]

Runs httpanalyzer.compare.compare_traces on each capture under TRACE_DIR (default
../shared/traces), tshark in both modes with at most 2 processes, and prints Markdown: one row
per source folder, a total row, the category totals per mode, the per-field disagreements, the
KS distances (pooled and per trace with >= 1000 transactions) and every trace with an
unexplained difference (there should be none). With --report, also writes the pooled report;
--traces-table prints, from that report's per_trace.csv, one row per trace that differs at all.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pandas as pd

from httpanalyzer import compare


def traces(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix != ".md")


def traces_table(csv: str, root: str) -> None:
    per = pd.read_csv(csv).fillna({"differences": ""})
    per = per[per.differences != ""]
    print("| trace | webtap | tshark fp | tshark re | both fp | paired differently fp | "
          "only tshark fp | only webtap fp | categories (both modes) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in per.itertuples():
        print(f"| {os.path.relpath(r.trace, root)} | {r.webtap} | {r.tshark_first_packet} | "
              f"{r.tshark_reassembly} | {r.both} | {r.paired_differently} | {r.only_tshark} | "
              f"{r.only_webtap} | {r.differences} |")


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--traces-table" in argv:
        i = argv.index("--traces-table")
        csv = argv[i + 1]
        del argv[i:i + 2]
        traces_table(csv, argv[0] if argv else os.environ.get("WEBTAP_SHARED", "../shared")
                     + "/traces")
        return 0
    report = None
    if "--report" in argv:
        i = argv.index("--report")
        report = argv[i + 1]
        del argv[i:i + 2]
    root = Path(argv[0] if argv else os.environ.get("WEBTAP_SHARED", "../shared") + "/traces")
    files = traces(root)
    t0 = time.time()
    c = compare.compare_traces([str(p) for p in files], jobs=2,
                               progress=lambda p, row: print(
                                   f"{time.time() - t0:7.1f}s {os.path.relpath(p, root)} "
                                   f"unexplained={row['unexplained']}", file=sys.stderr))
    per = c.per_trace.copy()
    per["source"] = [os.path.relpath(p, root).split(os.sep)[0] for p in per.trace]
    tr = c.transactions.copy()
    tr["source"] = [os.path.relpath(p, root).split(os.sep)[0] for p in tr.trace]
    fd = c.field_diffs.copy()
    fd["source"] = [os.path.relpath(p, root).split(os.sep)[0] for p in fd.trace]
    print(f"tshark: {c.tshark_version}; {len(files)} traces; {time.time() - t0:.0f} s\n")
    print("| source | traces | webtap | tshark fp | tshark re | both fp | paired differently fp "
          "| only tshark fp | only webtap fp | both re | only tshark re | only webtap re | unexplained |")
    print("|---|" + "---:|" * 12)
    groups = list(per.groupby("source")) + [("**total**", per)]
    for name, g in groups:
        t = tr[tr.source == name] if name != "**total**" else tr
        re = t[t["mode"] == "reassembly"]
        print(f"| {name} | {len(g)} | {g.webtap.sum()} | {g.tshark_first_packet.sum()} | "
              f"{g.tshark_reassembly.sum()} | {g.both.sum()} | {g.paired_differently.sum()} | "
              f"{g.only_tshark.sum()} | {g.only_webtap.sum()} | {(re.side == 'both').sum()} | "
              f"{(re.side == 'only_tshark').sum()} | {(re.side == 'only_webtap').sum()} | "
              f"{g.unexplained.sum()} |")
    print("\n| category | first_packet | reassembly |\n|---|---:|---:|")
    cf, cr = c.categories("first_packet"), c.categories("reassembly")
    for k in sorted(set(cf) | set(cr)):
        print(f"| {k} | {cf.get(k, 0)} | {cr.get(k, 0)} |")
    print("\n| field | first_packet | reassembly |\n|---|---:|---:|")
    ff, fr = c.field_mismatches("first_packet"), c.field_mismatches("reassembly")
    for k in ff:
        print(f"| {k} | {ff[k]} | {fr.get(k, '')} |")
    if len(fd):
        print("\nfield differences by category:")
        print(fd.groupby(["mode", "field", "category"]).size().to_string())
    ks = c.ks()
    d1, d2 = c.code_difference("first_packet"), c.code_difference("reassembly")
    print(f"\npooled KS: first-packet {ks['ks_first_packet']:.4f}, reassembly "
          f"{ks['ks_reassembly']:.4f}; status-code count difference: first-packet mean "
          f"{d1['mean_pct']:.2f} % median {d1['median_pct']:.2f} %, reassembly mean "
          f"{d2['mean_pct']:.2f} % median {d2['median_pct']:.2f} %")
    big = per[per.webtap >= 1000]
    print("\ntraces with >= 1000 transactions:")
    print("| trace | webtap transactions | webtap pairs | KS first-packet | KS reassembly |\n"
          "|---|---:|---:|---:|---:|")
    for r in big.itertuples():
        print(f"| {os.path.relpath(r.trace, root)} | {r.webtap} | {r.paired_webtap} | "
              f"{r.ks_first_packet:.4f} | {r.ks_reassembly:.4f} |")
    bad = per[per.unexplained > 0]
    print(f"\nunexplained differences: {c.unexplained}")
    for r in bad.itertuples():
        print(f"  {os.path.relpath(r.trace, root)}: {r.differences}")
    if report:
        c.write_report(report)
        print(f"report: {report}/summary.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
