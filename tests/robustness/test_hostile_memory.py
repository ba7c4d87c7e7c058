"""Hostile traffic (tests/tools/hostile.py): the peak RSS of the analyzer and of the filter, each
in its own process, does not grow with the trace. Each scenario is measured at two trace sizes
(x1 and x4) that both span many GC windows; the bound is documented in docs/ROBUSTNESS.md."""
import os

import pytest

from tests.tools.hostile import SCENARIOS, analyzer_cmd, filter_cmd, make_blacklist, peak_rss_mb, write_trace

BASE = 30_000          # messages of the smaller trace (longhdr: 100 KB each, so fewer)
RATE = 10_000.0        # messages per second of trace time: x1 spans 3 s, x4 12 s
GC = 0.5               # analyzer GC window, s
#: at this scale: interpreter + pandas/pyarrow + chunk buffers + one window of messages
ANALYZER_MAX_MB = 400
FILTER_MAX_MB = 250
#: under make sanitize the children run the ASan build (its quarantine and shadow memory are
#: most of their RSS): the traces are still run through both tools, the bounds not compared
SANITIZED = "asan" in os.environ.get("LD_PRELOAD", "")


@pytest.fixture(scope="module")
def blacklist(tmp_path_factory):
    p = tmp_path_factory.mktemp("bl") / "bl.tree"
    make_blacklist(p)
    return p


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_peak_rss_does_not_grow_with_the_trace(scenario, blacklist, tmp_path):
    rss = {}
    for mult in (1, 4):
        n = (BASE if scenario != "longhdr" else 150) * mult
        p = tmp_path / f"{scenario}-{mult}.pcap"
        write_trace(p, scenario, n, rate=RATE if scenario != "longhdr" else 50.0)
        ra, rc = peak_rss_mb(analyzer_cmd(p, GC))
        assert rc == 0
        rf, rc = peak_rss_mb(filter_cmd(p, blacklist))
        assert rc == 0
        rss[mult] = (ra, rf)
        p.unlink()
    if SANITIZED:
        return
    (a1, f1), (a4, f4) = rss[1], rss[4]
    assert a4 <= a1 * 1.10 + 24, f"analyzer grows with the trace: {rss}"
    assert f4 <= f1 * 1.10 + 24, f"filter grows with the trace: {rss}"
    assert max(a1, a4) < ANALYZER_MAX_MB and max(f1, f4) < FILTER_MAX_MB, rss
