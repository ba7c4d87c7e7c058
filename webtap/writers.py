"""The line-format writer of the extension table (webtap.clikit.OUTPUTS) and what every writer
shares; the CSV and Parquet sinks are webtap.csvsink and webtap.parquetsink (pyarrow's writers,
imported at their top and loaded by the extension table only for their output).

Each writer takes Arrow record batches of any schema; no Python per record. The line format is
written by C over the Arrow buffers (ext/out/textout.pyx). This module imports pyarrow's core
only, inside the functions that need it (pyarrow.compute would import pandas on its first call:
~0.2 s): the CLI imports it before the first packet, and a line output needs pyarrow only once
records exist (start-up, issue 21).

Line format: one record per line, fields separated by ``|``. So that every line has exactly as
many fields as the view has columns, a field's text is escaped:

    backslash -> ``\\\\``   ``|`` -> ``\\x7c``   CR -> ``\\r``   LF -> ``\\n``
    other control characters (U+0000-U+001F, U+007F-U+009F) -> ``\\xHH``,
    U+2028 / U+2029 (line separators to some readers) -> ``\\u2028`` / ``\\u2029``

A missing value (null) is an empty field; integers are decimal, booleans ``true`` / ``false``,
timestamps and durations (ns) decimal seconds with 9 decimals.
:func:`unescape` undoes the escaping of one field and :func:`read_lines` reads a file back into
string columns.
"""
from __future__ import annotations

import re

from webtap._ext import textout

# pyarrow is imported by the functions that need it, not here: the CLI builds its writer before
# the first packet, and a line output needs pyarrow only once records exist (start-up, issue 21).

__all__ = ["LineWriter", "unescape", "read_lines", "format_lines", "text_columns", "batches_of",
           "empty_batch_of"]

_UNESCAPE = re.compile(r"\\(\\|r|n|x[0-9a-f]{2}|u[0-9a-f]{4})")


def _unesc(m: re.Match) -> str:
    s = m.group(1)
    if s == "\\":
        return "\\"
    if s == "r":
        return "\r"
    if s == "n":
        return "\n"
    return chr(int(s[1:], 16))


def unescape(field: str) -> str:
    """One field of the line format back to its text."""
    return _UNESCAPE.sub(_unesc, field) if "\\" in field else field


def read_lines(source, names):
    """Read a line-format file (path or binary file object) into a table of string columns
    `names` (nulls where a field is empty). Raises ValueError for a line with another number of
    fields than len(names)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(source, (str, bytes)) or hasattr(source, "__fspath__"):
        with open(source, "rb") as f:
            data = f.read()
    else:
        data = source.read()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    arr = pa.array(lines, pa.binary()).cast(pa.string())
    parts = pc.split_pattern(arr, "|")
    n = pc.list_value_length(parts)
    bad = pc.not_equal(n, len(names))
    if pc.any(bad).as_py():
        i = pc.index(bad, True).as_py()
        raise ValueError(f"line {i + 1} has {n[i].as_py()} fields, not {len(names)}")
    cols = {}
    for j, name in enumerate(names):
        col = pc.list_element(parts, j)
        needs = pc.match_substring(col, "\\")
        if pc.any(needs).as_py():
            col = pa.array([unescape(v) for v in col.to_pylist()], pa.string())
        cols[name] = pc.if_else(pc.equal(col, ""), pa.scalar(None, pa.string()), col)
    return pa.table(cols) if names else pa.table({})


def text_columns(batch, style: str = "lines") -> list:
    """The batch's columns as webtap._ext.textout writes them in `style` ("lines", "jsonl",
    "zeek"): a dictionary column decoded; in JSON lines and Zeek logs a time in another unit
    than ns converted to ns; a column of a type without a rule cast to text (lines, Zeek) or
    refused with TypeError (JSON). The conversions use pyarrow.compute, only for such a column
    (the tools' records have none)."""
    import pyarrow as pa

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
    import pyarrow as pa

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
