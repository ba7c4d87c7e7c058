"""What needs pyarrow.compute over HTTP transaction records (webtap.records.http): the tallies of
`httpanalyzer --summary` and the time order of several consumers' records (`analyze`). Apart
from the record kind itself: pyarrow.compute costs ~40 ms of import that a run without
--summary does not pay (stages reach it through the record-kind table, webtap.records)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: the columns --summary counts the values of
TALLIED = ("outcome", "status", "method")


def tally(batch: pa.RecordBatch) -> tuple[dict, np.ndarray]:
    """({column: {value: count}} for TALLIED, the response times in ns of the final paired
    records (matched, not an interim 1xx)) of one record batch."""
    counts = {}
    for name in TALLIED:
        vc = pc.value_counts(batch.column(name).drop_null())
        counts[name] = dict(zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist()))
    final = pc.and_(batch.column("matched"), pc.invert(batch.column("interim")))
    rt = pc.filter(batch.column("response_time"), final).cast(pa.int64()).drop_null()
    # the values read in place: pyarrow's to_numpy (even zero_copy_only) imports pandas, ~0.7 s
    # that `httpanalyzer --summary` paid for one int64 column
    if len(rt) == 0:
        return counts, np.zeros(0, np.int64)
    return counts, np.frombuffer(rt.buffers()[1], np.int64)[rt.offset:rt.offset + len(rt)]


def table(batches, schema: pa.Schema) -> pa.Table:
    """The batches as one table of `schema` (which an empty list still has)."""
    return pa.Table.from_batches(batches, schema=schema)


def sort_by_time(table: pa.Table) -> pa.Table:
    """Records from several consumers in one order: request time (response time when there is
    no request), then response time, then frame."""
    if table.num_rows == 0:
        return table
    t = pc.coalesce(table.column("request_ts"), table.column("response_ts"))
    keyed = table.append_column("_t", t)
    keyed = keyed.sort_by([("_t", "ascending"), ("response_ts", "ascending"),
                           ("request_frame", "ascending"), ("response_frame", "ascending")])
    return keyed.drop_columns(["_t"])
