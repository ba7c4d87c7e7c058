"""Hostile traffic (tests/tools/hostile.py): the peak RSS of the analyzer and of the filter, each
in its own process, does not grow with the trace. Each scenario is measured at two trace sizes
(x1 and x4) that both span many GC windows; the bound is documented in docs/ROBUSTNESS.md."""
import os

import pytest

from tests.tools.hostile import SCENARIOS, analyzer_cmd, filter_cmd, make_blacklist, peak_rss_mb, write_trace

BASE = 30_000          # messages of the smaller trace (longhdr: 100 KB each, so fewer)
RATE = 10_000.0        # messages per second of trace time: x1 spans 3 s, x4 12 s
GC = 0.5               # analyzer GC window, s
#: Bounds (docs/ROBUSTNESS.md). Peak RSS is memory, not time: a loaded machine changes it only
#: through how far the read-ahead thread gets ahead of the pairing, i.e. how many of the pooled
#: chunk buffers are in use at once (at most 4 x 4 MiB = 16 MiB), and the allocators' high-water
#: marks that follow from it.
#: Absolute, at this scale: interpreter with numpy/pandas/pyarrow ~135 MiB + chunk buffers 16 MiB
#: + one GC window of waiting messages (10,000/s x 0.5 s = 5,000 x ~1 KiB = 5 MiB) ~ 160 MiB;
#: the largest measured at 16x this scale was 282 MiB, so 400 MiB leaves > 40 % above the worst
#: measured and 2.5x above the derived sum. The filter: ~70 MiB + chunk buffers + the tree
#: ~ 90 MiB, measured 102-105 MiB; 250 MiB is a margin of > 2x.
ANALYZER_MAX_MB = 400
FILTER_MAX_MB = 250
#: Growth from x1 to x4: what may differ between the two runs is the chunk pool's occupancy
#: (16 MiB, scheduling-dependent) and allocator slack (~8 MiB): 24 MiB; the 10 % covers the
#: window's messages landing in arenas of different sizes. A leak per message or per connection
#: grows by 3x the x1 trace's state (90,000 more messages): e.g. 183 -> 279 MiB without the GC
#: window (docs/ROBUSTNESS.md), far above 1.10 x + 24.
GROWTH_FACTOR, GROWTH_MB = 1.10, 24
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
    assert a4 <= a1 * GROWTH_FACTOR + GROWTH_MB, f"analyzer grows with the trace: {rss}"
    assert f4 <= f1 * GROWTH_FACTOR + GROWTH_MB, f"filter grows with the trace: {rss}"
    assert max(a1, a4) < ANALYZER_MAX_MB and max(f1, f4) < FILTER_MAX_MB, rss
