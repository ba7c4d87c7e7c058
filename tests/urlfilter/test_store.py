"""SQLite store, importers, the tree following the store, and the CLI."""
import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from urlfilter.cli import main
from urlfilter.errors import InvalidUrl, StoreError
from urlfilter.importers import import_path, split_lines
from urlfilter.store import Period, Store, UrlManager


def test_split_lines_keeps_every_line():
    data = b"a.com\r\n\n# c\n  ! d\nlast"
    buf, off, com = split_lines(data)
    assert len(off) - 1 == 5
    assert [bytes(buf[off[i]:off[i + 1]]) for i in range(5)] == [b"a.com\r\n", b"\n", b"# c\n", b"  ! d\n", b"last"]
    assert com.tolist() == [False, False, True, True, False]


def test_store_crud_and_history(tmp_path):
    s = Store(tmp_path / "s.db")
    assert s.add("HTTP://A.com/x/", "adult") == ("a.com/x", True)
    assert s.add("a.com/x", "gambling") == ("a.com/x", False)
    assert s.get("a.com/x")["category"] == "adult,gambling"         # both kept (issue 30)
    assert s.update("a.com/x", new_url="b.com/y") == "b.com/y"
    assert s.get("a.com/x") is None and s.get("b.com/y")["category"] == "adult,gambling"
    s.update("b.com/y", category="gambling")                          # update replaces them
    assert s.get("b.com/y")["category"] == "gambling"
    s.add("c.com", "adult")
    with pytest.raises(StoreError):
        s.update("c.com", new_url="b.com/y")
    with pytest.raises(StoreError):
        s.update("nothere.com", category="x")
    with pytest.raises(InvalidUrl):
        s.add("bad host", "x")
    assert s.delete("c.com") and not s.delete("c.com")
    actions = [r[1] for r in s.changes_since(0)]
    assert actions == ["add", "update", "update", "update", "add", "delete"]
    assert s.count() == 1


def test_periods_vectorised(tmp_path):
    s = Store(tmp_path / "s.db")
    day = 86400 * 10
    p_window = s.period_id(Period(daily_start=8 * 60, daily_end=12 * 60))
    p_wrap = s.period_id(Period(daily_start=22 * 60, daily_end=2 * 60))
    p_range = s.period_id(Period(active_from=day, active_until=day + 3600))
    assert s.period_id(Period(daily_start=8 * 60, daily_end=12 * 60)) == p_window
    assert s.period_id(None) == 0
    ids = [0, p_window, p_wrap, p_range]
    assert s.active(ids, day + 9 * 3600).tolist() == [True, True, False, False]
    assert s.active(ids, day + 23 * 3600).tolist() == [True, False, True, False]
    assert s.active(ids, day + 60).tolist() == [True, False, True, True]
    with pytest.raises(StoreError):
        Period.parse_window("25:00-26:00")
    with pytest.raises(StoreError):
        s.period_id(Period(active_from=10, active_until=5))


def test_manager_tree_follows_store_and_other_writers(tmp_path):
    db = tmp_path / "m.db"
    m = UrlManager(db)
    m.add("evil.com", "malware")
    t = m.load_tree()
    assert t.match("x.evil.com/a") > 0
    m.save_snapshot()
    # another writer changes the store: the tree sees it through refresh(), without a rebuild
    other = Store(db)
    other.add("bad.org/p", "phishing")
    other.delete("evil.com")
    other.update("bad.org/p", category="adult")
    assert m.refresh() == 3
    assert m.tree is t
    assert t.match("x.evil.com/a") == 0
    hit = m.match(["http://bad.org/p/q"])[0]
    assert hit["hit"] and hit["entry"] == "bad.org/p" and hit["category"] == "adult"
    # a new manager maps the snapshot and replays only the newer changes
    m2 = UrlManager(db)
    t2 = m2.load_tree()
    assert t2.tag == 1 and m2.seq == m.seq
    assert t2.keys() == t.keys()
    m.save_snapshot()
    stamp = m.snapshot.stat().st_mtime_ns
    m3 = UrlManager(db)
    m3.load_tree()
    m3.save_snapshot()                       # nothing changed: the file is not rewritten
    assert m3.snapshot.stat().st_mtime_ns == stamp and m3.tree.stats()["mapped"]
    # filtering periods
    m.add("night.net", "x", Period(daily_start=0, daily_end=60))
    ids = m.match_many(["night.net/a"], at=30 * 60)
    assert ids[0] > 0 and m.match_many(["night.net/a"], at=3 * 3600)[0] == 0


