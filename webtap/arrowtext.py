"""Text of Arrow columns for the record writers (webtap.jsonl, webtap.zeeklog): exact decimal
seconds from nanosecond timestamps/durations, and the bytes of a whole string array. No Python per value."""
from __future__ import annotations

import pyarrow as pa

from webtap._ext.textout import seconds_text

__all__ = ["seconds_text", "text_bytes"]


# seconds_text(arr, decimals=9): exact decimal seconds from a timestamp/duration (ns) array,
# `decimals` (1-9) digits after the point (cut, not rounded, below 9); nulls stay null. Written
# by C (ext/textout.pyx), one implementation for every writer.


def text_bytes(line) -> bytes:
    """The values of a string array back to back (its data buffer between the first and the
    last offset)."""
    line = line.combine_chunks() if isinstance(line, pa.ChunkedArray) else line
    offs = line.buffers()[1]
    start = pa.Array.from_buffers(pa.int32(), 1, [None, offs], offset=line.offset)[0].as_py()
    end = pa.Array.from_buffers(pa.int32(), 1, [None, offs], offset=line.offset + len(line))[0].as_py()
    return line.buffers()[2].to_pybytes()[start:end]
