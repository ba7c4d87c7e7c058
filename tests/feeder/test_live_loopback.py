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

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(os.geteuid() != 0, reason="live capture needs root"),
]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass


def test_live_ctrl_c_through_two_consumers(tmp_path):
    (tmp_path / "x.txt").write_text("hello")
    handler = lambda *a, **kw: _Quiet(*a, directory=str(tmp_path), **kw)  # noqa: E731
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    port = srv.server_address[1]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    mine = f"webtap-feeder-{os.getpid()}-"          # other pytest workers run feeders too
    before = {f for f in os.listdir("/dev/shm") if f.startswith(mine)}

    def client():
        time.sleep(1.0)                          # the capture and the consumers are up
        for i in range(40):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/x.txt?i={i}").read()
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGINT)      # Ctrl-C: ends the input, everything is flushed

    threading.Thread(target=client, daemon=True).start()
    fb: dict = {}
    s = httpanalyzer.Summary(detailed=False)
    try:
        df = httpanalyzer.analyze("lo", live=True, bpf=f"tcp port {port}", consumers=2, feeder=fb,
                                  summary=s)
    finally:
        srv.shutdown()
    assert s.interrupted
    paired = df[df.matched]
    assert len(paired) == 40
    assert set(paired.uri) == {f"/x.txt?i={i}" for i in range(40)}
    assert sum(r["messages"] for r in fb["consumers"]) == 80
    assert all(r["messages"] > 0 for r in fb["consumers"])
    assert not multiprocessing.active_children()
    assert not {f for f in os.listdir("/dev/shm") if f.startswith(mine)} - before
