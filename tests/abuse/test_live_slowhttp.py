"""THE REAL TEST of issue 34's slow-HTTP indicators: slowhttptest (Debian's 1.8.2) against real
nginx in network namespaces (tests/abuse/live.py), with well-behaved clients beside it, captured
by tcpdump on the server's interface. httpanalyzer.abuse.slow_http must flag the attacking
connections and only them; precision and recall are asserted, and printed (docs/ABUSE.md reports
them).

    client ns 0  slowhttptest -H (slowloris)  -> :80    /r   (static file)
                 slowhttptest -B (slow body)  -> :8080 /r   (proxied to a local server block:
                                                             nginx reads the whole body first)
                 slowhttptest -X (slow read)  -> :8081 /big (1 MiB)
                 (their availability probe, -e: a complete request with an absolute-form
                 target "GET http://.../r", answered at once: a normal connection of client 0)
    client ns 1  tests/abuse/peers.py normal  -> :80, :8080, :8081, :8082 in turn (GETs on a
                 kept-alive connection, a 20 KB POST, a 200 KiB download), closing when done
    client ns 2  tests/abuse/peers.py idle    -> :8082: GET once, then hold the connection idle

Truth, from what each tool does (not from the indicators): every connection of client 0 is an
attack of the kind its port says, but for slowhttptest's probes (their request-target is in
absolute form, which the attacks' is not); every connection of client 2 is an idle keep-alive;
every connection of client 1, and every probe, is normal.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from live import Lab, missing  # noqa: E402

from httpanalyzer import abuse  # noqa: E402

why = missing("slowhttptest")
pytestmark = [pytest.mark.live, pytest.mark.skipif(why is not None, reason=why or "")]

ATTACK_S = 12          # slowhttptest -l
NGINX_HTTP = """
    client_header_timeout 60s;
    client_body_timeout 60s;
    send_timeout 60s;
    keepalive_timeout 60s;
    server { listen {ip}:80; listen {ip}:8081; listen {ip}:8082; }
    server { listen {ip}:8080; location / { proxy_pass http://127.0.0.1:9000; } }
    server { listen 127.0.0.1:9000; location / { return 200 "posted\\n"; } }
"""
KIND_OF_PORT = {80: "slowloris", 8080: "slow_body", 8081: "slow_read", 8082: "idle_keepalive"}


def run_lab(work: Path) -> Path:
    pcap = work / "slow.pcap"
    with Lab(3, work) as lab:
        lab.nginx(NGINX_HTTP)
        td = lab.tcpdump(pcap)
        ip = lab.server_ip
        common = ["-c", "8", "-r", "8", "-l", str(ATTACK_S), "-i", "2", "-x", "10",
                  "-e", f"{ip}:9", "-p", "2"]
        attacks = [
            lab.start(lab.in_client(0) + ["slowhttptest", "-H", "-u", f"http://{ip}/r", *common]),
            lab.start(lab.in_client(0) + ["slowhttptest", "-B", "-u", f"http://{ip}:8080/r",
                                          "-s", "8192", *common]),
            lab.start(lab.in_client(0) + ["slowhttptest", "-X", "-u", f"http://{ip}:8081/big",
                                          "-k", "1", "-n", "1", "-w", "1", "-y", "512", "-z", "32",
                                          *common]),
        ]
        normal = lab.peer(1, "normal", ip, "80,8080,8081,8082", ATTACK_S - 2)
        idle = lab.peer(2, "idle", ip, 8082, 4, 8)
        for p in [normal, idle] + attacks:
            out, err = p.communicate(timeout=ATTACK_S + 40)
            assert p.returncode == 0, (p.args, err[-2000:], out[-2000:])
        dropped = lab.stop_tcpdump(td)
        assert dropped == 0, f"tcpdump dropped {dropped} packets"
        (work / "clients.json").write_text(json.dumps({"server": ip, "clients": lab.client_ips}))
    return pcap


def score(pcap: Path, clients: list[str]) -> dict:
    run = abuse.collect(str(pcap))
    s = abuse.slow_http(run)
    port = s["server_port"].astype(int)
    cip = s["client_ip"].astype(str)
    uri = abuse.first_request_of(s, run.requests, "uri").astype(str)
    probe = (cip == clients[0]).to_numpy() & np.char.startswith(uri.astype(str), "http://")
    attacker = (((cip == clients[0]) & port.isin([80, 8080, 8081]) & ~probe)
                | (cip == clients[2]))
    normal = (cip == clients[1]) | probe
    flagged = s["slow"].astype(bool)
    tp = int((flagged & attacker).sum())
    fp = int((flagged & normal).sum())
    kinds = {}
    for p, kind in KIND_OF_PORT.items():
        rows = attacker & (port == p)
        kinds[kind] = {"connections": int(rows.sum()), "flagged_as_kind": int(s.loc[rows, kind].sum()),
                       "other_kinds": int(s.loc[rows, [k for k in abuse.SLOW_KINDS if k != kind]]
                                          .any(axis=1).sum())}
    return {
        "connections": len(s), "attacks": int(attacker.sum()), "normal": int(normal.sum()),
        "other": int((~attacker & ~normal).sum()), "probes": int(probe.sum()),
        "true_positives": tp, "false_positives": fp,
        "precision": tp / max(tp + fp, 1), "recall": tp / max(int(attacker.sum()), 1),
        "kinds": kinds,
        "normal_flags": {k: int(s.loc[normal, k].sum()) for k in abuse.SLOW_KINDS},
    }


def test_slow_http_indicators_against_slowhttptest(tmp_path):
    pcap = run_lab(tmp_path)
    clients = json.loads((tmp_path / "clients.json").read_text())["clients"]
    r = score(pcap, clients)
    print(json.dumps(r))
    assert r["other"] == 0, r
    assert r["normal"] >= 20 and r["probes"] >= 3, r   # the normal client and the probes worked
    for kind, k in r["kinds"].items():
        assert k["connections"] >= 4, (kind, r)
        # every attacking connection flagged, as its kind
        assert k["flagged_as_kind"] == k["connections"], (kind, r)
        assert k["other_kinds"] == 0, (kind, r)           # and as no other kind
    assert r["recall"] == 1.0, r
    assert r["precision"] == 1.0, r


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        t0 = time.time()
        pcap = run_lab(Path(d))
        clients = json.loads((Path(d) / "clients.json").read_text())["clients"]
        print(json.dumps(score(pcap, clients), indent=1), time.time() - t0)
        if len(sys.argv) > 1:
            import shutil
            shutil.copy(pcap, sys.argv[1])
