"""The records as Zeek logs (formatted by webtap.zeeklog, `-o OUT.log`): HTTP records as http.log
(the "zeek" view of httpanalyzer.writers.VIEWS) and TLS records as ssl.log (ssl_log_view, for the
TLS records' outputs).

Zeek's http.log columns come first, in Zeek's order and with Zeek's types (Zeek 6,
base/protocols/http/main.zeek); a column webtap has no value for is unset (``-``):

======================  =====================================================================
Zeek column             webtap
======================  =====================================================================
ts                      request_ts (response_ts for a response-only record), 6 decimals
uid                     "C" + 17 characters derived from community_id (uid_from_community_id):
                        the same for every http.log and ssl.log row of one connection
id.orig_h / id.orig_p   client_ip / client_port
id.resp_h / id.resp_p   server_ip / server_port
trans_depth             unset (webtap does not follow the connection)
method, host, uri       method, host, uri
referrer                request_referer when ``--headers Referer`` chose it (unset if absent)
version                 http_version (request line's, else the status line's; unset if unknown)
user_agent              user_agent
origin                  request_origin when ``--headers Origin`` chose it (unset if absent)
status_code/status_msg  status / reason
the others              unset (bodies, files, MIME sniffing, credentials: not in first packets)
======================  =====================================================================

Then webtap's own columns with their record names and Zeek types: request_ts and response_ts
(``time``, 9 decimals: exact), response_time (``interval``), community_id, the flags, the other
chosen headers, ... A view, not a writer: the columns are chosen with pyarrow and built from
buffers with numpy and webtap._ext.textout (no Python per record, and no pyarrow.compute, whose
first call imports pandas).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from webtap._ext.textout import seconds_text

__all__ = ["HTTP_FIELDS", "http_log_view", "SSL_FIELDS", "ssl_log_view", "uid_from_community_id",
           "CURVES"]

#: base64 digit (RFC 4648) -> value; 255 for any other byte
_B64 = np.full(256, 255, dtype=np.uint8)
_B64[np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", np.uint8)] = np.arange(64)
#: Zeek's uid alphabet (base62)
_B62 = np.frombuffer(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", np.uint8)


def uid_from_community_id(col) -> pa.Array:
    """Zeek-style connection uids ("C" + 17 base62 characters, like Zeek's CHhAvVGS1DHFjwGM9)
    derived from Community ID v1 strings ("1:" + base64 of a SHA-1): character i is the hash's
    base64 digit i modulo 62. Deterministic, so the http.log and ssl.log rows of one connection
    (and any run over the same trace) share it; unlike Zeek's random uid it is the same for two
    connections on the same 5-tuple (a reused port), like the Community ID itself. Null where
    community_id is null or not a v1 id."""
    offs, data, valid = _string_parts(col)
    n = len(valid)
    lens = np.diff(offs)
    ok = valid & (lens == 30)
    rows = np.flatnonzero(ok)
    starts = offs[:-1][rows] + 2
    digits = data[starts[:, None] + np.arange(17)] if len(rows) else np.zeros((0, 17), np.uint8)
    vals = _B64[digits]
    good = (vals != 255).all(axis=1) & (data[starts - 2] == ord("1")) & (data[starts - 1] == ord(":")) \
        if len(rows) else np.zeros(0, bool)
    ok[rows[~good]] = False
    out = np.empty((int(good.sum()), 18), dtype=np.uint8)
    out[:, 0] = ord("C")
    out[:, 1:] = _B62[vals[good] % 62]
    o = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.where(ok, 18, 0), out=o[1:])
    return _strings(o, out.ravel(), ok)

#: Zeek's http.log columns and types
HTTP_FIELDS = (
    ("ts", "time"), ("uid", "string"), ("id.orig_h", "addr"), ("id.orig_p", "port"),
    ("id.resp_h", "addr"), ("id.resp_p", "port"), ("trans_depth", "count"),
    ("method", "string"), ("host", "string"), ("uri", "string"), ("referrer", "string"),
    ("version", "string"), ("user_agent", "string"), ("origin", "string"),
    ("request_body_len", "count"), ("response_body_len", "count"), ("status_code", "count"),
    ("status_msg", "string"), ("info_code", "count"), ("info_msg", "string"),
    ("tags", "set[enum]"), ("username", "string"), ("password", "string"),
    ("proxied", "set[string]"), ("orig_fuids", "vector[string]"),
    ("orig_filenames", "vector[string]"), ("orig_mime_types", "vector[string]"),
    ("resp_fuids", "vector[string]"), ("resp_filenames", "vector[string]"),
    ("resp_mime_types", "vector[string]"),
)

#: Zeek column -> record column (ts is computed)
FROM_RECORD = {"id.orig_h": "client_ip", "id.orig_p": "client_port", "id.resp_h": "server_ip",
               "id.resp_p": "server_port", "method": "method", "host": "host", "uri": "uri",
               "referrer": "request_referer", "version": "http_version", "user_agent": "user_agent",
               "origin": "request_origin", "status_code": "status", "status_msg": "reason"}
_UNSET_IF_EMPTY = ("referrer", "origin")          # a chosen header's '' (absent): Zeek leaves unset


def _valid(a) -> np.ndarray:
    """The validity of an array's values as booleans (its slice offset applied)."""
    bm = a.buffers()[0]
    if bm is None or a.null_count == 0:
        return np.ones(len(a), dtype=bool)
    bits = np.unpackbits(np.frombuffer(bm, dtype=np.uint8), bitorder="little")
    return bits[a.offset:a.offset + len(a)].astype(bool)


def _string_parts(a):
    """(offsets relative to the first value, the values' bytes, validity) of a string array."""
    a = a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a
    offs = np.frombuffer(a.buffers()[1], dtype=np.int32)[a.offset:a.offset + len(a) + 1]
    data = a.buffers()[2]
    data = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    return offs - offs[0], data[offs[0]:offs[-1]], _valid(a)


def _bools(a) -> np.ndarray:
    """The values of a boolean array (a null's value is whatever its bit holds: mask it)."""
    if len(a) == 0 or a.buffers()[1] is None:
        return np.zeros(len(a), dtype=bool)
    bits = np.unpackbits(np.frombuffer(a.buffers()[1], dtype=np.uint8), bitorder="little")
    return bits[a.offset:a.offset + len(a)].astype(bool)


def _bool_array(values: np.ndarray, valid: np.ndarray) -> pa.Array:
    n = len(values)
    nulls = int(n - np.count_nonzero(valid))
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(pa.bool_(), n, [bitmap, pa.py_buffer(np.packbits(values, bitorder="little"))],
                                 null_count=nulls)


def _strings(offsets: np.ndarray, data: np.ndarray, valid: np.ndarray) -> pa.Array:
    n = len(valid)
    nulls = int(n - np.count_nonzero(valid))
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    return pa.StringArray.from_buffers(n, pa.py_buffer(np.ascontiguousarray(offsets, np.int32)),
                                       pa.py_buffer(np.ascontiguousarray(data)), bitmap, nulls)


def _unset_if_empty(col) -> pa.Array:
    """'' -> null (the other values as they are)."""
    offs, data, valid = _string_parts(col)
    return _strings(offs, data, valid & (np.diff(offs) > 0))


def http_log_view(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Zeek's http.log columns, then the record's other columns."""
    n = batch.num_rows
    names = set(batch.schema.names)
    arrays, fields = [], []
    for zname, ztype in HTTP_FIELDS:
        if zname == "ts":
            col = seconds_text(batch.column("request_ts"), 6, fallback=batch.column("response_ts"))
        elif zname == "uid" and "community_id" in names:
            col = uid_from_community_id(batch.column("community_id"))
        elif FROM_RECORD.get(zname) in names:
            col = batch.column(FROM_RECORD[zname])
            if zname in _UNSET_IF_EMPTY:
                col = _unset_if_empty(col)
        else:
            col = pa.nulls(n, pa.string())
        arrays.append(col)
        fields.append(pa.field(zname, col.type, metadata={"zeek_type": ztype}))
    used = set(FROM_RECORD.values())
    for f in batch.schema:
        if f.name not in used:
            arrays.append(batch.column(f.name))
            fields.append(f)
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields, metadata={"zeek_path": "http"}))


# --------------------------------------------------------------------------------------------
# TLS records (httpanalyzer.tls, issue 17) as Zeek's ssl.log
# --------------------------------------------------------------------------------------------

#: Zeek's ssl.log columns and types (Zeek 6 base/protocols/ssl/main.zeek), then the fingerprint
#: columns as the add-on packages name them (ja3 / ja3s: salesforce/ja3, ja4: FoxIO's ja4)
SSL_FIELDS = (
    ("ts", "time"), ("uid", "string"), ("id.orig_h", "addr"), ("id.orig_p", "port"),
    ("id.resp_h", "addr"), ("id.resp_p", "port"), ("version", "string"), ("cipher", "string"),
    ("curve", "string"), ("server_name", "string"), ("resumed", "bool"),
    ("last_alert", "string"), ("next_protocol", "string"), ("established", "bool"),
    ("ssl_history", "string"), ("cert_chain_fps", "vector[string]"),
    ("client_cert_chain_fps", "vector[string]"), ("sni_matches_cert", "bool"),
    ("ja3", "string"), ("ja3s", "string"), ("ja4", "string"),
)
SSL_FROM_RECORD = {"id.orig_h": "client_ip", "id.orig_p": "client_port", "id.resp_h": "server_ip",
                   "id.resp_p": "server_port", "version": "server_version", "cipher": "cipher",
                   "curve": "server_group", "server_name": "sni", "next_protocol": "server_alpn",
                   "ja3": "ja3", "ja3s": "ja3s", "ja4": "ja4"}

#: Zeek's names of protocol versions (SSL::version_strings)
TLS_VERSIONS = {0x0300: "SSLv3", 0x0301: "TLSv10", 0x0302: "TLSv11", 0x0303: "TLSv12",
                0x0304: "TLSv13", 0xFEFF: "DTLSv10", 0xFEFD: "DTLSv12", 0xFEFC: "DTLSv13"}
#: IANA names of the cipher suites seen in practice (Zeek prints the IANA name; a suite not
#: listed here is written as Zeek writes one it does not know: unknown-<decimal>)
CIPHER_SUITES = {
    0x0004: "TLS_RSA_WITH_RC4_128_MD5", 0x0005: "TLS_RSA_WITH_RC4_128_SHA",
    0x000A: "TLS_RSA_WITH_3DES_EDE_CBC_SHA", 0x002F: "TLS_RSA_WITH_AES_128_CBC_SHA",
    0x0033: "TLS_DHE_RSA_WITH_AES_128_CBC_SHA", 0x0035: "TLS_RSA_WITH_AES_256_CBC_SHA",
    0x0039: "TLS_DHE_RSA_WITH_AES_256_CBC_SHA", 0x003C: "TLS_RSA_WITH_AES_128_CBC_SHA256",
    0x003D: "TLS_RSA_WITH_AES_256_CBC_SHA256", 0x009C: "TLS_RSA_WITH_AES_128_GCM_SHA256",
    0x009D: "TLS_RSA_WITH_AES_256_GCM_SHA384", 0x009E: "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256",
    0x009F: "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384", 0x1301: "TLS_AES_128_GCM_SHA256",
    0x1302: "TLS_AES_256_GCM_SHA384", 0x1303: "TLS_CHACHA20_POLY1305_SHA256",
    0x1304: "TLS_AES_128_CCM_SHA256", 0x1305: "TLS_AES_128_CCM_8_SHA256",
    0xC009: "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", 0xC00A: "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    0xC011: "TLS_ECDHE_RSA_WITH_RC4_128_SHA", 0xC012: "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    0xC013: "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", 0xC014: "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    0xC023: "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    0xC024: "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384",
    0xC027: "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", 0xC028: "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384",
    0xC02B: "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    0xC02C: "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    0xC02F: "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", 0xC030: "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    0xCCA8: "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    0xCCA9: "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    0xCCAA: "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
}
#: Zeek's names of the named groups (SSL::ec_curves; a group not listed: unknown-<decimal>)
CURVES = {
    23: "secp256r1", 24: "secp384r1", 25: "secp521r1", 26: "brainpoolP256r1",
    27: "brainpoolP384r1", 28: "brainpoolP512r1", 29: "x25519", 30: "x448", 256: "ffdhe2048",
    257: "ffdhe3072", 258: "ffdhe4096", 259: "ffdhe6144", 260: "ffdhe8192",
    0x11EB: "SecP256r1MLKEM768", 0x11EC: "X25519MLKEM768", 0x11ED: "SecP384r1MLKEM1024",
    0x6399: "X25519Kyber768Draft00",
}


def _named(col, names: dict) -> pa.Array:
    """'0x1301'-style codes -> names (unknown-<decimal> when not in `names`; a text that is no
    number stays as it is). Python runs once per distinct code, never per record: the codes are
    told apart by numpy (np.unique over the values as fixed-width bytes) and the names laid out
    with numpy from their index."""
    offs, data, valid = _string_parts(col)
    n = len(valid)
    lens = np.diff(offs)
    w = max(int(lens.max()) if n else 0, 1)
    mat = np.zeros((n, w + 1), dtype=np.uint8)          # a 1 after each value: trailing NULs count
    mat[np.arange(w + 1) < lens[:, None]] = data
    mat[np.arange(n), lens] = 1
    keys, inv = np.unique(mat.view(f"S{w + 1}").ravel(), return_inverse=True)

    def name(k: bytes) -> bytes:
        k = k[:-1].decode()
        try:
            v = int(k, 16)
        except ValueError:
            return k.encode()
        return names.get(v, f"unknown-{v}").encode()

    table = [name(k) for k in keys]
    tlens = np.array([len(t) for t in table], dtype=np.int64)
    tw = max(int(tlens.max()) if len(table) else 0, 1)
    tmat = np.frombuffer(b"".join(t.ljust(tw, b"\0") for t in table), dtype=np.uint8).reshape(-1, tw)
    inv = inv.reshape(-1)
    rlens = np.where(valid, tlens[inv], 0) if n else np.zeros(0, np.int64)
    out_offs = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(rlens, out=out_offs[1:])
    rows = tmat[inv] if n else np.zeros((0, tw), np.uint8)
    return _strings(out_offs, rows[np.arange(tw) < rlens[:, None]], valid)


def ssl_log_view(batch: pa.RecordBatch) -> pa.RecordBatch:
    """TLS records (httpanalyzer.tls.SCHEMA) as Zeek's ssl.log columns, then the record's other
    columns: ts = client_hello_ts (server_hello_ts when there is no ClientHello), uid from
    community_id (uid_from_community_id, the same as http.log's), version, cipher and curve
    (server_group: the ServerHello's key_share group, TLS 1.3; TLS 1.2 names it in the
    ServerKeyExchange, which webtap does not read: unset) by Zeek's names, server_name = sni,
    next_protocol = server_alpn (unset when the server's ALPN is encrypted: TLS 1.3, QUIC),
    established = T for a ClientHello answered by a ServerHello that is not a
    HelloRetryRequest, F for a ClientHello left without one or answered by an HRR (Zeek waits
    for the end of the handshake: a handshake that fails after the ServerHello, e.g. on a
    certificate alert, is T here), unset without a ClientHello; ja3/ja3s/ja4."""
    n = batch.num_rows
    names = set(batch.schema.names)
    arrays, fields = [], []
    for zname, ztype in SSL_FIELDS:
        rname = SSL_FROM_RECORD.get(zname)
        if zname == "ts":
            col = seconds_text(batch.column("client_hello_ts"), 6,
                               fallback=batch.column("server_hello_ts"))
        elif zname == "uid" and "community_id" in names:
            col = uid_from_community_id(batch.column("community_id"))
        elif zname == "established" and {"matched", "hello_retry_request", "request_frame"} <= names:
            hrr = batch.column("hello_retry_request")
            est = _bools(batch.column("matched")) & ~(_bools(hrr) & _valid(hrr))
            col = _bool_array(est, _valid(batch.column("request_frame")))
        elif rname in names:
            col = batch.column(rname)
            if zname == "version":
                col = _named(col, TLS_VERSIONS)
            elif zname == "cipher":
                col = _named(col, CIPHER_SUITES)
            elif zname == "curve":
                col = _named(col, CURVES)
        else:
            col = pa.nulls(n, pa.string())
        arrays.append(col)
        fields.append(pa.field(zname, col.type, metadata={"zeek_type": ztype}))
    used = set(SSL_FROM_RECORD.values())
    for f in batch.schema:
        if f.name not in used:
            arrays.append(batch.column(f.name))
            fields.append(f)
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields, metadata={"zeek_path": "ssl"}))
