"""Abuse analytics from the first packets (issue 34, after Krizhanovsky's Tempesta): what an HTTP
DDoS filter decides per client, measured from a trace by a pass-by analyser.

    from httpanalyzer import abuse
    run = abuse.collect("trace.pcap")            # one pass: HTTP records + the walk's TCP events
    abuse.rates(run, window_s=1.0)                # per client: requests/s, new and concurrent conns
    abuse.rates(run, by=("client_ip", "host"))   # per (client, Host)
    abuse.limit_req(run.requests, rate="10r/s", burst=5)   # nginx's limit_req, request by request
    abuse.slow_http(run)                          # per connection: slowloris, slow body, slow read,
                                                  # idle keep-alive indicators
    abuse.evasion(abuse.collect("t.pcap", evasion=True))   # per request: evasion bit flags

* **Requests** are the HTTP records' requests (httpanalyzer's pairing: a retransmitted request is
  one record, flagged request_repeat, and counted once).
* **Connections** come from the walk's TCP events: one per TCP flow, a new one at each SYN (without
  ACK) with a new initial sequence number; it starts at that SYN, or, when the trace holds no SYN of
  it, at its first segment in the trace (so a connection open before the capture began counts from
  its first packet, and its first request is then at or after that). It ends at its first FIN or
  RST, else at its last segment (open at the end of the trace). Its client is the SYN's sender,
  else the sender of its first HTTP request, else the endpoint with the higher port.
* The connections are kept by a streaming table (ext/out/abuseconn.pyx, C without the GIL): one
  state per live connection, nothing per TCP segment, a connection silent for gc_timeout of
  capture time leaves it as a row (collect(keep_events=True) keeps every event instead and
  computes the same table in one batch: connections()).
* Everything else is columnar: numpy over the row and record columns, and the two sequential
  loops (limit_req's leaky bucket and the sliding-window counts) in C (ext/out/abuse.pyx)
  without the GIL.

docs/ABUSE.md states the rules, their thresholds and how they were checked against real nginx and
slowhttptest.
"""
from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from httpanalyzer.stream import Summary, iter_record_batches
from webtap import clikit
from webtap._ext import abuse as _abuse
from webtap._ext import abuseconn as _aconn
from webtap._ext import dissect as _dissect
from webtap.capture import compile_filter
from webtap.errors import BpfError
from webtap.figures import save_figures
from webtap.records import http as records
from webtap.records.httppandas import to_pandas
from webtap.records.message import (
    METHOD_NAMES,
    MSG_REQUEST,
    MSGF_EV_DOUBLE_ENCODED,
    MSGF_EV_HOST_MISMATCH,
    MSGF_EV_LONG_HEADER_LINE,
    MSGF_EV_LONG_REQUEST_LINE,
    MSGF_EV_MANY_FIELDS,
    MSGF_HEADERS_INCOMPLETE,
    MSGF_HOST_REPEATED,
    MSGF_PAYLOAD_TRUNCATED,
    TCP_EVENT_DTYPE,
)

__all__ = ["TcpLog", "AbuseRun", "collect", "connections", "connections_from_rows",
           "first_request_of", "rates",
           "parse_rate", "parse_window", "limit_req",
           "slow_http", "SLOW_KINDS", "LIMIT_REQ_OUTCOMES", "evasion", "EVASION_FLAGS"]

LIMIT_REQ_OUTCOMES = _abuse.LIMIT_REQ_OUTCOMES
#: the slow-HTTP indicator columns of slow_http(), in order
SLOW_KINDS = ("slowloris", "slow_body", "slow_read", "idle_keepalive")

_SYN, _FIN, _RST, _ACK = 0x02, 0x01, 0x04, 0x10
_BODY_METHODS = np.zeros(256, bool)
_BODY_METHODS[[METHOD_NAMES.index(m) for m in ("POST", "PUT", "PATCH")]] = True

#: evasion indicators of a request's first packet (the walk's MSGF_* bits; ext/walk/evasion.c):
#: name -> bit of evasion()'s `evasion` column. The bits are the walk's message flags, so the
#: column can be read beside webtap.records.message's MSGF_* constants.
EVASION_FLAGS = {
    "host_repeated": MSGF_HOST_REPEATED,            # a second Host header field
    "host_mismatch": MSGF_EV_HOST_MISMATCH,         # absolute-form target's host != Host's
    "double_encoded": MSGF_EV_DOUBLE_ENCODED,       # "%25" + two hex digits in the target
    "long_request_line": MSGF_EV_LONG_REQUEST_LINE,  # request line > 8190 bytes
    "long_header_line": MSGF_EV_LONG_HEADER_LINE,   # a header line > 8190 bytes
    "many_fields": MSGF_EV_MANY_FIELDS,             # > 100 header fields
}
_EV_MASK = sum(EVASION_FLAGS.values())
_EVM_FIELDS = ["ts_ns", "pkt_index", "seq", "src_port", "dst_port", "flags", "method_id"]

#: the TCP event columns TcpLog keeps
_EV_FIELDS = ["ts_ns", "src", "dst", "src_port", "dst_port", "seq", "payload_len", "tcp_flags",
              "ip_version", "window"]
_EV_DTYPE = np.dtype([(n, TCP_EVENT_DTYPE.fields[n][0]) for n in _EV_FIELDS] + [("req", "<i4")])
_REQ_FIELDS = ["ts_ns", "seq", "flags", "method_id", "payload_len"]


