"""Benchmark (issue 18): SNI extraction + match per ClientHello and forge time per hit, TLS over TCP
and QUIC (Initial decryption, and the close's key derivation + AEAD + header protection).

    python -m benchmarks.bench_sni [--n N] [--rounds R]

IN-PROCESS figures: the C passes called on packet batches already in memory (no capture, no
injection, no process start-up), as the URL analyzer calls them: SniTable.extract over the
batches, UrlTree.match_batch with per-lookup times (what the analyzer records), forge /
forge_quic on the hits. Per ClientHello = call time / N, per hit = call time / hits. Each round
runs TLS then QUIC (alternating, so a change of machine load hits both alike); the table gives
the median over rounds of the wall time and of the thread's CPU time (time.thread_time: on a
loaded machine the wall figure includes time the thread waited for a core), with the load
average at the start and the end.

N synthetic ClientHellos of each kind (distinct names, QUIC: distinct DCIDs, one Initial each).
Blacklist: 100,000 random domains plus half of the benchmark's names, so half the lookups hit,
as the filter gets it: imported into a real SQLite store (`urlfilter import`'s import_path),
then opened twice with load_blacklist, the loader of `urlfilter scan/run --db`. The first open
builds the tree and saves its snapshot; the second maps that snapshot, which is what every later
start of the filter matches against. (Until 2026-11-27 the benchmark matched a tree built by
100,000 one-by-one inserts and never optimized, a layout no filter run uses: height 20 against
17, 0.031-0.038 us slower per lookup in an in-process A/B of the two trees.)
Paper (PAPERS.md section 2): < 1 us per URL. Targets: TCP extraction + match < 0.5 us; QUIC
extraction + match + forge < 5 us per hit.
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
from tests.quic.hello import client_hello, crypto, frame, initial, records, sni_ext, write
from urlfilter.analyzer import load_blacklist
from urlfilter.importers import import_path
from urlfilter.store import Store
from webtap._ext import urlmatch as um
from webtap.capture import open_trace


def _batches(path):
    return [(b.packets.copy(), np.asarray(b.data).copy()) for b in open_trace(str(path))]


def _names(n, rng):
    return [f"www.{''.join(rng.choice('abcdefghijklmnopqrstuvwxyz') for _ in range(10))}.{rng.choice(['com', 'net', 'org', 'de'])}"
            for _ in range(n)]


def _clock():
    return time.perf_counter_ns(), time.thread_time_ns()


def _since(t0):
    w, c = _clock()
    return w - t0[0], c - t0[1]


def one_round(kind, t, batches, tree, forge, n):
    """(extract, match, forge) as (wall ns, cpu ns) for the whole kind, and the hit count. t: the
    kind's SniTable, kept from round to round as a filter keeps it (its buffers stay grown)."""
    t0 = _clock()
    outs = [t.extract(pk, data, False) + (data, t.last_dcids) for pk, data in batches]
    ext = _since(t0)
    got = sum(len(o[0]) for o in outs)
    if got != n:
        raise SystemExit(f"bench_sni: {kind}: {got} lookups for {n} ClientHellos")
    t0 = _clock()
    ids = []
    for o in outs:
        ids.append(tree.match_batch(o[3], o[4], True, False, np.zeros(len(o[0]), np.int64)))
    mat = _since(t0)
    hits = [np.flatnonzero(i > 0) for i in ids]
    nhit = sum(len(h) for h in hits)
    t0 = _clock()
    for o, h in zip(outs, hits):
        if len(h):
            if forge is um.forge_quic:
                forge(o[0], o[-2], h, o[-1])
            else:
                forge(o[0], o[-2], h)
    fg = _since(t0)
    return ext, mat, fg, nhit


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="bench_sni")
    ap.add_argument("--n", type=int, default=int(os.environ.get("WEBTAP_BENCH_SNI_N", "20000")))
    ap.add_argument("--rounds", type=int, default=max(REPEAT, 5))
    ap.add_argument("--vs-tree", action="store_true",
                    help="also match against the bare AVL tree of the same entries (the matcher before "
                         "issue 35: bulk-built, optimized, saved and mapped), alternating round by round "
                         "in this process, and print the match-time ratio store / tree")
    a = ap.parse_args(argv)
    n = a.n
    rng = random.Random(18)
    names = _names(n, rng)
    with tempfile.TemporaryDirectory() as d:
        bl = Path(d, "bench.txt")
        bl.write_text("".join(f"{x}\n" for x in _names(100_000, rng) + [s[4:] for s in names[::2]]))
        db = Path(d, "bl.db")
        store = Store(db)
        import_path(store, bl, "list", "bench")
        store.close()
        load_blacklist(db).manager.close()      # builds the tree, saves the snapshot
        blacklist = load_blacklist(db)          # maps the snapshot, as every later filter start
        tree = blacklist.tree
        old = None
        if a.vs_tree:
            from urlfilter.tree import UrlTree, build_tree
            from webtap._ext.avl import key_to_url
            t_old, _ = build_tree([key_to_url(k) for k in tree.keys()])
            t_old.optimize()
            t_old.save(Path(d, "old.tree"))
            old = UrlTree.load(Path(d, "old.tree"))
        tls = Path(d, "tls.pcap")
        write(tls, [frame(records(client_hello(sni_ext(s.encode()))), sport=1024 + i % 60000, seq=i)
                    for i, s in enumerate(names)])
        quic = Path(d, "quic.pcap")
        # client ports from 49152: 3544, 4754, 4789 ... are tunnel ports (a datagram there is read
        # as Teredo, GRE-in-UDP, VXLAN)
        write(quic, [frame(initial(crypto(0, client_hello(sni_ext(s.encode()), quic=True)),
                                   dcid=i.to_bytes(8, "big")), sport=49152 + i % 16000, udp=True)
                     for i, s in enumerate(names)])
        kinds = [("TLS/TCP", _batches(tls), um.forge), ("QUIC", _batches(quic), um.forge_quic)]
        print(f"bench_sni: IN-PROCESS C passes on batches in memory, {n} ClientHellos per kind, "
              f"{a.rounds} rounds alternating TLS/QUIC; blacklist {len(tree)} entries from a store, "
              f"{'snapshot mapped' if tree.stats()['mapped'] else 'NOT mapped'}, height {tree.height}; "
              f"{load_average()} at the start", flush=True)
        res = {k[0]: [] for k in kinds}
        res_old = {k[0]: [] for k in kinds}
        tables = {k[0]: um.SniTable() for k in kinds}
        for r in range(a.rounds):
            for kind, batches, forge in kinds:
                pair = [(tree, res), (old, res_old)] if old is not None else [(tree, res)]
                for m, into in (pair if r % 2 == 0 else pair[::-1]):
                    into[kind].append(one_round(kind, tables[kind], batches, m, forge, n))
        if old is not None:
            for kind, _, _ in kinds:
                for ci, clock in ((0, "wall"), (1, "cpu")):
                    ms = median([x[1][ci] for x in res[kind]]) / n / 1000
                    mo = median([x[1][ci] for x in res_old[kind]]) / n / 1000
                    ratios = sorted(x[1][ci] / y[1][ci] for x, y in zip(res[kind], res_old[kind]))
                    print(f"{kind:8} {clock:5} match us: store {ms:.3f}, AVL tree {mo:.3f}; store / tree per round "
                          f"(paired, same process): median {ratios[len(ratios) // 2]:.3f}, "
                          f"range {ratios[0]:.3f}-{ratios[-1]:.3f}")
        print(f"{'kind':8} {'clock':5} {'extract us':>11} {'match us':>9} {'forge us/hit':>13} "
              f"{'ext+match us':>13} {'+forge us':>10} {'target us':>10} {'hits':>6}")
        rc = 0
        for kind, _, _ in kinds:
            rows = res[kind]
            nhit = rows[0][3]
            for ci, clock in ((0, "wall"), (1, "cpu")):
                ext = median([r[0][ci] for r in rows]) / n / 1000
                mat = median([r[1][ci] for r in rows]) / n / 1000
                fg = median([r[2][ci] for r in rows]) / max(nhit, 1) / 1000
                # the issue: extraction + match per ClientHello and forge per hit; QUIC's target
                # counts the forge, TCP's is read both ways (with the forge it is the stricter)
                target = 5.0 if kind == "QUIC" else 0.5
                em, emf = ext + mat, ext + mat + fg
                if kind == "QUIC":
                    verdict = f"{'met' if emf < target else 'NOT met'} (extract+match+forge"
                else:
                    verdict = (f"extract+match {'met' if em < target else 'NOT met'}, "
                               f"with the forge {'met' if emf < target else 'NOT met'} (both")
                print(f"{kind:8} {clock:5} {ext:11.3f} {mat:9.3f} {fg:13.3f} {em:13.3f} {emf:10.3f} "
                      f"{target:10.1f} {nhit:6d}  {verdict}, median of {len(rows)} rounds)")
        print(f"bench_sni: {load_average()} at the end; in-process figures, not whole processes", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
