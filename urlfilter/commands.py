"""The `urlfilter` subcommands (import, add, list, remove, match, allow, rules, scan, run,
...): what urlfilter.cli's registry loads once the arguments are parsed, so that `urlfilter
--help` and a usage error never load the store, numpy or the compiled filter (start-up). Imports
at the top (issue 29): the store, the filter's passes, the live capture and the hit records
(pyarrow) come with this module; `urlfilter timing` (pandas) is urlfilter.timing_command."""
from __future__ import annotations

import json
import os
import sqlite3
import sys
import tempfile
import time

import pyarrow as pa

from urlfilter import canon
from urlfilter.analyzer import load_blacklist, policy_line, summary_line
from urlfilter.errors import InvalidUrl, StoreError, UrlFilterError
from urlfilter.importers import NotAList, import_path, sniff
from urlfilter.live import run_live
from urlfilter.policy import RuleError, allow_files, parse_rule, read_allow_file, read_rules_file
from urlfilter.scan import scan
from urlfilter.store import Period, UrlManager, default_db_path
from webtap import clikit
from webtap.capture import compile_filter
from webtap.errors import BpfError, CaptureError
from webtap.records.urlhit import RECORD_SCHEMA
from webtap.writers import empty_batch_of


def _db_path(args):
    return args.db or str(default_db_path())


def _existing_db(args) -> str:
    """The --db of a command that reads a store: it must exist (nothing is created)."""
    db = _db_path(args)
    if os.path.isdir(db):
        raise clikit.UsageError(f"--db is a directory, not a store, {db}")
    if not os.path.exists(db):
        raise clikit.RunError(f"no blacklist store (make one with `urlfilter --db {db} import "
                              f"LIST`), {db}")
    return db


def _open_manager(args, create: bool):
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
    try:
        fd, tmp = tempfile.mkstemp(prefix=".urlfilter-", dir=folder)
    except OSError as e:
        raise clikit.UsageError(f"cannot write the store's folder ({e.strerror}), {shown}") \
            from None
    os.close(fd)
    os.unlink(tmp)


def handle(args, run, plots=None) -> int:
    """A subcommand. plots: urlfilter.plot (matplotlib, pandas), from the registry with --plots."""
    run.quiet = bool(getattr(args, "quiet", False))
    if args.cmd in ("scan", "run"):
        return _filter_cmd(args, run, plots)

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
    for suffix in ("", ".tree", "-wal", "-shm", "-journal"):
        try:
            os.unlink(db + suffix)
        except FileNotFoundError:
            pass


def _importable(args, run) -> list:
    """The import paths that exist and look like text lists; one error line for each other;
    exit 1 (no store made or touched) when none is left."""
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
    out = sys.stdout
    if args.cmd == "import":

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
        return _delete_each(args.urls, mgr.delete, "the store", out, run)
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


def _delete_each(items, delete, where: str, out, run) -> int:
    """`delete` and `allow delete`: each item removed (a line each), or one error line per item
    not in `where`; 1 if any was not there."""
    rc = 0
    for u in items:
        if delete(u):
            print(f"deleted {u}", file=out)
        else:
            run.error(f"not in {where}, {u}")
            rc = 1
    return rc


def _policy_precheck(args, run):
    """Usage errors of `allow` / `rules` (before a store is opened), and `rules check`, which
    needs none: its exit code, or None to go on."""
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

        for p in args.items:
            if not os.path.exists(p):
                raise clikit.RunError(f"no such file or folder, {p}")
    return None


def _read_rules(path):
    """The rules of a rule file; one error line (FILE:LINE: reason) and exit 2 when bad."""
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
            def allow_delete(u):
                try:
                    return st.allow_delete(u)
                except InvalidUrl as e:
                    raise clikit.UsageError(f"not a URL ({e.reason}), {u}") from None
            return _delete_each(args.items, allow_delete, "the allow list", out, run)
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
    db = _existing_db(args)
    try:
        return load_blacklist(db)
    except ValueError as e:
        raise clikit.RunError(f"{e}") from None


def _check_filter(bpf) -> None:
    if bpf:

        try:
            compile_filter(bpf)
        except BpfError as e:
            raise clikit.UsageError(f"bad filter: {clikit.describe(e)}, -f {bpf!r}") from None


def _check_plots_dir(d) -> None:
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


def _filter_cmd(args, run, plots) -> int:
    """scan / run: the pass-by filter (urlfilter.scan, .live); timing: urlfilter.timing_command."""
    _check_filter(args.bpf)
    _check_plots_dir(getattr(args, "plots", None))
    out = sys.stdout
    if args.cmd == "scan":
        o = run.output(args.output or "-", views={"lines": _select(SCAN_LINE)})
        bl = _load_blacklist(args)

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
            for p in plots.save_figures(plots.scan_figures(res.table), args.plots):
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
                t = empty_batch_of(RECORD_SCHEMA.append(pa.field("reaction_ns", pa.int64())))
            o.write(t)
            o.commit()
        print(json.dumps({k: v for k, v in vars(st).items() if k != "records"}), file=out)
        return 0
    raise AssertionError(f"urlfilter.timing_command runs {args.cmd!r}")