class TcpLog:
    """A stage of the walk (webtap.pipeline; httpanalyzer.stream's packet_hook): keeps the walk's
    TCP events of every packet batch (_EV_FIELDS, columnar, copied out of the batch), each one
    marked with the HTTP request message that starts in its packet (the walk's request first
    packets: header block complete or not, method), so that no packet is walked twice."""

    tcp_events = 1       # every TCP segment (SYNs, pure ACKs with their windows)
    tls_watch = None

    def __init__(self, evasion: bool = False, sources=(), keep_events: bool = False,
                 gc_timeout: float = 60.0):
        self._ev: list[np.ndarray] = []
        self._req: list[np.ndarray] = []
        self._nreq = 0
        # the streaming connection table (ext/out/abuseconn.pyx): per live connection, nothing
        # per segment; keep_events also keeps every event (the batch reference, connections())
        self.table = _aconn.ConnTable(max(1, int(round(gc_timeout * 1e9))))
        self.keep_events = keep_events
        self._finished = False
        # evasion=True: also every request message's evasion bits, addresses and texts (one
        # numeric array and a few Arrow string arrays per batch, built in C: no per-row Python)
        self.evasion = evasion
        self._trace = {os.fspath(p): i for i, p in enumerate(sources)}
        self._evm: list[tuple] = []

    def _keep_evasion(self, batch, mb) -> None:
        m = mb.msgs
        m = m[m["kind"] == MSG_REQUEST]
        if not len(m):
            return
        num = {n: m[n].copy() for n in _EVM_FIELDS}
        num["trace"] = np.full(len(m), self._trace.get(getattr(batch, "source", None), 0), np.uint16)
        num["ip_version"] = m["ip_version"].copy()
        num["src_raw"] = m["src_ip"].copy()
        num["dst_raw"] = m["dst_ip"].copy()
        txt = {"client_ip": _dissect.ip_to_arrow(m, "src_ip"),
               "server_ip": _dissect.ip_to_arrow(m, "dst_ip")}
        for f in ("method", "host", "uri"):
            txt[f] = _dissect.span_to_arrow(m, batch.data, f)
        self._evm.append((num, txt))

    def evasion_rows(self) -> tuple[dict, dict]:
        """(numeric columns, Arrow text columns) of every request message kept (evasion=True)."""
        if not self._evm:
            z = np.zeros(0, np.uint32)
            num = {n: z for n in _EVM_FIELDS + ["trace", "ip_version"]}
            num["src_raw"] = num["dst_raw"] = np.zeros((0, 16), np.uint8)
            return num, {f: pa.array([], pa.string()) for f in
                         ("client_ip", "server_ip", "method", "host", "uri")}
        num = {k: np.concatenate([a[k] for a, _ in self._evm]) for k in self._evm[0][0]}
        txt = {k: pa.concat_arrays([t[k] for _, t in self._evm]) for k in self._evm[0][1]}
        return num, txt

    def feed(self, batch, mb=None) -> None:
        if self.evasion and mb is not None:
            self._keep_evasion(batch, mb)
        ev = getattr(mb, "tcp_events", None)
        if ev is None or not len(ev):
            return
        e = np.ascontiguousarray(np.asarray(ev).view(TCP_EVENT_DTYPE))
        bits = np.zeros(len(e), np.uint8)
        m = mb.msgs
        m = m[m["kind"] == MSG_REQUEST]
        if len(m):
            pos = np.minimum(np.searchsorted(e["pkt_index"], m["pkt_index"]), len(e) - 1)
            ok = e["pkt_index"][pos] == m["pkt_index"]
            first = np.ones(len(m), bool)           # the first message of its packet only
            first[1:] = m["pkt_index"][1:] != m["pkt_index"][:-1]
            ok &= first
            f = m["flags"][ok]
            cut = ((f & MSGF_HEADERS_INCOMPLETE) != 0) & ((f & MSGF_PAYLOAD_TRUNCATED) == 0)
            bits[pos[ok]] = 1 | (cut.astype(np.uint8) << 1) | (
                _BODY_METHODS[m["method_id"][ok]].astype(np.uint8) << 2)
        self.table.feed(e.view(np.uint8), bits)
        if not self.keep_events:
            return
        out = np.empty(len(e), _EV_DTYPE)
        for n in _EV_FIELDS:
            out[n] = e[n]
        out["req"] = -1
        m = mb.msgs
        m = m[m["kind"] == MSG_REQUEST]
        if len(m):
            # the event of each request's packet: events are in packet order, one per packet
            pos = np.searchsorted(e["pkt_index"], m["pkt_index"])
            pos = np.minimum(pos, len(e) - 1)
            ok = e["pkt_index"][pos] == m["pkt_index"]
            first = np.ones(len(m), bool)           # the first message of its packet only
            first[1:] = m["pkt_index"][1:] != m["pkt_index"][:-1]
            ok &= first
            r = np.empty(int(ok.sum()), [(n, m.dtype.fields[n][0]) for n in _REQ_FIELDS])
            for n in _REQ_FIELDS:
                r[n] = m[n][ok]
            out["req"][pos[ok]] = self._nreq + np.arange(len(r), dtype=np.int32)
            self._nreq += len(r)
            self._req.append(r)
        self._ev.append(out)

    def finish(self) -> None:
        return None

    def conn_rows(self):
        """(finished connections CONN_ROW_DTYPE, requests REQ_ROW_DTYPE, trace end ns) of the
        streaming table, after the input's end."""
        if not self._finished:
            self.table.finish()
            self._finished = True
        return self.table.rows(), self.table.requests(), int(self.table.now)

    def events(self) -> np.ndarray:
        return np.concatenate(self._ev) if self._ev else np.zeros(0, _EV_DTYPE)

    def request_messages(self) -> np.ndarray:
        if self._req:
            return np.concatenate(self._req)
        return np.zeros(0, [(n, np.dtype("<u4")) for n in _REQ_FIELDS])


@dataclass
class AbuseRun:
    """What one pass over the traces gives the analytics: the HTTP records (DataFrame of
    webtap.records.http), the walk's TCP events and request first packets (TcpLog), and the
    connection table built from them (connections())."""

    records: pd.DataFrame
    events: np.ndarray
    request_msgs: np.ndarray
    conns: pd.DataFrame = field(default=None)
    #: TcpLog.evasion_rows() when collected with evasion=True, else None
    evasion_rows: tuple | None = None
    #: TcpLog.conn_rows(): the streaming table's rows (collect()); the connections come from
    #: them, else (events given) from the batch computation connections()
    conn_rows: tuple | None = None

    def __post_init__(self):
        if self.conns is None:
            if self.conn_rows is not None:
                self.conns = connections_from_rows(*self.conn_rows)
            else:
                self.conns = connections(self.events, self.request_msgs)

    @property
    def requests(self) -> pd.DataFrame:
        """The records that have a request (retransmissions counted once), in request order."""
        return requests_of(self.records)


def collect(sources, bpf: str | None = None, gc_timeout: float = 60.0, summary=None,
            progress=False, evasion: bool = False, keep_events: bool = False) -> AbuseRun:
    """One pass over the traces: the HTTP records and the connections of the walk's TCP events
    (TcpLog's streaming table: memory per live connection, a connection silent for gc_timeout
    seconds of capture time leaves it); with evasion=True also every request message's evasion
    bits (evasion()). keep_events: also keep every TCP event (run.events, 60 bytes a segment),
    and take the connections from them (connections(), the batch computation)."""
    srcs = [sources] if isinstance(sources, (str, os.PathLike)) else list(sources)
    log = TcpLog(evasion=evasion, sources=[os.fspath(s) for s in srcs], keep_events=keep_events,
                 gc_timeout=gc_timeout)
    batches = list(iter_record_batches(srcs, bpf=bpf, gc_timeout=gc_timeout, summary=summary,
                                       progress=progress, consumers=0, packet_hook=log))
    tab = pa.Table.from_batches(batches, schema=records.SCHEMA)
    ev = log.events() if keep_events else np.zeros(0, _EV_DTYPE)
    rows = None if keep_events else log.conn_rows()
    run = AbuseRun(to_pandas(tab), ev, log.request_messages(),
                   evasion_rows=log.evasion_rows() if evasion else None, conn_rows=rows)
    run.table_stats = {"peak_live": int(log.table.peak_live), "capacity": int(log.table.capacity),
                       "events": int(log.table.events)}
    return run


def requests_of(df: pd.DataFrame) -> pd.DataFrame:
    """Records with a request, sorted by request time (stable)."""
    r = df[df["request_ts"].notna()]
    return r.sort_values("request_ts", kind="stable").reset_index(drop=True)


# ---------------------------------------------------------------- connections


def _ip_text(raw: np.ndarray, version: np.ndarray) -> np.ndarray:
    """16-byte address fields as text (IPv4 dotted, IPv6 RFC 5952): the C formatter every
    record kind's address columns use (webtap._ext.dissect.ip_text)."""
    return _dissect.ip_text(raw, version).to_numpy(zero_copy_only=False)


