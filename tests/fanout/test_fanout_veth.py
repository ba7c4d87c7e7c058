"""Live capture through the kernel's fanout (httpanalyzer.fanout, ext/afpacket.pyx), for real:
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


def replay(tmp_path, consumers: int, mode: str):
    """Replay TRACE through a fresh veth; returns (records DataFrame, capture report, frames sent)."""
    from tests.fanout.replay import veth_namespace

    tag = f"{os.getpid() % 100000}{consumers}{mode[0]}"
    out = tmp_path / f"fan{consumers}{mode}"
    with veth_namespace(tag) as (ns, tx, rx):
        from tests.fanout.replay import frames_of

        _, offsets, skipped = frames_of(str(TRACE))
        assert skipped == 0
        expected = len(offsets) - 1
        cap = _run_in(ns, "capture", rx, consumers, mode, expected, out, GC)
        line = cap.stdout.readline()            # the group is up: every ring reads
        if line.strip() != "ready":
            cap.kill()
            raise AssertionError(f"capture did not start: {line!r} {cap.stderr.read()}")
        snd = _run_in(ns, "send", tx, TRACE, PPS)
        so, se = snd.communicate(timeout=600)
        assert snd.returncode == 0, se
        sent, failed = (int(x) for x in so.split()[1::2])
        assert (sent, failed) == (expected, 0), so
        try:
            co, ce = cap.communicate(timeout=600)   # ends by itself once `expected` were read
        except subprocess.TimeoutExpired:
            cap.kill()
            raise AssertionError(f"the consumers did not receive the {expected} frames sent: "
                                 f"{cap.communicate()[1][-2000:]}")
        assert cap.returncode == 0, ce
    import pyarrow as pa

    from httpanalyzer.records import to_pandas

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
