"""webtap.records.tls.sorted_table puts the TLS stage's records in frame order in their numpy
buffers, over several take() parts, before Arrow. The reference here is independent of it:
each part made into a table alone (to_table), the tables concatenated by pyarrow, and the rows
sorted in Python by (first frame, ServerHello frame or 0) with a stable sort."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from tests.conftest import SHARED

TRACES = ["ja4/tls-handshake.pcapng", "ja4/ipv6.pcapng",
          "pcapplusplus/ExamplesTest_pcap_examples_many-protocols.pcap",
          "httpreplay/2019-05-01-airfrance-fr-traffic.pcap"]


def _parts(path, every, ordered=False):
    from httpanalyzer.tls import TlsRun
    from webtap.capture import open_trace

    run = TlsRun()
    parts = []
    with open_trace(str(path), progress=False, batch_size=8) as tr:
        for b in tr:
            run.table.feed(b.packets, b.data)      # the C table itself, here (TlsRun.feed: its thread)
            if run.table.records_waiting >= every:
                parts.append(run.table.take(ordered=ordered))
    run.table.flush()
    parts.append(run.table.take(ordered=ordered))
    return parts


def _key(row):
    first = row["request_frame"] if row["request_frame"] is not None else row["response_frame"]
    return (first, row["response_frame"] if row["response_frame"] is not None else 0)


@pytest.mark.parametrize("rel", TRACES)
@pytest.mark.parametrize("every", [1, 3, 1 << 20])
@pytest.mark.parametrize("ordered", [False, True])
def test_sorted_table_is_the_stable_frame_order_of_all_parts(rel, every, ordered):
    from webtap.records.tls import SCHEMA, sorted_table, to_table

    path = SHARED / "traces-tls" / rel
    if not path.exists():
        pytest.skip(f"{path} not here")
    parts = _parts(path, every, ordered)      # ordered: each part in frame order (as TlsRun takes them)
    ref = pa.concat_tables([to_table(*p) for p in parts if len(p[0])]).to_pylist()
    if every == 1 and len(ref) > 20:
        assert sum(1 for r, _ in parts if len(r)) > 3        # the parts really are several
    ref.sort(key=_key)                                         # Python's sort is stable
    got = sorted_table(parts)
    assert got.schema == SCHEMA
    assert got.to_pylist() == ref
    assert len(ref) > 0


def test_sorted_table_of_nothing_is_the_empty_table():
    from webtap.records.tls import SCHEMA, TLS_OUT_DTYPE, sorted_table

    assert sorted_table([]).num_rows == 0
    assert sorted_table([(np.zeros(0, np.uint8), {})]).schema == SCHEMA


@pytest.mark.parametrize("rel", TRACES)
def test_take_ordered_is_the_stable_frame_order_of_the_emitted_records(rel):
    """TlsTable.take(ordered=True) puts the rows in frame order in C (TlsRun takes them so):
    the same rows as a take in emit order sorted in Python by (first frame, ServerHello frame
    or 0), stably; and sorted_table of that one part is its table as it is."""
    from httpanalyzer.tls import TlsRun
    from webtap.capture import open_trace
    from webtap.records.tls import sorted_table, to_table

    path = SHARED / "traces-tls" / rel
    if not path.exists():
        pytest.skip(f"{path} not here")
    runs = [TlsRun(), TlsRun()]
    with open_trace(str(path), progress=False, batch_size=8) as tr:
        for b in tr:
            for run in runs:
                run.table.feed(b.packets, b.data)
    for run in runs:
        run.table.flush()
    plain = runs[0].table.take()
    ordered = runs[1].table.take(ordered=True)
    ref = to_table(*plain).to_pylist()
    ref.sort(key=_key)
    got = to_table(*ordered).to_pylist()
    assert len(got) == len(ref) > 0
    assert got == ref
    if rel.startswith("httpreplay"):
        assert to_table(*plain).to_pylist() != ref      # emit order differs from frame order here
    assert sorted_table([ordered]).to_pylist() == ref
