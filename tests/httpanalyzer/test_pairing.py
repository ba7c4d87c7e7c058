"""Each pairing rule of the table (ext/pair/pairing.pyx), on HttpMsg batches built in numpy."""
import ipaddress

import numpy as np
import pandas as pd
import pytest

from webtap.records import http as records
from httpanalyzer.pairing import Pairer
from tests.msgbuild import MsgBuilder
from webtap._ext.pairing import PairingTable

S = 1_000_000_000
T0 = 1_393_978_285 * S
C, SV = "123.111.50.23", "214.223.22.6"


def run(b, order=None, flush=True, **kw):
    p = Pairer(**kw)
    msgs, data = b.build(order)
    p.feed(msgs, data)
    if flush:
        p.flush()
    return records.to_pandas(p.take()), p.counters()


def paired(df):
    return df[df.matched]


def test_record_dtype_matches_struct():
    assert records.RECORD_DTYPE.itemsize == PairingTable.record_size()


def test_record_dtype_offsets_match_struct():
    """Field for field: a field added in the struct's tail padding (http_version) leaves the
    size as it was, so the size alone would not see a mirror that forgot it."""
    layout = PairingTable.record_layout()
    assert list(layout) == list(records.RECORD_DTYPE.names)
    assert {k: records.RECORD_DTYPE.fields[k][1] for k in layout} == layout
    assert layout["http_version"] == layout["outer_ip_version"] + 1


def test_eq2_is_symmetric_and_follows_the_paper():
    s = np.frombuffer(bytes([10, 0, 0, 1]) + bytes(12), np.uint8)
    d = np.frombuffer(bytes([10, 0, 0, 2]) + bytes(12), np.uint8)
    h_req = PairingTable.hash_eq2(s, 1234, d, 80, 777, 4)
    h_resp = PairingTable.hash_eq2(d, 80, s, 1234, 777, 4)
    assert h_req == h_resp == (0x0A000001 ^ 1234 ^ 0x0A000002 ^ 80 ^ 777)
    v6 = np.arange(16, dtype=np.uint8)
    words = [int.from_bytes(bytes(v6[i:i + 4]), "big") for i in range(0, 16, 4)]
    assert PairingTable.hash_eq2(v6, 0, v6, 0, 0, 6) == 0  # x ^ x
    z = np.zeros(16, np.uint8)
    assert PairingTable.hash_eq2(v6, 0, z, 0, 0, 6) == words[0] ^ words[1] ^ words[2] ^ words[3]


@pytest.mark.parametrize("response_first", [False, True])
def test_either_order(response_first):
    b = MsgBuilder()
    b.req(T0 + 777_375_000, C, 2311, SV, 80, 1000, 5000, uri="/icon.gif", host="service.host.com",
          ua="Mozilla/4.0")
    b.resp(T0 + 881_505_000, SV, 80, C, 2311, 5000, 1100, status=200, reason="OK")
    df, cnt = run(b, order=[1, 0] if response_first else None)
    assert len(df) == 1 and df.matched.all()
    r = df.iloc[0]
    assert (r.client_ip, r.client_port, r.server_ip, r.server_port) == (C, 2311, SV, 80)
    assert r.response_time == np.timedelta64(104_130_000, "ns")
    assert (r.status, r.reason, r.method, r.uri, r.host, r.user_agent) == (
        200, "OK", "GET", "/icon.gif", "service.host.com", "Mozilla/4.0")
    assert (r.request_ack, r.response_seq) == (5000, 5000)
    assert r.out_of_order == response_first
    assert cnt["paired"] == 1 and cnt["out_of_order"] == int(response_first)


def test_no_pair_when_seq_differs_or_tuple_not_reversed():
    b = MsgBuilder()
    b.req(T0, C, 2311, SV, 80, 1000, 5000)
    b.resp(T0 + 1, SV, 80, C, 2311, 5001, 1100)          # wrong SEQ
    b.resp(T0 + 2, SV, 81, C, 2311, 5000, 1100)          # wrong port
    b.resp(T0 + 3, C, 2311, SV, 80, 5000, 1100)          # same direction as the request
    df, cnt = run(b)
    assert not df.matched.any()
    assert list(df.outcome) == ["request_only"] + ["response_only"] * 3
    assert (df.unmatched_reason == "end").all()
    assert cnt["request_unmatched_end"] == 1 and cnt["response_unmatched_end"] == 3


