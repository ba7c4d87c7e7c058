"""Python facade of the URL store of issue 35: a static base (ext/url/urlbase.h, ext/url/urlstore.pxi)
with a log-structured delta: the compressed AVL tree (ext/url/avl.pyx), flushed into static delta
runs of the base's encoding as it fills, runs merged by size; design and measurements in
docs/urlfilter.md ("The URL store: static base + AVL delta").

``UrlStore`` has the methods of ``urlfilter.tree.UrlTree`` that the manager, the analyzer and
the CLI use (insert/delete/find/match, batches, payloads, save/load), plus ``merge()``, which
folds the delta into a new base. The base's symbol code is trained here (byte-pair merges on a
sample of the keys' front-coding tails, the loop in C) when a base is built from scratch, and
again at a merge when the set has more than doubled since; otherwise a merge keeps the code it
has; delta runs use the base's.
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


def train_code(data: np.ndarray, offsets: np.ndarray, block: int = BASE_BLOCK,
               sample: int = TRAIN_SAMPLE) -> tuple[np.ndarray, np.ndarray]:
    """A static code of up to 255 symbols of 1-8 bytes for the base's records, trained on what
    the records hold: the tails of keys after the lcp with their predecessor (whole keys at
    block starts) of an evenly spaced sample of the sorted keys data[offsets[i]:offsets[i+1]].
    Byte-pair merging (Gage 1994; the most frequent adjacent pair of symbols becomes a new
    symbol while it is no longer than 8 bytes; ties to the smallest pair), then greedy
    longest-match coding in C. Returns (sym uint8[2048], symlen uint8[256]); deterministic.
    The loop is C (ext/url/urlstore.pxi train_code_c); tests/urlfilter/test_urlstore.py keeps
    the NumPy version it replaced as the reference."""
    offsets = np.asarray(offsets, np.int64)
    if len(offsets) <= 1:
        return np.zeros(2048, np.uint8), np.zeros(256, np.uint8)
    return _avl.train_code_c(np.ascontiguousarray(data, np.uint8), offsets[:-1], offsets[1:], block, sample)


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
    # code trained on the sorted keys (in place: their starts and ends in key order), then the
    # base encoded with it
    if n:
        sym, ln = _avl.train_code_c(buf, np.asarray(starts, np.int64)[order], np.asarray(ends, np.int64)[order],
                                    block, TRAIN_SAMPLE)
    else:
        sym, ln = np.zeros(2048, np.uint8), np.zeros(256, np.uint8)
    s.build_from(buf, starts, ends, order, cats, pers, sym, ln, block)
    s._trained_on = len(s)
    return s, codes
