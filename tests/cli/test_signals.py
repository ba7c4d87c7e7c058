"""SIGINT / SIGTERM end a run whose read blocks (a FIFO kept open by its writer): exit 130 / 143,
one stderr line saying after how many packets, an earlier output left alone, the records so far
in OUT.partial.EXT marked partial, no temporary left (docs/CLI.md).

Deterministic: the signal is sent after an event, never after a guessed sleep. The writer's
open() of the FIFO returns only once the tool opened it (after its handlers were installed), and
its write() of the whole payload returns only once the tool has read all but a pipe buffer of it;
the payload is many packet batches (8,192 packets each, ~1 MiB here) and several reader chunks
(4 MiB each), far more than the read-ahead thread can hold (2 batches queued, 1 in hand), so the
main thread has taken (and paired or dissected) most of them before it blocks waiting for more.
"""
from __future__ import annotations

import gzip
import os
import pathlib
import re
import signal
import subprocess
import threading

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from tests import pcapbuild as pb
from tests.cli import contract as C
from tests.conftest import SHARED

#: a TLS trace (classic pcap, little-endian microseconds, Ethernet: the payload's own header, so
#: the two concatenate as one trace)
TLS_TRACE = SHARED / "traces-tls" / "ndpi" / "teams.pcap"
EARLIER = b"an earlier run's output\n"


#: transactions in the payload: ~20 MiB of small packets, ~22 batches of 8,192 packets. (It was
#: 10,000 transactions of ~1.9 KiB requests: under 3 batches, all of which the read-ahead thread
#: could hold, so a loaded machine could deliver the signal before the main thread had taken
#: any, and no partial file was made.)
N_TRANSACTIONS = 90_000


@pytest.fixture(scope="module")
def payload() -> bytes:
    return pb.pcap(C.transactions(N_TRANSACTIONS))


class FifoFeeder:
    """Writes `data` into a FIFO and keeps it open until release()."""

    def __init__(self, path: pathlib.Path, data: bytes):
        os.mkfifo(path)
        self.path, self.data = path, data
        self.opened = threading.Event()
        self.written = threading.Event()
        self.release = threading.Event()
        self.error = None
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        try:
            with open(self.path, "wb") as f:     # returns when the tool opens the FIFO
                self.opened.set()
                f.write(self.data)               # returns when the tool has read it (but a pipe's worth)
                f.flush()
                self.written.set()
                self.release.wait(600)
        except BrokenPipeError:
            self.written.set()
        except BaseException as e:  # noqa: BLE001
            self.error = e
            self.opened.set()
            self.written.set()


