"""webtap against the real tshark, every difference explained (issues 4 and 5).

Transactions (issue 5): `compare_traces(paths)` runs webtap and tshark in its first-packet mode
and its reassembly mode, joins them per transaction and puts every difference in a category
(CATEGORIES); `Comparison` holds the DataFrames, the JSON summary and the report.

    httpanalyzer compare TRACE... [--report DIR] [--json]

Pairs (issue 4): `compare(records, tshark_frames(path))` compares webtap's pairs with tshark's
first-packet `http.request_in` (REASONS); `python -m httpanalyzer.compare TRACE...` prints that
per-trace table.

Frame numbers: tshark's frame.number is 1-based, webtap's request_frame/response_frame 0-based.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass

import numpy as np
import pandas as pd

#: tshark preferences for the paper's first-packet mode.
TSHARK_FIRST_PACKET = ["-o", "tcp.desegment_tcp_streams:FALSE", "-o", "http.desegment_headers:FALSE",
                       "-o", "http.desegment_body:FALSE"]

_FIELDS = ["frame.number", "http.request", "http.response", "http.request_in", "tcp.seq_raw",
           "tcp.ack_raw", "tcp.srcport", "tcp.dstport", "http.response.code"]

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


def tshark_frames(path: str, bpf: str | None = None, tshark: str = "tshark") -> pd.DataFrame:
    """One row per frame tshark sees as HTTP (first-packet mode): 0-based frame index, kind,
    request_in (0-based, -1 none), seq, ack, ports, status."""
    cmd = [tshark, "-n", "-r", path, *TSHARK_FIRST_PACKET, "-Y", "http.request or http.response",
           "-T", "fields", "-E", "separator=\t", "-E", "occurrence=f"]
    for f in _FIELDS:
        cmd += ["-e", f]
    if bpf:
        cmd += ["-2", "-R", bpf]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout
    rows = [ln.split("\t") for ln in out.splitlines() if ln]
    cols = ["frame", "is_req", "is_resp", "request_in", "seq", "ack", "sport", "dport", "status"]
    df = pd.DataFrame(rows, columns=cols) if rows else pd.DataFrame(columns=cols)
    num = lambda s, d=-1: pd.to_numeric(s.replace("", np.nan), errors="coerce").fillna(d).astype(np.int64)  # noqa: E731
    df["frame"] = num(df["frame"]) - 1
    df["request_in"] = num(df["request_in"], 0) - 1
    for c in ("seq", "ack", "sport", "dport", "status"):
        df[c] = num(df[c])
    df["is_req"] = df["is_req"] != ""
    df["is_resp"] = df["is_resp"] != ""
    return df


def tshark_pairs(frames: pd.DataFrame) -> pd.DataFrame:
    r = frames[frames.is_resp & (frames.request_in >= 0)]
    return pd.DataFrame({"request_frame": r.request_in.to_numpy(), "response_frame": r.frame.to_numpy(),
                         "status": r.status.to_numpy()})


def compare(records: pd.DataFrame, frames: pd.DataFrame, webtap_frames: set[int] | None = None) -> pd.DataFrame:
    """One row per pair found by exactly one tool, with `side` (webtap|tshark) and `reason` (a
    key of REASONS, or 'unexplained'). records: webtap's records of ONE trace."""
    w = records[records.matched.astype(bool)]
    wp = set(zip(w.request_frame.astype(np.int64), w.response_frame.astype(np.int64)))
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
    for q, r in sorted(wp - tp):
        if (q, r) in repeats:
            why = "retransmission"
        elif q not in by_frame.index or r not in by_frame.index:
            why = "tshark_not_http"
        elif 100 <= status.get(r, 0) < 200 or q in interim_reqs:
            why = "interim"
        elif r in t_resp:
            why = "other_copy"
        else:
            why = "tshark_no_request_in"
        out.append(("webtap", q, r, why))
    return pd.DataFrame(out, columns=["side", "request_frame", "response_frame", "reason"])


def pair_tshark_messages(path: str) -> tuple[pd.DataFrame, set[int]]:
    """webtap's pairing table run on tshark's own messages of `path` (isolates pairing from
    dissection): (records DataFrame, frames that were messages)."""
    from httpanalyzer import records
    from httpanalyzer.pairing import Pairer
    from httpanalyzer.tshark_messages import tshark_messages

    msgs, data, _ = tshark_messages(path)
    p = Pairer()
    p.feed(msgs, data)
    p.flush()
    return records.to_pandas(p.take()), set(msgs["pkt_index"].astype(np.int64).tolist())


# --------------------------------------------------------------------------------------------
# Transactions: webtap's records against tshark in both modes (issue 5)
#
# A transaction is one row: a request half (its first packet) and/or a response half (its first
# packet). tshark's rows come from its HTTP frames: each response with its http.request_in, and
# each request no response points at. webtap's rows are its records (paired, request_only,
# response_only).
#
# Join key (docs/ACCURACY.md, "Transactions"): the 0-based frame index of the first packet of the
# request (tshark's reassembly mode reports a message at its last segment; the first one is the
# first `tcp.segment` of that frame), checked against the 4-tuple and the request's ACK, which
# must agree whenever the frames do. Rows are joined in three passes: (1) same request frame AND
# same response frame; (2) the rest on the request frame; (3) the rest on the response frame.
# Rows joined in (2) or (3) are found by both tools but paired differently: each gets a reason.
# What is left is found by one tool only, and gets a reason too.
# --------------------------------------------------------------------------------------------

MODES = {"first_packet": TSHARK_FIRST_PACKET, "reassembly": []}

