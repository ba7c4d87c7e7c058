"""Zeek log output (`-o OUT.log`, webtap.clikit.OUTPUTS): Zeek's ASCII log layout, readable by
zeek-cut, zat and the SIEM parsers of Zeek logs.

The writer prints the header lines ``#separator \\x09``, ``#set_separator ,``,
``#empty_field (empty)``, ``#unset_field -``, ``#path <path>``, ``#open <time>``, ``#fields``
and ``#types``; one tab-separated row per record; ``#close <time>`` at the end. Which columns a
log has is the tool's view (httpanalyzer.zeek: http.log); this module only formats:

* the log's name (``#path``) comes from the schema's metadata ``zeek_path`` (default "webtap"),
  a column's Zeek type from its field metadata ``zeek_type``, else from its Arrow type
  (timestamp: time, duration: interval, bool, unsigned: count, signed: int, float: double,
  text: string);
* time and interval values are seconds with 9 decimals (exact nanoseconds; a view that wants
  Zeek's 6 gives text), booleans ``T`` / ``F``, lists as Zeek vectors (elements joined by ``,``,
  a ``,`` inside one escaped, an empty list ``(empty)``), a null value is unset (``-``);
* text: empty is ``(empty)``; tab, newline and the other control bytes, the backslash, and a
  value that would read as ``-`` or ``(empty)`` are escaped as ``\\xNN`` (Zeek's rule). ``#``
  and ``"`` are escaped the same way: zat reads logs with pandas' CSV reader, for which ``#``
  starts a comment anywhere in a line and a leading ``"`` a quoted field.

Rows are built column by column with pyarrow compute kernels: no Python per record.
"""
from __future__ import annotations

import time

import pyarrow as pa
import pyarrow.compute as pc

from webtap.arrowtext import seconds_text, text_bytes

__all__ = ["ZeekLogWriter", "format_rows", "header_lines", "escape", "zeek_type"]

_ESCAPE_ALWAYS = "\\#\""                    # the backslash first: later escapes add some
_CONTROL = "[\\x00-\\x1f\\x7f]"


def zeek_type(field: pa.Field) -> str:
    md = field.metadata or {}
    if b"zeek_type" in md:
        return md[b"zeek_type"].decode()
    t = field.type
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_timestamp(t):
        return "time"
    if pa.types.is_duration(t):
        return "interval"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_unsigned_integer(t):
        return "count"
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "double"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"vector[{zeek_type(pa.field('', t.value_type))}]"
    return "string"


def escape(arr) -> pa.Array:
    """Zeek's escaping of text values (module docstring); nulls stay null."""
    a = arr
    for ch in _ESCAPE_ALWAYS:
        a = pc.replace_substring(a, ch, f"\\x{ord(ch):02x}")
    if pc.any(pc.match_substring_regex(a, _CONTROL)).as_py():
        for c in list(range(32)) + [127]:
            a = pc.replace_substring(a, chr(c), f"\\x{c:02x}")
    a = pc.if_else(pc.equal(a, "-"), "\\x2d", a)
    a = pc.if_else(pc.equal(a, "(empty)"), "\\x28empty)", a)
    return pc.if_else(pc.equal(a, ""), "(empty)", a)


def _text(col) -> pa.Array:
    t = col.type
    if pa.types.is_dictionary(t):
        col = col.cast(t.value_type)
        t = t.value_type
    if pa.types.is_null(t):
        return pa.nulls(len(col), pa.string())
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return escape(col)
    if pa.types.is_timestamp(t) or pa.types.is_duration(t):
        return seconds_text(col)
    if pa.types.is_boolean(t):
        return pc.if_else(col, "T", "F")
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        # Zeek's vector/set: elements (escaped, ',' too) joined by the set separator
        col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        flat = pc.replace_substring(_text(col.values), ",", "\\x2c")
        lists = type(col).from_arrays(col.offsets, pc.fill_null(flat, "-"), mask=col.is_null())
        joined = pc.binary_join(lists, ",")
        return pc.if_else(pc.equal(joined, ""), "(empty)", joined)
    return col.cast(pa.string())


def _stamp(t: float | None = None) -> str:
    return time.strftime("%Y-%m-%d-%H-%M-%S", time.gmtime(time.time() if t is None else t))


def header_lines(schema: pa.Schema, opened: float | None = None) -> bytes:
    md = schema.metadata or {}
    path = md.get(b"zeek_path", b"webtap").decode()
    lines = ["#separator \\x09", "#set_separator\t,", "#empty_field\t(empty)", "#unset_field\t-",
             f"#path\t{path}", f"#open\t{_stamp(opened)}",
             "#fields\t" + "\t".join(schema.names),
             "#types\t" + "\t".join(zeek_type(f) for f in schema)]
    return ("\n".join(lines) + "\n").encode()


def format_rows(batch: pa.RecordBatch) -> bytes:
    """The batch as tab-separated rows (each ends with '\\n')."""
    if batch.num_rows == 0:
        return b""
    parts = [_text(batch.column(i)) for i in range(batch.num_columns)]
    line = pc.binary_join_element_wise(*parts, "\t", null_handling="replace", null_replacement="-")
    return text_bytes(pc.binary_join_element_wise(line, "\n", ""))


class ZeekLogWriter:
    """A Zeek log to a binary file object (the writer interface of webtap.clikit). The header
    is written with the first batch (or at close from `schema` when there was none)."""

    def __init__(self, f, schema=None):
        self.f = f
        self.schema = schema
        self.started = False

    def write(self, data) -> None:
        for b in data.to_batches() if isinstance(data, pa.Table) else [data]:
            if not self.started:
                self.f.write(header_lines(b.schema))
                self.started = True
            self.f.write(format_rows(b))

    def close(self, meta: dict | None = None) -> None:
        if not self.started and self.schema is not None:
            self.f.write(header_lines(self.schema))
            self.started = True
        self.f.write(f"#close\t{_stamp()}\n".encode())
        self.f.flush()