def test_retransmitted_request_pairs_first_copy_and_second_waits():
    b = MsgBuilder()
    b.req(T0, C, 2311, SV, 80, 1000, 5000)
    b.req(T0 + S, C, 2311, SV, 80, 1000, 5000)           # retransmission: same SEQ and ACK
    b.resp(T0 + 2 * S, SV, 80, C, 2311, 5000, 1100)
    df, cnt = run(b)
    p = paired(df)
    assert len(p) == 1 and p.iloc[0].request_frame == 1     # oldest waiting copy pairs (frame 1)
    left = df[~df.matched]
    assert len(left) == 1 and left.iloc[0].request_frame == 2 and left.iloc[0].request_repeat
    assert cnt["request_repeat"] == 1


def test_retransmitted_response_waits_for_its_own_request():
    b = MsgBuilder()
    b.req(T0, C, 2311, SV, 80, 1000, 5000)
    b.resp(T0 + S, SV, 80, C, 2311, 5000, 1100)
    b.resp(T0 + 2 * S, SV, 80, C, 2311, 5000, 1100)      # retransmitted response
    b.req(T0 + 3 * S, C, 2311, SV, 80, 1000, 5000)       # ... and a retransmitted request
    df, cnt = run(b)
    p = paired(df).sort_values("request_frame")
    assert list(p.request_frame) == [1, 4] and list(p.response_frame) == [2, 3]
    assert cnt["paired"] == 2 and cnt["response_repeat"] == 0   # the first copy had already paired


def test_duplicate_waiting_response_is_flagged():
    b = MsgBuilder()
    b.resp(T0, SV, 80, C, 2311, 5000, 1100)
    b.resp(T0 + 1, SV, 80, C, 2311, 5000, 1100)
    b.req(T0 + 2, C, 2311, SV, 80, 1000, 5000)
    df, cnt = run(b)
    p = paired(df)
    assert len(p) == 1 and p.iloc[0].response_frame == 1 and p.iloc[0].out_of_order
    assert df[~df.matched].iloc[0].response_repeat and cnt["response_repeat"] == 1


