"""Helpers of the fanout tests: a network namespace with a veth pair, a bounded-rate sender of
a trace's frames, and the fanout capture, each run inside the namespace (`ip netns exec`).

    python -m tests.fanout.replay send IFACE TRACE PPS [LIMIT]    -> prints "sent N failed M seconds S"
    python -m tests.fanout.replay capture IFACE N MODE PACKETS OUT GC -> prints "ready", then
        (PACKETS 0: until SIGINT)
        writes OUT.arrow (the records) and OUT.json (summary, balance)
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager

import numpy as np


def _ip(*args, ns=None, check=True):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(args)
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


@contextmanager
def veth_namespace(tag: str):
    """A namespace holding both ends of a veth pair (tx -> rx), IPv6 off (no router
    solicitations or other packets of its own: the links carry only what is sent), MTU 65535
    (frames captured with segmentation offload pass). Yields (namespace, tx, rx)."""
    ns = f"wtfan{tag}"
    tx, rx = f"wft{tag}"[:15], f"wfr{tag}"[:15]
    _ip("ip", "netns", "del", ns, check=False)
    _ip("ip", "netns", "add", ns)
    try:
        for k in ("all", "default"):
            _ip("sysctl", "-q", "-w", f"net.ipv6.conf.{k}.disable_ipv6=1", ns=ns)
        _ip("ip", "link", "add", tx, "type", "veth", "peer", "name", rx, ns=ns)
        for dev in (tx, rx):
            _ip("ip", "link", "set", dev, "mtu", "65535", ns=ns)
            _ip("ip", "link", "set", dev, "up", ns=ns)
        yield ns, tx, rx
    finally:
        _ip("ip", "netns", "del", ns, check=False)


def frames_of(trace: str, max_len: int = 65535 + 14):
    """The trace's frames (captured bytes) in file order, as (bytes, offsets); frames longer
    than max_len (the veth cannot carry them) are left out and counted."""
    from webtap.capture import open_trace

    chunks, lens, skipped = [], [], 0
    with open_trace(trace, progress=False) as t:
        for b in t:
            p = b.packets
            keep = p["caplen"] <= max_len
            skipped += int((~keep).sum())
            for off, cap in zip(p["offset"][keep].tolist(), p["caplen"][keep].tolist()):
                chunks.append(bytes(b.data[off: off + cap]))
                lens.append(cap)
    offsets = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    return np.frombuffer(b"".join(chunks), dtype=np.uint8), offsets, skipped


def send(iface: str, trace: str, pps: float, chunk: int = 256, limit: int = 0) -> tuple[int, int]:
    """Send the trace's frames on iface (the first `limit`, 0: all), `chunk` at a time, paced
    to `pps` frames a second (0: as fast as this process can)."""
    from webtap.capture import open_live

    data, offsets, _ = frames_of(trace)
    n = len(offsets) - 1 if not limit else min(limit, len(offsets) - 1)
    sent = failed = 0
    with open_live(iface, promisc=False) as cap:
        t0 = time.monotonic()
        start = t0
        for i in range(0, n, chunk):
            j = min(n, i + chunk)
            s, f = cap.inject_many(data, offsets[i: j + 1])
            sent += s
            failed += f
            ahead = t0 + j / pps - time.monotonic() if pps else 0
            if ahead > 0:
                time.sleep(ahead)
    send.seconds = time.monotonic() - start
    return sent, failed


def capture(iface: str, consumers: int, mode: str, packets: int, out: str,
            gc_timeout: float) -> None:
    import pyarrow as pa

    import httpanalyzer

    s = httpanalyzer.Summary(detailed=False)
    fb: dict = {}
    batches = list(httpanalyzer.iter_record_batches(
        iface, live=True, consumers=consumers, capture="fanout", max_packets=packets or None,
        summary=s, feeder=fb, gc_timeout=gc_timeout,
        feeder_options={"mode": mode, "on_ready": lambda: print("ready", flush=True)}))
    table = pa.Table.from_batches(batches, schema=httpanalyzer.SCHEMA)
    with pa.OSFile(out + ".arrow", "wb") as f, pa.ipc.new_file(f, table.schema) as w:
        w.write_table(table)
    with open(out + ".json", "w") as f:
        json.dump({"packets": s.packets, "pairing": s.pairing, "balance": fb}, f)


def main(argv) -> int:
    if argv[0] == "send":
        sent, failed = send(argv[1], argv[2], float(argv[3]), limit=int(argv[4]) if len(argv) > 4 else 0)
        print(f"sent {sent} failed {failed} seconds {send.seconds:.3f}", flush=True)
    elif argv[0] == "capture":
        capture(argv[1], int(argv[2]), argv[3], int(argv[4]), argv[5], float(argv[6]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
