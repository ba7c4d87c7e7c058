"""Benchmark: start-up of the installed commands, as a user meets it (issue 21): the whole
`httpanalyzer` process on a trace that holds only its file header (no packet: the time is all
start-up, to the first packet read) with default options and line output, against `python -c
pass` (the interpreter's own floor) and `urlfilter --help`. Runs alternate (benchmarks.common);
the headline is the median. Also: which modules the run imported (pyarrow and pandas only where
an output needs them) and, from `python -X importtime`, the largest imports.

    python -m benchmarks.bench_startup [--repeat R]
"""
from __future__ import annotations

import argparse
import os
import re
import struct
import subprocess
import sys

from benchmarks.common import OUT, PYTHON, command, load_average, median, paired

TARGET_S = 0.090


def header_only_trace():
    OUT.mkdir(exist_ok=True)
    path = OUT / "header-only.pcap"
    if not path.exists():
        path.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=max(5, int(os.environ.get("WEBTAP_BENCH_REPEAT", "3"))))
    a = ap.parse_args(argv)
    trace = str(header_only_trace())
    dev = subprocess.DEVNULL
    res = paired([("python -c pass", [PYTHON, "-c", "pass"], dev),
                  ("httpanalyzer HEADER-ONLY (text)", command("httpanalyzer") + [trace], dev),
                  ("analyzer API, no CLI writers", [PYTHON, "-P", "-c", "import httpanalyzer, sys; "
                   "[None for _ in httpanalyzer.iter_record_batches(sys.argv[1])]", trace], dev),
                  ("urlfilter --help", command("urlfilter") + ["--help"], dev)], a.repeat)
    print(f"webtap under {PYTHON} ({'wheel install' if 'venv' in PYTHON and '.venv/' not in PYTHON else 'this interpreter'}); "
          f"{a.repeat} alternating rounds; {load_average()}")
    for name, r in res.items():
        print(f"  {name:<34} median {median(r['walls']) * 1e3:7.1f} ms  min {min(r['walls']) * 1e3:7.1f} ms"
              f"  peak RSS {r['rss'] / 2**20:6.1f} MB")
    start = median(res["httpanalyzer HEADER-ONLY (text)"]["walls"])
    base = median(res["python -c pass"]["walls"])
    per = [a - b for a, b in zip(res["httpanalyzer HEADER-ONLY (text)"]["walls"], res["python -c pass"]["walls"])]
    print(f"start-up to the first packet: {start * 1e3:.1f} ms (target {TARGET_S * 1e3:.0f} ms: "
          f"{'met' if start <= TARGET_S else 'NOT met'}); above the bare interpreter, median of pairs: "
          f"{median(per) * 1e3:.1f} ms")
    # what the run imported, and the largest imports
    code = ("import sys, runpy; sys.argv=['httpanalyzer', %r]\n"
            "from httpanalyzer.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('loaded:', ' '.join(m for m in ('numpy','pyarrow','pyarrow.compute','pyarrow.parquet','pandas','matplotlib','multiprocessing','tqdm') if m in sys.modules), file=sys.stderr)" % trace)
    out = subprocess.run([PYTHON, "-P", "-X", "importtime", "-c", code], capture_output=True, text=True)
    loaded = [ln for ln in out.stderr.splitlines() if ln.startswith("loaded:")]
    print(f"  heavy modules loaded by a header-only run: {loaded[-1][7:].strip() if loaded else '?'}")
    rows = []
    for ln in out.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", ln)
        if m and len(m.group(3)) <= 3:            # top-level imports (and their first level)
            rows.append((int(m.group(2)), m.group(4)))
    rows.sort(reverse=True)
    print("  largest imports (cumulative, one run, -X importtime): " +
          ", ".join(f"{n} {us / 1e3:.1f} ms" for us, n in rows[:8]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
