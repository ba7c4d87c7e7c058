"""The paper's line format (httpanalyzer.writers.line_view, docs/CLI.md) for a library user:
:func:`format_lines` writes a batch of HTTP records as bytes, :func:`read_lines` reads a file
back as a table of the 13 fields.

pyarrow at the top (and, through webtap.linereader, pyarrow.compute): no command's run imports
this module; the commands write lines through the extension table (webtap.clikit.OUTPUTS,
webtap.writers.LineWriter) with httpanalyzer.writers' views (issue 29: imports at the top)."""
from __future__ import annotations

import pyarrow as pa

from httpanalyzer.writers import LINE_FIELDS, line_view
from webtap import linereader
from webtap import writers as _w

__all__ = ["LINE_FIELDS", "format_lines", "read_lines"]


def format_lines(batch) -> bytes:
    """The paper's line format for one batch, as bytes (each line ends with '\\n')."""
    return _w.format_lines(line_view(batch))


def read_lines(source):
    """A line-format file (path or binary file object) back as a table of the 13 fields, text
    unescaped; ports and status as integers, times as text (seconds, 9 decimals); empty
    fields are nulls."""
    t = linereader.read_lines(source, LINE_FIELDS)
    for n, typ in (("client_port", pa.uint16()), ("server_port", pa.uint16()),
                   ("status", pa.uint16())):
        i = t.schema.get_field_index(n)
        t = t.set_column(i, n, t.column(n).cast(typ))
    return t
