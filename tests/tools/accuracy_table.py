"""Compare webtap's HTTP first packets with tshark's, frame by frame, and explain every difference.

    python -m tests.tools.accuracy_table [TRACE_DIR]     # prints the table for docs/ACCURACY.md

tshark runs once per trace, without a display filter, with every reassembly off:

    tshark -n -r FILE -o tcp.desegment_tcp_streams:FALSE -o http.desegment_headers:FALSE
           -o http.desegment_body:FALSE -T fields -e frame.number -e frame.protocols
           -e http.request -e http.response -e http.notification -e http.request.method
           -e http.request.uri -e http.host -e http.user_agent -e http.response.code
           -e http.response.phrase -e _ws.expert.message

Its frames with `http.request` or `http.response` set are exactly those `-Y "http.request ||
http.response"` prints; the other frames are kept so that a frame webtap reports and tshark does
not can be explained (which dissector tshark gave the port, whether HTTP threw, ...). Every
difference gets one category from CATEGORIES; a difference no rule explains is "unexplained",
and the test fails on it.
"""
from __future__ import annotations

import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from httpanalyzer import tshark
from httpanalyzer.tshark import AGG, SEP

TSHARK_FIELDS = (
    "frame.number", "frame.protocols", "http.request", "http.response", "http.notification",
    "http.request.method", "http.request.uri", "http.host", "http.user_agent",
    "http.response.code", "http.response.phrase", "_ws.expert.message", "http.proxy_connect_host",
)
TRACE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".gz")

#: Why a frame differs. Keys are what the test and docs/ACCURACY.md use.
CATEGORIES = {
    # frames webtap reports, tshark does not
    "port_not_http": "tshark gives the port to another dissector or leaves the payload as data "
                     "(HTTP only on its ports + a heuristic); webtap looks on every port",
    "tshark_notification": "NOTIFY/SUBSCRIBE/UNSUBSCRIBE: tshark sets http.notification, not "
                           "http.request",
    "tshark_header_exception": "the header block is cut mid-line with no colon; tshark throws "
                               "before it sets http.request (method etc. still shown)",
    "method_unknown_to_tshark": "a registered method tshark 4.0 does not list (MKCALENDAR, ACL, "
                                "BIND, ...)",
    "lower_case_status_line": "a status line whose version is in lower case ('http/1.1 200 OK'): "
                              "webtap reads a response (as Zeek does), tshark 4.0 data",
    # frames tshark reports, webtap does not
    "link_unsupported": "link type webtap does not dissect (ARCNET, radiotap, ...)",
    "ip_reassembled": "IP fragment: tshark reassembles IP, webtap flags and skips fragments",
    "message_mid_payload": "the message starts after the payload's first byte where webtap does "
                           "not look (after a message whose end the packet does not tell, or "
                           "after stray bytes)",
    "method_without_space": "a method token not followed by a space (cut at the packet's end, or "
                            "a tab); tshark accepts, webtap requires 'METHOD SP'",
    "icy_status_line": "SHOUTcast 'ICY nnn' status line: tshark 4.0 takes it as HTTP",
    "not_a_request_line": "a known method and a space, then no request-target form and no version at "
                          "the line's end (a body such as 'POST request received'): tshark takes any "
                          "first word that is a method, webtap requires the request-line shape",
    "http_over_udp": "HTTP over UDP (SSDP M-SEARCH/NOTIFY, port 1900): webtap dissects HTTP over TCP only",
    "encapsulation_not_dissected": "HTTP inside something webtap does not open (SCTP, the packet "
                                   "quoted in an ICMP error, ...)",
    "webtap_rejects_packet": "webtap rejects the packet below HTTP (bad/truncated IP or TCP header)",
    "connect_tunnel": "response to CONNECT: tshark hands the rest of the connection to the tunnel "
                      "(Proxy-Connect) and does not mark the 200 as http.response",
    # frames both report, fields differ
    "trailing_whitespace": "Host/User-Agent value with trailing blanks: webtap trims them",
    "bad_status_code": "status code not three digits: webtap sets status 0 + MSGF_BAD_STATUS, "
                       "tshark parses the first three characters",
    "pipelined": "several messages in one frame: tshark lists the fields of all, webtap those "
                 "of the first",
    "no_target": "'OPTIONS HTTP/1.1' (no request-target): webtap gives an empty URI and the "
                 "version, tshark 4.0 the version as the URI",
    "unexplained": "no rule explains the difference (the test fails)",
}


