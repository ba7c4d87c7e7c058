"""Fuzz targets: one ``check_<name>(data: bytes)`` per parser of webtap (issue 10).

Each target feeds arbitrary bytes to one parser and checks more than "no crash": every output
index stays inside its input, every input unit is accounted for by a counter, and, where a
reference exists, the result agrees with it (the tree against a dict model, the batch
canonicaliser against the single one, the canonical form against itself). An AssertionError or
any unexpected exception is a finding; the parsers' documented rejections (NotACapture,
InvalidUrl, ...) are not.

The same functions serve the atheris driver (tests/fuzz/run.py, ``make fuzz``), its smoke runs
in ``make test`` and the regression tests that replay every input ever found
(tests/fuzz/regressions/<target>/).
"""
from __future__ import annotations

import gzip
import os
import re
import struct
import tempfile

import numpy as np

TARGETS = ("source", "dissect", "encap", "http", "segment", "canon", "blacklist", "tree", "urlbase",
           "tls", "quic", "sni", "exchange", "rules", "truth")


# ---------------------------------------------------------------------------------------------
# source: the pcap/pcapng reader (ext/read/source.pyx FileReader, webtap.capture for gzip)

def check_source(data: bytes) -> None:
    from webtap._ext import source as _source
    from webtap.capture import NotACapture, open_trace
    from webtap.records.message import PACKET_DTYPE, SOURCE_REASONS

    if data[:2] == b"\x1f\x8b":
        # gzip: through the file path (webtap.capture._GzipStream), as a user would meet it
        fd, path = tempfile.mkstemp(prefix="wtfuzz", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        try:
            os.write(fd, data)
            os.close(fd)
            try:
                with open_trace(path, chunk_size=2 * 1024 * 1024) as t:
                    n = sum(len(b) for b in t)
                    assert n == t.counters["packets"]
            except NotACapture:
                pass
        finally:
            os.unlink(path)
        return
    # The first byte picks the batch size, so that batches end at every possible place.
    batch = 1 + (data[0] % 7) if data else 1
    try:
        r = _source.FileReader(data, None, "<fuzz>", True)
    except NotACapture:
        return
    size = len(data)
    total = 0
    calls = 0
    last_index = -1
    while not r.eof:
        pk = np.zeros(batch, dtype=PACKET_DTYPE)
        n = r.read_into(pk)
        calls += 1
        # Every call makes progress: at most one call per byte (and one more to see the end).
        assert calls <= size + 2, "reader does not progress"
        assert not r.need_more, "need_more on a final buffer"
        pk = pk[:n]
        if n:
            end = pk["offset"].astype(np.int64) + pk["caplen"].astype(np.int64)
            assert (pk["offset"] >= 16).all() and (end <= size).all(), "packet outside the buffer"
            idx = pk["index"].astype(np.int64)
            assert idx[0] > last_index and (np.diff(idx) > 0).all(), "indices not increasing"
            last_index = int(idx[-1])
        total += n
        assert r.position <= size
    c = dict(zip(SOURCE_REASONS, r.counters))
    assert c["packets"] == total
    assert c["skipped_bytes"] <= size
    assert c["captured_bytes"] <= size


def seeds_source(shared: str | None) -> list[bytes]:
    """Small real captures (whole, when short, else their first 3 KB) and built edge cases."""
    from tests import pcapbuild as pb

    out = []
    pkt = _http_packets()
    out.append(pb.pcap([(i * 1000, p) for i, p in enumerate(pkt)]))
    out.append(pb.pcap([(i * 1000, p) for i, p in enumerate(pkt)], nano=True, big_endian=True))
    out.append(pb.shb() + pb.idb(tsresol=9) + b"".join(pb.epb(0, i, p) for i, p in enumerate(pkt))
               + pb.spb(pkt[0]) + pb.unknown_block())
    out.append(pb.shb(big_endian=True) + pb.idb(big_endian=True) + pb.epb(0, 5, pkt[1], big_endian=True))
    out.append(gzip.compress(out[0], mtime=0))
    for path in _shared_files(shared, "traces", (".pcap", ".pcapng", ".cap"), 12):
        with open(path, "rb") as f:
            out.append(f.read(3000))
    return out


# ---------------------------------------------------------------------------------------------
# dissect: link -> IP -> TCP -> HTTP (ext/walk/dissect.pyx dissect_batch, span/IP columns)

_LINKTYPES = (1, 101, 113, 276, 0, 108, 228, 229, 12, 14, 147, 239, 100, 9, 50, 51, 104)
# 239 NFLOG, 100 LLC/SNAP, 9/50/51/104 PPP, PPP in HDLC framing, PPPoE without Ethernet, Cisco HDLC


def check_dissect(data: bytes) -> None:
    from webtap import dissect as wd
    from webtap.records.message import (DISSECT_REASONS, ENCAP_NAMES, MSG_REQUEST, MSG_RESPONSE, PACKET_DTYPE,
                               SPAN_FIELDS)

    if len(data) < 2:
        return
    # Header: link type, then packets split at 0xFF 0x00 0xFF markers (so the fuzzer can make
    # several packets of one batch); a packet ref may overhang the buffer (flag bit).
    lt = _LINKTYPES[data[0] % len(_LINKTYPES)]
    overhang = data[1] & 1
    body = data[2:]
    parts = body.split(b"\xff\x00\xff")[:64]
    buf = np.frombuffer(b"".join(parts), dtype=np.uint8)
    pk = np.zeros(len(parts), dtype=PACKET_DTYPE)
    off = 0
    for i, p in enumerate(parts):
        pk[i]["offset"] = off
        pk[i]["caplen"] = len(p) + (40 if overhang and i == len(parts) - 1 else 0)
        pk[i]["wirelen"] = len(p) + (data[1] >> 1)
        pk[i]["linktype"] = lt
        pk[i]["index"] = i
        off += len(p)
    reasons = np.zeros(len(parts), dtype=np.uint8)
    mb = wd.dissect(pk, buf, reasons)
    c = mb.counters
    assert c["packets"] == len(parts)
    per_reason = np.bincount(reasons, minlength=len(DISSECT_REASONS))
    # every packet ends in exactly one terminal reason (the message flags are counted apart)
    terminal = [k for k in DISSECT_REASONS[1:12]] + ["http_request", "http_response"]
    assert sum(c[k] for k in terminal) == len(parts), c
    assert c["http_request"] + c["http_response"] == int(per_reason[12] + per_reason[13])
    assert len(mb) == (c["http_request"] + c["http_response"] + c["mid_segment_request"]
                       + c["mid_segment_response"] + c["after_continuation_request"]
                       + c["after_continuation_response"])
    m = mb.msgs
    size = len(buf)
    for i in range(len(m)):
        row = m[i]
        assert row["kind"] in (MSG_REQUEST, MSG_RESPONSE)
        base = int(row["pkt_offset"])
        pend = base + int(row["payload_off"]) + int(row["payload_caplen"])
        assert pend <= size, "payload outside the buffer"
        for f in SPAN_FIELDS:
            o, ln = int(row[f]["off"]), int(row[f]["len"])
            if ln:
                # spans are packet-relative (ext/walk/message.pxd) and lie inside the payload
                p0 = int(row["payload_off"])
                assert p0 <= o and o + ln <= p0 + int(row["payload_caplen"]), f"span {f} outside the payload"
        # encapsulation: encap_depth codes, one per byte, each a known layer; outer version 0/4/6
        enc, depth = int(row["encap"]), int(row["encap_depth"])
        codes = [(enc >> (8 * j)) & 0xFF for j in range(8)]
        assert all(codes[:depth]) and not any(codes[depth:]), (enc, depth)
        assert all(0 < c < len(ENCAP_NAMES) for c in codes[:depth])
        assert int(row["outer_ip_version"]) in ((0, 4, 6) if depth else (0,))
    # every layer of every packet that gave messages was counted (the counters count packets:
    # the messages that start inside one segment share its packet and its layers)
    first = {}
    for i in range(len(m)):
        first.setdefault(int(m[i]["pkt_offset"]), int(m[i]["encap"]))
    for code in range(1, len(ENCAP_NAMES)):
        seen = sum(((e >> (8 * j)) & 0xFF) == code for e in first.values() for j in range(8))
        assert c["encap_" + ENCAP_NAMES[code]] >= seen
    for f in SPAN_FIELDS:
        assert len(mb.column(f)) == len(m)
        assert len(mb.column(f, "tshark")) == len(m)
    assert len(mb.column("encap_text")) == len(m)
    assert len(mb.column("outer_src")) == len(m)
    assert len(mb.column("src_ip")) == len(m)
    assert len(mb.column("dst_ip")) == len(m)


def seeds_dissect(shared: str | None) -> list[bytes]:
    out = [bytes([0, 0]) + b"\xff\x00\xff".join(_http_packets())]
    # one built packet per encapsulation (tests/dissect/test_encap.py), grouped by link type
    from tests.dissect.test_encap import CASES

    for lt in sorted({c[1] for c in CASES.values()}):
        frames = [c[0] for c in CASES.values() if c[1] == lt]
        out.append(bytes([_LINKTYPES.index(lt), 0]) + b"\xff\x00\xff".join(frames))
    for path in _shared_files(shared, "traces", (".pcap",), 12):
        pk = _first_packets(path, 4)
        if pk:
            lt, frames = pk
            if lt in _LINKTYPES:
                out.append(bytes([_LINKTYPES.index(lt), 0]) + b"\xff\x00\xff".join(frames))
    return out


# ---------------------------------------------------------------------------------------------
# encap: the link/IP/TCP walk through tunnels (ext/walk/l34.c, via ext/walk/dissect.pyx l34_batch)

_ENCAP_LINKTYPES = (1, 239, 100, 113, 101, 9, 50, 51, 104)


def check_encap(data: bytes) -> None:
    """One packet (first byte: link type; second: user-named UDP port set or not): the walk
    stays inside the packet, records at most L34_MAX_ENCAP known layers (or gives up counted),
    and a TCP segment it reports lies inside the capture."""
    from webtap._ext.dissect import l34_batch, set_tunnel_ports
    from webtap.records.message import DISSECT_REASONS, ENCAP_NAMES, PACKET_DTYPE

    if len(data) < 2:
        return
    lt = _ENCAP_LINKTYPES[data[0] % len(_ENCAP_LINKTYPES)]
    user = data[1] & 1
    pkt = data[2:]
    buf = np.frombuffer(pkt, dtype=np.uint8) if pkt else np.zeros(0, np.uint8)
    pk = np.zeros(1, dtype=PACKET_DTYPE)
    pk[0]["caplen"] = len(pkt)
    pk[0]["wirelen"] = len(pkt)
    pk[0]["linktype"] = lt
    if user:
        # port 1024 + byte 1 carries GRE, VXLAN, Geneve, GTP-U, Teredo or AYIYA
        set_tunnel_ports([(1024 + data[1], (1, 4, 5, 6, 7, 8)[(data[1] >> 1) % 6])])
    try:
        w = l34_batch(pk, buf)[0]
    finally:
        if user:
            set_tunnel_ports([])
    depth, enc = int(w["encap_depth"]), int(w["encap"])
    codes = [(enc >> (8 * j)) & 0xFF for j in range(8)]
    if depth == 0xFF:
        assert all(codes) and DISSECT_REASONS[int(w["reason"])] == "not_ip"
    else:
        assert depth <= 8 and all(codes[:depth]) and not any(codes[depth:]), (depth, enc)
    assert all(0 <= c < len(ENCAP_NAMES) for c in codes)
    r = int(w["reason"])
    assert r == 255 or r < len(DISSECT_REASONS)
    if r == 255:
        assert w["tcp_ok"] and w["ip_version"] in (4, 6)
    if r == 255 or DISSECT_REASONS[r] in ("no_payload",):
        assert w["tcp_ok"]


def seeds_encap(shared: str | None) -> list[bytes]:
    from tests.dissect.test_encap import CASES

    out = []
    for frame, lt, *_rest in CASES.values():
        out.append(bytes([_ENCAP_LINKTYPES.index(lt), 0]) + frame)
    return out


# ---------------------------------------------------------------------------------------------
# http: the first-line and header parser (ext/walk/dissect.pyx parse_http_payload)

def check_http(data: bytes) -> None:
    from webtap.dissect import parse_http
    from webtap.records.message import (METHOD_NAMES, MSGF_EV_DOUBLE_ENCODED, MSGF_EV_HOST_MISMATCH,
                                        MSGF_EV_LONG_HEADER_LINE, MSGF_EV_LONG_REQUEST_LINE,
                                        MSGF_EV_MANY_FIELDS, SPAN_FIELDS)

    _EV_REQUEST_ONLY = (MSGF_EV_DOUBLE_ENCODED | MSGF_EV_HOST_MISMATCH | MSGF_EV_LONG_HEADER_LINE
                        | MSGF_EV_LONG_REQUEST_LINE | MSGF_EV_MANY_FIELDS)

    if not data:
        return
    wire = len(data) + (data[0] % 3) * 100
    res = parse_http(data[1:], wire)
    payload = data[1:]
    if res is None:
        return
    for f in SPAN_FIELDS:
        o, ln = res[f + "_span"]
        assert o + ln <= len(payload), f"span {f} outside the payload"
    if res["kind"] == "request":
        name = METHOD_NAMES[res["method_id"]] if res["method_id"] < len(METHOD_NAMES) else None
        o, ln = res["method_span"]
        assert ln > 0
        if name is not None:
            # RFC 2774's "M-" prefix is part of the token, as in tshark
            assert payload[o:o + ln] in (name.encode(), b"M-" + name.encode()), (name, payload[o:o + ln])
        # evasion bits (ext/walk/evasion.c): double encoding is exactly "%25" + two hex digits
        # in the target span; an over-long request line is one over 8190 bytes
        o, ln = res["uri_span"]
        dbl = re.search(rb"%25[0-9A-Fa-f]{2}", payload[o:o + ln]) is not None
        assert bool(res["flags"] & MSGF_EV_DOUBLE_ENCODED) == dbl, payload[o:o + ln]
        if res["flags"] & MSGF_EV_LONG_REQUEST_LINE:
            assert len(payload) > 8190
    else:
        assert 0 <= res["status"] <= 999
        assert res["flags"] & _EV_REQUEST_ONLY == 0, res["flags"]     # never on responses


def seeds_http(shared: str | None) -> list[bytes]:
    out = [b"\0" + p for p in (
        b"GET /a/b?c=1 HTTP/1.1\r\nHost: www.example.com\r\nUser-Agent: x/1\r\n\r\n",
        b"POST / HTTP/1.0\nhost:a\n\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 404 Not Found\r\nServer: y\r\n",
        b"PROPFIND /x HTTP/1.1\r\nHost: [::1]:8080\r\nHost: b\r\n\r\n",
        b"M-SEARCH * HTTP/1.1\r\n\r\n",
    )]
    for path in _shared_files(shared, "traces", (".pcap",), 20):
        pk = _first_packets(path, 40)
        if pk:
            for f in pk[1]:
                i = max(f.find(b"GET "), f.find(b"HTTP/1."))
                if i >= 0:
                    out.append(b"\0" + f[i:i + 600])
    return out[:40]


# ---------------------------------------------------------------------------------------------
# segment: the messages after a first one in one TCP segment (ext/walk/dissect.pyx _more_messages),
# and after a header block continued from an earlier segment (ext/walk/httpcont.c)

_SEG_SEQ = 0xFFFFFF00          # near the wrap: seq + offset must wrap modulo 2^32


def check_segment(data: bytes) -> None:
    """One Ethernet/IPv4/TCP packet whose payload is data[1:] (data[0] picks the direction and a
    snaplen cut): the messages found partition the payload from its first byte (each one's seq
    is the previous one's + its payload_len, modulo 2^32), every message after the first is
    flagged MSGF_MID_SEGMENT and starts where a message may start, spans stay inside the
    message's own bytes, and the counters add up. When the payload starts no message, a first
    message found after a continued header block (MSGF_AFTER_CONTINUATION, and every one after
    it) starts strictly (a whole status line, or a request line ending in HTTP/d.d), and the
    feeder's reader routes the packet by it (classify_batch: same kind, same SEQ)."""
    from tests.dissect._scapy_batches import batch_from_raw
    from webtap.dissect import dissect
    from webtap._ext.feeder import classify_batch
    from webtap.records.message import MSGF_AFTER_CONTINUATION, MSGF_MID_SEGMENT, SPAN_FIELDS

    if not data:
        return
    payload = data[1:]
    sport, dport = (40000, 80) if data[0] & 1 else (80, 40000)
    frame = _tcp_frame(payload, sport, dport, _SEG_SEQ, 7)
    cut = len(frame) - (data[0] >> 1) % 4 * 7 if data[0] & 6 else len(frame)
    cut = max(cut, 54)
    pk, buf = batch_from_raw([(frame[:cut], 1, 0, len(frame))])
    mb = dissect(pk, buf)
    c, m = mb.counters, mb.msgs
    assert len(m) == (c["http_request"] + c["http_response"] + c["mid_segment_request"]
                      + c["mid_segment_response"] + c["after_continuation_request"]
                      + c["after_continuation_response"])
    fp = classify_batch(pk, buf)[0]
    assert len(fp) == (1 if len(m) else 0)
    if len(m) == 0:
        return
    assert int(fp["kind"][0]) == int(m[0]["kind"]) and int(fp["seq"][0]) == int(m[0]["seq"])
    assert not int(m[0]["flags"]) & MSGF_MID_SEGMENT
    after = int(m[0]["flags"]) & MSGF_AFTER_CONTINUATION
    assert all(bool(int(x["flags"]) & MSGF_AFTER_CONTINUATION) == bool(after) for x in m)
    if after:
        at = int(m[0]["seg_off"])
        assert c["not_http"] == 1 and at > 0
        line = payload[at:].split(b"\n")[0].split(b"\r")[0]
        if line == b"" and payload[at:at + 2] == b"\r\n":
            line = payload[at + 2:].split(b"\n")[0].split(b"\r")[0]
        assert (line[:5] == b"HTTP/" and line[8:9] == b" " and line[9:12].isdigit()) or \
            (line[-9:-3] == b" HTTP/" and line[-1:].isdigit()), line
    else:
        assert int(m[0]["seq"]) == _SEG_SEQ
    for i in range(len(m)):
        row = m[i]
        po, pc, pl = int(row["payload_off"]), int(row["payload_caplen"]), int(row["payload_len"])
        assert po + pc <= cut and pc <= pl
        assert int(row["seq"]) == (_SEG_SEQ + po - 54) % (1 << 32)
        assert int(row["seg_off"]) == po - 54          # seq - seg_off: the packet's SEQ
        if i:
            prev = m[i - 1]
            assert int(row["flags"]) & MSGF_MID_SEGMENT
            assert po == int(prev["payload_off"]) + int(prev["payload_len"])
            head = frame[po:po + 5]
            assert head[:2] == b"\r\n" or head.lower().startswith(b"http/") or head[:1].isupper(), head
        for f in SPAN_FIELDS:
            o, ln = int(row[f]["off"]), int(row[f]["len"])
            if ln:
                assert po <= o and o + ln <= po + pc, f"span {f} outside its message"
    last = m[len(m) - 1]
    assert int(last["payload_off"]) + int(last["payload_len"]) == len(frame)


def seeds_segment(shared: str | None) -> list[bytes]:
    get = b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n"
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"
    return [b"\x01" + get * 3,
            b"\x01" + b"POST /p HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc" + get,
            b"\x01" + b"POST /p HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nT: 1\r\n\r\n" + get,
            b"\x00" + ok + b"HTTP/1.1 100 Continue\r\n\r\n" + ok,
            b"\x00" + b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n" + ok,
            b"\x00" + b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\nhttp/1.1 204 No\r\n\r\n",
            b"\x04" + ok * 4,
            b"\x01" + get + b"\r\n",
            b"\x01" + b"GET / HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\nxGET\n\nGET\n\n",
            # continued header blocks (issue 31): the tail of a split block, then messages
            b"\x01" + b"t: x\r\nAccept: */*\r\n\r\n" + get * 2,
            b"\x01" + b"T /x HTTP/1.1\r\nHost: h\r\n\r\n" + get + b"GE",
            b"\x00" + b"Type: t\r\nContent-Length: 2\r\n\r\nhi" + ok + ok,
            b"\x00" + b"e: 1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n" + ok,
            b"\x01" + b"\n" + get,
            b"\x01" + b"ngth: 3\r\n\r\n" + get]


# ---------------------------------------------------------------------------------------------
# canon: the URL canonicaliser (ext/url/urlcanon.h through ext/url/canon.pyx)

def check_canon(data: bytes) -> None:
    from webtap._ext import canon as _c

    res = {}
    for key in (False, True):
        out, code = _c.canonicalize_bytes(data, key)
        res[key] = (out, code)
        if code:
            assert -5 <= code <= -1 and code in _c.CODES and out == b""   # webtap_canon: -1..-5
            continue
        assert len(out) <= 3 * len(data) + 8
        assert out.isascii() and not any(b <= 0x20 or b == 0x7F for b in out), out
        again, code2 = _c.canonicalize_bytes(out, False) if not key else (None, 0)
        if not key:
            assert code2 == 0 and again == out, f"not idempotent: {data!r} -> {out!r} -> {again!r} ({code2})"
    assert res[True][1] == res[False][1]
    for key in (False, True):       # the header's fast path and its full rules agree
        assert _c.canonicalize_bytes(data, key, 1) == res[key], (data, key)
    if res[False][1] == 0:
        assert _c.key_flip(res[False][0]) == res[True][0]
        assert _c.key_flip(res[True][0]) == res[False][0]
    # the batch form over the lines of data equals the single form
    lines = data.split(b"\n")
    flat = b"".join(lines)
    fo = np.concatenate(([0], np.cumsum([len(x) for x in lines]))).astype(np.int64)
    out, oo, codes = _c.canonicalize_batch(flat, fo, True)
    for i, ln in enumerate(lines[:16]):
        one, code = _c.canonicalize_bytes(ln, True)
        assert codes[i] == code and out[oo[i]:oo[i + 1]] == one


def seeds_canon(shared: str | None) -> list[bytes]:
    out = [b"http://User@WWW.Example.COM:0080/a/./b/../%7e%2fc//d?q=%zz#frag",
           b"  //a..b.:443/%2e%2E/x?", b"HTTPS://[2001:db8::1]:8080/p", b"xn--bcher-kva.ch/\xc3\xa9",
           b"a.b/%41%4g%", b"https://bank.com@evil.net/"]
    for path in _shared_files(shared, "blacklists", ("urls.gz", "domains.gz", ".gz", ".csv"), 10):
        head = _head(path, 4000)
        out.extend(x for x in head.split(b"\n")[1:5] if x)
    return out


# ---------------------------------------------------------------------------------------------
# blacklist: the list / CSV line parser (urlfilter.importers) into a Store

def check_blacklist(data: bytes) -> None:
    from urlfilter import importers
    from urlfilter.store import Store

    if not data:
        return
    fmt = "csv" if data[0] & 1 else "list"
    body = data[1:]
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as d:
        path = os.path.join(d, "fuzzcat" + (".csv" if fmt == "csv" else ""))
        with open(path, "wb") as f:
            f.write(body)
        store = Store(":memory:")
        try:
            try:
                res = importers.import_path(store, path, fmt=fmt)
            except importers.NotAList as exc:
                # documented (docs/CLI.md, urlfilter import): a file that is not a text list (a
                # capture, binary data: more than 5 % control bytes in its head) is refused whole,
                # with the reason, before anything is stored
                assert "not a text list" in str(exc), exc
                assert store.count() == 0
                return
            except OSError as exc:
                # documented: a file that cannot be read (here: a damaged gzip) raises OSError
                assert body[:2] == b"\x1f\x8b" and "gzip" in str(exc), exc
                return
            for r in res:
                r.check()
                if fmt == "list":
                    n_lines = body.count(b"\n") + (1 if body and not body.endswith(b"\n") else 0)
                    assert r.lines == n_lines, (r.lines, n_lines)
            added = sum(r.added for r in res)
            assert store.count() == added
        finally:
            store.close()


def seeds_blacklist(shared: str | None) -> list[bytes]:
    out = [b"\0example.com\n# comment\n  ! also\nwww.a.b/x/y?z\n\nbad host!\n\xc3\xa9.fr\n",
           b"\1url,category\nhttp://a.b/,adult\n\"x,y\",z\nc.d\n"]
    for path in _shared_files(shared, "blacklists", ("urls.gz", "domains.gz", ".gz", ".csv"), 8):
        head = _head(path, 3000)
        out.append((b"\1" if path.endswith(".csv") else b"\0") + head[:head.rfind(b"\n") + 1])
    return out


# ---------------------------------------------------------------------------------------------
# tree: random operations on the URL tree checked against a dict model (as the hypothesis
# state machine of tests/urlfilter/test_tree.py), then its snapshot saved, reloaded, and damaged
# in one byte, which UrlTree.load must refuse (the header's CRC-32).

_LABELS = (b"a", b"b", b"ab", b"xn--bcher-kva", b"10", b"A")
_SEGS = (b"x", b"y", b"xy", b".", b"..", b"", b"%78", b"%2F", b"Q")
_PORTS = (b"", b"", b":80", b":8080", b":443")
_QUERIES = (b"", b"?", b"?q", b"?q=1", b"?q=/x")


class _Bytes:
    """A tiny FuzzedDataProvider that also works without atheris (regressions, smoke)."""

    def __init__(self, data: bytes):
        self.d = data
        self.i = 0

    def left(self) -> int:
        return len(self.d) - self.i

    def byte(self) -> int:
        if self.i >= len(self.d):
            return 0
        self.i += 1
        return self.d[self.i - 1]

    def pick(self, seq):
        return seq[self.byte() % len(seq)]

    def raw(self, n: int) -> bytes:
        s = self.d[self.i:self.i + n]
        self.i += len(s)
        return s


def _url(b: _Bytes) -> bytes:
    if b.byte() == 0xFF:                      # now and then a raw, probably invalid URL
        return b.raw(b.byte() % 24)
    host = b".".join(b.pick(_LABELS) for _ in range(1 + b.byte() % 3))
    path = b"".join(b"/" + b.pick(_SEGS) for _ in range(b.byte() % 4))
    return host + b.pick(_PORTS) + path + b.pick(_QUERIES)


def check_tree(data: bytes) -> None:
    from tests.strategies import naive_prefix
    from urlfilter.canon import to_key
    from urlfilter.errors import InvalidUrl
    from urlfilter.tree import UrlTree

    b = _Bytes(data)
    t = UrlTree()
    model: dict[bytes, tuple[int, int, int]] = {}
    ops = 0
    while b.left() and ops < 200:
        ops += 1
        op = b.byte() % 7
        u = _url(b)
        try:
            k = to_key(u)
        except InvalidUrl:
            k = None
        live = {v[0]: kk for kk, v in model.items()}
        if op in (0, 1):
            cat, per = b.byte(), b.byte() % 4
            if k is None:
                try:
                    t.insert(u, cat, per)
                except InvalidUrl:
                    continue
                raise AssertionError(f"insert accepted {u!r}, which to_key rejects")
            uid, created = t.insert(u, cat, per)
            assert created == (k not in model)
            if created:
                assert uid not in live
                model[k] = (uid, cat, per)
            else:
                assert uid == model[k][0]
        elif op == 2 and k is not None:
            want = model[k][0] if k in model else 0
            assert t.delete(u) == want
            model.pop(k, None)
        elif op == 3:
            uid = b.byte() % (len(model) + 3)
            assert t.delete_id(uid) == (uid in live)
            if uid in live:
                del model[live[uid]]
        elif op == 4 and k is not None:
            uid = b.byte() % (len(model) + 3)
            if uid in live and not (k in model and model[k][0] != uid):
                t.update(uid, url=u)
                model[k] = model.pop(live[uid])
            else:
                try:
                    t.update(uid, url=u)
                except KeyError:
                    pass
                else:
                    raise AssertionError("update onto a taken key or a dead id accepted")
        elif op == 5 and k is not None:
            best = naive_prefix(model, k)
            assert t.match(u) == (model[best][0] if best is not None else 0)
            assert t.find(u) == (model[k][0] if k in model else 0)
        elif op == 6:
            cat = b.byte() | (b.byte() << 8)
            uid = b.byte() % (len(model) + 3)
            if uid in live:
                t.update(uid, category=cat, period=1)
                model[live[uid]] = (uid, cat, 1)
        if ops % 16 == 0:
            t.check()
    assert len(t) == len(model)
    t.check()
    for k, (uid, cat, per) in model.items():
        assert t.get_key(uid) == k
        assert t.payload(uid) == (cat, per)
    if model:
        from urlfilter.canon import from_key

        keys = list(model)
        got = t.match_many([from_key(k) for k in keys])
        assert got.tolist() == [model[k][0] for k in keys]
    # the snapshot: a round trip loads the same tree; the input's last bytes damage one byte of
    # the file, which load() must refuse (CRC-32 in the header), never map
    import tempfile

    with tempfile.TemporaryDirectory(prefix="fuzz-snap-") as d:
        path = os.path.join(d, "t.snap")
        t.save(path, tag=ops)
        u = UrlTree.load(path)
        assert len(u) == len(model) and u.tag == ops
        if model:
            assert u.match_many([from_key(k) for k in keys]).tolist() == got.tolist()
        del u
        raw = bytearray(open(path, "rb").read())
        pos = (b.byte() | (b.byte() << 8) | (b.byte() << 16)) % len(raw)
        flip = b.byte() or 1
        raw[pos] ^= flip
        with open(path, "wb") as f:
            f.write(raw)
        try:
            UrlTree.load(path)
        except ValueError:
            pass
        else:
            raise AssertionError(f"snapshot with byte {pos} ^ {flip:#x} loaded")


def seeds_tree(shared: str | None) -> list[bytes]:

    rng = np.random.default_rng(7)
    out = [bytes(rng.integers(0, 256, 400, dtype=np.uint8)) for _ in range(4)]
    return out


# ---------------------------------------------------------------------------------------------
# urlbase: the reader of the URL store's base image (ext/url/urlbase.h wt_base_open, issue 35,
# format WTURLB02: the packed index of heads + offsets, first records taking bytes from their
# head; the delta runs are the same encoding, built in-process and never read from outside). A
# corrupt image must be refused with a ValueError naming the reason, never crash or let a
# lookup read outside it; an accepted image must answer consistently (every key it lists is
# found under its own id, in ascending order, and prefix matches equal the naive rule on its
# keys). First byte: 0 = the rest is a whole image; else the rest edits a valid image built
# from a few keys (pairs of offset, value bytes), so that most inputs get past the magic.

_URLBASE_KEYS = [b"com.example", b"com.example/a", b"com.example/a/b?x", b"com.example.www/z",
                 b"net.evil", b"org.x/" + b"y" * 40, b"[::1]/a", b"org.x:8080/p"] + \
    [b"com.example.abc/" + t for t in (b"a", b"ab", b"abc/d", b"b", b"b/x", b"c" * 10, b"c" * 10 + b"/1",
                                        b"d/shared-part-1/e", b"d/shared-part-1/f", b"d/shared-part-2",
                                        b"e", b"e/f/g", b"f", b"g/h", b"h", b"i")]
# (the last 16 share their first 16 bytes: in blocks of 4, a run of 4 blocks whose heads tie, so
# that the tie table, ext/url/urlbase.h wt_base_ties_build, is built and scanned on edited images)


def _urlbase_image(cache={}):       # noqa: B006 (built once per process)
    if "img" not in cache:
        from urlfilter.urlstore import build_store
        from webtap._ext.avl import key_to_url

        s, _ = build_store([key_to_url(k) for k in _URLBASE_KEYS], categories=np.arange(len(_URLBASE_KEYS)) % 3,
                            block=4)
        path = tempfile.mktemp(prefix="wtfuzz-base", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        s.save(path)
        with open(path, "rb") as f:
            cache["img"] = f.read()
        os.unlink(path)
    return cache["img"]


def check_urlbase(data: bytes) -> None:
    from tests.strategies import naive_prefix
    from urlfilter.urlstore import UrlStore

    if not data:
        return
    if data[0] == 0:
        img = data[1:]
    else:
        img = bytearray(_urlbase_image())
        body = data[1:]
        for j in range(0, len(body) - 2, 3):
            pos = (body[j] << 8 | body[j + 1]) % len(img)
            img[pos] = body[j + 2]
        img = bytes(img)
    try:
        s = UrlStore.from_image(img)
    except ValueError as e:
        assert str(e).startswith(("URL base corrupt:", "not a URL base")), e
        return
    kv = s.keys_with_ids()
    keys = [k for k, _ in kv]
    assert keys == sorted(set(keys)), "keys not ascending"
    assert len(keys) == len(s)
    for k, i in kv:
        assert s.find_key(k) == i and s.get_key(i) == k and s.prefix_key(k) == i
        assert s.payload(i) is not None
    model = dict(kv)
    queries = keys + [k + b"/q" for k in keys] + [k[:-1] for k in keys if len(k) > 1] + _URLBASE_KEYS
    for q in queries:
        best = naive_prefix(model, q)
        assert s.prefix_key(q) == (model[best] if best is not None else 0), q
    # the store built on it stays usable: inserts flushed into delta runs (tree cap 1: every
    # insert after the first flushes, the runs merge by size, into this base too), a delete, a
    # merge
    s.tree_cap = 1
    for k in (b"org.new/x", b"org.new/y", b"com.example/a/c"):
        s.insert_key(k)
        assert s.get_key(s.find_key(k)) == k
    if keys:
        s.delete_key(keys[0])
    s.check()
    s.merge()
    assert s.find_key(b"org.new/x") > 0 and (not keys or keys[0] == b"com.example/a/c" or s.find_key(keys[0]) == 0)


def seeds_urlbase(shared: str | None) -> list[bytes]:
    img = _urlbase_image()
    out = [b"\0" + img, b"\0" + img[:100], b"\1", b"\1" + bytes([0, 70, 0x31, 0, 9, 0xFF])]
    rng = np.random.default_rng(11)
    for _ in range(6):
        n = int(rng.integers(1, 8))
        edits = b"".join(bytes([int(p) >> 8, int(p) & 0xFF, int(v)])
                         for p, v in zip(rng.integers(0, len(img), n), rng.integers(0, 256, n)))
        out.append(b"\1" + edits)
    # edits aimed at format 02's index (a block's offset, its head, the end entry) and at the
    # first record's header (how many bytes it takes from the head)
    n, _blob, _tag, _block, nb, pal_n, pal_bits = struct.unpack_from("<QQQIIII", img, 8)
    a8 = lambda x: (x + 7) & ~7                                   # noqa: E731
    o_ix = a8(a8(64 + 2048 + 256) + 8 * pal_n)
    o_rec = a8(o_ix + 20 * (nb + 1)) + ((n * pal_bits + 63) // 64) * 8
    for pos, val in ((o_ix + 20 + 16, 0), (o_ix + 20 + 16, 0xFF), (o_ix + 20 * nb, 0), (o_ix + 3, 0x7F),
                     (o_ix + 20 * nb + 16, 1), (o_rec, 0x22), (o_rec, 0x40), (o_rec + 1, 0)):
        out.append(b"\1" + bytes([pos >> 8, pos & 0xFF, val]))
    return out


# ---------------------------------------------------------------------------------------------
# helpers

def _http_packets() -> list[bytes]:
    """Ethernet/IPv4/TCP frames of a small HTTP exchange (built by hand: no scapy import)."""
    def frame(payload: bytes, sport: int, dport: int, flags: int = 0x18) -> bytes:
        tcp = struct.pack("!HHIIBBHHH", sport, dport, 1, 1, 5 << 4, flags, 65535, 0, 0)
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), 1, 0, 64, 6, 0,
                         bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]))
        return b"\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\x08\x00" + ip + tcp + payload
    return [frame(b"GET /x?y HTTP/1.1\r\nHost: a.example\r\nUser-Agent: f\r\n\r\n", 40000, 80),
            frame(b"HTTP/1.1 200 OK\r\nServer: s\r\n\r\n", 80, 40000),
            frame(b"", 40000, 80, 0x10)]


