"""httpanalyzer.analysis (the numbers behind the notebooks' figures) and httpanalyzer.plot (the
figures): properties on generated samples, and the real records of a shared trace."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import httpanalyzer
from httpanalyzer import analysis, plot
from tests.conftest import TRACES, require_shared
from tests.figcheck import assert_labelled

TRACE = TRACES / "elcabezzonn-pcaps" / "aug16_part2.pcap.gz"


@given(st.lists(st.floats(min_value=1e-6, max_value=1e4, allow_nan=False), min_size=1, max_size=300))
@settings(max_examples=200, deadline=None)
def test_ccdf_monotone_from_one_to_the_largest(xs):
    c = analysis.ccdf(xs)
    a = np.asarray(xs)
    assert c["p"].iloc[0] == 1.0
    assert (np.diff(c["x"]) > 0).all() and (np.diff(c["p"]) < 0).all()
    assert c["x"].iloc[-1] == a.max()
    assert np.isclose(c["p"].iloc[-1], (a == a.max()).sum() / len(a))
    # p is P(X >= x) at every point
    for x, p in zip(c["x"].to_numpy()[:20], c["p"].to_numpy()[:20]):
        assert np.isclose(p, (a >= x).mean())


def test_ccdf_of_nothing_and_nans():
    assert len(analysis.ccdf([])) == 0
    c = analysis.ccdf([np.nan, 2.0, 1.0, 2.0])
    assert c["x"].tolist() == [1.0, 2.0] and c["p"].tolist() == [1.0, 2 / 3]


@pytest.fixture(scope="module")
def records():
    return httpanalyzer.analyze(require_shared(TRACE))


def test_numbers_of_a_real_trace(records):
    df = records
    rt = analysis.response_times_s(df)
    assert len(rt) == int(df["matched"].sum()) > 500
    # response times agree with the timestamps they come from
    p = df[df["matched"].astype(bool)]
    assert np.allclose(rt, (p["response_ts"] - p["request_ts"]).dt.total_seconds())
    sc, mc = analysis.status_counts(df), analysis.method_counts(df)
    assert sc["count"].sum() == df["status"].notna().sum() and np.isclose(sc["pct"].sum(), 100)
    assert mc.loc["GET", "count"] == (df["method"] == "GET").sum()
    assert len(analysis.url_lengths(df)) == df["uri"].notna().sum()
    slow = analysis.slowest(df, by="host", top=5)
    assert len(slow) == 5 and slow["median_s"].is_monotonic_decreasing
    # the slowest host by median really has that median
    h = slow.index[0]
    assert np.isclose(slow.loc[h, "median_s"], np.median(rt[(p["host"] == h).to_numpy()]))
    um = analysis.unmatched_over_time(df, bins=10)
    assert len(um) <= 10 and um["records"].sum() == len(df)
    assert um["request_only"].sum() == (df["outcome"] == "request_only").sum()


def test_unmatched_over_time_bins_by_outcome():
    t = pd.to_datetime([0, 1, 2, 9_000_000_000], unit="ns", utc=True)
    df = pd.DataFrame({"request_ts": [t[0], t[1], pd.NaT, t[3]],
                       "response_ts": [t[0], pd.NaT, t[2], pd.NaT],
                       "outcome": ["paired", "request_only", "response_only", "request_only"]})
    um = analysis.unmatched_over_time(df, bins=3)
    assert um["records"].tolist() == [3, 0, 1]
    assert um["request_only"].tolist() == [1, 0, 1] and um["response_only"].tolist() == [1, 0, 0]
    assert um["unmatched_pct"].tolist() == [pytest.approx(200 / 3), 0.0, 100.0]


def test_figures_are_labelled(records):
    figs = plot.analysis_figures(records)
    assert set(figs) == {"response_time_ccdf", "status_methods", "url_length", "slowest_hosts",
                         "slowest_uris", "unmatched_over_time"}
    for name, fig in figs.items():
        assert_labelled(fig)
    # the CCDF curve ends at the slowest transaction, at p = 1/n
    line = figs["response_time_ccdf"].axes[0].get_lines()[0]
    rt = analysis.response_times_s(records)
    assert line.get_xdata()[-1] == rt.max()
    assert np.isclose(line.get_ydata()[-1], (rt == rt.max()).sum() / len(rt))


def test_load_balance_figures_are_labelled(records):
    from httpanalyzer import balance

    msgs = balance.trace_messages(TRACE)
    h = balance.hash_histograms(msgs, bins=16)
    tables = balance.balance_runs(TRACE, (2, 3))
    for n, t in tables.items():
        assert len(t) == n and np.isclose(t["transactions_pct"].sum(), 100)
        assert t["transactions"].sum() == int(records["matched"].sum())
        assert t["messages"].sum() == len(msgs)
    s = balance.balance_summary(tables)
    assert s.shape == (3, 4) and s[("N=2", "messages %")].isna().sum() == 1
    figs = plot.load_balance_figures(h, tables)
    for fig in figs.values():
        assert_labelled(fig)
    bars = figs["hash_histograms"].axes[0].patches
    assert [int(b.get_height()) for b in bars[:16]] == h["eq1"].tolist()


def test_save_figures_writes_pngs(tmp_path, records):
    paths = plot.save_figures({"a": plot.response_time_ccdf(records)}, tmp_path / "d")
    assert [p.name for p in paths] == ["a.png"] and paths[0].read_bytes()[:4] == b"\x89PNG"


def test_figcheck_rejects_an_unlabelled_figure():
    from matplotlib.figure import Figure

    fig = Figure()
    ax = fig.add_subplot()
    ax.plot([1, 2], [3, 4], label="x")
    ax.set_title("t")
    ax.set_xlabel("time")
    ax.set_ylabel("value")
    with pytest.raises(AssertionError, match="legend"):
        assert_labelled(fig)
    ax.legend()
    with pytest.raises(AssertionError, match="unit"):
        assert_labelled(fig)
    ax.set_xlabel("time (s)")
    assert_labelled(fig)


def test_figures_of_no_records(tmp_path):
    """A trace without HTTP: every figure is still drawn, labelled, and saved."""
    import warnings

    import pyarrow as pa

    from webtap.records.http import SCHEMA, empty_batch, to_pandas

    df = to_pandas(pa.Table.from_batches([empty_batch()], schema=SCHEMA))
    assert len(analysis.ccdf(analysis.response_times_s(df))) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no "no artists with labels" legends
        figs = plot.analysis_figures(df)
    for fig in figs.values():
        assert_labelled(fig)
    assert len(plot.save_figures(figs, tmp_path)) == 6
