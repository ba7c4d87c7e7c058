"""The real TLS and QUIC peers of the HTTPS live-filter test (issue 18), run inside the namespaces.

    python netns_tls_peers.py cert DIR                         self-signed certificate for *.test
    python netns_tls_peers.py tls-server ADDR PORT DELAY_S DIR
    python netns_tls_peers.py tls-client ADDR PORT SNI TIMEOUT_S
    python netns_tls_peers.py quic-server ADDR PORT DELAY_S DIR
    python netns_tls_peers.py quic-client ADDR PORT SNI VERSION TIMEOUT_S

TLS server: Python's ssl over a plain accept loop (one thread per connection). It waits DELAY_S
after accepting before it reads the ClientHello and answers (the kernel here has no netem, see
ARCHITECTURE.md: the server answers late instead), then sends a 2000-byte body and closes.

TLS client: Python's ssl with the given SNI (no verification: the point is whether a certificate
arrives at all). Prints one JSON line: end (ok | eof | reset | timeout | error), whether the
server's certificate reached it (`cert`), whether the body arrived, the client port.

QUIC server: aioquic with the same certificate; every datagram from a client is handed to the
QUIC stack DELAY_S late (a subclass of aioquic's QuicServer), so the server's Initial leaves late.
On a stream it answers the body and ends the stream.

QUIC client: aioquic with the SNI and QUIC version (1 or 0x6b3343cf); sends one request on a
stream. Prints one JSON line: end (ok | closed | timeout), whether the handshake completed, any
server stream data (`server_data`), and the close the client reports (error code, reason).
"""
from __future__ import annotations

import asyncio
import json
import socket
import ssl
import sys
import threading
import time
from pathlib import Path

BODY = b"BODY" * 500


def make_cert(d: str) -> None:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "webtap test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("*.test")]), critical=False)
            .sign(key, hashes.SHA256()))
    Path(d, "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    Path(d, "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                     serialization.PrivateFormat.PKCS8,
                                                     serialization.NoEncryption()))


def tls_server(addr: str, port: int, delay: float, d: str) -> None:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(Path(d, "cert.pem")), str(Path(d, "key.pem")))
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(64)

    def one(c: socket.socket) -> None:
        try:
            time.sleep(delay)
            with ctx.wrap_socket(c, server_side=True) as s:
                s.recv(4096)
                s.sendall(BODY)
        except (OSError, ssl.SSLError):
            pass                   # the filter's RST ended it
        finally:
            c.close()

    print("ready", flush=True)
    while True:
        c, _ = ls.accept()
        threading.Thread(target=one, args=(c,), daemon=True).start()


def tls_client(addr: str, port: int, sni: str, timeout: float) -> dict:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    raw = socket.create_connection((addr, port), timeout=timeout)
    cport = raw.getsockname()[1]
    res = {"end": "ok", "cert": False, "body": False, "client_port": cport, "error": ""}
    got = b""
    try:
        with ctx.wrap_socket(raw, server_hostname=sni) as s:
            res["cert"] = s.getpeercert(binary_form=True) is not None
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            while True:
                b = s.recv(65536)
                if not b:
                    break
                got += b
    except ConnectionResetError as e:
        res["end"], res["error"] = "reset", repr(e)
    except (ssl.SSLEOFError, ssl.SSLZeroReturnError) as e:
        res["end"], res["error"] = "eof", repr(e)
    except socket.timeout as e:
        res["end"], res["error"] = "timeout", repr(e)
    except (OSError, ssl.SSLError) as e:
        res["end"], res["error"] = ("eof" if "EOF" in str(e) else "error"), repr(e)
    res["body"] = BODY in got
    return res


def quic_server(addr: str, port: int, delay: float, d: str) -> None:
    from aioquic.asyncio import serve
    from aioquic.asyncio.server import QuicServer
    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.packet import QuicProtocolVersion

    class LateServer(QuicServer):
        def datagram_received(self, data, addr_):
            asyncio.get_event_loop().call_later(delay, QuicServer.datagram_received, self, data, addr_)

    cfg = QuicConfiguration(is_client=False, alpn_protocols=["webtap-test"],
                            supported_versions=[QuicProtocolVersion.VERSION_1, QuicProtocolVersion.VERSION_2])
    cfg.load_cert_chain(str(Path(d, "cert.pem")), str(Path(d, "key.pem")))

    def handler(reader, writer):
        async def answer():
            await reader.read(100)
            writer.write(BODY)
            writer.write_eof()
        asyncio.ensure_future(answer())

    async def main():
        loop = asyncio.get_event_loop()
        await loop.create_datagram_endpoint(
            lambda: LateServer(configuration=cfg, stream_handler=handler), local_addr=(addr, port))
        print("ready", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


def quic_client(addr: str, port: int, sni: str, version: int, timeout: float) -> dict:
    from aioquic.asyncio import connect
    from aioquic.asyncio.protocol import QuicConnectionProtocol
    from aioquic.quic import events
    from aioquic.quic.configuration import QuicConfiguration

    res = {"end": "timeout", "handshake": False, "server_data": 0, "error_code": None, "reason": None,
           "body": False, "client_port": None}
    done = None

    class Client(QuicConnectionProtocol):
        def quic_event_received(self, event):
            if isinstance(event, events.HandshakeCompleted):
                res["handshake"] = True
            elif isinstance(event, events.StreamDataReceived):
                res["server_data"] += len(event.data)
                self.got = getattr(self, "got", b"") + event.data
                if event.end_stream:
                    res["body"] = self.got == BODY
                    res["end"] = "ok"
                    done.set()
            elif isinstance(event, events.ConnectionTerminated) and res["end"] != "ok":
                res["end"] = "closed"
                res["error_code"] = event.error_code
                res["reason"] = event.reason_phrase
                done.set()

    async def main():
        nonlocal done
        done = asyncio.Event()
        cfg = QuicConfiguration(is_client=True, alpn_protocols=["webtap-test"], server_name=sni,
                                verify_mode=ssl.CERT_NONE, supported_versions=[version])
        async with connect(addr, port, configuration=cfg, create_protocol=Client,
                           wait_connected=False) as proto:
            res["client_port"] = proto._transport.get_extra_info("sockname")[1]
            sid = proto._quic.get_next_available_stream_id()
            proto._quic.send_stream_data(sid, b"GET /", end_stream=True)
            proto.transmit()
            try:
                await asyncio.wait_for(done.wait(), timeout)
            except asyncio.TimeoutError:
                pass

    asyncio.run(main())
    return res


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "cert":
        make_cert(sys.argv[2])
    elif cmd == "tls-server":
        tls_server(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5])
    elif cmd == "tls-client":
        print(json.dumps(tls_client(sys.argv[2], int(sys.argv[3]), sys.argv[4], float(sys.argv[5]))))
    elif cmd == "quic-server":
        quic_server(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5])
    elif cmd == "quic-client":
        print(json.dumps(quic_client(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5], 0),
                                     float(sys.argv[6]))))
