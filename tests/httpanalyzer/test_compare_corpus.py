"""Transactions against tshark in BOTH modes (first-packet and reassembly), per trace, pinned.

`httpanalyzer compare` on shared traces: every count (webtap's transactions and pairs, tshark's
in each mode, found by both / only one tool, differences by category in each mode) must equal
tests/expectations/transactions.json exactly, and no difference may be unexplained.

The whole corpus takes ~25 min on a loaded 2-core machine (three tshark runs per trace), more
than `make test`'s budget: `make test` runs the fixed SAMPLE below (traces with differences of
every kind in both modes, and clean ones), `make accuracy` the whole corpus
(`python -m tests.tools.expectations transactions`). Under CI (CI=true) absent shared traces or
tshark fail.
"""
from __future__ import annotations

import os
import shutil

import pytest

from tests.conftest import TRACES
from tests.tools import expectations

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
pytestmark = pytest.mark.tshark

#: Fixed sample: for each category of either mode, the smallest shared trace that has it (from
#: the pinned file), and two clean ones.
SAMPLE = [
    "arkime/http-100-continue.pcap",                              # interim
    "arkime/v6-http.pcap",                                        # clean, IPv6
    "ndpi/fuzz-2006-09-29-28586.pcap",                            # seq_not_ack, header exception
    "pcapplusplus/ExamplesTest/pcap_examples/frag_http_req.pcap", # ip_reassembled
    "pcapplusplus/Packet++Test/PacketExamples/IPv6UdpPacket.pcap",  # http_over_udp
    "pcapplusplus/Packet++Test/PacketExamples/MplsPackets.pcap",  # encapsulation_not_dissected
    "suricata-verify/detect-http-uri/DetectEngineHttpRawUriTest05/test.fpc.pcap",  # uri_truncated
    "suricata-verify/filestore-5408/input.pcap",                  # pipelined, retransmission
    "suricata-verify/http-connect/http-connect-fragmented/input.pcap",  # reassembled_message
    "suricata-verify/http-connect/http-connect-simple/input.pcap",  # connect_tunnel
    "suricata-verify/http-evader/http-evader-468/input.pcap",     # bad_status_code
    "suricata-verify/http-protocol-nodup/input.pcap",             # message_mid_payload, merged
    "suricata-verify/http-response-line/input.pcap",              # reassembly_incomplete
    "suricata-verify/output-eve-ftp-data/input.pcap",             # tshark_notification
    "tcpdump/arcnet-rfc1051-arp-icmp-http.pcap",                  # link_unsupported
    "zeek/http/get-to-ssh-server.pcap",                           # port_not_http
    "zeek/http/http-09-content-length-confusion.pcap",            # reassembly_merged
    "zeek/http/pipelined-requests.pcap",                          # clean, pipelined requests
    "zeek/tcp/qi_internet_SYNACK_curl_jsonip.pcap",               # retransmission
    "zeek/tcp/tcp-fast-open.pcap",                                # seq_not_ack (request in SYN)
]


def _require(ok: bool, what: str) -> None:
    if not ok:
        if CI:
            pytest.fail(f"{what} (CI=true)")
        pytest.skip(what)


def test_every_shared_trace_is_pinned():
    _require(TRACES.is_dir(), f"shared traces absent: {TRACES}")
    assert set(expectations.all_traces(TRACES)) == set(expectations.load("transactions")), \
        "regenerate: python -m tests.tools.expectations transactions --write"


def test_sample_covers_the_categories():
    """The sample is not a set of easy traces: it meets most categories of both modes."""
    want = expectations.load("transactions")
    seen = {m: set() for m in ("first_packet", "reassembly")}
    for rel in SAMPLE:
        for m in seen:
            seen[m] |= set(want[rel][m]["categories"])
    assert len(seen["first_packet"]) >= 8 and len(seen["reassembly"]) >= 8, seen
    assert "unexplained" not in seen["first_packet"] | seen["reassembly"]


@pytest.mark.parametrize("rel", SAMPLE)
def test_transactions_as_pinned(rel):
    _require((TRACES / rel).exists(), f"shared trace absent: {TRACES / rel}")
    _require(shutil.which("tshark") is not None, "tshark is not on PATH")
    got = expectations.transactions(str(TRACES / rel))
    for m in ("first_packet", "reassembly"):
        assert "unexplained" not in got[m]["categories"], (m, got[m])
    assert got == expectations.load("transactions")[rel]
