"""The decrypted truth of a TLS capture with its session keys (issue 33): where each HTTP message
inside TLS starts on the wire, for `httpanalyzer compare --tls --keylog` (compare_exchanges).

`truth(pcap, keylog)` reads the capture's TCP segments through tshark (the comparison's peer:
frame numbers, capture times, addresses, raw sequence numbers and payloads as tshark sees
them; nothing of webtap's walk), puts each direction's bytes in sequence order and decrypts
every record with the key log (NSS key log format, as SSLKEYLOGFILE writes it):

* TLS 1.2 AEAD suites (RFC 5246 PRF key expansion; AES-GCM with the explicit nonce of RFC 5288,
  ChaCha20-Poly1305 with the XORed nonce of RFC 7905; the PRF's hash is the suite's);
* TLS 1.3 (RFC 8446: HKDF-Expand-Label traffic keys from the logged secrets, nonce = iv XOR
  sequence number, AAD = the record header, the inner content type; KeyUpdate secrets _1.._N
  and 0-RTT early data where the log holds their secrets).

`cryptography` (an optional dependency, `pip install webtap[verify]`) opens the AEADs and
checks every record's tag: a record that does not authenticate stops the connection's truth
with a reason, never a guess. A connection the truth cannot open (no keys in the log, a suite
outside the list, a CBC suite, a hole in the capture, no ServerHello) is left out with its
reason in `Truth.skipped`: the comparison says what it did not compare.

For each HTTP message (HTTP/1.1 requests and responses framed by Content-Length / chunked;
h2: the first HEADERS frame of each stream in each direction) it gives the *first packet* that
carries the message's first byte (the byte's place is its record's start + 5 + the explicit
nonce + its offset in the plaintext), that packet's capture time and 1-based frame number, and
`shown_frame`, the frame whose arrival completes the record holding that byte: where tshark's
own decryption shows the message (tests/tlsx/test_truth.py checks that, and the server's
access log, as the truth's second and third sources).
"""
from __future__ import annotations

import bisect
import collections
import hashlib
import hmac
import re
import struct
from dataclasses import dataclass, field

import numpy as np

from httpanalyzer.errors import TruthError
from httpanalyzer.tshark import SEP, run

try:            # optional: only `compare --tls --keylog` needs it
    from cryptography.hazmat.primitives import hashes as _hashes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
    from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand
except ImportError:         # pragma: no cover - the message names the extra to install
    AESGCM = ChaCha20Poly1305 = HKDFExpand = _hashes = None


@dataclass
class Message:
    conn: int                 # connection index, in order of the first SYN
    direction: str            # "request" (client to server) or "response"
    index: int                # n-th message of this direction in the connection (0-based)
    frame: int                # 1-based frame number of the first packet with the first byte
    ts_ns: int
    shown_frame: int          # frame where the record holding the first byte ends
    end_frame: int = 0        # HTTP/1.1: frame where the record holding the last byte ends
    stream_id: int = 0        # h2 stream (0 for HTTP/1.1)
    text: str = ""            # request line / status line (HTTP/1.1)


@dataclass
class Connection:
    client: tuple             # (ip, port)
    server: tuple
    version: int = 0          # selected TLS version (0x0303, 0x0304)
    cipher: int = 0
    alpn: str = ""            # the protocol spoken: "h2" when the client sent h2's preface
    syn_frame: int = 0
    skipped: str = ""         # why the truth has no messages for it; "capture_hole" / "cut":
                              # it has those before a hole / a message that never ended
    messages: list = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# Cipher suites: (TLS version family, AEAD, key length, fixed iv length, hash)

_SUITES = {
    # TLS 1.3 (RFC 8446 B.4)
    0x1301: ("aesgcm", 16, 12, "sha256"),
    0x1302: ("aesgcm", 32, 12, "sha384"),
    0x1303: ("chacha", 32, 12, "sha256"),
    # TLS 1.2 AES-GCM (RFC 5288, RFC 5289): 4-byte salt + 8-byte explicit nonce
    0x009C: ("aesgcm", 16, 4, "sha256"), 0x009D: ("aesgcm", 32, 4, "sha384"),
    0x009E: ("aesgcm", 16, 4, "sha256"), 0x009F: ("aesgcm", 32, 4, "sha384"),
    0xC02B: ("aesgcm", 16, 4, "sha256"), 0xC02C: ("aesgcm", 32, 4, "sha384"),
    0xC02F: ("aesgcm", 16, 4, "sha256"), 0xC030: ("aesgcm", 32, 4, "sha384"),
    # TLS 1.2 ChaCha20-Poly1305 (RFC 7905): 12-byte iv XOR sequence number
    0xCCA8: ("chacha", 32, 12, "sha256"), 0xCCA9: ("chacha", 32, 12, "sha256"),
    0xCCAA: ("chacha", 32, 12, "sha256"),
}
_HASH = {"sha256": hashlib.sha256, "sha384": hashlib.sha384}
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_HRR_RANDOM = bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")


