"""Bad and awkward input of the SNI pass (issue 18, "Bad input"): every ClientHello split at every
byte offset, SNI absent / repeated / 64 KiB / non-ASCII / IDN, QUIC Initials that fail to decrypt,
coalesced packets, CRYPTO frames out of order and over datagrams, version negotiation, Retry,
unknown versions. Each case is counted under its reason, and nothing is forged for a connection
whose SNI does not match. Forged frames over IPv6 and VLAN carry right numbers and checksums."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from urlfilter.analyzer import Blacklist
from urlfilter.scan import scan
from urlfilter.tree import UrlTree
from webtap.capture import open_trace
from webtap._ext import quiccut as q
from webtap._ext import urlmatch as um

from .hello import client_hello, crypto, frame, initial, records, sni_ext, write

DCID = bytes.fromhex("0011223344556677")


def extract(path):
    t = um.SniTable()
    rows, cnt = [], np.zeros(len(um.SNI_REASONS), np.uint64)
    for b in open_trace(str(path)):
        msgs, proto, flags, keys, koff, sni, soff, c = t.extract(b.packets, b.data, False)
        cnt += c
        for i in range(len(msgs)):
            rows.append({"pkt": int(msgs["pkt_index"][i]), "proto": int(proto[i]), "flags": int(flags[i]),
                         "sni": bytes(sni[soff[i]:soff[i + 1]]), "key": bytes(keys[koff[i]:koff[i + 1]]),
                         "sport": int(msgs["src_port"][i]), "seq": int(msgs["seq"][i]),
                         "len": int(msgs["payload_len"][i])})
    return rows, dict(zip(um.SNI_REASONS, cnt.tolist()))


def test_split_at_every_byte_offset(tmp_path):
    rec = records(client_hello(sni_ext(b"www.example.test")))
    frames = []
    for k in range(1, len(rec)):
        sport = 10000 + k
        frames.append(frame(rec[:k], sport=sport, seq=1000))
        frames.append(frame(rec[k:], sport=sport, seq=1000 + k))
    write(tmp_path / "split.pcap", frames)
    rows, c = extract(tmp_path / "split.pcap")
    assert len(rows) == len(rec) - 1 == c["tls_split"]
    assert [r["sport"] for r in rows] == [10000 + k for k in range(1, len(rec))]
    assert all(r["sni"] == b"www.example.test" and r["key"] == b"test.example.www" for r in rows)
    # the row is the completing segment: seq/len give the server's RCV.NXT for the RST
    assert all(r["seq"] + r["len"] == 1000 + len(rec) for r in rows)
    assert c["tls_hello_segments"] == len(rec) - 1     # offsets 1..5 cut the record header itself
    assert c["sni_extracted"] == len(rec) - 1 and c["tls_gap"] == 0 and c["tls_bad"] == 0


def test_split_records_and_gaps(tmp_path):
    msg = client_hello(sni_ext(b"a.test"))
    rec = records(msg, size=40)                   # the message over several records
    frames = [frame(rec[:50], sport=1, seq=0), frame(rec[50:], sport=1, seq=50),      # ok
              frame(rec[:50], sport=2, seq=0), frame(rec[60:], sport=2, seq=60),      # hole
              frame(rec[:50], sport=3, seq=0), frame(rec[:50], sport=3, seq=0),       # retransmission
              frame(rec[50:], sport=3, seq=50)]
    write(tmp_path / "gaps.pcap", frames)
    rows, c = extract(tmp_path / "gaps.pcap")
    assert [r["sport"] for r in rows] == [1, 3]
    assert c["tls_gap"] == 1 and c["tls_split"] == 2


@pytest.mark.parametrize("exts, reason, n_rows", [
    ((), "no_sni", 0),
    ((sni_ext(b"first.test", b"second.test"),), None, 1),          # repeated host_name: the first
    ((sni_ext(b"first.test"), sni_ext(b"second.test")), None, 1),  # repeated extension: the first
    ((sni_ext("bücher.test".encode()),), "sni_non_ascii", 0),       # raw UTF-8 (RFC 6066: A-labels)
    ((sni_ext(b"bad/host.test"),), "sni_bad", 0),
    ((sni_ext(b"a" * 300 + b".test"),), "sni_bad", 0),              # over 255 bytes
    ((sni_ext(b"server4:443"),), "sni_bad", 0),                     # a port is no host name
    ((sni_ext(b"server4:8443"),), "sni_bad", 0),                    # (quic-go interop sends these)
    ((sni_ext(b"server4:"),), "sni_bad", 0),
    ((sni_ext(b"x.test"), b"\xfe\x0d\x00\x04abcd"), "ech", 1),      # ECH: outer SNI matched
])
def test_sni_cases(tmp_path, exts, reason, n_rows):
    write(tmp_path / "c.pcap", [frame(records(client_hello(*exts)), sport=7)])
    rows, c = extract(tmp_path / "c.pcap")
    assert len(rows) == n_rows and c["client_hellos"] == 1
    if reason:
        assert c[reason] == 1, c
    if n_rows:
        assert rows[0]["sni"] in (b"first.test", b"x.test")
        assert bool(rows[0]["flags"] & 1) == (reason == "ech")


def test_64k_sni_is_too_long_not_matched(tmp_path):
    rec = records(client_hello(sni_ext(b"a" * 65000)))
    frames = [frame(rec[i:i + 1400], sport=9, seq=i) for i in range(0, len(rec), 1400)]
    write(tmp_path / "long.pcap", frames)
    rows, c = extract(tmp_path / "long.pcap")
    assert rows == [] and c["tls_too_long"] == 1 and c["sni_extracted"] == 0


def _blacklist(*entries):
    t = UrlTree()
    for e in entries:
        t.insert(e)
    return Blacklist(t)


def test_host_rules_and_nothing_forged_for_misses(tmp_path):
    names = [b"evil.test", b"WWW.EVIL.TEST.", b"xn--bcher-kva.test", b"10.1.2.3", b"2001:db8::7",
             b"notevil.test", b"blocked.test", b"evil.test.other"]
    frames = [frame(records(client_hello(sni_ext(n))), sport=100 + i) for i, n in enumerate(names)]
    write(tmp_path / "h.pcap", frames)
    forged = tmp_path / "f.pcap"
    res = scan(str(tmp_path / "h.pcap"),
               _blacklist("evil.test", "bücher.test", "10.1.2.3", "[2001:db8::7]", "blocked.test/path"),
               forged_out=str(forged))
    df = res.to_pandas()
    hit = dict(zip(df["sni"], df["hit"]))
    assert hit == {"evil.test": True, "WWW.EVIL.TEST.": True, "xn--bcher-kva.test": True, "10.1.2.3": True,
                   "2001:db8::7": True, "notevil.test": False, "blocked.test": False,
                   "evil.test.other": False}
    assert res.forged_written == 2 * 5 and (df[~df["hit"]]["forged"] == 0).all()


@pytest.mark.parametrize("v6, vlan", [(False, None), (True, None), (False, 42), (True, 7)])
def test_forged_frames_ipv6_vlan(tmp_path, v6, vlan):
    from scapy.all import Ether, IP, IPv6, TCP, UDP, Dot1Q
    tls = frame(records(client_hello(sni_ext(b"evil.test"))), sport=4000, seq=777, ack=999, v6=v6, vlan=vlan)
    quic = frame(initial(crypto(0, client_hello(sni_ext(b"evil.test"), quic=True)), dcid=DCID), sport=4001,
                 udp=True, v6=v6, vlan=vlan)
    write(tmp_path / "in.pcap", [tls, quic])
    an_frames = []
    from urlfilter.analyzer import UrlAnalyzer
    from webtap.pipeline import Pipeline
    an = UrlAnalyzer(_blacklist("evil.test"), on_forged=lambda f, o, t, l: an_frames.append((f.copy(), o.copy())),
                     verify_checksums=True)
    Pipeline(str(tmp_path / "in.pcap"), [an], progress=False).run()
    f, o = an_frames[0]
    got = [bytes(f[o[i]:o[i + 1]]) for i in range(len(o) - 1)]
    assert len(got) == 3
    ip_off = 14 + (4 if vlan is not None else 0)
    fin, rst, close = (Ether(g) for g in got)
    L3 = IPv6 if v6 else IP
    if vlan is not None:
        assert fin[Dot1Q].vlan == vlan and close[Dot1Q].vlan == vlan
    rec_len = len(records(client_hello(sni_ext(b"evil.test"))))
    assert fin[TCP].flags == "FA" and fin[TCP].seq == 999 and fin[TCP].ack == 777 + rec_len
    assert fin[TCP].sport == 443 and fin[TCP].dport == 4000 and fin[L3].dst == (tls and Ether(tls)[L3].src)
    assert rst[TCP].flags == "RA" and rst[TCP].seq == 777 + rec_len and rst[TCP].sport == 4000
    assert um.tcp_checksum_ok(np.frombuffer(got[0], np.uint8), ip_off)
    assert um.tcp_checksum_ok(np.frombuffer(got[1], np.uint8), ip_off)
    assert um.udp_checksum_ok(np.frombuffer(got[2], np.uint8), ip_off)
    assert close[UDP].sport == 443 and close[UDP].dport == 4001
    _, pn, payload = q.open_packet(bytes(close[UDP].payload), DCID, sender="server")
    assert payload[0] == 0x1C


def test_quic_crypto_over_packets_and_datagrams(tmp_path):
    ch = client_hello(sni_ext(b"www.evil.test"), sni_ext(b"pad.test" * 150), quic=True)
    a, b, c = ch[:300], ch[300:900], ch[900:]
    frames = [
        # 1: three CRYPTO frames out of order in one packet
        frame(initial(crypto(900, c) + crypto(0, a) + crypto(300, b), dcid=DCID), sport=1, udp=True),
        # 2: two Initials coalesced in one datagram
        frame(initial(crypto(0, a) + crypto(300, b), dcid=DCID, pad_to=None)
              + initial(crypto(900, c), dcid=DCID, pn=1, pad_to=1200), sport=2, udp=True),
        # 3: over two datagrams, the second part first
        frame(initial(crypto(300, b + c), dcid=DCID), sport=3, udp=True),
        frame(initial(crypto(0, a), dcid=DCID, pn=1), sport=3, udp=True),
        # 4: v2
        frame(initial(crypto(0, ch), dcid=DCID, version=0x6B3343CF), sport=4, udp=True),
    ]
    write(tmp_path / "q.pcap", frames)
    rows, cnt = extract(tmp_path / "q.pcap")
    assert [(r["sport"], r["pkt"]) for r in rows] == [(1, 0), (2, 1), (3, 3), (4, 4)]
    assert all(r["sni"] == b"www.evil.test" and r["proto"] == 2 for r in rows)
    assert cnt["quic_initials"] == 6 and cnt["quic_crypto_bad"] == 0


def test_quic_bad_input_counted(tmp_path):
    ch = client_hello(sni_ext(b"www.evil.test"), quic=True)
    good = initial(crypto(0, ch), dcid=DCID)
    damaged = bytearray(good)
    damaged[700] ^= 0x40
    vn = bytes([0xC0]) + bytes(4) + bytes([8]) + DCID + bytes([4]) + b"\x01\x02\x03\x04" + b"\x00\x00\x00\x01"
    retry = bytes([0xF0]) + b"\x00\x00\x00\x01" + bytes([4]) + b"\xc1\xc2\xc3\xc4" + bytes([8]) + DCID + b"tok" + bytes(16)
    other = bytearray(good)
    other[1:5] = b"\x0a\x1a\x2a\x3a"                # a greased version
    short = bytes([0x40]) + bytes(40)
    frames = [frame(x, sport=20 + i, udp=True) for i, x in enumerate(
        [bytes(damaged), vn, retry, bytes(other), short, good[:300], b"\xc3\x00\x00\x00\x01" + bytes(1195)])]
    write(tmp_path / "b.pcap", frames)
    forged = tmp_path / "f.pcap"
    res = scan(str(tmp_path / "b.pcap"), _blacklist("evil.test"), forged_out=str(forged))
    c = res.counters
    assert (c["quic_undecryptable"], c["quic_version_neg"], c["quic_retry"], c["quic_other_version"]) == (1, 1, 1, 1)
    assert c["quic_malformed"] >= 1 and c["quic_initials"] == 0
    assert res.forged_written == 0 and c["quic_hits"] == 0


@settings(max_examples=150, deadline=None)
@given(data=st.binary(max_size=1500), udp=st.booleans(), cut=st.integers(0, 1500))
def test_garbage_never_forges(tmp_path_factory, data, udp, cut):
    """Arbitrary payloads (and damaged real ClientHellos / Initials) never crash the pass, and
    every lookup carries a host-name SNI (garbage can complete a cut ClientHello into a valid one
    with another name: that one is then looked up under that name, as a server would read it)."""
    base = initial(crypto(0, client_hello(sni_ext(b"evil.test"), quic=True)), dcid=DCID) if udp \
        else records(client_hello(sni_ext(b"evil.test")))
    mixed = base[:cut % (len(base) + 1)] + data
    d = tmp_path_factory.mktemp("g")
    write(d / "g.pcap", [frame(data, sport=5, udp=udp), frame(mixed, sport=6, udp=udp)])
    rows, c = extract(d / "g.pcap")
    host = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._:")
    for r in rows:
        assert 0 < len(r["sni"]) <= 255 and set(r["sni"]) <= host and r["key"]
        if r["sport"] == 6 and r["sni"] != b"evil.test":
            assert cut % (len(base) + 1) < len(base)          # only a cut ClientHello changes name
    assert c["sni_extracted"] == len(rows)


def test_quic_hello_split_at_every_byte_offset(tmp_path):
    """A QUIC ClientHello cut at every offset into two CRYPTO frames: in one packet (both orders,
    the in-packet path) and over two packets of two datagrams (the slot path; later part first
    too). Each gives exactly one lookup, on the packet that completed it."""
    ch = client_hello(sni_ext(b"www.evil.test"), quic=True)
    frames, want = [], []
    for k in range(1, len(ch)):
        a, b = crypto(0, ch[:k]), crypto(k, ch[k:])
        base = 10 * k
        frames.append(frame(initial(a + b, dcid=DCID), sport=base, udp=True))
        frames.append(frame(initial(b + a, dcid=DCID), sport=base + 1, udp=True))
        frames.append(frame(initial(a, dcid=DCID), sport=base + 2, udp=True))
        frames.append(frame(initial(b, dcid=DCID, pn=1), sport=base + 2, udp=True))
        frames.append(frame(initial(b, dcid=DCID), sport=base + 3, udp=True))
        frames.append(frame(initial(a, dcid=DCID, pn=1), sport=base + 3, udp=True))
        want += [base, base + 1, base + 2, base + 3]
    write(tmp_path / "qsplit.pcap", frames)
    rows, c = extract(tmp_path / "qsplit.pcap")
    assert [r["sport"] for r in rows] == want
    assert all(r["sni"] == b"www.evil.test" and r["key"] == b"test.evil.www" for r in rows)
    # the row is the packet that completed the hello (the second of two datagrams)
    two = [r for r in rows if r["sport"] % 10 >= 2]
    assert all(r["pkt"] % 6 in (3, 5) for r in two)
    assert c["quic_crypto_bad"] == 0 and c["quic_hello_bad"] == 0 and c["client_hellos"] == len(want)


def test_quic_64k_sni_is_bounded_not_matched(tmp_path):
    """A QUIC ClientHello with a 64 KiB SNI (over 16 KiB, TLS_HELLO_CAP): its CRYPTO data beyond
    the bound is refused (quic_crypto_bad), no row, nothing forged, and the table holds no slot."""
    ch = client_hello(sni_ext(b"a" * 65000 + b".evil.test"), quic=True)
    frames = [frame(initial(crypto(i, ch[i:i + 1100]), dcid=DCID, pn=k), sport=31, udp=True)
              for k, i in enumerate(range(0, len(ch), 1100))]
    write(tmp_path / "q64.pcap", frames)
    t = um.SniTable()
    rows = 0
    for b in open_trace(str(tmp_path / "q64.pcap")):
        msgs, *_, c = t.extract(b.packets, b.data, False)
        rows += len(msgs)
    cnt = dict(zip(um.SNI_REASONS, c.tolist()))
    assert rows == 0 and cnt["quic_crypto_bad"] >= 1 and cnt["client_hellos"] == 0
    res = scan(str(tmp_path / "q64.pcap"), _blacklist("evil.test"), forged_out=str(tmp_path / "f.pcap"))
    assert res.forged_written == 0 and res.counters["quic_lookups"] == 0


def test_quic_hello_completed_under_the_server_cid(tmp_path):
    """First Initial (DCID D) holds part of the hello; the next carries the server's chosen CID S
    as DCID, protected with D's keys (RFC 9001 5.2), and completes it. The row is that packet,
    flagged 4, last_dcids gives D, and the close opens with D's server keys and carries SCID S and
    packet number 256. A damaged Initial under S is not taken for the connection's."""
    S = bytes.fromhex("5e5e5e5e5e5e5e5e5e5e")
    ch = client_hello(sni_ext(b"www.evil.test"), quic=True)

    def under_s(frames_, pn):   # an Initial with DCID S, protected with D's client keys
        raw = initial(frames_, dcid=DCID, pn=pn)
        hdr_len = 1 + 4 + 1 + len(DCID)
        _, _, plain = q.open_packet(raw, DCID)
        h = bytes([0xC3]) + (1).to_bytes(4, "big") + bytes([len(S)]) + S + raw[hdr_len:q.parse_long(raw)["pn_offset"]] + pn.to_bytes(4, "big")
        k = q.initial_keys(1, DCID)["client"]
        return _protect_with(h, plain, k)

    k = len(ch) // 2
    bad = bytearray(under_s(crypto(k, ch[k:]), 1))
    bad[-1] ^= 1                                   # its AEAD tag
    frames = [frame(initial(crypto(0, ch[:k]), dcid=DCID), sport=41, udp=True),
              frame(under_s(crypto(k, ch[k:]), 1), sport=41, udp=True),
              frame(initial(crypto(0, ch[:k]), dcid=DCID), sport=42, udp=True),
              frame(bytes(bad), sport=42, udp=True)]
    write(tmp_path / "s.pcap", frames)
    t = um.SniTable()
    out = []
    for b in open_trace(str(tmp_path / "s.pcap")):
        msgs, proto, flags, keys, koff, sni, soff, c = t.extract(b.packets, b.data, False)
        out.append((msgs, flags, t.last_dcids, b))
    msgs, flags, dcids, b = out[0]
    cnt = dict(zip(um.SNI_REASONS, c.tolist()))
    assert list(msgs["pkt_index"]) == [1] and list(flags) == [4]
    assert cnt["quic_server_cid"] == 1 and cnt["quic_undecryptable"] == 1
    assert dcids[0, 0] == len(DCID) and bytes(dcids[0, 1:1 + len(DCID)]) == DCID
    fr, offs, _ = um.forge_quic(msgs, b.data, [0], dcids)
    close = bytes(fr[offs[0]:offs[1]])[14 + 20 + 8:]
    hdr = q.parse_long(close)
    assert hdr["scid"] == S and hdr["dcid"] == b"\xc1\xc2\xc3\xc4"
    _, pn, payload = q.open_packet(close, DCID, sender="server")
    assert pn == 256 and payload[0] == 0x1C
    fr2, offs2, _ = um.forge_quic(msgs, b.data, [0])          # without the DCID: S's keys
    with pytest.raises(q.QuicError):
        q.open_packet(bytes(fr2[offs2[0]:offs2[1]])[14 + 20 + 8:], DCID, sender="server")


