"""An independent reference for the canonical URL form, written from the rules R1-R9 as
docs/urlfilter.md and the header comment of ext/url/urlcanon.h state them (not from the C code, and
not through urlfilter/canon.py, which wraps the same C function). Plain, slow Python with regular
expressions and str methods: a second reading of the rules, so that the C canonicaliser and the
rules can be checked against each other.

``reference(url: bytes) -> bytes`` returns the canonical form, or raises ``Rejected(reason)``
with the reason name urlfilter.canon uses (empty, bad_char, bad_host, bad_port).
"""
from __future__ import annotations

import re

WHITESPACE = b" \t\r\n\x0b\x0c"
UNRESERVED = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
SUB_DELIMS = set(b"!$&'()*+,;=")
KEPT = UNRESERVED | SUB_DELIMS | set(b":@/?")         # R6: kept literally in path and query
HOST_BYTES = set(b"abcdefghijklmnopqrstuvwxyz0123456789-_.")
IPV6_BYTES = set(b"0123456789abcdef:.")
SCHEME = re.compile(rb"[A-Za-z][A-Za-z0-9+.\-]*://")
HEX = b"0123456789abcdefABCDEF"


class Rejected(ValueError):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _escape(c: int) -> bytes:
    return b"%%%02X" % c


def _r6(s: bytes) -> bytes:
    """R6 on one path segment or the query."""
    out = bytearray()
    i = 0
    while i < len(s):
        c = s[i]
        if c == 0x25:                                          # '%'
            if i + 2 < len(s) and s[i + 1] in HEX and s[i + 2] in HEX:
                v = int(s[i + 1:i + 3], 16)
                out += bytes([v]) if v in UNRESERVED else _escape(v)
                i += 3
                continue
            out += b"%25"
        elif c in KEPT:
            out.append(c)
        else:
            out += _escape(c)
        i += 1
    return bytes(out)


def _host(h: bytes) -> bytes:
    """R4 on the host (userinfo and port already gone)."""
    if h.startswith(b"["):                                      # IPv6 literal
        # R4 (docs/urlfilter.md): an IPv6 address in RFC 5952 text, read here by Python's
        # ipaddress (independent of the C parser); anything else in brackets is a bad host
        body = h[1:-1]
        if not h.endswith(b"]") or not body or any(c not in IPV6_BYTES for c in body.lower()):
            raise Rejected("bad_host")
        import ipaddress

        try:
            addr = ipaddress.IPv6Address(body.decode("ascii"))
        except ValueError:
            raise Rejected("bad_host") from None
        if addr.ipv4_mapped is not None:                        # RFC 5952 section 5
            return b"[::ffff:" + str(addr.ipv4_mapped).encode("ascii") + b"]"
        return b"[" + addr.compressed.encode("ascii") + b"]"
    decoded = bytearray()
    i = 0
    while i < len(h):
        if h[i] == 0x25:
            if i + 2 < len(h) and h[i + 1] in HEX and h[i + 2] in HEX:
                decoded.append(int(h[i + 1:i + 3], 16))
                i += 3
                continue
            raise Rejected("bad_host")                          # a '%' that is no escape
        decoded.append(h[i])
        i += 1
    host = bytes(decoded).lower()
    host = b".".join(label for label in host.split(b".") if label)   # trim and collapse dots
    if not host or any(c not in HOST_BYTES for c in host):
        raise Rejected("bad_host")
    return host


def _port(p: bytes | None) -> bytes:
    """R5."""
    if p is None or p == b"":
        return b""
    if not p.isdigit() or int(p) > 65535:
        raise Rejected("bad_port")
    n = int(p)
    return b"" if n in (80, 443) else b":%d" % n


def _path(p: bytes) -> bytes:
    """R6 then R7 on the path (the part from the authority's end to the query)."""
    segs: list[bytes] = []
    for raw in p.split(b"/"):
        if not raw:
            continue                                            # empty segments collapse
        seg = _r6(raw)
        if seg == b".":
            continue
        if seg == b"..":
            if segs:
                segs.pop()
            continue
        segs.append(seg)
    return b"".join(b"/" + s for s in segs)


def reference(url: bytes, key: bool = False) -> bytes:
    s = url.strip(WHITESPACE)                                   # R1
    if not s:
        raise Rejected("empty")
    if any(c <= 0x20 or c == 0x7F for c in s):
        raise Rejected("bad_char")
    m = SCHEME.match(s)                                         # R2
    if m:
        s = s[m.end():]
    elif s.startswith(b"//"):
        s = s[2:]
    m = re.match(rb"[^/?#]*", s)                                # R3: the authority
    auth, rest = s[:m.end()], s[m.end():]
    hostport = auth.rpartition(b"@")[2]
    if hostport.startswith(b"["):                              # R5: where the port starts
        close = hostport.find(b"]")
        if close < 0:
            raise Rejected("bad_host")
        host, after = hostport[:close + 1], hostport[close + 1:]
        if after and not after.startswith(b":"):
            raise Rejected("bad_host")
        port = after[1:] if after else None
    else:
        host, colon, port = hostport.rpartition(b":")
        if not colon:
            host, port = port, None
    host = _host(host)
    if key and not host.startswith(b"["):
        host = b".".join(reversed(host.split(b".")))
    out = host + _port(port)
    rest = rest.partition(b"#")[0]                              # R8: the fragment
    path, qmark, query = rest.partition(b"?")
    out += _path(path)
    if query:                                                   # R8: an empty query goes
        out += b"?" + _r6(query)
    return out                                                  # R9: host[:port][/seg]*[?query]
