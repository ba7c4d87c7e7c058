"""Canonical URL form: one test per rule of ext/url/urlcanon.h, plus properties."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import urls
from urlfilter.canon import canonicalize, canonicalize_many, from_key, to_key
from urlfilter.errors import InvalidUrl


def reason(url):
    with pytest.raises(InvalidUrl) as e:
        canonicalize(url)
    return e.value.reason


# R1 white space and control bytes
def test_r1_trim_and_reject_controls():
    assert canonicalize("  example.com/a \r\n") == "example.com/a"
    assert reason("") == "empty"
    assert reason(" \t ") == "empty"
    assert reason("exa mple.com") == "bad_char"
    assert reason(b"example.com/\x00x") == "bad_char"
    assert reason(b"example.com/\x7f") == "bad_char"
    assert reason("example.com/a\tb") == "bad_char"


# R2 scheme
def test_r2_scheme_dropped():
    for u in ("http://example.com/a", "HTTPS://example.com/a", "ftp+x.y-z://example.com/a",
              "//example.com/a", "example.com/a"):
        assert canonicalize(u) == "example.com/a", u
    assert canonicalize("localhost:8080/x") == "localhost:8080/x"   # not a scheme


# R3 userinfo
def test_r3_userinfo_dropped():
    assert canonicalize("http://bank.com@evil.net/login") == "evil.net/login"
    assert canonicalize("https://www.visa.co.jp%2f@mueecnzdasd.shop/x") == "mueecnzdasd.shop/x"
    assert canonicalize("http://u:p@a:b@host.org/") == "host.org"


# R4 host
def test_r4_host_lower_dots_escapes():
    assert canonicalize("WWW.Example.COM/Path") == "www.example.com/Path"
    # the same rule where the fast path hands over to the full rules (a port, userinfo, a dot
    # segment, an escape in the host that decodes to a capital)
    assert canonicalize("WWW.Example.COM:8080/Path") == "www.example.com:8080/Path"
    assert canonicalize("u@WWW.EXAMPLE.COM/x") == "www.example.com/x"
    assert canonicalize("WWW.EXAMPLE.COM/a/../b") == "www.example.com/b"
    assert canonicalize("%45XAMPLE.com") == "example.com"
    assert canonicalize("example.com./") == "example.com"
    assert canonicalize(".afshin.ir") == "afshin.ir"
    assert canonicalize("a..b...com") == "a.b.com"
    assert canonicalize("%65xample.com") == "example.com"
    assert canonicalize("178.128.25.172/tag") == "178.128.25.172/tag"
    assert canonicalize("[2001:DB8::1]:8080/x") == "[2001:db8::1]:8080/x"
    assert reason("exa*mple.com") == "bad_host"
    assert reason("http:///path") == "bad_host"
    assert reason("%zzexample.com") == "bad_host"
    assert reason("...") == "bad_host"


def test_r4_idn_to_punycode():
    assert canonicalize("http://Bücher.de/x") == "xn--bcher-kva.de/x"
    assert canonicalize("xn--bcher-kva.de/x") == "xn--bcher-kva.de/x"


# R5 port
def test_r5_port():
    assert canonicalize("example.com:80/a") == "example.com/a"
    assert canonicalize("https://example.com:443") == "example.com"
    assert canonicalize("example.com:/a") == "example.com/a"
    assert canonicalize("example.com:08080/a") == "example.com:8080/a"
    assert reason("example.com:http/a") == "bad_port"
    assert reason("example.com:70000/a") == "bad_port"


# R6 percent-encoding
def test_r6_percent_encoding():
    assert canonicalize("a.com/%7Euser/%41%62") == "a.com/~user/Ab"
    assert canonicalize("a.com/Espa%c3%b1ol") == "a.com/Espa%C3%B1ol"
    assert canonicalize("a.com/Español".encode()) == "a.com/Espa%C3%B1ol"
    assert canonicalize("a.com/%zz/%4") == "a.com/%25zz/%254"
    assert canonicalize("a.com/a%2Fb") == "a.com/a%2Fb"          # an encoded '/' is not a separator
    assert canonicalize('a.com/"<x>\\') == "a.com/%22%3Cx%3E%5C"
    assert canonicalize("a.com/p*300*.asx;x=1") == "a.com/p*300*.asx;x=1"
    assert canonicalize("a.com/?q=%7e%20") == "a.com?q=~%20"


# R7 path segments
def test_r7_dot_segments_and_slashes():
    assert canonicalize("a.com//x///y/") == "a.com/x/y"
    assert canonicalize("a.com/x/./y") == "a.com/x/y"
    assert canonicalize("a.com/x/../y") == "a.com/y"
    assert canonicalize("a.com/../../y") == "a.com/y"
    assert canonicalize("a.com/x/%2e%2E/y") == "a.com/y"
    assert canonicalize("a.com/x/...") == "a.com/x/..."
    assert canonicalize("a.com/") == "a.com"
    assert canonicalize("a.com/x/..") == "a.com"


# R8 fragment and empty query
def test_r8_fragment_and_query():
    assert canonicalize("a.com/login.php?#signin") == "a.com/login.php"
    assert canonicalize("a.com/x#frag?not-a-query") == "a.com/x"
    assert canonicalize("a.com/x?a=1&b=/c/../d") == "a.com/x?a=1&b=/c/../d"   # query is opaque
    assert canonicalize("a.com?x") == "a.com?x"


# R9 key form
def test_r9_key_form():
    assert to_key("www.example.com:8080/a") == b"com.example.www:8080/a"
    assert from_key(b"com.example.www:8080/a") == "www.example.com:8080/a"
    assert to_key("[::1]/x") == b"[::1]/x"


def test_huge_url():
    u = "http://a.com/" + "x/" * 32768
    assert canonicalize(u) == "a.com" + "/x" * 32768
    assert len(canonicalize("a.com/" + "%e9" * 30000)) == 5 + 1 + 90000


@given(urls())
def test_idempotent(u):
    c = canonicalize(u)
    assert canonicalize(c) == c
    assert from_key(to_key(u)) == c


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_random_bytes_never_crash(b):
    try:
        c = canonicalize(b)
    except InvalidUrl as e:
        assert e.reason in {"empty", "bad_char", "bad_host", "bad_port"}
        return
    assert c.isascii()
    assert canonicalize(c) == c


def test_batch_agrees_with_single():
    items = [b"HTTP://A.com/./x", b"", b"bad host", "b\u00fccher.de".encode(), b"x.org:99999", b"a.com/%7e"]
    data = b"".join(items)
    offsets = np.cumsum([0] + [len(x) for x in items])
    got, codes = canonicalize_many(data, offsets)
    want = []
    for x in items:
        try:
            want.append(canonicalize(x))
        except InvalidUrl:
            want.append("")
    assert got == want
    assert (codes == 0).tolist() == [w != "" for w in want]


# The header's fast path (_canon_fast in ext/url/urlcanon.h) must give byte-identical results to the
# full rules wherever it answers. path=2 runs it alone (-100: it would fall back), path=1 the
# full rules alone.
FAST_ONLY_FALLBACK = -100

near_canonical = st.text(alphabet="abcXYZ019-_.~/?%#:@[]!$&'()*+,;= \t\\\u00e9", max_size=40).map(
    lambda s: s.encode("utf-8"))


def assert_fast_equals_full(u: bytes) -> bool:
    from webtap._ext.canon import canonicalize_bytes

    took_fast = False
    for key in (False, True):
        full = canonicalize_bytes(u, key, 1)
        fast = canonicalize_bytes(u, key, 2)
        if fast[1] != FAST_ONLY_FALLBACK:
            assert fast == full, (u, key)
            took_fast = True
        assert canonicalize_bytes(u, key, 0) == full, (u, key)
    return took_fast


@settings(max_examples=400)
@given(st.one_of(urls().map(lambda s: s.encode("utf-8", "surrogateescape") if isinstance(s, str) else s),
                 st.tuples(st.sampled_from(["", "http://", "HTTPS://", "//"]), near_canonical).map(
                     lambda t: t[0].encode() + t[1])))
def test_fast_path_equals_full_rules(u):
    assert_fast_equals_full(u)


def test_fast_path_edges():
    fast = ["example.com", "WWW.Example.COM/A/b", "a.b/c//d/", "a.b/?", "a.b/x?y?z/..", "a_b-c.d/~x!$&'()*+,;=:@",
            "http://a.b/.x/..y/x.", "a.b?q", "//a.b/c"]
    slow = [".a.b", "a.b.", "a..b", "a.b:80/x", "u@a.b", "a.b/%41", "a.b/#f", "a.b/./x", "a.b/x/..", "[::1]/x",
            "a.b/\u00e9", "a.b/x\\y", "a.b?x#", "a.b/x?%zz", "/x"]   # (R1 rejects "" before either path)
    for u in fast:
        assert assert_fast_equals_full(u.encode()), u
    for u in slow:
        assert not assert_fast_equals_full(u.encode()), u


_HOST_BYTES = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._")
_SEG_BYTES = (_HOST_BYTES | set(b"~!$&'()*+,;=:@"))


def test_fast_path_every_byte_at_every_offset():
    """The fast path scans a host and each path segment 16 bytes at a time where 16 are left
    (SSE2: ext/url/urlcanon.c, its byte classes written as compares), then byte by byte. Every
    byte value at every offset of a 40-byte host label and of a 40-byte segment (so at each
    place in a first and a second 16-byte step, and in the byte-wise rest) gives the full
    rules' result, and the fast path answers for every byte of its class (the header's rule:
    host a-z A-Z 0-9 - . _; segment those, ~ and !$&'()*+,;=:@), as the byte-wise loop does."""
    for c in range(256):
        for off in range(40):
            host = bytearray(b"h" * 40)
            host[off] = c
            took = assert_fast_equals_full(b"http://" + bytes(host) + b".example/x")
            if c in _HOST_BYTES and not (c == ord(".") and off in (0, 39)):
                assert took, (c, off)
            seg = bytearray(b"s" * 40)
            seg[off] = c
            took = assert_fast_equals_full(b"a.example/" + bytes(seg) + b"/y")
            if c in _SEG_BYTES:
                assert took, (c, off)
            if c not in _SEG_BYTES and c not in b"/?":
                assert not took, (c, off)


