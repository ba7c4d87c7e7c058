"""Batch import of blacklists into the Store.

Formats (``fmt="auto"`` picks by path):
* ``ut1``: a UT1 / shallalist / squidGuard tree. Either a folder of category folders, or one
  category folder, each holding ``domains`` and/or ``urls`` (optionally ``.gz``); the category is the
  folder's name. A single ``.../<category>/urls.gz`` file works too.
* ``list``: one entry per line (plain or ``.gz``); category from ``category=`` or the file name.
* ``csv``: a header row with a ``url`` column (or the first column) and a ``category`` column.

Lines are split and canonicalised in C for a whole file at once (urlfilter.canon); only lines
with a non-ASCII host go through Python (IDNA). Every line is accounted for: added, duplicate
(its canonical form is already stored) or rejected with a reason (blank, comment, and the
canonicaliser's reasons such as bad_char, bad_host, bad_port, too_long). Nothing raises on bad
content; unreadable files raise OSError, and a file that is not a text list at all (a capture,
binary data; see check_text) raises NotAList before anything of it is stored.
"""
from __future__ import annotations

import csv
import gzip
import io
import json
import os
import time
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from urlfilter import canon
from urlfilter.errors import UrlFilterError
from urlfilter.store import Store

__all__ = ["ImportResult", "import_path", "split_lines", "MAX_ENTRY", "NotAList", "check_text", "sniff"]

#: longest canonical entry accepted (bytes), as the tree's MAX_KEY
MAX_ENTRY = 65536

#: line numbers kept per rejection reason (the first ones of the file)
REJECTED_LINES = 5


@dataclass
class ImportResult:
    source: str
    category: str | None
    lines: int = 0
    added: int = 0
    duplicates: int = 0
    rejected: Counter = field(default_factory=Counter)
    seconds: float = 0.0
    import_id: int | None = None
    #: reason -> the first REJECTED_LINES line numbers (1-based; CSV: records, header = 1)
    rejected_lines: dict = field(default_factory=dict)
    #: URLs already stored (duplicates) that this file listed in a category they lacked: they
    #: keep every category (issue 30)
    recategorized: int = 0

    @property
    def n_rejected(self) -> int:
        return sum(self.rejected.values())

    def check(self):
        """Every line is accounted for."""
        assert self.lines == self.added + self.duplicates + self.n_rejected, self

    def as_dict(self):
        return {"source": self.source, "category": self.category, "lines": self.lines,
                "added": self.added, "duplicates": self.duplicates, "rejected": dict(self.rejected),
                "rejected_lines": {k: list(v) for k, v in self.rejected_lines.items()},
                "recategorized": self.recategorized, "seconds": round(self.seconds, 3)}


class NotAList(UrlFilterError, ValueError):
    """The file is not a text list (a capture, binary data): refused whole, nothing imported."""


#: magic numbers of files that are surely not lists: (prefix, what)
_NOT_TEXT = ((b"\xd4\xc3\xb2\xa1", "a pcap capture"), (b"\xa1\xb2\xc3\xd4", "a pcap capture"),
             (b"\x4d\x3c\xb2\xa1", "a pcap capture"), (b"\xa1\xb2\x3c\x4d", "a pcap capture"),
             (b"\x0a\x0d\x0d\x0a", "a pcapng capture"), (b"SQLite format 3\x00", "an SQLite database"),
             (b"WTAVL", "a urlfilter tree snapshot"), (b"WTURLB", "a urlfilter store snapshot"),
             (b"PAR1", "a Parquet file"),
             (b"PK\x03\x04", "a zip archive"), (b"\x7fELF", "an executable"),
             (b"%PDF", "a PDF document"), (b"\x89PNG", "a PNG image"))

#: bytes of the head that are looked at
SNIFF_BYTES = 65536


