"""Every shared trace: webtap's HTTP first packets against tshark 4.0's, frame by frame.

Each frame either agrees (kind, method, URI, Host, User-Agent, status code, reason phrase) or
falls into a documented category of tests/tools/accuracy_table.py (docs/ACCURACY.md, "First
packets: webtap vs tshark"), and each trace's counts (frames each tool reports, frames both
report and agree on, differences by category) are exactly those pinned in
tests/expectations/frames.json. tshark runs once per trace (a failing tshark raises and fails the
tests); traces are spread over 2 processes. Under CI (CI=true) absent shared traces fail.
"""
import os
import shutil
from collections import Counter
from pathlib import Path

import pytest

from tests.tools.accuracy_table import CATEGORIES, compare_all, trace_files

pytestmark = pytest.mark.tshark

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
SHARED = Path(os.environ.get("WEBTAP_SHARED", Path(__file__).resolve().parents[2] / ".." / "shared"))
TRACES = SHARED / "traces"


@pytest.fixture(scope="module")
def results():
    if not TRACES.is_dir():
        if CI:
            pytest.fail(f"shared traces folder {TRACES} is absent (CI=true)")
        pytest.skip(f"shared traces folder {TRACES} is absent")
    if shutil.which("tshark") is None:
        pytest.fail("tshark is not installed (make sysdeps installs it)")
    files = trace_files(TRACES)
    if not files:
        pytest.fail(f"no capture files under {TRACES}")
    return compare_all(files, workers=2)


def test_every_trace_read(results):
    errors = [(r.path, r.error) for r in results if r.error]
    assert not errors


def test_every_difference_is_explained(results):
    bad = [(os.path.relpath(r.path, TRACES), ex) for r in results for ex in r.examples.get("unexplained", [])]
    assert sum(r.categories["unexplained"] for r in results) == 0, bad[:20]
    assert set().union(*(r.categories for r in results)) <= set(CATEGORIES)


def test_counts_are_pinned(results):
    """Per trace, exactly the pinned counts: a trace cannot gain a difference (even an explained
    one) or lose agreeing frames in silence, and a tshark that reads nothing fails here."""
    from tests.tools.expectations import load

    want = load("frames")
    got = {os.path.relpath(r.path, TRACES): {
        "error": r.error, "tshark_frames": r.tshark_frames, "webtap_frames": r.webtap_frames,
        "both": r.both, "agree": r.agree, "categories": dict(sorted(r.categories.items()))}
        for r in results}
    assert set(got) == set(want), "regenerate: python -m tests.tools.expectations frames --write"
    bad = {k: (want[k], got[k]) for k in got if got[k] != want[k]}
    assert not bad, bad


def test_agreement_is_the_rule(results):
    tshark = sum(r.tshark_frames for r in results)
    both = sum(r.both for r in results)
    cats = Counter()
    for r in results:
        cats.update(r.categories)
    # the per-packet categories may not swallow HTTP over TCP: most tshark frames are found
    tcp_like = tshark - cats["http_over_udp"] - cats["link_unsupported"] - cats["encapsulation_not_dissected"]
    assert both >= 0.99 * tcp_like, (both, tcp_like, cats)
    assert tshark > 1000


def test_cross_format_copies_agree(results):
    """Misc1/Misc4 and Misc2/Misc5 hold the same packets as pcap and pcapng."""
    by = {os.path.basename(r.path): r for r in results if "acandeias" in r.path}
    for a, b in (("Misc1.pcap", "Misc4.pcap"), ("Misc2.pcap", "Misc5.pcap")):
        assert a in by and b in by, f"{a} / {b} absent from the shared traces"
        assert by[a].webtap_frames > 0 and by[a].agree > 0
        assert (by[a].webtap_frames, by[a].agree) == (by[b].webtap_frames, by[b].agree)