def _endpoint(ip: np.ndarray, port: np.ndarray) -> np.ndarray:
    """(address, port) as three big-endian-ordered unsigned keys, n x 3 uint64."""
    hi = ip[:, :8].copy().view(">u8").reshape(-1).astype(np.uint64)
    lo = ip[:, 8:].copy().view(">u8").reshape(-1).astype(np.uint64)
    return np.stack([hi, lo, port.astype(np.uint64)], axis=1)


def connections(events: np.ndarray, request_msgs: np.ndarray | None = None,
                trace_end_ns: int | None = None) -> pd.DataFrame:
    """One row per TCP connection of the walk's events (module docstring for what a connection
    is). Columns: conn, client_ip, client_port, server_ip, server_port, start_ts, end_ts (ns),
    syn_seen, closed (a FIN or RST was seen), client_bytes / server_bytes and client_segments /
    server_segments (TCP payload on the wire), requests (HTTP request first packets, a
    retransmitted one once), first_request_ts, zero_window_segments (client segments, no SYN or
    RST, advertising window 0), zero_window_s (time the client's window stayed 0: from each such
    segment to the client's next segment, or the connection's end), and the per-connection
    inputs of slow_http(). `events` also gets a column view: see _conn_of."""
    ev = events
    n = len(ev)
    cols = ["conn", "client_ip", "client_port", "server_ip", "server_port", "start_ts", "end_ts",
            "syn_seen", "closed", "client_bytes", "server_bytes", "client_segments",
            "server_segments", "requests", "first_request_ts", "zero_window_segments",
            "zero_window_s"]
    if n == 0:
        return pd.DataFrame({c: pd.Series([], dtype="int64") for c in cols})
    if trace_end_ns is None:
        trace_end_ns = int(ev["ts_ns"].max())
    a = _endpoint(ev["src"], ev["src_port"])
    b = _endpoint(ev["dst"], ev["dst_port"])
    # the flow key: the smaller endpoint first (lexicographic over hi, lo, port)
    gt = (a[:, 0] > b[:, 0]) | ((a[:, 0] == b[:, 0]) & ((a[:, 1] > b[:, 1]) |
                                                         ((a[:, 1] == b[:, 1]) & (a[:, 2] > b[:, 2]))))
    lo_ep = np.where(gt[:, None], b, a)
    hi_ep = np.where(gt[:, None], a, b)
    key = np.concatenate([lo_ep, hi_ep, ev["ip_version"][:, None].astype(np.uint64)], axis=1)
    _, flow = np.unique(key, axis=0, return_inverse=True)
    flow = flow.reshape(-1)
    order = np.lexsort((np.arange(n), ev["ts_ns"], flow))
    e = ev[order]
    f = flow[order]
    from_lo = ~gt[order]                      # sent by the flow's smaller endpoint
    flags = e["tcp_flags"]
    syn = (flags & (_SYN | _ACK)) == _SYN
    # a new connection at a SYN whose ISN differs from the flow's previous SYN (a retransmitted
    # SYN is the same connection)
    new_flow = np.ones(n, bool)
    new_flow[1:] = f[1:] != f[:-1]
    syn_idx = np.flatnonzero(syn)
    start = np.zeros(n, bool)
    if len(syn_idx):
        same_prev = np.zeros(len(syn_idx), bool)
        same_prev[1:] = (f[syn_idx[1:]] == f[syn_idx[:-1]]) & (e["seq"][syn_idx[1:]] == e["seq"][syn_idx[:-1]])
        start[syn_idx[~same_prev]] = True
    boundary = new_flow | start
    conn = np.cumsum(boundary) - 1
    nc = int(conn[-1]) + 1
    first = np.flatnonzero(boundary)
    # the client: the SYN's sender; else the first request's sender; else the higher port
    client_lo = np.full(nc, -1, np.int8)
    first_syn = np.full(nc, n, np.int64)
    np.minimum.at(first_syn, conn[syn], np.flatnonzero(syn))
    has_syn = first_syn < n
    client_lo[has_syn] = from_lo[first_syn[has_syn]]
    isreq = e["req"] >= 0
    first_req = np.full(nc, n, np.int64)
    np.minimum.at(first_req, conn[isreq], np.flatnonzero(isreq))
    fill = (client_lo < 0) & (first_req < n)
    client_lo[fill] = from_lo[first_req[fill]]
    rest = client_lo < 0
    lo_port = np.where(gt, e["dst_port"], e["src_port"])[first]    # ports of the flow's endpoints
    hi_port = np.where(gt, e["src_port"], e["dst_port"])[first]
    client_lo[rest] = lo_port[rest] > hi_port[rest]
    from_client = from_lo == client_lo[conn].astype(bool)
    data = e["payload_len"] > 0
    cdata = data & from_client
    sdata = data & ~from_client
    ts = e["ts_ns"]
    start_ts = np.where(has_syn, ts[np.minimum(first_syn, n - 1)], ts[first])
    fin = (flags & (_FIN | _RST)) != 0
    end_ts = np.full(nc, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(end_ts, conn[fin], ts[fin])
    closed = end_ts != np.iinfo(np.int64).max
    last_ts = np.maximum.reduceat(ts, first)
    end_ts = np.where(closed, end_ts, last_ts)
    pl = e["payload_len"].astype(np.int64)
    cb = np.bincount(conn, weights=np.where(cdata, pl, 0), minlength=nc).astype(np.int64)
    sb = np.bincount(conn, weights=np.where(sdata, pl, 0), minlength=nc).astype(np.int64)
    cs = np.bincount(conn, weights=cdata, minlength=nc).astype(np.int64)
    ss = np.bincount(conn, weights=sdata, minlength=nc).astype(np.int64)
    # requests: one per distinct (connection, seq) among the events that start one
    rq_ev = np.flatnonzero(isreq)
    rseq = e["seq"][rq_ev]
    rconn = conn[rq_ev]
    keep = np.ones(len(rq_ev), bool)
    if len(rq_ev):
        o = np.lexsort((rq_ev, rseq, rconn))
        dup = np.zeros(len(o), bool)
        dup[1:] = (rconn[o][1:] == rconn[o][:-1]) & (rseq[o][1:] == rseq[o][:-1])
        keep[o[dup]] = False
    rq_ev = rq_ev[keep]
    nreq = np.bincount(conn[rq_ev], minlength=nc).astype(np.int64)
    first_req_ts = np.full(nc, -1, np.int64)
    fr = first_req < n
    first_req_ts[fr] = ts[first_req[fr]]
    # zero windows advertised by the client (no SYN/RST: a RST carries window 0 by convention)
    cseg = from_client & ((flags & (_SYN | _RST)) == 0)
    ci = np.flatnonzero(cseg)
    zw = np.zeros(nc, np.int64)
    zws = np.zeros(nc, np.float64)
    if len(ci):
        zero = e["window"][ci] == 0
        nxt = np.empty(len(ci), np.int64)
        nxt[:-1] = ts[ci[1:]]
        last_of_conn = np.ones(len(ci), bool)
        last_of_conn[:-1] = conn[ci[1:]] != conn[ci[:-1]]
        nxt[last_of_conn] = end_ts[conn[ci[last_of_conn]]]
        nxt[-1] = end_ts[conn[ci[-1]]]
        span = np.maximum(nxt - ts[ci], 0)
        zw = np.bincount(conn[ci], weights=zero, minlength=nc).astype(np.int64)
        zws = np.bincount(conn[ci], weights=np.where(zero, span, 0), minlength=nc) / 1e9
    ip_src = e["src"][first]
    ip_dst = e["dst"][first]
    ver = e["ip_version"][first]
    fc = from_client[first]
    cip = np.where(fc[:, None], ip_src, ip_dst)
    sip = np.where(fc[:, None], ip_dst, ip_src)
    cport = np.where(fc, e["src_port"][first], e["dst_port"][first])
    sport = np.where(fc, e["dst_port"][first], e["src_port"][first])
    out = pd.DataFrame({
        "conn": np.arange(nc, dtype=np.int64),
        "client_ip": _ip_text(cip, ver), "client_port": cport.astype(np.int64),
        "server_ip": _ip_text(sip, ver), "server_port": sport.astype(np.int64),
        "start_ts": start_ts, "end_ts": end_ts, "syn_seen": has_syn, "closed": closed,
        "client_bytes": cb, "server_bytes": sb, "client_segments": cs, "server_segments": ss,
        "requests": nreq, "first_request_ts": first_req_ts,
        "zero_window_segments": zw, "zero_window_s": zws,
    })
    out.attrs["trace_end_ns"] = trace_end_ns
    # what slow_http() reads: the sorted events with their connection and direction
    out.attrs["_events"] = (e, conn, from_client, rq_ev)
    return out


def connections_from_rows(rows: np.ndarray, reqs: np.ndarray, trace_end_ns: int) -> pd.DataFrame:
    """The connection table (the columns of connections()) from the streaming table's rows
    (ext/out/abuseconn.pyx CONN_ROW_DTYPE, REQ_ROW_DTYPE): the same rules, applied as the events
    came. Rows in order of start (then of creation)."""
    cols = ["conn", "client_ip", "client_port", "server_ip", "server_port", "start_ts", "end_ts",
            "syn_seen", "closed", "client_bytes", "server_bytes", "client_segments",
            "server_segments", "requests", "first_request_ts", "zero_window_segments",
            "zero_window_s"]
    if len(rows) == 0:
        out = pd.DataFrame({c: pd.Series([], dtype="int64") for c in cols})
        out.attrs["trace_end_ns"] = trace_end_ns
        out.attrs["_rows"] = (rows, reqs, np.zeros(0, np.int64), np.zeros(0, np.int64))
        return out
    order = np.lexsort((rows["id"], rows["start_ts"]))
    r = rows[order]
    n = len(r)
    # the client: the SYN's or first request's sender; else the endpoint with the higher port
    cl = r["client"].astype(np.int64)
    unknown = cl < 0
    cl[unknown] = (r["hi_port"][unknown] > r["lo_port"][unknown]).astype(np.int64)
    sv = 1 - cl
    idx = np.arange(n)
    closed = r["fin_ts"] != _aconn.NO_END
    end = np.where(closed, r["fin_ts"], r["last_ts"])
    cip = np.where((cl == 0)[:, None], r["lo_ip"], r["hi_ip"])
    sip = np.where((cl == 0)[:, None], r["hi_ip"], r["lo_ip"])
    ver = r["ver"]
    out = pd.DataFrame({
        "conn": idx.astype(np.int64),
        "client_ip": _ip_text(cip, ver), "client_port": np.where(cl == 0, r["lo_port"], r["hi_port"]).astype(np.int64),
        "server_ip": _ip_text(sip, ver), "server_port": np.where(cl == 0, r["hi_port"], r["lo_port"]).astype(np.int64),
        "start_ts": r["start_ts"], "end_ts": end, "syn_seen": r["syn_seen"].astype(bool),
        "closed": closed,
        "client_bytes": r["bytes"][idx, cl], "server_bytes": r["bytes"][idx, sv],
        "client_segments": r["segs"][idx, cl], "server_segments": r["segs"][idx, sv],
        "requests": r["nreq"],
        "first_request_ts": np.where(r["first_req_ts"] == _aconn.NO_TIME, -1, r["first_req_ts"]),
        "zero_window_segments": r["zw_n"][idx, cl], "zero_window_s": r["zw_ns"][idx, cl] / 1e9,
    })
    out.attrs["trace_end_ns"] = trace_end_ns
    # what slow_http() reads: the rows, and per request its connection's position here
    pos = np.empty(n, np.int64)
    pos[order] = idx
    id_to_pos = np.full(int(rows["id"].max()) + 1, -1, np.int64)
    id_to_pos[rows["id"]] = pos
    # idle: the longest gap from the server's data to the client's next data; after the
    # server's last data segment, to the FIN/RST, or to the end of the trace
    idle = r["idle"][idx, sv].astype(np.float64)
    tail = (r["last_data_dir"] == sv) & (r["last_data_ts"] != _aconn.NO_TIME)
    to = np.where(closed, end, max(int(trace_end_ns), 0))
    idle = np.where(tail, np.maximum(idle, np.maximum(to - r["last_data_ts"], 0)), idle)
    out.attrs["_rows"] = (r, reqs, id_to_pos, idle / 1e9)
    return out


# ---------------------------------------------------------------- rates

_DUR = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|m)?\s*$")


