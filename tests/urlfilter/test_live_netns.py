"""THE REAL TEST of issue 8: the live filter cuts real TCP connections in network namespaces.

Topology in tests/urlfilter/netns.py (client, server, filter, bridge; tc mirred mirror to the
filter), peers in tests/urlfilter/netns_peers.py (Python http.server that waits before answering,
plain-socket client). `urlfilter run` captures on the mirror and injects on the same port.

* server delay DELAY_S: a blacklisted URL (port 80 and port 8080: the filter looks at every port) is
  torn down long before the answer (client sees FIN or RST, no body), and the server's answer
  never appears in the mirror (the RST was accepted); a clean URL gets its body; a URL added to
  the store while the filter runs is cut once the filter has reloaded.
* server delay 0: the answer overtakes the filter's FIN. The timing report, fed with a trace
  captured at the filter by tcpdump and the T_proc the live filter measured per connection
  (capture -> injection), must agree with what each client actually saw.

Everything runs under timeouts; the namespaces are removed in a `finally` even on failure.
"""
from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from netns import Topology, can_build  # noqa: E402

PY = sys.executable
PEERS = str(HERE / "netns_peers.py")
URLFILTER = [PY, "-m", "urlfilter.cli"]

why = can_build()
pytestmark = pytest.mark.skipif(why is not None, reason=why or "")


N_RACES = 16
MAX_RACES = 64
SLACK_NS = 100_000     # capture timestamps (us in tcpdump's pcap) and injection jitter
#: The delayed server's wait before it answers. The filter must cut a blacklisted connection
#: within it: its reaction (capture -> injection) measured 0.2-60 ms with the machine loaded
#: (load average 13-25 on 2 cores, 2026-11-24), so 3 s is a margin of > 50x. The server stops
#: waiting when the connection is reset (netns_peers.py), so a cut connection costs the
#: reaction time, not DELAY_S; only the clean fetches wait it in full.
DELAY_S = 3.0


def _blacklist(tmp_path) -> str:
    db = str(tmp_path / "bl.db")
    subprocess.run(URLFILTER + ["--db", db, "add", "blocked.test/bad", "evil.test", "--category", "malware"],
                   check=True, timeout=60, capture_output=True)
    return db


def _start(cmd, **kw):
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _stop(p: subprocess.Popen, timeout=20):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
    try:
        return p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        return p.communicate(timeout=5)


def _fetch(t: Topology, port: int, path: str, host: str, timeout=DELAY_S + 30) -> dict:
    r = subprocess.run(t.ns_exec("c") + [PY, PEERS, "client", t.server_ip, str(port), path, host, str(timeout)],
                       capture_output=True, text=True, timeout=timeout + 10)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _servers(t: Topology, delay: float):
    procs = []
    for port in (80, 8080):
        p = _start(t.ns_exec("s") + [PY, PEERS, "server", t.server_ip, str(port), str(delay)])
        procs.append(p)
    for p in procs:
        assert p.stdout.readline().strip() == "ready"
    return procs


def _tcpdump(t: Topology, pcap: Path):
    """tcpdump on the filter's port, returned once it says it is listening."""
    # immediate mode: with TPACKET_V3 blocks, packets of the last second would otherwise still sit
    # in the kernel ring when tcpdump is stopped
    p = _start(t.ns_exec("f") + ["tcpdump", "-i", t.filter_if, "--immediate-mode", "-U", "-w", str(pcap), "tcp"])
    _wait_for(p, b"listening on")
    return p


def _wait_for(p: subprocess.Popen, what: bytes, timeout=20.0):
    t0 = time.monotonic()
    buf = b""
    fd = p.stderr.fileno()
    while what not in buf and time.monotonic() - t0 < timeout:
        assert p.poll() is None, p.communicate()
        if select.select([fd], [], [], 0.2)[0]:
            buf += os.read(fd, 4096)
    assert what in buf, f"{p.args}: no {what!r} on stderr within {timeout} s"


