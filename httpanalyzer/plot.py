"""Figures of the analyzer's results as matplotlib figures (imported only when one is drawn).

The tshark comparison (the paper's Figs. 4-7: ccdf, counts, URL lengths) returns Figures drawn
with the Agg backend, used by httpanalyzer.compare.Comparison.figures(); the feeder's balance
(the paper's Fig. 8 and Table 3) draws on given or new axes.
"""
from __future__ import annotations

import numpy as np


def _figure(**kw):
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    return Figure(**kw)


def ccdf(samples: dict, title: str = "Response time CCDF"):
    """Log-log CCDF P(X > x) of each sample (seconds); values <= 0 cannot be drawn on a log axis
    and are left out of the curve (they still count in the KS distance)."""
    fig = _figure(figsize=(6.4, 4.2))
    ax = fig.add_subplot()
    for (label, x), style in zip(samples.items(), ("-", "--", ":", "-.")):
        x = np.sort(np.asarray(x, float))
        x = x[np.isfinite(x)]
        if len(x) == 0:
            continue
        p = 1.0 - np.arange(1, len(x) + 1) / len(x)
        keep = (x > 0) & (p > 0)
        ax.step(x[keep], p[keep], style, where="post", label=f"{label} (n={len(x)})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("response time (s)")
    ax.set_ylabel("P(response time > x)")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def counts(table, title: str, top: int = 15):
    """Grouped bars of a count table (columns webtap, tshark_first_packet, tshark_reassembly
    and rel_diff_*), the top rows by tshark count, log y axis."""
    fig = _figure(figsize=(7.2, 4.0))
    ax = fig.add_subplot()
    t = table.head(top)
    sources = [c for c in t.columns if not str(c).startswith("rel_diff")]
    x = np.arange(len(t))
    w = 0.8 / max(1, len(sources))
    for i, s in enumerate(sources):
        ax.bar(x + i * w - 0.4 + w / 2, t[s].to_numpy(), w, label=s)
    ax.set_xticks(x)
    ax.set_xticklabels([str(i) for i in t.index], rotation=45, ha="right", fontsize=8)
    if len(t) and t[sources].to_numpy().max() > 0:
        ax.set_yscale("log")
    ax.set_ylabel("messages")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def url_length(lengths: dict):
    """CDF of URL length (characters) per source, log x axis (the paper's Fig. 4)."""
    fig = _figure(figsize=(6.4, 4.2))
    ax = fig.add_subplot()
    for (label, v), style in zip(lengths.items(), ("-", "--", ":", "-.")):
        v = np.sort(np.asarray(v, float))
        if len(v) == 0:
            continue
        ax.step(np.maximum(v, 1), np.arange(1, len(v) + 1) / len(v), style, where="post",
                label=f"{label} (n={len(v)})")
    ax.set_xscale("log")
    ax.set_xlabel("URL length (characters)")
    ax.set_ylabel("P(length <= x)")
    ax.set_title("URL length")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig



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
