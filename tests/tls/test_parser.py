"""The C hello parser (ext/tls/tls_hello.h via webtap._ext.tls.parse_hello) against hellos built from
the RFCs in tests/tls/hellobuild.py."""
from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings, strategies as st

from tests.tls import hellobuild as hb
from webtap._ext.tls import parse_hello


def test_client_hello_fields():
    msg = hb.chrome_like(sni=b"www.example.org", alpn=(b"h2", b"http/1.1"))
    status, d = parse_hello(hb.records(msg))
    assert status == "ok"
    assert d["hs_type"] == 1
    assert d["sni"] == b"www.example.org"
    assert d["alpn"] == [b"h2", b"http/1.1"]
    assert d["legacy_version"] == 0x0303
    assert d["version"] == 0x0304                       # highest non-GREASE supported version
    assert d["versions"] == [hb.GREASE[2], 0x0304, 0x0303]
    assert d["groups"] == [hb.GREASE[2], 0x11EC, 0x001D, 0x0017]
    assert d["key_share_groups"] == [hb.GREASE[2], 0x11EC, 0x001D]
    assert d["sig_algs"] == [0x0403, 0x0804, 0x0401]
    assert d["point_formats"] == [0]
    assert d["ech"] is True
    assert d["extensions"][0] == hb.GREASE[5] and d["extensions"][1] == 0


def test_ja3_string_removes_grease_and_md5():
    msg = hb.chrome_like()
    _, d = parse_hello(hb.records(msg))
    # JA3 from its definition: version, ciphers, extensions, groups, point formats (no GREASE)
    exts = [e for e in d["extensions"] if e not in hb.GREASE]
    expect = "771,4865-4866-4867-49195-49199," + "-".join(map(str, exts)) + ",4588-29-23,0"
    assert d["ja3_string"] == expect
    assert d["ja3"] == hashlib.md5(expect.encode()).hexdigest()


def test_server_hello_and_hrr():
    sh = hb.server_hello(cipher=0x1302, exts=[hb.versions_ext([0x0304])[:4] + b"\x03\x04"])
    # supported_versions in a ServerHello is the bare 2-byte selection
    sh = hb.server_hello(cipher=0x1302, exts=[hb.ext(43, b"\x03\x04"), hb.ext(51, b"\x00\x1d\x00\x00")])
    status, d = parse_hello(hb.records(sh))
    assert status == "ok" and d["hs_type"] == 2
    assert d["cipher"] == 0x1302 and d["version"] == 0x0304 and d["legacy_version"] == 0x0303
    assert d["hrr"] is False
    assert d["ja3_string"] == "771,4866,43-51"
    hrr = hb.server_hello(random=hb.HRR_RANDOM, exts=[hb.ext(43, b"\x03\x04")])
    status, d = parse_hello(hb.records(hrr))
    assert status == "ok" and d["hrr"] is True


def test_client_hello_over_several_records():
    msg = hb.chrome_like()
    status, d = parse_hello(hb.records(msg, max_frag=100))
    assert status == "ok" and d["sni"] == b"example.com"
    status, d = parse_hello(hb.records(msg, max_frag=100)[:-1])
    assert status == "incomplete"


def test_ssl3_hello_without_extensions():
    msg = hb.client_hello(version=0x0300, ciphers=(0x0035, 0x000A), exts=None)
    status, d = parse_hello(hb.records(msg, rec_version=0x0300))
    assert status == "ok" and d["version"] == 0x0300 and d["extensions"] == []
    assert d["ja3_string"] == "768,53-10,,,"


def test_declared_16mib_is_too_long():
    msg = b"\x01\xff\xff\xff" + b"\x03\x03" + b"\x00" * 60
    status, d = parse_hello(hb.records(msg))
    assert status == "too_long"


def test_lengths_that_disagree():
    msg = bytearray(hb.chrome_like())
    # cipher_suites length larger than the message
    off = 4 + 2 + 32 + 1 + 32
    msg[off:off + 2] = b"\xff\xf0"
    assert parse_hello(hb.records(bytes(msg)))[0] == "bad_length"


def test_every_prefix_is_safe():
    data = hb.records(hb.chrome_like(pq=False))
    seen = set()
    for n in range(len(data)):
        status, _ = parse_hello(data[:n])
        seen.add(status)
        assert status in ("incomplete", "not_tls"), (n, status)
    assert parse_hello(data)[0] == "ok"
    assert seen == {"incomplete", "not_tls"}


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=0, max_size=600), st.integers(0, 2000))
def test_random_damage_never_crashes(noise, pos):
    data = bytearray(hb.records(hb.chrome_like(pq=False)))
    pos = pos % len(data)
    data[pos:pos + len(noise)] = noise
    status, d = parse_hello(bytes(data))
    assert status in ("ok", "incomplete", "not_tls", "not_hello", "bad_length", "too_long",
                      "bad_record")
    if status == "ok" and d["sni"] is not None:
        assert len(d["sni"]) <= len(data)
