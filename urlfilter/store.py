"""The URL Manager: a long-term SQLite store and the in-memory tree that follows it.

Store (SQLite, the embedded default): every URL in canonical form with its category, filtering
period and provenance (source file, import run); a history table that is also the change log; a
table of import runs with their counts of rejected lines by reason.

``UrlManager`` keeps a ``UrlStore`` (urlfilter.urlstore: a static base with the compressed AVL
tree as its delta, issue 35) in step with the store: its own CRUD calls change both; changes
made by another process reach the tree through ``refresh()``, which replays the history rows after
the last sequence number the tree has seen (a bulk import is one history row naming its import
run). The tree is cached as a snapshot file next to the database, tagged with that sequence
number, so opening a large store maps the snapshot and replays only what is newer.

Categories (issue 30): an entry listed in several categories keeps every one. Its memberships
are rows of ``url_categories`` (one per single category); ``urls.category_id`` and the tree's
payload name the entry's category *set*: the category itself when it has one, else a
``categories`` row named by its members, sorted and comma-joined ("adult,phishing"), which is
what a hit reports. ``by_category`` and ``list --category`` count and select by membership.
A store written before (schema version 0, no ``url_categories``) is migrated when opened: each
URL gets the membership of its one category; such a store stays readable by older code, which
sees the set names as category names.

Filtering periods: ``active_from``/``active_until`` (Unix seconds, either may be open) and one
daily window ``daily_start``-``daily_end`` in minutes after midnight UTC (a window that ends before
it starts wraps past midnight). Period 0 means "always".
"""
from __future__ import annotations

import csv
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from urlfilter import canon
from urlfilter.errors import InvalidUrl, StoreError
from urlfilter.paths import default_db_path
from urlfilter.urlstore import UrlStore, build_store

