"""Benchmark: the URL store of issue 35 (static base + AVL delta, urlfilter/urlstore.py) on the
shared lists, with the delta at 0, 1 % and 10 % of the base; the AVL tree alone on the same
queries beside it, in the same process.

    python -m benchmarks.bench_urlstore                       # every list set below
    BENCH_SETS=urls python -m benchmarks.bench_urlstore       # one of: urls, domains, snapshot, openphish

Bytes per URL count every byte the matcher holds for its data: the base image (records, the
block index, the code table, the category/period palette and per-key palette indices), the
delta tree's three arrays and the tombstone bits, each run's sampled first level and tie-run
table (in memory, built when an image is opened; ext/url/urlbase.h) and the key filters of the
runs and the tree (UrlStore.stats()["held_bytes"]). Categories are real: the list's category per
entry (an entry in several lists keeps the first).

Times are in-process: per URL inside the C batch loop, canonicalisation included, one clock read
per URL (as bench_urltree); beside them the same queries as keys (canonicalised before, not
timed), matched with canonical=False: the path the filter takes per GET (the extractor builds
the key from the packet, urlfilter.analyzer hands the keys to match_batch(canonical=False)); the latency figures are the medians over BENCH_REPEATS (default 5)
timed runs of each run's median and p99 (a p99 moves with the machine's load, a median of them
less); the load average is printed before and after each set. On a shared machine pin it to one
core, `taskset -c 1 python -m benchmarks.bench_urlstore` (the affinity is printed). Queries as in bench_urltree: 40 % listed entries, 20 % listed + '/index.html', 40 %
benign hosts as https://host/index.html. Insert: each URL of the delta inserted into the store
with the base built (per-URL times, a flush's or run merge's time in the URL that triggered it),
and amortised = the wall time (and the thread's CPU time, which leaves out the time the thread
waits for a core on a loaded machine) of the whole insert batch / inserts, which includes every flush
of the tree into a run and every run merge the store does on its own (ext/url/urlstore.pxi);
the full merge into one base that a snapshot does is timed apart ("full merge s").
Every answer is checked against the tree's (same categories = same entry).
"""
from __future__ import annotations

import os as _os

_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import gc
import os
import time

import numpy as np

from benchmarks.bench_urltree import DOMAIN_LISTS, URL_LISTS, pct, read_lines, shared
from benchmarks.common import load_average
from urlfilter.canon import canonicalize_many
from urlfilter.tree import arrow_layout, build_tree
from urlfilter.urlstore import build_store

SETS = {
    "urls": URL_LISTS,
    "domains": DOMAIN_LISTS,
    "snapshot": None,            # every ut1/<category>/{domains,urls}.gz (filled in below)
    "openphish": ["openphish/urls-history.gz"],
}
PAPER_BPU, MARISA_URLS_BPU = 35.54, 17.8


def _lists(name):
    if name == "snapshot":
        return sorted(str(p.relative_to(shared() / "blacklists")) for p in (shared() / "blacklists" / "ut1").glob("*/*.gz"))
    return SETS[name]


def _load(name):
    raw, cats, names = [], [], {}
    for rel in _lists(name):
        cat = rel.split("/")[1] if rel.startswith("ut1") else rel.split("/")[0]
        cid = names.setdefault(cat, len(names) + 1)
        lines = read_lines(rel)
        raw += lines
        cats += [cid] * len(lines)
    # one line per canonical key (the first; an entry in several lists keeps the first list's
    # category), so that tree and store agree on payloads whichever part holds a key
    d, o = arrow_layout(raw)
    keys, codes = canonicalize_many(d, o, key=True)
    seen = {}
    for u, c, k, code in zip(raw, cats, keys, codes):
        if code == 0:
            seen.setdefault(k, (u, c))
    return [u for u, _ in seen.values()], np.array([c for _, c in seen.values()], np.uint32), len(names)


REPEATS = int(os.environ.get("BENCH_REPEATS", "5"))


