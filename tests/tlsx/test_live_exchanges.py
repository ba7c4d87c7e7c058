"""THE REAL TEST of issue 33: exchanges in real encrypted web traffic against its decrypted truth.

The captures are made by tests/tlsx/gen_truth.py at test time (nginx, curl, nghttp, tcpdump in
network namespaces; tests/tlsx/conftest.py), the truth by tests/tlsx/truth.py (its own AES-GCM
decryption, checked against tshark and nginx's log in test_truth.py), the comparison by
tests/tlsx/compare.py. Pinned per trace:

* HTTP/1.1 over TLS (TLS 1.2, TLS 1.3 with session tickets, resumed connections of both):
  every request is found as an exchange whose request and response first packets are the
  truth's, response time equal within 1 us: 100 % (the issue's target: >= 99 % on every trace),
  and no exchange that is not a request.
* h2: what an exchange measures, stated, not claimed as a request: one exchange per client
  burst; the requests an exchange stands for (requests / matched exchanges), and the first exchange's distance to the
  first request's and first response's HEADERS are reported (docs/TLS.md "Exchanges").
"""
from __future__ import annotations

import json

import pytest

from tests.tlsx.compare import compare

pytestmark = pytest.mark.tshark


@pytest.mark.parametrize("scenario", ["h1_tls12", "h1_tls13", "h1_resume"])
def test_http1_exchanges_equal_the_truth(tlsx_captures, scenario):
    r = compare(tlsx_captures / f"{scenario}.pcap", tlsx_captures / f"{scenario}.keys")
    print(json.dumps(r))
    h1 = r["http1"]
    assert h1["requests"] == {"h1_tls12": 28, "h1_tls13": 28, "h1_resume": 8}[scenario]
    # every request equal: no category other than `equal`
    assert h1 == {"requests": h1["requests"], "equal": h1["requests"], "equal_share": 1.0}, h1
    assert r["extra"] == {}, r


@pytest.mark.parametrize("scenario", ["h2_curl", "h2_nghttp"])
def test_h2_exchanges_are_stated_not_requests(tlsx_captures, scenario):
    r = compare(tlsx_captures / f"{scenario}.pcap", tlsx_captures / f"{scenario}.keys")
    print(json.dumps(r))
    h2 = r["h2"]
    assert h2["connections"] == 1 and h2["requests"] == 15
    # exchanges there are, but not one per request: their number depends on how the client's
    # requests and the control frames (SETTINGS, WINDOW_UPDATE) fall into bursts
    assert h2["matched_exchanges"] >= 1
    e0 = h2["exchange0"][0]
    # exchange 0 starts at or before the first request's HEADERS (the client's preface and
    # SETTINGS travel in the same burst) and answers no later than the first response's HEADERS
    assert e0["request_us"] <= 0 and e0["response_us"] <= 0
