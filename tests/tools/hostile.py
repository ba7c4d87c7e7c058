"""Hostile traffic traces (issue 10) and the peak RSS of the analyzer and the filter over them.

    python -m tests.tools.hostile OUT_DIR [--scale N] [--sizes 1 4]    # traces + RSS table

Each scenario is one packet per message, built from a template frame made with scapy; the
fields that vary (client address and port, the digits of the URL, timestamps) are then written
for all packets at once with NumPy, and the IPv4 and TCP checksums recomputed the same way, so
that millions of packets take seconds (per-packet scapy would take hours). Scenarios:

* ``unanswered``: requests on distinct connections that never get a response;
* ``orphans``: responses with no request;
* ``tuples``: request + response on a new 4-tuple each (millions of distinct 4-tuples);
* ``urls``: requests to distinct URLs (/u/<digits>), answered, over 1000 persistent connections;
* ``longhdr``: requests whose first packet carries a 100 KB header line (a TSO/GRO capture).

The trace time advances at ``rate`` messages per second, so a run spans many GC windows.
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ("unanswered", "orphans", "tuples", "urls", "longhdr")
T0 = 1_700_000_000


def _template(kind: str, long_len: int = 100_000) -> tuple[bytes, int, int]:
    """(frame, offset of the URL digits or -1, number of digits) for a message kind."""
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    digits = 7
    request = b"GET /u/" + b"0" * digits + b" HTTP/1.1\r\nHost: www.hostile.example\r\nUser-Agent: h/1\r\n\r\n"
    seq, ack = 1000, 2000
    if kind == "response":
        # answers the plain request: its seq is the request's ack, its ack the request's end
        payload = b"HTTP/1.1 200 OK\r\nServer: h\r\nContent-Length: 0\r\n\r\n"
        sport, dport, flags = 80, 40000, "PA"
        seq, ack = 2000, 1000 + len(request)
        pos = -1
    else:
        head = b"GET /u/"
        payload = head + b"0" * digits + b" HTTP/1.1\r\nHost: www.hostile.example\r\nUser-Agent: h/1\r\n"
        if kind == "long":
            payload += b"X-Long: " + b"a" * long_len + b"\r\n"
        payload += b"\r\n"
        sport, dport, flags = 40000, 80, "PA"
        pos = len(head)
    client, server = "10.0.0.1", "192.0.2.80"
    src, dst = (server, client) if kind == "response" else (client, server)
    pkt = (Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
           / IP(src=src, dst=dst, ttl=64, id=1)
           / TCP(sport=sport, dport=dport, seq=seq, ack=ack, flags=flags, window=65535)
           / Raw(payload[:1000]))
    frame = bytes(pkt)
    if len(payload) > 1000:
        # Larger than an IPv4 packet can say: total length 0, as in a TSO/GRO capture (the
        # checksums are recomputed by _frames anyway)
        frame = frame[:16] + b"\0\0" + frame[18:54] + payload
    return frame, (14 + 20 + 20 + pos) if pos >= 0 else -1, digits


def _fold(s: np.ndarray) -> np.ndarray:
    s = s.astype(np.uint64)
    for _ in range(3):
        s = (s & 0xFFFF) + (s >> 16)
    return (~s.astype(np.uint32) & 0xFFFF).astype(np.uint16)


def _frames(kind: str, n: int, start: int, url_base: int = 0, conns: int = 0) -> np.ndarray:
    """n frames of one kind, as an (n, len) uint8 array; message i uses connection start + i
    (client 10.x.y.z, port from 1024) and URL number url_base + i. conns > 0: only that many
    connections, each carrying request after request (seq/ack advance as on a persistent
    connection, so each response still answers its own request)."""
    frame, upos, nd = _template("long" if kind == "long" else kind)
    a = np.tile(np.frombuffer(frame, dtype=np.uint8), (n, 1))
    i = np.arange(n, dtype=np.int64)
    conn = start + (i % conns if conns else i)
    if conns:
        rnd = i // conns
        req_len, resp_len = len(_template("request")[0]) - 54, len(_template("response")[0]) - 54
        if kind == "response":
            seq, ack = 2000 + rnd * resp_len, 1000 + (rnd + 1) * req_len
        else:
            seq, ack = 1000 + rnd * req_len, 2000 + rnd * resp_len
        a[:, 38:42] = (seq & 0xFFFFFFFF).astype(">u4").view(np.uint8).reshape(n, 4)
        a[:, 42:46] = (ack & 0xFFFFFFFF).astype(">u4").view(np.uint8).reshape(n, 4)
    ip = (10 << 24) | ((conn // 60000) & 0xFFFFFF)
    port = 1024 + conn % 60000
    client_off, port_off = (26, 34) if kind != "response" else (30, 36)
    a[:, client_off:client_off + 4] = ip.astype(">u4").view(np.uint8).reshape(n, 4)
    a[:, port_off:port_off + 2] = port.astype(">u2").view(np.uint8).reshape(n, 2)
    if upos >= 0:
        num = url_base + np.arange(n, dtype=np.int64)
        for k in range(nd):
            a[:, upos + nd - 1 - k] = 48 + (num // 10 ** k) % 10
    # IPv4 header checksum (bytes 24-25), then the TCP checksum (bytes 50-51) over the
    # pseudo-header and the segment
    a[:, 24:26] = 0
    ipw = a[:, 14:34].view(">u2").astype(np.uint32).sum(axis=1)
    a[:, 24:26] = _fold(ipw).astype(">u2").view(np.uint8).reshape(n, 2)
    seg = a[:, 34:]
    a[:, 50:52] = 0
    if seg.shape[1] % 2:
        seg = np.concatenate([seg, np.zeros((n, 1), np.uint8)], axis=1)
    s = np.ascontiguousarray(seg).view(">u2").astype(np.uint64).sum(axis=1)
    s += a[:, 26:34].copy().view(">u2").astype(np.uint64).sum(axis=1)   # src + dst address
    s += 6 + (a.shape[1] - 34)
    a[:, 50:52] = _fold(s).astype(">u2").view(np.uint8).reshape(n, 2)
    return a


def write_trace(path: str | os.PathLike, scenario: str, n: int, rate: float = 100_000.0,
                start: int = 0) -> int:
    """Write one scenario of n messages as a pcap (microseconds); returns the packet count."""
    if scenario == "unanswered":
        parts = [("request", _frames("request", n, start))]
    elif scenario == "orphans":
        parts = [("response", _frames("response", n, start))]
    elif scenario in ("tuples", "urls"):
        # tuples: a new connection per transaction; urls: 1000 persistent connections, every
        # request to another URL
        half = n // 2
        conns = 1000 if scenario == "urls" else 0
        parts = [("request", _frames("request", half, start, url_base=start, conns=conns)),
                 ("response", _frames("response", half, start, conns=conns))]
    elif scenario == "longhdr":
        parts = [("long", _frames("long", n, start))]
    else:
        raise ValueError(scenario)
    with open(path, "wb") as f:
        f.write(np.array([(0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)],
                         dtype=[("m", "<u4"), ("a", "<u2"), ("b", "<u2"), ("z", "<i4"), ("s", "<u4"),
                                ("l", "<u4"), ("t", "<u4")]).tobytes())
        if len(parts) == 2:
            # interleave: request i, then its response half a step later (in packet order too)
            req, resp = parts[0][1], parts[1][1]
            m = len(req)
            t_us = (np.arange(m, dtype=np.int64) * (2e6 / rate)).astype(np.int64)
            blocks = [(req, t_us), (resp, t_us + int(1e6 / rate))]
            order_n = 2 * m
            rec_len = [16 + req.shape[1], 16 + resp.shape[1]]
            step = 4096
            for i in range(0, m, step):
                k = min(step, m - i)
                chunk = np.zeros((k, rec_len[0] + rec_len[1]), dtype=np.uint8)
                for which, (arr, ts) in enumerate(blocks):
                    base = 0 if which == 0 else rec_len[0]
                    hdr = np.zeros(k, dtype=[("s", "<u4"), ("u", "<u4"), ("c", "<u4"), ("w", "<u4")])
                    t = ts[i:i + k]
                    hdr["s"], hdr["u"] = T0 + t // 1_000_000, t % 1_000_000
                    hdr["c"] = hdr["w"] = arr.shape[1]
                    chunk[:, base:base + 16] = hdr.view(np.uint8).reshape(k, 16)
                    chunk[:, base + 16:base + rec_len[which]] = arr[i:i + k]
                f.write(chunk.tobytes())
            return order_n
        arr = parts[0][1]
        m = len(arr)
        t_us = (np.arange(m, dtype=np.int64) * (1e6 / rate)).astype(np.int64)
        step = 8192 if arr.shape[1] < 4096 else 64
        for i in range(0, m, step):
            k = min(step, m - i)
            chunk = np.zeros((k, 16 + arr.shape[1]), dtype=np.uint8)
            hdr = np.zeros(k, dtype=[("s", "<u4"), ("u", "<u4"), ("c", "<u4"), ("w", "<u4")])
            t = t_us[i:i + k]
            hdr["s"], hdr["u"] = T0 + t // 1_000_000, t % 1_000_000
            hdr["c"] = hdr["w"] = arr.shape[1]
            chunk[:, :16] = hdr.view(np.uint8).reshape(k, 16)
            chunk[:, 16:] = arr[i:i + k]
            f.write(chunk.tobytes())
        return m


def peak_rss_mb(module_args: list[str]) -> tuple[float, int]:
    """(peak RSS in MiB, exit code) of `python -m MODULE ARGS` in a child process.

    The peak is the child's own VmHWM, written at its exit: Linux carries a process's
    ru_maxrss across fork and exec (the parent's high-water mark, here the trace generator's,
    would be reported for the child), while VmHWM belongs to the address space exec created."""
    import tempfile

    with tempfile.NamedTemporaryFile(prefix="hwm", suffix=".txt", delete=False) as f:
        out = f.name
    try:
        p = subprocess.run([sys.executable, "-m", "tests.tools.hostile", "--measure", out, "--"]
                           + module_args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if p.returncode:
            sys.stderr.write(p.stderr.decode(errors="replace")[-3000:])
        text = Path(out).read_text()
        return (int(text) / 1024.0 if text else float("nan")), p.returncode
    finally:
        os.unlink(out)


def _measure(out: str, module_args: list[str]) -> None:
    """Run `python -m` module_args here and write this process's VmHWM (KiB) to `out` at exit."""
    import atexit
    import runpy

    def hwm():
        with open("/proc/self/status") as f:
            kb = next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:"))
        Path(out).write_text(str(kb))

    atexit.register(hwm)
    sys.argv = [module_args[0]] + module_args[1:]
    runpy.run_module(module_args[0], run_name="__main__", alter_sys=True)


