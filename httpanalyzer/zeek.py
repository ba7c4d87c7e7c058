"""The records as Zeek's http.log (the "zeek" view of httpanalyzer.writers.VIEWS; formatted by
webtap.zeeklog, `-o OUT.log`).

Zeek's http.log columns come first, in Zeek's order and with Zeek's types (Zeek 6,
base/protocols/http/main.zeek); a column webtap has no value for is unset (``-``):

======================  =====================================================================
Zeek column             webtap
======================  =====================================================================
ts                      request_ts (response_ts for a response-only record), 6 decimals
uid                     unset (Zeek's connection uid; join on community_id instead)
id.orig_h / id.orig_p   client_ip / client_port
id.resp_h / id.resp_p   server_ip / server_port
trans_depth             unset (webtap does not follow the connection)
method, host, uri       method, host, uri
referrer                request_referer when ``--headers Referer`` chose it (unset if absent)
version                 unset
user_agent              user_agent
origin                  request_origin when ``--headers Origin`` chose it (unset if absent)
status_code/status_msg  status / reason
the others              unset (bodies, files, MIME sniffing, credentials: not in first packets)
======================  =====================================================================

Then webtap's own columns with their record names and Zeek types: request_ts and response_ts
(``time``, 9 decimals: exact), response_time (``interval``), community_id, the flags, the other
chosen headers, ... A view, not a writer: the column choice is built with pyarrow (no Python per
record).
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from webtap.arrowtext import seconds_text

__all__ = ["HTTP_FIELDS", "http_log_view"]

#: Zeek's http.log columns and types
HTTP_FIELDS = (
    ("ts", "time"), ("uid", "string"), ("id.orig_h", "addr"), ("id.orig_p", "port"),
    ("id.resp_h", "addr"), ("id.resp_p", "port"), ("trans_depth", "count"),
    ("method", "string"), ("host", "string"), ("uri", "string"), ("referrer", "string"),
    ("version", "string"), ("user_agent", "string"), ("origin", "string"),
    ("request_body_len", "count"), ("response_body_len", "count"), ("status_code", "count"),
    ("status_msg", "string"), ("info_code", "count"), ("info_msg", "string"),
    ("tags", "set[enum]"), ("username", "string"), ("password", "string"),
    ("proxied", "set[string]"), ("orig_fuids", "vector[string]"),
    ("orig_filenames", "vector[string]"), ("orig_mime_types", "vector[string]"),
    ("resp_fuids", "vector[string]"), ("resp_filenames", "vector[string]"),
    ("resp_mime_types", "vector[string]"),
)

#: Zeek column -> record column (ts is computed)
FROM_RECORD = {"id.orig_h": "client_ip", "id.orig_p": "client_port", "id.resp_h": "server_ip",
               "id.resp_p": "server_port", "method": "method", "host": "host", "uri": "uri",
               "referrer": "request_referer", "user_agent": "user_agent",
               "origin": "request_origin", "status_code": "status", "status_msg": "reason"}
_UNSET_IF_EMPTY = ("referrer", "origin")          # a chosen header's '' (absent): Zeek leaves unset


def http_log_view(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Zeek's http.log columns, then the record's other columns."""
    n = batch.num_rows
    names = set(batch.schema.names)
    arrays, fields = [], []
    for zname, ztype in HTTP_FIELDS:
        if zname == "ts":
            ts = pc.coalesce(batch.column("request_ts"), batch.column("response_ts"))
            col = seconds_text(ts, 6)
        elif FROM_RECORD.get(zname) in names:
            col = batch.column(FROM_RECORD[zname])
            if zname in _UNSET_IF_EMPTY:
                col = pc.if_else(pc.equal(col, ""), pa.scalar(None, col.type), col)
        else:
            col = pa.nulls(n, pa.string())
        arrays.append(col)
        fields.append(pa.field(zname, col.type, metadata={"zeek_type": ztype}))
    used = set(FROM_RECORD.values())
    for f in batch.schema:
        if f.name not in used:
            arrays.append(batch.column(f.name))
            fields.append(f)
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields, metadata={"zeek_path": "http"}))
