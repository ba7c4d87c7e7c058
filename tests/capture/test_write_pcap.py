"""write_pcap: what it writes reads back identical, through webtap and through libpcap."""
from __future__ import annotations

import os

import pytest

from tests import pcapbuild as pb
from webtap.capture import open_trace, write_pcap


def _packets(path, **kw):
    return [(int(b.packets["ts_ns"][i]), b.packet(i), int(b.packets["wirelen"][i]))
            for b in open_trace(path, **kw) for i in range(len(b))]


@pytest.mark.parametrize("batch_size", [1, 7, 4096])
def test_round_trip(tmp_path, batch_size):
    pkts = [(1_700_000_000_000_000_000 + i * 123_456_789, os.urandom(20 + i * 37 % 1500), 2000)
            for i in range(300)]
    src = tmp_path / "src.pcap"
    src.write_bytes(pb.pcap(pkts, nano=True))
    out = tmp_path / "out.pcap"
    n = write_pcap(out, open_trace(src, batch_size=batch_size), linktype=1)
    assert n == 300
    assert _packets(out) == pkts
    assert _packets(out, engine="libpcap") == pkts


def test_loopback_demo_capture_is_real_http(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("live capture needs root")
    import importlib.util
    import pathlib

    import httpanalyzer

    # the demo sits above both packages (demo/webtap_demo.py), not in webtap/
    script = pathlib.Path(__file__).resolve().parents[2] / "demo" / "webtap_demo.py"
    spec = importlib.util.spec_from_file_location("webtap_demo", script)
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    capture_loopback = demo.capture_loopback

    trace = capture_loopback(tmp_path / "lo.pcap", requests=40)
    df = httpanalyzer.analyze(trace)
    paired = df[df["matched"]]
    assert len(paired) == 40
    assert set(paired["status"].astype(int)) == {200, 404}
    assert (paired["response_time"].dt.total_seconds() > 0).all()