def _shared_files(shared: str | None, sub: str, suffixes, limit: int) -> list[str]:
    if not shared:
        return []
    root = os.path.join(shared, sub)
    found = []
    for dirpath, _dirs, files in sorted(os.walk(root)):
        for name in sorted(files):
            if name.endswith(suffixes) or name in suffixes:
                found.append(os.path.join(dirpath, name))
    found.sort(key=lambda p: (os.path.getsize(p), p))
    # spread over sizes: a few of the smallest and a few larger ones
    step = max(1, len(found) // limit)
    return found[::step][:limit]


def _head(path: str, n: int) -> bytes:
    """The first n bytes of a file, inflated when it is gzip-compressed."""
    with open(path, "rb") as f:
        magic = f.read(2)
    opener = gzip.open if magic == b"\x1f\x8b" else open
    with opener(path, "rb") as f:
        return f.read(n)


def _first_packets(path: str, n: int):
    """(linktype, first n frames) of a classic pcap, or None."""
    try:
        from webtap.capture import open_trace

        with open_trace(path) as t:
            for b in t:
                lt = int(b.packets["linktype"][0]) if len(b) else 1
                return lt, [b.packet(i) for i in range(min(n, len(b)))]
    except Exception:
        return None
    return None



# ---------------------------------------------------------------------------------------------
# tls / quic: the TLS hello parser (ext/tls/tls_hello.h via parse_hello) and the TLS record stage
# (ext/tls/tls.pyx TlsTable: reassembly of split hellos, QUIC Initial decryption, CRYPTO gathering)

_TLS_STATUS = {"ok", "incomplete", "not_tls", "not_hello", "bad_length", "too_long", "bad_record"}


def _frames_through_table(frames: list[bytes]) -> None:
    """Feed Ethernet frames to a TlsTable (small caps so eviction paths run) and check the
    records: as many as the counters say, every text column valid, spans never past the input."""
    from webtap.records.tls import to_table
    from webtap._ext.tls import TlsTable
    from webtap.records.message import PACKET_DTYPE

    buf = np.frombuffer(b"".join(frames), dtype=np.uint8)
    pk = np.zeros(len(frames), dtype=PACKET_DTYPE)
    off = 0
    for i, f in enumerate(frames):
        pk[i]["offset"] = off
        pk[i]["caplen"] = pk[i]["wirelen"] = len(f)
        pk[i]["linktype"] = 1
        pk[i]["index"] = i
        pk[i]["ts_ns"] = 10**18 + i * 1000
        off += len(f)
    t = TlsTable(gc_timeout=1.0, max_pending=4, max_reassembly=2, max_quic=2)
    t.feed(pk, buf)
    t.flush()
    tab = to_table(*t.take())
    c = t.counters()
    assert c["packets"] == len(frames)
    assert tab.num_rows == c["paired"] + c["client_hello_unmatched"] + c["server_hello_unmatched"] \
        - c["paired"] * 0
    assert t.pending == 0 and t.reassembling == 0
    for name in ("sni", "alpn", "ja3", "ja4", "client_ip"):
        tab[name].to_pylist()
    _streamed_takes(pk, buf)


def _frame_key(row):
    first = row["request_frame"] if row["request_frame"] is not None else row["response_frame"]
    return (first, row["response_frame"] if row["response_frame"] is not None else 0)


def _streamed_takes(pk, buf) -> None:
    """The same packets one at a time into two tables: one taken whole at the end, one taken
    after each packet below TlsTable.ready_before (the rest kept in the table, issue 29). The
    second's tables in turn are the first's rows in the stable frame order (Python's sort)."""
    from webtap.records.tls import to_table
    from webtap._ext.tls import TlsTable

    whole = TlsTable(gc_timeout=1.0, max_pending=4, max_reassembly=2, max_quic=2)
    parts = TlsTable(gc_timeout=1.0, max_pending=4, max_reassembly=2, max_quic=2)
    got = []
    for i in range(len(pk)):
        whole.feed(pk[i:i + 1], buf)
        parts.feed(pk[i:i + 1], buf)
        got.append(parts.take(before=parts.ready_before))
    whole.flush()
    parts.flush()
    got.append(parts.take(ordered=True))
    ref = to_table(*whole.take()).to_pylist()
    ref.sort(key=_frame_key)
    rows = [r for p in got if len(p[0]) for r in to_table(*p).to_pylist()]
    assert rows == ref


def _tcp_frame(payload: bytes, sport: int, dport: int, seq: int, ack: int) -> bytes:
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, 0x18, 65535, 0, 0)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), 1, 0, 64, 6, 0,
                     bytes([10, 0, 0, 1]) if sport > 1024 else bytes([10, 0, 0, 2]),
                     bytes([10, 0, 0, 2]) if sport > 1024 else bytes([10, 0, 0, 1]))
    return b"\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\x08\x00" + ip + tcp + payload


