"""The TLS exchange stage reads a ServerHello's selected version with a reader of its own
(ext/tls/tls_hello.c tls_server_version: no tls_hello filled, no spans), not the full parser: it
must say what the full parser says. Checked on built ServerHellos of every shape the parser
knows (TLS 1.2, 1.3 with supported_versions, HelloRetryRequest, the early drafts' layout, no
extensions, repeated and cut extensions), on the same bytes damaged anywhere, and on payloads
that are not ServerHellos."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from tests.tls import hellobuild as hb
from webtap._ext.tls import parse_hello, server_version

HRR_RANDOM = bytes.fromhex("CF21AD74E59A6111BE1D8C021E65B891C2A211167ABB8C5E079E09E2C8A8339C")


def _full(payload: bytes):
    """What the full parser says of a payload, as the reader must say it."""
    status, d = parse_hello(payload)
    if status == "ok" and d["hs_type"] != 2:
        return "not_hello", 0, False
    if status != "ok":
        return status, None, None
    return "ok", d["version"], d["hrr"]


def _same(payload: bytes) -> tuple:
    want = _full(payload)
    got = server_version(payload)
    if want[0] == "ok":
        assert got == want, payload.hex()
    else:
        # the full parser's failures: the reader fails the same way (its version is not read)
        assert got[0] == want[0], payload.hex()
    return got


versions = st.sampled_from([0x0300, 0x0301, 0x0302, 0x0303, 0x0304, 0x7f12, 0x7f15, 0x7f16,
                            0x7f1c, 0xfb17, 0x7e01, 0x0a0a])
extension = st.one_of(
    st.builds(lambda v: hb.ext(43, hb.u16(v)), versions),                   # supported_versions
    st.builds(lambda v: hb.ext(43, hb.u8(v & 0xff)), versions),             # too short to read
    st.builds(lambda t, b: hb.ext(t, b), st.integers(0, 0xffff), st.binary(max_size=40)),
    st.builds(lambda g: hb.ext(51, hb.u16(g) + hb.vec16(b"k" * 32)), st.integers(0, 0xffff)),
)


@st.composite
def server_hellos(draw):
    exts = draw(st.lists(extension, max_size=6))
    random = draw(st.sampled_from([HRR_RANDOM, b"\x33" * 32, HRR_RANDOM[:31] + b"\x00"]))
    kind = draw(st.sampled_from(["final", "draft", "none"]))
    if kind == "draft":
        msg = hb.draft_server_hello(version=draw(st.sampled_from([0x0304, 0x7f12, 0x7f15])),
                                    exts=exts, random=random)
    else:
        msg = hb.server_hello(version=draw(versions), exts=None if kind == "none" else exts,
                              random=random, session_id=draw(st.binary(max_size=32)))
    return msg


@settings(max_examples=400, deadline=None)
@given(server_hellos(), st.sampled_from([16384, 40, 7]))
def test_the_reader_says_what_the_parser_says(msg, frag):
    """Whole ServerHellos, in one record or spanning several (gathered). (A final-layout hello
    with 0x0304 in its legacy field is read in the drafts' layout by both, and fails both.)"""
    _same(hb.records(msg, max_frag=frag))


@settings(max_examples=400, deadline=None)
@given(server_hellos(), st.binary(min_size=1, max_size=40), st.integers(0, 400),
       st.integers(0, 3))
def test_damaged_server_hellos(msg, noise, pos, how):
    """The same bytes cut, overwritten or with a length field changed: the same answer."""
    data = bytearray(hb.records(msg))
    pos %= len(data)
    if how == 0:
        data = data[:pos]
    elif how == 1:
        data[pos:pos + len(noise)] = noise
    elif how == 2:
        data[pos] = noise[0]
    else:
        data = data + noise
    _same(bytes(data))


def test_other_payloads():
    """A ClientHello, other records first, an SSLv2 ClientHello, not TLS at all."""
    ch = hb.records(hb.client_hello(exts=[hb.versions_ext([0x0304, 0x0303])]))
    assert server_version(ch)[0] == "not_hello"
    sh = hb.records(hb.server_hello(exts=[hb.ext(43, hb.u16(0x0304))]))
    assert server_version(hb.record(21, b"\x01\x70") + sh) == ("ok", 0x0304, False)
    assert server_version(hb.sslv2_client_hello())[0] == "not_hello"
    assert server_version(b"GET / HTTP/1.1\r\n\r\n")[0] == "not_tls"
    assert server_version(b"")[0] == "not_tls"
    hrr = hb.records(hb.server_hello(random=HRR_RANDOM, exts=[hb.ext(43, hb.u16(0x0304))]))
    assert server_version(hrr) == ("ok", 0x0304, True)
    for p in (ch, sh, hrr):
        _same(p)