def _aead(kind: str, key: bytes):
    return AESGCM(key) if kind == "aesgcm" else ChaCha20Poly1305(key)


def _prf(secret: bytes, label: bytes, seed: bytes, n: int, hname: str) -> bytes:
    h, out, a = _HASH[hname], b"", label + seed
    while len(out) < n:
        a = hmac.new(secret, a, h).digest()
        out += hmac.new(secret, a + label + seed, h).digest()
    return out[:n]


def _hkdf_label(secret: bytes, label: str, n: int, hname: str) -> bytes:
    lab = b"tls13 " + label.encode()
    info = struct.pack(">H", n) + bytes([len(lab)]) + lab + b"\x00"
    algo = _hashes.SHA256() if hname == "sha256" else _hashes.SHA384()
    return HKDFExpand(algo, n, info).derive(secret)


def read_keylog(paths) -> dict:
    """{client random: {label: secret}} of one NSS key log or several (a path or a list of
    paths; their keys merged), comment and malformed lines skipped."""
    keys: dict = {}
    for path in [paths] if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__") else paths:
        with open(path, encoding="ascii", errors="replace") as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and not parts[0].startswith("#"):
                    try:
                        keys.setdefault(bytes.fromhex(parts[1]), {})[parts[0]] = bytes.fromhex(parts[2])
                    except ValueError:
                        continue
    return keys


class _Dir:
    """One direction's record protection: its keys in the order they take effect, the current
    one and its sequence number."""

    def __init__(self, kind: str, explicit: bool):
        self.kind, self.explicit = kind, explicit
        self.keys = []          # [(aead, iv)]
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
            if not pt:
                raise ValueError("TLS 1.3 record without an inner content type")
            return pt[-1], pt[:-1]
        raise ValueError("a TLS 1.3 record does not authenticate with any key of the log")

    def decrypt12(self, typ: int, ver: bytes, body: bytes):
        aead, iv = self.keys[0]
        if self.explicit:
            nonce, ct = iv + body[:8], body[8:]
        else:
            nonce, ct = bytes(a ^ b for a, b in zip(iv, self.seq.to_bytes(12, "big"))), body
        aad = self.seq.to_bytes(8, "big") + bytes([typ]) + ver + struct.pack(">H", len(ct) - 16)
        try:
            pt = aead.decrypt(nonce, ct, aad)
        except Exception:
            raise ValueError("a TLS 1.2 record does not authenticate with the logged master "
                             "secret") from None
        self.seq += 1
        return typ, pt


# ---------------------------------------------------------------------------------------------
# TCP streams

class _Stream:
    """One direction's bytes in sequence order, each byte's first packet (in capture order)
    remembered: retransmissions and segments that arrive out of order are placed by their
    sequence numbers. The bytes run from the SYN to the first hole (a byte no packet carried):
    the connection's truth ends there, and nothing past it is held, so memory follows the
    bytes captured, not the sequence numbers a segment claims (a far jump, a segment from
    before the SYN)."""

    def __init__(self):
        self.isn = None
        self.segs = []          # (stream offset, payload, frame) in capture order
        self.ts = {}

    def add(self, seq: int, payload: bytes, frame: int, ts_ns: int):
        if self.isn is None:
            self.isn = seq
        off = (seq - self.isn) % (1 << 32)
        if off >= 1 << 31:                    # before the stream's first byte
            off -= 1 << 32
        if off + len(payload) <= 0:
            return
        if off < 0:
            payload, off = payload[-off:], 0
        self.segs.append((off, payload, frame))
        self.ts[frame] = ts_ns

    def build(self):
        end = 0                               # the contiguous bytes from offset 0
        for o, p, _ in sorted(self.segs, key=lambda x: x[0]):
            if o > end:
                break
            end = max(end, o + len(p))
        self.complete = end
        self.holes = any(o >= end for o, _, _ in self.segs)
        self.data = bytearray(end)
        self.frame_of = np.zeros(end, dtype=np.int32)     # 1-based frame numbers, 0: none yet
        for o, p, f in self.segs:
            if o >= end:
                continue
            p = p[:end - o]
            fresh = self.frame_of[o:o + len(p)] == 0
            self.frame_of[o:o + len(p)][fresh] = f
            self.data[o:o + len(p)] = p
        return self

    def first_packet(self, off: int):
        f = int(self.frame_of[off])
        return f, self.ts[f]

    def completing_frame(self, start: int, end: int) -> int:
        """The frame whose arrival completed bytes [start, end)."""
        return int(self.frame_of[start:end].max())


