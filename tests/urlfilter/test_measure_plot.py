"""urlfilter.measure (tree numbers vs the paper, hits by category) and urlfilter.plot's figures:
on real shared lists and traces, and on a small hand-made case whose answers are known."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.figcheck import assert_labelled
from urlfilter import plot
from urlfilter.cli import main
from urlfilter.measure import PAPER, blacklist_urls, hits_by_category, tree_measurements
from tests.urlfilter.test_filter_cli import _trace


def test_blacklist_urls_dedups_in_order(tmp_path):
    p = tmp_path / "l.txt"
    p.write_bytes(b"# comment\na.test/x\nb.test\n\na.test/x\nc.test\n")
    assert blacklist_urls(p) == [b"a.test/x", b"b.test", b"c.test"]
    assert blacklist_urls([p], limit=2) == [b"a.test/x", b"b.test"]


def test_tree_measurements_on_a_real_list(shared):
    urls = blacklist_urls(shared("blacklists/ut1-history/phishing/urls.gz"), limit=20000)
    misses = [b"https://" + d + b"/index.html"
              for d in blacklist_urls(shared("blacklists/benign/umbrella-top-100k.gz"), limit=5000)]
    m = tree_measurements(urls, misses)
    assert m.entries == 20000 and 0 < m.urls <= m.entries - m.rejected
    assert m.queries == m.listed_queries * 2 + 5000
    # every listed entry with a canonical form is found; '/index.html' under one is found too,
    # except under entries with a query string (no component boundary after '?': ~1 % here)
    assert m.query_hit[:m.listed_queries].mean() >= 1 - m.rejected / m.entries
    with_query = np.mean([b"?" in u for u in urls])
    assert m.query_hit[m.listed_queries:2 * m.listed_queries].mean() >= 1 - with_query - 0.005
    assert m.query_hit[2 * m.listed_queries:].mean() < 0.2       # benign sites: mostly misses
    assert 10 < m.bytes_per_url <= m.allocated_bytes_per_url
    assert np.isclose(m.mean_url_bytes, np.mean([len(u) for u in urls]))
    t = m.table()
    assert t.loc["bytes per URL", "paper"] == PAPER["bytes_per_url"] == 35.54
    assert t.loc["match time mean (us)", "webtap"] == pytest.approx(m.match_us.mean())
    for fig in (plot.compression(m), plot.latency(m)):
        assert_labelled(fig)


def test_hits_by_category_counts():
    df = pd.DataFrame({"hit": [True, True, False, True, True],
                       "category": ["ads", "ads", None, "malware", None],
                       "entry": ["a", "b", None, "m", "z"],
                       "src_ip": ["1", "2", "1", "1", "3"]})
    t = hits_by_category(df)
    assert t.index.tolist() == ["ads", "malware", "(unknown)"] or t.index.tolist() == ["ads", "(unknown)", "malware"]
    assert t.loc["ads"].tolist() == [2, 2, 2, 40.0]
    assert t["hits"].sum() == 4
    assert len(hits_by_category(df.assign(hit=False))) == 0
    assert_labelled(plot.hits_by_category(hits_by_category(df.assign(hit=False))))


def test_scan_and_timing_plots_cli(tmp_path, capsys):
    tr = _trace(tmp_path)
    db = str(tmp_path / "bl.db")
    assert main(["--db", db, "add", "evil.test", "--category", "malware"]) == 0
    assert main(["scan", tr, "--blacklist", db, "--plots", str(tmp_path / "p"), "--json"]) == 0
    assert main(["timing", tr, "--blacklist", db, "--plots", str(tmp_path / "p"), "--json"]) == 0
    names = sorted(p.name for p in (tmp_path / "p").iterdir())
    assert names == ["hits_by_category.png", "margin_cdf.png", "match_time.png", "timing_condition.png"]
    assert all((tmp_path / "p" / n).read_bytes()[:4] == b"\x89PNG" for n in names)
    err = capsys.readouterr().err
    assert "wrote" in err and "timing_condition.png" in err


def test_figures_of_a_real_trace(shared, tmp_path):
    from urlfilter.analyzer import load_blacklist
    from urlfilter.importers import import_path
    from urlfilter.scan import scan
    from urlfilter.store import UrlManager
    from urlfilter.timing import timing

    trace = shared("traces/elcabezzonn-pcaps/aug16_part2.pcap.gz")
    mgr = UrlManager(tmp_path / "bl.db")
    import_path(mgr.store, shared("blacklists/ut1/publicite"), category="publicite")
    mgr.close()
    bl = load_blacklist(tmp_path / "bl.db")
    res = scan(trace, bl)
    t = hits_by_category(res.table)
    assert t["hits"].sum() == res.counters["hits"] > 0
    assert t.index.tolist() == ["publicite"]
    figs = plot.scan_figures(res.table)
    tm = timing(trace, bl)
    figs.update(plot.timing_figures(tm))
    for f in figs.values():
        assert_labelled(f)
    # one scatter point per connection with a verdict, on the side of the diagonal it belongs to
    ax = figs["timing_condition"].axes[0]
    pts = np.concatenate([c.get_offsets() for c in ax.collections])
    judged = tm["margin_ns"].notna()
    assert len(pts) == judged.sum()
    won = (pts[:, 1] < pts[:, 0]).sum()
    assert won == tm.loc[judged, "win"].sum()


def test_figures_of_a_pass_without_gets(tmp_path):
    """No GET in the trace: the figures are still drawn, labelled and saved."""
    from tests.urlfilter.test_filter_cli import E1, IP, TCP
    from scapy.all import wrpcap
    from urlfilter.scan import scan
    from urlfilter.timing import timing
    from urlfilter.tree import UrlTree

    tr = tmp_path / "nothing.pcap"
    wrpcap(str(tr), [E1 / IP(src="10.0.0.1", dst="10.0.0.2") / TCP(flags="S")])
    from urlfilter.analyzer import Blacklist

    t = UrlTree()
    t.insert("evil.test")
    t = Blacklist(t)
    res = scan(str(tr), t)
    tm = timing(str(tr), t)
    assert res.table.num_rows == 0 and len(tm) == 0
    figs = {**plot.scan_figures(res.table), **plot.timing_figures(tm)}
    for f in figs.values():
        assert_labelled(f)
    assert len(plot.save_figures(figs, tmp_path / "p")) == 3