def _udp_frame(payload: bytes, sport: int, dport: int) -> bytes:
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp) + len(payload), 1, 0, 64, 17, 0,
                     bytes([10, 0, 0, 1]) if sport > 1024 else bytes([10, 0, 0, 2]),
                     bytes([10, 0, 0, 2]) if sport > 1024 else bytes([10, 0, 0, 1]))
    return b"\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\x08\x00" + ip + udp + payload


def check_tls(data: bytes) -> None:
    from webtap._ext.tls import parse_hello, server_version

    status, d = parse_hello(data)
    assert status in _TLS_STATUS, status
    # the exchange stage's ServerHello version reader says what the parser says
    sv = server_version(data)
    if status == "ok" and d["hs_type"] == 2:
        assert sv == ("ok", d["version"], d["hrr"]), (sv, d["version"], d["hrr"])
    else:
        assert sv[0] != "ok", sv
    if status == "ok":
        assert d["hs_type"] in (1, 2)
        assert d["sni"] is None or 0 < len(d["sni"]) <= len(data)
        assert sum(len(a) for a in d["alpn"]) <= len(data)
        assert d["ja3"] is None or len(d["ja3"]) == 32
        if d["hs_type"] == 1:
            assert d["ja4"] is None or len(d["ja4"]) == 36
        if d["sslv2"]:
            # an SSLv2-format ClientHello: 3-byte specs, 16-32 byte challenge, no fingerprints
            assert data[0] & 0x80 and d["hs_type"] == 1 and d["extensions"] == []
            assert all(0 <= c < 1 << 24 for c in d["ciphers"]) and 16 <= len(d["random"]) <= 32
            assert len(d["session_id"]) <= 32 and d["ja3"] is None and d["ja4"] is None
    # the same bytes as a client's first flight over TCP, cut in up to three segments at
    # places the input picks, then as a server's reply
    cuts = sorted({min(len(data), b * 7) for b in data[:2]})
    parts, prev = [], 0
    for c in cuts + [len(data)]:
        parts.append(data[prev:c])
        prev = c
    frames, seq = [], 1000
    for part in parts:
        if part:
            frames.append(_tcp_frame(part, 40000, 443, seq, 5000))
            seq += len(part)
    frames.append(_tcp_frame(data, 443, 40000, 5000, seq))
    _frames_through_table(frames)


