"""IPv6 literal hosts are canonicalised (ext/urlcanon.h, RFC 5952), so that one address written
two ways is one blacklist entry; Python's ipaddress is the independent reference."""
from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings, strategies as st

from urlfilter import canon
from urlfilter.errors import InvalidUrl


@pytest.mark.parametrize("spelling", ["[2001:DB8:0::1]/x", "[2001:db8:0:0:0:0:0:1]/x",
                                      "http://[2001:0db8::0001]/x", "[2001:db8::1]:80/x"])
def test_one_address_many_spellings(spelling):
    assert canon.canonicalize(spelling) == "[2001:db8::1]/x"


@pytest.mark.parametrize("bad", ["[1:2:3:4:5:6:7:8:9]", "[1::2::3]", "[:1::]", "[1:]", "[::1.2.3]",
                                 "[12345::]", "[::1.2.3.256]", "[g::1]"])
def test_not_an_address(bad):
    with pytest.raises(InvalidUrl):
        canon.canonicalize(bad + "/x")


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**128 - 1), st.data())
def test_matches_ipaddress(value, data):
    addr = ipaddress.IPv6Address(value)
    groups = addr.exploded.split(":")
    # a random spelling: upper/lower case, leading zeros dropped or kept, some zero run as '::'
    spelled = [g.lstrip("0") or "0" if data.draw(st.booleans()) else g for g in groups]
    spelled = [g.upper() if data.draw(st.booleans()) else g for g in spelled]
    text = ":".join(spelled)
    zero_runs = [i for i in range(8) if groups[i] == "0000"]
    if zero_runs and data.draw(st.booleans()):
        i = data.draw(st.sampled_from(zero_runs))
        j = i
        while j + 1 < 8 and groups[j + 1] == "0000" and data.draw(st.booleans()):
            j += 1
        text = ":".join(spelled[:i]) + "::" + ":".join(spelled[j + 1:])
    assert canon.canonicalize(f"[{text}]/p") == f"[{addr.compressed}]/p"
