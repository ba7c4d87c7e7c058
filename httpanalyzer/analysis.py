"""What the paper plots from the records, as numbers (pandas/NumPy); httpanalyzer.plot draws them.

    import httpanalyzer
    from httpanalyzer import analysis
    df = httpanalyzer.analyze("trace.pcap")
    analysis.ccdf(analysis.response_times_s(df))      # x (s), p = P(response time >= x)
    analysis.slowest(df, by="host")                    # count, median, p95, max per host (s)
    analysis.unmatched_over_time(df)                   # unmatched records per time bin
    analysis.content_type_counts(httpanalyzer.analyze("trace.pcap", headers=["Content-Type"]))

Every function takes the DataFrame of `httpanalyzer.analyze` (the schema of
webtap.records.http) and returns a DataFrame or an array; none re-reads a trace.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["response_times_s", "ccdf", "status_counts", "method_counts", "url_lengths", "slowest",
           "unmatched_over_time", "summary", "media_types", "content_type_counts"]


def response_times_s(df: pd.DataFrame) -> np.ndarray:
    """Response times (seconds, float) of the paired records, in record order."""
    rt = df.loc[df["matched"].fillna(False).astype(bool), "response_time"]
    return (rt.to_numpy(dtype="timedelta64[ns]").astype(np.int64) / 1e9).astype(float)


def ccdf(values) -> pd.DataFrame:
    """Empirical CCDF: one row per distinct value x (ascending) with p = P(X >= x).

    P(X >= x) rather than P(X > x) so that every point, the largest value included, has p > 0
    and can be drawn on a log-log plot: the curve starts at (min, 1) and ends at (max, k/n),
    k = how many times the maximum occurs. NaNs are dropped; p is non-increasing."""
    x = np.asarray(values, dtype=float)
    x = np.sort(x[np.isfinite(x)])
    n = len(x)
    if n == 0:
        return pd.DataFrame({"x": np.zeros(0), "p": np.zeros(0)})
    ux, first = np.unique(x, return_index=True)
    return pd.DataFrame({"x": ux, "p": (n - first) / n})


def _counts(s: pd.Series, name: str) -> pd.DataFrame:
    s = s.dropna()
    vc = s.astype(str).value_counts() if len(s) else pd.Series([], dtype="int64")
    out = pd.DataFrame({"count": vc.astype("int64")})
    tot = out["count"].sum()
    out["pct"] = 100.0 * out["count"] / tot if tot else 0.0
    return out.rename_axis(name)


def status_counts(df: pd.DataFrame) -> pd.DataFrame:
    """Responses per status code (count, pct), most frequent first."""
    return _counts(df["status"], "status")


def method_counts(df: pd.DataFrame) -> pd.DataFrame:
    """Requests per method (count, pct), most frequent first."""
    return _counts(df["method"], "method")


def media_types(values: pd.Series) -> pd.Series:
    """The media type of Content-Type values (RFC 9110 8.3.1: type "/" subtype, case-insensitive;
    the parameters after ';' and the whitespace around them dropped): 'text/html;
    charset=UTF-8' -> 'text/html'. A null stays null; a value without '/' stays as written,
    lower-cased (it is not a media type, and the table should show it)."""
    s = values.astype("string")
    return s.str.split(";", n=1).str[0].str.strip().str.lower()


def content_type_counts(df: pd.DataFrame) -> pd.DataFrame:
    """Responses per media type (count, pct), most frequent first, from the response_content_type
    column that `headers=["Content-Type"]` (`--headers Content-Type`) adds: what Lin et al.'s
    gateway checks as MIME types, seen by a pass-by analyser (issue 34). Responses whose first
    packet holds no Content-Type are not counted."""
    if "response_content_type" not in df.columns:
        raise KeyError("no response_content_type column: analyze with headers=['Content-Type']")
    return _counts(media_types(df["response_content_type"]), "media_type")


def url_lengths(df: pd.DataFrame) -> np.ndarray:
    """Length in characters of every request's URI as the first packet holds it (the paper's
    Fig. 4 counts the request-target; records flagged uri_truncated are cut at the packet)."""
    u = df["uri"].dropna()
    return u.astype(str).str.len().to_numpy(dtype=np.int64)


def slowest(df: pd.DataFrame, by: str = "host", top: int = 10, min_count: int = 1) -> pd.DataFrame:
    """The `top` values of `by` (host, uri, server_ip, ...) with the largest median response
    time over their paired records: count, median_s, p95_s, max_s (seconds); ties by max.
    min_count: leave out values with fewer paired records (a host seen once is an anecdote)."""
    p = df[df["matched"].fillna(False).astype(bool)]
    key = p[by].astype(object).where(p[by].notna(), "(none)")
    t = pd.DataFrame({by: key.to_numpy(), "s": response_times_s(p)})
    g = t.groupby(by, sort=False)["s"]
    out = pd.DataFrame({"count": g.size(), "median_s": g.median(), "p95_s": g.quantile(0.95),
                        "max_s": g.max()})
    out = out[out["count"] >= min_count]
    return out.sort_values(["median_s", "max_s"], ascending=False, kind="stable").head(top)


def _record_time(df: pd.DataFrame) -> pd.Series:
    """The time of a record: its request's, or its response's when it has no request."""
    return df["request_ts"].where(df["request_ts"].notna(), df["response_ts"])


def unmatched_over_time(df: pd.DataFrame, bins: int = 40) -> pd.DataFrame:
    """Records per time bin (index: bin start, UTC): `records` (all), `request_only` (requests
    without a response) and `response_only` (responses without a request), and
    `unmatched_pct` = 100 * unmatched / records. `bins` equal bins over the trace's span."""
    cols = ["records", "request_only", "response_only", "unmatched_pct"]
    t = _record_time(df)
    ok = t.notna()
    if not ok.any():
        return pd.DataFrame(columns=cols, index=pd.DatetimeIndex([], tz="UTC", name="time"))
    ns = t[ok].astype("int64").to_numpy()
    lo, hi = int(ns.min()), int(ns.max())
    width = max(1, -(-(hi - lo + 1) // max(1, bins)))     # ceil: the last record falls in a bin
    idx = (ns - lo) // width
    nb = int(idx.max()) + 1
    outcome = df.loc[ok, "outcome"].astype(str).to_numpy()
    out = pd.DataFrame({
        "records": np.bincount(idx, minlength=nb),
        "request_only": np.bincount(idx, weights=outcome == "request_only", minlength=nb).astype(np.int64),
        "response_only": np.bincount(idx, weights=outcome == "response_only", minlength=nb).astype(np.int64),
    }, index=pd.DatetimeIndex(pd.to_datetime(lo + np.arange(nb, dtype=np.int64) * width, utc=True),
                              name="time"))
    with np.errstate(divide="ignore", invalid="ignore"):
        out["unmatched_pct"] = np.where(out["records"] > 0,
                                        100.0 * (out["request_only"] + out["response_only"])
                                        / out["records"], 0.0)
    out.attrs["bin_s"] = width / 1e9
    return out


def summary(df: pd.DataFrame) -> dict:
    """A few headline numbers of the records."""
    rt = response_times_s(df)
    oc = df["outcome"].astype(str)
    return {"records": int(len(df)), "paired": int(len(rt)),
            "request_only": int((oc == "request_only").sum()),
            "response_only": int((oc == "response_only").sum()),
            "response_time_median_s": float(np.median(rt)) if len(rt) else float("nan"),
            "response_time_max_s": float(rt.max()) if len(rt) else float("nan"),
            "hosts": int(df["host"].nunique())}
