"""The report of `httpanalyzer compare`: `Comparison` holds the DataFrames and renders the JSON
summary, Markdown, HTML, figures and CSV tables (issue 5).
"""
from __future__ import annotations

import html
import json
import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from httpanalyzer import plot
from httpanalyzer.compare_join import CATEGORIES, FIELDS
from httpanalyzer.tshark import MODES


def _sample(x) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype.kind in "iu":        # exact integers (compare passes nanoseconds): nothing to drop
        return np.sort(x.astype(np.int64))
    x = x.astype(float)
    return np.sort(x[~np.isnan(x)])


def ks_distance(a, b) -> float:
    """Two-sample Kolmogorov-Smirnov statistic sup |F_a - F_b| (nan when a sample is empty).

    `compare` passes response times as integer nanoseconds, so that two equal times are equal
    (as floats in seconds, 1.5608819999999999 and 1.560882 are not); floats (NaN dropped) work
    too."""
    a, b = _sample(a), _sample(b)
    if a.dtype != b.dtype:
        a, b = a.astype(float), b.astype(float)
    if len(a) == 0 or len(b) == 0:
        return float("nan")
    x = np.concatenate([a, b])
    fa = np.searchsorted(a, x, side="right") / len(a)
    fb = np.searchsorted(b, x, side="right") / len(b)
    return float(np.max(np.abs(fa - fb)))


def _rel_diffs(df: pd.DataFrame, sources) -> pd.DataFrame:
    """|webtap - tshark| / tshark in % for each tshark column (and for webtap_dedup: webtap
    without the records flagged as retransmitted copies, the paper's analyst step)."""
    for mine, tag in (("webtap", ""), ("webtap_dedup", "dedup_")):
        if mine not in df:
            continue
        for k in sources:
            if k.startswith("tshark"):
                with np.errstate(divide="ignore", invalid="ignore"):
                    df[f"rel_diff_{tag}{k}_pct"] = np.where(
                        df[k] > 0, 100.0 * (df[mine] - df[k]).abs() / df[k], np.nan)
    return df


def count_table(values: dict) -> pd.DataFrame:
    """Counts side by side (columns = sources: webtap, tshark_first_packet, ...; values: one
    entry per message) with the relative difference of webtap to each tshark column, in %,
    rows sorted by the first tshark column."""
    df = pd.DataFrame({k: pd.Series(list(v), dtype=object).value_counts()
                       for k, v in values.items()})
    df = df.fillna(0).astype(np.int64)
    key = next((k for k in values if k.startswith("tshark")), list(values)[0])
    df = df.sort_values(key, ascending=False, kind="stable")
    return _rel_diffs(df, list(values))


