"""benchmarks.common.run reports each contender's own peak RSS (issue 21): a driver that holds
a lot of memory must not lend its high-water mark to the commands it starts. On Linux a child
made by fork/vfork starts with its parent's pages mapped and keeps that peak across exec, which
made every contender of bench_feeder show 1.3 GB and a C loop 134 MB."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from benchmarks import common
from tests.conftest import TRACES, require_shared

MB = 1 << 20


@pytest.fixture(scope="module")
def big_driver():
    """This process holding 400 MB of touched pages while the contenders run."""
    ballast = bytearray(400 * MB)
    ballast[::4096] = b"\x01" * len(range(0, len(ballast), 4096))
    yield ballast
    del ballast


def test_direct_child_inherits_the_drivers_peak(big_driver):
    """The defect being fixed, shown: os.wait4 on a direct child reports >= the driver's 400 MB
    for a program that itself uses almost nothing (if this stops holding, the launcher is no
    longer needed, and this test says so)."""
    proc = subprocess.Popen(["true"])
    _, _, usage = os.wait4(proc.pid, 0)
    assert usage.ru_maxrss * 1024 >= 400 * MB


def test_c_loop_reports_a_few_mb(big_driver):
    trace = require_shared(TRACES / "ndpi" / "1kxun.pcap")
    wall, rss, out = common.run([common.c_tool("pcap_loop", "-lpcap"), str(trace)])
    assert out.split()[0] == b"1723"
    assert rss < 16 * MB, rss / MB


def test_a_big_contender_reports_its_own_peak(big_driver):
    """A contender that touches 200 MB reports at least that, and not the driver's 400 MB."""
    code = "b = bytearray(200 << 20); b[::4096] = b'1' * len(range(0, len(b), 4096))"
    _, rss, _ = common.run([sys.executable, "-c", code])
    assert 200 * MB <= rss < 300 * MB, rss / MB


def test_exit_status_and_failure_are_reported():
    with pytest.raises(RuntimeError, match="failed \\(3\\)"):
        common.run([sys.executable, "-c", "import sys; sys.exit(3)"])
    with pytest.raises(RuntimeError, match="failed \\(127\\)"):
        common.run(["/nonexistent-command-for-rss-test"])
