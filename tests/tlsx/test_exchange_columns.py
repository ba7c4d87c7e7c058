"""The exchange records' columns and their handshake join (ext/out/xcolumns.pyx, through
webtap.records.exchange.exchange_table) against a reference written here in plain Python:
records and handshake tables drawn by Hypothesis (addresses of both families, frames that tie,
ClientHello keys that several handshakes share or none has, null and empty strings and lists,
h2 offered or chosen, the stage's version or the handshake's), the expected rows computed one by
one from the drawn values, the Community ID by the spec authors' `communityid` package and the
address text by Python's ipaddress."""
from __future__ import annotations

import ipaddress

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

communityid = pytest.importorskip("communityid", reason="make test installs communityid")

from webtap.records.exchange import (EXCHANGE_COLUMNS, EXCHANGE_RECORD_DTYPE,  # noqa: E402
                                     EXCHANGE_REASONS, ExchangeRows, exchange_table)

_CID = communityid.CommunityID(seed=0)
_V4 = st.sampled_from(["10.0.0.1", "10.0.0.2", "192.168.1.200", "8.8.8.8", "0.0.0.0"])
_V6 = st.sampled_from(["2001:db8::1", "2001:db8::2", "fe80::1:2:3:4", "::1", "2001:db8:0:0:1::1"])
_TEXT = st.one_of(st.none(), st.sampled_from(["", "h2", "http/1.1", "x.test", "h3", "0x0303",
                                             "t13d1516h2_8daaf6152771_e5627efa2ab1"]))


@st.composite
def _case(draw):
    m = draw(st.integers(0, 8))
    # few ClientHello frames and ports: keys that several handshakes share, and records with none
    hs = {"request_frame": draw(st.lists(st.one_of(st.none(), st.integers(1, 4)), min_size=m, max_size=m)),
          "client_port": draw(st.lists(st.sampled_from([40000, 40001]), min_size=m, max_size=m)),
          "server_port": draw(st.lists(st.sampled_from([443, 8443]), min_size=m, max_size=m))}
    for name in ("sni", "server_alpn", "server_version", "ja4"):
        hs[name] = draw(st.lists(_TEXT, min_size=m, max_size=m))
    hs["alpn"] = draw(st.lists(st.one_of(st.none(), st.lists(st.sampled_from(["h2", "http/1.1", "h", ""]),
                                                              max_size=3)), min_size=m, max_size=m))
    n = draw(st.integers(0, 14))
    recs = []
    for _ in range(n):
        v6 = draw(st.booleans())
        has_req, has_resp = draw(st.sampled_from([(1, 1), (1, 0), (0, 1)]))
        recs.append({
            "client_ip": draw(_V6 if v6 else _V4), "server_ip": draw(_V6 if v6 else _V4),
            "ip_version": 6 if v6 else 4,
            "client_port": draw(st.sampled_from([40000, 40000, 40001, 5])),
            "server_port": draw(st.sampled_from([443, 8443])),
            "has_req": has_req, "has_resp": has_resp,
            "req_frame": draw(st.integers(1, 30)) if has_req else 0,
            "resp_frame": draw(st.integers(1, 30)) if has_resp else 0,
            "req_ts": draw(st.integers(0, 10**18)) if has_req else 0,
            "resp_ts": draw(st.integers(0, 10**18)) if has_resp else 0,
            "ch_frame": draw(st.integers(0, 5)),
            "index": draw(st.integers(0, 2**32 - 1)),
            "req_rec_len": draw(st.sampled_from([0, 17, 16401])),
            "resp_rec_len": draw(st.sampled_from([0, 4096])),
            "version": draw(st.sampled_from([0, 0x0303, 0x0304, 0x7f1c])),
            "reason": draw(st.integers(0, 4)), "flags": draw(st.integers(0, 7)),
        })
    return hs, recs


def _raw(recs):
    r = np.zeros(len(recs), EXCHANGE_RECORD_DTYPE)
    for i, x in enumerate(recs):
        for k, v in x.items():
            if k in ("client_ip", "server_ip"):
                r[k][i] = np.frombuffer(ipaddress.ip_address(v).packed.ljust(16, b"\0"), np.uint8)
            else:
                r[k][i] = v
    return r


def _table(hs):
    return pa.table({"request_frame": pa.array(hs["request_frame"], pa.uint64()),
                     "client_port": pa.array(hs["client_port"], pa.uint16()),
                     "server_port": pa.array(hs["server_port"], pa.uint16()),
                     **{k: pa.array(hs[k], pa.string()) for k in ("sni", "server_alpn", "server_version", "ja4")},
                     "alpn": pa.array(hs["alpn"], pa.list_(pa.string()))})