def parse_window(text) -> float:
    """'1s', '500ms', '2m', '0.5' (seconds) -> seconds (> 0)."""
    if isinstance(text, (int, float)):
        v = float(text)
    else:
        m = _DUR.match(str(text))
        if not m:
            raise ValueError(f"not a duration (e.g. 1s, 500ms, 2m): {text!r}")
        v = float(m.group(1)) * {"ms": 1e-3, "s": 1.0, "m": 60.0, None: 1.0}[m.group(2)]
    if not v > 0:
        raise ValueError(f"a window must be > 0 s: {text!r}")
    return v


def _groups(frame: pd.DataFrame, by) -> tuple[np.ndarray, pd.DataFrame]:
    keys = frame[list(by)].astype(object).where(frame[list(by)].notna(), "")
    if not len(keys):
        return np.zeros(0, np.int64), keys.reset_index(drop=True)
    codes = keys.groupby(list(by), sort=False).ngroup().to_numpy(np.int64)
    _, first = np.unique(codes, return_index=True)
    return codes, keys.iloc[first].reset_index(drop=True)


def _peak(group: np.ndarray, t: np.ndarray, width: int, ngroups: int):
    """Per group: the largest sliding-window count and the time of the window's end."""
    peak = np.zeros(ngroups, np.int64)
    at = np.full(ngroups, np.iinfo(np.int64).min, np.int64)
    if not len(group):
        return peak, at
    o = np.lexsort((t, group))
    g, tt = group[o], t[o]
    c = _abuse.window_counts(np.ascontiguousarray(g), np.ascontiguousarray(tt), width)
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    peak[g[starts]] = np.maximum.reduceat(c, starts)
    # the first event (in time) at which each group reaches its peak
    hit = c == peak[g]
    idx = np.flatnonzero(hit)
    firsts = idx[np.r_[True, g[idx][1:] != g[idx][:-1]]]
    at[g[firsts]] = tt[firsts]
    return peak, at


