"""Encapsulations (ext/walk/l34.c): every tunnel and link type the walk opens, on built packets
checked against the real tshark, and on the shared traces that hold them, frame by frame.

Each built packet carries one HTTP request inside its encapsulation; tshark must decode the same
TCP segment inside it (tests/tools/tcp_reach.py) and webtap must find the request, name the
layers in `encap`, count each layer, and give the outer endpoints and the tunnel id.
"""
from __future__ import annotations

import os
import shutil
import socket
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import pcapbuild as pb
from tests.dissect.packets import GET, one, tcp4, tcp6

SHARED = Path(os.environ.get("WEBTAP_SHARED", Path(__file__).resolve().parents[2] / ".." / "shared"))

ETH_HDR = bytes.fromhex("020000000002" "020000000001")


def eth(etype: int, body: bytes) -> bytes:
    return ETH_HDR + struct.pack(">H", etype) + body


def ip4(proto: int, body: bytes, src="203.0.113.1", dst="203.0.113.2") -> bytes:
    hdr = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(body), 1, 0, 64, proto, 0,
                      socket.inet_aton(src), socket.inet_aton(dst))
    s = sum(struct.unpack(">10H", hdr))
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    return hdr[:10] + struct.pack(">H", ~s & 0xFFFF) + hdr[12:] + body


def ip6(nxt: int, body: bytes, src="2001:db8:ff::1", dst="2001:db8:ff::2") -> bytes:
    return (struct.pack(">IHBB", 0x60000000, len(body), nxt, 64) + socket.inet_pton(socket.AF_INET6, src)
            + socket.inet_pton(socket.AF_INET6, dst) + body)


def udp(sport: int, dport: int, body: bytes) -> bytes:
    return struct.pack(">HHHH", sport, dport, 8 + len(body), 0) + body


INNER4 = bytes(tcp4())
INNER6 = bytes(tcp6())
INNER_ETH = eth(0x0800, INNER4)
# MAC addresses with registered OUIs (VMware): tshark's pseudowire heuristic asks its OUI table
INNER_ETH_OUI = bytes.fromhex("000c29000002" "005056000001") + struct.pack(">H", 0x0800) + INNER4


def gre(proto: int, body: bytes, key=None, seq=None, csum=False) -> bytes:
    flags = (0x8000 if csum else 0) | (0x2000 if key is not None else 0) | (0x1000 if seq is not None else 0)
    out = struct.pack(">HH", flags, proto)
    if csum:
        out += b"\0\0\0\0"
    if key is not None:
        out += struct.pack(">I", key)
    if seq is not None:
        out += struct.pack(">I", seq)
    return out + body


def gtpu(body: bytes, teid=0x11223344, ext=False) -> bytes:
    if not ext:
        return struct.pack(">BBHI", 0x30, 0xFF, len(body), teid) + body
    # E bit: sequence, N-PDU, next extension type 0x85 (PDU session container, 1 word) then none
    opt = struct.pack(">HBB", 0, 0, 0x85) + bytes([1, 0x10, 0x05, 0x00])
    return struct.pack(">BBHI", 0x34, 0xFF, len(opt) + len(body), teid) + opt + body


def ayiya(body: bytes, nh: int) -> bytes:
    # identity 2^4 = 16 bytes (type 1: integer), signature 5 words (SHA-1), auth 2, opcode 1
    return bytes([0x41, 0x52, 0x11, nh]) + struct.pack(">I", 0) + b"\1" * 16 + b"\2" * 20 + body


def nflog(ipkt: bytes, family=2) -> bytes:
    def tlv(t, v):
        return struct.pack("<HH", 4 + len(v), t) + v + b"\0" * ((-len(v)) % 4)
    return bytes([family, 0, 0, 0]) + tlv(1, b"\x08\x00\x01\x00") + tlv(10, b"root") + tlv(9, ipkt)


