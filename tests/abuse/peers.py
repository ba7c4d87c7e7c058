"""Clients of the abuse analytics' live tests, run inside a client namespace (tests/abuse/live.py).

    peers.py schedule SERVER PORTS START OFFSETS TAG  one request per offset (seconds after the
        epoch time START, comma-separated) to each port of PORTS (comma-separated), each on its own
        connection (Connection: close), sent in one segment at its time; prints one JSON line per
        request: port, i, sent (epoch s), status
    peers.py normal SERVER PORTS SECONDS              a well-behaved client for SECONDS: in turn on
        each port, two GETs on one kept-alive connection, a 20 KB POST, a 200 KiB download read
        at once; closes each connection when done; prints the number of connections
    peers.py idle SERVER PORT N HOLD                  N connections that each GET once, read the
        answer, then hold the kept-alive connection idle for HOLD seconds before closing
"""
from __future__ import annotations

import json
import socket
import sys
import threading
import time


def _read_response(s: socket.socket) -> tuple[int, bytes]:
    """One response (status, body) from a connection: Content-Length or until close."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            break
        buf += d
    head, _, body = buf.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1]) if lines and len(lines[0].split()) > 1 else 0
    length = None
    for ln in lines[1:]:
        k, _, v = ln.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v.strip())
    while length is None or len(body) < length:
        d = s.recv(65536)
        if not d:
            break
        body += d
    return status, body


def schedule(server: str, ports: list[int], start: float, offsets: list[float], tag: str) -> None:
    out: list[dict] = []
    lock = threading.Lock()

    def one(port: int, i: int, at: float) -> None:
        s = socket.create_connection((server, port), timeout=30)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        req = (f"GET /r?c={tag}&i={i} HTTP/1.1\r\nHost: lim.test\r\nUser-Agent: peers/{tag}\r\n"
               "Connection: close\r\n\r\n").encode()
        while (w := at - time.time()) > 0:
            time.sleep(min(w, 0.05) if w > 0.002 else 0)
        sent = time.time()
        s.sendall(req)
        status, _ = _read_response(s)
        s.close()
        with lock:
            out.append({"port": port, "i": i, "sent": sent, "status": status})

    # the connections are opened shortly before their time (a thread each)
    threads = []
    for i, off in enumerate(offsets):
        at = start + off
        while at - time.time() > 0.2:
            time.sleep(0.02)
        for port in ports:
            t = threading.Thread(target=one, args=(port, i, at))
            t.start()
            threads.append(t)
    for t in threads:
        t.join(60)
    for r in sorted(out, key=lambda r: (r["port"], r["i"])):
        print(json.dumps(r))


def normal(server: str, ports: list[int], seconds: float) -> None:
    end = time.time() + seconds
    n = 0
    k = 0
    while time.time() < end:
        port = ports[k % len(ports)]
        kind = k % 3
        k += 1
        s = socket.create_connection((server, port), timeout=30)
        n += 1
        if kind == 0:
            for i in range(2):
                s.sendall(f"GET /r?n={k}.{i} HTTP/1.1\r\nHost: ok.test\r\n\r\n".encode())
                _read_response(s)
        elif kind == 1:
            body = b"x" * 20000
            s.sendall(b"POST /r HTTP/1.1\r\nHost: ok.test\r\nContent-Type: application/octet-stream"
                      b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            _read_response(s)
        else:
            s.sendall(b"GET /mid HTTP/1.1\r\nHost: ok.test\r\n\r\n")
            _read_response(s)
        s.close()
        time.sleep(0.15)
    print(n)


def idle(server: str, port: int, n: int, hold: float) -> None:
    socks = []
    for i in range(n):
        s = socket.create_connection((server, port), timeout=30)
        s.sendall(f"GET /r?idle={i} HTTP/1.1\r\nHost: idle.test\r\n\r\n".encode())
        _read_response(s)
        socks.append(s)
    time.sleep(hold)
    for s in socks:
        s.close()
    print(n)


def main(argv: list[str]) -> int:
    mode = argv[0]
    if mode == "schedule":
        schedule(argv[1], [int(p) for p in argv[2].split(",")], float(argv[3]), [float(x) for x in argv[4].split(",")], argv[5])
    elif mode == "normal":
        normal(argv[1], [int(p) for p in argv[2].split(",")], float(argv[3]))
    elif mode == "idle":
        idle(argv[1], int(argv[2]), int(argv[3]), float(argv[4]))
    else:
        print(f"peers.py: error: unknown mode {mode!r}", file=sys.stderr)
        return 2
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
