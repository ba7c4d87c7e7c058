"""Benchmark (issue 18): SNI extraction + match per ClientHello, forge time per hit, TLS over TCP
and QUIC (Initial decryption and the close's key derivation + AEAD + header protection included).

    python -m benchmarks.bench_sni [N]          # N ClientHellos of each kind (default 20000)

All figures are in-process (the C passes called on batches in memory, no capture, no injection):
per ClientHello = batch time / N; per hit = the forge loops' own per-hit clock (forge_ns). The
blacklist: 100,000 random domains plus half of the benchmark's SNIs (so half the lookups hit).
Paper (PAPERS.md section 2): < 1 us per URL. Targets: < 0.5 us TCP, < 5 us QUIC.
"""
from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from tests.quic.hello import client_hello, crypto, frame, initial, records, sni_ext, write
from urlfilter.tree import UrlTree
from webtap.capture import open_trace
from webtap._ext import urlmatch as um


def _batches(path):
    return [(b.packets.copy(), np.asarray(b.data).copy()) for b in open_trace(str(path))]


def _names(n, rng):
    return [f"www.{''.join(rng.choice('abcdefghijklmnopqrstuvwxyz') for _ in range(10))}.{rng.choice(['com', 'net', 'org', 'de'])}"
            for _ in range(n)]


def main(n: int = 20000) -> None:
    rng = random.Random(18)
    names = _names(n, rng)
    tree = UrlTree()
    for d in _names(100_000, rng) + [s[4:] for s in names[::2]]:
        tree.insert(d)
    dcid = bytes(8)
    with tempfile.TemporaryDirectory() as d:
        tls = Path(d, "tls.pcap")
        write(tls, [frame(records(client_hello(sni_ext(s.encode()))), sport=1024 + i % 60000, seq=i)
                    for i, s in enumerate(names)])
        quic = Path(d, "quic.pcap")
        write(quic, [frame(initial(crypto(0, client_hello(sni_ext(s.encode()), quic=True)),
                                   dcid=i.to_bytes(8, "big")), sport=49152 + i % 16000, udp=True)
                     for i, s in enumerate(names)])
        rows = []
        for kind, path, forge in (("TLS/TCP", tls, um.forge), ("QUIC", quic, um.forge_quic)):
            best = None
            for _ in range(5):
                t = um.SniTable()
                batches = _batches(path)
                t0 = time.perf_counter_ns()
                outs = [t.extract(pk, data, False) + (data,) for pk, data in batches]
                t_ext = time.perf_counter_ns() - t0
                match_ns, forge_ns, nhit = [], [], 0
                for msgs, proto, flags, keys, koff, sni, soff, cnt, data in outs:
                    mns = np.zeros(len(msgs), np.int64)
                    ids = tree.match_batch(keys, koff, True, False, mns)
                    match_ns.append(mns)
                    hit = np.flatnonzero(ids > 0)
                    nhit += len(hit)
                    if len(hit):
                        forge_ns.append(forge(msgs, data, hit)[2])
                got = sum(len(o[0]) for o in outs)
                assert got == n, (kind, got)
                ext = t_ext / n
                mt = float(np.median(np.concatenate(match_ns)))
                ft = float(np.median(np.concatenate(forge_ns)))
                if best is None or ext + mt + ft < sum(best[1:4]):
                    best = (kind, ext, mt, ft, nhit)
            rows.append(best)
    print(f"in-process, {n} ClientHellos per kind, best of 5 runs; medians per lookup / per hit")
    print(f"{'kind':8} {'extract us':>11} {'match us':>9} {'forge us':>9} {'total us':>9} {'target us':>10} {'hits':>6}")
    for kind, ext, mt, ft, nhit in rows:
        target = 0.5 if kind.startswith("TLS") else 5.0
        tot = (ext + mt + ft) / 1000
        print(f"{kind:8} {ext / 1000:11.3f} {mt / 1000:9.3f} {ft / 1000:9.3f} {tot:9.3f} {target:10.1f} {nhit:6d}"
              f"  {'met' if tot < target else 'NOT met'}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20000)