def _records(data: bytes, limit: int):
    off = 0
    while off + 5 <= limit:
        typ, ver, ln = data[off], bytes(data[off + 1:off + 3]), struct.unpack(">H", data[off + 3:off + 5])[0]
        if off + 5 + ln > limit:
            break
        yield off, typ, ver, bytes(data[off + 5:off + 5 + ln])
        off += 5 + ln


def _hello(body: bytes):
    """(handshake type, random, selected or legacy version, cipher) of a plaintext hello record
    (the first handshake message of the record); cipher -1 for a TLS 1.3 draft ServerHello."""
    hs_type = body[0]
    p = 6
    rnd = body[p:p + 32]
    legacy = struct.unpack(">H", body[4:6])[0]
    if hs_type == 2 and (legacy >> 8 == 0x7F or legacy == 0x0304):
        # a TLS 1.3 draft ServerHello (no session id, no compression byte; a final one says
        # 0x0303 here): its key schedule is the draft's, which the truth does not follow
        return hs_type, rnd, legacy, -1
    p += 32
    p += 1 + body[p]
    cipher = 0
    if hs_type == 1:
        n = struct.unpack(">H", body[p:p + 2])[0]
        p += 2 + n
        p += 1 + body[p]
    else:
        cipher = struct.unpack(">H", body[p:p + 2])[0]
        p += 3
    version = struct.unpack(">H", body[4:6])[0]
    if hs_type == 2 and p + 2 <= len(body):
        end = p + 2 + struct.unpack(">H", body[p:p + 2])[0]
        p += 2
        while p + 4 <= end:
            et, el = struct.unpack(">HH", body[p:p + 4])
            if et == 43 and el >= 2:
                version = struct.unpack(">H", body[p + 4:p + 6])[0]
            p += 4 + el
    return hs_type, rnd, version, cipher


def server_hellos(records) -> list:
    """_hello() of each ServerHello among a server's records (offset, type, version, body):
    the plaintext handshake records before its ChangeCipherSpec or first encrypted record only
    (an encrypted TLS 1.2 Finished is type 22 too, and its first byte may be 2), a TLS 1.3
    HelloRetryRequest (a ServerHello with RFC 8446's fixed random) left out."""
    out = []
    for r in records:
        if r[1] != 22:
            break
        if r[3][:1] == b"\x02":
            h = _hello(r[3])
            if h[1] != _HRR_RANDOM:
                out.append(h)
    return out


# ---------------------------------------------------------------------------------------------
# HTTP framing over the decrypted application data

_REQ = re.compile(rb"^[A-Z]+ \S+ HTTP/1\.[01]\r\n")


_DIGITS = re.compile(r"[0-9]{1,18}")
_HEXDIGITS = re.compile(r"[0-9A-Fa-f]{1,15}")


def _length(text: str, form: re.Pattern, base: int, what: str) -> int:
    """A Content-Length (1*DIGIT) or chunk size (1*HEXDIG), RFC 9112: int() alone also takes
    a sign, spaces and underscores, and a negative length walked the data backwards (a loop
    without end on `-E`, found by the fuzz target `truth`)."""
    if not form.fullmatch(text):
        raise ValueError(f"not a {what}: {text[:40]!r}")
    return int(text, base)


def _h1_messages(pt: bytes, is_request: bool):
    """(offset, end, first line) of each HTTP/1.1 message in a direction's application data;
    a last message whose header block the data does not hold (the capture or the connection
    ended in it) is not one: the caller sees the bytes left after the last end."""
    out, p = [], 0
    while p < len(pt):
        he = pt.find(b"\r\n\r\n", p)
        if he < 0:
            break
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
            p += _length(hdrs["content-length"], _DIGITS, 10, "Content-Length")
        elif hdrs.get("transfer-encoding", "").lower() == "chunked":
            while True:
                le = pt.index(b"\r\n", p)
                n = _length(pt[p:le].split(b";")[0].strip().decode("latin-1"), _HEXDIGITS, 16,
                            "chunk size")
                p = le + 2 + n + 2
                if n == 0:
                    break
        out.append((start, min(p, len(pt)), first))
    return out


