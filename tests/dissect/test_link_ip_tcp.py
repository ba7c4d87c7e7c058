"""Link, IP and TCP layers: every link type, tags, extension headers and each rejection reason."""
import struct

import numpy as np
import pytest
from scapy.all import ARP, IP, TCP, UDP, Dot1AD, Dot1Q, Ether, IPv6, IPv6ExtHdrFragment, Raw
from scapy.layers.inet6 import IPv6ExtHdrDestOpt, IPv6ExtHdrHopByHop, IPv6ExtHdrRouting
from scapy.layers.ipsec import AH

from tests.dissect._scapy_batches import batch_from_raw
from tests.dissect.packets import GET, OK, null_hdr, one, sll, sll2, tcp4, tcp6
from webtap.dissect import dissect
from webtap.records.message import MSG_REQUEST, MSG_RESPONSE, MSGF_PAYLOAD_TRUNCATED


def check_get(b, ip_version=4):
    assert len(b) == 1
    m = b.msgs[0]
    assert m["kind"] == MSG_REQUEST and m["ip_version"] == ip_version
    assert (m["src_port"], m["dst_port"], m["seq"], m["ack"], m["window"]) == (40000, 80, 1000, 2000, 512)
    assert m["tcp_flags"] == 0x18
    assert m["payload_len"] == len(GET) == m["payload_caplen"]
    assert b.column("uri").to_pylist() == ["/index.html"]
    assert b.column("host").to_pylist() == ["example.org"]
    assert b.column("user_agent").to_pylist() == ["probe/1.0"]
    return m


@pytest.mark.parametrize("ver", [4, 6])
def test_ethernet(ver):
    ip = tcp4() if ver == 4 else tcp6()
    b, r = one(Ether() / ip)
    m = check_get(b, ver)
    assert r == "http_request" and m["vlan"] == 0xFFFF and m["ip_off"] == 14 and m["tcp_off"] == (34 if ver == 4 else 54)
    assert m["ttl"] == (61 if ver == 4 else 62)
    assert b.column("src_ip").to_pylist() == (["192.0.2.1"] if ver == 4 else ["2001:db8::1"])
    if ver == 4:
        assert list(m["src_ip"][4:]) == [0] * 12


def test_vlan_and_qinq_record_outermost_id():
    b, _ = one(Ether() / Dot1Q(vlan=42) / tcp4())
    assert check_get(b)["vlan"] == 42
    b, _ = one(Ether() / Dot1AD(vlan=100) / Dot1Q(vlan=200) / tcp6())
    assert check_get(b, 6)["vlan"] == 100
    stacked = Ether() / Dot1Q(vlan=1) / Dot1Q(vlan=2) / Dot1Q(vlan=3) / tcp4()
    assert one(stacked)[0].msgs[0]["vlan"] == 1


def test_too_many_vlan_tags_is_not_ip():
    p = Ether()
    for i in range(9):
        p = p / Dot1Q(vlan=i + 1)
    assert one(p / tcp4())[1] == "not_ip"


@pytest.mark.parametrize("ver", [4, 6])
def test_linux_cooked(ver):
    ip = tcp4() if ver == 4 else tcp6()
    check_get(one(sll(ip), 113)[0], ver)
    check_get(one(sll2(ip), 276)[0], ver)


@pytest.mark.parametrize("lt", [101, 12, 14])
@pytest.mark.parametrize("ver", [4, 6])
def test_raw_ip(lt, ver):
    check_get(one(tcp4() if ver == 4 else tcp6(), lt)[0], ver)


def test_raw_ipv4_ipv6_linktypes_check_version():
    check_get(one(tcp4(), 228)[0], 4)
    check_get(one(tcp6(), 229)[0], 6)
    assert one(tcp6(), 228)[1] == "ip_bad_header"
    assert one(tcp4(), 229)[1] == "ip_bad_header"


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("af,ver", [(2, 4), (24, 6), (28, 6), (30, 6), (10, 6)])
def test_bsd_null_both_byte_orders(order, af, ver):
    ip = tcp4() if ver == 4 else tcp6()
    check_get(one(null_hdr(af, order) + bytes(ip), 0)[0], ver)