def test_fast_path_host_dot_limit():
    """The fast path records the host's dots in one scan (at most 63, then the full rules
    answer): hosts of 1..66 labels, upper case, an empty label at each end and in the middle,
    equal the full rules in both forms; the fast path answers up to 63 dots, not from 64."""
    for nd in range(66):
        labels = [f"l{i}" for i in range(nd + 1)]
        host = ".".join(labels)
        for u in (f"http://{host}/p/q?x=1", f"{host.upper()}/", f"{host}."):
            took_fast = assert_fast_equals_full(u.encode())
            assert took_fast == (nd <= 63 and not u.endswith(".")), (nd, u)
        if nd:
            assert not assert_fast_equals_full(f".{host}".encode())
            assert not assert_fast_equals_full(host.replace(".", "..", 1).encode())
    # key form: labels reversed
    from webtap._ext.canon import canonicalize_bytes
    assert canonicalize_bytes(b"http://L0.l1.L2/x", True, 2)[0] == b"l2.l1.l0/x"


def test_fast_path_equals_full_rules_on_blacklists(shared):
    """Every line of a shared URL list (0.5 M lines) and 300 k lines of a domain list, both forms."""
    import gzip

    from webtap._ext.canon import canonicalize_batch

    for rel in ("blacklists/ut1-history/phishing/urls.gz", "blacklists/ut1-history/malware/domains.gz"):
        lines = gzip.open(shared(rel), "rb").read().split(b"\n")[:600000]
        data = b"".join(lines)
        offsets = np.cumsum([0] + [len(x) for x in lines])
        for key in (False, True):
            full_out, full_oo, full_codes = canonicalize_batch(data, offsets, key, 10, 1)
            fast_out, fast_oo, fast_codes = canonicalize_batch(data, offsets, key, 10, 2)
            both = canonicalize_batch(data, offsets, key, 10, 0)
            assert both[0] == full_out and (both[2] == full_codes).all()
            took = fast_codes != FAST_ONLY_FALLBACK
            assert took.mean() > 0.5, (rel, took.mean())        # the fast path is the common case
            full_items = full_out.split(b"\n")
            fast_items = fast_out.split(b"\n")
            assert (fast_codes[took] == full_codes[took]).all()
            bad = [ln for ln, t, a, b in zip(lines, took.tolist(), fast_items, full_items) if t and a != b]
            assert bad == [], bad[:5]


