"""Zeek log output (`-o OUT.log`): the records as Zeek's http.log, readable by zeek-cut, zat and
every SIEM parser of Zeek's ASCII logs.

Layout (Zeek's ASCII writer): the header lines ``#separator \\x09``, ``#set_separator ,``,
``#empty_field (empty)``, ``#unset_field -``, ``#path http``, ``#open <time>``, ``#fields`` and
``#types``; one tab-separated row per record; ``#close <time>`` at the end. Zeek's http.log
columns come first, in Zeek's order and with Zeek's types; a column webtap has no value for is
unset (``-``):

======================  =====================================================================
Zeek column             webtap
======================  =====================================================================
ts                      request_ts (response_ts for a response-only record), 6 decimals
uid                     unset (Zeek's connection uid; join on community_id instead)
id.orig_h / id.orig_p   client_ip / client_port
id.resp_h / id.resp_p   server_ip / server_port
trans_depth             unset (webtap does not follow the connection)
method, host, uri       method, host, uri
referrer                request_referer when ``--headers Referer`` chose it (unset when absent)
version                 unset
user_agent              user_agent
origin                  request_origin when ``--headers Origin`` chose it, else unset
status_code/status_msg  status / reason
the others              unset (bodies, files, MIME sniffing, credentials: not in first packets)
======================  =====================================================================

Then webtap's own columns, with their record names: response_time (``interval``), request_ts and
response_ts (``time``, 9 decimals: exact), community_id, the flags, the chosen headers, ...

Values: empty text is ``(empty)``; tab, newline and other control bytes, the backslash, and a
value that would read as ``-`` or ``(empty)`` are escaped as ``\\xNN`` (Zeek's rule). ``#`` and
``"`` are escaped the same way: zat reads logs with pandas' CSV reader, for which ``#`` starts a
comment anywhere and a leading ``"`` a quoted field. Rows are built column by column with pyarrow
compute kernels: no Python per record.
"""
from __future__ import annotations

import os
import sys
import time

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["ZeekLogWriter", "format_rows", "header_lines", "HTTP_FIELDS"]

#: Zeek's http.log columns and types (Zeek 6 base/protocols/http/main.zeek, default fields)
HTTP_FIELDS = (
    ("ts", "time"), ("uid", "string"), ("id.orig_h", "addr"), ("id.orig_p", "port"),
    ("id.resp_h", "addr"), ("id.resp_p", "port"), ("trans_depth", "count"),
    ("method", "string"), ("host", "string"), ("uri", "string"), ("referrer", "string"),
    ("version", "string"), ("user_agent", "string"), ("origin", "string"),
    ("request_body_len", "count"), ("response_body_len", "count"), ("status_code", "count"),
    ("status_msg", "string"), ("info_code", "count"), ("info_msg", "string"),
    ("tags", "set[enum]"), ("username", "string"), ("password", "string"),
    ("proxied", "set[string]"), ("orig_fuids", "vector[string]"),
    ("orig_filenames", "vector[string]"), ("orig_mime_types", "vector[string]"),
    ("resp_fuids", "vector[string]"), ("resp_filenames", "vector[string]"),
    ("resp_mime_types", "vector[string]"),
)

#: Zeek column -> record column (ts is computed)
_FROM_RECORD = {"id.orig_h": "client_ip", "id.orig_p": "client_port", "id.resp_h": "server_ip",
                "id.resp_p": "server_port", "method": "method", "host": "host", "uri": "uri",
                "referrer": "request_referer", "user_agent": "user_agent",
                "origin": "request_origin", "status_code": "status", "status_msg": "reason"}

_ESCAPE_ALWAYS = "\\#\""
_CONTROL = "[\\x00-\\x1f\\x7f]"


def _zeek_type(t: pa.DataType) -> str:
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
    return "string"


def escape(arr: pa.Array) -> pa.Array:
    """Zeek's escaping of string values (see the module docstring); nulls stay null."""
    a = arr
    for ch in _ESCAPE_ALWAYS:                 # the backslash first: later escapes add some
        a = pc.replace_substring(a, ch, f"\\x{ord(ch):02x}")
    if pc.any(pc.match_substring_regex(a, _CONTROL)).as_py():
        for c in list(range(32)) + [127]:
            a = pc.replace_substring(a, chr(c), f"\\x{c:02x}")
    a = pc.if_else(pc.equal(a, "-"), "\\x2d", a)
    a = pc.if_else(pc.equal(a, "(empty)"), "\\x28empty)", a)
    return pc.if_else(pc.equal(a, ""), "(empty)", a)


