"""Byte-exact builders of pcap and pcapng files for tests (both byte orders, any resolution).

Fixtures are built from these functions at test time rather than committed as binaries, so the
case each one covers is visible in the test that uses it.
"""
from __future__ import annotations

import struct


def pcap(packets, *, linktype=1, snaplen=262144, nano=False, big_endian=False) -> bytes:
    """A classic pcap file. `packets`: iterable of (ts_ns, bytes) or (ts_ns, bytes, wirelen)."""
    e = ">" if big_endian else "<"
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    out = [struct.pack(e + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)]
    for p in packets:
        ts, data = p[0], p[1]
        wire = p[2] if len(p) > 2 else len(data)
        sec, frac = divmod(ts, 1_000_000_000)
        if not nano:
            frac //= 1000
        out.append(struct.pack(e + "IIII", sec, frac, len(data), wire) + data)
    return b"".join(out)


def _opt(e, code, value: bytes) -> bytes:
    pad = (-len(value)) % 4
    return struct.pack(e + "HH", code, len(value)) + value + b"\0" * pad


def _block(e, btype, body: bytes) -> bytes:
    body += b"\0" * ((-len(body)) % 4)
    n = len(body) + 12
    return struct.pack(e + "II", btype, n) + body + struct.pack(e + "I", n)


def shb(*, big_endian=False) -> bytes:
    e = ">" if big_endian else "<"
    return _block(e, 0x0A0D0D0A, struct.pack(e + "IHHq", 0x1A2B3C4D, 1, 0, -1))


def idb(linktype=1, snaplen=262144, *, tsresol: int | None = None, tsoffset: int | None = None,
        big_endian=False) -> bytes:
    e = ">" if big_endian else "<"
    opts = b""
    if tsresol is not None:
        opts += _opt(e, 9, bytes([tsresol]))
    if tsoffset is not None:
        opts += _opt(e, 14, struct.pack(e + "q", tsoffset))
    if opts:
        opts += struct.pack(e + "HH", 0, 0)
    return _block(e, 1, struct.pack(e + "HHI", linktype, 0, snaplen) + opts)


def epb(iface, ts_units: int, data: bytes, wirelen=None, *, big_endian=False) -> bytes:
    e = ">" if big_endian else "<"
    wire = len(data) if wirelen is None else wirelen
    return _block(e, 6, struct.pack(e + "IIIII", iface, ts_units >> 32, ts_units & 0xFFFFFFFF,
                                    len(data), wire) + data)


def spb(data: bytes, wirelen=None, *, big_endian=False) -> bytes:
    e = ">" if big_endian else "<"
    wire = len(data) if wirelen is None else wirelen
    return _block(e, 3, struct.pack(e + "I", wire) + data)


def unknown_block(btype=0x0BADBEEF, body=b"abcd", *, big_endian=False) -> bytes:
    return _block(">" if big_endian else "<", btype, body)
