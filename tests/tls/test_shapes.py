"""TLS shapes two mature peers read (issue 31): whole records of other types before a hello, an
early TLS 1.3 draft ServerHello with 0x0304 in its version field, the SSLv2-format ClientHello,
TLS on PPP links, and JA4 without signature_algorithms. Packets and captures are built here
(tests/tls/hellobuild.py, from the wire formats) and read by webtap and by the real tshark."""
from __future__ import annotations

import hashlib
import shutil
import struct
import subprocess

import pandas as pd
import pytest

from httpanalyzer import analyze_tls
from tests.pcapbuild import pcap
from tests.tls import hellobuild as hb
from tests.tls import ja4_spec
from webtap._ext.tls import parse_hello

ALERT = hb.record(21, b"\x01\x70")                       # warning, unrecognized_name (112)
CCS = hb.record(20, b"\x01")
HEARTBEAT = hb.record(24, b"\x01\x00\x03abc" + b"\x00" * 16)
ENC_ALERT = hb.record(21, bytes(range(26)))               # a TLS 1.2 encrypted alert
SH_EXTS = [hb.ext(65281, b"\x00"), hb.ext(16, hb.vec16(hb.vec8(b"h2"))), hb.ext(11, b"\x01\x00")]
CH = hb.records(hb.client_hello(ciphers=(0xC02F, 0x009C), exts=[hb.sni_ext(b"shapes.example"),
                                                                 hb.sigalgs_ext([0x0401])]))


def _sh(cipher=0xC02F, pad=0):
    exts = SH_EXTS + ([hb.ext(21, b"\x00" * pad)] if pad else [])
    return hb.records(hb.server_hello(cipher=cipher, exts=exts))


def _ja3s(version, cipher, exts):
    return hashlib.md5(f"{version},{cipher},{'-'.join(map(str, exts))}".encode()).hexdigest()


def _tshark(path, *fields):
    if shutil.which("tshark") is None:
        pytest.fail("tshark is not installed (make sysdeps installs it)")
    cmd = ["tshark", "-n", "-r", str(path), "-o", "tcp.desegment_tcp_streams:TRUE",
           "-Y", "tls.handshake.type == 1 or tls.handshake.type == 2", "-T", "fields",
           "-E", "separator=|", "-E", "occurrence=a", "-E", "aggregator=,", "-e", "frame.number",
           "-e", "tls.handshake.type"]
    for f in fields:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return [ln.split("|") for ln in out.splitlines()]


# ---- records before the hello ----------------------------------------------------------------
@pytest.mark.parametrize("pre", [ALERT, CCS, HEARTBEAT, ENC_ALERT, HEARTBEAT + CCS + ALERT,
                                 ALERT + ALERT + ALERT + ALERT],
                         ids=["alert", "ccs", "heartbeat", "encrypted_alert", "three", "four"])
def test_whole_records_before_the_hello_are_skipped(pre):
    st, d = parse_hello(pre + _sh())
    assert st == "ok" and d["hs_type"] == 2 and d["cipher"] == 0xC02F
    assert d["extensions"] == [65281, 16, 11]
    st, d = parse_hello(pre + CH)
    assert st == "ok" and d["hs_type"] == 1 and d["sni"] == b"shapes.example"


@pytest.mark.parametrize("pre", [ALERT * 5, ALERT[:-1], hb.record(23, b"\x00" * 20),
                                 hb.record(21, b""), bytes([21, 2, 0, 0, 2, 1, 0])],
                         ids=["five", "cut", "application_data", "empty", "bad_version"])
def test_other_leading_bytes_are_not_skipped(pre):
    """At most four records; each whole, non-empty, SSL 3.0+ and of type 20, 21 or 24."""
    assert parse_hello(pre + _sh())[0] == "not_tls"


