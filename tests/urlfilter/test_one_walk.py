"""urlfilter scan and timing walk each packet once (issue 29): the SNI pass takes its
ClientHello candidates from the HTTP dissector's walk (MessageBatch.tls, dissect(tls_watch=))
and timing's connection table its TCP segments (MessageBatch.tcp_events) instead of walking
every packet again. Records, counters and the connection table must be exactly those of the
stages' own walks (SniTable.extract, ConnTable.feed) on every shared trace, TLS and HTTP, and
neither stage may have walked a packet itself (their packets_walked counters)."""
from __future__ import annotations

import pathlib

import pytest

from tests.conftest import SHARED
from urlfilter.analyzer import Blacklist, UrlAnalyzer
from urlfilter.tree import UrlTree
from webtap.dissect import dissect
from webtap.pipeline import Pipeline
from webtap.stream import Totals

ROOTS = [SHARED / "traces-tls", SHARED / "traces"]


def _traces():
    out = []
    for root in ROOTS:
        if root.is_dir():
            out += sorted(p for p in root.rglob("*") if p.is_file()
                          and any(x in p.name for x in (".pcap", ".cap")) and not p.name.endswith(".json"))
    return out


def _blacklist(paths) -> Blacklist:
    """Names that some hellos of the shared traces carry (hits beside misses)."""
    t = UrlTree()
    for h in ["localhost", "fbcdn.net", "google.com", "www.iit.cnr.it", "cloudflare.com",
              "mozilla.com", "microsoft.com", "apple.com", "mzstatic.com", "example.com"]:
        t.insert(h)
    return Blacklist(t)


def _scan(path, bl, one_walk: bool):
    an = UrlAnalyzer(bl, forge=True, verify_checksums=False, handshakes=True)
    totals = Totals()
    # the pipeline's own walk (from the stage's watch list and TCP events) or a plain one
    Pipeline([str(path)], [an], skip_unreadable=True, totals=totals,
             dissector=None if one_walk else dissect).run()
    return an


def _drop_timed(t):
    return t.drop([c for c in ("match_ns", "forge_ns") if c in t.column_names])


@pytest.mark.parametrize("group", range(8))
def test_one_walk_equals_the_sni_pass_own_walk(group):
    paths = _traces()
    if not paths:
        pytest.skip("shared traces absent")
    bl = _blacklist(paths)
    compared = hellos = hits = conns = walked = 0
    for path in paths[group::8]:
        a = _scan(path, bl, True)
        b = _scan(path, bl, False)
        ta, tb = _drop_timed(a.table()), _drop_timed(b.table())
        assert ta.equals(tb), path
        assert a.counters == b.counters, (path, {k: (a.counters[k], b.counters[k])
                                                 for k in a.counters if a.counters[k] != b.counters[k]})
        assert a.conns.entries().tobytes() == b.conns.entries().tobytes(), path
        assert a.sni.packets_walked == 0 and a.conns.packets_walked == 0, path   # one walk
        conns += len(a.conns)
        walked += b.sni.packets_walked + b.conns.packets_walked      # the reference did walk
        compared += 1
        hellos += a.counters["client_hellos"]
        hits += a.counters["tls_hits"] + a.counters["quic_hits"]
    # every group holds TLS traces with hellos, hits among them
    assert compared > 0 and hellos > 0 and hits > 0 and conns > 0 and walked > 0, \
        (compared, hellos, hits, conns, walked)
