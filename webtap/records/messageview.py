"""The views of a message batch (webtap.dissect.MessageBatch) and of the encapsulation codes as
Arrow arrays: pyarrow at the top, loaded through the record-kind table (webtap.records) when a
view is first asked for, so that a run that only pairs the messages never loads it here."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from webtap._ext import dissect as _ext
from webtap._ext.textout import seconds_text
from webtap.records.message import ENCAP_NAMES, MESSAGE_DTYPE, METHOD_NAMES, MSG_REQUEST, SPAN_FIELDS

__all__ = ["column", "to_arrow", "encap_text", "LINE_COLUMNS", "line_view", "zeek_view"]

#: the columns of a message line (`webtap dissect`: stdout and .txt)
LINE_COLUMNS = ("ts_ns", "kind", "src_ip", "src_port", "dst_ip", "dst_port", "vlan", "method_name",
                "status", "reason", "host", "uri", "user_agent")


def column(mb, name: str, errors: str = "replace"):
    """One column as a pyarrow array: a Span field (method, uri, version, host, user_agent,
    reason) as strings, src_ip/dst_ip as text, any other field as a numeric array."""
    if name in SPAN_FIELDS:
        return _ext.span_to_arrow(mb.msgs, mb.data, name, errors)
    if name in ("src_ip", "dst_ip", "outer_src", "outer_dst"):
        return _ext.ip_to_arrow(mb.msgs, name)
    if name == "encap_text":
        return encap_text(mb.msgs["encap"])
    if name not in MESSAGE_DTYPE.names:
        raise KeyError(f"no column {name!r}")
    return pa.array(np.ascontiguousarray(mb.msgs[name]))


def to_arrow(mb, errors: str = "replace"):
    """A pyarrow RecordBatch with one row per message (the columns of to_pandas). Nulls
    follow the records' convention: `vlan` is null when untagged (not 65535), `status` null
    for a request, `method_name` null for a response."""
    m = mb.msgs
    is_req = m["kind"] == MSG_REQUEST
    method_ids = m["method_id"].astype(np.int16)
    names = pa.array(list(METHOD_NAMES[1:]), pa.string())
    method = pa.DictionaryArray.from_arrays(
        pa.array(method_ids - 1, pa.int16(), mask=method_ids < 1), names)
    kind = pa.DictionaryArray.from_arrays(
        pa.array(np.where(is_req, 0, 1).astype(np.int8)), pa.array(["request", "response"]))
    cols = {
        "ts_ns": pa.array(m["ts_ns"]),
        "frame": pa.array(m["pkt_index"] + 1),     # tshark's 1-based frame.number
        "kind": kind,
        "src_ip": column(mb, "src_ip"),
        "src_port": pa.array(m["src_port"]),
        "dst_ip": column(mb, "dst_ip"),
        "dst_port": pa.array(m["dst_port"]),
        "seq": pa.array(m["seq"]),
        "ack": pa.array(m["ack"]),
        "payload_len": pa.array(m["payload_len"]),
        "method_name": method,
    }
    for name in SPAN_FIELDS:
        cols[name] = column(mb, name, errors)
    cols["status"] = pa.array(m["status"], mask=is_req)
    cols["vlan"] = pa.array(m["vlan"], mask=m["vlan"] == 0xFFFF)
    for name in ("flags", "ip_version", "tcp_flags", "ttl", "window", "linktype",
                 "payload_off", "payload_caplen", "pkt_offset"):
        cols[name] = pa.array(np.ascontiguousarray(m[name]))
    return pa.RecordBatch.from_pydict(cols)


def encap_text(encap: np.ndarray):
    """HttpMsg.encap codes as text, one string per message: the layers crossed from the link
    layer in, comma-separated ("vxlan,eth", "gre,erspan,eth", "6in4"); null for a packet without
    encapsulation. One string is built per distinct value (np.unique), not per message; the
    column is laid out with numpy (pa.array would import pandas on its first call)."""
    codes = np.ascontiguousarray(encap, dtype=np.uint64).reshape(-1)
    n = len(codes)
    # the encapsulated rows only: most messages cross none, and a unique/gather over every row
    # was ~1.4 ms per 16,384 records (the pairing's take) against ~0.1 ms over these
    at = np.flatnonzero(codes)
    if not len(at):
        return pa.nulls(n, pa.string())
    uniq, inv = np.unique(codes[at], return_inverse=True)
    inv = inv.reshape(-1)
    texts = []
    for v in uniq.tolist():
        parts = []
        while v:
            c = v & 0xFF
            parts.append(ENCAP_NAMES[c] if 0 < c < len(ENCAP_NAMES) else f"?{c}")
            v >>= 8
        texts.append(",".join(parts).encode())
    width = max(len(t) for t in texts)
    table = np.zeros((len(texts), width), np.uint8)
    for i, t in enumerate(texts):
        table[i, :len(t)] = np.frombuffer(t, np.uint8)
    lens_at = np.array([len(t) for t in texts], np.int32)[inv]
    lens = np.zeros(n, np.int32)
    lens[at] = lens_at
    offs = np.zeros(n + 1, np.int32)
    np.cumsum(lens, out=offs[1:])
    data = table[inv][np.arange(width)[None, :] < lens_at[:, None]]
    valid = codes != 0
    nulls = n - len(at)
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(pa.string(), n, [bitmap, pa.py_buffer(offs), pa.py_buffer(data)],
                                 null_count=nulls)


def line_view(batch):
    """`webtap dissect`'s message line (stdout and .txt) of a to_arrow batch: LINE_COLUMNS, the
    dictionary columns (kind, method) as their text."""
    cols = []
    for n in LINE_COLUMNS:
        c = batch.column(n)
        if pa.types.is_dictionary(c.type):
            c = c.cast(pa.string())
        cols.append(c)
    return pa.RecordBatch.from_arrays(cols, names=list(LINE_COLUMNS))


def zeek_view(batch):
    """`webtap dissect -o x.log`: Zeek's `ts` (time; seconds with 9 decimals, the exact
    nanoseconds) in place of ts_ns, then the other message columns; #path dissect. (An integer
    ts_ns does not fit the 32-bit integers zat reads Zeek's `int` into.)"""
    ts = seconds_text(batch.column("ts_ns"), 9)
    rest = [i for i, n in enumerate(batch.schema.names) if n != "ts_ns"]
    fields = [pa.field("ts", pa.string(), metadata={"zeek_type": "time"})] + [batch.schema.field(i) for i in rest]
    return pa.RecordBatch.from_arrays([ts] + [batch.column(i) for i in rest],
                                      schema=pa.schema(fields, metadata={"zeek_path": "dissect"}))