__all__ = ["Store", "UrlManager", "Period", "default_db_path"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS categories(
    id INTEGER PRIMARY KEY,            -- tree payload category id
    name TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS periods(
    id INTEGER PRIMARY KEY,            -- tree payload period id; 0 = always (no row)
    active_from INTEGER,               -- Unix seconds, NULL = open
    active_until INTEGER,              -- Unix seconds, NULL = open
    daily_start INTEGER,               -- minutes after 00:00 UTC, NULL = all day
    daily_end INTEGER,                 -- minutes after 00:00 UTC (exclusive)
    UNIQUE(active_from, active_until, daily_start, daily_end));
CREATE TABLE IF NOT EXISTS urls(
    id INTEGER PRIMARY KEY,
    url TEXT NOT NULL UNIQUE,          -- canonical form (urlfilter.canon)
    category_id INTEGER NOT NULL REFERENCES categories(id),
    period_id INTEGER NOT NULL DEFAULT 0,
    source TEXT,                       -- provenance of single adds ("cli"); NULL for imported rows
    import_id INTEGER,                 -- import run that added it (imports.source), NULL for single adds
    added_at INTEGER NOT NULL,         -- Unix seconds
    updated_at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS urls_import ON urls(import_id);
CREATE TABLE IF NOT EXISTS url_categories(   -- every category of every URL (schema version 1)
    url_id INTEGER NOT NULL,
    category_id INTEGER NOT NULL,      -- a single category (never a set row)
    import_id INTEGER,                 -- the import run that listed it there, NULL for adds
    PRIMARY KEY(url_id, category_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS url_categories_import ON url_categories(import_id);
CREATE TABLE IF NOT EXISTS history(
    seq INTEGER PRIMARY KEY AUTOINCREMENT,   -- the change log the tree replays
    at INTEGER NOT NULL,
    action TEXT NOT NULL,              -- add | delete | update | import
    url TEXT,                          -- canonical URL (new one for update); NULL for import
    old_url TEXT,                      -- update: the URL before
    category TEXT,
    period_id INTEGER,
    source TEXT,
    import_id INTEGER);
CREATE TABLE IF NOT EXISTS imports(
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    category TEXT,
    started INTEGER NOT NULL,
    seconds REAL,
    lines INTEGER,                     -- lines read
    added INTEGER,                     -- new URLs
    duplicates INTEGER,                -- canonical URL already stored
    rejected INTEGER,                  -- lines with no canonical form, comments, blanks
    reasons TEXT);                     -- JSON object: reason -> count
CREATE TABLE IF NOT EXISTS allow(      -- the allow list (issue 34): exceptions to the blacklist
    url TEXT PRIMARY KEY,              -- canonical form, as urls.url
    source TEXT,                       -- the file it came from, or "cli"
    added_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS rules(      -- the rules across layers (issue 34), in order
    pos INTEGER PRIMARY KEY,           -- 1-based; first match wins (urlfilter.policy)
    text TEXT NOT NULL,                -- the rule as a rule-file line
    source TEXT,                       -- "FILE:LINE" or "cli"
    added_at INTEGER NOT NULL);
"""


@dataclass(frozen=True)
class Period:
    active_from: int | None = None
    active_until: int | None = None
    daily_start: int | None = None
    daily_end: int | None = None

    @staticmethod
    def parse_window(text: str) -> tuple[int, int]:
        """'HH:MM-HH:MM' -> minutes after midnight."""
        try:
            a, b = text.split("-")
            mins = []
            for part in (a, b):
                h, m = part.strip().split(":")
                v = int(h) * 60 + int(m)
                if not 0 <= v <= 1440:
                    raise ValueError
                mins.append(v)
        except ValueError:
            raise StoreError(f"bad daily window {text!r}: expected HH:MM-HH:MM") from None
        return mins[0], mins[1]


class Store:
    """SQLite store of blacklisted URLs. All URLs are stored and compared in canonical form."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(path), isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        # bulk imports insert millions of rows into the UNIQUE(url) index in random order: with the
        # default 2 MB page cache every insert misses; 256 MB keeps the index's inner pages hot
        self.db.execute("PRAGMA cache_size=-262144")
        self.db.execute("PRAGMA temp_store=MEMORY")
        self.db.executescript(SCHEMA)
        self._cat_cache: dict[str, int] = {}
        self._migrate()

    #: PRAGMA user_version of this code's schema
    VERSION = 1

    def _migrate(self) -> None:
        """Bring a store written by older code up to VERSION (module docstring)."""
        v = self.db.execute("PRAGMA user_version").fetchone()[0]
        if v >= self.VERSION:
            return
        with self.db:
            self.db.execute("BEGIN")
            self.db.execute("INSERT OR IGNORE INTO url_categories(url_id, category_id, import_id) "
                            "SELECT id, category_id, import_id FROM urls")
            self.db.execute(f"PRAGMA user_version={self.VERSION}")

    def close(self):
        self.db.close()

    # ---- categories and periods --------------------------------------------------------------
    @staticmethod
    def split_categories(name: str) -> list[str]:
        """The single categories of a name: "b,a" (a set, as written by this store or given by
        a user) -> ["a", "b"]; blanks around the parts dropped."""
        parts = sorted({p.strip() for p in name.split(",") if p.strip()})
        return parts or [name]

    def set_id(self, names) -> int:
        """The categories row of a set of single categories (itself for one)."""
        return self.category_id(",".join(sorted(set(names))))

    def _set_memberships(self, url_id: int, names, import_id=None, replace: bool = False) -> int:
        """Add (or, with replace, set) the URL's single categories; returns its set's id."""
        if replace:
            self.db.execute("DELETE FROM url_categories WHERE url_id=?", (url_id,))
        self.db.executemany("INSERT OR IGNORE INTO url_categories(url_id, category_id, import_id) VALUES (?,?,?)",
                            [(url_id, self.category_id(n), import_id) for n in names])
        have = [r[0] for r in self.db.execute(
            "SELECT c.name FROM url_categories uc JOIN categories c ON c.id=uc.category_id WHERE uc.url_id=?",
            (url_id,))]
        sid = self.set_id(have)
        self.db.execute("UPDATE urls SET category_id=? WHERE id=?", (sid, url_id))
        return sid

    def categories_of(self, url_id: int) -> list[str]:
        return sorted(r[0] for r in self.db.execute(
            "SELECT c.name FROM url_categories uc JOIN categories c ON c.id=uc.category_id WHERE uc.url_id=?",
            (url_id,)))

    def category_id(self, name: str) -> int:
        cid = self._cat_cache.get(name)
        if cid is None:
            self.db.execute("INSERT OR IGNORE INTO categories(name) VALUES (?)", (name,))
            cid = self.db.execute("SELECT id FROM categories WHERE name=?", (name,)).fetchone()[0]
            self._cat_cache[name] = cid
        return cid

    def categories(self) -> dict[int, str]:
        return dict(self.db.execute("SELECT id, name FROM categories"))

    def period_id(self, period: Period | None) -> int:
        if period is None or period == Period():
            return 0
        p = (period.active_from, period.active_until, period.daily_start, period.daily_end)
        if (p[2] is None) != (p[3] is None):
            raise StoreError("a daily window needs both a start and an end")
        if p[0] is not None and p[1] is not None and p[1] <= p[0]:
            raise StoreError("active_until must be after active_from")
        row = self.db.execute("SELECT id FROM periods WHERE active_from IS ? AND active_until IS ? AND "
                              "daily_start IS ? AND daily_end IS ?", p).fetchone()
        if row:
            return row[0]
        return self.db.execute("INSERT INTO periods(active_from, active_until, daily_start, daily_end) "
                               "VALUES (?,?,?,?)", p).lastrowid

    def active(self, period_ids, at: float | None = None) -> np.ndarray:
        """Boolean array: is each period active at Unix time `at` (default now)? Vectorised."""
        at = time.time() if at is None else at
        pid = np.asarray(period_ids, dtype=np.int64)
        res = np.ones(pid.shape, dtype=bool)
        rows = self.db.execute("SELECT id, active_from, active_until, daily_start, daily_end FROM periods").fetchall()
        if not rows:
            return res
        size = max(r[0] for r in rows) + 1
        ok = np.ones(size, dtype=bool)
        minute = int(at // 60) % 1440
        for i, f, u, ds, de in rows:
            a = (f is None or at >= f) and (u is None or at < u)
            if ds is not None:
                a = a and ((ds <= minute < de) if ds <= de else (minute >= ds or minute < de))
            ok[i] = a
        inside = (pid >= 0) & (pid < size)
        res[inside] = ok[pid[inside]]
        return res

    # ---- CRUD --------------------------------------------------------------------------------
    def _log(self, action, url=None, old_url=None, category=None, period_id=None, source=None, import_id=None):
        self.db.execute("INSERT INTO history(at, action, url, old_url, category, period_id, source, import_id) "
                        "VALUES (?,?,?,?,?,?,?,?)",
                        (int(time.time()), action, url, old_url, category, period_id, source, import_id))

    def add(self, url: str, category: str, period: Period | None = None, source: str = "cli") -> tuple[str, bool]:
        """Add one URL; returns (canonical, created). An existing URL keeps its categories and
        gains `category` ("a,b": both), and gets the new period."""
        c = canon.canonicalize(url)
        names = self.split_categories(category)
        pid, now = self.period_id(period), int(time.time())
        with self.db:
            self.db.execute("BEGIN")
            row = self.db.execute("SELECT id FROM urls WHERE url=?", (c,)).fetchone()
            if row:
                self.db.execute("UPDATE urls SET period_id=?, updated_at=? WHERE id=?", (pid, now, row[0]))
                uid = row[0]
            else:
                uid = self.db.execute("INSERT INTO urls(url, category_id, period_id, source, added_at, updated_at) "
                                      "VALUES (?,?,?,?,?,?)", (c, self.set_id(names), pid, source, now, now)).lastrowid
            sid = self._set_memberships(uid, names)
            cat = self.categories_of_set(sid)
            if row:
                self._log("update", c, c, cat, pid, source)
            else:
                self._log("add", c, None, cat, pid, source)
        return c, row is None

    def categories_of_set(self, set_id: int) -> str:
        return self.db.execute("SELECT name FROM categories WHERE id=?", (set_id,)).fetchone()[0]

    def delete(self, url: str) -> bool:
        c = canon.canonicalize(url)
        with self.db:
            self.db.execute("BEGIN")
            self.db.execute("DELETE FROM url_categories WHERE url_id IN (SELECT id FROM urls WHERE url=?)", (c,))
            n = self.db.execute("DELETE FROM urls WHERE url=?", (c,)).rowcount
            if n:
                self._log("delete", c)
        return bool(n)

    def update(self, url: str, new_url: str | None = None, category: str | None = None,
               period: Period | None = None) -> str:
        """Change a stored URL's spelling, categories (replaced by `category`, "a,b" for two) or
        period; returns its canonical form."""
        c = canon.canonicalize(url)
        row = self.db.execute("SELECT u.id, c.name, u.period_id FROM urls u JOIN categories c "
                              "ON c.id=u.category_id WHERE url=?", (c,)).fetchone()
        if row is None:
            raise StoreError(f"not in the store: {c}")
        nc = canon.canonicalize(new_url) if new_url is not None else c
        cat = category if category is not None else row[1]
        pid = self.period_id(period) if period is not None else row[2]
        with self.db:
            self.db.execute("BEGIN")
            if nc != c and self.db.execute("SELECT 1 FROM urls WHERE url=?", (nc,)).fetchone():
                raise StoreError(f"already in the store: {nc}")
            self.db.execute("UPDATE urls SET url=?, period_id=?, updated_at=? WHERE id=?",
                            (nc, pid, int(time.time()), row[0]))
            sid = self._set_memberships(row[0], self.split_categories(cat), replace=True)
            self._log("update", nc, c, self.categories_of_set(sid), pid)
        return nc

    def get(self, url: str) -> dict | None:
        c = canon.canonicalize(url)
        row = self.db.execute(
            "SELECT u.url, c.name, u.period_id, coalesce(u.source, i.source), u.import_id, u.added_at FROM urls u "
            "JOIN categories c ON c.id=u.category_id LEFT JOIN imports i ON i.id=u.import_id WHERE u.url=?",
            (c,)).fetchone()
        if row is None:
            return None
        return dict(zip(("url", "category", "period_id", "source", "import_id", "added_at"), row))

    def list(self, category: str | None = None, limit: int | None = None):
        q = ("SELECT u.url, c.name, u.period_id, coalesce(u.source, i.source) FROM urls u "
             "JOIN categories c ON c.id=u.category_id LEFT JOIN imports i ON i.id=u.import_id")
        args: list = []
        if category:
            q += (" WHERE u.id IN (SELECT uc.url_id FROM url_categories uc JOIN categories k "
                  "ON k.id=uc.category_id WHERE k.name=?)")
            args.append(category)
        q += " ORDER BY u.id"
        if limit:
            q += " LIMIT ?"
            args.append(limit)
        return self.db.execute(q, args)

    def path_only(self) -> int:
        """Entries with a path or query (issue 18): they can match a GET but never a TLS/QUIC SNI,
        which carries the host alone."""
        return self.db.execute(
            "SELECT COUNT(*) FROM urls WHERE instr(url, '/') > 0 OR instr(url, '?') > 0").fetchone()[0]

    def count(self) -> int:
        return self.db.execute("SELECT count(*) FROM urls").fetchone()[0]

    def by_category(self) -> dict[str, int]:
        """Entries per single category (an entry in several counts in each)."""
        return dict(self.db.execute("SELECT c.name, count(*) FROM url_categories uc JOIN categories c "
                                    "ON c.id=uc.category_id GROUP BY c.name ORDER BY 2 DESC, 1"))

    def last_seq(self) -> int:
        return self.db.execute("SELECT coalesce(max(seq), 0) FROM history").fetchone()[0]

    def changes_since(self, seq: int):
        return self.db.execute("SELECT seq, action, url, old_url, category, period_id, import_id "
                               "FROM history WHERE seq > ? ORDER BY seq", (seq,))

    def rows_of_import(self, import_id: int | None):
        q = "SELECT url, category_id, period_id FROM urls"
        if import_id is None:
            return self.db.execute(q)
        return self.db.execute(q + " WHERE import_id=?", (import_id,))

    def recategorized_by(self, import_id: int):
        """(url, category set id) of the URLs stored before import `import_id` that it listed in
        another category: their set changed (the tree replays it)."""
        return self.db.execute(
            "SELECT u.url, u.category_id FROM url_categories uc JOIN urls u ON u.id=uc.url_id "
            "WHERE uc.import_id=? AND u.import_id IS NOT ?", (import_id, import_id))

    # ---- the policy (issue 34): allow list and rules; each change is a history row (actions
    # allow, unallow, allow_import, rules), so a live filter reloads them like the blacklist;
    # the tree's replay skips these actions
    def allow_add(self, urls, source: str = "cli") -> tuple[int, int]:
        """Canonical URLs (already canonical) into the allow list: (added, duplicates)."""
        now = int(time.time())
        with self.db:
            self.db.execute("BEGIN")
            before = self.db.total_changes
            self.db.executemany("INSERT OR IGNORE INTO allow(url, source, added_at) VALUES (?,?,?)",
                                [(u, source, now) for u in urls])
            added = self.db.total_changes - before
            if added:
                self._log("allow" if len(urls) == 1 else "allow_import", urls[0] if len(urls) == 1 else None,
                          source=source)
        return added, len(urls) - added

    def allow_delete(self, url: str) -> bool:
        c = canon.canonicalize(url)
        with self.db:
            self.db.execute("BEGIN")
            n = self.db.execute("DELETE FROM allow WHERE url=?", (c,)).rowcount
            if n:
                self._log("unallow", c)
        return bool(n)

    def allow_list(self, limit: int | None = None):
        q = "SELECT url, source FROM allow ORDER BY rowid"
        return self.db.execute(q + " LIMIT ?", (limit,)) if limit else self.db.execute(q)

    def allow_count(self) -> int:
        return self.db.execute("SELECT count(*) FROM allow").fetchone()[0]

    def rules(self) -> list[tuple[int, str, str]]:
        """(position, text, source) of every rule, in order."""
        return self.db.execute("SELECT pos, text, source FROM rules ORDER BY pos").fetchall()

    def rules_set(self, items, replace: bool = True, at: int | None = None) -> int:
        """Store rules ([(text, source)], already checked by urlfilter.policy): replace all
        (replace), or insert them before position `at` (None: after the last). Returns how many
        rules the store holds."""
        now = int(time.time())
        with self.db:
            self.db.execute("BEGIN")
            old = [] if replace else [(t, s) for _, t, s in self.rules()]
            at = len(old) + 1 if at is None else max(1, min(at, len(old) + 1))
            new = old[:at - 1] + list(items) + old[at - 1:]
            self.db.execute("DELETE FROM rules")
            self.db.executemany("INSERT INTO rules(pos, text, source, added_at) VALUES (?,?,?,?)",
                                [(i, t, s, now) for i, (t, s) in enumerate(new, 1)])
            self._log("rules", source=f"{len(new)} rules")
        return len(new)

    def rules_delete(self, positions) -> int:
        """Delete rules by position (1-based); the later ones move up. Returns how many."""
        have = self.rules()
        drop = {int(p) for p in positions}
        keep = [(t, s) for p, t, s in have if p not in drop]
        if len(keep) != len(have):
            self.rules_set(keep)
        return len(have) - len(keep)

    def export_csv(self, path):
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["url", "category", "period_id", "source"])
            w.writerows(self.list())

    def backup(self, path):
        dst = sqlite3.connect(str(path))
        with dst:
            self.db.backup(dst)
        dst.close()


class UrlManager:
    """A Store and the UrlStore that follows it (see the module docstring)."""

    def __init__(self, db_path: str | os.PathLike, snapshot: str | os.PathLike | None = None):
        self.store = Store(db_path)
        self.snapshot = Path(snapshot) if snapshot else (
            None if str(db_path) == ":memory:" else Path(str(db_path) + ".tree"))
        self.tree: UrlStore | None = None
        self.seq = 0
        self.dirty = False      # the tree differs from the snapshot file

    def close(self):
        self.store.close()

    def load_tree(self) -> UrlStore:
        """The tree, from the snapshot when it is usable, then brought up to date."""
        if self.tree is None:
            if self.snapshot is not None and self.snapshot.exists():
                try:
                    t = UrlStore.load(self.snapshot)
                    if t.tag <= self.store.last_seq():
                        self.tree, self.seq = t, t.tag
                except ValueError:
                    self.tree = None
            if self.tree is None:
                self.tree, self.seq = UrlStore(), 0
                self._bulk(None)
                self.seq = self.store.last_seq()
                self.dirty = True
        self.refresh()
        return self.tree

    def save_snapshot(self, force: bool = False):
        """Save the store tagged with the replayed sequence, when it changed since it was loaded
        (or `force`): save() first merges the delta into a new base (ids are renumbered; they
        are not kept anywhere else), so the file is the base alone, mapped by every reader."""
        if self.snapshot is not None and self.tree is not None and (self.dirty or force):
            self.tree.save(self.snapshot, self.seq)
            self.dirty = False

    def _bulk(self, import_id):
        rows = self.store.rows_of_import(import_id).fetchall()
        if rows:
            urls, cats, pers = zip(*rows)
            cats, pers = np.array(cats, np.uint32), np.array(pers, np.uint32)
            if len(self.tree) == 0:      # sort once and build balanced: several times faster
                self.tree, _ = build_store(list(urls), cats, pers)
            else:
                self.tree.insert_many(list(urls), cats, pers)

    def refresh(self) -> int:
        """Apply the store's changes after the tree's sequence number; returns how many."""
        t = self.tree
        n = 0
        for seq, action, url, old_url, category, period_id, import_id in self.store.changes_since(self.seq).fetchall():
            if action == "add":
                t.insert(url, self.store.category_id(category), period_id or 0)
            elif action == "delete":
                t.delete(url)
            elif action == "update":
                uid = t.find(old_url)
                if uid == 0:
                    uid, _ = t.insert(old_url)
                if url != old_url:
                    uid = t.update(uid, url=url)      # a base entry moves to the delta: new id
                t.update(uid, category=self.store.category_id(category), period=period_id or 0)
            elif action == "import":
                self._bulk(import_id)
                for url, cid in self.store.recategorized_by(import_id).fetchall():
                    uid = t.find(url)
                    if uid:
                        t.update(uid, category=cid)
            self.seq = seq
            n += 1
        if n:
            self.dirty = True
        return n

    # CRUD that keeps both in step (the tree replays the history rows written by the store)
    def add(self, url, category, period=None, source="cli"):
        r = self.store.add(url, category, period, source)
        if self.tree is not None:
            self.refresh()
        return r

    def delete(self, url):
        r = self.store.delete(url)
        if self.tree is not None:
            self.refresh()
        return r

    def update(self, url, new_url=None, category=None, period=None):
        r = self.store.update(url, new_url, category, period)
        if self.tree is not None:
            self.refresh()
        return r

    def match(self, urls, at: float | None = None):
        """Prefix match of URLs: a list of dicts (url, canonical, hit, entry, category, id)."""
        t = self.load_tree()
        cats = self.store.categories()
        out = []
        for u in urls:
            try:
                c = canon.canonicalize(u)
            except InvalidUrl as e:
                out.append({"url": u, "canonical": None, "hit": False, "entry": None, "category": None,
                            "error": e.reason})
                continue
            uid = t.match(c)
            entry = cat = None
            hit = False
            if uid > 0:
                cid, pid = t.payload(uid)
                hit = bool(self.store.active([pid], at)[0])
                entry, cat = t.get(uid), cats.get(cid)
            out.append({"url": u, "canonical": c, "hit": hit, "entry": entry, "category": cat,
                        "id": int(uid)})
        return out

    def match_many(self, urls, at: float | None = None) -> np.ndarray:
        """Batch prefix match honouring filtering periods: int32 ids (0 = miss or inactive)."""
        t = self.load_tree()
        ids = t.match_many(urls)
        _, per = t.payload_batch(ids)
        ids = np.where((ids > 0) & ~self.store.active(per, at), 0, ids)
        return ids
