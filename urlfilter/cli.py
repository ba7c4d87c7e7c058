"""``urlfilter``: the URL Manager's command line (store in SQLite, tree snapshot beside it).

subcommands (urlfilter COMMAND --help for each):
  urlfilter [--db DB] import PATH... [--format auto|ut1|list|csv] [--category NAME] [--json]
  urlfilter [--db DB] add URL... --category NAME [--from TS] [--until TS] [--daily HH:MM-HH:MM]
  urlfilter [--db DB] delete URL...
  urlfilter [--db DB] list [--category NAME] [--limit N]
  urlfilter [--db DB] match [--json] URL...
  urlfilter [--db DB] stats [--json]
  urlfilter [--db DB] export CSV | backup PATH | snapshot
  urlfilter [--db DB] allow add URL... | delete URL... | list | import PATH...
  urlfilter [--db DB] rules load FILE | add RULE... [--at N] | delete N... | list | clear | check FILE
  urlfilter [--db DB] scan TRACE... [-o OUT] [--forged-out forged.pcap] [--plots DIR]
  urlfilter [--db DB] run -i IFACE [--inject-iface IFACE2] [--duration S] [-o HITS]
  urlfilter [--db DB] timing TRACE... [--t-proc-us US] [-o OUT] [--plots DIR] [--json]

DB: a store made with `urlfilter --db DB import ...` (scan, run and timing also take its
snapshot DB.tree). --db may come before or after the command; --blacklist is an old spelling.
Only import, add, allow add/import and rules load/add create a store; the other commands
refuse one that does not exist.

Policy (docs/urlfilter.md "Allow list and rules"): rules first (first match wins: cut, allow,
or log and go on to the lists), then the allow list over the blacklist's hits, then the
blacklist. A rule: ACTION [KEY=VALUE[,VALUE...]]... with ACTION cut|log|allow and KEY client
(address/CIDR), port (N or N-M, server), url (prefix, as an entry), ua (User-Agent substring),
sni (name or parent domain), ja4, ext (path extension), proto (http|tls|quic), e.g.
  cut client=10.0.0.0/8 ua=curl          allow url=example.com/help        log ext=exe,msi
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime, timezone

from urlfilter.errors import InvalidUrl, StoreError, UrlFilterError
from webtap import clikit
from webtap.errors import BpfError, CaptureError
from webtap.writers import empty_batch_of

EPILOG = """Exit status: 0 ok; 1 a match with no hit (match only), an import that imported
nothing, a run that could not read its input or a store that does not exist; 2 usage error
(bad option, number, output path or format, BPF filter, URL); 130/143 interrupted by
SIGINT/SIGTERM (scan and timing keep nothing but OUT.partial.EXT of the records so far; `run`
ends normally on either signal). Errors are one line on stderr; --debug (or WEBTAP_DEBUG=1)
adds the traceback. See docs/CLI.md."""


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


def _db_help():
    from urlfilter.store import default_db_path

    return f"the blacklist store (SQLite; default {default_db_path()})"


def _parser():
    p = argparse.ArgumentParser(prog="urlfilter", description=__doc__, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--db", default=None, metavar="DB", help=_db_help())
    clikit.add_common(p)
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    def cmd(name, help, blacklist_alias=False):
        s = sub.add_parser(name, help=help, description=help)
        names = ["--db", "--blacklist"] if blacklist_alias else ["--db"]
        s.add_argument(*names, dest="db", default=argparse.SUPPRESS, metavar="DB",
                       help="the blacklist store (as the global --db)"
                       + ("; --blacklist is an old spelling" if blacklist_alias else ""))
        s.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help=f"traceback after an error (also {clikit.DEBUG_ENV}=1)")
        s.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                       help="no warnings about damaged input, no progress or status line")
        return s

    s = cmd("import", "import blacklist files or UT1-style folders")
    s.add_argument("paths", nargs="+", metavar="PATH", help="list files (.gz too), CSV files or UT1 folders")
    s.add_argument("--format", default="auto", choices=["auto", "ut1", "list", "csv"],
                   help="how to read PATH (auto: a folder is UT1, *.csv is CSV, else a list)")
    s.add_argument("--category", help="category of every entry (default: from the file or folder name)")
    s.add_argument("--json", action="store_true", help="one JSON object per file on stdout")
    s = cmd("add", "add URLs")
    s.add_argument("urls", nargs="+", metavar="URL", help="URLs or host names to add")
    s.add_argument("--category", required=True, help="their category")
    s.add_argument("--from", dest="active_from", type=_ts, metavar="TS",
                   help="active from (Unix time or ISO date)")
    s.add_argument("--until", dest="active_until", type=_ts, metavar="TS",
                   help="active until (Unix time or ISO date)")
    s.add_argument("--daily", metavar="HH:MM-HH:MM", help="daily window HH:MM-HH:MM (UTC)")
    s = cmd("delete", "delete URLs")
    s.add_argument("urls", nargs="+", metavar="URL", help="URLs to delete")
    s = cmd("list", "list stored URLs")
    s.add_argument("--category", help="only this category")
    s.add_argument("--limit", type=clikit.positive_int, metavar="N",
                   help="at most N entries (1 .. 2**62)")
    s = cmd("match", "match URLs against the blacklist")
    s.add_argument("urls", nargs="+", metavar="URL", help="URLs to look up")
    s.add_argument("--json", action="store_true", help="one JSON object per URL")
    s = cmd("stats", "entries, bytes per URL, by category")
    s.add_argument("--json", action="store_true", help="one JSON object")
    s = cmd("export", "export the store as CSV")
    s.add_argument("path", metavar="CSV", help="the CSV file to write")
    clikit.files(s, inputs=("db",), outputs=("path",))
    s = cmd("backup", "copy the SQLite store")
    s.add_argument("path", metavar="PATH", help="where the copy goes")
    clikit.files(s, inputs=("db",), outputs=("path",))
    cmd("snapshot", "rebuild and save the tree snapshot (DB.tree)")
    s = cmd("allow", "the allow list: exceptions that override the blacklist (issue 34)")
    s.add_argument("action", choices=["add", "delete", "list", "import"],
                   help="add URL..., delete URL..., list, import PATH... (a list file, .gz too, "
                        "a UT1 folder such as liste_blanche or exceptions_liste_bu)")
    s.add_argument("items", nargs="*", metavar="URL|PATH", help="the URLs or list paths of the action")
    s.add_argument("--limit", type=clikit.positive_int, metavar="N", help="list: at most N entries")
    s.add_argument("--json", action="store_true", help="import: one JSON object per file")
    s = cmd("rules", "rules across layers (issue 34): first match wins, cut | log | allow")
    s.add_argument("action", choices=["load", "add", "delete", "list", "clear", "check"],
                   help="load FILE (replaces every rule), add RULE... (one argument per rule), "
                        "delete N... (positions), list (numbered, rule-file syntax), clear, "
                        "check FILE (parse only, no store)")
    s.add_argument("items", nargs="*", metavar="FILE|RULE|N",
                   help="the rule file, the rules (one argument each) or rule numbers of the action")
    s.add_argument("--at", type=clikit.positive_int, metavar="N",
                   help="add: insert before rule N (default: after the last)")
    s = cmd("scan", "match the GETs of traces offline", blacklist_alias=True)
    s.add_argument("traces", nargs="+", metavar="TRACE", type=clikit.trace_path,
                   help="pcap / pcapng files (gzip'd too; '-' for stdin), read as one stream")
    s.add_argument("-o", "--output", metavar="OUT",
                   help=clikit.output_help("GET records") + "; default: lines on stdout")
    s.add_argument("--forged-out", metavar="PCAP",
                   help="pcap of the FIN/RST frames the filter would have sent")
    s.add_argument("-f", "--filter", "--bpf", dest="bpf", metavar="BPF",
                   help="BPF filter (tcpdump syntax; --bpf is an old spelling)")
    s.add_argument("--verify-checksums", action="store_true",
                   help="skip GETs with a wrong IPv4/TCP checksum (off: endpoint captures carry offload checksums)")
    s.add_argument("--json", action="store_true", help="counters as JSON on stdout")
    s.add_argument("--plots", metavar="DIR",
                   help="write hits by category and the match-time histogram as PNG to DIR")
    s.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: when stderr is a terminal that the "
                        "records do not go to)")
    clikit.files(s, inputs=("traces", "db"), outputs={"output": "-", "forged_out": None})
    s = cmd("run", "live filter: capture, match, inject FIN/RST", blacklist_alias=True)
    s.add_argument("-i", "--iface", "--interface", dest="iface", required=True, metavar="IFACE",
                   help="interface to capture on")
    s.add_argument("--inject-iface", metavar="IFACE",
                   help="interface to send the FIN/RST frames on (default: the capture interface)")
    s.add_argument("-f", "--filter", "--bpf", dest="bpf", default="tcp or udp", metavar="BPF",
                   help="BPF filter (default 'tcp or udp': udp for the QUIC Initials; --bpf is an old spelling)")
    s.add_argument("--duration", type=clikit.positive_float, metavar="S",
                   help="stop after this many seconds (> 0 and <= 1e9; else at Ctrl-C or SIGTERM)")
    s.add_argument("-o", "--output", metavar="OUT",
                   help=clikit.output_help("hit records (+ reaction_ns)", {"csv", "parquet", "lines"})
                   + "; written at the end")
    s.add_argument("--verify-checksums", action="store_true",
                   help="skip GETs with bad checksums (off: local captures carry offload checksums)")
    clikit.files(s, inputs=("db",), outputs=("output",))
    s = cmd("timing", "timing condition per connection (T_proc + RTT_cf < RTT_cs)",
            blacklist_alias=True)
    s.add_argument("traces", nargs="+", metavar="TRACE", type=clikit.trace_path,
                   help="pcap / pcapng files (gzip'd too; '-' for stdin)")
    s.add_argument("--t-proc-us", type=clikit.positive_float, metavar="US",
                   help="use this T_proc: adds t_proc_ns, margin_ns, win (reproducible; > 0 and <= 1e9)")
    s.add_argument("--measured", action="store_true",
                   help="add measured_t_proc_ns, measured_margin_ns, measured_win: the match+forge "
                        "time measured on this machine (differs from run to run; default: left out)")
    s.add_argument("-o", "--output", metavar="OUT",
                   help=clikit.output_help("per-connection report") + "; default: lines on stdout")
    s.add_argument("--plots", metavar="DIR",
                   help="write the timing condition per connection (paper Fig. 11b) and the "
                        "margin's CDF as PNG to DIR")
    s.add_argument("-f", "--filter", "--bpf", dest="bpf", metavar="BPF",
                   help="BPF filter (tcpdump syntax; --bpf is an old spelling)")
    s.add_argument("--json", action="store_true", help="the summary as JSON on stdout")
    s.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: when stderr is a terminal that the "
                        "records do not go to)")
    clikit.files(s, inputs=("traces", "db"), outputs={"output": "-"})
    return p


def _db_path(args):
    from urlfilter.store import default_db_path

    return args.db or str(default_db_path())


def _existing_db(args) -> str:
    """The --db of a command that reads a store: it must exist (nothing is created)."""
    import os

    db = _db_path(args)
    if os.path.isdir(db):
        raise clikit.UsageError(f"--db is a directory, not a store, {db}")
    if not os.path.exists(db):
        raise clikit.RunError(f"no blacklist store (make one with `urlfilter --db {db} import "
                              f"LIST`), {db}")
    return db


def _open_manager(args, create: bool):
    import os
    import sqlite3

    from urlfilter.store import UrlManager

    db = _db_path(args)
    if os.path.isdir(db):
        raise clikit.UsageError(f"--db is a directory, not a store, {db}")
    if not create:
        _existing_db(args)
    else:
        parent = os.path.dirname(os.path.abspath(db))
        if args.db is not None and not os.path.isdir(parent):
            raise clikit.UsageError(f"the store's folder does not exist, {os.path.dirname(db)}")
        if args.db is not None and not os.path.exists(db):
            _check_writable(parent, os.path.dirname(db) or ".")
    if os.path.exists(db):
        with open(db, "rb") as f:
            magic = f.read(16)
        if magic and not magic.startswith(b"SQLite format 3"):
            raise clikit.RunError(f"not an SQLite store, {db}")
    try:
        return UrlManager(db)
    except sqlite3.Error as e:
        raise clikit.RunError(f"cannot open the store ({e}), {db}") from None


def _check_writable(folder: str, shown: str) -> None:
    """A usage error, as for a missing folder, when a file cannot be made in `folder` (tried:
    permissions alone do not tell, root ignores them and /proc refuses even root)."""
    import os
    import tempfile

    try:
        fd, tmp = tempfile.mkstemp(prefix=".urlfilter-", dir=folder)
    except OSError as e:
        raise clikit.UsageError(f"cannot write the store's folder ({e.strerror}), {shown}") \
            from None
    os.close(fd)
    os.unlink(tmp)


def main(argv=None) -> int:
    return clikit.main("urlfilter", _parser(), _handle, argv)


def _handle(args, run) -> int:
    import sqlite3

    from urlfilter.policy import RuleError

    run.quiet = bool(getattr(args, "quiet", False))
    if args.cmd in ("scan", "run", "timing"):
        return _filter_cmd(args, run)
    import os

    if args.cmd == "import":
        args.paths = _importable(args, run)    # before the store is opened (or made)
    if args.cmd in ("allow", "rules"):
        pre = _policy_precheck(args, run)      # usage errors before any store is opened
        if pre is not None:
            return pre
    db = _db_path(args)
    made = not os.path.exists(db)              # this command makes the store (import, add)
    creates = args.cmd in ("import", "add") or (
        args.cmd == "allow" and args.action in ("add", "import")) or (
        args.cmd == "rules" and args.action in ("load", "add"))
    mgr = _open_manager(args, create=creates)
    ok = False
    try:
        rc = _run(mgr, args, run)
        ok = rc == 0 or not creates
        return rc
    except InvalidUrl as e:
        raise clikit.UsageError(str(e)) from None
    except (ValueError, StoreError) as e:
        if args.cmd != "add" and not isinstance(e, RuleError):
            raise
        raise clikit.UsageError(clikit.describe(e)) from None    # a bad --daily / --from
    except sqlite3.Error as e:
        raise clikit.RunError(f"the store refused it ({e}), {_db_path(args)}") from None
    except UrlFilterError as e:
        raise clikit.RunError(str(e)) from None
    finally:
        mgr.close()
        if made and not ok:
            _remove_store(db)              # a failed import leaves no empty store behind


def _remove_store(db: str) -> None:
    """The files of a store this run made and did not fill: the SQLite file, its journals and
    its tree snapshot (DB.tree)."""
    import os

    for suffix in ("", ".tree", "-wal", "-shm", "-journal"):
        try:
            os.unlink(db + suffix)
        except FileNotFoundError:
            pass


def _importable(args, run) -> list:
    """The import paths that exist and look like text lists; one error line for each other;
    exit 1 (no store made or touched) when none is left."""
    import os

    from urlfilter.importers import NotAList, sniff

    ok = []
    for path in args.paths:
        if not os.path.exists(path):
            run.error(f"no such file or folder, {path}")
            continue
        try:
            sniff(path)
        except NotAList as e:
            run.error(clikit.what_where(str(e)))
            continue
        except OSError as e:
            run.error(clikit.describe(e) if e.filename else f"{e}")
            continue
        ok.append(path)
    if not ok:
        raise clikit.Exit(1)
    return ok


def _run(mgr, args, run) -> int:
    from urlfilter.store import Period

    out = sys.stdout
    if args.cmd == "import":
        from urlfilter.importers import NotAList, import_path

        total = kept = 0
        t0 = time.perf_counter()
        show = not run.quiet and sys.stderr.isatty()
        refused = 0
        for path in args.paths:
            if show:
                print(f"\rimporting {path} ...", end="", file=sys.stderr, flush=True)
            try:
                results = import_path(mgr.store, path, args.format, args.category)
            except NotAList as e:      # a file inside a folder
                run.error(clikit.what_where(str(e)))
                refused += 1
                continue
            except FileNotFoundError as e:
                run.error(f"no blacklist files, {e.args[0] if e.args else path}")
                refused += 1
                continue
            if show:
                print("\r\033[K", end="", file=sys.stderr, flush=True)
            for r in results:
                total += r.added
                kept += r.added + r.duplicates
                if args.json:
                    print(json.dumps(r.as_dict()), file=out)
                else:
                    rej = ", ".join(f"{k} {v} (line{'s' if v > 1 else ''} "
                                    f"{', '.join(map(str, r.rejected_lines.get(k, [])))}{', ...' if v > len(r.rejected_lines.get(k, [])) else ''})"
                                    for k, v in sorted(r.rejected.items())) or "none"
                    more = f" ({r.recategorized} of them in another category too)" if r.recategorized else ""
                    print(f"{r.source}: {r.lines} lines, {r.added} added, {r.duplicates} duplicates{more}, "
                          f"rejected: {rej}", file=out)
        mgr.load_tree()
        mgr.save_snapshot()
        if not args.json:
            print(f"{total} URLs added in {time.perf_counter() - t0:.1f} s; "
                  f"store holds {mgr.store.count()}", file=out)
        if kept == 0:
            if not refused:            # else each refused file had its line
                run.error("nothing imported: no line was a usable entry (see the reasons above)")
            return 1
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
                run.error(f"not in the store, {u}")
                rc = 1
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
        bad = [r for r in res if r["canonical"] is None]
        if bad and len(bad) == len(res):   # as `add`: nothing to look up is a usage error
            raise clikit.UsageError(f"not a URL ({bad[0]['error']}), {bad[0]['url']}")
        for r in bad:                  # among valid ones: said, and the lookup goes on
            run.warn(f"not a URL ({r['error']}), {r['url']}")
        return 0 if any(r["hit"] for r in res) else 1
    if args.cmd == "stats":
        t = mgr.load_tree()
        mgr.save_snapshot()
        st = t.stats()
        st.update({"bytes_per_url": round(st["paper_bytes"] / st["urls"], 2) if st["urls"] else 0.0,
                   "allocated_bytes_per_url": round(st["allocated_bytes"] / st["urls"], 2) if st["urls"] else 0.0,
                   "store_urls": mgr.store.count(), "by_category": mgr.store.by_category(),
                   # entries an SNI can never match (issue 18: TLS/QUIC carry the host only)
                   "path_only": mgr.store.path_only(),
                   # the policy (issue 34)
                   "allow_urls": mgr.store.allow_count(), "rules": len(mgr.store.rules())})
        if args.json:
            print(json.dumps(st), file=out)
        else:
            print(f"urls {st['urls']} (store {st['store_urls']}), {st['bytes_per_url']} bytes/URL "
                  f"(paper's definition), {st['allocated_bytes_per_url']} allocated, height {st['height']}; "
                  f"allow list {st['allow_urls']}, rules {st['rules']}", file=out)
            for k, v in st["by_category"].items():
                print(f"  {k}\t{v}", file=out)
        return 0
    if args.cmd in ("export", "backup"):       # into a temporary file, renamed on success
        o = run.output(args.path, raw=True)
        (mgr.store.export_csv if args.cmd == "export" else mgr.store.backup)(o.target)
        o.commit()
        return 0
    if args.cmd in ("allow", "rules"):
        return _policy_cmd(mgr, args, run, out)
    if args.cmd == "snapshot":
        if mgr.snapshot is not None and mgr.snapshot.exists():
            mgr.snapshot.unlink()
        mgr.load_tree()
        mgr.save_snapshot(force=True)
        print(f"saved {mgr.snapshot}", file=out)
        return 0
    raise clikit.UsageError(f"unknown command {args.cmd}")


def _policy_precheck(args, run):
    """Usage errors of `allow` / `rules` (before a store is opened), and `rules check`, which
    needs none: its exit code, or None to go on."""
    from urlfilter.policy import read_rules_file

    need = {("allow", "add"): "URL", ("allow", "delete"): "URL", ("allow", "import"): "PATH",
            ("rules", "load"): "FILE", ("rules", "add"): "RULE", ("rules", "delete"): "N",
            ("rules", "check"): "FILE"}.get((args.cmd, args.action))
    if need and not args.items:
        raise clikit.UsageError(f"{args.cmd} {args.action} needs {need}")
    if not need and args.items:
        raise clikit.UsageError(f"{args.cmd} {args.action} takes no arguments, {args.items[0]}")
    if args.cmd == "rules" and args.action in ("load", "check") and len(args.items) != 1:
        raise clikit.UsageError(f"rules {args.action} takes one FILE, {args.items[1]}")
    if args.cmd == "rules" and args.action in ("load", "check"):
        args.rule_list = _read_rules(args.items[0])
        if args.action == "check":
            print(f"{args.items[0]}: {len(args.rule_list)} rules, ok", file=sys.stdout)
            return 0
    if args.cmd == "rules" and args.action == "add":
        from urlfilter.policy import RuleError, parse_rule

        args.rule_list = []
        for i, t in enumerate(args.items, 1):
            try:
                r = parse_rule(t, 0, f"rule {i}")
            except RuleError as e:
                raise clikit.UsageError(str(e)) from None
            if r is None:
                raise clikit.UsageError(f"rule {i}: empty rule, {t!r}")
            args.rule_list.append(r)
    if args.cmd == "rules" and args.action == "delete":
        try:
            args.positions = [int(x) for x in args.items]
        except ValueError:
            raise clikit.UsageError(f"rules delete takes rule numbers, {args.items}") from None
    if args.cmd == "allow" and args.action == "import":
        import os

        for p in args.items:
            if not os.path.exists(p):
                raise clikit.RunError(f"no such file or folder, {p}")
    return None


def _read_rules(path):
    """The rules of a rule file; one error line (FILE:LINE: reason) and exit 2 when bad."""
    import os

    from urlfilter.policy import RuleError, read_rules_file

    if os.path.isdir(path):
        raise clikit.UsageError(f"a rule file, not a folder, {path}")
    try:
        return read_rules_file(path)
    except RuleError as e:
        raise clikit.UsageError(str(e)) from None
    except OSError as e:
        raise clikit.UsageError(f"cannot read the rule file ({e.strerror}), {path}") from None


def _policy_cmd(mgr, args, run, out) -> int:
    """urlfilter allow ... / rules ... (issue 34)."""
    from urlfilter import canon          # the compiled canonicaliser (numpy): this command only
    from urlfilter.policy import allow_files, read_allow_file

    st = mgr.store
    if args.cmd == "allow":
        if args.action == "add":
            urls = []
            for u in args.items:
                try:
                    urls.append(canon.canonicalize(u))
                except InvalidUrl as e:
                    raise clikit.UsageError(f"not a URL ({e.reason}), {u}") from None
            for u in urls:
                added, _ = st.allow_add([u])
                print(f"{'added' if added else 'already listed'} {u}", file=out)
            return 0
        if args.action == "delete":
            rc = 0
            for u in args.items:
                try:
                    gone = st.allow_delete(u)
                except InvalidUrl as e:
                    raise clikit.UsageError(f"not a URL ({e.reason}), {u}") from None
                if gone:
                    print(f"deleted {u}", file=out)
                else:
                    run.error(f"not in the allow list, {u}")
                    rc = 1
            return rc
        if args.action == "list":
            for url, source in st.allow_list(args.limit):
                print(f"{url}\t{source}", file=out)
            return 0
        total = 0
        for path in args.items:
            files = allow_files(path)
            if not files:
                raise clikit.RunError(f"no list files (domains, urls), {path}")
            for f in files:
                try:
                    urls, rejected = read_allow_file(f)
                except (OSError, ValueError) as e:
                    raise clikit.RunError(clikit.what_where(str(e))) from None
                added, dup = st.allow_add(urls, source=str(f)) if urls else (0, 0)
                total += added
                rej = {k: len(v) for k, v in rejected.items()}
                if args.json:
                    print(json.dumps({"source": str(f), "entries": len(urls), "added": added,
                                      "duplicates": dup, "rejected": rej,
                                      "rejected_lines": {k: v[:5] for k, v in rejected.items()}}), file=out)
                else:
                    r = ", ".join(f"{k} {len(v)} (lines {', '.join(map(str, v[:5]))}"
                                  f"{', ...' if len(v) > 5 else ''})" for k, v in sorted(rejected.items()))
                    print(f"{f}: {len(urls)} entries, {added} added, {dup} duplicates, "
                          f"rejected: {r or 'none'}", file=out)
        if not args.json:
            print(f"{total} allow-list entries added; the allow list holds {st.allow_count()}", file=out)
        return 0
    if args.action in ("load", "add"):
        src = args.items[0] if args.action == "load" else "cli"
        items = [(str(r), f"{src}:{r.line}" if r.line else src) for r in args.rule_list]
        n = st.rules_set(items, replace=args.action == "load", at=args.at)
        print(f"{len(items)} rules {'loaded' if args.action == 'load' else 'added'}; "
              f"the store holds {n} rules", file=out)
        return 0
    if args.action == "delete":
        n = st.rules_delete(args.positions)
        if n != len(set(args.positions)):
            run.error(f"{len(set(args.positions)) - n} of the rule numbers are not in the store")
            return 1
        print(f"{n} rules deleted; the store holds {len(st.rules())} rules", file=out)
        return 0
    if args.action == "clear":
        st.rules_set([])
        print("0 rules", file=out)
        return 0
    for pos, text, source in st.rules():            # list
        print(f"{pos}\t{text}\t# {source}", file=out)
    return 0


def _load_blacklist(args):
    from urlfilter.analyzer import load_blacklist

    db = _existing_db(args)
    try:
        return load_blacklist(db)
    except ValueError as e:
        raise clikit.RunError(f"{e}") from None


def _check_filter(bpf) -> None:
    if bpf:
        from webtap.capture import compile_filter

        try:
            compile_filter(bpf)
        except BpfError as e:
            raise clikit.UsageError(f"bad filter: {clikit.describe(e)}, -f {bpf!r}") from None


def _check_plots_dir(d) -> None:
    import os

    if d is not None and os.path.exists(d) and not os.path.isdir(d):
        raise clikit.UsageError(f"--plots needs a folder, {d}")


#: columns of a scan record line (stdout, .txt)
SCAN_LINE = ("ts_ns", "proto", "src_ip", "src_port", "dst_ip", "dst_port", "hit", "url", "sni", "entry",
             "category")
TIMING_LINE = ("src_ip", "src_port", "dst_ip", "dst_port", "url", "rtt_fs_ns", "rtt_cf_ns",
               "server_wait_ns", "t_proc_budget_ns", "t_proc_ns", "margin_ns", "win",
               "measured_t_proc_ns", "measured_margin_ns", "measured_win")


def _select(cols):
    def view(batch):
        return batch.select([c for c in cols if c in batch.schema.names])
    return view


def _report_inputs(run, totals, n_sources: int) -> None:
    run.warn_traces(totals.warnings)
    for u in totals.unreadable:
        run.error(clikit.what_where(u))
    if totals.unreadable and not totals.files:
        raise clikit.Exit(1)           # nothing could be read at all (each file said why)


def _filter_cmd(args, run) -> int:
    """scan / run / timing: the pass-by filter (urlfilter.scan, .live, .timing)."""
    _check_filter(args.bpf)
    _check_plots_dir(getattr(args, "plots", None))
    out = sys.stdout
    if args.cmd == "scan":
        o = run.output(args.output or "-", views={"lines": _select(SCAN_LINE)})
        bl = _load_blacklist(args)
        from urlfilter.analyzer import policy_line, summary_line
        from urlfilter.scan import scan

        progress = clikit.progress_wanted(args.progress, o.stdout, run.quiet)
        t0 = time.perf_counter()
        forged_tmp = run.output(args.forged_out, raw=True)   # pcap written by scan()
        try:
            res = scan(args.traces, bl, forged_out=forged_tmp.target if forged_tmp else None,
                       bpf=args.bpf, verify_checksums=args.verify_checksums, progress=progress)
        except KeyboardInterrupt as e:
            part = getattr(e, "partial", None)
            if part is not None and part.table.num_rows and not o.stdout:
                o.write(part.table)    # kept as OUT.partial.EXT by clikit
            writer = getattr(e, "forged", None)
            if writer is not None and forged_tmp is not None and writer.parts:
                with run.shielded():   # the frames forged so far: FORGED.partial.pcap
                    forged_tmp.rows = writer.close()
            raise
        _report_inputs(run, res.totals, len(args.traces))
        if not (args.json and o.stdout):
            o.write(res.table)
        o.commit()
        if forged_tmp is not None:
            forged_tmp.commit()
        if args.plots:
            from urlfilter.plot import save_figures, scan_figures

            for p in save_figures(scan_figures(res.table), args.plots):
                run.note(f"wrote {p}")
        c = dict(res.counters, packets=res.totals.source["packets"], seconds=round(time.perf_counter() - t0, 3),
                 forged_written=res.forged_written)
        if args.json:
            print(json.dumps(c), file=out)
        elif not run.quiet:
            skipped = ", ".join(f"{k} {c[k]}" for k in ("uri_truncated", "no_host", "host_later",
                                                         "bad_target", "bad_checksum", "canon_failed")
                                if c[k]) or "none"
            print(f"{c['packets']} packets; {summary_line(c)}; GETs skipped: {skipped}", file=sys.stderr)
            pol = bl.policy
            if pol is not None and not pol.empty:
                print(f"policy ({len(pol.rule_list)} rules, {pol.n_allow} allow-list entries): "
                      f"{policy_line(c)}", file=sys.stderr)
        return 0
    if args.cmd == "run":
        import pyarrow as pa

        from urlfilter.live import run_live

        o = run.output(args.output)
        bl = _load_blacklist(args)
        run.live = True
        run.forward = False            # run_live polls and takes SIGINT/SIGTERM itself

        try:
            st = run_live(args.iface, bl, inject_iface=args.inject_iface, bpf=args.bpf,
                          duration=args.duration, status=not run.quiet,
                          verify_checksums=args.verify_checksums,
                          on_ready=run.on_ready(args.iface))
        except CaptureError as e:
            raise clikit.RunError(f"cannot capture ({clikit.describe(e)}), -i {args.iface}") from None
        if st.stopped_by:
            run.note(f"stopped by {st.stopped_by} after {st.packets} packets")
        if o is not None:
            t = st.table()
            if not t.num_columns:
                from webtap.records.urlhit import RECORD_SCHEMA

                t = empty_batch_of(RECORD_SCHEMA.append(pa.field("reaction_ns", pa.int64())))
            o.write(t)
            o.commit()
        print(json.dumps({k: v for k, v in vars(st).items() if k != "records"}), file=out)
        return 0
    import pyarrow as pa

    from urlfilter.timing import report_columns, summary, timing

    o = run.output(args.output or "-", views={"lines": _select(TIMING_LINE)})
    bl = _load_blacklist(args)
    progress = clikit.progress_wanted(args.progress, o.stdout, run.quiet)
    try:
        df, totals = timing(args.traces, bl, bpf=args.bpf,
                            t_proc_ns=None if args.t_proc_us is None else args.t_proc_us * 1000,
                            progress=progress, with_totals=True)
    except KeyboardInterrupt as e:
        part = getattr(e, "partial", None)     # the connections so far: OUT.partial.EXT
        if part is not None and len(part) and not o.stdout:
            o.write(pa.Table.from_pandas(part, preserve_index=False))
        raise
    _report_inputs(run, totals, len(args.traces))
    if not (args.json and o.stdout):
        o.write(pa.Table.from_pandas(report_columns(df, t_proc_given=args.t_proc_us is not None,
                                                    measured=args.measured), preserve_index=False))
    o.commit()
    if args.plots:
        from urlfilter.plot import margin_cdf, save_figures, timing_figures

        figs = timing_figures(df)
        figs["margin_cdf"] = margin_cdf(df).figure
        for p in save_figures(figs, args.plots):
            run.note(f"wrote {p}")
    s = summary(df)
    if args.json:
        print(json.dumps(s), file=out)
    elif not run.quiet:
        how = "given" if args.t_proc_us is not None else "measured"
        print(f"{s['won']} of {s['with_handshake']} connections with a handshake won "
              f"({s['share_won']:.1%}, {how} T_proc median {s['t_proc_us_p50']:.2f} us); "
              f"{s['connections'] - s['with_handshake']} without a handshake", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
