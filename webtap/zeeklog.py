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

Rows are written by C over the Arrow buffers (webtap._ext.textout.format_zeek, where the
escaping rules above live): no Python per record, and no pyarrow.compute (whose first call
imports pandas: ~0.2 s and ~40 MB a run).
"""
from __future__ import annotations

import time

import pyarrow as pa

from webtap._ext import textout
from webtap.writers import batches_of, text_columns

# pyarrow at the top: the extension table (webtap.clikit.OUTPUTS) loads this module only for a
# Zeek log output, whose header already needs the records' schema (issue 29).

__all__ = ["ZeekLogWriter", "format_rows", "header_lines", "escape", "zeek_type"]


def zeek_type(field) -> str:
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


def escape(arr):
    """Zeek's escaping of text values (module docstring), as a string array; nulls stay null."""
    return textout.text_array(arr, "zeek")


def _stamp(t: float | None = None) -> str:
    return time.strftime("%Y-%m-%d-%H-%M-%S", time.gmtime(time.time() if t is None else t))


def header_lines(schema, opened: float | None = None) -> bytes:
    md = schema.metadata or {}
    path = md.get(b"zeek_path", b"webtap").decode()
    lines = ["#separator \\x09", "#set_separator\t,", "#empty_field\t(empty)", "#unset_field\t-",
             f"#path\t{path}", f"#open\t{_stamp(opened)}",
             "#fields\t" + "\t".join(schema.names),
             "#types\t" + "\t".join(zeek_type(f) for f in schema)]
    return ("\n".join(lines) + "\n").encode()


def format_rows(batch) -> bytes:
    """The batch as tab-separated rows (each ends with '\\n')."""
    if batch.num_rows == 0:
        return b""
    return textout.format_zeek(text_columns(batch, "zeek"))


class ZeekLogWriter:
    """A Zeek log to a binary file object (the writer interface of webtap.clikit). The header
    is written with the first batch (or at close from `schema` when there was none)."""

    def __init__(self, f, schema=None):
        self.f = f
        self.schema = schema
        self.started = False
        self.buf = bytearray()         # one output buffer for every batch (no fresh pages)

    def write(self, data) -> None:
        for b in batches_of(data):
            if not self.started:
                self.f.write(header_lines(b.schema))
                self.started = True
            if b.num_rows:
                n = textout.format_zeek(text_columns(b, "zeek"), self.buf)
                with memoryview(self.buf) as m, m[:n] as part:
                    self.f.write(part)

    def close(self, meta: dict | None = None) -> None:
        if not self.started and self.schema is not None:
            self.f.write(header_lines(self.schema))
            self.started = True
        self.f.write(f"#close\t{_stamp()}\n".encode())
        self.f.flush()
