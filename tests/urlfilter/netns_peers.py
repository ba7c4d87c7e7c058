"""The two real peers of the live-filter test, run as scripts inside the namespaces.

Server: ``python netns_peers.py server ADDR PORT DELAY_S`` -- Python's http.server (threaded),
chosen over nginx because the test needs one knob nginx does not have without extra modules: a
delay before the answer, so that RTT(client, server) as the client sees it is long (the kernel
here has no netem; ARCHITECTURE.md). The handler reads the request, waits DELAY_S (or until the
connection is reset or closed: a cut connection is never answered), then answers 200 with a
2000-byte body ("BODY" repeated).

With DELAY_S = 0 the test wants a server that answers as fast as this machine can, so that the
race is really lost: http.server's thread start and header parsing cost about a millisecond, the
same order as the live filter's reaction, which would make the outcome a coin toss. So delay 0
uses a bare accept / recv / send loop (same response bytes, no thread, no parsing).

Client: ``python netns_peers.py client ADDR PORT PATH HOST TIMEOUT_S`` -- a plain socket: sends
one GET, reads until EOF, reset or timeout, prints one JSON line: bytes received, whether the
connection ended with EOF (FIN), reset or timeout, the elapsed time, and the client port.
"""
from __future__ import annotations

import json
import select
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BODY = b"BODY" * 500


def _response() -> bytes:
    return (b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(BODY)) + BODY


def serve_fast(addr: str, port: int) -> None:
    resp = _response()
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(64)
    print("ready", flush=True)
    while True:
        c, _ = ls.accept()
        try:
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            got = b""
            while b"\r\n\r\n" not in got:
                b = c.recv(4096)
                if not b:
                    break
                got += b
            c.sendall(resp)
        except OSError:
            pass
        finally:
            c.close()


def serve(addr: str, port: int, delay: float) -> None:
    if delay <= 0:
        return serve_fast(addr, port)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def do_GET(self):
            # Wait DELAY_S, or less if the connection is reset or closed meanwhile (the filter's
            # RST): the client sends nothing more, so readable means closed. A cut connection
            # then never gets its answer whatever the load; an uncut one waits the full delay.
            try:
                if select.select([self.connection], [], [], delay)[0] and \
                        not self.connection.recv(1, socket.MSG_PEEK):
                    return
            except OSError:       # ECONNRESET: the filter's RST
                return
            try:
                self.send_response(200)
                self.send_header("Content-Length", str(len(BODY)))
                self.end_headers()
                self.wfile.write(BODY)
            except OSError:       # the filter's RST closed the connection under us
                pass

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer((addr, port), Handler)
    srv.daemon_threads = True
    print("ready", flush=True)
    srv.serve_forever()


def fetch(addr: str, port: int, path: str, host: str, timeout: float, ua: str = "webtap-test") -> dict:
    s = socket.create_connection((addr, port), timeout=timeout)
    cport = s.getsockname()[1]
    t0 = time.monotonic()
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {ua}\r\n\r\n".encode())
    got = b""
    end = "timeout"
    try:
        while True:
            b = s.recv(65536)
            if not b:
                end = "eof"
                break
            got += b
    except ConnectionResetError:
        end = "reset"
    except socket.timeout:
        end = "timeout"
    finally:
        s.close()
    return {"bytes": len(got), "body": BODY in got, "end": end, "elapsed_s": time.monotonic() - t0,
            "client_port": cport}


if __name__ == "__main__":
    if sys.argv[1] == "server":
        serve(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    else:
        print(json.dumps(fetch(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], float(sys.argv[6]),
                               *sys.argv[7:8])))     # an optional User-Agent (issue 34's rules)
