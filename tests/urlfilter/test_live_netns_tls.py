"""THE REAL TEST of issue 18: the live filter cuts real TLS and QUIC connections by their SNI.

Same topology as test_live_netns.py (client, server, filter, bridge; tc mirred mirror to the
filter; tests/urlfilter/netns.py). Peers: tests/urlfilter/netns_tls_peers.py -- Python ssl and
aioquic, with a certificate made at test time; both servers answer late (the kernel has no
netem), so the filter's answer can arrive first. `urlfilter run` captures on the mirror ("tcp or
udp") and injects on the same port.

* TLS: a blacklisted SNI (domain entry, subdomain, upper case + trailing dot) ends in reset/EOF
  with no certificate at the client; a clean SNI, and an SNI whose only entry has a path (path
  entries never match an SNI), complete and get the body.
* QUIC (v1 and v2): a blacklisted SNI is closed by the forged server Initial: the client reports
  CONNECTION_REFUSED with the filter's reason phrase, no handshake, no server data; a clean SNI
  completes and gets the body.
* The filter's JSON stats count the TLS and QUIC hits and forged frames.

No wall-clock assertion: outcomes are events (close, reset, certificate, body). Bounded waits
only; namespaces removed in a `finally`.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from netns import Topology, can_build  # noqa: E402
from test_live_netns import URLFILTER, _filter, _start, _stop  # noqa: E402

PY = sys.executable
PEERS = str(HERE / "netns_tls_peers.py")
DELAY = "0.5"

why = can_build()
pytestmark = pytest.mark.skipif(why is not None, reason=why or "")


def _peer(t: Topology, *args, timeout=4.0) -> dict:
    r = subprocess.run(t.ns_exec("c") + [PY, PEERS, *args, str(timeout)], capture_output=True,
                       text=True, timeout=timeout + 30)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_live_filter_cuts_tls_and_quic_by_sni(tmp_path):
    pytest.importorskip("aioquic")      # installed by the Makefile (venv list)
    db = str(tmp_path / "bl.db")
    subprocess.run(URLFILTER + ["--db", db, "add", "evil.test", "blocked.test/onlypath", "--category", "malware"],
                   check=True, timeout=60, capture_output=True)
    subprocess.run([PY, PEERS, "cert", str(tmp_path)], check=True, timeout=60)
    t = Topology()
    procs = []
    try:
        t.build()
        for kind in ("tls-server", "quic-server"):
            p = _start(t.ns_exec("s") + [PY, PEERS, kind, t.server_ip, "443", DELAY, str(tmp_path)])
            procs.append(p)
            assert p.stdout.readline().strip() == "ready", _stop(p)
        flt = _filter(t, db, tmp_path / "hits.csv", duration=120)
        procs.append(flt)

        ip = t.server_ip
        tls_bad = [_peer(t, "tls-client", ip, "443", sni) for sni in ("evil.test", "www.evil.test", "WWW.Evil.Test.")]
        tls_good = [_peer(t, "tls-client", ip, "443", sni) for sni in ("good.test", "blocked.test")]
        quic_bad = [_peer(t, "quic-client", ip, "443", sni, v) for sni, v in
                    (("www.evil.test", "1"), ("evil.test", "0x6b3343cf"))]
        quic_good = [_peer(t, "quic-client", ip, "443", sni, v) for sni, v in
                     (("good.test", "1"), ("blocked.test", "0x6b3343cf"))]
        out, err = _stop(flt)

        for r in tls_bad:
            assert r["end"] in ("reset", "eof") and not r["cert"] and not r["body"], r
        for r in tls_good:
            assert r["end"] == "ok" and r["cert"] and r["body"], r
        for r in quic_bad:
            assert r["end"] == "closed" and not r["handshake"] and r["server_data"] == 0, r
            assert r["error_code"] == 0x02 and r["reason"] == "blocked by URL filter", r
        for r in quic_good:
            assert r["end"] == "ok" and r["handshake"] and r["body"], r
        stats = json.loads(out.strip().splitlines()[-1])
        assert stats["tls_hits"] == len(tls_bad) and stats["quic_hits"] == len(quic_bad), stats
        assert stats["tls_injected"] == 2 * len(tls_bad) and stats["quic_injected"] == len(quic_bad), stats
        assert stats["inject_failed"] == 0, stats
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=5)
        t.close()
    assert not any(n in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
                   for n in t.ns.values())
