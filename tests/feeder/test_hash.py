"""The consumer hashes over message arrays against a plain-Python reading of the paper."""
import ipaddress

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from httpanalyzer.feeder import hash_eq1, hash_eq2, hash_eq3
from webtap._ext.pairing import PairingTable
from tests.msgbuild import MsgBuilder


def ip32(addr: str) -> int:
    ip = ipaddress.ip_address(addr)
    v = int(ip)
    if ip.version == 4:
        return v
    return (v >> 96) ^ ((v >> 64) & 0xFFFFFFFF) ^ ((v >> 32) & 0xFFFFFFFF) ^ (v & 0xFFFFFFFF)


def ref_eq3(src, sport, dst, dport, key):
    b = [(key >> s) & 0xFF for s in (0, 8, 16, 24)]
    return ip32(src) ^ sport ^ ip32(dst) ^ dport ^ key ^ (b[0] ^ b[1] ^ b[2] ^ b[3])


addrs = st.sampled_from(["10.0.0.1", "192.168.7.200", "255.1.2.3", "2001:db8::1", "2001:db8::80"])


@settings(max_examples=200, deadline=None)
@given(c=addrs, s=addrs, cport=st.integers(0, 65535), sport=st.integers(0, 65535),
       seq=st.integers(0, 2**32 - 1), ack=st.integers(0, 2**32 - 1), rseq=st.integers(0, 2**32 - 1))
def test_eq3_matches_the_paper_and_meets_request_with_response(c, s, cport, sport, seq, ack, rseq):
    if (":" in c) != (":" in s):
        s = "2001:db8::80" if ":" in c else "10.9.9.9"
    b = MsgBuilder()
    b.req(1, c, cport, s, sport, seq, ack)
    b.resp(2, s, sport, c, cport, ack, rseq)        # its response: SEQ = the request's ACK
    b.resp(3, s, sport, c, cport, rseq, seq)        # another response: other key
    msgs, _ = b.build()
    e1, e2, e3 = hash_eq1(msgs), hash_eq2(msgs), hash_eq3(msgs)
    assert e3[0] == ref_eq3(c, cport, s, sport, ack)
    assert e3[2] == ref_eq3(s, sport, c, cport, rseq)
    assert e3[0] == e3[1]                            # both halves go to the same consumer
    assert e1[0] == e1[1] == e1[2] == ip32(c) ^ cport ^ ip32(s) ^ sport
    for i in range(3):
        m = msgs[i]
        key = int(m["ack"]) if m["kind"] == 1 else int(m["seq"])
        assert e2[i] == PairingTable.hash_eq2(m["src_ip"], int(m["src_port"]), m["dst_ip"],
                                              int(m["dst_port"]), key, int(m["ip_version"]))


def test_eq3_fixed_vectors():
    """Eq. 3 on fixed tuples (IPv4 and IPv6), every key byte different so that leaving one out
    of the fold shows, against the paper's formula written out (ref_eq3)."""
    b = MsgBuilder()
    b.req(1, "10.0.0.1", 40000, "10.9.9.9", 80, 1, 0x12345678)
    b.req(2, "192.168.7.200", 1, "255.1.2.3", 65535, 9, 0xA1B2C3D4)
    b.req(3, "2001:db8::1", 5555, "2001:db8::80", 443, 7, 0x0F1E2D3C)
    b.resp(4, "2001:db8::80", 443, "2001:db8::1", 5555, 0x0F1E2D3C, 7)
    msgs, _ = b.build()
    want = [ref_eq3("10.0.0.1", 40000, "10.9.9.9", 80, 0x12345678),
            ref_eq3("192.168.7.200", 1, "255.1.2.3", 65535, 0xA1B2C3D4),
            ref_eq3("2001:db8::1", 5555, "2001:db8::80", 443, 0x0F1E2D3C)]
    assert hash_eq3(msgs).tolist() == want + [want[2]]
    # spelled out once: 0x0A000001 ^ 40000 ^ 0x0A090909 ^ 80 ^ key ^ (0x12 ^ 0x34 ^ 0x56 ^ 0x78)
    assert want[0] == 0x0A000001 ^ 40000 ^ 0x0A090909 ^ 80 ^ 0x12345678 ^ (0x12 ^ 0x34 ^ 0x56 ^ 0x78)


def test_eq3_spreads_one_connection_where_eq1_cannot():
    """One busy connection: Eq. 1 puts all of it on one consumer, Eq. 3 on all of them."""
    b = MsgBuilder()
    rng = np.random.default_rng(1)
    for k in range(4000):
        b.req(k, "10.0.0.1", 40000, "10.9.9.9", 80, 1, int(rng.integers(0, 2**32)))
    msgs, _ = b.build()
    assert len(np.unique(hash_eq1(msgs) % 4)) == 1
    share = np.bincount(hash_eq3(msgs) % 4, minlength=4) / len(msgs)
    assert np.all(np.abs(share - 0.25) < 0.03), share


def test_empty_and_wrong_dtype():
    msgs, _ = MsgBuilder().build()
    assert len(hash_eq3(msgs[:0])) == 0
    try:
        hash_eq3(np.zeros(3, dtype=np.uint32))
    except TypeError:
        pass
    else:
        raise AssertionError("a non-message array was accepted")
