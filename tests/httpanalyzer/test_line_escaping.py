"""The line format escapes what would break a line (| CR LF \\ control characters): every line
has exactly 13 fields, and read_lines gives back the records' text, for arbitrary bytes in the
URI, the Host and the User-Agent (issue 16; 12 of 8,007 bench lines had more than 13 fields)."""
from __future__ import annotations

import io

from hypothesis import given, settings, strategies as st

from httpanalyzer import lines as linefmt
from httpanalyzer.pairing import Pairer
from tests.msgbuild import MsgBuilder

S = 1_000_000_000
#: bytes a span may hold (the builder puts them in the packet as they are)
field_bytes = st.binary(min_size=1, max_size=40)


def _records(uri: bytes, host: bytes, ua: bytes):
    b = MsgBuilder()
    b.req(10 * S, "10.0.0.1", 1234, "10.0.0.2", 80, 1, 9, uri=uri, host=host, ua=ua)
    b.resp(10 * S + 5, "10.0.0.2", 80, "10.0.0.1", 1234, 9, 2, reason="OK | fine")
    b.req(11 * S, "10.0.0.1", 1235, "10.0.0.2", 80, 1, 9, uri=ua, host=uri, ua=host)
    p = Pairer()
    p.feed(*b.build())
    p.flush()
    return p.take()


@settings(max_examples=200, deadline=None)
@given(field_bytes, field_bytes, field_bytes)
def test_round_trip_over_arbitrary_bytes(uri, host, ua):
    batch = _records(uri, host, ua)
    out = linefmt.format_lines(batch)
    lines = out.split(b"\n")
    assert lines[-1] == b"" and len(lines) == batch.num_rows + 1
    assert all(line.count(b"|") == 12 for line in lines[:-1])
    back = linefmt.read_lines(io.BytesIO(out))
    for name in ("uri", "host", "user_agent", "reason", "method"):
        want = [v if v else None for v in batch.column(name).to_pylist()]
        assert back.column(name).to_pylist() == want, name


def test_escapes_are_the_documented_ones():
    batch = _records(b"/a|b\\c\r\n\x01", b"h\x7f", b"ua")
    line = linefmt.format_lines(batch).split(b"\n")[0]
    assert b"/a\\x7cb\\\\c\\r\\n\\x01" in line and b"h\\x7f" in line
