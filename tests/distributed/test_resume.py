"""FileReader.export_state / resume: a file cut at every record or block and read piece by
piece in fresh readers gives exactly the packets of one pass (timestamps, indices, bytes) and
the same counters, for pcap in both byte orders and pcapng with several sections, byte orders,
interfaces, timestamp resolutions, simple packet blocks (no timestamp of their own), unknown
and corrupt blocks. Through the core's chunk API (webtap.capture.plan_chunks / read_chunk), which
the distributed analyzer schedules."""
from __future__ import annotations

import numpy as np
import pytest

from tests import pcapbuild as pb
from webtap.capture import open_trace, plan_chunks, read_chunk
from webtap.records.message import SOURCE_REASONS


def _frames(n, seed=0):
    rng = np.random.default_rng(seed)
    return [bytes(rng.integers(0, 256, int(rng.integers(14, 300)), dtype=np.uint8)) for _ in range(n)]


def _pcapng() -> bytes:
    f = _frames(40, 1)
    out = [pb.shb(), pb.idb(1), pb.idb(101, tsresol=9)]
    for i in range(10):
        out.append(pb.epb(i % 2, (1_700_000_000 + i) * (10**6 if i % 2 == 0 else 10**9), f[i]))
        if i == 4:
            out.append(pb.spb(f[20]))             # takes the previous packet's time
            out.append(pb.unknown_block())
    out.append(pb.shb(big_endian=True))
    out.append(pb.idb(1, tsresol=3, big_endian=True))
    for i in range(10, 20):
        out.append(pb.epb(0, (1_600_000_000 + i) * 1000, f[i], big_endian=True))
        if i == 15:
            out.append(pb.spb(f[21], big_endian=True))
    bad = bytearray(pb.epb(0, 5, f[30], big_endian=True))
    bad[4:8] = b"\xff\xff\xff\xf0"                # a corrupt block length: resynchronise
    out.append(bytes(bad))
    out.append(pb.epb(0, 1_650_000_000_000, f[31], big_endian=True))
    return b"".join(out)


def _pcap(big_endian) -> bytes:
    f = _frames(30, 2)
    return pb.pcap([(1_700_000_000_000_000_000 + i * 1_000_003, f[i]) for i in range(30)],
                   big_endian=big_endian, nano=big_endian)


def _one_pass(path):
    with open_trace(path) as t:
        bs = list(t)
        counters = t.counters
    pk = [(int(p["ts_ns"]), int(p["index"]), b.packet(i)) for b in bs for i, p in enumerate(b.packets)]
    return pk, counters


@pytest.mark.parametrize("kind", ["pcapng", "pcap-le", "pcap-be"])
@pytest.mark.parametrize("every", [1, 2, 7])
def test_resume_everywhere(tmp_path, kind, every):
    data = _pcapng() if kind == "pcapng" else _pcap(kind == "pcap-be")
    path = tmp_path / f"t.{kind}"
    path.write_bytes(data)
    ref, ref_counters = _one_pass(path)
    chunks = list(plan_chunks(path, chunk_packets=every, exact_packets=True))
    assert len(chunks) >= len(ref) // every
    got = []
    counters = dict.fromkeys(SOURCE_REASONS, 0)
    for ch in chunks:
        totals = {"source": {}, "dissect": {}, "warnings": []}
        for packets, buf in read_chunk(path, ch, None, totals):
            for p in packets:
                off = int(p["offset"])
                got.append((int(p["ts_ns"]), int(p["index"]), bytes(buf[off: off + int(p["caplen"])])))
        for k, v in totals["source"].items():
            counters[k] += v
    assert got == ref
    assert counters == ref_counters
    if kind == "pcapng":
        assert ref_counters["bad_record"] == 1 and ref_counters["sections"] == 2
