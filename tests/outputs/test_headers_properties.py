"""Property tests of the chosen-header scan (ext/walk/httphdr.c) through the pairing table: header
blocks drawn at random, values checked against the documented rules written out in Python, and
random bytes after a first line (no crash, every value a trimmed piece of the packet)."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from httpanalyzer.pairing import Pairer
from webtap._ext.dissect import parse_http_payload

NAMES = ["Referer", "X-A", "content-type", "K"]
TOKEN = "abcKXYZ-_0123456789!#$%&'*+.^`|~"


def _run(payload: bytes, names=NAMES):
    data = np.frombuffer(payload, np.uint8).copy()
    r, m = parse_http_payload(data)
    if int(m["kind"]) == 0:
        return None
    msgs = np.array([m])
    msgs["ts_ns"] = 1_000_000_000
    msgs["ip_version"] = 4
    msgs["src_ip"][0][:4] = [10, 0, 0, 1]
    msgs["dst_ip"][0][:4] = [10, 0, 0, 2]
    msgs["src_port"], msgs["dst_port"] = 40000, 80
    p = Pairer(headers=names)
    p.feed(msgs, data)
    p.flush()
    b = p.take()
    assert b.num_rows == 1
    side = "request" if int(m["kind"]) == 1 else "response"
    return side, {n: b.column(f"{side}_{n.lower().replace('-', '_')}")[0].as_py() for n in names}, \
        b.column(f"{side}_headers_incomplete")[0].as_py()


line = st.tuples(
    st.one_of(st.sampled_from(NAMES + ["referer", "REFERER", "x-a", "Referer ", "Other"]),
              st.text(TOKEN, min_size=1, max_size=8)),
    st.sampled_from([":", ": ", ":\t ", " :"]),
    st.text(st.characters(codec="latin-1", exclude_characters="\r\n"), max_size=20),
    st.sampled_from(["", " ", "\t "]),
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["GET / HTTP/1.1", "HTTP/1.1 200 OK"]), st.lists(line, max_size=8),
       st.sampled_from(["\r\n", "\n", "\r"]), st.sampled_from(["end", "none", "cut"]),
       st.booleans())
def test_values_follow_the_rules(first, lines, eol, ending, colonless):
    body = [f"{n}{sep}{v}{trail}" for n, sep, v, trail in lines]
    if colonless:
        body.insert(len(body) // 2, "no colon here")
    text = first + eol + "".join(b + eol for b in body)
    if ending == "end":
        text += eol
    elif ending == "cut" and body:
        text = text[:-len(eol)]                       # the last line has no end in the packet
    payload = text.encode("latin-1")
    out = _run(payload)
    assert out is not None
    _, got, incomplete = out
    want = {n: "" for n in NAMES}
    seen = set()
    flag = ending != "end"                  # no empty line in the packet: the block goes on
    for i, b in enumerate(body):
        if ":" not in b:
            # the block ends here (tshark's rule), unless this line is the one cut short
            flag = ending == "cut" and i == len(body) - 1
            break
        name, _, value = b.partition(":")
        for n in NAMES:
            if name.lower() == n.lower() and n not in seen:
                seen.add(n)
                want[n] = _table_text(value.strip(" \t"))
    assert got == want
    assert incomplete == flag


def _table_text(s: str) -> str:
    """The table's text of these bytes: valid UTF-8 kept, any other byte as ISO-8859-1."""
    b = s.encode("latin-1").decode("utf-8", "surrogateescape")
    return "".join(chr(ord(c) - 0xDC00) if 0xDC80 <= ord(c) <= 0xDCFF else c for c in b)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_header_bytes(tail):
    payload = b"GET /x HTTP/1.1\r\n" + tail
    out = _run(payload, ["a", "Host", "x-y"])
    assert out is not None
    _, got, _ = out
    text = payload.decode("latin-1")
    for v in got.values():
        assert v is not None
        if v:
            assert v == v.strip(" \t") and "\r" not in v and "\n" not in v
            assert v.encode("latin-1", "ignore") in payload or v.encode() in payload or v in text