def _protect_with(header: bytes, payload: bytes, keys) -> bytes:
    """Protect a long header packet with given client keys (RFC 9001 5.3-5.4) via the primitives."""
    pn_len = (header[0] & 3) + 1
    pn = int.from_bytes(header[-pn_len:], "big")
    sealed = q.aead_seal(keys, pn, header, payload)
    pkt = bytearray(header + sealed)
    pn_off = len(header) - pn_len
    mask = q.hp_mask(keys["hp"], bytes(pkt[pn_off + 4:pn_off + 20]))
    pkt[0] ^= mask[0] & 0x0F
    for i in range(pn_len):
        pkt[pn_off + i] ^= mask[1 + i]
    return bytes(pkt)


def test_quic_dcid_flood_from_one_tuple_is_bounded(tmp_path):
    """Partial hellos under 50 DCIDs from one client address and port: at most 4 wait (their
    slots share one probe run), the rest are counted quic_crypto_bad; a waiting one still
    completes."""
    ch = client_hello(sni_ext(b"www.evil.test"), quic=True)
    k = len(ch) // 2
    dcids = [bytes([7, i]) + bytes(6) for i in range(50)]
    frames = [frame(initial(crypto(0, ch[:k]), dcid=d), sport=51, udp=True) for d in dcids]
    frames.append(frame(initial(crypto(k, ch[k:]), dcid=dcids[0], pn=1), sport=51, udp=True))
    write(tmp_path / "flood.pcap", frames)
    t = um.SniTable()
    for b in open_trace(str(tmp_path / "flood.pcap")):
        msgs, *_, c = t.extract(b.packets, b.data, False)
    cnt = dict(zip(um.SNI_REASONS, c.tolist()))
    assert len(t) == 3 and list(msgs["pkt_index"]) == [50]
    assert cnt["quic_crypto_bad"] == 46 and cnt["quic_initials"] == 51