#: Why a transaction (or a field) differs between webtap and tshark. Keys are the JSON's and the
#: report's category names; docs/ACCURACY.md ("Transactions") says why each exists.
CATEGORIES = {
    # the paper's accepted approximations
    "pipelined": "a pipelined request (it shares its ACK with an earlier request on the "
                 "connection): tshark pairs requests and responses in order, first-packet "
                 "pairing (response SEQ == request ACK) cannot place the later responses",
    "retransmission": "a retransmitted copy of a request or response: webtap reports it (the "
                      "paper's duplicate records, flagged request_repeat/response_repeat), "
                      "tshark's TCP analysis does not hand it to HTTP",
    "other_copy": "both tools pair the response, with different copies of a repeated request "
                  "(TCP retransmission, or an ICMP error quoting the request): webtap the "
                  "oldest copy, tshark the latest",
    "interim": "a 1xx interim response or the final response after it: webtap pairs the final "
               "response too (SEQ of the 1xx + its length), tshark's first-packet mode does not",
    "seq_not_ack": "tshark pairs by order in the TCP stream a response whose SEQ is not the "
                   "request's ACK (request in a SYN with TCP Fast Open, fuzzed sequence numbers, "
                   "a response after a lost one)",
    "chunk_boundary": "tshark ran on chunks (editcap -c, as in the paper) and the request and "
                      "response fell in different chunks",
    "gc_timeout": "the response came 60 s or more after the request: webtap's garbage "
                  "collector had already emitted the request unmatched (the paper's 60 s)",
    # what tshark decodes differently
    "port_not_http": "HTTP on a port tshark does not decode as HTTP (its HTTP ports + "
                     "heuristics); webtap looks at every TCP port as the paper's filter does",
    "tshark_notification": "NOTIFY/SUBSCRIBE/UNSUBSCRIBE: tshark sets http.notification, not "
                           "http.request",
    "tshark_header_exception": "the header block is cut mid-line; tshark throws before it "
                               "marks the frame http.request/http.response",
    "connect_tunnel": "the answer to CONNECT: tshark hands the connection to the tunnel and does "
                      "not mark the response",
    "tshark_no_request_in": "tshark leaves a response with SEQ == a request's ACK without "
                            "http.request_in (it lost track of the stream)",
    # what webtap does not dissect (docs/ACCURACY.md, "First packets")
    "http_over_udp": "HTTP over UDP (SSDP): webtap dissects HTTP over TCP only",
    "encapsulation_not_dissected": "IP inside an encapsulation webtap does not open (GRE, "
                                   "ERSPAN, VXLAN, PPPoE, MPLS, IP-in-IP, an ICMP error's "
                                   "quote, ...)",
    "link_unsupported": "a link type webtap does not dissect (802.11, NFLOG, ARCNET, C-HDLC)",
    "ip_reassembled": "an IP fragment: tshark reassembles IP, webtap skips fragments",
    "message_mid_payload": "the message starts after the first byte of the payload; webtap only "
                           "looks at the payload's start (the paper's first packet)",
    "not_a_request_line": "a method and a space, then no request-target form and no version at the "
                          "line's end (a body such as 'POST request received'): tshark takes any "
                          "first word that is a method, webtap requires a request line's shape",
    "no_target": "'OPTIONS HTTP/1.1' (no request-target): webtap gives an empty URI and the "
                 "version, tshark 4.0 the version as the URI",
    # reassembly mode only
    "reassembly_incomplete": "tshark's reassembly mode does not report a message its "
                             "first-packet mode reports: a segment is missing, or the trace ends "
                             "before the body does",
    "reassembly_merged": "tshark's reassembly joins segments that each start a message in "
                         "first-packet mode into one message (server bytes sent before the "
                         "request, then the response)",
    "reassembled_message": "tshark's reassembly mode finds a message its first-packet mode "
                           "does not (the message begins inside a segment, or its first line "
                           "is split across packets)",
    # field disagreements
    "uri_truncated": "the URI continues past the first packet: webtap keeps what the first "
                     "packet holds (flag uri_truncated), tshark's reassembly mode the whole URI",
    "header_after_first_packet": "Host or User-Agent is in a later segment of the request: only "
                                 "reassembly sees it",
    "text_clipped": "webtap shortened the text to its per-field bound (flag text_clipped)",
    "bad_status_code": "status code not three digits: webtap sets 0, tshark parses three "
                       "characters",
    "several_messages": "the frame holds several messages; tshark's first value is not the "
                        "message webtap compared",
    "unexplained": "no rule explains the difference: a bug (the tests fail on it)",
}

#: Fields compared on transactions both tools find (text compared in tshark's encoding).
FIELDS = ("method", "uri", "host", "user_agent", "status", "reason")

_TX_FIELDS = ["frame.number", "frame.time_epoch", "frame.protocols", "ip.src", "ip.dst",
              "ipv6.src", "ipv6.dst", "tcp.srcport", "tcp.dstport", "tcp.seq_raw", "tcp.ack_raw",
              "tcp.segment", "http.request", "http.response", "http.request_in", "http.time",
              "http.request.method", "http.request.uri", "http.host", "http.user_agent",
              "http.response.code", "http.response.phrase"]
_EXPLAIN_FIELDS = ["frame.number", "frame.protocols", "tcp.analysis.retransmission",
                   "tcp.analysis.out_of_order", "tcp.analysis.spurious_retransmission",
                   "http.request.method", "http.notification", "http.proxy_connect_host",
                   "ip.fragment", "ipv6.fragment", "tcp.payload"]
_SEP, _AGG = "\x1f", "\x1e"
_ENCAPS = {"gre", "erspan", "vxlan", "geneve", "gtp", "ayiya", "pppoes", "pppoed", "ppp", "mpls",
           "llc", "sctp", "icmp", "icmpv6", "teredo", "l2tp", "udp", "ipv6", "ip"}
_LINKS_UNSUPPORTED = ("wlan", "radiotap", "nflog", "arcnet", "chdlc", "ppi", "prism")


def tshark_version(tshark: str = "tshark") -> str:
    out = subprocess.run([tshark, "--version"], capture_output=True, text=True, check=False).stdout
    return out.splitlines()[0] if out else "unknown"


def _tshark_cmd(tshark, path, mode, fields, display_filter):
    cmd = [tshark, "-n", "-r", path, *MODES[mode], "-Y", display_filter, "-T", "fields",
           "-E", f"separator={_SEP}", "-E", "occurrence=a", "-E", f"aggregator={_AGG}"]
    for f in fields:
        cmd += ["-e", f]
    return cmd


def _run_fields(cmd, fields) -> list[dict]:
    r = subprocess.run(cmd, capture_output=True, check=False)
    if r.returncode != 0 and not r.stdout:
        raise RuntimeError(f"tshark failed ({r.returncode}): {r.stderr.decode(errors='replace')[-300:]}")
    rows = []
    for ln in r.stdout.decode("utf-8", errors="replace").split("\n"):
        if ln:
            rows.append(dict(zip(fields, ln.split(_SEP))))
    return rows


