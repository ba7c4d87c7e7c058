"""What the start-up of a line-output run imports (issue 29: start-up <= 90 ms). The modules a
header-only `httpanalyzer` run loads (a fresh interpreter, sys.modules at its end) must not
import, at their top, the standard modules that no line-output run uses: tempfile (and random:
the --dask run's temporary folder, httpanalyzer.run_dask), shutil (and bz2, lzma: folder outputs
remove their tree with webtap.clikit._remove_tree; argparse's own `import shutil`, for the terminal
width, is avoided by clikit.HelpFormatter), json (the Parquet sink's pandas metadata,
webtap.parquetsink), traceback (--debug's traceback is the interpreter's own printer,
sys.__excepthook__, in webtap.clikit), dataclasses (its decorator compiles each class's methods
with exec() at import: the start-up path's classes are plain, webtap.stream.Totals,
webtap.dissect.MessageBatch, httpanalyzer.stream.Summary). Read from the modules' own import statements (tests.contracts), so the
development install's import hook, which loads some of them itself, does not hide one."""
from __future__ import annotations

import argparse
import os

import pytest

from httpanalyzer.cli import build_parser
from tests.cli.test_text_imports import header_only_run
from tests.contracts.test_imports_at_top import PACKAGES, _graph
from webtap import clikit

NOT_AT_START_UP = ("tempfile", "random", "shutil", "bz2", "lzma", "json", "traceback", "dataclasses")

PROBE = """
import json, sys
from webtap.startup import entry
sys.argv = ["httpanalyzer", sys.argv[1]]
rc = entry("httpanalyzer.cli")
print(json.dumps({"rc": rc, "mods": sorted(m for m in sys.modules if m.split(".")[0] in %r)}),
      file=sys.stderr)
""" % (PACKAGES,)


def _start_up_modules(tmp_path) -> list[str]:
    return header_only_run(tmp_path, PROBE)["mods"]


def _offenders(mods, top) -> list[str]:
    return sorted(f"{m} imports {n}" for m in mods for n in top.get(m, ())
                  if n.split(".")[0] in NOT_AT_START_UP)


def test_header_only_run_imports_none_of_the_unused_standard_modules(tmp_path):
    mods = _start_up_modules(tmp_path)
    assert {"httpanalyzer.cli", "httpanalyzer.run", "webtap.clikit", "httpanalyzer.writers"} <= set(mods)
    assert "httpanalyzer.run_dask" not in mods and "webtap.parquetsink" not in mods
    # the line writer (pyarrow at its top) is built for the first record: none here
    assert "webtap.writers" not in mods
    _, top, _ = _graph()
    assert _offenders(mods, top) == []


def test_the_check_can_fail():
    """A start-up module given one of those imports is reported."""
    _, top, _ = _graph()
    top = dict(top, **{"webtap.writers": top["webtap.writers"] | {"json"}})
    assert _offenders(["webtap.writers", "webtap.clikit"], top) == ["webtap.writers imports json"]
    assert "json" in top["webtap.parquetsink"] and "tempfile" in top["httpanalyzer.run_dask"]


def test_remove_tree_removes_a_folder_output_and_follows_no_link(tmp_path):
    """webtap.clikit._remove_tree, shutil.rmtree(ignore_errors=True)'s stand-in: nested folders
    and files go; a symlink inside (to a folder, to a file) goes as a link, its target stays."""
    outside = tmp_path / "outside"
    (outside / "keep").mkdir(parents=True)
    (outside / "keep" / "f").write_bytes(b"x")
    tree = tmp_path / "ds.parquet"
    (tree / "chunk=0" / "deep").mkdir(parents=True)
    (tree / "chunk=0" / "part-0.parquet").write_bytes(b"p")
    (tree / "chunk=0" / "deep" / "g").write_bytes(b"g")
    os.symlink(outside, tree / "link-dir")
    os.symlink(outside / "keep" / "f", tree / "chunk=0" / "link-file")
    clikit._remove_tree(str(tree))
    assert not os.path.lexists(tree)
    assert sorted(os.listdir(outside / "keep")) == ["f"] and (outside / "keep" / "f").read_bytes() == b"x"
    clikit._remove_tree(str(tmp_path / "missing"))          # nothing there: nothing raised


@pytest.mark.parametrize("columns", ["40", "80", "123", "", "junk"])
def test_help_formatter_wraps_as_argparse_does(monkeypatch, columns):
    """clikit.HelpFormatter finds the width without shutil; the help text is the one argparse's
    RawDescriptionHelpFormatter (which asks shutil) gives, for any $COLUMNS (none, or not a
    number: the terminal's, else 80)."""
    monkeypatch.setenv("COLUMNS", columns)
    ap = build_parser()
    assert ap.formatter_class is clikit.HelpFormatter
    ours = ap.format_help()
    ap.formatter_class = argparse.RawDescriptionHelpFormatter
    assert ours == ap.format_help()
    if columns == "40":                    # the width is used: a wider terminal wraps otherwise
        monkeypatch.setenv("COLUMNS", "123")
        assert build_parser().format_help() != ours
