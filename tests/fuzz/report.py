"""Markdown table of libFuzzer runs from their logs (the table of docs/ROBUSTNESS.md).

    python -m tests.fuzz.report build/fuzz-long/*.log
"""
from __future__ import annotations

import re
import sys
from pathlib import Path


def parse(path: Path) -> dict:
    text = path.read_text(errors="replace")
    row = {"target": path.stem}
    for key in ("number_of_executed_units", "average_exec_per_sec", "new_units_added", "peak_rss_mb"):
        m = re.search(rf"stat::{key}:\s+(\d+)", text)
        row[key] = int(m.group(1)) if m else None
    m = re.search(r"^Done \d+ runs in (\d+) second", text, re.M)
    row["seconds"] = int(m.group(1)) if m else None
    done = re.findall(r"^#\d+\s+DONE\s+cov: (\d+) ft: (\d+) corp: (\d+)/(\S+)", text, re.M)
    inited = re.findall(r"^#\d+\s+INITED\s+cov: (\d+) ft: (\d+) corp: (\d+)/", text, re.M)
    row["cov"], row["ft"], row["corp"], row["corp_size"] = done[-1] if done else (None,) * 4
    row["cov0"], row["ft0"], row["corp0"] = inited[-1] if inited else (None,) * 3
    m = re.search(r"Loaded (\d+) modules\s+\((\d+) inline 8-bit counters\)", text)
    row["c_counters"] = int(m.group(2)) if m else 0
    crashes = re.findall(r"(ERROR: AddressSanitizer[^\n]*|runtime error:[^\n]*|Uncaught Python exception[^\n]*"
                         r"|ERROR: libFuzzer: [^\n]*)", text)
    row["findings"] = "; ".join(sorted(set(crashes))) or "none"
    return row


def main(argv=None) -> int:
    rows = [parse(Path(p)) for p in (argv if argv is not None else sys.argv[1:])]
    print("| target | seconds | executions | exec/s | cov (start -> end) | features (start -> end) "
          "| corpus | new units | peak RSS MB | findings |")
    print("|---|---:|---:|---:|---|---|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['target']} | {r['seconds']} | {r['number_of_executed_units']} | {r['average_exec_per_sec']} "
              f"| {r['cov0']} -> {r['cov']} | {r['ft0']} -> {r['ft']} | {r['corp']} ({r['corp_size']}) "
              f"| {r['new_units_added']} | {r['peak_rss_mb']} | {r['findings']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