def chunk_trace(path: str, chunk_packets: int, workdir: str, editcap: str = "editcap",
                capinfos: str = "capinfos") -> list[tuple[str, int]]:
    """[(file, index of its first frame)]: the trace itself when it holds at most chunk_packets
    packets, else editcap's pieces of chunk_packets packets each (the paper's 20 M-packet
    chunks, which kept tshark's memory bounded)."""
    out = subprocess.run([capinfos, "-M", "-c", "-T", "-r", path], capture_output=True, text=True,
                         check=False).stdout.strip().split("\t")
    try:
        n = int(out[-1])
    except ValueError:
        n = 0
    if n <= chunk_packets:
        return [(path, 0)]
    prefix = os.path.join(workdir, "chunk.pcapng")
    subprocess.run([editcap, "-F", "pcapng", "-c", str(chunk_packets), path, prefix], check=True,
                   capture_output=True)
    parts = sorted(f for f in os.listdir(workdir) if f.startswith("chunk_"))
    return [(os.path.join(workdir, f), i * chunk_packets) for i, f in enumerate(parts)]


def _first(v: str) -> str:
    return v.split(_AGG, 1)[0] if v else ""


def _last(v: str) -> str:
    return v.rsplit(_AGG, 1)[-1] if v else ""


def _int(v: str, default: int = -1) -> int:
    try:
        return int(v)
    except ValueError:
        return default


def _parse_http_rows(rows: list[dict], offset: int, chunk: int) -> pd.DataFrame:
    out = []
    for r in rows:
        f = _int(r["frame.number"]) - 1 + offset
        segs = tuple(_int(x) - 1 + offset for x in r.get("tcp.segment", "").split(_AGG) if x)
        first = segs[0] if segs else f
        reqs = [x for x in r["http.request"].split(_AGG) if x] if r["http.request"] else []
        resps = [x for x in r["http.response"].split(_AGG) if x] if r["http.response"] else []
        src = _last(r["ip.src"]) or _last(r["ipv6.src"])
        dst = _last(r["ip.dst"]) or _last(r["ipv6.dst"])
        rin = _first(r["http.request_in"])
        t = _first(r["http.time"])
        out.append((f, first, segs, chunk, r["frame.time_epoch"], r["frame.protocols"], src, dst,
                    _int(_last(r["tcp.srcport"])), _int(_last(r["tcp.dstport"])),
                    _int(_last(r["tcp.seq_raw"])), _int(_last(r["tcp.ack_raw"])),
                    bool(reqs), bool(resps) and not reqs, len(reqs) + len(resps),
                    _int(rin) - 1 + offset if rin else -1, float(t) if t else np.nan,
                    _first(r["http.request.method"]) or None, _first(r["http.request.uri"]) or None,
                    _first(r["http.host"]) or None, _first(r["http.user_agent"]) or None,
                    _int(_first(r["http.response.code"])),
                    _first(r["http.response.phrase"]) if resps else None))
    cols = ["frame", "first_frame", "segments", "chunk", "epoch", "protocols", "src", "dst", "sport", "dport",
            "seq", "ack", "is_req", "is_resp", "n_msgs", "request_in", "time_s", "method", "uri",
            "host", "user_agent", "status", "reason"]
    return pd.DataFrame(out, columns=cols)


def _map_jobs(fn, items, jobs):
    if jobs <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=jobs) as ex:     # each task is one tshark process
        return list(ex.map(fn, items))


def tshark_http(path: str, modes=("first_packet", "reassembly"), tshark: str = "tshark",
                chunk_packets: int = 1_000_000, jobs: int = 2, workdir: str | None = None):
    """tshark's HTTP frames of `path` in each mode: ({mode: frames DataFrame}, [command lines]).
    Frame indices are 0-based and global (chunk offsets added); `first_frame` is the first
    packet of the message (first tcp.segment in reassembly mode)."""
    import tempfile

    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        chunks = chunk_trace(path, chunk_packets, tmp)
        tasks = [(m, i, c, off) for m in modes for i, (c, off) in enumerate(chunks)]
        cmds = [_tshark_cmd(tshark, c, m, _TX_FIELDS, "http.request or http.response")
                for m, _, c, _ in tasks]
        rows = _map_jobs(lambda k: _run_fields(cmds[k], _TX_FIELDS), list(range(len(tasks))), jobs)
        frames = {}
        for m in modes:
            parts = [_parse_http_rows(rows[k], tasks[k][3], tasks[k][1])
                     for k in range(len(tasks)) if tasks[k][0] == m]
            frames[m] = pd.concat(parts, ignore_index=True) if parts else _parse_http_rows([], 0, 0)
        shown = [f"editcap -F pcapng -c {chunk_packets} {_shell_quote(path)} chunk.pcapng"] \
            if len(chunks) > 1 else []
        for cmd, (_, i, c, _) in zip(cmds, tasks):
            line = " ".join(_shell_quote(x) for x in cmd)
            shown.append(line.replace(c, f"{path}#chunk{i}") if len(chunks) > 1 else line)
        return frames, shown, chunks


def _shell_quote(s: str) -> str:
    import shlex

    return shlex.quote(s)


def tshark_explain(path: str, frames: list[int], chunk_starts: list[int], tshark: str = "tshark",
                   chunk_packets: int = 1_000_000, workdir: str | None = None,
                   commands: list | None = None) -> pd.DataFrame:
    """Why tshark does not report the given frames (0-based, global) as HTTP: their protocol
    stack and TCP analysis flags, from one more first-packet-mode run on just those frames.
    The command lines run are appended to `commands`."""
    cols = ["frame", "protocols", "retransmission", "http_method", "notification", "connect",
            "ip_fragment", "payload_starts_message", "not_request_line"]
    if not frames:
        return pd.DataFrame(columns=cols)
    import tempfile

    out = []
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        chunks = chunk_trace(path, chunk_packets, tmp) if len(chunk_starts) > 1 else [(path, 0)]
        starts = [off for _, off in chunks] + [1 << 62]
        for i, (c, off) in enumerate(chunks):
            mine = [f - off + 1 for f in frames if off <= f < starts[i + 1]]
            for k in range(0, len(mine), 2000):    # display filter size bound
                flt = "frame.number in {" + ",".join(map(str, mine[k:k + 2000])) + "}"
                cmd = _tshark_cmd(tshark, c, "first_packet", _EXPLAIN_FIELDS, flt)
                if commands is not None:
                    commands.append(" ".join(_shell_quote(x) for x in cmd).replace(
                        c, path + (f"#chunk{i}" if len(chunks) > 1 else "")))
                for r in _run_fields(cmd, _EXPLAIN_FIELDS):
                    out.append((_int(r["frame.number"]) - 1 + off, r["frame.protocols"],
                                any(r[x] for x in ("tcp.analysis.retransmission",
                                                   "tcp.analysis.out_of_order",
                                                   "tcp.analysis.spurious_retransmission")),
                                bool(r["http.request.method"]), bool(r["http.notification"]),
                                bool(r["http.proxy_connect_host"]),
                                bool(r["ip.fragment"] or r["ipv6.fragment"]),
                                _starts_message(_last(r["tcp.payload"])),
                                _not_request_line(_last(r["tcp.payload"]))))
    return pd.DataFrame(out, columns=cols)


