"""TlsRun's streamed records (stream=True, issue 29): TlsTable.ready_before bounds the first frame
of every record still to come, and TlsTable.take(before=...) hands out the rows below it (the
others stay in the table).
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
    from webtap.records.tls import sorted_table, to_table

    path = SHARED / "traces-tls" / rel
    if not path.exists():
        pytest.skip(f"{path} not here")
    run = TlsRun()
    streamed = []
    with open_trace(str(path), progress=False, batch_size=8) as tr:
        for b in tr:
            run.table.feed(b.packets, b.data)      # the C table itself (TlsRun.feed: its thread)
            if run.table.records_waiting >= every:
                bound = run.table.ready_before
                part = run.table.take(before=bound, min_rows=min_rows)
                if part is not None:
                    tab = to_table(*part)
                    assert tab.num_rows >= min_rows
                    # every row of it starts before the bound (0-based packet index + 1 = frame)
                    assert all(_key(r)[0] <= bound for r in tab.to_pylist())
                    streamed.append(tab)
    run.table.flush()
    rest = sorted_table([run.table.take(ordered=True)])
    # the reference: the same records taken whole, in emit order, from a second table
    ref_run = TlsRun()
    every_part = []
    with open_trace(str(path), progress=False, batch_size=8) as tr:
        for b in tr:
            ref_run.table.feed(b.packets, b.data)
            if ref_run.table.records_waiting >= every:
                every_part.append(ref_run.table.take())
    ref_run.table.flush()
    every_part.append(ref_run.table.take())
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


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_tls_out_streamed_in_row_groups_keeps_every_row_in_order(tmp_path, monkeypatch, fmt):
    """`--tls-out` with the records streamed every 8 (not 4096) and packet batches of 256: several row groups written while
    the run goes on; read back, the file is the unstreamed table (analyze_tls: TlsRun without
    stream, one sorted table at the end), row for row."""
    import pyarrow.parquet as pq

    import httpanalyzer
    from httpanalyzer.cli import main
    from httpanalyzer.tls import TlsRun
    from webtap.records.tls import SCHEMA

    from webtap import capture

    trace = SHARED / "traces-tls" / "pcapplusplus" / "ExamplesTest_pcap_examples_tls2.pcap"
    if not trace.exists():
        pytest.skip(f"shared data absent: {trace}")
    monkeypatch.setattr(TlsRun, "STREAM_ROWS", 8)
    init = capture.Trace.__init__

    def small_batches(self, *a, **kw):          # 7,417 packets: batches of 256, not one of 8,192
        kw["batch_size"] = 256
        init(self, *a, **kw)
    monkeypatch.setattr(capture.Trace, "__init__", small_batches)
    out = tmp_path / f"t.{fmt}"
    assert main([str(trace), "-o", str(tmp_path / "h.parquet"), "--tls-out", str(out),
                 "--consumers", "0", "--no-progress", "-q"]) == 0
    ref = pa.Table.from_pandas(httpanalyzer.analyze_tls(str(trace)), schema=SCHEMA,
                               preserve_index=False)
    assert ref.num_rows > 30
    if fmt == "parquet":
        assert pq.ParquetFile(out).metadata.num_row_groups > 1
        assert pq.read_table(out).equals(ref)
    else:
        # the same run with the default STREAM_ROWS (4096: nothing of these 325 rows leaves
        # early) writes the same bytes
        monkeypatch.setattr(TlsRun, "STREAM_ROWS", 1 << 12)
        assert main([str(trace), "-o", str(tmp_path / "h2.parquet"), "--tls-out",
                     str(tmp_path / "once.csv"), "--consumers", "0", "--no-progress", "-q"]) == 0
        assert out.read_bytes() == (tmp_path / "once.csv").read_bytes()
        assert len(out.read_bytes().splitlines()) == ref.num_rows + 1


def test_several_traces_stop_the_stream():
    """Each trace numbers its frames from 1: once the packet indexes go back, nothing taken can
    be settled any more (ready_before 0), and the run's one sort at the end orders all."""
    from httpanalyzer.tls import TlsRun
    from webtap.capture import open_trace

    path = SHARED / "traces-tls" / "pcapplusplus" / "ExamplesTest_pcap_examples_tls2.pcap"
    if not path.exists():
        pytest.skip(f"{path} not here")
    run = TlsRun()
    for k in range(2):
        with open_trace(str(path), progress=False) as tr:
            for b in tr:
                run.table.feed(b.packets, b.data)
        if k == 0:
            assert run.table.ready_before > 1000      # a hello from frame 2,331 waits
    assert run.table.ready_before == 0


@pytest.mark.parametrize("exchanges", [False, True])
def test_streamed_tables_are_not_held_unless_the_run_needs_them(tmp_path, small_streams, exchanges):
    """The handshakes written while the run goes on are dropped once written (a long live
    capture holds only those still waiting for their place), unless the caller needs the whole
    table (httpanalyzer tls --plots); the exchanges' join (--exchanges-out) keeps its own, only
    while an exchange can still belong to them (tests/tlsx/test_exchange_stream.py)."""
    from httpanalyzer.cli import main

    trace = SHARED / "traces-tls" / "pcapplusplus" / "ExamplesTest_pcap_examples_tls2.pcap"
    if not trace.exists():
        pytest.skip(f"shared data absent: {trace}")
    made = small_streams(8, batch=256)
    extra = ["--exchanges-out", str(tmp_path / "x.parquet")] if exchanges else []
    assert main([str(trace), "-o", str(tmp_path / "h.parquet"), "--tls-out", str(tmp_path / "t.parquet"),
                 *extra, "--consumers", "0", "--no-progress", "-q"]) == 0
    (one,) = made
    assert one.streamed > 1
    assert one.written == []
    assert (one.x is not None) == exchanges
