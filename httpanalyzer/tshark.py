"""The tshark driver: every tshark run of the comparisons goes through here (issue 19).

One place for tshark's command lines (the paper's first-packet flags, the field lists, the
display filters), for chunking long traces with editcap, and ONE runner, `run`, that checks
tshark's exit status: a tshark that fails raises `TsharkError`, whose message names tshark, its
exit status and the end of its stderr. A failed tshark is never "nothing to compare".

tshark's exit status is 0 when it read the whole file. A capture cut short in the middle of a
packet (common in public traces) makes tshark print what it read and exit 2 with "appears to
have been cut short" / "appears to be damaged or corrupt" on stderr: the packets before the
damage are real, webtap reads them too, so `run` accepts that case (and only that one) and
reports it in `TsharkRun.damaged`.

Users: httpanalyzer.compare (transactions, issue 5), tests/tools/accuracy_table.py (first
packets frame by frame), tests/tools/pair_table.py (pairs), benchmarks/bench_analyzer.py
(tshark's run time).

Frame numbers: tshark's frame.number is 1-based, webtap's frame indices 0-based; the parsers
here return 0-based indices.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
import ipaddress
import os
import re
import shlex
import subprocess
import tempfile
from dataclasses import dataclass

import numpy as np
import pandas as pd

from httpanalyzer.errors import TsharkError
from webtap.records.message import MESSAGE_DTYPE, METHOD_NAMES, MSG_REQUEST, MSG_RESPONSE

#: tshark preferences for the paper's first-packet mode (no TCP or HTTP reassembly).
TSHARK_FIRST_PACKET = ["-o", "tcp.desegment_tcp_streams:FALSE", "-o", "http.desegment_headers:FALSE",
                       "-o", "http.desegment_body:FALSE"]

#: Preferences of both modes: webtap opens Teredo on any UDP port (docs/ACCURACY.md,
#: "Encapsulations"), tshark only on 3544 unless its heuristic is on.
TSHARK_COMMON = ["-o", "teredo.heuristic_teredo:TRUE"]

#: tshark's two modes: the paper's first-packet mode and its default reassembly mode.
MODES = {"first_packet": TSHARK_COMMON + TSHARK_FIRST_PACKET, "reassembly": list(TSHARK_COMMON)}

#: The display filter of tshark's HTTP messages.
HTTP_FILTER = "http.request or http.response"

#: Field separator and aggregator (for fields that occur several times in a frame) of -T fields.
SEP, AGG = "\x1f", "\x1e"

#: Fields of the pair-level comparison (tshark_frames).
PAIR_FIELDS = ["frame.number", "http.request", "http.response", "http.request_in", "tcp.seq_raw",
               "tcp.ack_raw", "tcp.srcport", "tcp.dstport", "http.response.code"]

#: Fields of the transaction comparison (tshark_http).
TX_FIELDS = ["frame.number", "frame.time_epoch", "frame.protocols", "ip.src", "ip.dst",
             "ipv6.src", "ipv6.dst", "tcp.srcport", "tcp.dstport", "tcp.seq_raw", "tcp.ack_raw",
             "tcp.segment", "http.request", "http.response", "http.request_in", "http.time",
             "http.request.method", "http.request.uri", "http.host", "http.user_agent",
             "http.response.code", "http.response.phrase"]

#: Fields that explain why tshark does not report a frame as HTTP (tshark_explain).
EXPLAIN_FIELDS = ["frame.number", "frame.protocols", "tcp.analysis.retransmission",
                  "tcp.analysis.out_of_order", "tcp.analysis.spurious_retransmission",
                  "http.request.method", "http.notification", "http.proxy_connect_host",
                  "ip.fragment", "ipv6.fragment", "tcp.payload"]

#: Fields of tshark's messages as a MESSAGE_DTYPE batch (tshark_messages).
MESSAGE_FIELDS = ["frame.number", "frame.time_epoch", "ip.src", "ip.dst", "ipv6.src", "ipv6.dst",
                  "tcp.srcport", "tcp.dstport", "tcp.seq_raw", "tcp.ack_raw", "tcp.len", "vlan.id",
                  "http.request", "http.response", "http.request_in", "http.response.code",
                  "http.request.method", "http.request.uri", "http.host", "http.user_agent",
                  "http.response.phrase"]

#: stderr of a tshark that read a capture up to a damaged or cut record (exit status 2).
_DAMAGED = ("appears to have been cut short", "appears to be damaged or corrupt")


@dataclass
class TsharkRun:
    stdout: bytes
    stderr: str
    damaged: bool           # tshark stopped at a damaged/cut record (exit 2), output before kept


def run(cmd: list[str], what: str | None = None) -> TsharkRun:
    """Run one tshark command; raise TsharkError unless it exits 0 (or 2 on a damaged file,
    see the module docstring). `what` (the trace) goes into the error message."""
    try:
        r = subprocess.run(cmd, capture_output=True, check=False,
                           env={**os.environ, "LC_ALL": "C.UTF-8"})
    except OSError as e:
        raise TsharkError(f"tshark could not be started ({cmd[0]}): {e}") from e
    err = r.stderr.decode("utf-8", errors="replace")
    damaged = r.returncode == 2 and any(s in err for s in _DAMAGED)
    if r.returncode != 0 and not damaged:
        tail = " ".join(err.split())[-400:] or "no message"
        raise TsharkError(f"tshark failed (exit status {r.returncode})"
                          f"{' on ' + what if what else ''}: {tail}")
    return TsharkRun(r.stdout, err, damaged)


def command(path: str, mode: str, fields, display_filter: str | None = HTTP_FILTER,
            tshark: str = "tshark", occurrence: str = "a", separator: str = SEP,
            extra: list[str] | None = None) -> list[str]:
    """tshark -T fields command line for `path` in `mode` (a key of MODES)."""
    cmd = [tshark, "-n", "-r", path, *MODES[mode]]
    if display_filter:
        cmd += ["-Y", display_filter]
    cmd += ["-T", "fields", "-E", f"separator={separator}", "-E", f"occurrence={occurrence}"]
    if occurrence == "a":
        cmd += ["-E", f"aggregator={AGG}"]
    for f in fields:
        cmd += ["-e", f]
    return cmd + list(extra or [])


def run_fields(cmd: list[str], fields, what: str | None = None) -> list[dict]:
    """Rows of a -T fields run (SEP-separated), as {field: text}."""
    out = run(cmd, what).stdout.decode("utf-8", errors="replace")
    return [dict(zip(fields, ln.split(SEP))) for ln in out.split("\n") if ln]


def shown(cmd: list[str]) -> str:
    return " ".join(shlex.quote(x) for x in cmd)


def tshark_version(tshark: str = "tshark") -> str:
    out = run([tshark, "--version"]).stdout.decode(errors="replace")
    return out.splitlines()[0] if out else "unknown"


def chunk_trace(path: str, chunk_packets: int, workdir: str, editcap: str = "editcap",
                capinfos: str = "capinfos") -> list[tuple[str, int]]:
    """[(file, index of its first frame)]: the trace itself when it holds at most chunk_packets
    packets, else editcap's pieces of chunk_packets packets each (the paper's 20 M-packet
    chunks, which kept tshark's memory bounded)."""
    r = subprocess.run([capinfos, "-M", "-c", "-T", "-r", path], capture_output=True, text=True,
                       check=False)
    try:
        n = int(r.stdout.strip().split("\t")[-1])
    except ValueError:
        n = 0           # capinfos could not count (a damaged file): tshark reads it whole
    if n <= chunk_packets:
        return [(path, 0)]
    prefix = os.path.join(workdir, "chunk.pcapng")
    e = subprocess.run([editcap, "-F", "pcapng", "-c", str(chunk_packets), path, prefix],
                       capture_output=True, check=False)
    if e.returncode != 0:
        raise TsharkError(f"editcap failed (exit status {e.returncode}) on {path}: "
                          f"{e.stderr.decode(errors='replace')[-300:]}")
    parts = sorted(f for f in os.listdir(workdir) if f.startswith("chunk_"))
    return [(os.path.join(workdir, f), i * chunk_packets) for i, f in enumerate(parts)]