def _starts_message(payload_hex: str) -> bool:
    """Does a TCP payload (tshark's hex) start with an HTTP request line or status line?"""
    from webtap.schema import METHOD_NAMES

    head = bytes.fromhex(payload_hex.replace(":", "")[:64]) if payload_hex else b""
    if head.startswith(b"\r\n") and len(head) > 3:
        head = head[2:]
    return head.startswith(b"HTTP/") or any(head.startswith(m.encode() + b" ")
                                            for m in METHOD_NAMES if m)


def _not_request_line(payload_hex: str) -> bool:
    """The payload starts with a method and a space but not with a request line's shape (issue 23,
    docs/ACCURACY.md "Request lines"): no request-target form and no version at the line's end,
    e.g. a response body "POST request received successfully!". Written from the documented
    rule, apart from ext/httpstart.pxd."""
    import re

    from webtap.schema import METHOD_NAMES

    pay = bytes.fromhex(payload_hex.replace(":", "")) if payload_hex else b""
    if pay.startswith(b"\r\n") and len(pay) > 3:
        pay = pay[2:]
    line = re.split(rb"[\r\n]", pay, maxsplit=1)[0]
    tok, sp, rest = line.partition(b" ")
    if not sp or tok.removeprefix(b"M-").decode("latin-1") not in METHOD_NAMES[1:]:
        return False
    rest = rest.lstrip(b" ")
    if not rest:
        return False
    target = rest.split(b" ", 1)[0]
    if (target.startswith((b"/", b"HTTP/")) or target == b"*"
            or re.match(rb"[A-Za-z][A-Za-z0-9+.-]*://", target)
            or re.fullmatch(rb"(\[[0-9A-Za-z:.]+\]|[A-Za-z0-9._~-]+):[0-9]+", target)):
        return False
    return not (re.search(rb" HTTP/[0-9]\.[0-9]$", line) and len(pay) > len(line))


def tshark_transactions(frames: pd.DataFrame, mode: str) -> pd.DataFrame:
    """One row per transaction tshark reports: request first frame `q` and response first frame
    `r` (-1 when absent), the 4-tuple (client first), request ACK, response SEQ, text, status
    and response time in seconds (http.time)."""
    by_frame = frames.set_index("frame")
    req = frames[frames.is_req]
    resp = frames[frames.is_resp]
    used = set()
    rows = []
    for x in resp.itertuples(index=False):
        qf = x.request_in if x.request_in in by_frame.index else -1
        q = by_frame.loc[qf] if qf >= 0 else None
        if qf >= 0:
            used.add(qf)
        rows.append(dict(
            q=int(q.first_frame) if q is not None else -1, r=int(x.first_frame),
            q_chunk=int(q.chunk) if q is not None else -1, r_chunk=int(x.chunk),
            client=x.dst, client_port=x.dport, server=x.src, server_port=x.sport,
            ack=int(q.ack) if q is not None else -1, seq=int(x.seq),
            method=q.method if q is not None else None, uri=q.uri if q is not None else None,
            host=q.host if q is not None else None,
            user_agent=q.user_agent if q is not None else None,
            status=int(x.status), reason=x.reason, time_s=x.time_s,
            q_msgs=int(q.n_msgs) if q is not None else 0, r_msgs=int(x.n_msgs),
            q_segs=q.segments if q is not None else (), r_segs=x.segments))
    for x in req.itertuples(index=False):
        if x.frame in used:
            continue
        rows.append(dict(q=int(x.first_frame), r=-1, q_chunk=int(x.chunk), r_chunk=-1,
                         client=x.src, client_port=x.sport, server=x.dst, server_port=x.dport,
                         ack=int(x.ack), seq=-1, method=x.method, uri=x.uri, host=x.host,
                         user_agent=x.user_agent, status=-1, reason=None, time_s=np.nan,
                         q_msgs=int(x.n_msgs), r_msgs=0, q_segs=x.segments, r_segs=()))
    cols = ["q", "r", "q_chunk", "r_chunk", "client", "client_port", "server", "server_port",
            "ack", "seq", "method", "uri", "host", "user_agent", "status", "reason", "time_s",
            "q_msgs", "r_msgs", "q_segs", "r_segs"]
    return pd.DataFrame(rows, columns=cols)


def webtap_transactions(records: pd.DataFrame) -> pd.DataFrame:
    """webtap's records as transaction rows, with the same columns as tshark_transactions plus
    webtap's flags."""
    def idx(c):
        return records[c].astype("Int64").fillna(-1).astype(np.int64).to_numpy()

    def txt(c):
        return records[c].astype(object).where(records[c].notna(), None).to_numpy()

    def flag(c):
        return records[c].fillna(False).astype(bool).to_numpy()

    rt = records.response_time
    return pd.DataFrame({
        "q": idx("request_frame"), "r": idx("response_frame"),
        "client": records.client_ip.astype(object).to_numpy(),
        "client_port": records.client_port.astype("Int64").fillna(-1).to_numpy(np.int64),
        "server": records.server_ip.astype(object).to_numpy(),
        "server_port": records.server_port.astype("Int64").fillna(-1).to_numpy(np.int64),
        "ack": idx("request_ack"), "seq": idx("response_seq"),
        "method": txt("method"), "uri": txt("uri"), "host": txt("host"),
        "user_agent": txt("user_agent"),
        "status": records.status.astype("Int64").fillna(-1).to_numpy(np.int64),
        "reason": txt("reason"),
        "time_s": rt.dt.total_seconds().to_numpy(float, na_value=np.nan),
        "interim": flag("interim"), "after_interim": flag("after_interim"),
        "request_repeat": flag("request_repeat"), "response_repeat": flag("response_repeat"),
        "uri_truncated": flag("uri_truncated"), "text_clipped": flag("text_clipped"),
        "unmatched_reason": txt("unmatched_reason"),
    })


