"""The one set of split-hello rules (ext/tls/hellostream.pxd) through both of its users: the handshake
records (httpanalyzer.analyze_tls, ext/tls/tls.pyx) and the URL filter's SNI pass (SniTable,
ext/url/urlmatch.pyx). The same ClientHellos, cut at many byte offsets into 2 and 3 segments, with
retransmissions, gaps, overlapping resends, ChangeCipherSpec (or an alert and a heartbeat)
before the hello and sequence
numbers that wrap, go through both; each connection's outcome is known from how it was cut, and
the two modules must agree with it and with each other: the analyzer's record (ch_segments, sni,
unmatched_reason) and the filter's SNI rows and counters (tls_split, tls_gap)."""
from __future__ import annotations

import numpy as np

from httpanalyzer import analyze_tls
from tests.pcapbuild import pcap
from tests.tls import hellobuild as hb
from webtap.capture import open_trace
from webtap._ext import urlmatch as um

SNI = b"split.example"
CCS = b"\x14\x03\x03\x00\x01\x01"
ALERT = b"\x15\x03\x03\x00\x02\x01\x70"
HEARTBEAT = b"\x18\x03\x03\x00\x05\x01\x00\x02hi"


def _hello(max_frag=16384):
    msg = hb.client_hello(exts=[hb.sni_ext(SNI), hb.alpn_ext([b"h2"]), hb.ext(21, b"\0" * 200),
                                hb.versions_ext([0x0304, 0x0303])])
    return hb.records(msg, max_frag=max_frag)


