"""The C text writer (ext/out/textout.pyx) against the line format's written rule (webtap/writers.py
docstring), re-stated here in plain Python, one character at a time; and its decimal seconds
against integer arithmetic. Arrays are built with from_buffers / pa.array of strings, sliced so
that the arrays' offsets (validity bits not on a byte boundary) are exercised."""
from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from webtap._ext import textout


def ref_escape(s: str) -> str:
    out = []
    for ch in s:
        c = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == "|":
            out.append("\\x7c")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\n":
            out.append("\\n")
        elif c < 0x20 or 0x7F <= c <= 0x9F:
            out.append(f"\\x{c:02x}")
        elif c in (0x2028, 0x2029):
            out.append(f"\\u{c:04x}")
        else:
            out.append(ch)
    return "".join(out)


def ref_lines(cols) -> bytes:
    rows = []
    for r in range(len(cols[0])):
        fields = []
        for c in cols:
            v = c[r]
            if v is None:
                fields.append("")
            elif isinstance(v, bool):
                fields.append("true" if v else "false")
            elif isinstance(v, int):
                fields.append(str(v))
            elif isinstance(v, tuple):                    # ("ns", value): a time column
                fields.append(ref_seconds(v[1], 9))
            else:
                fields.append(ref_escape(v))
        rows.append("|".join(fields) + "\n")
    return "".join(rows).encode()


# text with the characters the rule names, C1 controls and 2- and 3-byte UTF-8 around them
chars = st.sampled_from("\\|\r\n\x00\x01\x1f\x7f\x80\x85\x9f\xa0\xc2\xe2\u2028\u2029\u2027\u202a"
                        "é€ab 𝄞")
texts = st.lists(st.one_of(st.none(), st.text(chars, max_size=12), st.text(max_size=8)),
                 min_size=1, max_size=20)


@settings(max_examples=300, deadline=None)
@given(texts, st.integers(0, 5), st.data())
def test_lines_follow_the_written_rule(values, cut, data):
    n = len(values)
    ints = data.draw(st.lists(st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)),
                              min_size=n, max_size=n))
    u16 = data.draw(st.lists(st.one_of(st.none(), st.integers(0, 65535)), min_size=n, max_size=n))
    flags = data.draw(st.lists(st.one_of(st.none(), st.booleans()), min_size=n, max_size=n))
    times = pa.array(ints, pa.int64())
    cols = [pa.array(values, pa.string()), pa.array(ints, pa.int64()),
            pa.array(u16, pa.uint16()), pa.array(flags, pa.bool_()),
            pa.array(values, pa.large_string()),
            times.cast(pa.timestamp("ns", tz="UTC")), times.cast(pa.duration("ns"))]
    cut = min(cut, n - 1)
    cols = [c.slice(cut) for c in cols]
    py = [c.to_pylist() for c in cols[:5]]
    py += [[None if v is None else ("ns", v) for v in ints[cut:]]] * 2
    want = ref_lines(py)
    assert textout.format_lines(cols) == want
    # into a reused buffer: the same bytes, from its start, whatever it held before
    buf = bytearray(b"\xff" * data.draw(st.integers(0, 3 * len(want))))
    k = textout.format_lines(cols, buf)
    assert bytes(buf[:k]) == want


def test_unsupported_type_is_refused():
    with pytest.raises(TypeError):
        textout.format_lines([pa.array([b"x"], pa.binary())])
    with pytest.raises(TypeError):                       # lists: JSON and Zeek only
        textout.format_lines([pa.array([["a"]], pa.list_(pa.string()))])
    assert not textout.supported(pa.binary()) and textout.supported(pa.uint64())
    assert textout.supported(pa.float64()) and textout.supported(pa.float32())
    assert not textout.supported(pa.timestamp("us")) and textout.supported(pa.duration("ns"))
    assert textout.supported(pa.list_(pa.uint16()), "zeek")
    assert not textout.supported(pa.list_(pa.list_(pa.uint16())), "jsonl")


def ref_seconds(v: int, decimals: int) -> str:
    sign = "-" if v < 0 else ""
    s, f = divmod(abs(v), 10**9)
    return f"{sign}{s}.{f:09d}"[: len(f"{sign}{s}.") + decimals]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(-2**63 + 1, 2**63 - 1),
                          st.integers(-3 * 10**9, 3 * 10**9)), min_size=1, max_size=30),
       st.integers(1, 9), st.integers(0, 9),
       st.sampled_from([pa.duration("ns"), pa.timestamp("ns", tz="UTC"), pa.int64()]))
def test_seconds_text_is_exact(values, decimals, cut, typ):
    arr = pa.array(values, pa.int64()).cast(typ).slice(min(cut, len(values)))
    got = textout.seconds_text(arr, decimals)
    got.validate(full=True)
    want = [None if v is None else ref_seconds(v, decimals) for v in values[min(cut, len(values)):]]
    assert got.to_pylist() == want
