"""Balance of Eq. 3 on the benchmark trace (make-bench-trace --rounds 4, ~21k transactions):
every consumer's share of transactions within 1 percentage point of 1/N (the paper's Table 3),
and Eq. 3's hash histogram flatter than Eq. 1's (the paper's Fig. 8)."""
import os
import pathlib

import numpy as np
import pytest

import httpanalyzer
from httpanalyzer.balance import balance_table, hash_histograms
from tests.conftest import SHARED


@pytest.fixture(scope="module")
def bench4():
    env = os.environ.get("WEBTAP_BENCH_TRACE")
    if env:
        return pathlib.Path(env)
    if not (SHARED / "scripts" / "make-bench-trace").exists():
        pytest.skip("make-bench-trace absent")
    os.environ.setdefault("WEBTAP_BENCH_ROUNDS", "4")
    from benchmarks.common import bench_trace

    return bench_trace()


@pytest.mark.parametrize("n", [2, 3, 4])
def test_transactions_share_within_one_point(bench4, n):
    fb = {}
    s = httpanalyzer.Summary(detailed=False)
    for _ in httpanalyzer.iter_record_batches(bench4, consumers=n, feeder=fb, summary=s):
        pass
    df = balance_table(fb)
    assert df["transactions"].sum() == s.pairing["paired"] > 20_000
    assert (df["transactions_pct"] - 100 / n).abs().max() < 1.0, df
    assert (df["messages_pct"] - 100 / n).abs().max() < 1.0, df


def test_eq3_histogram_flatter_than_eq1(bench4):
    from webtap.capture import open_trace
    from webtap.dissect import dissect

    msgs = []
    with open_trace(bench4) as src:
        for b in src:
            msgs.append(dissect(b.packets, b.data).msgs.copy())
    h = hash_histograms(np.concatenate(msgs), bins=64, consumers=4)
    cv1 = h["eq1"].std() / h["eq1"].mean()
    cv3 = h["eq3"].std() / h["eq3"].mean()
    assert cv3 < cv1 / 2, (cv1, cv3)
    assert np.abs(h["eq3_share"] - 0.25).max() < 0.01


def test_figures_draw(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from httpanalyzer.plot import balance_figure, hash_histograms_figure
    from tests.msgbuild import MsgBuilder

    b = MsgBuilder()
    for k in range(500):
        b.req(k, "10.0.0.1", 1024, "10.9.9.9", 80, k, k * 7919)
    h = hash_histograms(b.build()[0], bins=16, consumers=2)
    ax = hash_histograms_figure(h)
    assert [int(p.get_height()) for p in ax.patches[:16]] == list(h["eq1"])
    bal = {"consumers": [{"consumer": c, "messages": m, "transactions": t, "packet_bytes": 1}
                         for c, m, t in ((0, 250, 120), (1, 250, 130))]}
    ax2 = balance_figure(balance_table(bal))
    assert [round(p.get_height(), 1) for p in ax2.patches[2:]] == [48.0, 52.0]
    ax2.figure.savefig(tmp_path / "b.png")
