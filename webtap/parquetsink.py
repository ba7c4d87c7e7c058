"""Parquet output (webtap.clikit.OUTPUTS: ".parquet" / ".pq" -> webtap.parquetsink:ParquetWriter):
zstd, the columns' Arrow types, large row groups written in a writer thread. Loaded by the
extension table only for a Parquet output, so pyarrow and pyarrow.parquet are imported at the
top (issue 29)."""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from webtap.inflight import InFlight
from webtap.writers import batches_of

__all__ = ["ParquetWriter", "dictionary_columns", "statistics_columns", "with_pandas_metadata"]

#: Arrow integer type -> the pandas nullable dtype of the same width
_NULLABLE_INT = {f"{u}int{b}": f"{'U' if u else ''}Int{b}" for u in ("", "u") for b in (8, 16, 32, 64)}


def with_pandas_metadata(schema):
    """`schema` with pandas metadata that makes pandas read every integer column as a nullable
    integer dtype of its width (status: UInt16, response_frame: Int64, ...; issue 30).

    Without it `pd.read_parquet` turns an integer column that holds a null into float64 (status
    200.0, NaN). The metadata is the "pandas" key pyarrow's to_pandas reads (the same pandas
    writes for a DataFrame with such columns); other readers (DuckDB, Dask, Spark, polars) read
    the Arrow types and ignore it. An existing "pandas" key is kept."""
    meta = dict(schema.metadata or {})
    if b"pandas" in meta:
        return schema
    cols = [{"name": f.name, "field_name": f.name, "pandas_type": str(f.type),
             "numpy_type": _NULLABLE_INT[str(f.type)], "metadata": None}
            for f in schema if str(f.type) in _NULLABLE_INT]
    if not cols:
        return schema
    meta[b"pandas"] = json.dumps({"index_columns": [], "column_indexes": [], "columns": cols,
                                  "creator": {"library": "webtap"}}).encode()
    return schema.with_metadata(meta)


def _is_text(ty) -> bool:
    """A text leaf: strings, binaries and Arrow dictionaries (dictionary_columns encodes them
    with a dictionary, statistics_columns gives them no min/max)."""
    return (pa.types.is_string(ty) or pa.types.is_large_string(ty) or pa.types.is_binary(ty)
            or pa.types.is_large_binary(ty) or pa.types.is_dictionary(ty))


def dictionary_columns(schema) -> list[str]:
    """The Parquet column paths to dictionary-encode: text leaves only (strings, binaries and
    Arrow dictionaries, in lists and structs too: `alpn.list.element`). Parquet's default
    encodes every column with a dictionary first; for the records' timestamps, frame numbers,
    sequence numbers and lengths, nearly all distinct, that builds a dictionary as large as
    the column and then writes it plainly anyway (the writer falls back only past a 1 MiB
    dictionary page). Measured on the bench traces' outputs (in-process, best of 5-9, loaded
    machine): the HTTP-16 records 266 -> 191 ms to write and 4.40 -> 3.51 MB, the TLS bench
    trace's exchanges 37 -> 25 ms and 626 -> 472 KB; zstd compresses the plain numbers
    better than the dictionary indices of a dictionary that never repeats."""
    def leaves(name, ty):
        if pa.types.is_list(ty) or pa.types.is_large_list(ty) or pa.types.is_fixed_size_list(ty):
            return leaves(name + ".list.element", ty.value_type)
        if pa.types.is_struct(ty):
            return [x for f in ty for x in leaves(name + "." + f.name, f.type)]
        return [name] if _is_text(ty) else []

    return [x for f in schema for x in leaves(f.name, f.type)]


def statistics_columns(schema) -> list[str]:
    """The Parquet column paths to write min/max statistics for: the numbers, times and flags
    outside lists, which let a reader skip row groups (the records are in time and frame order);
    not the text leaves nor anything inside a list.

    A list column's statistics are the smallest and largest item of all its lists (of all
    cipher suites offered in a row group): no reader can skip a row group by them, and working
    them out was a tenth of writing the TLS records (TLS-8 bench trace in-process, CPU, median
    of 15: 37.9 -> 34.5 ms; the file 437,478 -> 437,160 bytes). A text column's are its
    alphabetically first and last value of 32,768 records (hosts, addresses, URIs, SNIs,
    Community IDs): they span nearly the whole range in every row group, so they skip none
    either, and each value's byte comparison costs (cachegrind, instructions to encode the TLS
    bench trace's outputs, pyarrow 26: the exchanges 163 -> 134-152 M, the handshakes 297-302 ->
    274-275 M; a few hundred bytes smaller)."""
    def leaves(name, ty):
        if pa.types.is_list(ty) or pa.types.is_large_list(ty) or pa.types.is_fixed_size_list(ty):
            return []
        if pa.types.is_struct(ty):
            return [x for f in ty for x in leaves(name + "." + f.name, f.type)]
        return [] if _is_text(ty) else [name]

    return [x for f in schema for x in leaves(f.name, f.type)]