def _wait_in_pcap(pcap: Path, port: int, timeout=120.0):
    """Until tcpdump (immediate mode, -U: written as read) has written a FIN or RST of the
    connection from client port `port`, the last one of the test, instead of a fixed 0.5 s before
    stopping it. The timeout only bounds a failure."""
    expr = f"tcp port {port} and tcp[tcpflags] & (tcp-fin|tcp-rst) != 0"
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        r = subprocess.run(["tcpdump", "-nr", str(pcap), expr], capture_output=True, text=True, timeout=60)
        if r.stdout.strip():
            return
        time.sleep(0.05)
    raise AssertionError(f"no FIN/RST of client port {port} in {pcap.name} within {timeout} s")


def _wait_reload(p: subprocess.Popen, timeout=120.0):
    """Until the filter's status line (stderr, every reload_every = 1 s) counts a reload. The
    timeout only bounds a failure."""
    t0 = time.monotonic()
    buf = b""
    fd = p.stderr.fileno()
    while time.monotonic() - t0 < timeout:
        assert p.poll() is None, p.communicate()
        if select.select([fd], [], [], 0.2)[0]:
            buf += os.read(fd, 4096)
            counts = re.findall(rb"reloads (\d+)", buf)
            if counts and int(counts[-1]) >= 1:
                return
    raise AssertionError(f"the filter did not reload within {timeout} s: {buf[-300:]!r}")


def _row(rep: pd.DataFrame, port: int, pcap: Path) -> pd.Series:
    """The timing report's row of the connection from client port `port`, with a readable
    failure (the trace's packets of that port) when the trace at the filter lacks it."""
    if port not in rep.index:
        dump = subprocess.run(["tcpdump", "-nr", str(pcap), f"port {port}"], capture_output=True,
                              text=True, timeout=30).stdout
        raise AssertionError(f"client port {port} not in the timing report {list(rep.index)}; "
                             f"its packets in {pcap.name}:\n{dump}")
    return rep.loc[port]


def _filter(t: Topology, db: str, out: Path, duration: float):
    p = _start(t.ns_exec("f") + URLFILTER + ["run", "-i", t.filter_if, "--blacklist", db,
                                             "--duration", str(duration), "-o", str(out)])
    # ready once its readiness line is out (capture filtered, injector open, handlers set)
    _wait_for(p, b"urlfilter: listening on " + t.filter_if.encode())
    return p


def test_live_filter_cuts_blacklisted_connections(tmp_path):
    db = _blacklist(tmp_path)
    t = Topology()
    procs = []
    try:
        t.build()
        procs += _servers(t, delay=DELAY_S)
        tcpdump = None
        pcap = tmp_path / "mirror_delay.pcap"
        if shutil.which("tcpdump"):
            tcpdump = _tcpdump(t, pcap)
            procs.append(tcpdump)
        hits_csv = tmp_path / "hits.csv"
        flt = _filter(t, db, hits_csv, duration=60)
        procs.append(flt)

        bad = [_fetch(t, 80, "/bad/page?x=1", "blocked.test"), _fetch(t, 8080, "/", "www.evil.test"),
               _fetch(t, 80, "/bad", "BLOCKED.test:80")]
        good = [_fetch(t, 80, "/good", "blocked.test"), _fetch(t, 8080, "/x", "notevil.test")]
        # reload on store change: a URL added while the filter runs is cut from then on
        late = _fetch(t, 80, "/late", "added-later.test")
        subprocess.run(URLFILTER + ["--db", db, "add", "added-later.test/late", "--category", "x"],
                       check=True, timeout=60, capture_output=True)
        _wait_reload(flt)                            # the filter has re-read the store
        bad.append(_fetch(t, 80, "/late/1", "added-later.test"))
        good.append(late)
        out, err = _stop(flt)
        if tcpdump is not None:
            _wait_in_pcap(pcap, bad[-1]["client_port"])     # the last connection's end is written
            _stop(tcpdump)

        for r in bad:
            assert r["bytes"] == 0 and not r["body"], r
            assert r["end"] in ("eof", "reset"), r
            assert r["elapsed_s"] < DELAY_S, r      # torn down before the server would answer
        for r in good:
            assert r["body"] and r["end"] == "eof", r
            assert r["elapsed_s"] >= DELAY_S, r
        stats = json.loads(out.strip().splitlines()[-1])
        assert stats["hits"] == 4 and stats["injected"] == 8 and stats["inject_failed"] == 0, stats
        assert stats["reloads"] >= 1, stats
        hits = pd.read_csv(hits_csv)
        assert sorted(hits["src_port"]) == sorted(r["client_port"] for r in bad)
        assert set(hits["entry"]) == {"blocked.test/bad", "evil.test", "added-later.test/late"}
        # causal order, no wall-clock bound: the filter captured the GET after the client sent it
        # and injected the FIN before the client saw the end, so reaction < the client's elapsed
        elapsed = {r["client_port"]: r["elapsed_s"] for r in bad}
        for port, react in zip(hits["src_port"], hits["reaction_ns"]):
            assert 0 < react < elapsed[port] * 1e9 + SLACK_NS, (port, react, elapsed[port])

        if tcpdump is not None:
            # the server accepted the RST: its delayed answer never crossed the bridge
            from urlfilter.timing import timing
            rep = timing(str(pcap), db, verify_checksums=False)
            rep = rep.set_index("src_port")
            for r in bad:
                row = _row(rep, r["client_port"], pcap)
                assert row["handshake"]
                assert not row["response_seen"], rep
            for r in good:
                row = _row(rep, r["client_port"], pcap)
                assert row["response_seen"], (r, rep.to_dict("records"))
                # the server waited DELAY_S (a lower bound: load only lengthens it), less the
                # capture timestamps' slack
                assert row["server_wait_ns"] > DELAY_S * 1e9 - 50e6 and row["win"], row.to_dict()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=5)
        t.close()
    assert not any(n in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
                   for n in t.ns.values())


