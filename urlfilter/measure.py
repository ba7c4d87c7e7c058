"""The URL tree's numbers against the paper's, and what a filter pass found, as data.

    from urlfilter.measure import blacklist_urls, tree_measurements, hits_by_category
    m = tree_measurements(blacklist_urls(["../shared/blacklists/ut1-history/phishing/urls.gz"]))
    m.table()                    # bytes per URL, insert / match time vs the paper
    m.insert_us, m.match_us      # per-URL times (us), measured inside the C loops

A smaller, notebook-sized cousin of benchmarks/bench_urltree.py (which also runs the peers and
checks every answer): the same tree calls, the same per-operation clocks inside the nogil loop
(canonicalisation included; a match's span runs from the previous URL's end, one clock read per
URL, see UrlTree.match_batch).
"""
from __future__ import annotations

import gzip
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from urlfilter.tree import UrlTree, arrow_layout

__all__ = ["PAPER", "blacklist_urls", "TreeMeasurements", "tree_measurements", "hits_by_category"]

#: The paper's figures (PAPERS.md section 2): bytes per URL of the compressed tree, mean insert
#: and match time per URL (us), mean URL length of its list (bytes).
PAPER = {"bytes_per_url": 35.54, "insert_us_mean": 4.95, "match_us_mean": 3.83,
         "mean_url_bytes": 67.49}


def blacklist_urls(paths, limit: int | None = None) -> list[bytes]:
    """The distinct lines of plain or gzip'd URL lists (first-seen order), at most `limit`."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    seen: dict[bytes, None] = {}
    for p in paths:
        p = Path(p)
        opener = gzip.open if p.suffix == ".gz" else open
        with opener(p, "rb") as f:
            for line in f.read().split(b"\n"):
                line = line.strip()
                if line and not line.startswith(b"#"):
                    seen.setdefault(line, None)
        if limit and len(seen) >= limit:
            break
    out = list(seen)
    return out[:limit] if limit else out


@dataclass
class TreeMeasurements:
    entries: int                  # raw entries offered
    urls: int                     # distinct canonical keys in the tree
    rejected: int                 # entries without a canonical form
    mean_url_bytes: float         # mean raw entry length (bytes)
    bytes_per_url: float          # paper's definition: the arrays as used / URLs
    allocated_bytes_per_url: float
    height: int
    insert_us: np.ndarray         # per inserted entry (us)
    match_us: np.ndarray          # per query, prefix match (us)
    query_hit: np.ndarray         # bool per query
    queries: int
    listed_queries: int           # the first ones: entries of the list itself (must all hit)
    paper: dict = field(default_factory=lambda: dict(PAPER))

    def table(self) -> pd.DataFrame:
        """webtap beside the paper: bytes per URL, insert and match time (us)."""
        def stats(a):
            return (float(a.mean()) if len(a) else np.nan, float(np.median(a)) if len(a) else np.nan,
                    float(np.percentile(a, 99)) if len(a) else np.nan)

        im, imed, i99 = stats(self.insert_us)
        mm, mmed, m99 = stats(self.match_us)
        rows = [("bytes per URL", self.bytes_per_url, self.paper["bytes_per_url"]),
                ("mean URL length (bytes)", self.mean_url_bytes, self.paper["mean_url_bytes"]),
                ("insert time mean (us)", im, self.paper["insert_us_mean"]),
                ("insert time median (us)", imed, np.nan),
                ("insert time p99 (us)", i99, np.nan),
                ("match time mean (us)", mm, self.paper["match_us_mean"]),
                ("match time median (us)", mmed, np.nan),
                ("match time p99 (us)", m99, np.nan)]
        return pd.DataFrame(rows, columns=["measure", "webtap", "paper"]).set_index("measure")


def tree_measurements(urls, misses=(), seed: int = 1, max_queries: int = 200_000) -> TreeMeasurements:
    """Insert `urls` one by one into a new tree (per-insert time), then prefix-match a query mix
    (per-match time): k listed entries, k listed entries + '/index.html' (prefix hits) and up to
    k `misses` (URLs expected not to be listed, e.g. a benign top list), k = min(max_queries / 3,
    len(urls))."""
    urls = [u.encode() if isinstance(u, str) else bytes(u) for u in urls]
    rng = np.random.default_rng(seed)
    data, offsets = arrow_layout(urls)
    tree = UrlTree()
    ins = np.zeros(len(urls), np.int64)
    ids, codes = tree.insert_batch(data, offsets, timings=ins)
    tree.optimize()
    st = tree.stats()
    n = int(st["urls"])
    third = max_queries // 3
    order = rng.permutation(len(urls))
    k = min(third, len(urls))
    hits = [urls[i] for i in order[:k]]
    # from the other end of the permutation: disjoint from `hits` when the list is long enough
    deeper = [urls[i] + b"/index.html" for i in order[::-1][:k]]
    misses = [u.encode() if isinstance(u, str) else bytes(u) for u in list(misses)[:third]]
    queries = hits + deeper + misses
    qd, qo = arrow_layout(queries)
    mt = np.zeros(len(queries), np.int64)
    res = tree.match_batch(qd, qo, prefix=True, timings=mt)
    lens = np.diff(offsets)
    return TreeMeasurements(
        entries=len(urls), urls=n, rejected=int((codes < 0).sum()),
        mean_url_bytes=float(lens.mean()) if len(lens) else 0.0,
        bytes_per_url=st["paper_bytes"] / n if n else 0.0,
        allocated_bytes_per_url=st["allocated_bytes"] / n if n else 0.0,
        height=int(st["height"]), insert_us=ins[codes == 0] / 1e3, match_us=mt / 1e3,
        query_hit=np.asarray(res) > 0, queries=len(queries), listed_queries=len(hits))


def hits_by_category(records) -> pd.DataFrame:
    """Per category of the matched entries: hits (GETs), distinct entries hit, distinct client
    addresses, and the share of all matched GETs (%). records: urlfilter.scan(...).table or its
    DataFrame."""
    df = records.to_pandas() if hasattr(records, "to_pandas") else records
    cols = ["hits", "entries", "clients", "pct_of_gets"]
    h = df[df["hit"].astype(bool)]
    if len(h) == 0:
        return pd.DataFrame(columns=cols).rename_axis("category")
    cat = h["category"].fillna("(unknown)")
    g = h.groupby(cat, sort=False)
    out = pd.DataFrame({"hits": g.size(), "entries": g["entry"].nunique(),
                        "clients": g["src_ip"].nunique()})
    out["pct_of_gets"] = 100.0 * out["hits"] / max(len(df), 1)
    return out.sort_values("hits", ascending=False, kind="stable").rename_axis("category")