def _h2_headers(pt: bytes, is_client: bool):
    """(offset, stream id) of the first HEADERS frame of each stream in a direction."""
    out, seen = [], set()
    p = len(H2_PREFACE) if is_client else 0
    while p + 9 <= len(pt):
        ln = int.from_bytes(pt[p:p + 3], "big")
        typ, sid = pt[p + 3], int.from_bytes(pt[p + 5:p + 9], "big") & 0x7FFFFFFF
        if typ == 1 and sid not in seen:
            seen.add(sid)
            out.append((p, sid))
        p += 9 + ln
    return out


# ---------------------------------------------------------------------------------------------
# The capture, through tshark

PACKET_FIELDS = ["frame.number", "frame.time_epoch", "ip.src", "ipv6.src", "ip.dst", "ipv6.dst",
                 "tcp.srcport", "tcp.dstport", "tcp.seq_raw", "tcp.ack_raw", "tcp.flags", "tcp.payload"]


def _ns(epoch: str) -> int:
    s, _, frac = epoch.partition(".")
    return int(s) * 1_000_000_000 + int((frac + "000000000")[:9])


def tcp_packets(pcap, tshark: str = "tshark"):
    """(frame, ts_ns, (src, sport), (dst, dport), seq, ack, flags, payload) of every TCP segment of
    the capture, as tshark reads it (innermost IP header of a tunnel; no reassembly)."""
    cmd = [tshark, "-n", "-r", str(pcap), "-o", "tcp.desegment_tcp_streams:FALSE",
           "-o", "tcp.analyze_sequence_numbers:FALSE", "-Y", "tcp and not icmp and not icmpv6",
           "-T", "fields", "-E", f"separator={SEP}", "-E", "occurrence=l"]
    for f in PACKET_FIELDS:
        cmd += ["-e", f]
    out = run(cmd, str(pcap)).stdout.decode("ascii", errors="replace")
    for ln in out.split("\n"):
        if not ln:
            continue
        fr, ep, s4, s6, d4, d6, sp, dp, seq, ack, fl, pl = ln.split(SEP)
        yield (int(fr), _ns(ep), (s4 or s6, int(sp)), (d4 or d6, int(dp)), int(seq),
               int(ack or 0), int(fl, 16), bytes.fromhex(pl))


# ---------------------------------------------------------------------------------------------

@dataclass
class Truth:
    connections: list                 # Connection, in order of their SYN
    skipped: dict                     # reason -> connections left out (or cut short)
    acks: dict                        # frame -> ACK number of every segment with payload

    @property
    def messages(self):
        return [m for c in self.connections for m in c.messages]


def truth(pcap, keylog, tshark: str = "tshark") -> Truth:
    """The decrypted truth of `pcap` (module docstring); `keylog` a key log's path or a list of
    them."""
    if AESGCM is None:
        raise TruthError("the decrypted truth needs the `cryptography` package "
                         "(pip install 'webtap[verify]')")
    keys = read_keylog(keylog)
    conns: dict = {}
    order = []
    acks = {}
    nosyn = set()                             # flows whose data came before any SYN of theirs
    for fr, ts, a, b, seq, ack, flags, pl in tcp_packets(pcap, tshark):
        key = frozenset((a, b))
        if key not in conns or ((flags & 0x12) == 0x02 and conns[key]["c"].client == a
                                and conns[key][a].segs):
            if not (flags & 0x02) or (flags & 0x10):
                if pl and key not in conns:
                    nosyn.add(key)
                continue                  # connections from their SYN only
            conns[key] = {"c": Connection(client=a, server=b, syn_frame=fr), a: _Stream(), b: _Stream()}
            order.append(conns[key])
        st = conns[key][a]
        if flags & 0x02:
            st.isn = seq + 1
            seq += 1                          # data on a SYN (TCP Fast Open) follows it
        if pl:
            st.add(seq, pl, fr, ts)
            acks[fr] = ack
    out, skipped = [], collections.Counter()
    for ci, entry in enumerate(order):
        c = entry["c"]
        out.append(c)
        cs, ss = entry[c.client].build(), entry[c.server].build()
        try:
            why = _decrypt(c, ci, cs, ss, keys)
        except (ValueError, IndexError, struct.error) as e:
            # a record that does not authenticate, a hello or an HTTP framing it cannot read
            c.skipped, c.messages = f"not_decrypted: {e}", []
            skipped["not_decrypted"] += 1
            continue
        if why:
            c.skipped, c.messages = why, []
            skipped[why] += 1
        elif cs.holes or ss.holes:
            c.skipped = "capture_hole"     # the messages before the hole are kept
            skipped["capture_hole_messages_before_it_kept"] += 1
        elif c.skipped == "cut":
            skipped["cut_in_a_message_messages_before_it_kept"] += 1
    if nosyn:
        # a connection already open when the capture began: its sequence numbers' start is
        # unknown (no SYN), so its bytes cannot be placed; its exchanges are not_in_truth
        skipped["no_syn_in_capture"] = len(nosyn)
    return Truth(out, dict(sorted(skipped.items())), acks)


