"""`make demo`: the main job on a real trace, in one command, with the papers' figures.

    python demo/webtap_demo.py [--out DIR] [--trace TRACE]      (what `make demo` runs)

It sits above both packages (it uses httpanalyzer and urlfilter; the core, webtap/, imports
neither).

1. Pick the trace: $WEBTAP_DEMO_TRACE when set; else the largest shared capture with 100+ HTTP
   requests (by ../shared/traces/PROVENANCE.md); else, on a machine without ../shared, real
   traffic captured here: a real HTTP server and client talking over the loopback interface,
   captured with libpcap (needs root), written to a pcap file, and said so plainly.
2. httpanalyzer: pair requests and responses, print the summary table, write the records and
   the records' figures (response-time CCDF, codes and methods, URL length, slowest hosts and
   URIs, unmatched over time); the feeder's Eq. 1 vs Eq. 3 histogram and per-consumer balance
   (paper Fig. 8, Table 3); the comparison with tshark (paper Figs. 4-7) when tshark is there.
3. urlfilter: import a real blacklist (UT1 categories from ../shared/blacklists; without them a
   small blacklist of the loopback traffic's own URLs, printed) into a SQLite store, run the
   pass-by filter over the same trace (urlfilter.scan), print the hits by category; figures:
   hits, match time, the timing condition per connection (Fig. 11b), and the tree's compression
   and insert/match time distributions against the paper (its URL lists).
4. List every file written.

Outputs go to ./demo-output/ in the current directory (or --out DIR, or $WEBTAP_DEMO_OUT).
Smaller runs (the tests): WEBTAP_DEMO_TRACE (or --trace),
WEBTAP_DEMO_CATEGORIES (comma-separated UT1 categories), WEBTAP_DEMO_TREE_URLS (URLs for the
tree measurements), WEBTAP_DEMO_CONSUMERS (e.g. "2,4"), WEBTAP_DEMO_REQUESTS (loopback capture).
"""
from __future__ import annotations

import argparse
import http.server
import os
import pathlib
import socket
import threading
import time
import urllib.request

REPO = pathlib.Path(__file__).resolve().parent.parent
SHARED = pathlib.Path(os.environ.get("WEBTAP_SHARED", REPO.parent / "shared"))
OUT = pathlib.Path(os.environ.get("WEBTAP_DEMO_OUT", "demo-output"))

#: Blacklist categories the demo imports (a mix of URL and domain lists of real size).
DEMO_CATEGORIES = ("malware", "phishing", "publicite", "tracking", "cryptojacking", "shortener",
                   "adult")
#: URL lists of the tree measurements (compression, insert/match times vs the paper)
TREE_LISTS = ("ut1-history/phishing/urls.gz", "ut1-history/malware/urls.gz")
TREE_MISSES = "benign/umbrella-top-100k.gz"


def shared_trace() -> pathlib.Path | None:
    """The largest shared trace (in packets, per PROVENANCE.md) of real Ethernet traffic with at
    least 100 HTTP requests, if any."""
    prov = SHARED / "traces" / "PROVENANCE.md"
    if not prov.exists():
        return None
    best, best_n = None, -1
    for row in prov.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in row.split("|")]
        if (len(cells) > 7 and "/" in cells[1] and cells[5].isdigit() and cells[6].isdigit()
                and "ether" in cells[4] and int(cells[6]) >= 100):
            path = SHARED / "traces" / cells[1]
            if int(cells[5]) > best_n and path.exists():
                best, best_n = path, int(cells[5])
    return best


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):  # noqa: N802 (http.server's naming)
        if self.path.startswith("/missing"):
            body, code = b"not here\n", 404
        else:
            body, code = (b"x" * (64 + len(self.path) * 13)), 200
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def capture_loopback(path: pathlib.Path, requests: int = 300) -> pathlib.Path:
    """Real traffic: Python's http.server and urllib on 127.0.0.1, captured with libpcap."""
    from webtap.capture import open_live, write_pcap

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    port = srv.server_address[1]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    cap = open_live("lo", bpf=f"tcp port {port}", timeout_ms=50)
    batches, done = [], threading.Event()

    def reader():
        for b in cap:
            batches.append(b)
            if done.is_set():
                cap.stop()

    t = threading.Thread(target=reader)
    t.start()
    paths = ["/", "/index.html", "/static/app.js", "/missing/page", "/img/logo.png?v=2"]
    for i in range(requests):
        url = f"http://127.0.0.1:{port}{paths[i % len(paths)]}"
        req = urllib.request.Request(url, headers={"User-Agent": f"webtap-demo/{i % 3}"})
        try:
            urllib.request.urlopen(req, timeout=5).read()
        except OSError:
            pass
    time.sleep(0.3)
    done.set()
    # one more packet so the reader wakes up and sees `done`
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
    t.join(timeout=10)
    srv.shutdown()
    n = write_pcap(path, batches, cap.linktype)
    print(f"captured {n} packets of real loopback HTTP traffic ({requests} requests) -> {path}")
    return path


