"""Figures of TLS/QUIC handshake records (httpanalyzer.analyze_tls): handshake-time CCDF (TCP vs
QUIC), negotiated TLS versions, ALPN shares, top SNIs, ECH share and ClientHello segment counts.
`tls_figures(df)` -> {name: matplotlib Figure}; `httpanalyzer tls ... --plots DIR` saves them.
`exchange_figures(xdf)`: the response-time CCDF of the exchanges inside TLS (issue 33) per SNI
and per ALPN (`httpanalyzer tls --exchanges-out X --plots DIR`)."""
from __future__ import annotations

import pandas as pd

from httpanalyzer.plot import _figure, ccdf

VERSION_NAMES = {"0x0300": "SSL 3.0", "0x0301": "TLS 1.0", "0x0302": "TLS 1.1",
                 "0x0303": "TLS 1.2", "0x0304": "TLS 1.3"}


def summary_tables(df: pd.DataFrame, top: int = 10) -> dict:
    """The counts behind the figures, as tables (also what the notebook prints)."""
    paired = df[df["matched"]]
    ver = paired["server_version"].map(lambda v: VERSION_NAMES.get(v, f"other ({v})"))
    first_alpn = df["alpn"].map(lambda a: a[0] if a is not None and len(a) else "(none)")
    return {
        "versions": ver.value_counts().rename("handshakes"),
        "alpn": (first_alpn.value_counts(normalize=True) * 100).rename("percent of ClientHellos"),
        "sni": df["sni"].fillna("(no SNI)").value_counts().head(top).rename("ClientHellos"),
        "ech": (df["ech"].dropna().astype(bool).value_counts(normalize=True) * 100).rename("percent"),
        "segments": df["ch_segments"].dropna().astype(int).value_counts().sort_index().rename("ClientHellos"),
        "transport": df["transport"].value_counts().rename("handshakes"),
    }


def _bars(series: pd.Series, title: str, ylabel: str, horizontal: bool = False):
    fig = _figure(figsize=(6.4, 4.0))
    ax = fig.add_subplot()
    labels = [str(i) for i in series.index]
    if horizontal:
        ax.barh(labels[::-1], series.to_numpy()[::-1])
        ax.set_xlabel(ylabel)
    else:
        ax.bar(labels, series.to_numpy())
        ax.set_ylabel(ylabel)
        ax.tick_params(axis="x", labelrotation=30)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig


def tls_figures(df: pd.DataFrame, top: int = 10) -> dict:
    t = summary_tables(df, top)
    paired = df[df["matched"]]
    samples = {tr: paired.loc[paired["transport"] == tr, "handshake_time"].dt.total_seconds().to_numpy()
               for tr in ("tcp", "quic")}
    fig = ccdf(samples, title="Handshake time CCDF (ClientHello -> ServerHello)")
    fig.axes[0].set_xlabel("handshake time (s)")
    fig.axes[0].set_ylabel("P(handshake time >= x)")
    return {
        "handshake_time_ccdf": fig,
        "tls_versions": _bars(t["versions"], "Negotiated version (paired handshakes)", "handshakes"),
        "alpn_shares": _bars(t["alpn"], "First ALPN offered (h2, http/1.1, h3, ...)", "% of ClientHellos"),
        "top_sni": _bars(t["sni"], f"Top {top} SNIs", "ClientHellos", horizontal=True),
        "ech_share": _bars(t["ech"].rename(index={True: "ECH extension", False: "no ECH"}),
                           "encrypted_client_hello present", "% of ClientHellos"),
        "ch_segments": _bars(t["segments"], "ClientHello segments / Initials", "ClientHellos"),
    }


def exchange_figures(xdf: pd.DataFrame, top: int = 6) -> dict:
    """Response-time CCDFs of the matched exchanges (httpanalyzer.tls_exchange), one curve per
    SNI (the `top` with most exchanges) and one per ALPN (the server's choice where visible,
    else the client's first offer, marked '(offered)'; h2 exchanges are bursts, not requests:
    docs/TLS.md "Exchanges")."""
    m = xdf[xdf["matched"]]
    secs = m["response_time"].dt.total_seconds()
    sni = m["sni"].fillna("(no SNI)")
    by_sni = {k: secs[sni == k].to_numpy() for k in sni.value_counts().head(top).index}
    offered = m["alpn_offered"].map(lambda a: f"{a[0]} (offered)" if a is not None and len(a) else "(none)")
    alpn = m["alpn"].where(m["alpn"].notna(), offered)
    by_alpn = {k: secs[alpn == k].to_numpy() for k in alpn.value_counts().head(top).index}
    out = {}
    for name, samples, what in (("exchange_time_ccdf_sni", by_sni, "SNI"),
                                ("exchange_time_ccdf_alpn", by_alpn, "ALPN")):
        fig = ccdf(samples, title=f"TLS exchange response time CCDF per {what}")
        fig.axes[0].set_xlabel("response time (s): request's first packet -> response's first packet")
        fig.axes[0].set_ylabel("P(response time >= x)")
        out[name] = fig
    return out
