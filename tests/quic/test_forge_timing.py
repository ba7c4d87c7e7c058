"""forge_quic's per-close times (scan's forge_ns for QUIC rows): one clock read per close."""
import time

import numpy as np

from tests.quic.hello import client_hello, crypto, frame, initial, sni_ext, write
from webtap._ext import urlmatch as um
from webtap.capture import open_trace


def test_forge_quic_times_tile_the_call(tmp_path):
    """Consecutive spans: none negative, together inside the call's own wall time."""
    path = tmp_path / "q.pcap"
    write(path, [frame(initial(crypto(0, client_hello(sni_ext(f"h{i}.example".encode()), quic=True)),
                               dcid=(1000 + i).to_bytes(8, "big")), sport=50000 + i, udp=True)
                 for i in range(100)])
    t = um.SniTable()
    b = next(iter(open_trace(str(path))))
    msgs = t.extract(b.packets, b.data, False)[0]
    assert len(msgs) == 100
    t0 = time.perf_counter_ns()
    fr, offs, ns = um.forge_quic(msgs, b.data, np.arange(100), t.last_dcids)
    wall = time.perf_counter_ns() - t0
    assert len(ns) == 100 and (np.diff(offs) > 0).all()
    assert (ns >= 0).all() and 0 < ns.sum() <= wall
