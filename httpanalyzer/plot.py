"""Figures of the analyzer's results as matplotlib figures (the plotting commands load this module).

Every function returns a `matplotlib.figure.Figure` made without pyplot (no global state, nothing
to close; `fig.savefig("x.png")` works on any machine, and a notebook with `%matplotlib inline`
shows it), with a title, axis labels with units and a legend:

* records (httpanalyzer.analysis): `analysis_figures(df)` = response-time CCDF, status codes and
  methods, URL length, slowest hosts and URIs, unmatched records over time;
* the tshark comparison (the paper's Figs. 4-7: `ccdf`, `counts`, `url_length`), used by
  httpanalyzer.compare.Comparison.figures();
* the feeder (the paper's Fig. 8 and Table 3): `load_balance_figures`; the older
  `hash_histograms_figure` / `balance_figure` draw on given or new pyplot axes.

`save_figures(figs, dir)` writes PNGs (the CLIs' `--plots DIR`, `make demo`).
"""
from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, NullFormatter

from httpanalyzer import analysis
from webtap.figures import save_figures  # noqa: F401 (re-exported: plot.save_figures)


def _figure(**kw):
    # no pyplot and no matplotlib.use(): a bare Figure renders through Agg when saved and is
    # shown by the notebook's inline backend, without switching anyone's backend
    return Figure(**kw)