def join_transactions(w: pd.DataFrame, t: pd.DataFrame) -> pd.DataFrame:
    """Rows (w, t): indices into the webtap and tshark rows (-1 when one tool lacks the
    transaction), and `how` = exact | request | response | only_webtap | only_tshark."""
    wq, wr, tq, tr = (w.q.to_numpy(), w.r.to_numpy(), t.q.to_numpy(), t.r.to_numpy())
    w_left, t_left = set(range(len(w))), set(range(len(t)))
    out = []

    def one_pass(how, wkey, tkey):
        index: dict = {}
        for i in sorted(t_left):
            k = tkey(i)
            if k is not None:
                index.setdefault(k, []).append(i)
        for i in sorted(w_left):
            k = wkey(i)
            lst = index.get(k) if k is not None else None
            if lst:
                j = lst.pop(0)
                w_left.discard(i)
                t_left.discard(j)
                out.append((i, j, how))

    one_pass("exact", lambda i: (wq[i], wr[i]), lambda j: (tq[j], tr[j]))
    one_pass("request", lambda i: wq[i] if wq[i] >= 0 else None,
             lambda j: tq[j] if tq[j] >= 0 else None)
    one_pass("response", lambda i: wr[i] if wr[i] >= 0 else None,
             lambda j: tr[j] if tr[j] >= 0 else None)
    out += [(i, -1, "only_webtap") for i in sorted(w_left)]
    out += [(-1, j, "only_tshark") for j in sorted(t_left)]
    return pd.DataFrame(out, columns=["w", "t", "how"])


def _frame_reason_not_in_tshark(info) -> str:
    """A frame webtap reports as an HTTP message and tshark does not (first-packet mode)."""
    if info is None:
        return "unexplained"
    if info.retransmission:
        return "retransmission"
    layers = info.protocols.split(":")
    if "http" not in layers:
        return "port_not_http"
    if info.notification:
        return "tshark_notification"
    if info.connect:
        return "connect_tunnel"
    if info.http_method or "http" in layers:
        return "tshark_header_exception"
    return "unexplained"


def _frame_reason_not_in_webtap(protocols: str, ip_fragment: bool = False,
                                payload_starts_message: bool = False,
                                not_request_line: bool = False) -> str:
    """A frame tshark reports as an HTTP message and webtap does not."""
    layers = protocols.split(":") if protocols else []
    if ip_fragment:
        return "ip_reassembled"
    if not_request_line:
        return "not_a_request_line"
    if any(x.startswith(_LINKS_UNSUPPORTED) for x in layers[:2]):
        return "link_unsupported"
    if "tcp" not in layers:
        return "http_over_udp" if "udp" in layers else "encapsulation_not_dissected"
    below = layers[:layers.index("tcp")]
    nets = [x for x in below if x in ("ip", "ipv6")]
    if len(nets) > 1 or any(x in _ENCAPS - {"ip", "ipv6"} for x in below):
        return "encapsulation_not_dissected"
    # plain Ethernet/IP/TCP: webtap misses a message only when the payload does not start it
    return "unexplained" if payload_starts_message else "message_mid_payload"


def _chunk_of(frame: int, starts: list[int]) -> int:
    return int(np.searchsorted(np.asarray(starts), frame, side="right")) - 1 if frame >= 0 else -1


def _tshark_text(v):
    """webtap's text in a form comparable with tshark's -T fields output (ENC_ASCII: each byte
    >= 0x80 is one U+FFFD, a NUL ends the string). webtap's records decode valid UTF-8 and take
    any other byte as ISO-8859-1, so a non-ASCII character stands for one or more bytes: each
    run of non-ASCII characters (on both sides) becomes one U+FFFD. Trailing blanks are dropped
    (webtap trims them)."""
    if not isinstance(v, str):
        return None
    return _NON_ASCII.sub("\ufffd", v.split("\0", 1)[0]).rstrip(" \t")


_NON_ASCII = re.compile("[^\x00-\x7f]+")


