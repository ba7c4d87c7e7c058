"""webtap.records.columns.gather: a take of strings from (offsets, bytes) without pyarrow.compute,
checked against Python's list indexing."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from webtap.records import columns


@settings(max_examples=200, deadline=None)
@given(items=st.lists(st.one_of(st.none(), st.text(max_size=8)), min_size=1, max_size=12),
       data=st.data())
def test_gather_is_list_indexing(items, data):
    idx = data.draw(st.lists(st.integers(0, len(items) - 1), max_size=30))
    valid = data.draw(st.lists(st.booleans(), min_size=len(idx), max_size=len(idx)))
    offs, buf = columns.texts(items)
    got = columns.gather(offs, buf, np.array(idx, np.int64), valid=np.array(valid, bool)).to_pylist()
    assert got == [(items[i] or "") if v else None for i, v in zip(idx, valid)]
    assert columns.gather(offs, buf, np.array(idx, np.int64)).to_pylist() == [items[i] or "" for i in idx]


def test_gather_from_nothing_is_all_null_or_refused():
    offs, buf = columns.texts([])
    assert columns.gather(offs, buf, np.zeros(3, np.int64), valid=np.zeros(3, bool)).to_pylist() == [None] * 3
    with pytest.raises(IndexError):
        columns.gather(offs, buf, np.zeros(2, np.int64))


def test_copy_spans_refuses_a_span_outside_either_buffer():
    from webtap._ext.textout import copy_spans

    data = np.frombuffer(b"abcdef", np.uint8)
    out = np.zeros(4, np.uint8)
    copy_spans(data, np.array([4, 0], np.int64), np.array([0, 2, 4], np.int64), out)
    assert out.tobytes() == b"efab"
    for start, offs, n in (([5], [0, 2], 4),        # past the end of data
                           ([-1], [0, 1], 4),       # before its start
                           ([0], [0, 5], 4),        # past the end of out
                           ([0], [2, 1], 4)):       # a negative length
        with pytest.raises(IndexError):
            copy_spans(data, np.array(start, np.int64), np.array(offs, np.int64), np.zeros(n, np.uint8))
    with pytest.raises(ValueError):
        copy_spans(data, np.array([0], np.int64), np.array([0], np.int64), out)


_text = st.one_of(st.none(), st.sampled_from(["h2", "http/1.1", "", "h3", "é2"]), st.text(max_size=5))


@settings(max_examples=150, deadline=None)
@given(items=st.lists(_text, max_size=10),
       lists=st.lists(st.one_of(st.none(), st.lists(_text.filter(lambda x: x is not None), max_size=3)),
                      max_size=10),
       data=st.data())
def test_take_strings_and_lists_are_arrows_take(items, lists, data):
    """take_strings / take_string_lists against pyarrow.compute.take (the reference), sliced
    arrays and a mask of rows to leave null included."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for arr, take in ((pa.array(items, pa.string()), columns.take_strings),
                      (pa.array(lists, pa.list_(pa.string())), columns.take_string_lists)):
        lo = data.draw(st.integers(0, len(arr)))
        arr = arr.slice(lo)
        if len(arr) == 0:
            continue
        idx = np.array(data.draw(st.lists(st.integers(0, len(arr) - 1), max_size=12)), np.int64)
        valid = np.array(data.draw(st.lists(st.booleans(), min_size=len(idx), max_size=len(idx))), bool)
        ref = pc.take(arr, pa.array(idx, mask=~valid)).to_pylist()
        assert take(arr, idx, valid).to_pylist() == ref
        assert take(pa.chunked_array([arr]), idx).to_pylist() == pc.take(arr, pa.array(idx)).to_pylist()


@settings(max_examples=200, deadline=None)
@given(vals=st.lists(st.integers(0, 0xFFFF), max_size=40), data=st.data())
def test_hex16_is_python_formatting(vals, data):
    """hex16 (2-byte lookups) against Python's f"0x{v:04x}", the form tshark writes."""
    valid = data.draw(st.lists(st.booleans(), min_size=len(vals), max_size=len(vals)))
    v = np.array(vals, np.uint16)
    assert columns.hex16(v).to_pylist() == [f"0x{x:04x}" for x in vals]
    assert columns.hex16(v, np.array(valid, bool)).to_pylist() == \
        [f"0x{x:04x}" if ok else None for x, ok in zip(vals, valid)]


@settings(max_examples=200, deadline=None)
@given(items=st.lists(st.one_of(st.none(), st.text(max_size=6)), min_size=1, max_size=8), data=st.data())
def test_codes_are_list_indexing(items, data):
    """Codes.column (one span copy per row) against Python's list indexing; a code outside the
    table is refused."""
    codes = data.draw(st.lists(st.integers(0, len(items) - 1), max_size=30))
    valid = data.draw(st.lists(st.booleans(), min_size=len(codes), max_size=len(codes)))
    c = columns.Codes(items)
    assert c.column(np.array(codes, np.uint8)).to_pylist() == [items[i] or "" for i in codes]
    assert c.column(np.array(codes, np.int64), np.array(valid, bool)).to_pylist() == \
        [(items[i] or "") if ok else None for i, ok in zip(codes, valid)]
    with pytest.raises(IndexError):
        c.column(np.array([len(items)], np.int64))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**64 - 1), st.integers(0, 255), st.binary(min_size=3, max_size=3)),
                min_size=1, max_size=40), st.data())
def test_take_rows_is_numpys_structured_take(rows, data):
    """columns.take_rows (rows taken as opaque bytes) equals numpy's own records[idx], field by
    field, for a structured dtype with padding, any order, repeats included."""
    dt = np.dtype([("a", "<u8"), ("b", "u1"), ("c", "V3"), ("d", "<u4")], align=True)
    rec = np.zeros(len(rows), dt)
    for i, (a, b, c) in enumerate(rows):
        rec[i] = (a, b, c, a & 0xFFFFFFFF)
    idx = np.array(data.draw(st.lists(st.integers(0, len(rows) - 1), max_size=60)), np.int64)
    got, want = columns.take_rows(rec, idx), rec[idx]
    assert got.dtype == dt and len(got) == len(idx)
    for f in dt.names:
        assert np.array_equal(got[f], want[f])
