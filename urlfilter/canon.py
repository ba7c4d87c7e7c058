"""Canonical URL form (rules R1-R9, documented in ext/url/urlcanon.h and docs/urlfilter.md).

The C canonicaliser accepts only ASCII hosts; this module converts IDN host names (raw UTF-8) to
punycode with Python's ``idna`` codec first, so ``bücher.de`` and ``xn--bcher-kva.de`` agree.
Packet-side matching never needs this: HTTP clients send punycode in the Host header.
"""
from __future__ import annotations

import re

import numpy as np

from urlfilter.errors import InvalidUrl
from webtap._ext.canon import CODES, canonicalize_batch, canonicalize_bytes, key_flip

__all__ = ["REASONS", "canonicalize", "to_key", "from_key", "canonicalize_many", "reason_of"]

#: names of the C canonicaliser's return codes (urlcanon.h), plus the tree's own: the table of
#: ext/url/canon.pyx, not a copy
REASONS = CODES

_AUTHORITY = re.compile(rb"^(\s*(?:[A-Za-z][A-Za-z0-9+.-]*://|//)?)([^/?#]*)(.*)$", re.S)


def reason_of(code: int) -> str:
    return REASONS.get(int(code), f"code_{int(code)}")


def _as_bytes(url) -> bytes:
    if isinstance(url, str):
        return url.encode("utf-8", "surrogateescape")
    return bytes(url)


def idna_host(url: bytes) -> bytes | None:
    """url with a non-ASCII host converted to punycode, or None when that is impossible or moot."""
    m = _AUTHORITY.match(url.strip())
    if not m:
        return None
    prefix, auth, rest = m.groups()
    if auth.isascii():
        return None
    userinfo, at, hostport = auth.rpartition(b"@")
    host, colon, port = hostport.partition(b":")
    try:
        ace = host.decode("utf-8").encode("idna")
    except (UnicodeError, ValueError):
        return None
    return prefix + userinfo + at + ace + colon + port + rest


def _canon(url, key: bool) -> bytes:
    b = _as_bytes(url)
    out, code = canonicalize_bytes(b, key)
    if code == -3:
        alt = idna_host(b)
        if alt is not None:
            out, code = canonicalize_bytes(alt, key)
    if code:
        raise InvalidUrl(b.decode("utf-8", "replace"), reason_of(code))
    return out


def canonicalize(url: str | bytes) -> str:
    """Canonical URL (str). Raises InvalidUrl."""
    return _canon(url, False).decode("ascii")


def to_key(url: str | bytes) -> bytes:
    """Key form (host labels reversed) of a URL, as stored in the tree. Raises InvalidUrl."""
    return _canon(url, True)


def from_key(key: bytes) -> str:
    """Canonical URL of a key."""
    return key_flip(key).decode("ascii")


def canonicalize_many(data: bytes, offsets, key: bool = False):
    """Canonicalise a batch in one C loop; non-ASCII hosts are retried through IDNA.

    Returns (urls, codes): a list of str (empty for rejected ones) and an int8 array of codes.
    """
    out, _, codes = canonicalize_batch(data, offsets, key, 10)
    urls = out.decode("ascii").split("\n")[:-1]
    retry = (codes == -3).nonzero()[0]
    if len(retry):
        offs = np.asarray(offsets, dtype=np.int64)
        for i in retry.tolist():
            alt = idna_host(bytes(data[offs[i]:offs[i + 1]]))
            if alt is not None:
                o, c = canonicalize_bytes(alt, key)
                if c == 0:
                    urls[i] = o.decode("ascii")
                    codes[i] = 0
    return urls, codes