def first(v: str) -> str:
    return v.split(AGG, 1)[0] if v else ""


def last(v: str) -> str:
    return v.rsplit(AGG, 1)[-1] if v else ""


def to_int(v: str, default: int = -1) -> int:
    try:
        return int(v)
    except ValueError:
        return default


# --------------------------------------------------------------------------------------------
# Pairs: tshark's first-packet http.request_in (the pair-level comparison, tests/tools/pair_table)
# --------------------------------------------------------------------------------------------

def tshark_frames(path: str, bpf: str | None = None, tshark: str = "tshark") -> pd.DataFrame:
    """One row per frame tshark sees as HTTP (first-packet mode): 0-based frame index, kind,
    request_in (0-based, -1 none), seq, ack, ports, status."""
    cmd = command(path, "first_packet", PAIR_FIELDS, tshark=tshark, occurrence="f",
                  separator="\t", extra=["-2", "-R", bpf] if bpf else None)
    out = run(cmd, path).stdout.decode("utf-8", errors="replace")
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


# --------------------------------------------------------------------------------------------
# Transactions: tshark's HTTP frames in both modes (httpanalyzer.compare)
# --------------------------------------------------------------------------------------------

def _parse_http_rows(rows: list[dict], offset: int, chunk: int) -> pd.DataFrame:
    out = []
    for r in rows:
        f = to_int(r["frame.number"]) - 1 + offset
        segs = tuple(to_int(x) - 1 + offset for x in r.get("tcp.segment", "").split(AGG) if x)
        first_f = segs[0] if segs else f
        reqs = [x for x in r["http.request"].split(AGG) if x] if r["http.request"] else []
        resps = [x for x in r["http.response"].split(AGG) if x] if r["http.response"] else []
        src = last(r["ip.src"]) or last(r["ipv6.src"])
        dst = last(r["ip.dst"]) or last(r["ipv6.dst"])
        n = len(reqs) + len(resps)
        # A frame with several messages (pipelined, or several responses in one segment) gives
        # one row per message. tshark lists a field once per message that has it, so the k-th
        # value is the k-th message's only when every message has one; otherwise only the first
        # message gets the first value (as before issue 31) and the others none. Every request
        # line has a method and every status line a code: a last message whose header block is
        # cut has them without http.request/http.response (tshark throws before it sets those).
        if n > 1:
            key = "http.request.method" if reqs else "http.response.code"
            n = max(n, len(r[key].split(AGG)) if r[key] else 0)
        for k in range(max(n, 1)):
            def nth(name, k=k):
                v = r[name].split(AGG) if r[name] else []
                return v[k] if len(v) == n else (v[0] if k == 0 and v else "")
            rin = nth("http.request_in")
            t = nth("http.time")
            # tcp.segment lists the segments of the frame's first message (reassembled); the
            # messages after it begin in this frame
            out.append((f, first_f if k == 0 else f, segs if k == 0 else (), chunk,
                        r["frame.time_epoch"], r["frame.protocols"], src,
                        dst, to_int(last(r["tcp.srcport"])), to_int(last(r["tcp.dstport"])),
                        to_int(last(r["tcp.seq_raw"])), to_int(last(r["tcp.ack_raw"])),
                        bool(reqs), bool(resps) and not reqs, n,
                        to_int(rin) - 1 + offset if rin else -1, float(t) if t else np.nan,
                        seconds_to_ns(t) if t else NO_TIME,
                        nth("http.request.method") or None, nth("http.request.uri") or None,
                        nth("http.host") or None, nth("http.user_agent") or None,
                        to_int(nth("http.response.code")),
                        nth("http.response.phrase") if resps else None))
    cols = ["frame", "first_frame", "segments", "chunk", "epoch", "protocols", "src", "dst", "sport", "dport",
            "seq", "ack", "is_req", "is_resp", "n_msgs", "request_in", "time_s", "time_ns", "method", "uri",
            "host", "user_agent", "status", "reason"]
    return pd.DataFrame(out, columns=cols)


