"""Pairs against tshark's first-packet pairing (http.request_in), every difference with a reason
(issue 4; docs/ACCURACY.md, "Pairing"). A test tool: the product's comparison is
`httpanalyzer compare` (transactions, httpanalyzer.compare).

    python -m tests.tools.pair_table [--tshark-messages] TRACE...     # a '|' table

`compare(records, tshark_frames(path))` compares webtap's pairs with tshark's; with
--tshark-messages webtap's pairing table runs on tshark's own messages (isolates pairing from
dissection). tshark runs through httpanalyzer.tshark (flags, exit status).

Frame numbers: tshark's frame.number is 1-based, webtap's request_frame/response_frame 0-based.
"""
from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from httpanalyzer.tshark import tshark_explain, tshark_frames, tshark_messages

#: Reasons a pair can differ between the two tools (docs/ACCURACY.md, "Pairing").
REASONS = {
    "seq_not_ack": "tshark pairs a response whose SEQ is not the request's ACK (it matches "
                   "requests and responses in order within the TCP stream: pipelining, a final "
                   "response after a 1xx tshark counts, a response after a lost one)",
    "webtap_no_request": "webtap has no HTTP message for tshark's request frame (dissector "
                         "disagreement: see the dissect section)",
    "webtap_no_response": "webtap has no HTTP message for tshark's response frame",
    "tshark_no_request_in": "tshark gives this response no http.request_in although a request "
                            "with ACK == its SEQ exists (tshark lost track of the stream, e.g. "
                            "a retransmission or a response before its request)",
    "other_copy": "both tools pair the response, with different copies of a repeated request "
                  "(same 4-tuple and ACK: a TCP retransmission, or an ICMP error quoting the "
                  "request that tshark dissects as HTTP): webtap the oldest, tshark the latest",
    "tshark_not_http": "tshark does not dissect the request or response frame as HTTP: HTTP on "
                       "a port tshark does not decode as HTTP, or a segment tshark's TCP analysis "
                       "takes for a retransmission or out-of-order copy and does not hand to HTTP",
    "retransmission": "webtap pairs a retransmitted copy (flagged request_repeat / "
                      "response_repeat: the paper's duplicate records, which the analyst drops by "
                      "4-tuple and ACK/SEQ); tshark does not dissect retransmissions as HTTP",
    "interim": "an interim 1xx or the final response after it: tshark and webtap count 1xx "
               "differently",
}


def tshark_pairs(frames: pd.DataFrame) -> pd.DataFrame:
    r = frames[frames.is_resp & (frames.request_in >= 0)]
    return pd.DataFrame({"request_frame": r.request_in.to_numpy(), "response_frame": r.frame.to_numpy(),
                         "status": r.status.to_numpy()})


