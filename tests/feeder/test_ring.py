"""The SPSC ring through the product's own path: a Dispatcher writes PKTS frames of HTTP first
packets (feed_packets), a consumer reads them (Ring.next_frame / release). FIFO order and
contents across wraparound, back-pressure (live: a refused frame is counted, never written), and
a real producer/consumer pair in two processes."""
import hashlib
import mmap
import multiprocessing as mp
from collections import deque

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from webtap._ext.feeder import (FRAME_END, FRAME_HEADER_BYTES, FRAME_PKTS, RING_HEADER_BYTES,
                                STAT_NAMES, Dispatcher, Ring, feed_dtype)
from webtap.records.message import PACKET_DTYPE

SMALL = RING_HEADER_BYTES + 8192          # data area 8 KiB: frames of up to 2 KiB
PER_PKT = PACKET_DTYPE.itemsize + 8       # a PacketRef and its clock in the frame
DROPPED = STAT_NAMES.index("dropped_messages")


def body(i: int, n: int) -> bytes:
    return (hashlib.sha256(i.to_bytes(8, "little")).digest() * (n // 32 + 1))[:n]


def frame_bytes(sizes) -> int:
    return (FRAME_HEADER_BYTES + sum(PER_PKT + n for n in sizes) + 7) & ~7


def packets(first: int, sizes, trace_ts: int):
    """FeedPkt records of len(sizes) packets (bodies body(first + k, size)) and their buffer.
    The dispatcher routes on the FeedPkt fields and copies the captured bytes: it does not
    parse them, so any bytes do (classify_batch's side is tested in test_reader_classify)."""
    bodies = [body(first + k, n) for k, n in enumerate(sizes)]
    pk = np.zeros(len(sizes), dtype=feed_dtype())
    lens = np.array(sizes, dtype=np.int64)
    pk["offset"] = np.concatenate([[0], np.cumsum(lens)[:-1]]) if len(sizes) else lens
    pk["caplen"] = pk["wirelen"] = lens
    pk["ts_ns"] = trace_ts + np.arange(len(sizes))
    pk["index"] = first + np.arange(len(sizes))
    pk["kind"] = 1                            # requests: Eq. 3 routing, no 1xx route
    pk["ip_version"] = 4
    data = np.frombuffer(b"".join(bodies) or b"\0", dtype=np.uint8)
    return pk, data, bodies


def take(ring: Ring, timeout=0.0):
    """The next frame as (kind, trace, [packet bytes], [packet index]), released; None if none."""
    fr = ring.next_frame(timeout)
    if fr is None:
        return None
    kind, trace, tick, pkts, clocks, data, size = fr
    got = [bytes(data[int(p["offset"]):int(p["offset"]) + int(p["caplen"])]) for p in pkts]
    idx = [int(p["index"]) for p in pkts]
    n = len(pkts)
    del pkts, clocks, data, fr
    ring.release(size, n)
    return kind, trace, got, idx


@settings(max_examples=300, deadline=None)
@given(ops=st.lists(st.tuples(st.booleans(), st.integers(0, 2048 - FRAME_HEADER_BYTES - PER_PKT)),
                    max_size=400))
def test_random_feed_take_keeps_fifo_order_across_wraparound(ops):
    region = bytearray(SMALL)
    cons = Ring(region, init=True)
    d = Dispatcher([region], live=True)       # live: a full ring refuses the frame, counted
    prod = Ring(region)                       # the producer's view of the same memory
    model = deque()
    k = 0
    for put, n in ops:
        if put:
            pk, data, bodies = packets(k, [n], 1_000_000 + k)
            before = int(d.stats[0, DROPPED])
            used = prod.used
            d.feed_packets(pk, data, k & 0xFFFF)
            ok = int(d.stats[0, DROPPED]) == before
            if not model:
                assert ok, "an empty ring refused a frame within max_frame"
            if ok:
                model.append((k & 0xFFFF, bodies, [k]))
            else:
                # full: a frame needs its size (plus, at the end of the area, a PAD) free
                assert used + frame_bytes([n]) > prod.capacity - prod.max_frame
                assert take(cons) == (FRAME_PKTS, *model.popleft())
            k += 1
        else:
            got = take(cons)
            if model:
                assert got == (FRAME_PKTS, *model.popleft())
            else:
                assert got is None
    while model:
        assert take(cons) == (FRAME_PKTS, *model.popleft())
    assert take(cons) is None
    assert prod.used == 0


def test_back_pressure_then_progress():
    region = bytearray(SMALL)
    r = Ring(region, init=True)
    d = Dispatcher([region], live=True)
    n = 0
    while True:
        pk, data, _ = packets(n, [1000], n)
        d.feed_packets(pk, data)
        if d.stats[0, DROPPED]:
            break
        n += 1
    assert 4 <= n <= 8                        # 8 KiB area, ~1 KiB frames
    assert take(r) == (FRAME_PKTS, 0, [body(0, 1000)], [0])   # one frame out: room for one more
    pk, data, _ = packets(n + 1, [1000], n + 1)
    d.feed_packets(pk, data)
    assert d.stats[0, DROPPED] == 1
    for i in list(range(1, n)) + [n + 1]:
        assert take(r) == (FRAME_PKTS, 0, [body(i, 1000)], [i])
    assert take(r) is None
    # a packet larger than a frame leaves with the first bytes a frame holds (its HTTP head)
    pk, data, bodies = packets(0, [r.max_frame], n + 2)
    d.feed_packets(pk, data)
    lim = (r.max_frame - FRAME_HEADER_BYTES - PER_PKT) & ~7
    assert take(r) == (FRAME_PKTS, 0, [bodies[0][:lim]], [0])


def test_many_packets_of_a_batch_share_frames():
    """One batch of small packets leaves as few frames, each packet with its own bytes."""
    region = bytearray(RING_HEADER_BYTES + 65536)
    r = Ring(region, init=True)
    d = Dispatcher([region])
    sizes = list(range(0, 300, 3))
    pk, data, bodies = packets(0, sizes, 0)
    d.feed_packets(pk, data, 7)
    got, idx, frames = [], [], 0
    while (fr := take(r)) is not None:
        assert fr[0] == FRAME_PKTS and fr[1] == 7
        got += fr[2]
        idx += fr[3]
        frames += 1
    assert got == bodies and idx == list(range(len(sizes)))
    assert 1 <= frames < len(sizes) // 4


def _consume(region_size, path, q):
    with open(path, "r+b") as f:
        mm = mmap.mmap(f.fileno(), region_size)
    r = Ring(mm)
    h = hashlib.sha256()
    pkts = 0
    while True:
        fr = take(r, 1.0)
        if fr is None:
            continue
        kind, trace, got, idx = fr
        if kind == FRAME_END:
            break
        for b in got:
            h.update(b)
        pkts += len(got)
    del r
    q.put((pkts, h.hexdigest()))


def test_two_processes_random_batches(tmp_path):
    """A forked consumer reads 20k packets of random sizes, in batches of 1-20, through a 64 KiB
    ring (hundreds of wraparounds) while the dispatcher writes as fast as the ring lets it
    (offline: it waits for room)."""
    size = RING_HEADER_BYTES + 65536
    path = tmp_path / "ring"
    path.write_bytes(b"\0" * size)
    with open(path, "r+b") as f:
        mm = mmap.mmap(f.fileno(), size)
    Ring(mm, init=True)
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_consume, args=(size, str(path), q))
    p.start()
    d = Dispatcher([mm])
    rng = np.random.default_rng(7)
    h = hashlib.sha256()
    k = 0
    while k < 20_000:
        sizes = [int(x) for x in rng.integers(0, 3000, size=int(rng.integers(1, 21)))]
        pk, data, bodies = packets(k, sizes, k)
        d.feed_packets(pk, data, 1)
        for b in bodies:
            h.update(b)
        k += len(sizes)
    d.end()
    n, digest = q.get(timeout=120)
    p.join(10)
    assert p.exitcode == 0
    assert n == k and digest == h.hexdigest()
    assert d.stats[0, DROPPED] == 0