@pytest.mark.parametrize("order", [None, [0, 2, 1], [1, 2, 0], [2, 1, 0]])
def test_100_continue_then_200(order):
    b = MsgBuilder()
    b.req(T0, C, 2311, SV, 80, 1000, 5000, method="POST", uri="/upload")
    cont = b.resp(T0 + S // 10, SV, 80, C, 2311, 5000, 1100, status=100, reason="Continue")
    n100 = b.rows[cont]["payload_len"]
    b.resp(T0 + S, SV, 80, C, 2311, 5000 + n100, 9000, status=200, reason="OK")
    df, cnt = run(b, order=order)
    assert df.matched.all() and len(df) == 2, df
    df = df.sort_values("response_frame")
    assert list(df.status) == [100, 200]
    assert list(df.interim) == [True, False] and list(df.after_interim) == [False, True]
    assert (df.request_frame == 1).all() and (df.method == "POST").all()
    assert cnt["paired_interim"] == 1 and cnt["paired_after_interim"] == 1


def test_100_continue_without_final_is_counted_not_duplicated():
    b = MsgBuilder()
    b.req(T0, C, 2311, SV, 80, 1000, 5000, method="POST")
    b.resp(T0 + 1, SV, 80, C, 2311, 5000, 1100, status=100, reason="Continue")
    df, cnt = run(b)
    assert len(df) == 1 and df.iloc[0].status == 100
    assert cnt["final_response_missing"] == 1


def test_101_switching_protocols_is_final():
    b = MsgBuilder()
    b.req(T0, C, 2311, SV, 80, 1000, 5000)
    b.resp(T0 + 1, SV, 80, C, 2311, 5000, 1100, status=101, reason="Switching Protocols")
    df, cnt = run(b)
    assert len(df) == 1 and df.matched.all() and not df.interim.any()
    assert cnt["final_response_missing"] == 0


def test_pipelined_requests_pair_fifo_on_the_shared_ack():
    """Three requests sent back to back share ACK 5000; only the first response starts at SEQ
    5000. First-packet pairing cannot place the later responses (their SEQ is past the first
    response's body): one pair, the rest unmatched, as the paper accepts."""
    b = MsgBuilder()
    for i in range(3):
        b.req(T0 + i, C, 2311, SV, 80, 1000 + 100 * i, 5000, uri=f"/{i}")
    for i in range(3):
        b.resp(T0 + 10 + i, SV, 80, C, 2311, 5000 + 700 * i, 1300)
    df, cnt = run(b)
    p = paired(df)
    assert len(p) == 1 and p.iloc[0].uri == "/0" and p.iloc[0].response_seq == 5000
    assert cnt["request_unmatched_end"] == 2 and cnt["response_unmatched_end"] == 2


@pytest.mark.parametrize("delta,pairs", [(60 * S - 1, True), (60 * S, False), (60 * S + 1, False)])
def test_gc_expiry_at_exactly_60s_capture_time(delta, pairs):
    b = MsgBuilder()
    b.req(T0, C, 2311, SV, 80, 1000, 5000)
    b.resp(T0 + delta, SV, 80, C, 2311, 5000, 1100)
    df, cnt = run(b, flush=False)
    if pairs:
        assert len(df) == 1 and df.matched.all()
    else:
        assert len(df) == 1 and df.iloc[0].outcome == "request_only"
        assert df.iloc[0].unmatched_reason == "gc" and cnt["request_unmatched_gc"] == 1


def test_gc_timeout_is_configurable_and_advance_runs_gc():
    b = MsgBuilder()
    b.req(T0, C, 2311, SV, 80, 1000, 5000)
    p = Pairer(gc_timeout=5)
    p.feed(*b.build())
    p.advance(T0 + 5 * S - 1)
    assert p.pending == 1
    p.advance(T0 + 5 * S)
    assert p.pending == 0 and p.counters()["request_unmatched_gc"] == 1
    assert p.take().num_rows == 1


def test_clock_backwards_small_jump_still_pairs_and_big_jump_flushes():
    b = MsgBuilder()
    b.req(T0 + 10 * S, C, 2311, SV, 80, 1000, 5000)
    b.resp(T0 + 9 * S, SV, 80, C, 2311, 5000, 1100)            # 1 s back: ordinary reordering
    b.req(T0 + 20 * S, C, 2312, SV, 80, 1000, 6000)
    b.resp(T0 - 1000 * S, SV, 80, C, 2312, 6000, 1100)         # jump back > window: reset
    df, cnt = run(b)
    assert cnt["clock_backwards"] == 2 and cnt["clock_reset"] == 1
    assert df.matched.sum() == 1
    assert (df[~df.matched].unmatched_reason.astype(str).tolist()
            == ["clock_reset", "end"])


@pytest.mark.parametrize("back,reset", [(60 * S - 1, False), (60 * S, False), (60 * S + 1, True)])
def test_clock_reset_only_beyond_exactly_the_window(back, reset):
    """docs/PAIRING.md: a jump back by MORE than gc_timeout is a clock reset; a message exactly
    60 s behind the clock is only `clock_backwards` and pairs like any late message."""
    b = MsgBuilder()
    b.req(T0 + 100 * S, C, 2311, SV, 80, 1000, 5000)
    b.resp(T0 + 100 * S - back, SV, 80, C, 2311, 5000, 1100)
    df, cnt = run(b)
    assert cnt["clock_backwards"] == 1
    assert cnt["clock_reset"] == (1 if reset else 0)
    if reset:
        # the waiting request leaves with reason clock_reset, the response then waits alone
        assert df.matched.sum() == 0 and len(df) == 2
        assert df.unmatched_reason.astype(str).tolist() == ["clock_reset", "end"]
        assert df.outcome.astype(str).tolist() == ["request_only", "response_only"]
        assert cnt["request_unmatched_clock_reset"] == 1
    else:
        assert len(df) == 1 and df.matched.all()
        assert cnt["request_unmatched_clock_reset"] == 0


def test_pairing_key_compares_the_whole_reversed_tuple():
    """Messages that land in the same cell (equal Eq. 2 value, or equal modulo the number of
    cells) but are not each other's counterpart do not pair: the ACK/SEQ differs (only in bit 31,
    so the cell is the same), the client address differs, or the server address differs (IPv6
    addresses whose four 32-bit words XOR to the same value, so Eq. 2 is equal)."""
    b = MsgBuilder()
    b.req(T0, C, 2311, SV, 80, 1000, 5000)
    b.resp(T0 + 1, SV, 80, C, 2311, 5000 ^ (1 << 31), 1100)       # SEQ != ACK, same cell
    a1, a2 = "2001:db8::1", "2001:db8::1:0:0"                      # fold: equal
    s1, s2 = "2001:db8::80", "2001:db8::80:0:0"                    # fold: equal
    b.req(T0 + 2, a1, 4000, s1, 80, 1, 9000)
    b.resp(T0 + 3, s1, 80, a2, 4000, 9000, 2)                     # to the other client
    b.req(T0 + 4, a1, 4001, s1, 80, 1, 7000)
    b.resp(T0 + 5, s2, 80, a1, 4001, 7000, 2)                     # from the other server
    msgs, _ = b.build()
    ip = lambda s: np.frombuffer(ipaddress.ip_address(s).packed, np.uint8)  # noqa: E731
    assert (PairingTable.hash_eq2(ip(a1), 4000, ip(s1), 80, 9000, 6)
            == PairingTable.hash_eq2(ip(s1), 80, ip(a2), 4000, 9000, 6))
    assert (PairingTable.hash_eq2(ip(a1), 4001, ip(s1), 80, 7000, 6)
            == PairingTable.hash_eq2(ip(s2), 80, ip(a1), 4001, 7000, 6))
    df, cnt = run(b)
    assert df.matched.sum() == 0 and len(df) == 6 and cnt["paired"] == 0


def test_repeat_flag_needs_the_same_seq_and_ack():
    """docs/PAIRING.md: a retransmission has the same 4-tuple, SEQ and ACK as one still
    waiting. Two responses on one SEQ with different ACKs are not repeats."""
    b = MsgBuilder()
    b.resp(T0, SV, 80, C, 2311, 5000, 1100)
    b.resp(T0 + 1, SV, 80, C, 2311, 5000, 1200)
    b.resp(T0 + 2, SV, 80, C, 2311, 5000, 1100)                   # a repeat of the first
    df, cnt = run(b)
    assert len(df) == 3 and not df.matched.any()
    assert df.response_repeat.tolist() == [False, False, True] and cnt["response_repeat"] == 1


def test_ipv6():
    c6, s6 = "2001:db8::1", "2001:db8::80"
    b = MsgBuilder()
    b.req(T0, c6, 40000, s6, 8080, 1, 2)
    b.resp(T0 + 5, s6, 8080, c6, 40000, 2, 300)
    b.req(T0 + 6, "2001:db8::2", 40000, s6, 8080, 1, 2)   # other client, same ports and ACK
    df, cnt = run(b)
    p = paired(df)
    assert len(p) == 1 and p.iloc[0].client_ip == c6 and p.iloc[0].server_ip == s6
    assert p.iloc[0].ip_version == 6 and len(df) == 2


def test_ipv4_and_ipv6_never_pair_across_versions():
    b = MsgBuilder()
    b.req(T0, "0.0.0.1", 1, "0.0.0.2", 2, 1, 2)
    b.resp(T0 + 1, "::2", 2, "::1", 1, 2, 300)               # same 16 bytes, other version
    df, _ = run(b)
    assert not df.matched.any()


def test_vlan_tagged_messages_pair_and_keep_the_tag():
    b = MsgBuilder()
    b.req(T0, C, 2311, SV, 80, 1000, 5000, vlan=100)
    b.resp(T0 + 1, SV, 80, C, 2311, 5000, 1100, vlan=100)
    df, _ = run(b)
    assert df.matched.all() and df.iloc[0].vlan == 100


def test_missing_host_and_agent_are_null_and_counted():
    b = MsgBuilder()
    b.req(T0, C, 2311, SV, 80, 1000, 5000, host=None, ua=None)
    b.resp(T0 + 1, SV, 80, C, 2311, 5000, 1100, reason="")
    df, cnt = run(b)
    r = df.iloc[0]
    assert r.matched and pd.isna(r.host) and pd.isna(r.user_agent) and r.reason == ""
    assert cnt["no_host"] == 1


def test_text_survives_the_batch_buffer():
    """Waiting messages copy their text: the buffer of an earlier batch may be overwritten."""
    b = MsgBuilder()
    b.req(T0, C, 2311, SV, 80, 1000, 5000, uri="/long/" + "x" * 3000, host="h.example")
    msgs, data = b.build()
    data = data.copy()
    p = Pairer()
    p.feed(msgs, data)
    data[:] = 0
    b2 = MsgBuilder()
    b2.resp(T0 + 1, SV, 80, C, 2311, 5000, 1100)
    p.feed(*b2.build())
    df = records.to_pandas(p.take())
    assert df.iloc[0].uri == "/long/" + "x" * 3000 and df.iloc[0].host == "h.example"


def test_non_utf8_text_is_read_as_latin1():
    b = MsgBuilder()
    b.req(T0, C, 2311, SV, 80, 1000, 5000, uri=b"/caf\xe9", ua="ok \xc3\xa9".encode("latin-1"))
    df, cnt = run(b)
    assert df.iloc[0].uri == "/café" and df.iloc[0].user_agent == "ok é"
    assert cnt["text_latin1"] == 1


def test_span_outside_buffer_is_dropped_and_counted():
    b = MsgBuilder()
    b.req(T0, C, 2311, SV, 80, 1000, 5000)
    msgs, data = b.build()
    msgs[0]["uri"]["off"] = len(data) + 5
    p = Pairer()
    p.feed(msgs, data)
    p.flush()
    assert p.counters()["bad_span"] == 1
    df = records.to_pandas(p.take())
    assert df.iloc[0].uri == ""


def test_uri_truncated_flag_passes_through():
    b = MsgBuilder()
    b.req(T0, C, 2311, SV, 80, 1000, 5000, flags=1)
    df, _ = run(b)
    assert df.iloc[0].uri_truncated


def test_grows_and_keeps_pairing():
    b = MsgBuilder()
    n = 5000
    for i in range(n):
        b.req(T0 + i, C, 1024 + i % 60000, SV, 80, i, 10 * i)
    for i in range(n):
        b.resp(T0 + n + i, SV, 80, C, 1024 + i % 60000, 10 * i, i + 1)
    p = Pairer(initial_cells=16)
    p.feed(*b.build())
    assert p.counters()["grows"] >= 8 and p.counters()["paired"] == n and p.pending == 0


def test_unmatched_response_names_client_and_server_from_its_direction():
    b = MsgBuilder()
    b.resp(T0, SV, 80, C, 2311, 5000, 1100, status=503, reason="Service Unavailable")
    df, cnt = run(b)
    r = df.iloc[0]
    assert (r.client_ip, r.client_port, r.server_ip, r.server_port) == (C, 2311, SV, 80)
    assert r.outcome == "response_only" and r.status == 503 and pd.isna(r.method)
    assert pd.isna(r.request_ts) and pd.isna(r.response_time) and pd.isna(r.request_ack)


def test_cap_evicts_oldest_first():
    b = MsgBuilder()
    for i in range(5):
        b.req(T0 + i, C, 2000 + i, SV, 80, 1, 100 + i, uri=f"/{i}")
    b.resp(T0 + 10, SV, 80, C, 2000, 100, 1)          # answers the evicted one: unmatched now
    b.resp(T0 + 11, SV, 80, C, 2004, 104, 1)          # answers the newest: pairs
    df, cnt = run(b, max_pending=3)
    assert cnt["request_unmatched_cap"] >= 2 and cnt["peak_pending"] <= 3
    capped = df[df.unmatched_reason == "cap"]
    assert "/0" in set(capped.uri) and "/1" in set(capped.uri)
    assert list(df[df.matched].uri) == ["/4"]


def test_key_limit_evicts_oldest_same_key_message():
    b = MsgBuilder()
    for i in range(4):
        b.req(T0 + i, C, 2311, SV, 80, 10 * i, 5000, uri=f"/{i}")   # pipelined on one ACK
    b.resp(T0 + 10, SV, 80, C, 2311, 5000, 1)
    df, cnt = run(b, max_per_key=2)
    assert cnt["request_unmatched_key_limit"] == 2
    assert sorted(df[df.unmatched_reason == "key_limit"].uri) == ["/0", "/1"]
    assert list(df[df.matched].uri) == ["/2"]


def test_arena_cap_keeps_messages_without_text():
    b = MsgBuilder()
    n = 40
    for i in range(n):
        b.req(T0 + i, C, 2000 + i, SV, 80, 1, i, uri="/" + "u" * 60000)   # 64 KiB class each
    p = Pairer(arena_max_bytes=1 << 20)                                     # 16 blocks fit
    p.feed(*b.build())
    c = p.counters()
    assert c["arena_full"] == n - 16 and p.table.arena_bytes == 1 << 20
    p.flush()
    df = records.to_pandas(p.take())
    assert (df.uri.str.len() > 0).sum() == 16 and df.text_clipped.sum() == n - 16


def test_late_message_gets_the_whole_window_from_the_clock():
    """A message captured 30 s 'in the past' is stamped with the clock: it still waits 60 s."""
    b = MsgBuilder()
    b.req(T0 + 100 * S, C, 1, SV, 80, 1, 1)
    b.req(T0 + 70 * S, C, 2311, SV, 80, 1000, 5000)                 # late by 30 s
    b.resp(T0 + 100 * S + 59 * S, SV, 80, C, 2311, 5000, 1100)      # 59 s after the clock
    df, cnt = run(b, flush=False)
    assert df.matched.sum() == 1 and cnt["clock_backwards"] == 1
