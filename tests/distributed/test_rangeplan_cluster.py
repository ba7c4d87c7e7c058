"""The parallel plan on real Dask clusters (issue 36): worker processes that open the trace by
path, a client that reads a few bytes of it, a worker killed in the middle of the plan.

The client's reads are measured from outside, by strace(1) on the real CLI process (every
read, pread and mmap of a descriptor opened on the trace), not by instrumenting the code under
test. The killed worker is killed by a Dask worker plugin of the test (SIGKILL to its own
process when it starts a survey task); the nanny restarts it and the scheduler retries the task.
"""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys

import pandas as pd
import pytest

from tests.distributed.test_distributed import loose, same

pytest.importorskip("dask.distributed")

from distributed import WorkerPlugin  # noqa: E402  (after the importorskip)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from dask.distributed import Client, LocalCluster

    c = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = Client(c)
    try:
        yield client, tmp_path_factory.mktemp("kill")
    finally:
        client.close()
        c.close()


class KillSurvey(WorkerPlugin):
    """The test's plugin: a worker starting a survey task kills itself (SIGKILL) -- `times`
    times in all (counted by marker files), from its `after`-th survey on."""

    name = "webtap-test-kill-survey"

    def __init__(self, marker_dir: str, times: int = 1, after: int = 2):
        self.marker_dir = marker_dir
        self.times = times
        self.after = after
        self.started = 0

    def setup(self, worker):
        self.started = 0

    def transition(self, key, start, finish, **kwargs):
        name = key[0] if isinstance(key, tuple) else key
        if finish != "executing" or not str(name).startswith("survey"):
            return
        self.started += 1
        if self.started < self.after:
            return
        for i in range(self.times):
            try:
                fd = os.open(os.path.join(self.marker_dir, f"kill{i}"),
                             os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                continue
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            os.kill(os.getpid(), signal.SIGKILL)


def test_local_cluster_by_path(cluster, jumpy, tmp_path):
    """Worker processes survey and map the trace from its path: the records of one process, for
    ranges sized from the file and the two workers and for 1 MiB ranges; every map ran where
    its range was surveyed or anywhere (the hint is not a constraint)."""
    client, _ = cluster
    res, ref = same([str(jumpy)], tmp_path, scheduler=client)
    assert res.planner == "ranges" and res.plan_stats["ranges"] >= 1
    res, ref = same([str(jumpy)], tmp_path, scheduler=client, chunk_bytes=1 << 20)
    assert res.chunks > 5 and res.plan_stats["ranges"] == -(-jumpy.stat().st_size // (1 << 20))
    assert loose(pd.read_parquet(res.out_dir)) == loose(ref)


_OPEN = re.compile(r'^(\d+)\s+openat\(.*?"([^"]+)".*\)\s+=\s+(\d+)')
_CALL = re.compile(r'^(\d+)\s+(read|pread64|readv|preadv|preadv2)\((\d+),.*\)\s+=\s+(\d+)')
_RESUMED = re.compile(r'^(\d+)\s+<\.\.\. (read|pread64|readv|preadv|preadv2) resumed>.*\)\s+=\s+(\d+)')
_UNFIN = re.compile(r'^(\d+)\s+(read|pread64|readv|preadv|preadv2)\((\d+),.*<unfinished')
_MMAP = re.compile(r'^(\d+)\s+mmap\([^,]+, (\d+), [^,]+, [^,]+, (\d+), .*\)\s+=\s+0x')
_CLOSE = re.compile(r'^(\d+)\s+close\((\d+)\)')


def _bytes_read(log: str, path: str) -> tuple[int, int]:
    """(bytes read or mapped from descriptors opened on `path`, opens) in an strace -f log."""
    fds: set = set()
    pending: dict = {}
    total = opens = 0
    for line in log.splitlines():
        m = _OPEN.match(line)
        if m:
            if os.path.realpath(m.group(2)) == path:
                fds.add(int(m.group(3)))
                opens += 1
            continue
        m = _CALL.match(line)
        if m and int(m.group(3)) in fds:
            total += int(m.group(4))
            continue
        m = _UNFIN.match(line)
        if m:
            pending[m.group(1)] = int(m.group(3))
            continue
        m = _RESUMED.match(line)
        if m and pending.pop(m.group(1), None) in fds:
            total += int(m.group(3))
            continue
        m = _MMAP.match(line)
        if m and int(m.group(3)) in fds:
            total += int(m.group(2))
            continue
        m = _CLOSE.match(line)
        if m:
            fds.discard(int(m.group(2)))
    return total, opens


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace(1) absent")
def test_client_reads_under_one_percent(cluster, jumpy, tmp_path):
    """`httpanalyzer TRACE --dask ADDRESS -o OUT.parquet`, under strace: the client process
    reads the trace's first bytes only (< 1 % of the file); the workers read the rest by path.
    The dataset has the records of one process."""
    client, _ = cluster
    addr = client.scheduler.address
    path = os.path.realpath(jumpy)
    out = tmp_path / "out.parquet"
    log = tmp_path / "strace.log"
    one = tmp_path / "one.parquet"
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(__file__).resolve().parents[2]))
    subprocess.run([sys.executable, "-m", "httpanalyzer", path, "-o", str(one), "--consumers", "0",
                    "--no-progress"], check=True, env=env)
    subprocess.run(["strace", "-f", "-qq", "-s", "0", "-o", str(log),
                    "-e", "trace=openat,read,pread64,readv,preadv,preadv2,mmap,close",
                    sys.executable, "-m", "httpanalyzer", path, "--dask", addr, "-o", str(out),
                    "--chunk-mb", "4", "--no-progress"], check=True, env=env)
    got, opens = _bytes_read(log.read_text(errors="replace"), path)
    size = os.path.getsize(path)
    assert opens >= 1                       # the parser saw the client open the trace ...
    assert 0 < got < size // 100, (got, size)   # ... and read less than 1 % of it
    assert loose(pd.read_parquet(out)) == loose(pd.read_parquet(one))
    # the measure itself: with the sequential plan (--chunk-packets) the client scans the
    # whole trace, and the same parse of the same log format says so
    subprocess.run(["strace", "-f", "-qq", "-s", "0", "-o", str(log),
                    "-e", "trace=openat,read,pread64,readv,preadv,preadv2,mmap,close",
                    sys.executable, "-m", "httpanalyzer", path, "--dask", addr, "-o",
                    str(tmp_path / "scan.parquet"), "--chunk-packets", "50000", "--no-progress"],
                   check=True, env=env)
    assert _bytes_read(log.read_text(errors="replace"), path)[0] >= size


