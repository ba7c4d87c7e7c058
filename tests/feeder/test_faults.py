"""Faults: a consumer killed or raising is reported with its id and progress; nothing is left
behind (processes, /dev/shm); records already produced are kept; Ctrl-C ends a CLI run cleanly."""
import os
import signal
import subprocess
import sys
import threading
import time

import pyarrow as pa
import pytest

import httpanalyzer.pairing
from httpanalyzer.feeder import ConsumerFailed, FeederPairer, classify_packets, hash_eq3
from tests.conftest import REPO, TRACES
from tests.msgbuild import MsgBuilder
from tests.strategies import S, T0


def shm_files(pid: int | None = None) -> set[str]:
    """The feeder's shared-memory segments created by process `pid` (default: this one); other
    pytest workers run feeders of their own at the same time."""
    prefix = f"webtap-feeder-{os.getpid() if pid is None else pid}-"
    return {f for f in os.listdir("/dev/shm") if f.startswith(prefix)}


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def transactions(k0: int, n: int, open_requests: int = 0):
    """n paired transactions on distinct keys, request then response, 1 ms apart, and
    open_requests requests that get no response (they wait in the tables). Returns (msgs,
    feed, data): the messages, and what the feeder's reader makes of them as real packets
    (classify_packets: the product's path), feed's offsets indexing data."""
    b = MsgBuilder()
    for k in range(k0, k0 + n + open_requests):
        ack = (k * 2654435761) & 0xFFFFFFFF
        b.req(T0 + k * 1_000_000, "10.0.0.1", 1024 + k % 5000, "10.9.9.9", 80, k, ack, uri=f"/{k}")
        if k < k0 + n:
            b.resp(T0 + k * 1_000_000 + 500, "10.9.9.9", 80, "10.0.0.1", 1024 + k % 5000, ack, k + 1)
    pk, data = b.packets()
    return b.build()[0], classify_packets(pk, data).msgs, data


def wait_rows(fp, want, timeout=20):
    got = []
    deadline = time.monotonic() + timeout
    while sum(b.num_rows for b in got) < want and time.monotonic() < deadline:
        got.append(fp.take())
        time.sleep(0.01)
    return got


def test_killed_consumer_is_reported_and_nothing_is_left_behind():
    before = shm_files()
    fp = FeederPairer(3, ring_bytes=1 << 20)
    pids = fp.pids
    assert not shm_files() - before            # rings unlinked once every consumer mapped them
    msgs, feed, data = transactions(0, 2900, open_requests=100)
    fp.feed(feed, data)
    first = wait_rows(fp, 2900)
    assert sum(b.num_rows for b in first) == 2900      # produced before the fault: kept
    os.kill(pids[1], signal.SIGKILL)
    taken, fed = first, [msgs]
    with pytest.raises(ConsumerFailed) as ei:
        for k in range(1, 200):
            msgs, feed, data = transactions(k * 3000, 2900, open_requests=100)
            fp.feed(feed, data)
            fed.append(msgs)
            taken.append(fp.take())
            time.sleep(0.01)
    e = ei.value
    assert e.consumer == 1 and e.exitcode == -signal.SIGKILL
    assert e.messages >= 1000 and "consumer 1 died" in str(e)
    rest = fp.salvage()                         # survivors flush what they hold
    # every message of a fully dispatched batch that went to a survivor is in a record
    got = pa.Table.from_batches(taken + [rest]).to_pandas()
    uris = set(got.uri.dropna())
    for msgs in fed:
        req = msgs[msgs["kind"] == 1]
        to_survivor = hash_eq3(req) % 3 != 1
        want = {f"/{int(s)}" for s in req["seq"][to_survivor]}
        assert want <= uris
    ends = got[got.unmatched_reason == "end"]
    assert len(ends) > 0 and set(ends.uri) <= {f"/{k * 3000 + i}" for k in range(200) for i in range(2900, 3000)}
    fp.close()
    assert all(gone(p) for p in pids)
    assert not shm_files() - before


