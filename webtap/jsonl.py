"""JSON lines output (`-o OUT.jsonl`, webtap.clikit.OUTPUTS): one JSON object per record, one
record per line, with the record's column names as keys (every key on every line; a value that
does not exist is null). Any schema: HTTP records, TLS records, URL filter outputs.

JSON has strings, numbers, booleans and null; the other types are written as:

* timestamps (request_ts, response_ts, ...): ISO 8601 UTC text with nanoseconds, "2014-03-04T22:11:25.123456789Z"
  (exact; pandas: ``pd.to_datetime(df.request_ts)``; Elasticsearch: a ``date_nanos`` field).
* durations (response_time): a number of seconds with 9 decimals, e.g. 0.023004000 (exact as text; as a
  float64 it rounds back to the same nanoseconds: ``(df.response_time * 1e9).round()``).
* integers (ports, status, frame indexes, ...): JSON integers; booleans: true / false; lists
  (the TLS records' ALPN, cipher suites, ...): JSON arrays.

``pandas.read_json(path, lines=True)`` gives back the Parquet output's records with those
conversions (tests/outputs/test_writers_readers.py does it on the shared traces). Lines are built
column by column with pyarrow compute kernels (string escaping included): no Python per record.
"""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc

from webtap.arrowtext import seconds_text, text_bytes

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
        return seconds_text(col)
    if pa.types.is_boolean(t):
        return pc.if_else(col, "true", "false")
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return col.cast(pa.string())
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _list_text(col)
    raise TypeError(f"JSON lines: no rule for a column of type {t}")


def _list_text(col) -> pa.Array:
    """A list column as JSON arrays (elements by the same rules); a null list stays null."""
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    flat = pc.fill_null(_value_text(col.values), "null")
    lists = type(col).from_arrays(col.offsets, flat, mask=col.is_null())
    return pc.binary_join_element_wise("[", pc.binary_join(lists, ","), "]", "")


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
    return text_bytes(line)


class JsonLinesWriter:
    """JSON lines to a binary file object (the writer interface of webtap.clikit: the CLI layer
    owns the file and its atomic placement)."""

    def __init__(self, f, schema=None):
        self.f = f

    def write(self, data) -> None:
        for b in data.to_batches() if isinstance(data, pa.Table) else [data]:
            self.f.write(format_jsonl(b))

    def close(self, meta: dict | None = None) -> None:
        self.f.flush()