def _env_list(name: str, default):
    v = os.environ.get(name)
    return tuple(x.strip() for x in v.split(",") if x.strip()) if v else tuple(default)


def _section(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 72 - len(title)))


def main(argv=None) -> int:
    global OUT
    ap = argparse.ArgumentParser(prog="webtap_demo", description=__doc__.split("\n\n")[0],
                                 epilog="Outputs: --out DIR, else $WEBTAP_DEMO_OUT, else "
                                        "./demo-output/ in the current directory.")
    ap.add_argument("--out", metavar="DIR", help="where every file goes (default ./demo-output)")
    ap.add_argument("--trace", metavar="TRACE",
                    help="the trace (default $WEBTAP_DEMO_TRACE, else the largest shared capture "
                         "with 100+ HTTP requests, else loopback traffic captured here)")
    a = ap.parse_args(argv)
    if a.out:
        OUT = pathlib.Path(a.out)
    if a.trace:
        os.environ["WEBTAP_DEMO_TRACE"] = a.trace
    import httpanalyzer
    from httpanalyzer import analysis, balance
    from httpanalyzer import plot as hplot
    from httpanalyzer.stream import Summary

    OUT.mkdir(parents=True, exist_ok=True)
    written: list[pathlib.Path] = []
    loopback = False
    trace = os.environ.get("WEBTAP_DEMO_TRACE")
    if trace:
        trace = pathlib.Path(trace)
        print(f"trace: {trace} (WEBTAP_DEMO_TRACE)")
    else:
        trace = shared_trace()
        if trace is not None:
            print(f"trace: {trace} (the largest shared capture with 100+ HTTP requests)")
        else:
            print(f"no shared traces at {SHARED}: capturing real traffic on the loopback interface")
            trace = capture_loopback(OUT / "loopback-http.pcap",
                                     requests=int(os.environ.get("WEBTAP_DEMO_REQUESTS", "300")))
            written.append(trace)
            loopback = True

    # -- httpanalyzer --------------------------------------------------------------------------
    _section("httpanalyzer: HTTP transactions (first request packet <-> first response packet)")
    summary = Summary()
    t0 = time.perf_counter()
    df = httpanalyzer.analyze(trace, summary=summary)
    dt = time.perf_counter() - t0
    print(summary.table())
    out_csv = OUT / "transactions.csv"
    df.to_csv(out_csv, index=False)
    written.append(out_csv)
    s = analysis.summary(df)
    print(f"{len(df)} records in {dt:.2f} s -> {out_csv}; median response time "
          f"{s['response_time_median_s'] * 1e3:.1f} ms, slowest {s['response_time_max_s']:.3f} s")
    print("\nslowest hosts (s):\n" + analysis.slowest(df, by="host", top=5).round(4).to_string())
    written += hplot.save_figures(hplot.analysis_figures(df), OUT)

    _section("feeder: Eq. 1 vs Eq. 3 and the per-consumer balance (paper Fig. 8, Table 3)")
    msgs = balance.trace_messages(trace)
    ns = tuple(int(x) for x in _env_list("WEBTAP_DEMO_CONSUMERS", ("2", "4", "8")))
    hist = balance.hash_histograms(msgs, bins=32)
    tables = balance.balance_runs(trace, ns)
    print(balance.balance_summary(tables).round(2).to_string())
    written += hplot.save_figures(hplot.load_balance_figures(hist, tables), OUT)

    import shutil

    if shutil.which("tshark"):
        _section("accuracy: webtap vs the real tshark (paper Figs. 4-7)")
        from httpanalyzer.compare import compare_traces

        c = compare_traces([trace])
        k, ks, cd = c.counts("first_packet"), c.ks(), c.code_difference("first_packet")
        print(f"first-packet mode: {k['both']} transactions in both, {k['only_tshark']} only in "
              f"tshark, {k['only_webtap']} only in webtap, {c.unexplained} unexplained; KS of the "
              f"response times {ks['ks_first_packet']:.4f} (reassembly {ks['ks_reassembly']:.4f});"
              f" status-code counts differ by {cd['mean_pct']:.2f} % mean / {cd['median_pct']:.2f} %"
              f" median (paper: 2.6 % / 1.3 %)")
        figs = {f"tshark_{n}": f for n, f in c.figures().items()}
        written += hplot.save_figures(figs, OUT)
    else:
        print("\n(tshark not on PATH: the accuracy figures are skipped)")

    # -- urlfilter -----------------------------------------------------------------------------
    from urlfilter import plot as uplot
    from urlfilter.analyzer import load_blacklist, summary_line
    from urlfilter.importers import import_path
    from urlfilter.measure import blacklist_urls, hits_by_category, tree_measurements
    from urlfilter.scan import scan
    from urlfilter.store import UrlManager
    from urlfilter.timing import summary as timing_summary
    from urlfilter.timing import timing

    _section("urlfilter: the pass-by filter over the same trace")
    db = OUT / "blacklist.db"
    for p in (db, pathlib.Path(str(db) + ".tree")):
        if p.exists():
            p.unlink()
    mgr = UrlManager(db)
    ut1 = SHARED / "blacklists" / "ut1"
    t0 = time.perf_counter()
    if ut1.is_dir():
        cats = [c for c in _env_list("WEBTAP_DEMO_CATEGORIES", DEMO_CATEGORIES) if (ut1 / c).is_dir()]
        for cat in cats:
            import_path(mgr.store, ut1 / cat, category=cat)
        what = f"UT1 {', '.join(cats)}"
    else:
        # no shared blacklists: a small documented one, the loopback traffic's own error pages
        # and script (the URLs capture_loopback requests), so the filter has something to hit
        hosts = sorted(set(df["host"].dropna().astype(str)))
        entries = [f"{h}/missing" for h in hosts] + [f"{h}/static/app.js" for h in hosts]
        for e in entries:
            mgr.add(e, "demo")
        what = "a small demo blacklist: " + ", ".join(entries[:4]) + (" ..." if len(entries) > 4 else "")
    mgr.load_tree()
    mgr.save_snapshot()
    mgr.close()
    bl = load_blacklist(db)
    print(f"blacklist: {what} -> {len(bl.tree)} entries, {bl.tree.bytes_per_url():.1f} bytes/URL, "
          f"imported in {time.perf_counter() - t0:.1f} s")
    res = scan(trace, bl)
    written += [p for p in (db, pathlib.Path(str(db) + ".tree")) if p.exists()]
    recs = res.table.to_pandas()
    hits_csv = OUT / "urlfilter-gets.csv"
    recs.to_csv(hits_csv, index=False)
    written.append(hits_csv)
    c = res.counters
    print(summary_line(c))
    hbc = hits_by_category(recs)
    print(hbc.round(2).to_string() if len(hbc) else "no GET of this trace is on the blacklist")
    for u, e in recs.loc[recs["hit"], ["url", "entry"]].head(8).itertuples(index=False):
        print(f"  hit: {u[:90]}  (entry {e})")
    written += uplot.save_figures(uplot.scan_figures(recs), OUT)
    tm = timing(trace, bl)
    ts = timing_summary(tm)
    print(f"timing condition: the filter wins {ts['won']} of {ts['with_handshake']} connections "
          f"with a handshake (median margin {ts['margin_ms_p50']:.3f} ms, median T_proc "
          f"{ts['t_proc_us_p50']:.2f} us)")
    written += uplot.save_figures(uplot.timing_figures(tm), OUT)

    lists = [SHARED / "blacklists" / rel for rel in TREE_LISTS]
    lists = [p for p in lists if p.exists()]
    if lists:
        _section("urlfilter: the compressed tree against the paper")
        n = int(os.environ.get("WEBTAP_DEMO_TREE_URLS", "300000"))
        urls = blacklist_urls(lists, limit=n)
        benign = SHARED / "blacklists" / TREE_MISSES
        misses = [b"https://" + d + b"/index.html" for d in blacklist_urls(benign, limit=n // 3)] \
            if benign.exists() else []
        m = tree_measurements(urls, misses)
        print(f"{m.urls:,} URLs of {', '.join(str(p.relative_to(SHARED)) for p in lists)}:")
        print(m.table().round(2).to_string())
        written += uplot.save_figures({"tree_compression": uplot.compression(m),
                                       "tree_latency": uplot.latency(m)}, OUT)

    _section(f"files written to {OUT}")
    if loopback:
        print("(the trace is real HTTP traffic between http.server and urllib on 127.0.0.1, "
              "captured here with libpcap)")
    for p in written:
        print(f"  {p}  ({p.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
