"""Live capture through the kernel's fanout (httpanalyzer.fanout, ext/read/afpacket.pyx), for real:
a trace is replayed at a bounded rate into a veth pair inside a network namespace made for the
test, N consumer processes capture it on AF_PACKET TPACKET_V3 rings joined to one fanout group,
and their records must be exactly those of the offline one-process run of the same trace,
with the kernel's drop counters (PACKET_STATISTICS) read and required to be 0.

Deterministic on a loaded machine: every ring holds the whole replay (the kernel never has to
wait for a consumer), the capture ends when the consumers have processed as many packets as
were sent (an event, not a timer), and the rate is bounded. Timestamps and frame numbers are
the replay's, not the file's, so they are left out of the comparison; the GC window is made
longer than the trace so that pairing does not depend on the replay's pace.
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

import httpanalyzer

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces and AF_PACKET need root"),
]

REPO = pathlib.Path(__file__).resolve().parents[2]
SHARED = pathlib.Path(os.environ.get("WEBTAP_SHARED", REPO.parent / "shared"))
#: IPv4 and IPv6, 100 Continue, retransmissions, HTTP on other ports (PROVENANCE.md)
TRACE = SHARED / "traces" / "ndpi" / "1kxun.pcap"
GC = 1e9          # seconds (31 years; 1kxun.pcap spans 6): no eviction depends on the replay's pace
PPS = 2000        # frames a second: a bounded rate
#: what a live capture cannot reproduce: times (the replay's) and frame numbers (per consumer)
TIME_AND_FRAME = ("request_ts", "response_ts", "response_time", "request_frame", "response_frame")


def _records_key(df):
    cols = [c for c in df.columns if c not in TIME_AND_FRAME]
    return sorted(tuple(str(v) for v in row) for row in df[cols].itertuples(index=False)), cols


def _run_in(ns, *args, **kw):
    return subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-m", "tests.fanout.replay",
                             *map(str, args)], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def replay(tmp_path, consumers: int, mode: str, trace=None):
    """Replay `trace` (default TRACE) through a fresh veth; returns (records DataFrame, capture report, frames sent)."""
    from tests.fanout.replay import veth_namespace

    trace = TRACE if trace is None else trace
    tag = f"{os.getpid() % 100000}{consumers}{mode[0]}"
    out = tmp_path / f"fan{consumers}{mode}"
    with veth_namespace(tag) as (ns, tx, rx):
        from tests.fanout.replay import frames_of

        _, offsets, skipped = frames_of(str(trace))
        assert skipped == 0
        expected = len(offsets) - 1
        cap = _run_in(ns, "capture", rx, consumers, mode, expected, out, GC)
        line = cap.stdout.readline()            # the group is up: every ring reads
        if line.strip() != "ready":
            cap.kill()
            raise AssertionError(f"capture did not start: {line!r} {cap.stderr.read()}")
        snd = _run_in(ns, "send", tx, trace, PPS)
        so, se = snd.communicate(timeout=600)
        assert snd.returncode == 0, se
        sent, failed = (int(x) for x in so.split()[1:4:2])
        assert (sent, failed) == (expected, 0), so
        try:
            co, ce = cap.communicate(timeout=600)   # ends by itself once `expected` were read
        except subprocess.TimeoutExpired:
            cap.kill()
            raise AssertionError(f"the consumers did not receive the {expected} frames sent: "
                                 f"{cap.communicate()[1][-2000:]}")
        assert cap.returncode == 0, ce
    import pyarrow as pa

    from webtap.records.http import to_pandas

    with pa.memory_map(str(out) + ".arrow") as f:
        table = pa.ipc.open_file(f).read_all()
    report = json.loads(pathlib.Path(str(out) + ".json").read_text())
    return to_pandas(table), report, expected


@pytest.fixture(scope="module")
def offline():
    if not TRACE.exists():
        pytest.fail(f"shared trace missing: {TRACE}")
    return httpanalyzer.analyze(str(TRACE), consumers=0, gc_timeout=GC)


@pytest.mark.parametrize("consumers", [1, 2])
def test_fanout_hash_equals_one_process(tmp_path, offline, consumers):
    live, report, sent = replay(tmp_path, consumers, "hash")
    rows = report["balance"]["consumers"]
    assert len(rows) == consumers
    # the kernel's counters: every frame reached a ring, none was dropped
    assert sum(r["kernel_packets"] for r in rows) == sent, rows
    assert sum(r["kernel_drops"] for r in rows) == 0, rows
    assert report["packets"] == sent
    got, cols = _records_key(live)
    want, _ = _records_key(offline)
    if got != want:
        from collections import Counter

        only_live, only_off = Counter(got) - Counter(want), Counter(want) - Counter(got)
        raise AssertionError(f"{len(got)} live records, {len(want)} offline; columns {cols}\n"
                             f"live only: {list(only_live)[:3]}\noffline only: {list(only_off)[:3]}")
    if consumers > 1:
        assert all(r["messages"] > 0 for r in rows), rows    # the kernel did split the work
    print(f"\nfanout hash x{consumers}: {sent} frames, {len(got)} records equal; per consumer "
          + ", ".join(f"{r['packets']} packets / {r['messages']} messages / drops {r['kernel_drops']}"
                      for r in rows))


def _messages(trace):
    import numpy as np

    from webtap.capture import open_trace
    from webtap.dissect import dissect

    out = []
    with open_trace(str(trace), progress=False) as t:
        for b in t:
            out.append(dissect(b.packets, b.data).msgs.copy())
    return np.concatenate(out)


def test_fanout_eq3_is_the_papers_eq3(tmp_path, offline):
    """The kernel's classic-BPF program computes exactly the feeder's Eq. 3 (ext/run/feeder.pyx,
    an independent implementation in C over dissected messages): each consumer gets the HTTP
    messages whose Eq. 3 mod 2 is its number; on this trace the records equal one process's."""
    import numpy as np

    from httpanalyzer.feeder import hash_eq3

    live, report, sent = replay(tmp_path, 2, "eq3")
    rows = report["balance"]["consumers"]
    assert sum(r["kernel_packets"] for r in rows) == sent and sum(r["kernel_drops"] for r in rows) == 0
    want_split = np.bincount(hash_eq3(_messages(TRACE)) % 2, minlength=2).tolist()
    assert [r["messages"] for r in rows] == want_split
    got, _ = _records_key(live)
    want, _ = _records_key(offline)
    assert got == want
    print(f"\nfanout eq3 x2: messages per consumer {want_split} as Eq. 3 predicts; "
          f"{len(got)} records equal")


