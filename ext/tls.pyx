# cython: freethreading_compatible = False
"""TLS first flight (issue 17): ClientHello / ServerHello of any TCP stream -> handshake records.

The parser and the fingerprints are C headers (ext/tls_hello.h, ext/tls_fp.h, declared in
ext/tls.pxd); this module holds the Python-facing helpers and the record stage.
"""
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset
from libc.stdlib cimport malloc, free

from tls cimport *


def parse_hello(const uint8_t[::1] payload, str proto="t"):
    """Parse one TCP payload that starts a TLS hello (test and inspection helper, not a hot path).

    Returns (status, dict) where status is 'ok', 'incomplete', 'not_tls', 'not_hello',
    'bad_length', 'too_long' or 'bad_record'; the dict has the hello's fields (lists of ints,
    text as bytes) and its JA3/JA3S and JA4 strings when status is 'ok'.
    """
    cdef tls_hello h
    cdef const uint8_t *msg = NULL
    cdef uint8_t *scratch = <uint8_t *>malloc(TLS_HELLO_CAP)
    cdef uint16_t *s16 = <uint16_t *>malloc(2 * 32768 * sizeof(uint16_t))
    cdef char *text = <char *>malloc(6 * 32768 + 16)
    cdef char *ja3 = <char *>malloc(6 * 32768 * 3 + 64)
    cdef char ja3h[33]
    cdef char ja4[37]
    cdef char ja4r[8192]
    cdef uint16_t ks[256]
    cdef uint32_t n = payload.shape[0], r, k, nk
    cdef bytes msgb
    cdef char pc
    try:
        if scratch == NULL or s16 == NULL or text == NULL or ja3 == NULL:
            raise MemoryError()
        with nogil:
            r = tls_parse_payload(&payload[0] if n else NULL, n, scratch, TLS_HELLO_CAP, &h, &msg)
        names = {TLS_OK: "ok", TLS_INCOMPLETE: "incomplete", TLS_NOT_TLS: "not_tls",
                 TLS_NOT_HELLO: "not_hello", TLS_BAD_LENGTH: "bad_length",
                 TLS_TOO_LONG: "too_long", TLS_BAD_RECORD: "bad_record"}
        d = {"hs_type": h.hs_type, "hs_len": h.hs_len}
        if r != TLS_OK:
            return names[r], d
        msgb = bytes((<const uint8_t *>msg)[:4 + h.hs_len])

        def span(tls_span s):
            return msgb[s.off:s.off + s.len]

        def u16s(tls_span s):
            b = span(s)
            return [int.from_bytes(b[i:i + 2], "big") for i in range(0, len(b) - 1, 2)]

        alpn_raw = span(h.alpn)
        alpn = []
        i = 0
        while i < len(alpn_raw):
            ln = alpn_raw[i]
            alpn.append(alpn_raw[i + 1:i + 1 + ln])
            i += 1 + ln
        with nogil:
            nk = tls_key_share_groups(msg, &h, ks, 256)
        d.update(
            legacy_version=h.legacy_version, version=h.version, cipher=h.cipher,
            hrr=bool(h.flags & TLSF_HRR), ech=bool(h.flags & TLSF_ECH),
            has_sni=bool(h.flags & TLSF_SNI), has_alpn=bool(h.flags & TLSF_ALPN),
            sni=span(h.sni) if h.sni.len else None, alpn=alpn,
            ciphers=u16s(h.ciphers), groups=u16s(h.groups), sig_algs=u16s(h.sig_algs),
            point_formats=list(span(h.point_formats)),
            versions=u16s(h.versions), key_share_groups=[ks[k] for k in range(nk)],
            flags=h.flags,
        )
        ex = []
        q = h.exts.off
        e = h.exts.off + h.exts.len
        while e - q >= 4:
            el = int.from_bytes(msgb[q + 2:q + 4], "big")
            if e - q - 4 < el:
                break
            ex.append(int.from_bytes(msgb[q:q + 2], "big"))
            q += 4 + el
        d["extensions"] = ex
        with nogil:
            k = tls_ja3_string(msg, &h, ja3, 6 * 32768 * 3 + 64)
            if k:
                tls_md5_hex(ja3, k, ja3h)
        d["ja3_string"] = ja3[:k].decode() if k else None
        d["ja3"] = ja3h[:32].decode() if k else None
        if h.hs_type == 1:
            pc = <char>ord(proto[0])
            with nogil:
                k = tls_ja4(msg, &h, pc, s16, text, 6 * 32768 + 16, ja4, ja4r, 8192)
            d["ja4"] = ja4[:36].decode() if k else None
            d["ja4_r"] = ja4r.decode() if k else None
        return "ok", d
    finally:
        free(scratch)
        free(s16)
        free(text)
        free(ja3)
