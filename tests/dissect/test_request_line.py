"""Request-line edge forms (docs/ACCURACY.md, "Request lines"): webtap's rule next to the real
tshark's, on built packets. For each form the table says what tshark 4.0 does and what webtap
does; where they differ the docs say why. tshark runs once over all forms (one packet each, on
its own connection to port 80).
"""
from __future__ import annotations

import shutil
import subprocess

import pytest
from scapy.all import IP, TCP, Ether, raw

from tests import pcapbuild as pb
from webtap.dissect import parse_http

# payload -> (tshark: None or (method, uri, version), webtap: None or (method, uri, version))
# None = not a request. "" = empty field.
FORMS = {
    b"GET / HTTP/1.1\nHost: a\n\n": (("GET", "/", "HTTP/1.1"), ("GET", "/", "HTTP/1.1")),
    b"GET\nHost: a\nUser-Agent: u\n\n": (("GET", "", ""), ("GET", "", "")),
    b"GET\r\nHost: a\r\n\r\n": (("GET", "", ""), ("GET", "", "")),
    b"GET": (("GET", "", ""), ("GET", "", "")),
    b"GET \r\nHost: a\r\n\r\n": (("GET", "", ""), ("GET", "", "")),
    b"GET /x\r\nHost: a\r\n\r\n": (("GET", "/x", ""), ("GET", "/x", "")),
    b"OPTIONS HTTP/1.1\r\nHost: a\r\n\r\n": (("OPTIONS", "HTTP/1.1", ""), ("OPTIONS", "", "HTTP/1.1")),
    b"GET HTTP/ HTTP/1.1\r\nHost: a\r\n\r\n": (("GET", "HTTP/", "HTTP/1.1"), ("GET", "HTTP/", "HTTP/1.1")),
    b"GET HTTP/1.1 HTTP/1.1\r\nHost: a\r\n\r\n": (("GET", "HTTP/1.1", "HTTP/1.1"), ("GET", "HTTP/1.1", "HTTP/1.1")),
    b"GET  /x HTTP/1.1\r\nHost: a\r\n\r\n": (("GET", "", "/x HTTP/1.1"), ("GET", "", "/x HTTP/1.1")),
    b"GET /x HTTP/1.1 \r\nHost: a\r\n\r\n": (("GET", "/x", "HTTP/1.1 "), ("GET", "/x", "HTTP/1.1 ")),
    b"GET /x HTTP/1.1 extra\r\nHost: a\r\n\r\n": (("GET", "/x", "HTTP/1.1 extra"), ("GET", "/x", "HTTP/1.1 extra")),
    b"GET\t/x HTTP/1.1\r\nHost: a\r\n\r\n": (None, None),
    b"get / HTTP/1.1\r\nHost: a\r\n\r\n": (None, None),
    b"POST request received successfully!\r\n": (("POST", "request", "received successfully!"), None),
    b"POST request received successfully!": (("POST", "request", "received successfully!"), None),
    b"GET index.html HTTP/1.0\r\nHost: a\r\n\r\n": (("GET", "index.html", "HTTP/1.0"), ("GET", "index.html", "HTTP/1.0")),
    b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n": (("OPTIONS", "*", "HTTP/1.1"), ("OPTIONS", "*", "HTTP/1.1")),
    b"GET http://a.b/c HTTP/1.1\r\nHost: a\r\n\r\n": (("GET", "http://a.b/c", "HTTP/1.1"), ("GET", "http://a.b/c", "HTTP/1.1")),
    b"CONNECT a.b:443 HTTP/1.1\r\nHost: a\r\n\r\n": (("CONNECT", "a.b:443", "HTTP/1.1"), ("CONNECT", "a.b:443", "HTTP/1.1")),
    b"CONNECT [2001:db8::1]:443 HTTP/1.1\r\n\r\n": (("CONNECT", "[2001:db8::1]:443", "HTTP/1.1"),
                                                  ("CONNECT", "[2001:db8::1]:443", "HTTP/1.1")),
    b"QUERY /q HTTP/1.1\r\nHost: a\r\n\r\n": (None, ("QUERY", "/q", "HTTP/1.1")),
    b"http/1.1 200 OK\r\n\r\n": (None, None),
    b"GET is what we do best\r\n": (("GET", "is", "what we do best"), None),
    b"PUT it:there now\r\n": (("PUT", "it:there", "now"), None),
}


def _webtap(pay: bytes):
    r = parse_http(pay)
    if r is None or r["kind"] != "request":
        return None
    return (r["method"] or "", r["uri"] or "", r["version"] or "")


@pytest.mark.parametrize("pay", list(FORMS), ids=[p[:24].decode("latin-1") for p in FORMS])
def test_webtap_reads_each_form_as_documented(pay):
    assert _webtap(pay) == FORMS[pay][1]


@pytest.mark.tshark
def test_tshark_reads_each_form_as_documented(tmp_path):
    if shutil.which("tshark") is None:
        pytest.fail("tshark is not installed (make sysdeps installs it)")
    frames = [(i * 1000, raw(Ether() / IP(src="10.0.0.1", dst="10.0.0.2")
                             / TCP(sport=40000 + i, dport=80, flags="PA", seq=1000, ack=1) / pay))
              for i, pay in enumerate(FORMS)]
    path = tmp_path / "forms.pcap"
    path.write_bytes(pb.pcap(frames))
    p = subprocess.run(["tshark", "-n", "-r", str(path), "-o", "tcp.desegment_tcp_streams:FALSE",
                        "-o", "http.desegment_headers:FALSE", "-o", "http.desegment_body:FALSE",
                        "-T", "fields", "-E", "separator=\x1f", "-e", "frame.number", "-e", "http.request",
                        "-e", "http.request.method", "-e", "http.request.uri", "-e", "http.request.version"],
                       capture_output=True)
    assert p.returncode == 0, p.stderr[-500:]
    rows = {int(c[0]): c for c in (ln.split("\x1f") for ln in p.stdout.decode().splitlines()) if len(c) == 5}
    assert len(rows) == len(FORMS)
    for i, pay in enumerate(FORMS):
        c = rows[i + 1]
        got = (c[2], c[3], c[4]) if c[1] else None
        assert got == FORMS[pay][0], (pay, got)
