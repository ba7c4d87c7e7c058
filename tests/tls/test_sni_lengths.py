"""The server_name extension's length fields, crafted byte by byte (RFC 6066 section 3, inside
the ClientHello's extensions of RFC 8446 4.1.2/4.2): what the SNI IS, or that there is none, for
the off-by-one lengths and the lengths that overrun their container. Checked through the three
places that read it: the TLS stage's parser (parse_hello), the TLS records (analyze_tls) and the
filter's SNI pass (SniTable.extract, with its counters).

RFC 6066: ``struct { NameType name_type; select (name_type) { case host_name: HostName; } name; }
ServerName; struct { ServerName server_name_list<1..2^16-1> } ServerNameList;`` with
``opaque HostName<1..2^16-1>``. So a name is read only when its 3-byte header and all of its
bytes lie inside the list, and the list only inside the extension; the first non-empty host_name
(type 0) is the SNI ("MUST NOT contain more than one name of the same name_type": a second one
is ignored)."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from httpanalyzer import analyze_tls
from tests.quic.hello import frame, write
from tests.tls import hellobuild as hb
from webtap._ext import urlmatch as um
from webtap._ext.tls import parse_hello
from webtap.capture import open_trace

NAME = b"evil.example"
# an ALPN extension after server_name: bytes read past the server_name extension would be its
# type (00 10) and length -- deterministic, so a wrong length check shows as a wrong SNI
ALPN = hb.alpn_ext([b"h2"])


def entry(name: bytes, *, ntype: int = 0, nl: int | None = None) -> bytes:
    return struct.pack("!BH", ntype, len(name) if nl is None else nl) + name


def sn(body: bytes, *, ll: int | None = None, tail: bytes = b"") -> bytes:
    """server_name extension: list length ll (default: the body's) + body + tail, the extension
    length always the true one of what follows its header."""
    data = struct.pack("!H", len(body) if ll is None else ll) + body + tail
    return struct.pack("!HH", 0, len(data)) + data


# (case, extensions, the SNI RFC 6066 gives: bytes, or None for no host_name)
CASES = [
    ("plain", [sn(entry(NAME)), ALPN], NAME),
    ("one_byte_name", [sn(entry(b"a")), ALPN], b"a"),
    # list length 2 beyond the extension, name length 2 beyond its bytes: the list is clamped
    # to the extension, so the name does not fit (without the clamp: 'evil.example\x00\x10')
    ("list_len_beyond_extension", [sn(entry(NAME, nl=len(NAME) + 2), ll=3 + len(NAME) + 2), ALPN],
     None),
    # list length beyond the extension but the name inside it: the name is read
    ("list_len_beyond_extension_name_inside", [sn(entry(NAME), ll=3 + len(NAME) + 5), ALPN], NAME),
    # the name exactly fills the list (its last byte is the list's last byte)
    ("name_fills_list_exactly", [sn(entry(NAME), tail=b"X"), ALPN], NAME),
    # the name one byte longer than the list (the extra byte is in the extension, after the list)
    ("name_one_past_list", [sn(entry(NAME, nl=len(NAME) + 1), ll=3 + len(NAME), tail=b"X"), ALPN],
     None),
    # ... and one byte longer than the list when the list ends the whole message
    ("name_one_past_message_end", [ALPN, sn(entry(NAME, nl=len(NAME) + 1), ll=3 + len(NAME))],
     None),
    # the list one byte too short for the name
    ("list_one_short", [sn(entry(NAME), ll=3 + len(NAME) - 1), ALPN], None),
    # entry headers that do not fit: a list of 2 bytes, an extension of 4
    ("entry_header_cut", [sn(b"\x00\x00"), ALPN], None),
    ("extension_of_two_bytes", [struct.pack("!HH", 0, 2) + b"\x00\x00", ALPN], None),
    ("empty_extension", [struct.pack("!HH", 0, 0), ALPN], None),
    # a zero-length host_name (HostName<1..>: not a name) then a real one
    ("empty_then_name", [sn(entry(b"") + entry(b"b.example")), ALPN], b"b.example"),
    ("empty_only", [sn(entry(b"")), ALPN], None),
    # another name_type first (not host_name), then the host_name
    ("other_type_first", [sn(entry(b"other", ntype=1) + entry(NAME)), ALPN], NAME),
    ("other_type_only", [sn(entry(NAME, ntype=1)), ALPN], None),
    # two host_names: the first one is the SNI
    ("two_host_names", [sn(entry(b"first.example") + entry(b"second.example")), ALPN],
     b"first.example"),
    # 1-2 bytes left in the list after the name: not an entry, ignored
    ("list_tail_two_bytes", [sn(entry(NAME) + b"\x00\x00"), ALPN], NAME),
    # a list length of zero with a name after it in the extension: the list is empty
    ("list_len_zero", [sn(entry(NAME), ll=0), ALPN], None),
]


@pytest.mark.parametrize("case,exts,want", CASES, ids=[c[0] for c in CASES])
def test_parser_sni_is_what_rfc_6066_gives(case, exts, want):
    msg = hb.client_hello(exts=exts)
    status, d = parse_hello(hb.records(msg))
    assert status == "ok" and d["has_sni"] is True
    assert d["sni"] == want
    # every extension was walked (the bad lengths are inside server_name, not around it)
    assert d["extensions"] == [struct.unpack("!H", e[:2])[0] for e in exts]


def test_server_name_extension_overrunning_the_extensions_block():
    """An extension length beyond the extensions block: the walk stops there (RFC 8446 4.2:
    the block holds whole extensions); no SNI is read from bytes outside it."""
    body = entry(NAME)
    bad = struct.pack("!HHH", 0, 2 + len(body) + 1, len(body)) + body    # el one past the block
    msg = hb.client_hello(exts=[bad])
    status, d = parse_hello(hb.records(msg))
    assert status == "ok" and d["sni"] is None and d["has_sni"] is False
    assert d["extensions"] == []


def test_server_hello_server_name_is_not_an_sni():
    """RFC 6066: the server's server_name extension is empty (it only acknowledges)."""
    msg = hb.server_hello(exts=[struct.pack("!HH", 0, 0), hb.ext(43, b"\x03\x04")])
    status, d = parse_hello(hb.records(msg))
    assert status == "ok" and d["has_sni"] is True and d["sni"] is None


def test_tls_records_carry_the_same_sni(tmp_path):
    """The TLS stage's records (analyze_tls), one connection per case, in case order."""
    p = tmp_path / "sni.pcap"
    hb.handshake_pcap(p, [{"ch": hb.records(hb.client_hello(exts=exts)), "sh": None}
                          for _, exts, _ in CASES])
    df = analyze_tls(str(p)).sort_values("client_port")
    assert len(df) == len(CASES)
    got = [None if (s is None or s != s) else s for s in df.sni.tolist()]
    assert got == [None if w is None else w.decode() for _, _, w in CASES]


def test_filter_sni_pass_reads_the_same_sni(tmp_path):
    """urlfilter's SNI pass (SniTable.extract over TLS-over-TCP frames): a row whose SNI and key
    are those RFC 6066 gives, or no row and the hello counted under no_sni -- never sni_bad
    (which a name run into the next extension's bytes would be)."""
    frames = [frame(hb.records(hb.client_hello(exts=exts)), sport=20000 + i)
              for i, (_, exts, _) in enumerate(CASES)]
    write(tmp_path / "sni.pcap", frames)
    t = um.SniTable()
    rows = {}
    cnt = np.zeros(len(um.SNI_REASONS), np.uint64)
    for b in open_trace(str(tmp_path / "sni.pcap")):
        msgs, proto, flags, keys, koff, sni, soff, c = t.extract(b.packets, b.data, False)
        cnt += c
        for i in range(len(msgs)):
            rows[int(msgs["src_port"][i])] = (bytes(sni[soff[i]:soff[i + 1]]),
                                              bytes(keys[koff[i]:koff[i + 1]]))
    want = {20000 + i: w for i, (_, _, w) in enumerate(CASES) if w is not None}
    assert {p: s for p, (s, _) in rows.items()} == want
    # key form: labels reversed (docs/urlfilter.md), port 443 dropped (urlcanon.h R5)
    assert {p: k for p, (_, k) in rows.items()} == {
        p: b".".join(reversed(w.split(b"."))) for p, w in want.items()}
    c = dict(zip(um.SNI_REASONS, cnt.tolist()))
    assert c["client_hellos"] == len(CASES)
    assert c["no_sni"] == len(CASES) - len(want)
    assert c["sni_bad"] == 0 and c["sni_non_ascii"] == 0 and c["sni_extracted"] == len(want)
