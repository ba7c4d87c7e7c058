"""Python facade of the URL store of issue 35: a static base (ext/url/urlbase.h, ext/url/urlstore.pxi)
with the compressed AVL tree (ext/url/avl.pyx) as its dynamic delta; design and measurements in
docs/urlfilter.md ("The URL store: static base + AVL delta").

``UrlStore`` has the methods of ``urlfilter.tree.UrlTree`` that the manager, the analyzer and
the CLI use (insert/delete/find/match, batches, payloads, save/load), plus ``merge()``, which
folds the delta into a new base. The base's symbol code is trained here (byte-pair merges on a
sample of the keys' front-coding tails, numpy) when a base is built from scratch, and again at a
merge when the set has more than doubled since; otherwise a merge keeps the code it has.
"""
from __future__ import annotations

import numpy as np

from urlfilter import canon
from urlfilter.errors import InvalidUrl, TreeFull
from urlfilter.tree import UrlApi, sorted_keys
from webtap._ext import avl as _avl

__all__ = ["UrlStore", "build_store", "train_code", "BASE_MAGIC"]

BASE_MAGIC = _avl.BASE_MAGIC
BASE_BLOCK = _avl.BASE_BLOCK
TRAIN_SAMPLE = 30000    # tails the code is trained on (2 s for 30,000; docs/urlfilter.md)


