"""Captures of encrypted web traffic with their session keys (issue 33): the truth generator.

    python -m tests.tlsx.gen_truth OUTDIR [SCENARIO ...]

Real servers and clients in network namespaces (tests/urlfilter/netns.py: client and server
namespaces joined by a bridge; nothing outside the namespaces is contacted):

* server namespace: nginx (Debian's, `make sysdeps`) on 443 (HTTP/1.1) and 8443 (h2), TLS 1.2
  (ECDHE-ECDSA-AES128-GCM-SHA256) and TLS 1.3 (TLS_AES_128_GCM_SHA256), a self-signed P-256
  certificate made here, session cache and tickets on (resumption), keep-alive up to 1000
  requests; static files of 300 B, 5 KB and 40 KB (several 16 KB records); `/d?ms=M&size=N`
  proxied to a tiny Python upstream that sleeps M ms before it answers N bytes (the kernel here
  has no netem: the server is late on purpose). Access log with $msec, $connection,
  $connection_requests and $request_time (the second source of the truth's counts).
* client namespace: curl (HTTP/1.1 and h2, SSLKEYLOGFILE) and nghttp from nghttp2-client for
  concurrent h2 streams; Debian 12's nghttp does not write SSLKEYLOGFILE, so a preload shim
  (SSL_CTX_new + SSL_CTX_set_keylog_callback, compiled here with gcc) writes its keys.
* tcpdump on the client's interface writes OUTDIR/SCENARIO.pcap; keys in OUTDIR/SCENARIO.keys,
  nginx's access log lines of the scenario in OUTDIR/SCENARIO.access.log.

Scenarios (SCENARIOS): h1_tls12, h1_tls13 (one keep-alive connection of many requests each),
h1_resume (new connection per request, TLS 1.2 then TLS 1.3, resumed by curl's session cache),
h2_curl (sequential h2 requests on one TLS 1.3 connection), h2_nghttp (concurrent streams),
h1_suites (one connection each with TLS 1.2 AES-256-GCM-SHA384 and ChaCha20-Poly1305, TLS 1.3
AES-256-GCM-SHA384 and ChaCha20-Poly1305), h1_cbc (a TLS 1.2 CBC suite the truth does not open).
Each capture is a few hundred KB. Prints one JSON line per scenario (path, packets, bytes).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "urlfilter"))
from netns import Topology, can_build  # noqa: E402

HOST = "www.test"
SIZES = {"s.txt": 300, "m.bin": 5000, "l.bin": 40000}
# one request list per HTTP/1.1 scenario: small, medium, large (several records), delayed small,
# delayed large; the delays are what make a response time worth measuring
H1_PATHS = (["/s.txt", "/m.bin", "/l.bin", "/d?ms=40&size=500", "/d?ms=15&size=30000"] * 5
            + ["/s.txt"] * 3)
# nghttp fetches each distinct URI once: a query string makes every request its own
H2_PATHS = [p + ("&" if "?" in p else "?") + f"i={i}" for i, p in enumerate(
    ["/s.txt", "/m.bin", "/l.bin", "/d?ms=30&size=800", "/d?ms=10&size=20000"] * 3)]
SCENARIOS = ("h1_tls12", "h1_tls13", "h1_resume", "h2_curl", "h2_nghttp", "h1_suites", "h1_cbc")

#: h1_suites: one keep-alive connection per AEAD suite the truth opens besides AES-128-GCM
#: (curl offers that suite only; the server prefers AES-128-GCM when a client offers it, so the
#: other scenarios keep it)
SUITES = ((("--tlsv1.2", "--tls-max", "1.2", "--ciphers", "ECDHE-ECDSA-AES256-GCM-SHA384")),
          (("--tlsv1.2", "--tls-max", "1.2", "--ciphers", "ECDHE-ECDSA-CHACHA20-POLY1305")),
          (("--tlsv1.3", "--tls13-ciphers", "TLS_AES_256_GCM_SHA384")),
          (("--tlsv1.3", "--tls13-ciphers", "TLS_CHACHA20_POLY1305_SHA256")))

UPSTREAM = r'''
import sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse, parse_qs
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def do_GET(self):
        q = parse_qs(urlparse(self.path).query)
        time.sleep(int(q.get("ms", ["0"])[0]) / 1000)
        body = b"x" * int(q.get("size", ["100"])[0])
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
s = ThreadingHTTPServer(("127.0.0.1", 8081), H)
print("ready", flush=True)
s.serve_forever()
'''

SHIM = r'''
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <openssl/ssl.h>
static void keylog(const SSL *s, const char *line) {
    (void)s;
    const char *f = getenv("SSLKEYLOGFILE");
    FILE *fp = f ? fopen(f, "a") : NULL;
    if (fp) { fprintf(fp, "%s\n", line); fclose(fp); }
}
SSL_CTX *SSL_CTX_new(const SSL_METHOD *m) {
    static SSL_CTX *(*real)(const SSL_METHOD *);
    if (!real) real = (SSL_CTX *(*)(const SSL_METHOD *))dlsym(RTLD_NEXT, "SSL_CTX_new");
    SSL_CTX *c = real(m);
    if (c) SSL_CTX_set_keylog_callback(c, keylog);
    return c;
}
'''

NGINX_CONF = """
user root;
worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 64; }}
http {{
    log_format tx '$msec $connection $connection_requests $request_time $ssl_protocol '
                  '$ssl_session_reused $server_protocol $status $body_bytes_sent "$request"';
    access_log {d}/access.log tx;
    client_body_temp_path {d}/tmp/body; proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fcgi; uwsgi_temp_path {d}/tmp/uwsgi; scgi_temp_path {d}/tmp/scgi;
    types {{ }}
    default_type application/octet-stream;
    keepalive_requests 1000;
    keepalive_timeout 60s;
    ssl_certificate {d}/cert.pem;
    ssl_certificate_key {d}/key.pem;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_ciphers ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-SHA256;
    ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256;
    ssl_prefer_server_ciphers on;
    ssl_session_cache shared:S:1m;
    ssl_session_tickets on;
    server {{
        listen {ip}:443 ssl;
        listen {ip}:8443 ssl http2;
        server_name {host};
        root {d}/www;
        location /d {{ proxy_pass http://127.0.0.1:8081; proxy_buffering off; }}
    }}
}}
"""


def _run(cmd, timeout=60, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} -> {r.returncode}: {r.stderr[-2000:]}")
    return r


def missing() -> str | None:
    """None when this machine can generate the captures, else what is missing."""
    why = can_build()
    if why:
        return why
    for tool in ("nginx", "curl", "nghttp", "tcpdump", "gcc"):
        if shutil.which(tool) is None:
            return f"{tool} not installed (make sysdeps)"
    return None


def _make_cert(d: Path) -> None:
    sys.path.insert(0, str(HERE.parent / "urlfilter"))
    from netns_tls_peers import make_cert
    make_cert(str(d))


def _curl(t: Topology, paths, *opts, keys: Path, port=443):
    cmd = t.ns_exec("c") + ["curl", "-sSk", "--resolve", f"{HOST}:{port}:{t.server_ip}", *opts]
    for p in paths:
        cmd += [f"https://{HOST}:{port}{p}", "-o", "/dev/null"]
    env = dict(os.environ, SSLKEYLOGFILE=str(keys))
    _run(cmd, timeout=120, env=env)


def _nghttp(t: Topology, paths, keys: Path, shim: Path, port=8443):
    # -n: discard bodies; all URIs on one connection, as concurrent streams
    cmd = t.ns_exec("c") + ["nghttp", "-n", "-H", f":authority: {HOST}:{port}"]
    cmd += [f"https://{t.server_ip}:{port}{p}" for p in paths]
    env = dict(os.environ, SSLKEYLOGFILE=str(keys), LD_PRELOAD=str(shim))
    _run(cmd, timeout=120, env=env)


def _scenario(name: str, t: Topology, keys: Path, shim: Path) -> None:
    if name == "h1_tls12":
        _curl(t, H1_PATHS, "--http1.1", "--tlsv1.2", "--tls-max", "1.2", keys=keys)
    elif name == "h1_tls13":
        _curl(t, H1_PATHS, "--http1.1", "--tlsv1.3", keys=keys)
    elif name == "h1_resume":
        paths = ["/s.txt", "/d?ms=20&size=3000", "/l.bin", "/s.txt"]
        for v in (("--tlsv1.2", "--tls-max", "1.2"), ("--tlsv1.3",)):
            _curl(t, paths, "--http1.1", *v, "-H", "Connection: close", keys=keys)
    elif name == "h1_suites":
        for opts in SUITES:
            _curl(t, ["/s.txt", "/d?ms=10&size=20000", "/m.bin"], "--http1.1", *opts, keys=keys)
    elif name == "h1_cbc":
        # a CBC suite (TLS 1.2 ECDHE-ECDSA-AES128-SHA256): the truth leaves it out and says so
        _curl(t, ["/s.txt", "/m.bin"], "--http1.1", "--tlsv1.2", "--tls-max", "1.2",
              "--ciphers", "ECDHE-ECDSA-AES128-SHA256", keys=keys)
    elif name == "h2_curl":
        _curl(t, H2_PATHS, "--http2", "--tlsv1.3", keys=keys, port=8443)
    elif name == "h2_nghttp":
        _nghttp(t, H2_PATHS, keys, shim)
    else:
        raise ValueError(f"unknown scenario {name!r} (known: {', '.join(SCENARIOS)})")


def generate(out: Path, scenarios=SCENARIOS) -> list[dict]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="webtap-tlsx-"))
    for sub in ("www", "tmp"):
        (work / sub).mkdir()
    for f, n in SIZES.items():
        (work / "www" / f).write_bytes(bytes((i * 7 + 3) % 256 for i in range(n)))
    _make_cert(work)
    (work / "shim.c").write_text(SHIM)
    shim = work / "keylog_shim.so"
    _run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(shim), str(work / "shim.c"), "-ldl", "-lssl"])
    (work / "upstream.py").write_text(UPSTREAM)
    t = Topology()
    procs = []
    results = []
    try:
        t.build()
        # real packet sizes: no TSO/GSO super-segments of up to 64 KB (tcpdump on a veth sees
        # them whole; on a wire they would be MTU-sized packets), one MSS-sized segment each
        for side, dev in (("s", "s0"), ("c", "c0")):
            _run(t.ns_exec(side) + ["ip", "link", "set", "dev", dev, "gso_max_segs", "1"])
        (work / "nginx.conf").write_text(NGINX_CONF.format(d=work, ip=t.server_ip, host=HOST))
        up = subprocess.Popen(t.ns_exec("s") + [sys.executable, str(work / "upstream.py")],
                              stdout=subprocess.PIPE, text=True)
        procs.append(up)
        if up.stdout.readline().strip() != "ready":
            raise RuntimeError("upstream did not start")
        ng = subprocess.Popen(t.ns_exec("s") + ["nginx", "-p", str(work), "-e", str(work / "error.log"),
                                                "-c", str(work / "nginx.conf")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(ng)
        _wait_port(t, 443)
        _wait_port(t, 8443)
        log = work / "access.log"
        for name in scenarios:
            for attempt in range(3):
                dropped = _capture(name, t, out, log, shim, procs)
                if dropped == 0:
                    break
            else:
                raise RuntimeError(f"{name}: tcpdump dropped packets in three attempts")
            pcap = out / f"{name}.pcap"
            results.append({"scenario": name, "pcap": str(pcap), "bytes": pcap.stat().st_size,
                            "attempts": attempt + 1})
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=5)
        t.close()
        shutil.rmtree(work, ignore_errors=True)
    return results


def _capture(name: str, t: Topology, out: Path, log: Path, shim: Path, procs: list) -> int:
    """Run one scenario under tcpdump; the number of packets tcpdump says the kernel dropped
    (the truth needs every packet: a capture with a hole is made again)."""
    pcap, keys = out / f"{name}.pcap", out / f"{name}.keys"
    keys.unlink(missing_ok=True)
    before = log.stat().st_size if log.exists() else 0
    td = subprocess.Popen(t.ns_exec("c") + ["tcpdump", "-i", "c0", "--immediate-mode", "-B", "16384", "-U",
                                            "-s", "0", "-n", "-w", str(pcap), "tcp port 443 or tcp port 8443"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    procs.append(td)
    _wait_listening(td)
    _scenario(name, t, keys, shim)
    time.sleep(0.5)              # the last ACKs and FINs
    td.send_signal(signal.SIGTERM)
    err = td.communicate(timeout=20)[1]
    procs.remove(td)
    with open(log, "rb") as f:
        f.seek(before)
        (out / f"{name}.access.log").write_bytes(f.read())
    m = re.search(r"(\d+) packets? dropped by kernel", err)
    if m is None:
        raise RuntimeError(f"tcpdump gave no statistics: {err[-500:]}")
    return int(m.group(1))


def _wait_port(t: Topology, port: int, timeout=15.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        r = subprocess.run(t.ns_exec("s") + ["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True)
        if r.stdout.strip():
            return
        time.sleep(0.05)
    raise RuntimeError(f"nginx not listening on {port}")


def _wait_listening(td: subprocess.Popen, timeout=15.0) -> None:
    # tcpdump writes "listening on c0, ..." to stderr once the capture is open
    line = td.stderr.readline()
    if "listening on" not in line:
        raise RuntimeError(f"tcpdump did not start: {line}")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    why = missing()
    if why:
        print(f"gen_truth: error: {why}", file=sys.stderr)
        return 1
    for r in generate(Path(argv[0]), argv[1:] or SCENARIOS):
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