def _peak_concurrent(group: np.ndarray, start: np.ndarray, end: np.ndarray, ngroups: int):
    """Per group: the most connections open at once ([start, end]; one that ends at the instant
    another starts is not counted with it)."""
    out = np.zeros(ngroups, np.int64)
    if not len(group):
        return out
    g = np.concatenate([group, group])
    t = np.concatenate([start, end])
    d = np.concatenate([np.ones(len(group), np.int64), -np.ones(len(group), np.int64)])
    o = np.lexsort((d, t, g))                 # at equal times the ends (-1) first
    g, d = g[o], d[o]
    cs = np.cumsum(d)
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    base = np.r_[0, cs[starts[1:] - 1]] if len(starts) > 1 else np.zeros(1, np.int64)
    run = cs - np.repeat(base, np.diff(np.r_[starts, len(g)]))
    out[g[starts]] = np.maximum.reduceat(run, starts)
    return out


def rates(run: AbuseRun, window_s=1.0, by=("client_ip",)) -> pd.DataFrame:
    """Per client address (by=("client_ip",)) or per (client, Host) (by=("client_ip", "host")):
    requests and connections over sliding windows of `window_s` seconds.

    Columns: requests, first_ts, last_ts, mean_rps (requests / max(last - first, window)),
    peak_requests (most requests in any window (t - W, t]), peak_rps (= peak_requests / W),
    peak_at (end of the first such window), connections, peak_new_conns / peak_new_cps (most
    connection starts in any window), peak_concurrent (most connections open at once). A
    connection's Host is its first request's; a connection without a request has Host ''."""
    by = tuple(by)
    if by not in (("client_ip",), ("client_ip", "host")):
        raise ValueError("by is ('client_ip',) or ('client_ip', 'host')")
    w = parse_window(window_s)
    width = max(1, int(round(w * 1e9)))
    req = run.requests
    conns = run.conns.copy()
    if "host" in by:
        # the Host of a connection: its first request's (records joined on the 4-tuple + time)
        conns["host"] = first_request_of(conns, req, "host")
    both = pd.concat([req[list(by)].astype(object), conns[list(by)].astype(object)],
                     ignore_index=True)
    codes, keys = _groups(both, by)
    rg, cg = codes[:len(req)], codes[len(req):]
    ng = len(keys)
    rt = req["request_ts"].astype("int64").to_numpy() if len(req) else np.zeros(0, np.int64)
    nreq = np.bincount(rg, minlength=ng)
    first = np.full(ng, np.iinfo(np.int64).max, np.int64)
    last = np.full(ng, np.iinfo(np.int64).min, np.int64)
    np.minimum.at(first, rg, rt)
    np.maximum.at(last, rg, rt)
    peak, at = _peak(rg, rt, width, ng)
    cstart = conns["start_ts"].to_numpy(np.int64)
    cend = conns["end_ts"].to_numpy(np.int64)
    ncon = np.bincount(cg, minlength=ng)
    cpeak, _ = _peak(cg, cstart, width, ng)
    conc = _peak_concurrent(cg, cstart, cend, ng)
    has = nreq > 0
    span = np.where(has, np.maximum((last - first) / 1e9, w), np.nan)
    out = keys.copy()
    out["requests"] = nreq.astype(np.int64)
    out["first_ts"] = pd.to_datetime(np.where(has, first, 0), utc=True).where(has)
    out["last_ts"] = pd.to_datetime(np.where(has, last, 0), utc=True).where(has)
    out["mean_rps"] = np.where(has, nreq / span, 0.0)
    out["peak_requests"] = peak
    out["peak_rps"] = peak / w
    out["peak_at"] = pd.to_datetime(np.where(has, at, 0), utc=True).where(has)
    out["connections"] = ncon.astype(np.int64)
    out["peak_new_conns"] = cpeak
    out["peak_new_cps"] = cpeak / w
    out["peak_concurrent"] = conc
    out.attrs["window_s"] = w
    return out.sort_values(["peak_requests", "requests"], ascending=False,
                           kind="stable").reset_index(drop=True)


def first_request_of(conns: pd.DataFrame, req: pd.DataFrame, column: str = "host") -> np.ndarray:
    """A record column (host, uri, user_agent, ...) of each connection's first request (by
    4-tuple, the first request at or after the connection's start); '' when it has none."""
    hosts = np.full(len(conns), "", object)
    if not len(req) or not len(conns):
        return hosts
    k = ["client_ip", "client_port", "server_ip", "server_port"]
    r = req[k + ["request_ts"]].copy()
    r["value"] = req[column].astype(object)
    r["t"] = r["request_ts"].astype("int64")
    r["client_port"] = r["client_port"].astype("int64")
    r["server_port"] = r["server_port"].astype("int64")
    c = conns[k + ["start_ts"]].copy()
    c["row"] = np.arange(len(c))
    r = r.sort_values("t", kind="stable")
    c = c.sort_values("start_ts", kind="stable")
    j = pd.merge_asof(r, c, left_on="t", right_on="start_ts", by=k, direction="backward")
    j = j[j["row"].notna()]
    j = j.drop_duplicates("row", keep="first")
    hosts[j["row"].astype(int).to_numpy()] = j["value"].fillna("").astype(str).to_numpy()
    return hosts


# ---------------------------------------------------------------- limit_req

_RATE = re.compile(r"^\s*([0-9]+)\s*r/(s|m)\s*$")


def parse_rate(rate) -> int:
    """nginx's `rate=` (e.g. '10r/s', '30r/m') -> the zone's rate in milli-requests per second,
    as ngx_http_limit_req_zone computes it: rate * 1000 / scale (integer division; scale 1 for
    r/s, 60 for r/m). A plain number is read as r/s."""
    if isinstance(rate, (int, np.integer)):
        r, scale = int(rate), 1
    else:
        m = _RATE.match(str(rate))
        if not m:
            raise ValueError(f"rate is N r/s or N r/m (nginx's rate=), {rate!r}")
        r, scale = int(m.group(1)), 1 if m.group(2) == "s" else 60
    if r <= 0:
        raise ValueError(f"rate must be > 0, {rate!r}")
    v = r * 1000 // scale
    if v <= 0:
        raise ValueError(f"rate {rate!r} is below nginx's resolution (0.001 r/s)")
    return v


