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


# IPv6 addresses whose groups are mostly 0 (runs of zeros of every length and place, ties between
# runs), with the IPv4-mapped (::ffff:0:0/96) and IPv4-compatible (::/96) prefixes glibc writes as
# a dotted quad, and small / large group values (leading zeros dropped)
_group = st.sampled_from([0, 0, 0, 0, 1, 0xF, 0x10, 0xFF, 0x100, 0xFFF, 0x1000, 0xFFFF, 0xABCD])
_v6 = st.one_of(
    st.lists(_group, min_size=8, max_size=8).map(lambda g: b"".join(x.to_bytes(2, "big") for x in g)),
    st.binary(min_size=4, max_size=4).map(lambda q: bytes(10) + b"\xff\xff" + q),
    st.binary(min_size=4, max_size=4).map(lambda q: bytes(12) + q),
    st.binary(min_size=4, max_size=4).map(lambda q: bytes(10) + b"\x00\x01" + q),
    st.binary(min_size=16, max_size=16),
)


@settings(max_examples=2000, deadline=None)
@given(st.lists(_v6, min_size=1, max_size=30))
def test_ipv6_text_is_inet_ntop(addrs):
    """The C writer (ext/common/util.h wt_ip_text) gives what glibc's inet_ntop gives, character
    for character (socket.inet_ntop is that function): the form every record kind had."""
    import socket

    a = np.frombuffer(b"".join(addrs), np.uint8).reshape(-1, 16)
    got = dissect.ip_text(a, np.full(len(addrs), 6, np.uint8)).to_pylist()
    assert got == [socket.inet_ntop(socket.AF_INET6, x) for x in addrs]


@pytest.mark.parametrize("text", [
    "::", "::1", "1::", "1:0:0:1::", "0:0:1::", "1:0:0:2:0:0:0:3", "1:0:0:2:0:0:3:4",
    "::ffff:0.0.0.0", "::ffff:1.2.3.4", "::1.2.3.4", "::0.1.0.0", "::ffff:0:1.2.3.4",
    "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "fe80::1:0:0:0", "2001:db8::", "1:2:3:4:5:6:7::",
])
def test_ipv6_text_edges(text):
    import socket

    b = socket.inet_pton(socket.AF_INET6, text)
    got = dissect.ip_text(np.frombuffer(b, np.uint8).reshape(1, 16), np.array([6], np.uint8))
    assert got.to_pylist() == [socket.inet_ntop(socket.AF_INET6, b)]