@pytest.mark.parametrize("token_len", [0, 63, 64, 250, 300, 1000, 4000])
def test_quic_initial_with_long_token(tmp_path, token_len):
    """An Initial's header runs to its packet number, token included (RFC 9000 17.2.2), and a
    Retry or NEW_TOKEN token can be long: both the filter and the analyzer open it and read its
    hello. The analyzer's header buffer was 256 bytes and a longer token wrote past it (found by
    the quic fuzz target; tests/fuzz/regressions/quic)."""
    from httpanalyzer import analyze_tls

    ch = client_hello(sni_ext(b"www.token.test"), quic=True)
    tok = bytes((7 * i + 1) & 0xFF for i in range(token_len))
    write(tmp_path / "t.pcap", [frame(initial(crypto(0, ch), dcid=DCID, token=tok, pad_to=1200 + token_len),
                                      sport=7, udp=True)])
    rows, cnt = extract(tmp_path / "t.pcap")
    assert [r["sni"] for r in rows] == [b"www.token.test"] and cnt["quic_initials"] == 1
    df = analyze_tls(str(tmp_path / "t.pcap"))
    assert list(df["sni"]) == ["www.token.test"] and list(df["transport"]) == ["quic"]


def test_server_port_is_part_of_the_key(tmp_path):
    """A connection to port 8443 is https://host:8443/: an entry host:8443 cuts it (TLS and QUIC)
    and no other port; a host entry covers every port; a path entry none. The key and url carry
    the port, except 443 and 80, which the canonical form drops."""
    hello = lambda n: records(client_hello(sni_ext(n)))
    qhello = lambda n, i: initial(crypto(0, client_hello(sni_ext(n), quic=True)), dcid=bytes([i]) * 8)
    cases = [  # (sni, dport, udp, expected hit, expected url)
        (b"evil5.test", 8443, False, True, "evil5.test:8443"),
        (b"evil5.test", 443, False, False, "evil5.test"),
        (b"evil5.test", 4433, False, False, "evil5.test:4433"),
        (b"www.evil5.test", 8443, False, False, "www.evil5.test:8443"),  # not a host entry: no subdomains of a port
        (b"evil5.test", 8443, True, True, "evil5.test:8443"),
        (b"evil5.test", 443, True, False, "evil5.test"),
        (b"plain.test", 8443, False, True, "plain.test:8443"),
        (b"www.plain.test", 25, False, True, "www.plain.test:25"),
        (b"plain.test", 443, True, True, "plain.test"),
        (b"plain.test", 80, False, True, "plain.test"),
        (b"path.test", 8443, False, False, "path.test:8443"),
        (b"path.test", 443, False, False, "path.test"),
    ]
    frames = [frame(qhello(n, i) if udp else hello(n), sport=5000 + i, dport=dport, udp=udp)
              for i, (n, dport, udp, _, _) in enumerate(cases)]
    write(tmp_path / "p.pcap", frames)
    res = scan(str(tmp_path / "p.pcap"), _blacklist("evil5.test:8443", "plain.test", "path.test/x"),
               forged_out=str(tmp_path / "f.pcap"))
    df = res.to_pandas().sort_values("src_port")
    assert list(df["src_port"]) == [5000 + i for i in range(len(cases))]
    assert list(df["hit"]) == [c[3] for c in cases]
    assert list(df["url"]) == [c[4] for c in cases]
    assert list(df["sni"]) == [c[0].decode() for c in cases]
    n_tcp = sum(1 for c in cases if c[3] and not c[2])
    n_quic = sum(1 for c in cases if c[3] and c[2])
    assert res.forged_written == 2 * n_tcp + n_quic
