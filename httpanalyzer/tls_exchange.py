"""Request/response exchanges inside TLS over TCP (issue 33): the paper's first-packet rule
(the request's first packet carries the ACK that the response's first packet carries as its
SEQ) applied to encrypted traffic, without keys. The C stage (ext/exchange.pyx) reads the walk's
TCP events (one walk with the HTTP and TLS stages); this module turns its fixed-width records
into Arrow columns (schema: httpanalyzer.tls.EXCHANGE_SCHEMA) and joins each connection's
handshake fields (SNI, ALPN, version, JA4) from the TLS handshake records.

    import httpanalyzer.tls_exchange as tx
    df = tx.analyze_exchanges("trace.pcap")

The rules (what is a request, what the handshake's own flights are, TLS 1.3 tickets) and what an
h2 exchange measures: docs/TLS.md "Exchanges".
"""
from __future__ import annotations

import os
from typing import Iterable

import numpy as np
import pyarrow as pa

from httpanalyzer.tls import (EXCHANGE_COLUMNS, EXCHANGE_RECORD_DTYPE, EXCHANGE_REASONS,
                              EXCHANGE_SCHEMA, TlsRun, _bool, _choice, _hex, _num, _take, _text,
                              sort_table, text_view)
from webtap._ext.communityid import community_id
from webtap._ext.dissect import dissect_batch
from webtap._ext.exchange import ExchangeTable, sizeof_exchange_record
from webtap.writers import empty_batch_of

__all__ = ["ExchangeRun", "analyze_exchanges", "exchange_table", "EXCHANGE_SCHEMA"]

XF_TICKETS, XF_UNSYNCED, XF_EARLY = 1, 2, 4


class ExchangeRun:
    """One exchange stage over a stream of packet batches (several traces in a row)."""

    def __init__(self, gc_timeout: float = 60.0, max_pending: int = 1 << 15,
                 max_conns: int = 1 << 16):
        if sizeof_exchange_record() != EXCHANGE_RECORD_DTYPE.itemsize:
            raise RuntimeError("EXCHANGE_RECORD_DTYPE does not match ext/exchange.pyx XRecord")
        self.table = ExchangeTable(gc_timeout=gc_timeout, max_pending=max_pending,
                                   max_conns=max_conns)
        self._raw: list = []

    def feed(self, events, data) -> None:
        """One batch's TCP events (webtap.dissect.dissect(tcp_events=True).tcp_events)."""
        self.table.feed(events, data)
        raw = self.table.take()
        if raw.size:
            self._raw.append(raw)

    def finish(self) -> np.ndarray:
        """End of input: every record, raw (EXCHANGE_RECORD_DTYPE)."""
        self.table.flush()
        raw = self.table.take()
        if raw.size:
            self._raw.append(raw)
        raw = np.concatenate(self._raw) if self._raw else np.zeros(0, np.uint8)
        self._raw = []
        return raw.view(EXCHANGE_RECORD_DTYPE)

    def counters(self) -> dict:
        return self.table.counters()


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
    return _num(idx, found)


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
        return _take(handshakes[name].combine_chunks(), idx)

    alpn_offered = joined("alpn", pa.list_(pa.string()))
    server_alpn = joined("server_alpn", pa.string())
    # h2: the server's choice where visible, else the client's first offer (TLS 1.3 hides it)
    h2s = _h2_scalar()
    h2 = _call("coalesce", [_call("equal", [server_alpn, h2s]),
                            _call("equal", [_first_of_lists(alpn_offered), h2s])])
    # the version the stage read in the ServerHello, else the handshake record's
    version = _call("coalesce", [_hex(r["version"], r["version"] != 0), joined("server_version", pa.string())])
    flags = r["flags"]
    cols = {
        "client_ip": _text(r["client_ip_text"]),
        "client_port": _num(r["client_port"]),
        "server_ip": _text(r["server_ip_text"]),
        "server_port": _num(r["server_port"]),
        "community_id": community_id(np.ascontiguousarray(r["client_ip"]), r["client_port"],
                                     np.ascontiguousarray(r["server_ip"]), r["server_port"],
                                     r["ip_version"], 6),
        "request_ts": _num(r["req_ts"], hq, pa.timestamp("ns", tz="UTC")),
        "response_ts": _num(r["resp_ts"], hr, pa.timestamp("ns", tz="UTC")),
        "request_frame": _num(r["req_frame"], hq),
        "response_frame": _num(r["resp_frame"], hr),
        "response_time": _num(r["resp_ts"] - r["req_ts"], both, pa.duration("ns")),
        "exchange_index": _num(r["index"], hq),
        "request_record_len": _num(r["req_rec_len"], hq & (r["req_rec_len"] != 0)),
        "response_record_len": _num(r["resp_rec_len"], hr & (r["resp_rec_len"] != 0)),
        "sni": joined("sni", pa.string()),
        "alpn": server_alpn,
        "alpn_offered": alpn_offered,
        "h2": h2,
        "version": version,
        "ja4": joined("ja4", pa.string()),
        "matched": _bool(r["reason"] == 0),
        "unmatched_reason": _choice(EXCHANGE_REASONS, r["reason"]),
        "tickets_skipped": _bool(flags & XF_TICKETS != 0),
        "early_data": _bool(flags & XF_EARLY != 0),
        "unsynced": _bool(flags & XF_UNSYNCED != 0),
        "client_hello_frame": _num(r["ch_frame"]),
        "ip_version": _num(r["ip_version"]),
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
    return _take(values, _num(np.where(ok, offs[:-1], 0), ok))


def _h2_scalar():
    """The string scalar 'h2', built from buffers (pa.scalar of a Python object imports pandas:
    ~0.4 s of a run that writes no DataFrame)."""
    arr = pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(np.array([0, 2], np.int32)),
                                                 pa.py_buffer(b"h2")])
    return arr[0]


