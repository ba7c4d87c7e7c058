"""The mapped source (webtap._ext.mapped, webtap.capture.Trace with map_window > 0) against the
read() source it replaces for regular files: the same packets, bytes, counters and warnings on
every shared trace and the same records; a file that grows while read is read to its new end;
a file that shrinks while read is an error (not zeros, not SIGBUS); gzip and pipes keep the
read() path."""
from __future__ import annotations

import gzip
import hashlib
import os
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest

from tests.conftest import shared_trace_files
from tests.pcapbuild import pcap
from webtap import capture
from webtap._ext import mapped
from webtap.capture import open_trace, window_of
from webtap.errors import CaptureError

FIELDS = ("ts_ns", "index", "caplen", "wirelen", "linktype", "iface", "flags")
SMALL = 64 * 1024          # many windows per file, and records that straddle them


def _read_all(path, **kw):
    """(packet fields, sha256 of every packet's bytes, counters, warnings, windows seen)."""
    cols = {f: [] for f in FIELDS}
    h = hashlib.sha256()
    bases = set()
    with open_trace(path, **kw) as t:
        for b in t:
            for f in FIELDS:
                cols[f].append(b.packets[f].copy())
            off = b.packets["offset"]
            for i in range(len(b)):
                h.update(b.data[int(off[i]): int(off[i]) + int(b.packets["caplen"][i])].tobytes())
            w = window_of(b.data)
            bases.add(None if w is None else id(w))
        counters, warnings = t.counters, list(t.warnings)
    return ({f: np.concatenate(v) if v else np.empty(0) for f, v in cols.items()}, h.hexdigest(),
            counters, warnings, bases)


def _captures():
    out = []
    for p in shared_trace_files():
        with open(p, "rb") as f:
            head = f.read(4)
        if head[:2] != b"\x1f\x8b" and len(head) == 4:
            out.append(p)
    return out


def test_every_shared_trace_reads_the_same_mapped():
    files = _captures()
    if not files:
        pytest.skip("shared traces absent")
    compared = 0
    for p in files:
        try:
            ref = _read_all(p, map_window=0)
        except (OSError, ValueError):
            with pytest.raises((OSError, ValueError)):
                _read_all(p, map_window=SMALL)
            continue
        got = _read_all(p, map_window=SMALL)
        for f in FIELDS:
            assert np.array_equal(ref[0][f], got[0][f]), (p, f)
        assert ref[1:4] == got[1:4], p
        assert None not in got[4], p            # every batch came from a mapped window
        compared += 1
    assert compared > 100


def _packets(n, size=700, t0=1_700_000_000_000_000_000):
    return [(t0 + i * 1000, bytes([i % 251]) * size) for i in range(n)]


def test_a_file_that_grows_while_read_is_read_to_its_new_end(tmp_path):
    p = tmp_path / "grow.pcap"
    first, more = _packets(2000), _packets(500, t0=1_800_000_000_000_000_000)
    p.write_bytes(pcap(first))
    n = 0
    with open_trace(p, batch_size=100, map_window=SMALL) as t:
        for i, b in enumerate(t):
            if i == 0:
                with open(p, "ab") as f:
                    f.write(pcap(more)[24:])       # records only, after the file header
            n += len(b)
        assert not t.warnings
    assert n == 2500


def test_a_file_that_shrinks_while_read_is_an_error_not_zeros(tmp_path):
    p = tmp_path / "shrink.pcap"
    p.write_bytes(pcap(_packets(4000)))
    size = p.stat().st_size
    seen = []
    with pytest.raises(CaptureError, match=r"shrank to 100000 bytes while it was read"):
        with open_trace(p, batch_size=50, map_window=1 << 20) as t:
            for i, b in enumerate(t):
                seen.append(b.packets["ts_ns"].copy())
                if i == 0:
                    os.truncate(p, 100_000)
    ts = np.concatenate(seen)
    # nothing after the cut was handed on as packets of zeros
    assert (ts >= 1_700_000_000_000_000_000).all()
    assert size > (1 << 20)


