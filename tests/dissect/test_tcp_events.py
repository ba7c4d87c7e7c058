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
def test_head_is_the_payloads_first_bytes(name):
    path = SHARED / name
    if not path.exists():
        pytest.skip(f"shared data absent: {path}")
    n = with_payload = 0
    with open_trace(str(path), progress=False) as tr:
        for b in tr:
            data = np.frombuffer(bytes(b.data), np.uint8)
            ev = dissect(b.packets, data, tcp_events=True).tcp_events.view(TCP_EVENT_DTYPE)
            for e in ev:
                k = min(8, int(e["payload_caplen"]))
                at = int(e["payload_at"])
                want = bytes(data[at:at + k]) + bytes(8 - k)
                assert bytes(e["head"]) == want
                n += 1
                with_payload += k > 0
    assert n > 0 and with_payload > 0


def _check_reuse(path, batch_size, walk, pool):
    """walk(packets, data, pool or None) -> the array a walk wrote (into the pool's buffer, else a
    new one). Each batch's array equals a new array's; the arrays of some batches are held (as a
    slow stage holds them) and stay intact while later batches are walked; buffers are written
    again; at most `keep` are held. Returns (how many items were walked, the pool)."""
    if not path.exists():
        pytest.skip(f"shared data absent: {path}")
    held, copies, buffers, items = [], [], set(), 0
    with open_trace(str(path), progress=False, batch_size=batch_size) as tr:
        for i, b in enumerate(tr):
            data = np.frombuffer(bytes(b.data), np.uint8)
            fresh = walk(b.packets, data, None)
            got = walk(b.packets, data, pool)
            assert bytes(got) == bytes(fresh)
            items += len(got)
            buffers.add(id(got.base))
            if i % 4 == 0:                       # some batches' arrays kept (a slow stage)
                held.append(got)
                copies.append(bytes(fresh))
            del got, fresh
    assert len(held) >= 3
    assert [bytes(e) for e in held] == copies    # none overwritten by the batches after them
    assert len(pool._bufs) <= pool.keep
    assert len(buffers) < i + 1                  # buffers were written again
    held.clear()
    assert pool.get(64) is pool._bufs[0]         # nothing holds them now: the first is reused
    return items


def test_reused_event_buffers_give_the_same_events_and_never_overwrite_held_ones():
    """dissect(events=EventBuffers()) writes each batch's TCP events into a buffer no earlier
    batch's events still use (_check_reuse)."""
    from webtap.dissect import EventBuffers

    items = _check_reuse(SHARED / "traces/arkime/arkime_synthetic.pcap", 64,
                         lambda p, d, pool: dissect(p, d, tcp_events=True, events=pool).tcp_events,
                         EventBuffers(keep=3))
    assert items > 0


def test_reused_tls_message_buffers_give_the_same_messages_and_never_overwrite_held_ones():
    """dissect(tls_watch=..., tls_msgs=TlsMessageBuffers()) writes each batch's TLS/QUIC messages
    (the TLS stage's input, handed to its thread while the walk goes on) into a buffer no held
    batch's messages use (_check_reuse)."""
    from webtap._ext.tls import TlsTable
    from webtap.dissect import TlsMessageBuffers

    table = TlsTable()                           # the watch list's stage
    watch = table.watch
    items = _check_reuse(SHARED / "traces-tls/ja4/latest.pcapng", 16,
                         lambda p, d, pool: dissect(p, d, tls_watch=watch, tls_msgs=pool).tls,
                         TlsMessageBuffers(keep=3))
    assert items > 0
