# cython: freethreading_compatible = False
"""QUIC Initial protection from Python, and the URL filter's forged server Initial close.

The primitives are ext/tls/quic_crypto.h (OpenSSL libcrypto; cimport quic_crypto for nogil use).
The functions here wrap them one call at a time for the tests, the benchmark and the offline
tools; packet loops call the C functions directly.
"""
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc

from quic_crypto cimport (
    quic_keys_t, quic_long_hdr_t, quic_initial_secrets, quic_initial_keys, quic_hp_mask,
    quic_aead_seal, quic_aead_open, quic_parse_long, quic_open_packet, quic_protect,
    QUIC_OK, QUIC_E_SHORT, QUIC_E_NOT_LONG, QUIC_E_VERSION, QUIC_E_CID, QUIC_E_TRUNCATED,
    QUIC_E_DECRYPT, QUIC_E_CRYPTO, QUIC_E_FIXED_BIT, QUIC_E_ARG, QUIC_TAG_LEN,
)
from digest cimport wt_crypto_no_atexit

wt_crypto_no_atexit()   # no libcrypto clean-up at exit, when first (ext/out/digest.h)

V1 = 0x00000001
V2 = 0x6b3343cf

# quic_crypto.h's error codes by name (index = -code)
ERRORS = ("ok", "short", "not_long", "version", "cid", "truncated", "decrypt", "crypto",
          "fixed_bit", "arg")
assert -QUIC_E_ARG == len(ERRORS) - 1


class QuicError(ValueError):
    """A quic_crypto.h call failed; .reason is one of ERRORS."""
    def __init__(self, int code):
        self.reason = ERRORS[-code] if -len(ERRORS) < code <= 0 else str(code)
        super().__init__(f"QUIC: {self.reason}")


cdef inline int _check(int rc) except -1:
    if rc != QUIC_OK:
        raise QuicError(rc)
    return 0


cdef dict _keys_dict(const quic_keys_t *k):
    return {"key": bytes(k.key[:16]), "iv": bytes(k.iv[:12]), "hp": bytes(k.hp[:16])}


cdef quic_keys_t _keys_from(k) except *:
    cdef quic_keys_t out
    cdef bytes key = bytes(k["key"]), iv = bytes(k["iv"]), hp = bytes(k["hp"])
    if len(key) != 16 or len(iv) != 12 or len(hp) != 16:
        raise ValueError("keys: key 16, iv 12, hp 16 bytes")
    out.key[:16] = key
    out.iv[:12] = iv
    out.hp[:16] = hp
    return out


def initial_secrets(uint32_t version, const uint8_t[::1] dcid not None):
    """(client_initial_secret, server_initial_secret), 32 bytes each (RFC 9001 5.2)."""
    cdef uint8_t cs[32]
    cdef uint8_t ss[32]
    cdef int rc
    with nogil:
        rc = quic_initial_secrets(version, &dcid[0] if dcid.shape[0] else NULL, dcid.shape[0], cs, ss)
    _check(rc)
    return bytes(cs[:32]), bytes(ss[:32])


def initial_keys(uint32_t version, const uint8_t[::1] dcid not None):
    """{"client": {"key", "iv", "hp"}, "server": {...}} from the client's first DCID."""
    cdef quic_keys_t c, s
    cdef int rc
    with nogil:
        rc = quic_initial_keys(version, &dcid[0] if dcid.shape[0] else NULL, dcid.shape[0], &c, &s)
    _check(rc)
    return {"client": _keys_dict(&c), "server": _keys_dict(&s)}


def hp_mask(const uint8_t[::1] hp not None, const uint8_t[::1] sample not None):
    """The 5-byte header protection mask AES-ECB(hp, sample)[:5]."""
    cdef uint8_t mask[5]
    if hp.shape[0] != 16 or sample.shape[0] != 16:
        raise ValueError("hp and sample are 16 bytes")
    _check(quic_hp_mask(&hp[0], &sample[0], mask))
    return bytes(mask[:5])


def aead_seal(keys, uint64_t pn, const uint8_t[::1] aad not None, const uint8_t[::1] pt not None):
    """Ciphertext + 16-byte tag of AEAD_AES_128_GCM, nonce = iv XOR pn."""
    cdef quic_keys_t k = _keys_from(keys)
    cdef bytearray out = bytearray(pt.shape[0] + QUIC_TAG_LEN)
    cdef uint8_t *o = out
    _check(quic_aead_seal(&k, pn, &aad[0] if aad.shape[0] else NULL, aad.shape[0],
                          &pt[0] if pt.shape[0] else NULL, pt.shape[0], o))
    return bytes(out)