# The C canonicaliser against an independent reading of the rules (tests/urlfilter/canon_reference.py,
# written from docs/urlfilter.md and the header comment, not from the C code), on URLs built from
# pieces that exercise every rule: escapes in host and path, userinfo, ports, IPv6 literals,
# dot segments, controls, white space, raw UTF-8, fragments and queries.
_schemes = st.sampled_from(["", "http://", "HTTPS://", "//", "ftp+x.y-z://", "1x://", "://", " \t"])
_userinfo = st.sampled_from(["", "", "u@", "u:p@", "bank.com@", "a@b@"])
_hosts = st.one_of(
    st.lists(st.sampled_from(["a", "B", "x-y", "_s", "10", "%41", "%2e", "%2E", "", "%zz", "%", "\u00e9", "a b"]),
             min_size=1, max_size=4).map(".".join),
    st.sampled_from(["[::1]", "[2001:DB8::a]", "[::1", "[::1]x", "[]", "[zz]", "[a_b]", "[1.2.3.4]"]))
_ports = st.sampled_from(["", "", ":", ":80", ":443", ":0080", ":8080", ":0", ":65535", ":65536", ":99999", ":x1"])
_segs = st.sampled_from(["x", "Y", ".", "..", "", "%2e", "%2E%2e", "%41", "%7e", "%2f", "%zz", "%", "%4",
                         "\u00e9", "a\\b", "!$&'()*+,;=:@", "<>\"", "~-_."])
