"""The transaction-record schema: every column's name, type and unit, in one place.

A record is one HTTP transaction seen through the first packet of its request and the first
packet of its response (or only one of them: unmatched records are output too). The pairing
table (ext/pair/pairing.pyx) emits records as a TxnRecord struct array (numeric part, mirrored by
RECORD_DTYPE) plus one Arrow-layout string column per text field; `to_record_batch` turns that
into a `pyarrow.RecordBatch` with one pyarrow call per column, and `to_pandas`
(webtap.records.httppandas) gives the DataFrame dtypes. The writers (CSV, Parquet, the paper's line format) all read these batches.

Units: `*_ts` are capture times in ns since the Unix epoch (UTC); `response_time` is
response_ts - request_ts in ns (negative when the response was captured first); CSV and the line
format print both in seconds with 9 decimals.
"""
from __future__ import annotations

import re

import numpy as np
import pyarrow as pa

from webtap import records as kinds
from webtap._ext.communityid import community_id
from webtap.records.columns import Codes, boolean, num, strings
from webtap.records.messageview import encap_text
from webtap.writers import empty_batch_of

#: ext/pair/pairing.pxd TxnRecord, field for field (tests assert itemsize == sizeof(TxnRecord)).
RECORD_DTYPE = np.dtype(
    [
        ("request_ts_ns", "<i8"),
        ("response_ts_ns", "<i8"),
        ("request_pkt_index", "<u8"),
        ("response_pkt_index", "<u8"),
        ("client_ip", "u1", (16,)),
        ("server_ip", "u1", (16,)),
        ("request_ack", "<u4"),
        ("response_seq", "<u4"),
        ("client_port", "<u2"),
        ("server_port", "<u2"),
        ("status", "<u2"),
        ("vlan", "<u2"),
        ("msg_flags", "<u2"),
        ("ip_version", "u1"),
        ("method_id", "u1"),
        ("outcome", "u1"),
        ("unmatched_reason", "u1"),
        ("rflags", "<u2"),
        ("request_trace", "<u2"),
        ("response_trace", "<u2"),
        # encapsulation, added at the end (ext/walk/l34.pxd; docs/ACCURACY.md "Encapsulations")
        ("encap", "<u8"),
        ("outer_src", "u1", (16,)),
        ("outer_dst", "u1", (16,)),
        ("tunnel_id", "<u4"),
        ("outer_ip_version", "u1"),
        # HTTP version, added at the end: major * 10 + minor, 0 unknown (column http_version)
        ("http_version", "u1"),
    ],
    align=True,
)

# ext/pair/pairing.pxd RecOutcome / UnmatchedReason / RecFlags
OUTCOMES = ("paired", "request_only", "response_only")
UNMATCHED_REASONS = (None, "gc", "end", "cap", "key_limit", "clock_reset")
RF_URI_TRUNCATED = 1
RF_REQUEST_REPEAT = 2
RF_RESPONSE_REPEAT = 4
RF_INTERIM = 8
RF_AFTER_INTERIM = 16
RF_TEXT_CLIPPED = 32
RF_NO_HOST = 64
RF_OUT_OF_ORDER = 128

_TS = pa.timestamp("ns", tz="UTC")

