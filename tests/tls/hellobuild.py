"""TLS hellos and TCP packets built from the RFCs' wire formats (RFC 8446 4.1.2/4.1.3, RFC 6066,
RFC 7301), independently of ext/tls/tls_hello.h, so the tests can check the parser against them."""
from __future__ import annotations

import struct

GREASE = [0x0A0A + 0x1010 * i for i in range(16)]
HRR_RANDOM = bytes.fromhex("CF21AD74E59A6111BE1D8C021E65B891C2A211167ABB8C5E079E09E2C8A8339C")


def u8(v): return struct.pack("!B", v)
def u16(v): return struct.pack("!H", v)
def u24(v): return struct.pack("!I", v)[1:]


def vec8(b: bytes) -> bytes: return u8(len(b)) + b
def vec16(b: bytes) -> bytes: return u16(len(b)) + b


def ext(t: int, data: bytes) -> bytes:
    return u16(t) + vec16(data)


def sni_ext(name: bytes) -> bytes:
    return ext(0, vec16(u8(0) + vec16(name)))


def alpn_ext(protos) -> bytes:
    return ext(16, vec16(b"".join(vec8(p) for p in protos)))


def versions_ext(vs) -> bytes:
    return ext(43, vec8(b"".join(u16(v) for v in vs)))


def groups_ext(gs) -> bytes:
    return ext(10, vec16(b"".join(u16(g) for g in gs)))


def sigalgs_ext(ss) -> bytes:
    return ext(13, vec16(b"".join(u16(s) for s in ss)))


def ecpf_ext(fs) -> bytes:
    return ext(11, vec8(bytes(fs)))


def keyshare_ext(shares) -> bytes:
    """shares: [(group, key bytes)]"""
    return ext(51, vec16(b"".join(u16(g) + vec16(k) for g, k in shares)))


def client_hello(*, version=0x0303, ciphers=(0x1301, 0x1302), exts=(), session_id=b"\x11" * 32,
                 random=b"\x22" * 32, compression=b"\x00") -> bytes:
    """The handshake message (4-byte header + body)."""
    body = (u16(version) + random + vec8(session_id) + vec16(b"".join(u16(c) for c in ciphers))
            + vec8(compression))
    if exts is not None:
        body += vec16(b"".join(exts))
    return u8(1) + u24(len(body)) + body


def server_hello(*, version=0x0303, cipher=0x1301, exts=(), random=b"\x33" * 32,
                 session_id=b"\x11" * 32) -> bytes:
    body = u16(version) + random + vec8(session_id) + u16(cipher) + u8(0)
    if exts is not None:
        body += vec16(b"".join(exts))
    return u8(2) + u24(len(body)) + body


def draft_server_hello(*, version=0x0304, cipher=0x1301, exts=(), random=b"\x33" * 32) -> bytes:
    """An early TLS 1.3 draft ServerHello (draft-ietf-tls-tls13 before -22, 4.1.3 of those
    drafts): version, random, cipher_suite, extensions; no session id, no compression method."""
    body = u16(version) + random + u16(cipher) + vec16(b"".join(exts))
    return u8(2) + u24(len(body)) + body


def sslv2_client_hello(*, version=0x0301, specs=(0x010080, 0x00002F, 0x000035), session_id=b"",
                       challenge=bytes(range(16))) -> bytes:
    """An SSLv2-format CLIENT-HELLO record (SSL 2.0 draft, 2-byte header with the top bit set;
    RFC 5246 E.2 / RFC 6101 E.1 for the version-3 compatible form): msg type 1, version,
    cipher_spec_length, session_id_length, challenge_length, then the 3-byte cipher specs, the
    session id and the challenge."""
    cs = b"".join(struct.pack("!I", v)[1:] for v in specs)
    body = u8(1) + u16(version) + u16(len(cs)) + u16(len(session_id)) + u16(len(challenge)) + cs \
        + session_id + challenge
    return u16(0x8000 | len(body)) + body


def record(ctype: int, body: bytes, version=0x0303) -> bytes:
    """One TLS record of any content type (alert 21, change_cipher_spec 20, heartbeat 24)."""
    return u8(ctype) + u16(version) + vec16(body)


