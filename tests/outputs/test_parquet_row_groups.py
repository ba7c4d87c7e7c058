"""The Parquet writer gathers the record stream's small batches into large row groups
(webtap.parquetsink.ParquetWriter: at most ROW_GROUP_ROWS rows or ROW_GROUP_BYTES per group), and
loses nothing on the way: every batch written is in the file, in order, once."""
from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from webtap.parquetsink import ParquetWriter

SCHEMA = pa.schema([("n", pa.int64()), ("s", pa.string())])


def _batch(start: int, n: int) -> pa.RecordBatch:
    v = np.arange(start, start + n, dtype=np.int64)
    return pa.RecordBatch.from_arrays([pa.array(v), pa.array([f"r{i}" for i in v])], schema=SCHEMA)


def _write(sizes, rows=None, nbytes=None, table_every=0):
    buf = io.BytesIO()
    w = ParquetWriter(buf, schema=SCHEMA)
    if rows:
        w.ROW_GROUP_ROWS = rows
    if nbytes:
        w.ROW_GROUP_BYTES = nbytes
    start = 0
    for k, n in enumerate(sizes):
        b = _batch(start, n)
        w.write(pa.Table.from_batches([b]) if table_every and k % table_every == 0 else b)
        start += n
    w.close({"webtap.partial": "false"})
    return pq.ParquetFile(io.BytesIO(buf.getvalue())), start


def test_small_batches_make_one_row_group():
    f, total = _write([500] * 63)                 # bench-4's shape: 63 batches of ~500 records
    assert f.metadata.num_row_groups == 1
    t = f.read()
    assert t["n"].to_pylist() == list(range(total))
    assert f.metadata.metadata[b"webtap.partial"] == b"false"