def test_pages_past_the_end_read_as_zeros_and_are_counted(tmp_path):
    # the guard's own contract: a touch past the new end does not raise SIGBUS
    p = tmp_path / "x.bin"
    p.write_bytes(b"x" * (1 << 20))
    with open(p, "rb") as f:
        m = mapped.MapFile(f.fileno())
    a = np.frombuffer(m.window(0, 1 << 20), dtype=np.uint8)
    assert m.shrunk() is None and m.faults == 0
    os.truncate(p, 100_000)
    assert a[99_999] == ord("x")
    assert int(a[100_000:].sum()) == 0
    pages = (1 << 20) // os.sysconf("SC_PAGE_SIZE")
    first_gone = -(-100_000 // os.sysconf("SC_PAGE_SIZE"))     # the first page wholly past it
    assert m.faults == pages - first_gone
    assert "shrank to 100000 bytes" in m.shrunk()


def test_a_sigbus_that_is_not_a_window_still_ends_the_process(tmp_path):
    code = ("import os, signal, numpy as np\n"
            "from webtap._ext import mapped\n"
            f"f = open({str(tmp_path / 'y.bin')!r}, 'wb+'); f.write(b'y' * 8192); f.flush()\n"
            "w = mapped.MapFile(f.fileno()).window(0, 8192)\n"
            "os.kill(os.getpid(), signal.SIGBUS)\n"
            "print('survived')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == -signal.SIGBUS and "survived" not in r.stdout


def test_gzip_and_pipes_keep_the_read_path_and_read_the_same(tmp_path):
    raw = pcap(_packets(3000))
    plain, gz = tmp_path / "a.pcap", tmp_path / "a.pcap.gz"
    plain.write_bytes(raw)
    gz.write_bytes(gzip.compress(raw))
    ref = _read_all(plain, map_window=SMALL)
    assert None not in ref[4]
    got = _read_all(gz, map_window=SMALL)
    assert got[4] == {None} and got[1] == ref[1] and np.array_equal(got[0]["ts_ns"], ref[0]["ts_ns"])
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    def feed():
        with open(fifo, "wb") as f:
            f.write(raw)
    th = threading.Thread(target=feed)
    th.start()
    got = _read_all(fifo, map_window=SMALL)
    th.join()
    assert got[4] == {None} and got[1] == ref[1]


def test_records_are_the_same_mapped_and_read(jumpy, monkeypatch):
    from httpanalyzer.stream import analyze

    mapped_df = analyze(jumpy)
    monkeypatch.setattr(capture, "DEFAULT_MAP_WINDOW", 0)
    read_df = analyze(jumpy)
    assert len(mapped_df) > 100
    assert mapped_df.equals(read_df)


@pytest.mark.parametrize("executor", ["inline", "readahead"])
def test_a_file_cut_while_the_stages_hold_its_batch_ends_the_pipeline(tmp_path, executor):
    """The walk or a stage may touch a batch's bytes after the reader parsed them: the pipeline
    checks the window's file once the stages are done with each batch."""
    from webtap.pipeline import Pipeline

    p = tmp_path / "cut.pcap"
    p.write_bytes(pcap(_packets(6000)))

    class Cut:
        fed = 0

        def feed(self, batch, mb):
            if Cut.fed == 0:
                os.truncate(p, 50_000)
            Cut.fed += 1

        def finish(self):
            return None

    pipe = Pipeline([str(p)], [Cut()], executor=executor, batch_size=100)
    with pytest.raises(CaptureError, match="shrank to 50000 bytes"):
        pipe.run()
    assert Cut.fed == 1


def test_readahead_walks_in_a_second_thread_and_yields_what_inline_does(jumpy):
    """The readahead executor (a reading and a walking thread) hands the stages the same
    message batches, in the same order, as the inline one (every shared Ethernet trace)."""
    from webtap.pipeline import Pipeline

    class Keep:
        def __init__(self):
            self.msgs, self.readers = [], set()

        def feed(self, batch, mb):
            self.msgs.append((batch.packets["index"].copy(), mb.msgs.copy()))
            self.readers.add(sum(t.name == "webtap-reader" for t in threading.enumerate()))

        def finish(self):
            return None

    a, b = Keep(), Keep()
    pa = Pipeline([str(jumpy)], [a], executor="inline")
    pb = Pipeline([str(jumpy)], [b], executor="readahead")
    pa.run()
    pb.run()
    assert not pa.walk_ahead and pb.walk_ahead
    assert "a second thread walks" in pb.totals.executor
    assert a.readers == {0} and max(b.readers) == 2      # (they end before the last batches)
    assert len(a.msgs) == len(b.msgs) > 10
    for (ia, ma), (ib, mbb) in zip(a.msgs, b.msgs):
        assert np.array_equal(ia, ib) and len(ma) == len(mbb)
        for f in ma.dtype.names:         # field by field: padding bytes are not cleared
            assert ma[f].tobytes() == mbb[f].tobytes(), f
    assert pa.totals.dissect == pb.totals.dissect and pa.totals.source == pb.totals.source
