"""Packet builders for the dissect tests: scapy layers -> (PACKET_DTYPE batch, buffer)."""
from __future__ import annotations

import struct

import numpy as np
from scapy.all import IP, TCP, UDP, Dot1AD, Dot1Q, Ether, IPv6, Raw  # noqa: F401
from scapy.layers.l2 import CookedLinux, CookedLinuxV2

from tests.dissect._scapy_batches import batch_from_raw
from webtap.dissect import dissect

GET = b"GET /index.html HTTP/1.1\r\nHost: example.org\r\nUser-Agent: probe/1.0\r\n\r\n"
OK = b"HTTP/1.1 200 OK\r\nServer: x\r\n\r\nbody"


def tcp4(payload: bytes = GET, **ip) -> IP:
    return IP(src="192.0.2.1", dst="198.51.100.2", ttl=61, **ip) / TCP(
        sport=40000, dport=80, seq=1000, ack=2000, flags="PA", window=512) / Raw(payload)


def tcp6(payload: bytes = GET, ext=None) -> IPv6:
    ip = IPv6(src="2001:db8::1", dst="2001:db8::2", hlim=62)
    if ext is not None:
        ip = ip / ext
    return ip / TCP(sport=40000, dport=80, seq=1000, ack=2000, flags="PA", window=512) / Raw(payload)


def one(raw: bytes | object, linktype: int = 1, wirelen: int | None = None):
    """Dissect one packet; returns (batch, reason name)."""
    from webtap.records.message import DISSECT_REASONS

    raw = bytes(raw)
    pk, data = batch_from_raw([(raw, linktype, 0, len(raw) if wirelen is None else wirelen)])
    reasons = np.zeros(1, np.uint8)
    b = dissect(pk, data, reasons)
    return b, DISSECT_REASONS[reasons[0]]


def null_hdr(af: int, order: str = "<") -> bytes:
    return struct.pack(order + "I", af)


def sll(ip) -> bytes:
    return bytes(CookedLinux(pkttype=0, lladdrtype=1, lladdrlen=6, proto=0x0800 if ip.version == 4 else 0x86DD) / ip)


def sll2(ip) -> bytes:
    return bytes(CookedLinuxV2(proto=0x0800 if ip.version == 4 else 0x86DD, ifindex=2) / ip)