def _map_jobs(fn, items, jobs):
    if jobs <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=jobs) as ex:     # each task is one tshark process
        return list(ex.map(fn, items))


def tshark_http(path: str, modes=("first_packet", "reassembly"), tshark: str = "tshark",
                chunk_packets: int = 1_000_000, jobs: int = 2, workdir: str | None = None):
    """tshark's HTTP frames of `path` in each mode: ({mode: frames DataFrame}, [command lines],
    [(chunk file, first frame)]). Frame indices are 0-based and global (chunk offsets added);
    `first_frame` is the first packet of the message (first tcp.segment in reassembly mode)."""

    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        chunks = chunk_trace(path, chunk_packets, tmp)
        tasks = [(m, i, c, off) for m in modes for i, (c, off) in enumerate(chunks)]
        cmds = [command(c, m, TX_FIELDS, tshark=tshark) for m, _, c, _ in tasks]
        rows = _map_jobs(lambda k: run_fields(cmds[k], TX_FIELDS, path), list(range(len(tasks))), jobs)
        frames = {}
        for m in modes:
            parts = [_parse_http_rows(rows[k], tasks[k][3], tasks[k][1])
                     for k in range(len(tasks)) if tasks[k][0] == m]
            frames[m] = pd.concat(parts, ignore_index=True) if parts else _parse_http_rows([], 0, 0)
        lines = [f"editcap -F pcapng -c {chunk_packets} {shlex.quote(path)} chunk.pcapng"] \
            if len(chunks) > 1 else []
        for cmd, (_, i, c, _) in zip(cmds, tasks):
            line = shown(cmd)
            lines.append(line.replace(c, f"{path}#chunk{i}") if len(chunks) > 1 else line)
        return frames, lines, chunks