def _cases():
    """(name, stream, segments as (offset, length) into the stream, expected: the number of
    segments the hello took when it completes, else None, and whether the stream ends in a gap:
    1 typed (the analyzer's record says incomplete), 2 before 6 bytes showed a hello's type (no
    record: nothing said it was one), 0 no gap)."""
    one, frag = _hello(), _hello(max_frag=60)      # one record; records of 60 bytes
    out = []
    for st, tag in ((one, "rec1"), (frag, "rec60")):
        n = len(st)
        for k in range(1, n):                                   # 2 segments, every offset
            out.append((f"{tag} 2@{k}", st, [(0, k), (k, n - k)], 2, 0))
        for i in range(1, n - 1, 9):                            # 3 segments
            for j in range(i + 1, n, 23):
                out.append((f"{tag} 3@{i},{j}", st, [(0, i), (i, j - i), (j, n - j)], 3, 0))
        for k in (1, 3, 5, 11, 100, n // 2):
            # a retransmission of the first segment, then of a part inside the held bytes
            out.append((f"{tag} retx@{k}", st, [(0, k), (0, k), (k // 2, k - k // 2), (k, n - k)],
                        2, 0))
            # a gap: the second segment skips two bytes (the stream ends; nothing completes)
            out.append((f"{tag} gap@{k}", st, [(0, k), (k + 2, n - k - 2)], None, 1 if k >= 6 else 2))
            # the resent bytes overlap the held end and bring new ones: appended past the end
            b = min(k + 40, n - 1)
            out.append((f"{tag} overlap@{k}", st, [(0, k), (k - 1 if k > 1 else 0, b - (k - 1 if k > 1 else 0)),
                                                  (b, n - b)], 3, 0))
            # the overlapping resend covers the whole rest: it completes the hello
            out.append((f"{tag} overlap-rest@{k}", st, [(0, k), (max(k - 3, 0), n - max(k - 3, 0))],
                        2, 0))
        # a ChangeCipherSpec record before the hello (a TLS 1.3 client's second ClientHello)
        cs = CCS + st
        for k in (12, 20, 6 + n // 2):
            out.append((f"{tag} ccs@{k}", cs, [(0, k), (k, len(cs) - k)], 2, 0))
        # whole records of other types before the hello (an alert, a heartbeat: issue 31)
        pre = ALERT + HEARTBEAT
        cs = pre + st
        for k in (len(pre) + 6, len(pre) + 20, len(pre) + n // 2):
            out.append((f"{tag} alert,heartbeat@{k}", cs, [(0, k), (k, len(cs) - k)], 2, 0))
    return out


def _pcap(path, cases, seq0):
    pkts, t = [], 1_700_000_000_000_000_000
    for c, (_name, stream, segs, _exp, _gap) in enumerate(cases):
        port = 1024 + c
        for off, ln in segs:
            pkts.append((t, hb.tcp_packet("10.0.0.1", "10.0.0.2", port, 443, seq0 + off, 7000,
                                          stream[off:off + ln])))
            t += 1000
    path.write_bytes(pcap(pkts))


def _filter(path):
    t = um.SniTable()
    rows, cnt = {}, np.zeros(len(um.SNI_REASONS), np.uint64)
    for b in open_trace(str(path)):
        msgs, proto, flags, keys, koff, sni, soff, c = t.extract(b.packets, b.data, False)
        cnt += c
        for i in range(len(msgs)):
            rows[int(msgs["src_port"][i])] = (bytes(sni[soff[i]:soff[i + 1]]), int(flags[i]))
    return rows, dict(zip(um.SNI_REASONS, cnt.tolist()))


def _run(tmp_path, seq0):
    cases = _cases()
    p = tmp_path / f"split-{seq0}.pcap"
    _pcap(p, cases, seq0)
    c = {}
    df = analyze_tls(str(p), counters=c)
    rec = {int(r.client_port): r for r in df.itertuples()}
    rows, fc = _filter(p)
    return cases, rec, c, rows, fc


def _check(tmp_path, seq0):
    cases, rec, c, rows, fc = _run(tmp_path, seq0)
    done_a, done_f, wrong = set(), set(), []
    for i, (name, _st, _segs, exp, gap) in enumerate(cases):
        port = 1024 + i
        r = rec.get(port)
        if r is not None and r.sni == SNI.decode() and r.unmatched_reason == "end":
            done_a.add(port)
            if r.ch_segments != exp:
                wrong.append((name, "ch_segments", r.ch_segments))
        elif exp is not None:
            wrong.append((name, "analyzer", None if r is None else (r.sni, r.unmatched_reason)))
        if gap == 1 and (r is None or r.unmatched_reason != "incomplete" or r.ch_segments != 1):
            wrong.append((name, "analyzer gap record", None if r is None else (r.unmatched_reason, r.ch_segments)))
        if gap == 2 and r is not None:
            wrong.append((name, "analyzer record of an untyped stream", (r.sni, r.unmatched_reason)))
        if port in rows:
            done_f.add(port)
            if rows[port] != (SNI, 2):                     # flags 2: completed from several segments
                wrong.append((name, "filter row", rows[port]))
        elif exp is not None:
            wrong.append((name, "filter", None))
    assert not wrong, wrong[:20]
    expected = {1024 + i for i, case in enumerate(cases) if case[3] is not None}
    assert done_a == done_f == expected
    n_gap = sum(1 for case in cases if case[4])
    assert fc["tls_split"] == len(expected) and fc["tls_gap"] == n_gap
    assert fc["tls_bad"] == 0 and fc["tls_too_long"] == 0
    assert c["split_hello"] == len(expected) and c["reassembly_gap"] == n_gap
    assert c["incomplete"] == sum(1 for case in cases if case[4] == 1)
    assert c["malformed"] == 0 and c["too_long"] == 0
    # retransmissions ignored by both: two per retx case
    assert c["reassembly_retransmission"] == 2 * sum(1 for case in cases if " retx@" in case[0])
    return len(cases)


def test_both_modules_complete_the_same_streams(tmp_path):
    assert _check(tmp_path, 1000) > 1000


def test_sequence_numbers_wrap(tmp_path):
    """The streams cross 2^32 (seq arithmetic modulo 2^32 in the shared rules)."""
    _check(tmp_path, (1 << 32) - 150)


def _small_records(msg, frag, first=100):
    """The message in a first record of `first` bytes (the hello's version inside it, where
    tls_hello_start looks) and then records of `frag` bytes."""
    out = hb.records(msg[:first])
    return out + hb.records(msg[first:], max_frag=frag)


def test_over_the_stream_cap_in_both(tmp_path):
    """A 12 KB ClientHello (under TLS_HELLO_CAP) in records of 2 bytes is 42 KB of stream, more
    than HS_STREAM_CAP (32 KiB): both modules give it up as too long. In records of 8 bytes it is
    19.5 KB of stream and both complete it (the filter's old cap, 16 KiB + 64 record headers,
    refused that one)."""
    msg = hb.client_hello(exts=[hb.sni_ext(SNI), hb.ext(21, b"\0" * 12000)])
    pkts, t = [], 1_700_000_000_000_000_000
    for port, frag in ((2000, 2), (2001, 8)):
        st = _small_records(msg, frag)
        for off in range(0, len(st), 1400):
            pkts.append((t, hb.tcp_packet("10.0.0.1", "10.0.0.2", port, 443, 1 + off, 7000,
                                          st[off:off + 1400])))
            t += 1000
    p = tmp_path / "cap.pcap"
    p.write_bytes(pcap(pkts))
    c = {}
    df = analyze_tls(str(p), counters=c)
    rec = {int(r.client_port): r for r in df.itertuples()}
    assert rec[2000].unmatched_reason == "too_long" and rec[2001].sni == SNI.decode()
    assert rec[2001].ch_segments == -(-len(_small_records(msg, 8)) // 1400)
    rows, fc = _filter(p)
    assert set(rows) == {2001} and fc["tls_too_long"] == 1 and fc["tls_split"] == 1