_paths = st.lists(_segs, max_size=5).map(lambda s: ("/" + "/".join(s)) if s else "")
_queries = st.sampled_from(["", "?", "?q", "?q=/x?y", "?%41%2f", "?a b", "?\u00e9", "??"])
_frags = st.sampled_from(["", "#", "#f", "#f?x", "#\x01"])
_tails = st.sampled_from(["", "", " ", "\r\n", "\x00", "\x7f"])
hostile_urls = st.tuples(_schemes, _userinfo, _hosts, _ports, _paths, _queries, _frags, _tails).map(
    lambda t: "".join(t).encode("utf-8"))
# every piece hostile at once mostly ends in a rejection or the full rules: the common forms (the
# fast path's) come from tests.strategies.urls, and single hostile pieces from the mix below
_plain = urls().map(lambda s: s.encode("utf-8"))
_one_odd = st.tuples(_plain, st.sampled_from(["/%41", "/a/../b", "?%7e", "#x", ":0080", "/%zz", "?", "/é"])).map(
    lambda t: t[0] + t[1].encode("utf-8"))


@settings(max_examples=1500)
@given(st.one_of(_plain, _one_odd, hostile_urls))
def test_c_agrees_with_independent_reference(u):
    from tests.urlfilter.canon_reference import Rejected, reference
    from webtap._ext.canon import canonicalize_bytes

    for key in (False, True):
        try:
            want, why = reference(u, key), None
        except Rejected as e:
            want, why = None, e.reason
        out, code = canonicalize_bytes(u, key)
        if why is None:
            assert code == 0 and out == want, (u, key, out, code, want)
        else:
            assert code != 0, (u, key, out, want, why)
            from urlfilter.canon import reason_of
            assert reason_of(code) == why, (u, key, reason_of(code), why)
