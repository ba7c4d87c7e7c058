"""The `webtap` command and the one-pass runner, end to end on built and real traces."""
from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

from tests import pcapbuild as pb
from tests.conftest import TRACES
from webtap.pipeline import Pipeline
from webtap.stream import Totals, messages

def _request() -> bytes:
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether

    return bytes(Ether() / IP(src="10.0.0.1", dst="10.0.0.2")
                 / TCP(sport=12345, dport=80, seq=1, ack=2, flags="PA")
                 / b"GET /index.html HTTP/1.1\r\nHost: example.org\r\n\r\n")


REQ = _request()


def _webtap(*args):
    return subprocess.run([sys.executable, "-m", "webtap.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_dissect_writes_csv_and_reports_counters(tmp_path):
    trace = tmp_path / "one.pcap"
    trace.write_bytes(pb.pcap([(10**18, REQ), (10**18 + 1, b"\x00" * 20)]))
    out = tmp_path / "m.csv"
    r = _webtap("dissect", trace, "-o", out)
    assert r.returncode == 0, r.stderr
    df = pd.read_csv(out)
    assert df["uri"].tolist() == ["/index.html"] and df["host"].tolist() == ["example.org"]
    assert "http_request=1" in r.stderr and "packets=2" in r.stderr


def test_not_a_capture_exit_code_and_one_line(tmp_path):
    junk = tmp_path / "junk.txt"
    junk.write_text("not a capture\n")
    r = _webtap("info", junk)
    assert r.returncode == 1
    assert r.stderr.strip().count("\n") == 0 and str(junk) in r.stderr


def test_bad_filter_is_a_usage_error(tmp_path):
    trace = tmp_path / "one.pcap"
    trace.write_bytes(pb.pcap([(1, REQ)]))
    r = _webtap("info", trace, "-f", "tcp and (")
    assert r.returncode == 2 and "syntax error" in r.stderr


def test_run_feeds_every_consumer_once_per_batch(tmp_path):
    trace = tmp_path / "t.pcap"
    trace.write_bytes(pb.pcap([(i, REQ) for i in range(10)]))

    class Count:
        def __init__(self):
            self.msgs, self.finished = 0, 0

        def feed(self, packets, msgs):
            self.msgs += len(msgs)

        def finish(self):
            self.finished += 1

    a, b = Count(), Count()
    totals = Pipeline([trace, trace], [a, b], batch_size=3).run()
    assert (a.msgs, b.msgs, a.finished, b.finished) == (20, 20, 1, 1)
    assert totals.files == 2 and totals.source["packets"] == 20
    assert totals.dissect["http_request"] == 20


def test_messages_on_a_real_trace_counts_every_packet():
    path = TRACES / "zeek" / "http" / "1000-requests-one-dropped-response.pcap.gz"
    if not path.exists():
        pytest.skip(f"shared data absent: {path}")
    totals = Totals()
    n = sum(len(mb) for _, mb in messages(path, totals=totals))
    assert n == 1999
    d = totals.dissect
    assert d["packets"] == totals.source["packets"] == 4102
    # Every packet is accounted for by exactly one reason.
    assert d["packets"] == sum(d[k] for k in ("no_payload", "not_http", "http_request", "http_response",
                                               "link_unsupported", "link_truncated", "not_ip",
                                               "ip_truncated", "ip_bad_header", "ip_fragment",
                                               "not_tcp", "tcp_truncated", "tcp_bad_offset"))