def seeds_tls(shared: str | None) -> list[bytes]:
    from tests.tls import hellobuild as hb

    out = [hb.records(hb.chrome_like()), hb.records(hb.chrome_like(), max_frag=200),
           hb.records(hb.server_hello(exts=[hb.ext(43, b"\x03\x04")])),
           hb.records(hb.client_hello(version=0x0300, exts=None)),
           # issue 31: an SSLv2-format ClientHello; whole records of other types before a hello
           # (alone and split); an early TLS 1.3 draft ServerHello with 0x0304
           hb.sslv2_client_hello(), hb.sslv2_client_hello(version=0x0002, session_id=b"\x01" * 16,
                                                          challenge=b"\x02" * 32),
           hb.record(21, b"\x01\x70") + hb.record(24, b"\x01\x00\x01x") + hb.records(hb.server_hello()),
           hb.record(20, b"\x01") + hb.record(21, bytes(26)) + hb.records(hb.chrome_like(), max_frag=300),
           hb.records(hb.draft_server_hello(exts=[hb.ext(51, b"\x00\x1d\x00\x01\x01")]))]
    return out


# ---------------------------------------------------------------------------------------------
# exchange: the TLS record walk and the exchange rules (ext/pair/exchange.pyx, issue 33)

def check_exchange(data: bytes) -> None:
    """A TCP conversation: a ClientHello opens it, then the input's parts (split at FF 00 FF)
    go client, server, client, ... each acknowledging all the other side sent; the first byte
    of a part (odd) makes it a retransmission of the side's previous part. Checked: every record
    is accounted for by a counter, frames point into the trace, the Arrow table builds."""
    from httpanalyzer.tls_exchange import ExchangeRun, exchange_table
    from tests.tls import hellobuild as hb
    from webtap.records.message import PACKET_DTYPE

    parts = data.split(b"\xff\x00\xff")[:24]
    ch = hb.records(hb.client_hello(exts=[hb.sni_ext(b"f.test")]))
    frames = [_tcp_frame(ch, 40000, 443, 1000, 5000)]
    seq = {"c": 1000 + len(ch), "s": 5000}
    last = {"c": None, "s": None}
    for i, p in enumerate(parts):
        side = "s" if i % 2 == 0 else "c"
        other = "c" if side == "s" else "s"
        sp, dp = (443, 40000) if side == "s" else (40000, 443)
        if p and p[0] & 1 and last[side] is not None:
            frames.append(_tcp_frame(last[side][1], sp, dp, last[side][0], seq[other]))
            continue
        frames.append(_tcp_frame(p, sp, dp, seq[side] & 0xFFFFFFFF, seq[other] & 0xFFFFFFFF))
        last[side] = (seq[side] & 0xFFFFFFFF, p)
        seq[side] += len(p)
    buf = np.frombuffer(b"".join(frames), dtype=np.uint8)
    pk = np.zeros(len(frames), dtype=PACKET_DTYPE)
    off = 0
    for i, f in enumerate(frames):
        pk[i]["offset"] = off
        pk[i]["caplen"] = pk[i]["wirelen"] = len(f)
        pk[i]["linktype"] = 1
        pk[i]["index"] = i
        pk[i]["ts_ns"] = 10**18 + i * 1000
        off += len(f)
    run = ExchangeRun(gc_timeout=1.0, max_pending=2, max_conns=2)
    run.walk(pk, buf)
    raw = run.finish()
    c = run.counters()
    assert c["pending"] == 0 and c["open_connections"] == 0
    assert len(raw) == c["matched"] + c["unmatched_gc"] + c["unmatched_end"] + c["unmatched_cap"] \
        + c["responses_without_request"]
    assert c["requests"] == c["matched"] + c["unmatched_gc"] + c["unmatched_end"] + c["unmatched_cap"]
    for col in ("req_frame", "resp_frame", "ch_frame"):
        assert (raw[col] <= len(frames)).all()
    tab = exchange_table(raw)
    assert tab.num_rows == len(raw)
    tab["client_ip"].to_pylist()