def check_text(head: bytes, path) -> None:
    """Raise NotAList when `head` (the first bytes of the file, inflated) is not a text list:
    a known binary format, or more than 5% control bytes (0x00-0x08, 0x0e-0x1f, 0x7f), which
    text has none of but random data about 11% (a stray bad line is rejected line by line)."""
    for magic, what in _NOT_TEXT:
        if head.startswith(magic):
            raise NotAList(f"{path}: {what}, not a text list")
    if head:
        arr = np.frombuffer(head, dtype=np.uint8)
        ctl = int(np.count_nonzero((arr < 9) | ((arr > 13) & (arr < 32)) | (arr == 127)))
        if ctl * 20 > len(arr):
            raise NotAList(f"{path}: binary data ({ctl} control bytes in the first {len(arr)}), "
                           f"not a text list")


def sniff(path) -> None:
    """check_text on the head of a file (inflated if gzip'd); OSError if it cannot be read."""
    path = Path(path)
    if path.is_dir():
        return
    with open(path, "rb") as f:
        head = f.read(SNIFF_BYTES)
    if head[:2] == b"\x1f\x8b":
        try:
            head = zlib.decompressobj(zlib.MAX_WBITS | 16).decompress(head, SNIFF_BYTES)
        except zlib.error as exc:
            raise OSError(f"{path}: damaged gzip file ({exc})") from exc
    check_text(head, path)


def _read(path: Path) -> bytes:
    with open(path, "rb") as f:
        head = f.read(2)
    if head == b"\x1f\x8b":
        try:
            with gzip.open(path, "rb") as f:
                data = f.read()
        except (OSError, EOFError, zlib.error) as exc:
            # gzip raises BadGzipFile, EOFError or zlib.error for damage: one clear OSError, as
            # for any file that cannot be read (the CLI's "urlfilter: error: ...")
            raise OSError(f"{path}: damaged or truncated gzip file ({exc})") from exc
    else:
        data = path.read_bytes()
    check_text(data[:SNIFF_BYTES], path)
    return data


