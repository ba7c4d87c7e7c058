"""The column-builder kit of every record kind: Arrow arrays made from numpy buffers with one
pyarrow call each (pa.array() over Python objects would import pandas, ~0.3 s, and cost a
Python object per value; a cast or dictionary encode would import pyarrow.compute, ~40 ms)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from webtap._ext.textout import copy_spans

__all__ = ["take_rows", "bitmap", "num", "boolean", "strings", "gather", "gather_bytes", "concat_bytes",
           "text_column", "texts", "fixed_text", "string_list", "u16_list", "hex16", "Codes", "call",
           "valid_mask", "string_parts", "take_lists", "take_strings", "take_string_lists"]


def take_rows(records: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """records[idx] for a structured array, as whole rows: a take over the rows as opaque bytes
    (one copy per row) instead of numpy's field-by-field copy of a structured dtype (the 25,778
    exchange records of 104 bytes of the TLS bench trace: 2.9 -> 0.2 ms)."""
    rows = np.dtype((np.void, records.dtype.itemsize))
    return np.ascontiguousarray(records).view(rows)[idx].view(records.dtype)


def bitmap(valid, n: int):
    """(Arrow validity buffer or None, null count) of a boolean mask (None: all valid)."""
    if valid is None:
        return None, 0
    valid = np.asarray(valid, dtype=bool)
    nulls = int(n - np.count_nonzero(valid))
    return (pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None), nulls


def num(values: np.ndarray, typ: pa.DataType | None = None, valid=None) -> pa.Array:
    """A primitive column over a numpy column (typ: its Arrow type, default from the dtype)."""
    v = np.ascontiguousarray(values)
    bits, nulls = bitmap(valid, len(v))
    return pa.Array.from_buffers(typ or pa.from_numpy_dtype(v.dtype), len(v),
                                 [bits, pa.py_buffer(v)], null_count=nulls)


def boolean(values: np.ndarray, valid=None) -> pa.Array:
    v = np.asarray(values, dtype=bool)
    bits, nulls = bitmap(valid, len(v))
    return pa.Array.from_buffers(pa.bool_(), len(v),
                                 [bits, pa.py_buffer(np.packbits(v, bitorder="little"))],
                                 null_count=nulls)


def strings(offsets: np.ndarray, data: np.ndarray, valid=None, nonempty: bool = False) -> pa.Array:
    """A string column from its Arrow buffers (int32 offsets[n + 1], UTF-8 bytes); null where
    not valid, and where empty if nonempty."""
    n = len(offsets) - 1
    if nonempty:
        full = np.diff(offsets) > 0
        valid = full if valid is None else (np.asarray(valid, dtype=bool) & full)
    bits, nulls = bitmap(valid, n)
    return pa.Array.from_buffers(pa.string(), n, [bits, pa.py_buffer(offsets), pa.py_buffer(data)],
                                 null_count=nulls)


def gather_bytes(offsets: np.ndarray, data: np.ndarray, idx: np.ndarray,
                 valid=None) -> tuple[np.ndarray, np.ndarray]:
    """(int64 offsets, bytes) of the strings idx of the set data[offsets[i]:offsets[i + 1]], in
    that order; rows not valid take no bytes, whatever their idx."""
    offsets = np.asarray(offsets, dtype=np.int64)
    idx = np.asarray(idx, dtype=np.int64)
    n = len(idx)
    if valid is not None:
        valid = np.asarray(valid, dtype=bool)
        idx = np.where(valid, idx, 0)
    if len(offsets) < 2:                        # no strings: every row must be null
        if n and (valid is None or valid.any()):
            raise IndexError("gather from an empty string set")
        return np.zeros(n + 1, np.int64), np.zeros(0, np.uint8)
    start = offsets[idx]
    lens = offsets[idx + 1] - start
    if valid is not None:
        lens = np.where(valid, lens, 0)
    out = np.zeros(n + 1, np.int64)
    np.cumsum(lens, out=out[1:])
    body = np.empty(int(out[-1]), np.uint8)
    copy_spans(np.ascontiguousarray(data, dtype=np.uint8), np.ascontiguousarray(start), out, body)
    return out, body


def gather(offsets: np.ndarray, data: np.ndarray, idx: np.ndarray, valid=None) -> pa.Array:
    """A string column of the strings idx (of the set data[offsets[i]:offsets[i + 1]]), in that
    order; null where not valid. A take without pyarrow.compute."""
    out, body = gather_bytes(offsets, data, idx, valid)
    return text_column(out, body, valid)


def valid_mask(a: pa.Array) -> np.ndarray:
    """An Arrow array's validity as a bool mask, from its bitmap (Array.is_valid would import
    pyarrow.compute)."""
    bm = a.buffers()[0]
    if bm is None or a.null_count == 0:
        return np.ones(len(a), bool)
    bits = np.unpackbits(np.frombuffer(bm, dtype=np.uint8), bitorder="little")
    return bits[a.offset:a.offset + len(a)].astype(bool)


def string_parts(a) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(int64 offsets[n + 1] into data, UTF-8 bytes, validity mask) of a string array or a
    chunked one, read in place from its buffers (a slice's offset honoured)."""
    if isinstance(a, pa.ChunkedArray):
        a = a.combine_chunks() if a.num_chunks else pa.nulls(0, a.type)
    bufs = a.buffers()
    n = len(a)
    if bufs[1] is None:
        offs = np.zeros(n + 1, np.int64)
    else:
        offs = np.frombuffer(bufs[1], np.int32)[a.offset:a.offset + n + 1].astype(np.int64)
    data = np.frombuffer(bufs[2], np.uint8) if len(bufs) > 2 and bufs[2] is not None \
        else np.zeros(0, np.uint8)
    return offs, data, valid_mask(a)


