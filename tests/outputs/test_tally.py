"""webtap.records.httpcompute.tally: the --summary counts and the response times of the final
paired records (matched, not an interim 1xx), checked against the rows read in Python; the
response times are read from the column's buffer, so slices (a nonzero offset) and nulls are
covered."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from webtap.records.httpcompute import tally

ROW = st.tuples(st.booleans(), st.booleans(), st.one_of(st.none(), st.integers(0, 10**12)),
                st.sampled_from(["paired", "request_only", None]), st.sampled_from([200, 404, None]),
                st.sampled_from(["GET", "POST", None]))


@settings(max_examples=150, deadline=None)
@given(st.lists(ROW, max_size=40), st.integers(0, 5))
def test_tally_is_the_rows_read_in_python(rows, cut):
    cols = list(zip(*rows)) if rows else [[]] * 6
    batch = pa.RecordBatch.from_arrays([
        pa.array(cols[0], pa.bool_()), pa.array(cols[1], pa.bool_()),
        pa.array(cols[2], pa.duration("ns")), pa.array(cols[3], pa.string()),
        pa.array(cols[4], pa.uint16()), pa.array(cols[5], pa.string())],
        names=["matched", "interim", "response_time", "outcome", "status", "method"])
    batch = batch.slice(min(cut, len(rows)))
    kept = rows[min(cut, len(rows)):]
    counts, rt = tally(batch)
    want_rt = [r[2] for r in kept if r[0] and not r[1] and r[2] is not None]
    assert rt.dtype == np.int64 and rt.tolist() == want_rt
    for i, name in ((3, "outcome"), (4, "status"), (5, "method")):
        want = {}
        for r in kept:
            if r[i] is not None:
                want[r[i]] = want.get(r[i], 0) + 1
        assert counts[name] == want
