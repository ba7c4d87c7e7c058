"""`webtap dissect -i IFACE` and `httpanalyzer -i IFACE`: the live command lines (README, docs/CLI.md)
on the loopback interface with a real HTTP server, ended by Ctrl-C (SIGINT). Needs root.

The client starts once the command holds a packet socket (its capture is open), keeps sending
requests until the command has exited (so Ctrl-C, and whatever batch the command waits for,
always meets traffic), and the command gets SIGINT once REQUESTS transactions are complete. Each wait has a backstop that
only bounds a failure (WAIT_S, far above the seconds this takes on a loaded machine)."""
from __future__ import annotations

import http.server
import os
import signal
import subprocess
import sys
import threading
import urllib.request

import pandas as pd
import pytest

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(os.geteuid() != 0, reason="live capture needs root"),
]

REQUESTS = 20
WAIT_S = 120.0


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass


def _live_run(tmp_path, cmd_of_port):
    (tmp_path / "x.txt").write_text("hello")
    handler = lambda *a, **kw: _Quiet(*a, directory=str(tmp_path), **kw)  # noqa: E731
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    port = srv.server_address[1]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    p = subprocess.Popen(cmd_of_port(port), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done = threading.Event()
    sent = []
    tick = threading.Event()
    for _ in range(int(WAIT_S / 0.05)):                # the capture is open: a packet socket
        if _has_packet_socket(p.pid) or p.poll() is not None:
            break
        tick.wait(0.05)

    def client():
        i = 0
        while p.poll() is None and i < 100_000:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/x.txt?i={i}", timeout=WAIT_S).read()
            sent.append(i)
            if i + 1 == REQUESTS:
                done.set()
            i += 1

    t = threading.Thread(target=client, daemon=True)
    t.start()
    try:
        assert done.wait(WAIT_S), "the client could not complete its requests"
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=WAIT_S)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
        srv.shutdown()
    return p.returncode, out, err, port


_SETFILTER_RACE = pytest.mark.xfail(strict=False, reason=(
    "open defect: the client starts when the command holds a packet socket, but libpcap attaches "
    "the -f filter after that and flushes the ring when it does, so the first requests can be "
    "lost; on this machine all 20 were, and the run recorded 0 packets. The command needs a "
    "readiness signal (tcpdump's 'listening on' line) for the test to wait on"))


@_SETFILTER_RACE
def test_webtap_dissect_live(tmp_path):
    out_csv = tmp_path / "live.csv"
    rc, out, err, port = _live_run(tmp_path, lambda port: [
        sys.executable, "-m", "webtap.cli", "dissect", "-i", "lo", "-f", f"tcp port {port}",
        "-o", str(out_csv), "--no-progress"])
    assert rc == 0, err[-2000:]
    df = pd.read_csv(out_csv)
    assert len(df) > 0, err[-2000:]
    req = df[df["kind"] == "request"]
    assert len(req) > 0 and req["uri"].str.startswith("/x.txt?i=").all(), df.head()
    assert (df["src_port"].eq(port) | df["dst_port"].eq(port)).all()


@_SETFILTER_RACE
def test_httpanalyzer_live(tmp_path):
    out_csv = tmp_path / "live.csv"
    rc, out, err, port = _live_run(tmp_path, lambda port: [
        sys.executable, "-m", "httpanalyzer.cli", "-i", "lo", "-f", f"tcp port {port}",
        "-o", str(out_csv), "--no-progress"])
    assert rc == 0, err[-2000:]
    df = pd.read_csv(out_csv)
    paired = df[df["matched"]]
    assert len(paired) > 0, err[-2000:]
    assert paired["uri"].str.startswith("/x.txt?i=").all() and (paired["status"] == 200).all()
    assert paired["uri"].is_unique


def test_webtap_dissect_live_ctrl_c_on_an_idle_link(tmp_path):
    """Ctrl-C ends `webtap dissect -i` even when no packet arrives (httpanalyzer -i does)."""
    p = subprocess.Popen([sys.executable, "-m", "webtap.cli", "dissect", "-i", "lo", "-f", "tcp port 9",
                          "-o", str(tmp_path / "idle.csv"), "--no-progress"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Ctrl-C once its capture is open (it holds a packet socket)
        tick = threading.Event()
        for _ in range(int(WAIT_S / 0.05)):
            assert p.poll() is None, p.communicate()
            if _has_packet_socket(p.pid):
                break
            tick.wait(0.05)
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=30)      # an idle process handles SIGINT in well under 1 s
        assert p.returncode == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()


def _has_packet_socket(pid: int) -> bool:
    """Whether process pid holds an AF_PACKET socket (libpcap's capture handle)."""
    try:
        inodes = {os.readlink(f"/proc/{pid}/fd/{fd}")[8:-1] for fd in os.listdir(f"/proc/{pid}/fd")
                  if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:[")}
        with open("/proc/net/packet") as f:
            return any(line.split()[-1] in inodes for line in f.readlines()[1:])
    except (FileNotFoundError, ProcessLookupError):
        return False