def records(msg: bytes, *, rec_version=0x0301, max_frag=16384, ctype=22) -> bytes:
    """The message in TLS records of at most max_frag bytes each."""
    out = b""
    for i in range(0, len(msg), max_frag):
        frag = msg[i:i + max_frag]
        out += u8(ctype) + u16(rec_version) + u16(len(frag)) + frag
    return out


def chrome_like(sni=b"example.com", alpn=(b"h2", b"http/1.1"), pq=True, grease=True, ech=True):
    """A browser-shaped ClientHello (GREASE, PQ key share, ECH), returned as the message."""
    g = [GREASE[2]] if grease else []
    exts = []
    if grease:
        exts.append(ext(GREASE[5], b""))
    exts += [sni_ext(sni), ext(23, b""), ext(65281, b"\x00"), groups_ext(g + [0x11EC, 0x001D, 0x0017]),
             ecpf_ext([0]), ext(35, b""), alpn_ext(alpn), ext(5, b"\x01\x00\x00\x00\x00"),
             sigalgs_ext([0x0403, 0x0804, 0x0401]),
             keyshare_ext(([(GREASE[2], b"\x00")] if grease else [])
                          + ([(0x11EC, b"\x5a" * 1216)] if pq else []) + [(0x001D, b"\x01" * 32)]),
             ext(45, b"\x01\x01"), versions_ext(g + [0x0304, 0x0303]), ext(27, b"\x02\x00\x02")]
    if ech:
        exts.append(ext(0xFE0D, b"\x00\x00\x01\x00\x01\x12\x00\x20" + b"\x00" * 32 + b"\x00\x00"))
    if grease:
        exts.append(ext(GREASE[9], b"\x00"))
    return client_hello(ciphers=g + [0x1301, 0x1302, 0x1303, 0xC02B, 0xC02F], exts=exts)


# ---- packets -------------------------------------------------------------------------------
def _csum(b: bytes) -> int:
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def tcp_packet(src: str, dst: str, sport: int, dport: int, seq: int, ack: int, payload: bytes,
               flags: int = 0x18) -> bytes:
    """Ethernet + IPv4 + TCP (20-byte header) carrying payload."""
    import ipaddress

    s, d = ipaddress.IPv4Address(src).packed, ipaddress.IPv4Address(dst).packed
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags,
                      65535, 0, 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 1, 0, 64, 6, 0, s, d)
    ip = ip[:10] + struct.pack("!H", _csum(ip)) + ip[12:]
    return b"\x00\x11\x22\x33\x44\x55" + b"\x66\x77\x88\x99\xaa\xbb" + b"\x08\x00" + ip + tcp


def handshake_pcap(path, conns, *, t0=1_700_000_000_000_000_000):
    """A pcap of TCP handshakes. conns: list of dicts with client/server, ch (stream bytes of the
    client's first flight), ch_split (segment sizes, default one), sh (server bytes or None),
    sh_split (its segment sizes), dt_ns (time between hellos). fr["sh"] is the server's first
    frame. Returns the frame numbers written per connection."""
    from tests.pcapbuild import pcap

    pkts, frames, t = [], [], t0
    for i, c in enumerate(conns):
        cli, srv = c.get("client", ("10.0.0.1", 40000 + i)), c.get("server", ("10.0.0.2", 443))
        cseq, sseq = 1000 + i * 7, 5000 + i * 13
        ch = c["ch"]
        sizes = c.get("ch_split") or [len(ch)]
        fr = {"ch": []}
        off = 0
        for sz in sizes:
            seg = ch[off:off + sz]
            pkts.append((t, tcp_packet(cli[0], srv[0], cli[1], srv[1], cseq + off, sseq, seg)))
            fr["ch"].append(len(pkts))
            off += sz
            t += 1000
        if c.get("sh") is not None:
            t += c.get("dt_ns", 20_000_000)
            sh = c["sh"]
            off = 0
            for sz in c.get("sh_split") or [len(sh)]:
                pkts.append((t, tcp_packet(srv[0], cli[0], srv[1], cli[1], sseq + off, cseq + len(ch),
                                           sh[off:off + sz])))
                fr.setdefault("sh", len(pkts))
                off += sz
                t += 1000
        t += 1_000_000
        frames.append(fr)
    with open(path, "wb") as f:
        f.write(pcap(pkts))
    return frames
