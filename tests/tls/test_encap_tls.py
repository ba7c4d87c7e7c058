"""TLS and QUIC records reach through the tunnels the dissector opens (issue 23): on shared traces
with Geneve, IP-in-IP and PPPoE the real tshark finds the same hellos (httpanalyzer compare --tls:
no unexplained difference), and each record's encap names the layers tshark's frame.protocols
shows for its hello's frame; user-named UDP tunnel ports (webtap.dissect.set_tunnel_ports) reach
the TLS stage too."""
from __future__ import annotations

import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from tests.tools.encap_names import tshark_encap

SHARED = Path(os.environ.get("WEBTAP_SHARED", Path(__file__).resolve().parents[2] / ".." / "shared"))

#: trace -> the encap text its hellos have (PROVENANCE.md lists the tunnels)
TRACES = {
    "traces-tls/mercury/geneve.pcap": "geneve",
    "traces-tls/ndpi/6in4tunnel.pcap": "6in4",
    "traces-tls/arkime/pppoe.pcap": "pppoe",
    "traces-tls/ndpi/4in6tunnel.pcap": "4in6",
}


def _need(rel: str) -> Path:
    path = SHARED / rel
    if not path.is_file():
        pytest.skip(f"shared trace {path} is absent")
    if shutil.which("tshark") is None:
        pytest.fail("tshark is not installed (make sysdeps installs it)")
    return path


@pytest.mark.tshark
@pytest.mark.parametrize("rel", sorted(TRACES))
def test_tunnelled_hellos_like_tshark(rel):
    from httpanalyzer.compare_tls import compare_tls_trace
    from httpanalyzer.tls import analyze_tls

    path = _need(rel)
    m = compare_tls_trace(str(path))
    cats = m["category"].value_counts().to_dict()
    assert cats.get("unexplained", 0) == 0, m[m["category"] == "unexplained"][["side", "frame", "differs"]]
    assert cats.get("match", 0) > 0, cats
    assert "tunnel_not_decapsulated" not in cats, cats

    df = analyze_tls(str(path))
    frames = [int(f) for f in df["request_frame"].fillna(df["response_frame"])]
    out = subprocess.run(["tshark", "-n", "-r", str(path), "-T", "fields", "-e", "frame.number",
                          "-e", "frame.protocols"], capture_output=True, text=True, check=True).stdout
    protos = dict(line.split("\t", 1) for line in out.splitlines())
    encs = [e if isinstance(e, str) else None for e in df["encap"]]
    assert TRACES[rel] in encs, (rel, set(encs))
    for f, enc in zip(frames, encs):
        assert tshark_encap(protos[str(f)]) == enc, (rel, f, protos[str(f)])
    tun = df[df["encap"].notna()]
    assert tun["tunnel_id"].notna().all() and df[df["encap"].isna()]["tunnel_id"].isna().all()
    if TRACES[rel] == "pppoe":
        assert tun["outer_src_ip"].isna().all()       # no IP header carries PPPoE
    else:
        assert tun["outer_src_ip"].notna().all() and df[df["encap"].isna()]["outer_src_ip"].isna().all()


def test_plain_hellos_have_no_encap():
    from httpanalyzer.tls import analyze_tls

    path = SHARED / "traces-tls/arkime/tls13.pcap"
    if not path.is_file():
        pytest.skip(f"shared trace {path} is absent")
    df = analyze_tls(str(path))
    assert len(df) > 0
    assert df["encap"].isna().all() and df["outer_src_ip"].isna().all() and df["tunnel_id"].isna().all()


def test_quic_outside_tunnels_has_no_outer_address():
    """A plain QUIC datagram's walk looked for a UDP tunnel in its IP packet: that is no tunnel."""
    from httpanalyzer.tls import analyze_tls

    path = SHARED / "traces-tls/ndpi/google_meet.pcapng"
    if not path.is_file():
        pytest.skip(f"shared trace {path} is absent")
    df = analyze_tls(str(path))
    q = df[df["transport"] == "quic"]
    assert len(q) > 0
    assert q["encap"].isna().all() and q["outer_src_ip"].isna().all()


def _moved_port(src: Path, dst: Path, old: int, new: int) -> None:
    """A copy of an Ethernet/IPv4 pcap with UDP port `old` rewritten to `new` (both directions)."""
    raw = bytearray(src.read_bytes())
    assert struct.unpack_from("<I", raw, 0)[0] == 0xA1B2C3D4 and struct.unpack_from("<I", raw, 20)[0] == 1
    off = 24
    while off + 16 <= len(raw):
        incl = struct.unpack_from("<I", raw, off + 8)[0]
        p = off + 16
        if raw[p + 12:p + 14] == b"\x08\x00" and raw[p + 23] == 17:
            u = p + 14 + (raw[p + 14] & 0x0F) * 4
            for k in (u, u + 2):
                if struct.unpack_from(">H", raw, k)[0] == old:
                    struct.pack_into(">H", raw, k, new)
            struct.pack_into(">H", raw, u + 6, 0)     # no UDP checksum
        off = p + incl
    dst.write_bytes(bytes(raw))


def test_user_named_port_reaches_tls_records(tmp_path):
    """Geneve moved to UDP 47102 (not Geneve's port): the TLS stage opens it once the port is
    named, through the one setting every walk reads (webtap.dissect.set_tunnel_ports)."""
    from httpanalyzer.tls import analyze_tls
    from webtap.dissect import set_tunnel_ports

    src = SHARED / "traces-tls/zeek/tunnels_geneve-47101.pcap"
    if not src.is_file():
        pytest.skip(f"shared trace {src} is absent")
    want = analyze_tls(str(src))
    assert len(want) == 1 and list(want["encap"]) == ["geneve,eth"]
    path = tmp_path / "geneve-47102.pcap"
    _moved_port(src, path, 6081, 47102)
    assert len(analyze_tls(str(path))) == 0
    set_tunnel_ports({"geneve": [47102]})
    try:
        df = analyze_tls(str(path))
    finally:
        set_tunnel_ports(None)
    cols = ["request_frame", "response_frame", "sni", "encap", "outer_src_ip", "tunnel_id"]
    assert df[cols].to_dict("records") == want[cols].to_dict("records")
    assert len(analyze_tls(str(path))) == 0