def limit_req(requests: pd.DataFrame, rate="1r/s", burst: int = 0, nodelay: bool = False,
              delay: int | None = None, key: str = "client_ip",
              clock_offset_us: int = 0) -> pd.DataFrame:
    """nginx's `limit_req_zone $binary_remote_addr ... rate=RATE; limit_req zone=... burst=B
    [nodelay | delay=D];` replayed over the requests (ext/out/abuse.pyx for the rules): per request
    `limit_req` (passed / delayed / rejected), `excess` (requests, as nginx logs it: 3 decimals)
    and `delay_ms` (how long nginx holds a delayed request).

    requests: records with request_ts and `key` (httpanalyzer's records, requests_of()); handled
    in request-time order. nginx's clock: the request's capture time in whole ms, shifted by
    clock_offset_us (nginx reads its clock when its event loop wakes, after the packet's
    capture; its ms ticks need not line up with the capture's)."""
    if burst < 0 or (delay is not None and delay < 0):
        raise ValueError("burst and delay must be >= 0")
    if nodelay and delay is not None:
        raise ValueError("nodelay and delay= exclude each other (as in nginx)")
    r = parse_rate(rate)
    out = requests.copy()
    t = out["request_ts"].astype("int64").to_numpy()
    order = np.argsort(t, kind="stable")
    codes, uniq = pd.factorize(out[key].astype(object).where(out[key].notna(), ""))
    now_ms = (t + int(clock_offset_us) * 1000) // 1_000_000
    dl = (1 << 62) if nodelay else 1000 * int(delay or 0)
    oc, ex, dms = _abuse.limit_req(np.ascontiguousarray(codes[order], np.int64),
                                   np.ascontiguousarray(now_ms[order], np.int64),
                                   len(uniq), r, 1000 * int(burst), dl)
    res = np.empty(len(t), np.uint8)
    exc = np.empty(len(t), np.int64)
    dly = np.empty(len(t), np.int64)
    res[order], exc[order], dly[order] = oc, ex, dms
    out["limit_req"] = pd.Categorical.from_codes(res.astype(np.int8), list(LIMIT_REQ_OUTCOMES))
    out["excess"] = exc / 1000.0
    out["delay_ms"] = dly
    out.attrs["limit_req"] = {"rate_milli": r, "burst": burst, "nodelay": nodelay,
                              "delay": delay, "key": key}
    return out


# ---------------------------------------------------------------- slow HTTP


def slow_http(run: AbuseRun, stall_s: float = 5.0, min_body_rate: float = 1000.0,
              zero_window_s: float = 2.0, idle_s: float = 5.0) -> pd.DataFrame:
    """Per connection (run.conns plus these columns) the slow-HTTP indicators, from the first
    packets and TCP headers (no reassembly); docs/ABUSE.md has the rules and their checks:

    * wait_s: per connection, the longest wait of a request for the server's first byte after it
      (to the end of the connection when none came);
    * slowloris: a request whose header block did not end in its first packet (the segment
      ended first, not the capture's snaplen), and that waited >= stall_s (the server waits for
      the rest of its headers);
    * slow_body: a POST/PUT/PATCH not counted as above (its header block ended in its first
      packet, or the snaplen hides where it ended), that waited >=
      stall_s while the client sent more data segments after it, at less than min_body_rate
      bytes/s over the wait (a body that trickles);
    * slow_read: the client advertised a zero window for >= zero_window_s in total;
    * idle_keepalive: after the server's data, the connection stayed open >= idle_s without the
      client sending data (a kept-alive connection held idle: to the next client data segment,
      or to the FIN/RST, or to the end of the trace), and not a slow reader (whose server is
      blocked on the zero window, not idle).
    * slow: any of the four."""
    c = run.conns.copy()
    nc = len(c)
    for k in ("wait_s", "trickle_segments", "trickle_rate"):
        c[k] = np.zeros(nc)
    for k in SLOW_KINDS + ("slow",):
        c[k] = np.zeros(nc, bool)
    c["idle_s"] = np.zeros(nc)
    if nc == 0:
        return c
    if "_rows" in c.attrs:
        return _slow_from_rows(c, stall_s, min_body_rate, zero_window_s, idle_s)
    e, conn, from_client, rq_ev = c.attrs["_events"]
    ts = e["ts_ns"]
    end_ts = c["end_ts"].to_numpy(np.int64)
    data = e["payload_len"] > 0
    sdata = data & ~from_client
    cdata = data & from_client
    # per request: the server's first data segment after it in its connection (events are sorted
    # by connection then time: the next server data index at or after the request's)
    n = len(e)
    nxt_s = np.full(n + 1, n, np.int64)
    idx = np.arange(n)
    nxt_s[:n] = np.where(sdata, idx, n)
    nxt_s = np.minimum.accumulate(nxt_s[::-1])[::-1]
    rq = rq_ev
    rconn = conn[rq]
    s_after = nxt_s[np.minimum(rq + 1, n)]
    answered = (s_after < n) & (conn[np.minimum(s_after, n - 1)] == rconn)
    wait_end = np.where(answered, ts[np.minimum(s_after, n - 1)], end_ts[rconn])
    wait = np.maximum(wait_end - ts[rq], 0) / 1e9
    # client data segments after the request, before that end: cumulative counts within events
    ccum = np.cumsum(cdata)
    cbytes = np.cumsum(np.where(cdata, e["payload_len"].astype(np.int64), 0))
    stop = np.where(answered, s_after, np.searchsorted(conn, rconn, side="right"))
    segs = ccum[np.maximum(stop - 1, 0)] - ccum[rq]
    byts = cbytes[np.maximum(stop - 1, 0)] - cbytes[rq]
    rate = np.where(wait > 0, byts / np.maximum(wait, 1e-9), np.inf)
    msg = run.request_msgs[e["req"][rq]]
    # the header block cut by the end of the segment (not by the capture's snaplen: then the
    # packet cannot tell, and the request is no slowloris candidate)
    cut = ((msg["flags"] & MSGF_HEADERS_INCOMPLETE) != 0) & ((msg["flags"] & MSGF_PAYLOAD_TRUNCATED) == 0)
    body = _BODY_METHODS[msg["method_id"]]
    _request_flags(c, rconn, wait, segs, rate, cut, body, stall_s, min_body_rate)
    c["slow_read"] = c["zero_window_s"].to_numpy() >= zero_window_s
    # idle keep-alive: from a server data segment to the next data segment of the connection
    # when that one is the client's (or to the end when none follows)
    di = np.flatnonzero(data)
    idle = np.zeros(nc)
    if len(di):
        dconn = conn[di]
        last = np.ones(len(di), bool)
        last[:-1] = dconn[1:] != dconn[:-1]
        nts = np.empty(len(di), np.int64)
        nts[:-1] = ts[di[1:]]
        nts[last] = np.where(c["closed"].to_numpy()[dconn[last]], end_ts[dconn[last]],
                             max(int(c.attrs["trace_end_ns"]), 0))
        nclient = np.zeros(len(di), bool)
        nclient[:-1] = from_client[di[1:]]
        cand = sdata[di] & (nclient | last)
        gap = np.where(cand, np.maximum(nts - ts[di], 0) / 1e9, 0.0)
        np.maximum.at(idle, dconn, gap)
    c["idle_s"] = idle
    # a slow reader's connection is silent too, but the server is blocked on its window, not idle
    c["idle_keepalive"] = (idle >= idle_s) & ~c["slow_read"].to_numpy(bool)
    c["slow"] = c[list(SLOW_KINDS)].any(axis=1)
    c.attrs.pop("_events", None)
    c.attrs["thresholds"] = {"stall_s": stall_s, "min_body_rate": min_body_rate,
                             "zero_window_s": zero_window_s, "idle_s": idle_s}
    return c


