"""`--fields` (tshark's -T fields -e) and `--headers` on the text outputs (issue 30): the chosen
columns in the chosen order with a header line; chosen headers are never dropped from the line
format; a bad name or a binary output is a usage error (exit 2) before anything is read."""
from __future__ import annotations

import json

import pandas as pd

from httpanalyzer.cli import main
from httpanalyzer.lines import read_lines
from tests.cli import contract as C
from tests.httpanalyzer import compare_traces as ct


def _trace(tmp_path):
    out: list = []
    a = ct.Conn(out, ct.T0, 40001)
    a.request("/a")
    a.response(status=404, reason="Not Found")
    b = ct.Conn(out, ct.T0 + 1, 40002)
    b.request("/b")
    return ct.write(tmp_path / "t.pcap", out)


def test_fields_on_lines_csv_jsonl(tmp_path):
    tr = _trace(tmp_path)
    r = C.run(["httpanalyzer.cli", tr, "--fields", "uri,status,request_ts", "--consumers", "0"])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    # Conn: handshake 3 ms, request 1 ms later (T0 + 0.004), response 10 ms after it
    assert lines == ["uri|status|request_ts", "/a|404|1700000000.004000000", "/b||1700000001.004000000"]
    assert main([tr, "--fields", "status,uri", "-o", str(tmp_path / "f.csv"), "--consumers", "0"]) == 0
    df = pd.read_csv(tmp_path / "f.csv")
    assert list(df.columns) == ["status", "uri"] and df.uri.tolist() == ["/a", "/b"]
    assert main([tr, "--fields", "uri", "-o", str(tmp_path / "f.jsonl"), "--consumers", "0"]) == 0
    assert [json.loads(x) for x in (tmp_path / "f.jsonl").read_text().splitlines()] == [{"uri": "/a"}, {"uri": "/b"}]


def test_fields_header_line_without_records(tmp_path):
    p = tmp_path / "empty.pcap"
    out: list = []
    ct.Conn(out, ct.T0, 40001)                      # a handshake, no HTTP
    ct.write(p, out)
    r = C.run(["httpanalyzer.cli", str(p), "--fields", "host,status", "--consumers", "0"])
    assert r.returncode == 0 and r.stdout == "host|status\n", (r.stdout, r.stderr)


def test_headers_are_not_dropped_from_the_line_format(tmp_path):
    tr = _trace(tmp_path)
    o = tmp_path / "h.txt"
    assert main([tr, "--headers", "User-Agent,Server", "-o", str(o), "--consumers", "0"]) == 0
    rows = [ln.split("|") for ln in o.read_text().splitlines()]
    # the 13 fields, then request_/response_ of each header, then the two incomplete flags
    assert [len(r) for r in rows] == [13 + 4 + 2] * 2
    assert rows[0][13:] == ["test/1.0", "", "", "", "false", "false"]
    assert rows[1][13:] == ["test/1.0", "", "", "", "false", ""]
    # without --headers the paper's 13 fields, read back as before
    o2 = tmp_path / "p.txt"
    assert main([tr, "-o", str(o2), "--consumers", "0"]) == 0
    assert all(len(x.split("|")) == 13 for x in o2.read_text().splitlines())
    assert read_lines(str(o2)).num_rows == 2


def test_fields_errors_are_usage_errors(tmp_path):
    tr = _trace(tmp_path)
    for args, msg in ((["--fields", "nope"], "no record column nope"),
                      (["--fields", "status", "-o", str(tmp_path / "x.parquet")], "text outputs"),
                      (["--fields", "response_server"], "no record column response_server")):
        r = C.run(["httpanalyzer.cli", tr, *args])
        assert r.returncode == 2 and msg in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert not (tmp_path / "x.parquet").exists()
    r = C.run(["httpanalyzer.cli", tr, "--headers", "Server", "--fields", "response_server,uri", "--consumers", "0"])
    assert r.returncode == 0 and r.stdout.splitlines()[0] == "response_server|uri"
