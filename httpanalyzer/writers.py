"""httpanalyzer's views of its records for the shared writers (webtap.writers, chosen by the
output's extension in webtap.clikit.OUTPUTS): the paper's line format and CSV.

Line format (Vega et al. 2017), one line per record, fields separated by `|`:
client IP | client port | server IP | server port | request ts | response ts | response time |
reason | status | method | user agent | host | URI
Timestamps and the response time are seconds with 9 decimals (exact, from integer ns). A field
that does not exist for the record (the response of a request-only record, ...) is empty. Text
is printed as captured (decoded as UTF-8, or ISO-8859-1 for bytes that are not UTF-8), escaped
so that every line has exactly 13 fields (webtap.writers: ``\\`` ``|`` CR LF and control
characters); httpanalyzer.lines formats a batch as bytes and reads a file back.

The HTTP run imports this module before its first packet, so it imports no pyarrow (issue 29:
imports at the top, and a header-only run loads no pyarrow): a view works on the batch it is
given (a batch's own class builds the new one), and the record schema comes through the
record-kind table webtap.records when a view first runs.
"""
from __future__ import annotations

from webtap import records as kinds
from webtap._ext.textout import seconds_text

LINE_FIELDS = ("client_ip", "client_port", "server_ip", "server_port", "request_ts", "response_ts",
               "response_time", "reason", "status", "method", "user_agent", "host", "uri")

_SECONDS = ("request_ts", "response_ts", "response_time")


# seconds_text (webtap._ext.textout): exact decimal seconds, 9 decimals, from a timestamp or
# duration (ns) array, written by C; nulls stay null.


def line_view(batch):
    """The 13 fields of the paper's line format, as the record has them: webtap.writers writes
    the times (timestamps, durations in ns) as decimal seconds with 9 decimals, integers as
    decimal text. Chosen headers (--headers: request_<name>, response_<name>, the two
    *_headers_incomplete flags) follow as fields 14 and on, never dropped (issue 30)."""
    base = set(kinds.http.SCHEMA.names)
    extra = [n for n in batch.schema.names if n not in base and n.startswith(("request_", "response_"))]
    return batch.select(list(LINE_FIELDS) + extra)


#: schema metadata that makes webtap.writers.LineWriter start with a line of the field names
HEADER_LINE = {b"webtap.header_line": b"1"}


def fields_views(fields) -> dict:
    """Views for `--fields a,b,...` (tshark's -T fields -e a -e b): the chosen record columns in
    that order, for the line format (with a first line of the names, '|'-separated), CSV (its
    header row) and JSON lines; times as each format writes them."""
    fields = list(fields)

    def lines(batch):
        b = batch.select(fields)
        return b.replace_schema_metadata(HEADER_LINE)

    def csv(batch):
        return csv_view(batch.select(fields))

    def jsonl(batch):
        return batch.select(fields)

    return {"lines": lines, "csv": csv, "jsonl": jsonl}


def csv_view(batch):
    """The batch as CSV shows it: timestamps and response time as seconds (9 decimals). The
    columns keep their names (nullable fields, no metadata), in a batch of the given one's class
    (a RecordBatch, or a Table)."""
    names = batch.schema.names
    arrays = [seconds_text(batch.column(n)) if n in _SECONDS else batch.column(n) for n in names]
    return type(batch).from_arrays(arrays, names=names)


#: views for webtap.clikit outputs (format name -> batch -> batch); the Zeek http.log view
#: (-o OUT.log: httpanalyzer.zeek.http_log_view, columns built from buffers without
#: pyarrow.compute) is added by the HTTP run from the registry's parts, for that output only
VIEWS = {"lines": line_view, "csv": csv_view}

def __getattr__(name):
    if name == "CSV_SCHEMA":       # the schema as CSV shows it (header row of an empty output)
        from webtap.records import http as records

        return csv_view(records.empty_batch()).schema
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["LINE_FIELDS", "VIEWS", "CSV_SCHEMA", "HEADER_LINE", "seconds_text", "line_view",
           "csv_view", "fields_views"]