def _decrypt(c: Connection, ci: int, cs: _Stream, ss: _Stream, keys: dict) -> str:
    """Fill c.messages; the reason the connection is left out, or "" when it is not."""
    recs = {"c": list(_records(cs.data, cs.complete)), "s": list(_records(ss.data, ss.complete))}
    if not recs["c"] or not recs["s"]:
        return "no_tls"
    if recs["c"][0][1] != 22 or recs["c"][0][3][:1] != b"\x01":
        return "no_tls"
    _, crand, _, _ = _hello(recs["c"][0][3])
    shs = server_hellos(recs["s"])
    if not shs:
        return "no_server_hello"
    _, srand, c.version, c.cipher = shs[0]
    if c.cipher < 0:
        return f"tls13_draft_0x{c.version:04x}"
    k = keys.get(crand)
    if not k:
        return "no_keys_in_log"
    suite = _SUITES.get(c.cipher)
    if suite is None or (c.version == 0x0304) != (c.cipher >> 8 == 0x13):
        return f"cipher_not_supported_0x{c.cipher:04x}"
    kind, klen, ivlen, hname = suite
    if c.version == 0x0304:
        dirs = {"c": _Dir(kind, False), "s": _Dir(kind, False)}
        for d, side in (("c", "CLIENT"), ("s", "SERVER")):
            labs = (["CLIENT_EARLY_TRAFFIC_SECRET"] if d == "c" else []) + \
                [f"{side}_HANDSHAKE_TRAFFIC_SECRET"] + \
                [f"{side}_TRAFFIC_SECRET_{n}" for n in range(64) if f"{side}_TRAFFIC_SECRET_{n}" in k]
            for lab in labs:
                if lab in k:
                    dirs[d].keys.append((_aead(kind, _hkdf_label(k[lab], "key", klen, hname)),
                                         _hkdf_label(k[lab], "iv", 12, hname)))
        if not dirs["c"].keys or not dirs["s"].keys:
            return "no_keys_in_log"
    else:
        if "CLIENT_RANDOM" not in k:
            return "no_keys_in_log"
        kb = _prf(k["CLIENT_RANDOM"], b"key expansion", srand + crand, 2 * (klen + ivlen), hname)
        explicit = ivlen == 4
        dirs = {"c": _Dir(kind, explicit), "s": _Dir(kind, explicit)}
        dirs["c"].keys.append((_aead(kind, kb[0:klen]), kb[2 * klen:2 * klen + ivlen]))
        dirs["s"].keys.append((_aead(kind, kb[klen:2 * klen]), kb[2 * klen + ivlen:2 * (klen + ivlen)]))
    pts = {}
    for d, st in (("c", cs), ("s", ss)):
        pt, where = bytearray(), []      # (pt offset, wire offset of that byte, record start, end)
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
                wire = off + 5 + (8 if dirs[d].explicit else 0)
            if inner == 23 and p:
                where.append((len(pt), wire, off, off + 5 + len(body)))
                pt += p
        pts[d] = (bytes(pt), where, st)
    # the protocol spoken (in TLS 1.3 the server's ALPN is encrypted): h2 starts with the preface
    c.alpn = "h2" if pts["c"][0][:len(H2_PREFACE)] == H2_PREFACE else "http/1.1"
    for d in ("c", "s"):
        pt, where, st = pts[d]
        is_c = d == "c"
        if c.alpn == "h2":
            msgs = [(o, o + 1, sid, "") for o, sid in _h2_headers(pt, is_c)]
        else:
            msgs = [(o, e, 0, txt) for o, e, txt in _h1_messages(pt, is_c)]
            if (msgs[-1][1] if msgs else 0) < len(pt):
                c.skipped = "cut"             # a message whose header block never ended
        starts = [w[0] for w in where]
        for n, (o, e, sid, txt) in enumerate(msgs):
            j = bisect.bisect_right(starts, o) - 1
            je = bisect.bisect_right(starts, e - 1) - 1
            wire_off = where[j][1] + (o - where[j][0])
            fr, ts = st.first_packet(wire_off)
            c.messages.append(Message(ci, "request" if is_c else "response", n, fr, ts,
                                      st.completing_frame(*where[j][2:]),
                                      st.completing_frame(*where[je][2:]), sid, txt))
    return ""
