"""JSON lines output (`-o OUT.jsonl`): one JSON object per record, one record per line, with the
record's column names as keys (every key on every line; a value that does not exist is null).

JSON has strings, numbers, booleans and null; the other types are written as:

* request_ts, response_ts: ISO 8601 UTC text with nanoseconds, "2014-03-04T22:11:25.123456789Z"
  (exact; pandas: ``pd.to_datetime(df.request_ts)``; Elasticsearch: a ``date_nanos`` field).
* response_time: a number of seconds with 9 decimals, e.g. 0.023004000 (exact as text; as a
  float64 it rounds back to the same nanoseconds: ``(df.response_time * 1e9).round()``).
* integers (ports, status, frame indexes, ...): JSON integers; booleans: true / false.

``pandas.read_json(path, lines=True)`` gives back the Parquet output's records with those
conversions (tests/outputs/test_jsonl_zeek.py does it on the shared traces). Lines are built
column by column with pyarrow compute kernels (string escaping included): no Python per record.
"""
from __future__ import annotations

import json
import os
import sys

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["JsonLinesWriter", "format_jsonl", "json_strings"]

_CONTROL = "[\\x00-\\x1f]"


def json_strings(arr: pa.Array) -> pa.Array:
    """Each string as a JSON string literal (quotes, backslash, control characters escaped);
    nulls stay null."""
    a = pc.replace_substring(arr, "\\", "\\\\")
    a = pc.replace_substring(a, '"', '\\"')
    if pc.any(pc.match_substring_regex(a, _CONTROL)).as_py():
        for c in range(32):
            a = pc.replace_substring(a, chr(c), f"\\u{c:04x}")
    return pc.binary_join_element_wise('"', a, '"', "")


def _seconds(arr: pa.Array) -> pa.Array:
    from httpanalyzer.writers import seconds_text

    return seconds_text(arr)


def _iso(arr: pa.Array) -> pa.Array:
    # %S of a nanosecond timestamp prints the 9 decimals; the zone is UTC (schema)
    text = pc.strftime(arr, format="%Y-%m-%dT%H:%M:%SZ")
    return pc.binary_join_element_wise('"', text, '"', "")


def _value_text(col: pa.Array) -> pa.Array:
    """JSON text of one column, null where the value is null."""
    t = col.type
    if pa.types.is_dictionary(t):
        col = col.cast(t.value_type)
        t = t.value_type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return json_strings(col)
    if pa.types.is_timestamp(t):
        return _iso(col)
    if pa.types.is_duration(t):
        return _seconds(col)
    if pa.types.is_boolean(t):
        return pc.if_else(col, "true", "false")
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return col.cast(pa.string())
    raise TypeError(f"JSON lines: no rule for a column of type {t}")


def format_jsonl(batch: pa.RecordBatch) -> bytes:
    """One batch as JSON lines (each line ends with '\\n')."""
    if batch.num_rows == 0:
        return b""
    parts = []
    for i, name in enumerate(batch.schema.names):
        parts.append(("{" if i == 0 else ",") + json.dumps(name) + ":")
        parts.append(pc.fill_null(_value_text(batch.column(i)), "null"))
    parts.append("}\n")
    line = pc.binary_join_element_wise(*parts, "")
    return _text_bytes(line)


def _text_bytes(line: pa.Array) -> bytes:
    """The concatenated values of a string array (its data buffer between the first and last
    offsets)."""
    line = line.combine_chunks() if isinstance(line, pa.ChunkedArray) else line
    offs = line.buffers()[1]
    start = pa.Array.from_buffers(pa.int32(), 1, [None, offs], offset=line.offset)[0].as_py()
    end = pa.Array.from_buffers(pa.int32(), 1, [None, offs], offset=line.offset + len(line))[0].as_py()
    return line.buffers()[2].to_pybytes()[start:end]


class JsonLinesWriter:
    """JSON lines to a path or a binary file object (stdout by default)."""

    def __init__(self, out=None):
        self._own = isinstance(out, (str, os.PathLike))
        self.f = open(out, "wb") if self._own else (out or sys.stdout.buffer)

    def write(self, batch: pa.RecordBatch) -> None:
        self.f.write(format_jsonl(batch))

    def close(self) -> None:
        if self._own:
            self.f.close()
        else:
            self.f.flush()