def _start(argv, **kw):
    env = dict(os.environ)
    env.pop("WEBTAP_DEBUG", None)
    return subprocess.Popen([C.PY, "-m", *map(str, argv)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, **kw)


def _finish(p, feeder):
    try:
        out, err = p.communicate(timeout=300)
    finally:
        feeder.release.set()
    return p.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def _interrupted_line(err: str, sig: str) -> int:
    m = re.search(rf": interrupted by {sig} after (\d+) packets", err)
    assert m, err
    assert "Traceback" not in err, err
    return int(m.group(1))


def _signal_after_consumed(tmp_path, argv_for, payload, sig, out_name, data=None):
    fifo = tmp_path / "trace.fifo"
    out = tmp_path / out_name
    out.write_bytes(EARLIER)
    feeder = FifoFeeder(fifo, data if data is not None else payload)
    p = _start(argv_for(fifo, out))
    assert feeder.written.wait(300), "the tool never read the FIFO"
    assert feeder.error is None, feeder.error
    p.send_signal(sig)
    rc, stdout, err = _finish(p, feeder)
    return rc, stdout, err, out


@pytest.mark.parametrize("sig,rc", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_httpanalyzer_keeps_records_so_far_as_partial(tmp_path, payload, sig, rc):
    got, _, err, out = _signal_after_consumed(
        tmp_path, lambda f, o: ["httpanalyzer.cli", f, "-o", o, "--no-progress"], payload, sig,
        "out.parquet")
    assert got == rc, err
    assert _interrupted_line(err, signal.Signals(sig).name) > 0
    assert out.read_bytes() == EARLIER                     # never replaced by a partial run
    part = tmp_path / "out.partial.parquet"
    meta = pq.read_metadata(part).metadata
    assert meta[b"webtap.partial"] == b"true"
    assert meta[b"webtap.interrupted_by"] == signal.Signals(sig).name.encode()
    t = pq.read_table(part)
    assert 0 < t.num_rows <= N_TRANSACTIONS
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def test_httpanalyzer_gzip_stream_in_process_pairing(tmp_path, payload):
    """A gzip'd trace through the FIFO (the inflating reader blocks), pairing in this process."""
    got, _, err, out = _signal_after_consumed(
        tmp_path, lambda f, o: ["httpanalyzer.cli", f, "-o", o, "--consumers", "0",
                                "--no-progress"],
        payload, signal.SIGINT, "out.csv", data=gzip.compress(payload + payload, 1))
    assert got == 130, err
    _interrupted_line(err, "SIGINT")
    assert out.read_bytes() == EARLIER
    # how far inflating got when the compressed bytes were all read is not an event we can
    # wait for: records so far may be none (then no partial file); if any, a valid file
    part = tmp_path / "out.partial.csv"
    if part.exists():
        assert pacsv.read_csv(part).num_rows > 0
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def test_webtap_dissect_stdout_stops(tmp_path, payload):
    fifo = tmp_path / "trace.fifo"
    feeder = FifoFeeder(fifo, payload)
    p = _start(["webtap.cli", "dissect", fifo])
    first = p.stdout.readline()                  # the event: the first message line
    assert first.count(b"|") == 12, first
    p.send_signal(signal.SIGINT)
    rc, _, err = _finish(p, feeder)
    assert rc == 130, err
    assert _interrupted_line(err, "SIGINT") > 0


def test_webtap_dissect_to_file(tmp_path, payload):
    got, _, err, out = _signal_after_consumed(
        tmp_path, lambda f, o: ["webtap.cli", "dissect", f, "-o", o], payload, signal.SIGTERM,
        "m.parquet")
    assert got == 143, err
    assert _interrupted_line(err, "SIGTERM") > 0
    assert out.read_bytes() == EARLIER
    part = tmp_path / "m.partial.parquet"
    assert pq.read_metadata(part).metadata[b"webtap.partial"] == b"true"
    assert pq.read_table(part).num_rows > 0


@pytest.mark.parametrize("sig,rc", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_urlfilter_scan(tmp_path, payload, sig, rc):
    db = C.make_db(tmp_path / "bl.db")
    got, _, err, out = _signal_after_consumed(
        tmp_path, lambda f, o: ["urlfilter.cli", "--db", db, "scan", f, "-o", o], payload, sig,
        "hits.csv")
    assert got == rc, err
    assert _interrupted_line(err, signal.Signals(sig).name) > 0
    assert out.read_bytes() == EARLIER
    t = pacsv.read_csv(tmp_path / "hits.partial.csv")
    assert t.num_rows > 0 and "url" in t.column_names


def test_httpanalyzer_compare(tmp_path, payload):
    """compare reads the FIFO with webtap first (tshark would read it next): a signal then ends
    the whole comparison, tshark included."""
    got, _, err, _ = _signal_after_consumed(
        tmp_path, lambda f, o: ["httpanalyzer.cli", "compare", f, "--json"], payload,
        signal.SIGINT, "unused.txt")
    assert got == 130, err
    assert _interrupted_line(err, "SIGINT") > 0


def _has_lo() -> bool:
    return os.path.exists("/sys/class/net/lo") and os.geteuid() == 0


@pytest.mark.skipif(not _has_lo(), reason="live capture on lo needs root (CAP_NET_RAW)")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_urlfilter_run_ends_on_ctrl_c(tmp_path, sig):
    """A live filter ends normally on SIGINT (Ctrl-C) or SIGTERM: exit 0, hits written."""
    db = C.make_db(tmp_path / "bl.db")
    out = tmp_path / "hits.csv"
    p = _start(["urlfilter.cli", "--db", db, "run", "-i", "lo", "-o", out])
    # the event: the readiness line (printed once the capture is filtered and its handlers set)
    buf = b""
    while b"urlfilter: listening on lo, link-type EN10MB (Ethernet)" not in buf:
        ch = p.stderr.read1(4096) if hasattr(p.stderr, "read1") else p.stderr.read(1)
        assert ch, f"urlfilter run ended before its readiness line: {buf!r}"
        buf += ch
    p.send_signal(sig)
    out_s, err = p.communicate(timeout=120)
    err = buf.decode() + err.decode()
    assert p.returncode == 0, err
    assert f"stopped by {signal.Signals(sig).name}" in err and "Traceback" not in err
    assert out.exists() and not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
    # with or without hits (other tests' traffic on lo may give some), the columns are a hit's
    header = out.read_text().splitlines()[0].split(",")
    assert header[-1] == '"reaction_ns"' and '"sni"' in header and '"proto"' in header


# -- issue 30: every output of a run keeps its records so far --------------------------------

def test_httpanalyzer_tls_out_keeps_its_partial(tmp_path, payload):
    """`--tls-out` holds its handshakes until the end: on SIGINT they are written, with the HTTP
    records, as partial files (the payload has no TLS: the TLS file holds the columns only when
    there is a row, so a TLS trace is appended to the FIFO's payload)."""
    tls = TLS_TRACE.read_bytes()
    got, _, err, out = _signal_after_consumed(
        tmp_path, lambda f, o: ["httpanalyzer.cli", f, "-o", o, "--tls-out",
                                tmp_path / "tls.csv", "--consumers", "0", "--no-progress"],
        payload, signal.SIGINT, "out.csv", data=tls + payload[24:])
    assert got == 130, err
    assert _interrupted_line(err, "SIGINT") > 0
    assert "tls.partial.csv" in err and "out.partial.csv" in err, err
    assert pacsv.read_csv(tmp_path / "tls.partial.csv").num_rows > 0
    assert not (tmp_path / "tls.csv").exists()


def test_httpanalyzer_exchanges_out_keeps_its_partial(tmp_path, payload):
    """`--exchanges-out` (issue 33) keeps its exchanges so far, as `--tls-out` its handshakes:
    on SIGINT those not written yet are added to the partial file, waiting requests as
    unmatched."""
    tls = TLS_TRACE.read_bytes()
    got, _, err, out = _signal_after_consumed(
        tmp_path, lambda f, o: ["httpanalyzer.cli", f, "-o", o, "--exchanges-out",
                                tmp_path / "x.csv", "--consumers", "0", "--no-progress"],
        payload, signal.SIGINT, "out.csv", data=tls + payload[24:])
    assert got == 130, err
    assert "x.partial.csv" in err and "out.partial.csv" in err, err
    assert pacsv.read_csv(tmp_path / "x.partial.csv").num_rows > 0
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.parametrize("sig,rc", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_urlfilter_scan_forged_out_keeps_its_partial(tmp_path, payload, sig, rc):
    db = C.make_db(tmp_path / "bl.db")              # example.org/item/3: a hit in the payload
    forged = tmp_path / "forged.pcap"
    got, _, err, out = _signal_after_consumed(
        tmp_path, lambda f, o: ["urlfilter.cli", "--db", db, "scan", f, "-o", o,
                                "--forged-out", forged], payload, sig, "hits.csv")
    assert got == rc, err
    assert "forged.partial.pcap" in err, err
    from webtap.capture import open_trace

    with open_trace(tmp_path / "forged.partial.pcap") as tr:
        assert sum(len(b) for b in tr) >= 2       # the FIN/RST pair of the hit (at least)
    assert not forged.exists()


@pytest.mark.parametrize("sig,rc", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_urlfilter_timing_keeps_its_partial(tmp_path, payload, sig, rc):
    """Its help promises OUT.partial.csv: the connections so far (issue 30)."""
    db = C.make_db(tmp_path / "bl.db")
    got, _, err, out = _signal_after_consumed(
        tmp_path, lambda f, o: ["urlfilter.cli", "--db", db, "timing", f, "-o", o], payload,
        sig, "timing.csv")
    assert got == rc, err
    assert _interrupted_line(err, signal.Signals(sig).name) > 0
    assert out.read_bytes() == EARLIER
    t = pacsv.read_csv(tmp_path / "timing.partial.csv")
    assert t.num_rows > 0 and "margin_ns" in t.column_names


def test_httpanalyzer_tls_keeps_its_partial(tmp_path, payload):
    tls = TLS_TRACE.read_bytes()
    got, _, err, out = _signal_after_consumed(
        tmp_path, lambda f, o: ["httpanalyzer.cli", "tls", f, "-o", o], payload,
        signal.SIGTERM, "tls.parquet", data=tls + payload[24:])
    assert got == 143, err
    assert _interrupted_line(err, "SIGTERM") > 0
    part = tmp_path / "tls.partial.parquet"
    assert pq.read_metadata(part).metadata[b"webtap.partial"] == b"true"
    assert pq.read_table(part).num_rows > 0
    assert out.read_bytes() == EARLIER
