"""Span columns -> Arrow strings: UTF-8 repair rules and the tshark-compatible mode."""
import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.dissect.packets import one, tcp4
from scapy.all import Ether


def repair_reference(b: bytes) -> str:
    """Reference for errors="replace": each byte outside a valid UTF-8 sequence -> U+FFFD."""
    out, i = [], 0
    while i < len(b):
        for n in (1, 2, 3, 4):
            try:
                ch = b[i:i + n].decode("utf-8")
            except UnicodeDecodeError:
                continue
            if len(ch) == 1:
                out.append(ch)
                i += n
                break
        else:
            out.append("\ufffd")
            i += 1
    return "".join(out)


def tshark_reference(b: bytes) -> str:
    b = b.split(b"\x00", 1)[0]
    return "".join(chr(c) if c < 0x80 else "\ufffd" for c in b)


def batch_with_uri(uri: bytes):
    b, r = one(Ether() / tcp4(b"GET " + uri + b" HTTP/1.1\r\nHost: h\r\n\r\n"))
    assert r == "http_request"
    return b


def test_modes_on_known_bytes():
    b = batch_with_uri(b"/\xc3\xa9\xff\x01x\x00y\xe2\x82")
    assert b.column("uri").to_pylist() == ["/\u00e9\ufffd\x01x\x00y\ufffd\ufffd"]
    assert b.column("uri", errors="tshark").to_pylist() == ["/\ufffd\ufffd\ufffd\x01x"]
    with pytest.raises(ValueError):
        b.column("uri", errors="strict")
    with pytest.raises(KeyError):
        b.column("nope")


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=1, max_size=60).filter(lambda x: not any(c in x for c in b" \r\n")))
@example(b"HTTP/")                  # found by hypothesis: was read as a line without a target
def test_repair_matches_reference(uri):
    b = batch_with_uri(uri)
    assert b.column("uri").to_pylist() == [repair_reference(uri)]
    expect = tshark_reference(uri)
    assert b.column("uri", errors="tshark").to_pylist() == [expect]


def test_absent_spans_are_null_and_types():
    b, _ = one(Ether() / tcp4(b"HTTP/1.1 204 No Content\r\n\r\n"))
    col = b.column("uri")
    assert col.type == pa.string() and col.to_pylist() == [None] and col.null_count == 1
    assert b.column("reason").to_pylist() == ["No Content"]
    assert b.column("status").to_pylist() == [204]


def test_to_pandas():
    b, _ = one(Ether() / tcp4())
    df = b.to_pandas()
    assert list(df["method_name"]) == ["GET"] and list(df["kind"]) == ["request"]
    assert list(df["src_ip"]) == ["192.0.2.1"] and list(df["host"]) == ["example.org"]
    b, _ = one(Ether() / tcp4(b"HTTP/1.1 200 OK\r\n\r\n"))
    df = b.to_pandas()
    assert df["method_name"].isna().all() and list(df["status"]) == [200]
