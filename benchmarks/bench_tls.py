"""Benchmark (issue 17): TLS/QUIC handshake records per second, webtap (`httpanalyzer tls`, whole
process) against tshark's TLS dissection of the same trace (whole process, desegmentation on,
QUIC decrypted), on ../shared/scripts/make-bench-trace --corpus tls; and the HTTP path
(`httpanalyzer TRACE -o ...`) with and without `--tls-out` on the HTTP benchmark trace, the cost
of TLS parsing in the one pass.

How (benchmarks.common.paired): whole processes, the contenders of a table alternate round by
round (A B A B ...), and each headline is the median over rounds of the per-round ratio, printed
with the load average. The TLS trace has --rounds rounds of the TLS corpus (default 8, ~650 k
packets): at 1 or 2 rounds webtap's start-up (interpreter, numpy, pyarrow: ~0.3 s) is most of
its time and the ratio measures start-up, not dissection.

    python -m benchmarks.bench_tls [--rounds N] [--no-http]

Environment: WEBTAP_BENCH_REPEAT (rounds of alternation, benchmarks.common), WEBTAP_BENCH_TLS_TRACE
(else built, WEBTAP_BENCH_TLS_ROUNDS rounds), WEBTAP_BENCH_TRACE / WEBTAP_BENCH_ROUNDS for the HTTP
trace (benchmarks.common).
"""
from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys

from benchmarks.common import (OUT, REPEAT, SHARED, bench_trace, command, load_average, median,
                               pair_ratios, paired, warm)

HTTPANALYZER = command("httpanalyzer")      # the installed command, as a user runs it