def _call(name: str, args: list):
    """A pyarrow compute kernel without importing pyarrow.compute (httpanalyzer.tls._take)."""
    try:
        from pyarrow._compute import call_function
    except ImportError:              # pragma: no cover - another pyarrow layout
        from pyarrow.compute import call_function
    return call_function(name, args)


def open_exchange_output(run, path: str):
    """The exchange records' output through the shared CLI layer (webtap.clikit: extension
    table, atomic write, .partial on interrupt): Parquet keeps the list column, CSV and the line
    format get httpanalyzer.tls.text_view (lists comma-joined, times as seconds)."""
    parquet = path.endswith((".parquet", ".pq"))
    views = {"csv": text_view, "lines": text_view}
    schema = EXCHANGE_SCHEMA if parquet else text_view(empty_exchange_table()).schema
    return run.output(path, views=views, schema=schema)


def empty_exchange_table() -> pa.Table:
    return pa.Table.from_batches([empty_batch_of(EXCHANGE_SCHEMA)])


def iter_exchanges(traces, bpf: str | None = None, gc_timeout: float = 60.0,
                   max_pending: int = 1 << 15, counters: dict | None = None,
                   warnings: list | None = None) -> tuple[pa.Table, pa.Table]:
    """(exchanges, handshakes) of the traces (read in the order given), from one walk over the
    packets for both stages."""
    from webtap.capture import open_trace

    if isinstance(traces, (str, os.PathLike)):
        traces = [traces]
    tls = TlsRun(gc_timeout=gc_timeout)
    ex = ExchangeRun(gc_timeout=gc_timeout, max_pending=max_pending)
    tabs = []
    for t in traces:
        with open_trace(t, bpf=bpf, progress=False) as tr:
            try:
                for batch in tr:
                    _, _, msgs, ev = dissect_batch(batch.packets, batch.data, None, tls.watch, 2)
                    tab = tls.feed(batch.packets, batch.data, msgs)
                    if tab is not None:
                        tabs.append(tab)
                    ex.feed(ev, batch.data)
            finally:
                if warnings is not None:
                    warnings.extend(f"{t}: {w}" for w in tr.warnings)
    tab = tls.finish()
    if tab is not None:
        tabs.append(tab)
    hs = sort_table(pa.concat_tables(tabs)) if tabs else None
    raw = ex.finish()
    if counters is not None:
        counters.update(ex.counters())           # after the flush: `unmatched_end` counted
    return exchange_table(raw, hs), hs


def analyze_exchanges(traces: str | os.PathLike | Iterable, bpf: str | None = None,
                      gc_timeout: float = 60.0, max_pending: int = 1 << 15,
                      counters: dict | None = None):
    """One row per TLS exchange of the traces, as a DataFrame in request frame order."""
    tab, _ = iter_exchanges(traces, bpf=bpf, gc_timeout=gc_timeout, max_pending=max_pending,
                            counters=counters)
    return tab.to_pandas()