#: Column name -> (Arrow type, meaning). The first 17 are the issue's contract, in its order.
COLUMNS: dict[str, tuple[pa.DataType, str]] = {
    "client_ip": (pa.string(), "request source address (IPv4 dotted, IPv6 RFC 5952)"),
    "client_port": (pa.uint16(), "client TCP port"),
    "server_ip": (pa.string(), "request destination / response source address"),
    "server_port": (pa.uint16(), "server TCP port"),
    "request_ts": (_TS, "capture time of the request's first packet (ns, UTC); null if none"),
    "response_ts": (_TS, "capture time of the response's first packet (ns, UTC); null if none"),
    "response_time": (pa.duration("ns"), "response_ts - request_ts (ns); null unless paired"),
    "reason": (pa.string(), "reason phrase of the status line ('' if empty); null if no response"),
    "status": (pa.uint16(), "status code; null if no response"),
    "method": (pa.string(), "request method token as sent; null if no request"),
    "user_agent": (pa.string(), "User-Agent value; null if absent or no request"),
    "host": (pa.string(), "Host value; null if absent or no request"),
    "uri": (pa.string(), "request-target as sent, cut at the packet's end; null if no request"),
    "request_ack": (pa.uint32(), "TCP ACK of the request packet (the pairing key); null if none"),
    "response_seq": (pa.uint32(), "TCP SEQ of the response packet; null if none"),
    "matched": (pa.bool_(), "request and response both present"),
    "uri_truncated": (pa.bool_(), "the URI continued past the first packet (or was clipped)"),
    # --- more columns
    "outcome": (pa.string(), "paired | request_only | response_only"),
    "unmatched_reason": (pa.string(), "gc | end | cap | key_limit | clock_reset; null if paired"),
    "interim": (pa.bool_(), "the response is an interim 1xx (not 101); the request waited on"),
    "after_interim": (pa.bool_(), "final response paired after a 1xx of the same request"),
    "request_repeat": (pa.bool_(), "the request repeated one still waiting (retransmission)"),
    "response_repeat": (pa.bool_(), "the response repeated one still waiting (retransmission)"),
    "out_of_order": (pa.bool_(), "the response was captured before its request"),
    "text_clipped": (pa.bool_(), "some text was shortened to the table's per-field bound"),
    "ip_version": (pa.uint8(), "4 or 6"),
    "vlan": (pa.uint16(), "outer 802.1Q VLAN id; null when untagged"),
    "request_frame": (pa.uint64(), "frame number of the request packet in its trace, 1-based as"
                                   " tshark's frame.number and Wireshark's Go to Packet"),
    "response_frame": (pa.uint64(), "frame number of the response packet in its trace (1-based)"),
    "request_trace": (pa.uint16(), "position of the request's trace among the inputs (0-based)"),
    "response_trace": (pa.uint16(), "position of the response's trace among the inputs"),
    "community_id": (pa.string(), "Community ID v1 of the TCP flow (seed 0), '1:' + base64 SHA-1;"
                                  " joins records with Zeek, Suricata, Arkime, ... (computed in C)"),
    # encapsulation: of the request's first packet (the response's when there is no request)
    "encap": (pa.string(), "tunnel layers crossed to reach the inner IP packet, outermost first,"
                           " comma-separated ('vxlan,eth', 'gre,erspan,eth', '6in4'; names as"
                           " webtap dissect's); null for a packet without encapsulation"),
    "outer_src_ip": (pa.string(), "source address of the outermost IP header that carries the"
                                  " tunnel (the request's packet; the response's if no request);"
                                  " null when no IP header carries one (plain, PPPoE, MPLS)"),
    "outer_dst_ip": (pa.string(), "destination address of that outer IP header; null likewise"),
    "tunnel_id": (pa.uint32(), "VNI (VXLAN, Geneve), GRE key, ERSPAN session, GTP-U TEID, PPPoE"
                               " session or bottom MPLS label of the outermost such layer (0"
                               " when that layer has none); null without encapsulation"),
    # HTTP version (issue 30), added at the end
    "http_version": (pa.string(), "HTTP version of the request line ('1.1', '1.0': the digits after"
                                  " 'HTTP/', as Zeek's http.log); of the status line when the record"
                                  " has no request; null when the token is not HTTP/d.d or the"
                                  " request line did not end in its packet"),
}
SCHEMA = pa.schema([pa.field(n, t) for n, (t, _) in COLUMNS.items()])

_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")     # RFC 9110 field-name (token)


