"""The SPSC ring: FIFO order, wraparound, back-pressure, and a real producer/consumer pair."""
import hashlib
import mmap
import multiprocessing as mp
from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webtap._ext.feeder import FRAME_HEADER_BYTES, RING_HEADER_BYTES, Ring

SMALL = RING_HEADER_BYTES + 8192          # data area 8 KiB: frames of up to 2 KiB


def body(i: int, n: int) -> bytes:
    return (hashlib.sha256(i.to_bytes(8, "little")).digest() * (n // 32 + 1))[:n]


@settings(max_examples=300, deadline=None)
@given(ops=st.lists(st.tuples(st.booleans(), st.integers(0, 2048 - FRAME_HEADER_BYTES)),
                    max_size=400))
def test_random_put_get_keeps_fifo_order_across_wraparound(ops):
    region = bytearray(SMALL)
    prod = Ring(region, init=True)
    cons = Ring(region)                      # the other side attaches to the same memory
    model = deque()
    k = 0
    for put, n in ops:
        if put:
            data = body(k, n)
            ok = prod.put(data, trace=k & 0xFFFF)
            if not model:
                assert ok, "an empty ring refused a frame within max_frame"
            if ok:
                model.append((k & 0xFFFF, data))
                k += 1
            else:
                # full: a frame needs its size (plus, at the end of the area, a PAD) free
                assert prod.used + ((n + FRAME_HEADER_BYTES + 7) & ~7) > prod.capacity - prod.max_frame
                assert cons.get() == model.popleft()
        else:
            got = cons.get()
            if model:
                assert got == model.popleft()
            else:
                assert got is None
    while model:
        assert cons.get() == model.popleft()
    assert cons.get() is None
    assert prod.used == 0


def test_back_pressure_then_progress():
    region = bytearray(SMALL)
    r = Ring(region, init=True)
    n = 0
    while r.put(body(n, 1000)):
        n += 1
    assert 4 <= n <= 8                        # 8 KiB area, ~1 KiB frames
    assert r.get() == (0, body(0, 1000))      # one frame out makes room for one more
    assert r.put(body(n, 1000))
    for i in range(1, n + 1):
        assert r.get() == (0, body(i, 1000))
    assert r.get() is None
    with pytest.raises(ValueError):
        r.put(b"x" * (r.max_frame + 1))


def _consume(region_size, path, q):
    with open(path, "r+b") as f:
        mm = mmap.mmap(f.fileno(), region_size)
    r = Ring(mm)
    h = hashlib.sha256()
    frames = 0
    while True:
        got = r.get()
        if got is None:
            continue
        trace, b = got
        if trace == 0xFFFF:
            break
        h.update(b)
        frames += 1
    del r
    q.put((frames, h.hexdigest()))


def test_two_processes_random_batches(tmp_path):
    """A forked consumer reads 20k frames of random sizes through a 64 KiB ring (hundreds of
    wraparounds) while the producer writes as fast as the ring lets it."""
    size = RING_HEADER_BYTES + 65536
    path = tmp_path / "ring"
    path.write_bytes(b"\0" * size)
    with open(path, "r+b") as f:
        mm = mmap.mmap(f.fileno(), size)
    r = Ring(mm, init=True)
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_consume, args=(size, str(path), q))
    p.start()
    rng = np.random.default_rng(7)
    h = hashlib.sha256()
    for i in range(20_000):
        b = body(i, int(rng.integers(0, 3000)))
        while not r.put(b, trace=1):
            pass
        h.update(b)
    while not r.put(b"", trace=0xFFFF):
        pass
    frames, digest = q.get(timeout=60)
    p.join(10)
    assert p.exitcode == 0
    assert frames == 20_000 and digest == h.hexdigest()