@dataclass
class TraceResult:
    path: str
    packets: int = 0
    tshark_frames: int = 0          # frames with http.request or http.response
    webtap_frames: int = 0          # HTTP first packets found by webtap
    both: int = 0                   # frames both report
    agree: int = 0                  # ... whose compared fields all agree
    categories: Counter = field(default_factory=Counter)
    examples: dict = field(default_factory=dict)   # category -> first few frame descriptions
    error: str | None = None

    def add(self, cat: str, desc: str) -> None:
        self.categories[cat] += 1
        ex = self.examples.setdefault(cat, [])
        if len(ex) < 3:
            ex.append(desc)


def run_tshark(path: str) -> dict[int, list[str]]:
    """tshark's fields of every frame (first-packet mode, no display filter), by frame number.
    A tshark that fails raises httpanalyzer.tshark.TsharkError (it names tshark)."""
    cmd = tshark.command(path, "first_packet", TSHARK_FIELDS, display_filter=None)
    out = tshark.run(cmd, path).stdout
    rows = {}
    for line in out.decode("utf-8", "surrogateescape").split("\n"):
        if not line:
            continue
        cols = line.split(SEP)
        if len(cols) != len(TSHARK_FIELDS) or not cols[0].isdigit():
            continue
        rows[int(cols[0])] = cols
    return rows


def _first(v: str) -> str:
    return v.split(AGG)[0]


def _payload(raw: bytes, linktype: int) -> bytes | None:
    """TCP payload of one packet via scapy (only for the few frames that differ)."""
    from scapy.all import TCP, conf

    cls = conf.l2types.get(linktype)
    if cls is None:
        return None
    try:
        pkt = cls(raw)
    except Exception:
        return None
    if TCP not in pkt:
        return None
    return bytes(pkt[TCP].payload)


def _starts_later(pay: bytes, method: str) -> bool:
    """A line after the payload's first one starts a request (tshark's method) or a response."""
    heads = [b"HTTP/"] + ([method.encode() + b" "] if method else [])
    return any(pay.find(eol + h, 0) >= 0 for eol in (b"\n", b"\r") for h in heads)


def _not_request_shape(pay: bytes, methods) -> bool:
    """The payload starts with a known method and a space, and what follows is not a request
    line's shape: the rule of docs/ACCURACY.md, in its one Python home (httpanalyzer.tshark,
    independent of ext/walk/httpstart.c). `methods` is webtap.records.message.METHOD_NAMES, which it uses."""
    from httpanalyzer.tshark import not_request_line

    return not_request_line(pay)


def _cut_line_without_colon(data: np.ndarray, msg) -> bool:
    """The header block ends in this packet with a partial line holding no colon (tshark then
    throws in packet-http.c before it adds http.request / http.response)."""
    from webtap.records.message import MSGF_HEADERS_INCOMPLETE, MSGF_URI_TRUNCATED

    if not int(msg["flags"]) & MSGF_HEADERS_INCOMPLETE or int(msg["flags"]) & MSGF_URI_TRUNCATED:
        return False
    start = int(msg["pkt_offset"]) + int(msg["payload_off"])
    pay = bytes(data[start: start + int(msg["payload_caplen"])])
    if not pay or pay[-1:] in (b"\r", b"\n"):
        return False
    last = pay[max(pay.rfind(b"\r"), pay.rfind(b"\n")) + 1:]
    if pay.rfind(b"\r") < 0 and pay.rfind(b"\n") < 0:
        return False            # only the first line, cut: tshark takes that (no exception)
    return b":" not in last


