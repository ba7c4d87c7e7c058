"""Benchmark: webtap's analyzer vs tshark (first-packet and reassembly modes) vs httpry vs the
bare libpcap loop, on the trace ../shared/scripts/make-bench-trace builds; plus the pairing core
alone on message arrays. Each tool runs in its own process; min wall time over repeats and the
peak RSS (wait4 ru_maxrss) of each. The results are checked for sanity before they are printed.

    python -m benchmarks.bench_analyzer [--rounds N] [--repeat R] [--trace FILE] [--core-only]

Environment: WEBTAP_SHARED (default ../shared), WEBTAP_BENCH_ROUNDS (default 4),
WEBTAP_BENCH_REPEAT (default 3), WEBTAP_BENCH_OUT (default bench-out/).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHARED = os.environ.get("WEBTAP_SHARED", os.path.join(ROOT, "..", "shared"))
OUT = os.environ.get("WEBTAP_BENCH_OUT", os.path.join(ROOT, "bench-out"))
TSHARK_FP = ["-o", "tcp.desegment_tcp_streams:FALSE", "-o", "http.desegment_headers:FALSE",
             "-o", "http.desegment_body:FALSE"]
TSHARK_FIELDS = ["-T", "fields", "-e", "ip.src", "-e", "tcp.srcport", "-e", "ip.dst", "-e",
                 "tcp.dstport", "-e", "frame.time_epoch", "-e", "http.time", "-e",
                 "http.response.phrase", "-e", "http.response.code", "-e", "http.request.method",
                 "-e", "http.user_agent", "-e", "http.host", "-e", "http.request.uri", "-e",
                 "http.request_in"]


def run_measured(cmd: list[str], stdout=subprocess.PIPE) -> tuple[float, int, bytes]:
    """(wall seconds, peak RSS bytes, stdout) of one child process."""
    gc.collect()
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.DEVNULL)
    out = p.stdout.read() if stdout == subprocess.PIPE else b""
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed with {p.returncode}")
    return wall, ru.ru_maxrss * 1024, out


def best(cmd, repeat, stdout=subprocess.PIPE):
    runs = [run_measured(cmd, stdout) for _ in range(repeat)]
    wall = min(r[0] for r in runs)
    rss = max(r[1] for r in runs)
    return wall, rss, runs[-1][2]


def build_trace(rounds: int) -> str:
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, f"bench-{rounds}.pcap")
    if not os.path.exists(path):
        subprocess.run([sys.executable, os.path.join(SHARED, "scripts", "make-bench-trace"), path,
                        "--rounds", str(rounds)], check=True)
    return path


def pcap_loop_binary() -> str:
    exe = os.path.join(OUT, "pcap_loop")
    src = os.path.join(HERE, "pcap_loop.c")
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
        subprocess.run(["cc", "-O2", "-o", exe, src, "-lpcap"], check=True)
    return exe


def bench_core(n_txn: int = 1_000_000, batch: int = 65536) -> dict:
    """The pairing table alone: n_txn request/response pairs (interleaved, distinct keys)."""
    sys.path.insert(0, ROOT)
    from httpanalyzer.pairing import Pairer
    from tests.msgbuild import MsgBuilder

    b = MsgBuilder()
    b.req(0, "10.0.0.1", 1000, "10.0.0.2", 80, 0, 0, uri="/some/path/index.html?q=1",
          host="www.example.com", ua="Mozilla/5.0 (X11; Linux x86_64)")
    b.resp(0, "10.0.0.2", 80, "10.0.0.1", 1000, 0, 0)
    two, data = b.build()
    k = np.arange(n_txn, dtype=np.int64)
    msgs = np.empty(2 * n_txn, dtype=two.dtype)
    msgs[0::2] = two[0]
    msgs[1::2] = two[1]
    ack = (k * 2654435761) % 2**32
    # responses lag their requests by 8 transactions: the table holds ~16 entries at any time
    order = np.argsort(np.concatenate([2 * k, 2 * k + 17]), kind="stable")
    msgs["ack"][0::2] = ack
    msgs["seq"][1::2] = ack
    msgs["src_port"][0::2] = 1024 + k % 60000
    msgs["dst_port"][1::2] = 1024 + k % 60000
    msgs["ts_ns"] = 1_700_000_000 * 10**9 + np.arange(2 * n_txn) * 1000
    msgs = np.concatenate([msgs[0::2], msgs[1::2]])[order]
    msgs["ts_ns"] = 1_700_000_000 * 10**9 + np.arange(2 * n_txn) * 1000
    p = Pairer()
    gc.collect()
    t0 = time.perf_counter()
    rows = 0
    for i in range(0, len(msgs), batch):
        p.feed(msgs[i:i + batch], data)
        rows += p.take().num_rows
    p.flush()
    rows += p.take().num_rows
    dt = time.perf_counter() - t0
    c = p.counters()
    assert c["paired"] == n_txn and rows == n_txn, c
    return {"messages": 2 * n_txn, "seconds": dt, "Mmsg/s": 2 * n_txn / dt / 1e6}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("WEBTAP_BENCH_ROUNDS", 4)))
    ap.add_argument("--repeat", type=int, default=int(os.environ.get("WEBTAP_BENCH_REPEAT", 3)))
    ap.add_argument("--trace")
    ap.add_argument("--core-only", action="store_true", help="only the pairing core (no trace)")
    a = ap.parse_args(argv)

    core = bench_core()
    print(f"pairing core: {core['messages']:,} messages in {core['seconds']:.3f} s = "
          f"{core['Mmsg/s']:.2f} M messages/s (records built as Arrow batches)")
    assert core["Mmsg/s"] > 0.5, "pairing core slower than 0.5 M messages/s"
    if a.core_only:
        return 0

    trace = a.trace or build_trace(a.rounds)
    loop = pcap_loop_binary()
    rows = {}
    wall, rss, out = best([loop, trace], a.repeat)
    npk, nbytes = map(int, out.split()[:2])
    rows["libpcap loop"] = (wall, rss)
    wall, rss, out = best([sys.executable, "-m", "benchmarks._run_webtap", trace], a.repeat)
    wt = json.loads(out)
    rows["webtap httpanalyzer"] = (wall, rss)
    rows["webtap (in-process loop)"] = (wt["loop_s"], rss)
    if shutil.which("tshark"):
        wall, rss, out = best(["tshark", "-n", "-r", trace, *TSHARK_FP, "-Y", "http.request or http.response",
                               *TSHARK_FIELDS], 1)
        ts_pairs = sum(1 for ln in out.decode(errors="replace").splitlines() if ln.split("\t")[-1])
        rows["tshark first-packet"] = (wall, rss)
        wall, rss, _ = best(["tshark", "-n", "-r", trace, "-Y", "http.request or http.response",
                             *TSHARK_FIELDS], 1)
        rows["tshark reassembly"] = (wall, rss)
    if shutil.which("httpry"):
        wall, rss, _ = best(["httpry", "-q", "-r", trace, "-o", os.devnull], a.repeat)
        rows["httpry"] = (wall, rss)

    # sanity: same packets, same order of magnitude of pairs as tshark
    assert wt["packets"] == npk, f"webtap read {wt['packets']} packets, libpcap {npk}"
    assert wt["paired"] > 0 and wt["records"] >= wt["paired"]
    if "tshark first-packet" in rows:
        assert 0.8 * ts_pairs <= wt["paired"] <= 1.25 * ts_pairs, (wt["paired"], ts_pairs)
    size = os.path.getsize(trace)
    print(f"\ntrace {trace}: {npk:,} packets, {nbytes / 1e6:.1f} MB captured, {size / 1e6:.1f} MB file; "
          f"webtap {wt['paired']:,} pairs" + (f", tshark {ts_pairs:,}" if "tshark first-packet" in rows else ""))
    base = rows["webtap httpanalyzer"][0]
    print(f"\n| tool | seconds | Mpps | Gb/s | peak RSS MB | webtap speed-up |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, (wall, rss) in rows.items():
        print(f"| {name} | {wall:.3f} | {npk / wall / 1e6:.2f} | {nbytes * 8 / wall / 1e9:.2f} | "
              f"{rss / 2**20:.0f} | {wall / base:.2f}x |")
    for name, (wall, rss) in rows.items():
        assert wall > 0 and rss > 0, name
    return 0


if __name__ == "__main__":
    sys.exit(main())
