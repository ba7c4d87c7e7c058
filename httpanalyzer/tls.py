"""TLS handshake records (issue 17): traces -> capture -> TLS first flight (ext/tls.pyx: parse,
bounded reassembly of split hellos, Eq. 2 pairing) -> Arrow record batches -> DataFrame.

    import httpanalyzer
    df = httpanalyzer.analyze_tls("trace.pcap")     # one row per handshake

Columns (first ones fixed by the issue, more after them): see COLUMNS / SCHEMA. Versions and
cipher suites are written as tshark writes them (0x0304, 0x1301); list columns are Arrow lists
(comma-joined in CSV and text output).
"""
from __future__ import annotations

import os
from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa

from webtap.dissect import encap_text
from webtap.writers import empty_batch_of

__all__ = ["analyze_tls", "iter_tls_batches", "TlsRun", "COLUMNS", "SCHEMA", "TLS_OUT_DTYPE"]

#: ext/tls.pyx TlsOut: the numeric part of an emitted record, field for field (a test compares
#: the sizes and every offset with the C struct). The text leaves beside it in Arrow-layout
#: columns (TlsTable.take).
TLS_OUT_DTYPE = np.dtype([
    ("client_ip", "u1", (16,)), ("server_ip", "u1", (16,)),
    ("ch_ts_ns", "<i8"), ("sh_ts_ns", "<i8"), ("ch_pkt", "<u8"), ("sh_pkt", "<u8"),
    ("encap", "<u8"), ("ch_hs_len", "<u4"), ("tunnel_id", "<u4"),
    ("client_port", "<u2"), ("server_port", "<u2"), ("vlan", "<u2"),
    ("ch_legacy_version", "<u2"), ("ch_flags", "<u2"), ("ch_segments", "<u2"),
    ("sh_version", "<u2"), ("sh_cipher", "<u2"), ("sh_flags", "<u2"), ("sh_group", "<u2"),
    ("ip_version", "u1"), ("transport", "u1"), ("has_ch", "u1"), ("has_sh", "u1"),
    ("reason", "u1"), ("ch_status", "u1"), ("sh_status", "u1"), ("clipped", "u1"),
    ("outer_ip_version", "u1"),
], align=True)

TLSF_HRR, TLSF_ECH, TLSF_SNI, TLSF_ALPN = 1, 2, 4, 8

