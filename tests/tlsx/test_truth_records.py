"""The decrypted truth's plaintext parsing on built records (httpanalyzer/tls_truth.py), the
shapes a live capture shows only by chance."""
from __future__ import annotations

from httpanalyzer.tls_truth import _HRR_RANDOM, server_hellos
from tests.tls.hellobuild import ext, server_hello, u16


def _sh(random: bytes, version=0x0303, exts=()):
    body = bytearray(server_hello(version=0x0303, cipher=0xC02B if version == 0x0303 else 0x1301,
                                  exts=exts))
    body[6:38] = random          # type (1) + length (3) + legacy version (2), then the random
    return bytes(body)


def test_encrypted_finished_starting_with_2_is_no_server_hello():
    """TLS 1.2: after the server's ChangeCipherSpec its encrypted Finished is a type-22 record
    whose first byte (the explicit nonce's) is 2 one time in 256; seen live (h1_resume), it was
    read as a second ServerHello and the connection lost its truth."""
    sh = _sh(b"\x11" * 32)
    recs = [(0, 22, b"\x03\x03", sh), (100, 22, b"\x03\x03", b"\x0b" + b"\x00" * 50),
            (160, 20, b"\x03\x03", b"\x01"), (166, 22, b"\x03\x03", b"\x02" + b"\xee" * 39)]
    got = server_hellos(recs)
    assert [(h[0], h[1], h[3]) for h in got] == [(2, b"\x11" * 32, 0xC02B)]


def test_hello_retry_request_is_left_out():
    """TLS 1.3: a HelloRetryRequest (RFC 8446 4.1.3: a ServerHello whose random is the fixed
    SHA-256 of "HelloRetryRequest"), then the real ServerHello after the client's second hello."""
    hrr = _sh(_HRR_RANDOM, 0x0304, (ext(43, u16(0x0304)),))
    real = _sh(b"\x22" * 32, 0x0304, (ext(43, u16(0x0304)),))
    recs = [(0, 22, b"\x03\x03", hrr), (90, 20, b"\x03\x03", b"\x01")]
    assert server_hellos(recs) == []
    recs = [(0, 22, b"\x03\x03", hrr), (90, 22, b"\x03\x03", real), (190, 23, b"\x03\x03", b"\x00" * 40)]
    assert [(h[1], h[2], h[3]) for h in server_hellos(recs)] == [(b"\x22" * 32, 0x0304, 0x1301)]
