"""Text of Arrow columns for the record writers (webtap.jsonl, webtap.zeeklog): exact decimal
seconds from nanosecond timestamps/durations, and the bytes of a whole string array. Vectorised
(pyarrow compute); no Python per value."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["seconds_text", "text_bytes"]


def seconds_text(arr, decimals: int = 9) -> pa.Array:
    """Exact decimal seconds from a timestamp/duration (ns) array, `decimals` (1-9) digits after
    the point (cut, not rounded, below 9); nulls stay null."""
    ns = arr.cast(pa.int64())
    neg = pc.less(ns, 0)
    mag = pc.abs(ns)
    secs = pc.divide(mag, 1_000_000_000)
    frac = pc.subtract(mag, pc.multiply(secs, 1_000_000_000))
    frac = pc.utf8_lpad(frac.cast(pa.string()), 9, "0")
    if decimals < 9:
        frac = pc.utf8_slice_codeunits(frac, 0, decimals)
    text = pc.binary_join_element_wise(secs.cast(pa.string()), frac, ".")
    return pc.if_else(neg, pc.binary_join_element_wise("-", text, ""), text)


def text_bytes(line) -> bytes:
    """The values of a string array back to back (its data buffer between the first and the
    last offset)."""
    line = line.combine_chunks() if isinstance(line, pa.ChunkedArray) else line
    offs = line.buffers()[1]
    start = pa.Array.from_buffers(pa.int32(), 1, [None, offs], offset=line.offset)[0].as_py()
    end = pa.Array.from_buffers(pa.int32(), 1, [None, offs], offset=line.offset + len(line))[0].as_py()
    return line.buffers()[2].to_pybytes()[start:end]
