"""The decrypted truth of a capture made by tests/tlsx/gen_truth.py (issue 33).

`truth(pcap, keylog)` decrypts every TLS connection of the capture with its key log, written here
from RFC 5246 / RFC 5288 (TLS 1.2 AES-GCM: PRF key expansion, explicit nonce, AAD of sequence
number, type, version and length) and RFC 8446 (TLS 1.3: HKDF-Expand-Label traffic keys, nonce =
iv XOR sequence number, AAD = record header, inner content type) with `cryptography`'s AES-GCM,
which checks every record's tag: a record that does not authenticate is an error, never a guess.
It reads the packets with scapy and the TCP streams in sequence order: nothing of webtap.

For each HTTP message (HTTP/1.1 request and response, framed by Content-Length / chunked; h2:
the first HEADERS frame of each stream in each direction) it gives the *first packet* that
carries the message's first byte on the wire (the byte's place is the record's start + 5 +
the explicit nonce + its offset in the plaintext), its capture time and 1-based frame number,
and `shown_frame`, the frame where the record holding that byte ends: where tshark's decryption
shows the message (the cross-check of tests/tlsx/test_truth.py).
"""
from __future__ import annotations

import bisect
import hashlib
import hmac
import re
import struct

import numpy as np
from dataclasses import dataclass, field

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand


@dataclass
class Message:
    conn: int                 # connection index, in order of the first SYN / ClientHello
    direction: str            # "request" (client to server) or "response"
    index: int                # n-th message of this direction in the connection (0-based)
    frame: int                # 1-based frame number of the first packet with the first byte
    ts_ns: int
    shown_frame: int          # frame where the record holding the first byte ends
    end_frame: int = 0        # HTTP/1.1: frame where the record holding the last byte ends
    stream_id: int = 0        # h2 stream (0 for HTTP/1.1)
    text: str = ""            # request line / status line / ":method :path" / ":status"


@dataclass
class Connection:
    client: tuple             # (ip, port)
    server: tuple
    version: int = 0          # selected TLS version (0x0303, 0x0304)
    alpn: str = ""
    resumed: bool = False
    syn_frame: int = 0
    messages: list = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# Key schedules

def _prf_sha256(secret: bytes, label: bytes, seed: bytes, n: int) -> bytes:
    out, a = b"", label + seed
    while len(out) < n:
        a = hmac.new(secret, a, hashlib.sha256).digest()
        out += hmac.new(secret, a + label + seed, hashlib.sha256).digest()
    return out[:n]


def _hkdf_label(secret: bytes, label: str, n: int) -> bytes:
    lab = b"tls13 " + label.encode()
    info = struct.pack(">H", n) + bytes([len(lab)]) + lab + b"\x00"
    return HKDFExpand(hashes.SHA256(), n, info).derive(secret)


def read_keylog(path) -> dict:
    keys: dict = {}
    for line in open(path):
        parts = line.split()
        if len(parts) == 3:
            keys.setdefault(bytes.fromhex(parts[1]), {})[parts[0]] = bytes.fromhex(parts[2])
    return keys


class _Dir:
    """One direction's record protection: the current key and its sequence number."""

    def __init__(self):
        self.keys = []          # [(aead, iv)] in the order they take effect
        self.k = -1
        self.seq = 0

    def decrypt13(self, hdr: bytes, body: bytes):
        for k in range(max(self.k, 0), len(self.keys)):
            aead, iv = self.keys[k]
            seq = self.seq if k == self.k else 0
            nonce = bytes(a ^ b for a, b in zip(iv, seq.to_bytes(12, "big")))
            try:
                pt = aead.decrypt(nonce, body, hdr)
            except Exception:
                continue
            self.k, self.seq = k, seq + 1
            pt = pt.rstrip(b"\x00")
            return pt[-1], pt[:-1]
        raise ValueError("TLS 1.3 record does not authenticate with any key of the log")

    def decrypt12(self, typ: int, ver: bytes, body: bytes):
        aead, salt = self.keys[0]
        nonce = salt + body[:8]
        aad = self.seq.to_bytes(8, "big") + bytes([typ]) + ver + struct.pack(">H", len(body) - 24)
        pt = aead.decrypt(nonce, body[8:], aad)
        self.seq += 1
        return typ, pt


# ---------------------------------------------------------------------------------------------
# TCP streams

