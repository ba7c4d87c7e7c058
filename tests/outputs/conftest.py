"""Records of every shared trace, computed once per test session for the output tests."""
from __future__ import annotations

import pyarrow as pa
import pytest

from tests.conftest import TRACES, shared_trace_files


@pytest.fixture(scope="session")
def shared_records() -> pa.Table:
    """Every shared trace, one file at a time (one pairing table each), as one Arrow table."""
    from httpanalyzer import iter_record_batches

    files = shared_trace_files()
    if not files:
        pytest.skip(f"shared traces absent: {TRACES}")
    batches = []
    for f in files:
        batches.extend(iter_record_batches(f, consumers=0))
    table = pa.Table.from_batches(batches)
    assert table.num_rows > 1000
    return table
