"""`--plots DIR` of the httpanalyzer CLI (main command and compare), and `make demo`'s script
(demo/webtap_demo.py, above both packages) on a small shared trace with small settings: it writes the figures and ends with
the list of files it wrote."""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pandas as pd
import pytest

from tests.conftest import REPO, SHARED, TRACES, require_shared

TRACE = TRACES / "elcabezzonn-pcaps" / "aug16_part2.pcap.gz"
DEMO = [sys.executable, str(REPO / "demo" / "webtap_demo.py")]
RECORD_FIGURES = {"response_time_ccdf.png", "status_methods.png", "url_length.png",
                  "slowest_hosts.png", "slowest_uris.png", "unmatched_over_time.png"}


def _png(p: pathlib.Path) -> bool:
    return p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 5000


def test_httpanalyzer_plots(tmp_path, capsys):
    from httpanalyzer.cli import main

    require_shared(TRACE)
    d = tmp_path / "figs"
    assert main([str(TRACE), "-o", str(tmp_path / "r.csv"), "--plots", str(d),
                 "--consumers", "2", "--no-progress"]) == 0
    names = {p.name for p in d.iterdir()}
    assert names == RECORD_FIGURES | {"consumer_balance.png"}
    assert all(_png(d / n) for n in names)
    assert capsys.readouterr().err.count("httpanalyzer: wrote ") == len(names)
    # without consumers there is no balance to draw
    d2 = tmp_path / "figs2"
    assert main([str(TRACE), "-o", str(tmp_path / "r.csv"), "--plots", str(d2),
                 "--consumers", "0", "--no-progress"]) == 0
    assert {p.name for p in d2.iterdir()} == RECORD_FIGURES


@pytest.mark.tshark
def test_compare_plots(tmp_path, capsys):
    from httpanalyzer.cli import main

    require_shared(TRACE)
    if shutil.which("tshark") is None:
        pytest.skip("tshark not on PATH")
    d = tmp_path / "cmp"
    assert main(["compare", str(TRACE), "--plots", str(d), "--json"]) == 0
    names = {p.name for p in d.iterdir()}
    assert names == {"response_time_ccdf.png", "status_codes.png", "methods.png", "url_length.png"}
    assert all(_png(d / n) for n in names)
    from httpanalyzer.compare import compare_traces
    from tests.figcheck import assert_labelled

    figs = compare_traces([str(TRACE)]).figures()
    for f in figs.values():
        assert_labelled(f)
    # three CCDFs (webtap, tshark both modes), each ending at its slowest transaction
    assert len(figs["response_time_ccdf"].axes[0].get_lines()) == 3


def test_demo_help_says_where_it_writes(tmp_path):
    r = subprocess.run(DEMO + ["--help"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0 and "--out DIR" in r.stdout and "./demo-output" in r.stdout
    assert not (tmp_path / "demo-output").exists()          # --help writes nothing


def test_demo_writes_figures_and_lists_them(tmp_path):
    require_shared(TRACE)
    out = tmp_path / "demo-output"
    env = dict(os.environ, WEBTAP_DEMO_OUT=str(out), WEBTAP_DEMO_TRACE=str(TRACE),
               WEBTAP_DEMO_CATEGORIES="publicite", WEBTAP_DEMO_TREE_URLS="5000",
               WEBTAP_DEMO_CONSUMERS="2,4", WEBTAP_SHARED=str(SHARED))
    r = subprocess.run(DEMO, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    text = r.stdout
    tail = text.split("== files written to", 1)[1].splitlines()[1:]
    listed = [pathlib.Path(m.group(1)) for ln in tail if (m := re.match(r"\s+(\S+)\s+\(", ln))]
    assert listed and all(p.exists() and p.parent == out for p in listed)
    assert {p.name for p in out.iterdir()} == {p.name for p in listed}     # every file is listed
    names = {p.name for p in listed}
    expected = RECORD_FIGURES | {"hash_histograms.png", "consumer_balance.png",
                                 "hits_by_category.png", "match_time.png", "timing_condition.png",
                                 "tree_compression.png", "tree_latency.png", "transactions.csv",
                                 "urlfilter-gets.csv", "blacklist.db"}
    if shutil.which("tshark"):
        expected |= {"tshark_response_time_ccdf.png", "tshark_status_codes.png",
                     "tshark_methods.png", "tshark_url_length.png"}
    assert expected <= names, expected - names
    assert all(_png(p) for p in listed if p.suffix == ".png")
    # the summary table and the filter's findings are printed; the hits are real ones
    # the summary table printed is that of the records written: its record count and paired
    # count are those of transactions.csv
    df = pd.read_csv(out / "transactions.csv")
    recs = re.search(r"^records\s+(\d+)$", text, re.M)
    paired = re.search(r"^  paired\s+(\d+)$", text, re.M)
    assert recs and int(recs.group(1)) == len(df) > 0, text[:3000]
    assert paired and int(paired.group(1)) == int((df["outcome"] == "paired").sum()) > 0
    assert f"\n{len(df)} records in " in text
    m = re.search(r"(\d+) GETs seen, (\d+) GETs looked up, (\d+) GET hits; .* total (\d+) lookups, (\d+) hits", text)
    assert m and int(m.group(3)) > 0 and "publicite" in text
    assert "N=2" in text and "N=4" in text


def test_demo_without_shared_data_captures_loopback_traffic(tmp_path):
    """No ../shared: the demo captures real HTTP traffic on lo (root), says so, filters it with
    a small printed blacklist of that traffic's own URLs, and still writes every figure."""
    if os.geteuid() != 0:
        pytest.skip("live capture needs root")
    out = tmp_path / "demo-output"
    env = dict(os.environ, WEBTAP_DEMO_OUT=str(out), WEBTAP_SHARED=str(tmp_path / "no-shared"),
               WEBTAP_DEMO_REQUESTS="40", WEBTAP_DEMO_CONSUMERS="2")
    env.pop("WEBTAP_DEMO_TRACE", None)
    r = subprocess.run(DEMO, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "capturing real traffic on the loopback interface" in r.stdout
    assert "captured here with libpcap" in r.stdout
    assert "a small demo blacklist: 127.0.0.1:" in r.stdout
    # 40 requests cycle over 5 paths: /missing/page and /static/app.js are 8 each
    assert re.search(r"\b40 GETs seen, 40 GETs looked up, 16 GET hits; 0 TLS SNIs looked up, 0 TLS SNI hits; "
                     r"0 QUIC SNIs looked up, 0 QUIC SNI hits; total 40 lookups, 16 hits, 32 frames forged",
                     r.stdout), r.stdout[-2000:]
    names = {p.name for p in out.iterdir()}
    assert {"loopback-http.pcap", "hits_by_category.png", "timing_condition.png"} | RECORD_FIGURES <= names
    assert "tree_latency.png" not in names          # no URL lists to measure the tree on