#: (name, Arrow type, meaning); the first 22 are the issue's, in its order
FIELDS = [
    ("client_ip", pa.string(), "client address"),
    ("client_port", pa.uint16(), "client TCP/UDP port"),
    ("server_ip", pa.string(), "server address"),
    ("server_port", pa.uint16(), "server port"),
    ("transport", pa.string(), "tcp | quic"),
    ("client_hello_ts", pa.timestamp("ns", tz="UTC"), "capture time of the ClientHello's first packet"),
    ("server_hello_ts", pa.timestamp("ns", tz="UTC"), "capture time of the ServerHello's packet"),
    ("handshake_time", pa.duration("ns"), "server_hello_ts - client_hello_ts (ns, like HTTP's response_time)"),
    ("sni", pa.string(), "server_name (host_name) of the ClientHello"),
    ("alpn", pa.list_(pa.string()), "ALPN protocols offered by the client, in order"),
    ("client_versions", pa.list_(pa.string()), "supported_versions (wire order, GREASE kept), else the legacy version"),
    ("server_version", pa.string(), "version the ServerHello selects"),
    ("cipher", pa.string(), "cipher suite the ServerHello selects"),
    ("ja3", pa.string(), "JA3 (MD5) of the ClientHello; null for an SSLv2-format one"),
    ("ja3s", pa.string(), "JA3S (MD5) of the ServerHello"),
    ("ja4", pa.string(), "JA4 (TLS client fingerprint, BSD-3-Clause part only); null for an SSLv2-format ClientHello"),
    ("ech", pa.bool_(), "encrypted_client_hello extension present (real or GREASE)"),
    ("ch_segments", pa.uint16(), "TCP segments the ClientHello took"),
    ("matched", pa.bool_(), "ClientHello and ServerHello paired"),
    ("unmatched_reason", pa.string(), "gc | end | cap | incomplete | too_long | malformed | reassembly_cap; null if paired"),
    ("request_frame", pa.uint64(), "tshark frame.number of the ClientHello (its first segment)"),
    ("response_frame", pa.uint64(), "tshark frame.number of the ServerHello"),
    # more
    ("hello_retry_request", pa.bool_(), "the ServerHello is a HelloRetryRequest"),
    ("client_legacy_version", pa.string(), "ClientHello legacy_version field"),
    ("ciphers", pa.list_(pa.string()), "cipher suites offered (wire order, GREASE kept); an SSLv2-format "
     "ClientHello's 3-byte specs: 0x00XXYY as 0xXXYY, SSLv2-only ones with six digits"),
    ("extensions", pa.list_(pa.uint16()), "ClientHello extension types in wire order"),
    ("supported_groups", pa.list_(pa.string()), "supported_groups (wire order)"),
    ("key_share_groups", pa.list_(pa.string()), "groups of the client's key shares"),
    ("server_alpn", pa.string(), "ALPN protocol the server selects"),
    ("server_group", pa.string(), "key_share group the ServerHello selects (TLS 1.3, HRR); null without"),
    ("server_extensions", pa.list_(pa.uint16()), "ServerHello extension types in wire order"),
    ("ch_length", pa.uint32(), "declared ClientHello handshake length"),
    ("ip_version", pa.uint8(), "4 or 6"),
    ("vlan", pa.uint16(), "outer 802.1Q VLAN id; null when untagged"),
    ("text_clipped", pa.bool_(), "some text was clipped to the record's field width"),
    # encapsulation (as the HTTP records'): of the ClientHello's first packet, the
    # ServerHello's without one; QUIC: of the connection's first Initial
    ("encap", pa.string(), "tunnel layers crossed, outermost first ('vxlan,eth', '6in4'); null without"),
    ("outer_src_ip", pa.string(), "source of the outermost IP header carrying the tunnel; null if none"),
    ("outer_dst_ip", pa.string(), "its destination; null if none"),
    ("tunnel_id", pa.uint32(), "VNI, GRE key, ERSPAN session, TEID, PPPoE session or MPLS label; null without encapsulation"),
    ("community_id", pa.string(), "Community ID v1 of the flow (TCP; UDP for QUIC), as on the HTTP records"),
]
COLUMNS = [f[0] for f in FIELDS]
SCHEMA = pa.schema([pa.field(n, t, metadata={"doc": d}) for n, t, d in FIELDS])
_REASONS = (None, "gc", "end", "cap", "incomplete", "too_long", "malformed", "reassembly_cap")


def _bitmap(valid, n: int):
    """(Arrow validity buffer or None, null count) of a boolean mask (None: all valid)."""
    if valid is None:
        return None, 0
    valid = np.asarray(valid, dtype=bool)
    nulls = int(n - np.count_nonzero(valid))
    return (pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None), nulls


def _num(values: np.ndarray, valid=None, typ=None) -> pa.Array:
    """A numeric column from its buffer (pa.array would import pandas, ~0.2 s of start-up)."""
    v = np.ascontiguousarray(values)
    bitmap, nulls = _bitmap(valid, len(v))
    return pa.Array.from_buffers(typ or pa.from_numpy_dtype(v.dtype), len(v),
                                 [bitmap, pa.py_buffer(v)], null_count=nulls)


def _bool(values: np.ndarray, valid=None) -> pa.Array:
    v = np.asarray(values, dtype=bool)
    bitmap, nulls = _bitmap(valid, len(v))
    return pa.Array.from_buffers(pa.bool_(), len(v),
                                 [bitmap, pa.py_buffer(np.packbits(v, bitorder="little"))],
                                 null_count=nulls)


def _str_col(offs: np.ndarray, data: np.ndarray, valid=None, nonempty: bool = False) -> pa.Array:
    """A string column from its Arrow buffers (offsets int32[n + 1], UTF-8 bytes); null where
    not valid, and where empty if nonempty."""
    n = len(offs) - 1
    if nonempty:
        full = np.diff(offs) > 0
        valid = full if valid is None else (np.asarray(valid, dtype=bool) & full)
    bitmap, nulls = _bitmap(valid, n)
    return pa.Array.from_buffers(pa.string(), n, [bitmap, pa.py_buffer(offs), pa.py_buffer(data)],
                                 null_count=nulls)


