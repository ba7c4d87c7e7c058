"""The forged server Initial close, read by independent peers: tshark and aioquic's packet
protection (v1 and v2), both deriving the keys from the client's DCID in the client Initial."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from webtap._ext import quiccut as q

from .rfc_vectors import DCID, V1, V2


def _pcap(tmp_path, pairs):
    from scapy.all import IP, UDP, Ether, wrpcap
    frames = []
    for i, (client, server) in enumerate(pairs):
        frames.append(Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=50000 + i, dport=443) / client)
        frames.append(Ether() / IP(src="10.0.0.2", dst="10.0.0.1") / UDP(sport=443, dport=50000 + i) / server)
    path = tmp_path / "close.pcap"
    wrpcap(str(path), frames)
    return path


def _tshark(path):
    out = subprocess.run(
        ["tshark", "-r", str(path), "-T", "fields", "-E", "separator=|", "-e", "frame.number",
         "-e", "quic.long.packet_type", "-e", "quic.frame_type", "-e", "quic.cc.error_code",
         "-e", "quic.cc.reason_phrase", "-e", "quic.decryption_failed"],
        capture_output=True, text=True, check=True, timeout=120).stdout
    return [line.split("|") for line in out.splitlines()]


@pytest.mark.tshark
@pytest.mark.parametrize("vec", [V1, V2], ids=["v1", "v2"])
def test_tshark_decrypts_the_close(tmp_path, vec):
    if shutil.which("tshark") is None:
        pytest.fail("tshark is a prerequisite (Makefile APT_PKGS)")
    rows = _tshark(_pcap(tmp_path, [(vec["client_packet"], q.forge_close(vec["client_packet"]))]))
    assert rows[0][2] == "6,0" and rows[0][5] == ""            # client Initial: CRYPTO + PADDING
    # 28 = 0x1c; tshark 4.0 leaves quic.long.packet_type empty for v2 packets
    assert rows[1][1:] == ["0" if vec is V1 else "", "28", str(q.CLOSE_ERROR), q.CLOSE_REASON, ""]
    # the RFC's own server Initial in the same place: ACK + CRYPTO, decrypted
    rows = _tshark(_pcap(tmp_path, [(vec["client_packet"], vec["server_packet"])]))
    assert rows[1][2] == "2,6" and rows[1][5] == ""


@pytest.mark.parametrize("vec", [V1, V2], ids=["v1", "v2"])
def test_aioquic_opens_the_close(vec):
    from aioquic.quic.crypto import CryptoPair
    pkt = q.forge_close(vec["client_packet"])
    h = q.parse_long(pkt)
    client = CryptoPair()
    client.setup_initial(cid=DCID, is_client=True, version=vec["version"])
    header, payload, pn = client.decrypt_packet(pkt, h["pn_offset"], 0)
    reason = q.CLOSE_REASON.encode()
    assert pn == 0
    assert payload == bytes([0x1C, q.CLOSE_ERROR, 0, len(reason)]) + reason
    # and aioquic's own server keys give the RFC's server packet: the reference is sound
    ref = CryptoPair()
    ref.setup_initial(cid=DCID, is_client=True, version=vec["version"])
    assert ref.decrypt_packet(vec["server_packet"], 18, 0)[2] == 1