def take_lists(loffs: np.ndarray, idx: np.ndarray, valid=None) -> tuple[np.ndarray, np.ndarray]:
    """(int64 list offsets of the lists idx, in that order; the item indices they hold) from
    int64 list offsets; a row not valid holds no items, whatever its idx."""
    idx = np.asarray(idx, dtype=np.int64)
    if valid is not None:
        idx = np.where(valid, idx, 0)
    if len(loffs) < 2:
        if len(idx) and (valid is None or np.any(valid)):
            raise IndexError("take from an empty list set")
        return np.zeros(len(idx) + 1, np.int64), np.zeros(0, np.int64)
    start = loffs[idx]
    lens = loffs[idx + 1] - start
    if valid is not None:
        lens = np.where(valid, lens, 0)
    out = np.zeros(len(idx) + 1, np.int64)
    np.cumsum(lens, out=out[1:])
    return out, np.repeat(start - out[:-1], lens) + np.arange(out[-1], dtype=np.int64)


def take_strings(a, idx: np.ndarray, valid=None) -> pa.Array:
    """Rows idx of a string array (an Arrow take without pyarrow.compute): null where not
    valid or where the row taken is null."""
    offs, data, ok = string_parts(a)
    v = _taken_valid(ok, idx, valid)
    o, body = gather_bytes(offs, data, idx, v)
    return text_column(o, body, v)


def take_string_lists(a, idx: np.ndarray, valid=None) -> pa.Array:
    """Rows idx of a list<string> array, as take_strings."""
    if isinstance(a, pa.ChunkedArray):
        a = a.combine_chunks() if a.num_chunks else pa.nulls(0, a.type)
    v = _taken_valid(valid_mask(a), idx, valid)
    loffs = np.frombuffer(a.offsets.buffers()[1], np.int32)[a.offset:a.offset + len(a) + 1] \
        .astype(np.int64) if len(a) else np.zeros(1, np.int64)
    lo, which = take_lists(loffs, idx, v)
    ioffs, data, _ = string_parts(a.values)
    io, body = gather_bytes(ioffs, data, which)
    return string_list(lo.astype(np.int32), io.astype(np.int32), body, v)


def _taken_valid(ok: np.ndarray, idx: np.ndarray, valid) -> np.ndarray:
    idx = np.asarray(idx, dtype=np.int64)
    v = np.ones(len(idx), bool) if valid is None else np.asarray(valid, dtype=bool).copy()
    if len(ok) == 0:
        if v.any():
            raise IndexError("take from an empty array")
        return v
    v &= ok[np.where(v, idx, 0)]
    return v


def text_column(offsets: np.ndarray, data: np.ndarray, valid=None) -> pa.Array:
    """strings() over int64 offsets (from gather_bytes / concat_bytes)."""
    if offsets[-1] >= 2**31:                    # pragma: no cover - a 2 GiB batch of text
        raise OverflowError("a string column of 2 GiB or more")
    return strings(np.asarray(offsets).astype(np.int32), data, valid)


def concat_bytes(parts) -> tuple[np.ndarray, np.ndarray]:
    """One (int64 offsets, bytes) string set of several, in order."""
    parts = list(parts)
    if not parts:
        return np.zeros(1, np.int64), np.zeros(0, np.uint8)
    base = np.cumsum([0] + [int(o[-1]) for o, _ in parts[:-1]])
    offs = np.concatenate([parts[0][0][:1]] + [o[1:] + b for (o, _), b in zip(parts, base)])
    return offs.astype(np.int64), np.concatenate([d for _, d in parts])