def _list_col(parts: tuple, valid) -> pa.Array:
    """list<string> (parts: list offsets, item offsets, bytes) or list<uint16> (parts: list
    offsets, values) from its Arrow buffers; null where not valid."""
    loffs = parts[0]
    n = len(loffs) - 1
    if len(parts) == 3:
        values = pa.Array.from_buffers(pa.string(), len(parts[1]) - 1,
                                       [None, pa.py_buffer(parts[1]), pa.py_buffer(parts[2])])
    else:
        values = _num(parts[1], typ=pa.uint16())
    bitmap, nulls = _bitmap(valid, n)
    return pa.Array.from_buffers(pa.list_(values.type), n, [bitmap, pa.py_buffer(loffs)],
                                 null_count=nulls, children=[values])


_HEXDIGITS = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def _hex(v: np.ndarray, valid: np.ndarray) -> pa.Array:
    """0xhhhh text of 16-bit values (as tshark writes versions and cipher suites); null where
    not valid."""
    v = np.asarray(v).astype(np.uint32)
    mat = np.empty((len(v), 6), dtype=np.uint8)
    mat[:, 0], mat[:, 1] = ord("0"), ord("x")
    for k in range(4):
        mat[:, 2 + k] = _HEXDIGITS[(v >> (12 - 4 * k)) & 15]
    offs = np.arange(0, 6 * len(v) + 1, 6, dtype=np.int32)
    return _str_col(offs, mat.reshape(-1), np.asarray(valid, dtype=bool))


def _choice(names: tuple, codes: np.ndarray) -> pa.Array:
    """names[code] per row (None entries give nulls), from buffers."""
    enc = [(x or "").encode() for x in names]
    lens = np.array([len(x) for x in enc], dtype=np.int32)[codes]
    offs = np.zeros(len(codes) + 1, dtype=np.int32)
    np.cumsum(lens, out=offs[1:])
    data = np.frombuffer(b"".join(enc[c] for c in range(len(names))), dtype=np.uint8)
    starts = np.concatenate([[0], np.cumsum([len(x) for x in enc])])[codes]
    take = np.repeat(starts - offs[:-1], lens) + np.arange(int(offs[-1]))
    valid = np.array([x is not None for x in names])[codes]
    return _str_col(offs, data[take] if len(take) else np.zeros(0, np.uint8), valid)


