"""Hand-built pcaps for the tshark comparison tests, one case per connection, written with scapy.

Each builder returns the packets; `write(path, packets)` saves them. The cases and what each
tool does with them are in test_compare.py.
"""
from __future__ import annotations

from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

T0 = 1_700_000_000.0
CLIENT, SERVER = "10.0.0.1", "10.0.0.2"


class Conn:
    """One TCP connection with a handshake; tracks both sides' raw sequence numbers."""

    def __init__(self, out: list, t: float, cport: int, sport: int = 80, isn_c=1000, isn_s=5000,
                 client=CLIENT, server=SERVER):
        self.out, self.t = out, t
        self.c, self.s, self.cport, self.sport = client, server, cport, sport
        self.cseq, self.sseq = isn_c, isn_s
        self._pkt("c", "S", b"", seq=isn_c - 1, ack=0)
        self._pkt("s", "SA", b"", seq=isn_s - 1, ack=isn_c)
        self._pkt("c", "A", b"", seq=isn_c, ack=isn_s)

    def _pkt(self, side, flags, payload, seq, ack, dt=0.001):
        self.t += dt
        if side == "c":
            p = Ether() / IP(src=self.c, dst=self.s) / TCP(sport=self.cport, dport=self.sport,
                                                           flags=flags, seq=seq, ack=ack)
        else:
            p = Ether() / IP(src=self.s, dst=self.c) / TCP(sport=self.sport, dport=self.cport,
                                                           flags=flags, seq=seq, ack=ack)
        if payload:
            p = p / payload
        p.time = self.t
        self.out.append(p)
        return p

    def request(self, uri="/", host="example.com", dt=0.001, advance=True):
        body = (f"GET {uri} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: test/1.0\r\n\r\n").encode()
        p = self._pkt("c", "PA", body, self.cseq, self.sseq, dt)
        if advance:
            self.cseq += len(body)
        return p

    def resend(self, p, dt=0.001):
        """The same segment again (a TCP retransmission)."""
        q = p.copy()
        self.t += dt
        q.time = self.t
        self.out.append(q)
        return q

    def response(self, status=200, reason="OK", body=b"hello", dt=0.01):
        msg = (f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
        p = self._pkt("s", "PA", msg, self.sseq, self.cseq, dt)
        self.sseq += len(msg)
        return p


def mixed_cases() -> list:
    """Connections: 40001 one plain transaction; 40002 a retransmitted request; 40003 two
    pipelined requests; 40004 a transaction on port 8443; 40005 a response whose request is not
    in the trace; 40006 a request whose response is not in the trace (trace end)."""
    out: list = []
    a = Conn(out, T0, 40001)
    a.request("/plain")
    a.response()
    b = Conn(out, T0 + 1, 40002)
    r = b.request("/retransmitted")
    b.resend(r, dt=0.2)
    b.response()
    c = Conn(out, T0 + 2, 40003)
    c.request("/p1")
    c.request("/p2")
    c.response(body=b"one")
    c.response(body=b"two")
    d = Conn(out, T0 + 3, 40004, sport=8443)
    d.request("/tls-port")
    d.response()
    e = Conn(out, T0 + 4, 40005)
    e.out.pop()             # the handshake's last ACK stays; the request itself is never sent
    e.cseq += 40            # the client sent a 40-byte request the capture missed
    e.response(status=404, reason="Not Found")
    f = Conn(out, T0 + 5, 40006)
    f.request("/no-answer")
    out.sort(key=lambda p: p.time)
    return out


def write(path, packets) -> str:
    wrpcap(str(path), packets)
    return str(path)


def port_not_http_case() -> list:
    """HTTP on port 21: tshark hands the port to its FTP dissector (its TCP heuristic decodes
    HTTP on most other ports, 8443 included)."""
    out: list = []
    c = Conn(out, T0, 41001, sport=21)
    c.request("/ftp-port")
    c.response()
    return out


def split_by_chunk_case() -> list:
    """Request in packets 0-3, response at packet 5 after a bare ACK: with 4-packet chunks the
    pair straddles a chunk boundary."""
    out: list = []
    c = Conn(out, T0, 42001)
    c.request("/split")
    c._pkt("c", "A", b"", c.cseq, c.sseq)
    c.response()
    return out


def equal_times_case(times_ns=(1_560_882_000,) * 6) -> list:
    """One transaction per connection (client ports 41000...), the response `times_ns[i]` after
    its request, written with integer-nanosecond timestamps (microsecond multiples, so that a
    classic pcap holds them exactly): `(ts_ns, frame bytes)` pairs for tests.pcapbuild.pcap."""
    out = []
    for i, rt in enumerate(times_ns):
        pkts: list = []
        c = Conn(pkts, T0, 41000 + i)
        c.request(f"/same/{i}")
        c.response()
        base = 1_700_000_000_000_000_000 + i * 10_000_000_000 + 123_457_000
        stamps = [base, base + 1_000_000, base + 2_000_000, base + 3_000_000, base + 3_000_000 + rt]
        out += [(t, bytes(p)) for t, p in zip(stamps, pkts)]
    return out
