"""The paper's load-balancing experiments (Table 3, Fig. 8) on top of the feeder.

    from httpanalyzer import balance
    msgs = balance.trace_messages("trace.pcap")          # every HTTP message of the traces
    balance.hash_histograms(msgs, bins=64)               # Fig. 8: Eq. 1 vs Eq. 3 histograms
    tables = balance.balance_runs("trace.pcap", (2, 4, 8))   # real feeder runs, one per N
    balance.balance_summary(tables)                      # Table 3's layout

These sit ABOVE the one-pass runner (httpanalyzer.stream), which sits above the feeder engine
(httpanalyzer.feeder): they used to live in feeder.py, which made feeder <-> stream a circle.
"""
from __future__ import annotations

import numpy as np

from httpanalyzer.feeder import hash_eq1, hash_eq3
from httpanalyzer.stream import Summary, iter_record_batches
from webtap.records.message import MESSAGE_DTYPE
from webtap.pipeline import Pipeline

__all__ = ["balance_table", "hash_histograms", "trace_messages", "balance_runs", "balance_summary"]


def balance_table(balance: dict):
    """The paper's Table 3 as a DataFrame: per consumer, share (%) of the HTTP messages (the
    packets the feeder forwards) and of the transactions."""
    import pandas as pd

    df = pd.DataFrame(balance["consumers"]).set_index("consumer")
    for col, share in (("messages", "messages_pct"), ("transactions", "transactions_pct"),
                       ("packet_bytes", "bytes_pct")):
        tot = df[col].sum()
        df[share] = 100.0 * df[col] / tot if tot else 0.0
    return df


def hash_histograms(msgs: np.ndarray, bins: int = 64, consumers: int | None = None) -> dict:
    """Histograms of Eq. 1 (4-tuple) and Eq. 3 (seq/ack) values mod `bins` over messages (the
    paper's Fig. 8), and, with consumers=N, each consumer's share under both."""
    e1 = hash_eq1(msgs)
    e3 = hash_eq3(msgs)
    out = {"bins": np.arange(bins),
           "eq1": np.bincount(e1 % bins, minlength=bins),
           "eq3": np.bincount(e3 % bins, minlength=bins)}
    if consumers:
        out["eq1_share"] = np.bincount(e1 % consumers, minlength=consumers) / max(len(msgs), 1)
        out["eq3_share"] = np.bincount(e3 % consumers, minlength=consumers) / max(len(msgs), 1)
    return out


def trace_messages(traces, bpf: str | None = None) -> np.ndarray:
    """Every HTTP message (HttpMsg struct array, webtap.records.message) of the traces, in one array:
    the input of hash_histograms. Read and dissected in one pass (webtap.pipeline)."""

    parts = [mb.msgs.copy() for _, mb in Pipeline(traces, bpf=bpf).batches()]
    if not parts:
        return np.zeros(0, MESSAGE_DTYPE)
    return np.concatenate(parts)


def balance_runs(traces, consumers=(2, 4, 8), gc_timeout: float = 60.0) -> dict:
    """Run the feeder once per N in `consumers` over the traces; N -> balance_table (the paper's
    Table 3 for each N). Each table's attrs hold the run's `paired` count (single source of truth
    for the transactions the table must add up to)."""

    out = {}
    for n in consumers:
        fb: dict = {}
        s = Summary(detailed=False)
        for _ in iter_record_batches(traces, consumers=int(n), feeder=fb, summary=s,
                                     gc_timeout=gc_timeout, progress=False):
            pass
        t = balance_table(fb)
        t.attrs["paired"] = int(s.pairing["paired"])
        out[int(n)] = t
    return out


def balance_summary(tables: dict):
    """The paper's Table 3 layout: one row per consumer, one column pair (messages %,
    transactions %) per N; NaN where a consumer does not exist for that N."""
    import pandas as pd

    cols = {}
    for n, t in tables.items():
        cols[(f"N={n}", "messages %")] = t["messages_pct"]
        cols[(f"N={n}", "transactions %")] = t["transactions_pct"]
    df = pd.DataFrame(cols)
    df.columns = pd.MultiIndex.from_tuples(df.columns)
    df.index.name = "consumer"
    return df