@pytest.mark.tshark
def test_server_first_flight_with_records_first_like_tshark(tmp_path):
    big = _sh(pad=3000)                    # a ServerHello over two TCP segments
    conns = [dict(ch=CH, sh=ALERT + _sh()),
             dict(ch=CH, sh=HEARTBEAT + CCS + ALERT + _sh(cipher=0x009C)),
             dict(ch=CH, sh=ENC_ALERT + _sh()),
             dict(ch=CH, sh=ALERT + big, sh_split=[len(ALERT) + 1000, len(big) - 1000]),
             dict(ch=CH, sh=ALERT + big, sh_split=[len(ALERT) + 3, len(big) - 3])]
    p = tmp_path / "records-first.pcap"
    frames = hb.handshake_pcap(p, conns)
    c = {}
    df = analyze_tls(str(p), counters=c).sort_values("client_port").reset_index(drop=True)
    # four ServerHellos after records (two of them split), none for the fifth: its first 6 bytes
    assert c["hello_after_records"] == 4 and c["sslv2_client_hello"] == 0
    ts = {int(r[0]): r for r in _tshark(p, "tls.handshake.ciphersuite", "tls.handshake.ja3s",
                                        "tls.handshake.version") if r[1] == "2"}
    for i, fr in enumerate(frames[:4]):
        r = df.iloc[i]
        assert bool(r.matched) and r.response_frame == fr["sh"]
        cipher = 0x009C if i == 1 else 0xC02F
        exts = [65281, 16, 11] + ([21] if i == 3 else [])
        assert r.cipher == f"0x{cipher:04x}" and r.server_version == "0x0303"
        assert r.ja3s == _ja3s(771, cipher, exts)
        assert r.handshake_time == r.server_hello_ts - r.client_hello_ts > pd.Timedelta(0)
        # tshark: the ServerHello in the frame that completes its reassembly
        t = ts[fr["sh"] + (1 if i == 3 else 0)]
        assert (t[2], t[3], t[4]) == (r.cipher, r.ja3s, r.server_version)
    # the ServerHello's record header cut 3 bytes after the alert: no hello's type in the first
    # segment, so it is not held (as for a ChangeCipherSpec first, docs/TLS.md); tshark reads it
    r = df.iloc[4]
    assert not bool(r.matched) and r.unmatched_reason == "end"
    assert frames[4]["sh"] + 1 in ts           # a documented limit: tshark reassembles it


# ---- early TLS 1.3 draft ServerHello with 0x0304 --------------------------------------------
def test_draft_server_hello_with_final_version_number():
    ks = hb.ext(51, hb.u16(29) + hb.vec16(b"\x01" * 32))
    st, d = parse_hello(hb.records(hb.draft_server_hello(cipher=0x1301, exts=[ks])))
    assert st == "ok" and d["version"] == 0x0304 and d["cipher"] == 0x1301
    assert d["session_id"] == b"" and d["extensions"] == [51] and d["key_share_groups"] == [29]
    assert d["ja3_string"] == "772,4865,51"
    # 0x0303 with the same bytes is the final layout (session id length first): not this reading
    st, d = parse_hello(hb.records(hb.draft_server_hello(version=0x0303, cipher=0x1301, exts=[ks])))
    assert (st, d.get("cipher")) != ("ok", 0x1301)


@pytest.mark.tshark
def test_draft_server_hello_tshark_reads_final_layout(tmp_path):
    """tshark 4.0 applies the final layout to 0x0304 (docs/TLS.md: a documented difference)."""
    ks = hb.ext(51, hb.u16(29) + hb.vec16(b"\x01" * 32))
    p = tmp_path / "draft0304.pcap"
    fr = hb.handshake_pcap(p, [dict(ch=CH, sh=hb.records(hb.draft_server_hello(exts=[ks])))])[0]
    r = analyze_tls(str(p)).iloc[0]
    assert bool(r.matched) and r.cipher == "0x1301" and r.server_version == "0x0304"
    assert r.ja3s == _ja3s(772, 0x1301, [51])
    t = [x for x in _tshark(p, "tls.handshake.ciphersuite") if x[0] == str(fr["sh"])][0]
    assert t[2] != "0x1301"                 # it takes 0x13 for a session id length


