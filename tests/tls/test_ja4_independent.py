"""JA4 of every ClientHello tshark reassembles (its bytes: tcp.reassembled.data or tcp.payload)
computed by tests/tls/ja4_spec.py, against webtap's ja4 of the hello with the same first frame."""
from __future__ import annotations

import subprocess

import pytest

from tests.conftest import SHARED
from tests.tls import ja4_spec

TLS = SHARED / "traces-tls"
FILES = ["zeek/tls_tls13-ech.pcap", "zeek/tls_chrome-1250-tls-x25519-kyber.pcap",
         "arkime/tls-split-client-hello.pcap", "ndpi/codm.pcap", "ndpi/dingtalk.pcap",
         "zeek/tls_tls13draft16-chrome55.0.2879.0-canary.pcap", "arkime/openssl-ssl3.pcap",
         "pcapplusplus/ExamplesTest_pcap_examples_tls2.pcap", "ndpi/tls_esni_sni_both.pcap",
         "zeek/tls_openjdk-25.0.2-zeek.org.pcap"]


def tshark_client_hellos(path) -> dict:
    """{first frame: handshake message bytes} of the ClientHellos tshark decodes over TCP"""
    cmd = ["tshark", "-n", "-r", str(path), "-o", "tcp.desegment_tcp_streams:TRUE", "-Y",
           "tls.handshake.type == 1 and tcp and !quic", "-T", "fields", "-E", "occurrence=f",
           "-e", "frame.number", "-e", "tcp.segment", "-e", "tcp.reassembled.data", "-e", "tcp.payload"]
    cmd[cmd.index("occurrence=f")] = "occurrence=a"
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    res = {}
    for ln in out.splitlines():
        frame, segs, reasm, payload = (ln.split("\t") + ["", "", ""])[:4]
        frames = [int(frame)] + [int(x) for x in segs.split(",") if x]
        data = bytes.fromhex((reasm or payload).split(",")[0].replace(":", ""))
        msg = ja4_spec.handshake_from_stream(data)
        if msg is not None and msg[0] == 1:
            res[min(frames)] = msg
    return res


@pytest.mark.parametrize("name", FILES)
def test_ja4_independent(name):
    from httpanalyzer import analyze_tls

    path = TLS / name
    if not path.exists():
        pytest.skip(f"shared data absent: {path}")
    ref = {f: ja4_spec.ja4(ja4_spec.parse_client_hello(m)) for f, m in tshark_client_hellos(path).items()}
    assert ref, "tshark found no ClientHello"
    df = analyze_tls(str(path))
    got = {int(r.request_frame): r.ja4 for r in df.itertuples(index=False)
           if r.request_frame == r.request_frame and isinstance(r.ja4, str)}
    checked = [f for f in ref if f in got]
    assert len(checked) >= max(1, len(ref) - 2)
    assert {f: got[f] for f in checked} == {f: ref[f] for f in checked}
