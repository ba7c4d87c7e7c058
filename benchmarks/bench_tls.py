"""Benchmark (issue 17): TLS/QUIC handshake records per second, webtap (`httpanalyzer tls`, whole
process) against tshark's TLS dissection of the same trace (whole process, desegmentation on,
QUIC decrypted), on ../shared/scripts/make-bench-trace --corpus tls; and the HTTP path
(`httpanalyzer TRACE -o ...`) with and without `--tls-out` on the HTTP benchmark trace, the cost
of TLS parsing in the one pass. Each contender in its own process, best of --repeat runs.

    python -m benchmarks.bench_tls [--repeat R] [--rounds N]

Environment: WEBTAP_BENCH_TLS_TRACE (else built, WEBTAP_BENCH_TLS_ROUNDS rounds, default 2),
WEBTAP_BENCH_TRACE / WEBTAP_BENCH_ROUNDS for the HTTP trace (benchmarks.common).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

from benchmarks.common import OUT, PYTHON, SHARED, best_of, bench_trace, warm

CLI = "import sys; from httpanalyzer.cli import main; sys.exit(main(sys.argv[1:]))"


def tls_trace(rounds: int):
    env = os.environ.get("WEBTAP_BENCH_TLS_TRACE")
    if env:
        return env
    path = OUT / f"bench-tls-{rounds}.pcap"
    if not path.exists():
        OUT.mkdir(exist_ok=True)
        subprocess.run([sys.executable, str(SHARED / "scripts" / "make-bench-trace"), str(path),
                        "--rounds", str(rounds), "--corpus", "tls"], check=True,
                       stdout=subprocess.DEVNULL)
    return str(path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="bench_tls")
    ap.add_argument("--repeat", type=int, default=int(os.environ.get("WEBTAP_BENCH_REPEAT", "2")))
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("WEBTAP_BENCH_TLS_ROUNDS", "2")))
    ap.add_argument("--no-http", action="store_true", help="skip the HTTP path with/without TLS")
    a = ap.parse_args(argv)
    import pyarrow.parquet as pq

    trace = tls_trace(a.rounds)
    warm(__import__("pathlib").Path(trace))
    out = OUT / "bench-tls.parquet"
    w_s, w_rss, _ = best_of([PYTHON, "-P", "-c", CLI, "tls", trace, "-o", str(out), "--quiet"], a.repeat)
    t = pq.read_table(out)
    hellos = t["request_frame"].drop_null().__len__() + t["response_frame"].drop_null().__len__()
    tshark = ["tshark", "-n", "-r", trace, "-o", "tcp.desegment_tcp_streams:TRUE", "-Y",
              "tls.handshake.type == 1 or tls.handshake.type == 2", "-T", "fields",
              "-e", "frame.number", "-e", "tls.handshake.type", "-e",
              "tls.handshake.extensions_server_name", "-e", "tls.handshake.ja3", "-e",
              "tls.handshake.ja3s"]
    t_s, t_rss, t_out = best_of(tshark, a.repeat)
    t_hellos = sum(len(ln.split(b"\t")[1].split(b",")) for ln in t_out.splitlines() if ln)
    # sanity: both found the same order of magnitude of hellos (tshark also decodes QUIC
    # drafts and tunnels webtap does not open: docs/TLS.md)
    assert hellos > 0.7 * t_hellos, (hellos, t_hellos)
    print(f"TLS handshakes: trace {os.path.basename(trace)}, {t.num_rows} records, "
          f"{hellos} hellos (tshark: {t_hellos})")
    print(f"{'contender':<36} {'seconds':>9} {'hellos/s':>12} {'peak RSS':>10} {'vs tshark':>10}")
    for name, s, rss in (("webtap httpanalyzer tls", w_s, w_rss), ("tshark TLS dissection", t_s, t_rss)):
        print(f"{name:<36} {s:>9.3f} {hellos / s:>12.0f} {rss / 2**20:>8.1f}MB {t_s / s:>9.1f}x")
    if not a.no_http:
        http = str(bench_trace())
        warm(__import__("pathlib").Path(http))
        base = [PYTHON, "-P", "-c", CLI, http, "-o", str(OUT / "bench-http.parquet"), "--consumers", "0",
                "--no-progress"]
        h_s, h_rss, _ = best_of(base, a.repeat)
        ht_s, ht_rss, _ = best_of(base + ["--tls-out", str(OUT / "bench-http-tls.parquet")], a.repeat)
        print(f"\nHTTP path on {os.path.basename(http)}, one process:")
        print(f"{'run':<36} {'seconds':>9} {'peak RSS':>10} {'cost':>8}")
        print(f"{'httpanalyzer TRACE -o OUT':<36} {h_s:>9.3f} {h_rss / 2**20:>8.1f}MB {'':>8}")
        print(f"{'  + --tls-out (TLS in the same pass)':<36} {ht_s:>9.3f} {ht_rss / 2**20:>8.1f}MB "
              f"{(ht_s / h_s - 1) * 100:>7.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
