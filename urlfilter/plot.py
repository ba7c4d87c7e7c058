"""Figures of the URL filter, as matplotlib Figures made without pyplot (title, axis labels with
units, legend), except `margin_cdf`, which draws on given (or new pyplot) axes:

* the tree (urlfilter.measure.TreeMeasurements): `compression` (bytes per URL vs the paper's
  35.54) and `latency` (insert and match time distributions, the paper's Figs. 8-9);
* a filter pass (urlfilter.scan): `hits_by_category`, `match_time`;
* the timing condition (urlfilter.timing): `timing` (T_proc + RTT(c,f) against RTT(c,s) per
  connection, and the margin's CDF: the paper's Fig. 11b).

`scan_figures` / `timing_figures` give the name -> Figure dicts the CLI's `--plots DIR` writes;
`save_figures(figs, dir)` writes them as PNG.
"""
from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from urlfilter import measure
from webtap.figures import save_figures  # noqa: F401 (re-exported: plot.save_figures)

__all__ = ["margin_cdf", "compression", "latency", "hits_by_category", "match_time", "timing",
           "scan_figures", "timing_figures", "save_figures"]


def _figure(**kw):
    return Figure(**kw)


def margin_cdf(df, ax=None, path=None, label: str | None = None):
    """Empirical CDF of margin_ns (in ms) over the connections with a verdict; the filter wins
    right of the dashed zero line. Returns the matplotlib Axes; saves to `path` when given."""
    if ax is None and path is not None:
        matplotlib.use("Agg")
    # pyplot here, not at the top: importing it settles the backend, which must be chosen first
    import matplotlib.pyplot as plt

    m = np.sort(df["margin_ns"].dropna().to_numpy(dtype=float)) / 1e6
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    if len(m):
        y = np.arange(1, len(m) + 1) / len(m)
        won = float((m > 0).mean())
        ax.step(m, y, where="post", label=label or f"{len(m)} connections, {won:.0%} won")
    else:
        ax.plot([], [], label="no connection with a handshake")
    ax.axvline(0, color="k", ls="--", lw=1)
    # margins span microseconds to seconds, on both sides of zero: linear within +-10 us
    ax.set_xscale("symlog", linthresh=0.01)
    if len(m):
        ax.set_xlim(min(m[0] * 1.5, -0.01), max(m[-1] * 1.5, 0.01))
    ax.set_xlabel("margin = RTT(c,s) - (T_proc + RTT(c,f))  [ms]")
    ax.set_ylabel("share of connections")
    ax.set_title("Pass-by filter: timing condition")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left")
    if path is not None:
        ax.figure.tight_layout()
        ax.figure.savefig(path, dpi=120)
    return ax


def compression(m):
    """Bytes per URL of the tree (paper's definition, and all memory held) beside the paper's
    35.54, and the mean entry length (the paper's list: 67.49 bytes)."""
    fig = _figure(figsize=(6.4, 3.8))
    ax = fig.add_subplot()
    names = ["webtap tree\n(paper's definition)", "webtap tree\n(all memory held)", "paper"]
    vals = [m.bytes_per_url, m.allocated_bytes_per_url, m.paper["bytes_per_url"]]
    bars = ax.bar(names, vals, color=["C0", "C9", "C7"], label="bytes per URL")
    for b, v in zip(bars, vals):
        ax.annotate(f"{v:.2f}", (b.get_x() + b.get_width() / 2, v), ha="center", va="bottom",
                    fontsize=8)
    ax.axhline(m.mean_url_bytes, color="C3", ls="--", lw=1,
               label=f"mean entry length here ({m.mean_url_bytes:.1f} B)")
    ax.axhline(m.paper["mean_url_bytes"], color="C7", ls=":", lw=1,
               label=f"mean URL length, paper ({m.paper['mean_url_bytes']} B)")
    ax.set_ylabel("memory per URL (bytes)")
    ax.set_xlabel(f"{m.urls:,} URLs in the tree")
    ax.set_title("URL tree compression")
    ax.set_ylim(0, max(vals + [m.mean_url_bytes, m.paper["mean_url_bytes"]]) * 1.5)
    ax.legend(fontsize=8, loc="upper right", ncol=1)
    fig.tight_layout()
    return fig


def _hist_us(ax, v, paper_mean, what, color):
    v = np.asarray(v, float)
    v = v[v > 0]
    if len(v):
        lo, hi = max(v.min(), 1e-3), max(v.max(), paper_mean)
        bins = np.logspace(np.log10(lo), np.log10(hi * 1.05), 60)
        ax.hist(v, bins=bins, color=color, alpha=0.8,
                label=f"webtap, n={len(v):,}: mean {v.mean():.2f}, median {np.median(v):.2f} us")
        ax.axvline(v.mean(), color="k", lw=1, ls="-", label="webtap mean")
        ax.set_xscale("log")
    ax.axvline(paper_mean, color="C3", lw=1.2, ls="--", label=f"paper mean {paper_mean} us")
    ax.set_xlabel(f"{what} time per URL (us)")
    ax.set_ylabel("URLs (count)")
    ax.set_title(f"{what.capitalize()} time distribution")
    ax.legend(fontsize=7)


def latency(m):
    """Histograms (log x) of the per-URL insert and prefix-match times (us) with the paper's
    means (4.95 us and 3.83 us): the paper's Figs. 8-9."""
    fig = _figure(figsize=(11, 3.8))
    _hist_us(fig.add_subplot(1, 2, 1), m.insert_us, m.paper["insert_us_mean"], "insert", "C0")
    _hist_us(fig.add_subplot(1, 2, 2), m.match_us, m.paper["match_us_mean"], "match", "C1")
    fig.tight_layout()
    return fig


