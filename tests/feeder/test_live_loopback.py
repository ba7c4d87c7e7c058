"""A live run through the feeder on the loopback interface (needs root): Ctrl-C ends the input,
every transaction comes out paired, nothing is left behind."""
import http.server
import multiprocessing
import os
import signal
import threading
import time
import urllib.request

import pytest

import httpanalyzer
import pyarrow as pa
from webtap.records import http as records

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(os.geteuid() != 0, reason="live capture needs root"),
]


class _Server(http.server.SimpleHTTPRequestHandler):
    """Serves the files; /hold is answered only once the test sets `release` (a request that is
    still waiting for its response when Ctrl-C comes)."""
    release = threading.Event()
    held = threading.Event()

    def do_GET(self):
        if self.path == "/hold":
            self.held.set()
            self.release.wait(WAIT_S)
            self.path = "/x.txt"
        super().do_GET()

    def log_message(self, *a):
        pass


#: Backstop of every wait below. The waits end on events (a record seen in the output), not on
#: time; this only bounds a failure. A transaction on loopback takes milliseconds; the live
#: reader returns at least every 100 ms and the feeder sends records at least every
#: SEND_EVERY_S, so under heavy load an event is seconds away, far below this.
WAIT_S = 120.0


def test_live_ctrl_c_through_two_consumers(tmp_path):
    """Events, not sleeps: the client sends warm-up requests until one comes out as a record (the
    capture is up), then the 40 transactions, then /hold (answered only after the run), then
    a marker request; once the marker's record is out, the capture has read /hold's request
    (one interface, read in order), and Ctrl-C must flush it as a request-only record (before,
    a fixed 1 s for the capture to come up and 0.5 s for the last packets to be read)."""
    (tmp_path / "x.txt").write_text("hello")
    _Server.release.clear()
    _Server.held.clear()
    handler = lambda *a, **kw: _Server(*a, directory=str(tmp_path), **kw)  # noqa: E731
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    port = srv.server_address[1]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    mine = f"webtap-feeder-{os.getpid()}-"          # other pytest workers run feeders too
    before = {f for f in os.listdir("/dev/shm") if f.startswith(mine)}
    seen: set = set()
    up, marker_out = threading.Event(), threading.Event()
    failed: list = []

    def get(path):
        return urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=WAIT_S).read()

    def client():
        try:
            k = 0
            while not up.is_set():           # until a warm-up transaction comes out as a record
                get(f"/x.txt?warm={k}")
                k += 1
                up.wait(0.2)
                if k * 0.2 > WAIT_S:
                    raise AssertionError(f"no warm-up record after {k} requests")
            for i in range(40):
                get(f"/x.txt?i={i}")
            threading.Thread(target=lambda: get("/hold"), daemon=True).start()
            if not _Server.held.wait(WAIT_S):        # the server has it: it crossed lo
                raise AssertionError("/hold never reached the server")
            get("/x.txt?marker")
            # Nudges: on an idle link the last transaction's record waits in the feeder until
            # more packets arrive (seen here: the marker alone never came out before Ctrl-C),
            # so the client keeps a little traffic going until the marker is out.
            k = 0
            while not marker_out.wait(0.2):
                get(f"/x.txt?nudge={k}")
                k += 1
                if k * 0.2 > WAIT_S:
                    raise AssertionError("the marker's record never came out")
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            failed.append(exc)
        finally:
            os.kill(os.getpid(), signal.SIGINT)      # Ctrl-C: ends the input, everything is flushed

    threading.Thread(target=client, daemon=True).start()
    fb: dict = {}
    s = httpanalyzer.Summary(detailed=False)
    batches = []
    try:
        for b in httpanalyzer.iter_record_batches("lo", live=True, bpf=f"tcp port {port}", consumers=2,
                                                  feeder=fb, summary=s):
            batches.append(b)
            seen.update(b.column(b.schema.get_field_index("uri")).to_pylist())
            if not up.is_set() and any(u and u.startswith("/x.txt?warm=") for u in seen):
                up.set()
            if "/x.txt?marker" in seen:
                marker_out.set()
    finally:
        _Server.release.set()
        srv.shutdown()
    assert not failed, (failed, [u for u in seen if u and "i=" not in u])
    assert s.interrupted
    df = records.to_pandas(pa.Table.from_batches(batches, schema=records.SCHEMA))
    paired = df[df.matched]
    mine_paired = paired[paired.uri.str.startswith("/x.txt?i=", na=False)]
    assert len(mine_paired) == 40
    assert set(mine_paired.uri) == {f"/x.txt?i={i}" for i in range(40)}
    # flushed at Ctrl-C: the request still waiting for its response
    hold = df[df.uri == "/hold"]
    assert len(hold) == 1 and not hold.matched.iloc[0] and hold.outcome.iloc[0] == "request_only", hold
    # every message the consumers got is in a record: 2 per pair, 1 per unmatched message
    assert sum(r["messages"] for r in fb["consumers"]) == 2 * len(paired) + (~df.matched).sum()
    assert all(r["messages"] > 0 for r in fb["consumers"])
    assert not multiprocessing.active_children()
    assert not {f for f in os.listdir("/dev/shm") if f.startswith(mine)} - before
