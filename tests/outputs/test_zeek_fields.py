"""Zeek logs fill what the first packets carry (issue 30): uid on http.log and ssl.log (one
connection, one uid), ssl.log's curve, next_protocol and established from the hellos, and
`dissect -o x.log` with Zeek's `ts` (time). Every log is read back with zat."""
from __future__ import annotations

import base64

from httpanalyzer.cli import main as http_main
from httpanalyzer.tls import cli as tls_cli
from httpanalyzer.zeek import uid_from_community_id
from tests.httpanalyzer import compare_traces as ct
from tests.tls import hellobuild as hb
from webtap.cli import main as webtap_main

B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def expected_uid(cid: str) -> str:
    """The documented rule, written out with str methods: "C" + base64 digit i of the
    Community ID's hash (i < 17) modulo 62, in Zeek's uid alphabet."""
    assert cid.startswith("1:") and len(base64.b64decode(cid[2:])) == 20
    return "C" + "".join(B62[B64.index(c) % 62] for c in cid[2:19])


def read_log(path) -> tuple[list[str], list[str], list[dict]]:
    fields = types = None
    rows = []
    for line in path.read_text().splitlines():
        if line.startswith("#fields\t"):
            fields = line.split("\t")[1:]
        elif line.startswith("#types\t"):
            types = line.split("\t")[1:]
        elif not line.startswith("#"):
            rows.append(dict(zip(fields, line.split("\t"))))
    return fields, types, rows


def zat(path):
    from zat.log_to_dataframe import LogToDataFrame

    return LogToDataFrame().create_dataframe(str(path))


def test_uid_rule():
    import pyarrow as pa

    ids = ["1:NBscOYxKkUm+TUuW+kUmAa/SrL0=", "1:UWHKJ/x6OQ1YiVv4rIl0t3yhjg8=", None, "2:x", ""]
    got = uid_from_community_id(pa.array(ids, pa.string())).to_pylist()
    assert got == [expected_uid(ids[0]), expected_uid(ids[1]), None, None, None]
    assert all(len(u) == 18 and set(u[1:]) <= set(B62) for u in got[:2])


def _http_trace(tmp_path):
    out: list = []
    a = ct.Conn(out, ct.T0, 40001)
    a.request("/one")
    a.response()
    a.request("/two")
    a.response()
    b = ct.Conn(out, ct.T0 + 1, 40002)
    b.request("/three")
    b.response()
    return ct.write(tmp_path / "h.pcap", out)


def test_http_log_uid_per_connection(tmp_path):
    log = tmp_path / "http.log"
    assert http_main([_http_trace(tmp_path), "-o", str(log), "--consumers", "0"]) == 0
    fields, types, rows = read_log(log)
    assert types[fields.index("uid")] == "string"
    by_port = {}
    for r in rows:
        assert r["uid"] == expected_uid(r["community_id"])
        by_port.setdefault(r["id.orig_p"], set()).add(r["uid"])
    assert {p: len(u) for p, u in by_port.items()} == {"40001": 1, "40002": 1}
    assert by_port["40001"] != by_port["40002"]
    df = zat(log)
    assert len(df) == 3 and df["uid"].nunique() == 2


def _sh(*exts):
    return hb.records(hb.server_hello(cipher=0x1301, exts=[hb.ext(43, b"\x03\x04"), *exts]))


def test_ssl_log_curve_next_protocol_established(tmp_path):
    key_share = hb.ext(51, b"\x00\x1d" + hb.u16(32) + bytes(32))          # x25519 (RFC 8446 4.2.8)
    alpn = hb.ext(16, hb.u16(3) + b"\x02h2")                              # RFC 7301 3.1
    hrr = hb.records(hb.server_hello(cipher=0x1301, random=bytes.fromhex(
        "CF21AD74E59A6111BE1D8C021E65B891C2A211167ABB8C5E079E09E2C8A8339C"),
        exts=[hb.ext(43, b"\x03\x04"), hb.ext(51, b"\x00\x17")]))         # HRR asking secp256r1
    p = tmp_path / "hs.pcap"
    ch = hb.records(hb.chrome_like(sni=b"a.example"))
    hb.handshake_pcap(p, [{"ch": ch, "sh": _sh(key_share, alpn), "dt_ns": 1000},
                          {"ch": ch, "sh": hrr, "dt_ns": 1000},
                          {"ch": ch, "sh": None}])
    log = tmp_path / "ssl.log"
    assert tls_cli([str(p), "-o", str(log)]) == 0
    fields, types, rows = read_log(log)
    assert types[fields.index("established")] == "bool" and types[fields.index("curve")] == "string"
    rows.sort(key=lambda r: r["id.orig_p"])
    got = [(r["curve"], r["next_protocol"], r["established"]) for r in rows]
    assert got == [("x25519", "h2", "T"), ("secp256r1", "-", "F"), ("-", "-", "F")]
    assert all(r["uid"] == expected_uid(r["community_id"]) for r in rows)
    df = zat(log)
    assert len(df) == 3


def test_http_and_ssl_rows_of_one_connection_share_the_uid(tmp_path):
    # one 4-tuple carrying a TLS handshake and (as port 443 traffic in clear) an HTTP exchange:
    # both logs name the connection by the same uid
    ch = hb.records(hb.chrome_like(sni=b"a.example"))
    p = tmp_path / "tls.pcap"
    hb.handshake_pcap(p, [{"ch": ch, "sh": _sh(), "dt_ns": 1000, "client": ("10.0.0.1", 40001),
                           "server": ("10.0.0.2", 80)}])
    out: list = []
    a = ct.Conn(out, ct.T0, 40001, client="10.0.0.1", server="10.0.0.2")
    a.request("/x")
    a.response()
    h = ct.write(tmp_path / "h.pcap", out)
    assert tls_cli([str(p), "-o", str(tmp_path / "ssl.log")]) == 0
    assert http_main([h, "-o", str(tmp_path / "http.log"), "--consumers", "0"]) == 0
    (s,) = read_log(tmp_path / "ssl.log")[2]
    (r,) = read_log(tmp_path / "http.log")[2]
    assert s["community_id"] == r["community_id"] and s["uid"] == r["uid"] != "-"


def test_dissect_log_has_zeek_ts(tmp_path):
    log = tmp_path / "d.log"
    assert webtap_main(["dissect", _http_trace(tmp_path), "-o", str(log)]) == 0
    fields, types, rows = read_log(log)
    assert fields[0] == "ts" and types[0] == "time" and "ts_ns" not in fields
    csv = tmp_path / "d.csv"
    assert webtap_main(["dissect", _http_trace(tmp_path), "-o", str(csv)]) == 0
    import pandas as pd

    ns = pd.read_csv(csv)["ts_ns"].tolist()
    assert [r["ts"] for r in rows] == [f"{t // 10**9}.{t % 10**9:09d}" for t in ns]
    df = zat(log)
    assert str(df.index.dtype).startswith("datetime64") and len(df) == len(ns) == 6
