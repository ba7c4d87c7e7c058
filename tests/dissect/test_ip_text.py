"""webtap._ext.dissect.ip_text: the C address text of every record kind, for n x 16 address
fields and their versions, checked against Python's ipaddress (RFC 5952 for IPv6)."""
from __future__ import annotations

import ipaddress

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from webtap._ext import dissect


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([4, 6]), st.binary(min_size=16, max_size=16)), max_size=20))
def test_ip_text_is_ipaddress(rows):
    addrs = np.frombuffer(b"".join(a for _, a in rows), np.uint8).reshape(-1, 16)
    vers = np.array([v for v, _ in rows], np.uint8)
    got = dissect.ip_text(addrs, vers).to_pylist()
    want = [str(ipaddress.IPv4Address(a[:4]) if v == 4 else ipaddress.IPv6Address(a)) for v, a in rows]
    assert got == want


def test_ip_text_refuses_other_shapes():
    with pytest.raises(ValueError):
        dissect.ip_text(np.zeros((2, 4), np.uint8), np.array([4, 4], np.uint8))
    with pytest.raises(ValueError):
        dissect.ip_text(np.zeros((2, 16), np.uint8), np.array([4], np.uint8))
