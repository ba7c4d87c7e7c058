"""Pairs against tshark's first-packet pairing (http.request_in with TCP/HTTP desegmentation
off) on the shared real traces. Every difference must have a documented reason
(tests/tools/pair_table.py REASONS, docs/ACCURACY.md "Pairing"); 'unexplained' fails the test,
and end to end the counts (webtap's pairs, tshark's pairs, differences by side and reason) must
equal those pinned in tests/expectations/pairs.json for every shared trace.

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

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None and not CI,
                                  reason="tshark not on PATH")


def trace(rel):
    path = os.path.join(TRACES, rel)
    if not os.path.exists(path):
        if CI:
            pytest.fail(f"shared trace absent under CI: {path}")
        pytest.skip(f"shared trace absent: {path}")
    return path


def check(diff, df, frames):
    """No unexplained difference, and the difference rows are exactly the pairs one tool has
    and the other has not (computed here from the two tools' pairs, apart from compare())."""
    unexplained = diff[diff.reason == "unexplained"]
    assert unexplained.empty, f"unexplained differences:\n{unexplained}"
    m = df[df.matched.astype(bool)]
    # records: 1-based frame numbers; the pair tool (tshark_frames, diff) 0-based indices
    wp = set(zip(m.request_frame.astype(int) - 1, m.response_frame.astype(int) - 1))
    tp_df = compare.tshark_pairs(frames)
    tp = set(zip(tp_df.request_frame.astype(int), tp_df.response_frame.astype(int)))
    got = {(s, int(q), int(r)) for s, q, r in zip(diff.side, diff.request_frame, diff.response_frame)}
    want = {("webtap", q, r) for q, r in wp - tp} | {("tshark", q, r) for q, r in tp - wp}
    assert got == want and len(diff) == len(want)


@pytest.mark.tshark
@needs_tshark
@pytest.mark.parametrize("rel", FILES)
def test_pairing_on_tshark_messages_matches_tshark(rel):
    path = trace(rel)
    df, seen = compare.pair_tshark_messages(path)
    frames = tshark_frames(path)
    diff = compare.compare(df, frames, seen, path=path)
    check(diff, df, frames)
    # differences are rare and of the kinds docs/ACCURACY.md lists
    assert len(diff) <= max(12, len(frames) // 20), diff


@pytest.mark.tshark
@needs_tshark
def test_1000_requests_one_dropped_response():
    path = trace("zeek/http/1000-requests-one-dropped-response.pcap.gz")
    df, _ = compare.pair_tshark_messages(path)
    assert int(df.matched.sum()) == 999
    assert (df.outcome == "request_only").sum() == 1


def _all_shared():
    if not os.path.isdir(TRACES):
        return ["(shared traces absent)"]        # trace() fails on it under CI, else skips
    out = []
    for root, _, files in os.walk(TRACES):
        for f in files:
            if not f.endswith(".md"):
                out.append(os.path.relpath(os.path.join(root, f), TRACES))
    return sorted(out)


def _pinned():
    from tests.tools.expectations import load

    return load("pairs")


def test_every_shared_trace_is_pinned():
    if not os.path.isdir(TRACES):
        pytest.fail("shared traces absent under CI") if CI else pytest.skip("shared traces absent")
    assert set(_all_shared()) == set(_pinned()), "regenerate: python -m tests.tools.expectations pairs --write"


@pytest.mark.tshark
@needs_tshark
@pytest.mark.parametrize("rel", _all_shared())
def test_end_to_end_matches_tshark(rel):
    """Every shared trace: every pair that only one tool finds has a reason checked against
    tshark's own fields, and the counts (webtap's pairs, tshark's pairs, differences by side and
    reason) are exactly those pinned in tests/expectations/pairs.json: a trace cannot gain or
    lose differences, and a tshark that reads nothing fails on the pinned tshark pairs."""
    import httpanalyzer

    path = trace(rel)
    df = httpanalyzer.analyze(path)
    frames = tshark_frames(path)
    diff = compare.compare(df, frames, path=path)
    check(diff, df, frames)
    want = _pinned().get(rel)
    assert want is not None, f"{rel} is not pinned in tests/expectations/pairs.json"
    reasons = {}
    for s, r in zip(diff.side, diff.reason):
        reasons[f"{s}:{r}"] = reasons.get(f"{s}:{r}", 0) + 1
    got = {"webtap_pairs": int(df.matched.sum()), "tshark_pairs": len(compare.tshark_pairs(frames)),
           "reasons": dict(sorted(reasons.items()))}
    assert got == want