def split_lines(data: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(buffer, offsets, is_comment) for the lines of data, without a Python loop and without
    copying: line i is buffer[offsets[i]:offsets[i+1]] *with* its line end, which the
    canonicaliser trims (rule R1) like any surrounding white space. A last line without a newline
    counts. A line whose first non-blank byte is '#' or '!' is a comment.
    """
    buf = np.frombuffer(data, dtype=np.uint8)
    nl = np.flatnonzero(buf == 10)
    offsets = np.concatenate(([0], nl + 1)).astype(np.int64)
    if len(buf) and buf[-1] != 10:
        offsets = np.append(offsets, len(buf))
    n = len(offsets) - 1
    first = np.zeros(n, dtype=np.uint8)
    lens = np.diff(offsets)
    first[lens > 0] = buf[offsets[:-1][lens > 0]]
    for i in np.flatnonzero((first == 32) | (first == 9)).tolist():   # rare: leading blanks
        s = bytes(buf[offsets[i]:offsets[i + 1]]).lstrip(b" \t")
        first[i] = s[0] if s else 0
    is_comment = (first == ord("#")) | (first == ord("!"))
    return buf, offsets, is_comment


def _import_entries(store: Store, packed, offsets, is_comment, categories, source: str,
                    default_category: str | None, first_line: int = 1) -> ImportResult:
    """Canonicalise and store a batch; categories is one name or a list aligned with the lines."""
    t0 = time.perf_counter()
    res = ImportResult(source=source, category=default_category, lines=len(offsets) - 1)
    urls, codes = canon.canonicalize_many(packed, offsets)
    codes = codes.astype(np.int64)
    codes[is_comment] = 100
    lens = np.fromiter((len(u) for u in urls), dtype=np.int64, count=len(urls))
    codes[(codes == 0) & (lens > MAX_ENTRY)] = -5
    for code, n in zip(*np.unique(codes[codes != 0], return_counts=True)):
        reason = "comment" if code == 100 else ("blank" if code == -1 else canon.reason_of(code))
        res.rejected[reason] += int(n)
        res.rejected_lines[reason] = (np.flatnonzero(codes == code)[:REJECTED_LINES] + first_line).tolist()
    ok = np.flatnonzero(codes == 0)
    now = int(time.time())
    db = store.db
    with db:
        db.execute("BEGIN")
        import_id = db.execute("INSERT INTO imports(source, category, started) VALUES (?,?,?)",
                               (source, default_category, now)).lastrowid
        # one staging row per (URL, single category): "a,b" lists the URL in both
        if isinstance(categories, str):
            cids = [store.category_id(c) for c in store.split_categories(categories)]
            rows = ((urls[i], cid) for i in ok.tolist() for cid in cids)
        else:
            cids = {c: [store.category_id(x) for x in store.split_categories(c)]
                    for c in set(categories[i] for i in ok.tolist())}
            rows = ((urls[i], cid) for i in ok.tolist() for cid in cids[categories[i]])
        # Stage the rows in an unindexed temp table, then insert them in URL order: the UNIQUE(url)
        # index is then filled sequentially instead of at random places (about 2x faster for
        # millions of rows). Within one file the first spelling of a URL wins, as before.
        db.execute("CREATE TEMP TABLE IF NOT EXISTS staging(url TEXT, category_id INTEGER)")
        db.execute("DELETE FROM staging")
        db.executemany("INSERT INTO staging VALUES (?,?)", rows)
        before = db.total_changes
        db.execute("INSERT OR IGNORE INTO urls(url, category_id, import_id, added_at, updated_at) "
                   "SELECT url, category_id, ?, ?, ? FROM staging ORDER BY url, rowid", (import_id, now, now))
        res.added = db.total_changes - before
        # every category of every URL (issue 30): memberships this file adds, then the set of
        # each URL that now has more than one (new URLs listed twice, older URLs listed again)
        db.execute("INSERT OR IGNORE INTO url_categories(url_id, category_id, import_id) "
                   "SELECT u.id, s.category_id, ? FROM staging s JOIN urls u ON u.url=s.url", (import_id,))
        # Set statements, no per-URL Python (216,898 single-row UPDATEs and a set name per URL
        # were 1.8 s of a UT1 phishing + malware import): each URL that this file gave a
        # membership and that now has more than one, with its single category ids in any order;
        # the few distinct id lists are mapped to their set's categories row here; one UPDATE FROM.
        db.execute("CREATE TEMP TABLE IF NOT EXISTS import_multi(url_id INTEGER PRIMARY KEY, cids TEXT)")
        db.execute("CREATE TEMP TABLE IF NOT EXISTS import_sets(cids TEXT PRIMARY KEY, category_id INTEGER)")
        db.execute("DELETE FROM import_multi")
        db.execute("DELETE FROM import_sets")
        db.execute("INSERT INTO import_multi(url_id, cids) "
                   "SELECT m.url_id, group_concat(uc.category_id) FROM url_categories m "
                   "JOIN url_categories uc ON uc.url_id=m.url_id WHERE m.import_id=? "
                   "GROUP BY m.url_id HAVING count(*) > 1", (import_id,))
        lists = [r[0] for r in db.execute("SELECT DISTINCT cids FROM import_multi")]
        if lists:
            names = store.categories()
            db.executemany("INSERT INTO import_sets VALUES (?,?)",
                           [(c, store.set_id(names[int(i)] for i in c.split(","))) for c in lists])
            db.execute("UPDATE urls SET category_id=s.category_id FROM import_multi m "
                       "JOIN import_sets s ON s.cids=m.cids WHERE urls.id=m.url_id")
            res.recategorized = db.execute(
                "SELECT count(DISTINCT uc.url_id) FROM url_categories uc JOIN urls u ON u.id=uc.url_id "
                "WHERE uc.import_id=? AND u.import_id IS NOT ?", (import_id, import_id)).fetchone()[0]
        db.execute("DELETE FROM import_multi")
        db.execute("DELETE FROM import_sets")
        db.execute("DELETE FROM staging")
        res.duplicates = len(ok) - res.added
        res.seconds = time.perf_counter() - t0
        db.execute("UPDATE imports SET seconds=?, lines=?, added=?, duplicates=?, rejected=?, reasons=? WHERE id=?",
                   (res.seconds, res.lines, res.added, res.duplicates, res.n_rejected,
                    json.dumps(dict(res.rejected)), import_id))
        if res.added or res.recategorized:
            store._log("import", category=default_category, source=source, import_id=import_id)
    res.import_id = import_id
    res.check()
    return res


def _category_text(name: str) -> str:
    """A category name as valid text: bytes that were not UTF-8 (kept as surrogates by the
    surrogateescape decoding of a file or of a file name) become U+FFFD, which SQLite can store."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def import_list(store: Store, path: Path, category: str | None = None, source: str | None = None) -> ImportResult:
    cat = _category_text(category or path.name.split(".")[0])
    packed, offsets, is_comment = split_lines(_read(path))
    return _import_entries(store, packed, offsets, is_comment, cat, source or str(path), cat)


def import_csv(store: Store, path: Path, category: str | None = None, source: str | None = None) -> ImportResult:
    text = _read(path).decode("utf-8", "surrogateescape")
    # csv's default field limit (128 KiB) would raise on one over-long field and lose the whole
    # file; the field is read and rejected as too_long like an over-long line of a plain list.
    limit = csv.field_size_limit()
    csv.field_size_limit(max(limit, len(text) + 1))
    try:
        # newline="": a bare CR ends a row as csv expects, instead of raising inside a field
        rows = list(csv.reader(io.StringIO(text, newline="")))
    finally:
        csv.field_size_limit(limit)
    header = [h.strip().lower() for h in rows[0]] if rows else []
    has_header = "url" in header or "category" in header
    ui = header.index("url") if "url" in header else 0
    ci = header.index("category") if "category" in header else None
    body = rows[1:] if has_header else rows
    lines, cats = [], []
    for r in body:
        lines.append(r[ui].encode("utf-8", "surrogateescape") if len(r) > ui else b"")
        c = r[ci].strip() if ci is not None and len(r) > ci else ""
        cats.append(_category_text(c or category or path.stem))
    offsets = np.zeros(len(lines) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in lines], out=offsets[1:])
    packed = b"".join(lines)
    is_comment = np.array([x.lstrip().startswith((b"#", b"!")) for x in lines], dtype=bool)
    return _import_entries(store, packed, offsets, is_comment, cats, source or str(path), category,
                           first_line=2 if has_header else 1)