def ccdf(samples: dict, title: str = "Response time CCDF"):
    """Log-log CCDF P(X >= x) of each sample (seconds; httpanalyzer.analysis.ccdf), from the
    fastest to the slowest transaction; values <= 0 cannot be drawn on a log axis and are left
    out of the curve (they still count in the KS distance and in n)."""
    _ccdf = analysis.ccdf
    fig = _figure(figsize=(6.4, 4.2))
    ax = fig.add_subplot()
    for (label, x), style in zip(samples.items(), ("-", "--", ":", "-.")):
        c = _ccdf(x)
        if len(c) == 0:
            continue
        keep = c["x"].to_numpy() > 0
        ax.step(c["x"].to_numpy()[keep], c["p"].to_numpy()[keep], style, where="pre",
                label=f"{label} (n={int(np.isfinite(np.asarray(x, float)).sum())})")
    if not ax.get_lines():
        ax.plot([], [], label="no paired transactions")
    else:                              # a log axis needs data > 0
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("response time (s)")
    ax.set_ylabel("P(response time >= x)")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def counts(table, title: str, top: int = 15, xlabel: str | None = None):
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
    ax.set_xlabel(xlabel or (table.index.name or "value"))
    ax.set_ylabel("messages (count)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def url_length(lengths: dict, title: str = "URL length (CDF)"):
    """CDF of URL length (characters) per source, log x axis (the paper's Fig. 4)."""
    fig = _figure(figsize=(6.4, 4.2))
    ax = fig.add_subplot()
    for (label, v), style in zip(lengths.items(), ("-", "--", ":", "-.")):
        v = np.sort(np.asarray(v, float))
        if len(v) == 0:
            continue
        ax.step(np.maximum(v, 1), np.arange(1, len(v) + 1) / len(v), style, where="post",
                label=f"{label} (n={len(v)})")
    if not ax.get_lines():
        ax.plot([], [], label="no requests")
    else:
        ax.set_xscale("log")
    ax.set_xlabel("URL length (characters)")
    ax.set_ylabel("P(length <= x)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


# ---- the records of one analysis (httpanalyzer.analysis) ------------------------------------

def response_time_ccdf(df, title: str = "Response time CCDF"):
    """Log-log CCDF of the paired records' response times (s)."""
    response_times_s = analysis.response_times_s
    return ccdf({"paired transactions": response_times_s(df)}, title=title)


def status_methods(df, top: int = 12):
    """Two bar charts: responses per status code and requests per method (log y)."""
    method_counts, status_counts = analysis.method_counts, analysis.status_counts
    fig = _figure(figsize=(10, 4.0))
    for k, (t, what, color) in enumerate(((status_counts(df), "status code", "C0"),
                                          (method_counts(df), "method", "C1"))):
        ax = fig.add_subplot(1, 2, k + 1)
        t = t.head(top)
        x = np.arange(len(t))
        ax.bar(x, t["count"].to_numpy(), color=color,
               label=f"{'responses' if k == 0 else 'requests'} (n={int(t['count'].sum())} shown)")
        for xi, (c, pc) in enumerate(zip(t["count"], t["pct"])):
            ax.annotate(f"{pc:.1f}%", (xi, c), ha="center", va="bottom", fontsize=7)
        ax.set_xticks(x)
        ax.set_xticklabels([str(i) for i in t.index], rotation=45, ha="right", fontsize=8)
        if len(t) and t["count"].max() > 0:
            ax.set_yscale("log")
        ax.set_xlabel(what)
        ax.set_ylabel("messages (count)")
        ax.set_title(f"{'Status codes' if k == 0 else 'Methods'} (top {top})")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def slowest(table, by: str = "host"):
    """Horizontal bars: median and max response time (s, log x) of the slowest `by` values.
    table: httpanalyzer.analysis.slowest(df, by=...)."""
    fig = _figure(figsize=(8, 0.9 + 0.32 * max(len(table), 1)))
    ax = fig.add_subplot()
    y = np.arange(len(table))[::-1]
    names = [(str(i) if len(str(i)) <= 56 else str(i)[:53] + "...") + f"  (n={int(n)})"
             for i, n in zip(table.index, table["count"])]
    ax.barh(y + 0.2, table["max_s"].to_numpy(float), height=0.4, color="C3", label="max")
    ax.barh(y - 0.2, table["median_s"].to_numpy(float), height=0.4, color="C0", label="median")
    ax.set_yticks(y)
    ax.set_yticklabels(names, fontsize=7)
    if len(table) and (table["max_s"] > 0).any():
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("response time (s)")
    ax.set_ylabel(by)
    plural = {"uri": "URIs", "host": "hosts", "server_ip": "servers", "client_ip": "clients"}
    ax.set_title(f"Slowest {plural.get(by, by)} by median response time")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, axis="x", which="both", alpha=0.3)
    fig.tight_layout()
    return fig


def unmatched_over_time(table):
    """Unmatched records per time bin (stacked bars: requests without response, responses
    without request) and the share of unmatched records (%, right axis).
    table: httpanalyzer.analysis.unmatched_over_time(df)."""
    fig = _figure(figsize=(8, 3.8))
    ax = fig.add_subplot()
    bin_s = table.attrs.get("bin_s", 1.0)
    if len(table):
        t0 = table.index[0]
        x = (table.index - t0).total_seconds().to_numpy()
        w = bin_s * 0.9
        rq = table["request_only"].to_numpy()
        rs = table["response_only"].to_numpy()
        ax.bar(x, rq, width=w, align="edge", color="C1", label="request without response")
        ax.bar(x, rs, width=w, align="edge", bottom=rq, color="C4", label="response without request")
        ax2 = ax.twinx()
        pct = np.where(table["records"].to_numpy() > 0, table["unmatched_pct"].to_numpy(), np.nan)
        ax2.plot(x + bin_s / 2, pct, "k.", ms=4, label="unmatched share (bins with records)")
        ax2.set_ylabel("unmatched share of records (%)")
        ax2.set_ylim(0, max(5.0, float(table["unmatched_pct"].max()) * 1.15))
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = ax2.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, fontsize=8, loc="upper left")
        ax.set_xlabel(f"time since {t0:%Y-%m-%d %H:%M:%S} UTC (s; bins of {bin_s:.3g} s)")
    else:
        ax.set_xlabel("time (s)")
        ax.plot([], [], label="no records")
        ax.legend(fontsize=8)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("unmatched records (count)")
    ax.set_title("Unmatched messages over time")
    fig.tight_layout()
    return fig


