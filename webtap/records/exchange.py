"""The TLS exchange record (issue 33): one request/response exchange inside TLS over TCP, paired
by the paper's rule (the request's first packet's ACK = the response's first packet's SEQ) with
no keys; ext/pair/exchange.pyx emits XRecord rows (mirrored by EXCHANGE_RECORD_DTYPE) and
exchange_table turns them into EXCHANGE_SCHEMA with the connection's handshake fields joined
(ext/out/xcolumns.pyx; docs/TLS.md "Exchanges"). Times in ns since the Unix epoch (UTC),
durations ns, frame numbers tshark's (1-based)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from webtap._ext.xcolumns import REASONS, exchange_columns
from webtap.records import columns

__all__ = ["EXCHANGE_RECORD_DTYPE", "EXCHANGE_REASONS", "EXCHANGE_FIELDS", "EXCHANGE_COLUMNS",
           "EXCHANGE_REQUIRED", "EXCHANGE_SCHEMA", "ExchangeRows", "JoinedHandshakes", "exchange_table"]

#: ext/pair/exchange.pyx XRecord (a test asserts the sizes agree)
EXCHANGE_RECORD_DTYPE = np.dtype([
    ("req_ts", "<i8"), ("resp_ts", "<i8"), ("req_frame", "<u8"), ("resp_frame", "<u8"),
    ("ch_frame", "<u8"), ("client_ip", "u1", (16,)), ("server_ip", "u1", (16,)),
    ("client_port", "<u2"), ("server_port", "<u2"), ("index", "<u4"), ("req_rec_len", "<u4"),
    ("resp_rec_len", "<u4"), ("key", "<u4"), ("version", "<u2"), ("ip_version", "u1"),
    ("reason", "u1"), ("flags", "u1"), ("has_req", "u1"), ("has_resp", "u1"), ("_pad", "u1"),
], align=True)
EXCHANGE_REASONS = REASONS          # XRecord.reason -> unmatched_reason (ext/out/xcolumns.pyx)
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
#: the columns every record has (the connection's 4-tuple and ClientHello, the flags): required
#: in Parquet, so no definition levels are worked out and written for them (ext/out/xcolumns.pyx
#: gives them no validity bitmap; encoding the TLS bench trace's exchanges, cachegrind: 163 ->
#: 138 M instructions)
EXCHANGE_REQUIRED = frozenset({"client_ip", "client_port", "server_ip", "server_port",
                               "community_id", "matched", "tickets_skipped", "early_data",
                               "unsynced", "client_hello_frame", "ip_version"})
EXCHANGE_SCHEMA = pa.schema([pa.field(n, t, nullable=n not in EXCHANGE_REQUIRED,
                                      metadata={"doc": d}) for n, t, d in EXCHANGE_FIELDS])


def _values(col, dtype):
    """(values, valid mask) of a numeric Arrow column from its buffers (ChunkedArray.to_numpy
    would import pandas: most of a second of a run)."""
    a = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return np.frombuffer(a.buffers()[1], dtype=dtype)[a.offset:a.offset + len(a)], columns.valid_mask(a)


class JoinedHandshakes:
    """The handshake records (httpanalyzer.tls SCHEMA tables, in frame order) the exchanges of
    a streamed run are joined to, only those an exchange still to come can need (keep): a long
    capture holds the handshakes of its open connections and waiting requests, however long one
    of them lives, not every handshake since."""

    __slots__ = ("tabs", "rows")

    #: rows kept beyond twice the needed ones before they are sorted out again (the work is
    #: a pass over what is held: done when it has doubled, not at every part)
    SLACK = 4096

    def __init__(self):
        self.tabs: list = []
        self.rows = 0

    def add(self, tab: pa.Table | None) -> None:
        if tab is None or tab.num_rows == 0:
            return
        self.tabs.append(tab)
        self.rows += tab.num_rows

    def keep(self, hellos: np.ndarray, after: int) -> None:
        """Only the handshakes whose ClientHello frame (1-based) is one of `hellos` or at least
        `after` (connections not seen yet) kept, once the rows held outnumber twice those
        needed (+ SLACK); a handshake without a ClientHello frame is joined by none."""
        if self.rows <= 2 * len(hellos) + self.SLACK:
            return
        tab = self.table()
        frames, ok = _values(tab["request_frame"], np.uint64)
        keep = ok & (np.isin(frames, hellos) | (frames >= np.uint64(after)))
        idx = np.flatnonzero(keep)
        self.tabs = [columns.call("take", [tab, pa.array(idx, pa.int64())])] if len(idx) else []
        self.rows = len(idx)

    def table(self) -> pa.Table | None:
        if not self.tabs:
            return None
        if len(self.tabs) > 1:
            self.tabs = [pa.concat_tables(self.tabs)]
        return self.tabs[0]


class ExchangeRows:
    """Raw exchange records, their order in the table (request, else response, frame, then
    response frame: a stable sort) and the columns that need no handshake (addresses,
    Community ID, times, frames, flags). httpanalyzer.tls.ExchangeRun makes it in a thread of
    its own (start_rows) while the handshakes are put in order; exchange_table joins the rest."""

    __slots__ = ("r", "order", "cols")

    def __init__(self, raw: np.ndarray):
        r = raw if raw.dtype == EXCHANGE_RECORD_DTYPE else np.frombuffer(raw, EXCHANGE_RECORD_DTYPE)
        self.r = r
        first = np.where(r["has_req"] == 1, r["req_frame"], r["resp_frame"])
        self.order = np.lexsort((r["resp_frame"], first))
        self.cols = exchange_columns(r, self.order, None, own=True, joined=False)


def exchange_table(raw: np.ndarray | ExchangeRows, handshakes: pa.Table | None = None) -> pa.Table:
    """Arrow table (EXCHANGE_SCHEMA) of raw exchange records (or their ExchangeRows), in request
    (else response) frame order, with the handshake fields joined from `handshakes`
    (httpanalyzer.tls SCHEMA): the columns written by C without the GIL
    (ext/out/xcolumns.pyx), handed to pyarrow one call each."""
    rows = raw if isinstance(raw, ExchangeRows) else ExchangeRows(raw)
    n = len(rows.order)
    cols = dict(rows.cols)
    cols.update(exchange_columns(rows.r, rows.order, _handshake_parts(handshakes), own=False))
    arrays = []
    for f in EXCHANGE_SCHEMA:
        p = cols[f.name]
        bits = pa.py_buffer(p[-2]) if p[-1] else None        # the validity bitmap
        if pa.types.is_list(f.type):
            lo, io, data = p[:3]
            items = pa.Array.from_buffers(pa.string(), len(io) - 1,
                                          [None, pa.py_buffer(io), pa.py_buffer(data)])
            arrays.append(pa.Array.from_buffers(f.type, n, [bits, pa.py_buffer(lo)],
                                                null_count=p[-1], children=[items]))
        elif pa.types.is_string(f.type):
            arrays.append(pa.Array.from_buffers(f.type, n, [bits, pa.py_buffer(p[0]),
                                                            pa.py_buffer(p[1])], null_count=p[-1]))
        else:
            arrays.append(pa.Array.from_buffers(f.type, n, [bits, pa.py_buffer(p[0])],
                                                null_count=p[-1]))
    return pa.Table.from_arrays(arrays, schema=EXCHANGE_SCHEMA)


def _handshake_parts(hs: pa.Table | None):
    """The handshake columns the join reads, as numpy parts (ext/out/xcolumns.pyx
    exchange_columns' hs), read in place from their buffers; None without handshakes."""
    if hs is None or hs.num_rows == 0:
        return None
    frames, ok = _values(hs["request_frame"], np.uint64)
    parts = [frames, ok.view(np.uint8), _values(hs["client_port"], np.uint16)[0],
             _values(hs["server_port"], np.uint16)[0]]
    for name in ("sni", "server_alpn", "server_version", "ja4"):
        offs, data, valid = columns.string_parts(hs[name])
        parts.append((offs, data, valid.view(np.uint8)))
    a = hs["alpn"]
    a = a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a
    # list offsets into the whole child (a slice's offset honoured), as columns.take_string_lists
    loffs = np.frombuffer(a.offsets.buffers()[1], np.int32)[a.offset:a.offset + len(a) + 1]
    loffs = loffs.astype(np.int64)
    ioffs, data, _ = columns.string_parts(a.values)
    parts.append((loffs, ioffs, data, columns.valid_mask(a).view(np.uint8)))
    return tuple(parts)
