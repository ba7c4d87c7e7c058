"""`make bench`: every benchmark in turn (each prints its own table), the load average
printed beside each: on a shared machine the figures mean little without it."""
from __future__ import annotations

import importlib
import sys

BENCHMARKS = ["benchmarks.bench_startup", "benchmarks.bench_capture", "benchmarks.bench_analyzer", "benchmarks.bench_feeder",
              "benchmarks.bench_urltree", "benchmarks.bench_filter", "benchmarks.bench_distributed",
              "benchmarks.bench_fanout",
              "benchmarks.bench_tls",  # TLS/QUIC handshakes vs tshark, HTTP cost of --tls-out
              "benchmarks.bench_sni",  # issue 18: SNI extract + match, TCP/QUIC forge (in-process)
              ]


def main() -> int:
    rc = 0
    from benchmarks.common import load_average

    for name in BENCHMARKS:
        print(f"== {name} ({load_average()} at the start)", flush=True)
        rc |= importlib.import_module(name).main() or 0
        print(f"== {name} done ({load_average()} at the end)", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