def seeds_exchange(shared: str | None) -> list[bytes]:
    from tests.tls import hellobuild as hb

    sh12 = hb.records(hb.server_hello(cipher=0xC02B))
    sh13 = hb.records(hb.server_hello(exts=[hb.ext(43, b"\x03\x04")]))
    sep = b"\xff\x00\xff"
    r = hb.record
    return [sep.join([sh12 + r(22, bytes(300)), r(22, bytes(37)) + r(20, b"\x01") + r(22, bytes(40)),
                      r(20, b"\x01") + r(22, bytes(40)), r(23, bytes(90)), r(23, bytes(2000)),
                      r(23, bytes(80)), r(23, bytes(70)), r(21, bytes(2))]),
            sep.join([sh13 + r(20, b"\x01") + r(23, bytes(900)), r(20, b"\x01") + r(23, bytes(53))
                      + r(23, bytes(100)), r(23, bytes(250)) + r(23, bytes(250)), r(23, bytes(19)),
                      r(23, bytes(600)), r(23, bytes(120)), r(23, bytes(19))])]


def check_quic(data: bytes) -> None:
    # datagrams split at 0xFF 0x00 0xFF markers; odd ones from the server
    parts = data.split(b"\xff\x00\xff")[:16]
    frames = [_udp_frame(p, 50000, 443) if i % 2 == 0 else _udp_frame(p, 443, 50000)
              for i, p in enumerate(parts)]
    _frames_through_table(frames)

