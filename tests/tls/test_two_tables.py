"""httpanalyzer.tls.TlsRun keeps TCP and QUIC handshakes in two TlsTables, the QUIC one fed in a
thread of its own (docs/TLS.md "Two tables, one clock"). Each table processes its kind and lets
the other kind's messages move its clock and run its GC, so the records (reasons included) and
the counters must be those of one table fed every message, as the stage was before: checked on
every capture of ../shared/traces-tls, in batches small enough that hellos, GCs and QUIC
connections cross batch boundaries."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import SHARED

ROOT = SHARED / "traces-tls"
TRACES = sorted(p for p in ROOT.rglob("*") if p.is_file() and p.suffix not in (".md", ".txt", ".json")) \
    if ROOT.exists() else []
GROUPS = 8


def _one_table(path, batch_size):
    """The reference: one TlsTable fed every TLS and QUIC message of the walk."""
    from webtap._ext.dissect import dissect_batch
    from webtap._ext.tls import TlsTable
    from webtap.capture import open_trace
    from webtap.records.tls import sorted_table

    t = TlsTable()
    parts = []
    with open_trace(str(path), progress=False, batch_size=batch_size) as tr:
        for b in tr:
            data = np.asarray(b.data)
            msgs = dissect_batch(b.packets, data, None, t.watch)[2]
            t.feed_messages(msgs, data, len(b.packets))
            parts.append(t.take())
    t.flush()
    parts.append(t.take())
    return sorted_table(parts), t.counters()


def _two_tables(path, batch_size):
    from httpanalyzer.tls import TlsRun
    from webtap.capture import open_trace

    run = TlsRun()
    with open_trace(str(path), progress=False, batch_size=batch_size) as tr:
        for b in tr:
            run.feed(b.packets, b.data)
    return run.finish(), run.counters()


@pytest.mark.parametrize("group", range(GROUPS))
def test_two_tables_give_one_tables_records_and_counters(group):
    if not TRACES:
        pytest.skip(f"shared data absent: {ROOT}")
    quic = tcp = 0
    for path in TRACES[group::GROUPS]:
        for batch_size in (64, 8192):
            want, wc = _one_table(path, batch_size)
            got, gc = _two_tables(path, batch_size)
            if got is None or not got.num_rows:        # no handshake: None, or no rows
                assert want.num_rows == 0, path
            else:
                assert got.equals(want), (path, batch_size)
            peak_want, peak_got = wc.pop("peak_pending"), gc.pop("peak_pending")
            assert gc == wc, (path, batch_size)
            # the sum of two tables' peaks bounds the hellos that waited at once from above
            assert peak_want <= peak_got <= 2 * peak_want, (path, batch_size)
        quic += wc["quic_initial"]
        tcp += wc["tcp_messages"]
    assert quic > 0 and tcp > 0          # every group holds both kinds of handshake
