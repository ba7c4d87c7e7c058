"""webtap's transactions joined with tshark's, and every difference put in a category (issue 5).

The join/categories/explainer part of `httpanalyzer compare` (httpanalyzer.compare runs it,
httpanalyzer.compare_report renders it, httpanalyzer.tshark runs tshark).
"""
from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pandas as pd

from httpanalyzer.tshark import NO_TIME

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
    "lower_case_status_line": "a status line with its version in lower case ('http/1.1 200'): "
                              "webtap reads a response (as Zeek), tshark 4.0 data",
    "tshark_no_request_in": "tshark leaves a response with SEQ == a request's ACK without "
                            "http.request_in (it lost track of the stream)",
    # what webtap does not dissect (docs/ACCURACY.md, "First packets")
    "http_over_udp": "HTTP over UDP (SSDP): webtap dissects HTTP over TCP only",
    "encapsulation_not_dissected": "IP inside an encapsulation webtap does not open (GRE, "
                                   "ERSPAN, VXLAN, PPPoE, MPLS, IP-in-IP, an ICMP error's "
                                   "quote, ...)",
    "link_unsupported": "a link type webtap does not dissect (802.11, NFLOG, ARCNET, C-HDLC)",
    "ip_reassembled": "an IP fragment: tshark reassembles IP, webtap skips fragments",
    "after_continuation": "the message starts inside a segment whose first bytes continue a "
                          "header block begun in an earlier segment: webtap reads it when the "
                          "packet tells where the continued message ends (docs/ACCURACY.md "
                          "'After a continued header block'), tshark's first-packet mode shows "
                          "the segment as a continuation",
    "message_mid_payload": "the message starts after the first byte of the payload, after a "
                           "message whose end the packet does not tell (body_continues, "
                           "length_unknown): webtap does not look there",
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
    "response_mid_request": "the request is split over segments and the server answers after "
                            "the first one: tshark's reassembly completes the request after the "
                            "response, so it does not pair them; webtap pairs the response with "
                            "the request's first packet (SEQ == ACK)",
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
_ENCAPS = {"gre", "erspan", "vxlan", "geneve", "gtp", "ayiya", "pppoes", "pppoed", "ppp", "mpls",
           "llc", "sctp", "icmp", "icmpv6", "teredo", "l2tp", "udp", "ipv6", "ip"}
_LINKS_UNSUPPORTED = ("wlan", "radiotap", "nflog", "arcnet", "chdlc", "ppi", "prism")