class _Explainer:
    """The reason of each difference in one mode (see CATEGORIES)."""

    def __init__(self, mode, w, t, joined, fp_frames, mode_frames, info, chunk_starts, seq_of):
        self.mode, self.w, self.t, self.j = mode, w, t, joined
        self.seq_of = seq_of            # frame -> its TCP SEQ (tshark's HTTP frames)
        self.fp_frames, self.mode_frames, self.info = fp_frames, mode_frames, info
        self.starts = chunk_starts
        self.w_frames = set(w.q[w.q >= 0]) | set(w.r[w.r >= 0])
        self.t_of: dict[int, list[int]] = {}
        for j, (q, r) in enumerate(zip(t.q, t.r)):
            for f in (q, r):
                if f >= 0:
                    self.t_of.setdefault(int(f), []).append(j)
        self.w_of: dict[int, list[int]] = {}
        for i, (q, r) in enumerate(zip(w.q, w.r)):
            for f in (q, r):
                if f >= 0:
                    self.w_of.setdefault(int(f), []).append(i)
        # requests sharing an ACK on one connection: pipelining
        key = list(zip(w.client, w.client_port, w.server, w.server_port, w.ack))
        reqs = w.q >= 0
        from collections import Counter

        self.shared_ack = Counter(k for k, is_req in zip(key, reqs) if is_req)
        self.w_key = key

    def missing_in_tshark(self, f: int) -> str:
        if self.mode == "reassembly" and f in self.fp_frames:
            return "reassembly_incomplete"
        return _frame_reason_not_in_tshark(self.info.get(f))

    def missing_in_webtap(self, f: int) -> str:
        if self.mode == "reassembly" and f not in self.fp_frames:
            return "reassembled_message"
        x = self.info.get(f)
        if x is None:
            return "unexplained"
        return _frame_reason_not_in_webtap(x.protocols, x.ip_fragment, x.payload_starts_message,
                                           x.not_request_line)

    def _copy_or_pipelined(self, f1: int, f2: int) -> str:
        """Two request (or two response) frames of one connection that share the ACK (SEQ):
        copies of one message if their own TCP SEQ is equal too, else pipelined messages."""
        s1, s2 = self.seq_of.get(int(f1)), self.seq_of.get(int(f2))
        return "other_copy" if s1 is not None and s1 == s2 else "pipelined"

    def _tshark_pair(self, T) -> str:
        """tshark pairs T (q, r) and webtap does not."""
        if T.seq != T.ack:
            k = (T.client, T.client_port, T.server, T.server_port, T.ack)
            return "pipelined" if self.shared_ack.get(k, 0) > 1 or T.q_msgs > 1 else "seq_not_ack"
        for i in self.w_of.get(int(T.r), []):
            W = self.w.iloc[i]
            if W.q >= 0 and W.q != T.q:         # webtap gives the response to another request
                return self._copy_or_pipelined(W.q, T.q)
        for i in self.w_of.get(int(T.q), []):
            W = self.w.iloc[i]
            if W.r >= 0 and W.r != T.r:         # webtap gives the request another response
                return self._copy_or_pipelined(W.r, T.r)
            if W.unmatched_reason == "gc":
                return "gc_timeout"
        return "unexplained"

    def _webtap_pair(self, W) -> str:
        """webtap pairs W (q, r) and tshark does not."""
        if W.request_repeat or W.response_repeat:
            return "retransmission"
        if self.mode == "first_packet" and len(self.starts) > 1 and \
                _chunk_of(W.q, self.starts) != _chunk_of(W.r, self.starts):
            return "chunk_boundary"
        for j in self.t_of.get(int(W.r), []):
            T = self.t.iloc[j]
            if T.q >= 0 and T.q != W.q:         # tshark gives the response to another request
                return self._tshark_pair(T) if T.seq != T.ack else \
                    self._copy_or_pipelined(W.q, T.q)
            if T.q < 0:
                return "tshark_no_request_in"
        for j in self.t_of.get(int(W.q), []):
            T = self.t.iloc[j]
            if T.r >= 0 and T.r != W.r:         # tshark gives the request another response
                return self._tshark_pair(T) if T.seq != T.ack else \
                    self._copy_or_pipelined(W.r, T.r)
        return "unexplained"

    def merged(self, T) -> bool:
        """tshark's reassembly glued segments that start several first-packet messages into
        one message (e.g. server data sent before the request, then the response)."""
        if self.mode != "reassembly" or T is None:
            return False
        if 0 <= T.r < T.q:          # the reassembled response begins before its request
            return True
        return any(sum(f in self.fp_frames for f in segs) > 1 for segs in (T.q_segs, T.r_segs))

    def pair(self, W, T) -> str:
        """Reason why W (webtap's row) and T (tshark's) differ; either may be None."""
        if self.merged(T):
            return "reassembly_merged"
        for X in (W, T):       # 101 Switching Protocols is final: it pairs like any response
            if X is not None and 100 <= X.status < 200 and X.status != 101:
                return "interim"
        if W is not None and (W.interim or W.after_interim):
            return "interim"
        if self.mode == "reassembly" and len(self.starts) > 1 and W is not None and \
                W.q >= 0 and W.r >= 0 and _chunk_of(W.q, self.starts) != _chunk_of(W.r, self.starts):
            return "chunk_boundary"
        if W is not None:
            for f in (W.q, W.r):
                if f >= 0 and f not in self.mode_frames:
                    return "retransmission" if (W.request_repeat or W.response_repeat) \
                        else self.missing_in_tshark(int(f))
        if T is not None:
            for f in (T.q, T.r):
                if f >= 0 and f not in self.w_frames:
                    return self.missing_in_webtap(int(f))
        if T is not None and T.q >= 0 and T.r >= 0 and (W is None or (W.q, W.r) != (T.q, T.r)):
            if W is not None and (W.request_repeat or W.response_repeat):
                return "retransmission"
            why = self._tshark_pair(T)
            if why != "unexplained" or W is None or W.q < 0 or W.r < 0:
                return why
        if W is not None and W.q >= 0 and W.r >= 0:
            return self._webtap_pair(W)
        if W is not None and (W.request_repeat or W.response_repeat):
            return "retransmission"
        # a half of a transaction the other tool pairs: the other row's reason
        if W is not None:
            for f in (W.q, W.r):
                for j in self.t_of.get(int(f), []) if f >= 0 else []:
                    T2 = self.t.iloc[j]
                    if self.merged(T2):
                        return "reassembly_merged"
                    if T2.q >= 0 and T2.r >= 0:
                        return self._tshark_pair(T2)
        if T is not None:
            for f in (T.q, T.r):
                for i in self.w_of.get(int(f), []) if f >= 0 else []:
                    W2 = self.w.iloc[i]
                    if W2.q >= 0 and W2.r >= 0:
                        return self._webtap_pair(W2)
        return "unexplained"

    def field(self, name, W, T) -> str:
        wv, tv = getattr(W, name), getattr(T, name)
        if W.text_clipped:
            return "text_clipped"
        if name == "status":
            return "bad_status_code" if W.status == 0 else (
                "several_messages" if T.r_msgs > 1 else "unexplained")
        msgs = T.r_msgs if name == "reason" else T.q_msgs
        wv = wv if isinstance(wv, str) else ""
        if name == "uri" and wv == "" and isinstance(tv, str) and tv.startswith("HTTP/"):
            return "no_target"
        if self.mode == "reassembly" and isinstance(tv, str):
            if name == "uri" and W.uri_truncated and tv.startswith(wv or ""):
                return "uri_truncated"
            if name in ("host", "user_agent") and tv.startswith(wv):
                return "header_after_first_packet"
        return "several_messages" if msgs > 1 else "unexplained"


def _field_equal(name, wv, tv) -> bool:
    """tshark's -T fields prints an absent field and an empty one alike: both are ''."""
    if name == "status":
        return int(wv) == int(tv)
    return (_tshark_text(wv) or "") == (_tshark_text(tv) or "")


