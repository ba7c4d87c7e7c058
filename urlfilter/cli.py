"""``urlfilter``: the URL Manager's command line (store in SQLite, tree snapshot beside it).

    urlfilter [--db PATH] import PATH... [--format auto|ut1|list|csv] [--category NAME] [--json]
    urlfilter [--db PATH] add URL... --category NAME [--from TS] [--until TS] [--daily HH:MM-HH:MM]
    urlfilter [--db PATH] delete URL...
    urlfilter [--db PATH] list [--category NAME] [--limit N]
    urlfilter [--db PATH] match [--json] URL...
    urlfilter [--db PATH] stats [--json]
    urlfilter [--db PATH] export CSV | backup PATH | snapshot
    urlfilter scan TRACE... --blacklist DB [-o OUT.csv|OUT.parquet] [--forged-out forged.pcap] [--plots DIR]
    urlfilter run -i IFACE --blacklist DB [--inject-iface IFACE2] [--duration S] [-o HITS.csv]
    urlfilter timing TRACE... --blacklist DB [--t-proc-us US] [-o OUT.csv] [--plot CDF.png] [--plots DIR] [--json]

DB (scan, run, timing): a store made with `urlfilter --db DB import ...`, or its snapshot DB.tree.

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
    s = sub.add_parser("scan", help="match the GETs of traces offline")
    s.add_argument("traces", nargs="+")
    s.add_argument("--blacklist", required=True)
    s.add_argument("-o", "--output", help="records as .csv or .parquet")
    s.add_argument("--forged-out", help="pcap of the FIN/RST frames the filter would have sent")
    s.add_argument("--bpf")
    s.add_argument("--verify-checksums", action="store_true",
                   help="skip GETs with a wrong IPv4/TCP checksum (off: endpoint captures carry offload checksums)")
    s.add_argument("--json", action="store_true", help="counters as JSON")
    s.add_argument("--plots", metavar="DIR",
                   help="write hits by category and the match-time histogram as PNG to DIR")
    s = sub.add_parser("run", help="live filter: capture, match, inject FIN/RST")
    s.add_argument("-i", "--iface", required=True)
    s.add_argument("--blacklist", required=True)
    s.add_argument("--inject-iface")
    s.add_argument("--bpf", default="tcp or udp")   # udp: QUIC Initials (issue 18)
    s.add_argument("--duration", type=float, help="stop after this many seconds")
    s.add_argument("-o", "--output", help="hit records (+ reaction_ns) as .csv or .parquet at exit")
    s.add_argument("--verify-checksums", action="store_true",
                   help="skip GETs with bad checksums (off: local captures carry offload checksums)")
    s.add_argument("--quiet", action="store_true", help="no status line")
    s = sub.add_parser("timing", help="timing condition per connection (T_proc + RTT_cf < RTT_cs)")
    s.add_argument("traces", nargs="+")
    s.add_argument("--blacklist", required=True)
    s.add_argument("--t-proc-us", type=float, help="use this T_proc instead of the measured match+forge time")
    s.add_argument("-o", "--output", help="per-connection report as .csv or .parquet")
    s.add_argument("--plot", help="CDF of the margin as an image")
    s.add_argument("--plots", metavar="DIR",
                   help="write the timing condition per connection (paper Fig. 11b) as PNG to DIR")
    s.add_argument("--bpf")
    s.add_argument("--json", action="store_true")
    return p


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.cmd in ("scan", "run", "timing"):
        try:
            return _filter_cmd(args)
        except (UrlFilterError, OSError, ValueError) as e:
            print(f"urlfilter: error: {e}", file=sys.stderr)
            return 2
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
                   "store_urls": mgr.store.count(), "by_category": mgr.store.by_category(),
                   # entries an SNI can never match (issue 18: TLS/QUIC carry the host only)
                   "path_only": mgr.store.path_only()})
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


def _filter_cmd(args) -> int:
    """scan / run / timing: the pass-by filter (urlfilter.scan, .live, .timing)."""
    import pyarrow as pa

    from urlfilter.analyzer import load_blacklist
    from urlfilter.scan import write_records

    out = sys.stdout
    bl = load_blacklist(args.blacklist)
    if args.cmd == "scan":
        from urlfilter.scan import scan

        t0 = time.perf_counter()
        res = scan(args.traces, bl, forged_out=args.forged_out, bpf=args.bpf,
                   verify_checksums=args.verify_checksums)
        for u in res.totals.unreadable:
            print(f"urlfilter: skipped {u}", file=sys.stderr)
        if res.totals.unreadable and not res.totals.files:
            return 1                   # nothing could be read at all
        if args.output:
            write_records(res.table, args.output)
        if args.plots:
            from urlfilter.plot import save_figures, scan_figures

            for p in save_figures(scan_figures(res.table), args.plots):
                print(f"urlfilter: wrote {p}", file=sys.stderr)
        c = dict(res.counters, packets=res.totals.source["packets"], seconds=round(time.perf_counter() - t0, 3),
                 forged_written=res.forged_written)
        if args.json:
            print(json.dumps(c), file=out)
        else:
            if not args.output:
                cols = ["ts_ns", "proto", "src_ip", "src_port", "dst_ip", "dst_port", "hit", "url", "sni",
                        "entry", "category"]
                res.table.select(cols).to_pandas().to_csv(out, sep="\t", index=False)
            print(f"{c['packets']} packets, {c['get']} GETs, {c['extracted']} matched, {c['hits']} hits, "
                  f"{c['forged_frames']} frames forged; TLS {c['tls_lookups']} SNIs {c['tls_hits']} hits, "
                  f"QUIC {c['quic_lookups']} SNIs {c['quic_hits']} hits; skipped: "
                  + ", ".join(f"{k} {c[k]}" for k in ("uri_truncated", "no_host", "host_later", "bad_target",
                                                      "bad_checksum", "canon_failed") if c[k]),
                  file=sys.stderr)
        return 0
    if args.cmd == "run":
        from urlfilter.live import run_live

        st = run_live(args.iface, bl, inject_iface=args.inject_iface, bpf=args.bpf, duration=args.duration,
                      status=not args.quiet, verify_checksums=args.verify_checksums)
        if args.output:
            t = st.table()
            if t.num_columns:
                write_records(t, args.output)
            else:
                from urlfilter.analyzer import RECORD_SCHEMA
                write_records(RECORD_SCHEMA.append(pa.field("reaction_ns", pa.int64())).empty_table(), args.output)
        print(json.dumps({k: v for k, v in vars(st).items() if k != "records"}), file=out)
        return 0
    from urlfilter.timing import summary, timing

    df = timing(args.traces, bl, bpf=args.bpf,
                t_proc_ns=None if args.t_proc_us is None else args.t_proc_us * 1000)
    if args.output:
        write_records(pa.Table.from_pandas(df, preserve_index=False), args.output)
    if args.plot:
        from urlfilter.plot import margin_cdf
        margin_cdf(df, path=args.plot)
    if args.plots:
        from urlfilter.plot import save_figures, timing_figures

        for p in save_figures(timing_figures(df), args.plots):
            print(f"urlfilter: wrote {p}", file=sys.stderr)
    s = summary(df)
    if args.json:
        print(json.dumps(s), file=out)
    else:
        if not args.output:
            cols = ["src_ip", "src_port", "dst_ip", "dst_port", "url", "rtt_fs_ns", "rtt_cf_ns", "server_wait_ns",
                    "t_proc_ns", "margin_ns", "win"]
            df[cols].to_csv(out, sep="\t", index=False)
        print(f"{s['won']} of {s['with_handshake']} connections with a handshake won "
              f"({s['share_won']:.1%}); {s['connections'] - s['with_handshake']} without a handshake", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