class ParquetWriter:
    """Parquet (zstd) with the columns' Arrow types; `meta` goes to the file's key-value
    metadata (webtap.partial says whether the run was interrupted).

    Row groups: the record stream hands over a batch every few hundred records, and one
    write_table per batch made one row group each (bench-4's 32,392 records: 63 row groups of
    ~500 rows, 36 columns). Each row group builds a column writer, a dictionary page and
    statistics per column: 728 M of the run's 2,347 M instructions (callgrind). Readers (DuckDB,
    pandas, Dask) also prefer large groups. So batches are held until ROW_GROUP_ROWS rows or
    ROW_GROUP_BYTES of Arrow buffers have come, then written as one row group; the memory this
    holds is bounded by those two numbers. 32,768 rows, not more: the last row group is
    written after the last record, when nothing else runs (the tail of every run); on the
    16-round HTTP bench trace 65,536-row groups left 64,208 rows for the end, 0.095 s of the
    main thread's CPU after the input ended, 32,768 0.059 s (perf, loaded machine).

    A full row group is encoded and compressed in a writer thread (pyarrow releases the GIL
    while it writes) while the run goes on reading, walking and pairing: the sink overlaps the
    stages instead of following them (issue 29; on the 16-round HTTP bench trace the writes
    were 10 % of the main thread). One row group is in flight at most, so the memory bound
    holds (twice the row group) and row groups keep their order; an error of the write is
    raised by the next write or by close, and close waits for the write under way."""

    ROW_GROUP_ROWS = 1 << 15
    ROW_GROUP_BYTES = 32 << 20

    def __init__(self, f, schema=None):
        self.f = f
        self.schema = schema
        self.w = None
        self.held = []
        self.rows = 0
        self.bytes = 0
        self._job = InFlight("webtap-parquet")   # the writer thread: one row group under way

    #: bytes gathered before they go to the output file. pyarrow writes a Parquet file as many
    #: small writes (a page header, a page, a column chunk at a time), and each write to a Python
    #: file object takes the GIL: while the main thread ran Python, a writer thread waited for
    #: it at every one of them. The 430 KB handshake table of the TLS bench trace took 580 ms to
    #: write beside a Python thread that never sleeps, 55-82 ms through this buffer (33 ms
    #: alone; in-process, idle)
    SINK_BUFFER = 1 << 20

    def _open(self, schema):
        self.sink = pa.BufferedOutputStream(pa.PythonFile(self.f, mode="w"),
                                            buffer_size=self.SINK_BUFFER)
        self.w = pq.ParquetWriter(self.sink, with_pandas_metadata(schema), compression="zstd",
                                  use_dictionary=dictionary_columns(schema),
                                  write_statistics=statistics_columns(schema))

    def write(self, data) -> None:
        if self.w is None:
            self._open(data.schema)
        for b in batches_of(data):
            if b.num_rows:
                self.held.append(b)
                self.rows += b.num_rows
                self.bytes += b.nbytes
        if self.rows >= self.ROW_GROUP_ROWS or self.bytes >= self.ROW_GROUP_BYTES:
            self._flush(background=True)

    def _flush(self, background: bool = False) -> None:
        if not self.held:
            return
        tab = pa.Table.from_batches(self.held, schema=self.w.schema)
        rows = max(self.rows, 1)
        self.held, self.rows, self.bytes = [], 0, 0
        if not background:
            self.wait()                # the previous row group first: order, bounded memory
            self.w.write_table(tab, row_group_size=rows)
            return
        self._job.submit(self.w.write_table, tab, row_group_size=rows)

    def flush(self) -> None:
        """Write what is held as a row group now, in the writer thread (the run goes on; close
        waits for it): a sink that has all its records early (a stage's one table at the end)
        encodes them while the other outputs are finished."""
        self._flush(background=True)

    def wait(self) -> None:
        """Until the row group under way is written (its error raised here). Interrupted while
        waiting, it stays under way: the next wait waits for it again."""
        self._job.wait()

    def close(self, meta: dict) -> None:
        try:
            if self.w is None:
                self._open(self.schema if self.schema is not None else pa.schema([]))
            self._flush()
            self.wait()
            self.w.add_key_value_metadata({str(k): str(v) for k, v in meta.items()})
            self.w.close()
            self.sink.detach()         # the buffer written out; the file stays its owner's
        finally:
            self._job.close()
        self.f.flush()
