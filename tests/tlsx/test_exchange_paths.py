"""The exchange stage's two ways in (issue 33): run by the walk itself, segment by segment
(its segment tap: webtap.dissect.dissect(segment_tap=...)), in the walking thread of the
readahead executor or in this thread (inline), and walking each batch itself
(httpanalyzer.tls.ExchangeRun.walk, the path of the feeder's consumers and of --dask). All give
the same records, over batches small enough that a connection's segments, its cut record
headers and its waiting requests cross many batch ends (and the stage's owner may find the walk
holding the stage's lock: its records are then taken at a later batch or at the end)."""
from __future__ import annotations

import pytest

from httpanalyzer.tls import ExchangeRun, ExchangeStage
from tests.conftest import SHARED
from webtap.capture import open_trace
from webtap.pipeline import Pipeline
from webtap.records.exchange import exchange_table

TRACES = ["traces-tls/httpreplay/2019-05-01-airfrance-fr-traffic.pcap",
          "traces-tls/pcapplusplus/ExamplesTest_pcap_examples_tls2.pcap"]


def _pipeline(path, executor):
    stage = ExchangeStage(ExchangeRun())
    Pipeline(str(path), [stage], executor=executor, batch_size=64).run()
    return exchange_table(stage.raw), stage.run.counters()


def _own_walk(path):
    run = ExchangeRun()
    with open_trace(str(path), progress=False, batch_size=64) as tr:
        for b in tr:
            run.walk(b.packets, b.data)
    return exchange_table(run.finish()), run.counters()


@pytest.mark.parametrize("name", TRACES)
def test_the_walk_running_the_stage_and_the_stage_walking_agree(name):
    path = SHARED / name
    if not path.exists():
        pytest.skip(f"shared data absent: {path}")
    ahead, c_ahead = _pipeline(path, "readahead")
    inline, c_inline = _pipeline(path, "inline")
    own, c_own = _own_walk(path)
    assert ahead.num_rows >= 20 and ahead["matched"].to_pylist().count(True) >= 10
    assert ahead.equals(inline)
    assert ahead.equals(own)
    assert c_ahead == c_inline == c_own
    assert c_ahead["events"] > c_ahead["data_segments"] > 0
