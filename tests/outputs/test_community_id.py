"""The community_id column (computed in C, ext/out/communityid.pyx) against the reference
implementation (the `communityid` package of the spec's authors) on every shared trace."""
from __future__ import annotations

import ipaddress

import numpy as np
import pytest

communityid = pytest.importorskip("communityid", reason="make test installs communityid")

from webtap._ext.communityid import ID_LEN, community_id  # noqa: E402


def _reference(rows, seed=0):
    cid = communityid.CommunityID(seed=seed)
    return [cid.calc(communityid.FlowTuple.make_tcp(c, s, cp, sp)) for c, cp, s, sp in rows]


def test_every_record_of_every_shared_trace(shared_records):
    t = shared_records
    rows = list(zip(t.column("client_ip").to_pylist(), t.column("client_port").to_pylist(),
                    t.column("server_ip").to_pylist(), t.column("server_port").to_pylist()))
    got = t.column("community_id").to_pylist()
    want = _reference(rows)
    bad = [(r, g, w) for r, g, w in zip(rows, got, want) if g != w]
    assert not bad, bad[:5]
    versions = set(t.column("ip_version").to_pylist())
    assert versions == {4, 6}, versions       # both address families are covered
    assert len(set(got)) > 100


def _packed(addrs):
    out = np.zeros((len(addrs), 16), np.uint8)
    for i, a in enumerate(addrs):
        b = ipaddress.ip_address(a).packed
        out[i, :len(b)] = np.frombuffer(b, np.uint8)
    return out


@pytest.mark.parametrize("seed", [0, 1, 0xBEEF, 0xFFFF])
def test_seeds_orders_and_families(seed):
    """Both directions give one id; equal addresses are ordered by port; seeds as the spec."""
    flows = [("10.0.0.1", 80, "10.0.0.2", 51000), ("10.0.0.2", 51000, "10.0.0.1", 80),
             ("192.168.1.1", 5000, "192.168.1.1", 4000), ("255.255.255.255", 0, "0.0.0.0", 65535),
             ("2001:db8::1", 443, "2001:db8::2", 1234), ("fe80::1", 1, "::1", 2),
             ("::ffff:1.2.3.4", 80, "::1", 80)]
    src = _packed([f[0] for f in flows])
    dst = _packed([f[2] for f in flows])
    ver = np.array([ipaddress.ip_address(f[0]).version for f in flows], np.uint8)
    got = community_id(src, np.array([f[1] for f in flows], np.uint16), dst,
                       np.array([f[3] for f in flows], np.uint16), ver, 6, seed).to_pylist()
    cid = communityid.CommunityID(seed=seed)
    want = [cid.calc(communityid.FlowTuple.make_tcp(a, b, ap, bp)) for a, ap, b, bp in flows]
    assert got == want
    assert got[0] == got[1]
    assert all(len(g) == ID_LEN and g.startswith("1:") for g in got)


def test_other_protocol_and_bad_arguments():
    src = _packed(["10.1.1.1"])
    dst = _packed(["10.2.2.2"])
    got = community_id(src, np.array([53], np.uint16), dst, np.array([9999], np.uint16),
                       np.array([4], np.uint8), 17).to_pylist()
    want = communityid.CommunityID().calc(communityid.FlowTuple.make_udp("10.1.1.1", "10.2.2.2", 53, 9999))
    assert got == [want]
    # one protocol per row (TLS over TCP and QUIC over UDP in one batch)
    two = community_id(np.repeat(src, 2, 0), np.array([53, 53], np.uint16), np.repeat(dst, 2, 0),
                       np.array([9999, 9999], np.uint16), np.array([4, 4], np.uint8),
                       np.array([17, 6], np.uint8)).to_pylist()
    assert two == [want, communityid.CommunityID().calc(
        communityid.FlowTuple.make_tcp("10.1.1.1", "10.2.2.2", 53, 9999))]
    assert two[0] != two[1]
    with pytest.raises(ValueError):
        community_id(src, np.array([53], np.uint16), dst, np.array([1], np.uint16),
                     np.array([4], np.uint8), np.array([6, 17], np.uint8))
    with pytest.raises(ValueError):
        community_id(src, np.array([1, 2], np.uint16), dst, np.array([1], np.uint16),
                     np.array([4], np.uint8))
    with pytest.raises(ValueError):
        community_id(src, np.array([1], np.uint16), dst, np.array([1], np.uint16),
                     np.array([4], np.uint8), seed=1 << 16)
    assert community_id(np.zeros((0, 16), np.uint8), np.zeros(0, np.uint16), np.zeros((0, 16), np.uint8),
                        np.zeros(0, np.uint16), np.zeros(0, np.uint8)).to_pylist() == []


def test_tls_and_quic_records_of_the_shared_tls_traces():
    """The TLS records (httpanalyzer.tls) carry the same column: TCP for TLS, UDP for QUIC."""
    from httpanalyzer import analyze_tls
    from tests.conftest import SHARED

    files = [SHARED / "traces-tls" / f for f in ("pcapplusplus/ExamplesTest_pcap_examples_tls2.pcap",
                                               "mercury/quic-crypto-packets.pcap",
                                               "ja4/ipv6.pcapng")]
    if not all(f.exists() for f in files):
        pytest.skip("the shared TLS traces are missing")
    seen = set()
    for f in files:
        df = analyze_tls(str(f))
        assert len(df) > 0, f
        cid = communityid.CommunityID()
        for c, cp, s, sp, tr, got in zip(df["client_ip"], df["client_port"], df["server_ip"],
                                         df["server_port"], df["transport"], df["community_id"]):
            make = communityid.FlowTuple.make_udp if tr == "quic" else communityid.FlowTuple.make_tcp
            assert got == cid.calc(make(c, s, int(cp), int(sp))), (f, c, cp, s, sp, tr)
            seen.add((tr, ":" in c))
    assert ("tcp", False) in seen and ("quic", False) in seen and ("tcp", True) in seen, seen
