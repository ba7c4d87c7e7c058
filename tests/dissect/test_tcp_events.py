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


@pytest.mark.parametrize("mode", [1, 2])
def test_reused_event_buffers_give_the_same_events_and_never_overwrite_held_ones(mode):
    """dissect(events=EventBuffers()) writes each batch's TCP events into a buffer no earlier
    batch's events still use: the events are the same as in a new array per batch, a batch
    whose events are held keeps them intact while later batches are walked, and a buffer is
    written again once nothing holds its events (at most `keep` buffers held)."""
    from webtap.dissect import EventBuffers

    path = SHARED / "traces/arkime/arkime_synthetic.pcap"
    if not path.exists():
        pytest.skip(f"shared data absent: {path}")
    pool = EventBuffers(keep=3)
    held, copies, buffers = [], [], set()
    with open_trace(str(path), progress=False, batch_size=64) as tr:
        for i, b in enumerate(tr):
            data = np.frombuffer(bytes(b.data), np.uint8)
            fresh = dissect(b.packets, data, tcp_events=mode).tcp_events
            ev = dissect(b.packets, data, tcp_events=mode, events=pool).tcp_events
            assert bytes(ev) == bytes(fresh)
            buffers.add(id(ev.base))
            if i % 4 == 0:                       # some batches' events kept (as a slow stage would)
                held.append(ev)
                copies.append(bytes(fresh))
            del ev, fresh
    assert len(held) >= 3
    assert [bytes(e) for e in held] == copies    # none overwritten by the batches after them
    assert len(pool._bufs) <= 3
    assert len(buffers) < i + 1                  # buffers were written again
    held.clear()
    assert pool.get(64) is pool._bufs[0]         # nothing holds them now: the first is reused


def test_reused_tls_message_buffers_give_the_same_messages_and_never_overwrite_held_ones():
    """dissect(tls_watch=..., tls_msgs=TlsMessageBuffers()) writes each batch's TLS/QUIC messages
    (the TLS stage's input, handed to its thread while the walk goes on) into a buffer no held
    batch's messages use: the messages equal those of a new array per batch, held ones stay
    intact while later batches are walked, and a buffer no one holds is written again."""
    from webtap._ext.tls import TlsTable
    from webtap.dissect import TlsMessageBuffers

    path = SHARED / "traces-tls/ja4/latest.pcapng"
    if not path.exists():
        pytest.skip(f"shared data absent: {path}")
    table = TlsTable()                           # the watch list is the table's
    watch = table.watch
    pool = TlsMessageBuffers(keep=3)
    held, copies, buffers, n_msgs = [], [], set(), 0
    with open_trace(str(path), progress=False, batch_size=16) as tr:
        for i, b in enumerate(tr):
            data = np.frombuffer(bytes(b.data), np.uint8)
            fresh = dissect(b.packets, data, tls_watch=watch).tls
            msgs = dissect(b.packets, data, tls_watch=watch, tls_msgs=pool).tls
            assert bytes(msgs) == bytes(fresh)
            n_msgs += len(msgs)
            buffers.add(id(msgs.base))
            if i % 4 == 0:                       # some batches' messages kept (a slow stage)
                held.append(msgs)
                copies.append(bytes(fresh))
            del msgs, fresh
    assert n_msgs > 0 and len(held) >= 3
    assert [bytes(m) for m in held] == copies    # none overwritten by the batches after them
    assert len(pool._bufs) <= 3
    assert len(buffers) < i + 1                  # buffers were written again