def texts(items) -> tuple[np.ndarray, np.ndarray]:
    """(int64 offsets, bytes) of a few Python strings (None as empty), for gather()."""
    enc = [(x or "").encode() for x in items]
    offs = np.zeros(len(enc) + 1, np.int64)
    np.cumsum([len(e) for e in enc], out=offs[1:])
    return offs, np.frombuffer(b"".join(enc), np.uint8)


def fixed_text(col: np.ndarray, valid=None, nonempty: bool = False) -> pa.Array:
    """A fixed-width NUL-padded bytes column (numpy S<w>, valid UTF-8 written by C) as strings:
    the bytes before each row's first NUL."""
    n, w = len(col), col.dtype.itemsize
    mat = np.ascontiguousarray(col).view(np.uint8).reshape(n, w)
    nz = mat != 0
    lens = np.where(nz.all(axis=1), w, nz.argmin(axis=1)) if n else np.zeros(0, np.int64)
    offs = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lens, out=offs[1:])
    data = mat[np.arange(w) < lens[:, None]] if n else np.zeros(0, np.uint8)
    return strings(offs, data, valid, nonempty)


def string_list(list_offsets: np.ndarray, item_offsets: np.ndarray, data: np.ndarray,
                valid=None) -> pa.Array:
    """list<string> from its Arrow buffers; null where not valid."""
    values = pa.Array.from_buffers(pa.string(), len(item_offsets) - 1,
                                   [None, pa.py_buffer(item_offsets), pa.py_buffer(data)])
    return _list(list_offsets, values, valid)


def u16_list(list_offsets: np.ndarray, values: np.ndarray, valid=None) -> pa.Array:
    """list<uint16> from its Arrow buffers; null where not valid."""
    return _list(list_offsets, num(values, pa.uint16()), valid)


def _list(list_offsets, values: pa.Array, valid) -> pa.Array:
    n = len(list_offsets) - 1
    bits, nulls = bitmap(valid, n)
    return pa.Array.from_buffers(pa.list_(values.type), n, [bits, pa.py_buffer(list_offsets)],
                                 null_count=nulls, children=[values])


#: the two lowercase hex digits of each byte value, as one uint16 (native order: its bytes in memory
#: are the two characters)
_HEX2 = np.frombuffer(b"".join(f"{b:02x}".encode() for b in range(256)), dtype=np.uint16)
_0X = np.frombuffer(b"0x", dtype=np.uint16)[0]


def hex16(values: np.ndarray, valid=None) -> pa.Array:
    """0xhhhh text of 16-bit values (as tshark writes TLS versions and cipher suites): each row
    three 2-byte units, "0x" and the hex digits of its high and low byte (one lookup each)."""
    v = np.asarray(values).astype(np.uint16)
    mat = np.empty((len(v), 3), dtype=np.uint16)
    mat[:, 0] = _0X
    mat[:, 1] = _HEX2[v >> 8]
    mat[:, 2] = _HEX2[v & 0xFF]
    return strings(np.arange(0, 6 * len(v) + 1, 6, dtype=np.int32), mat.view(np.uint8).reshape(-1),
                   valid)


class Codes:
    """Strings named by small integer codes (outcome, reason, transport) as a string column."""

    def __init__(self, items):
        enc = [(x or "").encode() for x in items]
        self.offs = np.zeros(len(enc) + 1, np.int64)
        np.cumsum([len(e) for e in enc], out=self.offs[1:])
        self.data = np.frombuffer(b"".join(enc), np.uint8) if any(enc) else np.zeros(1, np.uint8)
        self.lens = np.diff(self.offs).astype(np.int32)

    def column(self, codes: np.ndarray, valid=None) -> pa.Array:
        """items[code] per row; null where not valid (a null slot holds no bytes). The bytes are
        copied one span per row in C (gather_bytes), not through a row x width mask."""
        codes = np.asarray(codes, dtype=np.int64)
        if len(codes) and (codes.min() < 0 or codes.max() >= len(self.lens)):
            raise IndexError("a code outside the table")
        out, body = gather_bytes(self.offs, self.data, codes, valid)
        return text_column(out, body, valid)


def call(name: str, args: list):
    """A pyarrow compute kernel ("take", "coalesce", "equal", ...) without importing
    pyarrow.compute: that module builds its ~300 wrapper functions and their docstrings at import
    (~40 ms), and a Parquet run needs none of them. The kernel is called through
    pyarrow._compute.call_function, the entry point pyarrow.compute itself wraps; the public one
    where a pyarrow lacks that module."""
    try:
        from pyarrow._compute import call_function
    except ImportError:              # pragma: no cover - another pyarrow layout
        from pyarrow.compute import call_function
    return call_function(name, args)
