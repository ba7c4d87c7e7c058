"""`make demo`: the main job on a real trace, in one command.

1. Pick the trace: the largest shared capture with 100+ HTTP requests (by ../shared/traces/
   PROVENANCE.md), or, on a machine without ../shared, real traffic captured here: a real HTTP
   server and client talking over the loopback interface, captured with libpcap (needs root),
   written to a pcap file, and said so plainly.
2. httpanalyzer: pair requests and responses, print the summary table, write the records.
3. urlfilter: import a real blacklist (UT1 categories from ../shared/blacklists) into a SQLite
   store and match every GET URL of the trace against the compressed tree.

Outputs go to ./demo-out/ (or $WEBTAP_DEMO_OUT).
"""
from __future__ import annotations

import http.server
import os
import pathlib
import re
import socket
import threading
import time
import urllib.request

REPO = pathlib.Path(__file__).resolve().parent.parent
SHARED = pathlib.Path(os.environ.get("WEBTAP_SHARED", REPO.parent / "shared"))
OUT = pathlib.Path(os.environ.get("WEBTAP_DEMO_OUT", REPO / "demo-out"))

#: Blacklist categories the demo imports (a mix of URL and domain lists of real size).
DEMO_CATEGORIES = ("malware", "phishing", "publicite", "tracking", "cryptojacking", "shortener",
                   "adult")


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


def main() -> int:
    import httpanalyzer
    from httpanalyzer.stream import Summary

    OUT.mkdir(parents=True, exist_ok=True)
    trace = shared_trace()
    if trace is not None:
        print(f"trace: {trace} (the largest shared capture with 100+ HTTP requests)")
    else:
        print(f"no shared traces at {SHARED}: capturing real traffic on the loopback interface")
        trace = capture_loopback(OUT / "loopback-http.pcap")

    # -- httpanalyzer --------------------------------------------------------------------------
    summary = Summary()
    t0 = time.perf_counter()
    df = httpanalyzer.analyze(trace, summary=summary)
    dt = time.perf_counter() - t0
    print(summary.table())
    out_csv = OUT / "transactions.csv"
    df.to_csv(out_csv, index=False)
    print(f"{len(df)} records in {dt:.2f} s -> {out_csv}")

    # -- urlfilter -----------------------------------------------------------------------------
    from urlfilter.importers import import_path
    from urlfilter.store import UrlManager

    ut1 = SHARED / "blacklists" / "ut1"
    if not ut1.is_dir():
        print(f"no blacklists at {ut1}: URL filter part skipped")
        return 0
    db = OUT / "blacklist.db"
    for p in (db, pathlib.Path(str(db) + ".tree")):
        if p.exists():
            p.unlink()
    mgr = UrlManager(db)
    t0 = time.perf_counter()
    for cat in DEMO_CATEGORIES:
        if (ut1 / cat).is_dir():
            import_path(mgr.store, ut1 / cat, category=cat)
    tree = mgr.load_tree()
    print(f"\nblacklist: UT1 {', '.join(DEMO_CATEGORIES)} -> {len(tree)} entries, "
          f"{tree.bytes_per_url():.1f} bytes/URL, imported in {time.perf_counter() - t0:.1f} s")
    gets = df[(df["method"] == "GET") & df["host"].notna() & df["uri"].notna()]
    uri = gets["uri"].astype(str)
    absolute = uri.str.match(r"^[A-Za-z][A-Za-z0-9+.-]*://")
    urls = (gets["host"].astype(str) + uri).where(~absolute, uri).tolist()
    ids = mgr.match_many(urls) if urls else []
    hits = [(u, int(i)) for u, i in zip(urls, ids) if i > 0]
    cats = mgr.store.categories()
    print(f"GET URLs matched: {len(urls)}, blacklisted: {len(hits)}")
    by_cat: dict[str, int] = {}
    for u, i in hits:
        c = cats.get(tree.payload(i)[0], "?")
        by_cat[c] = by_cat.get(c, 0) + 1
    for c, n in sorted(by_cat.items(), key=lambda kv: -kv[1]):
        print(f"  {c:<16} {n}")
    for u, i in hits[:10]:
        print(f"  hit: {u[:90]}  (entry {tree.get(i)})")
    mgr.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
