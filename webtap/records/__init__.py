"""One home per record kind: its NumPy mirror of the C struct, its Arrow schema (names, types,
units and null conventions) and the function that turns the C stage's buffers into Arrow.

    message   the walk's rows: PacketRef (a captured packet) and HttpMsg (a dissected message);
              messageview / messagepandas a message batch's Arrow / DataFrame views
    http      an HTTP transaction (the pairing table's TxnRecord + text columns; httpcompute
              its pyarrow.compute tallies, httppandas its DataFrame: pandas)
    tls       a TLS/QUIC handshake (the TLS stage's TlsOut + text and list columns)
    urlhit    a URL filter hit (GET or SNI) and the filter's connection timing rows
    columns   the column-builder kit the kinds share (Arrow arrays from numpy buffers)

Frame numbers are tshark's 1-based frame.number in every kind (docs/CLI.md "Frame numbers").
This package imports nothing itself: `webtap.records.message` must stay cheap (numpy only),
the others import pyarrow. A stage that builds records names its kind through the package
(`from webtap import records as kinds`, then `kinds.http`): the kind's module (and pyarrow) is
loaded by `__getattr__` below when the first record is built, so that a run that ends before
its first record (a header-only trace, `--help`) never loads it. This table and the commands'
registries (the cli.py modules) are where the project loads lazily (issue 29).
"""
import importlib

#: the record kinds (and their helpers) a stage may name before any record exists
KINDS = ("message", "messageview", "messagepandas", "http", "httpcompute", "httppandas", "tls",
         "exchange", "urlhit", "columns")


def __getattr__(name):           # PEP 562: `kinds.http` loads webtap.records.http when first used
    if name not in KINDS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return importlib.import_module(f"{__name__}.{name}")
