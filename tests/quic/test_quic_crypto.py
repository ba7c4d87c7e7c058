"""QUIC Initial protection (ext/tls/quic_crypto.h through webtap._ext.quiccut) against the test
vectors of RFC 9001 Appendix A (v1) and RFC 9369 Appendix A (v2), plus an independent
reference (the `cryptography` package's HKDF and AES-GCM) on random inputs."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from webtap._ext import quiccut as q

from .rfc_vectors import CLIENT_PAYLOAD, DCID, SERVER_PAYLOAD, V1, V2

VECTORS = pytest.mark.parametrize("vec", [V1, V2], ids=["v1", "v2"])


@VECTORS
def test_initial_secrets_and_keys(vec):
    cs, ss = q.initial_secrets(vec["version"], DCID)
    assert cs == vec["client_secret"]
    assert ss == vec["server_secret"]
    keys = q.initial_keys(vec["version"], DCID)
    assert keys["client"] == vec["client"]
    assert keys["server"] == vec["server"]


@VECTORS
@pytest.mark.parametrize("side", ["client", "server"])
def test_header_protection_mask(vec, side):
    assert q.hp_mask(vec[side]["hp"], vec[f"{side}_sample"]) == vec[f"{side}_mask"]


@VECTORS
@pytest.mark.parametrize("side", ["client", "server"])
def test_protect_gives_the_rfc_packet(vec, side):
    payload = CLIENT_PAYLOAD if side == "client" else SERVER_PAYLOAD
    pkt = q.protect(vec[f"{side}_header"], payload, DCID, sender=side)
    assert pkt[:len(vec[f"{side}_protected_header"])] == vec[f"{side}_protected_header"]
    assert pkt == vec[f"{side}_packet"]


@VECTORS
@pytest.mark.parametrize("side", ["client", "server"])
def test_open_the_rfc_packet(vec, side):
    header, pn, pt = q.open_packet(vec[f"{side}_packet"], DCID, sender=side)
    assert header == vec[f"{side}_header"]
    assert pn == (2 if side == "client" else 1)
    assert pt == (CLIENT_PAYLOAD if side == "client" else SERVER_PAYLOAD)


@VECTORS
def test_long_header_fields(vec):
    c = q.parse_long(vec["client_packet"])
    assert (c["version"], c["type"], c["dcid"], c["scid"], c["token"]) == (
        vec["version"], 0, DCID, b"", b"")
    assert c["length"] == 1182 and c["pn_offset"] == 18 and c["end"] == 1200
    s = q.parse_long(vec["server_packet"])
    assert (s["type"], s["dcid"], s["scid"], s["length"], s["end"]) == (
        0, b"", bytes.fromhex("f067a5502a4262b5"), 0x75, 135)


@VECTORS
def test_damage_is_refused(vec):
    pkt = bytearray(vec["client_packet"])
    pkt[600] ^= 1                                  # one ciphertext bit
    with pytest.raises(q.QuicError, match="decrypt"):
        q.open_packet(bytes(pkt), DCID)
    with pytest.raises(q.QuicError, match="decrypt"):  # keys from another DCID
        q.open_packet(vec["client_packet"], DCID[:-1] + b"\x00")
    with pytest.raises(q.QuicError, match="decrypt"):  # the other side's keys
        q.open_packet(vec["client_packet"], DCID, sender="server")


def test_every_truncation_is_an_error_not_a_crash():
    pkt = V1["client_packet"]
    for n in range(len(pkt)):
        with pytest.raises(q.QuicError) as e:
            q.open_packet(pkt[:n], DCID)
        assert e.value.reason in ("short", "truncated")


def test_versions_and_special_packets():
    vn = bytes.fromhex("80 00000000 08") + DCID + b"\x00" + bytes.fromhex("00000001 6b3343cf")
    assert q.parse_long(vn)["type"] == 4
    other = bytearray(V1["client_packet"])
    other[1:5] = b"\xfa\xce\xb0\x02"               # mvfst: not handled
    with pytest.raises(q.QuicError, match="version"):
        q.parse_long(bytes(other))
    with pytest.raises(q.QuicError, match="version"):
        q.initial_keys(0xFACEB002, DCID)
    with pytest.raises(q.QuicError, match="not_long"):
        q.parse_long(b"\x40" + bytes(30))
    # v1 Retry (type 3) and v2 Retry (type 0) have no Length: they end with the datagram
    retry1 = bytes.fromhex("f0 00000001 00 08") + DCID + b"token" + bytes(16)
    retry2 = bytes.fromhex("c0 6b3343cf 00 08") + DCID + b"token" + bytes(16)
    assert q.parse_long(retry1)["type"] == 3 and q.parse_long(retry1)["end"] == len(retry1)
    assert q.parse_long(retry2)["type"] == 3
    with pytest.raises(q.QuicError, match="cid"):
        q.parse_long(bytes.fromhex("c0 00000001 15") + bytes(40))


def _hkdf_expand_label(secret, label, length):
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand
    full = b"tls13 " + label
    info = length.to_bytes(2, "big") + bytes([len(full)]) + full + b"\x00"
    return HKDFExpand(hashes.SHA256(), length, info).derive(secret)


def _reference_keys(version, dcid):
    import hmac, hashlib
    salt = V1["initial_secret"] and (bytes.fromhex("38762cf7f55934b34d179ae6a4c80cadccbb7f0a")
                                     if version == 1 else
                                     bytes.fromhex("0dede3def700a6db819381be6e269dcbf9bd2ed9"))
    initial = hmac.new(salt, dcid, hashlib.sha256).digest()     # HKDF-Extract (RFC 5869 2.2)
    pre = b"quic " if version == 1 else b"quicv2 "
    out = {}
    for side, label in (("client", b"client in"), ("server", b"server in")):
        s = _hkdf_expand_label(initial, label, 32)
        out[side] = {"key": _hkdf_expand_label(s, pre + b"key", 16),
                     "iv": _hkdf_expand_label(s, pre + b"iv", 12),
                     "hp": _hkdf_expand_label(s, pre + b"hp", 16)}
    return out


@settings(max_examples=60, deadline=None)
@given(version=st.sampled_from([1, 0x6B3343CF]), dcid=st.binary(min_size=0, max_size=20),
       pn=st.integers(0, 2**32 - 1), aad=st.binary(max_size=64), pt=st.binary(max_size=300))
def test_against_cryptography(version, dcid, pn, aad, pt):
    pytest.importorskip("cryptography")  # installed with aioquic by the Makefile
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    keys = q.initial_keys(version, dcid)
    assert keys == _reference_keys(version, dcid)
    k = keys["server"]
    nonce = bytes(a ^ b for a, b in zip(k["iv"], pn.to_bytes(12, "big")))
    ct = q.aead_seal(k, pn, aad, pt)
    assert ct == AESGCM(k["key"]).encrypt(nonce, pt, aad)
    assert q.aead_open(k, pn, aad, ct) == pt
    sample = (pt + bytes(16))[:16]
    enc = Cipher(algorithms.AES(k["hp"]), modes.ECB()).encryptor()
    assert q.hp_mask(k["hp"], sample) == (enc.update(sample) + enc.finalize())[:5]


@VECTORS
def test_forged_close_opens_as_a_server_initial(vec):
    pkt = q.forge_close(vec["client_packet"])
    h = q.parse_long(pkt)
    assert h["version"] == vec["version"] and h["type"] == 0     # Initial, version's own code
    assert h["dcid"] == b"" and len(h["scid"]) == 8 and h["token"] == b""
    assert h["end"] == len(pkt)
    header, pn, frames = q.open_packet(pkt, DCID, sender="server")
    assert pn == 0
    reason = q.CLOSE_REASON.encode()
    assert frames == bytes([0x1C, q.CLOSE_ERROR, 0, len(reason)]) + reason
    assert q.forge_close(vec["client_packet"]) == pkt            # reproducible
    with pytest.raises(q.QuicError, match="decrypt"):            # not with the client's keys
        q.open_packet(pkt, DCID, sender="client")


def test_forged_close_refuses_what_is_not_a_client_initial():
    with pytest.raises(q.QuicError, match="arg"):                # a Handshake packet
        q.forge_close(V1["server_packet"][:0] + bytes.fromhex("e0 00000001 00 00 00 00"))
    for bad in (b"", b"\x40abc", V1["client_packet"][:30]):
        with pytest.raises(q.QuicError):
            q.forge_close(bad)


def test_open_under_keys_in_turns():
    """quic_aead_open keeps two GCM contexts keyed (the last used and the other one): packets
    under keys that come in turns, return after a third key, or follow a packet whose tag failed
    open to what cryptography's AESGCM sealed, and a damaged tag is refused under every order."""
    pytest.importorskip("cryptography")
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    keys = []
    for dcid in (b"\x83\x94\xc8\xf0\x3e\x51\x57\x08", b"\x01" * 20, b""):
        ks = _reference_keys(1, dcid)
        keys += [ks["client"], ks["server"]]
    order = [0, 1, 0, 1, 1, 0, 2, 0, 1, 3, 2, 3, 2, 4, 5, 0, 5, 4, 1, 1, 0]
    for step, i in enumerate(order):
        k = keys[i]
        pn = step * 7 + i
        aad = bytes([0xC3, step, i]) + b"header"
        pt = bytes((step * 31 + j) & 0xFF for j in range(40 + 13 * step))
        nonce = bytes(a ^ b for a, b in zip(k["iv"], pn.to_bytes(12, "big")))
        ct = AESGCM(k["key"]).encrypt(nonce, pt, aad)
        if step % 5 == 3:                     # a damaged tag first: refused, the context reusable
            bad = ct[:-1] + bytes([ct[-1] ^ 1])
            with pytest.raises(q.QuicError, match="decrypt"):
                q.aead_open(k, pn, aad, bad)
        assert q.aead_open(k, pn, aad, ct) == pt, (step, i)
        # the same packet opened under the other side's key of its DCID is refused
        with pytest.raises(q.QuicError, match="decrypt"):
            q.aead_open(keys[i ^ 1], pn, aad, ct)
