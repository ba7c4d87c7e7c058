"""Which heavy modules a run of `httpanalyzer` loads, by output (issue 21: start-up and RSS).

pyarrow 26's compute wrappers import pandas on their first call (~0.2 s and ~40 MB per run);
so the text outputs are written by C (ext/out/textout.pyx) and Parquet from buffers. A text run
(the default line output, .txt, .csv, JSON lines .jsonl, Zeek .log; `httpanalyzer` and
`httpanalyzer tls` alike) loads pyarrow's core and numpy (the record columns), never pandas or
pyarrow.compute; Parquet loads pyarrow.parquet but not pandas. Each run is a fresh interpreter
that calls the command's main on a shared trace with records and reports sys.modules at its
end."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import TRACES, require_shared

PROBE = """
import json, sys
from httpanalyzer.cli import main
rc = main(sys.argv[1:])
mods = sorted(m for m in sys.modules if m.split(".")[0] in ("pandas", "pyarrow", "numpy"))
print(json.dumps({"rc": rc, "mods": mods}), file=sys.stderr)
"""

NEVER = ("pandas", "pyarrow.compute")


def _loaded(tmp_path, *args, tls: bool = False) -> set[str]:
    trace = require_shared(TRACES / "ndpi" / "1kxun.pcap")   # 1,723 frames, 100 Continue, IPv6
    argv = ["tls", str(trace), *args] if tls else [str(trace), *args]
    p = subprocess.run([sys.executable, "-c", PROBE, *argv], cwd=tmp_path,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=True)
    res = json.loads(p.stderr.strip().splitlines()[-1])
    assert res["rc"] == 0
    if not args:                                 # records were written (lines on stdout)
        assert p.stdout.count("\n") >= (4 if tls else 100)
    return set(res["mods"])


@pytest.mark.parametrize("out", [None, "r.txt", "r.csv", "r.jsonl", "http.log"])
def test_text_run_loads_no_pandas_nor_compute(tmp_path, out):
    mods = _loaded(tmp_path, *(["-o", out] if out else []))
    assert "pyarrow" in mods and "numpy" in mods          # the record columns
    assert not [m for m in mods if m.startswith(NEVER)], sorted(mods)
    if out:
        assert (tmp_path / out).stat().st_size > 1000


@pytest.mark.parametrize("out", [None, "t.txt", "t.csv", "t.jsonl", "ssl.log"])
def test_tls_text_run_loads_no_pandas_nor_compute(tmp_path, out):
    """`httpanalyzer tls`: the text view (lists joined, timestamps as seconds), JSON lines and
    ssl.log (Zeek's names of versions and suites, ts from either hello) are built from the
    buffers too."""
    mods = _loaded(tmp_path, *(["-o", out] if out else []), tls=True)
    assert "pyarrow" in mods and "numpy" in mods
    assert not [m for m in mods if m.startswith(NEVER)], sorted(mods)
    if out:
        data = (tmp_path / out).read_bytes()
        assert data.count(b"\n") >= 4 and b"192.168.115.75" in data      # 1kxun's handshakes


def test_parquet_run_loads_no_pandas(tmp_path):
    mods = _loaded(tmp_path, "-o", "r.parquet")
    assert "pyarrow.parquet" in mods
    assert not [m for m in mods if m.startswith("pandas")], sorted(mods)


def header_only_run(tmp_path, probe: str) -> dict:
    """A fresh interpreter runs `probe` (its JSON result the last line on stderr, with "rc") on a
    trace that holds only its file header; its result, once rc 0 and nothing on stdout."""
    trace = tmp_path / "header-only.pcap"
    trace.write_bytes(bytes.fromhex("d4c3b2a10200040000000000000000000000040001000000"))
    p = subprocess.run([sys.executable, "-c", probe, str(trace)], cwd=tmp_path,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=True)
    res = json.loads(p.stderr.strip().splitlines()[-1])
    assert res["rc"] == 0 and p.stdout == ""
    return res


def test_run_without_records_loads_no_pyarrow(tmp_path):
    """A trace with only its file header: start-up to the first packet, nothing else. pyarrow
    (~30 ms, ~30 MB) is loaded at the first record batch, so such a run never loads it."""
    res = header_only_run(tmp_path, PROBE)
    assert "numpy" in res["mods"]                            # the packet batches
    assert not [m for m in res["mods"] if m.startswith(("pyarrow", "pandas"))], res["mods"]


def test_one_pass_tls_parquet_loads_no_compute(tmp_path):
    """`--tls-out T.parquet` sorts the handshakes by frame through pyarrow's take kernel without
    importing pyarrow.compute (~40 ms of wrapper generation, httpanalyzer.tls._take)."""
    mods = _loaded(tmp_path, "-o", "r.parquet", "--tls-out", "t.parquet")
    import pyarrow.parquet as pq

    t = pq.read_table(tmp_path / "t.parquet")
    assert t.num_rows >= 2                                   # 1kxun carries TLS handshakes
    frames = [a if a is not None else b for a, b in zip(t["request_frame"].to_pylist(),
                                                         t["response_frame"].to_pylist())]
    assert frames == sorted(frames)                          # ordered by first frame
    assert not [m for m in mods if m.startswith(NEVER)], sorted(mods)


@pytest.mark.parametrize("tls_args", [["--tls-out", "t.parquet"], ["--tls-out", "t.csv"]])
def test_one_pass_without_handshakes_loads_no_pandas(tmp_path, tls_args):
    """A trace without TLS: the TLS output is an empty table of the schema, built without
    SCHEMA.empty_table() (pyarrow 26 imports pandas there)."""
    trace = require_shared(TRACES / "ndpi" / "1kxun.pcap")
    # HTTP only: the first 200 frames of 1kxun carry no TLS hello (checked below)
    small = tmp_path / "http-only.pcap"
    subprocess.run(["editcap", "-F", "pcap", "-r", str(trace), str(small), "1-200"], check=True)
    p = subprocess.run([sys.executable, "-c", PROBE, str(small), "-o", "r.txt", *tls_args], cwd=tmp_path,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=True)
    res = json.loads(p.stderr.strip().splitlines()[-1])
    assert res["rc"] == 0
    out = tmp_path / tls_args[1]
    if out.suffix == ".csv":
        assert out.read_text().count("\n") == 1              # the header row only
    else:
        import pyarrow.parquet as pq
        assert pq.read_table(out).num_rows == 0
    assert not [m for m in res["mods"] if m.startswith(("pandas", "pyarrow.compute"))], res["mods"]


SCAN_PROBE = """
import json, sys
from urlfilter.cli import main
rc = main(sys.argv[1:])
mods = sorted(m for m in sys.modules if m.split(".")[0] in ("pandas", "pyarrow", "numpy"))
print(json.dumps({"rc": rc, "mods": mods}), file=sys.stderr)
"""


@pytest.mark.parametrize("out", ["hits.parquet", "hits.csv"])
def test_url_scan_with_hits_loads_no_pandas(tmp_path, out):
    """`urlfilter scan` builds its records (entries, categories, SNI, proto) from buffers: a scan
    with hits loads neither pandas nor pyarrow.compute (they were 0.3-0.5 s of every scan). The
    hosts blacklisted are tshark's view of the trace's requests, so the scan has hits."""
    import shutil

    trace = require_shared(TRACES / "ndpi" / "1kxun.pcap")
    if shutil.which("tshark") is None:
        pytest.skip("tshark not installed")
    hosts = subprocess.run(["tshark", "-n", "-r", str(trace), "-Y", "http.request", "-T", "fields",
                            "-e", "http.host"], capture_output=True, text=True, check=True).stdout.split()
    assert hosts
    (tmp_path / "bl.txt").write_text("\n".join(sorted(set(hosts))[:5]) + "\n")
    db = str(tmp_path / "bl.db")
    subprocess.run([sys.executable, "-m", "urlfilter", "--db", db, "import", str(tmp_path / "bl.txt"),
                    "--format", "list", "--category", "test"], check=True, capture_output=True)
    p = subprocess.run([sys.executable, "-c", SCAN_PROBE, "--db", db, "scan", str(trace), "-o", out],
                       cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       check=True)
    res = json.loads(p.stderr.strip().splitlines()[-1])
    assert res["rc"] == 0
    assert not [m for m in res["mods"] if m.startswith(NEVER)], res["mods"]
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    t = pq.read_table(tmp_path / out) if out.endswith(".parquet") else pcsv.read_csv(tmp_path / out)
    hit = t.column("hit").to_pylist()
    assert any(hit)
    entries = t.column("entry").to_pylist()
    cats = t.column("category").to_pylist()
    assert all((e is not None) == h for e, h in zip(entries, hit)) or out.endswith(".csv")
    assert {c for c, h in zip(cats, hit) if h} == {"test"}


def test_summary_run_loads_no_pandas(tmp_path):
    """`--summary` tallies the records with pyarrow.compute (webtap.records.httpcompute), but
    reads the response times from the column's buffer: pyarrow's to_numpy imports pandas
    (~0.7 s) even for one int64 column without nulls."""
    mods = _loaded(tmp_path, "-o", "r.parquet", "--summary", "--no-progress")
    assert "pyarrow.compute" in mods
    assert not [m for m in mods if m.startswith("pandas")], sorted(mods)
