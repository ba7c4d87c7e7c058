"""The walk's TCP events (dissect(tcp_events=...), ext/walk/message.pxd TcpEvent): each event's
`head` holds its payload's first min(8, payload_caplen) bytes, zeros after them, so that a stage
can read a record header at a segment's start without reading the payload in place (the
exchange stage, issue 33). Checked against the packets' own bytes at payload_at, on shared
traces of TCP with and without TLS."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import SHARED
from webtap.capture import open_trace
from webtap.dissect import dissect
from webtap.records.message import TCP_EVENT_DTYPE

TRACES = ["traces-tls/arkime/tls-split-client-hello.pcap", "traces-tls/ja4/latest.pcapng",
          "traces/arkime/arkime_synthetic.pcap"]


@pytest.mark.parametrize("name", TRACES)
@pytest.mark.parametrize("mode", [1, 2])
def test_head_is_the_payloads_first_bytes(name, mode):
    path = SHARED / name
    if not path.exists():
        pytest.skip(f"shared data absent: {path}")
    n = with_payload = 0
    with open_trace(str(path), progress=False) as tr:
        for b in tr:
            data = np.frombuffer(bytes(b.data), np.uint8)
            ev = dissect(b.packets, data, tcp_events=mode).tcp_events.view(TCP_EVENT_DTYPE)
            for e in ev:
                k = min(8, int(e["payload_caplen"]))
                at = int(e["payload_at"])
                want = bytes(data[at:at + k]) + bytes(8 - k)
                assert bytes(e["head"]) == want
                n += 1
                with_payload += k > 0
    assert n > 0 and with_payload > 0
