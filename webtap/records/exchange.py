"""The TLS exchange record (issue 33): one request/response exchange inside TLS over TCP, paired
by the paper's rule (the request's first packet's ACK = the response's first packet's SEQ) with
no keys; ext/pair/exchange.pyx emits XRecord rows (mirrored by EXCHANGE_RECORD_DTYPE) and
httpanalyzer.tls_exchange turns them into EXCHANGE_SCHEMA with the connection's handshake fields
joined (docs/TLS.md "Exchanges"). Times in ns since the Unix epoch (UTC), durations ns, frame
numbers tshark's (1-based)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from webtap._ext.communityid import community_id
from webtap.records import columns

__all__ = ["EXCHANGE_RECORD_DTYPE", "EXCHANGE_REASONS", "EXCHANGE_FIELDS", "EXCHANGE_COLUMNS",
           "EXCHANGE_SCHEMA", "exchange_table"]

XF_TICKETS, XF_UNSYNCED, XF_EARLY = 1, 2, 4

#: ext/pair/exchange.pyx XRecord (a test asserts the sizes agree)
EXCHANGE_RECORD_DTYPE = np.dtype([
    ("req_ts", "<i8"), ("resp_ts", "<i8"), ("req_frame", "<u8"), ("resp_frame", "<u8"),
    ("ch_frame", "<u8"), ("client_ip", "u1", (16,)), ("server_ip", "u1", (16,)),
    ("client_port", "<u2"), ("server_port", "<u2"), ("index", "<u4"), ("req_rec_len", "<u4"),
    ("resp_rec_len", "<u4"), ("key", "<u4"), ("version", "<u2"), ("ip_version", "u1"),
    ("reason", "u1"), ("flags", "u1"), ("has_req", "u1"), ("has_resp", "u1"), ("_pad", "u1"),
    ("client_ip_text", "S48"), ("server_ip_text", "S48"),
], align=True)
EXCHANGE_REASONS = (None, "gc", "end", "cap", "no_request")
#: (name, Arrow type, meaning)
EXCHANGE_FIELDS = [
    ("client_ip", pa.string(), "client address (the ClientHello's sender)"),
    ("client_port", pa.uint16(), "client TCP port"),
    ("server_ip", pa.string(), "server address"),
    ("server_port", pa.uint16(), "server TCP port"),
    ("community_id", pa.string(), "Community ID v1 of the TCP flow"),
    ("request_ts", pa.timestamp("ns", tz="UTC"), "capture time of the request's first packet "
     "(the client burst's first application-data packet with a new ACK)"),
    ("response_ts", pa.timestamp("ns", tz="UTC"), "capture time of the response's first packet "
     "(the server's first application-data packet whose SEQ is that ACK)"),
    ("request_frame", pa.uint64(), "tshark frame.number of the request's first packet"),
    ("response_frame", pa.uint64(), "tshark frame.number of the response's first packet"),
    ("response_time", pa.duration("ns"), "response_ts - request_ts"),
    ("exchange_index", pa.uint32(), "the exchange's place in its connection (0-based); null "
     "for a response without request"),
    ("request_record_len", pa.uint32(), "length of the request's first application-data TLS "
     "record when its header is in the request's first packet"),
    ("response_record_len", pa.uint32(), "the same for the response"),
    ("sni", pa.string(), "the connection's SNI (its handshake record)"),
    ("alpn", pa.string(), "ALPN protocol the server selected (visible up to TLS 1.2)"),
    ("alpn_offered", pa.list_(pa.string()), "ALPN protocols the client offered"),
    ("h2", pa.bool_(), "HTTP/2 connection: the server selected h2, or (selection encrypted, "
     "TLS 1.3) the client offered h2 first; an h2 exchange is not one request (docs/TLS.md)"),
    ("version", pa.string(), "TLS version the ServerHello selected (0x0303, 0x0304)"),
    ("ja4", pa.string(), "JA4 of the connection's ClientHello"),
    ("matched", pa.bool_(), "request and response paired"),
    ("unmatched_reason", pa.string(), "gc | end | cap | no_request; null if paired"),
    ("tickets_skipped", pa.bool_(), "TLS 1.3 session tickets came first and were not taken for "
     "the response"),
    ("early_data", pa.bool_(), "the request is TLS 1.3 early data (before the ServerHello)"),
    ("unsynced", pa.bool_(), "a capture gap cost the connection its record boundaries once: "
     "then every byte counts as application data"),
    ("client_hello_frame", pa.uint64(), "frame of the connection's ClientHello (joins the "
     "handshake record's request_frame)"),
    ("ip_version", pa.uint8(), "4 or 6"),
]
EXCHANGE_COLUMNS = [f[0] for f in EXCHANGE_FIELDS]
EXCHANGE_SCHEMA = pa.schema([pa.field(n, t, metadata={"doc": d}) for n, t, d in EXCHANGE_FIELDS])
_REASON_CODES = columns.Codes(EXCHANGE_REASONS)


def _valid(a: pa.Array) -> np.ndarray:
    """An Arrow array's validity as a bool mask, from its bitmap (Array.is_valid would import
    pyarrow.compute)."""
    bm = a.buffers()[0]
    if bm is None or a.null_count == 0:
        return np.ones(len(a), bool)
    bits = np.unpackbits(np.frombuffer(bm, dtype=np.uint8), bitorder="little")
    return bits[a.offset:a.offset + len(a)].astype(bool)


def _values(col, dtype):
    """(values, valid mask) of a numeric Arrow column from its buffers (ChunkedArray.to_numpy
    would import pandas: most of a second of a run)."""
    a = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return np.frombuffer(a.buffers()[1], dtype=dtype)[a.offset:a.offset + len(a)], _valid(a)


def _join_index(frames: np.ndarray, cports: np.ndarray, sports: np.ndarray, hs: pa.Table | None):
    """Row of the handshake record of each exchange's connection (null: none): the same
    ClientHello frame and ports (frame numbers restart in every trace of a run)."""
    if hs is None or hs.num_rows == 0:
        return None
    vals, ok = _values(hs["request_frame"], np.uint64)
    hc = _values(hs["client_port"], np.uint16)[0].astype(np.uint64)
    hp = _values(hs["server_port"], np.uint16)[0].astype(np.uint64)
    hk = np.where(ok, (vals << np.uint64(32)) | (hc << np.uint64(16)) | hp, np.uint64(0))
    key = (frames.astype(np.uint64) << np.uint64(32)) | (cports.astype(np.uint64) << np.uint64(16)) \
        | sports.astype(np.uint64)
    order = np.argsort(hk, kind="stable")
    sv = hk[order]
    pos = np.searchsorted(sv, key)
    pos_c = np.minimum(pos, len(sv) - 1)
    found = (pos < len(sv)) & (sv[pos_c] == key) & (frames != 0)
    idx = np.where(found, order[pos_c], 0).astype(np.int64)
    return columns.num(idx, valid=found)


def exchange_table(raw: np.ndarray, handshakes: pa.Table | None = None) -> pa.Table:
    """Arrow table (EXCHANGE_SCHEMA) of raw exchange records, in request (else response) frame
    order, with the handshake fields joined from `handshakes` (httpanalyzer.tls SCHEMA)."""
    r = raw if raw.dtype == EXCHANGE_RECORD_DTYPE else np.frombuffer(raw, EXCHANGE_RECORD_DTYPE)
    order = np.lexsort((r["resp_frame"], np.where(r["has_req"] == 1, r["req_frame"], r["resp_frame"])))
    r = r[order]
    n = len(r)
    hq, hr = r["has_req"] == 1, r["has_resp"] == 1
    both = hq & hr
    idx = _join_index(r["ch_frame"], r["client_port"], r["server_port"], handshakes)

    def joined(name, typ):
        if idx is None:
            return pa.nulls(n, typ)
        return columns.call("take", [handshakes[name].combine_chunks(), idx])

    alpn_offered = joined("alpn", pa.list_(pa.string()))
    server_alpn = joined("server_alpn", pa.string())
    # h2: the server's choice where visible, else the client's first offer (TLS 1.3 hides it)
    h2s = _h2_scalar()
    h2 = columns.call("coalesce", [columns.call("equal", [server_alpn, h2s]),
                            columns.call("equal", [_first_of_lists(alpn_offered), h2s])])
    # the version the stage read in the ServerHello, else the handshake record's
    version = columns.call("coalesce", [columns.hex16(r["version"], r["version"] != 0), joined("server_version", pa.string())])
    flags = r["flags"]
    cols = {
        "client_ip": columns.fixed_text(r["client_ip_text"]),
        "client_port": columns.num(r["client_port"]),
        "server_ip": columns.fixed_text(r["server_ip_text"]),
        "server_port": columns.num(r["server_port"]),
        "community_id": community_id(np.ascontiguousarray(r["client_ip"]), r["client_port"],
                                     np.ascontiguousarray(r["server_ip"]), r["server_port"],
                                     r["ip_version"], 6),
        "request_ts": columns.num(r["req_ts"], pa.timestamp("ns", tz="UTC"), hq),
        "response_ts": columns.num(r["resp_ts"], pa.timestamp("ns", tz="UTC"), hr),
        "request_frame": columns.num(r["req_frame"], valid=hq),
        "response_frame": columns.num(r["resp_frame"], valid=hr),
        "response_time": columns.num(r["resp_ts"] - r["req_ts"], pa.duration("ns"), both),
        "exchange_index": columns.num(r["index"], valid=hq),
        "request_record_len": columns.num(r["req_rec_len"], valid=hq & (r["req_rec_len"] != 0)),
        "response_record_len": columns.num(r["resp_rec_len"], valid=hr & (r["resp_rec_len"] != 0)),
        "sni": joined("sni", pa.string()),
        "alpn": server_alpn,
        "alpn_offered": alpn_offered,
        "h2": h2,
        "version": version,
        "ja4": joined("ja4", pa.string()),
        "matched": columns.boolean(r["reason"] == 0),
        "unmatched_reason": _REASON_CODES.column(r["reason"], r["reason"] != 0),
        "tickets_skipped": columns.boolean(flags & XF_TICKETS != 0),
        "early_data": columns.boolean(flags & XF_EARLY != 0),
        "unsynced": columns.boolean(flags & XF_UNSYNCED != 0),
        "client_hello_frame": columns.num(r["ch_frame"]),
        "ip_version": columns.num(r["ip_version"]),
    }
    arrays = [cols[c] if cols[c].type == EXCHANGE_SCHEMA.field(c).type else cols[c].cast(EXCHANGE_SCHEMA.field(c).type)
              for c in EXCHANGE_COLUMNS]
    return pa.Table.from_arrays(arrays, schema=EXCHANGE_SCHEMA)


def _first_of_lists(a: pa.Array) -> pa.Array:
    """Each list's first value (null for a null or empty list), from the list's offsets."""
    if len(a) == 0:
        return pa.nulls(0, pa.string())
    offs = _values(a.offsets, np.int32)[0].astype(np.int64)
    valid = _valid(a)
    ok = valid & (offs[1:] > offs[:-1])
    values = a.values if len(a.values) else pa.nulls(1, pa.string())
    return columns.call("take", [values, columns.num(np.where(ok, offs[:-1], 0), valid=ok)])


def _h2_scalar():
    """The string scalar 'h2', built from buffers (pa.scalar of a Python object imports pandas:
    ~0.4 s of a run that writes no DataFrame)."""
    arr = pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(np.array([0, 2], np.int32)),
                                                 pa.py_buffer(b"h2")])
    return arr[0]
