"""The line-format writer of the extension table (webtap.clikit.OUTPUTS) and what every writer
shares; the CSV and Parquet sinks are webtap.csvsink and webtap.parquetsink (pyarrow's writers,
imported at their top and loaded by the extension table only for their output).

Each writer takes Arrow record batches of any schema; no Python per record. The line format is
written by C over the Arrow buffers (ext/out/textout.pyx). pyarrow's core stands at the top
(never pyarrow.compute, whose first call imports pandas: ~0.2 s): this module is loaded by the
extension table for the first batch of a line output, and by the other sinks and record kinds,
which hold pyarrow already; a run that ends without records (a header-only trace) builds no
writer (webtap.clikit.Output) and so never loads it (start-up, issues 21 and 29).

Line format: one record per line, fields separated by ``|``. So that every line has exactly as
many fields as the view has columns, a field's text is escaped:

    backslash -> ``\\\\``   ``|`` -> ``\\x7c``   CR -> ``\\r``   LF -> ``\\n``
    other control characters (U+0000-U+001F, U+007F-U+009F) -> ``\\xHH``,
    U+2028 / U+2029 (line separators to some readers) -> ``\\u2028`` / ``\\u2029``

A missing value (null) is an empty field; integers are decimal, booleans ``true`` / ``false``,
timestamps and durations (ns) decimal seconds with 9 decimals. Reading a file back (and undoing
the escaping): webtap.linereader.
"""
from __future__ import annotations

import pyarrow as pa

from webtap._ext import textout

__all__ = ["LineWriter", "format_lines", "text_columns", "batches_of", "empty_batch_of"]


def text_columns(batch, style: str = "lines") -> list:
    """The batch's columns as webtap._ext.textout writes them in `style` ("lines", "jsonl",
    "zeek"): a dictionary column decoded; in JSON lines and Zeek logs a time in another unit
    than ns converted to ns; a column of a type without a rule cast to text (lines, Zeek) or
    refused with TypeError (JSON). The conversions use pyarrow.compute, only for such a column
    (the tools' records have none)."""
    cols = []
    for c in batch.columns:
        t = c.type
        if pa.types.is_dictionary(t):
            c, t = c.cast(t.value_type), t.value_type
        if style != "lines" and (pa.types.is_timestamp(t) or pa.types.is_duration(t)) \
                and t.unit != "ns":
            c = c.cast(pa.timestamp("ns", t.tz) if pa.types.is_timestamp(t) else pa.duration("ns"))
        elif not textout.supported(t, style):
            if style == "jsonl":
                raise TypeError(f"JSON lines: no rule for a column of type {t}")
            c = c.cast(pa.string())
        cols.append(c)
    return cols


def format_lines(batch) -> bytes:
    """Every column of `batch` as text, escaped, joined by '|'; one line per row. Strings,
    integers, booleans, timestamps and durations (ns: decimal seconds, 9 decimals) are written
    by C over the Arrow buffers (webtap._ext.textout: no pyarrow.compute, so no pandas
    import); a column of another type is cast to text first."""
    if batch.num_rows == 0:
        return b""
    return textout.format_lines(text_columns(batch))


def empty_batch_of(schema):
    """A RecordBatch of `schema` without rows. From pa.nulls: schema.empty_table(),
    RecordBatch.from_pylist and pa.array([]) import pandas in pyarrow 26 (~0.2-0.3 s, ~40 MB) to
    check for its types, in a run that found nothing to write."""
    return pa.RecordBatch.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)


def batches_of(data):
    """The record batches of a Table, or [data] for one batch (every writer's write() takes both)."""
    return data.to_batches() if hasattr(data, "to_batches") else [data]


class LineWriter:
    """The line format (module docstring)."""

    def __init__(self, f, schema=None):
        self.f = f
        self.schema = schema
        self.started = False
        self.buf = bytearray()         # one output buffer for every batch (no fresh pages)

    def _header(self, schema) -> None:
        """A first line of the field names when the view asks for it (schema metadata
        webtap.header_line: `--fields`), once."""
        if not self.started:
            self.started = True
            if schema is not None and (schema.metadata or {}).get(b"webtap.header_line") == b"1":
                self.f.write(("|".join(schema.names) + "\n").encode())

    def write(self, data) -> None:
        for b in batches_of(data):
            self._header(b.schema)
            if b.num_rows:
                n = textout.format_lines(text_columns(b), self.buf)
                with memoryview(self.buf) as m, m[:n] as part:
                    self.f.write(part)

    def close(self, meta: dict) -> None:
        self._header(self.schema)
        self.f.flush()