def test_worker_killed_mid_plan(cluster, jumpy, tmp_path):
    """A worker dies (SIGKILL) as it starts a survey: the scheduler retries the survey on a
    live worker, and the run completes with the records of one process."""
    client, kill_dir = cluster
    before = set(client.scheduler_info()["workers"])
    client.register_plugin(KillSurvey(str(kill_dir)))
    try:
        res, _ = same([str(jumpy)], tmp_path, scheduler=client, chunk_bytes=1 << 20)
    finally:
        client.unregister_worker_plugin(KillSurvey.name)
    marker = kill_dir / "kill0"
    assert marker.exists(), "no worker started a second survey"
    with pytest.raises(ProcessLookupError):
        os.kill(int(marker.read_text()), 0)
    assert set(client.scheduler_info()["workers"]) != before    # the nanny restarted it
    assert res.chunks > 5


def test_workers_lost_is_exit_1(jumpy, tmp_path):
    """When the scheduler gives up on a task (its workers died more often than
    distributed.scheduler.allowed-failures), the CLI ends with exit 1 and one line naming the
    task, and the earlier output is kept."""
    import dask
    from dask.distributed import Client, LocalCluster

    kills = tmp_path / "kills"
    kills.mkdir()
    out = tmp_path / "recs.parquet"
    out.mkdir()
    (out / "earlier.parquet").write_bytes(b"earlier")
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        c = LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                         dashboard_address=None)
    client = Client(c)
    try:
        client.register_plugin(KillSurvey(str(kills), times=5, after=1))
        proc = subprocess.run([sys.executable, "-m", "httpanalyzer", str(jumpy), "--dask",
                               client.scheduler.address, "-o", str(out), "--no-progress"],
                              capture_output=True, text=True,
                              env=dict(os.environ, PYTHONPATH=str(pathlib.Path(__file__).resolve().parents[2])))
    finally:
        client.close()
        c.close()
    assert proc.returncode == 1, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines == [lines[-1]] and lines[0].startswith("httpanalyzer: error: Dask workers died "
                                                        "running survey"), proc.stderr
    assert (out / "earlier.parquet").read_bytes() == b"earlier"


def test_summary_names_the_executor(cluster, traces_dir, tmp_path, capsys):
    """--summary says which executor ran and why (as the feeder and fanout do), and its table
    is the one-process table: the dataset is counted from the columns the summary reads."""
    from httpanalyzer import cli

    client, _ = cluster
    src = str(traces_dir / "acandeias-intrusiondetection" / "blackholev2.pcap")
    assert cli.main([src, "-o", str(tmp_path / "one.parquet"), "--summary", "--no-progress",
                     "--consumers", "0"]) == 0
    one = capsys.readouterr().out
    assert cli.main([src, "-o", str(tmp_path / "d.parquet"), "--summary", "--no-progress",
                     "--dask", client.scheduler.address]) == 0
    dist = capsys.readouterr().out
    assert "\nExecutor: dask: 2 workers; byte ranges planned by the workers" in dist
    table = one.split("\nExecutor:")[0]
    assert dist.startswith(table) and "records" in table
