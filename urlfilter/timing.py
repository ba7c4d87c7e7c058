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
* ``t_proc_budget_ns`` = rtt_cs - rtt_cf: the largest T_proc with which the filter still wins,
  from the trace alone (NaN without a handshake).

Reproducible output (issue 30): every column but ``t_proc_ns``, ``margin_ns`` and ``win`` comes
from the trace; those three come from the match + forge time measured on this machine unless a
T_proc is given. ``urlfilter timing`` therefore writes them only with ``--t-proc-us`` (a given
T_proc: the same bytes on every run) or, under the names in ``MEASURED_COLUMNS``, with
``--measured``; its default output is the trace's columns and ``t_proc_budget_ns``.

Connections whose handshake was not in the trace are reported with ``handshake`` False and
no verdict (NaN margin). One row per connection: its first GET that reached the matcher.

TLS (issue 18): the same, the ClientHello in the GET's place and the ServerHello as the first
response byte. QUIC: no handshake precedes the client Initial; the forged close and the server's
Initial leave the filter's position towards the client on the same path, so the race is decided
there: ``rtt_fs_ns`` = t(first server Initial answering the client Initial, from the server's
address and port) - t(client Initial), rtt_cf = server_wait = 0, rtt_cs = rtt_fs, margin =
rtt_fs - t_proc; ``handshake`` says whether that server Initial was in the trace. Column
``proto`` (http | tls | quic) tells the kinds apart.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from urlfilter.analyzer import Blacklist, UrlAnalyzer, load_blacklist
from webtap._ext import dissect as _dissect
from webtap.records.message import MESSAGE_DTYPE
from webtap.pipeline import Pipeline

__all__ = ["timing", "summary", "report_columns", "MEASURED_COLUMNS"]

#: the report's columns that depend on T_proc, and their names when T_proc was measured here
MEASURED_COLUMNS = {"t_proc_ns": "measured_t_proc_ns", "margin_ns": "measured_margin_ns",
                    "win": "measured_win"}


def report_columns(df: pd.DataFrame, *, t_proc_given: bool, measured: bool) -> pd.DataFrame:
    """What `urlfilter timing` writes (module docstring): the T_proc columns as they are when a
    T_proc was given, renamed to MEASURED_COLUMNS when measured and asked for, else left out."""
    if t_proc_given:
        return df
    if measured:
        return df.rename(columns=MEASURED_COLUMNS)
    return df.drop(columns=list(MEASURED_COLUMNS))


def timing(traces, blacklist, *, t_proc_ns=None, bpf: str | None = None,
           verify_checksums: bool = False, progress: bool | None = False,
           with_totals: bool = False):
    """One row per connection with a GET: RTTs, T_proc, margin and `win` (see module docstring).

    t_proc_ns: None (measured match + forge time per GET), a number (the same for every
    connection), or a DataFrame with columns src_port, t_proc_ns (per client port).
    progress: a bar per file on stderr (None: when stderr is a terminal). with_totals: return
    (DataFrame, webtap.stream.Totals), whose unreadable files are skipped instead of raising."""

    bl = blacklist if isinstance(blacklist, Blacklist) else load_blacklist(blacklist)
    an = UrlAnalyzer(bl, forge=True, verify_checksums=verify_checksums, handshakes=True,
                     time_forge_all=True, records_at_end=True)
    try:
        totals = Pipeline(traces, [an], bpf=bpf, progress=progress,
                          skip_unreadable=with_totals).run()
    except KeyboardInterrupt as exc:
        # Ctrl-C / SIGTERM: the connections so far ride on the exception (exc.partial), for a
        # caller that keeps what it had (the command line writes OUT.partial.EXT)
        try:
            an.finish()                    # as at the end of the input (connection times)
            exc.partial = _report(an, t_proc_ns)
        except Exception:                  # noqa: BLE001 - the interruption is what counts
            exc.partial = None
        raise
    df = _report(an, t_proc_ns)
    return (df, totals) if with_totals else df


def _report(an: UrlAnalyzer, t_proc_ns=None) -> pd.DataFrame:
    df = an.to_pandas()
    ct = an.connection_times()
    if len(df) == 0:
        return pd.DataFrame(columns=["ts_ns", "proto", "src_ip", "src_port", "dst_ip", "dst_port", "url", "hit",
                                     "handshake", "rtt_fs_ns", "rtt_cf_ns", "server_wait_ns",
                                     "rtt_cs_ns", "t_proc_budget_ns", "t_proc_ns", "margin_ns", "win"])
    seen = (ct["state"] & 7) == 7             # SYN, SYN/ACK and ACK all seen
    rtt_fs = np.where(seen, ct["t_synack"] - ct["t_syn"], 0)
    rtt_cf = np.where(seen, ct["t_ack"] - ct["t_synack"], 0)
    has_resp = seen & ((ct["state"] & 24) == 24)
    wait = np.where(has_resp, np.maximum(ct["t_resp"] - ct["t_req"] - rtt_fs, 0), 0)
    out = df[["ts_ns", "proto", "src_ip", "src_port", "dst_ip", "dst_port", "url", "hit"]].copy()
    quic = (df["proto"] == "quic").to_numpy()
    if quic.any():
        t_si = _server_initial_times(an, df[quic])
        got = ~np.isnan(t_si)
        rows = np.flatnonzero(quic)
        seen = seen.copy()
        seen[rows] = got
        rtt_fs = rtt_fs.astype(np.int64)
        rtt_cf = rtt_cf.astype(np.int64)
        rtt_fs[rows] = np.where(got, np.nan_to_num(t_si) - df["ts_ns"].to_numpy()[quic], 0)
        rtt_cf[rows] = 0
        has_resp = has_resp.copy()
        has_resp[rows] = got
        wait = wait.copy()
        wait[rows] = 0
    out["handshake"] = seen
    out["response_seen"] = has_resp
    out["rtt_fs_ns"] = rtt_fs
    out["rtt_cf_ns"] = rtt_cf
    out["server_wait_ns"] = wait
    out["rtt_cs_ns"] = rtt_cf + rtt_fs + wait
    out["t_proc_budget_ns"] = np.where(seen, rtt_fs + wait, np.nan)     # rtt_cs - rtt_cf
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


def _server_initial_times(an: UrlAnalyzer, q: pd.DataFrame) -> np.ndarray:
    """For each QUIC record: capture time of the first Initial from its server's address and port
    to its client's, at or after the client Initial (NaN: none in the trace)."""

    if not an.server_initials:
        return np.full(len(q), np.nan)
    si = np.concatenate(an.server_initials)
    full = np.zeros(len(si), MESSAGE_DTYPE)
    for f in si.dtype.names:
        full[f] = si[f]
    s = pd.DataFrame({"t_si": si["ts_ns"], "dst_ip": _dissect.ip_to_arrow(full, "src_ip").to_pandas(),
                      "src_ip": _dissect.ip_to_arrow(full, "dst_ip").to_pandas(),
                      "dst_port": si["src_port"].astype(int), "src_port": si["dst_port"].astype(int)})
    r = q[["ts_ns", "src_ip", "src_port", "dst_ip", "dst_port"]].reset_index(drop=True).copy()
    r["src_port"] = r["src_port"].astype(int)
    r["dst_port"] = r["dst_port"].astype(int)
    r["row"] = np.arange(len(r))
    m = r.merge(s, on=["src_ip", "src_port", "dst_ip", "dst_port"], how="left")
    m = m[m["t_si"] >= m["ts_ns"]].groupby("row")["t_si"].min()
    out = np.full(len(r), np.nan)
    out[m.index.to_numpy()] = m.to_numpy()
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
