"""TLS and QUIC lookups inside tunnels (issue 18 with the encapsulations of issue 23).

A ClientHello or client Initial inside a tunnel is looked up like any other, and its row carries
the encapsulation (encap, outer addresses, tunnel id) as a GET's does. Nothing is forged for it:
the forge builds a packet from the inner link/IP offsets and would send the tunnel's outer
headers with stale lengths, so the hit is counted in tunnel_hits_not_forged instead, exactly as
the HTTP path does (tests/dissect/test_encap.py). A plain hit beside it is still forged.
"""
from __future__ import annotations

import socket
import struct
import subprocess

import numpy as np

from tests.conftest import SHARED, require_shared
from tests.urlfilter.test_analyzer import tree       # one blacklist builder for the tests
from urlfilter.scan import scan
from webtap.capture import open_trace
from webtap._ext import urlmatch as um
from webtap.records.message import ENCAP_NAMES

from .hello import client_hello, crypto, frame, initial, records, sni_ext, write

DCID = bytes.fromhex("8394c8f03e515708")
VXLAN = ENCAP_NAMES.index("vxlan") | ENCAP_NAMES.index("eth") << 8   # VXLAN, then its Ethernet
OUTER_SRC, OUTER_DST = "198.51.100.1", "198.51.100.2"




def _vxlan(inner: bytes, vni: int) -> bytes:
    """inner (an Ethernet frame) in VXLAN (RFC 7348: flags 0x08, 24-bit VNI) over UDP 4789 / IPv4."""
    body = struct.pack(">HHHH", 40000, 4789, 8 + 8 + len(inner), 0) + struct.pack(">II", 0x08000000, vni << 8) + inner
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(body), 0, 0x4000, 64, 17, 0,
                     socket.inet_aton(OUTER_SRC), socket.inet_aton(OUTER_DST))
    s = sum(struct.unpack(">10H", ip))
    s = (s & 0xFFFF) + (s >> 16)
    ip = ip[:10] + struct.pack(">H", ~((s & 0xFFFF) + (s >> 16)) & 0xFFFF) + ip[12:]
    return b"\x02\x00\x00\x00\x00\x12" + b"\x02\x00\x00\x00\x00\x11" + b"\x08\x00" + ip + body


def _rows(path):
    t = um.SniTable()
    out = []
    for b in open_trace(str(path)):
        msgs, proto, *_ = t.extract(b.packets, b.data, False)
        out += [(int(m["pkt_index"]), int(p), int(m["encap"]), int(m["tunnel_id"]), int(m["outer_ip_version"]),
                 socket.inet_ntoa(bytes(m["outer_src"][:4])), socket.inet_ntoa(bytes(m["outer_dst"][:4])))
                for m, p in zip(msgs, proto)]
    return out


def test_tunnelled_hits_are_matched_not_forged(tmp_path):
    tls = records(client_hello(sni_ext(b"www.evil.test")))
    quic = initial(crypto(0, client_hello(sni_ext(b"www.evil.test"), quic=True)), dcid=DCID)
    frames = [
        _vxlan(frame(tls, sport=5000), 77),                 # 0: TLS in VXLAN
        _vxlan(frame(quic, sport=5001, udp=True), 78),      # 1: QUIC in VXLAN
        frame(tls, sport=5002),                             # 2: plain TLS
        frame(quic, sport=5003, udp=True),                  # 3: plain QUIC
    ]
    write(tmp_path / "t.pcap", frames)
    assert _rows(tmp_path / "t.pcap") == [
        (0, 1, VXLAN, 77, 4, OUTER_SRC, OUTER_DST), (1, 2, VXLAN, 78, 4, OUTER_SRC, OUTER_DST),
        (2, 1, 0, 0, 0, "0.0.0.0", "0.0.0.0"), (3, 2, 0, 0, 0, "0.0.0.0", "0.0.0.0")]
    forged = tmp_path / "f.pcap"
    res = scan(str(tmp_path / "t.pcap"), tree("evil.test"), forged_out=str(forged))
    df = res.to_pandas()
    assert list(df["proto"]) == ["tls", "quic", "tls", "quic"] and df["hit"].all()
    assert list(df["forged"]) == [0, 0, 2, 1]
    c = res.counters
    assert c["tunnel_hits_not_forged"] == 2
    assert (c["tls_hits"], c["tls_forged"], c["quic_hits"], c["quic_forged"]) == (2, 2, 2, 1)
    # the forged pcap: the plain connections' FIN, RST and close only
    assert res.forged_written == 3
    ports = []
    for b in open_trace(str(forged)):
        for i in range(len(b.packets)):
            o = int(b.packets["offset"][i])
            ports.append(struct.unpack(">H", bytes(b.data[o + 36:o + 38]))[0])   # Ethernet + IPv4: dst port
    assert sorted(ports) == [443, 5002, 5003]


def test_real_vxlan_trace_hits_are_not_forged(tmp_path):
    """ndpi/vxlan.pcap: two ClientHellos inside VXLAN (tshark gives their VNI and outer IPs)."""
    path = require_shared(SHARED / "traces-tls" / "ndpi" / "vxlan.pcap")
    out = subprocess.run(["tshark", "-r", str(path), "-Y", "tls.handshake.type == 1", "-T", "fields",
                          "-e", "frame.number", "-e", "vxlan.vni", "-e", "ip.src", "-e", "ip.dst",
                          "-e", "tls.handshake.extensions_server_name"],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    want = []
    for line in out.splitlines():
        num, vni, src, dst, sni = line.split("\t")
        want.append((int(num) - 1, 1, VXLAN, int(vni), 4, src.split(",")[0], dst.split(",")[0]))
    assert len(want) == 2
    assert _rows(path) == want
    forged = tmp_path / "f.pcap"
    res = scan(str(path), tree("facebook.com"), forged_out=str(forged))
    df = res.to_pandas()
    assert list(df["sni"]) == ["facebook.com", "www.facebook.com"] and df["hit"].all()
    assert (df["forged"] == 0).all() and res.counters["tunnel_hits_not_forged"] == 2
    assert res.forged_written == 0
