"""The parallel plan (webtap.rangeplan, issue 36): byte ranges surveyed apart, checked to meet.

Every run is compared with one process (httpanalyzer.iter_record_batches over the same file):
the records as a multiset, every column, and the counters (tests/distributed/test_distributed's
same()). The adversarial files are built here byte by byte (pcap-savefile(5); pcapng,
draft-ietf-opsawg-pcapng): a payload that carries a chain of fake pcap records exactly at a
range's start, ranges smaller than one packet, pcapng with several sections (both byte orders)
and interfaces (two timestamp resolutions, an interface block after packets), a corrupt record
and a Simple Packet Block (both planned sequentially instead), gzip.
"""
from __future__ import annotations

import gzip
import shutil
import struct

import pytest

from httpanalyzer import distributed as D
from tests.distributed.test_distributed import same
from webtap import rangeplan as R
from webtap.capture import open_trace


# ------------------------------------------------------------------------- building files

def _frames(path, limit=None):
    """(ts_ns, frame bytes) of a trace's packets, in file order."""
    out = []
    with open_trace(path) as t:
        for b in t:
            for i in range(len(b)):
                out.append((int(b.packets["ts_ns"][i]), b.packet(i)))
                if limit and len(out) >= limit:
                    return out
    return out


def _pcap_record(ts_ns, frame, nano=True):
    sec, frac = divmod(ts_ns, 10**9)
    if not nano:
        frac //= 1000
    return struct.pack("<IIII", sec, frac, len(frame), len(frame)) + frame


def _pcap(frames, nano=True) -> bytes:
    head = struct.pack("<IHHiIII", 0xA1B23C4D if nano else 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)
    return head + b"".join(_pcap_record(ts, fr, nano) for ts, fr in frames)


def _udp_frame(payload: bytes) -> bytes:
    """An Ethernet/IPv4/UDP frame (checksum 0: none, RFC 768) carrying payload."""
    ip_len = 20 + 8 + len(payload)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, 1, 0, 64, 17, 0,
                     bytes([10, 9, 9, 1]), bytes([10, 9, 9, 2]))
    udp = struct.pack("!HHHH", 40000, 9999, 8 + len(payload), 0)
    return b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00" + ip + udp + payload


def _pad4(b: bytes) -> bytes:
    return b + b"\x00" * (-len(b) % 4)


def _block(btype: int, body: bytes, be: bool) -> bytes:
    e = ">" if be else "<"
    body = _pad4(body)
    n = 12 + len(body)
    return struct.pack(f"{e}II", btype, n) + body + struct.pack(f"{e}I", n)


def _shb(be: bool) -> bytes:
    e = ">" if be else "<"
    return _block(0x0A0D0D0A, struct.pack(f"{e}IHHq", 0x1A2B3C4D, 1, 0, -1), be)


def _idb(be: bool, tsresol: int | None) -> bytes:
    e = ">" if be else "<"
    opts = b""
    if tsresol is not None:
        opts = struct.pack(f"{e}HH", 9, 1) + bytes([tsresol]) + b"\x00" * 3
        opts += struct.pack(f"{e}HH", 0, 0)
    return _block(1, struct.pack(f"{e}HHI", 1, 0, 262144) + opts, be)


def _epb(be: bool, iface: int, ts_ns: int, frame: bytes, tsresol: int | None) -> bytes:
    e = ">" if be else "<"
    units = ts_ns // 1000 if tsresol is None else ts_ns // 10 ** (9 - tsresol)
    body = struct.pack(f"{e}IIIII", iface, units >> 32, units & 0xFFFFFFFF, len(frame),
                       len(frame)) + _pad4(frame)
    return _block(6, body, be)


@pytest.fixture(scope="module")
def http_frames(jumpy):
    """The first packets of the shared Ethernet traces concatenated (tests/conftest.py)."""
    return _frames(jumpy, limit=6000)


@pytest.fixture(scope="module")
def traces():
    from tests.conftest import TRACES, shared_trace_files

    files = shared_trace_files()
    if not files:
        pytest.skip(f"shared traces absent: {TRACES}")
    return files


# ------------------------------------------------------------------------- the plan itself

