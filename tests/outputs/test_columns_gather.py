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