def aead_open(keys, uint64_t pn, const uint8_t[::1] aad not None, const uint8_t[::1] ct not None):
    """Plaintext of ciphertext + tag; QuicError("decrypt") if the tag does not verify."""
    cdef quic_keys_t k = _keys_from(keys)
    if ct.shape[0] < QUIC_TAG_LEN:
        raise QuicError(QUIC_E_TRUNCATED)
    cdef bytearray out = bytearray(ct.shape[0] - QUIC_TAG_LEN + 1)
    cdef uint8_t *o = out
    _check(quic_aead_open(&k, pn, &aad[0] if aad.shape[0] else NULL, aad.shape[0],
                          &ct[0], ct.shape[0], o))
    return bytes(out[:ct.shape[0] - QUIC_TAG_LEN])


def parse_long(const uint8_t[::1] pkt not None):
    """Long header fields of the packet at the start of pkt, as a dict; QuicError if malformed."""
    cdef quic_long_hdr_t h
    cdef const uint8_t *p = &pkt[0] if pkt.shape[0] else NULL
    _check(quic_parse_long(p, pkt.shape[0], &h))
    return {"version": h.version, "type": h.type, "first": h.first,
            "dcid": bytes(p[h.dcid_off:h.dcid_off + h.dcid_len]),
            "scid": bytes(p[h.scid_off:h.scid_off + h.scid_len]),
            "token": bytes(p[h.token_off:h.token_off + h.token_len]) if h.token_len else b"",
            "length": h.length, "pn_offset": h.pn_off, "end": h.end}


def open_packet(const uint8_t[::1] pkt not None, const uint8_t[::1] dcid not None, str sender="client"):
    """Open the first (long header) packet of pkt with the Initial keys derived from `dcid` (the
    client's first Destination Connection ID), for packets sent by `sender`.
    Returns (unprotected header, packet number, plaintext)."""
    cdef quic_long_hdr_t h
    cdef quic_keys_t c, s
    cdef const uint8_t *p = &pkt[0] if pkt.shape[0] else NULL
    cdef size_t hl = 0, pl = 0
    cdef uint64_t pn = 0
    cdef int rc
    _check(quic_parse_long(p, pkt.shape[0], &h))
    _check(quic_initial_keys(h.version, &dcid[0] if dcid.shape[0] else NULL, dcid.shape[0], &c, &s))
    cdef bytearray hdr = bytearray(h.pn_off + 4)
    cdef bytearray pt = bytearray(h.length + 1)
    cdef uint8_t *hp_ = hdr
    cdef uint8_t *pp = pt
    cdef const quic_keys_t *k = &c if sender == "client" else &s
    with nogil:
        rc = quic_open_packet(p, &h, k, hp_, &hl, pp, &pl, &pn)
    _check(rc)
    return bytes(hdr[:hl]), pn, bytes(pt[:pl])


def protect(const uint8_t[::1] header not None, const uint8_t[::1] payload not None,
            const uint8_t[::1] dcid not None, str sender="server"):
    """Protect a long header packet: `header` is the unprotected header ending with its packet
    number (length from the first byte's low bits), `payload` the frames. Keys are the Initial
    keys of `sender` derived from `dcid` (the client's first DCID) and the header's version."""
    cdef quic_long_hdr_t h
    cdef quic_keys_t c, s
    cdef size_t hl = header.shape[0], pn_len, i
    cdef uint64_t pn = 0
    if hl < 7:
        raise QuicError(QUIC_E_SHORT)
    pn_len = (header[0] & 3) + 1
    if hl < pn_len:
        raise QuicError(QUIC_E_ARG)
    cdef bytearray out = bytearray(hl + payload.shape[0] + QUIC_TAG_LEN)
    cdef uint8_t *o = out
    out[:hl] = header
    out[hl:hl + payload.shape[0]] = payload
    for i in range(pn_len):
        pn = (pn << 8) | header[hl - pn_len + i]
    _check(quic_parse_long(o, out.__len__(), &h))
    _check(quic_initial_keys(h.version, &dcid[0] if dcid.shape[0] else NULL, dcid.shape[0], &c, &s))
    _check(quic_protect(o, hl - pn_len, pn_len, payload.shape[0],
                        &c if sender == "client" else &s, pn))
    return bytes(out)


from quic_close cimport QUIC_CLOSE_MAX, QUIC_CLOSE_REASON, QUIC_CLOSE_ERROR, quic_forge_close

CLOSE_REASON = (<bytes>QUIC_CLOSE_REASON).decode()
CLOSE_ERROR = QUIC_CLOSE_ERROR


def forge_close(const uint8_t[::1] client_initial not None):
    """The protected server Initial carrying CONNECTION_CLOSE (0x1c) that answers the client
    Initial at the start of `client_initial` (a UDP payload). QuicError if it is not one."""
    cdef uint8_t out[256]
    cdef int n
    assert QUIC_CLOSE_MAX <= 256
    with nogil:
        n = quic_forge_close(&client_initial[0] if client_initial.shape[0] else NULL,
                             client_initial.shape[0], out, 256)
    _check(n if n < 0 else 0)
    return bytes(out[:n])