def test_import_garbage_file_every_line_counted(tmp_path):
    lines = [b"# comment", b"! adblock comment", b"", b"   ", b"good.com/a", b"GOOD.com/a/",
             b"with space.com", b"nul\x00.com", b"bad%zzhost.com", b"a.com:99999",
             b"b\xc3\xbccher.de/x", b"\xff\xfe.com", b"ok.org/" + b"y" * 65536, b"ok.org/" + b"z" * 60000,
             b"1.2.3.4/x", b"[2001:db8::1]/v6", b"x.com/%zz%4", b"  padded.net  ", b"http://evil.com@real.net/"]
    p = tmp_path / "list.gz"
    p.write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
    s = Store(tmp_path / "g.db")
    (r,) = import_path(s, p, category="test")
    assert r.lines == len(lines)
    assert r.rejected == {"comment": 2, "blank": 2, "bad_char": 2, "bad_host": 2, "bad_port": 1, "too_long": 1}
    assert r.duplicates == 1 and r.added == 8
    stored = {u for u, *_ in s.list()}
    assert {"good.com/a", "xn--bcher-kva.de/x", "1.2.3.4/x", "[2001:db8::1]/v6", "x.com/%25zz%254",
            "padded.net", "real.net"} <= stored
    imp = s.db.execute("SELECT lines, added, duplicates, rejected, reasons FROM imports").fetchone()
    assert imp[:4] == (r.lines, r.added, r.duplicates, r.n_rejected) and json.loads(imp[4])["comment"] == 2