def to_table(raw: np.ndarray, strings: dict) -> pa.Table:
    """TlsTable.take()'s (TlsOut rows as a uint8 buffer, text and list columns) -> Arrow table
    of SCHEMA (columnar, no per-record Python)."""
    from webtap._ext.communityid import community_id

    r = np.frombuffer(raw, dtype=TLS_OUT_DTYPE) if raw.dtype != TLS_OUT_DTYPE else raw
    if len(r) == 0:
        return empty_table()
    has_ch = r["has_ch"].astype(bool)
    has_sh = r["has_sh"].astype(bool)
    ch_ok = has_ch & (r["ch_status"] == 0)
    sh_ok = has_sh & (r["sh_status"] == 0)
    paired = r["reason"] == 0
    ts = pa.timestamp("ns", tz="UTC")
    ht = _num(np.where(paired, r["sh_ts_ns"] - r["ch_ts_ns"], 0), paired, pa.duration("ns"))

    def text(name, valid=None, nonempty=False):
        return _str_col(*strings[name], valid, nonempty)

    reason_codes = r["reason"].astype(np.int64)
    outer = r["outer_ip_version"] != 0
    vlan = r["vlan"]
    cols = {
        "client_ip": text("client_ip"),
        "client_port": _num(r["client_port"]),
        "server_ip": text("server_ip"),
        "server_port": _num(r["server_port"]),
        "transport": _choice(("tcp", "quic"), r["transport"].astype(np.int64)),
        "client_hello_ts": _num(r["ch_ts_ns"], has_ch, ts),
        "server_hello_ts": _num(r["sh_ts_ns"], has_sh, ts),
        "handshake_time": ht,
        "sni": text("sni", ch_ok, nonempty=True),
        "alpn": _list_col(strings["alpn"], ch_ok),
        "client_versions": _list_col(strings["client_versions"], ch_ok),
        "server_version": _hex(r["sh_version"], sh_ok),
        "cipher": _hex(r["sh_cipher"], sh_ok),
        "ja3": text("ja3", ch_ok, nonempty=True),
        "ja3s": text("ja3s", sh_ok, nonempty=True),
        "ja4": text("ja4", ch_ok, nonempty=True),
        "ech": _bool((r["ch_flags"] & TLSF_ECH) != 0, ch_ok),
        "ch_segments": _num(r["ch_segments"], has_ch),
        "matched": _bool(paired),
        "unmatched_reason": _choice(_REASONS + ("unknown",),
                                    np.minimum(reason_codes, len(_REASONS))),
        "request_frame": _num(r["ch_pkt"] + 1, has_ch),
        "response_frame": _num(r["sh_pkt"] + 1, has_sh),
        "hello_retry_request": _bool((r["sh_flags"] & TLSF_HRR) != 0, sh_ok),
        "client_legacy_version": _hex(r["ch_legacy_version"], ch_ok),
        "ciphers": _list_col(strings["ciphers"], ch_ok),
        "extensions": _list_col(strings["extensions"], ch_ok),
        "supported_groups": _list_col(strings["supported_groups"], ch_ok),
        "key_share_groups": _list_col(strings["key_share_groups"], ch_ok),
        "server_alpn": text("server_alpn", sh_ok, nonempty=True),
        "server_group": _hex(r["sh_group"], sh_ok & (r["sh_group"] != 0)),
        "server_extensions": _list_col(strings["server_extensions"], sh_ok),
        "ch_length": _num(r["ch_hs_len"], has_ch),
        "ip_version": _num(r["ip_version"]),
        "vlan": _num(vlan, vlan != 0xFFFF),
        "text_clipped": _bool(r["clipped"] != 0),
        "encap": encap_text(r["encap"]),
        "outer_src_ip": text("outer_src_ip", outer),
        "outer_dst_ip": text("outer_dst_ip", outer),
        "tunnel_id": _num(r["tunnel_id"], r["encap"] != 0),
        # the same C function as the HTTP records' column (ext/communityid.pyx), per row protocol
        "community_id": community_id(np.ascontiguousarray(r["client_ip"]), r["client_port"],
                                     np.ascontiguousarray(r["server_ip"]), r["server_port"],
                                     r["ip_version"],
                                     np.where(r["transport"] == 1, 17, 6).astype(np.uint8)),
    }
    arrays = [cols[n] if cols[n].type == SCHEMA.field(n).type else cols[n].cast(SCHEMA.field(n).type)
              for n in COLUMNS]
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


class TlsRun:
    """One TLS record stage over a stream of packet batches (several traces in a row)."""

    def __init__(self, gc_timeout: float = 60.0, max_pending: int = 1 << 15,
                 max_reassembly: int = 1024):
        from webtap._ext.tls import TlsTable

        self.table = TlsTable(gc_timeout=gc_timeout, max_pending=max_pending,
                              max_reassembly=max_reassembly)

    #: records the C table gathers before they are converted to Arrow: the conversion has a
    #: fixed cost per call, which per packet batch was a fifth of the HTTP pass's time
    CONVERT_EVERY = 1 << 16

    @property
    def watch(self):
        """The stage's watch list (a capsule) for webtap.dissect.dissect(tls_watch=...)."""
        return self.table.watch

    def feed(self, packets, data, msgs=None) -> pa.Table | None:
        """One packet batch; msgs: the stage's messages of it from the HTTP dissector's walk
        (MessageBatch.tls), else the stage walks the batch itself."""
        if msgs is None:
            self.table.feed(packets, data)
        else:
            self.table.feed_messages(msgs, data, len(packets))
        if self.table.records_waiting >= self.CONVERT_EVERY:
            return self._take()
        return None

    def finish(self) -> pa.Table | None:
        self.table.flush()
        return self._take()

    def _take(self):
        if not self.table.records_waiting:
            return None
        return to_table(*self.table.take())

    def counters(self) -> dict:
        return self.table.counters()