def _seconds(arr: pa.Array, decimals: int) -> pa.Array:
    from httpanalyzer.writers import seconds_text

    text = seconds_text(arr)
    return text if decimals == 9 else pc.utf8_slice_codeunits(text, 0, decimals - 9)


def _text(col: pa.Array) -> pa.Array:
    t = col.type
    if pa.types.is_dictionary(t):
        col = col.cast(t.value_type)
        t = t.value_type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return escape(col)
    if pa.types.is_timestamp(t) or pa.types.is_duration(t):
        return _seconds(col, 9)
    if pa.types.is_boolean(t):
        return pc.if_else(col, "T", "F")
    return col.cast(pa.string())


def columns(schema: pa.Schema) -> list[tuple[str, str]]:
    """(name, Zeek type) of every column the log has for records of this schema."""
    used = set(v for k, v in _FROM_RECORD.items())
    own = [(f.name, _zeek_type(f.type)) for f in schema if f.name not in used]
    return list(HTTP_FIELDS) + own


def header_lines(schema: pa.Schema, path: str = "http", opened: float | None = None) -> bytes:
    cols = columns(schema)
    stamp = time.strftime("%Y-%m-%d-%H-%M-%S", time.gmtime(opened if opened is not None else time.time()))
    lines = ["#separator \\x09", "#set_separator\t,", "#empty_field\t(empty)", "#unset_field\t-",
             f"#path\t{path}", f"#open\t{stamp}",
             "#fields\t" + "\t".join(n for n, _ in cols), "#types\t" + "\t".join(t for _, t in cols)]
    return ("\n".join(lines) + "\n").encode()


def format_rows(batch: pa.RecordBatch) -> bytes:
    """The batch as tab-separated http.log rows (each ends with '\\n')."""
    if batch.num_rows == 0:
        return b""
    names = set(batch.schema.names)
    parts = []
    for zname, _ in HTTP_FIELDS:
        if zname == "ts":
            ts = pc.coalesce(batch.column("request_ts"), batch.column("response_ts"))
            parts.append(_seconds(ts, 6))
        elif _FROM_RECORD.get(zname) in names:
            col = batch.column(_FROM_RECORD[zname])
            if zname in ("referrer", "origin"):          # absent header: unset, as Zeek has it
                col = pc.if_else(pc.equal(col, ""), pa.scalar(None, pa.string()), col)
            parts.append(_text(col))
        else:
            parts.append(pa.nulls(batch.num_rows, pa.string()))
    used = set(_FROM_RECORD.values())
    for f in batch.schema:
        if f.name not in used:
            parts.append(_text(batch.column(f.name)))
    line = pc.binary_join_element_wise(*parts, "\t", null_handling="replace", null_replacement="-")
    line = pc.binary_join_element_wise(line, "\n", "")
    from httpanalyzer.jsonl import _text_bytes

    return _text_bytes(line)


class ZeekLogWriter:
    """http.log to a path or a binary file object (stdout by default). The header is written
    with the first batch (its schema decides webtap's columns); ``#close`` on close()."""

    def __init__(self, out=None, path: str = "http"):
        self._own = isinstance(out, (str, os.PathLike))
        self.f = open(out, "wb") if self._own else (out or sys.stdout.buffer)
        self.path = path
        self.schema = None

    def write(self, batch: pa.RecordBatch) -> None:
        if self.schema is None:
            self.schema = batch.schema
            self.f.write(header_lines(batch.schema, self.path))
        self.f.write(format_rows(batch))

    def close(self) -> None:
        if self.schema is None:
            from httpanalyzer import records

            self.write(records.empty_batch())
        stamp = time.strftime("%Y-%m-%d-%H-%M-%S", time.gmtime())
        self.f.write(f"#close\t{stamp}\n".encode())
        if self._own:
            self.f.close()
        else:
            self.f.flush()
