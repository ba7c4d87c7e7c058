"""One home per record kind: its NumPy mirror of the C struct, its Arrow schema (names, types,
units and null conventions) and the function that turns the C stage's buffers into Arrow.

    message   the walk's rows: PacketRef (a captured packet) and HttpMsg (a dissected message)
    http      an HTTP transaction (the pairing table's TxnRecord + text columns)
    tls       a TLS/QUIC handshake (the TLS stage's TlsOut + text and list columns)
    urlhit    a URL filter hit (GET or SNI) and the filter's connection timing rows
    columns   the column-builder kit the kinds share (Arrow arrays from numpy buffers)

Frame numbers are tshark's 1-based frame.number in every kind (docs/CLI.md "Frame numbers").
This package imports nothing itself: `webtap.records.message` must stay cheap (numpy only),
the others import pyarrow.
"""
