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

__all__ = ["analyze_tls", "iter_tls_batches", "TlsRun", "COLUMNS", "SCHEMA", "TLS_RECORD_DTYPE",
           "EXCHANGE_COLUMNS", "EXCHANGE_SCHEMA", "EXCHANGE_RECORD_DTYPE"]

_W = dict(ip=48, sni=256, alpn=256, vers=128, ciphers=1024, exts=512, groups=256, ks=128,
          salpn=64, sexts=256)

_CH = np.dtype([
    ("ts_ns", "<i8"), ("pkt", "<u8"), ("ack", "<u4"), ("hs_len", "<u4"),
    ("legacy_version", "<u2"), ("version", "<u2"), ("flags", "<u2"), ("segments", "<u2"),
    ("n_ciphers", "<u2"), ("n_exts", "<u2"), ("status", "u1"), ("clipped", "u1"),
    ("sni", f"S{_W['sni']}"), ("alpn", f"S{_W['alpn']}"), ("versions", f"S{_W['vers']}"),
    ("ciphers", f"S{_W['ciphers']}"), ("exts", f"S{_W['exts']}"), ("groups", f"S{_W['groups']}"),
    ("key_share", f"S{_W['ks']}"), ("ja3", "S33"), ("ja4", "S37"),
], align=True)
_SH = np.dtype([
    ("ts_ns", "<i8"), ("pkt", "<u8"), ("seq", "<u4"), ("hs_len", "<u4"),
    ("legacy_version", "<u2"), ("version", "<u2"), ("cipher", "<u2"), ("flags", "<u2"),
    ("segments", "<u2"), ("group", "<u2"), ("status", "u1"), ("clipped", "u1"),
    ("alpn", f"S{_W['salpn']}"), ("exts", f"S{_W['sexts']}"), ("ja3s", "S33"),
], align=True)
#: ext/tls.pyx TlsRecord (a test asserts the sizes agree)
TLS_RECORD_DTYPE = np.dtype([
    ("client_ip", "u1", (16,)), ("server_ip", "u1", (16,)),
    ("client_ip_text", f"S{_W['ip']}"), ("server_ip_text", f"S{_W['ip']}"),
    ("client_port", "<u2"), ("server_port", "<u2"), ("vlan", "<u2"),
    ("ip_version", "u1"), ("transport", "u1"), ("has_ch", "u1"), ("has_sh", "u1"),
    ("reason", "u1"), ("_pad", "u1"), ("ch", _CH), ("sh", _SH),
    ("enc", np.dtype([("encap", "<u8"), ("outer_src", "u1", (16,)), ("outer_dst", "u1", (16,)),
                      ("tunnel_id", "<u4"), ("outer_ip_version", "u1")], align=True)),
    ("outer_src_text", f"S{_W['ip']}"), ("outer_dst_text", f"S{_W['ip']}"),
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

# ---------------------------------------------------------------------------------------------
# Exchange records (issue 33): request/response exchanges inside TLS over TCP, the paper's
# ACK = SEQ rule (ext/exchange.pyx; httpanalyzer.tls_exchange builds them; docs/TLS.md
# "Exchanges"). Their schema lives here, beside the handshake records' it joins.
#: ext/exchange.pyx XRecord (a test asserts the sizes agree)
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


def _rows(col: np.ndarray):
    """A fixed-width NUL-terminated bytes column as (n x width uint8 matrix, value lengths)."""
    n, w = len(col), col.dtype.itemsize
    mat = np.ascontiguousarray(col).view(np.uint8).reshape(n, w)
    nz = mat != 0
    lens = np.where(nz.all(axis=1), w, nz.argmin(axis=1)) if n else np.zeros(0, np.int64)
    return mat, lens


def _list(mat: np.ndarray, lens: np.ndarray, valid, child=pa.string()) -> pa.Array:
    """Comma-joined text rows -> list<child> (an empty text is an empty list; null where not
    valid), laid out with numpy: the values are the bytes between commas."""
    n = len(lens)
    valid = np.asarray(valid, dtype=bool)
    lens = np.where(valid, lens, 0)
    flat = mat[np.arange(mat.shape[1]) < lens[:, None]]
    ro = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens, out=ro[1:])
    comma = flat == 44
    cpos = np.flatnonzero(comma)
    full = lens > 0
    per_row = np.where(full, np.searchsorted(cpos, ro[1:]) - np.searchsorted(cpos, ro[:-1]) + 1, 0)
    ends = np.sort(np.concatenate([cpos, ro[1:][full]]))
    coffs = np.zeros(len(ends) + 1, dtype=np.int32)
    coffs[1:] = ends - np.searchsorted(cpos, ends)          # positions once the commas are gone
    text = flat[~comma]
    if child == pa.string():
        values = pa.Array.from_buffers(pa.string(), len(ends),
                                       [None, pa.py_buffer(coffs), pa.py_buffer(text)])
    else:
        # decimal numbers (the C side writes extension types so): digit x 10^(places after it)
        # summed per value (Array.cast would import pyarrow.compute, ~40 ms)
        elen = np.diff(coffs)
        elem = np.repeat(np.arange(len(elen)), elen)
        after = np.repeat(coffs[1:], elen) - 1 - np.arange(len(text))
        nums = np.bincount(elem, weights=(text.astype(np.int64) - 48) * 10 ** after,
                           minlength=len(elen)).astype(np.uint16)
        values = _num(nums, typ=child)
    loffs = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(per_row, out=loffs[1:])
    bitmap, nulls = _bitmap(valid, n)
    return pa.Array.from_buffers(pa.list_(child), n, [bitmap, pa.py_buffer(loffs)],
                                 null_count=nulls, children=[values])


def _strings(mat: np.ndarray, lens: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """Rows of a 2-D uint8 array, the first lens[i] bytes of row i, as an Arrow string array
    built from its buffers (offsets + bytes + validity bitmap: no Python objects, which would
    make pyarrow import pandas); null where valid is False."""
    n = len(lens)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lens, out=offsets[1:])
    data = mat[np.arange(mat.shape[1]) < lens[:, None]] if n else np.zeros(0, np.uint8)
    bitmap, nulls = _bitmap(valid, n)
    return pa.Array.from_buffers(pa.string(), n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)],
                                 null_count=nulls)