def tshark_explain(path: str, frames: list[int], chunk_starts: list[int], tshark: str = "tshark",
                   chunk_packets: int = 1_000_000, workdir: str | None = None,
                   commands: list | None = None) -> pd.DataFrame:
    """Why tshark does not report the given frames (0-based, global) as HTTP: their protocol
    stack and TCP analysis flags, from one more first-packet-mode run on just those frames.
    The command lines run are appended to `commands`."""
    cols = ["frame", "protocols", "retransmission", "http_method", "notification", "connect",
            "ip_fragment", "payload_starts_message", "not_request_line", "lower_case_status"]
    if not frames:
        return pd.DataFrame(columns=cols)

    out = []
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        chunks = chunk_trace(path, chunk_packets, tmp) if len(chunk_starts) > 1 else [(path, 0)]
        starts = [off for _, off in chunks] + [1 << 62]
        for i, (c, off) in enumerate(chunks):
            mine = [f - off + 1 for f in frames if off <= f < starts[i + 1]]
            for k in range(0, len(mine), 2000):    # display filter size bound
                flt = "frame.number in {" + ",".join(map(str, mine[k:k + 2000])) + "}"
                cmd = command(c, "first_packet", EXPLAIN_FIELDS, flt, tshark=tshark)
                if commands is not None:
                    commands.append(shown(cmd).replace(
                        c, path + (f"#chunk{i}" if len(chunks) > 1 else "")))
                for r in run_fields(cmd, EXPLAIN_FIELDS, path):
                    out.append((to_int(r["frame.number"]) - 1 + off, r["frame.protocols"],
                                any(r[x] for x in ("tcp.analysis.retransmission",
                                                   "tcp.analysis.out_of_order",
                                                   "tcp.analysis.spurious_retransmission")),
                                bool(r["http.request.method"]), bool(r["http.notification"]),
                                bool(r["http.proxy_connect_host"]),
                                bool(r["ip.fragment"] or r["ipv6.fragment"]),
                                _starts_message(last(r["tcp.payload"])),
                                _not_request_line(last(r["tcp.payload"])),
                                _lower_case_status(last(r["tcp.payload"]))))
    return pd.DataFrame(out, columns=cols)


def _lower_case_status(payload_hex: str) -> bool:
    """The payload starts a status line with its version in lower case: "http/" DIGIT "."
    DIGIT SP (Zeek reads a response, tshark 4.0 data; docs/ACCURACY.md)."""
    try:
        p = bytes.fromhex(payload_hex.replace(":", "")[:18])
    except ValueError:
        return False
    return (len(p) >= 9 and p[:5] == b"http/" and p[5:6].isdigit() and p[6:7] == b"."
            and p[7:8].isdigit() and p[8:9] == b" ")


def _starts_message(payload_hex: str) -> bool:
    """Does a TCP payload (tshark's hex) start with an HTTP request line or status line?"""

    head = bytes.fromhex(payload_hex.replace(":", "")[:64]) if payload_hex else b""
    if head.startswith(b"\r\n") and len(head) > 3:
        head = head[2:]
    return head.startswith(b"HTTP/") or any(head.startswith(m.encode() + b" ")
                                            for m in METHOD_NAMES if m)


def _not_request_line(payload_hex: str) -> bool:
    """not_request_line of a TCP payload in tshark's hex."""
    pay = bytes.fromhex(payload_hex.replace(":", "")) if payload_hex else b""
    if pay.startswith(b"\r\n") and len(pay) > 3:
        pay = pay[2:]
    return not_request_line(pay)


def not_request_line(pay: bytes) -> bool:
    """The payload starts with a method and a space but not with a request line's shape (issue 23,
    docs/ACCURACY.md "Request lines"): no request-target form and no version at the line's end,
    e.g. a response body "POST request received successfully!". Written from the documented
    rule, apart from ext/walk/httpstart.c (the compare explainer and tests/tools/accuracy_table.py
    use it to name the difference)."""

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


