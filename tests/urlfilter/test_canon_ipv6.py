"""IPv6 literal hosts are canonicalised (ext/url/urlcanon.h, RFC 5952), so that one address written
two ways is one blacklist entry; Python's ipaddress is the independent reference (with RFC 5952
section 5's rule for IPv4-mapped addresses, which ipaddress.compressed does not apply)."""
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


def rfc5952(addr: ipaddress.IPv6Address) -> str:
    """RFC 5952 text: section 4 (ipaddress.compressed), and section 5 for ::ffff:0:0/96."""
    if addr.ipv4_mapped is not None:
        return f"::ffff:{addr.ipv4_mapped}"
    return addr.compressed


@pytest.mark.parametrize("spelling", ["[::ffff:c000:201]", "[::FFFF:192.0.2.1]", "[0:0:0:0:0:ffff:c000:0201]",
                                      "http://[::ffff:192.000.2.1]:443", "[0::ffff:C000:201]"])
def test_ipv4_mapped_keeps_a_dotted_tail(spelling):
    # RFC 5952 section 5: "::ffff:192.0.2.1" is the recommended text of this address
    assert canon.canonicalize(spelling + "/x") == "[::ffff:192.0.2.1]/x"
    assert canon.to_key(spelling) == b"[::ffff:192.0.2.1]"


@pytest.mark.parametrize("text,want", [("[::ffff:0.0.0.0]", "[::ffff:0.0.0.0]"),
                                       ("[::ffff:ffff:ffff]", "[::ffff:255.255.255.255]"),
                                       ("[::fffe:c000:201]", "[::fffe:c000:201]"),       # not mapped
                                       ("[::1:ffff:c000:201]", "[::1:ffff:c000:201]"),   # not mapped
                                       ("[::c000:201]", "[::c000:201]")])                # compatible: hex
def test_only_the_mapped_prefix_is_dotted(text, want):
    assert canon.canonicalize(text) == want


_ADDRESSES = st.one_of(st.integers(0, 2**128 - 1), st.integers(0, 2**32 - 1).map(lambda v: 0xFFFF << 32 | v))


@settings(max_examples=300, deadline=None)
@given(_ADDRESSES, st.data())
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
    assert canon.canonicalize(f"[{text}]/p") == f"[{rfc5952(addr)}]/p"