def _text(col: np.ndarray, valid: np.ndarray | None = None, nonempty: bool = False) -> pa.Array:
    """Fixed-width NUL-terminated bytes column -> Arrow string (the C side wrote valid UTF-8 and
    no NUL inside a value): the bytes before each row's first NUL; null where not valid, and
    where empty if nonempty."""
    mat, lens = _rows(col)
    if nonempty:
        valid = (lens > 0) if valid is None else (np.asarray(valid, dtype=bool) & (lens > 0))
    return _strings(mat, lens, valid)


_HEXDIGITS = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def _hex(v: np.ndarray, valid: np.ndarray) -> pa.Array:
    """0xhhhh text of 16-bit values (as tshark writes versions and cipher suites); null where
    not valid."""
    v = np.asarray(v).astype(np.uint32)
    mat = np.empty((len(v), 6), dtype=np.uint8)
    mat[:, 0], mat[:, 1] = ord("0"), ord("x")
    for k in range(4):
        mat[:, 2 + k] = _HEXDIGITS[(v >> (12 - 4 * k)) & 15]
    return _strings(mat, np.full(len(v), 6), np.asarray(valid, dtype=bool))


def _choice(names: tuple, codes: np.ndarray) -> pa.Array:
    """names[code] per row (None entries give nulls), from buffers."""
    w = max(len(x or "") for x in names) + 1
    table = np.array([(x or "").encode() for x in names], dtype=f"S{w}")
    valid = np.array([x is not None for x in names])[codes]
    return _text(table[codes], valid)