# --------------------------------------------------------------------------------------------
# tshark's messages as a MESSAGE_DTYPE batch: the pairing table on exactly tshark's messages
# (isolates pairing from dissection; docs/ACCURACY.md, "Pairing")
# --------------------------------------------------------------------------------------------

_TEXT = {"method": "http.request.method", "uri": "http.request.uri", "host": "http.host",
         "user_agent": "http.user_agent", "reason": "http.response.phrase"}


def _ns(epoch: str) -> int:
    s, _, f = epoch.partition(".")
    return int(s) * 1_000_000_000 + int((f + "000000000")[:9])


#: time_ns of a transaction without a response time (an int64 column has no NaN)
NO_TIME = np.iinfo(np.int64).min


def seconds_to_ns(text: str) -> int:
    """tshark's decimal seconds ("1.560882000", "-0.5") as exact integer nanoseconds: no float
    on the way, so equal times stay equal (issue 30)."""
    neg = text.startswith("-")
    v = _ns(text.lstrip("+-"))
    return -v if neg else v


def _ip16(a: str) -> tuple[bytes, int]:
    ip = ipaddress.ip_address(a)
    return ip.packed + bytes(16 - len(ip.packed)), ip.version


def tshark_messages(path: str, tshark: str = "tshark"):
    """(msgs, data, request_in) for the HTTP frames of `path`: request_in holds tshark's
    http.request_in of each message (0-based frame index, -1 when none). One batch built with
    numpy column assignments."""

    # occurrence=l picks the innermost IP (tunnels); the text fields are taken from a second
    # run with occurrence=f (the first message of a pipelined frame)
    cmd = command(path, "first_packet", MESSAGE_FIELDS, tshark=tshark, occurrence="l",
                  separator="\x01")
    rows = [dict(zip(MESSAGE_FIELDS, ln.split(b"\x01")))
            for ln in run(cmd, path).stdout.split(b"\n") if ln]
    cmd_f = command(path, "first_packet", MESSAGE_FIELDS, tshark=tshark, occurrence="f",
                    separator="\x01")
    rows_f = [dict(zip(MESSAGE_FIELDS, ln.split(b"\x01")))
              for ln in run(cmd_f, path).stdout.split(b"\n") if ln]
    n = len(rows)
    msgs = np.zeros(n, dtype=MESSAGE_DTYPE)
    data = bytearray()
    request_in = np.full(n, -1, dtype=np.int64)
    keep = np.ones(n, dtype=bool)
    for i, (r, rf) in enumerate(zip(rows, rows_f)):
        src = (r["ip.src"] or r["ipv6.src"]).decode()
        dst = (r["ip.dst"] or r["ipv6.dst"]).decode()
        if not src or not r["tcp.srcport"]:
            keep[i] = False
            continue
        ts = _ns(r["frame.time_epoch"].decode())
        if not -2**63 <= ts < 2**63:
            keep[i] = False
            continue
        s, ver = _ip16(src)
        d, _ = _ip16(dst)
        m = msgs[i]
        m["pkt_index"] = int(r["frame.number"]) - 1
        m["ts_ns"] = ts
        m["src_ip"] = np.frombuffer(s, np.uint8)
        m["dst_ip"] = np.frombuffer(d, np.uint8)
        m["ip_version"] = ver
        m["src_port"] = int(r["tcp.srcport"])
        m["dst_port"] = int(r["tcp.dstport"])
        m["seq"] = int(r["tcp.seq_raw"] or 0)
        m["ack"] = int(r["tcp.ack_raw"] or 0)
        m["payload_len"] = int(r["tcp.len"] or 0)
        m["vlan"] = int(r["vlan.id"].split(b",")[0]) if r["vlan.id"] else 0xFFFF
        is_req = bool(rf["http.request"])
        m["kind"] = MSG_REQUEST if is_req else MSG_RESPONSE
        if not is_req:
            m["status"] = int(rf["http.response.code"] or 0)
        if r["http.request_in"]:
            request_in[i] = int(r["http.request_in"].split(b",")[0]) - 1
        m["pkt_offset"] = len(data)
        for name, f in _TEXT.items():
            v = rf[f]
            if (name == "reason") == is_req:
                continue
            m[name]["off"] = len(data) - m["pkt_offset"]
            m[name]["len"] = len(v)
            data += v
    return msgs[keep], np.frombuffer(bytes(data) or b"\0", np.uint8), request_in[keep]
