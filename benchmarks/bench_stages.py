"""Time per stage of the URL filter (issue 34, Lin et al.'s Fig. 4): the share of read, dissect,
canonicalise, match and forge per GET and per ClientHello.

    python -m benchmarks.bench_stages [--n N] [--rounds R]
    from benchmarks.bench_stages import stage_times
    t = stage_times("get", "trace.pcap", tree)      # {stage: ns}, lookups, hits

IN-PROCESS figures: the filter's C passes called one after the other on one trace, each timed
on its own with time.perf_counter_ns (wall) around the call over every packet batch, in the
order the URL filter runs them (urlfilter.analyzer):

* read: the reader (webtap.capture.open_trace) filling its batches from the file, page cache warm
  (the batches are copied out, as the analyzer keeps them while it works on them);
* dissect: the walk, webtap.dissect.dissect (HTTP first packets; for ClientHellos with the SNI
  table's watch list, tls_watch=: the TLS/QUIC candidates of the same walk);
* canonicalise: GETs: urlmatch.extract (the URL from Host + target, canonical key form, one C
  pass); ClientHellos: SniTable.extract_messages (the hello's parse, its SNI, the key form);
* match: UrlTree.match_batch over the keys (the store's tree, snapshot mapped);
* forge: urlmatch.forge (TCP FIN/RST pair) on the hits.

Per lookup = stage time / lookups (GETs or ClientHellos found); the shares are the stages' times
over their sum (so they add up to the whole, 100 %); the table gives the median over rounds.
Synthetic traces as bench_sni's: N GETs (distinct hosts) and N TLS ClientHellos (distinct SNIs),
one packet each; blacklist: 100,000 random domains plus half of the names, so half the lookups
hit, imported into a real SQLite store and loaded as `urlfilter scan --db` loads it.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import REPEAT, load_average, median
from tests.quic.hello import client_hello, frame, records, sni_ext, write
from urlfilter.analyzer import load_blacklist
from urlfilter.importers import import_path
from urlfilter.store import Store
from webtap._ext import urlmatch as um
from webtap.capture import open_trace
from webtap.dissect import dissect

STAGES = ("read", "dissect", "canonicalise", "match", "forge")
KINDS = ("get", "clienthello")


def _ns():
    return time.perf_counter_ns()


def stage_times(kind: str, path, tree, sni_table=None) -> dict:
    """One pass of the filter's stages over a trace, each stage timed on its own (module
    docstring). kind: 'get' or 'clienthello'. Returns {"ns": {stage: ns}, "lookups": n,
    "hits": n, "total_ns": sum of the stages}."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}")
    ns = dict.fromkeys(STAGES, 0)
    t0 = _ns()
    batches = [(b.packets.copy(), np.asarray(b.data).copy()) for b in open_trace(str(path))]
    ns["read"] += _ns() - t0
    sni = sni_table if sni_table is not None else (um.SniTable() if kind == "clienthello" else None)
    lookups = hits = 0
    for pk, data in batches:
        t0 = _ns()
        mb = dissect(pk, data, tls_watch=sni.watch if sni is not None else None)
        t1 = _ns()
        if kind == "get":
            rows, keys, offs, _ = um.extract(mb.msgs, data, False)
            msgs = mb.msgs
        else:
            msgs, _, _, keys, offs, _, _, _ = sni.extract_messages(mb.tls, data, False)
            rows = np.arange(len(msgs), dtype=np.int64)
        t2 = _ns()
        ids = tree.match_batch(keys, offs, True, False, np.zeros(len(offs) - 1, np.int64))
        t3 = _ns()
        hit = np.flatnonzero(ids > 0)
        if len(hit):
            um.forge(msgs, data, rows[hit])
        t4 = _ns()
        ns["dissect"] += t1 - t0
        ns["canonicalise"] += t2 - t1
        ns["match"] += t3 - t2
        ns["forge"] += t4 - t3
        lookups += len(offs) - 1
        hits += len(hit)
    return {"ns": ns, "lookups": lookups, "hits": hits, "total_ns": sum(ns.values())}


def shares(t: dict) -> dict:
    """Each stage's share (%) of the stages' sum."""
    tot = t["total_ns"] or 1
    return {s: 100.0 * t["ns"][s] / tot for s in STAGES}


def _names(n, rng):
    return [f"www.{''.join(rng.choice('abcdefghijklmnopqrstuvwxyz') for _ in range(10))}."
            f"{rng.choice(['com', 'net', 'org', 'de'])}" for _ in range(n)]


def build_inputs(d, n: int, seed: int = 34):
    """(GET trace, ClientHello trace, store path) for n lookups of each kind in folder d."""
    rng = random.Random(seed)
    names = _names(n, rng)
    bl = Path(d, "bench.txt")
    bl.write_text("".join(f"{x}\n" for x in _names(100_000, rng) + [s[4:] for s in names[::2]]))
    db = Path(d, "bl.db")
    store = Store(db)
    import_path(store, bl, "list", "bench")
    store.close()
    load_blacklist(db).manager.close()      # builds the tree and saves its snapshot
    gets = Path(d, "get.pcap")
    write(gets, [frame(f"GET /index.html HTTP/1.1\r\nHost: {s}\r\nUser-Agent: bench\r\n\r\n".encode(),
                       sport=1024 + i % 60000, dport=80, seq=i) for i, s in enumerate(names)])
    tls = Path(d, "tls.pcap")
    write(tls, [frame(records(client_hello(sni_ext(s.encode()))), sport=1024 + i % 60000, seq=i)
                for i, s in enumerate(names)])
    return gets, tls, db


def run(n: int, rounds: int) -> dict:
    """kind -> list of stage_times() per round (rounds alternate GET / ClientHello)."""
    with tempfile.TemporaryDirectory() as d:
        gets, tls, db = build_inputs(d, n)
        bl = load_blacklist(db)
        out = {k: [] for k in KINDS}
        for _ in range(rounds):
            out["get"].append(stage_times("get", gets, bl.tree))
            out["clienthello"].append(stage_times("clienthello", tls, bl.tree))
        bl.manager.close()
    return out


def table(res: dict):
    """Median per lookup (µs) and share (%) of each stage, per kind, as a DataFrame."""
    import pandas as pd

    rows = []
    for kind, rs in res.items():
        n = rs[0]["lookups"]
        for s in STAGES:
            per = median([r["ns"][s] for r in rs]) / max(n, 1) / 1000
            rows.append({"kind": kind, "stage": s, "us_per_lookup": per,
                         "share_pct": median([shares(r)[s] for r in rs])})
    return pd.DataFrame(rows).set_index(["kind", "stage"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="bench_stages")
    ap.add_argument("--n", type=int, default=int(os.environ.get("WEBTAP_BENCH_STAGES_N", "20000")))
    ap.add_argument("--rounds", type=int, default=max(REPEAT, 5))
    a = ap.parse_args(argv)
    print(f"bench_stages: IN-PROCESS, {a.n} lookups per kind, {a.rounds} rounds; {load_average()} "
          "at the start", flush=True)
    res = run(a.n, a.rounds)
    print(table(res).round(3).to_string())
    print(f"bench_stages: {load_average()} at the end", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
