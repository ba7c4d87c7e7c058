"""Benchmark: webtap's analyzer vs tshark (first-packet and reassembly modes) vs httpry vs the
bare libpcap loop, on the trace ../shared/scripts/make-bench-trace builds (benchmarks.common);
plus the pairing core alone on message arrays. Each tool runs in its own process, every one the
same number of times, alternating (benchmarks.common.paired); the headline is the median of
per-round time ratios of whole processes, the in-process loop beside it, labelled; peak RSS
(wait4 ru_maxrss) of each. The results are checked for sanity before they are printed.

    python -m benchmarks.bench_analyzer [--repeat R] [--core-only] [--no-tshark]

Environment: WEBTAP_BENCH_TRACE or WEBTAP_BENCH_ROUNDS (default 4), WEBTAP_SHARED,
WEBTAP_BENCH_REPEAT (default 3, every contender, tshark too).
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

from benchmarks.common import (PYTHON, c_tool, command, REPEAT, REPO, bench_trace, median, pair_ratios, paired,
                               paired_table, load_average, warm, webtap_cmd)

from httpanalyzer.tshark import TSHARK_FIRST_PACKET as TSHARK_FP  # one home of tshark's flags
TSHARK_FIELDS = ["-T", "fields", "-e", "ip.src", "-e", "tcp.srcport", "-e", "ip.dst", "-e",
                 "tcp.dstport", "-e", "frame.time_epoch", "-e", "http.time", "-e",
                 "http.response.phrase", "-e", "http.response.code", "-e", "http.request.method",
                 "-e", "http.user_agent", "-e", "http.host", "-e", "http.request.uri", "-e",
                 "http.request_in"]


def pcap_loop_binary() -> str:
    return c_tool("pcap_loop", "-lpcap")


def bench_core(n_txn: int = 1_000_000, batch: int = 65536) -> dict:
    """The pairing table alone: n_txn request/response pairs (interleaved, distinct keys)."""
    sys.path.insert(0, str(REPO))
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
    ap.add_argument("--repeat", type=int, default=REPEAT)
    ap.add_argument("--core-only", action="store_true", help="only the pairing core (no trace)")
    ap.add_argument("--no-tshark", action="store_true", help="leave tshark out (it takes minutes)")
    a = ap.parse_args(argv)

    if a.core_only:
        return _core()

    trace = bench_trace()
    warm(trace)
    dev = subprocess.DEVNULL
    # Whole processes, every contender the same number of runs, alternating: the headline
    # ratios are medians of per-round ratios (benchmarks.common.paired)
    contenders = [("libpcap loop (C)", [pcap_loop_binary(), str(trace)]),
                  ("webtap httpanalyzer", command("httpanalyzer") + [str(trace)], dev),
                  ("webtap runner (in-process loop)", webtap_cmd("_run_webtap", str(trace)))]
    if shutil.which("httpry"):
        contenders.append(("httpry", ["httpry", "-q", "-r", str(trace), "-o", os.devnull], dev))
    if shutil.which("tshark") and not a.no_tshark:
        contenders.append(("tshark first-packet", ["tshark", "-n", "-r", str(trace), *TSHARK_FP, "-Y",
                                                   "http.request or http.response", *TSHARK_FIELDS]))
        contenders.append(("tshark reassembly", ["tshark", "-n", "-r", str(trace), "-Y",
                                                 "http.request or http.response", *TSHARK_FIELDS], dev))
    load_before = load_average()
    res = paired(contenders, a.repeat)
    npk, nbytes = map(int, res["libpcap loop (C)"]["outs"][-1].split()[:2])
    loops = [json.loads(o) for o in res["webtap runner (in-process loop)"]["outs"]]
    wt = dict(loops[-1])
    for k in ("loop_s", "import_s", "loop_cpu_s"):
        wt[k] = median([x[k] for x in loops])
    ts_pairs = None
    if "tshark first-packet" in res:
        out = res["tshark first-packet"]["outs"][-1]
        ts_pairs = sum(1 for ln in out.decode(errors="replace").splitlines() if ln.split("\t")[-1])

    # sanity: same packets as libpcap, pairs within a few % of tshark's, positive timings
    assert wt["packets"] == npk, f"webtap read {wt['packets']} packets, libpcap {npk}"
    assert 0 < wt["paired"] <= wt["records"]
    if ts_pairs is not None:
        # The bench trace repeats the corpus ROUNDS times with the same 4-tuples and sequence
        # numbers; tshark's stream tracking takes rounds 2.. for retransmissions and stops
        # dissecting them, webtap pairs every round (its GC clears the table between rounds).
        # So: webtap >= tshark here, and webtap ~ ROUNDS x tshark on a one-round trace.
        assert wt["paired"] >= ts_pairs, (wt["paired"], ts_pairs)
    print(f"\ntrace {trace}: {npk:,} packets, {nbytes / 1e6:.1f} MB captured; webtap "
          f"{wt['messages']:,} HTTP messages, {wt['paired']:,} pairs"
          + (f"; tshark first-packet {ts_pairs:,} pairs" if ts_pairs is not None else ""))
    print(f"webtap ran under {PYTHON} ({'wheel install' if 'wheel-venv' in PYTHON else 'this interpreter'}); "
          f"before: {load_before}")
    print(paired_table(res, "webtap httpanalyzer", npk, nbytes,
                       extra={"  webtap loop (runner, in-process)": wt["loop_s"]}))
    print(targets(res, wt))
    # last: the core benchmark grows this process, and children forked after it would inherit
    # that RSS in their ru_maxrss
    return _core()


def targets(res: dict, wt: dict) -> str:
    """Issue 21's targets for the whole process (the installed command, default options),
    as medians of per-round ratios; the in-process loop beside them, labelled."""
    me = "webtap httpanalyzer"
    want = [("tshark first-packet", 100.0, "x faster than tshark first-packet"),
            ("httpry", 2.0, "x faster than httpry"),
            ("libpcap loop (C)", 0.8, "x the speed of the bare libpcap loop")]
    rss = res[me]["rss"] / 2**20
    lines = [f"targets (issue 21), whole process, median of per-round ratios; webtap start-up "
             f"(interpreter + imports, runner) {wt['import_s']:.3f} s; loop CPU time "
             f"{wt['loop_cpu_s']:.3f} s = {wt['packets'] / wt['loop_cpu_s'] / 1e6:.2f} Mpps per CPU second:"]
    for name, goal, what in want:
        if name not in res:
            continue
        r = median(pair_ratios(res, me, name))     # their time / webtap's, per round
        loop = median(res[name]["walls"]) / wt["loop_s"]
        lines.append(f"  process {r:7.2f}{what:<40} target {goal:g}: {'met' if r >= goal else 'NOT met'}"
                     f"   (in-process loop: {loop:.2f}x)")
    lines.append(f"  peak RSS {rss:.1f} MB, target <= 200 MB: {'met' if rss <= 200 else 'NOT met'}")
    return "\n".join(lines)


def _core() -> int:
    core = bench_core()
    print(f"\npairing core alone: {core['messages']:,} messages in {core['seconds']:.3f} s = "
          f"{core['Mmsg/s']:.2f} M messages/s (records built as Arrow batches)")
    assert core["Mmsg/s"] > 0.5, "pairing core slower than 0.5 M messages/s"
    return 0


if __name__ == "__main__":
    sys.exit(main())
