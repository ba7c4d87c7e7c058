"""`httpanalyzer TRACE -o http --tls-out tls`: one pass serves both kinds; the TLS records equal
`httpanalyzer tls`, in one process and with feeder consumers, and the HTTP records do not change."""
from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from tests.conftest import SHARED

TRACE = SHARED / "traces-tls" / "ndpi" / "teams.pcap"


def _rows(path):
    t = pq.read_table(path)
    return sorted(map(str, t.to_pylist()))


@pytest.mark.parametrize("consumers", ["0", "2"])
def test_tls_out_equals_tls_subcommand(tmp_path, consumers):
    from httpanalyzer.cli import main

    if not TRACE.exists():
        pytest.skip(f"shared data absent: {TRACE}")
    assert main([str(TRACE), "-o", str(tmp_path / "h.parquet"), "--tls-out", str(tmp_path / "t.parquet"),
                 "--consumers", consumers, "--no-progress"]) == 0
    assert main(["tls", str(TRACE), "-o", str(tmp_path / "ref.parquet")]) == 0
    assert main([str(TRACE), "-o", str(tmp_path / "h0.parquet"), "--consumers", "0", "--no-progress"]) == 0
    got, ref = _rows(tmp_path / "t.parquet"), _rows(tmp_path / "ref.parquet")
    assert len(ref) > 30 and got == ref
    assert _rows(tmp_path / "h.parquet") == _rows(tmp_path / "h0.parquet")