# name -> (frame, linktype, expected encap text, outer src, tunnel id)
CASES = {
    "gre_ip4_key_seq": (eth(0x0800, ip4(47, gre(0x0800, INNER4, key=77, seq=5, csum=True))), 1, "gre", "203.0.113.1", 77),
    "gre_teb": (eth(0x0800, ip4(47, gre(0x6558, INNER_ETH, key=9))), 1, "gre,eth", "203.0.113.1", 9),
    "gre_ip6_over_ip6": (eth(0x86DD, ip6(47, gre(0x86DD, INNER6))), 1, "gre", "2001:db8:ff::1", 0),
    "erspan_1": (eth(0x0800, ip4(47, gre(0x88BE, INNER_ETH))), 1, "gre,erspan,eth", "203.0.113.1", 0),
    "erspan_2": (eth(0x0800, ip4(47, gre(0x88BE, struct.pack(">HHI", 0x1000, 0x0123, 7) + INNER_ETH, seq=1))), 1,
                 "gre,erspan,eth", "203.0.113.1", 0x123),
    "erspan_3": (eth(0x0800, ip4(47, gre(0x22EB, struct.pack(">HHIHH", 0x2000, 0x0042, 0, 0, 0) + INNER_ETH, seq=1))), 1,
                 "gre,erspan,eth", "203.0.113.1", 0x42),
    "vxlan": (eth(0x0800, ip4(17, udp(50000, 4789, struct.pack(">II", 0x08000000, 4242 << 8) + INNER_ETH))), 1,
              "vxlan,eth", "203.0.113.1", 4242),
    "geneve_options": (eth(0x0800, ip4(17, udp(50000, 6081, struct.pack(">BBHI", 2, 0, 0x6558, 99 << 8)
                                               + b"\x01\x02\x03\x01" + b"\xaa" * 4 + INNER_ETH))), 1,
                       "geneve,eth", "203.0.113.1", 99),
    "gtpu": (eth(0x0800, ip4(17, udp(2152, 2152, gtpu(INNER4)))), 1, "gtpu", "203.0.113.1", 0x11223344),
    "gtpu_ext": (eth(0x0800, ip4(17, udp(2152, 2152, gtpu(INNER6, ext=True)))), 1, "gtpu", "203.0.113.1", 0x11223344),
    "teredo": (eth(0x0800, ip4(17, udp(3544, 40001, b"\x00\x00" + b"\xaa" * 6 + INNER6))), 1,
               "teredo", "203.0.113.1", 0),
    "ayiya": (eth(0x0800, ip4(17, udp(40002, 5072, ayiya(INNER6, 41)))), 1, "ayiya", "203.0.113.1", 0),
    "4in4": (eth(0x0800, ip4(4, INNER4)), 1, "4in4", "203.0.113.1", 0),
    "6in4": (eth(0x0800, ip4(41, INNER6)), 1, "6in4", "203.0.113.1", 0),
    "4in6": (eth(0x86DD, ip6(4, INNER4)), 1, "4in6", "2001:db8:ff::1", 0),
    "6in6": (eth(0x86DD, ip6(41, INNER6)), 1, "6in6", "2001:db8:ff::1", 0),
    "pppoe": (eth(0x8864, struct.pack(">BBHHH", 0x11, 0, 0x0035, len(INNER4) + 2, 0x0021) + INNER4), 1,
              "pppoe", None, 0x35),
    "pppoe_qinq": (eth(0x88A8, struct.pack(">HH", 100, 0x8100) + struct.pack(">HH", 200, 0x8864)
                       + struct.pack(">BBHHH", 0x11, 0, 7, len(INNER6) + 2, 0x0057) + INNER6), 1, "pppoe", None, 7),
    "mpls_stack": (eth(0x8847, struct.pack(">II", (1000 << 12) | 64, (2000 << 12) | 0x100 | 64) + INNER4), 1,
                   "mpls", None, 2000),
    "mpls_pw_eth": (eth(0x8847, struct.pack(">I", (3000 << 12) | 0x100 | 64) + INNER_ETH_OUI), 1,
                    "mpls,eth", None, 3000),
    "mpls_pw_eth_cw": (eth(0x8847, struct.pack(">I", (3000 << 12) | 0x100 | 64) + b"\0\0\0\1" + INNER_ETH), 1,
                       "mpls,eth", None, 3000),
    "llc_snap": (ETH_HDR + struct.pack(">H", 8 + len(INNER4)) + b"\xaa\xaa\x03\x00\x00\x00\x08\x00" + INNER4, 1,
                 "llc", None, 0),
    "nflog": (nflog(INNER4), 239, None, None, 0),
    "gre_in_udp": (eth(0x0800, ip4(17, udp(50000, 4754, gre(0x0800, INNER4)))), 1, "gre", "203.0.113.1", 0),
    "pptp_ppp": (eth(0x0800, ip4(47, struct.pack(">HHHH", 0x3001, 0x880B, len(INNER4) + 4, 1) + struct.pack(">I", 1)
                                 + b"\xff\x03\x00\x21" + INNER4)), 1, "gre,ppp", "203.0.113.1", 0),
    "aruba_wlan": (eth(0x0800, ip4(47, gre(0x8200, bytes([0x88, 0x01]) + b"\0" * 22 + b"\0\0"
                                          + b"\xaa\xaa\x03\x00\x00\x00\x08\x00" + INNER4))), 1,
                   "gre,wlan,llc", "203.0.113.1", 0),
    # PPP link types (pcap-linktype(7)): 9 PPP with and without the RFC 1662 address/control
    # bytes and with a compressed protocol field, 50 PPP in HDLC-like framing or Cisco framing,
    # 51 a PPPoE session header with no Ethernet header, 104 Cisco HDLC
    "ppp_9": (b"\xff\x03\x00\x21" + INNER4, 9, None, None, 0),
    "ppp_9_ipv6": (b"\xff\x03\x00\x57" + INNER6, 9, None, None, 0),
    "ppp_9_bare": (b"\x00\x21" + INNER4, 9, None, None, 0),
    "ppp_9_pfc": (b"\xff\x03\x21" + INNER4, 9, None, None, 0),
    "ppp_hdlc_50": (b"\xff\x03\x00\x57" + INNER6, 50, None, None, 0),
    "ppp_hdlc_50_cisco": (b"\x0f\x00\x08\x00" + INNER4, 50, None, None, 0),
    "ppp_ether_51": (struct.pack(">BBHHH", 0x11, 0, 0x0036, len(INNER4) + 2, 0x0021) + INNER4, 51,
                     "pppoe", None, 0x36),
    "c_hdlc_104": (b"\x8f\x00\x86\xdd" + INNER6, 104, None, None, 0),
    "vxlan_in_erspan": (eth(0x0800, ip4(47, gre(0x88BE, struct.pack(">HHI", 0x1000, 20, 1)
                                               + eth(0x0800, ip4(17, udp(50000, 4789, struct.pack(">II", 0x08000000, 5 << 8)
                                                                         + INNER_ETH), src="198.18.0.1")), seq=0))), 1,
                        "gre,erspan,eth,vxlan,eth", "203.0.113.1", 20),
}


