"""Per-GET match time of the URL store (issue 35) vs the AVL tree alone, IN-PROCESS and paired:
the GETs of the shared benchmark trace extracted once (ext/url/urlmatch.pyx extract, key form), a
real list (ut1-history malware URLs) plus the hosts of every 20th GET (as bench_filter), both
matchers built from the same entries, then `match_batch(keys, offsets, True, False, times)` --
the URL analyzer's call, per-URL times -- alternating store / tree for R rounds.

    python -m benchmarks.bench_urlstore_get [R]
"""
from __future__ import annotations

import gzip
import sys
import time

import numpy as np

from benchmarks.bench_filter import _load_batches
from benchmarks.common import SHARED, bench_trace, load_average, warm
from urlfilter.tree import build_tree
from urlfilter.urlstore import build_store
from webtap._ext import urlmatch as um


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    trace = bench_trace()
    warm(trace)
    batches, _ = _load_batches(trace, 500000)
    with gzip.open(SHARED / "blacklists" / "ut1-history/malware/urls.gz", "rb") as f:
        urls = [u.decode("latin-1") for u in f.read().split(b"\n") if u]
    extracted = [um.extract(mb.msgs, mb.data, True) for _, _, mb in batches]
    keys = []
    for rows, k, o, _ in extracted:
        ks = bytes(k).decode("latin-1")
        keys.extend(ks[o[i]:o[i + 1]] for i in range(len(rows)))
    own = sorted({k.split("/")[0].split("?")[0] for k in keys[::20]})
    own = [".".join(reversed(h.split(":")[0].split("."))) + (":" + h.split(":")[1] if ":" in h else "") for h in own]
    tree, _ = build_tree(urls + own)
    tree.optimize()
    store, _ = build_store(urls + own)
    n = sum(len(e[0]) for e in extracted)
    res = {"store": [], "tree": []}
    for r in range(rounds):
        order = (("store", store), ("tree", tree)) if r % 2 == 0 else (("tree", tree), ("store", store))
        for name, m in order:
            t0 = time.thread_time_ns()
            ids = [m.match_batch(k, o, True, False, np.zeros(len(rows), np.int64)) for rows, k, o, _ in extracted]
            res[name].append((time.thread_time_ns() - t0) / n)
            hits = int(sum((i > 0).sum() for i in ids))
    ratios = sorted(a / b for a, b in zip(res["store"], res["tree"]))
    print(f"bench_urlstore_get: IN-PROCESS, {n} GETs of {trace}, {len(store)} entries, {hits} hits; "
          f"{rounds} rounds alternating; {load_average()}")
    print(f"per GET (thread CPU, median of rounds): store {np.median(res['store']):.1f} ns, tree "
          f"{np.median(res['tree']):.1f} ns; store / tree per round: median {ratios[len(ratios) // 2]:.3f}, "
          f"range {ratios[0]:.3f}-{ratios[-1]:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