# ---- SSLv2-format ClientHello ----------------------------------------------------------------
def test_sslv2_client_hello_fields():
    v2 = hb.sslv2_client_hello(version=0x0300, specs=(0x010080, 0x0700C0, 0x000004, 0x00FF00),
                               session_id=b"\x05" * 16, challenge=b"\x09" * 32)
    st, d = parse_hello(v2)
    assert st == "ok" and d["sslv2"] and d["hs_type"] == 1
    assert d["legacy_version"] == d["version"] == 0x0300
    assert d["ciphers"] == [0x010080, 0x0700C0, 0x000004, 0x00FF00]
    assert d["session_id"] == b"\x05" * 16 and d["random"] == b"\x09" * 32
    assert d["extensions"] == [] and d["sni"] is None
    assert d["ja3"] is None and d["ja4"] is None          # docs/TLS.md: no JA3/JA4 for SSLv2
    assert parse_hello(hb.sslv2_client_hello(version=0x0002))[1]["version"] == 0x0002
    assert parse_hello(v2[:-1])[0] == "incomplete"


@pytest.mark.parametrize("bad", [
    hb.sslv2_client_hello(challenge=b"\x01" * 15),         # challenge under 16 bytes
    hb.sslv2_client_hello(challenge=b"\x01" * 33),
    hb.sslv2_client_hello(session_id=b"\x01" * 33),
    hb.sslv2_client_hello(version=0x0200),
    hb.sslv2_client_hello()[:2] + b"\x04" + hb.sslv2_client_hello()[3:],   # SERVER-HELLO type
    b"\x80\x2b" + hb.sslv2_client_hello()[2:],             # record length disagrees
    hb.sslv2_client_hello()[:6] + b"\x0a" + hb.sslv2_client_hello()[7:],   # specs not 3 each
], ids=["chal15", "chal33", "sid33", "version", "msgtype", "reclen", "speclen"])
def test_sslv2_lengths_must_agree(bad):
    assert parse_hello(bad)[0] == "not_tls"


@pytest.mark.tshark
def test_sslv2_client_hello_paired_like_tshark(tmp_path):
    specs = (0x010080, 0x000039, 0x00002F, 0x0000FF)
    v2 = hb.sslv2_client_hello(version=0x0301, specs=specs)
    v2b = hb.sslv2_client_hello(version=0x0002, specs=(0x020080, 0x0700C0), session_id=b"\x07" * 16,
                                challenge=b"\x03" * 32)
    p = tmp_path / "sslv2.pcap"
    fr = hb.handshake_pcap(p, [dict(ch=v2, sh=_sh(cipher=0x0039)), dict(ch=v2b, sh=None)])
    c = {}
    df = analyze_tls(str(p), counters=c).sort_values("client_port").reset_index(drop=True)
    assert c["sslv2_client_hello"] == 2 and c["hello_after_records"] == 0
    r = df.iloc[0]
    assert bool(r.matched) and r.request_frame == fr[0]["ch"][0] and r.cipher == "0x0039"
    assert list(r.client_versions) == ["0x0301"] and r.client_legacy_version == "0x0301"
    assert list(r.ciphers) == ["0x010080", "0x0039", "0x002f", "0x00ff"]
    assert (r.ja3 is None or r.ja3 != r.ja3) and (r.ja4 is None or r.ja4 != r.ja4)
    assert r.sni is None or r.sni != r.sni
    r = df.iloc[1]
    assert list(r.ciphers) == ["0x020080", "0x0700c0"] and list(r.client_versions) == ["0x0002"]
    ts = {int(x[0]): x for x in _tshark(p, "tls.handshake.version", "tls.handshake.cipherspec",
                                        "tls.handshake.ja3")}
    for i, want in ((0, specs), (1, (0x020080, 0x0700C0))):
        t = ts[fr[i]["ch"][0]]
        assert t[1] == "1" and t[2] == df.iloc[i].client_legacy_version and t[4] == ""
        # tshark writes the 3-byte specs; the TLS suites among them are 0x00XXYY
        assert [int(v, 16) for v in t[3].split(",")] == list(want)
        mapped = [f"0x{v:04x}" if v <= 0xFFFF else f"0x{v:06x}" for v in want]
        assert list(df.iloc[i].ciphers) == mapped