def iter_tls_batches(traces: str | os.PathLike | Iterable, bpf: str | None = None,
                     gc_timeout: float = 60.0, max_pending: int = 1 << 15,
                     max_reassembly: int = 1024, counters: dict | None = None,
                     progress: bool | None = False,
                     warnings: list | None = None) -> Iterator[pa.RecordBatch]:
    """Record batches of TLS handshakes of one or more traces (read in the order given, one
    table: a handshake may span files). warnings: receives each trace's damage ('path: what')."""
    from webtap.capture import open_trace

    if isinstance(traces, (str, os.PathLike)):
        traces = [traces]
    run = TlsRun(gc_timeout=gc_timeout, max_pending=max_pending, max_reassembly=max_reassembly)
    for t in traces:
        with open_trace(t, bpf=bpf, progress=progress) as tr:
            try:
                for batch in tr:
                    tab = run.feed(batch.packets, batch.data)
                    if tab is not None:
                        yield from tab.to_batches()
            finally:
                if warnings is not None:
                    warnings.extend(f"{t}: {w}" for w in tr.warnings)
    tab = run.finish()
    if tab is not None:
        yield from tab.to_batches()
    if counters is not None:
        counters.update(run.counters())


def analyze_tls(traces, bpf: str | None = None, gc_timeout: float = 60.0,
                max_pending: int = 1 << 15, max_reassembly: int = 1024,
                counters: dict | None = None, warnings: list | None = None):
    """One row per TLS handshake (ClientHello <-> ServerHello) of the traces, as a DataFrame
    ordered by ClientHello (else ServerHello) frame."""
    batches = list(iter_tls_batches(traces, bpf=bpf, gc_timeout=gc_timeout,
                                    max_pending=max_pending, max_reassembly=max_reassembly,
                                    counters=counters, warnings=warnings))
    tab = pa.Table.from_batches(batches, schema=SCHEMA)
    tab = sort_table(tab)
    return tab.to_pandas(types_mapper=None)


def sort_table(tab: pa.Table) -> pa.Table:
    """Rows in the order of their first frame (ClientHello, else ServerHello)."""
    if tab.num_rows == 0:
        return tab
    def frames(name):
        a = tab[name].combine_chunks()
        vals = np.frombuffer(a.buffers()[1], dtype=np.uint64)[a.offset:a.offset + len(a)]
        bm = a.buffers()[0]
        if bm is None:
            return vals, np.ones(len(a), dtype=bool)
        bits = np.unpackbits(np.frombuffer(bm, dtype=np.uint8), bitorder="little")
        return vals, bits[a.offset:a.offset + len(a)].astype(bool)

    req, rv = frames("request_frame")
    resp, sv = frames("response_frame")
    idx = np.lexsort((np.where(sv, resp, 0), np.where(rv, req, resp)))   # stable, as sort_indices
    return _take(tab, _num(idx.astype(np.int64)))


def _take(tab: pa.Table, idx: pa.Array) -> pa.Table:
    """tab.take(idx) without importing pyarrow.compute: that module builds its ~300 wrapper
    functions and their docstrings at import (pydoc, docscrape: ~40 ms idle, ~190 M instructions
    of `httpanalyzer TRACE --tls-out T.parquet`), and a Parquet run needs none of them. The same
    kernel is called through pyarrow._compute.call_function, the entry point pyarrow.compute
    itself wraps; the public call_function where a pyarrow lacks that module."""
    try:
        from pyarrow._compute import call_function
    except ImportError:              # pragma: no cover - another pyarrow layout
        from pyarrow.compute import call_function
    return call_function("take", [tab, idx])


# ---------------------------------------------------------------------------------------------
# Output: text views (lists comma-joined) for CSV and the line format; Parquet keeps lists
# ---------------------------------------------------------------------------------------------
def text_view(batch: pa.RecordBatch | pa.Table) -> pa.Table:
    """Lists comma-joined, timestamps (epoch) and durations as seconds with 9 decimals (as the
    HTTP records).
    Written by C over the buffers (webtap._ext.textout): no pyarrow.compute, whose first call
    imports pandas (~0.2 s, ~40 MB of a text run)."""
    from webtap._ext.textout import seconds_text, text_array

    tab = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    cols = []
    for name in tab.column_names:
        col = tab[name]                # (combine_chunks would copy every column)
        t = col.type
        if pa.types.is_list(t):
            col = text_array(col, "raw")
        elif pa.types.is_timestamp(t) or pa.types.is_duration(t):
            col = seconds_text(col)
        cols.append(col)
    return pa.table(cols, names=tab.column_names)