def tshark_transactions(frames: pd.DataFrame, mode: str) -> pd.DataFrame:
    """One row per transaction tshark reports: request first frame `q` and response first frame
    `r` (-1 when absent), the 4-tuple (client first), request ACK, response SEQ, text, status
    and response time in seconds (http.time)."""
    req = frames[frames.is_req]
    resp = frames[frames.is_resp]
    # a frame may hold several requests (one row each, in order): the responses that point at
    # it take them in order, a 1xx the request its final response will take
    reqs_of: dict[int, list] = {}
    for i, x in zip(req.index, req.itertuples(index=False)):
        reqs_of.setdefault(int(x.frame), []).append((i, x))
    nxt: dict[int, int] = {}
    used = set()
    rows = []
    for x in resp.itertuples(index=False):
        lst = reqs_of.get(int(x.request_in)) if x.request_in >= 0 else None
        q = None
        if lst:
            k = min(nxt.get(int(x.request_in), 0), len(lst) - 1)
            i, q = lst[k]
            used.add(i)
            if not (100 <= x.status < 200 and x.status != 101):
                nxt[int(x.request_in)] = k + 1
        rows.append(dict(
            q=int(q.first_frame) if q is not None else -1, r=int(x.first_frame),
            q_chunk=int(q.chunk) if q is not None else -1, r_chunk=int(x.chunk),
            client=x.dst, client_port=x.dport, server=x.src, server_port=x.sport,
            ack=int(q.ack) if q is not None else -1, seq=int(x.seq),
            method=q.method if q is not None else None, uri=q.uri if q is not None else None,
            host=q.host if q is not None else None,
            user_agent=q.user_agent if q is not None else None,
            status=int(x.status), reason=x.reason, time_s=x.time_s, time_ns=int(x.time_ns),
            q_msgs=int(q.n_msgs) if q is not None else 0, r_msgs=int(x.n_msgs),
            q_segs=q.segments if q is not None else (), r_segs=x.segments,
            request_in=int(x.request_in)))
    for i, x in zip(req.index, req.itertuples(index=False)):
        if i in used:
            continue
        rows.append(dict(q=int(x.first_frame), r=-1, q_chunk=int(x.chunk), r_chunk=-1,
                         client=x.src, client_port=x.sport, server=x.dst, server_port=x.dport,
                         ack=int(x.ack), seq=-1, method=x.method, uri=x.uri, host=x.host,
                         user_agent=x.user_agent, status=-1, reason=None, time_s=np.nan, time_ns=NO_TIME,
                         q_msgs=int(x.n_msgs), r_msgs=0, q_segs=x.segments, r_segs=(),
                         request_in=-1))
    cols = ["q", "r", "q_chunk", "r_chunk", "client", "client_port", "server", "server_port",
            "ack", "seq", "method", "uri", "host", "user_agent", "status", "reason", "time_s",
            "time_ns", "q_msgs", "r_msgs", "q_segs", "r_segs", "request_in"]
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

    def frame_index(c):       # records carry 1-based frame numbers; the join 0-based indices
        f = idx(c)
        return np.where(f > 0, f - 1, -1)

    rt = records.response_time
    return pd.DataFrame({
        "q": frame_index("request_frame"), "r": frame_index("response_frame"),
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
        "time_ns": rt.astype("timedelta64[ns]").to_numpy().view(np.int64),   # NaT is NO_TIME
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

    # Several messages in one frame (issue 31) give several rows on the same frames: those
    # whose request-target and status agree first, so that the fields compared are the same
    # message's whatever order each tool lists them in.
    wu, tu = w.uri.to_numpy(), t.uri.to_numpy()
    ws, ts = w.status.to_numpy(), t.status.to_numpy()
    one_pass("exact", lambda i: (wq[i], wr[i], _tshark_text(wu[i]), ws[i]),
             lambda j: (tq[j], tr[j], _tshark_text(tu[j]), ts[j]))
    one_pass("exact", lambda i: (wq[i], wr[i]), lambda j: (tq[j], tr[j]))
    one_pass("request", lambda i: (wq[i], _tshark_text(wu[i])) if wq[i] >= 0 else None,
             lambda j: (tq[j], _tshark_text(tu[j])) if tq[j] >= 0 else None)
    one_pass("request", lambda i: wq[i] if wq[i] >= 0 else None,
             lambda j: tq[j] if tq[j] >= 0 else None)
    one_pass("response", lambda i: (wr[i], ws[i]) if wr[i] >= 0 else None,
             lambda j: (tr[j], ts[j]) if tr[j] >= 0 else None)
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
    if info.lower_case_status:
        return "lower_case_status_line"
    if not info.payload_starts_message and not info.http_method:
        # the frame's payload starts no message (tshark's first-packet mode: a continuation),
        # yet webtap reads one in it: after the header block the payload continues
        return "after_continuation"
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
        # messages per frame, requests [0] and responses [1], on each side
        self.t_msgs = (Counter(int(f) for f in t.q if f >= 0), Counter(int(f) for f in t.r if f >= 0))
        self.w_msgs = (Counter(int(f) for f in w.q if f >= 0), Counter(int(f) for f in w.r if f >= 0))
        self.w_of: dict[int, list[int]] = {}
        for i, (q, r) in enumerate(zip(w.q, w.r)):
            for f in (q, r):
                if f >= 0:
                    self.w_of.setdefault(int(f), []).append(i)
        # requests sharing an ACK on one connection: pipelining
        # reassembly mode: the frame that completes each request (its last segment)
        self.q_last = {int(q): max(segs) for q, segs in zip(t.q, t.q_segs)
                       if q >= 0 and len(segs)} if mode == "reassembly" else {}
        key = list(zip(w.client, w.client_port, w.server, w.server_port, w.ack))
        reqs = w.q >= 0
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
                # the claim, checked on tshark's own fields: tshark marks this frame a response
                # (T is one of its response rows), gives it no http.request_in at all (not one
                # that points at a frame it does not mark HTTP), and its SEQ is the ACK of
                # webtap's request
                return "tshark_no_request_in" if T.request_in < 0 and T.seq == W.ack \
                    else "unexplained"
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

    def _answered_mid_request(self, W, T) -> bool:
        """A webtap pair, touched by W or T, whose response comes before the frame that completes
        the request in tshark's reassembly (the request is split, the server answers after its
        first segment)."""
        if not self.q_last:
            return False
        for X in (W, T):
            if X is None:
                continue
            for f in (X.q, X.r):
                for i in self.w_of.get(int(f), []) if f >= 0 else []:
                    W2 = self.w.iloc[i]
                    if W2.q >= 0 and W2.r > W2.q and self.q_last.get(int(W2.q), -1) > W2.r:
                        return True
        return False

    def pair(self, W, T) -> str:
        """Reason why W (webtap's row) and T (tshark's) differ; either may be None."""
        if self.merged(T):
            return "reassembly_merged"
        for X in (W, T):       # 101 Switching Protocols is final: it pairs like any response
            if X is not None and 100 <= X.status < 200 and X.status != 101:
                return "interim"
        if W is not None and (W.interim or W.after_interim):
            return "interim"
        # after interim: a body sent after 100 Continue is this shape by design (RFC 9110 10.1.1)
        if self._answered_mid_request(W, T):
            return "response_mid_request"
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
        if T is not None and W is None:
            # webtap read the frame's first message(s) but not this one: it starts after a
            # message whose end the packet does not tell (body_continues, length_unknown)
            for f, side in ((T.q, 0), (T.r, 1)):
                if f >= 0 and self.t_msgs[side].get(int(f), 0) > self.w_msgs[side].get(int(f), 0):
                    return "message_mid_payload"
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
                    NO_TIME not in (W.time_ns, T.time_ns) and abs(int(W.time_ns) - int(T.time_ns)) > 1500:
                fdiffs.append((mode, "response_time", W.q, W.r, W.time_s, T.time_s, "unexplained"))
    tcols = ["mode", "how", "side", "differs", "category", "webtap_request_frame",
             "webtap_response_frame", "tshark_request_frame", "tshark_response_frame", "client_ip",
             "client_port", "server_ip", "server_port", "webtap_time_s", "tshark_time_s"]
    fcols = ["mode", "field", "request_frame", "response_frame", "webtap", "tshark", "category"]
    trans = pd.DataFrame(rows, columns=tcols)
    trans["differs"] = trans.differs.astype(bool)   # an empty object column would select columns
    fd = pd.DataFrame(fdiffs, columns=fcols)
    # what the report shows: 1-based frame numbers as in Wireshark (-1: none)
    for df, cols in ((trans, tcols[5:9]), (fd, fcols[2:4])):
        for c in cols:
            f = df[c].astype(np.int64)
            df[c] = np.where(f >= 0, f + 1, -1)
    return trans, fd