def _lcp(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def train_code(data: np.ndarray, offsets: np.ndarray, block: int = BASE_BLOCK,
               sample: int = TRAIN_SAMPLE) -> tuple[np.ndarray, np.ndarray]:
    """A static code of up to 255 symbols of 1-8 bytes for the base's records, trained on what
    the records hold: the tails of keys after the lcp with their predecessor (whole keys at
    block starts) of an evenly spaced sample of the sorted keys data[offsets[i]:offsets[i+1]].
    Byte-pair merging (Gage 1994; the most frequent adjacent pair of symbols becomes a new
    symbol while it is no longer than 8 bytes), then greedy longest-match coding in C. Returns
    (sym uint8[2048], symlen uint8[256]); deterministic."""
    n = len(offsets) - 1
    sym = np.zeros(2048, np.uint8)
    ln = np.zeros(256, np.uint8)
    if n <= 0:
        return sym, ln
    step = max(1, n // sample)
    raw = bytes(np.asarray(data[:offsets[-1]], np.uint8))
    parts = []
    for i in range(0, n, step):
        k = raw[offsets[i]:offsets[i + 1]]
        if i % block:
            k = k[_lcp(raw[offsets[i - 1]:offsets[i]], k):]
        if k:
            parts.append(np.frombuffer(k, np.uint8).astype(np.int32))
            parts.append(np.array([-1], np.int32))
    a = np.concatenate(parts) if parts else np.zeros(0, np.int32)
    syms: dict[int, bytes] = {int(b): bytes([int(b)]) for b in np.unique(a[a >= 0])}
    # the 255 codes: every byte seen (others are escaped) and then the merges
    order_singles = sorted(syms)
    if len(syms) > 255:          # more distinct bytes than codes: keep the most frequent
        cnt = np.bincount(a[a >= 0], minlength=256)
        keep = sorted(np.argsort(-cnt)[:200].tolist())
        syms = {b: bytes([b]) for b in keep}
        order_singles = keep
    lens = np.zeros(256 + 255, np.int64)
    for c, s in syms.items():
        lens[c] = len(s)
    nxt = 256
    while len(syms) < 255 and len(a) > 1:
        x, y = a[:-1], a[1:]
        ok = (x >= 0) & (y >= 0)
        ok &= (lens[np.maximum(x, 0)] + lens[np.maximum(y, 0)]) <= 8
        if not ok.any():
            break
        # pair counts by bincount (O(n)) rather than np.unique (a sort per merge): the same
        # argmax, the smallest pair code among the most frequent, so the same code table
        cnt = np.bincount(x[ok].astype(np.int64) * 1024 + y[ok])
        j = int(np.argmax(cnt))
        if cnt[j] < 3:
            break
        p, q = divmod(j, 1024)
        pos = np.flatnonzero((x == p) & (y == q))
        if p == q:                # "aaa": merge left to right, no overlaps
            keep = np.ones(len(pos), bool)
            last = -2
            for t, v in enumerate(pos.tolist()):
                if v == last + 1:
                    keep[t] = False
                else:
                    last = v
            pos = pos[keep]
        a[pos] = nxt
        a[pos + 1] = -2
        a = a[a != -2]
        syms[nxt] = syms[p] + syms[q]
        lens[nxt] = len(syms[nxt])
        nxt += 1
    codes = [syms[b] for b in order_singles] + [syms[c] for c in range(256, nxt)]
    for c, s in enumerate(codes[:255]):
        sym[8 * c:8 * c + len(s)] = np.frombuffer(s, np.uint8)
        ln[c] = len(s)
    return sym, ln


class UrlStore(UrlApi, _avl.UrlStore):
    """Static base + AVL delta. Ids: > 0 hit, 0 miss, < 0 no canonical form (canon.REASONS);
    ids are renumbered by merge() (the store never keeps them)."""

    def update(self, uid: int, url=None, category: int | None = None, period: int | None = None) -> int:
        """Re-key id uid and/or change its payload; returns the entry's id afterwards (a base
        entry that changes moves to the delta and gets a new id)."""
        if url is not None:
            try:
                uid = self.rekey(uid, canon.canonicalize(url))
            except ValueError as e:
                if isinstance(e, InvalidUrl):
                    raise
                raise InvalidUrl(str(url), "too_long") from None
        if category is not None or period is not None:
            cat, per = self.payload(uid)
            uid = self.set_payload(uid, cat if category is None else category, per if period is None else period)
        return uid

    def merge(self, retrain: bool | None = None):
        """Fold the delta and the deletions into a new base. The code is retrained when the
        base has none yet or the live set is more than twice the size it was trained on
        (retrain=True/False forces either)."""
        st = self.stats()
        if retrain is None:
            trained = getattr(self, "_trained_on", None) or st["base_urls"]
            retrain = st["base_urls"] == 0 or st["urls"] > 2 * trained
        if not retrain:
            sym, ln = self.symbols()
            self.merge_with(sym, ln)
            return
        _avl.UrlStore.merge(self)               # with the old code, then retrain on the result
        data, offs, _ = self.base_keys(True)
        sym, ln = train_code(data, offs)
        self.merge_with(sym, ln)
        self._trained_on = len(self)

    def _code_for(self, data, offsets):
        """The code of a new delta run (flush and run merges, ext/url/urlstore.pxi): the base's;
        a store whose base has none yet (built by inserts) trains one on the first run's keys
        and keeps it."""
        sym, ln = self.symbols()
        if ln.any():
            return sym, ln
        code = getattr(self, "_code", None)
        if code is None:
            code = self._code = train_code(np.asarray(data, np.uint8), np.asarray(offsets, np.int64))
            self._trained_on = len(offsets) - 1
        return code

    def optimize(self):
        """For the manager's snapshot step: the store's optimize is a merge."""
        self.merge()

    def bytes_per_url(self) -> float:
        st = self.stats()
        return st["held_bytes"] / st["urls"] if st["urls"] else 0.0


def build_store(urls, categories=0, periods=0, block: int = BASE_BLOCK) -> tuple[UrlStore, np.ndarray]:
    """Bulk-build a store (all in the base) from a batch of URLs: canonicalise in C, sort once,
    train the code, encode. Returns (store, codes) with codes as in UrlTree.insert_batch (0
    loaded or duplicate, < 0 rejected)."""

    out, starts, ends, codes, order = sorted_keys(urls)
    buf = np.frombuffer(out, np.uint8) if out else np.zeros(0, np.uint8)
    n = len(starts)
    cats = np.broadcast_to(np.asarray(categories, np.uint32), (n,))
    pers = np.broadcast_to(np.asarray(periods, np.uint32), (n,))
    s = UrlStore()
    # code trained on the sorted keys, then the base encoded with it
    sk = [out[starts[i]:ends[i]] for i in order.tolist()]
    so = np.zeros(len(sk) + 1, np.int64)
    if sk:
        np.cumsum([len(k) for k in sk], out=so[1:])
    sym, ln = train_code(np.frombuffer(b"".join(sk), np.uint8) if sk else np.zeros(0, np.uint8), so, block)
    s.build_from(buf, starts, ends, order, cats, pers, sym, ln, block)
    s._trained_on = len(s)
    return s, codes
