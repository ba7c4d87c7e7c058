"""The exchange rules of docs/TLS.md "Exchanges" on built conversations (tests/tlsx/convbuild.py):
the expected (request frame, response frame) pairs come from the flights' layout, never from the
stage. Hypothesis varies the segment size (record headers and records cut anywhere), the number
and sizes of exchanges, TLS 1.2 / 1.3, full / resumed handshakes, where the TLS 1.3 client's
Finished goes (its own flight or ahead of the first request), the session tickets, and the
close_notify alerts at the end."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from httpanalyzer.tls_exchange import iter_exchanges
from tests.tlsx.convbuild import (build, expected, rec, tls12_handshake, tls13_client_finished,
                                  tls13_handshake)


def _run(tmp_path, flights_list, mss):
    """Several conversations (one per client port) in one trace, in turn."""
    from tests.pcapbuild import pcap as _pcap  # noqa: F401 (build writes pcap bytes)

    pkts_all, exp, t0 = [], [], 1_700_000_000_000_000_000
    raws = []
    frame_base = 0
    for i, flights in enumerate(flights_list):
        raw, built, times = build(flights, mss, client=("10.0.0.1", 40000 + i), t0=t0)
        t0 += 10_000_000_000
        exp += [(a + frame_base, b + frame_base) for a, b in expected(built)]
        frame_base += len(times)
        raws.append(raw)
    # one pcap: the first file's header, every file's packets
    path = tmp_path / "conv.pcap"
    path.write_bytes(raws[0] + b"".join(r[24:] for r in raws[1:]))
    tab, _ = iter_exchanges(path)
    return tab.to_pandas(), exp


def _conv(version, resumed, n, sizes, fin_alone, tickets, alert, before=None):
    """before: how many of the tickets the server sends before a request sent on its own
    (fin_alone): the request acknowledges those only, the rest arrive after it (all by
    default)."""
    fl = list(tls12_handshake(resumed) if version == 12 else tls13_handshake(resumed))
    before = tickets if before is None else before
    for k in range(n):
        qn, rn = sizes[k]
        reqs = [rec(23, qn)]
        if version == 13 and k == 0:
            if fin_alone:
                fl.append(("c", tls13_client_finished(), "hs"))
                if before:
                    fl.append(("s", [rec(23, 250)] * before, "nst"))
                fl.append(("c", reqs, "req"))
                if tickets - before:
                    fl.append(("s", [rec(23, 250)] * (tickets - before), "nst"))
            else:
                fl.append(("c", tls13_client_finished() + reqs, "req", 2))
                if tickets:
                    fl.append(("s", [rec(23, 250)] * tickets, "nst"))
        else:
            fl.append(("c", reqs, "req"))
        fl.append(("s", [rec(23, min(rn, 16400))] + ([rec(23, rn - 16400)] if rn > 16400 else []), "resp"))
    if alert:
        a = rec(23, 19) if version == 13 else rec(21, 26)
        fl.append(("c", [a], "alert"))
        fl.append(("s", [a], "alert"))
    return fl


sizes_st = st.lists(st.tuples(st.integers(20, 3000), st.integers(1100, 20000)), min_size=1, max_size=4)


@settings(max_examples=40, deadline=None)
@given(version=st.sampled_from([12, 13]), sizes=sizes_st, mss=st.one_of(st.integers(6, 40), st.integers(41, 1500)),
       fin_alone=st.booleans(), alert=st.booleans(), before=st.integers(0, 2))
def test_exchanges_follow_the_rules(tmp_path_factory, version, sizes, mss, fin_alone, alert, before):
    """A full handshake then a resumed one to the same server (TLS 1.3: two tickets, then one
    of the length learned from the first connection). When the client sends its first request
    on its own, `before` of the two tickets come before it and the rest after it: a client
    that acknowledges the first ticket only, as nghttp did in a live capture, still has its
    response found after the second."""
    tmp = tmp_path_factory.mktemp("x")
    convs = [_conv(version, False, len(sizes), sizes, fin_alone, 2, alert, before),
             _conv(version, True, len(sizes), sizes, fin_alone, 1, alert)]
    df, exp = _run(tmp, convs, mss)
    got = list(zip(df["request_frame"].astype("Int64"), df["response_frame"].astype("Int64")))
    assert got == exp
    assert df["matched"].all() and not df["early_data"].any() and not df["unsynced"].any()
    assert list(df["exchange_index"]) == list(range(len(sizes))) * 2
    if version == 13:
        # the first exchange of each connection had the tickets before its response
        assert df["tickets_skipped"].tolist() == ([True] + [False] * (len(sizes) - 1)) * 2
        assert (df["version"] == "0x0304").all()
    else:
        assert not df["tickets_skipped"].any() and (df["version"] == "0x0303").all()


def test_small_first_response_without_tickets_is_the_response(tmp_path):
    """A TLS 1.3 server that sends no ticket: its first record (short enough to be one) is held,
    and the next record, of another length, shows it was the response."""
    fl = tls13_handshake() + [("c", tls13_client_finished() + [rec(23, 100)], "req", 2),
                              ("s", [rec(23, 300)], "resp"),
                              ("c", [rec(23, 120)], "req"), ("s", [rec(23, 500)], "resp")]
    df, exp = _run(tmp_path, [fl], 1448)
    assert list(zip(df["request_frame"], df["response_frame"])) == exp
    assert not df["tickets_skipped"].any()


def test_record_lengths_and_handshake_join(tmp_path):
    fl = tls12_handshake() + [("c", [rec(23, 77)], "req"), ("s", [rec(23, 5000)], "resp")]
    df, exp = _run(tmp_path, [fl], 1448)
    assert df["request_record_len"].tolist() == [77] and df["response_record_len"].tolist() == [5000]
    assert df["sni"].tolist() == ["x.test"] and df["alpn_offered"].tolist()[0].tolist() == ["http/1.1"]
    assert df["client_hello_frame"].tolist() == [1]


def test_retransmission_and_alert_are_not_requests(tmp_path):
    """A retransmitted request packet (same SEQ, same ACK) and the close_notify alerts make no
    exchange; the request's first packet stays the original."""
    from tests.tls.hellobuild import tcp_packet
    from tests.pcapbuild import pcap

    fl = tls12_handshake() + [("c", [rec(23, 300)], "req"), ("s", [rec(23, 900)], "resp"),
                              ("c", [rec(21, 26)], "alert"), ("s", [rec(21, 26)], "alert")]
    raw, built, times = build(fl, 1448)
    req = next(f for f in built if f["kind"] == "req")
    # append a copy of the request packet (a retransmission) after the response
    import struct
    off, pkts = 24, []
    while off < len(raw):
        ts_s, ts_u, cl, wl = struct.unpack("<IIII", raw[off:off + 16])
        pkts.append((ts_s * 1_000_000_000 + ts_u * 1000, raw[off + 16:off + 16 + cl]))
        off += 16 + cl
    pkts.insert(req["frames"][0] + 1, (pkts[req["frames"][0] - 1][0] + 5000, pkts[req["frames"][0] - 1][1]))
    (tmp_path / "r.pcap").write_bytes(pcap(pkts))
    tab, _ = iter_exchanges(tmp_path / "r.pcap")
    df = tab.to_pandas()
    assert len(df) == 1 and df["matched"].all()
    assert int(df["request_frame"][0]) == req["first_app"]


