"""Benchmark: the packet feeder (N consumer processes over shared-memory rings) against the
single-process analyzer, on the trace ../shared/scripts/make-bench-trace builds
(benchmarks.common). Each contender runs in its own process, all the same number of times,
alternating; whole-process ratios are medians of per-round ratios, the loops' figures beside.
Rows: single process; N = 1 .. cores consumers; the feeder alone (consumers only drain their
rings: reading, dissecting, hashing and copying, no pairing). Every row must give the same
record count as the single process (asserted), and the balance of Eq. 3 over the consumers is
printed (the paper's Table 3).

    python -m benchmarks.bench_feeder [--repeat R] [--max-consumers N]
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from benchmarks.common import (PYTHON, REPEAT, bench_trace, median, pair_ratios, paired, paired_table,
                               table, warm, webtap_cmd)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=REPEAT)
    cores = len(os.sched_getaffinity(0))
    ap.add_argument("--max-consumers", type=int, default=cores)
    a = ap.parse_args(argv)
    trace = bench_trace()
    warm(trace)
    run = webtap_cmd("_run_feeder", str(trace))
    rows, results = [], {}
    contenders = [("single process", ["0"])]
    contenders += [(f"feeder, {n} consumer{'s' if n > 1 else ''}", [str(n)])
                   for n in range(1, a.max_consumers + 1)]
    contenders += [(f"feeder alone (drain), {n} consumer{'s' if n > 1 else ''}", [str(n), "drain"])
                   for n in sorted({1, a.max_consumers})]
    pres = paired([(name, run + args) for name, args in contenders], a.repeat)
    for name, _ in contenders:
        outs = [json.loads(o.decode().strip().splitlines()[-1]) for o in pres[name]["outs"]]
        res = outs[-1]
        res["loop_s"] = median([o["loop_s"] for o in outs])
        results[name] = res
        # in-process loop time: what the analyzer costs once Python and its modules are loaded
        rows.append({"name": name, "seconds": res["loop_s"], "rss": pres[name]["rss"]})
    ref = results["single process"]
    for name, res in results.items():
        if "drain" in name:
            assert res["forwarded"] == ref["messages"], (name, res["forwarded"], ref["messages"])
        else:
            assert res["records"] == ref["records"] and res["paired"] == ref["paired"], name
    npk, nbytes = ref["packets"], ref["bytes"]
    print(f"\ntrace {trace}: {npk:,} packets, {nbytes / 1e6:.1f} MB; {ref['messages']:,} HTTP "
          f"messages, {ref['records']:,} records; {cores} cores available (consumers + the reader "
          f"share them)")
    print(paired_table(pres, "single process", npk, nbytes))
    print("in-process loop figures (median of the same runs; not whole processes):")
    print(table(rows, npk, nbytes, "single process"))
    print(f"webtap ran under {PYTHON} ({'wheel install' if 'wheel-venv' in PYTHON else 'this interpreter'}); "
          f"load average {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} {os.getloadavg()[2]:.1f}")
    print("\nspeed-up over the single process, whole process, median of per-round ratios: " + ", ".join(
        f"{r['name']}: {median(pair_ratios(pres, r['name'], 'single process')):.2f}x" for r in rows[1:]))
    for name, res in results.items():
        if res.get("balance") and "drain" not in name and len(res["balance"]) > 1:
            print(f"\nbalance, {name} (messages and transactions per consumer, % of the total)")
            for r in res["balance"]:
                print(f"  consumer {r['consumer']}: messages {r['messages']:>8,} "
                      f"({r['messages_pct']:6.2f} %)  transactions {r['transactions']:>8,} "
                      f"({r['transactions_pct']:6.2f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
