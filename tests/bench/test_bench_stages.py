"""benchmarks.bench_stages (issue 34, Lin's Fig. 4) runs on a small built input: every GET and
every ClientHello gives one lookup, half of them hit (every other name is in the blacklist, by
construction), each stage takes time, and the stage shares sum to the whole. Speed is not
checked here."""
from __future__ import annotations

import math

from benchmarks import bench_stages as bs
from urlfilter.analyzer import load_blacklist


def test_stage_times_on_a_small_trace(tmp_path):
    gets, tls, db = bs.build_inputs(tmp_path, 200)
    bl = load_blacklist(db)
    try:
        for kind, path in (("get", gets), ("clienthello", tls)):
            t = bs.stage_times(kind, path, bl.tree)
            assert t["lookups"] == 200 and t["hits"] == 100, (kind, t)
            assert set(t["ns"]) == set(bs.STAGES)
            assert all(v > 0 for v in t["ns"].values()), (kind, t)
            assert t["total_ns"] == sum(t["ns"].values())
            assert math.isclose(sum(bs.shares(t).values()), 100.0, rel_tol=1e-12)
    finally:
        bl.manager.close()


def test_main_prints_every_stage_of_both_kinds(capsys):
    assert bs.main(["--n", "200", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    for kind in bs.KINDS:
        for s in bs.STAGES:
            assert any(s in ln for ln in out.splitlines()), (kind, s)
    tab = bs.table(bs.run(100, 1))
    for kind in bs.KINDS:
        assert math.isclose(tab.loc[kind]["share_pct"].sum(), 100.0, rel_tol=1e-9)
