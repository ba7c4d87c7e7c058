"""Exchanges inside TLS against the decrypted truth (issue 33): `httpanalyzer compare --tls
--keylog KEYLOG TRACE...`.

webtap's exchanges (httpanalyzer.tls_exchange: no keys, the paper's first-packet rule) are
compared with the truth of httpanalyzer.tls_truth (tshark's packets, every record decrypted with
the key log), per trace; every truth request and every exchange lands in a category.

HTTP/1.1 over TLS, per truth request (its first packet):
  equal              an exchange starts at the request's first packet and its response at the
                     response's first packet: response time equal to the truth's within 1 us
  response_differs   an exchange starts there but pairs another server packet
  unmatched          an exchange starts there without a response (gc / end / cap)
  pipelined          the request shares the ACK of an earlier request of its connection (no
                     new ACK between them: the paper's rule makes one exchange of the burst,
                     as for HTTP/1.1 pipelining)
  not_found          no exchange starts at the request's first packet
and every exchange of an HTTP/1.1 connection that starts at no truth request: `extra`, by
unmatched_reason ("matched" when it has a response).

h2 (several requests per exchange; SETTINGS, WINDOW_UPDATE, PING on their own), per
connection: whether exchange 0 is matched, and then whether it runs from the first request's
HEADERS packet to the first response's HEADERS packet (`first_equal`) and how far each end is
from them (`exchange0`); how many matched exchanges start at a request's HEADERS packet and end
at that stream's response HEADERS packet (`request_exchanges`); the share of requests an
exchange stands for (requests / matched exchanges). No claim beyond these figures.

Exchanges of connections the truth left out (no keys in the log, an unsupported suite; the
truth's `skipped` says why) or does not know are counted as `not_in_truth`, never compared.
"""
from __future__ import annotations

import collections

import numpy as np
import pandas as pd

from httpanalyzer.tls_exchange import iter_exchanges
from httpanalyzer.tls_truth import truth as decrypted_truth

#: response times equal within this many nanoseconds
EQUAL_NS = 1000

H1_CATEGORIES = ("equal", "response_differs", "unmatched", "pipelined", "not_found")


def _conn_of(ex: pd.DataFrame, conns) -> np.ndarray:
    """For each exchange, the index of its truth connection (-1 when none): same addresses and
    ports, the latest connection whose SYN comes before the exchange's ClientHello."""
    by_tuple = collections.defaultdict(list)
    for i, c in enumerate(conns):
        by_tuple[(c.client[0], c.client[1], c.server[0], c.server[1])].append((c.syn_frame, i))
    out = np.full(len(ex), -1, dtype=np.int64)
    for j, r in enumerate(ex[["client_ip", "client_port", "server_ip", "server_port",
                              "client_hello_frame", "request_frame", "response_frame"]].itertuples(index=False)):
        cands = by_tuple.get((r.client_ip, int(r.client_port), r.server_ip, int(r.server_port)), [])
        at = next((int(x) for x in (r.client_hello_frame, r.request_frame, r.response_frame)
                   if pd.notna(x) and int(x)), 0)
        best = [i for f, i in cands if f <= at]
        if best:
            out[j] = best[-1]
    return out


