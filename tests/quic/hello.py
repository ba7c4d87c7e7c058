"""Builders for the SNI tests: TLS ClientHello bytes (RFC 8446 4.1.2 layout), TLS records, TCP
and UDP frames (Ethernet, optional 802.1Q tag, IPv4 or IPv6) and protected QUIC client Initials
(through ext/tls/quic_crypto.h, checked against RFC 9001 in test_quic_crypto.py)."""
from __future__ import annotations

import struct

from webtap._ext import quiccut as q

from ..pcapbuild import pcap


def _ext(t: int, body: bytes) -> bytes:
    return struct.pack(">HH", t, len(body)) + body


def sni_ext(*names: bytes) -> bytes:
    lst = b"".join(b"\x00" + struct.pack(">H", len(n)) + n for n in names)
    return _ext(0, struct.pack(">H", len(lst)) + lst)


def client_hello(*exts: bytes, quic: bool = False) -> bytes:
    """A ClientHello handshake message with the given extensions (plus supported_versions)."""
    body = (b"\x03\x03" + bytes(range(32)) + b"\x20" + bytes(32)
            + struct.pack(">H", 4) + b"\x13\x01\x13\x02" + b"\x01\x00")
    ext = b"".join(exts) + _ext(43, b"\x02\x03\x04")
    if quic:
        ext += _ext(57, b"\x01\x02\x40\x64")          # quic_transport_parameters
    body += struct.pack(">H", len(ext)) + ext
    return b"\x01" + struct.pack(">I", len(body))[1:] + body


def records(msg: bytes, size: int = 16384) -> bytes:
    out = b""
    for i in range(0, len(msg), size):
        part = msg[i:i + size]
        out += b"\x16\x03\x01" + struct.pack(">H", len(part)) + part
    return out


def _csum(b: bytes) -> int:
    if len(b) % 2:
        b += b"\x00"
    s = sum(struct.unpack(f">{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def frame(payload: bytes, *, sport: int, dport: int = 443, seq: int = 1000, ack: int = 5000,
          udp: bool = False, v6: bool = False, vlan: int | None = None, flags: int = 0x18) -> bytes:
    src = (b"\x20\x01\x0d\xb8" + bytes(11) + b"\x01") if v6 else bytes([10, 0, 0, 1])
    dst = (b"\x20\x01\x0d\xb8" + bytes(11) + b"\x02") if v6 else bytes([10, 0, 0, 2])
    if udp:
        l4 = struct.pack(">HHHH", sport, dport, 8 + len(payload), 0) + payload
        proto = 17
    else:
        l4 = struct.pack(">HHIIBBHHH", sport, dport, seq, ack, 0x50, flags, 65535, 0, 0) + payload
        proto = 6
    pseudo = src + dst + (struct.pack(">IxxxB", len(l4), proto) if v6 else struct.pack(">xBH", proto, len(l4)))
    c = _csum(pseudo + l4) or (0xFFFF if udp else 0)
    l4 = l4[:6] + struct.pack(">H", c) + l4[8:] if udp else l4[:16] + struct.pack(">H", c) + l4[18:]
    if v6:
        ip = struct.pack(">IHBB", 0x60000000, len(l4), proto, 64) + src + dst
        et = b"\x86\xdd"
    else:
        h = struct.pack(">BBHHHBBH", 0x45, 0, 20 + len(l4), 0, 0x4000, 64, proto, 0) + src + dst
        ip = h[:10] + struct.pack(">H", _csum(h)) + h[12:]
        et = b"\x08\x00"
    eth = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01"
    if vlan is not None:
        eth += b"\x81\x00" + struct.pack(">H", vlan)
    return eth + et + ip + l4


def crypto(offset: int, data: bytes) -> bytes:
    def vi(v):
        return bytes([v]) if v < 64 else struct.pack(">H", 0x4000 | v) if v < 16384 else struct.pack(">I", 0x80000000 | v)
    return b"\x06" + vi(offset) + vi(len(data)) + data


def initial(frames: bytes, *, dcid: bytes, scid: bytes = b"\xc1\xc2\xc3\xc4", version: int = 1,
            pn: int = 0, pad_to: int | None = 1200, token: bytes = b"") -> bytes:
    """A protected client Initial carrying `frames` (PADDING added to reach pad_to bytes)."""
    tb = 0 if version == 1 else 1
    def hdr(plen):
        first = 0xC0 | (tb << 4) | 3
        h = bytes([first]) + struct.pack(">I", version) + bytes([len(dcid)]) + dcid + bytes([len(scid)]) + scid
        # the token length as a QUIC varint (RFC 9000 16): 1 byte below 64, else 2 bytes
        h += (bytes([len(token)]) if len(token) < 64 else struct.pack(">H", 0x4000 | len(token))) + token
        return h + struct.pack(">H", 0x4000 | (4 + plen + 16)) + struct.pack(">I", pn)
    plen = len(frames)
    if pad_to:
        plen = max(plen, pad_to - len(hdr(0)) - 16)
    payload = frames + bytes(plen - len(frames))
    return q.protect(hdr(len(payload)), payload, dcid, sender="client")


def write(path, frames_) -> None:
    with open(path, "wb") as f:
        f.write(pcap([(1_700_000_000_000_000_000 + i * 1000, fr) for i, fr in enumerate(frames_)], nano=True))