class _Stream:
    """One direction's bytes in sequence order, each byte's first packet (in capture order)
    remembered: retransmissions and segments that arrive out of order are placed by their
    sequence numbers; a byte no packet carried is an error (the capture has a hole)."""

    def __init__(self):
        self.isn = None
        self.segs = []          # (stream offset, payload, frame, ts_ns) in capture order
        self.ts = {}

    def add(self, seq: int, payload: bytes, frame: int, ts_ns: int):
        if self.isn is None:
            self.isn = seq
        self.segs.append(((seq - self.isn) % (1 << 32), payload, frame))
        self.ts[frame] = ts_ns

    def build(self):
        n = max((o + len(p) for o, p, _ in self.segs), default=0)
        self.data = bytearray(n)
        self.frame_of = np.zeros(n, dtype=np.int64)
        for o, p, f in self.segs:
            fresh = self.frame_of[o:o + len(p)] == 0
            self.frame_of[o:o + len(p)][fresh] = f
            self.data[o:o + len(p)] = p
        if n and not self.frame_of.all():
            raise ValueError(f"bytes from offset {int(np.argmin(self.frame_of))} never captured")
        return self

    def first_packet(self, off: int):
        f = int(self.frame_of[off])
        return f, self.ts[f]

    def completing_frame(self, start: int, end: int) -> int:
        """The frame whose arrival completed bytes [start, end)."""
        return int(self.frame_of[start:end].max())


def _records(data: bytes):
    off = 0
    while off + 5 <= len(data):
        typ, ver, ln = data[off], data[off + 1:off + 3], struct.unpack(">H", data[off + 3:off + 5])[0]
        if off + 5 + ln > len(data):
            break
        yield off, typ, ver, data[off + 5:off + 5 + ln]
        off += 5 + ln


def _hello(body: bytes):
    """(random, selected or offered version, alpn) of a plaintext ClientHello/ServerHello record."""
    hs_type = body[0]
    p = 4
    p += 2
    rnd = body[p:p + 32]
    p += 32
    sid = body[p]
    p += 1 + sid
    if hs_type == 1:
        n = struct.unpack(">H", body[p:p + 2])[0]
        p += 2 + n
        p += 1 + body[p]
    else:
        p += 3
    version, alpn = struct.unpack(">H", body[4:6])[0], ""
    if p + 2 <= len(body):
        end = p + 2 + struct.unpack(">H", body[p:p + 2])[0]
        p += 2
        while p + 4 <= end:
            et, el = struct.unpack(">HH", body[p:p + 4])
            ed = body[p + 4:p + 4 + el]
            if et == 43 and hs_type == 2:
                version = struct.unpack(">H", ed[:2])[0]
            if et == 16 and hs_type == 2:
                alpn = ed[3:3 + ed[2]].decode()
            p += 4 + el
    return rnd, version, alpn


# ---------------------------------------------------------------------------------------------
# HTTP framing over the decrypted application data

_REQ = re.compile(rb"^[A-Z]+ \S+ HTTP/1\.[01]\r\n")


def _h1_messages(pt: bytes, is_request: bool):
    """(offset, end, first line) of each HTTP/1.1 message in a direction's application data."""
    out, p = [], 0
    while p < len(pt):
        he = pt.find(b"\r\n\r\n", p)
        if he < 0:
            raise ValueError(f"HTTP header block without end at {p}")
        head = pt[p:he].decode("latin-1")
        first = head.split("\r\n", 1)[0]
        if is_request and not _REQ.match(pt[p:he + 2]):
            raise ValueError(f"not a request line at {p}: {first!r}")
        if not is_request and not first.startswith("HTTP/1."):
            raise ValueError(f"not a status line at {p}: {first!r}")
        start = p
        hdrs = {ln.split(":", 1)[0].strip().lower(): ln.split(":", 1)[1].strip()
                for ln in head.split("\r\n")[1:] if ":" in ln}
        p = he + 4
        if "content-length" in hdrs:
            p += int(hdrs["content-length"])
        elif hdrs.get("transfer-encoding", "").lower() == "chunked":
            while True:
                le = pt.index(b"\r\n", p)
                n = int(pt[p:le].split(b";")[0], 16)
                p = le + 2 + n + 2
                if n == 0:
                    break
        out.append((start, p, first))
    return out


def _h2_headers(pt: bytes, is_client: bool):
    """(offset, stream id) of the first HEADERS frame of each stream in a direction."""
    out, seen = [], set()
    p = 24 if is_client else 0
    if is_client and pt[:24] != b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n":
        raise ValueError("h2 client without the connection preface")
    while p + 9 <= len(pt):
        ln = int.from_bytes(pt[p:p + 3], "big")
        typ, sid = pt[p + 3], int.from_bytes(pt[p + 5:p + 9], "big") & 0x7FFFFFFF
        if typ == 1 and sid not in seen:
            seen.add(sid)
            out.append((p, sid))
        p += 9 + ln
    return out


