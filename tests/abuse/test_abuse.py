"""httpanalyzer.abuse (issue 34) on hand-made cases whose answers follow from the rules alone:

* limit_req: nginx's leaky bucket as ngx_http_limit_req_module.c defines it (excess in
  milli-requests, `excess - rate * ms / 1000 + 1000`, reject above burst, delay above delay=,
  the zone's expiry of drained nodes idle 60 s when a new key arrives), worked by hand below;
* window_counts: the sliding window (t - W, t] counted by hand;
* rates and slow_http: a trace built packet by packet (scapy), whose connections, requests,
  windows and gaps are known by construction.
The live checks against real nginx and slowhttptest are test_live_*.py.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from httpanalyzer import abuse
from webtap._ext import abuse as _abuse


def _lr(times_ms, keys=None, rate="1r/s", **kw):
    t = np.asarray(times_ms, np.int64) * 1_000_000 + 1_700_000_000_000_000_000
    keys = keys or ["a"] * len(t)
    df = pd.DataFrame({"request_ts": pd.to_datetime(t, utc=True), "client_ip": keys})
    out = abuse.limit_req(df, rate=rate, **kw)
    return list(out["limit_req"].astype(str)), list(out["excess"]), list(out["delay_ms"])


def test_parse_rate_is_nginx_arithmetic():
    assert abuse.parse_rate("10r/s") == 10_000
    assert abuse.parse_rate("30r/m") == 500
    assert abuse.parse_rate("1r/m") == 16           # 1000 / 60, integer division
    assert abuse.parse_rate(3) == 3000
    for bad in ("0r/s", "10r/h", "ten", "-1r/s"):
        with pytest.raises(ValueError):
            abuse.parse_rate(bad)


def test_no_burst_rejects_until_a_full_period_has_leaked():
    # 1 r/s: new node passes at excess 0; +100 ms: 0 - 100 + 1000 = 900 > 0; +999: 1 > 0;
    # +1000: 0 (passes, last = 1000); +1500: 500 > 0; +2600: 0 - 1600 + 1000 < 0 -> 0 passes
    out, exc, _ = _lr([0, 100, 999, 1000, 1500, 2600])
    assert out == ["passed", "rejected", "rejected", "passed", "rejected", "passed"]
    assert exc == [0.0, 0.9, 0.001, 0.0, 0.5, 0.0]


def test_burst_delays_then_rejects_and_nodelay_passes():
    # 2 r/s burst 2 at t = 0, 0, 0, 0, 250, 500 ms: excess 0, 1000 (delay 1000*1000/2000 =
    # 500 ms), 2000 (1000 ms), 3000 > 2000 rejected (node unchanged), 2000 - 500 + 1000 = 2500
    # rejected, 2000 - 1000 + 1000 = 2000 delayed 1000 ms
    out, exc, dly = _lr([0, 0, 0, 0, 250, 500], rate="2r/s", burst=2)
    assert out == ["passed", "delayed", "delayed", "rejected", "rejected", "delayed"]
    assert exc == [0.0, 1.0, 2.0, 3.0, 2.5, 2.0]
    assert dly == [0, 500, 1000, 0, 0, 1000]
    out, exc, dly = _lr([0, 0, 0, 0, 250, 500], rate="2r/s", burst=2, nodelay=True)
    assert out == ["passed", "passed", "passed", "rejected", "rejected", "passed"]
    assert dly == [0] * 6
    # delay=1: the first excess request passes, the next waits (2000 - 1000) * 1000 / 2000
    out, exc, dly = _lr([0, 0, 0, 0], rate="2r/s", burst=2, delay=1)
    assert out == ["passed", "passed", "delayed", "rejected"]
    assert dly == [0, 0, 500, 0]


def test_per_minute_rate_truncates_the_leak():
    # 30 r/m = 500 milli/s; burst 1: +1999 ms leaks 500 * 1999 / 1000 = 999 (not 999.5):
    # 0 - 999 + 1000 = 1 <= 1000 passes and is not delayed (1 * 1000 / 500 = 2 ms: delayed 2 ms)
    out, exc, dly = _lr([0, 1999], rate="30r/m", burst=1)
    assert exc == [0.0, 0.001] and dly == [0, 2] and out == ["passed", "delayed"]


def test_keys_are_separate_buckets():
    out, _, _ = _lr([0, 10, 20, 30], keys=["a", "b", "a", "b"])
    assert out == ["passed", "passed", "rejected", "rejected"]


def test_zone_expiry_of_drained_idle_nodes():
    # 1 r/m (16 milli/s). a at 0; b, a new key, at 60000: a is the LRU tail, idle 60 s and
    # drained (0 - 16 * 60000 / 1000 <= 0), so it is dropped; a at 61000 is a new node: passes.
    out, exc, _ = _lr([0, 60_000, 61_000], keys=["a", "b", "a"], rate="1r/m")
    assert out == ["passed", "passed", "passed"] and exc == [0.0, 0.0, 0.0]
    # b at 59999: a is idle < 60 s and stays; a at 61000: 0 - 16 * 61000 / 1000 + 1000 = 24 > 0
    out, exc, _ = _lr([0, 59_999, 61_000], keys=["a", "b", "a"], rate="1r/m")
    assert out == ["passed", "passed", "rejected"] and exc == [0.0, 0.0, 0.024]


def test_clock_steps_back():
    # ms < 0 counts as 0 ms (no leak); below -60000 as 1 ms
    k = np.zeros(3, np.int64)
    o, e, _ = _abuse.limit_req(k, np.array([100_000, 99_000, 0], np.int64), 1, 1000, 5000, 0)
    assert list(e) == [0, 1000, 1999]


def test_window_counts():
    g = np.array([0, 0, 0, 0, 1, 1], np.int64)
    t = np.array([0, 5, 10, 10, 3, 20], np.int64)
    # window 10: (t-10, t]: 0 -> {0}; 5 -> {0,5}; 10 -> {5,10,10} (0 is out); group 1 separate
    assert list(_abuse.window_counts(g, t, 10)) == [1, 2, 3, 3, 1, 1]
    with pytest.raises(ValueError):
        _abuse.window_counts(g, t, 0)


# ------------------------------------------------------------------ a trace built by hand

T0 = 1_700_000_000.0


def ns(t: float) -> int:
    """Capture time T0 + t in ns (the pcap holds microseconds)."""
    return 1_700_000_000 * 10**9 + round(t * 1e6) * 1000


def _trace(tmp_path):
    scapy = pytest.importorskip("scapy.all")
    Ether, IP, TCP, Raw = scapy.Ether, scapy.IP, scapy.TCP, scapy.Raw
    pk = []
    S = "10.9.0.80"

    class Conn:
        def __init__(self, cip, cport):
            self.c, self.p, self.cs, self.ss = cip, cport, 1000, 5000

        def _pkt(self, t, client, flags, data=b"", win=64240):
            if client:
                ip = IP(src=self.c, dst=S) / TCP(sport=self.p, dport=80, flags=flags, seq=self.cs,
                                                 ack=self.ss, window=win)
                self.cs += len(data) + (1 if "S" in flags or "F" in flags else 0)
            else:
                ip = IP(src=S, dst=self.c) / TCP(sport=80, dport=self.p, flags=flags, seq=self.ss,
                                                 ack=self.cs, window=win)
                self.ss += len(data) + (1 if "S" in flags or "F" in flags else 0)
            p = Ether() / ip / Raw(data) if data else Ether() / ip
            p.time = T0 + t
            pk.append(p)

        def syn(self, t):
            self._pkt(t, True, "S")
            self._pkt(t + 0.0001, False, "SA")
            self._pkt(t + 0.0002, True, "A")

        def req(self, t, host="a.test", raw=None):
            self._pkt(t, True, "PA", raw or f"GET / HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())

        def resp(self, t, n=20):
            body = b"x" * n
            self._pkt(t, False, "PA", b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n + body)

        def data(self, t, client, payload):
            self._pkt(t, client, "PA", payload)

        def ack(self, t, win):
            self._pkt(t, True, "A", win=win)

        def fin(self, t, client=True):
            self._pkt(t, client, "FA")

        def rst(self, t):
            self._pkt(t, True, "R", win=0)

    A, B = "10.9.0.1", "10.9.0.2"
    c1 = Conn(A, 40001); c1.syn(0.0); c1.req(0.010); c1.resp(0.020); c1.req(0.300); c1.resp(0.310)
    c2 = Conn(A, 40002); c2.syn(0.100); c2.req(0.110, "b.test"); c2.resp(0.120); c2.fin(0.500)
    c3 = Conn(A, 40003); c3.syn(1.500); c3.req(1.510); c3.resp(1.520); c3.rst(1.600)
    c4 = Conn(B, 40004); c4.req(0.050); c4.resp(0.060); c4.fin(0.070)        # no SYN in the trace
    c1.fin(2.0)
    # slow HTTP, client C
    C = "10.9.0.3"
    s1 = Conn(C, 41001); s1.syn(0.0)                                    # slowloris
    s1.req(0.010, raw=b"GET / HTTP/1.1\r\nHost: c.test\r\n")
    for t in (3.0, 6.0, 9.0):
        s1.data(t, True, b"X-a: b\r\n")
    s1.rst(10.0)
    s2 = Conn(C, 41002); s2.syn(0.0)                                    # slow body
    s2.req(0.010, raw=b"POST /f HTTP/1.1\r\nHost: c.test\r\nContent-Length: 1000\r\n\r\n")
    for t in (2.0, 4.0, 6.0, 8.0):
        s2.data(t, True, b"k=vvvvvvv&")
    s2.resp(8.5); s2.fin(8.6)
    s3 = Conn(C, 41003); s3.syn(0.0); s3.req(0.010); s3.resp(0.020, 1000)  # slow read
    s3.ack(0.030, 0); s3.ack(2.030, 0); s3.ack(4.030, 5000); s3.fin(4.5)
    s4 = Conn(C, 41004); s4.syn(0.0); s4.req(0.010); s4.resp(0.020); s4.fin(7.020)   # idle
    s5 = Conn(C, 41005); s5.syn(0.0); s5.req(0.010); s5.resp(0.020); s5.fin(0.050)   # normal
    s6 = Conn(C, 41006); s6.syn(0.0)                                    # a normal split header
    s6.req(0.010, raw=b"GET / HTTP/1.1\r\nHost: c.test\r\n"); s6.data(0.011, True, b"\r\n")
    s6.resp(0.020); s6.fin(0.030)
    pk.sort(key=lambda p: p.time)
    path = tmp_path / "abuse.pcap"
    scapy.wrpcap(str(path), pk)
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return abuse.collect(str(_trace(tmp_path_factory.mktemp("abuse"))))


def _row(df, **kv):
    m = np.ones(len(df), bool)
    for k, v in kv.items():
        m &= (df[k] == v).to_numpy()
    assert m.sum() == 1, (kv, df)
    return df[m].iloc[0]


def test_connections(run):
    c = run.conns
    assert len(c) == 10
    r = _row(c, client_ip="10.9.0.1", client_port=40001)
    assert r.syn_seen and r.closed and r.requests == 2
    assert r.start_ts == ns(0) and r.end_ts == ns(2.0)
    r = _row(c, client_ip="10.9.0.2")
    assert not r.syn_seen and r.server_port == 80       # no SYN: the request's sender is client
    assert r.start_ts == ns(0.050)


def test_rates_per_client(run):
    r = abuse.rates(run, window_s="1s")
    a = _row(r, client_ip="10.9.0.1")
    # requests at 0.010, 0.110, 0.300, 1.510: (t-1, t] holds 3 at 0.300
    assert a.requests == 4 and a.peak_requests == 3 and a.peak_rps == 3.0
    assert a.peak_at == pd.Timestamp(ns(0.300), tz="UTC")
    assert a.mean_rps == pytest.approx(4 / 1.5)
    # connections start 0.0, 0.1, 1.5, end 2.0, 0.5 (FIN), 1.6 (RST)
    assert a.connections == 3 and a.peak_new_conns == 2 and a.peak_concurrent == 2
    b = _row(r, client_ip="10.9.0.2")
    assert b.requests == 1 and b.connections == 1 and b.peak_concurrent == 1
    assert b.mean_rps == 1.0                                 # one request over one window


def test_rates_per_client_and_host(run):
    r = abuse.rates(run, window_s=1.0, by=("client_ip", "host"))
    a = _row(r, client_ip="10.9.0.1", host="a.test")
    assert a.requests == 3 and a.peak_requests == 2                  # 0.010 and 0.300
    assert a.connections == 2 and a.peak_new_conns == 1 and a.peak_concurrent == 2
    b = _row(r, client_ip="10.9.0.1", host="b.test")
    assert b.requests == 1 and b.connections == 1


def test_slow_http_indicators(run):
    s = abuse.slow_http(run)
    s = s[s["client_ip"] == "10.9.0.3"].set_index("client_port")
    want = {41001: "slowloris", 41002: "slow_body", 41003: "slow_read", 41004: "idle_keepalive"}
    for port in s.index:
        flags = {k for k in abuse.SLOW_KINDS if s.loc[port, k]}
        assert flags == ({want[port]} if port in want else set()), (port, flags)
    assert s.loc[41001, "wait_s"] == pytest.approx(9.99)
    assert s.loc[41002, "trickle_segments"] == 4
    assert s.loc[41002, "trickle_rate"] == pytest.approx(40 / 8.49)
    assert s.loc[41003, "zero_window_segments"] == 2
    assert s.loc[41003, "zero_window_s"] == pytest.approx(4.0)
    assert s.loc[41004, "idle_s"] == pytest.approx(7.0)
    assert bool(s.loc[41005, "slow"]) is False and bool(s.loc[41006, "slow"]) is False


@pytest.fixture(scope="module")
def run_events(tmp_path_factory):
    """The same trace with every TCP event kept (the batch computation of the connections)."""
    return abuse.collect(str(_trace(tmp_path_factory.mktemp("abuse_ev"))), keep_events=True)


def test_tcp_event_dtype_mirrors_the_struct_and_carries_the_window(run, run_events):
    from webtap._ext.dissect import tcp_event_size
    from webtap.records.message import TCP_EVENT_DTYPE

    assert TCP_EVENT_DTYPE.itemsize == tcp_event_size()
    assert len(run.events) == 0                  # the streaming table keeps no event
    w = run_events.events["window"]
    # the hand-made trace advertises 64240 everywhere but for its zero-window ACKs (2), the
    # slow reader's reopened window (5000) and the RSTs (0 by the builder, 2 of them)
    assert sorted(set(w.tolist())) == [0, 5000, 64240]
    assert int((w == 0).sum()) == 4 and int((w == 5000).sum()) == 1


# ------------------------------------------------------------------ properties

from hypothesis import given, settings, strategies as st  # noqa: E402


def _reference_limit_req(keys, times, rate, burst, delay):
    """nginx's lookup / account / expiry written out plainly (dicts and a list for the LRU
    queue), as the independent reference of the C loop."""
    nodes: dict = {}            # key -> [excess, last]
    lru: list = []              # most recently used first
    out = []

    def cdiv(a, b):             # C integer division (truncation toward zero)
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b > 0) else -q

    for k, now in zip(keys, times):
        if k in nodes:
            lru.remove(k)
            lru.insert(0, k)
            ex, last = nodes[k]
            ms = now - last
            ms = 1 if ms < -60000 else (0 if ms < 0 else ms)
            e = max(ex - cdiv(rate * ms, 1000) + 1000, 0)
            if e > burst:
                out.append((2, e, 0))
                continue
            nodes[k] = [e, now if ms else last]
            d = cdiv((e - delay) * 1000, rate) if e > delay else 0
            out.append((1 if d else 0, e, d))
            continue
        for _ in range(2):
            if not lru:
                break
            t = lru[-1]
            ms = abs(now - nodes[t][1])
            if ms < 60000 or nodes[t][0] - cdiv(rate * ms, 1000) > 0:
                break
            lru.pop()
            del nodes[t]
        nodes[k] = [0, now]
        lru.insert(0, k)
        out.append((0, 0, 0))
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 70_000)), max_size=60),
       st.sampled_from([16, 500, 1000, 4000, 10_000]), st.integers(0, 5), st.integers(0, 3),
       st.booleans(), st.booleans())
def test_limit_req_matches_the_plain_reference(reqs, rate, burst, delay, nodelay, sort):
    keys = [k for k, _ in reqs]
    times = [t for _, t in reqs]
    if sort:
        times = sorted(times)               # also out-of-order clocks when not sorted
    dl = (1 << 62) if nodelay else 1000 * delay
    o, e, d = _abuse.limit_req(np.array(keys, np.int64), np.array(times, np.int64), 4, rate,
                               1000 * burst, dl)
    assert list(zip(o.tolist(), e.tolist(), d.tolist())) == \
        _reference_limit_req(keys, times, rate, 1000 * burst, dl)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 50)), max_size=60),
       st.integers(1, 20))
def test_window_counts_match_brute_force(ev, width):
    ev = sorted(ev)
    g = np.array([a for a, _ in ev], np.int64)
    t = np.array([b for _, b in ev], np.int64)
    want = [sum(1 for a2, b2 in ev if a2 == a and b - width < b2 <= b) for a, b in ev]
    assert _abuse.window_counts(g, t, width).tolist() == want


def test_figures_are_labelled(run):
    from httpanalyzer import abuse_plot
    from tests.figcheck import assert_labelled

    lr = abuse.limit_req(run.requests, rate="1r/s")
    for fig in (abuse_plot.rates_figure(abuse.rates(run)), abuse_plot.limit_req_figure(lr),
                abuse_plot.slow_figure(abuse.slow_http(run))):
        assert_labelled(fig)
    # the limit_req figure's legend counts the outcomes
    labels = [t.get_text() for t in abuse_plot.limit_req_figure(lr).axes[0].get_legend().get_texts()]
    counts = lr["limit_req"].value_counts()
    assert labels == [f"{k} ({counts.get(k, 0)})" for k in abuse.LIMIT_REQ_OUTCOMES]
