"""``urlfilter``: the URL Manager's command line (store in SQLite, tree snapshot beside it).

    urlfilter [--db PATH] import PATH... [--format auto|ut1|list|csv] [--category NAME] [--json]
    urlfilter [--db PATH] add URL... --category NAME [--from TS] [--until TS] [--daily HH:MM-HH:MM]
    urlfilter [--db PATH] delete URL...
    urlfilter [--db PATH] list [--category NAME] [--limit N]
    urlfilter [--db PATH] match [--json] URL...
    urlfilter [--db PATH] stats [--json]
    urlfilter [--db PATH] export CSV | backup PATH | snapshot

Exit status: 0 ok, 1 for a match with no hit (match only), 2 for usage or input errors.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime, timezone

from urlfilter.errors import InvalidUrl, UrlFilterError
from urlfilter.importers import import_path
from urlfilter.store import Period, UrlManager, default_db_path


def _ts(text):
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        try:
            d = datetime.fromisoformat(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a Unix time or ISO date: {text!r}") from None
        if d.tzinfo is None:
            d = d.replace(tzinfo=timezone.utc)
        return int(d.timestamp())


def _parser():
    p = argparse.ArgumentParser(prog="urlfilter", description="Blacklist URL manager and matcher (webtap)")
    p.add_argument("--db", default=None, help=f"SQLite store (default {default_db_path()})")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("import", help="import blacklist files or UT1-style folders")
    s.add_argument("paths", nargs="+")
    s.add_argument("--format", default="auto", choices=["auto", "ut1", "list", "csv"])
    s.add_argument("--category")
    s.add_argument("--json", action="store_true")
    s = sub.add_parser("add", help="add URLs")
    s.add_argument("urls", nargs="+")
    s.add_argument("--category", required=True)
    s.add_argument("--from", dest="active_from", type=_ts)
    s.add_argument("--until", dest="active_until", type=_ts)
    s.add_argument("--daily", help="daily window HH:MM-HH:MM (UTC)")
    s = sub.add_parser("delete", help="delete URLs")
    s.add_argument("urls", nargs="+")
    s = sub.add_parser("list", help="list stored URLs")
    s.add_argument("--category")
    s.add_argument("--limit", type=int)
    s = sub.add_parser("match", help="match URLs against the blacklist")
    s.add_argument("urls", nargs="+")
    s.add_argument("--json", action="store_true")
    s = sub.add_parser("stats", help="entries, bytes per URL, by category")
    s.add_argument("--json", action="store_true")
    s = sub.add_parser("export", help="export the store as CSV")
    s.add_argument("path")
    s = sub.add_parser("backup", help="copy the SQLite store")
    s.add_argument("path")
    sub.add_parser("snapshot", help="rebuild and save the tree snapshot (DB.tree)")
    return p


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    mgr = UrlManager(args.db or default_db_path())
    try:
        return _run(mgr, args)
    except (UrlFilterError, OSError, ValueError) as e:
        print(f"urlfilter: error: {e}", file=sys.stderr)
        return 2
    finally:
        mgr.close()


def _run(mgr: UrlManager, args) -> int:
    out = sys.stdout
    if args.cmd == "import":
        total = 0
        t0 = time.perf_counter()
        for path in args.paths:
            for r in import_path(mgr.store, path, args.format, args.category):
                total += r.added
                if args.json:
                    print(json.dumps(r.as_dict()), file=out)
                else:
                    rej = ", ".join(f"{k} {v}" for k, v in sorted(r.rejected.items())) or "none"
                    print(f"{r.source}: {r.lines} lines, {r.added} added, {r.duplicates} duplicates, "
                          f"rejected: {rej}", file=out)
        mgr.load_tree()
        mgr.save_snapshot()
        if not args.json:
            print(f"{total} URLs added in {time.perf_counter() - t0:.1f} s; "
                  f"store holds {mgr.store.count()}", file=out)
        return 0
    if args.cmd == "add":
        period = None
        if args.active_from or args.active_until or args.daily:
            ds = de = None
            if args.daily:
                ds, de = Period.parse_window(args.daily)
            period = Period(args.active_from, args.active_until, ds, de)
        for u in args.urls:
            c, created = mgr.add(u, args.category, period)
            print(f"{'added' if created else 'updated'} {c}", file=out)
        return 0
    if args.cmd == "delete":
        rc = 0
        for u in args.urls:
            if mgr.delete(u):
                print(f"deleted {u}", file=out)
            else:
                print(f"urlfilter: not in the store: {u}", file=sys.stderr)
                rc = 2
        return rc
    if args.cmd == "list":
        for url, cat, pid, source in mgr.store.list(args.category, args.limit):
            print(f"{url}\t{cat}\t{pid}\t{source}", file=out)
        return 0
    if args.cmd == "match":
        res = mgr.match(args.urls)
        mgr.save_snapshot()
        for r in res:
            if args.json:
                print(json.dumps(r), file=out)
            elif r["canonical"] is None:
                print(f"INVALID\t{r['url']}\t{r['error']}", file=out)
            else:
                print(f"{'HIT' if r['hit'] else 'MISS'}\t{r['url']}\t{r['entry'] or ''}\t{r['category'] or ''}",
                      file=out)
        return 0 if any(r["hit"] for r in res) else 1
    if args.cmd == "stats":
        t = mgr.load_tree()
        mgr.save_snapshot()
        st = t.stats()
        st.update({"bytes_per_url": round(st["paper_bytes"] / st["urls"], 2) if st["urls"] else 0.0,
                   "allocated_bytes_per_url": round(st["allocated_bytes"] / st["urls"], 2) if st["urls"] else 0.0,
                   "store_urls": mgr.store.count(), "by_category": mgr.store.by_category()})
        if args.json:
            print(json.dumps(st), file=out)
        else:
            print(f"urls {st['urls']} (store {st['store_urls']}), {st['bytes_per_url']} bytes/URL "
                  f"(paper's definition), {st['allocated_bytes_per_url']} allocated, height {st['height']}", file=out)
            for k, v in st["by_category"].items():
                print(f"  {k}\t{v}", file=out)
        return 0
    if args.cmd == "export":
        mgr.store.export_csv(args.path)
        return 0
    if args.cmd == "backup":
        mgr.store.backup(args.path)
        return 0
    if args.cmd == "snapshot":
        if mgr.snapshot is not None and mgr.snapshot.exists():
            mgr.snapshot.unlink()
        mgr.load_tree()
        mgr.save_snapshot(force=True)
        print(f"saved {mgr.snapshot}", file=out)
        return 0
    raise InvalidUrl(args.cmd, "unknown command")


if __name__ == "__main__":
    sys.exit(main())
