"""Benchmark: the distributed analyzer (httpanalyzer.distributed on a local 2-worker Dask
cluster) against the single-process analyzer, on the trace ../shared/scripts/make-bench-trace
builds (benchmarks.common). Each contender runs in its own process; min of the in-process run
time over alternating repeats, webtap from the same interpreter as the other benchmarks (the cluster's start-up is reported apart). Both must give the same record
count (asserted; the tests check the records themselves). Also: the share of the run spent in
the sequential steps, the plan (a header-only scan of the trace) and the boundary repair.

    python -m benchmarks.bench_distributed [--repeat R] [--workers N] [--chunk-mb MB]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

from benchmarks.common import OUT, REPEAT, bench_trace, load_average, median, paired, table, warm, webtap_cmd


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=REPEAT)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--chunk-mb", type=float, default=48.0)
    a = ap.parse_args(argv)
    trace = bench_trace()
    warm(trace)
    OUT.mkdir(exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="bench-dist-", dir=OUT)
    # under the interpreter every other webtap contender runs under (the wheel install)
    run = webtap_cmd("_run_dist", str(trace))
    try:
        rows, results = [], {}
        contenders = [("single process", ["single"]),
                      (f"dask, {a.workers} workers, {a.chunk_mb:g} MiB chunks",
                       ["dask", str(a.workers), str(a.chunk_mb), os.path.join(tmp, "ds")])]
        pres = paired([(name, run + args) for name, args in contenders], a.repeat)
        for name, _ in contenders:
            outs = [json.loads(o.decode().strip().splitlines()[-1]) for o in pres[name]["outs"]]
            res = outs[-1]
            res["loop_s"] = median([o["loop_s"] for o in outs])
            results[name] = res
            rows.append({"name": name, "seconds": res["loop_s"], "rss": pres[name]["rss"]})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    single = results["single process"]
    dist = rows[1]["name"]
    d = results[dist]
    assert d["records"] == single["records"] and d["paired"] == single["paired"], (d, single)
    npk, nbytes = single["packets"], single["bytes"]
    print(f"\ntrace {trace}: {npk:,} packets, {nbytes / 1e6:.1f} MB; {single['messages']:,} HTTP "
          f"messages, {single['records']:,} records; {len(os.sched_getaffinity(0))} cores; "
          f"seconds = in-process run, median of {a.repeat} alternating runs; peak RSS of the "
          f"driver process only; {load_average()}")
    print(table(rows, npk, nbytes, "single process"))
    s = d["seconds"]
    tot = s["total"]
    print(f"\n{dist}: {d['chunks']} chunks; plan (header scan; the map starts on each chunk as "
          f"the scan passes it) done after {s['plan']:.2f} s, plan + map {s['map']:.2f} s "
          f"({100 * s['map'] / tot:.1f} %), "
          f"boundary repair {s['repair']:.2f} s ({100 * s['repair'] / tot:.1f} % of the total); "
          f"{d['boundaries_replayed']} boundaries replayed ({d['replayed_messages']:,} messages, "
          f"{100 * d['replayed_messages'] / max(1, single['messages']):.2f} % of all), "
          f"{d['reruns']} chunks re-run; cluster start-up {d['cluster_start_s']:.1f} s (not counted)")
    print(f"speed-up over the single process (packets/s ratio): "
          f"{single['loop_s'] / d['loop_s']:.2f}x")
    # CPU time says what a loaded machine's wall clock hides: the work the workers share
    cpu = d["chunk_cpu_seconds"]
    print(f"CPU seconds: single process {single['cpu_s']:.2f}; chunk tasks {sum(cpu):.2f} in all "
          f"(largest {max(cpu):.2f}); driver (plan + repair + waiting) {d['driver_cpu_s']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