def tls_trace(rounds: int) -> pathlib.Path:
    env = os.environ.get("WEBTAP_BENCH_TLS_TRACE")
    if env:
        return pathlib.Path(env)
    path = OUT / f"bench-tls-{rounds}.pcap"
    if not path.exists():
        OUT.mkdir(exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        subprocess.run([sys.executable, str(SHARED / "scripts" / "make-bench-trace"), str(tmp),
                        "--rounds", str(rounds), "--corpus", "tls"], check=True,
                       stdout=subprocess.DEVNULL)
        os.replace(tmp, path)           # only ever complete: it appears by rename
    return path


def _packets(trace: pathlib.Path) -> int:
    from webtap.capture import open_trace

    n = 0
    with open_trace(str(trace), progress=False) as tr:
        for b in tr:
            n += len(b.packets)
    return n


def tshark_cmd(trace) -> list[str]:
    return ["tshark", "-n", "-r", str(trace), "-o", "tcp.desegment_tcp_streams:TRUE", "-Y",
            "tls.handshake.type == 1 or tls.handshake.type == 2", "-T", "fields",
            "-e", "frame.number", "-e", "tls.handshake.type", "-e",
            "tls.handshake.extensions_server_name", "-e", "tls.handshake.ja3", "-e",
            "tls.handshake.ja3s"]


def tls_table(trace: pathlib.Path, repeats: int) -> str:
    import pyarrow.parquet as pq

    warm(trace)
    out = OUT / "bench-tls.parquet"
    res = paired([("webtap httpanalyzer tls", HTTPANALYZER + ["tls", str(trace), "-o",
                                               str(out), "--quiet"]),
                  ("tshark TLS dissection", tshark_cmd(trace))], repeats)
    t = pq.read_table(out)
    hellos = len(t["request_frame"].drop_null()) + len(t["response_frame"].drop_null())
    t_out = res["tshark TLS dissection"]["outs"][-1]
    t_hellos = sum(len(ln.split(b"\t")[1].split(b",")) for ln in t_out.splitlines() if ln)
    # sanity: both found the same order of magnitude of hellos (tshark also decodes QUIC
    # drafts and tunnels webtap does not open: docs/TLS.md)
    assert hellos > 0.7 * t_hellos, (hellos, t_hellos)
    packets = _packets(trace)
    lines = [f"TLS handshakes: trace {trace.name} ({packets} packets), {t.num_rows} records, "
             f"{hellos} hellos (tshark: {t_hellos})",
             f"{'contender (whole process)':<30} {'median s':>9} {'min s':>8} {'hellos/s':>10} "
             f"{'peak RSS':>10} {'tshark time / this (median of pairs)':>38}"]
    for name, r in res.items():
        m = median(r["walls"])
        ratio = median(pair_ratios(res, name, "tshark TLS dissection"))
        lines.append(f"{name:<30} {m:>9.3f} {min(r['walls']):>8.3f} {hellos / m:>10.0f} "
                     f"{r['rss'] / 2**20:>8.1f}MB {ratio:>37.1f}x")
    lines.append(f"{repeats} alternating rounds; {load_average()}")
    return "\n".join(lines)


def http_table(trace: pathlib.Path, repeats: int) -> str:
    warm(trace)
    base = HTTPANALYZER + [str(trace), "-o", str(OUT / "bench-http.parquet"),
            "--consumers", "0", "--no-progress"]
    res = paired([("httpanalyzer TRACE -o OUT", base),
                  ("  + --tls-out (same pass)", base + ["--tls-out", str(OUT / "bench-http-tls.parquet")])],
                 repeats)
    lines = [f"HTTP path on {trace.name}, one process:",
             f"{'run (whole process)':<30} {'median s':>9} {'min s':>8} {'peak RSS':>10} "
             f"{'cost (median of pairs)':>24}"]
    for name, r in res.items():
        cost = median([1 / x for x in pair_ratios(res, name, "httpanalyzer TRACE -o OUT")]) - 1
        lines.append(f"{name:<30} {median(r['walls']):>9.3f} {min(r['walls']):>8.3f} "
                     f"{r['rss'] / 2**20:>8.1f}MB {cost * 100:>23.1f}%")
    lines.append(f"{repeats} alternating rounds; {load_average()}")
    return "\n".join(lines)


def stage_table(trace: pathlib.Path, repeats: int) -> str:
    """The TLS stage's and the exchange stage's cost in the one pass, on the TLS trace (issues
    29 and 33): the HTTP pass alone, + --tls-out, + --exchanges-out, whole processes alternating
    round by round; each row's cost against the row before it as the median of the per-round
    ratios, and per handshake (or exchange) record as the median of the per-round differences."""
    import pyarrow.parquet as pq

    warm(trace)
    base = HTTPANALYZER + [str(trace), "-o", str(OUT / "bench-stage-http.parquet"),
            "--no-progress", "--quiet"]
    tls = base + ["--tls-out", str(OUT / "bench-stage-tls.parquet")]
    ex = tls + ["--exchanges-out", str(OUT / "bench-stage-exchanges.parquet")]
    names = ["HTTP pass", "  + --tls-out", "  + --exchanges-out"]
    res = paired(list(zip(names, (base, tls, ex))), repeats)
    records = [0, pq.read_metadata(OUT / "bench-stage-tls.parquet").num_rows,
               pq.read_metadata(OUT / "bench-stage-exchanges.parquet").num_rows]
    lines = [f"Stages of the one pass on {trace.name} ({_packets(trace)} packets): "
             f"{records[1]} handshake records, {records[2]} exchange records",
             f"{'run (whole process)':<30} {'median s':>9} {'min s':>8} {'peak RSS':>10} "
             f"{'cost vs the row above':>22} {'us per record':>14}"]
    for k, name in enumerate(names):
        r = res[name]
        cost = per = ""
        if k:
            prev = res[names[k - 1]]["walls"]
            cost = f"{(median([1 / x for x in pair_ratios(res, name, names[k - 1])]) - 1) * 100:.1f}%"
            per = f"{median([a - b for a, b in zip(r['walls'], prev)]) / records[k] * 1e6:.1f}"
        lines.append(f"{name:<30} {median(r['walls']):>9.3f} {min(r['walls']):>8.3f} "
                     f"{r['rss'] / 2**20:>8.1f}MB {cost:>22} {per:>14}")
    lines.append("targets: --tls-out <= 3 us per handshake (issue 29), --exchanges-out <= 5 % "
                 "(issue 33)")
    lines.append(f"{repeats} alternating rounds; {load_average()}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="bench_tls")
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("WEBTAP_BENCH_TLS_ROUNDS", "8")),
                    help="rounds of the TLS corpus in the TLS trace (default 8)")
    ap.add_argument("--repeat", type=int, default=REPEAT, help="alternating rounds (WEBTAP_BENCH_REPEAT)")
    ap.add_argument("--no-http", action="store_true", help="skip the HTTP path with/without TLS")
    ap.add_argument("--no-tls", action="store_true", help="skip the TLS trace against tshark")
    a = ap.parse_args(argv)
    if not a.no_tls:
        print(tls_table(tls_trace(a.rounds), a.repeat), flush=True)
        print()
        print(stage_table(tls_trace(a.rounds), a.repeat), flush=True)
    if not a.no_http:
        if not a.no_tls:
            print()
        print(http_table(bench_trace(), a.repeat), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
