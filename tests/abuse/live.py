"""Real peers for the abuse analytics' live tests (issue 34): a server namespace running Debian's
nginx, several client namespaces (one address each, so that nginx's $binary_remote_addr and the
analytics see distinct clients), joined by a Linux bridge in a bridge namespace; tcpdump captures
on the server's interface.

    client ns wacN<tag>  a0 10.233.X.(10+N) ──┐
    server ns was<tag>   s0 10.233.X.2     ───┼── br0 (bridge ns wab<tag>)
                                              ┘

Every name carries a unique tag; close() deletes the namespaces (their interfaces go with them) and
stops every process started here, from a `finally`, so nothing is left behind when a test fails.
Only addresses inside these namespaces are ever targeted.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PEERS = str(HERE / "peers.py")


def _sh(*args, check=True, timeout=20):
    return subprocess.run(list(args), check=check, timeout=timeout, capture_output=True, text=True)


def missing(*tools) -> str | None:
    """None when this machine can run the live tests, else why not (the skip reason)."""
    if os.geteuid() != 0:
        return "needs root"
    for tool in ("ip", "bridge", "nginx", "tcpdump") + tools:
        if shutil.which(tool) is None:
            return f"{tool} not installed (make sysdeps)"
    return None


class Lab:
    def __init__(self, clients: int, work: Path):
        t = f"{os.getpid() % 100000:05d}{int(time.time() * 1000) % 100:02d}"
        self.tag = t
        self.net = 10 + int(t) % 240
        self.server_ip = f"10.233.{self.net}.2"
        self.client_ips = [f"10.233.{self.net}.{10 + i}" for i in range(clients)]
        self.ns_s = f"was{t}"
        self.ns_b = f"wab{t}"
        self.ns_c = [f"wac{i}{t}" for i in range(clients)]
        self.work = Path(work)
        self._made: list[str] = []
        self._procs: list[subprocess.Popen] = []

    def in_server(self) -> list[str]:
        return ["ip", "netns", "exec", self.ns_s]

    def in_client(self, i: int) -> list[str]:
        return ["ip", "netns", "exec", self.ns_c[i]]

    def build(self) -> "Lab":
        for n in [self.ns_b, self.ns_s] + self.ns_c:
            _sh("ip", "netns", "add", n)
            self._made.append(n)
        t = self.tag
        b = ["ip", "netns", "exec", self.ns_b]
        _sh(*b, "ip", "link", "add", "br0", "type", "bridge")
        ends = [(self.ns_s, "s0", f"hs{t}", self.server_ip)]
        ends += [(ns, "a0", f"h{i}x{t}", ip) for i, (ns, ip) in enumerate(zip(self.ns_c, self.client_ips))]
        for ns, inner, outer, ip in ends:
            _sh("ip", "link", "add", inner, "netns", ns, "type", "veth", "peer", "name", outer,
                "netns", self.ns_b)
            _sh(*b, "ip", "link", "set", outer, "master", "br0", "up")
            _sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{ip}/24", "dev", inner)
            _sh("ip", "netns", "exec", ns, "ip", "link", "set", inner, "up")
            _sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
            # wire-sized segments in the capture (no 64 KB GSO super-segments on the veth)
            _sh("ip", "netns", "exec", ns, "ip", "link", "set", "dev", inner, "gso_max_segs", "1",
                check=False)
        _sh(*b, "ip", "link", "set", "br0", "up")
        return self

    def start(self, cmd, **kw) -> subprocess.Popen:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
        self._procs.append(p)
        return p

    def nginx(self, conf: str) -> None:
        """nginx in the server namespace with `conf` (an http{} body; "{d}" in it is replaced by
        the work folder, "{ip}" by the server address); returns once every `listen` port
        accepts."""
        d = self.work
        for sub in ("www", "tmp"):
            (d / sub).mkdir(exist_ok=True)
        (d / "www" / "r").write_text("ok\n")
        (d / "www" / "big").write_bytes(bytes(range(256)) * 4096)      # 1 MiB for slow readers
        (d / "www" / "mid").write_bytes(bytes(range(256)) * 800)       # 200 KiB for normal ones
        body = conf.replace("{d}", str(d)).replace("{ip}", self.server_ip)
        (d / "nginx.conf").write_text(f"""
user root;
worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log info;
events {{ worker_connections 4096; }}
http {{
    access_log {d}/access.log;
    client_body_temp_path {d}/tmp/body; proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fcgi; uwsgi_temp_path {d}/tmp/uwsgi; scgi_temp_path {d}/tmp/scgi;
    types {{ }}
    default_type application/octet-stream;
    root {d}/www;
{body}
}}
""")
        self.start(self.in_server() + ["nginx", "-p", str(d), "-e", str(d / "error.log"),
                                       "-c", str(d / "nginx.conf")])
        for port in sorted(set(int(p) for p in re.findall(r"listen\s+[^:;]+:(\d+)", body))):
            self.wait_port(port)

    def wait_port(self, port: int, timeout=15.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            r = _sh(*self.in_server(), "ss", "-Hltn", f"sport = :{port}", check=False)
            if r.stdout.strip():
                return
            time.sleep(0.05)
        raise RuntimeError(f"nginx not listening on {port}: {(self.work / 'error.log').read_text()[-2000:]}")

    def tcpdump(self, pcap: Path) -> subprocess.Popen:
        p = self.start(self.in_server() + ["tcpdump", "-i", "s0", "--immediate-mode", "-B", "65536",
                                           "-U", "-s", "0", "-n", "-w", str(pcap), "tcp"])
        line = p.stderr.readline()
        if "listening on" not in line:
            raise RuntimeError(f"tcpdump did not start: {line}")
        return p

    @staticmethod
    def stop_tcpdump(p: subprocess.Popen) -> int:
        """Stop tcpdump; the number of packets it says the kernel dropped."""
        time.sleep(0.3)                       # the last ACKs and FINs
        p.send_signal(signal.SIGTERM)
        err = p.communicate(timeout=20)[1]
        m = re.search(r"(\d+) packets? dropped by kernel", err)
        if m is None:
            raise RuntimeError(f"tcpdump gave no statistics: {err[-500:]}")
        return int(m.group(1))

    def peer(self, i: int, *args) -> subprocess.Popen:
        """tests/abuse/peers.py in client namespace i."""
        return self.start(self.in_client(i) + [sys.executable, PEERS, *map(str, args)])

    def close(self) -> None:
        for p in reversed(self._procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.communicate(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.communicate(timeout=5)
        self._procs.clear()
        for n in reversed(self._made):
            _sh("ip", "netns", "del", n, check=False)
        self._made.clear()

    def __enter__(self):
        try:
            return self.build()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc):
        self.close()