# ---------------------------------------------------------------------------------------------
# sni: the SNI pass of the URL filter (ext/url/urlmatch.pyx SniTable: TLS reassembly, QUIC Initial
# decryption and CRYPTO gathering, tls's ClientHello parser) and its two forges (issue 18)

def check_sni(data: bytes) -> None:
    from tests.quic.hello import frame
    from webtap._ext import urlmatch as um
    from webtap.records.message import PACKET_DTYPE

    if len(data) < 1:
        return
    # Header byte: bit 0 UDP, bit 1 IPv6, bit 2 VLAN. The rest: payloads split at 0xFF 0x00 0xFF,
    # sent in order on one connection (TCP sequence numbers follow the bytes).
    udp, v6, vlan = bool(data[0] & 1), bool(data[0] & 2), 5 if data[0] & 4 else None
    parts = data[1:].split(b"\xff\x00\xff")[:32]
    frames, seq = [], 1000
    for p in parts:
        frames.append(frame(p[:60000], sport=5555, udp=udp, v6=v6, vlan=vlan, seq=seq))
        seq += len(p[:60000])
    buf = np.frombuffer(b"".join(frames), dtype=np.uint8)
    pk = np.zeros(len(frames), dtype=PACKET_DTYPE)
    off = 0
    for i, f in enumerate(frames):
        pk[i]["offset"], pk[i]["caplen"], pk[i]["wirelen"] = off, len(f), len(f)
        pk[i]["linktype"], pk[i]["index"] = 1, i
        off += len(f)
    t = um.SniTable(capacity=4)
    msgs, proto, flags, keys, koff, sni, soff, cnt = t.extract(pk, buf, True)
    c = dict(zip(um.SNI_REASONS, cnt.tolist()))
    assert c["sni_extracted"] == len(msgs) <= c["client_hellos"]
    assert len(koff) == len(soff) == len(msgs) + 1 and koff[-1] == len(keys) and soff[-1] == len(sni)
    for i in range(len(msgs)):
        name = bytes(sni[soff[i]:soff[i + 1]])
        assert 0 < len(name) <= 255 and all(ch < 0x80 for ch in name)
        assert proto[i] == (2 if udp else 1)
    ip_off = 14 + (4 if vlan else 0)
    assert t.last_dcids.shape == (len(msgs), 21)

    def forge_quic(m, b, rows):      # as the analyzer calls it: with the connections' first DCIDs
        return um.forge_quic(m, b, rows, t.last_dcids)

    for fn, check, k in ((um.forge, um.tcp_checksum_ok, 1), (forge_quic, um.udp_checksum_ok, 2)):
        rows = np.flatnonzero(proto == k)
        if len(rows):
            fr, fo, _ = fn(msgs, buf, rows)
            for j in range(len(fo) - 1):
                if fo[j + 1] > fo[j]:
                    assert check(fr[fo[j]:fo[j + 1]], ip_off)