@pytest.mark.skipif(shutil.which("tcpdump") is None, reason="tcpdump not installed")
def test_without_delay_the_race_is_lost_and_the_report_says_so(tmp_path):
    db = _blacklist(tmp_path)
    t = Topology()
    procs = []
    try:
        t.build()
        procs += _servers(t, delay=0.0)
        pcap = tmp_path / "mirror_nodelay.pcap"
        tcpdump = _tcpdump(t, pcap)
        procs.append(tcpdump)
        hits_csv = tmp_path / "hits.csv"
        flt = _filter(t, db, hits_csv, duration=60)
        procs.append(flt)
        # Statistical: whether one race is lost depends on scheduling. Loss rates measured per
        # run of 16 races: 5, 10 and 15 of 16 (a CPU-bound process beside, load average ~18 on 2
        # cores, 2026-11-24). The test races at least N_RACES times and goes on until one race is
        # lost, up to MAX_RACES: were the loss rate as low as 0.1, all 64 would be won with
        # probability 0.9^64 = 1.2e-3; at the lowest measured 5/16, 0.69^64 = 5e-11.
        seen = []
        while len(seen) < N_RACES or (not any(r["bytes"] for r in seen) and len(seen) < MAX_RACES):
            seen.append(_fetch(t, 80, f"/bad/{len(seen)}", "blocked.test"))
        _stop(flt)
        _wait_in_pcap(pcap, seen[-1]["client_port"])
        _stop(tcpdump)
        hits = pd.read_csv(hits_csv)
        assert len(hits) == len(seen)
        from urlfilter.timing import summary, timing
        rep = timing(str(pcap), db, verify_checksums=False,
                     t_proc_ns=hits.rename(columns={"reaction_ns": "t_proc_ns"}))
        rep = rep.set_index("src_port")
        # the race is lost when any byte of the answer reached the client before the FIN
        lost = [r for r in seen if r["bytes"] > 0]
        assert lost, f"the filter won all {len(seen)} races against a server without delay: {seen}"
        checked = lost_checked = 0
        for r in seen:
            row = _row(rep, r["client_port"], pcap)
            assert row["handshake"], row
            if abs(row["margin_ns"]) < SLACK_NS:
                continue          # too close to call at this clock resolution
            if r["bytes"] > 0:
                # a lost race: the answer crossed the filter before its FIN/RST left, the report sees it
                assert row["response_seen"] and not row["win"], (r, row.to_dict())
                checked += 1
                lost_checked += 1
            elif row["response_seen"]:
                # a won race whose answer still crossed the bridge after the FIN: the report says won
                assert row["win"], (r, row.to_dict())
                checked += 1
        assert checked >= len(lost) // 2
        s = summary(rep.reset_index())
        assert s["lost"] >= lost_checked
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=5)
        t.close()
