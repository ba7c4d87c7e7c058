"""Pairs against tshark's first-packet pairing (http.request_in with TCP/HTTP desegmentation
off) on the shared real traces. Every difference must have a documented reason
(tests/tools/pair_table.py REASONS, docs/ACCURACY.md "Pairing"); 'unexplained' fails the test.

Two levels: (1) the pairing table on tshark's own messages, which isolates pairing from
dissection; (2) end to end, capture -> dissect -> pairing (needs webtap.capture and
webtap.dissect, which land on main separately)."""
import os
import shutil

import pytest

from httpanalyzer.tshark import tshark_frames
from tests.tools import pair_table as compare

SHARED = os.environ.get("WEBTAP_SHARED", os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared"))
TRACES = os.path.join(SHARED, "traces")

# The traces where the two tools differ at all (full scan, docs/ACCURACY.md), plus the ones
# PROVENANCE.md recommends for accuracy comparison.
FILES = [
    "arkime/http-100-continue.pcap",
    "elcabezzonn-pcaps/mantak.pcap",
    "ndpi/1kxun.pcap",
    "ndpi/fuzz-2006-09-29-28586.pcap",
    "ndpi/ipp.pcap",
    "suricata-verify/filestore-5408/input.pcap",
    "suricata-verify/http-multiple100/input.pcap",
    "zeek/http/100-continue.pcap",
    "zeek/http/http-body-match.pcap",
    "zeek/tcp/tcp-fast-open.pcap",
    "zeek/http/1000-requests-one-dropped-response.pcap.gz",
    "elcabezzonn-pcaps/aug16_part2.pcap.gz",
    "elcabezzonn-pcaps/malware_infection.pcap.gz",
    "pcapplusplus/Pcap++Test/PcapExamples/example.pcap",
    "acandeias-intrusiondetection/Misc2.pcap",
    "acandeias-intrusiondetection/Misc5.pcap",
]

needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not on PATH")


def trace(rel):
    path = os.path.join(TRACES, rel)
    if not os.path.exists(path):
        pytest.skip(f"shared trace absent: {path}")
    return path


def check(diff, df, frames):
    unexplained = diff[diff.reason == "unexplained"]
    assert unexplained.empty, f"unexplained differences:\n{unexplained}"
    tp = len(compare.tshark_pairs(frames))
    agree = int(df.matched.sum()) - int((diff.side == "webtap").sum())
    assert agree == tp - int((diff.side == "tshark").sum())


@pytest.mark.tshark
@needs_tshark
@pytest.mark.parametrize("rel", FILES)
def test_pairing_on_tshark_messages_matches_tshark(rel):
    path = trace(rel)
    df, seen = compare.pair_tshark_messages(path)
    frames = tshark_frames(path)
    diff = compare.compare(df, frames, seen)
    check(diff, df, frames)
    # differences are rare and of the kinds docs/ACCURACY.md lists
    assert len(diff) <= max(12, len(frames) // 20), diff


def test_1000_requests_one_dropped_response():
    path = trace("zeek/http/1000-requests-one-dropped-response.pcap.gz")
    if shutil.which("tshark") is None:
        pytest.skip("tshark not on PATH")
    df, _ = compare.pair_tshark_messages(path)
    assert int(df.matched.sum()) == 999
    assert (df.outcome == "request_only").sum() == 1


def _all_shared():
    if not os.path.isdir(TRACES):
        return ["(shared traces absent)"]
    out = []
    for root, _, files in os.walk(TRACES):
        for f in files:
            if not f.endswith(".md"):
                out.append(os.path.relpath(os.path.join(root, f), TRACES))
    return sorted(out)


def _documented_rows():
    """trace -> reasons cell of the end-to-end table in docs/ACCURACY.md ("Pairing")."""
    doc = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "ACCURACY.md")
    text = open(doc, encoding="utf-8").read()
    text = text[text.index("## Pairing"):]
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) == 8 and "/" in cells[1]:
            rows[cells[1]] = cells[6]
    return rows


@pytest.mark.tshark
@needs_tshark
@pytest.mark.parametrize("rel", _all_shared())
def test_end_to_end_matches_tshark(rel):
    """Every shared trace: every pair that only one tool finds has a documented reason, and a
    trace with differences is listed in docs/ACCURACY.md with those reasons."""
    import httpanalyzer

    path = trace(rel)
    df = httpanalyzer.analyze(path)
    frames = tshark_frames(path)
    diff = compare.compare(df, frames)
    check(diff, df, frames)
    if len(diff):
        rows = _documented_rows()
        assert rel in rows, f"{rel}: differences not listed in docs/ACCURACY.md:\n{diff}"
        for reason in set(diff.reason):
            assert reason in rows[rel], f"{rel}: reason {reason} not documented"
