"""benchmarks.bench_sni runs end to end on a small input (issue 18): it builds the blacklist as
the filter gets it (real SQLite store, snapshot mapped), every ClientHello gives one lookup and
half of them hit, and it prints one row per kind and clock. Speed is not checked here."""
from __future__ import annotations

import re

from benchmarks import bench_sni


def test_bench_sni_small_run(capsys):
    assert bench_sni.main(["--n", "400", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "blacklist 100200 entries from a store, snapshot mapped" in out
    rows = [ln.split() for ln in out.splitlines() if re.match(r"(TLS/TCP|QUIC) +(wall|cpu) ", ln)]
    assert [(r[0], r[1]) for r in rows] == [("TLS/TCP", "wall"), ("TLS/TCP", "cpu"),
                                            ("QUIC", "wall"), ("QUIC", "cpu")]
    for r in rows:
        ext, mat, fg, em, emf = map(float, r[2:7])
        assert min(ext, mat, fg) > 0 and int(r[8]) == 200       # hits: every other name is listed
        assert abs(em - (ext + mat)) < 0.002 and abs(emf - (em + fg)) < 0.002
