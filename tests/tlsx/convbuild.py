"""Built TLS-over-TCP conversations for the exchange rules' tests (issue 33).

A conversation is a list of flights, each (side, records, kind[, first_app]): the side ("c" / "s") sends its
records back to back, cut into segments of at most `mss` bytes (so record headers and records
span segments as the generator's cuts say); every packet acknowledges all the other side has
sent before it. `kind` names what the flight is for the expectation: "hs" (handshake), "nst"
(TLS 1.3 session tickets), "req" (application data request), "resp" (its response), "alert"; first_app: the index of the flight's first application-data record (a TLS 1.3
client's Finished may lead its request's flight).

`expected(conv)` is written from the rules of docs/TLS.md "Exchanges", not from the stage: the
k-th request is the first packet carrying a byte of the first record of the k-th "req" flight,
its response the first packet carrying a byte of the first record of the k-th "resp" flight.
"""
from __future__ import annotations

from tests.tls.hellobuild import (alpn_ext, client_hello, ext, record, server_hello, sni_ext,
                                  tcp_packet, u16, versions_ext)
from tests.pcapbuild import pcap

T0 = 1_700_000_000_000_000_000


def rec(ctype: int, n: int, fill: int = 0xAB) -> bytes:
    """A record of type ctype with an n-byte body (opaque: encrypted or not, the stage reads
    only the header)."""
    return record(ctype, bytes([fill]) * n)


def tls12_handshake(resumed=False, sni=b"x.test") -> list:
    ch = record(22, client_hello(version=0x0303, ciphers=(0xC02B,), exts=(sni_ext(sni),
                                                                             alpn_ext((b"http/1.1",)))), 0x0301)
    sh = record(22, server_hello(version=0x0303, cipher=0xC02B, exts=()))
    if resumed:
        return [("c", [ch], "hs"), ("s", [sh, rec(20, 1), rec(22, 40)], "hs"),
                ("c", [rec(20, 1), rec(22, 40)], "hs")]
    return [("c", [ch], "hs"), ("s", [sh, rec(22, 900), rec(22, 300), rec(22, 4)], "hs"),
            ("c", [rec(22, 37), rec(20, 1), rec(22, 40)], "hs"),
            ("s", [rec(22, 200), rec(20, 1), rec(22, 40)], "hs")]


def tls13_handshake(resumed=False) -> list:
    ch = record(22, client_hello(version=0x0303, ciphers=(0x1301,),
                                 exts=(sni_ext(b"x.test"), versions_ext((0x0304,)))), 0x0301)
    sh = record(22, server_hello(version=0x0303, cipher=0x1301, exts=(ext(43, u16(0x0304)),)))
    flight = [rec(23, 50), rec(23, 90)] if resumed else [rec(23, 40), rec(23, 900), rec(23, 100), rec(23, 58)]
    return [("c", [ch], "hs"), ("s", [sh, rec(20, 1)] + flight, "hs")]


def tls13_client_finished() -> list:
    return [rec(20, 1), rec(23, 53)]


def build(flights, mss: int, path=None, client=("10.0.0.1", 40000), server=("10.0.0.2", 443),
          t0=T0, gap_ns=1_000_000):
    """pcap bytes (written to path if given) and, per flight, the frames of its packets and the
    frame holding the first byte of each record."""
    pkts = []
    seq = {"c": 1000, "s": 9000}
    t = t0
    out = []
    for fl in flights:
        side, recs, kind = fl[:3]
        first_app = fl[3] if len(fl) > 3 else 0
        src, dst = (client, server) if side == "c" else (server, client)
        other = "s" if side == "c" else "c"
        data = b"".join(recs)
        starts, o = [], 0
        for r in recs:
            starts.append(o)
            o += len(r)
        frames, offs = [], []
        for off in range(0, len(data), mss):
            seg = data[off:off + mss]
            pkts.append((t, tcp_packet(src[0], dst[0], src[1], dst[1], seq[side] + off, seq[other], seg)))
            frames.append(len(pkts))
            offs.append(off)
            t += 1000
        rec_frames = [frames[max(i for i, x in enumerate(offs) if x <= s)] for s in starts]
        out.append({"side": side, "kind": kind, "frames": frames, "rec_frames": rec_frames,
                    "first_app": rec_frames[first_app] if recs else None})
        seq[side] += len(data)
        t += gap_ns
    raw = pcap(pkts)
    if path is not None:
        with open(path, "wb") as f:
            f.write(raw)
    times = {i + 1: p[0] for i, p in enumerate(pkts)}
    return raw, out, times


def expected(built) -> list[tuple[int, int]]:
    """(request frame, response frame) of each exchange by the rules."""
    reqs = [f["first_app"] for f in built if f["kind"] == "req"]
    resps = [f["first_app"] for f in built if f["kind"] == "resp"]
    return list(zip(reqs, resps))
