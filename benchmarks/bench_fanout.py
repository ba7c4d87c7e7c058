"""Benchmark: live capture through the kernel's fanout (httpanalyzer.fanout): the highest replay
rate at which N = 1 and N = 2 consumers take every frame with 0 kernel drops.

A trace's first LIMIT frames are sent at a bounded rate into a veth pair in a network namespace
made for the run (needs root), N consumer processes capture them on AF_PACKET TPACKET_V3 rings
(the default flow-hash fanout), and the kernel's PACKET_STATISTICS say how many frames each ring
received and dropped. Rates rise until drops appear; the rate reported is the one the sender
reached (frames / its seconds), which may fall short of the one asked for.

    python -m benchmarks.bench_fanout [--limit N] [--rates R1,R2,...] [--consumers 1,2]
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from benchmarks.common import OUT, REPO, load_average

RATES = [10_000, 20_000, 50_000, 100_000, 200_000, 0]      # frames/s; 0 = unpaced


def _py(ns, *args):
    return subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-m", "tests.fanout.replay",
                             *map(str, args)], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def one(trace: str, consumers: int, rate: int, limit: int, tag: str) -> dict:
    from tests.fanout.replay import veth_namespace

    out = pathlib.Path(tempfile.mkdtemp(prefix="fanout-", dir=OUT)) / "run"
    with veth_namespace(tag) as (ns, tx, rx):
        cap = _py(ns, "capture", rx, consumers, "hash", 0, out, 60)
        if cap.stdout.readline().strip() != "ready":
            cap.kill()
            raise RuntimeError(cap.stderr.read())
        snd = _py(ns, "send", tx, trace, rate, limit)
        so, se = snd.communicate()
        if snd.returncode:
            raise RuntimeError(se)
        w = so.split()
        sent, secs = int(w[1]), float(w[5])
        time.sleep(2.0)                 # let the consumers finish what their rings hold
        cap.send_signal(signal.SIGINT)
        cap.communicate(timeout=300)
    rep = json.loads(pathlib.Path(str(out) + ".json").read_text())
    shutil.rmtree(out.parent, ignore_errors=True)
    rows = rep["balance"]["consumers"]
    return {"consumers": consumers, "asked": rate, "sent": sent, "pps": sent / secs,
            "received": sum(r["kernel_packets"] for r in rows),
            "drops": sum(r["kernel_drops"] for r in rows),
            "processed": sum(r["packets"] for r in rows), "records": sum(r["records"] for r in rows)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=100_000)
    ap.add_argument("--rates", default=",".join(map(str, RATES)))
    ap.add_argument("--consumers", default="1,2")
    ap.add_argument("--trace", default=None)
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bench_fanout: needs root (network namespaces, AF_PACKET); skipped")
        return 0
    from benchmarks.common import bench_trace

    trace = a.trace or str(bench_trace())
    OUT.mkdir(exist_ok=True)
    print(f"trace {trace}, first {a.limit:,} frames; {load_average()}")
    print(f"{'consumers':>9} {'asked pps':>10} {'sent pps':>10} {'sent':>8} {'received':>9} "
          f"{'drops':>7} {'processed':>9}")
    best = {}
    for n in map(int, a.consumers.split(",")):
        for rate in map(int, a.rates.split(",")):
            r = one(trace, n, rate, a.limit, f"b{os.getpid() % 10000}{n}")
            print(f"{n:>9} {rate or 'max':>10} {r['pps']:>10,.0f} {r['sent']:>8,} {r['received']:>9,} "
                  f"{r['drops']:>7,} {r['processed']:>9,}", flush=True)
            if r["drops"] == 0 and r["received"] == r["sent"]:
                best[n] = max(best.get(n, 0), r["pps"])
            else:
                break
    for n, pps in best.items():
        print(f"N = {n}: highest replay rate with 0 drops {pps:,.0f} frames/s")
    print(load_average())
    return 0


if __name__ == "__main__":
    sys.exit(main())
