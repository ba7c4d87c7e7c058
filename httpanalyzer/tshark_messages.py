"""HTTP first-packet messages as tshark sees them, as a MESSAGE_DTYPE batch.

Used to test the pairing table against tshark's own pairing on exactly tshark's messages, so
that pairing differences are measured apart from dissector differences (docs/ACCURACY.md,
"Pairing"). One tshark run per trace; the batch is built with numpy column assignments.
"""
from __future__ import annotations

import ipaddress
import subprocess

import numpy as np

from httpanalyzer.compare import TSHARK_FIRST_PACKET
from webtap.schema import MESSAGE_DTYPE, MSG_REQUEST, MSG_RESPONSE

FIELDS = ["frame.number", "frame.time_epoch", "ip.src", "ip.dst", "ipv6.src", "ipv6.dst",
          "tcp.srcport", "tcp.dstport", "tcp.seq_raw", "tcp.ack_raw", "tcp.len", "vlan.id",
          "http.request", "http.response", "http.request_in", "http.response.code",
          "http.request.method", "http.request.uri", "http.host", "http.user_agent",
          "http.response.phrase"]
_TEXT = {"method": "http.request.method", "uri": "http.request.uri", "host": "http.host",
         "user_agent": "http.user_agent", "reason": "http.response.phrase"}


def _ns(epoch: str) -> int:
    s, _, f = epoch.partition(".")
    return int(s) * 1_000_000_000 + int((f + "000000000")[:9])


def _ip16(a: str) -> tuple[bytes, int]:
    ip = ipaddress.ip_address(a)
    return ip.packed + bytes(16 - len(ip.packed)), ip.version


def tshark_messages(path: str, tshark: str = "tshark"):
    """(msgs, data, request_in) for the HTTP frames of `path`: request_in holds tshark's
    http.request_in of each message (0-based frame index, -1 when none)."""
    cmd = [tshark, "-n", "-r", path, *TSHARK_FIRST_PACKET, "-Y", "http.request or http.response",
           "-T", "fields", "-E", "separator=\x01", "-E", "occurrence=l"]
    for f in FIELDS:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, check=False).stdout
    rows = [dict(zip(FIELDS, ln.split(b"\x01"))) for ln in out.split(b"\n") if ln]
    # occurrence=l picks the innermost IP (tunnels); first-occurrence text would be nicer for
    # pipelined frames, so take the text fields again with occurrence=f.
    cmd_f = [c if c != "occurrence=l" else "occurrence=f" for c in cmd]
    out_f = subprocess.run(cmd_f, capture_output=True, check=False).stdout
    rows_f = [dict(zip(FIELDS, ln.split(b"\x01"))) for ln in out_f.split(b"\n") if ln]
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
