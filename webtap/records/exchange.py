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
from webtap._ext.dissect import ip_text
from webtap.records import columns

__all__ = ["EXCHANGE_RECORD_DTYPE", "EXCHANGE_REASONS", "EXCHANGE_FIELDS", "EXCHANGE_COLUMNS",
           "EXCHANGE_SCHEMA", "ExchangeRows", "JoinedHandshakes", "exchange_table"]

XF_TICKETS, XF_UNSYNCED, XF_EARLY = 1, 2, 4

#: ext/pair/exchange.pyx XRecord (a test asserts the sizes agree)
EXCHANGE_RECORD_DTYPE = np.dtype([
    ("req_ts", "<i8"), ("resp_ts", "<i8"), ("req_frame", "<u8"), ("resp_frame", "<u8"),
    ("ch_frame", "<u8"), ("client_ip", "u1", (16,)), ("server_ip", "u1", (16,)),
    ("client_port", "<u2"), ("server_port", "<u2"), ("index", "<u4"), ("req_rec_len", "<u4"),
    ("resp_rec_len", "<u4"), ("key", "<u4"), ("version", "<u2"), ("ip_version", "u1"),
    ("reason", "u1"), ("flags", "u1"), ("has_req", "u1"), ("has_resp", "u1"), ("_pad", "u1"),
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


def _values(col, dtype):
    """(values, valid mask) of a numeric Arrow column from its buffers (ChunkedArray.to_numpy
    would import pandas: most of a second of a run)."""
    a = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return np.frombuffer(a.buffers()[1], dtype=dtype)[a.offset:a.offset + len(a)], columns.valid_mask(a)


def _join_index(frames: np.ndarray, cports: np.ndarray, sports: np.ndarray, hs: pa.Table | None):
    """(row of the handshake record of each exchange's connection, found) (None, None without
    handshakes): the same
    ClientHello frame and ports (frame numbers restart in every trace of a run)."""
    if hs is None or hs.num_rows == 0:
        return None, None
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
    return np.where(found, order[pos_c], 0).astype(np.int64), found


class JoinedHandshakes:
    """The handshake records (httpanalyzer.tls SCHEMA tables, in frame order) the exchanges of
    a streamed run are joined to: each table kept while an exchange still to come can belong
    to one of its connections (drop_before), so that a long capture holds the handshakes of
    the connections still open, not all."""

    __slots__ = ("tabs", "_last")

    def __init__(self):
        self.tabs: list = []
        self._last: list = []          # each table's last ClientHello frame (0: none)

    def add(self, tab: pa.Table | None) -> None:
        if tab is None or tab.num_rows == 0:
            return
        vals, ok = _values(tab["request_frame"], np.uint64)
        self.tabs.append(tab)
        self._last.append(int(vals[ok].max()) if ok.any() else 0)

    def drop_before(self, hello: int) -> None:
        """The tables whose every ClientHello frame (1-based) is below `hello` dropped (the
        oldest first: a table is kept while one of its handshakes may still be joined)."""
        k = 0
        while k < len(self.tabs) and self._last[k] < hello:
            k += 1
        if k:
            del self.tabs[:k], self._last[:k]

    def table(self) -> pa.Table | None:
        if not self.tabs:
            return None
        return self.tabs[0] if len(self.tabs) == 1 else pa.concat_tables(self.tabs)


class ExchangeRows:
    """The part of an exchange table that needs no handshake: the records in request (else
    response) frame order and their own columns (addresses, Community ID, times, frames,
    flags). httpanalyzer.tls.ExchangeRun builds it in a thread of its own (start_rows) while the
    handshakes are put in frame order (issue 33's cost: the two no longer follow each other);
    exchange_table joins the handshake fields to it."""

    __slots__ = ("r", "cols")

    def __init__(self, raw: np.ndarray):
        r = raw if raw.dtype == EXCHANGE_RECORD_DTYPE else np.frombuffer(raw, EXCHANGE_RECORD_DTYPE)
        order = np.lexsort((r["resp_frame"], np.where(r["has_req"] == 1, r["req_frame"], r["resp_frame"])))
        r = self.r = columns.take_rows(r, order)
        hq, hr = r["has_req"] == 1, r["has_resp"] == 1
        flags = r["flags"]
        self.cols = {
            # the address text every record kind carries (ext/common/util.h wt_ip_text, one C loop)
            "client_ip": ip_text(r["client_ip"], r["ip_version"]),
            "client_port": columns.num(r["client_port"]),
            "server_ip": ip_text(r["server_ip"], r["ip_version"]),
            "server_port": columns.num(r["server_port"]),
            "community_id": community_id(np.ascontiguousarray(r["client_ip"]), r["client_port"],
                                         np.ascontiguousarray(r["server_ip"]), r["server_port"],
                                         r["ip_version"], 6),
            "request_ts": columns.num(r["req_ts"], pa.timestamp("ns", tz="UTC"), hq),
            "response_ts": columns.num(r["resp_ts"], pa.timestamp("ns", tz="UTC"), hr),
            "request_frame": columns.num(r["req_frame"], valid=hq),
            "response_frame": columns.num(r["resp_frame"], valid=hr),
            "response_time": columns.num(r["resp_ts"] - r["req_ts"], pa.duration("ns"), hq & hr),
            "exchange_index": columns.num(r["index"], valid=hq),
            "request_record_len": columns.num(r["req_rec_len"], valid=hq & (r["req_rec_len"] != 0)),
            "response_record_len": columns.num(r["resp_rec_len"], valid=hr & (r["resp_rec_len"] != 0)),
            "matched": columns.boolean(r["reason"] == 0),
            "unmatched_reason": _REASON_CODES.column(r["reason"], r["reason"] != 0),
            "tickets_skipped": columns.boolean(flags & XF_TICKETS != 0),
            "early_data": columns.boolean(flags & XF_EARLY != 0),
            "unsynced": columns.boolean(flags & XF_UNSYNCED != 0),
            "client_hello_frame": columns.num(r["ch_frame"]),
            "ip_version": columns.num(r["ip_version"]),
        }


def exchange_table(raw: np.ndarray | ExchangeRows, handshakes: pa.Table | None = None) -> pa.Table:
    """Arrow table (EXCHANGE_SCHEMA) of raw exchange records (or their ExchangeRows), in request
    (else response) frame order, with the handshake fields joined from `handshakes`
    (httpanalyzer.tls SCHEMA)."""
    rows = raw if isinstance(raw, ExchangeRows) else ExchangeRows(raw)
    r = rows.r
    n = len(r)
    idx, found = _join_index(r["ch_frame"], r["client_port"], r["server_port"], handshakes)

    def joined(name, typ):
        if idx is None:
            return pa.nulls(n, typ)
        take = columns.take_string_lists if pa.types.is_list(typ) else columns.take_strings
        return take(handshakes[name], idx, found)

    alpn_offered = joined("alpn", pa.list_(pa.string()))
    server_alpn = joined("server_alpn", pa.string())
    # h2: the server's choice where visible, else the client's first offer (TLS 1.3 hides it)
    sa_ok, sa_h2 = _is_h2(*columns.string_parts(server_alpn))
    fo_ok, fo_h2 = _first_is_h2(alpn_offered)
    cols = dict(rows.cols)
    cols.update({
        "sni": joined("sni", pa.string()),
        "alpn": server_alpn,
        "alpn_offered": alpn_offered,
        "h2": columns.boolean(np.where(sa_ok, sa_h2, fo_h2), sa_ok | fo_ok),
        # the version the stage read in the ServerHello, else the handshake record's
        "version": _version(r["version"], joined("server_version", pa.string())),
        "ja4": joined("ja4", pa.string()),
    })
    arrays = [cols[c] if cols[c].type == EXCHANGE_SCHEMA.field(c).type else cols[c].cast(EXCHANGE_SCHEMA.field(c).type)
              for c in EXCHANGE_COLUMNS]
    return pa.Table.from_arrays(arrays, schema=EXCHANGE_SCHEMA)


def _is_h2(offs: np.ndarray, data: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(valid, value is 'h2') per row of a string column given by its parts."""
    return valid, _h2_at(offs[:-1], offs[1:], data, valid)


def _first_is_h2(a: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(the list has a first value, that value is 'h2') per row of a list<string> column (a
    null or empty list has none)."""
    n = len(a)
    if n == 0:
        return np.zeros(0, bool), np.zeros(0, bool)
    loffs = np.frombuffer(a.offsets.buffers()[1], np.int32)[a.offset:a.offset + n + 1].astype(np.int64)
    ok = columns.valid_mask(a) & (loffs[1:] > loffs[:-1])
    ioffs, data, _ = columns.string_parts(a.values)
    if len(ioffs) < 2:
        return ok, np.zeros(n, bool)
    first = np.where(ok, loffs[:-1], 0)
    return ok, _h2_at(ioffs[first], ioffs[first + 1], data, ok)


def _h2_at(start: np.ndarray, end: np.ndarray, data: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Whether data[start:end] is b'h2', per row where ok (False elsewhere)."""
    two = ok & (end - start == 2)
    if len(data) < 2:
        return np.zeros(len(ok), bool)
    at = np.minimum(np.where(two, start, 0), len(data) - 2)
    return two & (data[at] == ord("h")) & (data[at + 1] == ord("2"))


def _version(v: np.ndarray, joined: pa.Array) -> pa.Array:
    """0xhhhh of the version the exchange stage read (v != 0), else the joined text."""
    mine = v != 0
    hexv = columns.hex16(v)
    ho, hd, _ = columns.string_parts(hexv)
    jo, jd, jok = columns.string_parts(joined)
    offs, data = columns.concat_bytes([(ho, hd), (jo, jd)])
    n = len(v)
    rows = np.where(mine, np.arange(n), n + np.arange(n))
    valid = mine | jok
    o, body = columns.gather_bytes(offs, data, rows, valid)
    return columns.text_column(o, body, valid)
