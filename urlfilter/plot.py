"""Figures of the URL filter: the CDF of the timing-condition margin (urlfilter.timing)."""
from __future__ import annotations

import numpy as np

__all__ = ["margin_cdf"]


def margin_cdf(df, ax=None, path=None, label: str | None = None):
    """Empirical CDF of margin_ns (in ms) over the connections with a verdict; the filter wins
    right of the dashed zero line. Returns the matplotlib Axes; saves to `path` when given."""
    import matplotlib

    if ax is None and path is not None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = np.sort(df["margin_ns"].dropna().to_numpy(dtype=float)) / 1e6
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    if len(m):
        y = np.arange(1, len(m) + 1) / len(m)
        won = float((m > 0).mean())
        ax.step(m, y, where="post", label=label or f"{len(m)} connections, {won:.0%} won")
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
