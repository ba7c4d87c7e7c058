"""The C writers of JSON lines and Zeek rows (ext/out/textout.pyx: format_jsonl, format_zeek,
text_array) against references written here from the formats' rules, one byte at a time:

* JSON strings as webtap/jsonl.py specifies them (RFC 8259 section 7, no more): ``\\\\``,
  ``\\"``, ``\\u00XX`` (lower case) for the bytes 0x00-0x1F, every other byte as it is;
* Zeek text as webtap/zeeklog.py specifies it: ``\\xHH`` for backslash, ``#``, ``"``, 0x00-0x1F
  and 0x7F (and ``,`` inside a list element); a whole value ``-`` -> ``\\x2d``, ``(empty)`` ->
  ``\\x28empty)``, empty -> ``(empty)``; a null ``-``; lists joined by ``,``, empty ``(empty)``.

Both rules are byte rules, so the values are arbitrary byte strings, invalid UTF-8 included
(string arrays built with from_buffers, which does not validate: the writers pass such bytes
through as they are). Arrays are sliced so that offsets (validity bits off a byte boundary,
list offsets into a larger child) are exercised. Floats are checked against pyarrow's cast to
string (the rule the outputs keep), timestamps against Python's datetime."""
from __future__ import annotations

import datetime
import json
import struct

import numpy as np
import pyarrow as pa
from hypothesis import given, settings, strategies as st

from webtap._ext import textout


def ref_json_string(b: bytes) -> bytes:
    out = bytearray(b'"')
    for c in b:
        if c == 0x5C:
            out += b"\\\\"
        elif c == 0x22:
            out += b'\\"'
        elif c < 0x20:
            out += b"\\u%04x" % c
        else:
            out.append(c)
    return bytes(out + b'"')


def ref_zeek_text(b: bytes, elem: bool = False) -> bytes:
    if b == b"":
        return b"(empty)"
    if b == b"-":
        return b"\\x2d"
    if b == b"(empty)":
        return b"\\x28empty)"
    out = bytearray()
    for c in b:
        if c < 0x20 or c == 0x7F or c in b'\\#"' or (elem and c == 0x2C):
            out += b"\\x%02x" % c
        else:
            out.append(c)
    return bytes(out)


def strings(values: list, large: bool = False) -> pa.Array:
    """A string array of arbitrary bytes (None: null), from its buffers."""
    data = b"".join(v or b"" for v in values)
    offs = np.zeros(len(values) + 1, dtype=np.int64 if large else np.int32)
    np.cumsum([len(v or b"") for v in values], out=offs[1:])
    valid = np.array([v is not None for v in values])
    nulls = int(len(values) - valid.sum())
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(pa.large_string() if large else pa.string(), len(values),
                                 [bitmap, pa.py_buffer(offs), pa.py_buffer(data)], null_count=nulls)


def ref_iso(ns: int) -> bytes:
    s, f = divmod(ns, 10**9)
    t = datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=s)
    return f'"{t:%Y-%m-%dT%H:%M:%S}.{f:09d}Z"'.encode()


def ref_seconds(v: int) -> bytes:
    sign = "-" if v < 0 else ""
    s, f = divmod(abs(v), 10**9)
    return f"{sign}{s}.{f:09d}".encode()


def ref_float(v: float) -> bytes:
    return pa.array([v], pa.float64()).cast(pa.string())[0].as_py().encode()


# bytes the rules name, the bytes around them, UTF-8 lead and continuation bytes, anything
special = st.sampled_from([b"\\", b'"', b"#", b",", b"-", b"(empty)", b"\x00", b"\x1f", b"\x7f",
                           b"\x20", b"\x80", b"\xc2\x85", b"\xe2\x80\xa8", b"\xff", b"a", b"\t",
                           b"\n", b"\xc3\xa9", b"\xf0\x9d\x84\x9e"])
byte_strings = st.one_of(st.binary(max_size=12),
                         st.lists(special, max_size=5).map(b"".join))
values = st.lists(st.one_of(st.none(), byte_strings), min_size=1, max_size=16)