def compare(records: pd.DataFrame, frames: pd.DataFrame, webtap_frames: set[int] | None = None,
            path: str | None = None) -> pd.DataFrame:
    """One row per pair found by exactly one tool, with `side` (webtap|tshark) and `reason` (a
    key of REASONS, or 'unexplained'). records: webtap's records of ONE trace; frames:
    tshark_frames of it; path: the trace, to check the claim of `tshark_not_http` (without it,
    such a pair is unexplained).

    Each reason of a pair only webtap found is checked against tshark's own fields:
    `tshark_not_http` only when tshark read the frame (it is in tshark's output for just that
    frame number) and did not mark it http.request/http.response; `tshark_no_request_in` only
    when tshark marked the response frame a response, gave it no http.request_in, and its SEQ is
    the ACK of webtap's request. Anything else is unexplained."""
    # the records carry 1-based frame numbers (tshark's), tshark_frames 0-based indices
    records = records.assign(request_frame=records.request_frame - 1,
                             response_frame=records.response_frame - 1)
    w = records[records.matched.astype(bool)]
    wp = set(zip(w.request_frame.astype(np.int64), w.response_frame.astype(np.int64)))
    ack_of = dict(zip(w.request_frame.astype(np.int64), w.request_ack.astype(np.int64)))
    tp_df = tshark_pairs(frames)
    tp = set(zip(tp_df.request_frame, tp_df.response_frame))
    by_frame = frames.set_index("frame")
    seen = webtap_frames
    if seen is None:
        seen = set(records.request_frame.dropna().astype(np.int64)) | set(
            records.response_frame.dropna().astype(np.int64))
    w_resp = {r: q for q, r in wp}
    t_resp = {r: q for q, r in tp}
    status = dict(zip(w.response_frame.astype(np.int64), w.status.astype(np.int64)))
    interim_reqs = set(w[w.status.between(100, 199) & (w.status != 101)].request_frame.astype(np.int64))
    out = []
    for q, r in sorted(tp - wp):
        fq, fr = by_frame.loc[q], by_frame.loc[r]
        if q not in seen:
            why = "webtap_no_request"
        elif r not in seen:
            why = "webtap_no_response"
        elif q in interim_reqs or 100 <= int(fr.status) < 200:
            why = "interim"
        elif int(fr.seq) != int(fq.ack):
            why = "seq_not_ack"
        elif r in w_resp:
            why = "other_copy"
        else:
            why = "unexplained"
        out.append(("tshark", q, r, why))
    repeats = set()
    if "request_repeat" in w.columns:
        rep = w[w.request_repeat.astype(bool) | w.response_repeat.astype(bool)]
        repeats = set(zip(rep.request_frame.astype(np.int64), rep.response_frame.astype(np.int64)))
    only_w = sorted(wp - tp)
    not_marked = {int(f) for q, r in only_w for f in (q, r) if f not in by_frame.index}
    read = _frames_tshark_read(path, not_marked) if path and not_marked else set()
    for q, r in only_w:
        if (q, r) in repeats:
            why = "retransmission"
        elif q not in by_frame.index or r not in by_frame.index:
            # tshark's HTTP output lacks the frame: the claim holds only if tshark read it
            why = "tshark_not_http" if {int(f) for f in (q, r) if f not in by_frame.index} <= read \
                else "unexplained"
        elif 100 <= status.get(r, 0) < 200 or q in interim_reqs:
            why = "interim"
        elif r in t_resp:
            why = "other_copy"
        elif bool(by_frame.loc[r].is_resp) and int(by_frame.loc[r].request_in) < 0 \
                and int(by_frame.loc[r].seq) == int(ack_of.get(q, -2)):
            why = "tshark_no_request_in"
        else:
            why = "unexplained"
        out.append(("webtap", q, r, why))
    return pd.DataFrame(out, columns=["side", "request_frame", "response_frame", "reason"])


def _frames_tshark_read(path: str, frames: set[int]) -> set[int]:
    """The frames (0-based) of `frames` that tshark outputs when asked for just them: it read
    them (a tshark that stopped early, or a frame number past its end, gives nothing)."""
    info = tshark_explain(path, sorted(frames), [0])
    return set(info.frame.astype(np.int64).tolist())


def pair_tshark_messages(path: str) -> tuple[pd.DataFrame, set[int]]:
    """webtap's pairing table run on tshark's own messages of `path` (isolates pairing from
    dissection): (records DataFrame, frames that were messages)."""
    from webtap.records import http as records
    from httpanalyzer.pairing import Pairer

    msgs, data, _ = tshark_messages(path)
    p = Pairer()
    p.feed(msgs, data)
    p.flush()
    return records.to_pandas(p.take()), set(msgs["pkt_index"].astype(np.int64).tolist())



def main(argv=None) -> int:
    """Usage: python -m tests.tools.pair_table [--tshark-messages] TRACE...  (a '|' table)."""
    import httpanalyzer

    paths = list(argv if argv is not None else sys.argv[1:])
    on_tshark_msgs = "--tshark-messages" in paths
    paths = [p for p in paths if p != "--tshark-messages"]
    print("trace|webtap_pairs|tshark_pairs|agree|" + "|".join(REASONS) + "|unexplained")
    for p in paths:
        if on_tshark_msgs:
            df, seen = pair_tshark_messages(p)
        else:
            df, seen = httpanalyzer.analyze(p), None
        frames = tshark_frames(p)
        diff = compare(df, frames, seen, path=p)
        counts = diff.reason.value_counts()
        npairs = int(df.matched.sum())
        tp = len(tshark_pairs(frames))
        agree = npairs - int((diff.side == "webtap").sum())
        print(f"{p}|{npairs}|{tp}|{agree}|" + "|".join(str(int(counts.get(k, 0))) for k in REASONS)
              + f"|{int(counts.get('unexplained', 0))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())


if __name__ == "__main__":
    sys.exit(main())