def _ut1_files(path: Path):
    """(category, file) pairs of a UT1-style tree rooted at path."""
    names = ("domains", "urls")

    def files_in(d: Path):
        for n in names:
            for cand in (d / n, d / (n + ".gz")):
                if cand.is_file():
                    yield cand

    if path.is_file():
        yield path.parent.name, path
        return
    own = list(files_in(path))
    if own:
        for f in own:
            yield path.name, f
        return
    found = False
    for d in sorted(p for p in path.iterdir() if p.is_dir()):
        for f in files_in(d):
            found = True
            yield d.name, f
    if not found:       # a folder of plain lists: one category per file, named after it
        for f in sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith(".")):
            yield f.name.split(".")[0], f


def import_path(store: Store, path: str | os.PathLike, fmt: str = "auto", category: str | None = None,
                source: str | None = None) -> list[ImportResult]:
    """Import a file or folder; returns one ImportResult per file."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(path)
    if fmt == "auto":
        base = path.name.removesuffix(".gz")
        if path.is_dir() or base in ("domains", "urls"):
            fmt = "ut1"
        elif base.endswith(".csv"):
            fmt = "csv"
        else:
            fmt = "list"
    if fmt == "ut1":
        res = [import_list(store, f, category or cat, source=str(f) if source is None else source)
               for cat, f in _ut1_files(path)]
        if not res:
            raise FileNotFoundError(f"no blacklist files in {path}")
        return res
    if fmt == "csv":
        return [import_csv(store, path, category, source)]
    if fmt == "list":
        return [import_list(store, path, category, source)]
    raise ValueError(f"unknown format {fmt!r} (auto, ut1, list, csv)")