@settings(max_examples=400, deadline=None)
@given(values, st.integers(0, 4), st.booleans())
def test_json_and_zeek_text_follow_the_written_rules(vals, cut, large):
    cut = min(cut, len(vals) - 1)
    arr = strings(vals, large).slice(cut)
    vals = vals[cut:]
    got = textout.text_array(arr, "jsonl")
    assert _raw(got) == [None if v is None else ref_json_string(v) for v in vals]
    got = textout.text_array(arr, "zeek")
    assert _raw(got) == [None if v is None else ref_zeek_text(v) for v in vals]
    # rows: JSON nulls are null, Zeek's are '-'
    keys = [b'"s"']
    want = b"".join(b'{"s":' + (b"null" if v is None else ref_json_string(v)) + b"}\n" for v in vals)
    assert textout.format_jsonl([arr], keys) == want
    want = b"".join((b"-" if v is None else ref_zeek_text(v)) + b"\n" for v in vals)
    assert textout.format_zeek([arr]) == want


def _raw(arr: pa.StringArray) -> list:
    """The bytes of each value of a string array (None for null), read from its buffers."""
    offs = np.frombuffer(arr.buffers()[1], dtype=np.int32)[arr.offset:arr.offset + len(arr) + 1]
    data = arr.buffers()[2].to_pybytes() if arr.buffers()[2] is not None else b""
    return [data[offs[i]:offs[i + 1]] if arr[i].is_valid else None for i in range(len(arr))]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=20))
def test_json_strings_read_back(s):
    """For valid UTF-8 the JSON text is JSON: json.loads gives the string back."""
    arr = pa.array([s], pa.string())
    line = textout.format_jsonl([arr], [b'"k"'])
    assert json.loads(line) == {"k": s}


lists = st.lists(st.one_of(st.none(), st.lists(st.one_of(st.none(), byte_strings), max_size=4)),
                 min_size=1, max_size=10)


@settings(max_examples=300, deadline=None)
@given(lists, st.integers(0, 3), st.data())
def test_rows_of_every_type(ls, cut, data):
    """A row of lists, integers, booleans, timestamps, durations and floats, with nulls, in
    both formats, against the references."""
    n = len(ls)
    ints = data.draw(st.lists(st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)), min_size=n, max_size=n))
    u16 = data.draw(st.lists(st.one_of(st.none(), st.lists(st.integers(0, 65535), max_size=3)),
                             min_size=n, max_size=n))
    flags = data.draw(st.lists(st.one_of(st.none(), st.booleans()), min_size=n, max_size=n))
    floats = data.draw(st.lists(st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
                                min_size=n, max_size=n))
    # the child holds one extra element in front, so list offsets do not start at 0
    flat = [b"x"] + [e for v in ls if v is not None for e in v]
    offs, k = [1], 1
    for v in ls:
        k += len(v or [])
        offs.append(k)
    child = strings(flat)
    mask = pa.array([v is None for v in ls])
    lcol = pa.ListArray.from_arrays(pa.array(offs, pa.int32()), child, mask=mask)
    times = pa.array(ints, pa.int64())
    cols = [lcol, pa.array(ints, pa.int64()), pa.array(u16, pa.list_(pa.uint16())),
            pa.array(flags, pa.bool_()), times.cast(pa.timestamp("ns", tz="UTC")),
            times.cast(pa.duration("ns")), pa.array(floats, pa.float64()), pa.nulls(n, pa.string())]
    cut = min(cut, n - 1)
    cols = [c.slice(cut) for c in cols]
    ls, ints, u16, flags, floats = ls[cut:], ints[cut:], u16[cut:], flags[cut:], floats[cut:]

    def jval(kind, v):
        if v is None:
            return b"null"
        if kind == "s":
            return b"[" + b",".join(b"null" if e is None else ref_json_string(e) for e in v) + b"]"
        if kind == "u":
            return b"[" + b",".join(b"%d" % e for e in v) + b"]"
        if kind == "i":
            return b"%d" % v
        if kind == "b":
            return b"true" if v else b"false"
        if kind == "t":
            return ref_iso(v)
        if kind == "d":
            return ref_seconds(v)
        return ref_float(v)

    def zval(kind, v):
        if v is None:
            return b"-"
        if kind == "s":
            return b",".join(b"-" if e is None else ref_zeek_text(e, elem=True) for e in v) or b"(empty)"
        if kind == "u":
            return b",".join(b"%d" % e for e in v) or b"(empty)"
        if kind == "i":
            return b"%d" % v
        if kind == "b":
            return b"T" if v else b"F"
        if kind in "td":
            return ref_seconds(v)
        return ref_float(v)

    kinds = "siubtdf"
    rows = list(zip(ls, ints, u16, flags, ints, ints, floats))
    names = [b'"%c"' % c for c in b"siubtdfn"]
    want = b"".join(
        b"{" + b",".join(names[j] + b":" + jval(kinds[j], r[j]) for j in range(7)) + b',"n":null}\n'
        for r in rows)
    assert textout.format_jsonl(cols, names) == want
    want = b"".join(b"\t".join(zval(kinds[j], r[j]) for j in range(7)) + b"\t-\n" for r in rows)
    assert textout.format_zeek(cols) == want
    # into a reused buffer: the same bytes from its start
    buf = bytearray(b"\xff" * 7)
    k = textout.format_zeek(cols, buf)
    assert bytes(buf[:k]) == want


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.floats(), st.integers(0, 2**64 - 1).map(
    lambda b: struct.unpack("<d", struct.pack("<Q", b))[0]),
    st.integers(-10**12, 10**12).map(lambda ns: ns / 1e9)))
