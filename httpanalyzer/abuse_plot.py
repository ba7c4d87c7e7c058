"""Figures of the abuse analytics (httpanalyzer.abuse; `httpanalyzer abuse ... --plots DIR`):
matplotlib Figures without pyplot, as httpanalyzer.plot draws them.

    rates_figure(abuse.rates(run))            the busiest clients: peak and mean requests/s
    rates_over_time_figure(run.requests)      requests/s over time of the busiest clients
    limit_req_figure(abuse.limit_req(...))    each request in time, per client, by outcome
    slow_figure(abuse.slow_http(run))         each connection: its longest wait for the server
                                              against its zero-window / idle time, by flag
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from httpanalyzer.plot import _figure

_KIND_STYLE = {"slowloris": ("o", "tab:red"), "slow_body": ("s", "tab:orange"),
               "slow_read": ("^", "tab:purple"), "idle_keepalive": ("D", "tab:blue")}
_OUTCOME_STYLE = {"passed": ("o", "tab:green"), "delayed": ("s", "tab:orange"),
                  "rejected": ("x", "tab:red")}


def rates_figure(rates: pd.DataFrame, top: int = 15):
    """Horizontal bars: peak (sliding window) and mean requests/s of the `top` clients (or
    client/Host pairs) by peak."""
    w = rates.attrs.get("window_s", 1.0)
    d = rates.head(top).iloc[::-1]
    keys = [" ".join(str(v) for v in row if str(v)) for row in
            d[[c for c in ("client_ip", "host") if c in d.columns]].itertuples(index=False)]
    fig = _figure(figsize=(6.4, 0.35 * max(len(d), 3) + 1.6))
    ax = fig.add_subplot()
    y = np.arange(len(d))
    ax.barh(y + 0.2, d["peak_rps"], height=0.4, label=f"peak ({w:g} s window)")
    ax.barh(y - 0.2, d["mean_rps"], height=0.4, label="mean over the client's span")
    ax.set_yticks(y, keys, fontsize=7)
    ax.set_xlabel("requests per second (1/s)")
    ax.set_ylabel("client")
    ax.set_title(f"Busiest clients (top {len(d)} by peak rate)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def rates_over_time_figure(requests: pd.DataFrame, top: int = 8, bins: int = 60,
                           key: str = "client_ip"):
    """Requests per second over time (equal bins over the requests' span) of the `top` clients
    with the most requests, one line each; the others summed as one more line."""
    t = requests["request_ts"].astype("int64").to_numpy()
    fig = _figure(figsize=(7.2, 3.4))
    ax = fig.add_subplot()
    if not len(t):
        ax.set_title("no requests")
        return fig
    t0, t1 = int(t.min()), int(t.max())
    edges = np.linspace(t0, t1 + 1, bins + 1)
    width_s = (edges[1] - edges[0]) / 1e9
    keys = requests[key].astype(object).where(requests[key].notna(), "").to_numpy()
    codes, uniq = pd.factorize(keys)
    counts = np.bincount(codes, minlength=len(uniq))
    order = np.argsort(-counts, kind="stable")[:top]
    b = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, bins - 1)
    grid = np.zeros((len(uniq), bins), np.int64)
    np.add.at(grid, (codes, b), 1)
    x = (edges[:-1] - t0) / 1e9
    for k in order:
        ax.step(x, grid[k] / width_s, where="post", lw=1, label=f"{uniq[k]} ({counts[k]})")
    rest = np.setdiff1d(np.arange(len(uniq)), order)
    if len(rest):
        ax.step(x, grid[rest].sum(axis=0) / width_s, where="post", lw=1, color="0.6",
                label=f"{len(rest)} other clients")
    ax.set_xlabel("time since the first request (s)")
    ax.set_ylabel(f"requests/s ({width_s:.3g} s bins)")
    ax.set_title(f"Request rate over time, top {len(order)} clients")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def limit_req_figure(lr: pd.DataFrame, top: int = 20):
    """Each request of the `top` busiest clients in time (x) and client (y), marked passed /
    delayed / rejected as nginx's limit_req would have."""
    conf = lr.attrs.get("limit_req", {})
    counts = lr["client_ip"].value_counts()
    clients = list(counts.index[:top])
    rank = {c: i for i, c in enumerate(clients)}
    d = lr[lr["client_ip"].isin(clients)]
    t = d["request_ts"].astype("int64").to_numpy()
    t0 = int(t.min()) if len(t) else 0
    fig = _figure(figsize=(7.2, 0.3 * max(len(clients), 4) + 1.8))
    ax = fig.add_subplot()
    y = d["client_ip"].map(rank).to_numpy()
    oc = d["limit_req"].astype(str).to_numpy()
    for name, (m, c) in _OUTCOME_STYLE.items():
        k = oc == name
        ax.scatter((t[k] - t0) / 1e9, y[k], marker=m, s=14, color=c,
                   label=f"{name} ({int(k.sum())})")
    ax.set_yticks(range(len(clients)), clients, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time since the first request (s)")
    ax.set_ylabel("client")
    rate = conf.get("rate_milli")
    what = (f"rate {rate / 1000:g} r/s, burst {conf.get('burst')}"
            + (", nodelay" if conf.get("nodelay") else "")
            + (f", delay={conf['delay']}" if conf.get("delay") is not None else "")) if rate else ""
    ax.set_title(f"nginx limit_req replayed ({what})" if what else "nginx limit_req replayed")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def slow_figure(slow: pd.DataFrame):
    """Each connection: its longest wait for the server's first byte (x) against the longer of
    its zero-window time and its idle time (y), symlog axes, by flag (normal in grey)."""
    fig = _figure(figsize=(7.6, 4.6))
    ax = fig.add_subplot()
    x = slow["wait_s"].to_numpy(float)
    y = np.maximum(slow["zero_window_s"].to_numpy(float), slow["idle_s"].to_numpy(float))
    flagged = slow["slow"].to_numpy(bool)
    ax.scatter(x[~flagged], y[~flagged], s=10, color="0.6", label=f"no flag ({int((~flagged).sum())})")
    for kind, (m, c) in _KIND_STYLE.items():
        k = slow[kind].to_numpy(bool)
        # slowloris and slow body share a corner (long wait, no zero window): rings and dots
        style = dict(s=70, facecolors="none", edgecolors=c) if kind == "slowloris" else dict(s=22, color=c)
        ax.scatter(x[k], y[k], marker=m, label=f"{kind} ({int(k.sum())})", **style)
    th = slow.attrs.get("thresholds", {})
    if "stall_s" in th:
        ax.axvline(th["stall_s"], color="0.3", lw=0.8, ls="--")
    ax.set_xscale("symlog", linthresh=0.01)
    ax.set_yscale("symlog", linthresh=0.01)
    ax.set_xlim(0, 2 * max(float(np.max(x, initial=0)), th.get("stall_s", 1.0)))
    ax.set_ylim(0, 2 * max(float(np.max(y, initial=0)), 1.0))
    ax.set_xlabel("longest wait for the server's first byte (s)")
    ax.set_ylabel("zero-window or idle time (s)")
    ax.set_title("Slow-HTTP indicators per connection")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig
