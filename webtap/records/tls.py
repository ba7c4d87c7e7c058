"""The TLS/QUIC handshake record: one row per ClientHello/ServerHello pair (or a hello alone).

TlsTable (ext/tls/tls.pyx) emits records as TlsOut rows (their numeric part, mirrored by
TLS_OUT_DTYPE) plus Arrow-layout text and list columns built in C (ext/out/colbuild.c);
`to_table` turns them into a table of SCHEMA with one pyarrow call per column. Versions and
cipher suites are written as tshark writes them (0x0304, 0x1301); list columns are Arrow lists
(comma-joined in CSV and text output). Times are ns since the Unix epoch (UTC), durations ns,
frame numbers tshark's (1-based).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from webtap._ext.communityid import community_id
from webtap.dissect import encap_text
from webtap.records import columns
from webtap.writers import empty_batch_of

__all__ = ["TLS_OUT_DTYPE", "FIELDS", "COLUMNS", "SCHEMA", "to_table", "sorted_table", "empty_table"]

#: ext/tls/tls.pyx TlsOut: the numeric part of an emitted record, field for field (a test compares
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
_REASON_CODES = columns.Codes(_REASONS + ("unknown",))
_TRANSPORT = columns.Codes(("tcp", "quic"))


def to_table(raw: np.ndarray, strings: dict) -> pa.Table:
    """TlsTable.take()'s (TlsOut rows as a uint8 buffer, text and list columns) -> Arrow table
    of SCHEMA (columnar, no per-record Python)."""
    r = np.frombuffer(raw, dtype=TLS_OUT_DTYPE) if raw.dtype != TLS_OUT_DTYPE else raw
    if len(r) == 0:
        return empty_table()
    has_ch = r["has_ch"].astype(bool)
    has_sh = r["has_sh"].astype(bool)
    ch_ok = has_ch & (r["ch_status"] == 0)
    sh_ok = has_sh & (r["sh_status"] == 0)
    paired = r["reason"] == 0
    ts = pa.timestamp("ns", tz="UTC")
    ht = columns.num(np.where(paired, r["sh_ts_ns"] - r["ch_ts_ns"], 0), pa.duration("ns"), paired)

    def text(name, valid=None, nonempty=False):
        return columns.strings(*strings[name], valid, nonempty)

    reason_codes = r["reason"].astype(np.int64)
    outer = r["outer_ip_version"] != 0
    vlan = r["vlan"]
    cols = {
        "client_ip": text("client_ip"),
        "client_port": columns.num(r["client_port"]),
        "server_ip": text("server_ip"),
        "server_port": columns.num(r["server_port"]),
        "transport": _TRANSPORT.column(r["transport"].astype(np.int64)),
        "client_hello_ts": columns.num(r["ch_ts_ns"], ts, has_ch),
        "server_hello_ts": columns.num(r["sh_ts_ns"], ts, has_sh),
        "handshake_time": ht,
        "sni": text("sni", ch_ok, nonempty=True),
        "alpn": columns.string_list(*strings["alpn"], ch_ok),
        "client_versions": columns.string_list(*strings["client_versions"], ch_ok),
        "server_version": columns.hex16(r["sh_version"], sh_ok),
        "cipher": columns.hex16(r["sh_cipher"], sh_ok),
        "ja3": text("ja3", ch_ok, nonempty=True),
        "ja3s": text("ja3s", sh_ok, nonempty=True),
        "ja4": text("ja4", ch_ok, nonempty=True),
        "ech": columns.boolean((r["ch_flags"] & TLSF_ECH) != 0, ch_ok),
        "ch_segments": columns.num(r["ch_segments"], valid=has_ch),
        "matched": columns.boolean(paired),
        "unmatched_reason": _REASON_CODES.column(np.minimum(reason_codes, len(_REASONS)),
                                                  reason_codes != 0),
        "request_frame": columns.num(r["ch_pkt"] + 1, valid=has_ch),
        "response_frame": columns.num(r["sh_pkt"] + 1, valid=has_sh),
        "hello_retry_request": columns.boolean((r["sh_flags"] & TLSF_HRR) != 0, sh_ok),
        "client_legacy_version": columns.hex16(r["ch_legacy_version"], ch_ok),
        "ciphers": columns.string_list(*strings["ciphers"], ch_ok),
        "extensions": columns.u16_list(*strings["extensions"], ch_ok),
        "supported_groups": columns.string_list(*strings["supported_groups"], ch_ok),
        "key_share_groups": columns.string_list(*strings["key_share_groups"], ch_ok),
        "server_alpn": text("server_alpn", sh_ok, nonempty=True),
        "server_group": columns.hex16(r["sh_group"], sh_ok & (r["sh_group"] != 0)),
        "server_extensions": columns.u16_list(*strings["server_extensions"], sh_ok),
        "ch_length": columns.num(r["ch_hs_len"], valid=has_ch),
        "ip_version": columns.num(r["ip_version"]),
        "vlan": columns.num(vlan, valid=vlan != 0xFFFF),
        "text_clipped": columns.boolean(r["clipped"] != 0),
        "encap": encap_text(r["encap"]),
        "outer_src_ip": text("outer_src_ip", outer),
        "outer_dst_ip": text("outer_dst_ip", outer),
        "tunnel_id": columns.num(r["tunnel_id"], valid=r["encap"] != 0),
        # the same C function as the HTTP records' column (ext/out/communityid.pyx), per row protocol
        "community_id": community_id(np.ascontiguousarray(r["client_ip"]), r["client_port"],
                                     np.ascontiguousarray(r["server_ip"]), r["server_port"],
                                     r["ip_version"],
                                     np.where(r["transport"] == 1, 17, 6).astype(np.uint8)),
    }
    arrays = [cols[n] if cols[n].type == SCHEMA.field(n).type else cols[n].cast(SCHEMA.field(n).type)
              for n in COLUMNS]
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


def sorted_table(parts) -> pa.Table:
    """One table of SCHEMA from several TlsTable.take() results (in emit order), its rows in the
    order of their first frame (ClientHello, else ServerHello; ties by ServerHello frame, a
    missing one first; stable). The rows are put in order in their numpy buffers, before Arrow:
    an Arrow take of the 40 columns (list columns among them) imported pyarrow.compute and was
    9 % of a `--tls-out` run's perf samples under load; the paired whole-process gain of this
    and the other changes of that round was smaller (the run 0.948x, docs/PERFORMANCE.md).
    One part already in frame order (TlsTable.take(ordered=True), as TlsRun takes them) is made
    into the table as it is: no gather of its columns at all."""
    parts = [(np.frombuffer(r, dtype=TLS_OUT_DTYPE) if r.dtype != TLS_OUT_DTYPE else r, s)
             for r, s in parts if len(r)]
    if not parts:
        return empty_table()
    raw = parts[0][0] if len(parts) == 1 else np.concatenate([r for r, _ in parts])
    has_ch, has_sh = raw["has_ch"] != 0, raw["has_sh"] != 0
    req, resp = raw["ch_pkt"] + 1, raw["sh_pkt"] + 1          # the frames the columns hold
    first, second = np.where(has_ch, req, resp), np.where(has_sh, resp, 0)
    if len(parts) == 1 and _in_order(first, second):
        # already in frame order (TlsTable.take(ordered=True) sorts in C): the stable sort
        # would keep every row where it is
        return to_table(raw, parts[0][1])
    idx = np.lexsort((second, first))
    strings = {name: _take_column([s[name] for _, s in parts], idx) for name in parts[0][1]}
    return to_table(columns.take_rows(raw, idx), strings)   # whole rows, not field by field


def _in_order(first: np.ndarray, second: np.ndarray) -> bool:
    """Whether the rows' (first, second) keys never decrease."""
    if len(first) < 2:
        return True
    df = first[1:] >= first[:-1]
    same = first[1:] == first[:-1]
    return bool(np.all(df) and np.all(~same | (second[1:] >= second[:-1])))


def _take_column(parts, idx: np.ndarray) -> tuple:
    """A text or list column of TlsTable.take() (see there) concatenated over parts, rows idx."""
    if len(parts[0]) == 3:                                      # list<string>
        loffs, _ = _concat_lists([(p[0], len(p[1]) - 1) for p in parts])
        ioffs, data = columns.concat_bytes([(p[1], p[2]) for p in parts])
        lo, which = columns.take_lists(loffs, idx)
        io, body = columns.gather_bytes(ioffs, data, which)
        return lo.astype(np.int32), io.astype(np.int32), body
    if parts[0][1].dtype == np.uint16:                          # list<uint16>
        loffs, _ = _concat_lists([(p[0], len(p[1])) for p in parts])
        lo, which = columns.take_lists(loffs, idx)
        return lo.astype(np.int32), np.concatenate([p[1] for p in parts])[which]
    offs, data = columns.concat_bytes(parts)                    # text
    o, body = columns.gather_bytes(offs, data, idx)
    return o.astype(np.int32), body


def _concat_lists(parts) -> tuple[np.ndarray, int]:
    """(int64 list offsets, item count) of list columns given as (list offsets, their items)."""
    base, out = 0, [np.zeros(1, np.int64)]
    for lo, nitems in parts:
        out.append(np.asarray(lo[1:], np.int64) + base)
        base += int(nitems)
    return np.concatenate(out), base


def empty_table() -> pa.Table:
    """A table of SCHEMA without rows (webtap.writers.empty_batch_of: not SCHEMA.empty_table(),
    whose list columns need pyarrow's pandas shim on some versions)."""
    return pa.Table.from_batches([empty_batch_of(SCHEMA)])
