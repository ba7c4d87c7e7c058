"""The figures of `httpanalyzer TRACE... --plots DIR`: the records' figures (and the feeder's
balance) as DIR/*.png. Loaded by httpanalyzer.cli's registry only when --plots is given, so its
imports (matplotlib, pandas, pyarrow) stand at the top: matplotlib stays a required dependency,
and a run without --plots never imports it."""
from __future__ import annotations

import pyarrow as pa
from matplotlib.figure import Figure

from httpanalyzer import plot
from httpanalyzer.balance import balance_table
from webtap.records.http import SCHEMA
from webtap.records.httppandas import to_pandas


def record_figures(batches, balance: dict, directory) -> list:
    """The records' figures (and the feeder's balance) as DIR/*.png; returns the paths."""
    df = to_pandas(pa.Table.from_batches(batches, schema=batches[0].schema if batches else SCHEMA))
    figs = plot.analysis_figures(df)
    if balance.get("consumers"):
        fig = Figure(figsize=(6, 3.8))
        plot.balance_figure(balance_table(balance), ax=fig.add_subplot())
        fig.tight_layout()
        figs["consumer_balance"] = fig
    return plot.save_figures(figs, directory)