def test_loop_is_network_order_only():
    check_get(one(null_hdr(2, ">") + bytes(tcp4()), 108)[0], 4)
    check_get(one(null_hdr(24, ">") + bytes(tcp6()), 108)[0], 6)
    assert one(null_hdr(2, "<") + bytes(tcp4()), 108)[1] == "not_ip"


def test_null_unknown_family_is_not_ip():
    assert one(null_hdr(7) + bytes(tcp4()), 0)[1] == "not_ip"


@pytest.mark.parametrize("lt", [105, 127, 7, 9999])   # 239 (NFLOG), 9/50/51/104 (PPP, HDLC): test_encap.py
def test_unsupported_link_types(lt):
    assert one(bytes(tcp4()), lt)[1] == "link_unsupported"


def test_not_ip_and_not_tcp():
    assert one(Ether() / ARP())[1] == "not_ip"
    assert one(Ether() / IP() / UDP(dport=1900) / Raw(b"M-SEARCH * HTTP/1.1\r\n\r\n"))[1] == "not_tcp"
    assert one(Ether() / IPv6() / UDP() / Raw(b"GET / HTTP/1.1\r\n\r\n"))[1] == "not_tcp"


@pytest.mark.parametrize("n", [0, 5, 13])
def test_link_truncated(n):
    assert one(bytes(Ether() / tcp4())[:n])[1] == "link_truncated"


def test_ip_truncated_and_bad():
    raw = bytes(Ether() / tcp4())
    assert one(raw[:14 + 10])[1] == "ip_truncated"
    bad_ver = bytearray(raw)
    bad_ver[14] = 0x55
    assert one(bytes(bad_ver))[1] == "ip_bad_header"
    bad_ihl = bytearray(raw)
    bad_ihl[14] = 0x44                      # IHL 4 < 5
    assert one(bytes(bad_ihl))[1] == "ip_bad_header"
    short_total = bytearray(raw)
    short_total[16:18] = struct.pack(">H", 12)   # total length < header length
    assert one(bytes(short_total))[1] == "ip_bad_header"
    v6 = bytes(Ether() / tcp6())
    assert one(v6[:14 + 39])[1] == "ip_truncated"


def test_ipv4_options_are_skipped():
    p = IP(src="192.0.2.1", dst="198.51.100.2", ttl=61, options=[b"\x01\x01\x01\x00"]) / TCP(
        sport=40000, dport=80, seq=1000, ack=2000, flags="PA", window=512) / Raw(GET)
    m = check_get(one(Ether() / p)[0])
    assert m["tcp_off"] == 14 + 24


@pytest.mark.parametrize("frag", [dict(flags="MF"), dict(frag=10), dict(flags="MF", frag=3)])
def test_ipv4_fragments_are_skipped(frag):
    assert one(Ether() / tcp4(**frag))[1] == "ip_fragment"


def test_ipv4_df_is_not_a_fragment():
    check_get(one(Ether() / tcp4(flags="DF"))[0])


def test_ipv4_tso_total_length_zero_uses_capture():
    raw = bytearray(bytes(Ether() / tcp4()))
    raw[16:18] = b"\x00\x00"
    m = check_get(one(bytes(raw))[0])
    assert m["payload_len"] == len(GET)


def test_ethernet_padding_is_not_payload():
    p = Ether() / tcp4(b"GET / HTTP/1.1\r\n")
    raw = bytes(p) + b"\x00" * 20
    b, r = one(raw)
    assert r == "http_request"
    assert b.msgs[0]["payload_caplen"] == b.msgs[0]["payload_len"] == 16


@pytest.mark.parametrize("ext", [
    IPv6ExtHdrHopByHop(), IPv6ExtHdrRouting(), IPv6ExtHdrDestOpt(),
    IPv6ExtHdrHopByHop() / IPv6ExtHdrDestOpt() / IPv6ExtHdrRouting() / IPv6ExtHdrDestOpt(),
])
def test_ipv6_extension_headers(ext):
    check_get(one(Ether() / tcp6(ext=ext))[0], 6)


