"""TlsRun's streamed records (stream=True, issue 29): TlsTable.ready_before bounds the first frame
of every record still to come, and webtap.records.tls.split_ready hands out the rows below it.
The reference is independent of both: every part made into a table alone (to_table), the tables
concatenated by pyarrow and the rows sorted in Python by (first frame, ServerHello frame or 0)
with a stable sort. The streamed tables followed by sorted_table of what is left must be those
rows, in that order; a bound too high lets a later row start before an earlier table's."""
from __future__ import annotations

import pyarrow as pa
import pytest

from tests.conftest import SHARED

TRACES = ["ja4/tls-handshake.pcapng", "ja4/ipv6.pcapng",
          "pcapplusplus/ExamplesTest_pcap_examples_many-protocols.pcap",
          "httpreplay/2019-05-01-airfrance-fr-traffic.pcap", "ndpi/teams.pcap"]


def _key(row):
    first = row["request_frame"] if row["request_frame"] is not None else row["response_frame"]
    return (first, row["response_frame"] if row["response_frame"] is not None else 0)


@pytest.mark.parametrize("rel", TRACES)
@pytest.mark.parametrize("every,min_rows", [(1, 1), (3, 5), (16, 16)])
def test_streamed_tables_then_the_rest_are_the_frame_order(rel, every, min_rows):
    from httpanalyzer.tls import TlsRun
    from webtap.capture import open_trace
    from webtap.records.tls import sorted_table, split_ready, to_table

    path = SHARED / "traces-tls" / rel
    if not path.exists():
        pytest.skip(f"{path} not here")
    run = TlsRun()
    every_part, held, streamed = [], [], []
    with open_trace(str(path), progress=False, batch_size=8) as tr:
        for b in tr:
            run.table.feed(b.packets, b.data)      # the C table itself (TlsRun.feed: its thread)
            if run.table.records_waiting >= every:
                bound = run.table.ready_before
                part = run.table.take(ordered=True)
                every_part.append(part)
                tab, held = split_ready(held + [part], bound, min_rows)
                if tab is not None:
                    assert tab.num_rows >= min_rows
                    # every row of it starts before the bound (0-based packet index + 1 = frame)
                    assert all(_key(r)[0] <= bound for r in tab.to_pylist())
                    streamed.append(tab)
    run.table.flush()
    part = run.table.take(ordered=True)
    every_part.append(part)
    rest = sorted_table(held + [part])
    ref = pa.concat_tables([to_table(*p) for p in every_part if len(p[0])]).to_pylist()
    ref.sort(key=_key)                                          # Python's sort is stable
    assert len(ref) > 0
    got = pa.concat_tables(streamed + [rest])
    assert got.to_pylist() == ref
    if len(ref) > 40:
        assert streamed                                         # something did leave early


def test_ready_before_of_a_fresh_table_is_zero_and_moves_with_the_packets():
    from httpanalyzer.tls import TlsRun
    from webtap.capture import open_trace

    path = SHARED / "traces-tls" / "httpreplay/2019-05-01-airfrance-fr-traffic.pcap"
    if not path.exists():
        pytest.skip(f"{path} not here")
    run = TlsRun()
    assert run.table.ready_before == 0
    with open_trace(str(path), progress=False, batch_size=1 << 20) as tr:
        for b in tr:
            run.table.feed(b.packets, b.data)
            n = len(b.packets)
    run.table.flush()                 # nothing waits: the bound is the packet after the last message
    assert 0 < run.table.ready_before <= n