def test_several_traces_join_their_own_handshakes(tmp_path):
    """Frame numbers restart in every trace of a run: each exchange joins the handshake of its
    own connection (same ClientHello frame and ports), not another trace's at that frame."""
    paths = []
    for i, sni in enumerate((b"a.test", b"b.test")):
        fl = tls12_handshake(sni=sni) + [("c", [rec(23, 50)], "req"), ("s", [rec(23, 700)], "resp")]
        raw, _, _ = build(fl, 1448, client=("10.0.0.1", 41000 + i))
        paths.append(tmp_path / f"{i}.pcap")
        paths[-1].write_bytes(raw)
    tab, _ = iter_exchanges(paths)
    df = tab.to_pandas()
    assert df.sort_values("client_port")["sni"].tolist() == ["a.test", "b.test"]
    assert (df["client_hello_frame"] == 1).all()


def test_exchange_figures_per_sni_and_alpn(tmp_path):
    from httpanalyzer.tls_plot import exchange_figures

    fl = tls12_handshake() + [("c", [rec(23, 50)], "req"), ("s", [rec(23, 700)], "resp")] * 3
    df, _ = _run(tmp_path, [fl], 1448)
    figs = exchange_figures(df)
    assert sorted(figs) == ["exchange_time_ccdf_alpn", "exchange_time_ccdf_sni"]
    labels = [ln.get_label() for ln in figs["exchange_time_ccdf_sni"].axes[0].get_lines()]
    assert labels == ["x.test (n=3)"]
    labels = [ln.get_label() for ln in figs["exchange_time_ccdf_alpn"].axes[0].get_lines()]
    assert labels == ["http/1.1 (offered) (n=3)"]