def test_import_csv(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("url,category\nhttp://a.com/1,adult\nb.com,\n# c,z\n,adult\nbad host,q\n")
    s = Store(tmp_path / "c.db")
    (r,) = import_path(s, p, category="fallback")
    assert (r.lines, r.added, r.rejected) == (5, 2, {"comment": 1, "blank": 1, "bad_char": 1})
    assert s.get("a.com/1")["category"] == "adult" and s.get("b.com")["category"] == "fallback"


def test_import_real_ut1_category(tmp_path, shared):
    folder = shared("blacklists/ut1/drogue")
    s = Store(tmp_path / "u.db")
    res = import_path(s, folder)
    assert {r.category for r in res} == {"drogue"} and len(res) == 2
    raw = 0
    for r in res:
        r.check()
        with gzip.open(r.source, "rb") as f:
            raw += len(f.read().splitlines())
    assert sum(r.lines for r in res) == raw
    assert s.count() == sum(r.added for r in res) > 0
    m = UrlManager(tmp_path / "u.db")
    t = m.load_tree()
    assert len(t) == s.count()
    t.check()
    with gzip.open(folder / "urls.gz", "rb") as f:
        sample = f.read().splitlines()[:200]
    assert (t.match_many(sample) > 0).all()
    # importing again adds nothing and counts duplicates
    again = import_path(s, folder)
    assert sum(r.added for r in again) == 0 and sum(r.duplicates for r in again) == sum(r.added for r in res)


def test_import_whole_ut1_tree_with_categories(tmp_path, shared):
    root = shared("blacklists/ut1")
    s = Store(tmp_path / "all.db")
    res = import_path(s, root)
    cats = s.by_category()
    assert len(cats) > 50 and cats["bank"] > 1000
    assert all(r.lines == r.added + r.duplicates + r.n_rejected for r in res)


def test_cli_end_to_end(tmp_path, capsys):
    db = str(tmp_path / "cli.db")
    lst = tmp_path / "list.txt"
    lst.write_text("evil.com\nbad.org/path\n\n#x\n")
    assert main(["--db", db, "import", str(lst), "--category", "malware"]) == 0
    assert "2 added" in capsys.readouterr().out
    assert main(["--db", db, "add", "http://Phish.net/login", "--category", "phishing"]) == 0
    capsys.readouterr()
    rc = main(["--db", db, "match", "--json", "https://www.evil.com/x", "bad.org/pathx", "phish.net/login?a", "bad host"])
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert rc == 0
    assert [r["hit"] for r in rows] == [True, False, True, False]
    assert rows[0]["entry"] == "evil.com" and rows[0]["category"] == "malware"
    assert rows[0]["canonical"] == "www.evil.com/x" and rows[3]["canonical"] is None
    assert main(["--db", db, "match", "nothing.example"]) == 1
    capsys.readouterr()
    assert main(["--db", db, "delete", "evil.com"]) == 0
    assert main(["--db", db, "stats", "--json"]) == 0
    st = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert st["urls"] == 2 and st["bytes_per_url"] > 0 and st["by_category"] == {"malware": 1, "phishing": 1}
    assert main(["--db", db, "add", "x.com", "--category", "c", "--daily", "99:00-1"]) == 2
    assert "error" in capsys.readouterr().err
    assert main(["--db", db, "import", str(tmp_path / "missing.txt")]) == 1   # nothing imported
    assert main(["--db", db, "export", str(tmp_path / "e.csv")]) == 0
    assert (tmp_path / "e.csv").read_text().count("\n") == 3
    assert main(["--db", db, "backup", str(tmp_path / "b.db")]) == 0
    assert Store(tmp_path / "b.db").count() == 2


def test_cli_entry_point(tmp_path):
    r = subprocess.run([sys.executable, "-m", "urlfilter.cli", "--db", str(tmp_path / "e.db"), "stats", "--json"],
                       capture_output=True, text=True, timeout=120)
    # a store that does not exist is an error, and nothing is created (docs/CLI.md)
    assert r.returncode == 1 and "no blacklist store" in r.stderr
    assert not (tmp_path / "e.db").exists()
    r = subprocess.run([sys.executable, "-m", "urlfilter.cli", "--db", str(tmp_path / "e.db"), "add",
                        "x.example", "--category", "c"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-m", "urlfilter.cli", "--db", str(tmp_path / "e.db"), "stats", "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and json.loads(r.stdout)["urls"] == 1


def test_import_folder_of_plain_lists_and_empty_folder(tmp_path):
    d = tmp_path / "lists"
    d.mkdir()
    (d / "gambling.txt").write_text("casino.example\n")
    (d / "ads.gz").write_bytes(gzip.compress(b"ads.example/banner\nads.example\n"))
    s = Store(tmp_path / "p.db")
    res = import_path(s, d)
    assert sorted((r.category, r.added) for r in res) == [("ads", 2), ("gambling", 1)]
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError):
        import_path(s, tmp_path / "empty")


def test_older_snapshot_formats_are_refused_and_rebuilt_from_the_store(tmp_path):
    """The snapshot is the URL store's base image (magic WTURLB02, issue 35). A bare tree
    snapshot of the format before (WTAVL004) or an older one (WTAVL001) at DB.tree is refused
    by UrlStore.load with a ValueError naming it, and the manager rebuilds from the store; so is
    a store snapshot of format 01 (separate offset array, first records whole: the file in
    tests/urlfilter/data was written by that format's code, commit 7074d0b)."""
    from urlfilter.tree import UrlTree
    from urlfilter.urlstore import UrlStore

    db = tmp_path / "m.db"
    m = UrlManager(db)
    m.add("evil.com", "malware")
    m.add("bad.org/p", "phishing")
    m.load_tree()
    m.save_snapshot(force=True)
    assert m.snapshot.read_bytes()[:8] == b"WTURLB02"
    v01 = (Path(__file__).parent / "data" / "store-WTURLB01.bin").read_bytes()
    assert v01[:8] == b"WTURLB01"
    m.snapshot.write_bytes(v01)
    with pytest.raises(ValueError, match=r"older URL store snapshot format \(WTURLB01\), this version reads WTURLB02"):
        UrlStore.load(m.snapshot)
    t = UrlManager(db).load_tree()
    assert t.match("x.evil.com/a") > 0 and t.match("bad.org/p/q") > 0 and len(t) == 2
    old = UrlTree()
    old.insert("evil.com")
    old.save(m.snapshot)
    raw = m.snapshot.read_bytes()
    assert raw[:8] == b"WTAVL004"
    for magic in (b"WTAVL004", b"WTAVL001"):
        m.snapshot.write_bytes(magic + raw[8:])
        with pytest.raises(ValueError, match="older URL tree snapshot"):
            UrlStore.load(m.snapshot)
        m2 = UrlManager(db)
        t = m2.load_tree()
        assert t.match("x.evil.com/a") > 0 and t.match("bad.org/p/q") > 0 and len(t) == 2
        t.check()


# ---- issue 30: every category of an entry; rejected lines by number --------------------------

def _ut_tree(root):
    """phishing: evil, shared, 4 rejected lines; malware: shared, other, evil; adult: evil."""
    for cat, body in (("phishing", "evil.test\nshared.test\nbad host!\n\n# c\nhttp://x:99999/\nok.test/a\n"),
                      ("malware", "shared.test\nother.test\nEVIL.test/\n"), ("adult", "evil.test\n")):
        (root / cat).mkdir(parents=True)
        (root / cat / "domains").write_text(body)
    return root


def test_an_entry_in_several_categories_keeps_them_all(tmp_path):
    root = _ut_tree(tmp_path / "ut")
    db = tmp_path / "m.db"
    s = Store(db)
    res = {r.category: r for r in import_path(s, root)}     # adult, malware, phishing (sorted)
    assert (res["adult"].added, res["malware"].added, res["phishing"].added) == (1, 2, 1)
    assert res["malware"].recategorized == 1 and res["phishing"].recategorized == 2
    # per single category: every entry listed there, whatever was imported first
    assert s.by_category() == {"phishing": 3, "malware": 3, "adult": 1}
    assert s.get("evil.test")["category"] == "adult,malware,phishing"
    assert s.get("shared.test")["category"] == "malware,phishing"
    assert s.get("other.test")["category"] == "malware"
    assert sorted(u for u, *_ in s.list("phishing")) == ["evil.test", "ok.test/a", "shared.test"]
    s.close()
    # a hit reports them all: through the tree built from the store and through its snapshot
    for _ in range(2):
        m = UrlManager(db)
        hits = {r["url"]: r["category"] for r in m.match(["http://evil.test/x", "shared.test", "ok.test/a/b"])}
        assert hits == {"http://evil.test/x": "adult,malware,phishing", "shared.test": "malware,phishing",
                        "ok.test/a/b": "phishing"}
        m.save_snapshot()
        m.close()
    # a later import that lists a stored entry elsewhere reaches the saved tree (replay)
    (tmp_path / "gambling.txt").write_text("other.test\n")
    s = Store(db)
    (r,) = import_path(s, tmp_path / "gambling.txt")
    assert (r.added, r.duplicates, r.recategorized) == (0, 1, 1)
    s.close()
    m = UrlManager(db)
    assert m.match(["other.test/z"])[0]["category"] == "gambling,malware"
    m.close()


def test_scan_hit_reports_every_category(tmp_path):
    from urlfilter.analyzer import load_blacklist
    from tests.urlfilter.test_filter_cli import _trace

    s = Store(tmp_path / "b.db")
    s.add("evil.test", "malware")
    s.add("evil.test", "phishing")
    s.close()
    m = UrlManager(tmp_path / "b.db")
    m.load_tree()
    m.save_snapshot()
    m.close()
    from urlfilter.scan import scan

    df = scan(_trace(tmp_path), load_blacklist(str(tmp_path / "b.db"))).to_pandas()
    assert df.loc[df.hit, "category"].tolist() == ["malware,phishing"] * 2


def test_rejected_lines_are_numbered(tmp_path, capsys):
    root = _ut_tree(tmp_path / "ut")
    s = Store(tmp_path / "n.db")
    (r,) = import_path(s, root / "phishing")
    assert r.rejected_lines == {"bad_char": [3], "blank": [4], "comment": [5], "bad_port": [6]}
    p = tmp_path / "many.txt"
    p.write_text("".join("bad host\n" if i % 2 else "fine%d.test\n" % i for i in range(20)))
    (r,) = import_path(s, p)
    assert r.rejected["bad_char"] == 10 and r.rejected_lines["bad_char"] == [2, 4, 6, 8, 10]
    c = tmp_path / "x.csv"
    c.write_text("url,category\nok.test,a\nbad host,b\n")
    (r,) = import_path(s, c)
    assert r.rejected_lines == {"bad_char": [3]}                     # the header is line 1
    s.close()
    assert main(["--db", str(tmp_path / "cli.db"), "import", str(p)]) == 0
    out = capsys.readouterr().out
    assert "rejected: bad_char 10 (lines 2, 4, 6, 8, 10, ...)" in out
    assert main(["--db", str(tmp_path / "cli.db"), "import", str(p), "--json"]) == 0
    j = json.loads(capsys.readouterr().out.splitlines()[0])
    assert j["rejected_lines"] == {"bad_char": [2, 4, 6, 8, 10]}


def test_store_of_schema_version_0_is_migrated(tmp_path):
    """A store written before url_categories existed: each URL keeps its one category, and
    categories added afterwards are kept beside it."""
    import sqlite3

    from urlfilter import store as store_mod

    old_schema = store_mod.SCHEMA.split("CREATE TABLE IF NOT EXISTS url_categories")[0] + \
        store_mod.SCHEMA.split("CREATE INDEX IF NOT EXISTS url_categories_import ON url_categories(import_id);")[1]
    db = sqlite3.connect(tmp_path / "v0.db")
    db.executescript(old_schema)
    db.executemany("INSERT INTO categories(id, name) VALUES (?,?)", [(1, "adult"), (2, "malware")])
    db.executemany("INSERT INTO urls(url, category_id, period_id, added_at, updated_at) VALUES (?,?,0,0,0)",
                   [("a.test", 1), ("b.test/x", 2)])
    db.commit()
    assert db.execute("PRAGMA user_version").fetchone()[0] == 0
    db.close()
    s = Store(tmp_path / "v0.db")
    assert s.db.execute("PRAGMA user_version").fetchone()[0] == 1
    assert s.by_category() == {"adult": 1, "malware": 1}
    s.add("a.test", "malware")
    assert s.get("a.test")["category"] == "adult,malware" and s.by_category() == {"malware": 2, "adult": 1}
    s.close()
    m = UrlManager(tmp_path / "v0.db")
    assert m.match(["a.test/q"])[0]["category"] == "adult,malware"
    m.close()


def test_ut1_phishing_keeps_every_entry(tmp_path, shared):
    """UT1's phishing and malware lists overlap almost entirely; imported one after the other,
    each category keeps every distinct entry of its own files (counted here with the
    independent reference canonicaliser), and the overlap is the set intersection."""
    from tests.urlfilter.canon_reference import Rejected, reference

    root = shared("blacklists/ut1")

    def entries(cat):
        out = set()
        with gzip.open(root / cat / "urls.gz", "rb") as f:
            for line in f.read().splitlines():
                try:
                    out.add(reference(line))
                except Rejected:
                    pass
        return out

    want = {c: entries(c) for c in ("malware", "phishing")}
    s = Store(tmp_path / "p.db")
    for c in ("malware", "phishing"):
        import_path(s, root / c / "urls.gz")
    got = s.by_category()
    assert got == {c: len(v) for c, v in want.items()}
    both = s.db.execute("SELECT count(*) FROM url_categories GROUP BY url_id HAVING count(*) = 2").fetchall()
    assert len(both) == len(want["malware"] & want["phishing"]) > 10000


def _categories_by_url(s):
    """url -> (its set row's name, the sorted names of its memberships), read from the store's tables."""
    sets = dict(s.db.execute("SELECT u.url, c.name FROM urls u JOIN categories c ON c.id=u.category_id"))
    members = {}
    for url, name in s.db.execute("SELECT u.url, c.name FROM url_categories uc JOIN urls u ON u.id=uc.url_id "
                                  "JOIN categories c ON c.id=uc.category_id"):
        members.setdefault(url, []).append(name)
    return {u: (sets[u], sorted(members.get(u, []))) for u in sets}


def test_import_categories_as_a_reference_union(tmp_path):
    """Several CSV files, each line one or two categories ("a,b"), URLs listed again across and
    within files: every URL's set and memberships are the union of what the files listed, and
    recategorized counts the URLs stored before that file which it listed in a category they lacked."""
    import csv
    import random
    rnd = random.Random(35)
    cats = ["adult", "malware", "phishing", "gambling", "zeta"]
    hosts = [f"h{i}.test" for i in range(400)]          # canonical as written
    ref: dict[str, set] = {}
    for k in range(5):
        rows = []
        for h in rnd.sample(hosts, 150) + rnd.sample(hosts, 20):    # some twice in one file
            cs = rnd.sample(cats, rnd.choice((1, 1, 2)))
            rows.append((h, ",".join(cs)))
        p = tmp_path / f"f{k}.csv"
        with open(p, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["url", "category"])
            w.writerows(rows)
        before = {u: set(c) for u, c in ref.items()}
        for h, c in rows:
            ref.setdefault(h, set()).update(c.split(","))
        gained = sum(1 for u, c in ref.items() if u in before and c - before[u])
        s = Store(tmp_path / "u.db")
        (r,) = import_path(s, p)
        assert r.recategorized == gained
        got = _categories_by_url(s)
        assert got == {u: (",".join(sorted(c)), sorted(c)) for u, c in ref.items()}
        s.close()


def test_import_of_ut1_phishing_and_malware_keeps_every_category(tmp_path, shared):
    """The real lists (216,898 malware domains are phishing ones too): each stored URL's
    categories are those of the files that list it, the files read and canonicalised here."""
    from urlfilter import canon
    ut = shared("blacklists/ut1")
    ref: dict[str, set] = {}
    gained = []
    for cat in ("phishing", "malware"):
        for name in ("domains.gz", "urls.gz"):           # the order import_path takes them in
            packed, offsets, is_comment = split_lines(gzip.decompress((ut / cat / name).read_bytes()))
            urls, codes = canon.canonicalize_many(packed, offsets)
            listed = {u for u, c, com in zip(urls, codes.tolist(), is_comment.tolist()) if c == 0 and not com}
            gained.append(sum(1 for u in listed if u in ref and cat not in ref[u]))
            for u in listed:
                ref.setdefault(u, set()).add(cat)
    s = Store(tmp_path / "ut1.db")
    res = [r for cat in ("phishing", "malware") for r in import_path(s, ut / cat)]
    assert [r.source.rsplit("/", 2)[1:] for r in res] == [[c, n] for c in ("phishing", "malware")
                                                         for n in ("domains.gz", "urls.gz")]
    assert [r.recategorized for r in res] == gained
    assert gained[2] == 216898                          # the case this guards (docs/urlfilter.md)
    got = _categories_by_url(s)
    assert len(got) == len(ref) == 238505
    assert got == {u: (",".join(sorted(c)), sorted(c)) for u, c in ref.items()}
    s.close()
