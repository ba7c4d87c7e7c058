"""A waiting hello's text (ext/tls/tls.pyx: the fields kept as lengths over one buffer, in its
pending slot's kept buffer while it waits, in the table's scratch while it is offered). The
expected values are the built hellos' own fields, written as the record documents them
(webtap/records/tls.py: 0xhhhh for versions, ciphers and groups, extension types as numbers),
whichever hello of a pair waits, and as slots are reused by texts of other sizes."""
from __future__ import annotations

from httpanalyzer import analyze_tls
from tests.pcapbuild import pcap
from tests.tls import hellobuild as hb

BIG_CIPHERS = [0x0100 + i for i in range(300)]     # 1,800+ bytes of text: clipped at its width


def _client_hello(sni: bytes, ciphers, alpn=(b"h2", b"http/1.1"), groups=(0x001d, 0x0017),
                  versions=(0x0304, 0x0303), ks=(0x001d,)):
    exts = [hb.sni_ext(sni), hb.alpn_ext(alpn), hb.groups_ext(groups), hb.versions_ext(versions),
            hb.keyshare_ext([(g, b"\x01" * 32) for g in ks]), hb.ext(65281, b"\x00")]
    return hb.client_hello(ciphers=ciphers, exts=exts)


def _server_hello(alpn: bytes):
    return hb.server_hello(cipher=0x1302, exts=[hb.alpn_ext([alpn]), hb.ext(43, b"\x03\x04")])


def _hexes(vs):
    return [f"0x{v:04x}" for v in vs]


def _pcap(path, conns):
    """conns: (client hello, server hello or None, server first?) per connection, one after
    another on client ports 40000 + i; the ServerHello's SEQ is the ClientHello's ACK (Eq. 2)."""
    pkts, t = [], 1_700_000_000_000_000_000
    for i, (ch, sh, sh_first) in enumerate(conns):
        cseq, sseq = 1000 + i * 7, 5000 + i * 13
        c = (t, hb.tcp_packet("10.0.0.1", "10.0.0.2", 40000 + i, 443, cseq, sseq, hb.records(ch)))
        s = None
        if sh is not None:
            s = (t, hb.tcp_packet("10.0.0.2", "10.0.0.1", 443, 40000 + i, sseq, cseq + len(hb.records(ch)),
                                  hb.records(sh)))
        order = [s, c] if sh_first else [c, s]
        for p in order:
            if p is not None:
                pkts.append((t, p[1]))
                t += 1_000_000
    path.write_bytes(pcap(pkts))


def test_waiting_hellos_keep_their_text_whichever_side_waits(tmp_path):
    small = _client_hello(b"a.example", [0x1301, 0x1302])
    big = _client_hello(b"b.example", BIG_CIPHERS, alpn=(b"h2",), groups=(0x11ec, 0x001d, 0x0017),
                        ks=(0x11ec, 0x001d))
    p = tmp_path / "w.pcap"
    # small then big on the same slot (each paired before the next), each with the ClientHello
    # waiting and with the ServerHello waiting; a big one never answered (left at the end)
    _pcap(p, [(small, _server_hello(b"h2"), False), (big, _server_hello(b"h2"), False),
              (small, _server_hello(b"http/1.1"), True), (big, _server_hello(b"h2"), True),
              (big, None, False)])
    df = analyze_tls(str(p))
    assert len(df) == 5
    assert list(df.matched) == [True, True, True, True, False]
    assert list(df.sni) == ["a.example", "b.example", "a.example", "b.example", "b.example"]
    assert list(df.text_clipped) == [False, True, False, True, True]
    for i in (0, 2):
        r = df.iloc[i]
        assert list(r.ciphers) == _hexes([0x1301, 0x1302])
        assert list(r.alpn) == ["h2", "http/1.1"]
        assert list(r.supported_groups) == _hexes([0x001d, 0x0017])
        assert list(r.key_share_groups) == _hexes([0x001d])
        assert list(r.client_versions) == _hexes([0x0304, 0x0303])
        assert list(r.extensions) == [0, 16, 10, 43, 51, 65281]
    for i in (1, 3, 4):
        r = df.iloc[i]
        got = list(r.ciphers)
        assert 100 < len(got) < 300 and got == _hexes(BIG_CIPHERS)[:len(got)]   # a clipped prefix
        assert list(r.alpn) == ["h2"]
        assert list(r.supported_groups) == _hexes([0x11ec, 0x001d, 0x0017])
        assert list(r.key_share_groups) == _hexes([0x11ec, 0x001d])
        assert list(r.client_versions) == _hexes([0x0304, 0x0303])
        assert list(r.extensions) == [0, 16, 10, 43, 51, 65281]
    assert list(df.server_alpn[:4]) == ["h2", "h2", "http/1.1", "h2"]
    for i in range(4):
        assert list(df.iloc[i].server_extensions) == [16, 43]
    # the same hello gives the same record text whether it waited or was offered
    cols = ["sni", "ja3", "ja4", "ja3s", "server_alpn"]
    assert df.iloc[1][cols].tolist() == df.iloc[3][cols].tolist()
    assert df.iloc[0][cols[:3]].tolist() == df.iloc[2][cols[:3]].tolist()


def test_a_repeated_hello_is_dropped_before_its_text_and_the_waiting_one_is_kept(tmp_path):
    """A retransmitted hello of the side that waits is counted as a repeat and dropped (its text
    and fingerprints are not made: ext/tls/tls.pyx _repeated); the record keeps the first one's."""
    ch = _client_hello(b"c.example", [0x1301])
    sh1, sh2 = _server_hello(b"h2"), _server_hello(b"http/1.1")   # same SEQ: a repeat by Eq. 2
    cseq, sseq, t = 1000, 5000, 1_700_000_000_000_000_000
    ack = cseq + len(hb.records(ch))
    pk = [hb.tcp_packet("10.0.0.2", "10.0.0.1", 443, 40000, sseq, ack, hb.records(sh1)),
          hb.tcp_packet("10.0.0.2", "10.0.0.1", 443, 40000, sseq, ack, hb.records(sh2)),
          hb.tcp_packet("10.0.0.1", "10.0.0.2", 40000, 443, cseq, sseq, hb.records(ch)),
          hb.tcp_packet("10.0.0.1", "10.0.0.2", 40000, 443, cseq, sseq, hb.records(ch))]
    p = tmp_path / "r.pcap"
    p.write_bytes(pcap([(t + i * 1_000_000, x) for i, x in enumerate(pk)]))
    c = {}
    df = analyze_tls(str(p), counters=c)
    assert c["server_hello_repeat"] == 1 and c["client_hello_repeat"] == 0
    assert c["server_hello"] == 2 and c["client_hello"] == 2 and c["paired"] == 1
    assert len(df) == 2 and list(df.matched) == [True, False]
    r = df.iloc[0]
    assert r.server_alpn == "h2" and r.sni == "c.example" and r.response_frame == 1
    assert list(r.ciphers) == ["0x1301"] and r.request_frame == 3
    assert df.iloc[1].sni == "c.example" and df.iloc[1].unmatched_reason == "end"