def to_table(raw: np.ndarray) -> pa.Table:
    """TlsRecord rows (uint8 buffer from TlsTable.take) -> Arrow table of SCHEMA (columnar,
    no per-record Python)."""
    from webtap._ext.communityid import community_id

    r = np.frombuffer(raw, dtype=TLS_RECORD_DTYPE) if raw.dtype != TLS_RECORD_DTYPE else raw
    if len(r) == 0:
        return empty_table()
    ch, sh, enc = r["ch"], r["sh"], r["enc"]
    has_ch = r["has_ch"].astype(bool)
    has_sh = r["has_sh"].astype(bool)
    ch_ok = has_ch & (ch["status"] == 0)
    sh_ok = has_sh & (sh["status"] == 0)
    paired = r["reason"] == 0
    ts = pa.timestamp("ns", tz="UTC")
    ch_ts = _num(ch["ts_ns"], has_ch, ts)
    sh_ts = _num(sh["ts_ns"], has_sh, ts)
    ht = _num(np.where(paired, sh["ts_ns"].astype(np.int64) - ch["ts_ns"].astype(np.int64), 0),
              paired, pa.duration("ns"))

    def opt_text(col, ok):
        return _text(col, ok)

    def nonempty(col, ok):
        return _text(col, ok, nonempty=True)

    legacy = _hex(ch["legacy_version"], ch_ok)
    # no supported_versions extension: the legacy version is the one the client offers
    vmat, vlens = _rows(ch["versions"])
    vmat, vlens = vmat.copy(), vlens.copy()
    nov = vlens == 0
    lv = ch["legacy_version"].astype(np.uint32)[nov]
    vmat[nov, 0], vmat[nov, 1] = ord("0"), ord("x")
    for k in range(4):
        vmat[nov, 2 + k] = _HEXDIGITS[(lv >> (12 - 4 * k)) & 15]
    vlens[nov] = 6

    def lst(col, ok, child=pa.string()):
        return _list(*_rows(col), ok, child)
    reason_codes = r["reason"].astype(np.int64)
    unmatched = _choice(_REASONS + ("unknown",), np.minimum(reason_codes, len(_REASONS)))
    vlan = r["vlan"]
    cols = {
        "client_ip": _text(r["client_ip_text"]),
        "client_port": _num(r["client_port"]),
        "server_ip": _text(r["server_ip_text"]),
        "server_port": _num(r["server_port"]),
        "transport": _choice(("tcp", "quic"), r["transport"].astype(np.int64)),
        "client_hello_ts": ch_ts,
        "server_hello_ts": sh_ts,
        "handshake_time": ht,
        "sni": nonempty(ch["sni"], ch_ok),
        "alpn": lst(ch["alpn"], ch_ok),
        "client_versions": _list(vmat, vlens, ch_ok),
        "server_version": _hex(sh["version"], sh_ok),
        "cipher": _hex(sh["cipher"], sh_ok),
        "ja3": nonempty(ch["ja3"], ch_ok),
        "ja3s": nonempty(sh["ja3s"], sh_ok),
        "ja4": nonempty(ch["ja4"], ch_ok),
        "ech": _bool((ch["flags"] & TLSF_ECH) != 0, ch_ok),
        "ch_segments": _num(ch["segments"], has_ch),
        "matched": _bool(paired),
        "unmatched_reason": unmatched,
        "request_frame": _num(ch["pkt"] + 1, has_ch),
        "response_frame": _num(sh["pkt"] + 1, has_sh),
        "hello_retry_request": _bool((sh["flags"] & TLSF_HRR) != 0, sh_ok),
        "client_legacy_version": legacy,
        "ciphers": lst(ch["ciphers"], ch_ok),
        "extensions": lst(ch["exts"], ch_ok, pa.uint16()),
        "supported_groups": lst(ch["groups"], ch_ok),
        "key_share_groups": lst(ch["key_share"], ch_ok),
        "server_alpn": nonempty(sh["alpn"], sh_ok),
        "server_group": _hex(sh["group"], sh_ok & (sh["group"] != 0)),
        "server_extensions": lst(sh["exts"], sh_ok, pa.uint16()),
        "ch_length": _num(ch["hs_len"], has_ch),
        "ip_version": _num(r["ip_version"]),
        "vlan": _num(vlan, vlan != 0xFFFF),
        "text_clipped": _bool((ch["clipped"] | sh["clipped"]) != 0),
        "encap": encap_text(enc["encap"]),
        "outer_src_ip": opt_text(r["outer_src_text"], enc["outer_ip_version"] != 0),
        "outer_dst_ip": opt_text(r["outer_dst_text"], enc["outer_ip_version"] != 0),
        "tunnel_id": _num(enc["tunnel_id"], enc["encap"] != 0),
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
        from webtap._ext.tls import TlsTable, sizeof_tls_record

        if sizeof_tls_record() != TLS_RECORD_DTYPE.itemsize:
            raise RuntimeError("TLS_RECORD_DTYPE does not match ext/tls.pyx TlsRecord")
        self.table = TlsTable(gc_timeout=gc_timeout, max_pending=max_pending,
                              max_reassembly=max_reassembly)
        self._raw: list = []
        self._nraw = 0

    #: records gathered (as raw C rows) before they are converted to Arrow: the conversion has a
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
        raw = self.table.take()
        if raw.size:
            self._raw.append(raw)
            self._nraw += raw.size // TLS_RECORD_DTYPE.itemsize
        if self._nraw >= self.CONVERT_EVERY:
            return self._take()
        return None

    def finish(self) -> pa.Table | None:
        self.table.flush()
        raw = self.table.take()
        if raw.size:
            self._raw.append(raw)
        return self._take()

    def _take(self):
        if not self._raw:
            return None
        raw = np.concatenate(self._raw)
        self._raw, self._nraw = [], 0
        return to_table(raw)

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

    def __init__(self, run, out: str | None, gc_timeout: float = 60.0, max_pending: int = 1 << 15,
                 max_reassembly: int = 1024, exchanges_out: str | None = None):
        self.o = open_output(run, out) if out is not None else None
        self.run = TlsRun(gc_timeout=gc_timeout, max_pending=max_pending,
                          max_reassembly=max_reassembly)
        self.x = self.xo = self.xtab = None
        if exchanges_out is not None:
            # (imported here: httpanalyzer.tls_exchange imports this module)
            from httpanalyzer.tls_exchange import ExchangeRun, open_exchange_output

            self.xo = open_exchange_output(run, exchanges_out)
            self.x = ExchangeRun(gc_timeout=gc_timeout, max_pending=max_pending)
        self.tables: list = []
        self.packets = 0                   # packets fed (for `interrupted ... after N packets`)
        run.on_interrupt(self._keep)       # SIGINT/SIGTERM: the handshakes so far, as partial

    def _keep(self) -> None:
        """The run was interrupted: the handshakes so far (the waiting hellos flushed as
        unmatched, as the HTTP records' are) into the output, which clikit keeps as
        OUT.partial.EXT (the exchanges so far likewise)."""
        if (self.o is None or self.o.done) and (self.xo is None or self.xo.done):
            return
        t = self.run.finish()
        if t is not None:
            self.tables.append(t)
        tab = sort_table(pa.concat_tables(self.tables)) if self.tables else None
        if self.o is not None and not self.o.done and tab is not None and tab.num_rows:
            self.o.write(tab)
        if self.xo is not None and not self.xo.done:
            from httpanalyzer.tls_exchange import exchange_table

            xt = exchange_table(self.x.finish(), tab)
            if xt.num_rows:
                self.xo.write(xt)

    @property
    def tls_watch(self):
        """Read by httpanalyzer.stream: the HTTP pass's dissector then finds this stage's
        messages in the same walk over the packets."""
        return self.run.watch

    @property
    def tcp_events(self) -> int:
        """Read by httpanalyzer.stream: the walk also hands over its TCP events with payload or
        FIN/RST (2: the exchange stage's input, --exchanges-out); 0: none."""
        return 2 if self.x is not None else 0

    def __call__(self, packets, data, mb=None) -> None:
        """The HTTP pass's packet hook (httpanalyzer.stream): mb, the batch's MessageBatch."""
        self.feed(packets, data, getattr(mb, "tls", None), getattr(mb, "tcp_events", None))

    def feed(self, packets, data, msgs=None, events=None) -> None:
        self.packets += len(packets)
        if self.x is not None and events is None:
            # no walk handed this batch over (feeder consumers, --dask, `httpanalyzer tls`):
            # one walk here for both stages
            from webtap._ext.dissect import dissect_batch

            _, _, msgs, events = dissect_batch(packets, np.asarray(data), None, self.run.watch, 2)
        t = self.run.feed(packets, data, msgs)
        if t is not None:
            self.tables.append(t)
        if self.x is not None:
            self.x.feed(events, data)

    def commit(self) -> None:
        t = self.run.finish()
        if t is not None:
            self.tables.append(t)
        tab = sort_table(pa.concat_tables(self.tables) if self.tables else empty_table())
        if self.o is not None:
            self.o.write(tab)
            self.o.commit()
        if self.xo is not None:
            from httpanalyzer.tls_exchange import exchange_table

            self.xtab = exchange_table(self.x.finish(), tab)
            self.xo.write(self.xtab)
            self.xo.commit()
        return tab

    def counters(self) -> dict:
        c = self.run.counters()
        if self.x is not None:
            c.update({f"exchange_{k}": v for k, v in self.x.counters().items()})
        return c


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
    ap.add_argument("--exchanges-out", metavar="OUT",
                    help="also write the request/response exchanges inside TLS over TCP (one row "
                         "per request's first packet paired by ACK = SEQ, docs/TLS.md "
                         "\"Exchanges\") to OUT (.csv, .parquet, .txt, .jsonl, .log), from the "
                         "same walk over the packets")
    ap.add_argument("--summary", action="store_true", help="print the counters to stderr")
    ap.add_argument("--plots", metavar="DIR",
                    help="write the figures (handshake-time CCDF TCP vs QUIC, versions, ALPN, "
                         "top SNIs, ECH share, ClientHello segments; with --exchanges-out the "
                         "exchanges' response-time CCDF per SNI and per ALPN) as PNG to DIR")
    clikit.add_common(ap)
    clikit.files(ap, inputs=("traces",), outputs={"output": "-", "exchanges_out": None})
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
                  max_reassembly=a.max_reassembly, exchanges_out=a.exchanges_out)
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

        figs = tls_figures(tab.to_pandas())
        if one.xo is not None:
            from httpanalyzer.tls_plot import exchange_figures

            figs.update(exchange_figures(one.xtab.to_pandas()))
        for p in save_figures(figs, a.plots):
            run.note(f"wrote {p}")
    if a.summary:
        for k, v in one.counters().items():
            print(f"{k:28s} {v}", file=sys.stderr)
    return 0


def cli(argv=None) -> int:
    """`httpanalyzer tls TRACE... [-f BPF] [-o OUT.{csv,parquet,txt}]`"""
    from webtap import clikit

    return clikit.main("httpanalyzer tls", build_parser(), handle, list(argv or []))