#: Built packets tshark 4.0 reads otherwise, by design (docs/ACCURACY.md, "Encapsulations"):
#: it decides whether an MPLS Ethernet pseudowire has a control word by looking its MAC addresses
#: up in its OUI table; webtap by where an IP-carrying ethertype sits.
TSHARK_GUESSES_OTHERWISE = {"mpls_pw_eth_cw"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_built_tunnel_gives_the_request(name):
    frame, lt, enc, outer, tid = CASES[name]
    b, reason = one(frame, lt)
    assert reason == "http_request", name
    m = b.msgs[0]
    inner6 = b.column("src_ip").to_pylist()[0].startswith("2001:db8::")
    assert b.column("src_ip").to_pylist() == (["2001:db8::1"] if inner6 else ["192.0.2.1"])
    assert b.column("uri").to_pylist() == ["/index.html"]
    assert b.column("encap_text").to_pylist() == [enc]
    assert b.column("outer_src").to_pylist() == [outer]
    assert int(m["tunnel_id"]) == tid
    # every layer named in encap is counted once
    for layer in (enc or "").split(","):
        if layer:
            assert b.counters["encap_" + layer] == (enc.split(",").count(layer)), (layer, b.counters)
    # spans point into the packet at the inner payload
    assert frame[int(m["payload_off"]):].startswith(GET)


@pytest.mark.tshark
def test_built_tunnels_decode_like_tshark(tmp_path):
    """The same packets in one pcap per link type: tshark reaches the same TCP segment."""
    if shutil.which("tshark") is None:
        pytest.fail("tshark is not installed (make sysdeps installs it)")
    from tests.tools.tcp_reach import compare_reach

    for lt in sorted({c[1] for c in CASES.values()}):
        frames = [c[0] for k, c in CASES.items() if c[1] == lt and k not in TSHARK_GUESSES_OTHERWISE]
        path = tmp_path / f"lt{lt}.pcap"
        path.write_bytes(pb.pcap([(i * 1000, f) for i, f in enumerate(frames)], linktype=lt))
        r = compare_reach(str(path))
        assert r.tcp_frames == len(frames), (lt, r)
        assert r.agree == len(frames) and not r.differences and r.webtap_only == 0, (lt, r.differences)


def test_user_named_udp_port():
    from webtap.dissect import set_tunnel_ports

    frame = eth(0x0800, ip4(17, udp(50000, 8472, struct.pack(">II", 0x08000000, 1 << 8) + INNER_ETH)))
    assert one(frame)[1] == "not_tcp"
    set_tunnel_ports({"vxlan": [8472]})
    try:
        b, reason = one(frame)
        assert reason == "http_request"
        assert b.column("encap_text").to_pylist() == ["vxlan,eth"]
    finally:
        set_tunnel_ports(None)
    assert one(frame)[1] == "not_tcp"
    with pytest.raises(ValueError):
        set_tunnel_ports({"nosuch": [1]})


def test_depth_limit():
    """Eight GRE layers are opened; a ninth stops the walk (not_ip, encap_too_deep)."""
    from webtap._ext.dissect import l34_batch

    def nest(k):
        body = INNER4
        for _ in range(k):
            body = ip4(47, gre(0x0800, body))
        return eth(0x0800, body)

    b, reason = one(nest(8))
    assert reason == "http_request" and b.counters["encap_gre"] == 8
    b, reason = one(nest(9))
    assert reason == "not_ip" and b.counters["encap_too_deep"] == 1
    assert len(b) == 0


def test_truncated_tunnel_headers_are_counted_not_read():
    """Every prefix of every built packet gives a reason, never a message past its bytes."""
    for name, (frame, lt, *_rest) in CASES.items():
        for cut in range(0, len(frame) - len(GET)):
            b, reason = one(frame[:cut], lt)
            assert len(b) == 0, (name, cut, reason)


def test_plain_packets_have_no_encap():
    b, reason = one(eth(0x0800, INNER4))
    assert reason == "http_request"
    assert int(b.msgs["encap"][0]) == 0 and b.column("encap_text").to_pylist() == [None]
    assert b.column("outer_src").to_pylist() == [None]
    assert not any(v for k, v in b.counters.items() if k.startswith("encap"))


def test_inner_length_cut_by_carrier():
    """PPPoE's length ends the IP packet even when the IP total length claims more (tshark
    reports the TCP payload as cut to what PPPoE carries: Ethernet padding is not payload)."""
    inner = bytes(tcp4(b""))                   # 40 bytes: no payload
    padded = inner[:2] + struct.pack(">H", 46) + inner[4:] + b"\0" * 6
    frame = eth(0x8864, struct.pack(">BBHHH", 0x11, 0, 1, len(inner) + 2, 0x0021) + padded)
    assert one(frame)[1] == "no_payload"


TUNNEL_TRACES = [
    "traces/arkime/gre-erspan-vxlan.pcap", "traces/arkime/nflog.pcap", "traces/ndpi/6in4tunnel.pcap",
    "traces/pcapplusplus/Packet++Test/PacketExamples/MplsPackets.pcap",
    "traces/suricata-verify/bug-4810/pppoe-session-http.pcap", "traces/zeek/erspan.pcap",
    "traces/zeek/mixed-vlan-mpls.pcap", "traces/zeek/mpls-in-vlan.pcap", "traces/zeek/nflog-http.pcap",
    "traces/zeek/snap-tcp.pcap", "traces/zeek/tunnels/ayiya3.pcap", "traces/zeek/tunnels/geneve-many-options.pcap",
    "traces/zeek/tunnels/gre-aruba.pcap", "traces/zeek/tunnels/gre-over-udp-4754.pcap",
    "traces/zeek/tunnels/gtp/gtp1_gn_normal_incl_fragmentation.pcap",
    "traces/zeek/tunnels/gtp/gtp2_different_udp_port.pcap", "traces/zeek/tunnels/Teredo.pcap",
    "traces/zeek/tunnels/vxlan-encapsulated-http.pcap",
    "traces-tls/arkime/pppoe.pcap", "traces-tls/mercury/geneve.pcap", "traces-tls/ndpi/4in6tunnel.pcap",
    "traces-tls/ndpi/vxlan.pcap", "traces-tls/zeek/pppoe-over-qinq.pcap",
    "traces-tls/zeek/tunnels_geneve-47101.pcap", "traces-tls/zeek/tunnels_gtp_gtp6_gtp_0x32.pcap",
]


@pytest.mark.tshark
@pytest.mark.parametrize("rel", TUNNEL_TRACES)
def test_shared_tunnel_trace_reaches_tcp_like_tshark(rel):
    """Every frame in which tshark decodes a TCP segment (innermost, not quoted by ICMP, not
    reassembled from IP fragments) is reached by webtap with the same ports, sequence number and
    payload length, and webtap reaches TCP in no frame tshark does not."""
    path = SHARED / rel
    if not path.is_file():
        pytest.skip(f"shared trace {path} is absent")
    if shutil.which("tshark") is None:
        pytest.fail("tshark is not installed (make sysdeps installs it)")
    from tests.tools.tcp_reach import compare_reach

    r = compare_reach(str(path))
    assert r.tcp_frames > 0
    assert r.differences == [] and r.webtap_only == 0, (r.differences[:5], r.webtap_only_examples)
    assert r.agree == r.tcp_frames


def test_encap_names_match_the_enum():
    from webtap.records.message import DISSECT_REASONS, ENCAP_NAMES

    # DR_ENC_GRE + kind - 1: the counters follow EncapKind's order
    first = DISSECT_REASONS.index("encap_gre")
    assert DISSECT_REASONS[first:] == tuple("encap_" + n for n in ENCAP_NAMES[1:])
    assert np.uint64(0).nbytes == 8


def test_cli_tunnel_port(tmp_path, capsys):
    """`webtap dissect --tunnel-port vxlan:8472` opens VXLAN on Linux's default port."""
    from webtap.cli import main
    from webtap.dissect import set_tunnel_ports

    frame = eth(0x0800, ip4(17, udp(50000, 8472, struct.pack(">II", 0x08000000, 1 << 8) + INNER_ETH)))
    path = tmp_path / "vx.pcap"
    path.write_bytes(pb.pcap([(0, frame)]))
    try:
        assert main(["dissect", str(path), "--tunnel-port", "vxlan:8472"]) == 0
        err = capsys.readouterr().err
        assert "http_request=1" in err and "encap_vxlan=1" in err
        set_tunnel_ports(None)
        assert main(["dissect", str(path)]) == 0
        assert "not_tcp=1" in capsys.readouterr().err
        # a usage error: one line, exit 2 (docs/CLI.md)
        assert main(["dissect", str(path), "--tunnel-port", "nosuch:1"]) == 2
        assert "unknown tunnel kind 'nosuch'" in capsys.readouterr().err
    finally:
        set_tunnel_ports(None)


def test_feeder_reader_takes_the_same_tunnelled_packets():
    """The feeder's reader walks the same tunnels (ext/walk/l34.c): same first packets, same
    encapsulation counters as the dissector."""
    from tests.dissect._scapy_batches import batch_from_raw
    from webtap._ext.feeder import classify_batch
    from webtap.dissect import dissect

    frames = [(c[0], c[1], 0, len(c[0])) for c in CASES.values()]
    pk, data = batch_from_raw(frames)
    mb = dissect(pk, data)
    fp, cnt = classify_batch(pk, data)
    from webtap.records.message import DISSECT_REASONS

    fc = dict(zip(DISSECT_REASONS, map(int, cnt)))
    assert len(fp) == len(mb) == len(CASES)
    assert list(fp["index"]) == list(mb.msgs["pkt_index"])
    for k in DISSECT_REASONS:
        if k.startswith("encap") or k in ("packets", "http_request", "http_response", "not_ip", "not_tcp"):
            assert fc[k] == mb.counters[k], k


def test_pass_by_filter_matches_a_tunnelled_get_but_forges_nothing():
    """urlfilter: a blacklisted GET inside VXLAN is a hit, counted tunnel_hits_not_forged, with
    no forged frame (the copied outer headers would carry stale lengths)."""
    from tests.dissect._scapy_batches import batch_from_raw
    from urlfilter.analyzer import UrlAnalyzer
    from urlfilter.tree import UrlTree
    from webtap.dissect import dissect

    frames = [CASES["vxlan"][0], eth(0x0800, INNER4)]
    pk, data = batch_from_raw([(f, 1, 0, len(f)) for f in frames])
    tree = UrlTree()
    tree.insert("example.org/index.html")
    got = []
    an = UrlAnalyzer(tree, on_forged=lambda fr, offs, ts, lts: got.append(len(offs) - 1),
                     verify_checksums=False, handshakes=False)
    an.feed(pk, dissect(pk, data))
    assert an.counters["hits"] == 2
    assert an.counters["tunnel_hits_not_forged"] == 1
    assert an.counters["forged_frames"] == 2 and got == [2]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.just(0), st.integers(1, 2**64 - 1),
                          st.lists(st.integers(1, 255), min_size=1, max_size=8)
                          .map(lambda ls: sum(c << (8 * i) for i, c in enumerate(ls)))),
                max_size=80))
def test_encap_text_is_each_codes_layers(codes):
    """encap_text (one string per distinct code, laid out with numpy over the encapsulated
    rows) equals the per-row reading of HttpMsg.encap: one byte per layer from the link layer
    in, ENCAP_NAMES, '?N' for a code without a name, null for 0."""
    from webtap.dissect import encap_text
    from webtap.records.message import ENCAP_NAMES

    def one(v):
        if not v:
            return None
        parts = []
        while v:
            c = v & 0xFF
            parts.append(ENCAP_NAMES[c] if 0 < c < len(ENCAP_NAMES) else f"?{c}")
            v >>= 8
        return ",".join(parts)

    assert encap_text(np.array(codes, np.uint64)).to_pylist() == [one(v) for v in codes]
