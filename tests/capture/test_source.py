"""Capture stage: the mmap pcap/pcapng reader, gzip, BPF, libpcap handles, bad input."""
from __future__ import annotations

import gzip
import hashlib
import os
import re
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import pcapbuild as pb
from tests.conftest import TRACES, shared_trace_files
from webtap._ext import source as _source
from webtap.capture import open_trace
from webtap.errors import BpfError, NotACapture
from webtap.records.message import PACKET_DTYPE, SOURCE_REASONS


def read_all(path, **kw):
    """All packets of a trace as (PACKET_DTYPE array, list of packet bytes, trace)."""
    trace = open_trace(path, progress=False, **kw)
    refs, datas = [], []
    for b in trace:
        refs.append(b.packets.copy())
        datas.extend(b.packet(i) for i in range(len(b)))
    arr = np.concatenate(refs) if refs else np.empty(0, PACKET_DTYPE)
    return arr, datas, trace


def write(tmp_path, name, blob: bytes):
    p = tmp_path / name
    p.write_bytes(blob)
    return p


PKTS = [(1_700_000_000_123_456_789 + i * 1_000_001_001, bytes([i]) * (60 + i)) for i in range(6)]


def test_struct_sizes_agree():
    assert PACKET_DTYPE.itemsize == _source.packet_ref_size()
    assert len(SOURCE_REASONS) == _source.source_reason_count()


