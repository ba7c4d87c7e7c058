"""Capture + dissect throughput, in one run on the same trace held in the page cache:

* the bare libpcap loop (benchmarks/pcap_loop.c: pcap_next_ex, touching nothing),
* webtap read (chunked reader, batches) and webtap read+dissect (every packet to HTTP spans),
  each as a whole process and as its read loop alone (the process time includes starting
  Python and importing NumPy, ~0.2 s, which only a large trace amortises),
* httpry -r (HTTP request/response logging, its default fields),
* tshark -r with TCP reassembly off, printing the same HTTP fields webtap extracts.

Prints packets/s, Gb/s, peak RSS and each contender's time relative to webtap read+dissect,
and checks the answers: the libpcap loop and webtap agree on the packet count, and every tool
found HTTP. Trace: $WEBTAP_BENCH_TRACE or one made by ../shared/scripts/make-bench-trace.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from benchmarks.common import OUT, REPO, best_of, bench_trace, table, warm, webtap_cmd

TSHARK_FIELDS = ["frame.number", "http.request.method", "http.request.uri", "http.host",
                 "http.user_agent", "http.response.code", "http.response.phrase"]


def build_pcap_loop() -> str:
    OUT.mkdir(exist_ok=True)
    exe = OUT / "pcap_loop"
    src = REPO / "benchmarks" / "pcap_loop.c"
    if not exe.exists() or exe.stat().st_mtime < src.stat().st_mtime:
        subprocess.run(["cc", "-O2", "-o", str(exe), str(src), "-lpcap"], check=True)
    return str(exe)


def main() -> int:
    trace = bench_trace()
    warm(trace)
    repeats = int(os.environ.get("WEBTAP_BENCH_REPEATS", "3"))
    rows = []

    wall, rss, out = best_of([build_pcap_loop(), str(trace)], repeats)
    packets, captured = map(int, out.split())
    rows.append({"name": "libpcap pcap_next_ex loop (C)", "seconds": wall, "rss": rss})

    wall, rss, out = best_of(webtap_cmd("worker", "read", str(trace)), repeats)
    read = json.loads(out)
    rows.append({"name": "webtap read", "seconds": wall, "rss": rss})
    rows.append({"name": "  (its loop, without Python start)", "seconds": read["loop_seconds"],
                 "rss": rss})
    wire = read["counters"]["wire_bytes"]

    wall, rss, out = best_of(webtap_cmd("worker", "dissect", str(trace)), repeats)
    dis = json.loads(out)
    rows.append({"name": "webtap read+dissect", "seconds": wall, "rss": rss})
    rows.append({"name": "  (its loop, without Python start)", "seconds": dis["loop_seconds"],
                 "rss": rss})

    if shutil.which("httpry"):
        wall, rss, out = best_of(["httpry", "-q", "-r", str(trace)], repeats)
        httpry_lines = len(out.splitlines())
        rows.append({"name": "httpry -r", "seconds": wall, "rss": rss})
    if shutil.which("tshark"):
        from httpanalyzer.tshark import TSHARK_FIRST_PACKET   # one home of the flags

        cmd = ["tshark", "-n", "-r", str(trace), *TSHARK_FIRST_PACKET,
               "-Y", "http.request || http.response", "-T", "fields"]
        for f in TSHARK_FIELDS:
            cmd += ["-e", f]
        wall, rss, out = best_of(cmd, 1)
        tshark_frames = len(out.splitlines())
        rows.append({"name": "tshark -r (reassembly off)", "seconds": wall, "rss": rss})

    print(f"trace: {trace} ({packets} packets, {captured / 2**20:.1f} MiB captured)")
    print(table(rows, packets, wire, "webtap read+dissect"))
    print(f"HTTP first packets: webtap {dis['messages']}"
          + (f", tshark {tshark_frames}" if shutil.which("tshark") else "")
          + (f", httpry {httpry_lines} lines" if shutil.which("httpry") else ""))

    # Answers, not just times.
    assert read["packets"] == packets == dis["packets"], (read, packets, dis)
    assert dis["messages"] > 0
    if shutil.which("tshark"):
        assert tshark_frames > 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
