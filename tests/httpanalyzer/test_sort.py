"""Record order (issue 30): by default records leave as they complete (a pair when its response
arrives, an unanswered request when it is evicted at gc or at the end); `--sort` writes them in
time order (request time, else response time) at the end of the run, the same for every number
of consumer processes."""
from __future__ import annotations

import pytest

from tests.cli import contract as C
from tests.httpanalyzer import compare_traces as ct


def _trace(tmp_path):
    out: list = []
    a = ct.Conn(out, ct.T0, 40001)          # request at T0 + 0.004, answered 5 s later
    a.request("/slow")
    a.response(dt=5.0)
    b = ct.Conn(out, ct.T0 + 1, 40002)      # request at T0 + 1.004, answered at once
    b.request("/fast")
    b.response()
    c = ct.Conn(out, ct.T0 + 0.5, 40003)    # request at T0 + 0.504, never answered
    c.request("/unanswered")
    out.sort(key=lambda p: p.time)
    return ct.write(tmp_path / "t.pcap", out)


def _uris(args):
    r = C.run(["httpanalyzer.cli", *args, "--fields", "uri,request_ts"])
    assert r.returncode == 0, r.stderr
    return [ln.split("|")[0] for ln in r.stdout.splitlines()[1:]]


def test_default_order_is_completion_order(tmp_path):
    assert _uris([_trace(tmp_path), "--consumers", "0"]) == ["/fast", "/slow", "/unanswered"]


@pytest.mark.parametrize("consumers", ["0", "2"])
def test_sort_gives_request_time_order(tmp_path, consumers):
    assert _uris([_trace(tmp_path), "--consumers", consumers, "--sort"]) == ["/slow", "/unanswered", "/fast"]


def test_sort_with_dask_is_a_usage_error(tmp_path):
    r = C.run(["httpanalyzer.cli", _trace(tmp_path), "--sort", "--dask", "local:1", "-o", str(tmp_path / "o.parquet")])
    assert r.returncode == 2 and "--sort and --dask" in r.stderr