def header_column_names(headers) -> list[str]:
    """The columns `--headers NAME,...` adds, in order: request_<name> and response_<name> per
    header (lower case, '-' -> '_'), then request_headers_incomplete and
    response_headers_incomplete. Raises ValueError for a name that is not a field name, a
    repeated name, or one whose column would collide with another column."""
    names: list[str] = []
    for h in headers:
        if not isinstance(h, str) or not _TOKEN.match(h):
            raise ValueError(f"not a header field name: {h!r}")
        base = h.lower().replace("-", "_")
        for side in ("request", "response"):
            names.append(f"{side}_{base}")
    names += ["request_headers_incomplete", "response_headers_incomplete"]
    seen = set(COLUMNS)
    for n in names:
        if n in seen:
            raise ValueError(f"--headers: column {n!r} would appear twice (name repeated, or it "
                             "clashes with a record column)")
        seen.add(n)
    return names


def schema_for(headers=()) -> pa.Schema:
    """SCHEMA plus the chosen headers' columns (header_column_names), when there are any:
    values are strings, '' when the header is absent from the message's first packet, null when
    the record has no such message; the two flags are booleans (null likewise): the header
    block went on past the first packet, so a header may be in a later packet."""
    if not headers:
        return SCHEMA
    names = header_column_names(headers)
    fields = [pa.field(n, pa.string()) for n in names[:-2]]
    fields += [pa.field(n, pa.bool_()) for n in names[-2:]]
    return pa.schema(list(SCHEMA) + fields)

CONTRACT_COLUMNS = list(COLUMNS)[:17]
CATEGORICAL = ("method", "reason", "outcome", "unmatched_reason")

_NO_TS = np.iinfo(np.int64).min
_NO_IDX = np.iinfo(np.uint64).max


def _strings(n: int, parts) -> pa.Array:
    """A text column from PairingTable.take()'s (offsets, bytes, valid bytes)."""
    offsets, data, valid = parts
    return strings(offsets, data, valid.astype(bool))


_OUTCOME_CODES = Codes(OUTCOMES)
_REASON_CODES = Codes(UNMATCHED_REASONS)     # code 0 (paired) is always null
# TxnRecord.http_version (major * 10 + minor) -> "major.minor"; code 0 (unknown) is null
_VERSION_CODES = Codes([None] + [f"{c // 10}.{c % 10}" for c in range(1, 256)])


