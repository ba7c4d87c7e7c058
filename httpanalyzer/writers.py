"""Record writers: the paper's `|` line format, CSV and Parquet. Each takes Arrow record batches
(httpanalyzer.records.SCHEMA) and formats them with pyarrow compute kernels: no Python per record.

Line format (Vega et al. 2017), one line per record, fields separated by `|`:
client IP | client port | server IP | server port | request ts | response ts | response time |
reason | status | method | user agent | host | URI
Timestamps and the response time are seconds with 9 decimals (exact, from integer ns). A field
that does not exist for the record (the response of a request-only record, ...) is empty. Text
is printed as captured (decoded as UTF-8, or ISO-8859-1 for bytes that are not UTF-8).
"""
from __future__ import annotations

import io
import os
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from httpanalyzer import records

LINE_FIELDS = ("client_ip", "client_port", "server_ip", "server_port", "request_ts", "response_ts",
               "response_time", "reason", "status", "method", "user_agent", "host", "uri")


def seconds_text(arr: pa.Array) -> pa.Array:
    """Exact decimal seconds with 9 decimals from a timestamp/duration (ns) array; nulls stay."""
    ns = arr.cast(pa.int64())
    neg = pc.less(ns, 0)
    mag = pc.abs(ns)
    secs = pc.divide(mag, 1_000_000_000)
    frac = pc.subtract(mag, pc.multiply(secs, 1_000_000_000))
    text = pc.binary_join_element_wise(
        secs.cast(pa.string()), pc.utf8_lpad(frac.cast(pa.string()), 9, "0"), ".")
    return pc.if_else(neg, pc.binary_join_element_wise("-", text, ""), text)


def _as_text(batch: pa.RecordBatch, name: str) -> pa.Array:
    col = batch.column(name)
    if name in ("request_ts", "response_ts", "response_time"):
        return seconds_text(col)
    if pa.types.is_string(col.type):
        return col
    return col.cast(pa.string())


def format_lines(batch: pa.RecordBatch) -> bytes:
    """The paper's line format for one batch, as bytes (each line ends with '\\n')."""
    if batch.num_rows == 0:
        return b""
    cols = [_as_text(batch, n) for n in LINE_FIELDS]
    line = pc.binary_join_element_wise(*cols, "", "|", null_handling="replace",
                                       null_replacement="")
    # the trailing "" column adds one '|': swap it for a newline
    line = pc.binary_join_element_wise(pc.utf8_slice_codeunits(line, 0, -1), "", "\n")
    line = line.combine_chunks() if isinstance(line, pa.ChunkedArray) else line
    offs = line.buffers()[1]
    start = pa.Array.from_buffers(pa.int32(), 1, [None, offs], offset=line.offset)[0].as_py()
    end = pa.Array.from_buffers(pa.int32(), 1, [None, offs], offset=line.offset + len(line))[0].as_py()
    return line.buffers()[2].to_pybytes()[start:end]


class LineWriter:
    """The paper's line format, to a path or a binary file object (stdout by default)."""

    def __init__(self, out=None):
        self._own = isinstance(out, (str, os.PathLike))
        self.f = open(out, "wb") if self._own else (out or sys.stdout.buffer)

    def write(self, batch: pa.RecordBatch) -> None:
        self.f.write(format_lines(batch))

    def close(self) -> None:
        if self._own:
            self.f.close()
        else:
            self.f.flush()


def csv_view(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The batch as CSV shows it: timestamps and response time as seconds (9 decimals)."""
    arrays, fields = [], []
    for f in batch.schema:
        col = batch.column(f.name)
        if f.name in ("request_ts", "response_ts", "response_time"):
            col = seconds_text(col)
        arrays.append(col)
        fields.append(pa.field(f.name, col.type))
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


class CsvWriter:
    """CSV with the schema's column names; header once; quoting only where needed."""

    def __init__(self, out):
        self._own = isinstance(out, (str, os.PathLike))
        self.f = open(out, "wb") if self._own else out
        self.w = None

    def write(self, batch: pa.RecordBatch) -> None:
        view = csv_view(batch)
        if self.w is None:
            self.w = pacsv.CSVWriter(self.f, view.schema,
                                     write_options=pacsv.WriteOptions(quoting_style="needed"))
        self.w.write_batch(view)

    def close(self) -> None:
        if self.w is None:
            self.write(records.empty_batch())
        self.w.close()
        if self._own:
            self.f.close()


class ParquetWriter:
    """Parquet (zstd) with the schema's Arrow types: ns timestamps, nullable integers."""

    def __init__(self, out):
        self.out = out
        self.w = None

    def write(self, batch: pa.RecordBatch) -> None:
        # opened on the first batch: its schema has the chosen headers' columns, if any
        if self.w is None:
            self.w = pq.ParquetWriter(self.out, batch.schema, compression="zstd")
        self.w.write_batch(batch)

    def close(self) -> None:
        if self.w is None:
            self.write(records.empty_batch())
        self.w.close()


def writer_for(path: str | None):
    """Pick the writer from the output file's extension (.txt/.log: line format)."""
    if path is None or path == "-":
        return LineWriter()
    ext = os.path.splitext(path)[1].lower()
    if ext == ".csv":
        return CsvWriter(path)
    if ext in (".parquet", ".pq"):
        return ParquetWriter(path)
    if ext in (".txt", ".log", ".out", ""):
        return LineWriter(path)
    raise ValueError(f"unknown output format {ext!r}: use .txt, .csv or .parquet")


__all__ = ["LineWriter", "CsvWriter", "ParquetWriter", "writer_for", "format_lines",
           "seconds_text", "csv_view", "io"]