def hits_by_category(table, gets: int | None = None):
    """Horizontal bars: blacklisted GETs per category (urlfilter.measure.hits_by_category)."""
    fig = _figure(figsize=(6.4, 2.2 + 0.35 * max(len(table), 1)))
    ax = fig.add_subplot()
    y = np.arange(len(table))[::-1]
    if len(table):
        ax.barh(y, table["hits"].to_numpy(), color="C3", label="blacklisted GETs")
        for yi, (h, e) in zip(y, zip(table["hits"], table["entries"])):
            ax.annotate(f" {int(h)} ({int(e)} entries)", (h, yi), va="center", fontsize=7)
        ax.set_xlim(0, table["hits"].max() * 1.3)
    else:
        # nothing to draw: say so, on a 0..1 axis (an empty autoscaled axis shows negative ticks)
        ax.barh([], [], color="C3", label="no GET matched the blacklist")
        ax.set_xlim(0, 1)
        ax.text(0.5, 0.5, "no hits", transform=ax.transAxes, ha="center", va="center",
                fontsize=11, color="0.3")
    ax.set_ylim(-0.6, max(len(table), 1) + 0.5)          # the top row left free for the legend
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_yticks(y)
    ax.set_yticklabels([str(c) for c in table.index], fontsize=8)
    ax.set_xlabel("GET requests (count)")
    ax.set_ylabel("category")
    ax.set_title("Blacklist hits by category" + (f" ({gets})" if isinstance(gets, str) else
                                                  f" ({gets:,} lookups)" if gets else ""))
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig


def match_time(records):
    """Histogram of the per-GET tree match time (us) of a filter pass (records' match_ns)."""
    df = records.to_pandas() if hasattr(records, "to_pandas") else records
    fig = _figure(figsize=(6.4, 3.8))
    ax = fig.add_subplot()
    for hit, color, label in ((False, "C0", "miss"), (True, "C3", "hit")):
        v = df.loc[df["hit"].astype(bool) == hit, "match_ns"].to_numpy(float) / 1e3
        v = v[v > 0]
        if len(v):
            bins = np.logspace(np.log10(max(v.min(), 1e-3)), np.log10(v.max() * 1.05), 40)
            ax.hist(v, bins=bins, color=color, alpha=0.7,
                    label=f"{label} (n={len(v)}, median {np.median(v):.2f} us)")
    if ax.patches:
        ax.set_xscale("log")
    else:
        ax.plot([], [], label="no GET reached the matcher")
    ax.set_xlabel("tree match time per GET (us)")
    ax.set_ylabel("GET requests (count)")
    ax.set_title("Match time of the trace's GETs")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def timing(df):
    """The paper's Fig. 11b per connection: T_proc + RTT(c,f) against RTT(c,s) (ms, log-log; the
    filter wins below the diagonal), and the CDF of the margin RTT(c,s) - (T_proc + RTT(c,f)).
    df: urlfilter.timing.timing(...)."""
    fig = _figure(figsize=(11, 4.2))
    ax = fig.add_subplot(1, 2, 1)
    j = df[df["margin_ns"].notna()]
    cs = j["rtt_cs_ns"].to_numpy(float) / 1e6
    fp = (j["t_proc_ns"].to_numpy(float) + j["rtt_cf_ns"].to_numpy(float)) / 1e6
    win = j["win"].to_numpy(bool)
    floor = 1e-4                           # 0.1 us: zero RTTs (same-host captures) stay visible
    cs_p, fp_p = np.maximum(cs, floor), np.maximum(fp, floor)
    ax.scatter(cs_p[win], fp_p[win], s=10, color="C2", label=f"filter wins ({int(win.sum())})")
    ax.scatter(cs_p[~win], fp_p[~win], s=10, color="C3", marker="x",
               label=f"server wins ({int((~win).sum())})")
    if len(j):
        lo = min(cs_p.min(), fp_p.min()) / 2
        hi = max(cs_p.max(), fp_p.max()) * 2
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="T_proc + RTT(c,f) = RTT(c,s)")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("RTT(client, server) (ms)")
    ax.set_ylabel("T_proc + RTT(client, filter) (ms)")
    ax.set_title(f"Timing condition per connection (n={len(j)})")
    ax.legend(fontsize=8, loc="upper left")
    ax2 = fig.add_subplot(1, 2, 2)
    margin_cdf(df, ax=ax2)
    ax2.set_title("Margin CDF (paper Fig. 11b)")
    fig.tight_layout()
    return fig


def lookups_title(df) -> str:
    """What a pass looked up, counted from its records and named like scan's summary
    (urlfilter.analyzer.summary_line): "446 lookups: 372 GETs, 74 TLS SNIs"."""
    proto = df["proto"] if "proto" in df else None
    n = {k: int((proto == k).sum()) if proto is not None else 0 for k in ("http", "tls", "quic")}
    if proto is None:
        n["http"] = len(df)
    parts = [f"{n['http']:,} GETs"] + [f"{n[k]:,} {k.upper()} SNIs" for k in ("tls", "quic") if n[k]]
    return f"{len(df):,} lookups: " + ", ".join(parts)


def scan_figures(records) -> dict:
    """name -> Figure for a filter pass: what `urlfilter scan --plots DIR` writes."""
    hbc = measure.hits_by_category
    df = records.to_pandas() if hasattr(records, "to_pandas") else records
    return {"hits_by_category": hits_by_category(hbc(df), gets=lookups_title(df)),
            "match_time": match_time(df)}


def timing_figures(df) -> dict:
    """name -> Figure for a timing report: what `urlfilter timing --plots DIR` writes."""
    return {"timing_condition": timing(df)}
