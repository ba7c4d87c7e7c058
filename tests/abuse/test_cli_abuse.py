"""`httpanalyzer abuse {rates,limit-req,slow}` as a user runs it (subprocess), on the hand-made trace
of test_abuse.py: its tables, the usage errors (exit 2) and an unreadable trace (exit 1) with an
earlier output kept (docs/CLI.md)."""
from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

from tests.abuse.test_abuse import _trace

CMD = [sys.executable, "-m", "httpanalyzer", "abuse"]


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return str(_trace(tmp_path_factory.mktemp("abuse_cli")))


def _run(*args):
    return subprocess.run(CMD + [str(a) for a in args], capture_output=True, text=True, timeout=120)


def test_rates_csv(trace, tmp_path):
    out = tmp_path / "r.csv"
    r = _run("rates", trace, "--window", "1s", "-o", out)
    assert r.returncode == 0, r.stderr
    df = pd.read_csv(out).set_index("client_ip")
    assert df.loc["10.9.0.1", "requests"] == 4 and df.loc["10.9.0.1", "peak_requests"] == 3
    assert df.loc["10.9.0.1", "peak_concurrent"] == 2
    r = _run("rates", trace, "--by", "client,host", "-o", out)
    assert r.returncode == 0, r.stderr
    df = pd.read_csv(out)
    a = df[(df.client_ip == "10.9.0.1") & (df.host == "a.test")].iloc[0]
    assert a.requests == 3 and a.connections == 2


def test_limit_req_and_slow(trace, tmp_path):
    out = tmp_path / "l.csv"
    # client 10.9.0.1's requests at 0.010, 0.110, 0.300, 1.510 s at 1 r/s, no burst: the first
    # passes (new node), 0.110 and 0.300 are rejected (excess 0.9, 0.71), 1.510 passes
    r = _run("limit-req", trace, "--rate", "1r/s", "-o", out)
    assert r.returncode == 0, r.stderr
    df = pd.read_csv(out)
    a = df[df.client_ip == "10.9.0.1"].sort_values("request_ts")
    assert list(a.limit_req) == ["passed", "rejected", "rejected", "passed"]
    assert list(a.excess) == [0.0, 0.9, 0.71, 0.0]
    assert "requests:" in r.stderr
    out = tmp_path / "s.csv"
    r = _run("slow", trace, "--flagged", "-o", out, "--plots", tmp_path / "figs")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "figs" / "abuse_slow.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    df = pd.read_csv(out)
    assert sorted(df.client_port) == [41001, 41002, 41003, 41004]


def test_usage_and_run_errors(trace, tmp_path):
    for args in (["limit-req", trace, "--rate", "10r/h"],
                 ["limit-req", trace],
                 ["limit-req", trace, "--rate", "1r/s", "--nodelay", "--delay", "1"],
                 ["rates", trace, "--window", "0s"],
                 ["slow", trace, "--stall", "-1"],
                 ["rates", trace, "-o", tmp_path / "x.unknown"],
                 ["rates", trace, "--plots", trace],
                 ["nothing", trace]):
        r = _run(*args)
        assert r.returncode == 2, (args, r.stderr)
        assert "error:" in r.stderr.splitlines()[-1], (args, r.stderr)
    out = tmp_path / "keep.csv"
    out.write_text("earlier\n")
    r = _run("slow", tmp_path / "missing.pcap", "-o", out)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1].startswith("httpanalyzer abuse: error:")
    assert out.read_text() == "earlier\n"


def test_sigterm_keeps_the_tables_so_far(trace, tmp_path):
    """A trace on a FIFO whose writer stays: SIGTERM ends the input; the tables over what was
    read go to OUT.partial.csv, exit 143 (docs/CLI.md)."""
    import fcntl
    import os
    import signal
    import termios
    import threading
    import time

    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    data = open(trace, "rb").read()
    done = threading.Event()

    wfd = []

    def writer():
        with open(fifo, "wb") as f:
            wfd.append(f.fileno())
            f.write(data)
            f.flush()
            done.wait(60)

    th = threading.Thread(target=writer)
    th.start()
    out = tmp_path / "r.csv"
    p = subprocess.Popen(CMD + ["rates", str(fifo), "-o", str(out)], stderr=subprocess.PIPE,
                         text=True)
    try:
        # stop it once it has read the whole trace and gone idle waiting for more: nothing left
        # in the pipe, and no CPU time spent over half a second
        t0 = time.monotonic()
        last, still = None, 0
        while time.monotonic() - t0 < 60 and still < 5:
            time.sleep(0.1)
            left = bytearray(4)
            if wfd:
                fcntl.ioctl(wfd[0], termios.FIONREAD, left)
            stat = open(f"/proc/{p.pid}/stat").read().rsplit(")", 1)[1].split()
            cpu = int(stat[11]) + int(stat[12])
            still = still + 1 if (wfd and int.from_bytes(left, "little") == 0 and cpu == last) else 0
            last = cpu
        p.send_signal(signal.SIGTERM)
        err = p.communicate(timeout=60)[1]
    finally:
        done.set()
        th.join(10)
    assert p.returncode == 143, err
    assert "interrupted by SIGTERM" in err
    assert not out.exists()
    df = pd.read_csv(tmp_path / "r.partial.csv").set_index("client_ip")
    assert df.loc["10.9.0.1", "requests"] == 4
