"""URL analyzer + session controller (ext/url/urlmatch.pyx, urlfilter.analyzer/scan/timing).

Reference packets come from scapy: every forged frame must equal, byte for byte, the frame scapy
builds from the same field values (so every field and both checksums are checked), and Linux's
acceptance rules are pinned by the seq/ack values (RFC 5961; see the module docstring).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.all import IP, TCP, Dot1Q, Ether, IPv6, raw, rdpcap, wrpcap

from urlfilter.analyzer import Blacklist, UrlAnalyzer
from webtap.records.urlhit import CONN_DTYPE
from urlfilter.scan import scan
from urlfilter.timing import summary, timing
from urlfilter.tree import UrlTree
from webtap._ext import urlmatch as um
from webtap.capture import open_trace
from webtap.dissect import dissect
from webtap.records.message import MESSAGE_DTYPE, PACKET_DTYPE

CMAC, SMAC = "02:00:00:00:00:01", "02:00:00:00:00:02"
C4, S4 = "192.0.2.10", "198.51.100.20"
C6, S6 = "2001:db8::10", "2001:db8:1::20"


def tree(*urls):
    t = UrlTree()
    for u in urls:
        t.insert(u)
    return Blacklist(t)


def req(payload: bytes, sport=40000, dport=80, seq=1000, ack=5000, v6=False, vlan=None, win=501, **tcpkw):
    e = Ether(src=CMAC, dst=SMAC)
    if vlan is not None:
        e = e / Dot1Q(vlan=vlan)
    ip = IPv6(src=C6, dst=S6) if v6 else IP(src=C4, dst=S4)
    return e / ip / TCP(sport=sport, dport=dport, seq=seq, ack=ack, flags="PA", window=win, **tcpkw) / payload


def write(tmp_path, pkts, name="t.pcap"):
    for i, p in enumerate(pkts):
        p.time = 1_700_000_000 + i * 0.001
    path = tmp_path / name
    wrpcap(str(path), pkts)
    return str(path)


def one_batch(path):
    with open_trace(path) as tr:
        b = next(iter(tr))
        return b, dissect(b.packets, b.data)


def test_struct_sizes_agree():
    assert CONN_DTYPE.itemsize == um.sizeof_conn_timing()
    assert MESSAGE_DTYPE.itemsize == um.sizeof_http_msg()
    assert PACKET_DTYPE.itemsize == um.sizeof_packet_ref()


def reference_pair(c, s, sport, dport, ack, end, win, vlan):
    """scapy's FIN+ACK (server -> client c) and RST+ACK (client -> server s) for a request from
    c:sport to s:dport whose ACK is `ack` and whose sequence space ends at `end`."""
    v6 = ":" in c
    e_fin, e_rst = Ether(src=SMAC, dst=CMAC), Ether(src=CMAC, dst=SMAC)
    if vlan is not None:
        e_fin, e_rst = e_fin / Dot1Q(vlan=vlan), e_rst / Dot1Q(vlan=vlan)
    if v6:
        ip_fin, ip_rst = IPv6(src=s, dst=c, hlim=64), IPv6(src=c, dst=s, hlim=64)
    else:
        ip_fin, ip_rst = IP(src=s, dst=c, ttl=64, id=0, flags="DF"), IP(src=c, dst=s, ttl=64, id=0, flags="DF")
    return (raw(e_fin / ip_fin / TCP(sport=dport, dport=sport, seq=ack, ack=end, flags="FA", window=win)),
            raw(e_rst / ip_rst / TCP(sport=sport, dport=dport, seq=end, ack=ack, flags="RA", window=0)))


@pytest.mark.parametrize("v6", [False, True])
@pytest.mark.parametrize("vlan", [None, 42])
def test_forged_frames_equal_scapy_reference(tmp_path, v6, vlan):
    body = b"GET /bad/x HTTP/1.1\r\nHost: evil.example\r\n\r\n"
    p = req(body, sport=40123, dport=8080, seq=0xFFFFFFF0, ack=777, v6=v6, vlan=vlan, win=1234)
    b, mb = one_batch(write(tmp_path, [p]))
    rows, keys, offs, cnt = um.extract(mb.msgs, mb.data)
    assert list(rows) == [0]
    frames, fo, ns = um.forge(mb.msgs, mb.data, rows)
    fin, rst = bytes(frames[fo[0]:fo[1]]), bytes(frames[fo[1]:fo[2]])
    end = (0xFFFFFFF0 + len(body)) & 0xFFFFFFFF       # seq + payload length, wrapping
    assert (fin, rst) == reference_pair(C6 if v6 else C4, S6 if v6 else S4, 40123, 8080, 777, end, 1234, vlan)
    ip_off = 14 + (4 if vlan is not None else 0)
    assert um.tcp_checksum_ok(np.frombuffer(fin, np.uint8), ip_off)
    assert um.tcp_checksum_ok(np.frombuffer(rst, np.uint8), ip_off)
    assert (ns >= 0).all()


_ip4 = st.tuples(*[st.integers(0, 255)] * 4).map(lambda t: ".".join(map(str, t)))
_ip6 = st.lists(st.integers(0, 0xFFFF), min_size=8, max_size=8).map(lambda g: ":".join(f"{x:x}" for x in g))


@settings(max_examples=60, deadline=None)
@given(v6=st.booleans(), data=st.data(), sport=st.integers(1, 65535), dport=st.integers(1, 65535),
       seq=st.integers(0, 2**32 - 1), ack=st.integers(0, 2**32 - 1), win=st.integers(0, 65535),
       vlan=st.none() | st.integers(0, 4095), fin=st.booleans())
def test_forged_pair_equals_scapy_for_any_field_values(tmp_path_factory, v6, data, sport, dport, seq, ack,
                                                       win, vlan, fin):
    """forge sums the field values into both checksums instead of re-reading the bytes it wrote
    (_forge_pair): any addresses, ports, sequence numbers and window must still give scapy's
    frames byte for byte (the one's complement carries included)."""
    c, s = (data.draw(_ip6), data.draw(_ip6)) if v6 else (data.draw(_ip4), data.draw(_ip4))
    body = b"GET /bad HTTP/1.1\r\nHost: evil.example\r\n\r\n"
    e = Ether(src=CMAC, dst=SMAC) / Dot1Q(vlan=vlan) if vlan is not None else Ether(src=CMAC, dst=SMAC)
    p = e / (IPv6(src=c, dst=s) if v6 else IP(src=c, dst=s)) / TCP(
        sport=sport, dport=dport, seq=seq, ack=ack, window=win, flags="FPA" if fin else "PA") / body
    b, mb = one_batch(write(tmp_path_factory.mktemp("f"), [p]))
    frames, fo, _ = um.forge(mb.msgs, mb.data, np.array([0]))
    end = (seq + len(body) + fin) & 0xFFFFFFFF
    assert (bytes(frames[fo[0]:fo[1]]), bytes(frames[fo[1]:fo[2]])) == reference_pair(
        c, s, sport, dport, ack, end, win, vlan)


def test_request_with_fin_counts_the_fin_in_the_sequence(tmp_path):
    body = b"GET /bad HTTP/1.0\r\nHost: evil.example\r\n\r\n"
    p = Ether(src=CMAC, dst=SMAC) / IP(src=C4, dst=S4) / TCP(sport=1, dport=80, seq=10, ack=20, flags="FPA") / body
    b, mb = one_batch(write(tmp_path, [p]))
    frames, fo, _ = um.forge(mb.msgs, mb.data, np.array([0]))
    rst = Ether(bytes(frames[fo[1]:fo[2]]))
    assert rst[TCP].seq == 10 + len(body) + 1


BAD_CASES = [
    # (name, packets, expected counter, forged?)
    ("split_request_line", [req(b"GET /bad/x HT")], "uri_truncated", False),
    ("host_in_next_packet", [req(b"GET /bad/x HTTP/1.1\r\nUser-Agent: a\r\n"),
                             req(b"Host: evil.example\r\n\r\n", seq=1037)], "host_later", False),
    ("missing_host", [req(b"GET /bad/x HTTP/1.1\r\nUser-Agent: a\r\n\r\n")], "no_host", False),
    ("lowercase_get", [req(b"get /bad/x HTTP/1.1\r\nHost: evil.example\r\n\r\n")], None, False),
    ("post", [req(b"POST /bad/x HTTP/1.1\r\nHost: evil.example\r\n\r\n")], "not_get", False),
    ("asterisk", [req(b"GET * HTTP/1.1\r\nHost: evil.example\r\n\r\n")], "bad_target", False),
    ("bad_tcp_checksum", [req(b"GET /bad/x HTTP/1.1\r\nHost: evil.example\r\n\r\n", chksum=0x1234)],
     "bad_checksum", False),
    ("bad_host", [req(b"GET /bad/x HTTP/1.1\r\nHost: ev\"il.example\r\n\r\n")], "canon_failed", False),
    ("absurd_uri", [req(b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: evil.example\r\n\r\n")],
     "canon_failed", False),
    ("http10", [req(b"GET /bad/x HTTP/1.0\r\nHost: evil.example\r\n\r\n")], "extracted", True),
    ("absolute_form", [req(b"GET http://EVIL.example:80/bad/y HTTP/1.1\r\nHost: other\r\n\r\n")],
     "absolute_form", True),
    ("any_port", [req(b"GET /bad HTTP/1.1\r\nHost: evil.example:8443\r\n\r\n", dport=8443)], "extracted", False),
    ("subdomain_entry", [req(b"GET /z HTTP/1.1\r\nHost: a.b.blocked.example\r\n\r\n", dport=3128)],
     "extracted", True),
]


@pytest.mark.parametrize("name,pkts,counter,forged", BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_input_is_counted_and_never_forged(tmp_path, name, pkts, counter, forged):
    out = tmp_path / "forged.pcap"
    res = scan(write(tmp_path, pkts), tree("evil.example/bad", "blocked.example"), forged_out=str(out),
               verify_checksums=True)
    c = res.counters
    if counter is not None:
        assert c[counter] == 1, c
    else:                                   # not HTTP at all (methods are case-sensitive, RFC 9110)
        assert res.totals.dissect["not_http"] == 1 and c["messages"] == 0
    assert c["forged_frames"] == (2 if forged else 0), c
    assert res.forged_written == c["forged_frames"]
    assert len(rdpcap(str(out))) == c["forged_frames"]
    # accounting: every GET is extracted or skipped for exactly one reason
    skipped = sum(c[k] for k in ("uri_truncated", "no_host", "host_later", "bad_target", "bad_checksum",
                                 "canon_failed"))
    assert c["get"] == c["extracted"] + skipped


def test_port_8443_entry_matches_only_with_port(tmp_path):
    p = [req(b"GET /bad HTTP/1.1\r\nHost: evil.example:8443\r\n\r\n", dport=8443)]
    assert scan(write(tmp_path, p), tree("evil.example:8443/bad")).counters["hits"] == 1
    assert scan(write(tmp_path, p), tree("evil.example/bad")).counters["hits"] == 0


def test_scan_records_and_forged_pcap_in_time_order(tmp_path):
    pkts = [req(b"GET /bad/%d HTTP/1.1\r\nHost: evil.example\r\n\r\n" % i, sport=41000 + i) for i in range(5)]
    pkts.insert(2, req(b"GET /fine HTTP/1.1\r\nHost: evil.example\r\n\r\n", sport=42000))
    out = tmp_path / "f.pcap"
    res = scan(write(tmp_path, pkts), tree("evil.example/bad"), forged_out=str(out))
    df = res.to_pandas()
    assert list(df["hit"]) == [True, True, False, True, True, True]
    assert list(df["url"])[2] == "evil.example/fine"
    assert set(df.loc[df.hit, "entry"]) == {"evil.example/bad"}
    assert (df.loc[~df.hit, "forged"] == 0).all()
    got = rdpcap(str(out))
    assert len(got) == 10
    ts = [float(p.time) for p in got]
    assert ts == sorted(ts)
    # frames to clients and to the server alternate per hit; ports are exactly the hits'
    assert sorted(p[TCP].dport for p in got if p[TCP].flags == "FA") == sorted(41000 + i for i in range(5))
    assert all(p[TCP].sport >= 41000 for p in got if p[TCP].flags == "RA")


def test_timing_from_handshake(tmp_path):
    E1, E2 = Ether(src=CMAC, dst=SMAC), Ether(src=SMAC, dst=CMAC)
    body = b"GET /bad HTTP/1.1\r\nHost: evil.example\r\n\r\n"
    pk = [E1 / IP(src=C4, dst=S4) / TCP(sport=5555, dport=80, flags="S", seq=99),
          E2 / IP(src=S4, dst=C4) / TCP(sport=80, dport=5555, flags="SA", seq=499, ack=100),
          E1 / IP(src=C4, dst=S4) / TCP(sport=5555, dport=80, flags="A", seq=100, ack=500),
          E1 / IP(src=C4, dst=S4) / TCP(sport=5555, dport=80, flags="PA", seq=100, ack=500) / body,
          E2 / IP(src=S4, dst=C4) / TCP(sport=80, dport=5555, flags="PA", seq=500, ack=100 + len(body)) / b"HTTP/1.1 200 OK\r\n\r\n"]
    times = [0.0, 0.030, 0.032, 0.033, 0.100]      # RTT_fs 30 ms, RTT_cf 2 ms, answer 67 ms after the request
    for p, t in zip(pk, times):
        p.time = 1_700_000_000 + t
    path = tmp_path / "hs.pcap"
    wrpcap(str(path), pk)
    df = timing(str(path), tree("evil.example/bad"))
    assert len(df) == 1
    r = df.iloc[0]
    assert r["rtt_fs_ns"] == 30_000_000 and r["rtt_cf_ns"] == 2_000_000
    assert r["server_wait_ns"] == 67_000_000 - 30_000_000
    assert r["rtt_cs_ns"] == 2_000_000 + 30_000_000 + 37_000_000
    assert 0 < r["t_proc_ns"] < 1_000_000 and r["win"]
    slow = timing(str(path), tree("evil.example/bad"), t_proc_ns=70_000_000).iloc[0]
    assert not slow["win"] and slow["margin_ns"] == 69_000_000 - 72_000_000
    s = summary(slow.to_frame().T.astype({"margin_ns": float}))
    assert s["lost"] == 1 and s["share_won"] == 0.0


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=0, max_size=300))
def test_random_payload_never_forges(payload):
    # random bytes after "GET " over a blacklist that no random URL can hit (host with a '.' label
    # sequence that random bytes do not spell): never a crash, never a forged frame
    import tempfile, os
    with tempfile.TemporaryDirectory() as d:
        p = req(b"GET " + payload)
        p.time = 1_700_000_000
        path = os.path.join(d, "r.pcap")
        wrpcap(path, [p])
        res = scan(path, tree("zz-never-hit.example"))
        assert res.counters["forged_frames"] == 0
        c = res.counters
        assert c["get"] == c["extracted"] + sum(c[k] for k in ("uri_truncated", "no_host", "host_later",
                                                              "bad_target", "bad_checksum", "canon_failed"))


_HOSTS = ["evil.example", "EVIL.Example", "x.evil.example", "evil.example.", "notevil.example", "evil.examples",
          "fine.example", "FINE.example:80", "fine.example:8080", "example"]
_SEGS = ["bad", "BAD", "bad2", "x", "..", ".", "", "%62ad", "b%41d", "bad?q=1"]
_BLACKLIST = ["evil.example", "fine.example/bad"]


@st.composite
def mixed_requests(draw):
    """A well-formed GET whose Host and target are drawn so that about half hit the blacklist
    (_BLACKLIST: a domain entry and a URL-prefix entry), with random printable bytes in an extra
    header and random bytes after the head."""
    host = draw(st.sampled_from(_HOSTS))
    target = "/" + "/".join(draw(st.lists(st.sampled_from(_SEGS), max_size=4)))
    junk = draw(st.text(alphabet=[chr(c) for c in range(0x20, 0x7f)], max_size=60))
    tail = draw(st.binary(max_size=100))
    head = f"GET {target} HTTP/1.1\r\nX-Junk: {junk}\r\nHost: {host}\r\n\r\n".encode()
    return head + tail, host, target


@settings(max_examples=150, deadline=None)
@given(mixed_requests())
def test_random_payloads_with_blacklisted_urls_mixed_in(case):
    """The hit is decided by an independent path: the reference canonicaliser
    (tests/urlfilter/canon_reference.py) and the naive longest-prefix rule of tests/strategies.py,
    not the tree; a hit forges exactly its FIN + RST pair, a miss nothing."""
    import os
    import tempfile

    from tests.strategies import naive_prefix
    from tests.urlfilter.canon_reference import reference

    payload, host, target = case
    keys = [reference(u.encode(), key=True) for u in _BLACKLIST]
    want = naive_prefix(keys, reference((host + target).encode(), key=True))
    with tempfile.TemporaryDirectory() as d:
        p = req(payload)
        p.time = 1_700_000_000
        path = os.path.join(d, "r.pcap")
        wrpcap(path, [p])
        res = scan(path, tree(*_BLACKLIST))
    c = res.counters
    assert c["get"] == c["extracted"] == 1, c
    df = res.to_pandas()
    assert bool(df["hit"].iloc[0]) == (want is not None), (host, target, want, df.iloc[0].to_dict())
    assert c["hits"] == (want is not None) and c["forged_frames"] == 2 * c["hits"]
    if want is not None:
        from urlfilter.canon import from_key
        assert df["entry"].iloc[0] == from_key(want)


def test_one_pass_with_the_http_analyzer(tmp_path):
    """The URL analyzer and the HTTP analyzer's pairing table share one pass (webtap.pipeline)."""
    from httpanalyzer.pairing import Pairer
    from webtap.pipeline import Pipeline

    class PairingConsumer:
        def __init__(self):
            self.p, self.records = Pairer(), 0

        def feed(self, packets, msgs):
            self.p.feed(msgs.msgs, msgs.data)
            self.records += self.p.take().num_rows

        def finish(self):
            self.p.flush()
            self.records += self.p.take().num_rows

    body = b"GET /bad HTTP/1.1\r\nHost: evil.example\r\n\r\n"
    resp = Ether(src=SMAC, dst=CMAC) / IP(src=S4, dst=C4) / TCP(sport=80, dport=40000, flags="PA", seq=5000,
                                                                ack=1000 + len(body)) / b"HTTP/1.1 200 OK\r\n\r\n"
    path = write(tmp_path, [req(body), resp])
    an, pc = UrlAnalyzer(tree("evil.example/bad")), PairingConsumer()
    totals = Pipeline(path, [an, pc], progress=False).run()
    assert totals.source["packets"] == 2 and totals.files == 1
    assert an.counters["hits"] == 1 and pc.records == 1


def test_conn_table_grows_and_evicts_idle_connections(tmp_path):
    """3000 handshakes force several rebuilds: every connection stays findable; with idle_ns the
    rebuild drops connections idle longer than that (capture time)."""
    E1, E2 = Ether(src=CMAC, dst=SMAC), Ether(src=SMAC, dst=CMAC)
    pk = []
    n = 3000
    for i in range(n):
        cp = 10000 + i
        pk += [E1 / IP(src=C4, dst=S4) / TCP(sport=cp, dport=80, flags="S", seq=i),
               E2 / IP(src=S4, dst=C4) / TCP(sport=80, dport=cp, flags="SA", seq=7, ack=i + 1)]
    for j, p in enumerate(pk):
        p.time = 1_700_000_000 + j * 0.5        # 1 s per connection
    path = write_times(tmp_path, pk)
    for idle_ns, expect_min, expect_max in ((0, n, n), (60_000_000_000, 1, n - 1)):
        ct = um.ConnTable(idle_ns=idle_ns)
        with open_trace(path) as tr:
            for b in tr:
                ct.feed(b.packets, b.data)
        e = ct.entries().view(CONN_DTYPE)
        assert expect_min <= len(e) <= expect_max
        assert ((e["state"] & 3) == 3).all()              # SYN and SYN/ACK both recorded
        assert (e["t_synack"] - e["t_syn"] == 500_000_000).all()
        if idle_ns:
            assert ct.evicted == n - len(e) and e["client_port"].min() > 10000


def write_times(tmp_path, pkts, name="times.pcap"):
    """Like write() but keeps the packets' own times."""
    path = tmp_path / name
    wrpcap(str(path), pkts)
    return str(path)


def test_forge_times_tile_the_call(tmp_path):
    """forge's per-pair times come from one clock read per pair: consecutive spans, none
    negative, together inside the call's own wall time (what scan's forge_ns column sums)."""
    import time

    body = b"GET /bad HTTP/1.1\r\nHost: evil.example\r\n\r\n"
    pkts = [req(body, sport=20000 + i, dport=80, seq=i * 1000, ack=7) for i in range(300)]
    b, mb = one_batch(write(tmp_path, pkts))
    rows, _, _, _ = um.extract(mb.msgs, mb.data)
    assert len(rows) == 300
    t0 = time.perf_counter_ns()
    frames, fo, ns = um.forge(mb.msgs, mb.data, rows)
    wall = time.perf_counter_ns() - t0
    assert len(ns) == 300 and len(fo) == 601
    assert (ns >= 0).all() and 0 < ns.sum() <= wall


@pytest.mark.parametrize("where,k", [("_batch", 2), ("_batch", 3)] + [("_rows", k) for k in range(2, 9)])
def test_records_survive_an_interruption_inside_their_build(where, k):
    """scan/timing build their records once per many lookups (records_at_end). A signal's
    KeyboardInterrupt may land anywhere, also inside a batch's parts (_rows) or the build
    (_batch): the records asked for after it (the partial output) are lookups fed, each once,
    in order, each with its connection's row."""
    from tests.conftest import TRACES, require_shared
    from webtap.pipeline import Pipeline

    trace = require_shared(TRACES / "ndpi" / "1kxun.pcap")

    def run(interrupt: bool):
        an = UrlAnalyzer(tree("example.com/"), forge=False, handshakes=True, records_at_end=True)
        an.RECORDS_EVERY = 8                      # several builds during the run
        if interrupt:
            real = getattr(an, where)
            calls = []

            def flaky(*a):
                calls.append(1)
                if len(calls) == k:
                    raise KeyboardInterrupt("in the build")
                return real(*a)
            setattr(an, where, flaky)
            with pytest.raises(KeyboardInterrupt):
                Pipeline(trace, [an], executor="inline", batch_size=64).run()
        else:
            Pipeline(trace, [an], executor="inline", batch_size=64).run()
        an.finish()
        return an.table(), an.connection_times(), an.counters["lookups"]

    full, ct_full, n_full = run(False)
    part, ct_part, n_part = run(True)
    assert full.num_rows == n_full > 8 and len(ct_full) == full.num_rows
    # the interrupted run stopped after the second build began: every lookup fed so far is a
    # record, once, in order, with its connection row
    assert part.num_rows <= n_part and len(ct_part) == part.num_rows
    assert part.num_rows <= full.num_rows
    assert part.column("frame").to_pylist() == full.column("frame").to_pylist()[:part.num_rows]