# ---- PPP link types ------------------------------------------------------------------------
@pytest.mark.tshark
@pytest.mark.parametrize("lt,head", [(9, b"\xff\x03\x00\x21"), (9, b"\x21"), (50, b"\xff\x03\x00\x21"),
                                     (50, b"\x0f\x00\x08\x00"), (51, None), (104, b"\x8f\x00\x08\x00")],
                         ids=["ppp", "ppp_pfc", "ppp_hdlc", "ppp_hdlc_cisco", "ppp_ether", "c_hdlc"])
def test_tls_on_ppp_links_like_tshark(tmp_path, lt, head):
    sh = _sh()
    pk = []
    for t, (src, dst, sp, dp, seq, ack, pl) in enumerate(
            [("10.0.0.1", "10.0.0.2", 40000, 443, 1000, 5000, CH),
             ("10.0.0.2", "10.0.0.1", 443, 40000, 5000, 1000 + len(CH), sh)]):
        ip = hb.tcp_packet(src, dst, sp, dp, seq, ack, pl)[14:]
        frame = (struct.pack(">BBHHH", 0x11, 0, 0x1234, len(ip) + 2, 0x0021) + ip) if head is None else head + ip
        pk.append(((t + 1) * 1_000_000_000, frame))
    p = tmp_path / f"ppp{lt}.pcap"
    p.write_bytes(pcap(pk, linktype=lt))
    df = analyze_tls(str(p))
    assert len(df) == 1
    r = df.iloc[0]
    assert bool(r.matched) and r.sni == "shapes.example" and r.cipher == "0xc02f"
    ts = _tshark(p, "tls.handshake.extensions_server_name", "tls.handshake.ciphersuite")
    assert [(x[0], x[1]) for x in ts] == [("1", "1"), ("2", "2")]
    assert ts[0][2] == r.sni and ts[1][3] == r.cipher


# ---- JA4 without signature_algorithms --------------------------------------------------------
# FoxIO's JA4.md: "If there are no signature algorithms in the hello packet, then the string ends
# without an underscore and is hashed." Suricata and FoxIO's Python tool append the underscore.
NO_SIGALGS_CH = hb.client_hello(ciphers=(0x1301, 0xC02F), exts=[hb.sni_ext(b"nosig.example"),
                                                               hb.groups_ext([29]), hb.ext(23, b"")])
JA4_SPEC = "t12d020300_c1929292aa6b_c5fbb8d9fc5a"      # docs/TLS.md quotes both
JA4_UNDERSCORE = "t12d020300_c1929292aa6b_0bfb1e0136bb"


def test_ja4_without_signature_algorithms_follows_the_specification():
    st, d = parse_hello(hb.records(NO_SIGALGS_CH))
    assert st == "ok" and d["sig_algs"] == []
    assert d["ja4"] == ja4_spec.ja4(ja4_spec.parse_client_hello(NO_SIGALGS_CH))
    exts = "000a,0017"                                    # sorted, SNI and ALPN left out
    assert d["ja4"].split("_")[2] == hashlib.sha256(exts.encode()).hexdigest()[:12]
    other = hashlib.sha256((exts + "_").encode()).hexdigest()[:12]
    assert d["ja4"].split("_")[2] != other
    assert (d["ja4"], d["ja4"][:24] + other) == (JA4_SPEC, JA4_UNDERSCORE)