def _timed(store, qd, qo, prefix=True, canonical=True):
    """(answers, median us, p99 us, mean us): each the median over REPEATS timed runs of that
    run's figure. canonical=False: the queries are keys already (the filter's per-GET path:
    urlfilter.analyzer hands the extractor's keys to match_batch(canonical=False))."""
    meds, p99s, means, res = [], [], [], None
    for _ in range(REPEATS):
        gc.collect()
        one = np.zeros(len(qo) - 1, np.int64)
        res = store.match_batch(qd, qo, prefix, canonical, one)
        tm = one / 1e3
        meds.append(np.median(tm))
        p99s.append(pct(tm, 99))
        means.append(tm.mean())
    return res, float(np.median(meds)), float(np.median(p99s)), float(np.median(means))


def run(name, rng):
    raw, cats, ncat = _load(name)
    n_raw = len(raw)
    benign = read_lines("benign/umbrella-top-100k.gz") + read_lines("benign/alexa-top-100k-2016.gz")
    order = rng.permutation(n_raw)
    half = min(200000, n_raw // 2)
    queries = [raw[i] for i in order[:half]] + [raw[i] + b"/index.html" for i in order[half:half + half // 2]] + \
        [b"https://" + d + b"/index.html" for d in benign[:half]]
    qd, qo = arrow_layout(queries)
    qkeys, qcodes = canonicalize_many(qd, qo, key=True)
    kd, ko = arrow_layout([k for k, c in zip(qkeys, qcodes) if c == 0])   # the filter's path: keys
    out = {}

    # the tree alone (bulk-built, as the manager built it before), same queries, same process
    gc.collect()
    tree, _ = build_tree(raw, cats)
    n = len(tree)
    load0 = load_average()
    tres, tmed, tp99, tmean = _timed(tree, qd, qo)
    tcat = tree.payload_batch(tres)[0]
    tkres, tkmed, tkp99, _ = _timed(tree, kd, ko, canonical=False)
    tree_kcat = tree.payload_batch(tkres)[0]
    out["tree"] = dict(bpu=tree.stats()["paper_bytes"] / n, med=tmed, p99=tp99, mean=tmean, kmed=tkmed, kp99=tkp99)
    del tree

    try:
        import marisa_trie
        d, o = arrow_layout(raw)
        keys, codes = canonicalize_many(d, o, key=True)
        out["marisa_bpu"] = len(marisa_trie.Trie(sorted({k for k, c in zip(keys, codes) if c == 0})).tobytes()) / n
    except ImportError:
        out["marisa_bpu"] = float("nan")

    for frac in (0.0, 0.01, 0.10):
        gc.collect()
        # base: the list without a random frac/(1+frac) of it; delta: that part, inserted
        k = int(round(n_raw * frac / (1 + frac)))
        perm = rng.permutation(n_raw)
        in_delta = np.zeros(n_raw, bool)
        in_delta[perm[:k]] = True
        base_idx = np.flatnonzero(~in_delta)
        t0 = time.perf_counter()
        s, _ = build_store([raw[i] for i in base_idx], cats[base_idx])
        build_s = time.perf_counter() - t0
        ins = np.flatnonzero(in_delta)
        dd, do = arrow_layout([raw[i] for i in ins])
        it = np.zeros(len(ins), np.int64)
        t0, c0 = time.perf_counter(), time.thread_time()
        _, icodes = s.insert_batch(dd, do, cats[ins], 0, True, it)
        ins_s, ins_cpu = time.perf_counter() - t0, time.thread_time() - c0
        st = s.stats()
        assert st["urls"] == n, (st["urls"], n)
        res, med, p99, mean = _timed(s, qd, qo)
        scat = s.payload_batch(res)[0]
        assert ((res > 0) == (tres > 0)).all() and (scat == tcat).all(), "store answers differ from the tree's"
        kres, kmed, kp99, _ = _timed(s, kd, ko, canonical=False)
        assert ((kres > 0) == (tkres > 0)).all() and (s.payload_batch(kres)[0] == tree_kcat).all()
        t0 = time.perf_counter()
        batch = s.match_batch(qd, qo)
        batch_s = time.perf_counter() - t0
        assert (batch == res).all()
        new = it[icodes == 0] / 1e3
        merge_s = 0.0
        if len(ins):
            t0 = time.perf_counter()
            s.merge()
            merge_s = time.perf_counter() - t0
        out[frac] = dict(bpu=st["held_bytes"] / n, base_bpu=st["base_bytes"] / max(1, st["base_urls"]),
                         rec=st["base_record_bytes"] / max(1, st["base_urls"]),
                         idx=st["base_index_bytes"] / max(1, st["base_urls"]),
                         pay=st["base_payload_bytes"] / max(1, st["base_urls"]),
                         delta=st["delta_bytes"], med=med, p99=p99, mean=mean, kmed=kmed, kp99=kp99,
                         ins_med=np.median(new) if len(new) else float("nan"),
                         ins_p99=pct(new, 99) if len(new) else float("nan"),
                         ins_mean=new.mean() if len(new) else float("nan"),
                         amort=ins_s / len(ins) * 1e6 if len(ins) else float("nan"),
                         amort_cpu=ins_cpu / len(ins) * 1e6 if len(ins) else float("nan"),
                         runs=st["runs"], run_urls=st["run_urls"], tree_urls=st["delta_urls"],
                         flushes=st["flushes"], rmerges=st["run_merges"],
                         merge_s=merge_s, build_s=build_s,
                         mups=len(queries) / batch_s / 1e6, n_delta=len(ins))
        del s
    hits = float((tres > 0).mean())
    print(f"\n## {name}: {n_raw} unique lines, {n} keys, {ncat} categories; {len(queries)} queries, "
          f"prefix hit rate {hits:.3f}; latency: medians of {REPEATS} runs; cores {sorted(os.sched_getaffinity(0))}; "
          f"at the start {load0}, at the end {load_average()}")
    print("| delta | bytes/URL held (base B/key: records + index + payload) | prefix median / p99 / mean us "
          "(in-process, canonicalisation included) | prefix median / p99 us on keys (the filter's per-GET path, "
          "canonical=False) | insert median / p99 / mean us | amortised insert incl. its flushes + run merges us, wall / thread CPU | "
          "delta: runs (keys) + tree keys; flushes, run merges | full merge s | build s | M URL/s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for frac in (0.0, 0.01, 0.10):
        r = out[frac]
        print(f"| {frac:.0%} ({r['n_delta']}) | **{r['bpu']:.2f}** ({r['base_bpu']:.2f}: {r['rec']:.2f} + {r['idx']:.2f} + {r['pay']:.2f}) "
              f"| {r['med']:.2f} / {r['p99']:.2f} / {r['mean']:.2f} | {r['kmed']:.2f} / {r['kp99']:.2f} | {r['ins_med']:.2f} / {r['ins_p99']:.2f} / {r['ins_mean']:.2f} "
              f"| {r['amort']:.2f} / {r['amort_cpu']:.2f} | {r['runs']} ({r['run_urls']}) + {r['tree_urls']}; {r['flushes']}, {r['rmerges']} "
              f"| {r['merge_s']:.2f} | {r['build_s']:.1f} | {r['mups']:.2f} |")
    t = out["tree"]
    print(f"| AVL tree alone | {t['bpu']:.2f} | {t['med']:.2f} / {t['p99']:.2f} / {t['mean']:.2f} | {t['kmed']:.2f} / {t['kp99']:.2f} | - | - | - | - | - | - |")
    print(f"| marisa-trie (static) | {out['marisa_bpu']:.2f} | - | - | - | - | - | - | - | - |")
    return out


def main():
    rng = np.random.default_rng(1)
    sets = os.environ.get("BENCH_SETS", "urls,domains,snapshot,openphish").split(",")
    print(f"# URL store (static base + AVL delta) vs the AVL tree; paper {PAPER_BPU} B/URL, "
          f"marisa-trie {MARISA_URLS_BPU} B/URL on the URL lists (docs/urlfilter.md)")
    for name in sets:
        run(name, rng)


if __name__ == "__main__":
    main()
