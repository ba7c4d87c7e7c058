"""Live mode never blocks the reader: a full ring drops the frame and counts it."""
import numpy as np

from httpanalyzer.feeder import FeederPairer, classify_packets
from tests.msgbuild import MsgBuilder
from tests.strategies import T0
from webtap._ext.feeder import RING_HEADER_BYTES, STAT_NAMES, Dispatcher, Ring, classify_batch, hash_eq3


def test_full_ring_drops_and_counts_in_live_mode():
    region = bytearray(RING_HEADER_BYTES + 16384)
    Ring(region, init=True)                       # nobody consumes: the ring fills up
    d = Dispatcher([region], live=True)
    b = MsgBuilder()
    for k in range(400):
        b.req(T0 + k, "10.0.0.1", 1024 + k, "10.9.9.9", 80, k, k, uri="/" + "x" * 100)
    pk, data = b.packets()
    for i in range(0, 400, 20):
        feed, _ = classify_batch(pk[i:i + 20], data)
        assert len(feed) == 20
        d.feed_packets(feed, data)                # returns at once even when full
    st = dict(zip(STAT_NAMES, d.stats[0]))
    assert st["dropped_messages"] > 0
    assert st["messages"] + st["dropped_messages"] == 400
    assert Ring(region).used > 16384 - Ring(region).max_frame - 8


def test_live_feeder_pairs_what_it_forwards():
    b = MsgBuilder()
    for k in range(2000):
        b.req(T0 + k * 1000, "10.0.0.1", 1024 + k % 100, "10.9.9.9", 80, k, 7 * k + 1)
        b.resp(T0 + k * 1000 + 500, "10.9.9.9", 80, "10.0.0.1", 1024 + k % 100, 7 * k + 1, k)
    msgs, _ = b.build()
    pk, data = b.packets()
    with FeederPairer(2, live=True) as fp:        # rings large enough: nothing dropped
        fp.feed(classify_packets(pk, data).msgs, data)
        fp.flush()
        got = fp.take()
        bal = fp.balance()["consumers"]
    assert got.num_rows == 2000
    assert sum(r["dropped_messages"] for r in bal) == 0
    share = np.bincount(hash_eq3(msgs) % 2, minlength=2)
    assert [r["messages"] for r in bal] == list(share)