def _request_flags(c, rconn, wait, segs, rate, cut, body, stall_s, min_body_rate) -> None:
    """The per-request rules of slow_http (its docstring), folded per connection into c:
    slowloris, slow_body, wait_s, trickle_segments, trickle_rate. rconn: each request's row of
    c; wait (s), segs (client data segments after it), rate (bytes/s over the wait), cut (its
    header block ended by the segment), body (a method with a body): per request."""
    nc = len(c)
    stalled = wait >= stall_s
    loris = cut & stalled
    slowbody = ~cut & body & stalled & (segs >= 1) & (rate < min_body_rate)
    for name, v in (("slowloris", loris), ("slow_body", slowbody)):
        flag = np.zeros(nc, bool)
        flag[rconn[v]] = True
        c[name] = flag
    wmax = np.zeros(nc)
    np.maximum.at(wmax, rconn, wait)
    c["wait_s"] = wmax
    tseg = np.zeros(nc)
    np.maximum.at(tseg, rconn, segs.astype(float))
    c["trickle_segments"] = tseg.astype(np.int64)
    trate = np.full(nc, np.nan)
    ok = stalled & (segs >= 1)          # (rate is never NaN: finite, or inf without a wait)
    if ok.any():
        tr = np.full(nc, np.inf)
        np.minimum.at(tr, rconn[ok], rate[ok])
        trate = np.where(np.isinf(tr), np.nan, tr)
    c["trickle_rate"] = trate


def _slow_from_rows(c, stall_s, min_body_rate, zero_window_s, idle_s):
    """slow_http() over the streaming table's rows: the same rules (its docstring)."""
    nc = len(c)
    r, reqs, id_to_pos, idle = c.attrs["_rows"]
    rconn = id_to_pos[reqs["conn"]] if len(reqs) else np.zeros(0, np.int64)
    wait = np.maximum(reqs["end_ts"] - reqs["ts"], 0) / 1e9
    segs = reqs["segs"]
    byts = reqs["bytes"]
    rate = np.where(wait > 0, byts / np.maximum(wait, 1e-9), np.inf)
    cut = (reqs["flags"] & 2) != 0
    body = (reqs["flags"] & 4) != 0
    _request_flags(c, rconn, wait, segs, rate, cut, body, stall_s, min_body_rate)
    c["slow_read"] = c["zero_window_s"].to_numpy() >= zero_window_s
    c["idle_s"] = idle
    c["idle_keepalive"] = (idle >= idle_s) & ~c["slow_read"].to_numpy(bool)
    c["slow"] = c[list(SLOW_KINDS)].any(axis=1)
    c.attrs.pop("_rows", None)
    c.attrs["thresholds"] = {"stall_s": stall_s, "min_body_rate": min_body_rate,
                             "zero_window_s": zero_window_s, "idle_s": idle_s}
    return c


# ---------------------------------------------------------------- evasion


def evasion(run: AbuseRun, flagged: bool = False) -> pd.DataFrame:
    """Per HTTP request (its first packet, as the walk found it; a retransmitted request --
    same addresses, ports and SEQ -- once, at its first copy), in capture order: request_ts,
    client_ip, client_port, server_ip, server_port, request_frame (1-based, tshark's
    frame.number), request_trace, method, host, uri (as in the packet), `evasion` (uint16 bits,
    EVASION_FLAGS) and one boolean column per flag. The flags come from the walk
    (ext/walk/evasion.c, docs/ABUSE.md "Evasion flags"). flagged: only requests with a flag."""
    if run.evasion_rows is None:
        raise ValueError("this run was collected without evasion=True (abuse.collect)")
    num, txt = run.evasion_rows
    n = len(num["ts_ns"])
    # a retransmission: the same flow and SEQ as an earlier request message
    key = np.zeros(n, [("s", "u1", (16,)), ("d", "u1", (16,)), ("sp", "<u2"), ("dp", "<u2"),
                       ("seq", "<u4"), ("tr", "<u2")])
    key["s"], key["d"], key["sp"], key["dp"] = num["src_raw"], num["dst_raw"], num["src_port"], num["dst_port"]
    key["seq"], key["tr"] = num["seq"], num["trace"]
    if n:
        _, first = np.unique(key.view(f"V{key.dtype.itemsize}"), return_index=True)
        keep = np.zeros(n, bool)
        keep[first] = True
    else:
        keep = np.zeros(0, bool)
    bits = (num["flags"].astype(np.uint16) & _EV_MASK).astype(np.uint16)
    if flagged:
        keep &= bits != 0
    idx = np.flatnonzero(keep)
    order = idx[np.lexsort((num["pkt_index"][idx], num["ts_ns"][idx]))]
    take = pa.array(order, pa.int64())
    out = pd.DataFrame({
        "request_ts": pd.to_datetime(num["ts_ns"][order].astype(np.int64), utc=True),
        "client_ip": txt["client_ip"].take(take).to_numpy(zero_copy_only=False),
        "client_port": num["src_port"][order].astype(np.int64),
        "server_ip": txt["server_ip"].take(take).to_numpy(zero_copy_only=False),
        "server_port": num["dst_port"][order].astype(np.int64),
        "request_frame": num["pkt_index"][order].astype(np.int64) + 1,
        "request_trace": num["trace"][order].astype(np.int64),
        "method": txt["method"].take(take).to_numpy(zero_copy_only=False),
        "host": txt["host"].take(take).to_numpy(zero_copy_only=False),
        "uri": txt["uri"].take(take).to_numpy(zero_copy_only=False),
        "evasion": bits[order],
    })
    for name, bit in EVASION_FLAGS.items():
        out[name] = (out["evasion"].to_numpy() & bit) != 0
    return out


# ---------------------------------------------------------------- command line

CLI_EPILOG = """examples:
  httpanalyzer abuse rates trace.pcap --window 1s -o rates.parquet
  httpanalyzer abuse rates trace.pcap --by client,host -o rates.csv
  httpanalyzer abuse limit-req trace.pcap --rate 10r/s --burst 5 -o lr.csv
  httpanalyzer abuse limit-req trace.pcap --rate 30r/m --burst 3 --nodelay
  httpanalyzer abuse slow trace.pcap --stall 5 --flagged -o slow.csv
  httpanalyzer abuse evasion trace.pcap --flagged -o evasion.csv

Exit codes: 0 success, 1 nothing could be read or the run failed, 2 usage error, 130/143
interrupted (docs/CLI.md). The rules and their checks against nginx and slowhttptest:
docs/ABUSE.md."""