def test_ipv6_ah():
    ip = IPv6(src="2001:db8::1", dst="2001:db8::2", hlim=62) / AH(nh=6, payloadlen=4, spi=1, seq=1, icv=b"\x00" * 12)
    raw = bytes(ip) + bytes(TCP(sport=40000, dport=80, seq=1000, ack=2000, flags="PA", window=512) / Raw(GET))
    raw = bytearray(raw)
    raw[4:6] = struct.pack(">H", len(raw) - 40)
    check_get(one(bytes(raw), 101)[0], 6)


def test_ipv6_fragment_header_is_skipped():
    assert one(Ether() / tcp6(ext=IPv6ExtHdrFragment(m=1)))[1] == "ip_fragment"


def test_ipv6_extension_chain_is_bounded():
    ext = IPv6ExtHdrDestOpt()
    for _ in range(9):
        ext = ext / IPv6ExtHdrDestOpt()
    assert one(Ether() / tcp6(ext=ext))[1] == "ip_bad_header"


def test_tcp_bad_offsets():
    raw = bytearray(bytes(Ether() / tcp4()))
    lo = bytearray(raw)
    lo[14 + 20 + 12] = 0x40                # data offset 4 < 5
    assert one(bytes(lo))[1] == "tcp_bad_offset"
    hi = bytearray(raw)
    small = bytes(Ether() / tcp4(b"GE"))
    hi = bytearray(small)
    hi[14 + 20 + 12] = 0xF0                # 60 bytes of header, packet ends earlier
    assert one(bytes(hi))[1] == "tcp_bad_offset"
    assert one(bytes(raw[:14 + 20 + 10]))[1] == "tcp_truncated"


def test_no_payload_and_not_http():
    assert one(Ether() / IP() / TCP(flags="S"))[1] == "no_payload"
    assert one(Ether() / tcp4(b"\x16\x03\x01\x00\xa5"))[1] == "not_http"


def test_response_and_snaplen_cut():
    raw = bytes(Ether() / tcp4(OK))
    b, r = one(raw[:-3], wirelen=len(raw))
    assert r == "http_response"
    m = b.msgs[0]
    assert m["kind"] == MSG_RESPONSE and m["status"] == 200
    assert m["payload_len"] == len(OK) and m["payload_caplen"] == len(OK) - 3
    assert m["flags"] & MSGF_PAYLOAD_TRUNCATED
    assert b.counters["payload_truncated"] == 1


def test_batch_counters_and_order():
    pkts = [Ether() / tcp4(), Ether() / ARP(), Ether() / tcp4(OK), Ether() / tcp4(flags="MF"), Ether() / tcp6()]
    recs = [(bytes(p), 1, i * 1000, len(bytes(p))) for i, p in enumerate(pkts)]
    pk, data = batch_from_raw(recs)
    b = dissect(pk, data)
    assert list(b.msgs["pkt_index"]) == [0, 2, 4]
    assert list(b.msgs["ts_ns"]) == [0, 2000, 4000]
    assert b.counters["packets"] == 5 and b.counters["http_request"] == 2 and b.counters["http_response"] == 1
    assert b.counters["not_ip"] == 1 and b.counters["ip_fragment"] == 1
    assert (b.msgs["pkt_offset"] == pk["offset"][[0, 2, 4]]).all()


def test_packet_ref_outside_buffer_is_counted_not_read():
    raw = bytes(Ether() / tcp4())
    pk, data = batch_from_raw([(raw, 1, 0, len(raw))])
    pk["offset"] = 10**9
    b = dissect(pk, data)
    assert len(b) == 0 and b.counters["link_truncated"] == 1
    pk["offset"] = 0
    pk["caplen"] = 10**6                     # caplen past the buffer: only the bytes that exist
    assert len(dissect(pk, data)) == 1


def test_rejects_wrong_dtypes():
    with pytest.raises(TypeError):
        dissect(np.zeros(3, np.int64), np.zeros(3, np.uint8))