TEXT_SCHEMA = None


def empty_table() -> pa.Table:
    """A table of SCHEMA without rows (webtap.writers.empty_batch_of: not SCHEMA.empty_table(),
    which imports pandas in a run that found no handshake)."""
    return pa.Table.from_batches([empty_batch_of(SCHEMA)])


def _text_schema() -> pa.Schema:
    global TEXT_SCHEMA
    if TEXT_SCHEMA is None:
        TEXT_SCHEMA = text_view(empty_table()).schema
    return TEXT_SCHEMA


def _ssl_log(batch: pa.RecordBatch | pa.Table) -> pa.RecordBatch:
    """Zeek's ssl.log view (httpanalyzer.zeek) of the records, which the TLS stage hands over as
    a Table (one per run), not a RecordBatch."""
    from httpanalyzer.zeek import ssl_log_view

    if isinstance(batch, pa.Table):
        batch = pa.RecordBatch.from_arrays(   # (a column without chunks: no pa.array, no pandas)
            [c.combine_chunks() if c.num_chunks else pa.nulls(0, c.type) for c in batch.columns],
            schema=batch.schema)
    return ssl_log_view(batch)


def _views() -> dict:
    return {"csv": text_view, "lines": text_view, "zeek": _ssl_log}


def open_output(run, path: str):
    """The records' output through the shared CLI layer (webtap.clikit: extension table, atomic
    write): Parquet keeps list columns, CSV and the line format get text_view."""
    parquet = path.endswith((".parquet", ".pq"))
    return run.output(path, views=_views(), schema=SCHEMA if parquet else _text_schema())


class OnePass:
    """`httpanalyzer TRACE -o http.parquet --tls-out tls.parquet`: the TLS stage fed with the
    packet batches the HTTP pass reads (iter_record_batches(packet_hook=...)), in this process
    whatever the HTTP pairing mode (one process, feeder consumers): the same records as
    `httpanalyzer tls`."""

    def __init__(self, run, out: str, gc_timeout: float = 60.0, max_pending: int = 1 << 15,
                 max_reassembly: int = 1024):
        self.o = open_output(run, out)
        self.run = TlsRun(gc_timeout=gc_timeout, max_pending=max_pending,
                          max_reassembly=max_reassembly)
        self.tables: list = []
        self.packets = 0                   # packets fed (for `interrupted ... after N packets`)
        run.on_interrupt(self._keep)       # SIGINT/SIGTERM: the handshakes so far, as partial

    def _keep(self) -> None:
        """The run was interrupted: the handshakes so far (the waiting hellos flushed as
        unmatched, as the HTTP records' are) into the output, which clikit keeps as
        OUT.partial.EXT."""
        if self.o.done:
            return
        t = self.run.finish()
        if t is not None:
            self.tables.append(t)
        if self.tables:
            tab = sort_table(pa.concat_tables(self.tables))
            if tab.num_rows:
                self.o.write(tab)

    @property
    def tls_watch(self):
        """Read by httpanalyzer.stream: the HTTP pass's dissector then finds this stage's
        messages in the same walk over the packets."""
        return self.run.watch

    def __call__(self, packets, data, mb=None) -> None:
        """The HTTP pass's packet hook (httpanalyzer.stream): mb, the batch's MessageBatch."""
        self.feed(packets, data, getattr(mb, "tls", None))

    def feed(self, packets, data, msgs=None) -> None:
        self.packets += len(packets)
        t = self.run.feed(packets, data, msgs)
        if t is not None:
            self.tables.append(t)

    def commit(self) -> None:
        t = self.run.finish()
        if t is not None:
            self.tables.append(t)
        tab = sort_table(pa.concat_tables(self.tables) if self.tables else empty_table())
        self.o.write(tab)
        self.o.commit()
        return tab

    def counters(self) -> dict:
        return self.run.counters()