def analysis_figures(df, top: int = 10) -> dict:
    """name -> Figure for one set of records: what `httpanalyzer TRACE --plots DIR` writes."""
    return {
        "response_time_ccdf": response_time_ccdf(df),
        "status_methods": status_methods(df),
        "url_length": url_length({"requests": analysis.url_lengths(df)}),
        "slowest_hosts": slowest(analysis.slowest(df, by="host", top=top), by="host"),
        "slowest_uris": slowest(analysis.slowest(df, by="uri", top=top), by="uri"),
        "unmatched_over_time": unmatched_over_time(analysis.unmatched_over_time(df)),
    }


# ---- the feeder (the paper's Fig. 8 and Table 3) ----------------------------------------------

def hash_histograms_figure(hist: dict, ax=None):
    """The paper's Fig. 8: messages per hash value (mod bins) under Eq. 1 (4-tuple) and Eq. 3
    (seq/ack consumer hash). hist: httpanalyzer.balance.hash_histograms(...). Returns the axes
    (new pyplot axes when none are given)."""
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(7, 3.5))
    bins = hist["bins"]
    ax.bar(bins - 0.2, hist["eq1"], width=0.4, label="Eq. 1: 4-tuple")
    ax.bar(bins + 0.2, hist["eq3"], width=0.4, label="Eq. 3: 4-tuple ^ seq/ack")
    ax.axhline(np.mean(hist["eq3"]), color="k", lw=0.8, ls="--", label="uniform")
    ax.set_xlabel(f"hash value mod {len(bins)}")
    ax.set_ylabel("HTTP messages (count)")
    ax.set_title("Hash values of the HTTP messages (paper Fig. 8)")
    ax.legend(fontsize=8)
    return ax


def balance_figure(table, ax=None, title: str | None = None):
    """Per consumer share (%) of messages and transactions (the paper's Table 3 as bars).
    table: httpanalyzer.balance.balance_table(...). Returns the axes (new pyplot axes when none
    are given)."""
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(5, 3.5))
    x = np.arange(len(table))
    ax.bar(x - 0.2, table["messages_pct"], width=0.4, label="messages")
    ax.bar(x + 0.2, table["transactions_pct"], width=0.4, label="transactions")
    ax.axhline(100 / max(len(table), 1), color="k", lw=0.8, ls="--", label="1/N")
    top = float(np.nanmax([table["messages_pct"].max(), table["transactions_pct"].max(), 0]))
    ax.set_ylim(0, max(top, 100 / max(len(table), 1)) * 1.4)     # room for the legend
    ax.set_xticks(x, [f"{c}" for c in table.index])
    ax.set_xlabel("consumer")
    ax.set_ylabel("share (%)")
    ax.set_title(title or f"Per-consumer share, N = {len(table)}")
    ax.legend(fontsize=7, ncol=3, loc="upper center")
    return ax


def load_balance_figures(hist: dict, tables: dict) -> dict:
    """name -> Figure: 'hash_histograms' (Fig. 8, from balance.hash_histograms) and 'balance'
    (Table 3 as bars, one panel per N; tables: N -> balance.balance_table)."""
    f1 = _figure(figsize=(9, 3.8))
    hash_histograms_figure(hist, ax=f1.add_subplot())
    f1.tight_layout()
    f2 = _figure(figsize=(3.4 * max(len(tables), 1) + 0.6, 3.6))
    for k, (n, t) in enumerate(tables.items()):
        balance_figure(t, ax=f2.add_subplot(1, max(len(tables), 1), k + 1),
                       title=f"N = {n} consumers")
    f2.suptitle("Per-consumer share of messages and transactions (paper Table 3)")
    f2.tight_layout()
    return {"hash_histograms": f1, "consumer_balance": f2}