def analyzer_cmd(trace, gc_timeout: float = 1.0, max_pending: int = 1 << 20) -> list[str]:
    return ["httpanalyzer.cli", str(trace), "--consumers", "0", "--gc-timeout", str(gc_timeout),
            "--max-pending", str(max_pending), "--no-progress"]


def filter_cmd(trace, blacklist) -> list[str]:
    return ["tests.tools.hostile", "--filter-probe", str(trace), str(blacklist)]


def _filter_probe(trace: str, blacklist: str) -> int:
    """The pass-by filter over a trace as it runs live (urlfilter.live): matcher + forging, only
    hits kept, no handshake table. Prints the counters."""
    from urlfilter.analyzer import UrlAnalyzer, load_blacklist
    from webtap.pipeline import Pipeline

    an = UrlAnalyzer(load_blacklist(blacklist), forge=True, verify_checksums=True,
                     on_forged=lambda *a: None, handshakes=False, keep_records=True, hits_only=True)
    totals = Pipeline([trace], [an], progress=False).run()
    print({k: v for k, v in an.counters.items() if v}, totals.source["packets"])
    return 0


def make_blacklist(path) -> None:
    """A tree snapshot of 10,000 URLs of the hostile host (none of which the traces request)."""
    from urlfilter.tree import UrlTree

    t = UrlTree()
    t.insert_many([f"www.hostile.example/blocked/{i}" for i in range(10_000)])
    t.save(path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.tools.hostile")
    ap.add_argument("out", nargs="?", default=str(ROOT / "build" / "hostile"))
    ap.add_argument("--scale", type=int, default=250_000, help="messages of the smaller trace")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 4], help="multiples of --scale")
    ap.add_argument("--scenarios", nargs="+", default=list(SCENARIOS))
    ap.add_argument("--rate", type=float, default=100_000.0, help="messages per second of trace time")
    ap.add_argument("--gc-timeout", type=float, default=1.0)
    ap.add_argument("--filter-probe", nargs=2, metavar=("TRACE", "BLACKLIST"), help=argparse.SUPPRESS)
    ap.add_argument("--measure", metavar="OUT", help=argparse.SUPPRESS)
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--measure"]:
        _measure(argv[1], argv[3:])
        return 0
    a = ap.parse_args(argv)
    if a.filter_probe:
        return _filter_probe(*a.filter_probe)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    bl = out / "bl.tree"
    make_blacklist(bl)
    print("| scenario | messages | trace MB | analyzer peak RSS MB | filter peak RSS MB |")
    print("|---|---:|---:|---:|---:|")
    for sc in a.scenarios:
        for mult in a.sizes:
            n = a.scale * mult if sc != "longhdr" else max(100, a.scale // 500) * mult
            p = out / f"{sc}-{mult}.pcap"
            write_trace(p, sc, n, rate=a.rate)
            ra, rc1 = peak_rss_mb(analyzer_cmd(p, a.gc_timeout))
            rf, rc2 = peak_rss_mb(filter_cmd(p, bl))
            print(f"| {sc} | {n} | {p.stat().st_size / 2**20:.0f} | {ra:.0f}{'' if rc1 == 0 else ' (exit %d)' % rc1} "
                  f"| {rf:.0f}{'' if rc2 == 0 else ' (exit %d)' % rc2} |", flush=True)
            p.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