def feed_traces(one: OnePass, traces, bpf: str | None = None, warnings: list | None = None) -> list:
    """Read the traces into a OnePass; returns the unreadable ones as 'path: why' lines.
    warnings: receives the damage each trace showed ('path: what', as webtap.stream's)."""
    from webtap.capture import open_trace
    from webtap.errors import BpfError

    bad = []
    for t in traces:
        try:
            tr = open_trace(t, bpf=bpf, progress=False)
        except BpfError:
            raise
        except (OSError, ValueError, RuntimeError) as e:
            bad.append(f"{t}: {e}")
            continue
        with tr:
            try:
                for batch in tr:
                    one.feed(batch.packets, batch.data)
            finally:
                if warnings is not None:
                    warnings.extend(f"{t}: {w}" for w in tr.warnings)
    return bad


def build_parser():
    import argparse

    from webtap import clikit

    ap = argparse.ArgumentParser(
        prog="httpanalyzer tls",
        description="TLS handshake records: one row per ClientHello/ServerHello pair (SNI, ALPN, "
                    "versions, cipher, JA3/JA3S/JA4, handshake time), paired like HTTP "
                    "transactions (ServerHello SEQ = ClientHello ACK). Exit codes: 0 success, "
                    "1 nothing could be read, 2 usage error.")
    ap.add_argument("traces", nargs="+", metavar="TRACE")
    ap.add_argument("-f", "--filter", dest="bpf", metavar="BPF", help="BPF filter (tcpdump syntax)")
    ap.add_argument("-o", "--output", metavar="OUT",
                    help=clikit.output_help("handshake records") + "; default: lines on stdout")
    clikit.add_gc_timeout(ap, "a hello")
    ap.add_argument("--max-pending", type=clikit.max_pending, default=1 << 15, metavar="N",
                    help="waiting hellos at most (oldest evicted, reason cap; 1 .. 2**30; "
                         "default 32768)")
    ap.add_argument("--max-reassembly", type=clikit.number(int, 1, 1 << 20), default=1024,
                    metavar="N",
                    help="split hellos reassembled at once (32 KiB each at most; 1 .. 2**20; "
                         "default 1024)")
    ap.add_argument("--summary", action="store_true", help="print the counters to stderr")
    ap.add_argument("--plots", metavar="DIR",
                    help="write the figures (handshake-time CCDF TCP vs QUIC, versions, ALPN, "
                         "top SNIs, ECH share, ClientHello segments) as PNG to DIR")
    clikit.add_common(ap)
    clikit.files(ap, inputs=("traces",), outputs={"output": "-"})
    return ap


def handle(a, run) -> int:
    import sys

    from webtap import clikit
    from webtap.errors import BpfError

    a.traces = [clikit.trace_path(t) for t in a.traces]
    if a.bpf:
        from webtap.capture import compile_filter

        try:
            compile_filter(a.bpf)
        except BpfError as e:
            raise clikit.UsageError(f"bad filter: {clikit.describe(e)}, -f {a.bpf!r}") from None
    one = OnePass(run, a.output or "-", gc_timeout=a.gc_timeout, max_pending=a.max_pending,
                  max_reassembly=a.max_reassembly)
    run.packets = lambda: one.packets
    damage: list = []
    bad = feed_traces(one, a.traces, bpf=a.bpf, warnings=damage)
    run.warn_traces(damage)
    for b in bad:
        run.error(clikit.what_where(b))
    if len(bad) == len(a.traces):
        raise clikit.Exit(1)
    tab = one.commit()
    if a.plots:
        from httpanalyzer.plot import save_figures
        from httpanalyzer.tls_plot import tls_figures

        for p in save_figures(tls_figures(tab.to_pandas()), a.plots):
            run.note(f"wrote {p}")
    if a.summary:
        for k, v in one.counters().items():
            print(f"{k:28s} {v}", file=sys.stderr)
    return 0


def cli(argv=None) -> int:
    """`httpanalyzer tls TRACE... [-f BPF] [-o OUT.{csv,parquet,txt}]`"""
    from webtap import clikit

    return clikit.main("httpanalyzer tls", build_parser(), handle, list(argv or []))
