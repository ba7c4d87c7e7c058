"""The command-line contract matrix (docs/CLI.md): every tool x every bad input.

For each: the documented exit code, at most one error line on stderr (argparse's usage block
aside), no traceback, an earlier output file byte-identical afterwards, no temporary left. The
tools run as real processes, as a user runs them.
"""
from __future__ import annotations

import pathlib

import pytest

from tests.cli import contract as C

EARLIER = b"an earlier run's output\n"

#: tool name -> argv (after `python -m`) for (trace, output, db)
TOOLS = {
    "httpanalyzer": lambda t, o, db: ["httpanalyzer.cli", t, "-o", o],
    "webtap-dissect": lambda t, o, db: ["webtap.cli", "dissect", t, "-o", o],
    "urlfilter-scan": lambda t, o, db: ["urlfilter.cli", "--db", db, "scan", t, "-o", o],
    "urlfilter-timing": lambda t, o, db: ["urlfilter.cli", "--db", db, "timing", t, "-o", o],
}

#: per tool, an option with a bad number (a usage error)
BAD_NUMBER = {
    "httpanalyzer": [["--gc-timeout", "-5"], ["--max-pending", "0"], ["--consumers", "-1"]],
    "webtap-dissect": [],
    "urlfilter-scan": [],
    "urlfilter-timing": [["--t-proc-us", "-3"], ["--t-proc-us", "nan"]],
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("inputs")
    good = C.good_pcap()
    files = {
        "good": good,
        "empty": b"",
        "text": b"this is not a capture\n",
        "truncated": C.truncated(good),
        "flipped": C.flipped_header(good),
    }
    paths = {}
    for name, data in files.items():
        p = d / f"{name}.pcap"
        p.write_bytes(data)
        paths[name] = p
    paths["directory"] = d / "adir.pcap"
    paths["directory"].mkdir()
    paths["missing"] = d / "nosuch.pcap"
    paths["db"] = C.make_db(d / "bl.db")
    return paths


def _out(tmp_path, name="out.csv", earlier=True) -> pathlib.Path:
    o = tmp_path / "outdir" / name
    o.parent.mkdir(exist_ok=True)
    if earlier:
        o.write_bytes(EARLIER)
    return o


def _check_failure(r, rc, out: pathlib.Path):
    assert r.returncode == rc, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    errs = C.error_lines(r.stderr)
    assert len(errs) <= 1, r.stderr
    if rc != 0:
        assert errs, f"exit {rc} without an error line: {r.stderr!r}"
    if out.parent.is_dir():
        if out.exists() and not out.is_dir():
            assert out.read_bytes() == EARLIER
        assert C.temporaries(out.parent) == []


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("bad,rc", [("missing", 1), ("directory", 1), ("empty", 1), ("text", 1)])
def test_unreadable_trace(tool, bad, rc, inputs, tmp_path):
    out = _out(tmp_path)
    r = C.run(TOOLS[tool](inputs[bad], out, inputs["db"]))
    _check_failure(r, rc, out)
    assert str(inputs[bad].name) in r.stderr


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("damage,word", [("truncated", "cut short"), ("flipped", "corrupt")])
def test_damage_is_one_warning_line_and_quiet_silences_it(tool, damage, word, inputs, tmp_path):
    out = _out(tmp_path, earlier=False)
    r = C.run(TOOLS[tool](inputs[damage], out, inputs["db"]))
    assert r.returncode == 0, r.stderr
    warn = [x for x in r.stderr.splitlines() if ": warning: " in x]
    assert len(warn) == 1 and word in warn[0] and inputs[damage].name in warn[0], r.stderr
    assert out.exists() and C.temporaries(out.parent) == []
    r = C.run(TOOLS[tool](inputs[damage], out, inputs["db"]) + ["--quiet"])
    assert r.returncode == 0 and ": warning: " not in r.stderr, r.stderr


@pytest.mark.parametrize("tool", TOOLS)
def test_bad_bpf_is_a_usage_error(tool, inputs, tmp_path):
    out = _out(tmp_path)
    r = C.run(TOOLS[tool](inputs["good"], out, inputs["db"]) + ["-f", "tcp prot 80"])
    _check_failure(r, 2, out)
    assert "filter" in r.stderr


@pytest.mark.parametrize("tool,opt", [(t, o) for t, opts in BAD_NUMBER.items() for o in opts])
def test_bad_number_is_a_usage_error(tool, opt, inputs, tmp_path):
    out = _out(tmp_path)
    r = C.run(TOOLS[tool](inputs["good"], out, inputs["db"]) + opt)
    _check_failure(r, 2, out)


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("where", ["missing-folder", "unwritable-folder", "directory",
                                   "unknown-extension", "no-extension"])
def test_bad_output_is_a_usage_error(tool, where, inputs, tmp_path):
    earlier = _out(tmp_path, "out.csv")
    target = {
        "missing-folder": tmp_path / "nodir" / "out.csv",
        "unwritable-folder": pathlib.Path("/proc/out.csv"),   # refused even to root
        "directory": earlier.parent,
        "unknown-extension": earlier.parent / "out.json",
        "no-extension": earlier.parent / "out",
    }[where]
    r = C.run(TOOLS[tool](inputs["good"], target, inputs["db"]))
    _check_failure(r, 2, earlier)
    assert not (earlier.parent / "out.json").exists() and not (earlier.parent / "out").exists()


@pytest.mark.parametrize("tool", ["urlfilter-scan", "urlfilter-timing"])
def test_missing_database(tool, inputs, tmp_path):
    out = _out(tmp_path)
    db = tmp_path / "nosuch.db"
    r = C.run(TOOLS[tool](inputs["good"], out, db))
    _check_failure(r, 1, out)
    assert not db.exists() and not pathlib.Path(str(db) + ".tree").exists()


@pytest.mark.parametrize("cmd", [["match", "http://example.org/"], ["stats"], ["list"],
                                 ["delete", "example.org/"], ["snapshot"]])
def test_store_commands_refuse_a_missing_database(cmd, tmp_path):
    db = tmp_path / "sub" / "nosuch.db"
    r = C.run(["urlfilter.cli", "--db", db, *cmd])
    _check_failure(r, 1, tmp_path / "x")
    assert "no blacklist store" in r.stderr and not db.parent.exists()


def test_database_that_is_a_directory(tmp_path):
    (tmp_path / "list.txt").write_text("example.org\n")
    r = C.run(["urlfilter.cli", "--db", tmp_path, "import", tmp_path / "list.txt"])
    _check_failure(r, 2, tmp_path / "x")


@pytest.mark.parametrize("what", ["binary", "pcap", "missing"])
def test_import_refuses_what_is_not_a_list(what, inputs, tmp_path):
    import os

    p = {"binary": tmp_path / "random.bin", "pcap": inputs["good"],
         "missing": tmp_path / "nosuchfile.txt"}[what]
    if what == "binary":
        p.write_bytes(os.urandom(4096) + b"\x00")
    db = tmp_path / "new.db"
    r = C.run(["urlfilter.cli", "--db", db, "import", p])
    _check_failure(r, 1, tmp_path / "x")
    assert p.name in r.stderr
    assert {"binary": "binary data", "pcap": "pcap capture", "missing": "no such file"}[what] \
        in r.stderr
    assert not db.exists()                 # nothing was made


def test_import_counts_rejected_lines_and_fails_when_nothing_is_usable(tmp_path):
    good = tmp_path / "mixed.txt"
    good.write_text("example.org/a\n# a comment\n\nhttp://exa mple.org/\nexample.net\n")
    db = tmp_path / "s.db"
    r = C.run(["urlfilter.cli", "--db", db, "import", good])
    assert r.returncode == 0, r.stderr
    assert "2 added" in r.stdout and "comment 1" in r.stdout and "blank 1" in r.stdout
    bad = tmp_path / "useless.txt"
    bad.write_text("# only\n# comments\n\n")
    r = C.run(["urlfilter.cli", "--db", db, "import", bad])
    assert r.returncode == 1 and len(C.error_lines(r.stderr)) == 1, r.stderr


def test_stdin_trace_and_stdout_lines(inputs):
    import subprocess

    p = subprocess.run([C.PY, "-m", "httpanalyzer.cli", "-", "-o", "-", "--consumers", "0"],
                       input=inputs["good"].read_bytes(), capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 40 and all(x.count(b"|") == 12 for x in lines)


def test_closed_pipe_ends_quietly(inputs):
    import subprocess

    # 400 records to stdout, the reader takes one line and closes the pipe
    big = C.good_pcap(4000)
    p = subprocess.Popen([C.PY, "-m", "httpanalyzer.cli", "-", "--consumers", "0"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdin.write(big)
    p.stdin.close()
    p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=300) == 0 and err == "", err


def test_debug_shows_the_traceback(inputs, tmp_path):
    r = C.run(["httpanalyzer.cli", inputs["good"], "-o", tmp_path / "nodir" / "x.csv"],
              env={"WEBTAP_DEBUG": "1"})
    assert r.returncode == 2 and "Traceback" in r.stderr
    r = C.run(["httpanalyzer.cli", inputs["good"], "-o", tmp_path / "nodir" / "x.csv", "--debug"])
    assert r.returncode == 2 and "Traceback" in r.stderr


def test_failed_run_keeps_a_real_earlier_output(inputs, tmp_path):
    """The issue's first report: a good run, then a failing one with the same -o."""
    out = tmp_path / "keep.parquet"
    r = C.run(["httpanalyzer.cli", inputs["good"], "-o", out, "--consumers", "0"])
    assert r.returncode == 0, r.stderr
    before = out.read_bytes()
    for extra in (["-f", "tcp prot 80"], ["--gc-timeout", "-5"]):
        r = C.run(["httpanalyzer.cli", inputs["good"], "-o", out, *extra])
        assert r.returncode == 2 and out.read_bytes() == before
    r = C.run(["httpanalyzer.cli", inputs["missing"], "-o", out])
    assert r.returncode == 1 and out.read_bytes() == before
    assert C.temporaries(tmp_path) == []


def test_dask_nonsense_is_a_usage_error(inputs, tmp_path):
    out = _out(tmp_path, "x.csv")
    r = C.run(["httpanalyzer.cli", inputs["good"], "--dask", "nonsense", "-o", out])
    _check_failure(r, 2, out)
    r = C.run(["httpanalyzer.cli", inputs["good"], "--chunk-mb", "4", "-o", out])
    _check_failure(r, 2, out)
    assert "--dask" in r.stderr


def test_live_interface_that_does_not_exist(tmp_path):
    out = _out(tmp_path)
    db = C.make_db(tmp_path / "bl.db")
    for argv in (["httpanalyzer.cli", "-i", "nosuch0", "-o", out],
                 ["webtap.cli", "dissect", "-i", "nosuch0", "-o", out],
                 ["urlfilter.cli", "--db", db, "run", "-i", "nosuch0", "-o", out]):
        r = C.run(argv)
        _check_failure(r, 1, out)
        assert "nosuch0" in r.stderr
        assert "No such device exists: No such device exists" not in r.stderr


# -- httpanalyzer compare (tshark is a peer: the comparison needs it) ---------------------------

@pytest.mark.parametrize("bad,rc", [("missing", 1), ("directory", 1), ("empty", 1), ("text", 1)])
def test_compare_unreadable_trace(bad, rc, inputs):
    r = C.run(["httpanalyzer.cli", "compare", inputs[bad]])
    assert r.returncode == rc, r.stderr
    assert "Traceback" not in r.stderr and len(C.error_lines(r.stderr)) == 1, r.stderr
    assert inputs[bad].name in r.stderr


@pytest.mark.parametrize("opt", [["--jobs", "0"], ["--gc-timeout", "-5"], ["--chunk-packets", "x"]])
def test_compare_bad_number(opt, inputs):
    r = C.run(["httpanalyzer.cli", "compare", inputs["good"], *opt])
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr


def test_compare_when_tshark_fails(inputs, tmp_path):
    fake = tmp_path / "tshark"
    fake.write_text("#!/bin/sh\necho 'tshark: broken on purpose' >&2\nexit 2\n")
    fake.chmod(0o755)
    r = C.run(["httpanalyzer.cli", "compare", inputs["good"], "--tshark", fake])
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr and len(C.error_lines(r.stderr)) == 1, r.stderr
    assert "tshark" in r.stderr


def test_compare_nothing_to_compare(tmp_path):
    from tests import pcapbuild as pb

    empty = tmp_path / "nohttp.pcap"
    empty.write_bytes(pb.pcap([]))
    r = C.run(["httpanalyzer.cli", "compare", empty])
    assert r.returncode == 1 and "nothing to compare" in r.stderr, r.stderr
    assert "KS nan" not in r.stdout


@pytest.mark.parametrize("tool", ["httpanalyzer", "webtap-dissect"])
@pytest.mark.parametrize("ext", ["csv", "parquet"])
def test_no_record_still_writes_the_columns(tool, ext, inputs, tmp_path):
    """A trace without any HTTP (here: a file header and no packet) gives an output with the
    columns and no row -- a CSV header, a Parquet schema -- the same columns as a trace with
    records, not an empty file that readers refuse."""
    import struct

    import pandas as pd

    header_only = tmp_path / "header-only.pcap"
    header_only.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
    frames = []
    for name, trace in (("none", header_only), ("some", inputs["good"])):
        out = tmp_path / f"{name}.{ext}"
        r = C.run(TOOLS[tool](str(trace), str(out), None) + ["-q"])
        assert r.returncode == 0, r.stderr
        frames.append(pd.read_csv(out) if ext == "csv" else pd.read_parquet(out))
    none, some = frames
    assert len(none) == 0 and len(some) > 0
    assert list(none.columns) == list(some.columns)
