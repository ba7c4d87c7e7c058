"""Live capture through the real libpcap on the loopback interface (needs root)."""
from __future__ import annotations

import os
import socket
import time

import pytest

from webtap.capture import open_live
from webtap.errors import BpfError, CaptureError

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(os.geteuid() != 0, reason="live capture needs root"),
]


def _collect(cap, want, seconds=5.0):
    got, deadline = [], time.monotonic() + seconds
    for batch in cap:
        got.extend(batch.packet(i) for i in range(len(batch)))
        if len(got) >= want or time.monotonic() > deadline:
            cap.stop()
    return got


def _free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_live_capture_on_loopback_with_kernel_bpf():
    port = _free_udp_port()
    cap = open_live("lo", bpf=f"udp dst port {port}", timeout_ms=50, batch_size=64)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for i in range(20):
            s.sendto(b"webtap-%03d" % i, ("127.0.0.1", port))
    got = _collect(cap, 20)
    assert len(got) == 20
    assert [g[-10:] for g in got] == [b"webtap-%03d" % i for i in range(20)]
    assert cap.counters["packets"] == 20
    assert cap.stats()["dropped"] == 0


def test_inject_is_seen_by_a_second_capture():
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    port = _free_udp_port()
    cap = open_live("lo", bpf=f"udp dst port {port}", timeout_ms=50)
    tx = open_live("lo", bpf="udp port 1", timeout_ms=50)
    frame = bytes(Ether(src="00:00:00:00:00:00", dst="00:00:00:00:00:00")
                  / IP(src="127.0.0.1", dst="127.0.0.1") / UDP(sport=9, dport=port) / b"forged!")
    assert tx.inject(frame) == len(frame)
    got = _collect(cap, 1)
    assert got and got[0] == frame


def test_unknown_interface_and_bad_filter_raise_with_libpcap_text():
    with pytest.raises(CaptureError, match="no-such-if0"):
        open_live("no-such-if0")
    with pytest.raises(BpfError, match="syntax error"):
        open_live("lo", bpf="udp and (")