def _continue_trace(path, n=8):
    """n transactions with `100 Continue`, each request's ACK chosen so that the final
    response's SEQ (ACK + 25, the 1xx's length) carries into bit 8: Eq. 3 mod 2 of the final
    response then differs from its request's."""
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether

    from tests.pcapbuild import pcap

    pkts, t = [], 1_700_000_000 * 10**9
    cont = b"HTTP/1.1 100 Continue\r\n\r\n"
    for i in range(n):
        ack = 0x10000F0 + (i << 12)               # low byte 0xF0: + 25 carries
        cli, srv, cp = "10.0.0.1", "10.0.0.2", 40000 + i
        req = b"POST /up/%d HTTP/1.1\r\nHost: example.test\r\nExpect: 100-continue\r\n\r\n" % i
        fin = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
        for src, dst, sp, dp, seq, a, pl in (
                (cli, srv, cp, 80, 1000, ack, req),
                (srv, cli, 80, cp, ack, 1000 + len(req), cont),
                (srv, cli, 80, cp, ack + len(cont), 1000 + len(req), fin)):
            f = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src=src, dst=dst) / \
                TCP(sport=sp, dport=dp, seq=seq, ack=a, flags="PA") / pl
            pkts.append((t, bytes(f)))
            t += 1_000_000
    path.write_bytes(pcap(pkts))
    return path


@pytest.mark.parametrize("mode", ["eq3", "hash"])
def test_fanout_after_a_1xx(tmp_path, mode):
    """Why 'hash' is the default: after `100 Continue` the final response is keyed by the 1xx's
    SEQ + its length, which Eq. 3 of the request cannot predict and a stateless kernel program
    cannot remember (the offline feeder keeps a route table for it). With Eq. 3 such a final
    response goes to another consumer when the two keys hash apart, and the transaction comes
    out unpaired; the flow hash keeps a connection in one consumer, and the records equal one
    process's."""
    import numpy as np

    from httpanalyzer.feeder import hash_eq3

    trace = _continue_trace(tmp_path / "continue.pcap")
    msgs = _messages(trace)
    h = hash_eq3(msgs) % 2
    req, final = h[msgs["kind"] == 1], h[(msgs["kind"] == 2) & (msgs["status"] == 200)]
    apart = int((req != final).sum())
    assert apart == len(req) == 8                  # the case is built: every one hashes apart
    offline = httpanalyzer.analyze(str(trace), consumers=0, gc_timeout=GC)
    assert offline.interim.sum() == 8 and offline.after_interim.sum() == 8     # all paired
    live, report, sent = replay(tmp_path, 2, mode, trace)
    rows = report["balance"]["consumers"]
    assert sum(r["kernel_drops"] for r in rows) == 0 and sum(r["kernel_packets"] for r in rows) == sent
    got, _ = _records_key(live)
    want, _ = _records_key(offline)
    if mode == "hash":
        assert got == want
    else:
        # the final responses went to the other consumer: requests wait there in vain
        assert int(live.after_interim.sum()) == 0
        assert int((live.outcome == "response_only").sum()) == apart
        assert got != want


def test_cli_interface_with_consumers_uses_fanout(tmp_path):
    """`httpanalyzer -i IFACE --consumers 2 --summary`: the kernel's fanout carries it; Ctrl-C
    ends the capture and every transaction sent comes out paired."""
    import signal
    import time

    from tests.fanout.replay import veth_namespace

    offline = httpanalyzer.analyze(str(TRACE), consumers=0, gc_timeout=GC)
    out = tmp_path / "live.csv"
    with veth_namespace(f"{os.getpid() % 100000}c") as (ns, tx, rx):
        cli = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-m", "httpanalyzer.cli",
                                "-i", rx, "--consumers", "2", "--gc-timeout", str(GC), "-o", str(out),
                                "--summary", "--no-progress"], cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        # ready at its readiness line: printed once both consumers read their rings
        seen = []
        for line in cli.stderr:                 # ends (EOF) if the command ends
            seen.append(line)
            if f"httpanalyzer: listening on {rx}, 2 AF_PACKET fanout sockets" in line:
                break
        assert cli.poll() is None, "".join(seen) + cli.communicate()[1]
        snd = _run_in(ns, "send", tx, TRACE, PPS)
        so, se = snd.communicate(timeout=600)
        assert snd.returncode == 0, se
        time.sleep(1.0)            # the rings' blocks retire within 20 ms; the consumers read them
        cli.send_signal(signal.SIGINT)
        co, ce = cli.communicate(timeout=600)
    assert cli.returncode == 0, ce
    assert "Executor: fanout: 2 consumer processes, each reading its AF_PACKET ring" in co, co
    import pandas as pd

    live = pd.read_csv(out)
    assert int(live.matched.sum()) == int(offline.matched.sum())
