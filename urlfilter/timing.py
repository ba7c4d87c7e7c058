"""The paper's timing condition, per connection: T_proc + RTT(client, filter) < RTT(client, server).

From a trace captured at the filter's position (PAPERS.md section 2; the filter sees the handshake
between client and server):

* ``rtt_fs_ns``  RTT(filter, server) = t(SYN/ACK) - t(SYN)
* ``rtt_cf_ns``  RTT(client, filter) = t(ACK) - t(SYN/ACK)
* ``server_wait_ns``  time the server took to answer beyond the network: t(first response byte)
  - t(first request byte) - rtt_fs, when a response was seen (0 otherwise). The handshake is
  answered by the kernel, so it does not contain the application's think time; without this term
  the paper's RTT(client, server) would ignore the part of the race that is often the largest.
* ``rtt_cs_ns``  RTT(client, server) = rtt_cf + rtt_fs + server_wait
* ``t_proc_ns``  match time + forge time measured for that GET in the C loops (or a value the
  caller gives, e.g. the capture-to-injection time a live run measured)
* ``margin_ns`` = rtt_cs - (t_proc + rtt_cf); the filter wins the race when margin > 0.

Connections whose handshake was not in the trace are reported with ``handshake`` False and
no verdict (NaN margin). One row per connection: its first GET that reached the matcher.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from urlfilter.analyzer import Blacklist, UrlAnalyzer, load_blacklist

__all__ = ["timing", "summary"]


def timing(traces, blacklist, *, t_proc_ns=None, bpf: str | None = None,
           verify_checksums: bool = False, progress: bool | None = False,
           with_totals: bool = False):
    """One row per connection with a GET: RTTs, T_proc, margin and `win` (see module docstring).

    t_proc_ns: None (measured match + forge time per GET), a number (the same for every
    connection), or a DataFrame with columns src_port, t_proc_ns (per client port).
    progress: a bar per file on stderr (None: when stderr is a terminal). with_totals: return
    (DataFrame, webtap.stream.Totals), whose unreadable files are skipped instead of raising."""
    from webtap.stream import run

    bl = blacklist if isinstance(blacklist, Blacklist) else load_blacklist(blacklist)
    an = UrlAnalyzer(bl, forge=True, verify_checksums=verify_checksums, handshakes=True,
                     time_forge_all=True)
    totals = run(traces, [an], bpf=bpf, progress=progress, skip_unreadable=with_totals)
    df = _report(an, t_proc_ns)
    return (df, totals) if with_totals else df


def _report(an: UrlAnalyzer, t_proc_ns=None) -> pd.DataFrame:
    df = an.to_pandas()
    ct = an.connection_times()
    if len(df) == 0:
        return pd.DataFrame(columns=["ts_ns", "src_ip", "src_port", "dst_ip", "dst_port", "url", "hit",
                                     "handshake", "rtt_fs_ns", "rtt_cf_ns", "server_wait_ns",
                                     "rtt_cs_ns", "t_proc_ns", "margin_ns", "win"])
    seen = (ct["state"] & 7) == 7             # SYN, SYN/ACK and ACK all seen
    rtt_fs = np.where(seen, ct["t_synack"] - ct["t_syn"], 0)
    rtt_cf = np.where(seen, ct["t_ack"] - ct["t_synack"], 0)
    has_resp = seen & ((ct["state"] & 24) == 24)
    wait = np.where(has_resp, np.maximum(ct["t_resp"] - ct["t_req"] - rtt_fs, 0), 0)
    out = df[["ts_ns", "src_ip", "src_port", "dst_ip", "dst_port", "url", "hit"]].copy()
    out["handshake"] = seen
    out["response_seen"] = has_resp
    out["rtt_fs_ns"] = rtt_fs
    out["rtt_cf_ns"] = rtt_cf
    out["server_wait_ns"] = wait
    out["rtt_cs_ns"] = rtt_cf + rtt_fs + wait
    if t_proc_ns is None:
        tp = (df["match_ns"] + df["forge_ns"]).to_numpy()
    elif isinstance(t_proc_ns, pd.DataFrame):
        tp = out[["src_port"]].merge(t_proc_ns[["src_port", "t_proc_ns"]].drop_duplicates("src_port"),
                                     on="src_port", how="left")["t_proc_ns"].to_numpy(dtype=float)
    else:
        tp = np.full(len(out), float(t_proc_ns))
    out["t_proc_ns"] = tp
    margin = out["rtt_cs_ns"] - (out["t_proc_ns"] + out["rtt_cf_ns"])
    out["margin_ns"] = np.where(seen & np.isfinite(out["t_proc_ns"].astype(float)), margin, np.nan)
    out["win"] = out["margin_ns"] > 0
    # one row per connection: the first GET of each 4-tuple
    out = out.sort_values("ts_ns", kind="stable").drop_duplicates(
        ["src_ip", "src_port", "dst_ip", "dst_port"]).reset_index(drop=True)
    return out


def summary(df: pd.DataFrame) -> dict:
    """Counts and the share of connections (with a handshake) the filter would win."""
    judged = df[df["margin_ns"].notna()]
    n = len(judged)
    won = int(judged["win"].sum()) if n else 0
    m = judged["margin_ns"].to_numpy(dtype=float)
    return {
        "connections": int(len(df)),
        "with_handshake": int(n),
        "won": won,
        "lost": n - won,
        "share_won": won / n if n else float("nan"),
        "margin_ms_p10": float(np.percentile(m, 10)) / 1e6 if n else float("nan"),
        "margin_ms_p50": float(np.percentile(m, 50)) / 1e6 if n else float("nan"),
        "t_proc_us_p50": float(np.nanmedian(judged["t_proc_ns"])) / 1e3 if n else float("nan"),
    }
