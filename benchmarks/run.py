"""`make bench`: every benchmark in turn (each prints its own table)."""
from __future__ import annotations

import importlib
import sys

BENCHMARKS = ["benchmarks.bench_capture", "benchmarks.bench_analyzer", "benchmarks.bench_feeder",
              "benchmarks.bench_urltree", "benchmarks.bench_filter", "benchmarks.bench_distributed",
              "benchmarks.bench_tls"]  # TLS/QUIC handshakes vs tshark, HTTP cost of --tls-out


def main() -> int:
    rc = 0
    for name in BENCHMARKS:
        print(f"== {name}")
        rc |= importlib.import_module(name).main() or 0
    return rc


if __name__ == "__main__":
    sys.exit(main())
