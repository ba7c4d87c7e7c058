"""Shared pieces of the command-line contract tests (docs/CLI.md): inputs, the tools, checks."""
from __future__ import annotations

import os
import pathlib
import struct
import subprocess
import sys

from tests import pcapbuild as pb

PY = sys.executable
REPO = pathlib.Path(__file__).resolve().parents[2]


def packet(sport: int, seq: int, payload: bytes, *, to_server=True) -> bytes:
    """Ethernet / IPv4 / TCP (checksums zero: the tools do not check them by default)."""
    src, dst = (b"\x0a\x00\x00\x01", b"\x0a\x00\x00\x02") if to_server else \
        (b"\x0a\x00\x00\x02", b"\x0a\x00\x00\x01")
    sp, dp = (sport, 80) if to_server else (80, sport)
    tcp = struct.pack("!HHIIBBHHH", sp, dp, seq, 1, 5 << 4, 0x18, 65535, 0, 0)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), 0, 0, 64, 6, 0,
                     src, dst)
    eth = b"\x00\x11\x22\x33\x44\x55" + b"\x66\x77\x88\x99\xaa\xbb" + b"\x08\x00"
    return eth + ip + tcp + payload


def transactions(n: int, *, pad: int = 0, step_ns: int = 10_000_000, t0: int = 10**18):
    """(ts_ns, frame) of n GET/200 pairs, 1 ms apart inside a pair, step_ns between pairs."""
    out = []
    for i in range(n):
        sport = 1024 + i % 60000
        uri = f"/item/{i}" + ("?" + "p" * pad if pad else "")
        req = (f"GET {uri} HTTP/1.1\r\nHost: example.org\r\nUser-Agent: contract\r\n\r\n").encode()
        resp = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
        t = t0 + i * step_ns
        out.append((t, packet(sport, 1, req)))
        out.append((t + 1_000_000, packet(sport, 1, resp, to_server=False)))
    return out


def good_pcap(n: int = 40) -> bytes:
    return pb.pcap(transactions(n))


def truncated(data: bytes) -> bytes:
    """Cut in the middle of the last packet record (as `head -c` does)."""
    return data[:-7]


def flipped_header(data: bytes) -> bytes:
    """A classic pcap with the caplen of its 5th record made impossible (flipped bits)."""
    d = bytearray(data)
    off = 24
    for _ in range(4):
        caplen = struct.unpack_from("<I", d, off + 8)[0]
        off += 16 + caplen
    d[off + 8: off + 12] = bytes(b ^ 0xFF for b in d[off + 8: off + 12])
    return bytes(d)


def make_db(path: pathlib.Path) -> pathlib.Path:
    from urlfilter.store import UrlManager

    m = UrlManager(path)
    m.add("example.org/item/3", "test")
    m.load_tree()
    m.save_snapshot()
    m.close()
    return path


def run(args, *, timeout=300, env=None, **kw) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e.pop("WEBTAP_DEBUG", None)
    e.update(env or {})
    return subprocess.run([PY, "-m", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=e, cwd=kw.pop("cwd", None), **kw)


def error_lines(stderr: str) -> list[str]:
    """The stderr lines that report an error, argparse's usage block aside."""
    lines = stderr.splitlines()
    out = []
    in_usage = False
    for line in lines:
        if line.startswith("usage:"):
            in_usage = True
            continue
        if in_usage and line.startswith(" "):
            continue
        in_usage = False
        if line.strip():
            out.append(line)
    return [x for x in out if ": error: " in x or "Error" in x or "Traceback" in x]


def temporaries(folder: pathlib.Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp")
                  or ".partial." in p.name)