def _rate_arg(text: str) -> str:
    try:
        parse_rate(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def _window_arg(text: str) -> float:
    try:
        v = parse_window(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if v > 1e9:
        raise argparse.ArgumentTypeError(f"must be <= 1e9 s: {text!r}")
    return v


def build_parser():
    ap = argparse.ArgumentParser(
        prog="httpanalyzer abuse",
        description="Abuse analytics from the first packets (issue 34): per-client rates over "
                    "sliding windows, a replay of nginx's limit_req, slow-HTTP indicators. One "
                    "pass over the traces (HTTP records and the walk's TCP events).",
        epilog=CLI_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True, metavar="{rates,limit-req,slow,evasion}")

    def common(p):
        p.add_argument("traces", nargs="+", metavar="TRACE",
                       help="pcap / pcapng files (gzip'd too; '-' for stdin); several form one "
                            "stream in time order")
        p.add_argument("-f", "--filter", dest="bpf", metavar="BPF", help="BPF filter (tcpdump syntax)")
        p.add_argument("-o", "--output", metavar="OUT",
                       help=clikit.output_help("rows") + "; default: lines on stdout")
        clikit.add_gc_timeout(p, "a message")
        p.add_argument("--plots", metavar="DIR",
                       help="also write the table's figure as PNG to DIR "
                            "(httpanalyzer.abuse_plot)")
        clikit.add_common(p)
        clikit.files(p, inputs=("traces",), outputs={"output": "-"})

    p = sub.add_parser("rates", help="per client (or client and Host): requests/s, new and "
                                     "concurrent connections over sliding windows",
                       description=rates.__doc__)
    common(p)
    p.add_argument("--window", type=_window_arg, default=1.0, metavar="DUR",
                   help="sliding window: 1s, 500ms, 2m, or seconds (default 1s)")
    p.add_argument("--by", choices=("client", "client,host"), default="client",
                   help="group by client address, or by client address and Host (default client)")
    p = sub.add_parser("limit-req", help="replay nginx's limit_req keyed by client address: "
                                         "passed / delayed / rejected per request",
                       description=limit_req.__doc__)
    common(p)
    p.add_argument("--rate", type=_rate_arg, required=True, metavar="RATE",
                   help="the zone's rate= (e.g. 10r/s, 30r/m)")
    p.add_argument("--burst", type=clikit.number(int, 0, 1 << 40), default=0, metavar="N",
                   help="limit_req burst= (default 0)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--nodelay", action="store_true", help="limit_req nodelay")
    g.add_argument("--delay", type=clikit.number(int, 0, 1 << 40), default=None, metavar="N",
                   help="limit_req delay= (two-stage limiting)")
    p.add_argument("--clock-offset-us", type=clikit.number(int, -10**9, 10**9), default=0,
                   metavar="US", help="shift nginx's ms clock from the capture's (default 0)")
    p = sub.add_parser("slow", help="per connection: slowloris, slow body, slow read and idle "
                                    "keep-alive indicators", description=slow_http.__doc__)
    common(p)
    p.add_argument("--stall", type=clikit.positive_float, default=5.0, metavar="S",
                   help="a request that waits this long for the server's first byte (default 5)")
    p.add_argument("--min-body-rate", type=clikit.positive_float, default=1000.0, metavar="B",
                   help="a body trickling below this many bytes/s is slow (default 1000)")
    p.add_argument("--zero-window", type=clikit.positive_float, default=2.0, metavar="S",
                   help="seconds of zero window advertised by the client (default 2)")
    p.add_argument("--idle", type=clikit.positive_float, default=5.0, metavar="S",
                   help="seconds a connection stays open without client data after the "
                        "server's (default 5)")
    p.add_argument("--flagged", action="store_true", help="only the connections with a flag")
    p = sub.add_parser("evasion", help="per request: evasion flags (duplicated Host, absolute-form "
                                       "host != Host, double percent-encoding, over-long lines, "
                                       "too many fields)", description=evasion.__doc__)
    common(p)
    p.add_argument("--flagged", action="store_true", help="only the requests with a flag")
    return ap


def _ts_cols(df: pd.DataFrame, names) -> pd.DataFrame:
    df = df.copy()
    for n in names:
        v = df[n].to_numpy(np.int64)
        df[n] = pd.to_datetime(np.where(v >= 0, v, 0), utc=True).where(v >= 0)
    return df


def handle(a, run, parts=None) -> int:
    """parts: the registry's optional parts (httpanalyzer.cli.Parts): the figures of --plots
    (httpanalyzer.abuse_plot, matplotlib) come from it, loaded only when asked."""
    if a.plots is not None and parts is None:
        raise clikit.UsageError("--plots needs the httpanalyzer command (its registry loads the figures)")
    a.traces = [clikit.trace_path(t) for t in a.traces]
    if a.bpf:
        try:
            compile_filter(a.bpf)
        except BpfError as e:
            raise clikit.UsageError(f"bad filter: {clikit.describe(e)}, -f {a.bpf!r}") from None
    if a.plots is not None and os.path.exists(a.plots) and not os.path.isdir(a.plots):
        raise clikit.UsageError(f"--plots needs a folder, {a.plots}")
    o = run.output(a.output or "-")
    summary = Summary()
    run.packets = lambda: max(summary.packets, run.ctx.packets)
    ab = collect(a.traces, bpf=a.bpf, gc_timeout=a.gc_timeout, summary=summary,
                 evasion=a.what == "evasion")
    run.warn_traces(summary.warnings)
    for u in summary.unreadable:
        run.error(clikit.what_where(u))
    if summary.unreadable and len(summary.unreadable) == len(a.traces):
        raise clikit.Exit(1)
    figs = {}
    if a.what == "rates":
        df = rates(ab, window_s=a.window,
                   by=("client_ip",) if a.by == "client" else ("client_ip", "host"))
        if a.plots:
            figs["abuse_rates"] = parts.abuse_plot.rates_figure(df)   # matplotlib: only when asked
        run.note(f"{len(df)} {'clients' if a.by == 'client' else 'client/Host pairs'}, "
                 f"window {a.window:g} s")
    elif a.what == "limit-req":
        lr = limit_req(ab.requests, rate=a.rate, burst=a.burst, nodelay=a.nodelay,
                       delay=a.delay, clock_offset_us=a.clock_offset_us)
        cols = ["request_ts", "client_ip", "client_port", "server_ip", "server_port", "method",
                "host", "uri", "status", "limit_req", "excess", "delay_ms"]
        df = lr[cols]
        if a.plots:
            figs["abuse_limit_req"] = parts.abuse_plot.limit_req_figure(lr)
        counts = df["limit_req"].value_counts()
        run.note(f"{len(df)} requests: " + ", ".join(f"{counts.get(k, 0)} {k}"
                                                       for k in LIMIT_REQ_OUTCOMES))
    elif a.what == "evasion":
        df = evasion(ab)
        run.note(f"{len(df)} requests: " + ", ".join(f"{int(df[k].sum())} {k}"
                                                      for k in EVASION_FLAGS))
        if a.flagged:
            df = df[df["evasion"] != 0]
    else:
        df = slow_http(ab, stall_s=a.stall, min_body_rate=a.min_body_rate,
                       zero_window_s=a.zero_window, idle_s=a.idle)
        if a.plots:
            figs["abuse_slow"] = parts.abuse_plot.slow_figure(df)
        df = _ts_cols(df, ["start_ts", "end_ts", "first_request_ts"])
        df.attrs = {}
        run.note(f"{len(df)} connections: " + ", ".join(f"{int(df[k].sum())} {k}"
                                                          for k in SLOW_KINDS))
        if a.flagged:
            df = df[df["slow"]]
    df = df.reset_index(drop=True)
    df.attrs = {}
    o.write(pa.Table.from_pandas(df, preserve_index=False))
    o.commit()
    if figs:
        for p in save_figures(figs, a.plots):
            run.note(f"wrote {p}")
    return 0


def cli(argv=None, parts=None) -> int:
    """`httpanalyzer abuse {rates,limit-req,slow} TRACE... [options]`; parts: the registry's
    optional parts (httpanalyzer.cli.Parts), which the httpanalyzer command hands in."""
    return clikit.main("httpanalyzer abuse", build_parser(), lambda a, run: handle(a, run, parts),
                       list(argv or []))
