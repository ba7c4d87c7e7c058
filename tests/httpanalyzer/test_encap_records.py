"""Records carry the encapsulation (issue 23): the HTTP transaction records' `encap`,
`outer_src_ip`, `outer_dst_ip` and `tunnel_id` are those of the request's first packet (the
response's when there is no request), as webtap dissect reports them for that packet and as
tshark's frame.protocols names the layers of that frame; plain traffic has nulls. The Dask
boundary repair hands the fields over (export_pending / import_pending)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.tools.encap_names import tshark_encap

SHARED = Path(os.environ.get("WEBTAP_SHARED", Path(__file__).resolve().parents[2] / ".." / "shared"))

#: HTTP traces with tunnels (PROVENANCE.md of both corpora) and one plain trace
TRACES = [
    "traces/zeek/tunnels/vxlan-encapsulated-http.pcap",
    "traces/zeek/tunnels/Teredo.pcap",
    "traces/zeek/tunnels/ayiya3.pcap",
    "traces/zeek/tunnels/geneve-many-options.pcap",
    "traces/zeek/tunnels/gre-over-udp-4754.pcap",
    "traces/zeek/tunnels/gtp/gtp2_different_udp_port.pcap",
    "traces/zeek/erspan.pcap",
    "traces/arkime/gre-erspan-vxlan.pcap",
    "traces/ndpi/6in4tunnel.pcap",
    "traces/suricata-verify/bug-4810/pppoe-session-http.pcap",
    "traces/zeek/mpls-in-vlan.pcap",
    "traces/pcapplusplus/Packet++Test/PacketExamples/MplsPackets.pcap",
    "traces/zeek/tunnels/gre-aruba.pcap",
]
PLAIN = "traces/zeek/http/get-gzip.pcap"

def _need(rel: str) -> Path:
    path = SHARED / rel
    if not path.is_file():
        pytest.skip(f"shared trace {path} is absent")
    return path


def _records(path: Path):
    import pyarrow as pa

    from webtap.records import http as records
    from httpanalyzer.stream import iter_record_batches

    return pa.Table.from_batches(list(iter_record_batches(str(path))), schema=records.SCHEMA)


def _messages(path: Path) -> dict[int, dict]:
    """frame number (1-based, as the records') -> the dissector's encapsulation fields of that
    message (the C message's pkt_index is 0-based)."""
    from webtap.stream import messages

    out = {}
    for _b, mb in messages(str(path)):
        enc = mb.column("encap_text").to_pylist()
        osrc = mb.column("outer_src").to_pylist()
        odst = mb.column("outer_dst").to_pylist()
        for k, m in enumerate(mb.msgs):
            out[int(m["pkt_index"]) + 1] = dict(encap=enc[k], outer_src_ip=osrc[k], outer_dst_ip=odst[k],
                                            tunnel_id=int(m["tunnel_id"]) if enc[k] else None)
    return out


def _frame(row) -> int:
    return row["request_frame"] if row["request_frame"] is not None else row["response_frame"]


@pytest.mark.parametrize("rel", TRACES + [PLAIN])
def test_records_carry_their_message_encap(rel):
    path = _need(rel)
    t = _records(path)
    assert t.num_rows > 0
    msgs = _messages(path)
    rows = t.select(["request_frame", "response_frame", "encap", "outer_src_ip", "outer_dst_ip",
                     "tunnel_id"]).to_pylist()
    for row in rows:
        want = msgs[_frame(row)]
        got = {k: row[k] for k in want}
        assert got == want, (rel, row)
    if rel == PLAIN:
        assert all(r["encap"] is None and r["outer_src_ip"] is None and r["tunnel_id"] is None
                   for r in rows)
    else:
        assert any(r["encap"] for r in rows), rel


@pytest.mark.tshark
@pytest.mark.parametrize("rel", TRACES)
def test_records_encap_names_the_layers_tshark_shows(rel):
    """For each record, tshark's frame.protocols of its request frame (response frame without
    a request) names the same layers as the record's encap column."""
    path = _need(rel)
    if shutil.which("tshark") is None:
        pytest.fail("tshark is not installed (make sysdeps installs it)")
    t = _records(path)
    rows = t.select(["request_frame", "response_frame", "encap"]).to_pylist()
    # webtap takes a UDP datagram that is exactly one IPv6 packet for Teredo on any port, as
    # tshark does with its heuristic_teredo preference (off by default; docs/ACCURACY.md)
    out = subprocess.run(["tshark", "-n", "-r", str(path), "-o", "teredo.heuristic_teredo:TRUE",
                          "-T", "fields", "-e", "frame.number",
                          "-e", "frame.protocols"], capture_output=True, text=True, check=True).stdout
    protos = {}
    for line in out.splitlines():
        num, _, p = line.partition("\t")
        protos[int(num)] = p
    diffs = [(_frame(r), r["encap"], protos[_frame(r)]) for r in rows
             if tshark_encap(protos[_frame(r)]) != r["encap"]]
    assert diffs == [], (rel, diffs[:5])


def test_tshark_encap_mapping_can_fail():
    assert tshark_encap("eth:ethertype:ip:udp:vxlan:eth:ethertype:ip:tcp:http") == "vxlan,eth"
    assert tshark_encap("eth:ethertype:ip:ipv6:tcp:http") == "6in4"
    assert tshark_encap("eth:ethertype:ip:tcp:http") is None
    assert tshark_encap("eth:ethertype:ip:udp:teredo:ipv6:tcp") == "teredo"
    assert tshark_encap("eth:ethertype:pppoes:ppp:ip:tcp") == "pppoe"


def test_record_dtype_matches_the_struct():
    from webtap.records import http as records
    from webtap._ext.pairing import PairingTable

    assert records.RECORD_DTYPE.itemsize == PairingTable.record_size()
    assert list(records.COLUMNS)[-5:] == ["encap", "outer_src_ip", "outer_dst_ip", "tunnel_id",
                                          "http_version"]


def test_pending_entries_keep_the_encap_over_the_boundary():
    """A request waiting at a chunk's end is exported and imported into the next chunk's table;
    the record it then makes with its response has the request's encapsulation."""
    import pyarrow as pa

    from webtap.records import http as records
    from webtap._ext.pairing import PairingTable
    from webtap.stream import messages

    path = _need("traces/zeek/tunnels/vxlan-encapsulated-http.pcap")
    batches = [mb for _b, mb in messages(str(path))]
    msgs = [(mb.msgs[k:k + 1], mb.data) for mb in batches for k in range(len(mb.msgs))]
    req = [i for i, (m, _d) in enumerate(msgs) if m["kind"][0] == 1][0]
    whole = PairingTable()
    for m, d in msgs:
        whole.feed(m, d)
    whole.flush()
    want = records.to_record_batch(*whole.take())
    a = PairingTable()
    a.feed(*msgs[req])
    state = a.export_pending()
    b = PairingTable()
    b.import_pending(*state)
    for i, (m, d) in enumerate(msgs):
        if i != req:
            b.feed(m, d)
    b.flush()
    got = records.to_record_batch(*b.take())
    cols = ["request_frame", "encap", "outer_src_ip", "outer_dst_ip", "tunnel_id"]
    assert pa.Table.from_batches([got]).select(cols).to_pylist() == \
        pa.Table.from_batches([want]).select(cols).to_pylist()
    assert got.column("encap").to_pylist()[0] == "vxlan,eth"
    # the pending entry's bytes carry the fields (compared by the Dask repair's same_state)
    from httpanalyzer.distributed import _MASK, _LAYOUT

    size, offs = _LAYOUT
    assert _MASK[offs["encap"]:offs["encap"] + 8].all()
    assert _MASK[offs["outer_src"]:offs["outer_src"] + 16].all()
    e = np.frombuffer(state[0], np.uint8).reshape(-1, size)[0]
    assert int.from_bytes(e[offs["encap"]:offs["encap"] + 8].tobytes(), "little") != 0


def test_feeder_consumers_give_the_same_encap():
    """Records paired in feeder consumer processes (the messages cross the shared-memory rings)
    carry the same encapsulation as the single-process run."""
    import httpanalyzer

    path = _need("traces/zeek/erspan.pcap")
    cols = ["request_frame", "response_frame", "encap", "outer_src_ip", "outer_dst_ip", "tunnel_id"]
    a = httpanalyzer.analyze(str(path))[cols].sort_values(["request_frame", "response_frame"])
    b = httpanalyzer.analyze(str(path), consumers=2)[cols].sort_values(["request_frame", "response_frame"])
    assert a["encap"].notna().any()
    assert a.reset_index(drop=True).equals(b.reset_index(drop=True))
