"""SNI lookups and the forged answers on the shared TLS/QUIC traces, checked with tshark.

* Every ClientHello tshark shows with a server_name (TLS over TCP, QUIC v1 / v2 / draft-29) is
  found at the same frame with the same SNI; the only extra rows are retransmitted ClientHellos
  (tshark marks those as retransmissions and does not dissect them again; a filter must answer
  each copy).
* `scan(..., forged_out=...)` with a blacklist of some of the traces' SNIs forges exactly one
  FIN/RST pair per TLS hit, with the sequence numbers of the ClientHello segment (tshark reads
  them from the original trace), and one server Initial close per QUIC hit, which tshark decrypts
  (with the original trace merged in, as it needs the client's Initial) as a server Initial with
  the CONNECTION_CLOSE.
"""
from __future__ import annotations

import subprocess
from collections import Counter

import numpy as np
import pytest

from tests.conftest import SHARED, require_shared
from urlfilter.analyzer import Blacklist
from urlfilter.scan import scan
from urlfilter.tree import UrlTree
from webtap.capture import open_trace
from webtap._ext import quiccut as q
from webtap._ext import urlmatch as um

TLS = SHARED / "traces-tls"
KNOWN_QUIC = {"0x00000001", "0x6b3343cf", "0xff00001d"}
TRACES = [
    "pcapplusplus/ExamplesTest_pcap_examples_tls2.pcap",     # 323 ClientHellos, IPv4 + IPv6
    "ndpi/sites.pcapng",                                     # ECH (GREASE) ClientHellos
    "ndpi/tls_ech.pcapng",
    "suricata-verify/community-id-ipv6_input.pcap",
    "zeek/quic_firefox-102.13.0esr-blog-cloudflare-com.pcap",
    "zeek/quic_chromium-115.0.5790.110-google-de-fragmented.pcap",   # ClientHello over 2 datagrams
    "zeek/quic_quic-multiple-initial-fragmented-crypto.pcap",
    "zeek/quic_quicv2-echo-dpd-custom-port-4433.pcap",       # QUIC v2 on a custom port
    "mercury/quic-crypto-packets.pcap",                      # draft-29 (+ mvfst, not decryptable)
    "ndpi/quic_frags_ch_out_of_order_same_packet_craziness.pcapng",
    "ndpi/quic_frags_different_dcid.pcapng",   # hello completed under the server's chosen CID
    "zeek/quic_quic-decrypt-fail-google-de-51833.pcap",   # the same, after 3 Initials of the first
]


def _tshark(args, timeout=300):
    return subprocess.run(["tshark", *args], capture_output=True, text=True, check=True,
                          timeout=timeout).stdout


def _ours(path):
    t = um.SniTable()
    rows = []
    for b in open_trace(str(path)):
        msgs, proto, flags, keys, koff, sni, soff, cnt = t.extract(b.packets, b.data, False)
        for i in range(len(msgs)):
            rows.append((int(msgs["pkt_index"][i]), int(proto[i]), bytes(sni[soff[i]:soff[i + 1]]).decode(),
                         int(msgs["src_port"][i]), bool(flags[i] & 1)))
    return rows


def _theirs(path):
    out = _tshark(["-r", str(path), "-Y", "tls.handshake.type==1", "-T", "fields", "-E", "separator=|",
                   "-e", "frame.number", "-e", "quic.version", "-e", "tls.handshake.extensions_server_name"])
    rows = []
    for line in out.splitlines():
        fn, qv, sn = line.split("|")
        qv = qv.split(",")[0]
        if sn and (not qv or qv in KNOWN_QUIC):
            rows.append((int(fn) - 1, 2 if qv else 1, sn.split(",")[0]))
    return rows


@pytest.mark.tshark
@pytest.mark.parametrize("rel", TRACES)
def test_snis_agree_with_tshark(rel):
    path = require_shared(TLS / rel)
    ours = _ours(path)
    theirs = Counter(_theirs(path))
    mine = Counter(r[:3] for r in ours)
    assert theirs, "tshark finds no ClientHello: wrong trace list"
    assert not (theirs - mine), f"tshark's ClientHellos we miss: {list((theirs - mine).elements())[:5]}"
    seen = set()
    for r in ours:                       # every extra row repeats an earlier ClientHello
        key = (r[1], r[2], r[3])
        if Counter([r[:3]]) - theirs:
            assert key in seen, f"row {r} is neither in tshark's list nor a retransmission"
        seen.add(key)