def seeds_sni(shared: str | None) -> list[bytes]:
    from tests.quic.hello import client_hello, crypto, initial, records, sni_ext

    rec = records(client_hello(sni_ext(b"www.example.test")))
    q = initial(crypto(0, client_hello(sni_ext(b"www.example.test"), quic=True)), dcid=bytes(range(8)))
    alert = b"\x15\x03\x03\x00\x02\x01\x70"       # a whole alert record before the hello
    v2 = (b"\x80\x25\x01\x03\x01\x00\x0c\x00\x00\x00\x10"       # an SSLv2-format ClientHello
          + bytes.fromhex("0100800000390000" "2f0000ff") + bytes(16))
    return [b"\x00" + rec, b"\x02" + rec[:7] + b"\xff\x00\xff" + rec[7:], b"\x01" + q, b"\x07" + q,
            b"\x04" + rec[:100] + b"\xff\x00\xff" + rec[100:], b"\x00" + alert + rec,
            b"\x00" + alert + rec[:40] + b"\xff\x00\xff" + rec[40:], b"\x00" + v2]



def seeds_quic(shared: str | None) -> list[bytes]:
    out = [b"\xc3\x00\x00\x00\x01\x08" + bytes(8) + b"\x00\x00\x44\xd0" + bytes(60)]
    for path in _shared_files(shared, "traces-tls", ("quic_quicv2-echo-443.pcap", "quic-29.pcap",
                                                     "quic_retry.pcap"), 3):
        pk = _first_packets(path, 4)
        if pk and pk[0] == 1:
            out.append(b"\xff\x00\xff".join(f[42:] for f in pk[1]))   # UDP payloads (IPv4)
    return out

