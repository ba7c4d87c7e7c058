"""compare --tls against the real tshark on shared TLS/QUIC captures: no unexplained difference,
and the fields really are compared (JA3/JA3S equal on matched hellos)."""
from __future__ import annotations

import pytest

from tests.conftest import SHARED

TLS = SHARED / "traces-tls"
FILES = ["zeek/tls_hrr.pcap", "arkime/tls-split-client-hello.pcap", "ndpi/teams.pcap",
         "zeek/tls_tls13draft16-ff52.a01.pcap", "zeek/tls_missing-intermediate.pcap",
         "suricata-verify/ssl_version_negated_input.pcap", "zeek/quic_quicv2-echo-443.pcap",
         "zeek/quic_quic-multiple-initial-fragmented-crypto.pcap", "ndpi/quic-29.pcap",
         "tcpdump/quic_retry.pcap", "ja4/tls-sni.pcapng", "ndpi/long_tls_certificate.pcap",
         "tcpdump/quic_vn.pcap", "ndpi/quic_frags_ch_in_multiple_packets.pcapng",
         "mercury/quic-crypto-packets.pcap", "zeek/tunnels_geneve-47101.pcap",
         "ndpi/dlt_ppp.pcap", "zeek/ppp_quic-interop-retry.pcap"]


def test_ppp_links_and_sslv2_read_on_shared_traces():
    """TLS and QUIC on a PPP link (link type 9) and an SSLv2-format ClientHello, which webtap
    once missed (link_type_not_dissected, sslv2_client_hello): now the same hellos as tshark."""
    from httpanalyzer.compare_tls import compare_tls_trace

    for name, side, frame in (("ndpi/dlt_ppp.pcap", None, None), ("zeek/ppp_quic-interop-retry.pcap", None, None),
                              ("suricata-verify/ssl_version_negated_input.pcap", "ch", 7)):
        path = TLS / name
        if not path.exists():
            pytest.skip(f"shared data absent: {path}")
        m = compare_tls_trace(str(path))
        assert not set(m["category"]) & {"link_type_not_dissected", "sslv2_client_hello", "unexplained"}
        assert (m["how"] == "both").sum() >= 1
        if frame:
            r = m[(m["side"] == side) & (m["frame"] == frame)].iloc[0]
            assert r["how"] == "both" and r["category"] == "match" and bool(r["paired"])


@pytest.mark.parametrize("name", FILES)
def test_no_unexplained(name):
    from httpanalyzer.compare_tls import CATEGORIES, compare_tls_trace

    path = TLS / name
    if not path.exists():
        pytest.skip(f"shared data absent: {path}")
    m = compare_tls_trace(str(path))
    assert len(m) > 0
    assert set(m["category"]) <= set(CATEGORIES)
    bad = m[m["category"] == "unexplained"]
    assert bad.empty, bad[["side", "frame", "differs"]].to_string()
    both = m[m["how"] == "both"]
    assert len(both) > 0
    ch = both[both["side"] == "ch"]
    if len(ch):
        # an SSLv2-format ClientHello has no JA3 on either side (docs/TLS.md)
        assert (ch["ja3_w"].fillna("") == ch["ja3_t"].fillna("")).all()
        real = ch[ch["ja3_t"].notna()]
        assert len(real) and real["ja3_w"].str.len().eq(32).all()


def test_a_difference_is_caught(monkeypatch):
    """Break webtap's SNI on purpose: the comparison must call it unexplained."""
    import httpanalyzer.tls as T
    from httpanalyzer import compare_tls

    path = TLS / "ja4" / "tls12.pcap"
    if not path.exists():
        pytest.skip(f"shared data absent: {path}")
    real = T.analyze_tls

    def broken(*a, **k):
        df = real(*a, **k)
        df["sni"] = "wrong.example"
        return df

    monkeypatch.setattr(T, "analyze_tls", broken)
    m = compare_tls.compare_tls_trace(str(path))
    assert (m["category"] == "unexplained").sum() == 1
    assert "sni" in m.loc[m["category"] == "unexplained", "differs"].iloc[0]


def test_quic_v2_paired():
    from httpanalyzer import analyze_tls

    path = TLS / "zeek" / "quic_quicv2-echo-443.pcap"
    if not path.exists():
        pytest.skip(f"shared data absent: {path}")
    df = analyze_tls(str(path))
    r = df[df.matched].iloc[0]
    assert r.transport == "quic" and r.sni == "localhost" and r.cipher == "0x1301"
    assert r.ja4.startswith("q13d") and list(r.alpn) == ["quic-echo-example"]
