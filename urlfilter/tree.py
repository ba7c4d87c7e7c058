"""Python facade of the compressed AVL URL tree (ext/url/avl.pyx; the design is in its docstring).

``UrlTree`` adds to the C tree: IDN hosts for single inserts, typed errors, and batch methods that
take a pyarrow string/binary array, a NumPy array or any sequence of URLs. Batches are converted
to Arrow's (data, offsets) layout by Arrow's own C code and then handled in one nogil loop.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from urlfilter import canon
from urlfilter.errors import InvalidUrl, TreeFull
from webtap._ext import avl as _avl
from webtap._ext.canon import canonicalize_batch

__all__ = ["UrlTree", "TREE_NODE_DTYPE", "MAX_URLS", "arrow_layout"]

TREE_NODE_DTYPE = _avl.TREE_NODE_DTYPE
MAX_URLS = _avl.MAX_URLS
from urlfilter.errors import TreeCorrupt  # noqa: E402,F401  (raised by the compiled tree)

_BAD_HOST = -3          # CANON_BAD_HOST (ext/url/urlcanon.h): the only code urlfilter.canon retries


def arrow_layout(urls) -> tuple[np.ndarray, np.ndarray]:
    """(data uint8, offsets int64) of a batch of URLs in Arrow's variable-width layout."""
    if isinstance(urls, pa.ChunkedArray):
        urls = urls.combine_chunks()
    if not isinstance(urls, pa.Array):
        if isinstance(urls, np.ndarray) and urls.dtype.kind in "SU":
            urls = urls.tolist() if urls.dtype.kind == "S" else urls.astype(object)
        urls = pa.array(urls)
    if pa.types.is_string(urls.type) or pa.types.is_binary(urls.type):
        odt = np.int32
    elif pa.types.is_large_string(urls.type) or pa.types.is_large_binary(urls.type):
        odt = np.int64
    elif len(urls) == 0 or pa.types.is_null(urls.type):
        return np.zeros(0, np.uint8), np.zeros(1, np.int64)
    else:
        raise TypeError(f"URLs must be strings or bytes, not {urls.type}")
    _, obuf, dbuf = urls.buffers()
    offsets = np.frombuffer(obuf, dtype=odt)[urls.offset:urls.offset + len(urls) + 1].astype(np.int64)
    data = np.frombuffer(dbuf, dtype=np.uint8) if dbuf is not None and dbuf.size else np.zeros(0, np.uint8)
    return data, offsets


class UrlApi:
    """The URL-level methods of both URL sets (UrlTree, urlfilter.urlstore.UrlStore): URLs are
    canonicalised (urlfilter.canon) into keys for the compiled class after this one in the MRO,
    which does the work. Match results: id > 0 hit, 0 miss, < 0 no canonical form."""

    def insert(self, url, category: int = 0, period: int = 0) -> tuple[int, bool]:
        """Insert one URL; returns (id, created). Raises InvalidUrl, TreeFull."""
        try:
            return self.insert_key(canon.to_key(url), category, period)
        except OverflowError as e:
            raise TreeFull(str(e)) from None
        except ValueError as e:
            if isinstance(e, InvalidUrl):
                raise
            raise InvalidUrl(str(url), "too_long") from None

    def delete(self, url) -> int:
        """Remove a URL; returns its id, or 0 when absent. Raises InvalidUrl."""
        return self.delete_key(canon.to_key(url))

    def find(self, url) -> int:
        """Exact match of one URL: id or 0."""
        r = super().find(url)                  # canonicalised in C: no Python per byte
        if r >= 0:
            return r
        try:                                   # rejected in C: an IDN host is retried as punycode
            return self.find_key(canon.to_key(url)) if r == _BAD_HOST else 0
        except InvalidUrl:
            return 0

    def match(self, url) -> int:
        """Prefix match of one URL (longest entry on a component boundary): id or 0."""
        r = super().match(url)
        if r >= 0:
            return r
        try:
            return self.prefix_key(canon.to_key(url)) if r == _BAD_HOST else 0
        except InvalidUrl:
            return 0

    def match_many(self, urls, prefix: bool = True) -> np.ndarray:
        """Match a batch (pyarrow array, NumPy array or sequence) without the GIL; int32 ids."""
        data, offsets = arrow_layout(urls)
        return self.match_batch(data, offsets, prefix)

    def insert_many(self, urls, categories=0, periods=0):
        """Insert a batch; returns (ids, codes) as in UrlTree.insert_batch."""
        data, offsets = arrow_layout(urls)
        try:
            return self.insert_batch(data, offsets, categories, periods)
        except OverflowError as e:
            raise TreeFull(str(e)) from None


class UrlTree(UrlApi, _avl.UrlTree):
    """Compressed AVL tree of blacklisted URLs. Ids are stable for a URL's lifetime (reused
    after delete). Match results: id > 0 hit, 0 miss, < 0 no canonical form (see canon.REASONS).
    """

    def update(self, uid: int, url=None, category: int | None = None, period: int | None = None):
        """Re-key id uid and/or change its payload."""
        if url is not None:
            try:
                self.rekey(uid, canon.canonicalize(url))
            except ValueError as e:
                if isinstance(e, InvalidUrl):
                    raise
                raise InvalidUrl(str(url), "too_long") from None
        if category is not None or period is not None:
            cat, per = self.payload(uid)
            self.set_payload(uid, cat if category is None else category, per if period is None else period)

    def bytes_per_url(self) -> float:
        st = self.stats()
        return st["paper_bytes"] / st["urls"] if st["urls"] else 0.0


def sorted_keys(urls):
    """The batch's URLs canonicalised in C into keys (one buffer, '\n'-separated) and the order
    that sorts the loadable ones: (buffer, starts, ends, codes int32, order int64). codes as in
    UrlTree.insert_batch (0 loadable, < 0 rejected; -6 too long). The bulk builders of the tree
    and of the store (urlfilter.urlstore.build_store) both start here."""
    data, offsets = arrow_layout(urls)
    out, oo, codes = canonicalize_batch(data, offsets, True, 10)
    keys = out.split(b"\n")[:-1]
    starts, ends = oo[:-1], oo[1:] - 1
    too_long = (codes == 0) & (ends - starts > _avl.MAX_KEY_BYTES)
    codes = codes.astype(np.int32)
    codes[too_long] = -6
    good = np.flatnonzero((codes == 0) & (ends > starts))
    order = np.array(sorted(good.tolist(), key=keys.__getitem__), dtype=np.int64)
    return out, starts, ends, codes, order


def build_tree(urls, categories=0, periods=0, tree_cls=None) -> tuple["UrlTree", np.ndarray]:
    """Bulk-build a balanced tree from a batch of URLs: canonicalise in C, sort the keys once
    (Python's timsort on bytes, ~2 s for 4 M keys), then build in O(n) (UrlTree.build_sorted).
    Several times faster than inserting one by one. Returns (tree, codes) with codes as in
    UrlTree.insert_batch (0 loaded or duplicate, < 0 rejected)."""

    out, starts, ends, codes, order = sorted_keys(urls)
    tree = (tree_cls or UrlTree)()
    tree.build_sorted(np.frombuffer(out, np.uint8) if out else np.zeros(0, np.uint8), starts, ends,
                      order, categories, periods)
    return tree, codes