def to_record_batch(raw_records: np.ndarray, strings: dict, headers=()) -> pa.RecordBatch:
    """Arrow batch from PairingTable.take() output: one pyarrow call per column. headers: the
    chosen header names the table was built with (their columns come after SCHEMA's)."""
    r = raw_records.view(RECORD_DTYPE)
    n = len(r)
    has_req = r["request_ts_ns"] != _NO_TS
    has_resp = r["response_ts_ns"] != _NO_TS
    paired = r["outcome"] == 0
    rf = r["rflags"]
    cols = {
        "client_ip": _strings(n, strings["client_ip"]),
        "client_port": num(r["client_port"], pa.uint16()),
        "server_ip": _strings(n, strings["server_ip"]),
        "server_port": num(r["server_port"], pa.uint16()),
        "request_ts": num(r["request_ts_ns"], _TS, has_req),
        "response_ts": num(r["response_ts_ns"], _TS, has_resp),
        "response_time": num(
            np.where(paired, r["response_ts_ns"], 0) - np.where(paired, r["request_ts_ns"], 0),
            pa.duration("ns"), paired),
        "reason": _strings(n, strings["reason"]),
        "status": num(r["status"], pa.uint16(), has_resp),
        "method": _strings(n, strings["method"]),
        "user_agent": _strings(n, strings["user_agent"]),
        "host": _strings(n, strings["host"]),
        "uri": _strings(n, strings["uri"]),
        "request_ack": num(r["request_ack"], pa.uint32(), has_req),
        "response_seq": num(r["response_seq"], pa.uint32(), has_resp),
        "matched": boolean(paired),
        "uri_truncated": boolean((rf & RF_URI_TRUNCATED) != 0),
        "outcome": _OUTCOME_CODES.column(r["outcome"]),
        "unmatched_reason": _REASON_CODES.column(r["unmatched_reason"], ~paired),
        "interim": boolean((rf & RF_INTERIM) != 0),
        "after_interim": boolean((rf & RF_AFTER_INTERIM) != 0),
        "request_repeat": boolean((rf & RF_REQUEST_REPEAT) != 0),
        "response_repeat": boolean((rf & RF_RESPONSE_REPEAT) != 0),
        "out_of_order": boolean((rf & RF_OUT_OF_ORDER) != 0),
        "text_clipped": boolean((rf & RF_TEXT_CLIPPED) != 0),
        "ip_version": num(r["ip_version"], pa.uint8()),
        "vlan": num(r["vlan"], pa.uint16(), r["vlan"] != 0xFFFF),
        # frame numbers are 1-based (tshark's), the C records' packet indices 0-based
        "request_frame": num(r["request_pkt_index"] + 1, pa.uint64(), r["request_pkt_index"] != _NO_IDX),
        "response_frame": num(r["response_pkt_index"] + 1, pa.uint64(), r["response_pkt_index"] != _NO_IDX),
        "request_trace": num(r["request_trace"], pa.uint16(), has_req),
        "response_trace": num(r["response_trace"], pa.uint16(), has_resp),
        "community_id": community_id(r["client_ip"], r["client_port"], r["server_ip"],
                                     r["server_port"], r["ip_version"], 6),
        "encap": encap_text(r["encap"]),
        "outer_src_ip": _strings(n, strings["outer_src_ip"]),
        "outer_dst_ip": _strings(n, strings["outer_dst_ip"]),
        "tunnel_id": num(r["tunnel_id"], pa.uint32(), r["encap"] != 0),
        "http_version": _VERSION_CODES.column(r["http_version"], r["http_version"] != 0),
    }
    if headers:
        arrays = list(cols.values())
        for k in range(len(headers)):
            arrays.append(_strings(n, strings[("request", k)]))
            arrays.append(_strings(n, strings[("response", k)]))
        xf = strings["headers_incomplete"]
        arrays.append(boolean((xf & 1) != 0, has_req))
        arrays.append(boolean((xf & 2) != 0, has_resp))
        return pa.RecordBatch.from_arrays(arrays, schema=schema_for(headers))
    return pa.RecordBatch.from_arrays(list(cols.values()), schema=SCHEMA)


def empty_batch(headers=()) -> pa.RecordBatch:
    return empty_batch_of(schema_for(headers))


def to_pandas(table):
    """The records as a DataFrame: webtap.records.httppandas.to_pandas (pandas at its top),
    reached through the record-kind table so that this module loads no pandas."""
    return kinds.httppandas.to_pandas(table)


def sort_records(batches) -> "pa.Table":
    """The records of `batches` as one table in time order (`httpanalyzer --sort`): by request
    time (the response time for a record without a request), then the first frame, stable, so
    equal keys keep the order in which they completed (issue 30)."""

    batches = [b for b in batches if b.num_rows]
    if not batches:
        return None
    t = pa.Table.from_batches(batches).combine_chunks()

    def ns(name):
        a = t.column(name).chunk(0) if t.column(name).num_chunks else None
        if a is None:
            return np.zeros(t.num_rows, np.int64), np.zeros(t.num_rows, bool)
        v = np.frombuffer(a.buffers()[1], dtype=np.int64)[a.offset:a.offset + len(a)]
        bm = a.buffers()[0]
        ok = np.ones(len(a), bool) if bm is None or a.null_count == 0 else \
            np.unpackbits(np.frombuffer(bm, np.uint8), bitorder="little")[a.offset:a.offset + len(a)].astype(bool)
        return v, ok

    (rq, rq_ok), (rs, rs_ok) = ns("request_ts"), ns("response_ts")
    (fq, fq_ok), (fs, _) = ns("request_frame"), ns("response_frame")
    key = np.where(rq_ok, rq, rs)
    frame = np.where(fq_ok, fq, fs)
    order = np.lexsort((np.arange(t.num_rows), frame, key))
    return t.take(pa.array(order))
