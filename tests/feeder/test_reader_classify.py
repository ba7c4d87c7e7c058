"""The feeder's reader takes exactly the packets the dissector makes messages of (it walks them
with the same C, ext/walk/l34.c and ext/walk/httpstart.c), with the right kind, consumer hash
and 1xx route, and counts what the dissector counts except what only parsing can tell."""
import numpy as np
import pytest

from httpanalyzer.feeder import FEED_DTYPE, MESSAGE_COUNTERS, classify_packets
from tests.conftest import TRACES, shared_trace_files
from webtap.capture import open_trace
from webtap.dissect import dissect
from webtap._ext.feeder import hash_eq3
from webtap.records.message import MSG_RESPONSE, MSGF_MID_SEGMENT


def check_batch(packets, data):
    mb = dissect(packets, data)
    pb = classify_packets(packets, data)
    m, p = mb.msgs, pb.msgs
    # The reader routes packets: one row per packet's first message. Messages inside a segment
    # (issue 31) go with their packet; the packet's payload ends where its last message's does.
    first = (m["flags"] & MSGF_MID_SEGMENT) == 0
    last = np.r_[first[1:], True] if len(first) else first
    end = (m["seq"].astype(np.uint64) + m["payload_len"]) & 0xFFFFFFFF
    m, end = m[first], end[last]
    assert p.dtype == FEED_DTYPE
    assert np.array_equal(m["pkt_index"], p["index"])
    assert np.array_equal(m["ts_ns"], p["ts_ns"])
    assert np.array_equal(m["pkt_offset"], p["offset"])
    for f in ("kind", "src_ip", "dst_ip", "src_port", "dst_port", "seq", "ip_version"):
        assert np.array_equal(m[f], p[f]), f
    assert np.array_equal(hash_eq3(np.ascontiguousarray(m)), p["hash"])
    interim = (m["kind"] == MSG_RESPONSE) & (m["status"] >= 100) & (m["status"] < 200) & (m["status"] != 101)
    assert np.array_equal(interim, p["interim"].astype(bool))
    assert np.array_equal(end[interim], p["next_seq"][interim].astype(np.uint64))
    for k, v in mb.counters.items():
        if k not in MESSAGE_COUNTERS:
            assert pb.counters[k] == v, k
    return len(m)


def test_reader_agrees_with_dissector_on_shared_traces():
    files = shared_trace_files()
    if not files:
        pytest.skip(f"shared traces absent: {TRACES}")
    found = 0
    for path in files[::3]:
        try:
            t = open_trace(path)
        except (OSError, ValueError, RuntimeError):
            continue
        with t:
            for b in t:
                found += check_batch(b.packets, b.data)
    assert found > 1000


def test_reader_agrees_on_mutated_packets():
    """Well-formed Ethernet/VLAN/SLL2/NULL + IPv4/IPv6(+ext) + TCP packets with HTTP-like and
    non-HTTP payload starts, then bytes flipped in their headers and captures cut short: the
    reader and the dissector take the same packets, whatever the damage."""
    from scapy.all import TCP, Dot1Q, Ether, IPv6, IPv6ExtHdrHopByHop, Raw
    from scapy.all import IP as IP4
    from scapy.layers.l2 import CookedLinuxV2

    from webtap.records.message import PACKET_DTYPE

    MAC = "02:00:00:00:00:01"          # given: scapy would resolve it on the network
    rng = np.random.default_rng(11)
    starts = [b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", b"HTTP/1.1 100 Continue\r\n\r\n",
              b"HTTP/1.0 200 OK\r\n", b"HTTP/1.1 101 Switching\r\n", b"M-POST /x HTTP/1.1\r\n",
              b"\r\nGET /", b"GETX / HTTP/1.1", b"get / HTTP/1.1", b"HTTP/1.1 1000 x",
              b"UPDATEREDIRECTREF / HTTP/1.1\r\n", b"<html>", b"\x1f\x8b\x08\x00", b""]

    def tcp(payload):
        return TCP(sport=int(rng.integers(1, 65535)), dport=80, seq=int(rng.integers(0, 2**32)),
                   ack=int(rng.integers(0, 2**32)), flags="PA") / Raw(payload)

    raws = []
    for i in range(1500):
        payload = starts[int(rng.integers(0, len(starts)))] + bytes(rng.integers(0, 256, int(rng.integers(0, 40)), dtype=np.uint8))
        v6 = i % 2 == 1
        ip = (IPv6(src="2001:db8::1", dst="2001:db8::2") / (IPv6ExtHdrHopByHop() if i % 4 == 1 else Raw(b""))
              if v6 else IP4(src="192.0.2.1", dst="198.51.100.2"))
        ip = ip / tcp(payload) if not v6 or i % 4 == 1 else IPv6(src="2001:db8::1", dst="2001:db8::2") / tcp(payload)
        kind = i % 8
        if kind in (0, 1):
            raw, lt = bytes(Ether(src=MAC, dst=MAC) / ip), 1
        elif kind in (2, 3):
            raw, lt = bytes(Ether(src=MAC, dst=MAC) / Dot1Q(vlan=5) / Dot1Q(vlan=6) / ip), 1
        elif kind in (4, 5):
            raw, lt = bytes(CookedLinuxV2(proto=0x86DD if v6 else 0x0800, ifindex=2) / ip), 276
        else:
            raw, lt = (b"\x1e\x00\x00\x00" if v6 else b"\x02\x00\x00\x00") + bytes(ip), 0
        raw = bytearray(raw)
        if rng.random() < 0.5:
            for _ in range(int(rng.integers(1, 4))):
                raw[int(rng.integers(0, min(len(raw), 90)))] = int(rng.integers(0, 256))
        cap = len(raw) if rng.random() < 0.7 else int(rng.integers(0, len(raw) + 1))
        raws.append((bytes(raw[:cap]), lt, len(raw)))
    pk = np.zeros(len(raws), PACKET_DTYPE)
    off = 0
    for i, (raw, lt, wire) in enumerate(raws):
        pk[i] = (i, i, off, len(raw), wire, lt, 0, 0)
        off += len(raw)
    data = np.frombuffer(b"".join(r for r, _, _ in raws) + b"\0", dtype=np.uint8)
    assert check_batch(pk, data) > 100


def test_reader_agrees_on_hostile_bytes():
    """Random bytes behind every link type, with HTTP-looking payload starts sprinkled in."""
    from webtap.records.message import PACKET_DTYPE

    rng = np.random.default_rng(7)
    starts = [b"GET / HTTP/1.1\r\n", b"HTTP/1.1 100 Continue\r\n\r\n", b"M-POST x", b"HTTP/1.1 1000",
              b"\r\nGET /", b"GETX /", b"get / HTTP/1.1", b"HTTP/", b"UPDATEREDIRECTREF / H"]
    n = 20000
    pk = np.zeros(n, PACKET_DTYPE)
    chunks, off = [], 0
    for i in range(n):
        raw = bytearray(rng.integers(0, 256, int(rng.integers(0, 120)), dtype=np.uint8).tobytes())
        if len(raw) > 60 and rng.random() < 0.5:
            s = starts[int(rng.integers(0, len(starts)))]
            at = int(rng.integers(20, 60))
            raw[at:at + len(s)] = s
        pk[i] = (i, i, off, len(raw), len(raw), [0, 1, 101, 108, 113, 228, 229, 276][i % 8], 0, 0)
        chunks.append(bytes(raw))
        off += len(raw)
    data = np.frombuffer(b"".join(chunks) + b"\0", dtype=np.uint8)
    check_batch(pk, data)