def test_floats_as_pyarrow_casts_them(v):
    arr = pa.array([v], pa.float64())
    assert textout.format_lines([arr]) == ref_float(v) + b"\n"
    f32 = pa.array([v], pa.float32()) if abs(v) < 3e38 or v != v else None
    if f32 is not None:
        assert textout.format_lines([f32]) == f32.cast(pa.string())[0].as_py().encode() + b"\n"


def test_powers_of_two_and_edges():
    """Powers of two (the float below is nearer than the one above) and the notation edges."""
    vals = [2.0 ** k for k in range(-1074, 1024)] + [0.0, -0.0, 1e-6, 1e-7, 9999999999.0, 1e10,
                                                    5e-324, 1.7976931348623157e308,
                                                    float("nan"), float("inf"), -float("inf")]
    arr = pa.array(vals, pa.float64())
    assert textout.format_lines([arr]).split(b"\n")[:-1] == [
        v.encode() for v in arr.cast(pa.string()).to_pylist()]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)), min_size=1, max_size=20),
       st.lists(st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)), min_size=20, max_size=20),
       st.integers(0, 5))
def test_seconds_with_fallback_is_a_coalesce(first, second, cut):
    n = len(first)
    ts = pa.timestamp("ns", tz="UTC")
    a = pa.array(first, pa.int64()).cast(ts).slice(min(cut, n - 1))
    b = pa.array(second[:n], pa.int64()).cast(ts).slice(min(cut, n - 1))
    got = textout.seconds_text(a, 6, fallback=b)
    got.validate(full=True)
    want = [x if x is not None else y for x, y in zip(first, second[:n])][min(cut, n - 1):]
    assert got.to_pylist() == [None if v is None else ref_seconds(v).decode()[:-3] for v in want]


def test_raw_lists_joined_as_binary_join():
    """text_array(..., "raw"): a list's elements joined by ',', null where the list is null or
    holds a null (pyarrow's binary_join), an empty list ''."""
    a = pa.array([["a", "b,c"], [], None, ["x", None]], pa.list_(pa.string()))
    assert textout.text_array(a.slice(0), "raw").to_pylist() == ["a,b,c", "", None, None]
    u = pa.array([[0, 16, 65535], [], None], pa.list_(pa.uint16()))
    assert textout.text_array(pa.chunked_array([u]), "raw").to_pylist() == ["0,16,65535", "", None]
    assert textout.text_array(pa.chunked_array([], pa.list_(pa.uint16())), "raw").to_pylist() == []
