"""Request/response exchanges inside TLS over TCP (issue 33): the paper's first-packet rule
(the request's first packet carries the ACK that the response's first packet carries as its
SEQ) applied to encrypted traffic, without keys. The C stage (ext/pair/exchange.pyx) is run by
the walk itself, segment by segment (one walk with the HTTP and TLS stages); this module turns its fixed-width records
into Arrow columns (schema: webtap.records.exchange) and joins each connection's
handshake fields (SNI, ALPN, version, JA4) from the TLS handshake records.

    import httpanalyzer.tls_exchange as tx
    df = tx.analyze_exchanges("trace.pcap")

The rules (what is a request, what the handshake's own flights are, TLS 1.3 tickets) and what an
h2 exchange measures: docs/TLS.md "Exchanges".
"""
from __future__ import annotations

import os
from typing import Iterable

import pyarrow as pa

from httpanalyzer.tls import (ExchangeRun, ExchangeStage, TlsRun, TlsStage, empty_exchange_table,
                              open_exchange_output)
from webtap.pipeline import Pipeline
from webtap.records.exchange import EXCHANGE_SCHEMA, exchange_table

__all__ = ["ExchangeRun", "analyze_exchanges", "iter_exchanges", "exchange_table", "EXCHANGE_SCHEMA",
           "open_exchange_output", "empty_exchange_table"]



def iter_exchanges(traces, bpf: str | None = None, gc_timeout: float = 60.0,
                   max_pending: int = 1 << 15, counters: dict | None = None,
                   warnings: list | None = None) -> tuple[pa.Table, pa.Table]:
    """(exchanges, handshakes) of the traces (read in the order given): the TLS stage and the
    exchange stage of one pipeline (webtap.pipeline), one walk over the packets for both.
    warnings: receives each trace's damage ('path: what')."""
    tls = TlsRun(gc_timeout=gc_timeout)
    ex = ExchangeStage(ExchangeRun(gc_timeout=gc_timeout, max_pending=max_pending))
    pipe = Pipeline(traces, [TlsStage(tls), ex], bpf=bpf)
    try:
        tabs = list(pipe.outputs())
    finally:
        if warnings is not None:
            warnings.extend(pipe.totals.warnings)
    hs = pa.concat_tables(tabs) if tabs else None      # one table, in frame order (TlsRun.finish)
    if counters is not None:
        counters.update(ex.run.counters())        # after the flush: `unmatched_end` counted
    return exchange_table(ex.raw, hs), hs


def analyze_exchanges(traces: str | os.PathLike | Iterable, bpf: str | None = None,
                      gc_timeout: float = 60.0, max_pending: int = 1 << 15,
                      counters: dict | None = None):
    """One row per TLS exchange of the traces, as a DataFrame in request frame order."""
    tab, _ = iter_exchanges(traces, bpf=bpf, gc_timeout=gc_timeout, max_pending=max_pending,
                            counters=counters)
    return tab.to_pandas()