def truth(pcap, keylog) -> list[Connection]:
    from scapy.all import IP, TCP, IPv6, PcapReader

    keys = read_keylog(keylog)
    conns: dict = {}
    order = []
    with PcapReader(str(pcap)) as rd:
        for i, pkt in enumerate(rd, 1):
            ip = pkt.getlayer(IP) or pkt.getlayer(IPv6)
            tcp = pkt.getlayer(TCP)
            if ip is None or tcp is None:
                continue
            a, b = (ip.src, tcp.sport), (ip.dst, tcp.dport)
            key = frozenset((a, b))
            ts_ns = int(pkt.time * 1_000_000) * 1000      # pcap: microseconds
            if key not in conns:
                if not (tcp.flags & 0x02) or (tcp.flags & 0x10):
                    continue                  # connections from their SYN only
                conns[key] = {"c": Connection(client=a, server=b, syn_frame=i), a: _Stream(), b: _Stream()}
                order.append(key)
            st = conns[key][a]
            if tcp.flags & 0x02:
                st.isn = tcp.seq + 1
            if ip.version == 4:
                plen = ip.len - ip.ihl * 4 - tcp.dataofs * 4
            else:
                plen = ip.plen - tcp.dataofs * 4
            pl = bytes(tcp.payload)[:plen]      # without the Ethernet padding of short frames
            if pl:
                st.add(tcp.seq, pl, i, ts_ns)
    out = []
    for ci, key in enumerate(order):
        c = conns[key]["c"]
        cs, ss = conns[key][c.client].build(), conns[key][c.server].build()
        out.append(c)
        recs = {"c": list(_records(bytes(cs.data))), "s": list(_records(bytes(ss.data)))}
        if not recs["c"] or not recs["s"]:
            continue
        crand, _, _ = _hello(recs["c"][0][3])
        sh = next(r for r in recs["s"] if r[1] == 22)
        srand, c.version, c.alpn = _hello(sh[3])
        k = keys[crand]
        dirs = {"c": _Dir(), "s": _Dir()}
        if c.version == 0x0304:
            for d, labs in (("c", ("CLIENT_HANDSHAKE_TRAFFIC_SECRET", "CLIENT_TRAFFIC_SECRET_0")),
                            ("s", ("SERVER_HANDSHAKE_TRAFFIC_SECRET", "SERVER_TRAFFIC_SECRET_0"))):
                for lab in labs:
                    dirs[d].keys.append((AESGCM(_hkdf_label(k[lab], "key", 16)), _hkdf_label(k[lab], "iv", 12)))
        else:
            kb = _prf_sha256(k["CLIENT_RANDOM"], b"key expansion", srand + crand, 40)
            dirs["c"].keys.append((AESGCM(kb[0:16]), kb[32:36]))
            dirs["s"].keys.append((AESGCM(kb[16:32]), kb[36:40]))
        pts = {}
        for d, st in (("c", cs), ("s", ss)):
            pt, where = bytearray(), []          # app data; (pt offset, wire offset of that byte, record start, record end)
            ccs = False
            for off, typ, ver, body in recs[d]:
                if c.version == 0x0304:
                    if typ != 23:
                        continue
                    inner, p = dirs[d].decrypt13(bytes(st.data[off:off + 5]), body)
                    wire = off + 5
                else:
                    if typ == 20:
                        ccs = True
                        continue
                    if not ccs:
                        continue
                    inner, p = dirs[d].decrypt12(typ, ver, body)
                    wire = off + 5 + 8
                if inner == 23 and p:
                    where.append((len(pt), wire, off, off + 5 + len(body)))
                    pt += p
            pts[d] = (pt, where, st)
        # the protocol spoken (in TLS 1.3 the server's ALPN is encrypted): h2 starts with the preface
        c.alpn = "h2" if bytes(pts["c"][0][:24]) == b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" else "http/1.1"
        for d in ("c", "s"):
            pt, where, st = pts[d]
            is_c = d == "c"
            if c.alpn == "h2":
                msgs = [(o, o + 1, sid, "") for o, sid in _h2_headers(bytes(pt), is_c)]
            else:
                msgs = [(o, e, 0, txt) for o, e, txt in _h1_messages(bytes(pt), is_c)]
            starts = [w[0] for w in where]
            for n, (o, e, sid, txt) in enumerate(msgs):
                j = bisect.bisect_right(starts, o) - 1
                je = bisect.bisect_right(starts, e - 1) - 1
                wire_off = where[j][1] + (o - where[j][0])
                fr, ts = st.first_packet(wire_off)
                c.messages.append(Message(ci, "request" if is_c else "response", n, fr, ts,
                                          st.completing_frame(*where[j][2:]),
                                          st.completing_frame(*where[je][2:]), sid, txt))
    return out