def compare_trace(path: str) -> TraceResult:
    from tests.dissect.trace_batches import read_trace
    from webtap.dissect import dissect
    from webtap.records.message import (DISSECT_REASONS, METHOD_NAMES, METHODS_TSHARK_NOTIFICATION,
                               METHODS_UNKNOWN_TO_TSHARK, MSG_REQUEST, MSGF_BAD_STATUS,
                               MSGF_AFTER_CONTINUATION)

    res = TraceResult(path=path)
    try:
        packets, data = read_trace(path)
    except Exception as e:  # noqa: BLE001 - a file neither reader opens is reported, not fatal
        res.error = f"read: {e}"
        return res
    tsh = run_tshark(path)
    reasons = np.zeros(len(packets), dtype=np.uint8)
    batch = dissect(packets, data, reasons)
    m = batch.msgs
    res.packets = len(packets)
    cols = {n: batch.column(n, errors="tshark").to_pylist() for n in ("method", "uri", "version", "host", "user_agent", "reason")}
    # frame -> its first message (messages inside a segment after it, and those after a header block
    # continued from an earlier segment: issue 31, compared by httpanalyzer compare, not here)
    web: dict[int, int] = {}
    for i in range(len(m)):
        if not int(m["flags"][i]) & MSGF_AFTER_CONTINUATION:
            web.setdefault(int(m["pkt_index"][i]) + 1, i)
    tsh_http = {f: r for f, r in tsh.items() if r[2] or r[3]}
    res.tshark_frames = len(tsh_http)
    res.webtap_frames = len(web)
    idx_of_frame = {int(packets["index"][i]) + 1: i for i in range(len(packets))}

    for frame, i in web.items():
        row = tsh.get(frame)
        method = cols["method"][i] or ""
        base_method = METHOD_NAMES[int(m["method_id"][i])] or ""
        desc = f"frame {frame} {method or m['status'][i]} {cols['uri'][i] or ''}"[:120]
        if frame not in tsh_http:
            protos = row[1] if row else ""
            if row is None or ":http" not in protos:
                after = protos.split(":tcp:", 1)[1].split(":")[0] if ":tcp:" in protos else "data"
                res.add("port_not_http", f"{desc} ports {m['src_port'][i]}->{m['dst_port'][i]} tshark: {after}")
            elif base_method in METHODS_TSHARK_NOTIFICATION and row[4]:
                res.add("tshark_notification", desc)
            elif base_method in METHODS_UNKNOWN_TO_TSHARK:
                res.add("method_unknown_to_tshark", desc)
            elif row[12]:
                res.add("connect_tunnel", f"{desc} tunnel to {row[12]}")
            elif _cut_line_without_colon(data, m[i]):
                res.add("tshark_header_exception", desc)
            elif (cols["version"][i] or "").startswith("http/"):
                res.add("lower_case_status_line", desc)
            else:
                res.add("unexplained", f"{desc} (webtap only) protos={protos}")
            continue
        res.both += 1
        is_req = int(m["kind"][i]) == MSG_REQUEST
        pipelined = AGG in row[2] or AGG in row[3] or (row[2] and row[3])
        diffs = []
        if is_req and not row[2]:
            diffs.append("kind")
        if not is_req and not row[3]:
            diffs.append("kind")
        trailing = False
        pairs = [("host", row[7]), ("user_agent", row[8])]
        if is_req:
            pairs += [("method", row[5]), ("uri", row[6])]
        else:
            pairs += [("reason", row[10])]
        for name, tval in pairs:
            w = cols[name][i] or ""
            t = _first(tval)
            if w != t:
                if name in ("host", "user_agent") and w == t.rstrip(" \t"):
                    trailing = True
                else:
                    diffs.append(name)
        if not is_req:
            t = _first(row[9])
            if str(int(m["status"][i])) != t and not (t == "" and int(m["status"][i]) == 0):
                diffs.append("status")
        if not diffs and not trailing:
            res.agree += 1
        elif not diffs:
            res.add("trailing_whitespace", desc)
        elif (diffs == ["uri"] and is_req and not cols["uri"][i]
              and (cols["version"][i] or "") == _first(row[6])):
            res.add("no_target", f"{desc} tshark uri {_first(row[6])!r}")
        elif diffs == ["status"] and int(m["flags"][i]) & MSGF_BAD_STATUS:
            res.add("bad_status_code", f"{desc} tshark code {row[9]!r}")
        elif pipelined:
            res.add("pipelined", f"{desc} differs in {diffs}")
        else:
            res.add("unexplained", f"{desc} differs in {diffs}: tshark {[row[k] for k in (5, 6, 7, 8, 9, 10)]}")

    for frame, row in tsh_http.items():
        if frame in web:
            continue
        j = idx_of_frame.get(frame)
        desc = f"frame {frame} {_first(row[5]) or _first(row[9])} {_first(row[6])}"[:120]
        if j is None:
            res.add("unexplained", f"{desc} (frame not read by webtap)")
            continue
        reason = DISSECT_REASONS[reasons[j]]
        if reason == "link_unsupported":
            res.add("link_unsupported", f"{desc} linktype {packets['linktype'][j]}")
        elif reason == "ip_fragment":
            res.add("ip_reassembled", desc)
        elif reason in ("not_http", "no_payload"):
            off = int(packets["offset"][j])
            raw = bytes(data[off: off + int(packets["caplen"][j])])
            pay = _payload(raw, int(packets["linktype"][j])) or b""
            first = pay.split(b"\r", 1)[0].split(b"\n", 1)[0]
            tok = first.split(b" ", 1)[0]
            if pay.startswith(b"ICY"):
                res.add("icy_status_line", desc)
            elif tok.split(b"\t")[0].removeprefix(b"M-").decode("latin-1") in METHOD_NAMES[1:] and b" " not in first[:len(tok) + 1]:
                res.add("method_without_space", f"{desc} payload {pay[:40]!r}")
            elif _not_request_shape(pay, METHOD_NAMES):
                res.add("not_a_request_line", f"{desc} payload {pay[:40]!r}")
            elif _starts_later(pay, _first(row[5])):
                res.add("message_mid_payload", f"{desc} payload starts {pay[:24]!r}")
            else:
                res.add("unexplained", f"{desc} (tshark only, webtap {reason}, no payload)")
        elif reason == "not_tcp" and ":udp:" in row[1]:
            res.add("http_over_udp", f"{desc} {row[1]}")
        elif reason in ("not_ip", "not_tcp"):
            res.add("encapsulation_not_dissected", f"{desc} webtap: {reason}, tshark: {row[1]}")
        elif reason in ("ip_bad_header", "ip_truncated", "tcp_bad_offset", "tcp_truncated", "link_truncated"):
            res.add("webtap_rejects_packet", f"{desc} webtap: {reason}, tshark: {row[1]}")
        else:
            res.add("unexplained", f"{desc} (tshark only, webtap {reason})")
    return res


