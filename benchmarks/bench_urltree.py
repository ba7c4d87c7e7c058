"""Benchmark: webtap's compressed AVL URL tree vs Python set (exact) vs marisa-trie (prefix, static)
vs the paper's figures (PAPERS.md section 2), on the real shared blacklists.

    WEBTAP_SHARED=../shared python -m benchmarks.bench_urltree            # the three history URL lists
    BENCH_SET=all python -m benchmarks.bench_urltree                      # + the UT1 domain lists (> 1 M)
    BENCH_N=200000 python -m benchmarks.bench_urltree                     # a smaller run

Latency distributions of the tree are measured per operation inside the C loop (canonicalisation
included; matches: one clock_gettime per URL, each span from the previous URL's end; inserts and
deletes: one before and one after each URL) and the peers per call from Python (that is how they
are used): those columns are not comparable across contenders. The comparison is the last table:
every contender per call from Python on the same raw URLs (canonicalise + look up), one timer. Every result is checked: the tree's exact and prefix answers must equal the set's
and marisa-trie's (plus the boundary rule) on every query, and the snapshot must answer the same.
"""
from __future__ import annotations

import os as _os

_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # numpy's BLAS threads spin on the 2 shared cores

import gc
import gzip
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import load_average

from urlfilter.canon import canonicalize_many
from urlfilter.tree import UrlTree, arrow_layout, build_tree

PAPER = {"bytes_per_url": 35.54, "insert_us_mean": 4.95, "match_us_mean": 3.83, "lookup_id_us": 0.6,
         "mean_url_bytes": 67.49}

URL_LISTS = ["ut1-history/phishing/urls.gz", "ut1-history/malware/urls.gz", "ut1-history/adult/urls.gz"]
DOMAIN_LISTS = ["ut1-history/malware/domains.gz", "ut1-history/phishing/domains.gz"]


def shared() -> Path:
    return Path(os.environ.get("WEBTAP_SHARED", Path(__file__).resolve().parents[1] / ".." / "shared"))


def read_lines(rel: str) -> list[bytes]:
    with gzip.open(shared() / "blacklists" / rel, "rb") as f:
        return f.read().split(b"\n")[:-1]


def pct(a, q):
    return float(np.percentile(a, q)) if len(a) else float("nan")


def boundary(q: str, b: int) -> bool:
    """Python copy of the component-boundary rule (ext/url/avl.pyx) for the marisa-trie peer."""
    host_end = len(q)
    for i, c in enumerate(q):
        if c in ":/?":
            host_end = i
            break
    qpos = q.find("?", host_end)
    qpos = len(q) if qpos < 0 else qpos
    if b < host_end:
        return q[b] == "."
    if b == host_end:
        return True
    if b > qpos:
        return False
    return q[b] == "/" or b == qpos


