"""What could each encoding option buy on the real lists? (issue 7, the 20 bytes/URL target)

    WEBTAP_SHARED=../shared python -m benchmarks.urltree_bytes           # the three history URL lists
    BENCH_SET=all python -m benchmarks.urltree_bytes                     # + the two domain lists

Works on the sorted unique canonical keys laid out as build_sorted lays them out (balanced,
pre-order ids) and prints, per URL: the DiffURL bytes against the parent (what ext/url/avl.pyx
stores), against the better of the two flanking ancestors (the nearest ancestor below and above
the key in key order; the parent is always one of them), and against the sorted predecessor (the
floor of any front coding); the record header as stored; and how far the tails could shrink
(order-0 entropy, zlib/lzma over the whole tail stream -- stronger than any per-record static
code -- and a static FSST-style symbol table of 255 symbols of 1-8 bytes trained on a sample).
Nothing here is used at run time; it is the measurement behind docs/urlfilter.md's
"Bytes per URL" section.
"""
from __future__ import annotations

import collections
import lzma
import math
import os
import zlib

import numpy as np

from benchmarks.bench_urltree import DOMAIN_LISTS, URL_LISTS, read_lines
from urlfilter.canon import canonicalize_many
from urlfilter.tree import arrow_layout


def lcp(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def varint_len(v: int) -> int:
    n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


def layout(n: int):
    """parent, low flank, high flank (indices into the sorted keys, -1 none) and pre-order id of
    every key in build_sorted's balanced tree (mid = lo + (hi - lo) // 2)."""
    parent = np.full(n, -1, np.int64)
    lo_f = np.full(n, -1, np.int64)
    hi_f = np.full(n, -1, np.int64)
    pre = np.zeros(n, np.int64)
    stack = [(0, n, -1, -1, -1)]
    nid = 1
    while stack:
        lo, hi, par, lf, hf = stack.pop()
        if lo >= hi:
            continue
        mid = lo + (hi - lo) // 2
        parent[mid], lo_f[mid], hi_f[mid] = par, lf, hf
        pre[mid] = nid
        nid += 1
        stack.append((mid + 1, hi, mid, mid, hf))   # right subtree: popped after the left one
        stack.append((lo, mid, mid, lf, mid))
    return parent, lo_f, hi_f, pre


def train_symbols(tails: list[bytes], nsym: int = 255, rounds: int = 4) -> list[bytes]:
    """A static symbol table in FSST's spirit: start from the most frequent substrings, then
    re-count what greedy longest-match encoding actually uses, a few rounds."""
    table: list[bytes] = []
    for _ in range(rounds):
        cnt = collections.Counter()
        tset = set(table)
        for t in tails:
            i = 0
            while i < len(t):
                best = 1
                for L in range(min(8, len(t) - i), 1, -1):
                    if t[i:i + L] in tset:
                        best = L
                        break
                s = t[i:i + best]
                cnt[s] += best
                # candidates: the used symbol extended by the next one (FSST's pair merge)
                nxt = t[i + best:i + best + 1]
                if nxt and best < 8:
                    cnt[s + nxt] += best + 1
                i += best
        # gain of a symbol = bytes it covers minus one code byte per use
        singles = sorted({bytes([b]) for t in tails for b in t})
        gains = sorted(((c - c // len(s), s) for s, c in cnt.items() if len(s) > 1), reverse=True)
        table = singles + [s for _, s in gains[:max(0, nsym - len(singles))]]
    return table


def encoded_len(t: bytes, tset: set[bytes]) -> int:
    """Bytes of t coded with the table: one code per symbol, an escape + byte for a byte that is
    not in the table (the table holds every byte seen in training, the rest are multi-byte)."""
    i = out = 0
    while i < len(t):
        for L in range(min(8, len(t) - i), 0, -1):
            if t[i:i + L] in tset:
                out += 1
                i += L
                break
        else:
            out += 2
            i += 1
    return out


def main():
    which = os.environ.get("BENCH_SET", "urls")
    raw = []
    for rel in URL_LISTS + (DOMAIN_LISTS if which == "all" else []):
        raw += read_lines(rel)
    raw = list(dict.fromkeys(raw))
    data, offsets = arrow_layout(raw)
    keys, codes = canonicalize_many(data, offsets, key=True)
    keys = sorted({k.encode("latin-1") if isinstance(k, str) else k for k, c in zip(keys, codes) if c == 0})
    n = len(keys)
    parent, lo_f, hi_f, pre = layout(n)
    d_par = np.zeros(n, np.int64)
    d_best = np.zeros(n, np.int64)
    d_pred = np.zeros(n, np.int64)
    hdr_par = np.zeros(n, np.int64)
    hdr_best = np.zeros(n, np.int64)
    ref_bytes = np.zeros(n, np.int64)
    cp_par = np.zeros(n, np.int64)
    tails_par, tails_best = [], []
    for i, k in enumerate(keys):
        p = parent[i]
        mp = lcp(k, keys[p]) if p >= 0 else 0
        ml = lcp(k, keys[lo_f[i]]) if lo_f[i] >= 0 else 0
        mh = lcp(k, keys[hi_f[i]]) if hi_f[i] >= 0 else 0
        mb = max(ml, mh)
        d_par[i] = len(k) - mp
        d_best[i] = len(k) - mb
        d_pred[i] = len(k) - (lcp(k, keys[i - 1]) if i else 0)
        cp_par[i] = mp
        rb = varint_len((((pre[i] - (pre[p] if p >= 0 else 0)) << 1)))
        ref_bytes[i] = rb
        hdr_par[i] = varint_len(mp) + varint_len(len(k) - mp) + rb + 1   # + payload (category 0)
        f = (hi_f[i] if mh > ml else lo_f[i]) if mb else -1
        rbf = varint_len((abs(pre[i] - (pre[f] if f >= 0 else 0)) << 1))
        hdr_best[i] = varint_len(mb << 1) + varint_len(len(k) - mb) + rbf + 1   # cp carries the side bit
        tails_par.append(k[mp:])
        tails_best.append(k[mb:])
    fixed = 12
    print(f"# {n} unique keys ({which}), mean key {np.mean([len(k) for k in keys]):.2f} B")
    print(f"DiffURL mean B: vs parent {d_par.mean():.2f}, vs best flanking ancestor {d_best.mean():.2f}, "
          f"vs sorted predecessor {d_pred.mean():.2f}")
    print(f"record header mean B (parent coding, varint cp/len/ref + 1 payload): {hdr_par.mean():.2f} "
          f"(RefID {ref_bytes.mean():.2f}); share of cp < 128: {(cp_par < 128).mean():.3f}")
    print(f"=> bytes/URL now (build_sorted layout): {fixed + hdr_par.mean() + d_par.mean():.2f}")
    print(f"best flanking ancestor: header {hdr_best.mean():.2f} B (cp << 1 | side, RefID may be a farther "
          f"ancestor) => bytes/URL {fixed + hdr_best.mean() + d_best.mean():.2f}")
    for name, tails in (("parent", tails_par), ("best flank", tails_best)):
        blob = b"".join(tails)
        counts = np.bincount(np.frombuffer(blob, np.uint8), minlength=256)
        pr = counts[counts > 0] / len(blob)
        h0 = float(-(pr * np.log2(pr)).sum())
        z = len(zlib.compress(blob, 9))
        xz = len(lzma.compress(blob, preset=6))
        print(f"tails vs {name}: {len(blob) / n:.2f} B/URL; order-0 entropy {h0:.2f} bit/B -> "
              f"{len(blob) * h0 / 8 / n:.2f}; zlib-9 stream {z / n:.2f}; xz stream {xz / n:.2f}")
    rng = np.random.default_rng(1)
    sample = [tails_par[i] for i in rng.choice(n, min(n, 30000), replace=False)]
    table = train_symbols(sample)
    tset = set(table)
    test = [tails_par[i] for i in rng.choice(n, min(n, 30000), replace=False)]
    enc = sum(encoded_len(t, tset) for t in test)
    raw_b = sum(len(t) for t in test)
    print(f"static 255-code table (singles seen + multi-byte symbols, escape = 2 B) on parent tails: {raw_b / len(test):.2f} -> "
          f"{enc / len(test):.2f} B/URL (x{raw_b / enc:.2f}); top symbols {table[:12]}")
    need = 20 - fixed - hdr_par.mean()
    print(f"budget for the tail at 20 B/URL with these headers: {need:.2f} B "
          f"(compression x{d_par.mean() / need:.2f} of the parent tails needed)")


if __name__ == "__main__":
    main()
