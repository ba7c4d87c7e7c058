"""Issue 34 live: the allow list and the rules across layers cut or spare real TCP connections in
network namespaces (the topology and peers of test_live_netns.py; needs root).

The store lists blocked.test and evil.test; the allow list holds blocked.test/allowed; rules:
a CIDR rule on the client's own /32 with a host, a User-Agent rule, an allow rule over a
blacklisted URL, and a CIDR rule for another network that must not fire. Each fetch's outcome
(body or torn down before the delayed server answers) is what the policy documented in
docs/urlfilter.md says, and the hit records name the deciding rule.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from netns import Topology, can_build  # noqa: E402
from test_live_netns import DELAY_S, PEERS, PY, URLFILTER, _filter, _servers, _stop, _wait_reload  # noqa: E402

why = can_build()
pytestmark = pytest.mark.skipif(why is not None, reason=why or "")


def _fetch(t: Topology, path: str, host: str, ua: str = "webtap-test", timeout=DELAY_S + 30) -> dict:
    r = subprocess.run(t.ns_exec("c") + [PY, PEERS, "client", t.server_ip, "80", path, host, str(timeout), ua],
                       capture_output=True, text=True, timeout=timeout + 10)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_live_allow_list_and_rules(tmp_path):
    t = Topology()
    db = str(tmp_path / "bl.db")

    def uf(*a):
        subprocess.run(URLFILTER + ["--db", db, *a], check=True, timeout=120, capture_output=True)

    uf("add", "blocked.test", "evil.test", "--category", "malware")
    uf("allow", "add", "blocked.test/allowed")
    rules = tmp_path / "p.rules"
    rules.write_text(f"cut client={t.client_ip}/32 url=cidr.test\n"      # 1
                     "cut ua=EvilBot\n"                                   # 2
                     "allow url=evil.test/rule-allowed\n"                 # 3
                     "cut client=10.99.0.0/16 url=other.test\n")          # 4: not this client
    uf("rules", "load", str(rules))
    procs = []
    try:
        t.build()
        procs += _servers(t, delay=DELAY_S)
        hits_csv = tmp_path / "hits.csv"
        flt = _filter(t, db, hits_csv, duration=90)
        procs.append(flt)
        cut = {"blacklist": _fetch(t, "/bad", "blocked.test"),
               "cidr": _fetch(t, "/x", "cidr.test"),
               "ua": _fetch(t, "/x", "clean.test", ua="Mozilla/5.0 evilbot/1.0")}
        spared = {"exception": _fetch(t, "/allowed/page", "blocked.test"),
                  "rule_allow": _fetch(t, "/rule-allowed/x", "evil.test"),
                  "other_cidr": _fetch(t, "/x", "other.test"),
                  "clean": _fetch(t, "/x", "clean.test")}
        # a rule added while the filter runs (one history row) applies after its reload
        uf("rules", "add", "cut url=late.test", "--at", "1")
        _wait_reload(flt)
        cut["late_rule"] = _fetch(t, "/x", "late.test")
        out, err = _stop(flt)
        for k, r in cut.items():
            assert r["bytes"] == 0 and not r["body"] and r["end"] in ("eof", "reset"), (k, r)
            assert r["elapsed_s"] < DELAY_S, (k, r)
        for k, r in spared.items():
            assert r["body"] and r["end"] == "eof" and r["elapsed_s"] >= DELAY_S, (k, r)
        stats = json.loads(out.strip().splitlines()[-1])
        c = stats["counters"]
        assert stats["hits"] == 4 and stats["injected"] == 8 and stats["inject_failed"] == 0, stats
        assert (c["blocked"], c["allowed"], c["rule_cut"], c["rule_allow"]) == (1, 1, 3, 1), c
        hits = pd.read_csv(hits_csv).set_index("src_port")
        assert len(hits) == 4
        assert hits.loc[cut["late_rule"]["client_port"], ["rule", "decision"]].tolist() == [1, "rule_cut"]
        assert hits.loc[cut["blacklist"]["client_port"], "decision"] == "blacklist"
        assert hits.loc[cut["cidr"]["client_port"], ["rule", "decision"]].tolist() == [1, "rule_cut"]
        assert hits.loc[cut["ua"]["client_port"], ["rule", "decision"]].tolist() == [2, "rule_cut"]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=5)
        t.close()
