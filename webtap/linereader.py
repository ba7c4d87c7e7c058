"""The line format (webtap.writers, docs/CLI.md) read back: :func:`unescape` undoes the escaping of
one field and :func:`read_lines` reads a file into string columns.

For users and tests, never on a command's run path: pyarrow.compute at the top (its first call
imports pandas, ~0.2 s), which a run that writes lines must not load (issue 21); so the writer
(webtap.writers) and this reader are two modules (issue 29: imports at the top)."""
from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["unescape", "read_lines"]

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
