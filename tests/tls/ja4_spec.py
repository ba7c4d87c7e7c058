"""JA4 (TLS client) written in Python from the specification (FoxIO-LLC/ja4, JA4.md), with its
own ClientHello walk: the independent implementation the C code (ext/tls/tls_fp.h) is checked
against on captures the reference tool has no published output for."""
from __future__ import annotations

import hashlib
import struct

GREASE = {0x0A0A + 0x1010 * i for i in range(16)}
VERSIONS = {0x0304: "13", 0x0303: "12", 0x0302: "11", 0x0301: "10", 0x0300: "s3", 0x0002: "s2",
            0xFEFF: "d1", 0xFEFD: "d2", 0xFEFC: "d3"}


def handshake_from_stream(data: bytes) -> bytes | None:
    """The first handshake message carried by TLS records at the start of data."""
    hs = b""
    pos = 0
    while pos + 5 <= len(data):
        ctype, _, ln = struct.unpack("!BHH", data[pos:pos + 5])
        if ctype == 20 and not hs:
            pos += 5 + ln
            continue
        if ctype != 22:
            break
        hs += data[pos + 5:pos + 5 + ln]
        pos += 5 + ln
        if len(hs) >= 4 and len(hs) >= 4 + int.from_bytes(hs[1:4], "big"):
            return hs[:4 + int.from_bytes(hs[1:4], "big")]
    return None


def parse_client_hello(msg: bytes) -> dict:
    assert msg[0] == 1
    body = msg[4:4 + int.from_bytes(msg[1:4], "big")]
    legacy = int.from_bytes(body[0:2], "big")
    p = 34
    p += 1 + body[p]
    n = int.from_bytes(body[p:p + 2], "big")
    ciphers = [int.from_bytes(body[p + 2 + i:p + 4 + i], "big") for i in range(0, n, 2)]
    p += 2 + n
    p += 1 + body[p]
    exts = []
    if p + 2 <= len(body):
        end = p + 2 + int.from_bytes(body[p:p + 2], "big")
        p += 2
        while p + 4 <= end:
            t, ln = struct.unpack("!HH", body[p:p + 4])
            exts.append((t, body[p + 4:p + 4 + ln]))
            p += 4 + ln
    return {"legacy": legacy, "ciphers": ciphers, "exts": exts}


def ja4(ch: dict, proto: str = "t") -> str:
    exts = dict((t, d) for t, d in reversed(ch["exts"]))       # first occurrence wins
    version = ch["legacy"]
    if 43 in exts:
        d = exts[43]
        vs = [int.from_bytes(d[1 + i:3 + i], "big") for i in range(0, d[0], 2)]
        vs = [v for v in vs if v not in GREASE]
        if vs:
            version = max(vs)
    ciphers = [c for c in ch["ciphers"] if c not in GREASE]
    types = [t for t, _ in ch["exts"] if t not in GREASE]
    alpn = "00"
    if 16 in exts and len(exts[16]) > 3 and exts[16][2] > 0:
        first = exts[16][3:3 + exts[16][2]]
        a, b = chr(first[0]), chr(first[-1])
        alpn = a + b if (a.isascii() and a.isalnum() and b.isascii() and b.isalnum()) else "99"
    a = (f"{proto}{VERSIONS.get(version, '00')}{'d' if 0 in exts else 'i'}"
         f"{min(len(ciphers), 99):02d}{min(len(types), 99):02d}{alpn}")

    def h12(s: str) -> str:
        return hashlib.sha256(s.encode()).hexdigest()[:12] if s else "000000000000"

    b = h12(",".join(f"{c:04x}" for c in sorted(ciphers)))
    sorted_exts = ",".join(f"{t:04x}" for t in sorted(t for t in types if t not in (0, 16)))
    sig = []
    if 13 in exts:
        d = exts[13]
        n = int.from_bytes(d[:2], "big")
        sig = [int.from_bytes(d[2 + i:4 + i], "big") for i in range(0, n, 2)]
        sig = [s for s in sig if s not in GREASE]
    c_in = sorted_exts + ("_" + ",".join(f"{s:04x}" for s in sig) if sig else "")
    c = h12(c_in) if sorted_exts else "000000000000"
    return f"{a}_{b}_{c}"