def _expected(hs, recs):
    """The rows, one by one, from the drawn values."""
    order = sorted(range(len(recs)), key=lambda i: (
        recs[i]["req_frame"] if recs[i]["has_req"] else recs[i]["resp_frame"], recs[i]["resp_frame"], i))
    out = []
    for i in order:
        x = recs[i]
        q, s = x["has_req"] == 1, x["has_resp"] == 1
        # the first handshake with the ClientHello frame and both ports
        j = next((k for k in range(len(hs["sni"])) if x["ch_frame"] != 0
                  and hs["request_frame"][k] == x["ch_frame"] and hs["client_port"][k] == x["client_port"]
                  and hs["server_port"][k] == x["server_port"]), None)
        got = (lambda name: hs[name][j] if j is not None else None)
        offered = got("alpn")
        chosen = got("server_alpn")
        if chosen is not None:
            h2 = chosen == "h2"
        elif offered:
            h2 = offered[0] == "h2"
        else:
            h2 = None
        cid = _CID.calc(communityid.FlowTuple.make_tcp(x["client_ip"], x["server_ip"],
                                                       x["client_port"], x["server_port"]))
        out.append({
            "client_ip": ipaddress.ip_address(x["client_ip"]).compressed, "client_port": x["client_port"],
            "server_ip": ipaddress.ip_address(x["server_ip"]).compressed, "server_port": x["server_port"],
            "community_id": cid,
            "request_ts": x["req_ts"] if q else None, "response_ts": x["resp_ts"] if s else None,
            "request_frame": x["req_frame"] if q else None, "response_frame": x["resp_frame"] if s else None,
            "response_time": x["resp_ts"] - x["req_ts"] if q and s else None,
            "exchange_index": x["index"] if q else None,
            "request_record_len": x["req_rec_len"] if q and x["req_rec_len"] else None,
            "response_record_len": x["resp_rec_len"] if s and x["resp_rec_len"] else None,
            "sni": got("sni"), "alpn": chosen, "alpn_offered": offered, "h2": h2,
            "version": f"0x{x['version']:04x}" if x["version"] else got("server_version"),
            "ja4": got("ja4"),
            "matched": x["reason"] == 0, "unmatched_reason": EXCHANGE_REASONS[x["reason"]],
            "tickets_skipped": bool(x["flags"] & 1), "early_data": bool(x["flags"] & 4),
            "unsynced": bool(x["flags"] & 2), "client_hello_frame": x["ch_frame"],
            "ip_version": x["ip_version"],
        })
    return out


def _plain(tab):
    """Rows of Python values: times and durations as integer ns."""
    cols = {}
    for name in EXCHANGE_COLUMNS:
        c = tab[name]
        if pa.types.is_timestamp(c.type) or pa.types.is_duration(c.type):
            c = c.cast(pa.int64())
        cols[name] = c.to_pylist()
    return [dict(zip(EXCHANGE_COLUMNS, vals)) for vals in zip(*cols.values())] if tab.num_rows else []


@settings(max_examples=300, deadline=None)
@given(case=_case(), cut=st.integers(0, 3), chunked=st.booleans())
def test_columns_and_join_are_the_reference(case, cut, chunked):
    hs, recs = case
    tab = _table(hs)
    m = tab.num_rows
    # a slice (the columns' offsets honoured) or chunks (streamed tables one after another)
    if cut and m > cut:
        lead = _table({k: v[:cut] for k, v in hs.items()})
        tab = pa.concat_tables([lead, tab]).slice(cut) if not chunked else \
            pa.concat_tables([tab.slice(0, cut), tab.slice(cut)])
    got = _plain(exchange_table(_raw(recs), tab if m else None))
    assert got == _expected(hs if m else {k: [] for k in hs}, recs)
    # the sorted rows handed over as ExchangeRows (the end of a run) give the same table
    assert exchange_table(ExchangeRows(_raw(recs)), tab if m else None).equals(
        exchange_table(_raw(recs), tab if m else None))


def test_the_first_handshake_with_a_key_is_joined():
    hs = {"request_frame": [3, 3, None], "client_port": [40000] * 3, "server_port": [443] * 3,
          "sni": ["a.test", "b.test", "c.test"], "server_alpn": [None, "h2", None],
          "server_version": ["0x0303", "0x0304", None], "ja4": [None, "j", "k"],
          "alpn": [["http/1.1"], ["h2"], []]}
    rec = {"client_ip": "10.0.0.1", "server_ip": "10.0.0.2", "ip_version": 4, "client_port": 40000,
           "server_port": 443, "has_req": 1, "has_resp": 0, "req_frame": 5, "resp_frame": 0,
           "req_ts": 1, "resp_ts": 0, "ch_frame": 3, "index": 0, "req_rec_len": 0, "resp_rec_len": 0,
           "version": 0, "reason": 2, "flags": 0}
    (row,) = _plain(exchange_table(_raw([rec]), _table(hs)))
    assert (row["sni"], row["alpn_offered"], row["h2"], row["version"]) == \
        ("a.test", ["http/1.1"], False, "0x0303")
    assert [row] == _expected(hs, [rec])


def test_bad_records_say_so():
    from webtap._ext.xcolumns import exchange_columns

    r = np.zeros(2, EXCHANGE_RECORD_DTYPE)
    r["reason"][1] = 9
    with pytest.raises(IndexError, match="reason"):
        exchange_columns(r, np.arange(2))
    with pytest.raises(IndexError, match="outside"):
        exchange_columns(r, np.array([0, 2]))
    with pytest.raises(ValueError, match="whole"):
        exchange_columns(r.view(np.uint8)[:-1], np.arange(1))
