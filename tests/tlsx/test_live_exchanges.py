"""THE REAL TEST of issue 33: exchanges in real encrypted web traffic against its decrypted truth.

The captures are made by tests/tlsx/gen_truth.py at test time (nginx, curl, nghttp, tcpdump in
network namespaces; tests/tlsx/conftest.py), the truth by httpanalyzer/tls_truth.py (its own
AEAD decryption, checked against tshark's decryption and nginx's log in test_truth.py), the
comparison by httpanalyzer/compare_exchanges.py (`httpanalyzer compare --tls --keylog`).
Pinned per trace:

* HTTP/1.1 over TLS (TLS 1.2, TLS 1.3 with session tickets, resumed connections of both, the
  AES-256-GCM and ChaCha20-Poly1305 suites of both): every request is found as an exchange
  whose request and response first packets are the truth's, response time equal within 1 us:
  100 % (the issue's target: >= 99 % on every trace), and no exchange that is not a request.
* h2: what an exchange measures, stated, not claimed as a request: one exchange per client
  burst; the requests an exchange stands for (requests / matched exchanges), and the first
  exchange's distance to the first request's and first response's HEADERS are reported
  (docs/TLS.md "Exchanges").
* A connection the truth cannot open (a CBC suite) is counted, its exchanges not compared.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from httpanalyzer.compare_exchanges import H1_CATEGORIES, compare_exchanges

pytestmark = pytest.mark.tshark

SERVER_PORT = "8443"           # tests/tlsx/gen_truth.py's nginx
H1_REQUESTS = {"h1_tls12": 28, "h1_tls13": 28, "h1_resume": 8, "h1_suites": 12}


@pytest.mark.parametrize("scenario", sorted(H1_REQUESTS))
def test_http1_exchanges_equal_the_truth(tlsx_captures, scenario):
    r = compare_exchanges(tlsx_captures / f"{scenario}.pcap", tlsx_captures / f"{scenario}.keys")
    print(json.dumps(r))
    h1 = r["http1"]
    n = H1_REQUESTS[scenario]
    assert h1["requests"] == n and r["skipped"] == {} and r["not_in_truth"] == 0
    # every request equal: no category other than `equal`
    assert {k: h1[k] for k in H1_CATEGORIES} == {k: (n if k == "equal" else 0) for k in H1_CATEGORIES}
    assert h1["equal_share"] == 1.0
    assert r["extra"] == {}, r


def _first_request_crossed_server_data(pcap, keys) -> bool:
    """From tshark's packet fields (not from webtap): whether the client packet carrying the
    first HTTP/2 HEADERS acknowledges less than the server had already sent before it, i.e. the
    request crossed server data in flight (the server's unsolicited h2 SETTINGS, sent right
    after the handshake). Its ACK then names a SEQ whose data left the server before the request:
    no response can start there, so by the paper's rule that exchange has no response
    (docs/TLS.md "Exchanges", h2)."""
    out = subprocess.run(["tshark", "-r", str(pcap), "-o", f"tls.keylog_file:{keys}", "-T", "fields",
                          "-E", "separator=,", "-e", "frame.number", "-e", "tcp.srcport",
                          "-e", "tcp.seq", "-e", "tcp.ack", "-e", "tcp.len", "-e", "http2.type"],
                         capture_output=True, text=True, check=True).stdout
    sent = 0                    # the end of the server's HTTP/2 frames so far (relative SEQ)
    for line in out.splitlines():
        f = line.split(",")
        if f[1] == SERVER_PORT:
            if int(f[4] or 0) > 0 and any(f[5:]):   # an h2 frame (its tickets are not)
                sent = max(sent, int(f[2]) + int(f[4]))
        elif "1" in f[5:]:                      # the first client packet with a HEADERS frame
            return int(f[3]) < sent
    return False


@pytest.mark.parametrize("scenario", ["h2_curl", "h2_nghttp"])
def test_h2_exchanges_are_stated_not_requests(tlsx_captures, scenario):
    pcap, keys = tlsx_captures / f"{scenario}.pcap", tlsx_captures / f"{scenario}.keys"
    r = compare_exchanges(pcap, keys)
    print(json.dumps(r))
    h2 = r["h2"]
    assert h2["connections"] == 1 and h2["requests"] == 15
    # exchanges there are, but not one per request: their number depends on how the client's
    # requests and the control frames (SETTINGS, WINDOW_UPDATE) fall into bursts
    assert h2["matched_exchanges"] >= 1
    if _first_request_crossed_server_data(pcap, keys):
        # the first request burst crossed the server's SETTINGS in flight (once in ~20 nghttp
        # captures, 2026-11-29): its ACK points at data the server sent before it, so the
        # paper's rule finds no response for exchange 0 (the next burst, the client's SETTINGS
        # ack, is the one answered). No claim about exchange 0 then (docs/TLS.md "Exchanges")
        return
    # exchange 0 is matched also when the client's first burst acknowledges only some of the
    # server's session tickets (nghttp under load: the response is found after the last one)
    assert h2["exchange0_matched"] == 1, h2
    e0 = h2["exchange0"][0]
    # exchange 0 starts at or before the first request's HEADERS (the client's preface and
    # SETTINGS travel in the same burst) and answers no later than the first response's HEADERS
    assert e0["request_us"] <= 0 and e0["response_us"] <= 0


def test_compare_command_reports_exchanges(tlsx_captures):
    """`httpanalyzer compare --tls --keylog`: the user's command gives the same comparison, and
    states the connection the truth could not open (h1_cbc: a CBC suite) with its exchanges
    not compared."""
    keys = [tlsx_captures / "h1_tls12.keys", tlsx_captures / "h1_cbc.keys"]
    cmd = [sys.executable, "-m", "httpanalyzer", "compare", "--tls", "--json",
           "--keylog", str(keys[0]), "--keylog", str(keys[1]),
           str(tlsx_captures / "h1_tls12.pcap"), str(tlsx_captures / "h1_cbc.pcap")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["unexplained"] == 0
    a, b = out["exchanges"]
    assert a == json.loads(json.dumps(compare_exchanges(tlsx_captures / "h1_tls12.pcap", keys)))
    assert a["http1"]["equal"] == 28
    assert b["skipped"] == {"cipher_not_supported_0xc023": 1} and "http1" not in b
    assert b["exchanges"] == b["not_in_truth"] == 2
    # a missing key log: one line, exit 1 (docs/CLI.md)
    r = subprocess.run(cmd[:6] + [str(tlsx_captures / "nope.keys"), str(tlsx_captures / "h1_cbc.pcap")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and r.stderr.strip().splitlines() == [
        f"httpanalyzer compare --tls: error: No such file or directory, {tlsx_captures / 'nope.keys'}"]