class _FailingPairer(httpanalyzer.pairing.Pairer):
    """A table that raises once it has seen 500 messages."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        table = self.table

        class Proxy:
            def __getattr__(self, name):
                return getattr(table, name)

            def __setattr__(self, name, value):
                setattr(table, name, value)

            def feed(self, msgs, data, clocks=None):
                if table.counters()["messages"] > 500:
                    raise ValueError("injected fault")
                table.feed(msgs, data, clocks)
        self.table = Proxy()


def test_raising_consumer_reports_its_traceback(monkeypatch):
    before = shm_files()
    import httpanalyzer.feeder as feeder_mod

    real_main = feeder_mod._consumer_main

    def main(cid, *a, **kw):
        if cid == 2:                   # runs in the forked consumer: only its table fails
            feeder_mod.Pairer = _FailingPairer      # the name the consumer builds its table with
        return real_main(cid, *a, **kw)
    monkeypatch.setattr(feeder_mod, "_consumer_main", main)
    with FeederPairer(3, ring_bytes=1 << 20) as fp:
        pids = fp.pids
        with pytest.raises(ConsumerFailed) as ei:
            for k in range(100):
                _, feed, data = transactions(k * 1000, 1000)
                fp.feed(feed, data)
                fp.take()
            fp.flush()
        assert ei.value.consumer == 2 and "injected fault" in str(ei.value)
        assert ei.value.messages > 500
    assert all(gone(p) for p in pids)
    assert not shm_files() - before


def test_ctrl_c_stops_a_cli_run_cleanly(tmp_path):
    """Ctrl-C in the middle of a run. The trace comes through a FIFO that a writer keeps
    feeding until the signal has been sent, so the run cannot finish first (with a file, a run
    that ended just before the signal arrived made this test racy under load)."""
    src = TRACES / "ndpi" / "1kxun.pcap"
    if not src.exists():
        pytest.skip(f"shared trace absent: {src}")
    raw = src.read_bytes()
    fifo = tmp_path / "endless.pcap"
    os.mkfifo(fifo)
    stop = threading.Event()

    def writer():
        fd = os.open(fifo, os.O_WRONLY)              # blocks until the CLI opens the FIFO
        os.set_blocking(fd, False)
        try:
            first, chunk, off = True, raw, 0
            while not stop.is_set():
                try:
                    off += os.write(fd, memoryview(chunk)[off:])
                except BlockingIOError:
                    time.sleep(0.01)
                    continue
                except BrokenPipeError:
                    return
                if off == len(chunk):
                    if first:
                        first, chunk = False, raw[24:]   # the packets again, no file header
                    off = 0
        finally:
            os.close(fd)                                 # EOF: the reader's last read returns

    w = threading.Thread(target=writer, daemon=True)
    w.start()
    out = tmp_path / "out.csv"
    cmd = [sys.executable, "-m", "httpanalyzer.cli", str(fifo), "--consumers", "2", "--no-progress",
           "-o", str(out)]
    p = subprocess.Popen(cmd, cwd=REPO, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 60
    def flowing():                             # records in the output's temporary file
        return any(f.name.startswith(".out.csv.") and f.stat().st_size > 0
                   for f in tmp_path.iterdir())

    while not flowing() and time.monotonic() < deadline:
        time.sleep(0.05)                       # records flowing: consumers are at work
    assert p.poll() is None, "the run ended before it could be interrupted"
    os.killpg(p.pid, signal.SIGINT)            # as a terminal's Ctrl-C: the whole process group
    time.sleep(0.2)
    stop.set()
    try:
        err = p.communicate(timeout=30)[1].decode()
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        raise AssertionError("Ctrl-C did not stop the run")
    w.join(timeout=5)
    # interrupted: exit 130, the records so far in out.partial.csv, out.csv never made (docs/CLI.md)
    assert p.returncode == 130, err
    assert "interrupted by SIGINT" in err and (tmp_path / "out.partial.csv").exists()
    assert not out.exists()
    assert "Traceback" not in err
    left = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == p.pid:        # still in the CLI run's process group
                left.append(d)
    assert not left
    assert not shm_files(p.pid)