@pytest.mark.parametrize("big_endian", [False, True])
@pytest.mark.parametrize("nano", [False, True])
def test_pcap_byte_orders_and_resolutions(tmp_path, big_endian, nano):
    p = write(tmp_path, "x.pcap", pb.pcap(PKTS, nano=nano, big_endian=big_endian, linktype=113))
    arr, datas, trace = read_all(p)
    assert trace.format == "pcap"
    assert datas == [d for _, d in PKTS]
    want = [ts if nano else ts // 1000 * 1000 for ts, _ in PKTS]
    assert arr["ts_ns"].tolist() == want
    assert set(arr["linktype"].tolist()) == {113}
    assert arr["index"].tolist() == list(range(len(PKTS)))
    assert trace.counters["packets"] == len(PKTS)
    assert trace.counters["truncated"] == 0


def test_pcapng_sections_interfaces_resolutions(tmp_path):
    ts = 1_700_000_000_987_654_321
    blob = (pb.shb()
            + pb.idb(1, tsresol=9)                      # nanoseconds
            + pb.idb(113)                               # default: microseconds
            + pb.idb(101, tsresol=0x80 | 10, tsoffset=5)  # 2^-10 s units, +5 s offset
            + pb.epb(0, ts, b"A" * 60)
            + pb.epb(1, ts // 1000, b"B" * 70, wirelen=1500)
            + pb.unknown_block()
            + pb.epb(2, 1024 * 3 + 512, b"C" * 40)      # 3.5 s after epoch, + 5 s
            + pb.spb(b"D" * 50)
            # A second section, big-endian, with its own interface list.
            + pb.shb(big_endian=True) + pb.idb(229, tsresol=6, big_endian=True)
            + pb.epb(0, ts // 1000, b"E" * 64, big_endian=True))
    arr, datas, trace = read_all(write(tmp_path, "x.pcapng", blob))
    assert trace.format == "pcapng"
    assert datas == [b"A" * 60, b"B" * 70, b"C" * 40, b"D" * 50, b"E" * 64]
    assert arr["linktype"].tolist() == [1, 113, 101, 1, 229]
    assert arr["iface"].tolist() == [0, 1, 2, 0, 0]
    assert arr["ts_ns"].tolist()[:3] == [ts, ts // 1000 * 1000, 8_500_000_000]
    assert arr["ts_ns"][3] == arr["ts_ns"][2]        # a simple packet block has no time of its own
    assert arr["wirelen"][1] == 1500
    c = trace.counters
    assert (c["sections"], c["interfaces"], c["unknown_blocks"]) == (2, 4, 1)


def _offsets_after_records(blob: bytes, header: int, big_endian=False):
    """End offsets of each pcap record in `blob`."""
    e = ">" if big_endian else "<"
    import struct
    ends, p = [], header
    while p < len(blob):
        caplen = struct.unpack_from(e + "I", blob, p + 8)[0]
        p += 16 + caplen
        ends.append(p)
    return ends


def test_truncated_pcap_at_every_offset(tmp_path):
    blob = pb.pcap(PKTS)
    ends = _offsets_after_records(blob, 24)
    for cut in range(24, len(blob) + 1):
        arr, datas, trace = read_all(write(tmp_path, "cut.pcap", blob[:cut]))
        complete = sum(1 for e in ends if e <= cut)
        assert len(arr) == complete, cut
        assert datas == [d for _, d in PKTS[:complete]]
        assert trace.counters["truncated"] == (0 if cut in ends or cut == 24 else 1), cut


def test_truncated_pcapng_at_every_offset(tmp_path):
    blob = pb.shb() + pb.idb(1) + b"".join(pb.epb(0, ts // 1000, d) for ts, d in PKTS)
    full, _, _ = read_all(write(tmp_path, "full.pcapng", blob))
    for cut in range(0, len(blob) + 1, 3):
        p = write(tmp_path, "cut.pcapng", blob[:cut])
        try:
            arr, datas, trace = read_all(p)
        except NotACapture:
            assert cut < 28       # not even a section header
            continue
        assert len(arr) <= len(full)
        assert datas == [d for _, d in PKTS[:len(arr)]]


def test_corrupt_pcap_record_is_skipped_and_reading_resumes(tmp_path):
    blob = bytearray(pb.pcap(PKTS))
    ends = _offsets_after_records(bytes(blob), 24)
    third = ends[1]                                   # start of the third record
    blob[third + 8: third + 12] = (0xFFFFFF00).to_bytes(4, "little")   # absurd caplen
    arr, datas, trace = read_all(write(tmp_path, "bad.pcap", bytes(blob)))
    c = trace.counters
    assert c["bad_record"] == 1
    assert c["skipped_bytes"] == ends[2] - third
    assert datas == [d for i, (_, d) in enumerate(PKTS) if i != 2]
    assert any("corrupt" in w for w in trace.warnings)


def test_corrupt_pcapng_block_is_skipped_and_reading_resumes(tmp_path):
    blocks = [pb.epb(0, ts // 1000, d) for ts, d in PKTS]
    bad = bytearray(blocks[2])
    bad[4:8] = (0x7FFFFFF0).to_bytes(4, "little")     # absurd block length
    blob = pb.shb() + pb.idb(1) + b"".join(blocks[:2]) + bytes(bad) + b"".join(blocks[3:])
    arr, datas, trace = read_all(write(tmp_path, "bad.pcapng", blob))
    assert trace.counters["bad_record"] == 1
    assert datas == [d for i, (_, d) in enumerate(PKTS) if i != 2]


def test_pcapng_packet_on_undefined_interface_is_counted(tmp_path):
    blob = pb.shb() + pb.idb(1) + pb.epb(3, 1, b"x" * 20) + pb.epb(0, 2, b"y" * 20)
    arr, datas, trace = read_all(write(tmp_path, "iface.pcapng", blob))
    assert datas == [b"y" * 20]
    assert trace.counters["bad_interface"] == 1
    assert arr["index"].tolist() == [1]               # frame numbers still count the bad one


@pytest.mark.parametrize("content", [b"", b"hello, this is a text file\n" * 3, b"\x00" * 100,
                                     b"\xd4\xc3\xb2\xa1\x02\x00"])
def test_not_a_capture_is_one_line_naming_the_file(tmp_path, content):
    p = write(tmp_path, "notes.txt", content)
    with pytest.raises(NotACapture) as exc:
        open_trace(p)
    msg = str(exc.value)
    assert str(p) in msg and "\n" not in msg


def test_gzip_capture_reads_like_the_plain_one(tmp_path):
    blob = pb.pcap(PKTS, nano=True)
    plain, _, _ = read_all(write(tmp_path, "a.pcap", blob))
    gz, datas, trace = read_all(write(tmp_path, "a.pcap.gz", gzip.compress(blob)))
    assert gz["ts_ns"].tolist() == plain["ts_ns"].tolist()
    assert datas == [d for _, d in PKTS]
    assert trace.warnings == []


def test_damaged_gzip_keeps_what_was_inflated(tmp_path):
    big = [(i * 1000, os.urandom(1400)) for i in range(200)]
    z = gzip.compress(pb.pcap(big))
    arr, datas, trace = read_all(write(tmp_path, "cut.pcap.gz", z[: len(z) // 2]))
    assert 0 < len(arr) < 200
    assert datas == [d for _, d in big[: len(arr)]]
    assert any("gzip" in w for w in trace.warnings)


def test_bad_bpf_filter_carries_libpcap_text(tmp_path):
    p = write(tmp_path, "a.pcap", pb.pcap(PKTS))
    with pytest.raises(BpfError, match="syntax error"):
        open_trace(p, bpf="tcp and (port 80")


# ---- real traces -----------------------------------------------------------------------------

def _provenance_packet_counts() -> dict[str, int]:
    text = (TRACES / "PROVENANCE.md").read_text(encoding="utf-8")
    counts = {}
    for row in text.splitlines():
        cells = [c.strip() for c in row.split("|")]
        if len(cells) > 6 and "/" in cells[1] and cells[5].isdigit():
            counts[cells[1]] = int(cells[5])
    return counts


def _digest(arr, datas):
    h = hashlib.sha256()
    for col in ("ts_ns", "caplen", "wirelen"):
        h.update(np.ascontiguousarray(arr[col]).tobytes())
    # Raw IP is written as 12, 14 or 101 depending on the writer; all mean the same.
    h.update(np.where(np.isin(arr["linktype"], (12, 14)), 101, arr["linktype"]).astype("<u2").tobytes())
    for d in datas:
        h.update(d)
    return h.hexdigest()


@pytest.mark.parametrize("path", shared_trace_files(), ids=lambda p: str(p.relative_to(TRACES)))
def test_shared_trace_matches_libpcap_and_provenance(tmp_path, path):
    """Every shared trace: same packets (time, lengths, bytes) as libpcap's own reader, and the
    packet count tshark/capinfos recorded in PROVENANCE.md."""
    arr, datas, trace = read_all(path)
    rel = str(path.relative_to(TRACES))
    expected = _provenance_packet_counts().get(rel)
    if expected is not None:
        assert len(arr) == expected, trace.counters
    ref_path = path
    if path.suffix == ".gz":
        ref_path = tmp_path / path.stem
        with gzip.open(path) as src, open(ref_path, "wb") as dst:
            shutil.copyfileobj(src, dst)
    # The reference read must work: an exception here is a failure, not a skip (every shared
    # trace is one libpcap reads; a trace it cannot read would need its own written exception).
    ref, ref_datas, ref_trace = read_all(ref_path, engine="libpcap")
    if ref_trace.warnings:
        # libpcap stops at the first interface with a different link type, and at a truncated
        # record; compare what it read.
        assert ("different from the type of the first interface" in ref_trace.warnings[0]
                or "truncated dump file" in ref_trace.warnings[0]), ref_trace.warnings
        n = len(ref)
        assert _digest(arr[:n], datas[:n]) == _digest(ref, ref_datas)
        return
    # libpcap clamps caplen to the snaplen; tshark and webtap keep what the file holds.
    clamp = (arr["flags"] & 1) != 0
    keep = ~clamp
    assert len(arr) == len(ref)
    assert (arr["ts_ns"] == ref["ts_ns"]).all()
    assert (arr["wirelen"] == ref["wirelen"]).all()
    assert _digest(arr[keep], [d for d, k in zip(datas, keep) if k]) == \
        _digest(ref[keep], [d for d, k in zip(ref_datas, keep) if k])


@pytest.mark.skipif(shutil.which("tcpdump") is None, reason="tcpdump not installed")
@pytest.mark.parametrize("expr", ["tcp port 80", "tcp[13] & 2 != 0", "ip6 or vlan"])
def test_bpf_filter_selects_what_tcpdump_selects(expr):
    path = TRACES / "acandeias-intrusiondetection" / "Misc1.pcap"
    if not path.exists():
        pytest.skip(f"shared data absent: {path}")
    arr, _, trace = read_all(path, bpf=expr)
    out = subprocess.run(["tcpdump", "-nn", "-r", str(path), expr], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert len(arr) == len(out.stdout.splitlines())
    assert trace.counters["bpf_rejected"] + len(arr) == 1644


# ---- property tests ----------------------------------------------------------------------------

@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=2000), st.sampled_from(["pcap", "pcap-be", "pcapng"]))
def test_random_bytes_after_a_valid_header_never_crash(body, kind):
    header = {"pcap": pb.pcap([]), "pcap-be": pb.pcap([], big_endian=True),
              "pcapng": pb.shb() + pb.idb(1)}[kind]
    buf = np.frombuffer(header + body, dtype=np.uint8)
    r = _source.FileReader(buf, None, "fuzz")
    arr = np.empty(64, PACKET_DTYPE)
    total = 0
    for _ in range(10_000):
        n = r.read_into(arr)
        assert ((arr["offset"][:n] + arr["caplen"][:n]) <= len(buf)).all()
        total += n
        if n == 0 and r.eof:
            break
    else:
        raise AssertionError("reader did not reach the end")
    assert r.counters[0] == total


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_mutated_real_capture_never_crashes(data):
    blob = bytearray(pb.pcap(PKTS) if data.draw(st.booleans()) else
                     pb.shb() + pb.idb(1) + b"".join(pb.epb(0, t, d) for t, d in PKTS))
    for _ in range(data.draw(st.integers(1, 8))):
        i = data.draw(st.integers(0, len(blob) - 1))
        blob[i] = data.draw(st.integers(0, 255))
    try:
        r = _source.FileReader(np.frombuffer(bytes(blob), np.uint8), None, "fuzz")
    except NotACapture:
        return
    arr = np.empty(4, PACKET_DTYPE)
    while True:
        n = r.read_into(arr)
        assert ((arr["offset"][:n] + arr["caplen"][:n]) <= len(blob)).all()
        if n == 0 and r.eof:
            break


# ---- chunked reading: records and blocks that straddle chunk boundaries -----------------------

def _big_pcap(n=3000, seed=7):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(40, 1600, n)
    return [(1_600_000_000_000_000_000 + i * 1000, rng.integers(0, 256, s, dtype=np.uint8).tobytes())
            for i, s in enumerate(sizes)]


def _same_packets(path, **kw):
    small, sd, st_ = read_all(path, chunk_size=2 * 1024 * 1024, **kw)
    whole, wd, wt = read_all(path, chunk_size=256 * 1024 * 1024, **kw)
    assert sd == wd
    assert small["ts_ns"].tolist() == whole["ts_ns"].tolist()
    assert st_.counters == wt.counters
    return small, sd, st_


@pytest.mark.parametrize("kind", ["pcap", "pcapng", "pcap.gz"])
def test_chunk_boundaries_change_nothing(tmp_path, kind):
    pkts = _big_pcap()
    if kind == "pcapng":
        blob = pb.shb() + pb.idb(1) + b"".join(pb.epb(0, t // 1000, d) for t, d in pkts)
    else:
        blob = pb.pcap(pkts)
    if kind.endswith(".gz"):
        blob = gzip.compress(blob)
    _, datas, trace = _same_packets(write(tmp_path, "big." + kind, blob))
    assert datas == [d for _, d in pkts]


@pytest.mark.parametrize("where", [0.2, 0.5, 0.8, 0.9, 0.97, 0.995, 1.5, 1.97])
def test_corrupt_record_near_a_chunk_boundary(tmp_path, where):
    """A corrupt header anywhere in a non-final chunk, including its last 512 KiB where the
    reader must wait for more of the file before it judges the header (the file is ~5 MB, so
    both 2 MiB chunks around the targets are followed by more)."""
    pkts = _big_pcap(6000)
    blob = bytearray(pb.pcap(pkts))
    assert len(blob) > 4.5 * 1024 * 1024
    ends = _offsets_after_records(bytes(blob), 24)
    # the record starting closest to the chosen fraction of 2 MiB
    target = int(2 * 1024 * 1024 * where)
    k = min(range(len(ends) - 1), key=lambda i: abs(ends[i] - target))
    blob[ends[k] + 8: ends[k] + 12] = (0xFFFFFFF0).to_bytes(4, "little")
    _, datas, trace = _same_packets(write(tmp_path, "bad.pcap", bytes(blob)))
    assert trace.counters["bad_record"] == 1
    assert datas == [d for i, (_, d) in enumerate(pkts) if i != k + 1]


def _record_starts(blob: bytes, kind: str) -> list[int]:
    """Offsets of the pcap records (after the file header) or of the pcapng blocks."""
    import struct
    out, p = [], 24 if kind == "pcap" else 0
    while p + 16 <= len(blob):
        out.append(p)
        n = struct.unpack_from("<I", blob, p + 8 if kind == "pcap" else p + 4)[0]
        p += 16 + n if kind == "pcap" else n
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                    HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["pcap", "pcapng"]), data=st.data())
def test_damaged_headers_read_the_same_in_chunks(tmp_path, kind, data):
    """Record or block headers damaged near the ends of 2 MiB chunks (where the reader must wait
    for its look-ahead before judging them), plus bytes damaged anywhere: the packets, their
    bytes and every counter are those of reading the file as one buffer."""
    pkts = _big_pcap(6000, seed=data.draw(st.integers(0, 3)))
    if kind == "pcapng":
        blob = bytearray(pb.shb() + pb.idb(1) + b"".join(pb.epb(0, t // 1000, d) for t, d in pkts))
    else:
        blob = bytearray(pb.pcap(pkts))
    starts = _record_starts(bytes(blob), kind)
    near = [i for i, o in enumerate(starts) if abs(o - (2 << 20)) < 700_000
            or abs(o - (4 << 20)) < 700_000]
    length_at = 8 if kind == "pcap" else 4          # caplen / block total length
    for _ in range(data.draw(st.integers(1, 3))):
        # a length no valid record or block has (random bytes are mostly zeros under hypothesis)
        o = starts[near[data.draw(st.integers(0, len(near) - 1))]] + length_at
        blob[o: o + 4] = data.draw(st.integers(0x40001, 0xFFFFFFFF)).to_bytes(4, "little")
    for _ in range(data.draw(st.integers(0, 3))):
        i = data.draw(st.integers(64, len(blob) - 4))
        blob[i: i + 4] = data.draw(st.binary(min_size=4, max_size=4))
    _same_packets(write(tmp_path, "dmg." + kind, bytes(blob)))


def test_pcapng_block_larger_than_half_a_chunk_grows_the_chunk(tmp_path):
    pkts = _big_pcap(500)
    blob = (pb.shb() + pb.idb(1) + b"".join(pb.epb(0, t, d) for t, d in pkts[:250])
            + pb.unknown_block(body=b"z" * (3 * 1024 * 1024))
            + b"".join(pb.epb(0, t, d) for t, d in pkts[250:]))
    _, datas, trace = _same_packets(write(tmp_path, "bigblock.pcapng", blob))
    assert datas == [d for _, d in pkts] and trace.counters["unknown_blocks"] == 1