@dataclass
class Comparison:
    """The result of compare_traces(): every number of the report, as DataFrames."""

    traces: list
    tshark_version: str
    commands: list
    transactions: pd.DataFrame      # one row per (mode, joined transaction), with category
    field_diffs: pd.DataFrame       # one row per differing field of a transaction both find
    response_times: dict            # 'webtap' | 'tshark_first_packet' | 'tshark_reassembly' -> s
    status_counts: pd.DataFrame
    method_counts: pd.DataFrame
    url_lengths: dict               # source -> np.ndarray of URI lengths (characters)
    per_trace: pd.DataFrame         # trace x (both, only_tshark, only_webtap, unexplained ...)
    skipped: list                   # "trace: error" for traces webtap could not read (a failing
                                    # tshark raises TsharkError instead)
    response_times_ns: dict = field(default_factory=dict)   # the same, exact int64 ns (KS uses these)

    def counts(self, mode: str = "first_packet") -> dict:
        t = self.transactions[self.transactions["mode"] == mode]
        same = t[(t.side == "both") & ~t.differs]
        return {"both": int((t.side == "both").sum()),
                "only_tshark": int((t.side == "only_tshark").sum()),
                "only_webtap": int((t.side == "only_webtap").sum()),
                "paired_differently": int(((t.side == "both") & t.differs).sum()),
                # not differences: both tools report the transaction unpaired (trace boundaries,
                # a lost message)
                "unpaired_in_both": {
                    "response_without_request": int((same.webtap_request_frame < 0).sum()),
                    "request_without_response": int((same.webtap_response_frame < 0).sum())}}

    def categories(self, mode: str = "first_packet") -> dict:
        t = self.transactions[(self.transactions["mode"] == mode) & self.transactions.differs]
        f = self.field_diffs[self.field_diffs["mode"] == mode]
        c = pd.concat([t.category, f.category]).value_counts()
        return {k: int(v) for k, v in c.sort_index().items()}

    def field_mismatches(self, mode: str = "first_packet") -> dict:
        f = self.field_diffs[self.field_diffs["mode"] == mode]
        names = FIELDS + (("response_time",) if mode == "first_packet" else ())
        return {n: int((f.field == n).sum()) for n in names}

    @property
    def unexplained(self) -> int:
        return int((self.transactions.category == "unexplained").sum()
                   + (self.field_diffs.category == "unexplained").sum())

    def ks(self) -> dict:
        t = self.response_times_ns or self.response_times
        w = t["webtap"]
        d = t["webtap_dedup"]
        return {"ks_first_packet": ks_distance(w, t["tshark_first_packet"]),
                "ks_reassembly": ks_distance(w, t["tshark_reassembly"]),
                "ks_first_packet_dedup": ks_distance(d, t["tshark_first_packet"]),
                "ks_reassembly_dedup": ks_distance(d, t["tshark_reassembly"])}

    def code_difference(self, mode: str = "first_packet", dedup: bool = False) -> dict:
        """Mean and median relative difference of status-code counts (the paper's 2.6 % / 1.3 %)
        over the codes tshark reports (dedup: webtap without retransmitted copies)."""
        col = self.status_counts.get(f"rel_diff_{'dedup_' if dedup else ''}tshark_{mode}_pct")
        v = col.dropna() if col is not None else pd.Series([], dtype=float)
        return {"mean_pct": float(v.mean()) if len(v) else 0.0,
                "median_pct": float(v.median()) if len(v) else 0.0}

    def summary(self) -> dict:
        """The JSON object of `httpanalyzer compare --json`."""
        ks = self.ks()
        out = {**self.counts("first_packet"), "unexplained": self.unexplained,
               "categories": self.categories("first_packet"),
               "field_mismatches": self.field_mismatches("first_packet"),
               "ks_first_packet": _num(ks["ks_first_packet"]),
               "ks_reassembly": _num(ks["ks_reassembly"]),
               "ks_first_packet_dedup": _num(ks["ks_first_packet_dedup"]),
               "ks_reassembly_dedup": _num(ks["ks_reassembly_dedup"]),
               "status_code_difference": self.code_difference("first_packet"),
               "status_code_difference_dedup": self.code_difference("first_packet", dedup=True),
               "modes": {m: {**self.counts(m), "categories": self.categories(m),
                             "field_mismatches": self.field_mismatches(m),
                             "status_code_difference": self.code_difference(m),
                             "status_code_difference_dedup": self.code_difference(m, True)}
                         for m in MODES},
               "webtap_transactions": int(self.per_trace.webtap.sum()) if len(self.per_trace) else 0,
               "tshark_version": self.tshark_version, "tshark_commands": self.commands,
               "skipped": self.skipped,
               "traces": [str(p) for p in self.traces]}
        return out

    def to_json(self) -> str:
        return json.dumps(self.summary(), indent=1, sort_keys=False)

    def markdown(self, figures: dict | None = None) -> str:
        return _markdown(self, figures or {})

    def figures(self) -> dict:
        """name -> matplotlib Figure (Agg)."""

        ks = self.ks()
        return {
            "response_time_ccdf": plot.ccdf(
                {"webtap": self.response_times["webtap"],
                 "tshark first-packet": self.response_times["tshark_first_packet"],
                 "tshark reassembly": self.response_times["tshark_reassembly"]},
                title=f"Response time CCDF (KS: first-packet {ks['ks_first_packet']:.4f}, "
                      f"reassembly {ks['ks_reassembly']:.4f})"),
            "status_codes": plot.counts(self.status_counts, "Status codes, webtap vs tshark",
                                        xlabel="status code"),
            "methods": plot.counts(self.method_counts, "Methods, webtap vs tshark",
                                   xlabel="method"),
            "url_length": plot.url_length(self.url_lengths, title="URL length (CDF, paper Fig. 4)"),
        }

    def write_report(self, directory: str) -> str:
        """Write summary.md, summary.html, figures (PNG) and the tables (CSV) to `directory`;
        return the Markdown path."""
        import matplotlib.pyplot as plt

        os.makedirs(directory, exist_ok=True)
        figs = {}
        for name, fig in self.figures().items():
            fn = f"{name}.png"
            fig.savefig(os.path.join(directory, fn), dpi=110, bbox_inches="tight")
            plt.close(fig)
            figs[name] = fn
        self.transactions[self.transactions.differs].to_csv(
            os.path.join(directory, "differences.csv"), index=False)
        self.field_diffs.to_csv(os.path.join(directory, "field_differences.csv"), index=False)
        self.status_counts.to_csv(os.path.join(directory, "status_codes.csv"))
        self.method_counts.to_csv(os.path.join(directory, "methods.csv"))
        self.per_trace.to_csv(os.path.join(directory, "per_trace.csv"), index=False)
        with open(os.path.join(directory, "summary.json"), "w") as fh:
            fh.write(self.to_json())
        md = self.markdown(figs)
        path = os.path.join(directory, "summary.md")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(md)
        with open(os.path.join(directory, "summary.html"), "w", encoding="utf-8") as fh:
            fh.write(_html(self, figs))
        return path


def _num(x: float):
    return None if x != x else round(float(x), 6)