# ---- TLS after FTP AUTH TLS (read) and inside FTP ADAT (out of reach) -------------------------
@pytest.mark.tshark
def test_ftp_auth_tls_hello_read_adat_not(tmp_path):
    """RFC 4217: after `AUTH TLS` / `234` the ClientHello starts a segment on port 21 and is read
    like any hello; RFC 2228 ADAT carries TLS records as base64 text: no record (docs/TLS.md)."""
    import base64

    cli, srv = ("10.0.0.1", 40100), ("10.0.0.2", 21)
    auth, ok = b"AUTH TLS\r\n", b"234 AUTH TLS OK.\r\n"
    seq, sseq = 1000, 5000
    pk = [(1, hb.tcp_packet(srv[0], cli[0], srv[1], cli[1], sseq - 20, seq, b"220 FTP ready\r\n")),
          (2, hb.tcp_packet(cli[0], srv[0], cli[1], srv[1], seq, sseq, auth)),
          (3, hb.tcp_packet(srv[0], cli[0], srv[1], cli[1], sseq, seq + len(auth), ok)),
          (4, hb.tcp_packet(cli[0], srv[0], cli[1], srv[1], seq + len(auth), sseq + len(ok), CH))]
    adat = b"ADAT " + base64.b64encode(CH) + b"\r\n"
    pk.append((5, hb.tcp_packet(cli[0], srv[0], 40101, 21, 9000, 7000, adat)))
    p = tmp_path / "ftp.pcap"
    p.write_bytes(pcap([(t * 1_000_000_000, f) for t, f in pk]))
    df = analyze_tls(str(p))
    assert len(df) == 1 and df.iloc[0].sni == "shapes.example" and df.iloc[0].request_frame == 4
    assert df.iloc[0].client_port == 40100
    assert [x[:2] for x in _tshark(p)] == [["4", "1"]]


def test_filter_sni_pass_skips_the_same_records(tmp_path):
    """The URL filter's SNI pass shares the parser: a ClientHello after an alert and a heartbeat
    in its segment gives its SNI (flags 0: one segment); an SSLv2-format hello gives no row."""
    from tests.tls.test_hellostream import _filter

    pk = [(1, hb.tcp_packet("10.0.0.1", "10.0.0.2", 41000, 443, 1000, 7000, ALERT + HEARTBEAT + CH)),
          (2, hb.tcp_packet("10.0.0.1", "10.0.0.2", 41001, 443, 1000, 7000, hb.sslv2_client_hello()))]
    p = tmp_path / "filter.pcap"
    p.write_bytes(pcap([(t * 1000, f) for t, f in pk]))
    rows, _counters = _filter(p)
    assert rows == {41000: (b"shapes.example", 0)}


@pytest.mark.tshark
@pytest.mark.parametrize("name", ["arkime/pppoe.pcap", "suricata-verify/ssl_version_negated_input.pcap"])
def test_sslv2_hellos_of_shared_traces_like_tshark(name):
    """The two SSLv2-format ClientHellos of the shared traces (one inside PPPoE): version and
    every cipher spec as tshark decodes them, mapped 0x00XXYY -> 0xXXYY; paired."""
    from tests.conftest import SHARED

    path = SHARED / "traces-tls" / name
    if not path.exists():
        pytest.skip(f"shared data absent: {path}")
    c = {}
    df = analyze_tls(str(path), counters=c)
    assert c["sslv2_client_hello"] == 1
    t = [x for x in _tshark(path, "tls.handshake.version", "tls.handshake.cipherspec") if x[3]]
    assert len(t) == 1
    r = df[df.request_frame == int(t[0][0])].iloc[0]
    assert bool(r.matched) and r.client_legacy_version == t[0][2]
    specs = [int(v, 16) for v in t[0][3].split(",")]
    assert list(r.ciphers) == [f"0x{v:04x}" if v <= 0xFFFF else f"0x{v:06x}" for v in specs]
    assert r.ja3 is None or r.ja3 != r.ja3
