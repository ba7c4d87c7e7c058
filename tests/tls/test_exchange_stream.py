"""The exchange stage's streamed records (issue 33's cost): ExchangeTable.ready_before bounds the
frame (request's, else response's) of every record still to come, and `--exchanges-out` writes
the records below it whose handshake record is settled too while the run goes on.

The bound is checked against what the table makes afterwards (every later record must sort at
or after it), not against the code that computes it; the streamed file against the exchanges of
the same trace made whole at the end (httpanalyzer.tls_exchange.iter_exchanges, no stream)."""
from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from tests.conftest import SHARED

TRACES = ["pcapplusplus/ExamplesTest_pcap_examples_tls2.pcap", "ndpi/forticlient.pcap",
          "mercury/surfshark.pcap", "ndpi/dnscrypt-v2-doh.pcap", "ndpi/teams.pcap",
          "ndpi/reddit.pcap"]


def _path(rel):
    path = SHARED / "traces-tls" / rel
    if not path.exists():
        pytest.skip(f"{path} not here")
    return path


@pytest.mark.parametrize("rel", TRACES)
@pytest.mark.parametrize("batch", [3, 64])
def test_ready_before_bounds_every_later_record(rel, batch):
    from webtap._ext.dissect import dissect_batch
    from webtap._ext.exchange import ExchangeTable
    from webtap.capture import open_trace
    from webtap.records.exchange import EXCHANGE_RECORD_DTYPE

    table = ExchangeTable()
    assert table.ready_before == 0
    bounds, made = [], []          # per batch: the bound after it, the records it made
    with open_trace(str(_path(rel)), progress=False, batch_size=batch) as tr:
        for b in tr:
            _, _, _, ev = dissect_batch(b.packets, np.asarray(b.data), None, None, 2)
            table.feed(ev, b.data)
            made.append(table.take().view(EXCHANGE_RECORD_DTYPE))
            bounds.append(table.ready_before)
    table.flush()
    made.append(table.take().view(EXCHANGE_RECORD_DTYPE))
    bounds.append(1 << 62)
    assert bounds[:-1] == sorted(bounds[:-1])           # it only moves forward
    keys = [np.where(m["has_req"] == 1, m["req_frame"], m["resp_frame"]) for m in made]
    assert sum(len(k) for k in keys) > 40
    # the smallest frame of the records made after each batch (frames are 1-based, the bound a
    # 0-based packet index: a later record at frame f must have f - 1 >= bound)
    later = np.uint64(1 << 62)
    for i in range(len(made) - 2, -1, -1):
        if len(keys[i + 1]):
            later = min(later, keys[i + 1].min())
        assert later > np.uint64(bounds[i]), (i, bounds[i], int(later))
    if rel == TRACES[0]:
        # not stuck at 0 (a request left unanswered until the end holds it: 215 of its 1,622
        # records are below the last batch's bound)
        key = np.concatenate(keys[:-1])
        assert (key <= np.uint64(bounds[-2])).sum() > len(key) // 10


@pytest.mark.parametrize("rel", TRACES[:4])
def test_streamed_exchanges_equal_the_table_made_at_the_end(tmp_path, monkeypatch, rel):
    from httpanalyzer.cli import main
    import httpanalyzer.tls as tls_mod
    from httpanalyzer.tls import ExchangeRun, TlsRun
    from httpanalyzer.tls_exchange import iter_exchanges
    from webtap.pipeline import Pipeline

    path = _path(rel)
    ref, _ = iter_exchanges(str(path))
    # small parts and batches: several row groups written while the run goes on, even on a
    # small trace
    monkeypatch.setattr(TlsRun, "STREAM_ROWS", 4)
    monkeypatch.setattr(ExchangeRun, "STREAM_ROWS", 4)
    monkeypatch.setattr(tls_mod, "Pipeline", lambda *a, **k: Pipeline(*a, batch_size=64, **k))
    out = tmp_path / "x.parquet"
    assert main(["tls", str(path), "-o", str(tmp_path / "t.parquet"), "--exchanges-out", str(out),
                 "-q"]) == 0
    got = pq.read_table(out)
    assert ref.num_rows > 40
    assert got.equals(ref.cast(got.schema))
    if rel == TRACES[0]:
        assert pq.ParquetFile(out).metadata.num_row_groups > 1      # some left during the run