def trace_files(root: str | Path) -> list[str]:
    root = Path(root)
    return sorted(str(p) for p in root.rglob("*") if p.is_file() and p.name.endswith(TRACE_SUFFIXES))


def compare_all(paths: list[str], workers: int = 2) -> list[TraceResult]:
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=workers) as ex:
        return list(ex.map(compare_trace, paths, chunksize=4))


def table(results: list[TraceResult], root: str) -> str:
    """Markdown: per source folder, then totals and the differences by category."""
    by_dir: dict[str, list[TraceResult]] = {}
    for r in results:
        by_dir.setdefault(os.path.relpath(r.path, root).split(os.sep)[0], []).append(r)
    out = ["| source | traces | packets | tshark frames | webtap frames | both | agree | differences |",
           "|---|---:|---:|---:|---:|---:|---:|---|"]
    tot = Counter()
    cats = Counter()
    for d, rs in sorted(by_dir.items()):
        c = Counter()
        for r in rs:
            c.update(r.categories)
        cats.update(c)
        row = [len(rs), sum(r.packets for r in rs), sum(r.tshark_frames for r in rs),
               sum(r.webtap_frames for r in rs), sum(r.both for r in rs), sum(r.agree for r in rs)]
        tot.update(dict(zip(("traces", "packets", "tshark", "webtap", "both", "agree"), row)))
        out.append(f"| {d} | " + " | ".join(str(x) for x in row) + " | "
                   + ", ".join(f"{k} {v}" for k, v in sorted(c.items())) + " |")
    out.append(f"| **total** | {tot['traces']} | {tot['packets']} | {tot['tshark']} | {tot['webtap']} | "
               f"{tot['both']} | {tot['agree']} | " + ", ".join(f"{k} {v}" for k, v in sorted(cats.items())) + " |")
    out += ["", "| category | frames | meaning |", "|---|---:|---|"]
    for k, v in sorted(cats.items(), key=lambda kv: -kv[1]):
        out.append(f"| {k} | {v} | {CATEGORIES[k]} |")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    args = [a for a in argv[1:] if not a.startswith("-")]
    root = args[0] if args else os.path.join(os.environ.get("WEBTAP_SHARED", "../shared"), "traces")
    results = compare_all(trace_files(root))
    print(table(results, root))
    for r in results:
        if r.error:
            print("ERROR", r.path, r.error)
        for cat in ("unexplained",):
            for ex in r.examples.get(cat, []):
                print(cat, os.path.relpath(r.path, root), ex)
    if "-v" in argv:
        for r in results:
            for cat, exs in r.examples.items():
                for ex in exs:
                    print(cat, os.path.relpath(r.path, root), ex)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