def test_ranges_from_size_and_workers():
    M = 1 << 20
    # one range per worker, a multiple of the workers when ranges would exceed 256 MiB, one
    # range below 16 MiB per worker; explicit sizes start at their multiples
    assert R.ranges(100 * M, 2) == [(0, 50 * M), (50 * M, 100 * M)]
    assert len(R.ranges(1500 * M, 2)) == 6 and len(R.ranges(1500 * M, 4)) == 8
    assert R.ranges(20 * M, 2) == [(0, 20 * M)]
    assert R.ranges(10, 1, 4) == [(0, 4), (4, 8), (8, 10)]
    rs = R.ranges(387 << 30, 64)
    assert len(rs) == 1600 and rs[-1][1] == 387 << 30 and all(h - l <= 256 * M for l, h in rs)


@pytest.mark.parametrize("part", range(3))
def test_every_shared_trace_in_ranges(traces, tmp_path, part):
    """Every shared trace (a third per test, for xdist), planned in ranges of a sixth of the
    file and, for the small ones, of 1500 bytes (about a packet each): the records and counters
    of one process. The check must have re-planned some ranges (a wrong guess, or a range
    inside one record)."""
    resurveyed = planned = tiny = 0
    mine = traces[part::3]
    for k, p in enumerate(mine):
        size = p.stat().st_size
        res, _ = same([str(p)], tmp_path, chunk_bytes=max(64, size // 6 + 1))
        planned += res.plan_stats.get("ranges", 0)
        resurveyed += res.plan_stats.get("resurveyed", 0)
        if size <= 100_000:
            res, _ = same([str(p)], tmp_path, chunk_bytes=1500, gc_timeout=2.0)
            tiny += res.chunks > 3
            resurveyed += res.plan_stats.get("resurveyed", 0)
        if k % 20 == 19:
            for f in tmp_path.iterdir():
                shutil.rmtree(f)
    assert planned > 5 * len(mine) // 2 and resurveyed > 20 and tiny > 30


def test_a_fake_record_chain_at_a_range_start(http_frames, tmp_path):
    """A UDP payload holding ten fake pcap records (consistent times and lengths, each leading
    to the next) that begins exactly where a range begins: the worker's guess is the fake
    chain, the client sees that it does not start where the previous range ended, and re-plans
    that range from the true start."""
    frames = http_frames[:3000]
    ts0 = frames[1500][0]
    fake = b"".join(_pcap_record(ts0 + 1000 * i, b"\xab" * 40) for i in range(10))
    carrier = _udp_frame(b"\x00" * 6 + fake)
    data = _pcap(frames[:1500] + [(ts0, carrier)] + frames[1500:])
    fake_at = len(_pcap(frames[:1500])) + 16 + 14 + 20 + 8 + 6
    path = tmp_path / "fake.pcap"
    path.write_bytes(data)
    # the guess from inside the range is the fake chain
    s = R.survey(str(path), fake_at, 2 * fake_at)
    assert s.start == fake_at and s.regular
    res, ref = same([str(path)], tmp_path, chunk_bytes=fake_at)
    assert res.plan_stats["resurveyed"] >= 1 and res.chunks >= 2
    assert len(ref) > 100


def test_ranges_smaller_than_a_packet(http_frames, tmp_path):
    """Ranges of 48 bytes: each holds at most one record start (most none): one chunk per
    packet, every boundary repaired, the records of one process."""
    frames = [f for f in http_frames if b"HTTP/1." in f[1]][:400]   # requests and responses
    path = tmp_path / "one.pcap"
    path.write_bytes(_pcap(frames, nano=False))
    for gc in (60.0, 0.05):
        res, ref = same([str(path)], tmp_path, chunk_bytes=48, gc_timeout=gc)
        assert res.chunks == len(frames)
        assert res.plan_stats["ranges"] == -(-path.stat().st_size // 48)
        assert len(ref) > 100


def _pcapng_sections(frames) -> bytes:
    """Three sections: little-endian with two interfaces (microseconds, nanoseconds) and a
    third interface block after packets; big-endian with one; little-endian again with two."""
    out = []
    cut = [0, len(frames) // 3, 2 * len(frames) // 3, len(frames)]
    # section 1
    out += [_shb(False), _idb(False, None), _idb(False, 9)]
    res = {0: None, 1: 9}
    for j, (ts, fr) in enumerate(frames[cut[0]:cut[1]]):
        if j == 50:
            out.append(_idb(False, 6))
            res[2] = 6
        i = j % (3 if j >= 50 else 2)
        out.append(_epb(False, i, ts, fr, res[i]))
    # section 2, big-endian
    out += [_shb(True), _idb(True, 9)]
    out += [_epb(True, 0, ts, fr, 9) for ts, fr in frames[cut[1]:cut[2]]]
    # section 3
    out += [_shb(False), _idb(False, 6), _idb(False, None)]
    out += [_epb(False, j % 2, ts, fr, 6 if j % 2 == 0 else None)
            for j, (ts, fr) in enumerate(frames[cut[2]:cut[3]])]
    return b"".join(out)


def test_pcapng_sections_and_interfaces(http_frames, tmp_path):
    """Chunks that start inside each section get that section's byte order and interfaces
    (rebuilt on the client from the blocks the surveys listed)."""
    path = tmp_path / "multi.pcapng"
    path.write_bytes(_pcapng_sections(http_frames[:3000]))
    with open_trace(path) as t:
        for _ in t:
            pass
        assert t.counters["sections"] == 3 and t.counters["interfaces"] == 6
        assert t.counters["bad_interface"] == 0
    size = path.stat().st_size
    for cb in (size // 7, 5000, 900):
        res, ref = same([str(path)], tmp_path, chunk_bytes=cb, gc_timeout=5.0)
        assert res.chunks > 5 and len(ref) > 100


def test_corrupt_record_and_simple_packet_block_are_planned_sequentially(http_frames, tmp_path):
    """What the reader reads only in sequence (a corrupt header it resynchronises on; a Simple
    Packet Block, whose time is the previous packet's): that file is planned by the header
    scan, on a worker -- still exactly one process's records and counters."""
    frames = http_frames[:2000]
    body = _pcap(frames)
    cut = len(_pcap(frames[:1000]))
    bad = body[:cut] + struct.pack("<IIII", 1, 2, 0x7FFFFFFF, 0x7FFFFFFF) + body[cut:]
    p1 = tmp_path / "corrupt.pcap"
    p1.write_bytes(bad)
    res, ref = same([str(p1)], tmp_path, chunk_bytes=20000)
    assert res.plan_stats["sequential"] == 1 and res.summary.source["bad_record"] == 1
    assert len(ref) > 100
    spb = _block(3, struct.pack("<I", len(frames[5][1])) + frames[5][1], False)
    ng = b"".join([_shb(False), _idb(False, 9)] + [_epb(False, 0, ts, fr, 9) for ts, fr in frames[:1000]]
                  + [spb] + [_epb(False, 0, ts, fr, 9) for ts, fr in frames[1000:]])
    p2 = tmp_path / "spb.pcapng"
    p2.write_bytes(ng)
    res, ref = same([str(p2)], tmp_path, chunk_bytes=20000)
    assert res.plan_stats["sequential"] == 1 and len(ref) > 100


def test_gzip_is_one_chunk(http_frames, tmp_path):
    path = tmp_path / "t.pcap.gz"
    path.write_bytes(gzip.compress(_pcap(http_frames[:2000])))
    res, ref = same([str(path)], tmp_path, chunk_bytes=1000)
    assert res.chunks == 1 and len(ref) > 100


def test_several_traces_in_ranges(http_frames, tmp_path):
    """Consecutive files given out of order: planned in ranges each, ordered by their first
    packets, one stream as in one process."""
    fr = http_frames[:3000]
    paths = []
    for k in range(3):
        p = tmp_path / f"part{k}.pcap"
        p.write_bytes(_pcap(fr[k * 1000:(k + 1) * 1000]))
        paths.append(str(p))
    res, ref = same([paths[2], paths[0], paths[1]], tmp_path, chunk_bytes=30000)
    assert res.planner == "ranges" and res.chunks > 6 and ref.request_trace.nunique() > 1


def test_planner_choice():
    with pytest.raises(ValueError):
        D.run(["x.pcap"], "/nonexistent/out", planner="ranges", chunk_packets=10)
    with pytest.raises(ValueError):
        D.run(["x.pcap"], "/nonexistent/out", planner="bogus")