def test_early_data_is_a_request_and_end_of_early_data_is_not(tmp_path):
    """TLS 1.3 0-RTT: application records in the ClientHello's flight are a request marked
    early_data (its response follows the server's handshake flight, whose SEQ is not that
    request's ACK: it stays unmatched, `end`); after the ServerHello the client's EndOfEarlyData
    and Finished are handshake; the next request pairs as usual."""
    hs = tls13_handshake()
    ch_flight = (hs[0][0], hs[0][1] + [rec(23, 150)], "early")
    fl = [ch_flight, hs[1],
          ("c", [rec(20, 1), rec(23, 21), rec(23, 53)], "hs"),
          ("s", [rec(23, 250), rec(23, 250)], "nst"),
          ("c", [rec(23, 120)], "req"), ("s", [rec(23, 1500)], "resp")]
    raw, built, _ = build(fl, 1448)
    (tmp_path / "e.pcap").write_bytes(raw)
    tab, _ = iter_exchanges(tmp_path / "e.pcap")
    df = tab.to_pandas()
    assert df["early_data"].tolist() == [True, False]
    assert df["unmatched_reason"].tolist()[0] == "end" and bool(df["matched"].tolist()[1])
    assert (int(df["request_frame"][1]), int(df["response_frame"][1])) == expected(built)[0]


def test_counters_account_for_every_record(tmp_path):
    """iter_exchanges' counters are read after the end-of-input flush: a request left without
    response is counted `unmatched_end` (it was missing from them before)."""
    fl = tls12_handshake() + [("c", [rec(23, 50)], "req"), ("s", [rec(23, 700)], "resp"),
                              ("c", [rec(23, 60)], "req")]
    raw, _, _ = build(fl, 1448)
    (tmp_path / "c.pcap").write_bytes(raw)
    c = {}
    tab, _ = iter_exchanges(tmp_path / "c.pcap", counters=c)
    assert (c["matched"], c["unmatched_end"], tab.num_rows) == (1, 1, 2)
    assert tab.num_rows == c["matched"] + c["unmatched_gc"] + c["unmatched_end"] + c["unmatched_cap"] \
        + c["responses_without_request"]


def test_connection_without_its_client_hello_is_counted(tmp_path):
    """A capture that starts after the handshake: no exchange can be made of the connection
    (a connection starts at its ClientHello), and its TLS records are counted, not dropped in
    silence: `tls_data_without_hello`, once per segment that starts with a TLS record header.
    Every flight after the handshake here is one record, so only its first segment does."""
    import struct

    from tests.tlsx.convbuild import build as _build

    hs = tls12_handshake()
    fl = hs + [("c", [rec(23, 77)], "req"), ("s", [rec(23, 5000)], "resp"),
               ("c", [rec(23, 90)], "req"), ("s", [rec(23, 700)], "resp")]
    raw, built, _ = _build(fl, 1448)
    pkts, off = [], 24
    while off < len(raw):
        n = struct.unpack("<I", raw[off + 8:off + 12])[0]
        pkts.append(raw[off:off + 16 + n])
        off += 16 + n
    first = built[len(hs)]["frames"][0]            # 1-based frame of the first request
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(raw[:24] + b"".join(pkts[first - 1:]))
    c: dict = {}
    tab, _ = iter_exchanges(cut, counters=c)
    assert tab.num_rows == 0
    assert c["tls_data_without_hello"] == len(fl) - len(hs)
    whole = tmp_path / "whole.pcap"
    whole.write_bytes(raw)
    c = {}
    tab, _ = iter_exchanges(whole, counters=c)
    assert tab.num_rows == 2 and c["tls_data_without_hello"] == 0


@pytest.mark.parametrize("before", [0, 1, 2, 3])
def test_request_between_the_tickets_finds_its_response(tmp_path, before):
    """TLS 1.3: the server sends three session tickets after the client's Finished and the
    client's first request (sent on its own) comes after `before` of them, acknowledging those
    only (seen live: nghttp under load). Its ACK is a boundary between tickets, not where they
    start nor the response's SEQ; the response after the last ticket still answers it."""
    fl = _conv(13, False, 2, [(200, 3000), (150, 1500)], True, 3, False, before)
    df, exp = _run(tmp_path, [fl], 1448)
    assert list(zip(df["request_frame"].astype("Int64"), df["response_frame"].astype("Int64"))) == exp
    assert df["matched"].all() and list(df["exchange_index"]) == [0, 1]
    assert df["tickets_skipped"].tolist() == [True, False]