def main():
    which = os.environ.get("BENCH_SET", "urls")
    limit = int(os.environ.get("BENCH_N", "0")) or None
    rng = np.random.default_rng(1)
    raw = []
    for rel in URL_LISTS + (DOMAIN_LISTS if which == "all" else []):
        raw += read_lines(rel)
    # unique raw entries, in the lists' order (the history unions are first-seen ordered)
    raw = list(dict.fromkeys(raw))
    if limit:
        raw = raw[:limit]
    mean_raw = float(np.mean([len(x) for x in raw]))
    data, offsets = arrow_layout(raw)
    keys, codes = canonicalize_many(data, offsets, key=True)
    ok = codes == 0
    keys = [k for k, good in zip(keys, ok) if good]
    unique_keys = sorted(set(keys))
    n = len(unique_keys)
    print(f"# {len(raw)} unique raw entries ({which}), mean {mean_raw:.1f} bytes; {n} unique canonical keys "
          f"(mean {np.mean([len(k) for k in unique_keys]):.1f} bytes), {int((~ok).sum())} rejected")

    # ---- queries: every entry (hits), entries with an extra segment (prefix hits), benign misses
    benign = read_lines("benign/umbrella-top-100k.gz") + read_lines("benign/alexa-top-100k-2016.gz")
    order = rng.permutation(len(raw))
    half = min(200000, len(raw) // 2)
    hits = [raw[i] for i in order[:half]]
    deeper = [raw[i] + b"/index.html" for i in order[half:half + 100000]]
    misses = [b"https://" + d + b"/index.html" for d in benign]
    queries = hits + deeper + misses
    qdata, qoff = arrow_layout(queries)
    qkeys, qcodes = canonicalize_many(qdata, qoff, key=True)

    # ---- webtap tree: build, insert/delete latency, match latency
    gc.collect()
    tree = UrlTree()
    ins_t = np.zeros(len(raw), np.int64)
    t0 = time.perf_counter()
    ids, icodes = tree.insert_batch(data, offsets, timings=ins_t)
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    mapping = tree.optimize()            # pre-order ids and records (ext/url/avl.pyx, optimize)
    optimize_s = time.perf_counter() - t0
    ids = np.where(ids > 0, mapping[np.maximum(ids, 0)], ids).astype(np.int32)
    assert len(tree) == n, (len(tree), n)
    new = icodes == 0
    ins_us = ins_t[new] / 1e3
    st = tree.stats()
    tree_paper_bpu = st["paper_bytes"] / n
    tree_total_bpu = st["allocated_bytes"] / n
    tree.check() if n <= 200000 else None

    results = {}
    for name, prefix in (("exact", False), ("prefix", True)):
        # latency: the per-URL times of the fastest of 3 timed runs (the 2 cores are shared, so
        # the best run is the one least disturbed); throughput: the fastest of 3 untimed runs,
        # which match 16 URLs in lockstep (ext/url/avl.pyx, _match_group)
        best_total, tm = float("inf"), None
        for _ in range(3):
            gc.collect()
            one = np.zeros(len(queries), np.int64)
            res = tree.match_batch(qdata, qoff, prefix=prefix, timings=one)
            if one.sum() < best_total:
                best_total, tm = one.sum(), one
        batch_s = float("inf")
        for _ in range(3):
            gc.collect()
            t0 = time.perf_counter()
            res2 = tree.match_batch(qdata, qoff, prefix=prefix)
            batch_s = min(batch_s, time.perf_counter() - t0)
        assert (res2 == res).all(), "lockstep batch disagrees with one-at-a-time matching"
        results[name] = (res, tm / 1e3, len(queries) / batch_s)

    # what the per-URL timing itself costs: an empty query's span (the canonicaliser rejects it in
    # a few ns), one clock_gettime and the loop's bookkeeping since 2026-11-27 (two clock reads
    # before: ~20 ns each on the 2026 VM): part of every timed match median.
    ed, eo = np.zeros(0, np.uint8), np.zeros(100001, np.int64)
    timer_ns = float("inf")
    for _ in range(3):
        et = np.zeros(100000, np.int64)
        tree.match_batch(ed, eo, timings=et)
        timer_ns = min(timer_ns, float(np.median(et)))

    # single calls from Python (UrlTree.match: C canonicaliser, one descent), per call
    pyq = queries[:100000]
    py_us = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for u in pyq:
            tree.match(u)
        py_us = min(py_us, (time.perf_counter() - t0) / len(pyq) * 1e6)

    # bulk build (sort once, balanced, pre-order ids): what urlfilter's manager does
    gc.collect()
    t0 = time.perf_counter()
    bulk, _ = build_tree(raw)
    bulk_s = time.perf_counter() - t0
    assert len(bulk) == n
    bulk_height = bulk.height
    best_total, btm = float("inf"), None
    for _ in range(3):
        one = np.zeros(len(queries), np.int64)
        bres = bulk.match_batch(qdata, qoff, timings=one)
        if one.sum() < best_total:
            best_total, btm = one.sum(), one
    assert [bulk.get_key(int(i)) if i > 0 else None for i in bres[:20000]] == \
        [tree.get_key(int(i)) if i > 0 else None for i in results["prefix"][0][:20000]]
    bulk_us = btm / 1e3
    bulk_bpu = bulk.stats()["paper_bytes"] / n
    del bulk

    # lookup by id from Python
    sample_ids = ids[new][rng.integers(0, new.sum(), 20000)].tolist()
    t0 = time.perf_counter()
    for i in sample_ids:
        tree.get_key(i)
    byid_us = (time.perf_counter() - t0) / len(sample_ids) * 1e6

    # snapshot round trip
    with tempfile.TemporaryDirectory() as tmp:
        snap = Path(tmp) / "tree.snap"
        t0 = time.perf_counter()
        tree.save(snap)
        save_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        mapped = UrlTree.load(snap)
        load_s = time.perf_counter() - t0
        assert (mapped.match_batch(qdata, qoff) == tree.match_batch(qdata, qoff)).all()
        snap_bytes = snap.stat().st_size
        del mapped

    # ---- Python set (exact, canonical strings)
    gc.collect()
    t0 = time.perf_counter()
    s = set(unique_keys)
    set_build = time.perf_counter() - t0
    set_bytes = sys.getsizeof(s) + sum(sys.getsizeof(k) for k in unique_keys)
    set_t = np.zeros(len(qkeys), np.float64)
    set_res = np.zeros(len(qkeys), bool)
    pc = time.perf_counter_ns
    for i, k in enumerate(qkeys):
        a = pc()
        set_res[i] = k in s
        set_t[i] = pc() - a
    exact_res = results["exact"][0]
    assert ((exact_res > 0) == set_res).all(), "tree exact match disagrees with set"
    del s

    # ---- marisa-trie (static; prefix via .prefixes() + the boundary rule)
    import marisa_trie

    gc.collect()
    t0 = time.perf_counter()
    trie = marisa_trie.Trie(unique_keys)
    trie_build = time.perf_counter() - t0
    trie_bytes = len(trie.tobytes())
    trie_t = np.zeros(len(qkeys), np.float64)
    trie_res = []
    for i, k in enumerate(qkeys):
        a = pc()
        best = None
        if k:
            for p in trie.prefixes(k):
                if (len(p) == len(k) or boundary(k, len(p))) and (best is None or len(p) > len(best)):
                    best = p
        trie_t[i] = pc() - a
        trie_res.append(best)
    prefix_res = results["prefix"][0]
    for i, (r, best) in enumerate(zip(prefix_res.tolist(), trie_res)):
        got = tree.get_key(r).decode() if r > 0 else None
        assert got == best, (queries[i], got, best)

    # ---- like with like: every contender per call from Python, on the same raw URLs, doing
    # the same work (canonicalise with the C canonicaliser, then look up), timed by the same
    # clock around each call. The tables above time the tree inside its C batch loop and the
    # peers per call from Python; those columns are not comparable with each other, these are.
    from webtap._ext.canon import canonicalize_bytes

    same = queries[:100000]
    sk = set(unique_keys)

    def _set_call(u):
        k, code = canonicalize_bytes(u, True)
        return (k.decode() in sk) if not code else False

    def _trie_call(u):
        k, code = canonicalize_bytes(u, True)
        if code:
            return None
        k = k.decode()
        best = None
        for p in trie.prefixes(k):
            if (len(p) == len(k) or boundary(k, len(p))) and (best is None or len(p) > len(best)):
                best = p
        return best

    per_call = {}
    for label, fn in (("webtap tree.match (prefix)", tree.match), ("Python set (exact)", _set_call),
                      ("marisa-trie (prefix)", _trie_call)):
        best_t = None
        for _ in range(3):
            t = np.zeros(len(same), np.float64)
            for i, u in enumerate(same):
                a = pc()
                fn(u)
                t[i] = pc() - a
            if best_t is None or t.sum() < best_t.sum():
                best_t = t
        per_call[label] = best_t / 1e3


    # delete latency (last: re-inserting changes ids): remove 50,000 random entries, check, put them back
    didx = rng.choice(np.flatnonzero(new), min(50000, int(new.sum())), replace=False)
    dd, do = arrow_layout([raw[i] for i in didx])
    del_t = np.zeros(len(didx), np.int64)
    removed = tree.delete_batch(dd, do, timings=del_t)
    assert (removed == ids[didx]).all()
    assert (tree.match_batch(dd, do, prefix=False) == 0).all()
    tree.insert_batch(dd, do)
    assert len(tree) == n
    del_us = del_t / 1e3

    # ---- table
    ex_us, px_us = results["exact"][1], results["prefix"][1]
    hit_rate = float((prefix_res > 0).mean())
    rows = [
        ("bytes per URL (paper def: arrays as used)", f"{tree_paper_bpu:.2f}", "-", f"{trie_bytes / n:.2f}", f"{PAPER['bytes_per_url']}"),
        ("bytes per URL (all memory held)", f"{tree_total_bpu:.2f}", f"{set_bytes / n:.1f}", f"{trie_bytes / n:.2f}", "-"),
        ("snapshot file bytes per URL", f"{snap_bytes / n:.2f}", "-", "-", "-"),
        ("build s (+ optimize s)", f"{build_s:.2f} (+{optimize_s:.2f})", f"{set_build:.2f}", f"{trie_build:.2f}", "-"),
        ("insert us median / p99 / mean", f"{np.median(ins_us):.2f} / {pct(ins_us, 99):.2f} / {ins_us.mean():.2f}", "-", "static", f"mean {PAPER['insert_us_mean']}"),
        ("delete us median / p99", f"{np.median(del_us):.2f} / {pct(del_us, 99):.2f}", "-", "static", "-"),
        ("exact match us median / p99", f"{np.median(ex_us):.2f} / {pct(ex_us, 99):.2f}", f"{np.median(set_t) / 1e3:.2f} / {pct(set_t, 99) / 1e3:.2f}", "-", "-"),
        ("prefix match us median / p99 / mean", f"{np.median(px_us):.2f} / {pct(px_us, 99):.2f} / {px_us.mean():.2f}", "-", f"{np.median(trie_t) / 1e3:.2f} / {pct(trie_t, 99) / 1e3:.2f} / {trie_t.mean() / 1e3:.2f}", f"mean {PAPER['match_us_mean']}"),
        ("timer overhead in each timed URL us (empty query)", f"{timer_ns / 1e3:.2f}", "-", "-", "-"),
        ("exact / prefix median minus timer overhead us", f"{np.median(ex_us) - timer_ns / 1e3:.2f} / {np.median(px_us) - timer_ns / 1e3:.2f}", "-", "-", "-"),
        ("prefix match from Python per call us (mean)", f"{py_us:.2f}", "-", "-", "-"),
        ("bulk build s / height / bytes per URL", f"{bulk_s:.2f} / {bulk_height} / {bulk_bpu:.2f}", "-", "-", "-"),
        ("prefix match us median / p99 (bulk-built)", f"{np.median(bulk_us):.2f} / {pct(bulk_us, 99):.2f}", "-", "-", "-"),
        ("prefix batch M URL/s (1 core, lockstep)", f"{results['prefix'][2] / 1e6:.2f}", "-", f"{1 / trie_t.mean() * 1e3:.2f}", f"{1 / PAPER['match_us_mean']:.2f}"),
        ("lookup by id us (from Python)", f"{byid_us:.2f}", "-", "-", f"{PAPER['lookup_id_us']}"),
        ("snapshot save / load ms", f"{save_s * 1e3:.0f} / {load_s * 1e3:.2f}", "-", "-", "-"),
    ]
    print(f"# {len(queries)} queries: {len(hits)} listed, {len(deeper)} listed + '/index.html', "
          f"{len(misses)} benign; prefix hit rate {hit_rate:.3f}; tree height {st['height']}; "
          f"no-prefix flags on {st['no_prefix_flags'] / n:.1%} of the keys")
    w = [44, 26, 18, 24, 14]
    head = ["measure", "webtap AVL", "Python set", "marisa-trie", "paper"]
    print("| " + " | ".join(h.ljust(x) for h, x in zip(head, w)) + " |")
    print("|" + "|".join("-" * (x + 2) for x in w) + "|")
    for r in rows:
        print("| " + " | ".join(c.ljust(x) for c, x in zip(r, w)) + " |")
    print(f"ratios: prefix match median, marisa / webtap = {np.median(trie_t) / 1e3 / np.median(px_us):.1f}x; "
          f"paper mean / webtap mean = {PAPER['match_us_mean'] / px_us.mean():.1f}x; "
          f"bytes per URL webtap / paper = {tree_paper_bpu / PAPER['bytes_per_url']:.2f}; "
          f"webtap / set (exact median) = {np.median(ex_us) / (np.median(set_t) / 1e3):.2f}")
    print(f"per call from Python, every contender alike ({len(same)} raw URLs, canonicalise + look up, "
          f"best of 3 passes; {load_average()}):")
    for label, t in per_call.items():
        print(f"  {label:<28} median {np.median(t):.2f} us, p99 {pct(t, 99):.2f} us, mean {t.mean():.2f} us")
    tm = np.median(per_call["webtap tree.match (prefix)"])
    print("  ratios of medians: " + ", ".join(f"{k} / webtap = {np.median(v) / tm:.2f}x"
                                               for k, v in per_call.items() if not k.startswith("webtap")))
    print("all results checked: tree == set (exact), tree == marisa-trie + boundary rule (prefix), "
          "snapshot == tree, delete/re-insert")


if __name__ == "__main__":
    main()