def _blacklist(snis):
    t = UrlTree()
    for s in snis:
        t.insert(s)
    return Blacklist(t)


def _fields(path, filt, fields):
    out = _tshark(["-r", str(path), "-Y", filt, "-T", "fields", "-E", "separator=|",
                   *sum((["-e", f] for f in fields), [])])
    return [line.split("|") for line in out.splitlines()]


@pytest.mark.tshark
def test_tls_forged_pairs_have_the_clienthello_numbers(tmp_path):
    path = require_shared(TLS / TRACES[0])
    ours = _ours(path)
    snis = sorted({r[2] for r in ours if r[1] == 1})
    block = snis[::3]                          # a third of the traces' names, as exact hosts
    forged = tmp_path / "forged.pcap"
    res = scan(str(path), _blacklist(block), forged_out=str(forged))
    df = res.to_pandas()
    tls = df[df["proto"] == "tls"]
    hits = tls[tls["hit"]]
    assert len(hits) > 10 and res.counters["tls_hits"] == len(hits)
    low = [b.lower() for b in block]            # a listed name covers its subdomains
    assert all(any(h == b or h.endswith("." + b) for b in low) for h in hits["sni"].str.lower())
    assert not any(any(h == b or h.endswith("." + b) for b in low) for h in tls[~tls["hit"]]["sni"].str.lower())
    assert (hits["forged"] == 2).all() and (tls[~tls["hit"]]["forged"] == 0).all()
    assert res.forged_written == 2 * len(hits)
    # the ClientHello segments' numbers, from tshark on the original trace
    orig = {int(f[0]) - 1: f[1:] for f in _fields(path, "tcp.len>0", ["frame.number", "tcp.seq_raw",
                                                                       "tcp.ack_raw", "tcp.len", "tcp.srcport"])}
    got = _fields(forged, "tcp", ["tcp.flags.fin", "tcp.flags.reset", "tcp.flags.ack", "tcp.seq_raw",
                                  "tcp.ack_raw", "tcp.srcport", "tcp.dstport", "tcp.checksum.status"])
    fins = Counter((int(g[3]), int(g[4]), int(g[6])) for g in got if g[0] == "1" and g[2] == "1")
    rsts = Counter((int(g[3]), int(g[4]), int(g[5])) for g in got if g[1] == "1" and g[2] == "1")
    assert sum(fins.values()) == len(hits) and sum(rsts.values()) == len(hits)
    for fr in hits["frame"]:                               # 1-based, orig 0-based
        seq, ack, ln, sport = (int(x) for x in orig[int(fr) - 1])
        assert fins[(ack, seq + ln, sport)] >= 1           # to the client: seq = its ACK, ack = s + L
        assert rsts[(seq + ln, ack, sport)] >= 1           # to the server: seq = s + L exactly


@pytest.mark.tshark
@pytest.mark.parametrize("rel", [r for r in TRACES if "quic" in r])
def test_quic_closes_decrypt_in_tshark(tmp_path, rel):
    path = require_shared(TLS / rel)
    ours = [r for r in _ours(path) if r[1] == 2]
    block = sorted({r[2] for r in ours})[::2]
    forged = tmp_path / "forged.pcap"
    res = scan(str(path), _blacklist(block), forged_out=str(forged))
    df = res.to_pandas()
    qh = df[(df["proto"] == "quic") & df["hit"]]
    assert len(qh) >= 1 and res.counters["quic_hits"] == len(qh) == res.counters["quic_forged"]
    assert (qh["forged"] == 1).all() and res.forged_written == len(qh)
    # the forged packet leaves after the Initial it answers, but within the same microsecond it
    # can tie with it in a microsecond trace, and mergecap then may put it first: shift by 1 us
    later = tmp_path / "later.pcap"
    subprocess.run(["editcap", "-t", "0.000001", str(forged), str(later)], check=True, timeout=120,
                   capture_output=True)
    merged = tmp_path / "merged.pcap"
    subprocess.run(["mergecap", "-F", "pcap", "-w", str(merged), str(path), str(later)], check=True,
                   timeout=120, capture_output=True)
    rows = _fields(merged, f'quic.cc.reason_phrase == "{q.CLOSE_REASON}"',
                   ["quic.frame_type", "quic.cc.error_code", "udp.checksum.status", "quic.decryption_failed"])
    # a close answering a retransmitted client Initial (tshark shows no ClientHello there: the
    # CRYPTO data is a retransmission) repeats the first close byte for byte; the client drops
    # it (draining, RFC 9000 10.2.2) and tshark 4.0 does not decrypt the duplicate either
    first = {fr for fr, _, _ in _theirs(path)}
    n_first = int((qh["frame"] - 1).isin(first).sum())
    assert n_first >= 1 and n_first <= len(rows) <= len(qh), (len(rows), n_first, len(qh))
    for r in rows:
        assert r[0] == "28" and r[1] == str(q.CLOSE_ERROR) and r[3] == "", r


