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
conversions (tests/outputs/test_writers_readers.py does it on the shared traces).

Strings are escaped as RFC 8259 asks and no more: ``\\\\``, ``\\"``, and ``\\u00XX`` (lower-case
hex) for U+0000-U+001F; other text, DEL and non-ASCII included, is written as it is (UTF-8).
Floats as pyarrow's cast to string writes them (``0.023004``, ``1e-7``). Lines are written by C
over the Arrow buffers (webtap._ext.textout.format_jsonl, where these rules live): no Python per
record, and no pyarrow.compute (whose first call imports pandas: ~0.2 s and ~40 MB a run).
"""
from __future__ import annotations

import json

from webtap._ext import textout
from webtap.writers import batches_of, text_columns

# pyarrow is imported by the functions that use it: the CLI layer imports this module when the
# output is chosen, before the first packet (start-up, issue 21).

__all__ = ["JsonLinesWriter", "format_jsonl"]


def _keys(schema) -> list:
    return [json.dumps(name).encode() for name in schema.names]


def format_jsonl(batch) -> bytes:
    """One batch as JSON lines (each line ends with '\\n')."""
    if batch.num_rows == 0:
        return b""
    return textout.format_jsonl(text_columns(batch, "jsonl"), _keys(batch.schema))


class JsonLinesWriter:
    """JSON lines to a binary file object (the writer interface of webtap.clikit: the CLI layer
    owns the file and its atomic placement)."""

    def __init__(self, f, schema=None):
        self.f = f
        self.buf = bytearray()         # one output buffer for every batch (no fresh pages)

    def write(self, data) -> None:
        for b in batches_of(data):
            if b.num_rows:
                n = textout.format_jsonl(text_columns(b, "jsonl"), _keys(b.schema), self.buf)
                with memoryview(self.buf) as m, m[:n] as part:
                    self.f.write(part)

    def close(self, meta: dict | None = None) -> None:
        self.f.flush()