def compare_modes(w: pd.DataFrame, tx: dict, frames: dict, info: dict,
                  chunk_starts: list[int]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(transactions, field differences) of one trace over every mode in tx (mode -> tshark
    transaction rows)."""
    fp_frames = set(frames["first_packet"].first_frame) if "first_packet" in frames else set()
    seq_of = {}
    for f in frames.values():
        seq_of.update(zip(f.frame[f.frame == f.first_frame].astype(int), f.seq.astype(int)))
    rows, fdiffs = [], []
    for mode, t in tx.items():
        j = join_transactions(w, t)
        ex = _Explainer(mode, w, t, j, fp_frames, set(frames[mode].first_frame), info,
                        chunk_starts, seq_of)
        for wi, ti, how in j.itertuples(index=False):
            W = w.iloc[wi] if wi >= 0 else None
            T = t.iloc[ti] if ti >= 0 else None
            same = how == "exact"
            cat = None if same else ex.pair(W, T)
            X = W if W is not None else T
            rows.append((mode, how, "both" if wi >= 0 and ti >= 0 else how, not same, cat,
                         int(W.q) if W is not None else -1, int(W.r) if W is not None else -1,
                         int(T.q) if T is not None else -1, int(T.r) if T is not None else -1,
                         X.client, int(X.client_port), X.server, int(X.server_port),
                         W.time_s if W is not None else np.nan,
                         T.time_s if T is not None else np.nan))
            if W is None or T is None:
                continue
            checks = []
            if W.q >= 0 and W.q == T.q:
                checks += ["method", "uri", "host", "user_agent"]
            if W.r >= 0 and W.r == T.r:
                checks += ["status", "reason"]
            for name in checks:
                if not _field_equal(name, getattr(W, name), getattr(T, name)):
                    fdiffs.append((mode, name, W.q, W.r, getattr(W, name), getattr(T, name),
                                   ex.field(name, W, T)))
            if mode == "first_packet" and same and W.q >= 0 and W.r >= 0 and \
                    abs(W.time_s - T.time_s) > 1.5e-6:
                fdiffs.append((mode, "response_time", W.q, W.r, W.time_s, T.time_s, "unexplained"))
    tcols = ["mode", "how", "side", "differs", "category", "webtap_request_frame",
             "webtap_response_frame", "tshark_request_frame", "tshark_response_frame", "client_ip",
             "client_port", "server_ip", "server_port", "webtap_time_s", "tshark_time_s"]
    fcols = ["mode", "field", "request_frame", "response_frame", "webtap", "tshark", "category"]
    trans = pd.DataFrame(rows, columns=tcols)
    trans["differs"] = trans.differs.astype(bool)   # an empty object column would select columns
    return trans, pd.DataFrame(fdiffs, columns=fcols)


def ks_distance(a, b) -> float:
    """Two-sample Kolmogorov-Smirnov statistic sup |F_a - F_b| (nan when a sample is empty)."""
    a = np.sort(np.asarray(a, float)[~np.isnan(np.asarray(a, float))])
    b = np.sort(np.asarray(b, float)[~np.isnan(np.asarray(b, float))])
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
    skipped: list                   # "trace: error" for traces tshark or webtap could not read

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
        w = self.response_times["webtap"]
        d = self.response_times["webtap_dedup"]
        return {"ks_first_packet": ks_distance(w, self.response_times["tshark_first_packet"]),
                "ks_reassembly": ks_distance(w, self.response_times["tshark_reassembly"]),
                "ks_first_packet_dedup": ks_distance(d, self.response_times["tshark_first_packet"]),
                "ks_reassembly_dedup": ks_distance(d, self.response_times["tshark_reassembly"])}

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
        import json

        return json.dumps(self.summary(), indent=1, sort_keys=False)

    def markdown(self, figures: dict | None = None) -> str:
        return _markdown(self, figures or {})

    def figures(self) -> dict:
        """name -> matplotlib Figure (Agg)."""
        from httpanalyzer import plot

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
    import html

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


def compare_trace(path: str, tshark: str = "tshark", chunk_packets: int = 1_000_000,
                  jobs: int = 2, records: pd.DataFrame | None = None, gc_timeout: float = 60.0):
    """One trace: (transactions, field_diffs, w rows, {mode: tshark rows}, commands)."""
    import httpanalyzer

    if records is None:
        records = httpanalyzer.analyze(path, gc_timeout=gc_timeout)
    frames, cmds, chunks = tshark_http(path, tuple(MODES), tshark=tshark,
                                       chunk_packets=chunk_packets, jobs=jobs)
    w = webtap_transactions(records)
    tx = {m: tshark_transactions(frames[m], m) for m in MODES}
    fp = frames["first_packet"]
    w_frames = set(w.q[w.q >= 0]) | set(w.r[w.r >= 0])
    t_frames = set().union(*(set(f.first_frame) for f in frames.values()))
    need = sorted((w_frames - set(fp.first_frame)) | (t_frames - w_frames))
    starts = [off for _, off in chunks]
    info_df = tshark_explain(path, [int(x) for x in need], starts, tshark=tshark,
                             chunk_packets=chunk_packets, commands=cmds)
    info = {int(r.frame): r for r in info_df.itertuples(index=False)}
    trans, fd = compare_modes(w, tx, frames, info, starts)
    return trans, fd, w, tx, cmds


def compare_traces(paths, tshark: str = "tshark", chunk_packets: int = 1_000_000, jobs: int = 2,
                   gc_timeout: float = 60.0, progress=None) -> Comparison:
    """Compare webtap with tshark (first-packet and reassembly modes) on each trace; the traces
    are compared one by one (each its own webtap run and tshark runs) and the numbers pooled."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [str(p) for p in paths]
    trans, fds, cmds = [], [], []
    times = {"webtap": [], "tshark_first_packet": [], "tshark_reassembly": [], "webtap_dedup": []}
    status = {"webtap": [], "tshark_first_packet": [], "tshark_reassembly": [], "webtap_dedup": []}
    methods = {"webtap": [], "tshark_first_packet": [], "tshark_reassembly": [], "webtap_dedup": []}
    urls = {"webtap": [], "tshark_first_packet": [], "tshark_reassembly": [], "webtap_dedup": []}
    per, skipped = [], []
    for p in paths:
        try:
            t, fd, w, tx, c = compare_trace(p, tshark=tshark, chunk_packets=chunk_packets,
                                            jobs=jobs, gc_timeout=gc_timeout)
        except (RuntimeError, OSError, ValueError) as e:
            skipped.append(f"{p}: {e}")
            continue
        t.insert(0, "trace", p)
        fd.insert(0, "trace", p)
        trans.append(t)
        fds.append(fd)
        cmds += c
        wp = w[(w.q >= 0) & (w.r >= 0)]
        times["webtap"].append(wp.time_s.to_numpy())
        status["webtap"].append(w.status[w.status >= 0].to_numpy())
        methods["webtap"] += [m for m in w.method if isinstance(m, str)]
        urls["webtap"].append(np.array([len(u) for u in w.uri if isinstance(u, str)], int))
        wd = w[~(w.request_repeat | w.response_repeat)]
        times["webtap_dedup"].append(wd.time_s[(wd.q >= 0) & (wd.r >= 0)].to_numpy())
        status["webtap_dedup"].append(wd.status[wd.status >= 0].to_numpy())
        methods["webtap_dedup"] += [m for m in wd.method if isinstance(m, str)]
        urls["webtap_dedup"].append(np.array([len(u) for u in wd.uri if isinstance(u, str)], int))
        for m, rows in tx.items():
            k = f"tshark_{m}"
            times[k].append(rows.time_s[(rows.q >= 0) & (rows.r >= 0)].to_numpy(float))
            status[k].append(rows.status[rows.status >= 0].to_numpy())
            methods[k] += [x for x in rows.method if isinstance(x, str)]
            urls[k].append(np.array([len(u) for u in rows.uri if isinstance(u, str)], int))
        fp = t[t["mode"] == "first_packet"]
        per.append({"trace": p, "webtap": len(w), "tshark_first_packet": len(tx["first_packet"]),
                    "tshark_reassembly": len(tx["reassembly"]),
                    "both": int((fp.side == "both").sum()),
                    "paired_differently": int(((fp.side == "both") & fp.differs).sum()),
                    "only_tshark": int((fp.side == "only_tshark").sum()),
                    "only_webtap": int((fp.side == "only_webtap").sum()),
                    "differences": ", ".join(f"{k} {v}" for k, v in sorted(
                        pd.concat([t[t.differs].category, fd.category]).value_counts().items())),
                    "unexplained": int((t.category == "unexplained").sum()
                                       + (fd.category == "unexplained").sum()),
                    "ks_first_packet": ks_distance(times["webtap"][-1],
                                                   times["tshark_first_packet"][-1]),
                    "ks_reassembly": ks_distance(times["webtap"][-1], times["tshark_reassembly"][-1]),
                    "paired_webtap": int(len(wp))})
        if progress:
            progress(p, per[-1])
    cat = lambda xs: np.concatenate(xs) if xs else np.zeros(0)  # noqa: E731
    return Comparison(
        traces=paths, tshark_version=tshark_version(tshark), commands=cmds,
        transactions=pd.concat(trans, ignore_index=True) if trans else pd.DataFrame(),
        field_diffs=pd.concat(fds, ignore_index=True) if fds else pd.DataFrame(),
        response_times={k: cat(v) for k, v in times.items()},
        status_counts=count_table({k: cat(v).astype(int) for k, v in status.items()}
                                  ).rename_axis("status"),
        method_counts=count_table(methods).rename_axis("method"),
        url_lengths={k: cat(v) for k, v in urls.items()},
        per_trace=pd.DataFrame(per), skipped=skipped)


def cli(argv=None) -> int:
    """`httpanalyzer compare TRACE... [--report DIR] [--json]`."""
    import argparse
    import json

    ap = argparse.ArgumentParser(
        prog="httpanalyzer compare",
        description="Compare webtap's HTTP transactions with the real tshark, in its "
                    "first-packet mode and its reassembly mode; every difference gets a category "
                    "(docs/ACCURACY.md).")
    ap.add_argument("traces", nargs="+", metavar="TRACE")
    ap.add_argument("--report", metavar="DIR", help="write summary.md/.html, PNG figures, CSVs")
    ap.add_argument("--plots", metavar="DIR",
                    help="write only the figures (the paper's Figs. 4-7: response-time CCDF, "
                         "status codes, methods, URL length) as PNG to DIR")
    ap.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    ap.add_argument("--chunk-packets", type=int, default=1_000_000, metavar="N",
                    help="tshark reads traces longer than N packets in editcap chunks of N "
                         "(default 1000000)")
    ap.add_argument("--jobs", type=int, default=2, help="tshark processes at once (default 2)")
    ap.add_argument("--tshark", default="tshark", help="tshark binary (default: on PATH)")
    ap.add_argument("--gc-timeout", type=float, default=60.0, metavar="S")
    a = ap.parse_args(argv)
    for p in a.traces:
        if not os.path.exists(p):
            print(f"httpanalyzer compare: no such file: {p}", file=sys.stderr)
            return 2
    try:
        c = compare_traces(a.traces, tshark=a.tshark, chunk_packets=a.chunk_packets,
                           jobs=max(1, min(a.jobs, 2)), gc_timeout=a.gc_timeout)
    except (OSError, RuntimeError, subprocess.CalledProcessError) as e:
        print(f"httpanalyzer compare: {e}", file=sys.stderr)
        return 1
    if a.report:
        c.write_report(a.report)
    if a.plots:
        from httpanalyzer.plot import save_figures

        for p in save_figures(c.figures(), a.plots):
            print(f"httpanalyzer compare: wrote {p}", file=sys.stderr)
    if a.json:
        print(json.dumps(c.summary()))
    else:
        print(c.markdown().split("## Response time")[0].rstrip())
        ks = c.ks()
        print(f"\nKS first-packet {ks['ks_first_packet']:.4f}, reassembly {ks['ks_reassembly']:.4f}")
        if a.report:
            print(f"report: {os.path.join(a.report, 'summary.md')}")
        print(f"unexplained differences: {c.unexplained}")
    return 0


def main(argv=None) -> int:
    """Usage: python -m httpanalyzer.compare [--tshark-messages] TRACE...  (a '|' table)."""
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
        diff = compare(df, frames, seen)
        counts = diff.reason.value_counts()
        npairs = int(df.matched.sum())
        tp = len(tshark_pairs(frames))
        agree = npairs - int((diff.side == "webtap").sum())
        print(f"{p}|{npairs}|{tp}|{agree}|" + "|".join(str(int(counts.get(k, 0))) for k in REASONS)
              + f"|{int(counts.get('unexplained', 0))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