# ---------------------------------------------------------------------------------------------
# rules: the URL filter's rule files (urlfilter.policy.read_rules_file; issue 34). Whatever the
# bytes, the parser either gives rules or raises RuleError whose text is one line naming the
# file and the line (what `urlfilter rules check/load` prints after "urlfilter: error: "); no
# other exception. Rules it accepts compile (ext/url/urlpolicy.pyx arrays) and print back
# (Rule.__str__) to a line that parses to the same rule.

def check_rules(data: bytes) -> None:
    from urlfilter.policy import MAX_RULES, RuleError, compile_rules, parse_rule, read_rules_file

    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as d:
        path = os.path.join(d, "fuzz.rules")
        with open(path, "wb") as f:
            f.write(data)
        try:
            rules = read_rules_file(path)
        except RuleError as e:
            msg = str(e)
            # one line: no character that str.splitlines() breaks at
            assert len(msg.splitlines()) == 1, msg
            assert msg.startswith(path + ":"), msg
            top = max(data.count(b"\n"), len(data.decode("utf-8", "replace").splitlines())) + 1
            assert 0 <= e.line <= top, (e.line, msg)
            return
    assert len(rules) <= MAX_RULES
    text = data.decode("utf-8")
    lines = text.splitlines()
    comp = compile_rules(rules)
    assert len(comp) == len(rules)
    for r in rules:
        assert 1 <= r.line <= len(lines) and r.text == lines[r.line - 1].strip()
        again = parse_rule(str(r))
        assert again is not None and again.action == r.action and again.conds == r.conds, (str(r), r.conds)


def seeds_rules(shared: str | None) -> list[bytes]:
    return [b"# spare the help pages of a blacklisted site; cut scanners; count executables\n"
            b"allow url=www.example.com/help\n"
            b"cut client=10.20.0.0/16 port=8080-8090 ua=sqlmap,nikto\n"
            b'cut ua="Mozilla/4.0 (compatible; MSIE 5.0" ext=php\n'
            b"log ext=exe,.msi proto=http\n",
            b"cut sni=Example.COM. ja4=t13d1516h2_8daaf6152771_b186095e22b6 proto=tls,quic\n"
            b"allow client=2001:db8::/32,10.0.0.1 port=443\r\n\n  # c\n",
            b'cut ua="a\\"b",c url=http://a.b/x?y port=0-65535\n',
            b"cut port=70000\n", b'cut ua="x\n', b"drop url=a.b\n", b"cut url=\n",
            b"cut client=1.2.3.4 client=5.6.7.8\n", b"\xff\xfe cut\n", b"cut ua=\x01\n"]

# ---------------------------------------------------------------------------------------------
# truth: the plaintext parsers of the decrypted truth (httpanalyzer/tls_truth.py: TLS records,
# hellos, HTTP/1.1 framing, h2 frames). truth() turns ValueError / IndexError / struct.error
# into a connection left out with its reason; anything else would end the comparison.

def check_truth(data: bytes) -> None:
    import struct

    from httpanalyzer import tls_truth as tt

    if not data:
        return
    kind, body = data[0] % 4, data[1:]
    try:
        if kind == 0:
            recs = list(tt._records(body, len(body)))
            off = 0
            for o, typ, ver, b in recs:          # records tile the bytes from the start
                assert o == off and typ == body[o] and len(b) == int.from_bytes(body[o + 3:o + 5], "big")
                off = o + 5 + len(b)
            assert off <= len(body)
            tt.server_hellos(recs)
        elif kind in (1, 2):
            last = -1
            for start, end, first in tt._h1_messages(body, kind == 1):
                assert last <= start < end <= len(body)
                assert body[start:].startswith(first.encode("latin-1"))
                last = end
        else:
            seen = set()
            for o, sid in tt._h2_headers(body, False):
                assert 0 <= o < len(body) and body[o + 3] == 1 and sid not in seen
                seen.add(sid)
    except (ValueError, IndexError, struct.error):
        pass


def seeds_truth(shared: str | None) -> list[bytes]:
    sh = bytes.fromhex("160303002d0200002903030000000000000000000000000000000000000000000000"
                       "0000000000000000c02b000001ff0100")
    return [b"\x00" + sh + bytes.fromhex("140303000101") + b"\x16\x03\x03\x00\x05\x02abcd",
            b"\x01GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nxyGET /b HTTP/1.1\r\n\r\n",
            b"\x02HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
            b"\x03" + bytes.fromhex("000004040000000000") + bytes.fromhex("00000301050000000182aabb")]


CHECKS = {name: globals()["check_" + name] for name in TARGETS}
SEEDS = {name: globals()["seeds_" + name] for name in TARGETS}