@pytest.mark.parametrize("sizes", [[1000] * 10, [1, 2999, 0, 5000, 7, 3], [10000]])
def test_groups_bounded_by_rows(sizes):
    f, total = _write(sizes, rows=3000, table_every=2)
    t = f.read()
    assert t["n"].to_pylist() == list(range(total))             # all rows, in order, once
    md = f.metadata
    groups = [md.row_group(i).num_rows for i in range(md.num_row_groups)]
    assert sum(groups) == total
    # a group closes as soon as it holds >= ROW_GROUP_ROWS: none is larger than that bound
    # plus the last batch that crossed it
    assert all(g < 3000 + max(sizes) for g in groups)
    assert md.num_row_groups <= -(-total // 3000) + 1


def test_groups_bounded_by_bytes():
    f, total = _write([100] * 50, nbytes=4000)   # each batch ~1.5 KB: a group every few batches
    assert f.metadata.num_row_groups > 5
    assert f.read()["n"].to_pylist() == list(range(total))


def test_empty_output_keeps_its_schema():
    f, total = _write([])
    assert total == 0 and f.metadata.num_rows == 0
    assert f.schema_arrow.names == ["n", "s"]


class _File(io.BytesIO):
    """A file that notes which threads wrote to it and fails (ENOSPC) past `limit` bytes."""

    def __init__(self, limit=None):
        super().__init__()
        self.limit = limit
        self.threads = set()
        self.writes = 0

    def write(self, b):
        import threading

        self.threads.add(threading.current_thread().name)
        self.writes += 1
        if self.limit is not None and self.tell() + len(b) > self.limit:
            raise OSError(28, "No space left on device")
        return super().write(b)


def test_full_row_groups_are_written_by_the_writer_thread_in_order():
    f = _File()
    w = ParquetWriter(f, schema=SCHEMA)
    w.ROW_GROUP_ROWS = 1000
    w.SINK_BUFFER = 1 << 10        # these row groups are small: let them reach the file as made
    for k in range(20):
        w.write(_batch(k * 500, 500))
    w.close({"webtap.partial": "false"})
    assert any(n.startswith("webtap-parquet") for n in f.threads)   # the overlap is really there
    t = pq.read_table(io.BytesIO(f.getvalue()))
    assert t["n"].to_pylist() == list(range(10000))


@pytest.mark.parametrize("limit", [2000, 20000, 60000])
def test_an_error_of_the_writer_thread_is_raised_not_lost(limit):
    """A write that fails in the writer's thread (disk full) fails the run: the next write or
    close raises it."""
    w = ParquetWriter(_File(limit), schema=SCHEMA)
    w.ROW_GROUP_ROWS = 1000
    with pytest.raises(OSError, match="No space"):
        for k in range(200):
            w.write(_batch(k * 500, 500))
        w.close({"webtap.partial": "false"})


def _written(t, schema) -> pq.ParquetFile:
    """t written by the sink, read back."""
    buf = io.BytesIO()
    w = ParquetWriter(buf, schema=schema)
    w.write(t)
    w.close({"webtap.partial": "false"})
    return pq.ParquetFile(io.BytesIO(buf.getvalue()))


def test_only_text_columns_are_dictionary_encoded():
    """Dictionary pages for text leaves only (strings, in lists and structs too), none for the
    numbers (webtap.parquetsink.dictionary_columns); every value reads back as written."""
    schema = pa.schema([("ts", pa.timestamp("ns", tz="UTC")), ("frame", pa.uint64()),
                        ("ip", pa.string()), ("alpn", pa.list_(pa.string())),
                        ("groups", pa.list_(pa.uint16())),
                        ("hdr", pa.struct([("name", pa.string()), ("len", pa.uint32())])),
                        ("kind", pa.dictionary(pa.int8(), pa.string()))])
    n = 5000
    t = pa.table({"ts": pa.array(np.arange(n) * 1000 + 1_700_000_000 * 10**9, pa.timestamp("ns", tz="UTC")),
                  "frame": pa.array(np.arange(1, n + 1, dtype=np.uint64)),
                  "ip": [f"10.0.0.{i % 7}" for i in range(n)],
                  "alpn": [["h2", "http/1.1"] if i % 2 else ["h2"] for i in range(n)],
                  "groups": [[29, 23] for _ in range(n)],
                  "hdr": [{"name": "host", "len": i} for i in range(n)],
                  "kind": pa.array(["a", "b"] * (n // 2)).dictionary_encode()}, schema=schema)
    f = _written(t, schema)
    rg = f.metadata.row_group(0)
    dicts = {rg.column(i).path_in_schema: rg.column(i).has_dictionary_page for i in range(rg.num_columns)}
    assert dicts == {"ts": False, "frame": False, "ip": True, "alpn.list.element": True,
                     "groups.list.element": False, "hdr.name": True, "hdr.len": False, "kind": True}
    back = f.read()
    assert back.drop_columns(["kind"]).equals(t.drop_columns(["kind"]))
    assert back.column("kind").to_pylist() == t.column("kind").to_pylist()


def test_statistics_for_numbers_outside_lists_only():
    """Min/max statistics for the number, time and flag leaves outside lists
    (webtap.parquetsink.statistics_columns); none for text leaves (their first and last value
    of a row group skip no row group) nor for list items (no reader skips a row group by the
    smallest cipher suite of all lists)."""
    schema = pa.schema([("frame", pa.uint64()), ("ip", pa.string()), ("ok", pa.bool_()),
                        ("alpn", pa.list_(pa.string())), ("groups", pa.list_(pa.uint16())),
                        ("kind", pa.dictionary(pa.int32(), pa.string())),
                        ("hdr", pa.struct([("name", pa.string()), ("len", pa.uint32())]))])
    t = pa.table({"frame": pa.array([3, 1, 2], pa.uint64()), "ip": ["b", "a", "c"],
                  "ok": [True, False, True],
                  "alpn": [["h2"], ["http/1.1", "h2"], []], "groups": [[29], [23, 29], [24]],
                  "kind": pa.array(["x", "y", "x"]).dictionary_encode(),
                  "hdr": [{"name": "x", "len": 5}, {"name": "a", "len": 1}, {"name": "z", "len": 9}]},
                 schema=schema)
    f = _written(t, schema)
    rg = f.metadata.row_group(0)
    st = {rg.column(i).path_in_schema: rg.column(i).statistics for i in range(rg.num_columns)}
    assert {k for k, v in st.items() if v is not None and v.has_min_max} == \
        {"frame", "ok", "hdr.len"}
    assert (st["frame"].min, st["frame"].max) == (1, 3)
    assert (st["ok"].min, st["ok"].max) == (False, True)
    assert (st["hdr.len"].min, st["hdr.len"].max) == (1, 9)
    back = f.read()
    assert back.drop_columns(["kind"]).equals(t.drop_columns(["kind"]))
    assert back.column("kind").to_pylist() == t.column("kind").to_pylist()


def test_the_file_gets_few_large_writes_and_stays_open():
    """pyarrow writes a page header, a page, a column chunk at a time; each write to a Python
    file takes the GIL, which a busy main thread holds (webtap.parquetsink ParquetWriter.SINK_BUFFER):
    the writes reach the file in pieces of the buffer's size, and the file is left open for
    its owner (clikit.Output closes it after close())."""
    f = _File()
    w = ParquetWriter(f, schema=SCHEMA)
    w.ROW_GROUP_ROWS = 1000
    w.SINK_BUFFER = 1 << 12
    for k in range(20):
        w.write(_batch(k * 500, 500))
    w.close({"webtap.partial": "false"})
    assert not f.closed
    size = len(f.getvalue())
    assert size > 4 * w.SINK_BUFFER                     # several pieces
    # about one write per buffer (a piece larger than the buffer goes on its own); unbuffered,
    # pyarrow made 84 writes of these 10 row groups
    assert f.writes <= size // w.SINK_BUFFER + 4
    assert pq.read_table(io.BytesIO(f.getvalue()))["n"].to_pylist() == list(range(10000))