def compare_exchanges(pcap, keylog, tshark: str = "tshark", gc_timeout: float = 60.0) -> dict:
    """The comparison of one trace (module docstring), as a JSON-ready dict."""
    t = decrypted_truth(pcap, keylog, tshark=tshark)
    tab, _ = iter_exchanges(str(pcap), gc_timeout=gc_timeout)
    ex = tab.to_pandas()
    conns = t.connections
    cidx = _conn_of(ex, conns)
    in_truth = np.array([i >= 0 and conns[i].skipped in ("", "capture_hole", "cut") for i in cidx],
                        dtype=bool)
    out: dict = {"trace": str(pcap), "connections": len(conns), "skipped": t.skipped,
                 "exchanges": int(len(ex)), "not_in_truth": int((~in_truth).sum())}
    rq_frame = ex["request_frame"].fillna(0).astype(np.int64).to_numpy()
    by_req = {int(f): j for j, f in enumerate(rq_frame) if f and in_truth[j]}
    h1 = [i for i, c in enumerate(conns) if c.messages and c.alpn != "h2"]
    h2 = [i for i, c in enumerate(conns) if c.messages and c.alpn == "h2"]
    if h1:
        cats = collections.Counter({k: 0 for k in H1_CATEGORIES})
        used = set()
        for i in h1:
            c = conns[i]
            rq = [m for m in c.messages if m.direction == "request"]
            rs = [m for m in c.messages if m.direction == "response"]
            for n, a in enumerate(rq):
                b = rs[n] if n < len(rs) else None
                j = by_req.get(a.frame)
                if j is None or cidx[j] != i:
                    earlier = [m for m in rq[:n] if m.frame < a.frame]
                    cats["pipelined" if earlier and t.acks.get(earlier[-1].frame) == t.acks.get(a.frame)
                         else "not_found"] += 1
                    continue
                used.add(j)
                row = ex.iloc[j]
                if not bool(row["matched"]):
                    cats["unmatched"] += 1
                elif b is not None and int(row["response_frame"]) == b.frame and \
                        abs(row["response_time"].value - (b.ts_ns - a.ts_ns)) < EQUAL_NS:
                    cats["equal"] += 1
                else:
                    cats["response_differs"] += 1
        n = sum(cats.values())
        out["http1"] = {"connections": len(h1), "requests": n, **cats,
                        "equal_share": round(cats["equal"] / n, 4) if n else None}
        h1set = set(h1)
        extra = [j for j in range(len(ex)) if cidx[j] in h1set and j not in used]
        out["extra"] = dict(sorted(collections.Counter(
            "matched" if bool(ex["matched"].iloc[j]) else str(ex["unmatched_reason"].iloc[j])
            for j in extra).items()))
    if h2:
        first_equal = req_ex = nreq = matched_all = e0_matched = 0
        deltas = []
        for i in h2:
            c = conns[i]
            rq = {m.stream_id: m for m in c.messages if m.direction == "request"}
            rs = {m.stream_id: m for m in c.messages if m.direction == "response"}
            nreq += len(rq)
            mine = ex[(cidx == i) & ex["matched"].to_numpy(dtype=bool)]
            matched_all += len(mine)
            e0 = mine[mine["exchange_index"] == 0]
            if not len(e0) or not rq or not rs:
                continue
            e0_matched += 1
            first_rq = min(rq.values(), key=lambda m: m.frame)
            first_rs = min(rs.values(), key=lambda m: m.frame)
            # how far exchange 0 is from the first request's and first response's HEADERS
            deltas.append({"request_us": (e0["request_ts"].iloc[0].value - first_rq.ts_ns) / 1000,
                           "response_us": (e0["response_ts"].iloc[0].value - first_rs.ts_ns) / 1000,
                           "truth_us": (first_rs.ts_ns - first_rq.ts_ns) / 1000,
                           "exchange_us": e0["response_time"].iloc[0].value / 1000})
            if int(e0["request_frame"].iloc[0]) == first_rq.frame and \
                    int(e0["response_frame"].iloc[0]) == first_rs.frame:
                first_equal += 1
            pairs = {(m.frame, rs[s].frame) for s, m in rq.items() if s in rs}
            req_ex += sum((int(a), int(b)) in pairs
                          for a, b in zip(mine["request_frame"], mine["response_frame"]))
        out["h2"] = {"connections": len(h2), "exchange0_matched": e0_matched,
                     "first_equal": first_equal, "requests": nreq,
                     "matched_exchanges": matched_all, "request_exchanges": req_ex,
                     "requests_per_exchange": round(nreq / matched_all, 3) if matched_all else None,
                     "exchange0": deltas}
    return out


def summary_lines(r: dict) -> list[str]:
    """The text form of one trace's comparison."""
    lines = [f"{r['trace']}: {r['connections']} TLS connections, {r['exchanges']} exchanges"
             + (f", {r['not_in_truth']} not in the truth" if r["not_in_truth"] else "")]
    for k, v in r["skipped"].items():
        lines.append(f"  truth skipped {v} connection(s): {k}")
    if "http1" in r:
        h = r["http1"]
        share = "" if h["equal_share"] is None else f" ({100 * h['equal_share']:.1f} % equal)"
        lines.append(f"  HTTP/1.1: {h['requests']} requests in {h['connections']} connection(s){share}")
        for k in H1_CATEGORIES:
            lines.append(f"    {k:18s} {h[k]}")
        for k, v in r.get("extra", {}).items():
            lines.append(f"    extra exchange ({k}) {v}")
    if "h2" in r:
        h = r["h2"]
        lines.append(f"  h2: {h['requests']} requests in {h['connections']} connection(s), "
                     f"{h['matched_exchanges']} matched exchanges "
                     f"({h['requests_per_exchange']} requests per exchange), "
                     f"exchange 0 matched in {h['exchange0_matched']}, first request to first "
                     f"response in {h['first_equal']}, {h['request_exchanges']} exchanges from a "
                     f"request's HEADERS to its response's")
    return lines
