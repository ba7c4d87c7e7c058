"""Exchanges (httpanalyzer.tls_exchange) against the decrypted truth (tests/tlsx/truth.py), per
trace, every difference in a category (issue 33).

    python -m tests.tlsx.compare PCAP KEYLOG [PCAP KEYLOG ...]

HTTP/1.1 over TLS, per truth request (its first packet):
  equal              an exchange starts at the request's first packet and its response at the
                     response's first packet: response time equal to the truth's within 1 us
  response_differs   an exchange starts there but pairs another server packet
  unmatched          an exchange starts there without a response (gc / end / cap)
  pipelined          the request shares the ACK of an earlier request in flight (the paper's
                     rule makes one exchange of the burst: HTTP/1.1 pipelining)
  not_found          no exchange starts at the request's first packet
and every exchange that is no truth request: `extra` (by unmatched_reason).

h2 (several requests per exchange; SETTINGS, WINDOW_UPDATE, PING on their own): per connection,
whether exchange 0 is the first request HEADERS to the first response HEADERS (`first_equal`),
how many exchanges start at a request's HEADERS packet and end at that stream's response HEADERS
packet (`request_exchanges`), and the share of requests an exchange stands for
(requests / matched exchanges).
"""
from __future__ import annotations

import collections
import json
import sys

import numpy as np

from tests.tlsx.truth import truth

US = 1000


def compare(pcap, keylog) -> dict:
    from httpanalyzer.tls_exchange import iter_exchanges

    conns = truth(pcap, keylog)
    tab, _ = iter_exchanges(pcap)
    ex = tab.to_pandas()
    h1 = [c for c in conns if c.alpn != "h2"]
    h2 = [c for c in conns if c.alpn == "h2"]
    out: dict = {"trace": str(pcap), "exchanges": len(ex)}
    by_req = {int(f): row for f, row in zip(ex["request_frame"].fillna(0).astype(np.int64), ex.itertuples())
              if f}
    used = set()
    if h1:
        cats = collections.Counter()
        for c in h1:
            rq = [m for m in c.messages if m.direction == "request"]
            rs = [m for m in c.messages if m.direction == "response"]
            for a, b in zip(rq, rs):
                row = by_req.get(a.frame)
                if row is None:
                    # the same burst as an earlier request: no new ACK between them
                    earlier = [m for m in rq if m.frame < a.frame]
                    cats["pipelined" if earlier and _same_ack_burst(pcap, earlier[-1].frame, a.frame)
                         else "not_found"] += 1
                    continue
                used.add(a.frame)
                if not row.matched:
                    cats["unmatched"] += 1
                elif int(row.response_frame) == b.frame and \
                        abs(row.response_time.value - (b.ts_ns - a.ts_ns)) < US:
                    cats["equal"] += 1
                else:
                    cats["response_differs"] += 1
        n = sum(cats.values())
        out["http1"] = {"requests": n, **dict(sorted(cats.items())),
                        "equal_share": round(cats["equal"] / n, 4) if n else None}
    if h2:
        first_equal = 0
        deltas = []
        req_ex = 0
        nreq = 0
        for c in h2:
            rq = {m.stream_id: m for m in c.messages if m.direction == "request"}
            rs = {m.stream_id: m for m in c.messages if m.direction == "response"}
            nreq += len(rq)
            port = c.client[1]
            mine = ex[(ex["client_port"] == port) & ex["matched"]]
            first_rq = min(rq.values(), key=lambda m: m.frame)
            first_rs = min(rs.values(), key=lambda m: m.frame)
            e0 = mine[mine["exchange_index"] == 0]
            if len(e0):
                # how far exchange 0 is from the first request's and first response's HEADERS
                deltas.append({"request_us": (e0["request_ts"].iloc[0].value - first_rq.ts_ns) / US,
                               "response_us": (e0["response_ts"].iloc[0].value - first_rs.ts_ns) / US,
                               "truth_us": (first_rs.ts_ns - first_rq.ts_ns) / US,
                               "exchange_us": e0["response_time"].iloc[0].value / US})
            if len(e0) and int(e0["request_frame"].iloc[0]) == first_rq.frame and \
                    int(e0["response_frame"].iloc[0]) == first_rs.frame:
                first_equal += 1
            pairs = {(m.frame, rs[s].frame) for s, m in rq.items() if s in rs}
            req_ex += sum((int(a), int(b)) in pairs for a, b in zip(mine["request_frame"], mine["response_frame"]))
            used |= {m.frame for m in rq.values()}
        matched = int(ex[ex["h2"].fillna(False).astype(bool)]["matched"].sum())
        out["h2"] = {"connections": len(h2), "first_equal": first_equal, "requests": nreq,
                     "matched_exchanges": matched, "request_exchanges": req_ex,
                     "requests_per_exchange": round(nreq / matched, 3) if matched else None,
                     "exchange0": deltas}
    extra = ex[~ex["request_frame"].fillna(0).astype(np.int64).isin(used)]
    if h1 and not h2:
        out["extra"] = dict(sorted(collections.Counter(
            extra["unmatched_reason"].fillna("matched")).items()))
    return out


def _same_ack_burst(pcap, f1: int, f2: int) -> bool:
    """Whether frames f1 and f2 (client packets) carry the same ACK (scapy, independent)."""
    from scapy.all import TCP, PcapReader

    acks = {}
    with PcapReader(str(pcap)) as rd:
        for i, p in enumerate(rd, 1):
            if i in (f1, f2):
                acks[i] = p[TCP].ack
            if i >= max(f1, f2):
                break
    return acks.get(f1) == acks.get(f2)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or len(argv) % 2:
        print(__doc__, file=sys.stderr)
        return 2
    for p, k in zip(argv[::2], argv[1::2]):
        print(json.dumps(compare(p, k)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
