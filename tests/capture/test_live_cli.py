"""`webtap dissect -i IFACE` and `httpanalyzer -i IFACE`: the live command lines (README, docs/CLI.md)
on the loopback interface with a real HTTP server, ended by Ctrl-C (SIGINT). Needs root.

The client starts once the command prints its readiness line ('TOOL: listening on lo, ...', as
tcpdump does: printed after libpcap installed the -f filter, which flushes the kernel's ring, so
every packet from then on is kept), keeps sending requests until the command has exited (so Ctrl-C,
and whatever batch the command waits for, always meets traffic), and the command gets SIGINT once
REQUESTS transactions are complete. Each wait has a backstop that only bounds a failure (WAIT_S,
far above the seconds this takes on a loaded machine)."""
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
    err_lines = _wait_listening(p)

    def client():
        i = 0
        while p.poll() is None and i < 100_000:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/x.txt?i={i}", timeout=WAIT_S).read()
            except OSError:
                if p.poll() is not None:      # the command ended (and the server with it)
                    break
                raise
            sent.append(i)
            if i + 1 == REQUESTS:
                done.set()
            i += 1

    t = threading.Thread(target=client, daemon=True)
    t.start()
    try:
        assert done.wait(WAIT_S), "the client could not complete its requests"
        p.send_signal(signal.SIGINT)
        out = p.stdout.read()
        p.wait(timeout=WAIT_S)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        srv.shutdown()
    return p.returncode, out, "".join(err_lines), port, list(sent)


def _wait_listening(p) -> list:
    """Wait (bounded by WAIT_S) until process p prints its readiness line on stderr; returns the
    list its stderr lines keep landing in (a thread reads them until p closes stderr)."""
    lines: list = []
    seen = threading.Event()

    def reader():
        for line in p.stderr:
            lines.append(line)
            if ": listening on " in line:
                seen.set()
        seen.set()                      # stderr closed: the process ended (the test says why)

    threading.Thread(target=reader, daemon=True).start()
    assert seen.wait(WAIT_S), "no readiness line"
    assert p.poll() is None and any(": listening on " in ln for ln in lines), "".join(lines)[-2000:]
    return lines


def test_webtap_dissect_live(tmp_path):
    out_csv = tmp_path / "live.csv"
    rc, out, err, port, sent = _live_run(tmp_path, lambda port: [
        sys.executable, "-m", "webtap.cli", "dissect", "-i", "lo", "-f", f"tcp port {port}",
        "-o", str(out_csv), "--no-progress"])
    assert rc == 0, err[-2000:]
    assert out_csv.stat().st_size > 0, err[-2000:]
    df = pd.read_csv(out_csv)
    assert len(df) > 0, err[-2000:]
    req = df[df["kind"] == "request"]
    assert req["uri"].str.startswith("/x.txt?i=").all(), df.head()
    # every request the client completed before Ctrl-C is there (captured once the readiness
    # line was printed, so none may be missing), and nothing the client did not send
    got = req["uri"].str.slice(len("/x.txt?i=")).astype(int).tolist()
    assert set(range(REQUESTS)) <= set(got) <= set(range(len(sent) + 1)), (sorted(got), len(sent))
    assert len(df[(df["kind"] == "response") & (df["status"] == 200)]) >= REQUESTS
    assert (df["src_port"].eq(port) | df["dst_port"].eq(port)).all()


def test_httpanalyzer_live(tmp_path):
    out_csv = tmp_path / "live.csv"
    rc, out, err, port, sent = _live_run(tmp_path, lambda port: [
        sys.executable, "-m", "httpanalyzer.cli", "-i", "lo", "-f", f"tcp port {port}",
        "-o", str(out_csv), "--no-progress"])
    assert rc == 0, err[-2000:]
    df = pd.read_csv(out_csv)
    paired = df[df["matched"]]
    assert paired["uri"].str.startswith("/x.txt?i=").all() and (paired["status"] == 200).all()
    assert paired["uri"].is_unique
    # all REQUESTS transactions completed before Ctrl-C are paired (at most the one in flight
    # when the signal came may be missing a half), and none the client did not send
    got = set(paired["uri"].str.slice(len("/x.txt?i=")).astype(int))
    assert set(range(REQUESTS)) <= got <= set(range(len(sent) + 1)), (sorted(got), len(sent), err[-2000:])


def test_webtap_dissect_live_ctrl_c_on_an_idle_link(tmp_path):
    """Ctrl-C ends `webtap dissect -i` even when no packet arrives (httpanalyzer -i does)."""
    p = subprocess.Popen([sys.executable, "-m", "webtap.cli", "dissect", "-i", "lo", "-f", "tcp port 9",
                          "-o", str(tmp_path / "idle.csv"), "--no-progress"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Ctrl-C once its capture is ready (its readiness line)
        lines = _wait_listening(p)
        assert any(ln.startswith("webtap: listening on lo, link-type EN10MB (Ethernet), snapshot length ")
                   for ln in lines), lines
        p.send_signal(signal.SIGINT)
        p.wait(timeout=WAIT_S)         # the backstop only bounds a failure
        assert p.returncode == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
