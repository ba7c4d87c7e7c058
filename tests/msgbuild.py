"""Build HttpMsg batches (webtap.records.message.MESSAGE_DTYPE) directly, for pairing tests that do not
need the capture and dissect stages: each message's HTTP head is laid out in one byte buffer
behind a fake 54-byte link/IP/TCP header, and its spans point at the real bytes.

The same transactions as real packets (`packets()`: Ethernet, IPv4 or IPv6, TCP, the HTTP head)
for tests that drive the product's packet path (the feeder's classify_batch / feed_packets)."""
from __future__ import annotations

import ipaddress
import struct

import numpy as np

from webtap.records.message import MESSAGE_DTYPE, MSG_REQUEST, MSG_RESPONSE, PACKET_DTYPE

HDR = 54
METHODS = {"GET": 1, "HEAD": 2, "POST": 3, "PUT": 4, "DELETE": 5, "CONNECT": 6, "OPTIONS": 7,
           "TRACE": 8, "PATCH": 9}


def ip16(addr: str) -> tuple[bytes, int]:
    a = ipaddress.ip_address(addr)
    return (a.packed + bytes(16 - len(a.packed)), a.version)


class MsgBuilder:
    def __init__(self):
        self.rows: list[dict] = []
        self.buf = bytearray()

    def _add(self, kind, ts_ns, src, sport, dst, dport, seq, ack, payload: bytes, spans: dict,
             status=0, method_id=0, vlan=0xFFFF, flags=0, payload_len=None):
        s, ver = ip16(src)
        d, ver2 = ip16(dst)
        assert ver == ver2
        off = len(self.buf)
        self.buf += bytes(HDR) + payload
        self.rows.append(dict(kind=kind, ts_ns=ts_ns, pkt_index=len(self.rows), pkt_offset=off,
                              src_ip=np.frombuffer(s, np.uint8), dst_ip=np.frombuffer(d, np.uint8),
                              seq=seq, ack=ack, src_port=sport, dst_port=dport, vlan=vlan,
                              ip_off=14, tcp_off=34, payload_off=HDR, payload_caplen=len(payload),
                              payload_len=len(payload) if payload_len is None else payload_len,
                              status=status, flags=flags, linktype=1, method_id=method_id,
                              ip_version=ver, tcp_flags=0x18, ttl=64, spans=spans))
        return len(self.rows) - 1

    def req(self, ts_ns, src, sport, dst, dport, seq, ack, method="GET", uri="/", host="example.com",
            ua="test-agent", vlan=0xFFFF, flags=0):
        head = f"{method} ".encode()
        spans = {"method": (0, len(method))}
        u = uri.encode() if isinstance(uri, str) else uri
        spans["uri"] = (len(head), len(u))
        p = head + u + b" HTTP/1.1\r\n"
        spans["version"] = (len(p) - 10, 8)
        if host is not None:
            h = host.encode() if isinstance(host, str) else host
            spans["host"] = (len(p) + 6, len(h))
            p += b"Host: " + h + b"\r\n"
        if ua is not None:
            a = ua.encode() if isinstance(ua, str) else ua
            spans["user_agent"] = (len(p) + 12, len(a))
            p += b"User-Agent: " + a + b"\r\n"
        p += b"\r\n"
        return self._add(MSG_REQUEST, ts_ns, src, sport, dst, dport, seq, ack, p, spans,
                         method_id=METHODS.get(method, 0), vlan=vlan, flags=flags)

    def resp(self, ts_ns, src, sport, dst, dport, seq, ack, status=200, reason="OK", vlan=0xFFFF,
             payload_len=None, body=b""):
        line = f"HTTP/1.1 {status} ".encode()
        spans = {"version": (0, 8), "reason": (len(line), len(reason.encode()))}
        p = line + reason.encode() + b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body
        return self._add(MSG_RESPONSE, ts_ns, src, sport, dst, dport, seq, ack, p, spans,
                         status=status, vlan=vlan, payload_len=payload_len)

    def build(self, order=None):
        """(msgs, data); `order` permutes the messages (pkt_index keeps the original position)."""
        rows = self.rows if order is None else [self.rows[i] for i in order]
        msgs = np.zeros(len(rows), dtype=MESSAGE_DTYPE)
        for i, r in enumerate(rows):
            for k, v in r.items():
                if k == "spans":
                    for name, (o, n) in v.items():
                        msgs[i][name]["off"] = HDR + o
                        msgs[i][name]["len"] = n
                else:
                    msgs[i][k] = v
        return msgs, np.frombuffer(bytes(self.buf), dtype=np.uint8)

    def packets(self, order=None):
        """(packets, data): every message as one real frame (Ethernet, an 802.1Q tag when it
        has a VLAN, IPv4 or IPv6, TCP with PSH|ACK, the HTTP head) in a PACKET_DTYPE batch;
        `order` as in build(). A message whose payload_len exceeds its head is a frame captured
        short (caplen < wirelen, the IP length says payload_len), as a snaplen makes it."""
        rows = self.rows if order is None else [self.rows[i] for i in order]
        frames, pk = [], np.zeros(len(rows), dtype=PACKET_DTYPE)
        off = 0
        for i, r in enumerate(rows):
            o = r["pkt_offset"] + HDR
            payload = bytes(self.buf[o:o + r["payload_caplen"]])
            src, dst = bytes(r["src_ip"]), bytes(r["dst_ip"])
            tcp = struct.pack("!HHIIBBHHH", r["src_port"], r["dst_port"], r["seq"], r["ack"],
                              5 << 4, r["tcp_flags"], 65535, 0, 0)
            if r["ip_version"] == 4:
                ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40 + r["payload_len"], 0, 0x4000,
                                 r["ttl"], 6, 0, src[:4], dst[:4])
                etype = 0x0800
            else:
                ip = struct.pack("!IHBB16s16s", 6 << 28, 20 + r["payload_len"], 6, r["ttl"], src, dst)
                etype = 0x86DD
            eth = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01"
            if r["vlan"] != 0xFFFF:
                eth += struct.pack("!HH", 0x8100, r["vlan"])
            frame = eth + struct.pack("!H", etype) + ip + tcp + payload
            frames.append(frame)
            pk[i]["ts_ns"], pk[i]["index"], pk[i]["offset"] = r["ts_ns"], r["pkt_index"], off
            pk[i]["caplen"] = len(frame)
            pk[i]["wirelen"] = len(frame) + r["payload_len"] - r["payload_caplen"]
            pk[i]["linktype"] = 1
            off += len(frame)
        return pk, np.frombuffer(b"".join(frames), dtype=np.uint8)