def _md_table(df: pd.DataFrame, index: bool = True, fmt: str = "{:.2f}") -> str:
    cols = ([df.index.name or ""] if index else []) + [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for idx, row in zip(df.index, df.itertuples(index=False)):
        cells = [str(idx)] if index else []
        for v in row:
            if isinstance(v, float):
                cells.append("" if v != v else fmt.format(v))
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _markdown(c: Comparison, figs: dict) -> str:
    s = c.summary()
    out = ["# webtap vs tshark", "",
           f"tshark: {c.tshark_version.rstrip('.')}. Traces: {len(c.traces)}.", "",
           "Join key: the 0-based frame index of the request's first packet, then of the "
           "response's first packet (4-tuple and ACK checked; docs/ACCURACY.md).", "",
           "## Transactions", "",
           "| mode | both | paired differently | only tshark | only webtap |", "|---|---:|---:|---:|---:|"]
    for m in MODES:
        k = c.counts(m)
        out.append(f"| {m} | {k['both']} | {k['paired_differently']} | {k['only_tshark']} | "
                   f"{k['only_webtap']} |")
    out += ["", "## Categories of difference", "", "| category | first_packet | reassembly | meaning |",
            "|---|---:|---:|---|"]
    cf, cr = c.categories("first_packet"), c.categories("reassembly")
    for k in sorted(set(cf) | set(cr)):
        out.append(f"| {k} | {cf.get(k, 0)} | {cr.get(k, 0)} | {CATEGORIES.get(k, '')} |")
    out += ["", "## Field disagreements (transactions both tools find, same message)", "",
            "| field | first_packet | reassembly |", "|---|---:|---:|"]
    ff, fr = c.field_mismatches("first_packet"), c.field_mismatches("reassembly")
    for k in ff:
        out.append(f"| {k} | {ff[k]} | {fr.get(k, '')} |")
    out += ["", "## Response time", "",
            f"Kolmogorov-Smirnov distance of webtap's response times to tshark first-packet mode: "
            f"{s['ks_first_packet']}; to tshark reassembly mode (`http.time`): {s['ks_reassembly']}. "
            f"Without webtap's records of retransmitted copies (request_repeat/response_repeat, "
            f"which the paper leaves to the analyst): {s['ks_first_packet_dedup']} and "
            f"{s['ks_reassembly_dedup']}.",
            ""]
    if "response_time_ccdf" in figs:
        out += [f"![response time CCDF]({figs['response_time_ccdf']})", ""]
    d1, d2 = c.code_difference("first_packet"), c.code_difference("reassembly")
    out += ["## Status codes", "",
            f"Relative difference of the code counts: first-packet mode mean {d1['mean_pct']:.2f} % "
            f"/ median {d1['median_pct']:.2f} %; reassembly mode mean {d2['mean_pct']:.2f} % / "
            f"median {d2['median_pct']:.2f} % (the paper: 2.6 % / 1.3 %). Without webtap's "
            f"retransmitted copies: first-packet mean "
            f"{c.code_difference('first_packet', True)['mean_pct']:.2f} % / median "
            f"{c.code_difference('first_packet', True)['median_pct']:.2f} %.", "",
            _md_table(c.status_counts.head(30)), ""]
    if "status_codes" in figs:
        out += [f"![status codes]({figs['status_codes']})", ""]
    out += ["## Methods", "", _md_table(c.method_counts), ""]
    if "methods" in figs:
        out += [f"![methods]({figs['methods']})", ""]
    out += ["## URL length", ""]
    for k, v in c.url_lengths.items():
        v = np.asarray(v)
        if len(v):
            out.append(f"- {k}: {len(v)} URLs, mean {v.mean():.1f}, median {np.median(v):.0f}, "
                       f"max {v.max()} characters")
    if "url_length" in figs:
        out += ["", f"![URL length]({figs['url_length']})"]
    out += ["", "## tshark command lines", ""] + [f"    {x}" for x in c.commands[:20]]
    if len(c.commands) > 20:
        out.append(f"    ... ({len(c.commands)} in all)")
    out += ["", f"unexplained differences: {c.unexplained}", ""]
    return "\n".join(out)


def _html(c: Comparison, figs: dict) -> str:
    k = {m: c.counts(m) for m in MODES}
    cat = pd.DataFrame({m: pd.Series(c.categories(m), dtype="int64") for m in MODES}).fillna(0)
    fm = pd.DataFrame({m: pd.Series(c.field_mismatches(m), dtype="int64") for m in MODES})
    parts = ["<!doctype html><meta charset='utf-8'><title>webtap vs tshark</title>",
             "<h1>webtap vs tshark</h1>",
             f"<p>tshark: {html.escape(c.tshark_version)}. Traces: {len(c.traces)}.</p>",
             "<h2>Transactions</h2>", pd.DataFrame(k).T.to_html(),
             "<h2>Categories of difference</h2>", cat.to_html(),
             "<h2>Field disagreements</h2>", fm.to_html(),
             "<h2>Response time</h2>", f"<p>{html.escape(str(c.ks()))}</p>"]
    parts += [f"<p><img src='{f}' alt='{n}'></p>" for n, f in figs.items()]
    parts += ["<h2>Status codes</h2>", c.status_counts.to_html(float_format="%.2f"),
              "<h2>Methods</h2>", c.method_counts.to_html(float_format="%.2f"),
              "<h2>tshark command lines</h2><pre>",
              html.escape("\n".join(c.commands)), "</pre>",
              f"<p>unexplained differences: {c.unexplained}</p>"]
    return "\n".join(parts)
