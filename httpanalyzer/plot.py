"""Figures of the analyzer's results (matplotlib, imported only when a figure is drawn)."""
from __future__ import annotations

import numpy as np


def hash_histograms_figure(hist: dict, ax=None):
    """The paper's Fig. 8: messages per hash value (mod bins) under Eq. 1 (4-tuple) and Eq. 3
    (seq/ack consumer hash). hist: httpanalyzer.feeder.hash_histograms(...). Returns the axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.5))
    bins = hist["bins"]
    ax.bar(bins - 0.2, hist["eq1"], width=0.4, label="Eq. 1: 4-tuple")
    ax.bar(bins + 0.2, hist["eq3"], width=0.4, label="Eq. 3: 4-tuple ^ seq/ack")
    ax.axhline(np.mean(hist["eq3"]), color="k", lw=0.8, ls="--", label="uniform")
    ax.set_xlabel(f"hash value mod {len(bins)}")
    ax.set_ylabel("HTTP messages")
    ax.legend()
    return ax


def balance_figure(table, ax=None):
    """Per consumer share (%) of messages and transactions (the paper's Table 3 as bars).
    table: httpanalyzer.feeder.balance_table(...). Returns the axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.5))
    x = np.arange(len(table))
    ax.bar(x - 0.2, table["messages_pct"], width=0.4, label="messages")
    ax.bar(x + 0.2, table["transactions_pct"], width=0.4, label="transactions")
    ax.axhline(100 / max(len(table), 1), color="k", lw=0.8, ls="--", label="1/N")
    ax.set_xticks(x, [f"consumer {c}" for c in table.index])
    ax.set_ylabel("share (%)")
    ax.legend()
    return ax