@pytest.mark.tshark
def test_hello_completed_under_the_server_cid_is_followed(tmp_path):
    """ndpi/quic_frags_different_dcid.pcapng: the client's first Initial (DCID D) holds part of
    the ClientHello; the server answers with its Initial (SCID S); the client's next Initial
    carries DCID S, keeps D's keys (RFC 9001 5.2) and completes the hello. The row is that
    packet; the close is protected with D's server keys, carries SCID S (the only one the client
    now accepts, RFC 9000 7.2) and a packet number past the server's; tshark decrypts it."""
    path = require_shared(TLS / "ndpi/quic_frags_different_dcid.pcapng")
    init = _fields(path, "quic.long.packet_type == 0", ["frame.number", "udp.srcport", "quic.dcid", "quic.scid"])
    first, server, follow = init[:3]
    assert server[1] == "443" and follow[2] == server[3] != first[2]
    forged = tmp_path / "forged.pcap"
    res = scan(str(path), _blacklist(["cloudflare.com"]), forged_out=str(forged))
    df = res.to_pandas()
    assert list(df["frame"]) == [int(follow[0])] and list(df["sni"]) == ["cdnjs.cloudflare.com"]
    assert df["hit"].all() and list(df["forged"]) == [1] and res.forged_written == 1
    assert res.counters["quic_server_cid"] == 1
    merged = tmp_path / "merged.pcap"
    subprocess.run(["mergecap", "-F", "pcap", "-w", str(merged), str(path), str(forged)], check=True,
                   timeout=120, capture_output=True)
    rows = _fields(merged, f'quic.cc.reason_phrase == "{q.CLOSE_REASON}"',
                   ["quic.scid", "quic.dcid", "quic.packet_number", "quic.frame_type", "quic.cc.error_code"])
    assert rows == [[server[3], first[3], "256", "28", str(q.CLOSE_ERROR)]]


@pytest.mark.tshark
def test_timing_reports_tls_and_quic(tmp_path):
    """urlfilter timing: a QUIC row's RTT(filter, server) is client Initial -> first server
    Initial (times from tshark), a TLS row's the SYN -> SYN/ACK of its connection."""
    from urlfilter.timing import timing
    qpath = require_shared(TLS / "zeek/quic_chromium-115.0.5790.110-google-de-fragmented.pcap")
    rep = timing(str(qpath), _blacklist(["google.de"]))
    row = rep[rep["proto"] == "quic"].iloc[0]
    assert row["handshake"] and row["hit"]
    f = _fields(qpath, "quic.long.packet_type == 0", ["frame.time_epoch", "udp.srcport"])
    t_client = next(float(x[0]) for x in f if x[1] != "443")
    t_server = next(float(x[0]) for x in f if x[1] == "443")
    assert abs(row["rtt_fs_ns"] - (t_server - t_client) * 1e9) < 2000
    assert row["margin_ns"] == row["rtt_fs_ns"] - row["t_proc_ns"]
    tpath = require_shared(TLS / "suricata-verify/community-id-ipv6_input.pcap")
    rep = timing(str(tpath), _blacklist([]))
    tls = rep[(rep["proto"] == "tls") & rep["handshake"]]
    assert len(tls)
    syn = _fields(tpath, "tcp.flags.syn == 1", ["frame.time_epoch", "tcp.flags.ack", "tcp.srcport", "tcp.dstport"])
    for _, r in tls.iterrows():
        t_syn = next(float(x[0]) for x in syn if x[1] == "0" and int(x[2]) == r["src_port"])
        t_sa = next(float(x[0]) for x in syn if x[1] == "1" and int(x[3]) == r["src_port"])
        assert abs(r["rtt_fs_ns"] - (t_sa - t_syn) * 1e9) < 2000
